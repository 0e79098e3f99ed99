//! The `netrig._native` module: conversions and error mapping only. All behaviour lives in
//! `netrig-engine`; this crate wraps its configuration types in frozen spec classes whose
//! constructors call the engine's validators ([`specs`]), runs trials with the GIL released, and
//! returns typed, read-only results ([`results`]). Every engine error maps to exactly one class
//! of `netrig.errors` ([`errors`]); wrong argument types are `ConfigError`s too ([`args`]).
use std::sync::{Arc, Mutex};

use netrig_engine::open::open_port;
use netrig_engine::port::{Backend, Port as EnginePort, PortSpec, IO_MODES};
use netrig_engine::run::trial::{run_trial, TrialControl};
use netrig_engine::sys::{cpu, ifinfo, netns};
use netrig_engine::EngineError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

mod args;
mod errors;
mod generator;
mod job;
mod otg_pattern;
mod results;
mod specs;
mod stalls;

use errors::Result;
use job::Job;
use results::{InterfaceInfo, IntervalResult, IoProbe, Snapshot, TrialResult};
use specs::TrialSpec;

/// A trial running in an engine thread; opening the ports raises before any traffic. `keep`:
/// after a successful run its ports stay open for the next trial (`reuse`), until that one takes
/// them, `release()` closes them, or the object ends. `reuse`: a trial whose kept ports this one
/// takes where they are what it would open ([`ports_fit`]); otherwise they are closed first.
#[pyclass(frozen, module = "netrig._native")]
struct Trial {
    job: Job<netrig_engine::TrialResult>,
    kept: Arc<Mutex<Option<KeptPorts>>>,
}

/// A finished trial's open ports and the specs they were opened from.
struct KeptPorts {
    specs: Vec<PortSpec>,
    ports: Vec<Box<dyn EnginePort>>,
}

impl KeptPorts {
    /// The ports, when they are what `specs` would open; else `None`, and they are closed.
    fn take_for(self, specs: &[PortSpec]) -> Option<Vec<Box<dyn EnginePort>>> {
        let caps: Vec<_> = self.ports.iter().map(|p| p.caps().clone()).collect();
        ports_fit(&self.specs, &caps, specs).then_some(self.ports)
    }
}

/// Every kept trial's ports in this process. A trial that opens ports of its own first closes
/// those kept on its interfaces ([`close_kept_on`]): an interface takes one XDP program and an
/// AF_XDP queue one socket, and a trial opened beside kept ports received nothing.
static KEPT: Mutex<Vec<std::sync::Weak<Mutex<Option<KeptPorts>>>>> = Mutex::new(Vec::new());

/// Open a port of each of `specs`, after closing the ports kept on their interfaces.
pub(crate) fn open_ports(specs: &[PortSpec]) -> std::result::Result<Vec<Box<dyn EnginePort>>, EngineError> {
    close_kept_on(specs);
    Ok(specs.iter().map(open_port).collect::<std::result::Result<_, _>>()?)
}

/// Close the ports kept (in this process) on any interface of `specs`.
fn close_kept_on(specs: &[PortSpec]) {
    let mut all = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|w| w.strong_count() > 0);
    let mine =
        |k: &KeptPorts| k.specs.iter().any(|a| specs.iter().any(|b| (&a.ifname, &a.netns) == (&b.ifname, &b.netns)));
    for slot in all.iter().filter_map(std::sync::Weak::upgrade) {
        let mut kept = slot.lock().unwrap_or_else(|e| e.into_inner());
        if kept.as_ref().is_some_and(mine) {
            drop(kept.take());
        }
    }
}

/// Ports opened from `old` (with `caps`) serve `new` too: the same interfaces and options, each
/// passing the transmit guard again, and able to carry the new frames (a larger largest frame
/// keeps them only where no backend was passed over for the old one's).
pub(crate) fn ports_fit(old: &[PortSpec], caps: &[netrig_engine::port::PortCaps], new: &[PortSpec]) -> bool {
    let plain = |s: &PortSpec| PortSpec { max_frame_len: 0, ..s.clone() };
    let fits = |((a, b), c): ((&PortSpec, &PortSpec), &netrig_engine::port::PortCaps)| {
        plain(a) == plain(b)
            && (a.max_frame_len == b.max_frame_len
                || (b.max_frame_len <= c.max_frame_len && !c.notes.contains("passed over")))
    };
    old.len() == new.len()
        && caps.len() == new.len()
        && old.iter().zip(new).zip(caps).all(fits)
        && new.iter().all(|s| netrig_engine::guard::check(s).is_ok())
}

