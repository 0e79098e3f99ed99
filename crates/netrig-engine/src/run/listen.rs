//! Receive only (the rx-only topology): count whatever arrives on some ports for a while, with
//! no stream of this process to compare against.
//!
//! ```text
//! RxQueue (every queue of every port) ──▶ listen worker, pinned ──▶ the trial's analyser with
//!    the policy [`AnyTag`] (`crate::traffic::analyze::Analyzer`):
//!    signed frame:  (trial tag, flow id), numbered as first heard → the trial's per-flow state:
//!                   unique frames, bytes, duplicates, reordered, lowest and highest sequence
//!                   (loss = the span not received)
//!    anything else: (EtherType, IP protocol) → frames, bytes
//! stop (duration or `TrialControl::stop`) → each worker empties its ring for 10 ms → merge
//! ```
//!
//! Without the sender's counts, loss is inferred from sequence numbers: a flow that was heard from
//! sequence `a` to `b` sent `b − a + 1` frames in between, so `missing = b − a + 1 − unique`.
//! Frames sent before the first or after the last one heard are unknowable here and not counted.
//! Flows beyond [`MAX_HEARD_FLOWS`] are counted in `untracked` (frames only): memory stays
//! bounded whatever arrives. Latency is not measured: the sender's clock epoch is unknown.
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use netrig_wire::dissect;
use netrig_wire::signature::{Signature, Site};

use crate::clock;
use crate::error::{ConfigError, EngineError};
use crate::pin::PinFailure;
use crate::port::{Port, RxMeta, RxQueue, RxQueueStats};
use crate::run::trial::{Phase, TrialControl};
use crate::sys::cpu;
use crate::traffic::analyze::{Analyzer, RxTotals, TagPolicy};
use crate::traffic::flowstate::FlowStates;
use crate::traffic::rx::{receive, RxLive, RxSink};

/// Distinct (trial, flow) pairs a listen tracks; more are counted in `untracked`.
pub const MAX_HEARD_FLOWS: usize = 65_536;
/// Sequence window per heard flow, bits (duplicates further back count as reordered).
const HEARD_WINDOW_BITS: usize = 4096;
/// Longest listen: a day.
pub const MAX_LISTEN_NS: u64 = 86_400_000_000_000;

/// What to listen for.
#[derive(Debug, Clone, Default)]
pub struct ListenConfig {
    /// How long, ns.
    pub duration_ns: u64,
    /// CPUs for the workers (in turn); empty: the engine's default placement.
    pub cpus: Vec<usize>,
}

impl ListenConfig {
    pub fn validate(&self, n_ports: usize) -> Result<(), ConfigError> {
        if n_ports == 0 {
            return Err(ConfigError::new("ports", "a listen needs at least one port"));
        }
        if self.duration_ns == 0 || self.duration_ns > MAX_LISTEN_NS {
            return Err(ConfigError::new("duration_s", "must be above 0 and at most a day (86400 s)"));
        }
        let ncpu = cpu::online_cpus();
        if let Some(&c) = self.cpus.iter().find(|&&c| c >= ncpu) {
            return Err(ConfigError::new("rx_cpus", format!("CPU {c} does not exist (CPUs 0-{})", ncpu - 1)));
        }
        Ok(())
    }
}

/// One flow of signed frames heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeardFlow {
    /// The sender's trial tag (23 bits).
    pub trial: u32,
    pub flow_id: u32,
    /// Unique frames.
    pub frames: u64,
    pub bytes: u64,
    pub duplicated: u64,
    pub reordered: u64,
    /// Lowest and highest sequence heard.
    pub first_seq: u64,
    pub last_seq: u64,
    /// Sequence numbers between the two that never arrived.
    pub missing: u64,
    /// Warm-up frames of the flow (counted apart, not in `frames`).
    pub warmup: u64,
}

/// Frames without a netrig signature of one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForeignKind {
    pub ethertype: u16,
    /// IP protocol (IPv4) or next header (IPv6).
    pub ip_proto: Option<u8>,
    pub frames: u64,
    pub bytes: u64,
}

/// One port's part of a listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenPort {
    pub name: String,
    pub backend: String,
    pub frames: u64,
    pub bytes: u64,
    /// Frames lost in the tester's own rings (never the sender's or the network's loss).
    pub ring_drops: u64,
}

