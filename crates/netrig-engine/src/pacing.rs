//! Pacing policy and the offered-load meter of a TX worker.
//!
//! A paced worker's frame `k` is due at `anchor + k / rate`. When the worker finds itself behind
//! (it was descheduled, or its queue pushed back), [`Pacing`] says what happens to the lost time:
//!
//! - [`Pacing::Smooth`] (the default): the time is not recovered. The worker sends at most
//!   [`smooth_depth`] frames (80 µs worth) at once, shifts its schedule so that the next frame is due one frame
//!   time later, and so never offers more than the intended rate over any window longer than one
//!   batch. Every intended frame is still sent, later: the run is *stretched* by the time lost.
//! - [`Pacing::CatchUp`]: the schedule stays on the wall clock; the backlog is sent at up to
//!   [`CATCHUP_FACTOR`] × the rate (at most [`catchup_burst`] frames at once), so the run keeps its
//!   duration but the DUT sees the rate exceeded after a stall.
//!
//! [`LoadMeter`] measures what the worker really offered, per batch (never per frame, and without
//! allocating): the most frames handed to the queue in any [`PEAK_WINDOW_NS`] window against the
//! intended count, and the distribution of inter-departure gaps.
use hdrhistogram::Histogram;

use crate::error::ConfigError;

/// Frames per `send` call at full speed.
pub const BATCH: usize = 64;

/// How a paced TX worker handles time it lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pacing {
    /// Never above the intended rate: lost time stretches the run (every frame is sent, later).
    #[default]
    Smooth,
    /// Wall-clock duration: a backlog is caught up at up to [`CATCHUP_FACTOR`] × the rate.
    CatchUp,
}

/// The names [`Pacing::parse`] accepts, default first.
pub const PACING_MODES: &[&str] = &["smooth", "catch-up"];

impl Pacing {
    /// `"smooth"` or `"catch-up"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Pacing::Smooth => "smooth",
            Pacing::CatchUp => "catch-up",
        }
    }

    /// A mode by name ([`PACING_MODES`]). Field: `pacing`.
    pub fn parse(s: &str) -> Result<Pacing, ConfigError> {
        match s {
            "smooth" => Ok(Pacing::Smooth),
            "catch-up" | "catchup" | "catch_up" => Ok(Pacing::CatchUp),
            _ => Err(ConfigError::new(
                "pacing",
                format!(
                    "{s:?} is not a pacing mode: use \"smooth\" (never above the rate; stalls stretch the trial) or \"catch-up\" (keeps the duration; a backlog goes out at up to 2x the rate)"
                ),
            )),
        }
    }
}

/// Most frames a smooth worker sends at once (when it is behind): the frames of
/// [`SMOOTH_DEPTH_NS`] at its rate, at least 2 and at most one [`BATCH`]. Over a
/// [`PEAK_WINDOW_NS`] window this adds at most 8 % (and a frame or two at low rates, see
/// [`PEAK_ALLOWANCE_FRAMES`]) to the intended count.
pub fn smooth_depth(rate_pps: f64) -> u64 {
    ((rate_pps * SMOOTH_DEPTH_NS as f64 / 1e9) as u64).clamp(2, BATCH as u64)
}

/// See [`smooth_depth`].
pub const SMOOTH_DEPTH_NS: u64 = 80_000;

/// Frames a paced worker lets become due before it sends them: the frames of [`WAKE_BATCH_NS`]
/// (at least 1, fewer than [`smooth_depth`], at most half a [`BATCH`]). Waiting for a few frames lets the worker sleep between
/// batches at mid rates instead of spinning — a sleeping thread wakes on time next to a CPU hog,
/// a spinning one shares the CPU with it — and the frames between this batch and the depth are the
/// slack that absorbs a late wake-up without losing time.
pub fn wake_batch(rate_pps: f64) -> u64 {
    ((rate_pps * WAKE_BATCH_NS as f64 / 1e9) as u64).clamp(1, (smooth_depth(rate_pps) - 1).min(BATCH as u64 / 2))
}

/// See [`wake_batch`].
pub const WAKE_BATCH_NS: u64 = 50_000;

/// A catching-up worker sends its backlog at most this many times faster than its rate.
pub const CATCHUP_FACTOR: f64 = 2.0;

/// Most frames a catching-up worker sends at once: the larger of one batch and 200 µs of frames.
pub fn catchup_burst(rate_pps: f64) -> u64 {
    ((rate_pps * 200e-6) as u64).max(BATCH as u64)
}

/// Window of the peak offered-load measurement.
pub const PEAK_WINDOW_NS: u64 = 1_000_000;

/// Frames a window may hold beyond the intended count for timing granularity alone: a worker that
/// was late sends up to [`smooth_depth`] (at least 2) frames at once and its successors on time,
/// so a window can hold `rate × window + depth + 1` frames without any frame going out early (at
/// 1 kfps a 1 ms window can hold 3). Over 1 ms this matters below ~30 kfps only.
pub const PEAK_ALLOWANCE_FRAMES: u64 = 3;

