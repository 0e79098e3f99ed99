//! The generator: flows that start, pause, resume and stop independently on ports that stay
//! open, receivers that count continuously, captures on demand (what `netrig serve` drives).
//!
//! ```text
//!  control ── commands (mailbox + epoch, unpark) ──▶ TX worker per TX queue (tx.rs)
//!                                                      flows by next due time → batches
//!                                                      → TxQueue::send → per-flow counters
//!  wire ──▶ RX worker per RX queue of every port (rx.rs) ─▶ capture ring (capring.rs)
//!             → signature at the frame's end → this start's flow? → per-flow state (the
//!               trial's `FlowStates`: sequence window, duplicates, reordering, latency)
//!  readers ◀── TX: sums of the workers' atomics (stats.rs), no lock, any time
//!          ◀── RX: a snapshot each worker answers between batches (an ask wakes an idle one)
//! ```
//!
//! A trial ([`crate::run::trial`]) runs once from start to end; here each flow has its own state and
//! its own tag per start ([`crate::traffic::tags::claim_tag`]), so frames of an earlier start still in
//! flight never count for the current one. [`Generator::open`] validates and compiles every flow
//! and opens every queue before any worker runs; [`Generator::close`] (or dropping it) stops the
//! workers and closes the ports. [`Generator::release`] stops the workers and keeps the ports and
//! their queues open for the next generator on them ([`Generator::open_on`]): a new config on the
//! same ports costs no XDP attach or socket setup (10-25 ms per queue on veth, docs/otg.md).
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use netrig_wire::stack::CompiledStack;

use crate::clock;
use crate::error::{ConfigError, EngineError};
use crate::pin::pick_cpu;
use crate::pin::PinLog;
use crate::port::{LinkSource, Port, PortCaps, RxQueue, TimestampSource, TxQueue, Waiting};
use crate::traffic::stream::{line_rate_fps, MIN_FRAME_SIZE};
use crate::traffic::tags::{claim_tag, TagClaim};

mod capring;
mod flow;
mod rx;
mod stats;
mod tx;

pub use capring::{CaptureRing, CaptureTerm};
pub use flow::{compile_flow, compile_flow_with, Bursts, CompiledFlow, GenDuration, GenFlowConfig, LatencyMode};
pub use stats::{FlowState, FlowStats, PortStats, TxPacing};

pub use rx::FlowBuckets;
use rx::{CaptureCtl, FlowTags, RxFlows, RxWorker, Snapshots};
use stats::{Counters, FlowCtl, PortCounters};
use tx::{post, Cmd, Mailbox, TxWorker};

/// A capture on one port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureConfig {
    pub port: usize,
    /// Bytes kept of each frame.
    pub snaplen: usize,
    /// When the buffer is full, drop the oldest frames (else keep the first ones).
    pub overwrite: bool,
    /// Buffer size per receive queue, bytes.
    pub buffer_bytes: usize,
    /// Keep only the frames that match every term (none: every frame).
    pub filter: Vec<CaptureTerm>,
}

/// Everything a generator runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenConfig {
    pub flows: Vec<GenFlowConfig>,
    pub captures: Vec<CaptureConfig>,
    /// Link speed per port, bit/s, where the port reports none (or to override it): rates in %
    /// of the line rate, frame gaps and latency corrections use it.
    pub line_rates: Vec<Option<u64>>,
    pub tx_cpus: Vec<usize>,
    pub rx_cpus: Vec<usize>,
}

/// Most flows of one generator (a flow id is 24 bits; each flow has counters per RX worker).
pub const MAX_GEN_FLOWS: usize = 1 << 20;
/// Longest a capture start/stop waits for the receivers to act on it.
const CAPTURE_ACK_NS: u64 = 2_000_000_000;

/// A capture's state on one port.
struct PortCapture {
    ctl: Arc<CaptureCtl>,
    /// One buffer per RX worker of the port, and what that worker has acted on.
    rings: Vec<(Arc<Mutex<CaptureRing>>, Arc<AtomicU64>)>,
    configured: bool,
}