#[pymethods]
impl Trial {
    #[new]
    #[pyo3(signature = (spec, watch=None, reuse=None, keep=false))]
    fn new(
        py: Python<'_>,
        spec: &Bound<'_, PyAny>,
        watch: Option<&Bound<'_, PyAny>>,
        reuse: Option<&Bound<'_, Trial>>,
        keep: bool,
    ) -> Result<Self> {
        let spec: TrialSpec = args::instance(spec, "spec")?;
        let watch = match watch.filter(|w| !w.is_none()) {
            None => None,
            Some(w) => Some(w.downcast::<stalls::StallWatch>().map_err(|_| {
                errors::config("watch", format!("must be a netrig._native.StallWatch or None (got {})", args::got(w)))
            })?),
        };
        let cfg = spec.config;
        // Auto selection probes the receive path only on ports that will receive, and passes over
        // a backend that cannot carry the trial's largest frame on the port. The transmit guard
        // checks every port that sends: streams, and learning frames out of receiving ports.
        let ports: Vec<PortSpec> = spec
            .ports
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let on_port = |s: &&netrig_engine::StreamConfig| s.tx_port == i || (cfg.receive && s.rx_port == i);
                let receive = cfg.receive && cfg.streams.iter().any(|s| s.rx_port == i);
                let transmit = cfg.streams.iter().any(|s| s.tx_port == i) || (receive && cfg.learning);
                let max_frame_len =
                    cfg.streams.iter().filter(on_port).map(|s| s.largest_frame_len()).max().unwrap_or(0);
                let rx_beyond_udp = receive && cfg.streams.iter().any(|s| s.rx_port == i && s.rx_beyond_udp());
                PortSpec { receive, transmit, max_frame_len, rx_beyond_udp, ..p }
            })
            .collect();
        // Open the ports and check the streams against them with the GIL released, as setup, not
        // bookkeeping (cpu::OrdinaryWhile, as in run_trial): under SCHED_IDLE beside other busy
        // work on every CPU (two busy loops) this took 18-159 s of a 2-s trial.
        // Kept ports that do not fit are closed before any is opened: an AF_XDP queue binds once.
        let old = reuse.and_then(|r| r.get().kept.lock().unwrap_or_else(|e| e.into_inner()).take());
        let mut opened = py.allow_threads(|| -> std::result::Result<Vec<Box<dyn EnginePort>>, EngineError> {
            let _setup = cpu::OrdinaryWhile::enter();
            let v = match old.and_then(|k| k.take_for(&ports)) {
                Some(v) => v,
                None => open_ports(&ports)?,
            };
            netrig_engine::run::trial::prepare(&v, &cfg)?;
            Ok(v)
        })?;
        let ctl = TrialControl::new();
        if let Some(w) = watch {
            ctl.tell(w.get().workers());
        }
        let (ctl2, kept) = (ctl.clone(), Arc::new(Mutex::new(None)));
        if keep {
            let mut all = KEPT.lock().unwrap_or_else(|e| e.into_inner());
            all.retain(|w| w.strong_count() > 0); // the trials that ended since
            all.push(Arc::downgrade(&kept));
        }
        let kept2 = kept.clone();
        let job = Job::spawn("trial", ctl, move || {
            let r = run_trial(&mut opened, &cfg, &ctl2);
            if keep && r.is_ok() {
                *kept2.lock().unwrap_or_else(|e| e.into_inner()) = Some(KeptPorts { specs: ports, ports: opened });
            }
            r
        })?;
        Ok(Trial { job, kept })
    }

    /// Close the ports kept for a next trial now (GIL released); nothing when none are kept.
    fn release(&self, py: Python<'_>) {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner()).take();
        py.allow_threads(move || drop(kept));
    }

    /// Wait up to `timeout_s` for the end (GIL released); true when it has ended.
    fn wait(&self, py: Python<'_>, timeout_s: &Bound<'_, PyAny>) -> Result<bool> {
        Ok(self.job.wait_for(py, timeout(timeout_s)?))
    }

    /// Stop traffic now; the result keeps what was counted.
    fn stop(&self) {
        self.job.ctl.stop();
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot::from(&self.job.ctl.snapshot())
    }

    /// Wait up to `timeout_s` (GIL released) for the measured run's start to be known: its time
    /// on `time.monotonic_ns()`'s clock, or None. For a thread of the caller's that keeps time with
    /// the run (events) without the progress callbacks, which a busy tester CPU can hold up.
    fn run_start_ns(&self, py: Python<'_>, timeout_s: &Bound<'_, PyAny>) -> Result<Option<u64>> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(timeout(timeout_s)?);
        Ok(py.allow_threads(|| loop {
            match self.job.ctl.run_start() {
                Some(s) => return Some(s),
                None if std::time::Instant::now() >= deadline => return None,
                None => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }))
    }

    /// The counting intervals from index `first` on whose counts are final while the trial runs
    /// (ended more than the late threshold ago; the run's last interval is in the result only).
    fn settled_intervals(&self, first: &Bound<'_, PyAny>) -> Result<Vec<IntervalResult>> {
        let first: usize = args::req(first, "first")?;
        Ok(self.job.ctl.settled_intervals(first).iter().map(IntervalResult::from).collect())
    }

    /// The result (waits for the end); raises the engine's error if the trial failed.
    fn result(&self, py: Python<'_>) -> PyResult<TrialResult> {
        self.job.result(py, |r| TrialResult::from(r))
    }
}

/// Receive only: count whatever arrives on `ports` for `duration_s` (signed frames per sender's
/// trial and flow, the rest by EtherType and IP protocol); opening the ports raises first.
#[pyclass(frozen, module = "netrig._native")]
struct Listen {
    job: Job<netrig_engine::run::listen::ListenResult>,
}

