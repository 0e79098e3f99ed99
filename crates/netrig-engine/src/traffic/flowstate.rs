//! Per-flow receive state laid out for millions of flows.
//!
//! What every frame of a flow touches lives in one 64-byte cache line, [`FlowHot`]: the highest
//! sequence, a 64-sequence window, the transmit time of the highest sequence, the low words of
//! the received/bytes/latency-sum counters, latency min/max, the previous latency and the IPDV
//! sum and maximum. Everything else is out of line, in arrays a frame touches only when it needs
//! them:
//! - [`FlowCold`]: reordered, duplicated and late counts (allocated zeroed: pages of flows that
//!   never reorder are never touched, so they take no memory);
//! - the longest sequence gaps of each flow (zeroed the same way);
//! - a wider sequence window, for trials of fewer than [`INLINE_WINDOW_FLOWS`] flows (at most
//!   [`WINDOW_BITS_TOTAL`] bits for all flows together);
//! - the latency and |IPDV| histograms of the flows that have them;
//! - [`FlowWide`], a sparse record of what does not fit the hot line: a carry out of a 32-bit
//!   counter (every 2^32 frames or bytes of one flow, a 2^64-ns latency sum) and latencies of
//!   [`WIDE`] ns (4.29 s) or more. It is exact: the hot line's values plus the wide record equal
//!   the plain 64-bit counts (`analyze::FlowRx`).
use std::collections::HashMap;

use hdrhistogram::Histogram;

use crate::error::ConfigError;
use crate::sys::zeroed::ZeroedPages;

/// Sequence window of one flow when the trial has many flows: the hot line's 64 bits.
pub const INLINE_WINDOW_BITS: usize = 64;

/// All flows' windows together hold at most this many bits (each flow at least 64, at most
/// [`MAX_WINDOW_BITS`]); from this many flows on, a flow's window is its hot line's.
pub const WINDOW_BITS_TOTAL: usize = 1 << 22;
pub const MAX_WINDOW_BITS: usize = 1 << 17;
pub const INLINE_WINDOW_FLOWS: usize = WINDOW_BITS_TOTAL / INLINE_WINDOW_BITS;

/// `last_latency_ns`: no frame received yet.
const NONE: u32 = u32::MAX;
/// A latency at or above this (ns) does not fit the hot line: its value is in [`FlowWide`].
pub const WIDE: u32 = u32::MAX - 1;

/// Window size per flow: large for few flows, 64 (the hot line's) from
/// [`INLINE_WINDOW_FLOWS`] flows on.
pub fn window_bits_for(flows: usize) -> usize {
    let bits = WINDOW_BITS_TOTAL / flows.max(1);
    bits.clamp(INLINE_WINDOW_BITS, MAX_WINDOW_BITS).next_power_of_two()
}

/// A run of sequence numbers a flow did not receive: what was missing when the first frame after
/// it arrived (a frame of the run that arrives later, reordered, does not shrink it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeqGap {
    /// Sequence numbers missing between the two frames.
    pub missing: u64,
    /// Transmit time of the last frame received before the gap, ns since the trial epoch.
    pub before_ns: u64,
    /// Transmit time of the first frame received after it, ns since the trial epoch.
    pub after_ns: u64,
}

impl SeqGap {
    /// The outage the gap stands for: first frame after − last frame before, ns.
    pub fn duration_ns(&self) -> u64 {
        self.after_ns.saturating_sub(self.before_ns)
    }

    fn from_words(w: [u64; 3]) -> Self {
        SeqGap { missing: w[0], before_ns: w[1], after_ns: w[2] }
    }

    fn words(&self) -> [u64; 3] {
        [self.missing, self.before_ns, self.after_ns]
    }
}

/// Keep `g` among `slots` (unused slots all zero) if it is longer than the shortest kept.
#[inline]
pub fn note_gap_in(slots: &mut [[u64; 3]], g: SeqGap) {
    let Some(slot) = slots.iter_mut().min_by_key(|w| SeqGap::from_words(**w).duration_ns()) else { return };
    let kept = SeqGap::from_words(*slot);
    if kept.missing == 0 || g.duration_ns() > kept.duration_ns() {
        *slot = g.words();
    }
}

/// What one frame's sequence number was, against the flow's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqClass {
    /// At or above the highest seen: the window advances.
    Ahead,
    /// Below the highest seen, not seen before (or too old to tell).
    Reordered,
    Duplicate,
}

