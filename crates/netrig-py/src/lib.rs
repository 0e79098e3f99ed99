//! The `netrig._native` module: conversions and error mapping only. All behaviour lives in
//! `netrig-engine`; this crate turns Python dicts into engine configs, runs trials with the GIL
//! released, and maps every engine error to exactly one class of `netrig.errors`.
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use netrig_engine::analyze::LatencySummary;
use netrig_engine::error::{EngineError, PortError};
use netrig_engine::open::open_port;
use netrig_engine::port::{Backend, Port, PortSpec};
use netrig_engine::sys::{ifinfo, netns};
use netrig_engine::trial::{run_trial, TrialConfig, TrialControl, TrialResult};
use netrig_engine::{ConfigError, FlowOrder, FlowSpec, FrameSize, Rate, Stop, StreamConfig};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

fn err_class(py: Python<'_>, class: &str, args: Vec<String>) -> PyErr {
    match py
        .import("netrig.errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1(pyo3::types::PyTuple::new(py, args)?))
    {
        Ok(e) => PyErr::from_value(e),
        Err(e) => e,
    }
}

fn config_err(py: Python<'_>, e: ConfigError) -> PyErr {
    err_class(py, "ConfigError", vec![e.field, e.message])
}

fn port_err(py: Python<'_>, e: PortError) -> PyErr {
    let class = match &e {
        PortError::NoSuchInterface { .. } => "InterfaceError",
        PortError::PermissionDenied { .. } => "PermissionError_",
        PortError::Unsupported { .. } => "CapabilityError",
        PortError::Netns { .. } => "InterfaceError",
        _ => "PortError",
    };
    err_class(py, class, vec![e.to_string()])
}

fn engine_err(py: Python<'_>, e: EngineError) -> PyErr {
    match e {
        EngineError::Config(c) => config_err(py, c),
        EngineError::Port(p) => port_err(py, p),
        EngineError::Worker { .. } => err_class(py, "EngineError", vec![e.to_string()]),
        EngineError::Interrupted => err_class(py, "InterruptedTrial", vec![e.to_string()]),
    }
}

// ---------------------------------------------------------------- dict access helpers

fn get<'py, T: FromPyObject<'py>>(d: &Bound<'py, PyDict>, key: &str, ctx: &str) -> PyResult<Option<T>> {
    match d.get_item(key)? {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => v.extract::<T>().map(Some).map_err(|_| {
            config_err(
                d.py(),
                ConfigError::new(
                    format!("{ctx}.{key}"),
                    format!("has the wrong type ({})", v.get_type().name().map(|n| n.to_string()).unwrap_or_default()),
                ),
            )
        }),
    }
}

fn req<'py, T: FromPyObject<'py>>(d: &Bound<'py, PyDict>, key: &str, ctx: &str) -> PyResult<T> {
    get(d, key, ctx)?.ok_or_else(|| config_err(d.py(), ConfigError::new(format!("{ctx}.{key}"), "is required")))
}

fn parse_stream(py: Python<'_>, d: &Bound<'_, PyDict>, i: usize) -> PyResult<StreamConfig> {
    let ctx = format!("streams[{i}]");
    let cerr = |field: &str, msg: String| config_err(py, ConfigError::new(format!("{ctx}.{field}"), msg));
    let mut s = StreamConfig::new(get::<String>(d, "name", &ctx)?.unwrap_or_else(|| format!("stream{i}")));
    s.tx_port = get(d, "tx_port", &ctx)?.unwrap_or(0);
    s.rx_port = get(d, "rx_port", &ctx)?.unwrap_or(1);
    let mac = |key: &str| -> PyResult<Option<netrig_wire::ethernet::EthernetAddress>> {
        match get::<String>(d, key, &ctx)? {
            None => Ok(None),
            Some(m) => m
                .parse()
                .map(Some)
                .map_err(|_| cerr(key, format!("{m:?} is not a MAC address (want 02:00:00:00:00:01)"))),
        }
    };
    if let Some(m) = mac("src_mac")? {
        s.src_mac = m;
    }
    if let Some(m) = mac("dst_mac")? {
        s.dst_mac = m;
    }
    let ip = |key: &str| -> PyResult<Option<IpAddr>> {
        match get::<String>(d, key, &ctx)? {
            None => Ok(None),
            Some(a) => a.parse().map(Some).map_err(|_| cerr(key, format!("{a:?} is not an IPv4 or IPv6 address"))),
        }
    };
    if let Some(a) = ip("src_ip")? {
        s.src_ip = a;
    }
    if let Some(a) = ip("dst_ip")? {
        s.dst_ip = a;
    }
    s.vlan = get(d, "vlan", &ctx)?;
    s.src_port = get(d, "src_port", &ctx)?.unwrap_or(s.src_port);
    s.dst_port = get(d, "dst_port", &ctx)?.unwrap_or(s.dst_port);
    s.ttl = get(d, "ttl", &ctx)?.unwrap_or(s.ttl);
    s.udp_checksum = get(d, "udp_checksum", &ctx)?.unwrap_or(false);
    s.line_rate_bps = get(d, "line_rate_bps", &ctx)?;
    let fs: Bound<'_, PyDict> = req(d, "frame_size", &ctx)?;
    s.frame_size = if let Some(n) = get::<usize>(&fs, "fixed", &ctx)? {
        FrameSize::Fixed(n)
    } else if let Some(w) = get::<Vec<(usize, u32)>>(&fs, "weighted", &ctx)? {
        FrameSize::Weighted(w)
    } else if let Some((min, max)) = get::<(usize, usize)>(&fs, "random", &ctx)? {
        FrameSize::Random { min, max }
    } else if let Some((min, max, step)) = get::<(usize, usize, usize)>(&fs, "increment", &ctx)? {
        FrameSize::Increment { min, max, step }
    } else {
        return Err(cerr("frame_size", "give one of fixed, weighted, random, increment".into()));
    };
    if let Some(f) = get::<Bound<'_, PyDict>>(d, "flows", &ctx)? {
        let fctx = format!("{ctx}.flows");
        let order = match get::<String>(&f, "order", &fctx)?.as_deref() {
            None | Some("sequential") => FlowOrder::Sequential,
            Some("pseudorandom") => FlowOrder::Pseudorandom { seed: get(&f, "seed", &fctx)?.unwrap_or(1) },
            Some(o) => return Err(cerr("flows.order", format!("{o:?}: allowed values are sequential, pseudorandom"))),
        };
        s.flows = FlowSpec {
            src_ips: get(&f, "src_ips", &fctx)?.unwrap_or(1),
            dst_ips: get(&f, "dst_ips", &fctx)?.unwrap_or(1),
            src_ports: get(&f, "src_ports", &fctx)?.unwrap_or(1),
            dst_ports: get(&f, "dst_ports", &fctx)?.unwrap_or(1),
            order,
        };
    }
    let r: Bound<'_, PyDict> = req(d, "rate", &ctx)?;
    s.rate = if let Some(v) = get::<f64>(&r, "pps", &ctx)? {
        Rate::Pps(v)
    } else if let Some(v) = get::<f64>(&r, "l1_bps", &ctx)? {
        Rate::L1Bps(v)
    } else if let Some(v) = get::<f64>(&r, "l2_bps", &ctx)? {
        Rate::L2Bps(v)
    } else if let Some(v) = get::<f64>(&r, "percent_line", &ctx)? {
        Rate::PercentLine(v)
    } else if get::<bool>(&r, "max", &ctx)?.unwrap_or(false) {
        Rate::Max
    } else {
        return Err(cerr("rate", "give one of pps, l1_bps, l2_bps, percent_line, max".into()));
    };
    let st: Bound<'_, PyDict> = req(d, "stop", &ctx)?;
    s.stop = if let Some(v) = get::<f64>(&st, "duration_s", &ctx)? {
        if !(v > 0.0 && v.is_finite()) {
            return Err(cerr("duration_s", format!("must be > 0 (got {v})")));
        }
        Stop::Duration { ns: (v * 1e9) as u64 }
    } else if let Some(v) = get::<u64>(&st, "frames", &ctx)? {
        Stop::Frames { count: v }
    } else if let Some(b) = get::<Bound<'_, PyDict>>(&st, "bursts", &ctx)? {
        Stop::Bursts {
            frames: req(&b, "frames", &ctx)?,
            bursts: req(&b, "count", &ctx)?,
            gap_ns: (get::<f64>(&b, "gap_s", &ctx)?.unwrap_or(0.0) * 1e9) as u64,
        }
    } else {
        return Err(cerr("stop", "give one of duration_s, frames, bursts".into()));
    };
    Ok(s)
}