/// One open queue: its port, its index on the port, and itself.
enum Queue {
    Tx(usize, usize, Box<dyn TxQueue>),
    Rx(usize, usize, Box<dyn RxQueue>),
}

/// Ports kept open with their queues between generators ([`Generator::release`]).
pub struct OpenPorts {
    ports: Vec<Box<dyn Port>>,
    tx: Vec<(usize, usize, Box<dyn TxQueue>)>,
    rx: Vec<(usize, usize, Box<dyn RxQueue>)>,
}

impl OpenPorts {
    /// Ports just opened, no queue yet.
    pub fn new(ports: Vec<Box<dyn Port>>) -> OpenPorts {
        OpenPorts { ports, tx: Vec::new(), rx: Vec::new() }
    }

    pub fn caps(&self) -> Vec<PortCaps> {
        self.ports.iter().map(|p| p.caps().clone()).collect()
    }

    /// Open what `flows` need and is not open yet: every queue of a port that transmits, every
    /// receive queue of every port (a failure closes everything, leaving nothing running).
    fn fill(&mut self, flows: &[Arc<CompiledFlow>]) -> Result<(), EngineError> {
        let caps = self.caps();
        for (p, port) in self.ports.iter_mut().enumerate() {
            if flows.iter().any(|f| f.config.tx_port == p) {
                for q in 0..caps[p].tx_queues {
                    if !self.tx.iter().any(|t| (t.0, t.1) == (p, q)) {
                        self.tx.push((p, q, port.open_tx(q)?));
                    }
                }
            }
            for q in 0..caps[p].rx_queues {
                if !self.rx.iter().any(|r| (r.0, r.1) == (p, q)) {
                    self.rx.push((p, q, port.open_rx(q)?));
                }
            }
        }
        self.tx.sort_by_key(|t| (t.0, t.1));
        self.rx.sort_by_key(|r| (r.0, r.1));
        Ok(())
    }
}

/// A running generator (see the module doc).
pub struct Generator {
    /// Each flow as it is now (an update replaces one: [`Generator::update`]).
    flows: Mutex<Vec<Arc<CompiledFlow>>>,
    ctl: Arc<[FlowCtl]>,
    tx_pubs: Arc<[Counters]>,
    /// Per RX worker: where it answers with its flows' receive counts.
    rx_snaps: Vec<Arc<Snapshots>>,
    tx_ports: Vec<(usize, Arc<PortCounters>)>,
    rx_ports: Vec<(usize, Arc<PortCounters>)>,
    captures: Vec<PortCapture>,
    /// Per TX worker: its mailbox and thread; per flow: its worker.
    mailboxes: Vec<(Arc<Mailbox>, std::thread::Thread)>,
    worker_of: Vec<usize>,
    claims: Mutex<Vec<Option<TagClaim>>>,
    control: Mutex<()>,
    stop: Arc<AtomicBool>,
    handles: Mutex<Vec<JoinHandle<Queue>>>,
    ports: Mutex<Vec<Box<dyn Port>>>,
    links: Vec<Option<Arc<dyn LinkSource>>>,
    caps: Vec<PortCaps>,
    line_rates: Vec<Option<u64>>,
    epoch_ns: u64,
    realtime_offset_ns: i128,
    errors: Arc<Mutex<Vec<String>>>,
    /// Workers the kernel would not pin (see `crate::pin`).
    pins: Arc<PinLog>,
}

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generator").field("flows", &self.ctl.len()).field("ports", &self.caps.len()).finish()
    }
}

/// Picoseconds per byte at `bps` (0 without a speed).
fn ps_per_byte(bps: Option<u64>) -> u64 {
    bps.filter(|&b| b > 0).map_or(0, |b| 8_000_000_000_000 / b)
}

