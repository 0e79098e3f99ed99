//! The run of a trial in time: rate phases, and the intervals it is counted in.
//!
//! A duration trial may run through several [`RatePhase`]s (system recovery: overload, then a
//! lower load), each scaling every stream's rate, without a pause between them. With an interval
//! length, every phase is cut into intervals, and the trial counts per interval the frames sent and
//! the frames received. Both are attributed by the frame's transmit timestamp (the one in its
//! signature), so a frame is counted in the interval it was sent in, wherever and whenever it is
//! received: per-interval loss is exact, even for frames in flight across a border.
//!
//! Intervals follow what the sender really did. A phase begins when its first frame leaves (the TX
//! workers publish it, [`IntervalGrid::start_phase`]), and its intervals are cut from there; the
//! last interval of a phase ends where the next phase begins. So when smooth pacing stretches a
//! phase after a tester stall, the frames of a phase are still counted in that phase, and the
//! phase's last interval is longer by the stretch (its duration says so).
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::ConfigError;

/// One phase of a duration trial: every stream at `rate_scale` × its rate for `duration_ns`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatePhase {
    pub duration_ns: u64,
    pub rate_scale: f64,
}

impl RatePhase {
    /// Duration > 0, scale finite and > 0. Fields `duration_s`, `rate_scale` (a trial prefixes
    /// them with `phases[i].`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.duration_ns == 0 {
            return Err(ConfigError::new("duration_s", "must be > 0: give how long the phase lasts"));
        }
        if !self.rate_scale.is_finite() || self.rate_scale <= 0.0 {
            return Err(ConfigError::new(
                "rate_scale",
                format!(
                    "must be a finite number > 0 (got {}): the phase's rate relative to the streams'",
                    self.rate_scale
                ),
            ));
        }
        Ok(())
    }
}

/// Most steps of a rate ramp.
pub const MAX_RAMP_STEPS: u32 = 1000;

/// A rate ramp in linear steps (for stress tests): `steps` phases of `step_ns` each, the rate scale
/// going from `from_scale` to `to_scale` in equal steps (both included; either direction). Errors
/// name the field `ramp`.
pub fn linear_ramp(from_scale: f64, to_scale: f64, steps: u32, step_ns: u64) -> Result<Vec<RatePhase>, ConfigError> {
    for (what, v) in [("start", from_scale), ("end", to_scale)] {
        if !v.is_finite() || v <= 0.0 {
            return Err(ConfigError::new(
                "ramp",
                format!("the {what} rate must be a finite share > 0 of the stream's rate (got {v})"),
            ));
        }
    }
    if !(2..=MAX_RAMP_STEPS).contains(&steps) {
        return Err(ConfigError::new(
            "ramp",
            format!("{steps} steps: a ramp has 2..{MAX_RAMP_STEPS} steps (one phase per step)"),
        ));
    }
    if step_ns == 0 {
        return Err(ConfigError::new("ramp", "each step must last > 0 s: give a longer duration or fewer steps"));
    }
    let span = to_scale - from_scale;
    (0..steps)
        .map(|k| {
            let p =
                RatePhase { duration_ns: step_ns, rate_scale: from_scale + span * f64::from(k) / f64::from(steps - 1) };
            p.validate().map_err(|e| ConfigError::new("ramp", e.message))?;
            Ok(p)
        })
        .collect()
}

const NOT_STARTED: u64 = u64::MAX;

/// Counting intervals of a run; shared by the TX and RX workers.
#[derive(Debug)]
pub struct IntervalGrid {
    interval_ns: u64,
    /// Per phase: index of its first interval, and its number of intervals.
    first: Vec<usize>,
    count: Vec<usize>,
    /// Phase of each interval.
    phase: Vec<usize>,
    /// When each phase's first frame left, ns after the trial epoch (`NOT_STARTED` before).
    starts: Vec<AtomicU64>,
    /// Frames sent and received per interval so far, as the workers publish them (once per batch,
    /// [`IntervalCounter::flush`]): what a watcher reads while the trial runs.
    live_tx: Vec<AtomicU64>,
    live_rx: Vec<AtomicU64>,
    /// Every counting worker's watermark, ns after the epoch ([`IntervalCounter::flush_upto`]).
    marks: std::sync::Mutex<Vec<(Side, std::sync::Arc<AtomicU64>)>>,
}