fn parse_port(py: Python<'_>, d: &Bound<'_, PyDict>, i: usize) -> PyResult<PortSpec> {
    let ctx = format!("ports[{i}]");
    let mut p = PortSpec::new(req::<String>(d, "ifname", &ctx)?);
    p.netns = get(d, "netns", &ctx)?;
    p.backend = match get::<String>(d, "io", &ctx)?.as_deref() {
        None | Some("auto") => None,
        Some("af_xdp") => Some(Backend::AfXdp),
        Some("af_packet") => Some(Backend::AfPacket),
        Some("socket") => Some(Backend::Socket),
        Some(o) => {
            return Err(config_err(
                py,
                ConfigError::new(
                    format!("{ctx}.io"),
                    format!("{o:?}: allowed values are auto, af_xdp, af_packet, socket"),
                ),
            ))
        }
    };
    p.queues = get(d, "queues", &ctx)?.unwrap_or(1);
    p.ring_frames = get(d, "ring_frames", &ctx)?.unwrap_or(0);
    p.busy_poll_us = get(d, "busy_poll_us", &ctx)?.unwrap_or(0);
    Ok(p)
}

// ---------------------------------------------------------------- results to dicts

fn latency_dict<'py>(py: Python<'py>, l: &LatencySummary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("samples", l.samples)?;
    d.set_item("min_ns", l.min_ns)?;
    d.set_item("mean_ns", l.mean_ns)?;
    d.set_item("p50_ns", l.p50_ns)?;
    d.set_item("p90_ns", l.p90_ns)?;
    d.set_item("p99_ns", l.p99_ns)?;
    d.set_item("p999_ns", l.p999_ns)?;
    d.set_item("max_ns", l.max_ns)?;
    d.set_item("pdv_ns", l.pdv_ns)?;
    d.set_item("ipdv_mean_ns", l.ipdv_mean_ns)?;
    d.set_item("ipdv_max_ns", l.ipdv_max_ns)?;
    Ok(d)
}