/// Validate `cfg` against the ports and compile its flows (no resource touched), with the stacks
/// compiled already where `stacks` has them (by flow index). Fields are the config's (`flows[2].rate`,
/// `captures[0].port`).
pub fn prepare(
    caps: &[PortCaps],
    cfg: &GenConfig,
    stacks: &[Option<Arc<CompiledStack>>],
) -> Result<Vec<Arc<CompiledFlow>>, ConfigError> {
    if cfg.flows.len() > MAX_GEN_FLOWS {
        return Err(ConfigError::new("flows", format!("{} flows: at most {MAX_GEN_FLOWS}", cfg.flows.len())));
    }
    let n = caps.len();
    let speed = |p: usize| cfg.line_rates.get(p).copied().flatten().or(caps[p].speed_bps);
    let mut out = Vec::with_capacity(cfg.flows.len());
    for (i, f) in cfg.flows.iter().enumerate() {
        for (name, p) in std::iter::once(("tx_port", f.tx_port)).chain(f.rx_ports.iter().map(|&p| ("rx_ports", p))) {
            if p >= n {
                return Err(ConfigError::new(
                    format!("flows[{i}].{name}"),
                    format!("port {p} does not exist (0..{n})"),
                ));
            }
        }
        let stack = stacks.get(i).cloned().flatten();
        out.push(Arc::new(compile_flow_with(i, f, caps[f.tx_port].max_frame_len, speed(f.tx_port), stack)?));
    }
    for (i, c) in cfg.captures.iter().enumerate() {
        if c.port >= n || c.buffer_bytes < 64 * 1024 {
            return Err(ConfigError::new(
                format!("captures[{i}]"),
                "a capture needs an existing port and a buffer of at least 64 KiB",
            ));
        }
    }
    Ok(out)
}

/// The epoch of the 40-bit transmit stamps: the engine-clock time at which the realtime clock
/// last was a multiple of 2^40 ns, so every process's stamps are realtime ns modulo 2^40 and a
/// frame sent by one agent and received by another has a latency (their clocks' offset in it:
/// docs/distributed.md). Before 2^40 ns (18 min) of uptime: now, stamps then local only.
fn shared_epoch_ns(now_ns: u64, realtime_offset_ns: i128) -> u64 {
    let real = i128::from(now_ns) + realtime_offset_ns;
    let into = (real.max(0) as u64) & netrig_wire::signature::MASK_40;
    now_ns.checked_sub(into).unwrap_or(now_ns)
}

impl Generator {
    /// Validate and compile `cfg` for the opened `ports`, open every queue, start the workers
    /// (idle until a flow starts). Nothing is sent.
    pub fn open(ports: Vec<Box<dyn Port>>, cfg: GenConfig) -> Result<Generator, EngineError> {
        Self::open_with(ports, cfg, &[])
    }

    /// [`Generator::open`] with stacks compiled already (by flow index; see [`prepare`]).
    pub fn open_with(
        ports: Vec<Box<dyn Port>>,
        cfg: GenConfig,
        stacks: &[Option<Arc<CompiledStack>>],
    ) -> Result<Generator, EngineError> {
        Self::open_on(OpenPorts::new(ports), cfg, stacks)
    }

