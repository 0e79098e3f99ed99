//! Pacing policy and the offered-load meter of a TX worker.
//!
//! A paced worker's frame `k` is due at `anchor + k / rate`. When the worker finds itself behind
//! (it was descheduled, or its queue pushed back), [`Pacing`] says what happens to the lost time:
//!
//! - [`Pacing::Smooth`] (the default): the time is not recovered at once. The worker sends at most
//!   [`smooth_depth`] frames (80 µs worth) at once, shifts its schedule so that the next frame is due one frame
//!   time later (also when the batch itself was held up before the queue took it: then that batch
//!   was the burst), and gives the time back slowly: its schedule drifts back towards the plan at
//!   [`SMOOTH_RECOVERY`] (2 %) of the time that passes. So it never offers more than 1.02 × the
//!   intended rate over any window longer than one batch (with the depth, within the 10 %
//!   smoothness tolerance over 1 ms). Every intended frame is still sent; what was not given back
//!   by the end *stretches* the run.
//! - [`Pacing::CatchUp`]: the schedule stays on the wall clock; the backlog is sent at up to
//!   [`CATCHUP_FACTOR`] × the rate (at most [`catchup_burst`] frames at once), so the run keeps its
//!   duration but the DUT sees the rate exceeded after a stall.
//!
//! [`LoadMeter`] measures what the worker really offered, per batch (never per frame, and without
//! allocating): the most frames handed to the queue in any [`PEAK_WINDOW_NS`] window against the
//! intended count (a batch's frames spread over the time its send took), and the distribution of
//! inter-departure gaps.
use hdrhistogram::Histogram;

use crate::error::ConfigError;

/// Frames per `send` call at full speed.
pub const BATCH: usize = 64;

/// Frames per `send` call when unpaced: the kernel's AF_XDP copy-mode budget per `sendto`
/// (`XDP_MAX_TX_SKB_BUDGET`), so one kick sends them all. Stamps are refreshed every [`BATCH`].
pub const UNPACED_BATCH: usize = 512;

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
                    "{s:?} is not a pacing mode: use \"smooth\" (at most 2 % above the rate while it gives back a stall's time; what it cannot stretches the trial) or \"catch-up\" (keeps the duration; a backlog is scheduled at 2x the rate and its batches leave back to back)"
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

/// A paced worker sleeps no shorter than this (below it, it spins), ns.
pub const MIN_SLEEP_NS: u64 = 20_000;
/// A paced worker sleeps at most this long at once (its stop flag or mailbox is looked at in
/// between), ns.
pub const MAX_SLEEP_NS: u64 = 5_000_000;

/// A smooth worker gives back the time it lost at this share of the time that passes: its schedule
/// drifts back towards the plan, so its frames leave at most `1 + SMOOTH_RECOVERY` × the rate
/// (with [`smooth_depth`]'s 8 %, within the 10 % smoothness tolerance over a 1-ms window). On veth
/// behind the test bed's wire, each copy-mode frame the sender hands over runs a softirq that wakes
/// the DUT CPU's cpumap thread (3.3 µs of the sender's CPU per frame at 100 kfps, measured), and
/// a few sends in a thousand take 64-512 µs: never given back, they stretched a 0.5-s trial at
/// 100 kfps by 2.5-5 % and made the self-test "prove" 30-100 kfps where the tester sends 400 kfps.
pub const SMOOTH_RECOVERY: f64 = 0.02;

/// Smooth pacing's give-back of lost time, one schedule's: [`SMOOTH_RECOVERY`] of the time since
/// the last give-back, never more than is owed. Fractions of a nanosecond wait for the next call.
/// Kept in a [`SmoothSchedule`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GiveBack {
    at: u64,
}

impl GiveBack {
    /// Nothing owed before `at`.
    pub fn new(at: u64) -> GiveBack {
        GiveBack { at }
    }