/// Which side of the trial an [`IntervalCounter`] counts for (where it publishes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Tx,
    Rx,
}

/// One settled interval as read live: phase, start since the run's first frame, length (ns), frames
/// sent and received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveInterval {
    pub phase: usize,
    pub start_ns: u64,
    pub len_ns: u64,
    pub tx_frames: u64,
    pub rx_frames: u64,
}

impl IntervalGrid {
    /// Every phase cut into intervals of `interval_ns` (> 0), the last one of a phase shorter.
    pub fn new(phases: &[RatePhase], interval_ns: u64) -> Self {
        let interval_ns = interval_ns.max(1);
        let (mut first, mut count, mut phase) = (Vec::new(), Vec::new(), Vec::new());
        for (p, ph) in phases.iter().enumerate() {
            let n = ph.duration_ns.div_ceil(interval_ns) as usize;
            first.push(phase.len());
            count.push(n);
            phase.extend(std::iter::repeat_n(p, n));
        }
        let starts = phases.iter().map(|_| AtomicU64::new(NOT_STARTED)).collect();
        let live = |n: usize| (0..n).map(|_| AtomicU64::new(0)).collect();
        let n = phase.len();
        IntervalGrid {
            interval_ns,
            first,
            count,
            phase,
            starts,
            live_tx: live(n),
            live_rx: live(n),
            marks: std::sync::Mutex::new(Vec::new()),
        }
    }

    pub fn len(&self) -> usize {
        self.phase.len()
    }

    pub fn is_empty(&self) -> bool {
        self.phase.is_empty()
    }

    /// Phase `p`'s first frame left at `ts_rel` ns after the epoch (the earliest of the workers).
    pub fn start_phase(&self, p: usize, ts_rel: u64) {
        if let Some(s) = self.starts.get(p) {
            s.fetch_min(ts_rel, Ordering::AcqRel);
        }
    }

    fn start(&self, p: usize) -> u64 {
        self.starts.get(p).map_or(NOT_STARTED, |s| s.load(Ordering::Acquire))
    }

    /// Interval `i`'s phase and its bounds, ns after the epoch (the end `NOT_STARTED` while the
    /// next phase has not begun; the run's last interval never ends).
    fn bounds(&self, i: usize) -> (usize, u64, u64) {
        let p = self.phase[i];
        let k = (i - self.first[p]) as u64;
        let s = self.start(p);
        if s == NOT_STARTED {
            return (p, NOT_STARTED, NOT_STARTED);
        }
        let lo = s + k * self.interval_ns;
        let hi = if k + 1 < self.count[p] as u64 { lo + self.interval_ns } else { self.start(p + 1) };
        (p, lo, hi)
    }

    /// The interval of a frame stamped `ts_rel` ns after the epoch. `cursor` is the caller's
    /// guess, kept for the next frame (frames come mostly in order).
    #[inline]
    pub fn index(&self, ts_rel: u64, cursor: &mut usize) -> usize {
        let c = *cursor;
        if c < self.phase.len() {
            let (_, lo, hi) = self.bounds(c);
            if lo <= ts_rel && ts_rel < hi {
                return c;
            }
        }
        self.locate(ts_rel, cursor)
    }

    #[cold]
    fn locate(&self, ts_rel: u64, cursor: &mut usize) -> usize {
        // The last phase that began at or before the stamp (phases begin in order).
        let mut p = 0;
        for q in 0..self.starts.len() {
            let s = self.start(q);
            if s == NOT_STARTED || s > ts_rel {
                break;
            }
            p = q;
        }
        if self.count.get(p).copied().unwrap_or(0) == 0 {
            return 0;
        }
        let s = self.start(p);
        let k = if s == NOT_STARTED { 0 } else { ((ts_rel.saturating_sub(s)) / self.interval_ns) as usize };
        let i = self.first[p] + k.min(self.count[p] - 1);
        *cursor = i;
        i
    }