    /// [`Generator::open_with`] on ports open already, with the queues an earlier generator
    /// released ([`Generator::release`]); the queues missing are opened.
    pub fn open_on(
        mut open: OpenPorts,
        cfg: GenConfig,
        stacks: &[Option<Arc<CompiledStack>>],
    ) -> Result<Generator, EngineError> {
        let caps = open.caps();
        let flows = prepare(&caps, &cfg, stacks)?;
        let nflows = flows.len();
        let line_rates: Vec<Option<u64>> =
            (0..caps.len()).map(|p| cfg.line_rates.get(p).copied().flatten().or(caps[p].speed_bps)).collect();
        // Open every queue first: a failure here leaves nothing running.
        open.fill(&flows)?;
        // Again: a port's first receive queue decides where its receive stamps come from.
        let caps = open.caps();
        let OpenPorts { ports, tx: txq, rx: rxq } = open;
        let realtime_offset_ns = clock::RealtimeOffset::measure().0;
        let epoch_ns = shared_epoch_ns(clock::now_ns(), realtime_offset_ns);
        let mut g = Generator {
            ctl: (0..nflows).map(|_| FlowCtl::default()).collect(),
            tx_pubs: flows.iter().map(|f| Counters::with_tags(f.config.tag_period)).collect(),
            rx_snaps: Vec::new(),
            tx_ports: Vec::new(),
            rx_ports: Vec::new(),
            captures: Vec::new(),
            mailboxes: Vec::new(),
            worker_of: vec![0; nflows],
            claims: Mutex::new((0..nflows).map(|_| None).collect()),
            control: Mutex::new(()),
            stop: Arc::new(AtomicBool::new(false)),
            handles: Mutex::new(Vec::new()),
            links: ports.iter().map(|p| p.link()).collect(),
            line_rates,
            caps,
            flows: Mutex::new(flows),
            epoch_ns,
            realtime_offset_ns,
            errors: Arc::new(Mutex::new(Vec::new())),
            pins: Arc::new(PinLog::new()),
            ports: Mutex::new(Vec::new()),
        };
        let tx_cpus: Vec<usize> = (0..txq.len()).map(|i| pick_cpu(&cfg.tx_cpus, i, true)).collect();
        g.spawn_rx(rxq, &cfg, &tx_cpus)?;
        g.spawn_tx(txq, &tx_cpus)?;
        *g.ports.lock().unwrap_or_else(|e| e.into_inner()) = ports;
        Ok(g)
    }