/// What a listen heard.
#[derive(Debug, Clone, PartialEq)]
pub struct ListenResult {
    pub duration_ns: u64,
    pub started_realtime_ns: u64,
    pub interrupted: bool,
    pub ports: Vec<ListenPort>,
    /// By (trial, flow).
    pub flows: Vec<HeardFlow>,
    /// By (EtherType, IP protocol).
    pub foreign: Vec<ForeignKind>,
    /// Signed frames of flows beyond [`MAX_HEARD_FLOWS`].
    pub untracked: u64,
    pub cpus: Vec<usize>,
    /// The first error of a worker, if one stopped early.
    pub error: Option<String>,
    /// Workers that do not run on their CPU (`cpus`): the kernel refused the pin (see
    /// `crate::pin`); empty when every worker was pinned.
    pub pin_failures: Vec<PinFailure>,
}

impl ListenResult {
    pub fn frames(&self) -> u64 {
        self.ports.iter().map(|p| p.frames).sum()
    }
    pub fn signed_frames(&self) -> u64 {
        self.flows.iter().map(|f| f.frames + f.duplicated + f.warmup).sum::<u64>() + self.untracked
    }
    pub fn foreign_frames(&self) -> u64 {
        self.foreign.iter().map(|f| f.frames).sum()
    }
    pub fn missing(&self) -> u64 {
        self.flows.iter().map(|f| f.missing).sum()
    }
}

/// A listen's frames ([`TagPolicy`]): any tag. A flow is a (trial, flow id) pair, numbered as it
/// is first heard, up to the analyser's flows ([`MAX_HEARD_FLOWS`]; frames of more are counted
/// `untracked`), with a window of [`HEARD_WINDOW_BITS`]. No latency: the sender's epoch is unknown.
/// Beside the flows' state: each flow's lowest sequence and warm-up frames, and the foreign frames
/// by kind.
pub struct AnyTag {
    index: HashMap<(u32, u32), u32>,
    keys: Vec<(u32, u32)>,
    first_seq: Vec<u64>,
    warmup: Vec<u64>,
    foreign: BTreeMap<(u16, u16), (u64, u64)>,
    untracked: u64,
    /// The flow of the frame before (frames of one flow often come in runs): no lookup. A tag
    /// has 23 bits: no frame's key is the initial one.
    last: ((u32, u32), usize),
}

impl AnyTag {
    /// Flow `key`'s number, given one if it is new and fewer than `nflows` are heard; `None`:
    /// untracked (counted).
    fn index_of(&mut self, key: (u32, u32), nflows: usize) -> Option<usize> {
        if let Some(&i) = self.index.get(&key) {
            return Some(i as usize);
        }
        if self.keys.len() >= nflows {
            self.untracked += 1;
            return None;
        }
        self.index.insert(key, self.keys.len() as u32);
        self.keys.push(key);
        self.first_seq.push(u64::MAX);
        self.warmup.push(0);
        Some(self.keys.len() - 1)
    }
}

impl TagPolicy for AnyTag {
    const SITE: Site = Site::Payload;
    const SHARED_HISTS: bool = false;
    const UNTIMED_FRAMES: bool = false;

    fn states(nflows: usize) -> FlowStates {
        FlowStates::with_window(nflows, HEARD_WINDOW_BITS, 0, || unreachable!("no histograms"))
    }

    fn foreign(&mut self, frame: &[u8], wire: u64) {
        let (et, proto) = dissect::classify(frame).unwrap_or((0, None));
        let k = self.foreign.entry((et, proto.map_or(u16::MAX, u16::from))).or_default();
        (k.0, k.1) = (k.0 + 1, k.1 + wire);
    }

    #[inline]
    fn admit(&mut self, sig: &Signature, nflows: usize, _: &mut RxTotals) -> Option<(usize, bool)> {
        let key = (sig.trial, sig.flow_id);
        let i = if self.last.0 == key { self.last.1 } else { self.index_of(key, nflows)? };
        self.last = (key, i);
        if sig.warmup {
            self.warmup[i] += 1;
            return None;
        }
        Some((i, false))
    }

    #[inline(always)]
    fn plausible(&mut self, _: usize, _: u64, _: &mut RxTotals) -> bool {
        true
    }

    #[inline(always)]
    fn stamped(&mut self, _: u64, _: u64, _: &mut RxTotals) -> Option<u64> {
        Some(0)
    }

    #[inline(always)]
    fn arrived(&mut self, flow: usize, seq: u64, _: u64) {
        self.first_seq[flow] = self.first_seq[flow].min(seq);
    }
}

/// One worker's counts.
pub struct Heard {
    an: Analyzer<AnyTag>,
}

impl Default for Heard {
    fn default() -> Self {
        Self::new()
    }
}