#[pymethods]
impl Listen {
    #[new]
    #[pyo3(signature = (ports, duration_s, *, rx_cpus=None), text_signature = "(ports, duration_s, *, rx_cpus=())")]
    fn new(
        py: Python<'_>,
        ports: &Bound<'_, PyAny>,
        duration_s: &Bound<'_, PyAny>,
        rx_cpus: Option<&Bound<'_, PyAny>>,
    ) -> Result<Self> {
        let ports: Vec<PortSpec> = specs::items(ports, "ports")?
            .iter()
            .enumerate()
            .map(|(i, p)| {
                // Every frame is wanted, not only netrig's UDP: auto picks a backend that sees all.
                args::instance::<specs::Port>(p, &format!("ports[{i}]")).map(|p| PortSpec {
                    receive: true,
                    transmit: false,
                    rx_beyond_udp: true,
                    ..p.0
                })
            })
            .collect::<Result<_>>()?;
        let duration_ns = netrig_engine::traffic::stream::seconds_to_ns(
            "duration_s",
            args::req(duration_s, "duration_s")?,
            false,
            netrig_engine::traffic::stream::MAX_DURATION_S,
        )?;
        let cfg =
            netrig_engine::run::listen::ListenConfig { duration_ns, cpus: args::opt(rx_cpus, "rx_cpus", Vec::new())? };
        cfg.validate(ports.len())?;
        let mut opened = py.allow_threads(|| -> std::result::Result<Vec<Box<dyn EnginePort>>, EngineError> {
            let _setup = cpu::OrdinaryWhile::enter(); // setup, as a trial's
            open_ports(&ports)
        })?;
        let ctl = TrialControl::new();
        let ctl2 = ctl.clone();
        let run = move || netrig_engine::run::listen::run_listen(&mut opened, &cfg, &ctl2);
        Ok(Listen { job: Job::spawn("listen", ctl, run)? })
    }

    /// Wait up to `timeout_s` for the end (GIL released); true when it has ended.
    fn wait(&self, py: Python<'_>, timeout_s: &Bound<'_, PyAny>) -> Result<bool> {
        Ok(self.job.wait_for(py, timeout(timeout_s)?))
    }

    /// Stop listening now; the result keeps what was counted.
    fn stop(&self) {
        self.job.ctl.stop();
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot::from(&self.job.ctl.snapshot())
    }

    /// The result (waits for the end); raises the engine's error if the listen failed.
    fn result(&self, py: Python<'_>) -> PyResult<results::ListenResult> {
        self.job.result(py, |r| results::ListenResult::from(r))
    }
}

/// A wait's timeout in seconds (not finite: 0).
fn timeout(timeout_s: &Bound<'_, PyAny>) -> Result<f64> {
    let t: f64 = args::req(timeout_s, "timeout_s")?;
    Ok(if t.is_finite() { t.max(0.0) } else { 0.0 })
}

/// A forwarder (`netrig forward`) running in engine threads: the host as the DUT.
#[pyclass(frozen, module = "netrig._native")]
struct Forwarder {
    inner: Mutex<Option<netrig_engine::run::forward::Forwarder>>,
    ports: Vec<results::ForwardPortInfo>,
    mode: String,
    faults: Option<Arc<Mutex<netrig_engine::fault::FaultLog>>>,
}

/// A fault injector's settings from a dict: `seed`, `drop`, `duplicate`, `reorder`, `distance`
/// (the frames a held one waits for), `delay` (a list of (probability, seconds) classes); errors
/// name `faults.KEY`.
fn fault_config(d: &Bound<'_, PyAny>) -> Result<netrig_engine::fault::FaultConfig> {
    let d = d
        .downcast::<pyo3::types::PyDict>()
        .map_err(|_| errors::config("faults", "must be a dict of seed, drop, duplicate, reorder, distance, delay"))?;
    let mut f = netrig_engine::fault::FaultConfig::default();
    for (k, v) in d.iter() {
        let k: String = args::req(&k, "faults")?;
        let field = format!("faults.{k}");
        match k.as_str() {
            "seed" => f.seed = args::req(&v, &field)?,
            "drop" => f.drop = args::req(&v, &field)?,
            "duplicate" => f.duplicate = args::req(&v, &field)?,
            "reorder" => f.reorder = args::req(&v, &field)?,
            "distance" => f.reorder_distance = args::req(&v, &field)?,
            "delay" => {
                let classes: Vec<(f64, f64)> = args::req(&v, &field)?;
                f.delays = classes
                    .into_iter()
                    .map(|(p, s)| netrig_engine::fault::Delay { p, ns: (s * 1e9).round().max(0.0) as u64 })
                    .collect();
            }
            _ => {
                return Err(errors::config(
                    &field,
                    "is not a fault setting: use seed, drop, duplicate, reorder, distance, delay",
                ))
            }
        }
    }
    Ok(f)
}

/// A MAC address `aa:bb:cc:dd:ee:ff` (or with `-`); errors name `field`.
fn parse_mac(s: &str, field: &str) -> Result<[u8; 6]> {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    let mut m = [0u8; 6];
    let ok = parts.len() == 6
        && parts
            .iter()
            .zip(m.iter_mut())
            .all(|(p, b)| p.len() == 2 && u8::from_str_radix(p, 16).map(|v| *b = v).is_ok());
    if !ok {
        return Err(errors::config(
            field,
            format!("{s:?} is not a MAC address: use six hex pairs, e.g. 02:00:00:00:00:01"),
        ));
    }
    Ok(m)
}