/// Record `seq` in a sliding window of seen sequences (`seq % bits`, `bits = window.len() * 64`,
/// a power of two: [`window_bits_for`]) below `next_seq` (highest seen + 1). A sequence more than
/// the window behind is *reordered* (too old to tell it from a duplicate).
#[inline(always)]
pub fn record_in_window(window: &mut [u64], next_seq: &mut u64, seq: u64) -> SeqClass {
    let w = window.len() as u64 * 64;
    debug_assert!(w.is_power_of_two(), "a window of {w} bits");
    // A mask, not `%`: the window's length is known only at run time, and a division per frame
    // cost a receiver of few flows (wide windows) more than the rest of its counting.
    let bit = |s: u64| (((s & (w - 1)) >> 6) as usize, 1u64 << (s & 63));
    if seq >= *next_seq {
        if seq + 1 - *next_seq >= w {
            window.iter_mut().for_each(|x| *x = 0);
        } else {
            // Clear the bits of the sequences that fall out of the window.
            for s in *next_seq..=seq {
                let (i, m) = bit(s);
                window[i] &= !m;
            }
        }
        let (i, m) = bit(seq);
        window[i] |= m;
        *next_seq = seq + 1;
        SeqClass::Ahead
    } else if *next_seq - seq > w {
        SeqClass::Reordered
    } else {
        let (i, m) = bit(seq);
        if window[i] & m != 0 {
            SeqClass::Duplicate
        } else {
            window[i] |= m;
            SeqClass::Reordered
        }
    }
}

/// What a flow's frames touch, in one cache line.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowHot {
    /// Highest sequence seen + 1.
    pub next_seq: u64,
    /// Seen sequences, bit `seq % 64` (when the flow has no wider window out of line).
    pub window: u64,
    /// Sum of the received frames' latencies, low 64 bits.
    pub latency_sum_ns: u64,
    pub ipdv_sum_ns: u64,
    /// Transmit time (ns since the epoch) of the frame with the highest sequence seen.
    pub last_tx_ns: u64,
    /// Frames and bytes received, low 32 bits.
    pub received: u32,
    pub bytes: u32,
    /// [`WIDE`]: every latency so far was wide (the minimum is in [`FlowWide`]).
    pub latency_min_ns: u32,
    /// [`WIDE`]: the maximum is in [`FlowWide`].
    pub latency_max_ns: u32,
    /// The previous received frame's latency; `NONE` before the first, [`WIDE`] if it was wide.
    pub last_latency_ns: u32,
    pub ipdv_max_ns: u32,
}

impl FlowHot {
    pub const EMPTY: FlowHot = FlowHot {
        next_seq: 0,
        window: 0,
        latency_sum_ns: 0,
        ipdv_sum_ns: 0,
        last_tx_ns: 0,
        received: 0,
        bytes: 0,
        latency_min_ns: NONE,
        latency_max_ns: 0,
        last_latency_ns: NONE,
        ipdv_max_ns: 0,
    };
}

/// A flow's rarely touched counters (frames that are not in order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCold {
    pub reordered: u64,
    pub duplicated: u64,
    pub late: u64,
}

/// What did not fit a flow's hot line (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowWide {
    /// Carries out of the hot line's 32-bit `received` and `bytes` and 64-bit latency sum.
    pub received_hi: u64,
    pub bytes_hi: u64,
    pub latency_sum_hi: u64,
    /// Of the wide latencies only (ns); `min_ns` is `u64::MAX` before the first.
    pub min_ns: u64,
    pub max_ns: u64,
    /// The previous frame's latency when it was wide.
    pub last_ns: u64,
    /// Largest |IPDV| involving a wide latency.
    pub ipdv_max_ns: u64,
}

impl Default for FlowWide {
    fn default() -> Self {
        FlowWide {
            received_hi: 0,
            bytes_hi: 0,
            latency_sum_hi: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            last_ns: 0,
            ipdv_max_ns: 0,
        }
    }
}

/// A flow's received frames, bytes and latency as plain 64-bit values ([`FlowStates::counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowCounts {
    pub received: u64,
    pub bytes: u64,
    pub latency_sum_ns: u128,
    /// `u64::MAX` before the first latency.
    pub latency_min_ns: u64,
    pub latency_max_ns: u64,
    /// |IPDV| between consecutive latencies: their sum (over `received − 1` of them) and maximum.
    pub ipdv_sum_ns: u64,
    pub ipdv_max_ns: u64,
}