fn result_dict<'py>(py: Python<'py>, r: &TrialResult) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let streams = PyList::empty(py);
    for s in &r.streams {
        let sd = PyDict::new(py);
        sd.set_item("index", s.index)?;
        sd.set_item("name", &s.name)?;
        sd.set_item("tx_port", s.tx_port)?;
        sd.set_item("rx_port", s.rx_port)?;
        sd.set_item("frame_size_mean", s.frame_size_mean)?;
        sd.set_item("flows", s.flows)?;
        sd.set_item(
            "intended_rate_pps",
            if s.intended_rate_pps.is_finite() { Some(s.intended_rate_pps) } else { None },
        )?;
        sd.set_item("intended_frames", s.intended_frames)?;
        sd.set_item("frames_sent", s.tx_frames)?;
        sd.set_item("bytes_sent", s.tx_bytes)?;
        sd.set_item("tx_rate_pps", s.tx_rate_pps)?;
        sd.set_item("frames_received", s.rx_frames)?;
        sd.set_item("bytes_received", s.rx_bytes)?;
        sd.set_item("frames_lost", s.lost)?;
        sd.set_item("reordered", s.reordered)?;
        sd.set_item("duplicated", s.duplicated)?;
        sd.set_item("late", s.late)?;
        sd.set_item("latency", latency_dict(py, &s.latency)?)?;
        let flows = PyList::empty(py);
        for f in &s.flow_results {
            let fd = PyDict::new(py);
            fd.set_item("flow_id", f.flow_id)?;
            fd.set_item("frames_sent", f.tx_frames)?;
            fd.set_item("frames_received", f.rx_frames)?;
            fd.set_item("bytes_received", f.rx_bytes)?;
            fd.set_item("frames_lost", f.lost)?;
            fd.set_item("reordered", f.reordered)?;
            fd.set_item("duplicated", f.duplicated)?;
            fd.set_item("late", f.late)?;
            fd.set_item("latency", latency_dict(py, &f.latency)?)?;
            flows.append(fd)?;
        }
        sd.set_item("flow_results", flows)?;
        streams.append(sd)?;
    }
    d.set_item("streams", streams)?;
    let ports = PyList::empty(py);
    for p in &r.ports {
        let pd = PyDict::new(py);
        pd.set_item("name", &p.name)?;
        pd.set_item("backend", &p.backend)?;
        pd.set_item("notes", &p.notes)?;
        pd.set_item("timestamp_source", &p.timestamp_source)?;
        pd.set_item("tx_frames", p.tx_frames)?;
        pd.set_item("tx_bytes", p.tx_bytes)?;
        pd.set_item("tx_backpressure", p.tx_backpressure)?;
        pd.set_item("tx_errors", p.tx_errors)?;
        pd.set_item("rx_frames", p.rx_frames)?;
        pd.set_item("rx_bytes", p.rx_bytes)?;
        pd.set_item("rx_foreign", p.rx_foreign)?;
        pd.set_item("rx_unknown_flow", p.rx_unknown_flow)?;
        pd.set_item("rx_warmup", p.rx_warmup)?;
        pd.set_item("rx_ring_drops", p.rx_ring_drops)?;
        pd.set_item("rx_overruns", p.rx_overruns)?;
        ports.append(pd)?;
    }
    d.set_item("ports", ports)?;
    d.set_item("duration_s", r.duration_s)?;
    d.set_item("tx_window_s", r.tx_window_s)?;
    d.set_item("drain_s", r.drain_s)?;
    d.set_item("valid", r.valid)?;
    d.set_item("invalid_reason", r.invalid_reason.clone())?;
    d.set_item("interrupted", r.interrupted)?;
    d.set_item("latency", latency_dict(py, &r.latency)?)?;
    d.set_item("tx_cpus", r.tx_cpus.clone())?;
    d.set_item("rx_cpus", r.rx_cpus.clone())?;
    d.set_item("started_realtime_ns", r.started_realtime_ns)?;
    d.set_item("tx_max_lag_ns", r.tx_max_lag_ns)?;
    d.set_item("tx_max_catchup", r.tx_max_catchup)?;
    Ok(d)
}