    fn spawn_rx(
        &mut self,
        rxq: Vec<(usize, usize, Box<dyn RxQueue>)>,
        cfg: &GenConfig,
        tx_cpus: &[usize],
    ) -> Result<(), EngineError> {
        let nports = self.caps.len();
        self.captures = (0..nports)
            .map(|p| PortCapture {
                ctl: Arc::new(CaptureCtl::default()),
                rings: Vec::new(),
                configured: cfg.captures.iter().any(|c| c.port == p),
            })
            .collect();
        let flow_ps: Arc<[u64]> = self
            .flows
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|f| match f.config.latency {
                LatencyMode::StoreForward => ps_per_byte(self.line_rates[f.config.tx_port]),
                LatencyMode::CutThrough => 0,
            })
            .collect();
        let periods: Vec<u32> =
            self.flows.get_mut().unwrap_or_else(|e| e.into_inner()).iter().map(|f| f.config.tag_period).collect();
        for (i, (p, qi, mut q)) in rxq.into_iter().enumerate() {
            let snaps = Arc::new(Snapshots::new());
            let port = Arc::new(PortCounters::default());
            let ring = match cfg.captures.iter().find(|c| c.port == p) {
                Some(c) => CaptureRing::new(c.buffer_bytes, c.snaplen, c.overwrite).with_filter(c.filter.clone()),
                None => CaptureRing::default(),
            };
            let (ring, acked) = (Arc::new(Mutex::new(ring)), Arc::new(AtomicU64::new(0)));
            self.captures[p].rings.push((ring.clone(), acked.clone()));
            let cpu_id = pick_cpu(&cfg.rx_cpus, i, false);
            let tags = FlowTags::new(
                (self.ctl.clone(), self.tx_pubs.clone()),
                port.clone(),
                (ps_per_byte(self.line_rates[p]), flow_ps.clone()),
                &periods,
                self.epoch_ns,
            );
            let user_stamps = self.caps[p].rx_timestamp == TimestampSource::User;
            let bound = self.line_rates[p].map_or(0.0, |bps| line_rate_fps(bps as f64, MIN_FRAME_SIZE as f64));
            let waiting = Waiting::new(&mut *q, tx_cpus.contains(&cpu_id), user_stamps, bound, true);
            let w = RxWorker {
                queue: q,
                flows: RxFlows::new(tags),
                snaps: snaps.clone(),
                capture: self.captures[p].ctl.clone(),
                ring,
                acked,
                stop: self.stop.clone(),
                errors: self.errors.clone(),
                waiting,
            };
            let h = spawn(format!("netrig-grx{i}"), cpu_id, self.pins.clone(), move || Queue::Rx(p, qi, w.run()))?;
            self.handles.lock().unwrap_or_else(|e| e.into_inner()).push(h);
            self.rx_snaps.push(snaps);
            self.rx_ports.push((p, port));
        }
        Ok(())
    }

    fn spawn_tx(&mut self, txq: Vec<(usize, usize, Box<dyn TxQueue>)>, cpus: &[usize]) -> Result<(), EngineError> {
        // A port's flows go round robin over its queues.
        let mut share: Vec<Vec<Arc<CompiledFlow>>> = txq.iter().map(|_| Vec::new()).collect();
        let mut next = vec![0usize; self.caps.len()];
        let flows = self.flows.get_mut().unwrap_or_else(|e| e.into_inner()).clone();
        for f in &flows {
            let p = f.config.tx_port;
            let qs: Vec<usize> = txq.iter().enumerate().filter(|(_, (x, _, _))| *x == p).map(|(i, _)| i).collect();
            let w = qs[next[p] % qs.len()];
            next[p] += 1;
            self.worker_of[f.index] = w;
            share[w].push(f.clone());
        }
        for (i, ((p, qi, q), flows)) in txq.into_iter().zip(share).enumerate() {
            let port = Arc::new(PortCounters::default());
            let mailbox = Arc::new(Mailbox::default());
            let w = TxWorker {
                flows,
                ctl: self.ctl.clone(),
                pubs: self.tx_pubs.clone(),
                port: port.clone(),
                mailbox: mailbox.clone(),
                epoch_ns: self.epoch_ns,
                errors: self.errors.clone(),
                cpu_shared: cpus.iter().enumerate().any(|(j, &c)| j != i && c == cpus[i]),
            };
            let h = spawn(format!("netrig-gtx{i}"), cpus[i], self.pins.clone(), move || {
                crate::pin::for_sending();
                Queue::Tx(p, qi, w.run(q))
            })?;
            self.mailboxes.push((mailbox, h.thread().clone()));
            self.handles.lock().unwrap_or_else(|e| e.into_inner()).push(h);
            self.tx_ports.push((p, port));
        }
        Ok(())
    }
}

/// Start worker `name` pinned to `cpu_id` (a failed pin recorded in `pins`, see `crate::pin`).
/// Returns once the worker has pinned itself, so that [`Generator::pin_failures`] read after a
/// start already holds every refused pin (on a busy machine the new thread may not run for ms).
fn spawn<T: Send + 'static>(
    name: String,
    cpu_id: usize,
    pins: Arc<PinLog>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, EngineError> {
    let (pinned, wait) = std::sync::mpsc::sync_channel::<()>(1);
    let h = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            pins.pin_self(cpu_id);
            let _ = pinned.send(());
            f()
        })
        .map_err(|e| EngineError::Worker { name, message: e.to_string() })?;
    let _ = wait.recv();
    Ok(h)
}

mod control;

#[cfg(test)]
mod epoch_tests {
    use super::shared_epoch_ns;
    use netrig_wire::signature::MASK_40;

    #[test]
    fn stamps_are_realtime_modulo_2_40_in_every_process() {
        // Two processes: different monotonic clocks, one realtime clock.
        let real = 1_790_000_000_123_456_789_i128;
        for now in [5_000_000_000_000_u64, 9_876_543_210_123] {
            let offset = real - i128::from(now);
            let epoch = shared_epoch_ns(now, offset);
            let later = now + 777;
            assert_eq!((later - epoch) & MASK_40, ((real + 777) as u64) & MASK_40);
        }
        assert_eq!(shared_epoch_ns(10, (1 << 41) + 100), 10); // too early after boot: local stamps
    }
}
