//! A trial: learning frames, warm-up, run, stop, drain, collect (methodology §2).
//!
//! ```text
//!  validate + compile streams ── open queues ── start RX workers (pinned)
//!      ── learning frames ── warm-up (not counted) ── epoch
//!      ── TX workers (pinned, paced) until duration / count / bursts ── stop
//!      ── drain (2 s default) ── stop RX ── merge per-flow counters ── TrialResult
//! ```
//! Every option is validated before any queue is opened. Live counters can be read through
//! [`TrialControl`] while the trial runs, and setting its stop flag ends the trial early (the
//! result is then marked `interrupted`, with everything counted so far).
//!
//! Every trial has a tag (the signature's nonce, [`claim_tag`]), so its receivers count only its
//! own frames; the trial is invalid when the tester, not the DUT, may have lost or made frames:
//! see [`crate::run::validity`] for every rule.
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::clock;
use crate::error::{ConfigError, EngineError};
use crate::pin::{pick_cpu, PinFailure, PinLog};
use crate::port::{LinkSource, LinkState, Port, RxMeta, RxQueue, RxQueueStats, TimestampSource, TxQueue, Waiting};
pub use crate::run::validity::{COUNT_STOP_GRACE_NS, MIN_ACHIEVED_RATIO};
use crate::sys::{bpf, cpu};
use crate::traffic::analyze::{Analyzer, SentSoFar, TrialIdent, MAX_GAP_SLOTS};
use crate::traffic::flowstate;
use crate::traffic::pacing::Pacing;
use crate::traffic::rx::{receive, RxLive, RxSink, RX_BATCH};
use crate::traffic::schedule::{IntervalCounter, IntervalGrid, RatePhase};
use crate::traffic::stream::{self, compile, line_rate_fps, CompiledStream, Rate, Stop, StreamConfig};
use crate::traffic::tags::claim_tag;
use crate::traffic::timeline::LatencyTimeline;
use crate::traffic::tx::{
    run_tx_worker, split_stream, RunShape, TxLive, TxPlan, TxShare, TxWorkerResult, UNPACED_BATCH,
};

mod collect;
mod result;

use collect::collect;
pub use result::{FlowResult, IntervalResult, PortResult, StreamResult, TrialResult};

/// Wait after the last frame for frames in flight, unless configured (methodology §2: 2 s).
pub const DEFAULT_DRAIN_NS: u64 = 2_000_000_000;

/// How often the ports' links are read while a trial runs.
pub const LINK_POLL_NS: u64 = 50_000_000;

/// What was seen of one port's link: its state before and after the trial, and in between.
#[derive(Debug, Clone, Default)]
struct LinkWatch {
    before: Option<LinkState>,
    after: Option<LinkState>,
    /// A read during the trial found the link not up.
    seen_down: bool,
    /// XDP programs seen attached to the interface: id and name.
    xdp: Vec<(u32, String)>,
    /// The trial's port at the other end of this port's veth, looked for when the port's kernel
    /// dropped frames it sent (they dropped at that port's receive ring).
    veth_peer: Option<usize>,
}

impl LinkWatch {
    fn observe(&mut self, st: Option<LinkState>) {
        let Some(st) = st else { return };
        self.seen_down |= !st.oper_up;
        if let Some(id) = st.xdp_prog_id {
            if !self.xdp.iter().any(|(i, _)| *i == id) {
                // Read the name now: the program may be gone when the trial ends.
                self.xdp.push((id, bpf::prog_name(id).unwrap_or_default()));
            }
        }
    }
}