    /// Interval `i` as (phase, start since the run's first frame, duration) in ns; the run's last
    /// interval ends at `end_rel` (ns after the epoch).
    pub fn interval(&self, i: usize, end_rel: u64) -> (usize, u64, u64) {
        let (p, lo, hi) = self.bounds(i);
        let origin = self.start(0);
        if lo == NOT_STARTED || origin == NOT_STARTED {
            return (p, 0, 0);
        }
        let hi = if hi == NOT_STARTED { end_rel.max(lo) } else { hi };
        (p, lo - origin, hi - lo)
    }

    /// The lowest watermark of the workers of `side` (`u64::MAX` without any).
    fn watermark(&self, side: Side) -> u64 {
        let marks = self.marks.lock().unwrap_or_else(|e| e.into_inner());
        marks.iter().filter(|(s, _)| *s == side).map(|(_, m)| m.load(Ordering::Acquire)).min().unwrap_or(u64::MAX)
    }

    /// The intervals from `first` on whose counts are final, in order, with the counts the workers
    /// have published. An interval is final when it ended at least `settle_ns` before `now_rel`
    /// (ns after the epoch; `settle_ns` ≥ the late threshold: a frame sent in it that arrives later
    /// is late, not counted in intervals), every TX worker has published what it stamped up to its
    /// end, and every RX worker has processed what arrived up to `settle_ns` after it (an RX worker
    /// that fell behind holds it back). The run's last interval never settles: it ends with the run
    /// (the result has it).
    pub fn settled(&self, first: usize, now_rel: u64, settle_ns: u64) -> Vec<LiveInterval> {
        let origin = self.start(0);
        let mut out = Vec::new();
        if origin == NOT_STARTED {
            return out;
        }
        let (tx_mark, rx_mark) = (self.watermark(Side::Tx), self.watermark(Side::Rx).min(now_rel));
        for i in first..self.len() {
            let (p, lo, hi) = self.bounds(i);
            if lo == NOT_STARTED || hi == NOT_STARTED || hi.saturating_add(settle_ns) > rx_mark || hi > tx_mark {
                break;
            }
            out.push(LiveInterval {
                phase: p,
                start_ns: lo - origin,
                len_ns: hi - lo,
                tx_frames: self.live_tx[i].load(Ordering::Acquire),
                rx_frames: self.live_rx[i].load(Ordering::Acquire),
            });
        }
        out
    }
}

/// Frames per interval, counted by one worker (a receiver also sums their latency). Its counts are
/// its own (merged after the trial); it also publishes the frame counts to the grid's live counts, a
/// batch at a time ([`Self::flush`]: on moving to another interval, and when the worker calls it
/// after each batch), so a frame costs no atomic operation.
#[derive(Debug, Clone)]
pub struct IntervalCounter {
    grid: std::sync::Arc<IntervalGrid>,
    pub counts: Vec<u64>,
    /// Received frames' latency per interval: sum and maximum, ns (receivers only).
    pub latency_sum_ns: Vec<u64>,
    pub latency_max_ns: Vec<u64>,
    cursor: usize,
    side: Side,
    /// Frames counted in interval `pending_i` and not yet published.
    pending_i: usize,
    pending_n: u64,
    /// This worker's watermark in the grid.
    mark: std::sync::Arc<AtomicU64>,
}

impl IntervalCounter {
    /// A worker's counter; it registers the worker's watermark (0: nothing published yet), so
    /// nothing settles before the worker says how far it has counted.
    pub fn new(grid: std::sync::Arc<IntervalGrid>, side: Side) -> Self {
        let mark = std::sync::Arc::new(AtomicU64::new(0));
        grid.marks.lock().unwrap_or_else(|e| e.into_inner()).push((side, mark.clone()));
        IntervalCounter {
            counts: vec![0; grid.len()],
            latency_sum_ns: Vec::new(),
            latency_max_ns: Vec::new(),
            grid,
            cursor: 0,
            side,
            pending_i: 0,
            pending_n: 0,
            mark,
        }
    }

    /// A receiver's counter: frames and their latency.
    pub fn with_latency(grid: std::sync::Arc<IntervalGrid>) -> Self {
        let n = grid.len();
        IntervalCounter { latency_sum_ns: vec![0; n], latency_max_ns: vec![0; n], ..Self::new(grid, Side::Rx) }
    }