// ---------------------------------------------------------------- the trial handle

type Outcome = Result<TrialResult, EngineError>;

/// A trial running in a background engine thread.
#[pyclass(module = "netrig._native")]
struct Trial {
    ctl: Arc<TrialControl>,
    thread: Mutex<Option<JoinHandle<Outcome>>>,
    outcome: Mutex<Option<Outcome>>,
    caps: Vec<(String, String, String)>,
}

#[pymethods]
impl Trial {
    /// Open the ports and start the trial. Raises before any traffic on bad input.
    #[new]
    fn new(
        py: Python<'_>,
        ports: Vec<Bound<'_, PyDict>>,
        streams: Vec<Bound<'_, PyDict>>,
        config: Bound<'_, PyDict>,
    ) -> PyResult<Self> {
        let specs = ports.iter().enumerate().map(|(i, d)| parse_port(py, d, i)).collect::<PyResult<Vec<_>>>()?;
        let streams = streams.iter().enumerate().map(|(i, d)| parse_stream(py, d, i)).collect::<PyResult<Vec<_>>>()?;
        let ctx = "trial";
        let secs =
            |k: &str| -> PyResult<Option<u64>> { Ok(get::<f64>(&config, k, ctx)?.map(|v| (v.max(0.0) * 1e9) as u64)) };
        let cfg = TrialConfig {
            streams,
            drain_ns: secs("drain_s")?.unwrap_or(netrig_engine::trial::DEFAULT_DRAIN_NS),
            warmup_ns: secs("warmup_s")?.unwrap_or(0),
            learning: get(&config, "learning", ctx)?.unwrap_or(true),
            late_ns: secs("late_s")?,
            tx_cpus: get(&config, "tx_cpus", ctx)?.unwrap_or_default(),
            rx_cpus: get(&config, "rx_cpus", ctx)?.unwrap_or_default(),
            max_flow_results: get(&config, "max_flow_results", ctx)?.unwrap_or(1024),
            receive: get(&config, "receive", ctx)?.unwrap_or(true),
        };
        // Auto selection probes the receive path only on ports that will receive.
        let mut specs = specs;
        for (i, s) in specs.iter_mut().enumerate() {
            s.receive = cfg.receive && cfg.streams.iter().any(|st| st.rx_port == i);
        }
        // Open ports (and validate everything) with the GIL released.
        let opened: Result<Vec<Box<dyn Port>>, EngineError> = py.allow_threads(|| {
            let mut v: Vec<Box<dyn Port>> = Vec::new();
            for s in &specs {
                v.push(open_port(s)?);
            }
            netrig_engine::trial::prepare(&v, &cfg)?;
            Ok(v)
        });
        let mut opened = opened.map_err(|e| engine_err(py, e))?;
        let caps = opened
            .iter()
            .map(|p| (p.caps().name.clone(), p.caps().backend.as_str().to_string(), p.caps().notes.clone()))
            .collect();
        let ctl = TrialControl::new();
        let ctl2 = ctl.clone();
        let thread = std::thread::Builder::new()
            .name("netrig-trial".into())
            .spawn(move || run_trial(&mut opened, &cfg, &ctl2))
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start the trial thread: {e}")))?;
        Ok(Trial { ctl, thread: Mutex::new(Some(thread)), outcome: Mutex::new(None), caps })
    }