    /// Of `owed` ns (how far the schedule is behind its plan), how many to give back at `now`.
    #[inline]
    pub fn take(&mut self, owed: u64, now: u64) -> u64 {
        if owed == 0 || now <= self.at {
            self.at = self.at.max(now);
            return 0;
        }
        let back = ((now - self.at) as f64 * SMOOTH_RECOVERY) as u64;
        if back > 0 {
            self.at = now;
        }
        back.min(owed)
    }

    /// The give-back starts again from `at`: the time up to it (a hold-up, a pause) is not given
    /// back at once.
    #[inline]
    pub fn restart(&mut self, at: u64) {
        self.at = self.at.max(at);
    }
}

/// One source's smooth schedule, as both TX workers keep it: its frame at `offset` (the caller's:
/// `k / rate`, or a burst's) is due at `anchor + offset`. A schedule found behind shifts (time
/// lost), a send held up shifts it from the hand-off, and the shift is given back at
/// [`SMOOTH_RECOVERY`] ([`GiveBack`]); what is not given back stretches the source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SmoothSchedule {
    /// Where the schedule's frame 0 is due now: its plan's, shifted.
    pub anchor: u64,
    /// How far behind its plan the schedule is (time lost, less what was given back), ns.
    pub shifted: u64,
    give: GiveBack,
}

impl SmoothSchedule {
    /// A schedule planned from `planned`, its frame 0 due at `anchor` (`anchor - planned`: lost
    /// already, to be given back from `anchor` on).
    pub fn new(planned: u64, anchor: u64) -> SmoothSchedule {
        SmoothSchedule { anchor, shifted: anchor.saturating_sub(planned), give: GiveBack::new(anchor) }
    }

    /// Give lost time back at `now`: the frames then fall due at most [`SMOOTH_RECOVERY`] faster
    /// than the rate.
    #[inline]
    pub fn give_back(&mut self, now: u64) {
        let back = self.give.take(self.shifted, now);
        self.anchor -= back;
        self.shifted -= back;
    }

    /// The frame at `offset` is due no earlier than `at`: a schedule behind that shifts by the
    /// difference, so nothing after it goes out faster than the rate.
    #[inline]
    pub fn due_no_earlier(&mut self, offset: u64, at: u64) {
        let due = self.anchor + offset;
        if due < at {
            self.anchor += at - due;
            self.shifted += at - due;
        }
    }

    /// A send held up until `handed` went out late as one burst: the schedule shifts so that its
    /// frame at `offset` is due at `at`, and the give-back starts from `handed` (a hold-up's time
    /// is not given back at once: 2 % of a 5-ms one made 5 more frames due right after it).
    #[inline]
    pub fn held_up(&mut self, offset: u64, at: u64, handed: u64) {
        self.due_no_earlier(offset, at);
        self.give.restart(handed);
    }

    /// Resumed at `at` after a pause of `paused_ns`: the schedule moves with the pause (time not
    /// lost), and nothing is given back for it.
    pub fn resume(&mut self, paused_ns: u64, at: u64) {
        self.anchor += paused_ns;
        self.give.restart(at);
    }
}

/// When one source's frames are due, as both TX workers keep it: frame `k` at `sched.anchor +
/// offset(k)`, where `offset(k)` is `k` frame times, or in bursts (`frames` frames at the rate,
/// then a gap) the bursts before it and its place in its own. A source found behind sends at
/// most its depth ([`smooth_depth`]) at once, and its schedule ([`SmoothSchedule`]) shifts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cadence {
    pub sched: SmoothSchedule,
    /// Nanoseconds per frame (0: unpaced, every frame due at the anchor).
    pub npf: f64,
    /// Frames a source behind its schedule sends at once, and the time they take after the first.
    pub depth: u64,
    depth_ns: u64,
    /// Bursts: frames per burst and the gap from a burst's last frame to the next one's first, ns.
    bursts: Option<(u64, u64)>,
}