/// Batches remembered for the peak window (a power of two). More batches than this inside one
/// window (over 4 per µs) only happens unpaced, where the peak is not measured.
const RING: usize = 4096;

/// How smoothly a worker offered its load (see [`LoadMeter`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Smoothness {
    /// Most frames handed to the queue in any [`PEAK_WINDOW_NS`] window (paced runs).
    pub peak_frames: u64,
    /// Frames the intended rate puts in that window (0 when unpaced).
    pub intended_frames: f64,
    /// `peak_frames / intended_frames` (0 when unpaced).
    pub peak_ratio: f64,
    /// Inter-departure gap per frame (a batch's gap since the previous one, shared by its frames),
    /// median and 99th percentile, ns.
    pub gap_p50_ns: u64,
    pub gap_p99_ns: u64,
    /// Longest time between two departures, ns.
    pub gap_max_ns: u64,
}

impl Smoothness {
    /// Whether the peak exceeds the intended count by more than `tolerance` (0.1 = 10 %) and
    /// [`PEAK_ALLOWANCE_FRAMES`].
    pub fn exceeds(&self, tolerance: f64) -> bool {
        self.intended_frames > 0.0
            && self.peak_frames as f64 > self.intended_frames * (1.0 + tolerance) + PEAK_ALLOWANCE_FRAMES as f64
    }

    /// The more bunched of two summaries (the larger excess over its own intended count).
    pub fn worse(self, other: Smoothness) -> Smoothness {
        if other.excess() > self.excess() {
            other
        } else {
            self
        }
    }

    fn excess(&self) -> f64 {
        if self.intended_frames > 0.0 {
            (self.peak_frames as f64 - 1.0) / self.intended_frames
        } else {
            f64::MIN
        }
    }
}

/// Gap histogram: 1 ns .. 1 h, 2 significant digits (a few KiB).
pub fn new_gap_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 2).expect("static histogram bounds are valid")
}

/// The offered-load meter of one TX worker; [`LoadMeter::batch`] is called once per batch.
pub struct LoadMeter {
    /// (departure time, frames sent up to and including this batch) of recent batches.
    ring: Box<[(u64, u64)]>,
    head: usize,
    tail: usize,
    /// Frames sent in this segment, and before the oldest batch still in the window.
    cum: u64,
    base: u64,
    /// Intended frames per window in this segment (0: unpaced, no peak).
    intended: f64,
    peak: Smoothness,
    last_ns: Option<u64>,
    pub gaps: Histogram<u64>,
    gap_max_ns: u64,
}

impl Default for LoadMeter {
    fn default() -> Self {
        Self::new()
    }
}

impl LoadMeter {
    pub fn new() -> Self {
        LoadMeter {
            ring: vec![(0, 0); RING].into_boxed_slice(),
            head: 0,
            tail: 0,
            cum: 0,
            base: 0,
            intended: 0.0,
            peak: Smoothness::default(),
            last_ns: None,
            gaps: new_gap_hist(),
            gap_max_ns: 0,
        }
    }

    /// A new segment at `rate_pps` (infinite: unpaced): the peak window starts afresh, so no
    /// window mixes two rates. `continuous` false (a new burst) also leaves the pause before it
    /// out of the gaps.
    pub fn segment(&mut self, rate_pps: f64, continuous: bool) {
        self.head = 0;
        self.tail = 0;
        self.cum = 0;
        self.base = 0;
        self.intended = if rate_pps.is_finite() { rate_pps * PEAK_WINDOW_NS as f64 / 1e9 } else { 0.0 };
        if !continuous {
            self.last_ns = None;
        }
    }

    /// `n` frames left at `t_ns`.
    #[inline]
    pub fn batch(&mut self, t_ns: u64, n: u64) {
        if n == 0 {
            return;
        }
        if let Some(last) = self.last_ns {
            let gap = t_ns.saturating_sub(last);
            self.gap_max_ns = self.gap_max_ns.max(gap);
            self.gaps.saturating_record_n(gap / n, n);
        }
        self.last_ns = Some(t_ns);
        if self.intended <= 0.0 {
            return;
        }
        self.cum += n;
        // Drop batches that left the window (t − W, t].
        let from = t_ns.saturating_sub(PEAK_WINDOW_NS);
        while self.head != self.tail && self.ring[self.head & (RING - 1)].0 <= from {
            self.base = self.ring[self.head & (RING - 1)].1;
            self.head += 1;
        }
        if self.tail - self.head == RING {
            // Full: forget the oldest (the count becomes a lower bound; see RING).
            self.base = self.ring[self.head & (RING - 1)].1;
            self.head += 1;
        }
        self.ring[self.tail & (RING - 1)] = (t_ns, self.cum);
        self.tail += 1;
        let count = self.cum - self.base;
        let here = Smoothness {
            peak_frames: count,
            intended_frames: self.intended,
            peak_ratio: count as f64 / self.intended,
            ..Default::default()
        };
        self.peak = self.peak.worse(here);
    }