impl Heard {
    pub fn new() -> Self {
        let policy = AnyTag {
            index: HashMap::new(),
            keys: Vec::new(),
            first_seq: Vec::new(),
            warmup: Vec::new(),
            foreign: BTreeMap::new(),
            untracked: 0,
            last: ((u32::MAX, u32::MAX), usize::MAX),
        };
        Heard { an: Analyzer::with_policy(MAX_HEARD_FLOWS, 0, u64::MAX, policy) }
    }

    /// Count one received frame (`frame` without FCS), at the next [`Self::flush`].
    #[inline]
    pub fn frame(&mut self, frame: &[u8]) {
        self.an.push(frame, RxMeta::default());
    }

    /// Count the frames taken.
    pub fn flush(&mut self) {
        self.an.flush();
    }

    /// Add another worker's counts (the same flow on two queues merges by totals; its span is
    /// the union of both).
    fn merge_into(self, flows: &mut HashMap<(u32, u32), HeardFlow>, foreign: &mut BTreeMap<(u16, u16), (u64, u64)>) {
        let (states, pol) = (&self.an.flows, &self.an.policy);
        for (i, &(trial, flow_id)) in pol.keys.iter().enumerate() {
            let (n, c) = (states.counts(i), states.cold(i));
            let f = flows.entry((trial, flow_id)).or_insert(HeardFlow {
                trial,
                flow_id,
                frames: 0,
                bytes: 0,
                duplicated: 0,
                reordered: 0,
                first_seq: u64::MAX,
                last_seq: 0,
                missing: 0,
                warmup: 0,
            });
            (f.frames, f.bytes) = (f.frames + n.received, f.bytes + n.bytes);
            (f.duplicated, f.reordered, f.warmup) =
                (f.duplicated + c.duplicated, f.reordered + c.reordered, f.warmup + pol.warmup[i]);
            if n.received > 0 {
                f.first_seq = f.first_seq.min(pol.first_seq[i]);
                f.last_seq = f.last_seq.max(states.hot[i].next_seq - 1);
            }
        }
        for (k, (n, b)) in &pol.foreign {
            let e = foreign.entry(*k).or_default();
            (e.0, e.1) = (e.0 + n, e.1 + b);
        }
    }

    fn totals(&self) -> &RxTotals {
        &self.an.totals
    }
}

struct WorkerOut {
    port: usize,
    heard: Heard,
    stats: RxQueueStats,
    error: Option<String>,
}

/// Listen on every queue of `ports` until `cfg.duration_ns` has passed or `ctl` is stopped.
pub fn run_listen(
    ports: &mut [Box<dyn Port>],
    cfg: &ListenConfig,
    ctl: &Arc<TrialControl>,
) -> Result<ListenResult, EngineError> {
    cfg.validate(ports.len())?;
    ctl.set_phase(Phase::Setup);
    // Opening rings is setup, not bookkeeping (sys::cpu::OrdinaryWhile), as in a trial.
    let rxq = {
        let _setup = cpu::OrdinaryWhile::enter();
        open_every_rx(ports)?
    };
    let cpus = listen_cpus(cfg, rxq.len());
    let lives: Vec<Arc<RxLive>> = rxq.iter().map(|_| Arc::new(RxLive::default())).collect();
    *ctl.rx_live.lock().unwrap_or_else(|e| e.into_inner()) = lives.clone();
    let started_realtime_ns = clock::realtime_ns();
    let start = clock::now_ns();
    ctl.run_start_ns.store(start, Ordering::Relaxed);
    ctl.set_phase(Phase::Running);
    let outs = listen_on(rxq, &cpus, &lives, start + cfg.duration_ns, ctl);
    let duration_ns = clock::now_ns().saturating_sub(start);
    ctl.set_phase(Phase::Done);
    let heard = merge_workers(ports, outs);
    Ok(ListenResult {
        duration_ns,
        started_realtime_ns,
        interrupted: ctl.stopped(),
        cpus,
        pin_failures: ctl.pins.take(),
        ..heard
    })
}

/// A receive queue, with its port's index.
type PortQueue = (usize, Box<dyn RxQueue>);

/// Every receive queue of every port.
fn open_every_rx(ports: &mut [Box<dyn Port>]) -> Result<Vec<PortQueue>, EngineError> {
    let mut rxq = Vec::new();
    for (p, port) in ports.iter_mut().enumerate() {
        for q in 0..port.caps().rx_queues {
            rxq.push((p, port.open_rx(q)?));
        }
    }
    Ok(rxq)
}