/// The latency and |IPDV| histograms of one flow.
pub type FlowHists = (Histogram<u32>, Histogram<u32>);

/// The receive state of every flow of one RX worker.
pub struct FlowStates {
    pub hot: Vec<FlowHot>,
    /// `[reordered, duplicated, late]` per flow ([`FlowCold`]), zeroed; pages of flows that
    /// never count one stay untouched ([`ZeroedPages`]).
    cold: ZeroedPages<[u64; 3]>,
    /// `gap_slots` gaps per flow, `[missing, before_ns, after_ns]`, zeroed as `cold`.
    gaps: ZeroedPages<[u64; 3]>,
    gap_slots: usize,
    /// Words of window per flow out of line (0: the window is the hot line's).
    window_words: usize,
    windows: Vec<u64>,
    pub hists: Vec<FlowHists>,
    pub wide: HashMap<u32, FlowWide>,
    /// Duplicates over all flows since the states were made (a flow's [`Self::reset`] leaves its
    /// share): what a trial's [`crate::traffic::analyze::Analyzer::arrived`] leaves out.
    pub(crate) duplicated: u64,
}

/// `n` zeroed elements in their own mapping. Failing it is running out of memory, as a `Vec`'s
/// allocation failing would be (the trial's memory check refused the trials that will not fit).
fn zeroed(n: usize) -> ZeroedPages<[u64; 3]> {
    ZeroedPages::new(n).unwrap_or_else(|e| panic!("mapping {n} flows' zeroed counters: {e}"))
}

impl FlowStates {
    /// `n` flows, windows of [`window_bits_for`]`(n)`, histograms for the first `hist_flows`.
    pub fn new(n: usize, hist_flows: usize, new_hists: impl Fn() -> FlowHists) -> Self {
        FlowStates::with_window(n, window_bits_for(n), hist_flows, new_hists)
    }

