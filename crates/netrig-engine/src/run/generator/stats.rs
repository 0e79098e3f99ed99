//! What the generator's workers publish and its readers sum: the TX workers' per-flow and every
//! worker's per-port counters as atomics, each written by exactly one worker (no read-modify-write,
//! no lock), read at any time; a TX worker's [`TxPacing`] under a lock, written between batches at
//! most every 20 ms. Receive counts per flow are snapshots the RX workers answer with
//! (`rx.rs`), summed here into [`FlowStats`].
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed, Ordering::Release};
use std::sync::Mutex;

use crate::traffic::pacing::Smoothness;

/// A flow's transmit state, as the control and the TX worker set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FlowState {
    /// Never started, or stopped.
    Stopped = 0,
    Running = 1,
    Paused = 2,
    /// Sent every frame its duration asks for.
    Done = 3,
}

impl From<u8> for FlowState {
    fn from(v: u8) -> FlowState {
        FlowState::from_u8(v)
    }
}

impl FlowState {
    pub fn as_str(self) -> &'static str {
        match self {
            FlowState::Stopped => "stopped",
            FlowState::Running => "running",
            FlowState::Paused => "paused",
            FlowState::Done => "done",
        }
    }

    pub fn from_u8(v: u8) -> FlowState {
        match v {
            1 => FlowState::Running,
            2 => FlowState::Paused,
            3 => FlowState::Done,
            _ => FlowState::Stopped,
        }
    }
}

/// A flow's control word and its current tag (the signature's nonce of its current start).
#[derive(Debug, Default)]
pub struct FlowCtl {
    state: AtomicU8,
    pub(crate) tag: AtomicU32,
}

impl FlowCtl {
    pub fn state(&self) -> FlowState {
        FlowState::from_u8(self.state.load(Relaxed))
    }

    pub(crate) fn set_state(&self, s: FlowState) {
        self.state.store(s as u8, Release);
    }
}

/// A flow's transmit counters, written by its TX worker. `tag` says which start of the flow they
/// count: a reader counts them only when it is the flow's current tag (the worker resets them
/// when it starts a new one: zeros first, then the tag).
#[derive(Debug)]
pub struct Counters {
    pub tag: AtomicU32,
    pub frames: AtomicU64,
    pub bytes: AtomicU64,
    /// Engine-clock times of the first and last frame (0: none).
    pub first_ns: AtomicU64,
    pub last_ns: AtomicU64,
    /// Frames sent without room for the signature (untracked: counted per port, never received
    /// per flow).
    pub untracked: AtomicU64,
    /// Frames per frame index modulo its length (a flow with tagged fields; empty otherwise).
    pub tags: Box<[AtomicU64]>,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            tag: AtomicU32::new(u32::MAX),
            frames: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            first_ns: AtomicU64::new(0),
            last_ns: AtomicU64::new(0),
            untracked: AtomicU64::new(0),
            tags: Box::new([]),
        }
    }
}

impl Counters {
    /// Counters of a flow whose frames are also counted per index modulo `tag_period` (0: not).
    pub(crate) fn with_tags(tag_period: u32) -> Counters {
        Counters { tags: (0..tag_period).map(|_| AtomicU64::new(0)).collect(), ..Counters::default() }
    }

    /// Zero the counters for a new start tagged `tag` (the writer only).
    pub(crate) fn reset(&self, tag: u32) {
        for a in [&self.frames, &self.bytes, &self.first_ns, &self.last_ns, &self.untracked] {
            a.store(0, Relaxed);
        }
        for a in self.tags.iter() {
            a.store(0, Relaxed);
        }
        self.tag.store(tag, Release);
    }

    /// Count one frame of `bytes` at `now` (the writer only: plain loads and stores).
    #[inline(always)]
    pub(crate) fn count(&self, bytes: u64, now: u64) {
        self.frames.store(self.frames.load(Relaxed) + 1, Relaxed);
        self.bytes.store(self.bytes.load(Relaxed) + bytes, Relaxed);
        if self.first_ns.load(Relaxed) == 0 {
            self.first_ns.store(now, Relaxed);
        }
        self.last_ns.store(now, Relaxed);
    }

    /// Count frame `index` of the flow's start at its index modulo the tag period (the writer
    /// only; nothing without tags).
    #[inline(always)]
    pub(crate) fn count_tag(&self, index: u64) {
        if !self.tags.is_empty() {
            let a = &self.tags[(index % self.tags.len() as u64) as usize];
            a.store(a.load(Relaxed) + 1, Relaxed);
        }
    }