    /// Wait up to `timeout_s` for the trial to end (GIL released). True when it has ended.
    fn wait(&self, py: Python<'_>, timeout_s: f64) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(timeout_s.max(0.0));
        py.allow_threads(|| loop {
            {
                let mut t = self.thread.lock().unwrap_or_else(|e| e.into_inner());
                match t.as_ref() {
                    None => return true,
                    Some(h) if h.is_finished() => {
                        let h = t.take().expect("checked above");
                        let outcome = h.join().unwrap_or_else(|_| {
                            Err(EngineError::Worker {
                                name: "trial".into(),
                                message: "the engine thread panicked".into(),
                            })
                        });
                        *self.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
                        return true;
                    }
                    Some(_) => {}
                }
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        })
    }

    /// Stop traffic now (Ctrl-C); the result keeps what was counted.
    fn stop(&self) {
        self.ctl.stop();
    }

    /// Live counters: phase, elapsed_s, tx_frames, rx_frames.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.ctl.snapshot();
        let d = PyDict::new(py);
        d.set_item("phase", s.phase.as_str())?;
        d.set_item("elapsed_s", s.elapsed_s)?;
        d.set_item("tx_frames", s.tx_frames)?;
        d.set_item("rx_frames", s.rx_frames)?;
        Ok(d)
    }

    /// (name, backend, notes) of every opened port.
    fn ports(&self) -> Vec<(String, String, String)> {
        self.caps.clone()
    }

    /// The result as a dict (waits for the end).
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        while !self.wait(py, 0.2) {
            py.check_signals()?;
        }
        let mut o = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        match o.take() {
            Some(Ok(r)) => {
                let d = result_dict(py, &r)?;
                *o = Some(Ok(r));
                Ok(d)
            }
            Some(Err(e)) => Err(engine_err(py, e)),
            None => Err(PyRuntimeError::new_err("the trial result was already consumed")),
        }
    }
}