    /// What was measured so far.
    pub fn summary(&self) -> Smoothness {
        let (p50, p99) = if self.gaps.is_empty() {
            (0, 0)
        } else {
            (
                self.gaps.value_at_quantile(0.5).min(self.gap_max_ns),
                self.gaps.value_at_quantile(0.99).min(self.gap_max_ns),
            )
        };
        Smoothness { gap_p50_ns: p50, gap_p99_ns: p99, gap_max_ns: self.gap_max_ns, ..self.peak }
    }
}

/// Summary of merged gap histograms, with the worst peak of the workers.
pub fn merged(peak: Smoothness, gaps: &Histogram<u64>, gap_max_ns: u64) -> Smoothness {
    if gaps.is_empty() {
        return Smoothness { gap_max_ns, ..peak };
    }
    Smoothness {
        gap_p50_ns: gaps.value_at_quantile(0.5).min(gap_max_ns),
        gap_p99_ns: gaps.value_at_quantile(0.99).min(gap_max_ns),
        gap_max_ns,
        ..peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_name_the_field() {
        assert_eq!(Pacing::parse("smooth").unwrap(), Pacing::Smooth);
        assert_eq!(Pacing::parse("catch-up").unwrap(), Pacing::CatchUp);
        assert_eq!(Pacing::default(), Pacing::Smooth);
        let e = Pacing::parse("fast").unwrap_err();
        assert_eq!(e.field, "pacing");
        for m in PACING_MODES {
            assert_eq!(Pacing::parse(m).unwrap().as_str(), *m);
        }
    }

    #[test]
    fn smooth_depth_is_bounded_by_a_batch_and_8_percent_of_a_window() {
        assert_eq!(smooth_depth(1_000.0), 2);
        assert_eq!(smooth_depth(35_000.0), 2);
        assert_eq!(smooth_depth(500_000.0), 40);
        assert_eq!(smooth_depth(10e6), BATCH as u64);
        assert_eq!((wake_batch(1_000.0), wake_batch(40_000.0), wake_batch(500_000.0)), (1, 2, 25));
        assert_eq!(wake_batch(10e6), 32);
        // The worst a smooth worker can do in 1 ms stays within a 10 % tolerance and the allowance.
        for rate in [1e3, 5e3, 1e4, 2e4, 4e4, 1e5, 3e5, 6.4e5, 1e6, 1e7] {
            let intended = rate / 1e3;
            let worst = (intended + smooth_depth(rate) as f64 + 1.0).floor();
            let s = Smoothness { peak_frames: worst as u64, intended_frames: intended, ..Default::default() };
            assert!(!s.exceeds(0.1), "{rate}: {worst} frames in 1 ms");
        }
    }

    #[test]
    fn a_paced_stream_has_no_peak_and_its_gaps_are_the_frame_time() {
        let mut m = LoadMeter::new();
        m.segment(100_000.0, true);
        for k in 0..10_000u64 {
            m.batch(k * 10_000, 1);
        }
        let s = m.summary();
        assert_eq!(s.peak_frames, 100);
        assert!((s.intended_frames - 100.0).abs() < 1e-9);
        assert!(!s.exceeds(0.1));
        assert_eq!((s.gap_p50_ns, s.gap_max_ns), (10_000, 10_000));
    }

    #[test]
    fn a_burst_after_a_stall_is_caught() {
        let mut m = LoadMeter::new();
        m.segment(100_000.0, true);
        let mut t = 0;
        for _ in 0..1000 {
            m.batch(t, 1);
            t += 10_000;
        }
        // 5 ms stall, then the 500 missed frames at 2x the rate.
        t += 5_000_000;
        for _ in 0..500 {
            m.batch(t, 2);
            t += 10_000;
        }
        let s = m.summary();
        assert_eq!(s.peak_frames, 200);
        assert!(s.exceeds(0.1) && (s.peak_ratio - 2.0).abs() < 1e-9, "{s:?}");
        assert_eq!(s.gap_max_ns, 5_010_000);
    }

    #[test]
    fn quantisation_at_low_rates_is_not_a_burst() {
        let mut m = LoadMeter::new();
        m.segment(1_000.0, true);
        // Frame 1 late by 900 µs, frame 2 on time: two frames inside 1 ms.
        for (k, late) in [(0u64, 0u64), (1, 900_000), (2, 0), (3, 0)] {
            m.batch(k * 1_000_000 + late, 1);
        }
        let s = m.summary();
        assert_eq!(s.peak_frames, 2);
        assert!(!s.exceeds(0.1));
    }

    #[test]
    fn unpaced_segments_only_record_gaps_and_bursts_skip_the_pause() {
        let mut m = LoadMeter::new();
        m.segment(f64::INFINITY, false);
        m.batch(0, 64);
        m.batch(1_000, 64);
        m.segment(f64::INFINITY, false);
        m.batch(50_000_000, 64);
        let s = m.summary();
        assert_eq!((s.peak_frames, s.peak_ratio), (0, 0.0));
        assert_eq!(s.gap_max_ns, 1_000, "the pause between bursts is not a gap");
        assert_eq!(m.gaps.len(), 64);
    }
}