#[pymethods]
impl Forwarder {
    #[new]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    #[pyo3(signature = (ports, mode, peer_macs=None, cpus=None, batch=None, xdp_redirect=None, faults=None))]
    fn new(
        py: Python<'_>,
        ports: &Bound<'_, PyAny>,
        mode: &Bound<'_, PyAny>,
        peer_macs: Option<&Bound<'_, PyAny>>,
        cpus: Option<&Bound<'_, PyAny>>,
        batch: Option<&Bound<'_, PyAny>>,
        xdp_redirect: Option<&Bound<'_, PyAny>>,
        faults: Option<&Bound<'_, PyAny>>,
    ) -> Result<Self> {
        use netrig_engine::run::forward::{ForwardConfig, ForwardMode, DEFAULT_BATCH};
        let items: Vec<Bound<'_, PyAny>> = if ports.is_instance_of::<pyo3::types::PyString>() {
            Vec::new()
        } else {
            ports.try_iter().map(|it| it.filter_map(|x| x.ok()).collect()).unwrap_or_default()
        };
        if items.is_empty() {
            return Err(errors::config("ports", "must be a non-empty list of netrig._native.Port".to_string()));
        }
        let specs = items
            .iter()
            .enumerate()
            .map(|(i, p)| args::instance::<specs::Port>(p, &format!("ports[{i}]")).map(|p| p.0))
            .collect::<Result<Vec<_>>>()?;
        let mode = ForwardMode::from_name(&args::req::<String>(mode, "mode")?)?;
        let peer: Vec<Option<String>> = args::opt(peer_macs, "peer_mac", Vec::new())?;
        let peer_macs = peer
            .iter()
            .enumerate()
            .map(|(i, m)| m.as_deref().map(|m| parse_mac(m, &format!("peer_mac[{i}]"))).transpose())
            .collect::<Result<Vec<_>>>()?;
        let cfg = ForwardConfig {
            ports: specs,
            mode,
            peer_macs,
            cpus: args::opt(cpus, "cpus", Vec::new())?,
            batch: args::opt(batch, "batch", DEFAULT_BATCH)?,
            xdp_redirect: args::opt(xdp_redirect, "xdp_redirect", false)?,
            faults: faults.filter(|f| !f.is_none()).map(fault_config).transpose()?,
        };
        cfg.validate()?;
        let fwd = py.allow_threads(|| netrig_engine::run::forward::Forwarder::start(&cfg))?;
        let ports = fwd.ports().iter().map(results::ForwardPortInfo::from).collect();
        let faults = fwd.fault_log();
        Ok(Forwarder { inner: Mutex::new(Some(fwd)), ports, mode: mode.as_str().to_string(), faults })
    }

    /// The ports as opened (backend, MAC, notes).
    #[getter]
    fn ports(&self) -> Vec<results::ForwardPortInfo> {
        self.ports.clone()
    }

    #[getter]
    fn mode(&self) -> String {
        self.mode.clone()
    }

    /// The workers still forward (not stopped, no worker failed).
    #[getter]
    fn running(&self) -> bool {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).as_ref().is_some_and(|f| !f.failed())
    }

    /// Counters now, per port and queue (after `stop`: the final ones are what `stop` returned).
    fn stats(&self) -> Vec<results::ForwardQueueStats> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.as_ref().map(|f| f.stats().iter().map(results::ForwardQueueStats::from).collect()).unwrap_or_default()
    }

    /// What the fault injector did so far, also after `stop`: frames `passed`, `dropped`,
    /// `duplicated`, `held` back, sent `reordered` (after a higher sequence of their flow), and
    /// `delayed0`, `delayed1`, … per delay class; None without `faults`.
    fn fault_counts(&self) -> Option<std::collections::BTreeMap<String, u64>> {
        let c = self.faults.as_ref()?.lock().unwrap_or_else(|e| e.into_inner()).counts();
        let pairs = [
            ("passed", c.passed),
            ("dropped", c.dropped),
            ("duplicated", c.duplicated),
            ("held", c.held),
            ("reordered", c.reordered),
        ];
        let delayed = c.delayed.iter().enumerate().map(|(i, &n)| (format!("delayed{i}"), n));
        Some(pairs.into_iter().map(|(k, n)| (k.to_string(), n)).chain(delayed).collect())
    }

    /// Workers that do not run on their CPU: the kernel refused the pin (their queues' `cpu` is
    /// `None`). Empty when every worker was pinned, and after `stop`.
    fn pin_failures(&self) -> Vec<results::PinFailure> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.as_ref().map(|f| f.pin_failures().iter().map(results::PinFailure::from).collect()).unwrap_or_default()
    }

    /// Stop the workers, close the ports (XDP programs detached) and return the final counters;
    /// raises the error a worker ended with. A second call returns an empty list.
    fn stop(&self, py: Python<'_>) -> Result<Vec<results::ForwardQueueStats>> {
        let f = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(f) = f else { return Ok(Vec::new()) };
        let stats = py.allow_threads(|| f.stop())?;
        Ok(stats.iter().map(results::ForwardQueueStats::from).collect())
    }
}

/// A capture application (`netrig capture`): one capture method counting what it sees on an
/// interface, in engine threads pinned to one CPU.
#[pyclass(frozen, module = "netrig._native")]
struct Capture {
    inner: Mutex<Option<netrig_engine::run::capture::Capture>>,
    method: String,
    notes: String,
    drops_source: String,
}