    /// `n` flows with windows of `bits` (a power of two, at least [`INLINE_WINDOW_BITS`]).
    pub fn with_window(n: usize, bits: usize, hist_flows: usize, new_hists: impl Fn() -> FlowHists) -> Self {
        let window_words = if bits > INLINE_WINDOW_BITS { bits / 64 } else { 0 };
        FlowStates {
            hot: vec![FlowHot::EMPTY; n],
            cold: zeroed(n),
            gaps: zeroed(n),
            gap_slots: 1,
            window_words,
            windows: vec![0u64; n * window_words],
            hists: (0..hist_flows.min(n)).map(|_| new_hists()).collect(),
            wide: HashMap::new(),
            duplicated: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.hot.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hot.is_empty()
    }

    /// Keep `slots` gaps per flow (reallocates the zeroed gap array).
    pub fn set_gap_slots(&mut self, slots: usize) {
        self.gap_slots = slots.max(1);
        self.gaps = zeroed(self.hot.len() * self.gap_slots);
    }

    pub fn window_bits(&self) -> usize {
        if self.window_words == 0 {
            INLINE_WINDOW_BITS
        } else {
            self.window_words * 64
        }
    }

    /// Classify `seq` of `flow` against its window; counts a reordered or duplicate frame.
    #[inline(always)]
    pub fn record_seq(&mut self, flow: usize, seq: u64) -> SeqClass {
        let h = &mut self.hot[flow];
        let class = if self.window_words == 0 {
            record_in_window(std::slice::from_mut(&mut h.window), &mut h.next_seq, seq)
        } else {
            let k = self.window_words;
            record_in_window(&mut self.windows[flow * k..(flow + 1) * k], &mut h.next_seq, seq)
        };
        match class {
            SeqClass::Ahead => {}
            SeqClass::Reordered => self.cold[flow][0] += 1,
            SeqClass::Duplicate => self.cold[flow][1] += 1,
        }
        self.duplicated += u64::from(class == SeqClass::Duplicate);
        class
    }

    #[inline]
    pub fn count_late(&mut self, flow: usize) {
        self.cold[flow][2] += 1;
    }

    #[inline]
    pub fn note_gap(&mut self, flow: usize, g: SeqGap) {
        let k = self.gap_slots;
        note_gap_in(&mut self.gaps[flow * k..(flow + 1) * k], g);
    }

    /// Count a received frame of `wire_len` bytes and `latency` ns; returns the |IPDV| to the
    /// previous frame, if there was one.
    #[inline(always)]
    pub fn count_received(&mut self, flow: usize, wire_len: u32, latency: u64) -> Option<u64> {
        let h = &mut self.hot[flow];
        let (r, rc) = h.received.overflowing_add(1);
        let (b, bc) = h.bytes.overflowing_add(wire_len);
        let (s, sc) = h.latency_sum_ns.overflowing_add(latency);
        (h.received, h.bytes, h.latency_sum_ns) = (r, b, s);
        if rc | bc | sc {
            self.carry(flow, rc, bc, sc);
        }
        let h = &mut self.hot[flow];
        if latency >= WIDE as u64 || h.last_latency_ns == WIDE {
            return self.wide_latency(flow, latency);
        }
        let l = latency as u32;
        h.latency_min_ns = h.latency_min_ns.min(l);
        h.latency_max_ns = h.latency_max_ns.max(l);
        let prev = std::mem::replace(&mut h.last_latency_ns, l);
        if prev == NONE {
            return None;
        }
        let d = l.abs_diff(prev);
        h.ipdv_sum_ns += u64::from(d);
        h.ipdv_max_ns = h.ipdv_max_ns.max(d);
        Some(u64::from(d))
    }

    #[cold]
    fn carry(&mut self, flow: usize, received: bool, bytes: bool, sum: bool) {
        let w = self.wide.entry(flow as u32).or_default();
        w.received_hi += u64::from(received);
        w.bytes_hi += u64::from(bytes);
        w.latency_sum_hi += u64::from(sum);
    }

    /// A frame whose latency, or its predecessor's, is [`WIDE`] or more.
    #[cold]
    fn wide_latency(&mut self, flow: usize, latency: u64) -> Option<u64> {
        let h = &mut self.hot[flow];
        let w = self.wide.entry(flow as u32).or_default();
        let prev = match h.last_latency_ns {
            NONE => None,
            WIDE => Some(w.last_ns),
            l => Some(u64::from(l)),
        };
        if latency >= WIDE as u64 {
            (w.min_ns, w.max_ns, w.last_ns) = (w.min_ns.min(latency), w.max_ns.max(latency), latency);
            h.latency_min_ns = h.latency_min_ns.min(WIDE);
            h.latency_max_ns = WIDE;
            h.last_latency_ns = WIDE;
        } else {
            let l = latency as u32;
            h.latency_min_ns = h.latency_min_ns.min(l);
            h.latency_max_ns = h.latency_max_ns.max(l);
            h.last_latency_ns = l;
        }
        let d = latency.abs_diff(prev?);
        h.ipdv_sum_ns += d;
        w.ipdv_max_ns = w.ipdv_max_ns.max(d);
        Some(d)
    }

    /// The flow's received frames, bytes and latency, exact: its hot line and wide record read
    /// together.
    pub fn counts(&self, flow: usize) -> FlowCounts {
        let h = &self.hot[flow];
        let w = self.wide.get(&(flow as u32)).copied().unwrap_or_default();
        let wide_or = |v: u32, wide: u64| if v == WIDE { wide } else { u64::from(v) };
        FlowCounts {
            received: w.received_hi << 32 | u64::from(h.received),
            bytes: w.bytes_hi << 32 | u64::from(h.bytes),
            latency_sum_ns: u128::from(w.latency_sum_hi) << 64 | u128::from(h.latency_sum_ns),
            latency_min_ns: if h.latency_min_ns == NONE { u64::MAX } else { wide_or(h.latency_min_ns, w.min_ns) },
            latency_max_ns: wide_or(h.latency_max_ns, w.max_ns),
            ipdv_sum_ns: h.ipdv_sum_ns,
            ipdv_max_ns: u64::from(h.ipdv_max_ns).max(w.ipdv_max_ns),
        }
    }

    /// Forget everything `flow` counted (a new start of it). Its out-of-line arrays are written
    /// only where they hold something, so untouched pages stay untouched.
    pub fn reset(&mut self, flow: usize) {
        self.hot[flow] = FlowHot::EMPTY;
        if self.cold[flow] != [0; 3] {
            self.cold[flow] = [0; 3];
        }
        let k = self.gap_slots;
        for g in self.gaps[flow * k..(flow + 1) * k].iter_mut().filter(|g| **g != [0; 3]) {
            *g = [0; 3];
        }
        let w = self.window_words;
        self.windows[flow * w..(flow + 1) * w].fill(0);
        self.wide.remove(&(flow as u32));
        // An empty histogram is left alone: resetting writes every bucket, and its pages were
        // never touched.
        if let Some((l, i)) = self.hists.get_mut(flow).filter(|(l, _)| !l.is_empty()) {
            l.reset();
            i.reset();
        }
    }

    pub fn cold(&self, flow: usize) -> FlowCold {
        let [reordered, duplicated, late] = self.cold[flow];
        FlowCold { reordered, duplicated, late }
    }

    /// The flow's kept gaps (unused slots left out), in no order.
    pub fn gaps(&self, flow: usize) -> impl Iterator<Item = SeqGap> + '_ {
        let k = self.gap_slots;
        self.gaps[flow * k..(flow + 1) * k].iter().map(|w| SeqGap::from_words(*w)).filter(|g| g.missing > 0)
    }