    /// Add the per-index counts to `into` (a reader).
    pub(crate) fn add_tags(&self, into: &mut [u64]) {
        for (x, a) in into.iter_mut().zip(self.tags.iter()) {
            *x += a.load(Relaxed);
        }
    }
}

/// Per-port totals of one worker.
#[derive(Debug, Default)]
pub struct PortCounters {
    pub frames: AtomicU64,
    pub bytes: AtomicU64,
    /// Receive side: frames without a signature at their end.
    pub foreign: AtomicU64,
    /// Receive side: signed frames that are not a current start of one of this generator's flows.
    pub stale: AtomicU64,
    /// Receive side: frames the tester's own ring dropped.
    pub ring_drops: AtomicU64,
    /// Receive side: frames of a current start of a flow this generator sends that it cannot have
    /// sent (a sequence number it had not reached, a transmit stamp from the future), and the
    /// starts of flows sent elsewhere seen (their frames cannot be judged so).
    pub forged: AtomicU64,
    pub unjudged: AtomicU64,
    /// Transmit side: how the worker kept its schedule, published between batches.
    pub pacing: Mutex<TxPacing>,
}

/// How a port's TX workers kept their schedule since their flows last started from idle (the
/// trial's pacing, for served flows).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TxPacing {
    /// Frames sent since then (0: the rest means nothing).
    pub frames: u64,
    /// The most any flow's schedule is behind its plan: the time it fell behind by more than its
    /// depth, less what smooth pacing gave back since, so its last frame leaves that much later
    /// than planned, ns.
    pub stretch_ns: u64,
    /// The longest the first frame of a run waited after it fell due before it reached the queue,
    /// ns, as a trial's worker measures it (a worker's frames wait up to its hold by design, so
    /// that it sends a few at a time).
    pub max_lag_ns: u64,
    /// The offered-load meter's peak 1-ms window against the running flows' rates, and the
    /// inter-departure gaps.
    pub smoothness: Smoothness,
}

impl TxPacing {
    /// Two workers of one port: the larger of each, the more bunched peak.
    pub fn merge(self, o: TxPacing) -> TxPacing {
        TxPacing {
            frames: self.frames + o.frames,
            stretch_ns: self.stretch_ns.max(o.stretch_ns),
            max_lag_ns: self.max_lag_ns.max(o.max_lag_ns),
            smoothness: Smoothness {
                gap_p50_ns: self.smoothness.gap_p50_ns.max(o.smoothness.gap_p50_ns),
                gap_p99_ns: self.smoothness.gap_p99_ns.max(o.smoothness.gap_p99_ns),
                gap_max_ns: self.smoothness.gap_max_ns.max(o.smoothness.gap_max_ns),
                ..self.smoothness.worse(o.smoothness)
            },
        }
    }
}

impl PortCounters {
    #[inline(always)]
    pub(crate) fn add(a: &AtomicU64, n: u64) {
        a.store(a.load(Relaxed) + n, Relaxed);
    }
}

/// One flow's receive counts in one worker's snapshot: the start `tag` counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RxSnap {
    pub tag: u32,
    /// Every arrival of the start, duplicates included, and their bytes.
    pub frames: u64,
    pub bytes: u64,
    /// Of `frames`: sequences seen before, and sequences below the highest seen.
    pub duplicated: u64,
    pub reordered: u64,
    /// Engine-clock times of the first and last arrival (0: none).
    pub first_ns: u64,
    pub last_ns: u64,
    /// Latency of the unique frames that have one, ns (`lat_min` u64::MAX: none).
    pub lat_sum: u64,
    pub lat_min: u64,
    pub lat_max: u64,
    pub lat_frames: u64,
    /// |IPDV| between consecutive latencies of this worker's frames: sum and maximum, ns.
    pub ipdv_sum: u64,
    pub ipdv_max: u64,
}

impl Default for RxSnap {
    fn default() -> Self {
        RxSnap {
            tag: u32::MAX,
            frames: 0,
            bytes: 0,
            duplicated: 0,
            reordered: 0,
            first_ns: 0,
            last_ns: 0,
            lat_sum: 0,
            lat_min: u64::MAX,
            lat_max: 0,
            lat_frames: 0,
            ipdv_sum: 0,
            ipdv_max: 0,
        }
    }
}