    /// Publish, and say that everything up to `t_rel` (ns after the epoch) is counted: a TX worker,
    /// every frame stamped before it; an RX worker, every frame that arrived before it. A worker
    /// that ends says `u64::MAX`.
    pub fn flush_upto(&mut self, t_rel: u64) {
        self.flush();
        self.mark.fetch_max(t_rel, Ordering::AcqRel);
    }

    /// `n` frames stamped `ts_rel` ns after the epoch.
    #[inline]
    pub fn add(&mut self, ts_rel: u64, n: u64) {
        if self.counts.is_empty() {
            return;
        }
        let i = self.grid.index(ts_rel, &mut self.cursor);
        if i != self.pending_i {
            self.flush();
            self.pending_i = i;
        }
        self.pending_n += n;
        self.counts[i] += n;
    }

    /// One received frame stamped `ts_rel` ns after the epoch, `latency_ns` after it was sent.
    #[inline]
    pub fn add_received(&mut self, ts_rel: u64, latency_ns: u64) {
        if self.counts.is_empty() {
            return;
        }
        let i = self.grid.index(ts_rel, &mut self.cursor);
        if i != self.pending_i {
            self.flush();
            self.pending_i = i;
        }
        self.pending_n += 1;
        self.counts[i] += 1;
        if let (Some(sum), Some(max)) = (self.latency_sum_ns.get_mut(i), self.latency_max_ns.get_mut(i)) {
            *sum += latency_ns;
            *max = (*max).max(latency_ns);
        }
    }