/// The CPU of each of `n` workers: `cfg.cpus` in turn, or the lower half of the CPUs (where a
/// trial's receivers go).
fn listen_cpus(cfg: &ListenConfig, n: usize) -> Vec<usize> {
    let ncpu = cpu::online_cpus();
    (0..n)
        .map(|i| if cfg.cpus.is_empty() { i % ncpu.div_ceil(2).max(1) } else { cfg.cpus[i % cfg.cpus.len()] })
        .collect()
}

/// Run one pinned worker per queue until `end` (engine clock), a stop, or a worker's end.
fn listen_on(
    rxq: Vec<PortQueue>,
    cpus: &[usize],
    lives: &[Arc<RxLive>],
    end: u64,
    ctl: &TrialControl,
) -> Vec<WorkerOut> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (i, (port, q)) in rxq.into_iter().enumerate() {
            let (stop, live) = (&stop, lives[i].clone());
            let worker = move || listen_worker(port, q, stop, &live);
            handles.push(ctl.pins.spawn_scoped(scope, format!("netrig-listen{i}"), cpus[i], worker));
        }
        while clock::now_ns() < end && !ctl.stopped() && !handles.iter().any(|h| h.is_finished()) {
            std::thread::sleep(std::time::Duration::from_nanos(end.saturating_sub(clock::now_ns()).min(5_000_000)));
        }
        stop.store(true, Ordering::SeqCst);
        handles.into_iter().map(|h| h.join().expect("listen worker panicked")).collect()
    })
}

/// What a listen's worker does with a batch: count every frame, publish the count.
struct HeardSink<'a> {
    heard: Heard,
    live: &'a RxLive,
}

impl RxSink for HeardSink<'_> {
    #[inline(always)]
    fn frame(&mut self, f: &[u8], _: RxMeta) {
        self.heard.frame(f);
    }

    fn batch(&mut self, _: &mut dyn RxQueue, _: usize, _: u64, draining: bool) {
        self.heard.flush();
        if !draining {
            self.live.frames.store(self.heard.totals().frames, Ordering::Relaxed);
        }
    }
}

/// One worker: count what arrives on `q` until `stop`, then what is left in the tester's ring.
fn listen_worker(port: usize, mut q: Box<dyn RxQueue>, stop: &AtomicBool, live: &RxLive) -> WorkerOut {
    let mut sink = HeardSink { heard: Heard::new(), live };
    let error = receive(&mut *q, stop, &mut sink, true).err();
    sink.heard.flush();
    live.frames.store(sink.heard.totals().frames, Ordering::Relaxed);
    WorkerOut { port, heard: sink.heard, stats: q.stats(), error }
}

