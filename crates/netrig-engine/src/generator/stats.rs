//! What the generator's workers publish and its readers sum: per-flow and per-port counters as
//! atomics, each written by exactly one worker (no read-modify-write, no lock), read at any time.
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed, Ordering::Release};

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

/// Counters of one flow, written by one worker. `tag` says which start of the flow they count:
/// a reader counts them only when it is the flow's current tag (the worker resets them when it
/// sees a new one: zeros first, then the tag).
#[derive(Debug)]
pub struct Counters {
    pub tag: AtomicU32,
    pub frames: AtomicU64,
    pub bytes: AtomicU64,
    /// Engine-clock times of the first and last frame (0: none).
    pub first_ns: AtomicU64,
    pub last_ns: AtomicU64,
    /// Transmit side: frames sent without room for the signature (untracked: counted per port,
    /// never received per flow).
    pub untracked: AtomicU64,
    /// Latency sum, minimum (u64::MAX: none) and maximum, ns (receive side only).
    pub lat_sum: AtomicU64,
    pub lat_min: AtomicU64,
    pub lat_max: AtomicU64,
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
            lat_sum: AtomicU64::new(0),
            lat_min: AtomicU64::new(u64::MAX),
            lat_max: AtomicU64::new(0),
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
        for a in
            [&self.frames, &self.bytes, &self.first_ns, &self.last_ns, &self.untracked, &self.lat_sum, &self.lat_max]
        {
            a.store(0, Relaxed);
        }
        for a in self.tags.iter() {
            a.store(0, Relaxed);
        }
        self.lat_min.store(u64::MAX, Relaxed);
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

    /// Add one latency sample (the writer only).
    #[inline(always)]
    pub(crate) fn latency(&self, ns: u64) {
        self.lat_sum.store(self.lat_sum.load(Relaxed) + ns, Relaxed);
        if ns < self.lat_min.load(Relaxed) {
            self.lat_min.store(ns, Relaxed);
        }
        if ns > self.lat_max.load(Relaxed) {
            self.lat_max.store(ns, Relaxed);
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
}

impl PortCounters {
    #[inline(always)]
    pub(crate) fn add(a: &AtomicU64, n: u64) {
        a.store(a.load(Relaxed) + n, Relaxed);
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
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub rx_first_ns: u64,
    pub rx_last_ns: u64,
    /// Latency of the received frames, ns (min 0 and max 0 when none).
    pub latency_min_ns: u64,
    pub latency_max_ns: u64,
    pub latency_sum_ns: u64,
    /// Frames the latency sum is over (every received frame).
    pub latency_frames: u64,
}

impl FlowStats {
    /// Add `c` (its tag already checked) as transmit or receive counts.
    pub(crate) fn add(&mut self, c: &Counters, rx: bool) {
        let frames = c.frames.load(Relaxed);
        if frames == 0 {
            return;
        }
        let (f, b, first, last) = if rx {
            (&mut self.rx_frames, &mut self.rx_bytes, &mut self.rx_first_ns, &mut self.rx_last_ns)
        } else {
            (&mut self.tx_frames, &mut self.tx_bytes, &mut self.tx_first_ns, &mut self.tx_last_ns)
        };
        *f += frames;
        *b += c.bytes.load(Relaxed);
        let c_first = c.first_ns.load(Relaxed);
        *first = if *first == 0 { c_first } else { (*first).min(c_first) };
        *last = (*last).max(c.last_ns.load(Relaxed));
        if !rx {
            self.tx_untracked += c.untracked.load(Relaxed);
        }
        if rx {
            let min = c.lat_min.load(Relaxed);
            self.latency_min_ns = if self.latency_frames == 0 { min } else { self.latency_min_ns.min(min) };
            self.latency_max_ns = self.latency_max_ns.max(c.lat_max.load(Relaxed));
            self.latency_sum_ns += c.lat_sum.load(Relaxed);
            self.latency_frames += frames;
        }
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