/// Facts about one interface (opened in `netns` if given).
#[pyfunction]
#[pyo3(signature = (ifname, netns=None))]
fn interface_info<'py>(py: Python<'py>, ifname: String, netns: Option<String>) -> PyResult<Bound<'py, PyDict>> {
    let info = py
        .allow_threads(|| netns::in_netns(netns.as_deref(), || ifinfo::ifinfo(&ifname, netns.as_deref())))
        .map_err(|e| port_err(py, e))?;
    let d = PyDict::new(py);
    d.set_item("name", &info.name)?;
    d.set_item("ifindex", info.ifindex)?;
    d.set_item("mtu", info.mtu)?;
    d.set_item("mac", info.mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"))?;
    d.set_item("speed_bps", info.speed_bps)?;
    d.set_item("driver", &info.driver)?;
    d.set_item("rx_queues", info.rx_queues)?;
    d.set_item("tx_queues", info.tx_queues)?;
    d.set_item("oper_up", info.oper_up)?;
    Ok(d)
}

/// Names of the interfaces in `netns` (or the current namespace).
#[pyfunction]
#[pyo3(signature = (netns=None))]
fn list_interfaces(py: Python<'_>, netns: Option<String>) -> PyResult<Vec<String>> {
    py.allow_threads(|| netns::in_netns(netns.as_deref(), || Ok(ifinfo::list_interfaces())))
        .map_err(|e| port_err(py, e))
}

/// Probe which I/O backends open on an interface: list of (backend, ok, notes or error).
#[pyfunction]
#[pyo3(signature = (ifname, netns=None))]
fn probe_io(py: Python<'_>, ifname: String, netns: Option<String>) -> Vec<(String, bool, String)> {
    py.allow_threads(|| {
        [Backend::AfXdp, Backend::AfPacket, Backend::Socket]
            .into_iter()
            .map(|b| {
                let mut s = PortSpec::new(ifname.clone());
                s.netns = netns.clone();
                s.backend = Some(b);
                match open_port(&s) {
                    Ok(p) => (b.as_str().to_string(), true, p.caps().notes.clone()),
                    Err(e) => (b.as_str().to_string(), false, e.to_string()),
                }
            })
            .collect()
    })
}

/// Whether the AF_XDP steering program loads (no attach): (ok, detail).
#[pyfunction]
fn probe_xdp_program(py: Python<'_>, ifname: String) -> (bool, String) {
    py.allow_threads(|| match netrig_engine::sys::af_xdp::probe_program(&ifname) {
        Ok(s) => (true, s),
        Err(e) => (false, e.to_string()),
    })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("BUILD_PROFILE", if cfg!(debug_assertions) { "debug" } else { "release" })?;
    // The vocabulary the engine defines, exported so Python never restates it.
    m.add("WIRE_OVERHEAD_BYTES", netrig_engine::stream::WIRE_OVERHEAD)?;
    m.add("FCS_BYTES", netrig_engine::stream::FCS_LEN)?;
    m.add("MIN_FRAME_SIZE", netrig_engine::stream::MIN_FRAME_SIZE)?;
    m.add("MAX_FRAME_SIZE", netrig_engine::stream::MAX_FRAME_SIZE)?;
    m.add("RFC2544_FRAME_SIZES", pyo3::types::PyTuple::new(m.py(), netrig_engine::stream::RFC2544_FRAME_SIZES)?)?;
    let mixes = PyDict::new(m.py());
    for (name, pairs) in netrig_engine::stream::FRAME_SIZE_MIXES {
        mixes.set_item(*name, pyo3::types::PyTuple::new(m.py(), pairs.iter().copied())?)?;
    }
    m.add("FRAME_SIZE_MIXES", mixes)?;
    m.add("DEFAULT_DRAIN_S", netrig_engine::trial::DEFAULT_DRAIN_NS as f64 / 1e9)?;
    m.add_class::<Trial>()?;
    m.add_function(wrap_pyfunction!(interface_info, m)?)?;
    m.add_function(wrap_pyfunction!(list_interfaces, m)?)?;
    m.add_function(wrap_pyfunction!(probe_io, m)?)?;
    m.add_function(wrap_pyfunction!(probe_xdp_program, m)?)?;
    Ok(())
}