/// The workers' counts together: per port, per (trial, flow), per kind of foreign frame (the
/// run's times, CPUs and pins are left for the caller).
fn merge_workers(ports: &[Box<dyn Port>], outs: Vec<WorkerOut>) -> ListenResult {
    let mut port_out: Vec<ListenPort> = ports
        .iter()
        .map(|p| ListenPort {
            name: p.caps().name.clone(),
            backend: p.caps().backend.to_string(),
            frames: 0,
            bytes: 0,
            ring_drops: 0,
        })
        .collect();
    let mut flows = HashMap::new();
    let mut foreign = BTreeMap::new();
    let mut untracked = 0;
    let mut error = None;
    for o in outs {
        let p = &mut port_out[o.port];
        p.frames += o.heard.totals().frames;
        p.bytes += o.heard.totals().bytes;
        p.ring_drops += o.stats.ring_drops;
        untracked += o.heard.an.policy.untracked;
        error = error.or(o.error);
        o.heard.merge_into(&mut flows, &mut foreign);
    }
    let mut flows: Vec<HeardFlow> = flows
        .into_values()
        .map(|mut f| {
            if f.frames > 0 {
                f.missing = (f.last_seq - f.first_seq + 1).saturating_sub(f.frames);
            } else {
                (f.first_seq, f.last_seq) = (0, 0);
            }
            f
        })
        .collect();
    flows.sort_unstable_by_key(|f| (f.trial, f.flow_id));
    let foreign = foreign
        .into_iter()
        .map(|((ethertype, p), (frames, bytes))| ForeignKind {
            ethertype,
            ip_proto: (p != u16::MAX).then_some(p as u8),
            frames,
            bytes,
        })
        .collect();
    ListenResult {
        duration_ns: 0,
        started_realtime_ns: 0,
        interrupted: false,
        ports: port_out,
        flows,
        foreign,
        untracked,
        cpus: Vec::new(),
        error,
        pin_failures: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_wire::signature::Signature;

    fn signed(trial: u32, flow: u32, seq: u64) -> Vec<u8> {
        // A raw-L2 frame (EtherType 0x88b5): the signature right after the Ethernet header.
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        let sig = Signature { trial, warmup: false, flow_id: flow, seq, tx_ts_ns: 1 };
        sig.emit(&mut f[14..]);
        f
    }

    #[test]
    fn counts_flows_by_sequence_and_foreign_frames_by_kind() {
        let mut h = Heard::new();
        for seq in [10u64, 11, 13, 12, 13, 16] {
            h.frame(&signed(7, 1, seq));
        }
        h.frame(&signed(7, 2, 0));
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        h.frame(&arp);
        h.frame(&arp);
        h.flush();
        let mut flows = HashMap::new();
        let mut foreign = BTreeMap::new();
        h.merge_into(&mut flows, &mut foreign);
        let f = flows[&(7, 1)];
        // 10..=16 is 7 sequence numbers; 10, 11, 12, 13, 16 arrived (13 twice): 14, 15 missing.
        assert_eq!((f.frames, f.duplicated, f.reordered, f.first_seq, f.last_seq), (5, 1, 1, 10, 16));
        assert_eq!(flows[&(7, 2)].frames, 1);
        assert_eq!(foreign[&(0x0806, u16::MAX)], (2, 128));
    }

    #[test]
    fn flows_beyond_the_limit_are_counted_untracked() {
        let mut h = Heard::new();
        for flow in 0..(MAX_HEARD_FLOWS as u32 + 3) {
            h.frame(&signed(1, flow, 0));
        }
        h.flush();
        assert_eq!((h.an.policy.keys.len(), h.an.policy.untracked), (MAX_HEARD_FLOWS, 3));
    }

    /// The per-frame cost of a listen's counting, pinned, best of 5 (`cargo test --release --lib
    /// -- --ignored listen_cost --nocapture`): 1 and 4096 flows, frames round robin over the flows.
    #[test]
    #[ignore = "timing: run alone, pinned"]
    fn listen_cost() {
        crate::pin::PinLog::new().pin_self(1);
        for n in [1u64, 4096] {
            let mut h = Heard::new();
            let mut f = signed(3, 0, 0);
            let (total, mut best, mut k) = (4_000_000u64, f64::MAX, 0u64);
            for _ in 0..5 {
                let t = std::time::Instant::now();
                for _ in 0..total {
                    let sig = Signature { trial: 3, warmup: false, flow_id: (k % n) as u32, seq: k / n, tx_ts_ns: 1 };
                    sig.emit(&mut f[14..]);
                    h.frame(std::hint::black_box(&f));
                    k += 1;
                    if k.is_multiple_of(256) {
                        h.flush();
                    }
                }
                best = best.min(t.elapsed().as_nanos() as f64 / total as f64);
            }
            println!("listen_cost flows {n}: {best:.1} ns per frame");
        }
    }

    #[test]
    fn a_listen_records_the_workers_the_kernel_would_not_pin() {
        let listen = |forbid: bool| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    if forbid {
                        // As a sandbox that forbids sched_setaffinity.
                        cpu::forbid_affinity_changes().expect("installing a seccomp filter");
                    }
                    let (_, b) = crate::loopback::pair("lo-a", "lo-b");
                    let mut ports: Vec<Box<dyn Port>> = vec![Box::new(b)];
                    let cfg = ListenConfig { duration_ns: 10_000_000, cpus: vec![0] };
                    run_listen(&mut ports, &cfg, &TrialControl::new()).unwrap()
                })
                .join()
                .unwrap()
            })
        };
        assert_eq!(listen(false).pin_failures, vec![]);
        let r = listen(true);
        assert_eq!(r.pin_failures.len(), 1);
        assert_eq!((r.pin_failures[0].worker.as_str(), r.pin_failures[0].cpu), ("netrig-listen0", 0));
        assert_eq!(r.cpus, vec![0], "where it was placed, not where it ran");
    }

    #[test]
    fn config_is_checked() {
        let c = ListenConfig { duration_ns: 0, cpus: vec![] };
        assert_eq!(c.validate(1).unwrap_err().field, "duration_s");
        let c = ListenConfig { duration_ns: 1, cpus: vec![] };
        assert_eq!(c.validate(0).unwrap_err().field, "ports");
        let c = ListenConfig { duration_ns: 1, cpus: vec![100_000] };
        assert_eq!(c.validate(1).unwrap_err().field, "rx_cpus");
    }
}