/// Read every port's link each [`LINK_POLL_NS`] until `stop`.
fn watch_links(sources: &[Option<Arc<dyn LinkSource>>], watches: &mut [LinkWatch], stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        for (src, w) in sources.iter().zip(watches.iter_mut()) {
            w.observe(src.as_ref().and_then(|s| s.state()));
        }
        let next = clock::now_ns() + LINK_POLL_NS;
        while !stop.load(Ordering::Relaxed) && clock::now_ns() < next {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// Of the CPUs the calling thread may use, those no sender is pinned to (empty when a sender is
/// on every one: then it stays where it may run).
fn off_senders(tx_cpus: &[usize]) -> Vec<u32> {
    cpu::allowed_cpus().into_iter().filter(|c| !tx_cpus.contains(c)).map(|c| c as u32).collect()
}

/// A paced trial may be stretched by this share of its planned length (smooth pacing sends every
/// intended frame, later, after a stall); beyond it the trial is invalid: tester-limited.
pub const DEFAULT_MAX_STRETCH_RATIO: f64 = 0.02;

#[derive(Debug, Clone)]
pub struct TrialConfig {
    pub streams: Vec<StreamConfig>,
    /// Wait after the last frame for frames in flight.
    pub drain_ns: u64,
    /// Traffic at the trial's rates before the measurement, not counted (0 = none).
    pub warmup_ns: u64,
    /// Send learning frames from every receiving port first (primes bridges' MAC tables).
    pub learning: bool,
    /// Frames whose latency exceeds this are "late" (default: the drain time).
    pub late_ns: Option<u64>,
    /// CPUs for TX workers, used in order (empty: the last CPUs, counting down).
    pub tx_cpus: Vec<usize>,
    /// CPUs for RX workers, used in order (empty: the first CPUs, counting up).
    pub rx_cpus: Vec<usize>,
    /// Per-flow results are reported for at most this many flows per stream.
    pub max_flow_results: usize,
    /// Run RX workers (false: transmit only, e.g. against a receiver that just drops).
    pub receive: bool,
    /// What a paced TX worker does with time it lost (default: smooth, at most 2 % above the rate).
    pub pacing: Pacing,
    /// How much longer than planned (a share of the planned length) a paced trial may run to send
    /// every intended frame; a trial stretched further is invalid (tester-limited).
    pub max_stretch_ratio: f64,
    /// Rate phases of a duration trial, back to back (empty: one phase at the streams' rates for
    /// the stop's duration). Their durations must add up to the stop's.
    pub phases: Vec<RatePhase>,
    /// Count frames sent and received per interval of this length, ns (0: not counted; duration
    /// trials only). Every phase is cut into intervals, its last one possibly shorter.
    pub interval_ns: u64,
    /// Longest sequence gaps kept per flow (1..=[`MAX_GAP_SLOTS`]): a trial with events under load
    /// keeps one per event and one more.
    pub gap_slots: usize,
}

impl Default for TrialConfig {
    fn default() -> Self {
        TrialConfig {
            streams: Vec::new(),
            drain_ns: DEFAULT_DRAIN_NS,
            warmup_ns: 0,
            learning: true,
            late_ns: None,
            tx_cpus: Vec::new(),
            rx_cpus: Vec::new(),
            max_flow_results: 1024,
            receive: true,
            pacing: Pacing::Smooth,
            max_stretch_ratio: DEFAULT_MAX_STRETCH_RATIO,
            phases: Vec::new(),
            interval_ns: 0,
            gap_slots: 1,
        }
    }
}

impl TrialConfig {
    /// Everything that can be checked without opening the ports, for a trial on `n_ports` ports:
    /// at least one stream and one port, every stream valid ([`StreamConfig::validate`], fields
    /// prefixed `streams[i].`), its port indices in range, at most 2^24 flows in all, CPUs that
    /// exist.
    pub fn validate(&self, n_ports: usize) -> Result<(), ConfigError> {
        if self.streams.is_empty() {
            return Err(ConfigError::new("streams", "a trial needs at least one stream"));
        }
        if n_ports == 0 {
            return Err(ConfigError::new("ports", "a trial needs at least one port"));
        }
        let mut flows: u64 = 0;
        for (i, s) in self.streams.iter().enumerate() {
            let prefix = format!("streams[{i}]");
            s.validate().map_err(|e| e.within(&prefix))?;
            for (name, p) in [("tx_port", s.tx_port), ("rx_port", s.rx_port)] {
                if p >= n_ports {
                    return Err(ConfigError::new(
                        format!("{prefix}.{name}"),
                        format!("port index {p} out of range (the trial has {n_ports} ports): use 0..{}", n_ports - 1),
                    ));
                }
            }
            flows += s.flows.count();
        }
        if flows > crate::traffic::flows::MAX_FLOWS {
            return Err(ConfigError::new(
                "streams",
                format!(
                    "{flows} flows in one trial: the limit is {}; use fewer flows",
                    crate::traffic::flows::MAX_FLOWS
                ),
            ));
        }
        let ncpu = cpu::online_cpus();
        for (name, list) in [("tx_cpus", &self.tx_cpus), ("rx_cpus", &self.rx_cpus)] {
            if let Some(&c) = list.iter().find(|&&c| c >= ncpu) {
                return Err(ConfigError::new(
                    name,
                    format!("CPU {c} does not exist (this machine has CPUs 0-{})", ncpu - 1),
                ));
            }
        }
        if self.late_ns == Some(0) {
            return Err(ConfigError::new(
                "late_s",
                "must be above 0: every frame would be late; leave it unset for the drain time",
            ));
        }
        if !(0.0..=10.0).contains(&self.max_stretch_ratio) {
            return Err(ConfigError::new(
                "max_stretch_pct",
                format!("must be 0..1000 % of the trial's length (got {} %)", self.max_stretch_ratio * 100.0),
            ));
        }
        let duration = |s: &StreamConfig| match s.stop {
            Stop::Duration { ns } => Some(ns),
            _ => None,
        };
        if !self.phases.is_empty() {
            let mut total: u64 = 0;
            for (i, p) in self.phases.iter().enumerate() {
                p.validate().map_err(|e| e.within(&format!("phases[{i}]")))?;
                total = total.saturating_add(p.duration_ns);
            }
            for s in &self.streams {
                if duration(s) != Some(total) {
                    return Err(ConfigError::new(
                        "phases",
                        format!(
                            "the phases last {} s, but the trial stops {}: give a duration stop equal to the phases' sum",
                            total as f64 / 1e9,
                            match s.stop {
                                Stop::Duration { ns } => format!("after {} s", ns as f64 / 1e9),
                                other => format!("by {}", other.kind()),
                            }
                        ),
                    ));
                }
                if matches!(s.rate, Rate::Max) {
                    return Err(ConfigError::new(
                        "phases",
                        "a stream at the maximum rate has no rate to scale per phase: give it a rate",
                    ));
                }
            }
        }
        if !(1..=MAX_GAP_SLOTS).contains(&self.gap_slots) {
            return Err(ConfigError::new(
                "gap_slots",
                format!(
                    "must be 1..={MAX_GAP_SLOTS} (got {}): the longest sequence gaps kept per flow",
                    self.gap_slots
                ),
            ));
        }
        if self.interval_ns > 0 && self.streams.iter().any(|s| duration(s).is_none()) {
            return Err(ConfigError::new("interval_s", "per-interval counts need a duration trial"));
        }
        Ok(())
    }

    /// The phases of a duration trial (its own, or one phase of the stop's duration); empty for
    /// frame-count and burst trials.
    pub fn run_phases(&self) -> Vec<RatePhase> {
        if !self.phases.is_empty() {
            return self.phases.clone();
        }
        self.streams
            .iter()
            .find_map(|s| match s.stop {
                Stop::Duration { ns } => Some(vec![RatePhase { duration_ns: ns, rate_scale: 1.0 }]),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// Latency above which a frame is late: `late_ns`, else the drain time, else (drain 0: the
    /// trial does not wait) [`DEFAULT_DRAIN_NS`].
    pub fn late_threshold_ns(&self) -> u64 {
        self.late_ns.unwrap_or(if self.drain_ns > 0 { self.drain_ns } else { DEFAULT_DRAIN_NS })
    }
}

/// Phases a trial goes through (readable live).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    Setup = 0,
    Learning = 1,
    Warmup = 2,
    Running = 3,
    Draining = 4,
    Done = 5,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Setup => "setup",
            Phase::Learning => "learning",
            Phase::Warmup => "warmup",
            Phase::Running => "running",
            Phase::Draining => "draining",
            Phase::Done => "done",
        }
    }
}

/// The thread names of a trial's TX and RX workers, before their index (`netrig-tx0`): the
/// platform's stall watch tells the tester's own workers apart by them.
pub const TX_WORKER: &str = "netrig-tx";
pub const RX_WORKER: &str = "netrig-rx";

/// Shared between the trial and whoever watches it.
#[derive(Debug, Default)]
pub struct TrialControl {
    stop: AtomicBool,
    phase: AtomicU8,
    pub(crate) run_start_ns: AtomicU64,
    tx_live: std::sync::Mutex<Vec<Arc<TxLive>>>,
    pub(crate) rx_live: std::sync::Mutex<Vec<Arc<RxLive>>>,
    tag: std::sync::atomic::AtomicU32,
    /// The measured run's counting intervals, the trial epoch and how long after an interval's end
    /// its counts are final (set when the trial has intervals).
    intervals: std::sync::Mutex<Option<(Arc<IntervalGrid>, u64, u64)>>,
    /// Workers that could not be pinned to their CPU (taken into the result).
    pub(crate) pins: PinLog,
}

/// How long after an interval's end, beyond the late threshold, its live counts are read: a worker
/// publishes after every batch, an RX batch waits at most 5 ms.
pub const SETTLE_MARGIN_NS: u64 = 50_000_000;

/// A snapshot of a running trial.
#[derive(Debug, Clone, Copy)]
pub struct LiveSnapshot {
    pub phase: Phase,
    pub elapsed_s: f64,
    pub tx_frames: u64,
    pub rx_frames: u64,
    /// The running trial's tag (the signature's nonce; 0 before the trial claimed one).
    pub trial_tag: u32,
}

impl TrialControl {
    pub fn new() -> Arc<Self> {
        Arc::new(TrialControl::default())
    }

    /// Ask the trial to stop as soon as possible (Ctrl-C).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Tell `sink` of each of the trial's TX and RX workers as it starts (its thread id).
    pub fn tell(&self, sink: Arc<dyn crate::pin::WorkerSink>) {
        self.pins.tell(sink);
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// When the measured run begins (monotonic ns, a little after it is set), once it is known.
    pub fn run_start(&self) -> Option<u64> {
        Some(self.run_start_ns.load(Ordering::Relaxed)).filter(|&s| s != 0)
    }

    pub(crate) fn set_phase(&self, p: Phase) {
        self.phase.store(p as u8, Ordering::SeqCst);
    }

    pub fn snapshot(&self) -> LiveSnapshot {
        let phase = match self.phase.load(Ordering::SeqCst) {
            1 => Phase::Learning,
            2 => Phase::Warmup,
            3 => Phase::Running,
            4 => Phase::Draining,
            5 => Phase::Done,
            _ => Phase::Setup,
        };
        let start = self.run_start_ns.load(Ordering::Relaxed);
        let elapsed_s = if start == 0 { 0.0 } else { clock::now_ns().saturating_sub(start) as f64 / 1e9 };
        let rx_frames = self.rx_sum(|l| &l.frames);
        let trial_tag = self.tag.load(Ordering::Relaxed);
        LiveSnapshot { phase, elapsed_s, tx_frames: self.tx_frames_now(), rx_frames, trial_tag }
    }

    /// The counting intervals from index `first` on whose counts are final (in order, none while
    /// the trial has no intervals): an interval is read once its end is more than the late
    /// threshold plus [`SETTLE_MARGIN_NS`] in the past, so every frame sent in it has arrived or
    /// is late (not counted in intervals), and its counts are those the result will have. The run's
    /// last interval is in the result only.
    pub fn settled_intervals(&self, first: usize) -> Vec<IntervalResult> {
        let g = self.intervals.lock().unwrap_or_else(|e| e.into_inner());
        let Some((grid, epoch_ns, settle_ns)) = g.as_ref() else { return Vec::new() };
        let now_rel = clock::now_ns().saturating_sub(*epoch_ns);
        grid.settled(first, now_rel, *settle_ns)
            .into_iter()
            .map(|i| IntervalResult {
                start_s: i.start_ns as f64 / 1e9,
                duration_s: i.len_ns as f64 / 1e9,
                phase: i.phase,
                tx_frames: i.tx_frames,
                rx_frames: i.rx_frames,
                // Live counts carry no latency: the result's intervals do.
                latency_mean_ns: 0.0,
                latency_max_ns: 0,
            })
            .collect()
    }

    /// Frames of the trial's flows its receivers have counted so far, each once (see
    /// [`crate::traffic::analyze::Analyzer::arrived`]).
    pub fn rx_arrived_now(&self) -> u64 {
        self.rx_sum(|l| &l.arrived)
    }

    /// One live counter summed over the RX workers.
    fn rx_sum(&self, counter: impl Fn(&RxLive) -> &AtomicU64) -> u64 {
        self.rx_live.lock().map(|v| v.iter().map(|l| counter(l).load(Ordering::Relaxed)).sum()).unwrap_or(0)
    }

    /// Frames the current phase's TX workers have sent so far.
    pub fn tx_frames_now(&self) -> u64 {
        self.tx_live.lock().map(|v| v.iter().map(|l| l.frames.load(Ordering::Acquire)).sum()).unwrap_or(0)
    }
}

struct RxWorkerOut {
    port: usize,
    analyzer: Analyzer,
    stats: RxQueueStats,
    error: Option<String>,
}

/// Validate `cfg` ([`TrialConfig::validate`], then against the ports: CPUs, MTU) and compile its
/// streams. No resource is touched.
pub fn prepare(ports: &[Box<dyn Port>], cfg: &TrialConfig) -> Result<Vec<Arc<CompiledStream>>, ConfigError> {
    cfg.validate(ports.len())?;
    for (i, s) in cfg.streams.iter().enumerate() {
        let rx = if cfg.receive { Some(s.rx_port) } else { None };
        for c in [Some(s.tx_port), rx].into_iter().flatten().filter_map(|p| ports.get(p)).map(|p| p.caps()) {
            let why = if c.backend == crate::port::Backend::AfXdp {
                "AF_XDP carries one UMEM chunk at most: use --io af_packet (or auto) for larger frames"
            } else {
                stream::RAISE_THE_MTU
            };
            let port = format!("{} over {}", c.name, c.backend);
            match &s.replay {
                Some(r) => r.check_port(c.max_frame_len, &port, why),
                None => stream::fits_port(&s.frame_size, (c.max_frame_len, s.tag_len()), &port, why),
            }
            .map_err(|e| e.within(&format!("streams[{i}]")))?;
        }
    }
    let mut base: u64 = 0;
    let mut out = Vec::new();
    for (i, s) in cfg.streams.iter().enumerate() {
        let max = ports.get(s.tx_port).map(|p| p.caps().max_frame_len).unwrap_or(1514);
        let c = compile(i, s, base as u32, max, ports.len())?;
        base += c.nflows;
        out.push(Arc::new(c));
    }
    Ok(out)
}

/// Run one trial on `ports`. Blocks until done; watch and stop it through `ctl`.
pub fn run_trial(
    ports: &mut [Box<dyn Port>],
    cfg: &TrialConfig,
    ctl: &Arc<TrialControl>,
) -> Result<TrialResult, EngineError> {
    // Setup is not bookkeeping: it runs at once even beside another run's workers.
    let setup_priority = cpu::OrdinaryWhile::enter();
    let streams = prepare(ports, cfg)?;
    check_flow_memory(ports, cfg, &streams)?;
    let late_ns = cfg.late_threshold_ns();
    let started_realtime_ns = clock::realtime_ns();
    ctl.set_phase(Phase::Setup);
    let (_claim, ident) = claim_tag();
    let tag = ident.tag;
    ctl.tag.store(tag, Ordering::Relaxed);

    // Open every queue first: a failure here leaves nothing running.
    let (txq, rxq) = open_queues(ports, cfg, &streams)?;
    // The link watcher started below is bookkeeping again.
    drop(setup_priority);
    // The links before any traffic, watched during the trial and compared with after the drain.
    let links: Vec<Option<Arc<dyn LinkSource>>> = ports.iter().map(|p| p.link()).collect();
    let watches = links_before(&links);
    let epoch_ns = clock::now_ns();
    let rx_cpus: Vec<usize> = (0..rxq.len()).map(|i| pick_cpu(&cfg.rx_cpus, i, false)).collect();
    let tx_cpus: Vec<usize> = (0..txq.len()).map(|i| pick_cpu(&cfg.tx_cpus, i, true)).collect();
    let rx_lives: Vec<Arc<RxLive>> = rxq.iter().map(|_| Arc::new(RxLive::default())).collect();
    *ctl.rx_live.lock().unwrap_or_else(|e| e.into_inner()) = rx_lives.clone();
    let phases = cfg.run_phases();
    let grid =
        (cfg.interval_ns > 0 && !phases.is_empty()).then(|| Arc::new(IntervalGrid::new(&phases, cfg.interval_ns)));
    *ctl.intervals.lock().unwrap_or_else(|e| e.into_inner()) =
        grid.clone().map(|g| (g, epoch_ns, late_ns.saturating_add(SETTLE_MARGIN_NS)));
    let rx_setup = RxSetup {
        nflows: streams.iter().map(|s| s.nflows).sum::<u64>() as usize,
        epoch_ns,
        late_ns,
        gap_slots: cfg.gap_slots,
        grid: grid.clone(),
        timeline_span_ns: timeline_span_ns(cfg),
        // A frame a TX worker is sending may arrive before the worker publishes its count.
        sent_slack: (txq.len() * UNPACED_BATCH) as u64,
        stop: AtomicBool::new(false),
        ready: AtomicUsize::new(0),
    };

    // The flows' state is allocated by the workers: measured as the resident set's growth.
    let rss_before = flowstate::rss_bytes().unwrap_or(0);
    let (rx_outs, tx_outs, mut watches, drained_ns) = std::thread::scope(|scope| {
        let (links, link_stop, senders) = (&links, &rx_setup.stop, &tx_cpus);
        let watcher = std::thread::Builder::new()
            .name("netrig-link".into())
            .spawn_scoped(scope, move || {
                // Bookkeeping: never on a sender's CPU, where each read of the links took the
                // sender off it (measured: 0.3-1.3 ms at a time). Refused, it runs anywhere. And
                // at `SCHED_IDLE` whoever started the trial: off the senders' CPUs it is on a
                // receiver's, and as an ordinary thread (ports by name, the API) it held that
                // CPU 2-3 ms at a time, the receiver waiting (docs/performance.md, "Who holds
                // the receiver's CPU": 26 pairs of top-rate trials with and without it, neutral).
                let _ = cpu::pin_current_thread_to(&off_senders(senders));
                let _ = cpu::idle_priority();
                let mut watches = watches;
                watch_links(links, &mut watches, link_stop);
                watches
            })
            .expect("spawning the link watcher");
        let mut rx_handles = Vec::new();
        // A thread starts with its parent's policy, and this one is bookkeeping (SCHED_IDLE): a
        // worker spawned from it beside a busy CPU waited that long to run its first line (which
        // makes it ordinary). Measured beside busy loops: the first frame of a 2-kfps trial left
        // 1.1 s late. Workers are spawned while this thread is ordinary.
        let spawning = cpu::OrdinaryWhile::enter();
        for (i, (port, mut q)) in rxq.into_iter().enumerate() {
            let cpu_id = rx_cpus[i];
            let user_stamps = ports[port].caps().rx_timestamp == TimestampSource::User;
            let shares = tx_cpus.contains(&cpu_id);
            let nap = Waiting::new(&mut *q, shares, user_stamps, rx_bound_fps(ports, &streams, port), false);
            let (setup, live, ident, sent_ctl) = (&rx_setup, rx_lives[i].clone(), ident.clone(), ctl.clone());
            rx_handles.push(ctl.pins.spawn_scoped(scope, format!("{RX_WORKER}{i}"), cpu_id, move || {
                let _ = cpu::normal_priority();
                rx_worker(port, (q, nap), setup, &live, ident, sent_ctl)
            }));
        }
        // Traffic starts once every RX worker holds its flows' state: allocating it takes a page
        // fault per 4 KiB (~50 ms at 1 M flows), and frames arriving meanwhile overflowed the ring.
        while rx_setup.ready.load(Ordering::Acquire) < rx_handles.len() && !rx_handles.iter().any(|h| h.is_finished()) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        drop(spawning);
        let tx_outs = send_all(ports, cfg, &streams, txq, &tx_cpus, (epoch_ns, tag), grid.clone(), ctl);
        let sent: u64 = tx_outs.iter().flat_map(|(_, w)| &w.shares).map(|s| s.frames).sum();
        let drained_ns = drain(cfg.drain_ns, sent, ctl);
        rx_setup.stop.store(true, Ordering::SeqCst);
        let rx_outs: Vec<RxWorkerOut> = rx_handles.into_iter().map(|h| h.join().expect("RX worker panicked")).collect();
        (rx_outs, tx_outs, watcher.join().expect("link watcher panicked"), drained_ns)
    });
    links_after(&links, &mut watches, &tx_outs);
    ctl.set_phase(Phase::Done);
    let run = RunFacts {
        tag,
        tx_cpus,
        rx_cpus,
        started_realtime_ns,
        interrupted: ctl.stopped(),
        drained_ns,
        links: watches,
        grid,
        epoch_ns,
        run_start_ns: ctl.run_start_ns.load(Ordering::Relaxed),
        flow_memory_bytes: flowstate::rss_bytes().unwrap_or(0).saturating_sub(rss_before),
        pin_failures: ctl.pins.take(),
    };
    Ok(collect(ports, cfg, &streams, rx_outs, tx_outs, run))
}

/// The flows' state must fit in the memory available (checked before anything is allocated).
fn check_flow_memory(
    ports: &[Box<dyn Port>],
    cfg: &TrialConfig,
    streams: &[Arc<CompiledStream>],
) -> Result<(), EngineError> {
    let nflows: u64 = streams.iter().map(|s| s.nflows).sum();
    if let Some(available) = flowstate::mem_available_bytes() {
        let rx_queues: usize = if cfg.receive {
            dedup(streams.iter().map(|s| s.config.rx_port)).iter().map(|&p| ports[p].caps().rx_queues).sum()
        } else {
            0
        };
        flowstate::check_fits(nflows, rx_queues, cfg.gap_slots, available)?;
    }
    Ok(())
}

/// A trial's TX and RX queues, each with its port index.
type Queues = (Vec<(usize, Box<dyn TxQueue>)>, Vec<(usize, Box<dyn RxQueue>)>);

/// Open every queue of the ports the streams send from and (when the trial receives) receive on.
fn open_queues(
    ports: &mut [Box<dyn Port>],
    cfg: &TrialConfig,
    streams: &[Arc<CompiledStream>],
) -> Result<Queues, EngineError> {
    let tx_ports: Vec<usize> = dedup(streams.iter().map(|s| s.config.tx_port));
    let rx_ports: Vec<usize> = if cfg.receive { dedup(streams.iter().map(|s| s.config.rx_port)) } else { Vec::new() };
    let mut txq: Vec<(usize, Box<dyn TxQueue>)> = Vec::new();
    for &p in &tx_ports {
        for q in 0..ports[p].caps().tx_queues {
            txq.push((p, ports[p].open_tx(q)?));
        }
    }
    let mut rxq: Vec<(usize, Box<dyn RxQueue>)> = Vec::new();
    for &p in &rx_ports {
        for q in 0..ports[p].caps().rx_queues {
            rxq.push((p, ports[p].open_rx(q)?));
        }
    }
    Ok((txq, rxq))
}

/// Every port's link as read after the trial; for a port whose kernel dropped frames it sent, the
/// port at the other end of its veth.
fn links_after(links: &[Option<Arc<dyn LinkSource>>], watches: &mut [LinkWatch], tx: &[(usize, TxWorkerResult)]) {
    for (l, w) in links.iter().zip(watches.iter_mut()) {
        w.after = l.as_ref().and_then(|l| l.state());
        w.observe(w.after);
    }
    for &(p, ref w) in tx {
        if w.queue.errors > 0 {
            watches[p].veth_peer = veth_peer(links, p);
        }
    }
}

/// The port whose interface is the other end of port `p`'s veth, if one of them is.
fn veth_peer(links: &[Option<Arc<dyn LinkSource>>], p: usize) -> Option<usize> {
    let me = links.get(p)?.as_ref()?;
    (0..links.len()).find(|&q| q != p && links[q].as_ref().is_some_and(|other| me.is_veth_peer_of(other.as_ref())))
}

/// Every port's link as read before the trial.
fn links_before(links: &[Option<Arc<dyn LinkSource>>]) -> Vec<LinkWatch> {
    links
        .iter()
        .map(|l| {
            let mut w = LinkWatch { before: l.as_ref().and_then(|l| l.state()), ..Default::default() };
            w.observe(w.before);
            w
        })
        .collect()
}

/// What every RX worker of a trial shares.
struct RxSetup {
    nflows: usize,
    epoch_ns: u64,
    late_ns: u64,
    gap_slots: usize,
    grid: Option<Arc<IntervalGrid>>,
    /// How long after the epoch the last frame may be sent: the latency timeline's span (0: none).
    timeline_span_ns: u64,
    /// Frames the TX workers may have sent beyond what they published.
    sent_slack: u64,
    /// Set after the drain: the workers empty their rings and end.
    stop: AtomicBool,
    /// Workers holding their flows' state (traffic waits for all of them).
    ready: AtomicUsize,
}

/// How long after the epoch a duration trial's last frame may leave: learning, warm-up, the planned
/// run stretched to its limit, with a second's margin (0 for count and burst trials: no timeline).
fn timeline_span_ns(cfg: &TrialConfig) -> u64 {
    let planned: u64 = cfg.run_phases().iter().map(|p| p.duration_ns).sum();
    if planned == 0 {
        return 0;
    }
    let stretched = (planned as f64 * (1.0 + cfg.max_stretch_ratio.max(0.1))) as u64;
    cfg.warmup_ns + stretched + 1_000_000_000
}

/// The fastest frames of `streams` may arrive at port `rx`, frames/s: their rates together, each
/// at most its sending port's line rate (a stream at the top rate at that). A sending port that
/// reports no speed (veth) bounds nothing, whatever rate a stream states: a rate far above what
/// the port carries made a spinning receiver slow its sender (a veth trial at 10^9 frames/s sent
/// 0.84 × one at the top rate), so such a stream counts 0 and a napping worker's
/// [`crate::port::NapGuard`] finds out.
fn rx_bound_fps(ports: &[Box<dyn Port>], streams: &[Arc<CompiledStream>], rx: usize) -> f64 {
    let to_rx = streams.iter().filter(|s| s.config.rx_port == rx);
    to_rx
        .map(|s| match ports[s.config.tx_port].caps().speed_bps {
            Some(bps) => s.rate_pps.min(line_rate_fps(bps as f64, s.mean_size())),
            None => 0.0,
        })
        .sum()
}

/// What a trial's RX worker does with a batch: analyse every frame, publish the count and settle
/// the counting intervals.
struct TrialSink<'a> {
    an: Analyzer,
    live: &'a RxLive,
    epoch_ns: u64,
    nap: Waiting,
}

impl RxSink for TrialSink<'_> {
    #[inline(always)]
    fn frame(&mut self, f: &[u8], m: RxMeta) {
        // Frames are pushed (their flow state prefetched) and counted at the batch's end.
        self.an.push(f, m);
    }

    fn batch(&mut self, q: &mut dyn RxQueue, n: usize, polled_ns: u64, draining: bool) {
        self.an.flush();
        self.nap.saw(q, n, RX_BATCH);
        if draining {
            return;
        }
        self.live.frames.store(self.an.totals.frames, Ordering::Relaxed);
        self.live.arrived.store(self.an.arrived(), Ordering::Relaxed);
        if let Some(iv) = self.an.intervals.as_mut() {
            // Fewer than a batch: what had arrived when it polled is counted (a TPACKET_V3
            // block may hold frames a few ms longer: `SETTLE_MARGIN_NS` covers it).
            if n < RX_BATCH {
                iv.flush_upto(polled_ns.saturating_sub(self.epoch_ns));
            } else {
                iv.flush();
            }
        }
    }
}

/// One RX worker: analyse every frame of queue `q` until the stop, then empty the ring.
fn rx_worker(
    port: usize,
    (mut q, nap): (Box<dyn RxQueue>, Waiting),
    setup: &RxSetup,
    live: &RxLive,
    ident: TrialIdent,
    sent_ctl: Arc<TrialControl>,
) -> RxWorkerOut {
    let (epoch_ns, slack) = (setup.epoch_ns, setup.sent_slack);
    let sent: SentSoFar = Box::new(move || sent_ctl.tx_frames_now().saturating_add(slack));
    let mut an =
        Analyzer::new(setup.nflows, epoch_ns, setup.late_ns).with_gap_slots(setup.gap_slots).for_trial(ident, sent);
    an.intervals = setup.grid.clone().map(IntervalCounter::with_latency);
    an.timeline = LatencyTimeline::for_span(setup.timeline_span_ns);
    setup.ready.fetch_add(1, Ordering::Release);
    let mut sink = TrialSink { an, live, epoch_ns, nap };
    let error = receive(&mut *q, &setup.stop, &mut sink, true).err();
    let mut an = sink.an;
    an.flush();
    live.frames.store(an.totals.frames, Ordering::Relaxed);
    if let Some(iv) = an.intervals.as_mut() {
        iv.flush_upto(u64::MAX);
    }
    RxWorkerOut { port, analyzer: an, stats: q.stats(), error }
}

/// The sending: learning frames, the warm-up (signed as warm-up, not counted), the measured run.
/// `trial`: the epoch and the tag.
#[allow(clippy::too_many_arguments)]
fn send_all(
    ports: &mut [Box<dyn Port>],
    cfg: &TrialConfig,
    streams: &[Arc<CompiledStream>],
    mut txq: Vec<(usize, Box<dyn TxQueue>)>,
    tx_cpus: &[usize],
    (epoch_ns, tag): (u64, u32),
    grid: Option<Arc<IntervalGrid>>,
    ctl: &Arc<TrialControl>,
) -> Vec<(usize, TxWorkerResult)> {
    // From the start time to the workers' spawn this thread is ordinary (see the RX workers' spawn):
    // it sleeps in the join after that, which costs nothing.
    let _spawning = cpu::OrdinaryWhile::enter();
    // Learning frames: a broadcast from each stream's destination MAC out of its RX port.
    if cfg.learning && cfg.receive {
        ctl.set_phase(Phase::Learning);
        send_learning(ports, streams);
    }
    let phases = cfg.run_phases();
    let run = |start_ns, phases, grid, warmup| Run {
        epoch_ns,
        start_ns,
        phases,
        all_phased: warmup,
        pacing: cfg.pacing,
        grid,
        warmup,
        trial: tag,
    };
    if cfg.warmup_ns > 0 && !ctl.stopped() {
        ctl.set_phase(Phase::Warmup);
        let scale = phases.first().map_or(1.0, |p| p.rate_scale);
        let warmup = vec![RatePhase { duration_ns: cfg.warmup_ns, rate_scale: scale }];
        let shape = RunShape::Phases { phases: warmup, max_stretch_ns: 0 };
        let _ = run_tx_all(&mut txq, streams, tx_cpus, &run(clock::now_ns() + 1_000_000, shape, None, true), ctl);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    ctl.set_phase(Phase::Running);
    let start = clock::now_ns() + 2_000_000;
    ctl.run_start_ns.store(start, Ordering::Relaxed);
    let planned_ns: u64 = phases.iter().map(|p| p.duration_ns).sum();
    let max_stretch_ns = (planned_ns as f64 * cfg.max_stretch_ratio) as u64;
    let shape = RunShape::Phases { phases, max_stretch_ns };
    run_tx_all(&mut txq, streams, tx_cpus, &run(start, shape, grid, false), ctl)
}

/// The drain: frames in flight get `drain_ns` to arrive. It ends sooner when every one of the
/// `sent` frames has arrived (nothing is in flight: the receivers counted each once, on time or
/// late), or when the trial is stopped. Returns how long it waited, ns.
fn drain(drain_ns: u64, sent: u64, ctl: &TrialControl) -> u64 {
    ctl.set_phase(Phase::Draining);
    let begin = clock::now_ns();
    let drain_end = begin + drain_ns;
    let all_arrived = || sent > 0 && ctl.rx_arrived_now() >= sent;
    while clock::now_ns() < drain_end && !ctl.stopped() && !all_arrived() {
        std::thread::sleep(
            std::time::Duration::from_millis(5)
                .min(std::time::Duration::from_nanos(drain_end.saturating_sub(clock::now_ns()))),
        );
    }
    clock::now_ns().saturating_sub(begin).min(drain_ns)
}

/// What [`collect`] needs to know about the run besides the workers' counts.
struct RunFacts {
    tag: u32,
    tx_cpus: Vec<usize>,
    rx_cpus: Vec<usize>,
    started_realtime_ns: u64,
    interrupted: bool,
    /// How long the drain waited (see [`TrialResult::drain_s`]).
    drained_ns: u64,
    /// What was seen of every port's link.
    links: Vec<LinkWatch>,
    grid: Option<Arc<IntervalGrid>>,
    epoch_ns: u64,
    run_start_ns: u64,
    /// The resident set's growth over the run (see [`TrialResult::flow_memory_bytes`]).
    flow_memory_bytes: u64,
    /// Workers the kernel would not pin.
    pin_failures: Vec<PinFailure>,
}

fn dedup(it: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut v: Vec<usize> = it.collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// How the TX workers of one run (warm-up or the measured run) send.
struct Run {
    epoch_ns: u64,
    start_ns: u64,
    /// The shape of duration-bounded workers.
    phases: RunShape,
    /// Every worker runs `phases`, whatever its streams' stops (warm-up).
    all_phased: bool,
    pacing: Pacing,
    grid: Option<Arc<IntervalGrid>>,
    warmup: bool,
    /// The trial's tag.
    trial: u32,
}

/// The shape of a worker's run: its streams' stop (a duration stop wins: the trial lasts that long).
fn worker_shape(shares: &[TxShare], run: &Run) -> RunShape {
    if run.all_phased || shares.iter().any(|s| matches!(s.stream.config.stop, Stop::Duration { .. })) {
        return run.phases.clone();
    }
    match shares.iter().find_map(|s| match s.stream.config.stop {
        Stop::Bursts { frames, bursts, gap_ns } => Some((frames, bursts, gap_ns)),
        _ => None,
    }) {
        Some((frames, bursts, gap_ns)) => RunShape::Bursts { frames, bursts, gap_ns },
        None => RunShape::Frames,
    }
}

/// Run one TX worker per TX queue (each with the shares of the streams of its port) to the end.
fn run_tx_all(
    txq: &mut [(usize, Box<dyn TxQueue>)],
    streams: &[Arc<CompiledStream>],
    tx_cpus: &[usize],
    run: &Run,
    ctl: &Arc<TrialControl>,
) -> Vec<(usize, TxWorkerResult)> {
    // Distribute every stream of port p over p's queues.
    let mut plans: Vec<Vec<crate::traffic::tx::TxShare>> = txq.iter().map(|_| Vec::new()).collect();
    for s in streams {
        let qs: Vec<usize> =
            txq.iter().enumerate().filter(|(_, (p, _))| *p == s.config.tx_port).map(|(i, _)| i).collect();
        for (k, share) in split_stream(s, qs.len() as u64).into_iter().enumerate() {
            plans[qs[k]].push(share);
        }
    }
    let lives: Vec<Arc<TxLive>> = txq.iter().map(|_| Arc::new(TxLive::default())).collect();
    *ctl.tx_live.lock().unwrap_or_else(|e| e.into_inner()) = lives.clone();
    // Worker queues are lent to scoped threads and returned with the results.
    let busy: Vec<bool> = plans.iter().map(|p| !p.is_empty()).collect();
    std::thread::scope(|inner| {
        let mut handles = Vec::new();
        for (i, ((port, q), shares)) in txq.iter_mut().zip(plans).enumerate() {
            if shares.is_empty() {
                continue;
            }
            let plan = TxPlan {
                shape: worker_shape(&shares, run),
                shares,
                epoch_ns: run.epoch_ns,
                start_ns: run.start_ns,
                pacing: run.pacing,
                intervals: run.grid.clone(),
                warmup: run.warmup,
                trial: run.trial,
                cpu_shared: tx_cpus.iter().enumerate().any(|(j, &c)| j != i && c == tx_cpus[i] && busy[j]),
            };
            let cpu_id = tx_cpus[i];
            let live = lives[i].clone();
            let port = *port;
            let stop = &ctl.stop;
            handles.push(ctl.pins.spawn_scoped(inner, format!("{TX_WORKER}{i}"), cpu_id, move || {
                crate::pin::for_sending();
                (port, run_tx_worker(&mut **q, plan, stop, &live))
            }));
        }
        handles.into_iter().map(|h| h.join().expect("TX worker panicked")).collect()
    })
}

/// Most learning frames per stream (one per destination MAC of its flows).
const MAX_LEARNING_MACS: u64 = 4096;

/// Learning frames: for each stream one broadcast frame sourced from each of its destination
/// MACs (up to [`MAX_LEARNING_MACS`]), sent out of its RX port, so that a bridge learns where the
/// receiver lives. Best effort.
fn send_learning(ports: &mut [Box<dyn Port>], streams: &[Arc<CompiledStream>]) {
    for s in streams {
        let p = s.config.rx_port;
        let Ok(mut q) = ports[p].open_tx(0) else { continue };
        let base = s.config.dst_mac.0.iter().fold(0u64, |a, &b| a << 8 | u64::from(b));
        for k in 0..u64::from(s.config.flows.dst_macs).min(MAX_LEARNING_MACS) {
            let mut frame = [0u8; 60];
            frame[..6].copy_from_slice(&[0xff; 6]);
            frame[6..12].copy_from_slice(&(base + k).to_be_bytes()[2..]);
            // IEEE local experimental ethertype: nobody acts on it (no signature: foreign).
            frame[12..14].copy_from_slice(&0x88B5u16.to_be_bytes());
            let _ = q.send(1, &mut |buf: &mut [u8]| {
                buf[..60].copy_from_slice(&frame);
                60
            });
        }
        let _ = q.flush();
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_watcher_keeps_off_the_senders_cpus() {
        let allowed = cpu::allowed_cpus();
        assert!(!allowed.is_empty());
        let all: Vec<u32> = allowed.iter().map(|&c| c as u32).collect();
        assert_eq!(off_senders(&[]), all);
        assert_eq!(off_senders(&allowed), Vec::<u32>::new(), "a sender on every CPU: anywhere");
        assert_eq!(off_senders(&allowed[..1]), all[1..].to_vec());
    }

    /// A receiver's bound is its streams' rates, each at most its sending port's line rate; a
    /// sending port without a speed bounds nothing (its streams count 0: the worker naps, watched).
    #[test]
    fn the_receivers_bound_trusts_a_rate_only_on_a_port_with_a_speed() {
        let (a, b) = crate::loopback::pair("lo-a", "lo-b");
        let veth: Vec<Box<dyn Port>> = vec![Box::new(a), Box::new(b)];
        let (a, b) = crate::loopback::pair("lo-a", "lo-b");
        let nic: Vec<Box<dyn Port>> = vec![Box::new(a.with_speed(10_000_000_000)), Box::new(b)];
        let stream = |rate: Rate| {
            let cfg = StreamConfig { rate, rx_port: 1, ..StreamConfig::new("s") };
            Arc::new(compile(0, &cfg, 0, 1514, 2).unwrap())
        };
        let line = line_rate_fps(1e10, 64.0);
        for (rate, on_veth, on_nic) in [(Rate::Pps(1e5), 0.0, 1e5), (Rate::Pps(1e9), 0.0, line), (Rate::Max, 0.0, line)]
        {
            let s = [stream(rate)];
            assert_eq!(rx_bound_fps(&veth, &s, 1), on_veth, "{rate:?} on veth");
            assert_eq!(rx_bound_fps(&nic, &s, 1), on_nic, "{rate:?} from a 10-Gb/s port");
            assert_eq!(rx_bound_fps(&nic, &s, 0), 0.0, "nothing toward the sender");
        }
    }

    #[test]
    fn a_worker_the_kernel_will_not_pin_is_recorded_in_the_result() {
        let ctl = TrialControl::new();
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                // As a sandbox that forbids sched_setaffinity: every worker's pin fails.
                cpu::forbid_affinity_changes().expect("installing a seccomp filter");
                let (a, b) = crate::loopback::pair("lo-a", "lo-b");
                let mut ports: Vec<Box<dyn Port>> = vec![Box::new(a), Box::new(b)];
                let mut st = StreamConfig::new("unpinned");
                st.rate = Rate::Pps(100_000.0);
                st.stop = Stop::Frames { count: 1_000 };
                let cfg = TrialConfig {
                    streams: vec![st],
                    drain_ns: 20_000_000,
                    warmup_ns: 10_000_000,
                    tx_cpus: vec![0],
                    rx_cpus: vec![0],
                    ..Default::default()
                };
                run_trial(&mut ports, &cfg, &ctl).unwrap()
            })
            .join()
            .unwrap()
        });
        assert_eq!(r.streams[0].rx_frames, 1_000, "a worker that is not pinned still runs");
        // Each worker once, though the TX worker started twice (warm-up, then the run).
        let who: Vec<(&str, usize)> = r.pin_failures.iter().map(|f| (f.worker.as_str(), f.cpu)).collect();
        assert_eq!(who, [("netrig-rx0", 0), ("netrig-tx0", 0)]);
        assert!(r.pin_failures[0].error.contains("not permitted"), "{}", r.pin_failures[0]);
        assert!(ctl.pins.failures().is_empty(), "taken into the result");
    }

    #[test]
    fn trial_validation_prefixes_stream_fields() {
        let mut cfg = TrialConfig { streams: vec![StreamConfig::new("a")], ..Default::default() };
        cfg.validate(2).unwrap();
        assert_eq!(cfg.validate(0).unwrap_err().field, "ports");
        assert_eq!(cfg.validate(1).unwrap_err().field, "streams[0].rx_port");
        cfg.streams.push(StreamConfig { vlan: Some(0), ..StreamConfig::new("b") });
        assert_eq!(cfg.validate(2).unwrap_err().field, "streams[1].vlan");
        cfg.streams.clear();
        assert_eq!(cfg.validate(2).unwrap_err().field, "streams");
        let big = crate::traffic::flows::FlowSpec { src_ips: 4096, dst_ips: 4096, ..Default::default() };
        cfg.streams = vec![StreamConfig { flows: big, ..StreamConfig::new("a") }; 2];
        let e = cfg.validate(2).unwrap_err();
        assert_eq!(e.field, "streams", "{e}");
    }
}