    /// Publish what was counted since the last flush to the grid's live counts.
    pub fn flush(&mut self) {
        if self.pending_n == 0 {
            return;
        }
        let live = match self.side {
            Side::Tx => &self.grid.live_tx,
            Side::Rx => &self.grid.live_rx,
        };
        if let Some(c) = live.get(self.pending_i) {
            c.fetch_add(self.pending_n, Ordering::AcqRel);
        }
        self.pending_n = 0;
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn linear_ramps_step_evenly_both_ways_and_name_the_field() {
        let up = linear_ramp(0.1, 1.0, 10, 1_000_000_000).unwrap();
        assert_eq!(up.len(), 10);
        assert!((up[0].rate_scale - 0.1).abs() < 1e-12 && (up[9].rate_scale - 1.0).abs() < 1e-12);
        for w in up.windows(2) {
            assert!((w[1].rate_scale - w[0].rate_scale - 0.1).abs() < 1e-9);
            assert_eq!(w[0].duration_ns, 1_000_000_000);
        }
        let down = linear_ramp(2.0, 0.5, 4, 5).unwrap();
        assert_eq!(down.iter().map(|p| p.rate_scale).collect::<Vec<_>>(), vec![2.0, 1.5, 1.0, 0.5]);
        for (f, t, n, ns) in
            [(0.0, 1.0, 3, 1), (1.0, f64::NAN, 3, 1), (0.1, 1.0, 1, 1), (0.1, 1.0, 1001, 1), (0.1, 1.0, 3, 0)]
        {
            assert_eq!(linear_ramp(f, t, n, ns).unwrap_err().field, "ramp", "{f} {t} {n} {ns}");
        }
    }

    use super::*;

    #[test]
    fn phases_are_cut_into_intervals_from_their_actual_start() {
        let phases =
            [RatePhase { duration_ns: 2_500, rate_scale: 1.1 }, RatePhase { duration_ns: 2_000, rate_scale: 0.5 }];
        let g = IntervalGrid::new(&phases, 1_000);
        assert_eq!(g.len(), 5);
        g.start_phase(0, 10_000);
        let mut c = 0;
        assert_eq!(g.index(10_000, &mut c), 0);
        assert_eq!(g.index(12_400, &mut c), 2);
        // Phase 0 was stretched: phase 1 began at 12_900, not 12_500.
        assert_eq!(g.index(12_700, &mut c), 2, "phase 1 has not begun: still phase 0's last interval");
        g.start_phase(1, 12_900);
        assert_eq!(g.index(12_899, &mut c), 2);
        assert_eq!(g.index(12_900, &mut c), 3);
        assert_eq!(g.index(14_000, &mut c), 4);
        assert_eq!(g.index(99_000, &mut c), 4, "stretched past the end: the last interval");
        assert_eq!(g.index(5, &mut c), 0, "before the start: the first");
        assert_eq!(g.interval(2, 20_000), (0, 2_000, 900), "phase 0's last interval, stretched");
        assert_eq!(g.interval(3, 20_000), (1, 2_900, 1_000));
        assert_eq!(g.interval(4, 15_100), (1, 3_900, 1_200), "the run's last interval ends at its end");
        let mut k = IntervalCounter::new(std::sync::Arc::new(g), Side::Tx);
        k.add(13_000, 3);
        k.add(13_100, 2);
        assert_eq!(k.counts, vec![0, 0, 0, 5, 0]);
    }

    #[test]
    fn a_receivers_counter_keeps_latency_per_interval() {
        let g = IntervalGrid::new(&[RatePhase { duration_ns: 2_000, rate_scale: 1.0 }], 1_000);
        g.start_phase(0, 0);
        let mut k = IntervalCounter::with_latency(std::sync::Arc::new(g));
        for (ts, lat) in [(100, 50), (900, 150), (1_500, 7)] {
            k.add_received(ts, lat);
        }
        assert_eq!(
            (k.counts.clone(), k.latency_sum_ns.clone(), k.latency_max_ns.clone()),
            (vec![2, 1], vec![200, 7], vec![150, 7])
        );
    }

    #[test]
    fn settled_intervals_are_read_live_with_what_the_workers_published() {
        let g = std::sync::Arc::new(IntervalGrid::new(&[RatePhase { duration_ns: 5_000, rate_scale: 1.0 }], 1_000));
        assert!(g.settled(0, u64::MAX, 0).is_empty(), "not started: nothing settled");
        g.start_phase(0, 10_000);
        let mut tx = IntervalCounter::new(g.clone(), Side::Tx);
        let mut rx = IntervalCounter::new(g.clone(), Side::Rx);
        tx.add(10_100, 4);
        tx.add(10_900, 1);
        rx.add(10_100, 3);
        assert!(g.settled(0, 99_999, 0).is_empty(), "no worker has said how far it counted");
        tx.add(11_000, 7); // moves to interval 1: interval 0's 5 frames are published
        tx.flush_upto(11_000);
        rx.flush_upto(11_000);
        let s = g.settled(0, 11_000, 0);
        assert_eq!(s, vec![LiveInterval { phase: 0, start_ns: 0, len_ns: 1_000, tx_frames: 5, rx_frames: 3 }]);
        assert!(g.settled(0, 11_000, 1).is_empty(), "not settled yet: the interval ended 0 ns ago");
        tx.flush_upto(13_000);
        assert_eq!(g.settled(1, 13_500, 500).len(), 0, "the receiver has counted up to 11 000 only");
        rx.flush_upto(13_400);
        assert_eq!(g.settled(1, 13_500, 500).len(), 1, "interval 2 waits for the receiver (up to 13 500)");
        rx.flush_upto(u64::MAX);
        tx.flush_upto(u64::MAX);
        let s = g.settled(1, 13_500, 500);
        assert_eq!(s.len(), 2, "intervals 1 and 2 ended at least 500 ns before 13 500: {s:?}");
        assert_eq!((s[0].start_ns, s[0].tx_frames, s[1].tx_frames), (1_000, 7, 0));
        assert_eq!(g.settled(0, u64::MAX, 0).len(), 4, "the run's last interval never settles");
        assert_eq!(tx.counts, vec![5, 7, 0, 0, 0], "the worker's own counts are unchanged");
    }

    #[test]
    fn the_earliest_worker_starts_a_phase() {
        let g = IntervalGrid::new(&[RatePhase { duration_ns: 10, rate_scale: 1.0 }], 5);
        g.start_phase(0, 100);
        g.start_phase(0, 90);
        g.start_phase(0, 95);
        assert_eq!(g.interval(0, 200), (0, 0, 5));
    }

    #[test]
    fn phase_validation_names_the_field() {
        assert_eq!(RatePhase { duration_ns: 0, rate_scale: 1.0 }.validate().unwrap_err().field, "duration_s");
        assert_eq!(RatePhase { duration_ns: 1, rate_scale: f64::NAN }.validate().unwrap_err().field, "rate_scale");
        RatePhase { duration_ns: 1, rate_scale: 0.5 }.validate().unwrap();
    }
}