impl Cadence {
    /// `rate` frames/s, planned from `planned`, frame 0 due at `anchor` ([`SmoothSchedule::new`]).
    pub fn new(rate: f64, planned: u64, anchor: u64) -> Cadence {
        let mut c = Cadence { sched: SmoothSchedule::new(planned, anchor), ..Cadence::default() };
        c.set_rate(rate);
        c
    }

    /// The frames in bursts of `frames`, `gap_ns` from a burst's last frame to the next one's first.
    pub fn in_bursts(self, frames: u64, gap_ns: u64) -> Cadence {
        Cadence { bursts: Some((frames, gap_ns)), ..self }
    }

    /// Go on at `rate` frames/s (the anchor is the caller's to move).
    pub fn set_rate(&mut self, rate: f64) {
        self.npf = if rate.is_finite() { 1e9 / rate } else { 0.0 };
        self.depth = smooth_depth(rate);
        self.depth_ns = ((self.depth - 1) as f64 * self.npf) as u64;
    }

    /// The frames come in bursts.
    #[inline]
    pub fn bursty(&self) -> bool {
        self.bursts.is_some()
    }

    /// How long after the anchor frame `k` is due.
    #[inline(always)]
    pub fn offset(&self, k: u64) -> u64 {
        match self.bursts {
            None => (k as f64 * self.npf) as u64,
            Some((frames, gap)) => {
                let (burst, i) = (k / frames, k % frames);
                let span = frames as f64 * self.npf + gap as f64;
                (burst as f64 * span + i as f64 * self.npf) as u64
            }
        }
    }

    /// When frame `k` is due.
    #[inline(always)]
    pub fn at(&self, k: u64) -> u64 {
        self.sched.anchor + self.offset(k)
    }

    /// Frames `0..n` due by `now` (paced, without bursts): `n`.
    #[inline]
    pub fn due_by(&self, now: u64) -> u64 {
        if now < self.sched.anchor {
            0
        } else {
            (((now - self.sched.anchor) as f64 / self.npf) as u64).saturating_add(1)
        }
    }

    /// Frame `k` goes out at `now`: a schedule behind by more than its depth shifts so that the
    /// depth's frames from `k` are due by then, and the rest follow at the rate.
    #[inline]
    pub fn within_depth(&mut self, k: u64, now: u64) {
        self.sched.due_no_earlier(self.offset(k) + self.depth_ns, now);
    }

    /// A send held up until `handed` took frame `last` out late, as one burst: the schedule
    /// shifts so that `last` is due at `handed` ([`SmoothSchedule::held_up`]).
    #[inline]
    pub fn held_up(&mut self, last: u64, handed: u64) {
        self.sched.held_up(self.offset(last), handed, handed);
    }

    /// A send of the `n` frames before `next` reached the queue at `handed`, of a source with
    /// `frames` in all: were it and the frames due by then more than the depth? Then the send was
    /// held up, its frames went out late as the burst, and the schedule shifts from its last
    /// ([`Cadence::held_up`]). Counting the send's own frames matters: a batch held up by less
    /// than the depth and the depth's frames due by its return went out back to back (7 + 11 at
    /// 148.8 kframes/s, 167 frames in a 1-ms window of 148.8). A send whose frames began before
    /// this schedule did (a run across a trial's segments: `n` above `next`) is left alone.
    #[inline]
    pub fn handed_late(&mut self, next: u64, n: u64, frames: u64, handed: u64) -> bool {
        if n == 0 || n > next {
            return false;
        }
        let beyond = next - n + self.depth;
        if beyond >= frames || self.at(beyond) > handed {
            return false;
        }
        self.held_up(next - 1, handed);
        true
    }
}

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

/// One batch in the peak window: its frames went to the queue one after another from `first_ns`
/// (the first was handed over) to `last_ns` (the send returned); `cum` counts the segment's
/// frames up to and including it.
#[derive(Debug, Clone, Copy, Default)]
struct Sent {
    first_ns: u64,
    last_ns: u64,
    cum: u64,
}