#[pymethods]
impl Capture {
    #[new]
    #[pyo3(signature = (method, ifname, netns=None, cpu=None, batch=None))]
    fn new(
        py: Python<'_>,
        method: &Bound<'_, PyAny>,
        ifname: &Bound<'_, PyAny>,
        netns: Option<&Bound<'_, PyAny>>,
        cpu: Option<&Bound<'_, PyAny>>,
        batch: Option<&Bound<'_, PyAny>>,
    ) -> Result<Self> {
        use netrig_engine::run::capture::{CaptureConfig, CaptureMethod, DEFAULT_CAPTURE_BATCH};
        let method = CaptureMethod::from_name(&args::req::<String>(method, "method")?)?;
        let cfg = CaptureConfig {
            method,
            ifname: args::req::<String>(ifname, "ifname")?,
            netns: args::opt(netns, "netns", None)?,
            cpu: args::opt(cpu, "cpu", None)?,
            batch: args::opt(batch, "batch", DEFAULT_CAPTURE_BATCH)?,
        };
        cfg.validate()?;
        let cap = py.allow_threads(|| netrig_engine::run::capture::Capture::start(&cfg))?;
        Ok(Capture {
            notes: cap.notes().to_string(),
            inner: Mutex::new(Some(cap)),
            method: method.as_str().to_string(),
            drops_source: method.drops_source().to_string(),
        })
    }

    #[getter]
    fn method(&self) -> String {
        self.method.clone()
    }

    /// What was opened (library version, XDP mode, socket options).
    #[getter]
    fn notes(&self) -> String {
        self.notes.clone()
    }

    /// Where `CaptureStats.drops` comes from.
    #[getter]
    fn drops_source(&self) -> String {
        self.drops_source.clone()
    }

    /// Capturing (not stopped, no worker failed).
    #[getter]
    fn running(&self) -> bool {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).as_ref().is_some_and(|c| c.running())
    }

    /// The error a worker stopped with, if any.
    #[getter]
    fn error(&self) -> Option<String> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|c| c.error())
    }

    /// The counters now: settled (`settled` true) once the capture found its source empty,
    /// waiting at most `wait_s` for that.
    #[pyo3(signature = (wait_s=1.0))]
    fn stats(&self, py: Python<'_>, wait_s: f64) -> Result<results::CaptureStats> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(c) = g.as_ref() else {
            return Err(errors::config("capture", "the capture was stopped".to_string()));
        };
        let wait = std::time::Duration::from_secs_f64(if wait_s.is_finite() { wait_s.clamp(0.0, 60.0) } else { 1.0 });
        Ok(results::CaptureStats::from(&py.allow_threads(|| c.stats(wait))))
    }

    /// Stop capturing, close the source (XDP program detached) and return the final counters;
    /// raises the error a worker ended with. A second call returns ``None``.
    fn stop(&self, py: Python<'_>) -> Result<Option<results::CaptureStats>> {
        let c = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(c) = c else { return Ok(None) };
        let s = py.allow_threads(|| c.stop())?;
        Ok(Some(results::CaptureStats::from(&s)))
    }
}