/// A flow's counts, as a reader sees them (sums over the workers of its current tag).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowStats {
    pub state: u8,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub tx_first_ns: u64,
    pub tx_last_ns: u64,
    /// Of `tx_frames`, those sent without room for the signature (never counted as received).
    pub tx_untracked: u64,
    /// Every arrival of the current start (duplicates included) and its bytes.
    pub rx_frames: u64,
    pub rx_bytes: u64,
    /// Of `rx_frames`: sequences that had arrived before, and sequences below the highest that
    /// had (per RX worker's sequence window, as a trial counts them).
    pub rx_duplicated: u64,
    pub rx_reordered: u64,
    pub rx_first_ns: u64,
    pub rx_last_ns: u64,
    /// Latency of the received frames, ns (min 0 and max 0 when none).
    pub latency_min_ns: u64,
    pub latency_max_ns: u64,
    pub latency_sum_ns: u64,
    /// Frames the latency sum is over (every unique received frame with a plausible stamp).
    pub latency_frames: u64,
    /// |IPDV| (RFC 5481) between consecutive latencies as each RX worker saw them: sum, number
    /// and maximum, ns. Two hosts' clocks' offset cancels out of it.
    pub ipdv_sum_ns: u64,
    pub ipdv_samples: u64,
    pub ipdv_max_ns: u64,
}

impl FlowStats {
    /// Add a flow's transmit counters (their tag already checked).
    pub(crate) fn add_tx(&mut self, c: &Counters) {
        let frames = c.frames.load(Relaxed);
        if frames == 0 {
            return;
        }
        self.tx_frames += frames;
        self.tx_bytes += c.bytes.load(Relaxed);
        self.tx_first_ns = earliest(self.tx_first_ns, c.first_ns.load(Relaxed));
        self.tx_last_ns = self.tx_last_ns.max(c.last_ns.load(Relaxed));
        self.tx_untracked += c.untracked.load(Relaxed);
    }

    /// Add one RX worker's snapshot of the flow (its tag already checked).
    pub(crate) fn add_rx(&mut self, r: &RxSnap) {
        if r.frames == 0 {
            return;
        }
        self.rx_frames += r.frames;
        self.rx_bytes += r.bytes;
        self.rx_duplicated += r.duplicated;
        self.rx_reordered += r.reordered;
        self.rx_first_ns = earliest(self.rx_first_ns, r.first_ns);
        self.rx_last_ns = self.rx_last_ns.max(r.last_ns);
        if r.lat_frames > 0 {
            let had = self.latency_frames > 0;
            self.latency_min_ns = if had { self.latency_min_ns.min(r.lat_min) } else { r.lat_min };
            self.latency_max_ns = self.latency_max_ns.max(r.lat_max);
            self.latency_sum_ns = self.latency_sum_ns.saturating_add(r.lat_sum);
            self.latency_frames += r.lat_frames;
            self.ipdv_sum_ns = self.ipdv_sum_ns.saturating_add(r.ipdv_sum);
            self.ipdv_samples += r.lat_frames - 1;
            self.ipdv_max_ns = self.ipdv_max_ns.max(r.ipdv_max);
        }
    }
}

/// The earlier of two engine-clock times, 0 meaning none.
fn earliest(a: u64, b: u64) -> u64 {
    if a == 0 {
        b
    } else {
        a.min(b)
    }
}

/// A port's counts, as a reader sees them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub rx_foreign: u64,
    pub rx_stale: u64,
    pub rx_ring_drops: u64,
    pub rx_forged: u64,
    pub rx_unjudged: u64,
    /// The link is up (`None`: the port has no link to read).
    pub link_up: Option<bool>,
    /// A capture is running on the port.
    pub capturing: bool,
}

impl PortStats {
    pub(crate) fn add(&mut self, c: &PortCounters, rx: bool) {
        let (f, b) = (c.frames.load(Relaxed), c.bytes.load(Relaxed));
        if rx {
            self.rx_frames += f;
            self.rx_bytes += b;
            self.rx_foreign += c.foreign.load(Relaxed);
            self.rx_stale += c.stale.load(Relaxed);
            self.rx_ring_drops += c.ring_drops.load(Relaxed);
            self.rx_forged += c.forged.load(Relaxed);
            self.rx_unjudged += c.unjudged.load(Relaxed);
        } else {
            self.tx_frames += f;
            self.tx_bytes += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_counters_count_per_index_and_reset_with_the_tag() {
        let c = Counters::with_tags(3);
        c.reset(7);
        for j in 0..10 {
            c.count_tag(j);
        }
        let mut got = [0u64; 3];
        c.add_tags(&mut got);
        assert_eq!(got, [4, 3, 3]);
        c.reset(8);
        let mut again = [0u64; 3];
        c.add_tags(&mut again);
        assert_eq!(again, [0, 0, 0]);
        let plain = Counters::default();
        plain.count_tag(5); // a flow without tags counts nothing more
        assert!(plain.tags.is_empty());
    }
}