    pub fn gap_slots(&self) -> usize {
        self.gap_slots
    }
}

/// Bytes per flow a trial may come to hold in the worst case: per receive queue a hot line, the
/// cold counters and `gap_slots` gaps (all touched when every flow reorders and loses); the
/// sender's sequence and the sent count at collection (8 B each).
pub fn worst_bytes_per_flow(rx_queues: usize, gap_slots: usize) -> u64 {
    let rx = std::mem::size_of::<FlowHot>() + std::mem::size_of::<FlowCold>() + gap_slots.max(1) * 24;
    (rx_queues.max(1) * rx + 16) as u64
}

/// A `/proc` file's `key:` line, in bytes (the kernel writes kB).
fn proc_kib(path: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse::<u64>().ok().map(|k| k * 1024)
}

/// This process's resident set (`VmRSS`), bytes.
pub fn rss_bytes() -> Option<u64> {
    proc_kib("/proc/self/status", "VmRSS:")
}

/// Memory the machine can give without swapping (`MemAvailable`), bytes.
pub fn mem_available_bytes() -> Option<u64> {
    proc_kib("/proc/meminfo", "MemAvailable:")
}

/// Refuse `flows` whose worst-case state would not fit `available` bytes (9/10 of it: the
/// rest is the process's and the machine's); errors name the field `flows` and both numbers.
pub fn check_fits(flows: u64, rx_queues: usize, gap_slots: usize, available: u64) -> Result<(), ConfigError> {
    let per_flow = worst_bytes_per_flow(rx_queues, gap_slots);
    let need = flows.saturating_mul(per_flow);
    if need <= available / 10 * 9 {
        return Ok(());
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    Err(ConfigError::new(
        "flows",
        format!(
            "{flows} flows need up to {:.2} GiB of per-flow state ({per_flow} B per flow: {rx_queues} receive \
             queue(s), {gap_slots} gap slot(s)) but only {:.2} GiB of memory is available: use fewer flows or \
             receive queues",
            gib(need),
            gib(available)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_that_do_not_fit_are_refused_with_the_numbers() {
        assert_eq!(worst_bytes_per_flow(1, 1), 64 + 24 + 24 + 16);
        check_fits(1 << 24, 1, 1, 8 << 30).unwrap();
        let e = check_fits(1 << 24, 4, 1, 2 << 30).unwrap_err();
        assert_eq!(e.field, "flows");
        assert!(e.message.contains("16777216 flows need up to 7.25 GiB") && e.message.contains("2.00 GiB"), "{e}");
        assert!(rss_bytes().unwrap() > 0 && mem_available_bytes().unwrap() > 0);
    }

    #[test]
    fn the_hot_state_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<FlowHot>(), 64);
        assert_eq!(std::mem::align_of::<FlowHot>(), 64);
        let v: Vec<FlowHot> = std::iter::repeat_n(FlowHot::EMPTY, 3).collect();
        assert_eq!(v.as_ptr() as usize % 64, 0, "a Vec of them starts on a line");
    }

    #[test]
    fn windows_are_inline_from_many_flows_on() {
        assert_eq!(window_bits_for(1), MAX_WINDOW_BITS);
        assert_eq!(window_bits_for(1 << 14), 256);
        assert_eq!(window_bits_for(INLINE_WINDOW_FLOWS), 64);
        assert_eq!(window_bits_for(1 << 24), 64);
        let s = FlowStates::new(1 << 16, 0, || unreachable!());
        assert_eq!((s.window_bits(), s.windows.len()), (64, 0));
        let s = FlowStates::new(1 << 10, 0, || unreachable!());
        assert_eq!((s.window_bits(), s.windows.len()), (4096, (1 << 10) * 64));
    }
}