/// The engine's errors are not `Clone` (they may hold an `io::Error`): a failed trial's error
/// is raised again from its text, as the same variant.
pub(crate) fn clone_error(e: &EngineError) -> EngineError {
    use netrig_engine::PortError as P;
    match e {
        EngineError::Config(c) => netrig_engine::ConfigError::new(c.field.clone(), c.message.clone()).into(),
        EngineError::Port(p) => EngineError::Port(match p {
            P::NoSuchInterface { ifname, netns } => P::NoSuchInterface { ifname: ifname.clone(), netns: netns.clone() },
            P::PermissionDenied { ifname, what } => P::PermissionDenied { ifname: ifname.clone(), what: what.clone() },
            P::Unsupported { ifname, backend, reason } => {
                P::Unsupported { ifname: ifname.clone(), backend: backend.clone(), reason: reason.clone() }
            }
            P::Io { ifname, queue, op, source } => P::Io {
                ifname: ifname.clone(),
                queue: *queue,
                op: op.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            P::Netns { netns, source } => {
                P::Netns { netns: netns.clone(), source: std::io::Error::new(source.kind(), source.to_string()) }
            }
            P::NoSuchQueue { ifname, queue, queues } => {
                P::NoSuchQueue { ifname: ifname.clone(), queue: *queue, queues: *queues }
            }
            P::Busy { ifname, message } => P::Busy { ifname: ifname.clone(), message: message.clone() },
            P::Other { ifname, message } => P::Other { ifname: ifname.clone(), message: message.clone() },
            P::Live { ifname, netns, rule } => {
                P::Live { ifname: ifname.clone(), netns: netns.clone(), rule: rule.clone() }
            }
        }),
        EngineError::Worker { name, message } => EngineError::Worker { name: name.clone(), message: message.clone() },
        EngineError::Interrupted => EngineError::Interrupted,
        EngineError::Capability { what, reason } => {
            EngineError::Capability { what: what.clone(), reason: reason.clone() }
        }
    }
}

/// Interface facts of `ifname`, looked up in `netns` (GIL released).
fn interface_facts(py: Python<'_>, ifname: &str, netns: Option<&str>) -> Result<InterfaceInfo> {
    let info = py.allow_threads(|| netns::in_netns(netns, || ifinfo::ifinfo(ifname, netns)))?;
    Ok(InterfaceInfo::from(&info))
}

#[pyfunction]
#[pyo3(signature = (ifname, netns=None))]
fn interface_info(
    py: Python<'_>,
    ifname: &Bound<'_, PyAny>,
    netns: Option<&Bound<'_, PyAny>>,
) -> Result<InterfaceInfo> {
    let ifname: String = args::req(ifname, "ifname")?;
    let netns: Option<String> = args::opt(netns, "netns", None)?;
    interface_facts(py, &ifname, netns.as_deref())
}

/// Whether interface `ifname` (in `netns`) is a veth whose other end is `peer` (in `peer_netns`):
/// what its kernel drops on transmit, it drops at `peer`'s receive ring.
#[pyfunction]
#[pyo3(signature = (ifname, peer, netns=None, peer_netns=None))]
fn is_veth_peer(
    py: Python<'_>,
    ifname: &Bound<'_, PyAny>,
    peer: &Bound<'_, PyAny>,
    netns: Option<&Bound<'_, PyAny>>,
    peer_netns: Option<&Bound<'_, PyAny>>,
) -> Result<bool> {
    let (ifname, peer): (String, String) = (args::req(ifname, "ifname")?, args::req(peer, "peer")?);
    let netns: Option<String> = args::opt(netns, "netns", None)?;
    let peer_netns: Option<String> = args::opt(peer_netns, "peer_netns", None)?;
    Ok(py.allow_threads(|| {
        let end = |name: &str, ns: Option<&str>| {
            netns::in_netns(ns, || ifinfo::ifindex(name, ns)).ok().map(|i| netrig_engine::sys::link::source(ns, i))
        };
        match (end(&ifname, netns.as_deref()), end(&peer, peer_netns.as_deref())) {
            (Some(a), Some(b)) => a.is_veth_peer_of(b.as_ref()),
            _ => false,
        }
    }))
}

/// The CPUs the engine's senders run on, given their configured CPUs (`pin::sender_cpus`).
#[pyfunction]
#[pyo3(signature = (tx_cpus=Vec::new()))]
fn sender_cpus(tx_cpus: Vec<usize>) -> Vec<usize> {
    netrig_engine::pin::sender_cpus(&tx_cpus)
}

#[pyfunction]
#[pyo3(signature = (netns=None))]
fn list_interfaces(py: Python<'_>, netns: Option<&Bound<'_, PyAny>>) -> Result<Vec<String>> {
    let netns: Option<String> = args::opt(netns, "netns", None)?;
    Ok(py.allow_threads(|| netns::in_netns(netns.as_deref(), || Ok(ifinfo::list_interfaces())))?)
}

#[pyfunction]
#[pyo3(signature = (ifname, netns=None))]
fn probe_io(py: Python<'_>, ifname: &Bound<'_, PyAny>, netns: Option<&Bound<'_, PyAny>>) -> Result<Vec<IoProbe>> {
    let ifname: String = args::req(ifname, "ifname")?;
    let netns: Option<String> = args::opt(netns, "netns", None)?;
    Ok(py.allow_threads(|| {
        [Backend::AfXdp, Backend::AfPacket, Backend::Socket]
            .into_iter()
            .map(|b| {
                // A probe sends nothing: the transmit guard is for trials.
                let spec = PortSpec {
                    netns: netns.clone(),
                    backend: Some(b),
                    transmit: false,
                    ..PortSpec::new(ifname.clone())
                };
                let outcome = open_ports(std::slice::from_ref(&spec))
                    .map(|p| p[0].caps().notes.clone())
                    .map_err(|e| e.to_string());
                IoProbe::from(&(b.as_str(), outcome))
            })
            .collect()
    }))
}

/// Whether the AF_XDP steering program loads on `ifname` (nothing attached): (ok, detail).
#[pyfunction]
fn probe_xdp_program(py: Python<'_>, ifname: &Bound<'_, PyAny>) -> Result<(bool, String)> {
    let ifname: String = args::req(ifname, "ifname")?;
    Ok(py.allow_threads(|| match netrig_engine::sys::af_xdp::probe_program(&ifname) {
        Ok(s) => (true, s),
        Err(e) => (false, e.to_string()),
    }))
}

/// Attach the test bed's wire to DUT interface `ifname` (in `netns`): arriving frames go to a
/// receive ring of `ring` frames on one of `cpus`, where the DUT's stack takes them
/// (`netrig_engine::sys::wire`). Returns the attached program's id.
#[pyfunction]
#[pyo3(signature = (ifname, netns, cpus, ring))]
fn wire_attach(
    py: Python<'_>,
    ifname: &Bound<'_, PyAny>,
    netns: Option<&Bound<'_, PyAny>>,
    cpus: &Bound<'_, PyAny>,
    ring: &Bound<'_, PyAny>,
) -> Result<u32> {
    let ifname: String = args::req(ifname, "ifname")?;
    let netns: Option<String> = args::opt(netns, "netns", None)?;
    let cpus: Vec<u32> = args::req(cpus, "dut_cpus")?;
    let ring: u32 = args::req(ring, "dut_ring")?;
    Ok(py.allow_threads(|| netrig_engine::sys::wire::attach(&ifname, netns.as_deref(), &cpus, ring))?)
}

/// The wire's counters on DUT interface `ifname`, or None when it carries no wire.
#[pyfunction]
#[pyo3(signature = (ifname, netns=None))]
fn wire_counts(
    py: Python<'_>,
    ifname: &Bound<'_, PyAny>,
    netns: Option<&Bound<'_, PyAny>>,
) -> Result<Option<results::WireCounts>> {
    let ifname: String = args::req(ifname, "ifname")?;
    let netns: Option<String> = args::opt(netns, "netns", None)?;
    let c = py.allow_threads(|| netrig_engine::sys::wire::counts(&ifname, netns.as_deref()))?;
    Ok(c.as_ref().map(results::WireCounts::from))
}

/// The id of the ring map (CPUMAP) of the wire on `ifname`, or None when it carries no wire:
/// what `StallWatch.watch_wire` counts in time.
#[pyfunction]
#[pyo3(signature = (ifname, netns=None))]
fn wire_cpumap_id(py: Python<'_>, ifname: &Bound<'_, PyAny>, netns: Option<&Bound<'_, PyAny>>) -> Result<Option<u32>> {
    let ifname: String = args::req(ifname, "ifname")?;
    let netns: Option<String> = args::opt(netns, "netns", None)?;
    Ok(py.allow_threads(|| netrig_engine::sys::wire::cpumap_id(&ifname, netns.as_deref()))?)
}

/// Remove the wire from `ifname` (nothing happens when it carries none).
#[pyfunction]
#[pyo3(signature = (ifname, netns=None))]
fn wire_detach(py: Python<'_>, ifname: &Bound<'_, PyAny>, netns: Option<&Bound<'_, PyAny>>) -> Result<()> {
    let ifname: String = args::req(ifname, "ifname")?;
    let netns: Option<String> = args::opt(netns, "netns", None)?;
    Ok(py.allow_threads(|| netrig_engine::sys::wire::detach(&ifname, netns.as_deref()))?)
}

/// A rate ramp in linear steps: `steps` phases of `step_s` each, from `from_scale` to `to_scale` of
/// the streams' rates (both included). Errors name `ramp`.
#[pyfunction]
fn linear_ramp(
    from_scale: &Bound<'_, PyAny>,
    to_scale: &Bound<'_, PyAny>,
    steps: &Bound<'_, PyAny>,
    step_s: &Bound<'_, PyAny>,
) -> Result<Vec<specs::PhaseSpec>> {
    let step_ns = netrig_engine::traffic::stream::seconds_to_ns(
        "ramp",
        args::req(step_s, "ramp")?,
        false,
        netrig_engine::traffic::stream::MAX_DURATION_S,
    )?;
    let phases = netrig_engine::linear_ramp(
        args::req(from_scale, "ramp")?,
        args::req(to_scale, "ramp")?,
        args::req(steps, "ramp")?,
        step_ns,
    )?;
    Ok(phases.into_iter().map(specs::PhaseSpec).collect())
}

/// Frames/s at line rate: bps / ((mean_frame_size + WIRE_OVERHEAD_BYTES) * 8).
#[pyfunction]
fn line_rate_fps(bps: &Bound<'_, PyAny>, mean_frame_size: &Bound<'_, PyAny>) -> Result<f64> {
    Ok(netrig_engine::traffic::stream::line_rate_fps(
        args::req(bps, "bps")?,
        args::req(mean_frame_size, "mean_frame_size")?,
    ))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("BUILD_PROFILE", if cfg!(debug_assertions) { "debug" } else { "release" })?;
    // The vocabulary the engine defines, exported so Python never restates it.
    m.add("WIRE_OVERHEAD_BYTES", netrig_engine::traffic::stream::WIRE_OVERHEAD)?;
    m.add("FCS_BYTES", netrig_engine::traffic::stream::FCS_LEN)?;
    m.add("TRIAL_WORKERS", (netrig_engine::run::trial::TX_WORKER, netrig_engine::run::trial::RX_WORKER))?;
    m.add("MIN_FRAME_SIZE", netrig_engine::traffic::stream::MIN_FRAME_SIZE)?;
    m.add("MAX_FRAME_SIZE", netrig_engine::traffic::stream::MAX_FRAME_SIZE)?;
    m.add("RFC2544_FRAME_SIZES", PyTuple::new(py, netrig_engine::traffic::stream::RFC2544_FRAME_SIZES)?)?;
    let mixes = PyDict::new(py);
    for (name, pairs) in netrig_engine::traffic::stream::FRAME_SIZE_MIXES {
        mixes.set_item(*name, PyTuple::new(py, pairs.iter().copied())?)?;
    }
    m.add("FRAME_SIZE_MIXES", mixes)?;
    m.add("DEFAULT_DRAIN_S", netrig_engine::run::trial::DEFAULT_DRAIN_NS as f64 / 1e9)?;
    m.add("MAX_DURATION_S", netrig_engine::traffic::stream::MAX_DURATION_S)?;
    m.add("WIRE_SLOT_NS", netrig_engine::stalls::WIRE_SLOT_NS)?;
    m.add("LATENCY_WINDOW_NS", netrig_engine::traffic::timeline::WINDOW_NS)?;
    m.add("MAX_DRAIN_S", netrig_engine::traffic::stream::MAX_DRAIN_S)?;
    m.add("MAX_RATE_PPS", netrig_engine::traffic::stream::MAX_RATE_PPS)?;
    m.add("MAX_RATE_BPS", netrig_engine::traffic::stream::MAX_RATE_BPS)?;
    m.add("MAX_FRAMES", netrig_engine::traffic::stream::MAX_FRAMES)?;
    m.add("MAX_QUEUES", netrig_engine::port::MAX_QUEUES)?;
    m.add("MAX_FLOWS", netrig_engine::traffic::flows::MAX_FLOWS)?;
    m.add("IO_MODES", PyTuple::new(py, IO_MODES)?)?;
    m.add("PACING_MODES", PyTuple::new(py, netrig_engine::traffic::pacing::PACING_MODES)?)?;
    m.add("SMOOTH_RECOVERY", netrig_engine::traffic::pacing::SMOOTH_RECOVERY)?;
    m.add("DEFAULT_MAX_STRETCH_PCT", netrig_engine::run::trial::DEFAULT_MAX_STRETCH_RATIO * 100.0)?;
    m.add_class::<specs::FrameSizeSpec>()?;
    m.add_class::<specs::RateSpec>()?;
    m.add_class::<specs::FlowSpec>()?;
    m.add_class::<specs::StopSpec>()?;
    m.add_class::<specs::PhaseSpec>()?;
    m.add_class::<specs::StreamSpec>()?;
    m.add_class::<specs::Port>()?;
    m.add_class::<TrialSpec>()?;
    m.add_class::<Snapshot>()?;
    m.add_class::<Trial>()?;
    m.add_class::<Listen>()?;
    m.add_class::<results::HeardFlow>()?;
    m.add_class::<results::ForeignKind>()?;
    m.add_class::<results::ListenPort>()?;
    m.add_class::<results::ListenResult>()?;
    m.add_class::<results::LatencySummary>()?;
    m.add_class::<results::SeqGap>()?;
    m.add_class::<results::FlowResult>()?;
    m.add_class::<results::StreamResult>()?;
    m.add_class::<results::ReplayResult>()?;
    m.add_class::<results::PortResult>()?;
    m.add_class::<results::Smoothness>()?;
    m.add_class::<results::IntervalResult>()?;
    m.add_class::<results::LatencyWindow>()?;
    m.add_class::<TrialResult>()?;
    m.add_class::<results::PinFailure>()?;
    m.add_class::<stalls::StallWatch>()?;
    m.add_class::<results::StallEpisode>()?;
    m.add_class::<results::WireSlot>()?;
    m.add_class::<InterfaceInfo>()?;
    m.add_class::<IoProbe>()?;
    m.add_class::<Forwarder>()?;
    m.add_class::<results::ForwardQueueStats>()?;
    m.add_class::<results::ForwardPortInfo>()?;
    m.add("FORWARD_MODES", PyTuple::new(py, netrig_engine::run::forward::FORWARD_MODES)?)?;
    m.add("MAX_FORWARD_PORTS", netrig_engine::run::forward::MAX_FORWARD_PORTS)?;
    m.add("MAX_FORWARD_BATCH", netrig_engine::run::forward::MAX_BATCH)?;
    m.add_class::<Capture>()?;
    m.add_class::<results::CaptureStats>()?;
    m.add_class::<results::CaptureTag>()?;
    m.add("CAPTURE_METHODS", PyTuple::new(py, netrig_engine::run::capture::CAPTURE_METHODS)?)?;
    m.add("MAX_CAPTURE_BATCH", netrig_engine::run::capture::MAX_CAPTURE_BATCH)?;
    m.add("DEFAULT_CAPTURE_BATCH", netrig_engine::run::capture::DEFAULT_CAPTURE_BATCH)?;
    m.add_class::<generator::FieldPattern>()?;
    m.add_class::<otg_pattern::PatternForm>()?;
    m.add_class::<otg_pattern::HeaderForm>()?;
    m.add_class::<generator::HeaderSpec>()?;
    m.add_class::<generator::PayloadSpec>()?;
    m.add_class::<generator::GenDurationSpec>()?;
    m.add_class::<generator::GenFlowSpec>()?;
    m.add_class::<generator::CaptureSpec>()?;
    m.add_class::<generator::Generator>()?;
    m.add_class::<results::GenFlowStats>()?;
    m.add_class::<results::GenPortStats>()?;
    m.add_class::<results::GenTxPacing>()?;
    m.add("STACK_HEADERS", generator::stack_headers(py)?)?;
    m.add("SIGNATURE_BYTES", netrig_wire::signature::LEN)?;
    m.add_function(wrap_pyfunction!(interface_info, m)?)?;
    m.add_function(wrap_pyfunction!(list_interfaces, m)?)?;
    m.add_function(wrap_pyfunction!(sender_cpus, m)?)?;
    m.add_function(wrap_pyfunction!(is_veth_peer, m)?)?;
    m.add_function(wrap_pyfunction!(probe_io, m)?)?;
    m.add_function(wrap_pyfunction!(probe_xdp_program, m)?)?;
    m.add_function(wrap_pyfunction!(line_rate_fps, m)?)?;
    m.add_function(wrap_pyfunction!(linear_ramp, m)?)?;
    m.add_function(wrap_pyfunction!(wire_attach, m)?)?;
    m.add_function(wrap_pyfunction!(wire_cpumap_id, m)?)?;
    m.add_function(wrap_pyfunction!(wire_counts, m)?)?;
    m.add_function(wrap_pyfunction!(wire_detach, m)?)?;
    m.add_class::<results::WireCounts>()?;
    m.add("WIRE_DEFAULT_RING", netrig_engine::sys::wire::DEFAULT_RING)?;
    m.add("WIRE_MIN_RING", netrig_engine::sys::wire::MIN_RING)?;
    m.add("WIRE_MAX_RING", netrig_engine::sys::wire::MAX_RING)?;
    m.add("MAX_RAMP_STEPS", netrig_engine::traffic::schedule::MAX_RAMP_STEPS)?;
    Ok(())
}