impl Sent {
    /// Of this batch's `n` frames, spread evenly over its span, those that left at or before `t`.
    #[inline]
    fn left_by(&self, n: u64, t: u64) -> u64 {
        if t < self.first_ns {
            0
        } else if t >= self.last_ns || n == 1 {
            n
        } else {
            let span = u128::from(self.last_ns - self.first_ns);
            1 + (u128::from(t - self.first_ns) * u128::from(n - 1) / span) as u64
        }
    }
}

/// The offered-load meter of one TX worker; [`LoadMeter::batch`] is called once per batch.
///
/// A batch's frames are not stamped at one time: they left one after another between the
/// moment the first was handed to the queue (after anything that held the worker up before, as
/// a stall inside the send) and the send's return (a kick transmits them in turn), so the meter
/// spreads them evenly over that span. A window edge inside a batch then counts the part of it
/// on each side, where a single stamp would move the whole batch to one side and under-report
/// the peak by up to a batch at each edge.
pub struct LoadMeter {
    /// Recent batches, oldest at `head`.
    ring: Box<[Sent]>,
    head: usize,
    tail: usize,
    /// Frames sent in this segment, and before the oldest batch still in the window.
    cum: u64,
    base: u64,
    /// Intended frames per window in this segment (0: unpaced, no peak).
    intended: f64,
    peak: Smoothness,
    /// When the previous batch's first frame was handed over (gaps run from there).
    prev_ns: Option<u64>,
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
            ring: vec![Sent::default(); RING].into_boxed_slice(),
            head: 0,
            tail: 0,
            cum: 0,
            base: 0,
            intended: 0.0,
            peak: Smoothness::default(),
            prev_ns: None,
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
            self.prev_ns = None;
        }
    }

    /// `n` frames went to the queue from `first_ns` (the first handed over) to `last_ns` (the
    /// send returned). The gap since the previous batch runs between their first frames and is
    /// shared by this batch's frames; the peak window ends at this batch's last frame.
    #[inline]
    pub fn batch(&mut self, first_ns: u64, last_ns: u64, n: u64) {
        if n == 0 {
            return;
        }
        let last_ns = last_ns.max(first_ns);
        if let Some(prev) = self.prev_ns {
            let gap = first_ns.saturating_sub(prev);
            self.gap_max_ns = self.gap_max_ns.max(gap);
            self.gaps.saturating_record_n(gap / n, n);
        }
        self.prev_ns = Some(first_ns);
        if self.intended <= 0.0 {
            return;
        }
        self.cum += n;
        // Drop batches whose every frame left before the window (t − W, t].
        let from = last_ns.saturating_sub(PEAK_WINDOW_NS);
        while self.head != self.tail && self.ring[self.head & (RING - 1)].last_ns <= from {
            self.base = self.ring[self.head & (RING - 1)].cum;
            self.head += 1;
        }
        if self.tail - self.head == RING {
            // Full: forget the oldest (the count becomes a lower bound; see RING).
            self.base = self.ring[self.head & (RING - 1)].cum;
            self.head += 1;
        }
        self.ring[self.tail & (RING - 1)] = Sent { first_ns, last_ns, cum: self.cum };
        self.tail += 1;
        // The oldest batch left may straddle the window's start: its frames before it are out.
        let oldest = self.ring[self.head & (RING - 1)];
        let count = self.cum - self.base - oldest.left_by(oldest.cum - self.base, from);
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

/// The most of `times` (sorted, ns) in any window of `window_ns` ending at one of them: the peak
/// a log of every frame's departure shows, which [`LoadMeter`] measures per batch.
pub fn most_in_window(times: &[u64], window_ns: u64) -> u64 {
    let mut lo = 0;
    let mut best = 0;
    for (hi, &t) in times.iter().enumerate() {
        while times[lo] + window_ns <= t {
            lo += 1;
        }
        best = best.max((hi - lo + 1) as u64);
    }
    best
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

    /// The one schedule both workers keep: a frame found late shifts it by exactly the lateness,
    /// the shift is given back at SMOOTH_RECOVERY and never past the plan, a hold-up restarts the
    /// give-back from the hand-off, and a pause moves the schedule without counting as lost.
    /// A cadence at 100 kframes/s (10 µs a frame, depth 8): frames in bursts of 4 with a 100-µs
    /// gap after each; a source 1 ms behind shifts so that its depth is due at once; a hold-up
    /// makes the last frame sent due at the hand-off; a new rate keeps the anchor.
    #[test]
    fn a_cadence_spaces_bursts_and_keeps_a_source_within_its_depth() {
        let c = Cadence::new(100_000.0, 1_000, 1_000);
        assert_eq!((c.depth, c.at(0), c.at(3), c.due_by(1_000 + 35_000)), (8, 1_000, 31_000, 4));
        let b = c.in_bursts(4, 100_000);
        assert_eq!([b.offset(3), b.offset(4), b.offset(9)], [30_000, 140_000, 290_000]);
        let mut c = c;
        c.within_depth(0, 1_000_000);
        assert_eq!((c.due_by(1_000_000), c.sched.shifted), (8, 1_000_000 - 1_000 - 70_000));
        c.held_up(9, 2_000_000);
        assert_eq!(c.at(9), 2_000_000);
        c.set_rate(50_000.0);
        assert_eq!((c.at(1) - c.at(0), c.depth), (20_000, 4));
    }

    #[test]
    fn a_smooth_schedule_shifts_gives_back_and_holds() {
        let mut s = SmoothSchedule::new(1_000, 1_000);
        s.due_no_earlier(5_000, 4_000);
        assert_eq!((s.anchor, s.shifted), (1_000, 0), "not behind: no shift");
        s.due_no_earlier(5_000, 9_000);
        assert_eq!((s.anchor, s.shifted), (4_000, 3_000));
        s.give_back(1_000_000); // 2 % of ~1 ms: 19.98 µs owed back, capped at 3 µs
        assert_eq!((s.anchor, s.shifted), (1_000, 0), "back on the plan, not ahead of it");
        s.held_up(10_000, 2_000_000, 2_000_000);
        assert_eq!((s.anchor, s.shifted), (1_990_000, 1_989_000));
        s.give_back(2_000_000);
        assert_eq!(s.shifted, 1_989_000, "nothing given back for the hold-up at once");
        s.give_back(2_100_000);
        assert_eq!(s.shifted, 1_989_000 - 2_000);
        s.resume(500_000, 3_000_000);
        assert_eq!((s.anchor, s.shifted), (1_990_000 - 2_000 + 500_000, 1_987_000), "a pause is not lost time");
        assert_eq!(SmoothSchedule::new(100, 350).shifted, 250, "lost before its first frame");
    }

    /// A send held up counts its own frames towards the depth (11 at 148.81 kframes/s, a frame
    /// every 6.72 µs): 7 sent at 80 µs and the 5 due by then make 12, the batch was the burst.
    #[test]
    fn a_held_up_send_counts_its_own_frames_towards_the_depth() {
        let fresh = || Cadence::new(148_810.0, 0, 0);
        let mut c = fresh();
        assert_eq!(c.depth, 11);
        assert!(!c.handed_late(7, 7, 1_000, 50_000), "7 and the 1 due by 50 µs: within the depth");
        assert_eq!(c.sched.anchor, 0);
        assert!(c.handed_late(7, 7, 1_000, 80_000));
        assert_eq!(c.at(6), 80_000, "the batch's last frame left at the hand-off");
        assert!(c.at(7) > 80_000 && c.sched.shifted > 0);
        let mut c = fresh();
        assert!(!c.handed_late(7, 7, 10, 80_000), "the source ends before the depth: no burst past it");
        assert!(!c.handed_late(3, 5, 1_000, 1_000_000), "frames from before this schedule began");
        assert!(!c.handed_late(7, 0, 1_000, 1_000_000));
        assert_eq!(c.sched.anchor, 0);
    }

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
            m.batch(k * 10_000, k * 10_000, 1);
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
            m.batch(t, t, 1);
            t += 10_000;
        }
        // 5 ms stall, then the 500 missed frames at 2x the rate.
        t += 5_000_000;
        for _ in 0..500 {
            m.batch(t, t, 2);
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
            m.batch(k * 1_000_000 + late, k * 1_000_000 + late, 1);
        }
        let s = m.summary();
        assert_eq!(s.peak_frames, 2);
        assert!(!s.exceeds(0.1));
    }

    #[test]
    fn unpaced_segments_only_record_gaps_and_bursts_skip_the_pause() {
        let mut m = LoadMeter::new();
        m.segment(f64::INFINITY, false);
        m.batch(0, 0, 64);
        m.batch(1_000, 1_000, 64);
        m.segment(f64::INFINITY, false);
        m.batch(50_000_000, 50_000_000, 64);
        let s = m.summary();
        assert_eq!((s.peak_frames, s.peak_ratio), (0, 0.0));
        assert_eq!(s.gap_max_ns, 1_000, "the pause between bursts is not a gap");
        assert_eq!(m.gaps.len(), 64);
    }
    #[test]
    fn a_batch_held_up_in_its_send_counts_when_its_frames_left() {
        // 50 kfps sent in pairs every 40 µs. One send stalls 5 ms before it hands its pair over;
        // then the worker sends its depth (4 frames) at once and goes on at the rate. The pair left
        // after the stall, next to the 4: stamped when its send was decided (5 ms earlier) it
        // fell out of the busiest window, and the meter reported 52 frames where 54 went out.
        fn send(m: &mut LoadMeter, departures: &mut Vec<u64>, first: u64, last: u64, n: u64) {
            departures.extend((0..n).map(|i| first + (last - first) * i / (n - 1)));
            m.batch(first, last, n);
        }
        let mut m = LoadMeter::new();
        m.segment(50_000.0, true);
        let mut departures = Vec::new();
        let mut t = 0;
        for _ in 0..100 {
            send(&mut m, &mut departures, t, t + 1_000, 2);
            t += 40_000;
        }
        t += 5_000_000;
        send(&mut m, &mut departures, t, t + 1_000, 2);
        send(&mut m, &mut departures, t + 1_000, t + 2_000, 4);
        for k in 1..100 {
            send(&mut m, &mut departures, t + 2_000 + k * 40_000, t + 3_000 + k * 40_000, 2);
        }
        let s = m.summary();
        assert_eq!(s.peak_frames, most_in_window(&departures, PEAK_WINDOW_NS));
        assert_eq!(s.peak_frames, 54);
        assert!(s.gap_max_ns >= 5_000_000, "{s:?}");
    }

    #[test]
    fn a_slow_send_across_a_window_edge_counts_the_part_inside() {
        // 100 kfps one frame every 10 µs, with a send of 16 frames that took 160 µs (the kick
        // transmitted them in turn): every 1 ms window holds 100 frames, however its edges fall.
        // Stamped at one time, the whole batch fell inside windows that held only part of it (115).
        let mut m = LoadMeter::new();
        m.segment(100_000.0, true);
        let mut departures = Vec::new();
        let mut t = 0u64;
        for k in 0..300u64 {
            let n = if k == 150 { 16 } else { 1 };
            let last = t + (n - 1) * 10_000;
            departures.extend((0..n).map(|i| t + i * 10_000));
            m.batch(t, last, n);
            t = last + 10_000;
        }
        let s = m.summary();
        assert_eq!(s.peak_frames, most_in_window(&departures, PEAK_WINDOW_NS));
        assert_eq!(s.peak_frames, 100);
    }
}
