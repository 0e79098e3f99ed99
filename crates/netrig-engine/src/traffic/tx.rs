//! The trial's TX worker: paced generation of signed frames on one queue.
//!
//! A worker owns one [`TxQueue`] and a share of the trial's streams (for a stream spread over
//! several queues, each worker owns a contiguous block of its flow keys, walked in the stream's
//! order, so per-flow sequence numbers stay consistent). Each share's run is a list of
//! *segments* at its rate: the rate phases of a duration trial (back to back), the bursts of a
//! burst trial, or one segment of a frame-count trial. Within a segment, frame `k` is due at
//! `anchor + k / rate` on the monotonic clock ([`Cadence`]). The shares are picked by due time
//! through the same picker, in the same loop, as the generator's flows
//! (`crate::traffic::pick::send_loop`; the trial's side of it is [`TrialTx`]: the stop flag and
//! the hard end before each pick, the counting intervals per frame, the meter and the live
//! counters per batch): each iteration takes what is due into one send. What happens to time a share lost (descheduled, pushed back by
//! its queue) is the [`Pacing`] mode's: by default the schedule shifts and drifts back at 2 % of
//! the time, so the offered rate is never exceeded by more than that and what is not given back
//! stretches the run (see `crate::traffic::pacing`). A worker that cannot keep the rate at all
//! ends the run with fewer frames sent than intended, or stretched beyond the trial's tolerance —
//! measured and reported, never hidden. A worker with an unpaced share sends all its shares
//! unpaced, a frame each in turn.
//!
//! Per frame the share's source (`crate::traffic::source::Source`) writes the next frame of its
//! key walk ([`netrig_wire::stack::CompiledStack::fill`]): the size's template, the per-flow fields,
//! the signature (flow id = the key, sequence = the walk's cycles, transmit timestamp, under the
//! trial's tag) and the checksums from precomputed bases. The clock is read three
//! times per batch: the stamp of a batch is the time its send was decided; when its first frame
//! is handed to the queue (after anything that held the send up) and when the send returned are
//! the span the offered-load meter spreads the batch's frames over; the return is also the next
//! iteration's "now".
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use hdrhistogram::Histogram;

use crate::clock;
use crate::error::PortError;
use crate::port::{TxQueue, TxQueueStats};
use crate::traffic::pacing::{
    catchup_burst, wake_batch, Cadence, LoadMeter, Pacing, Smoothness, CATCHUP_FACTOR, MAX_SLEEP_NS, MIN_SLEEP_NS,
};
pub use crate::traffic::pacing::{BATCH, UNPACED_BATCH};
use crate::traffic::pick::{hold_ns, send_loop, Batch, Due, Picker, TxSink};
use crate::traffic::schedule::{IntervalCounter, IntervalGrid, RatePhase, Side};
use crate::traffic::source::Source;
use crate::traffic::stream::CompiledStream;

/// Live counters a worker publishes once per batch (read by progress displays).
#[derive(Debug, Default)]
pub struct TxLive {
    pub frames: AtomicU64,
    pub bytes: AtomicU64,
}

/// This worker's part of one stream.
pub struct TxShare {
    pub stream: Arc<CompiledStream>,
    /// The stream's flow keys this worker sends: a contiguous block.
    pub keys: std::ops::Range<u64>,
    /// Rate of this share in frames/s.
    pub rate_pps: f64,
    /// Frames this share must send (count/burst stops), or None for duration stops.
    pub limit: Option<u64>,
}

/// What a worker did, per stream share.
#[derive(Debug, Clone, Default)]
pub struct TxShareResult {
    pub stream: usize,
    pub frames: u64,
    pub bytes: u64,
    /// Frames sent per flow of the share's block, i.e. the next sequence number: `per_flow[k]`
    /// is the stream's flow `first_flow + k`.
    pub per_flow: Vec<u64>,
    pub first_flow: u64,
    /// TX timestamps (ns since the trial epoch) of this share's first and last frame: its send
    /// window, for streams that stop after a count.
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
    /// Replays: frames sent with the signature (the rest went out as captured).
    pub stamped: u64,
}

#[derive(Debug, Clone, Default)]
pub struct TxWorkerResult {
    pub shares: Vec<TxShareResult>,
    /// Time of the first and last frame handed to the queue (engine clock).
    pub first_ns: u64,
    pub last_ns: u64,
    /// When the run's first frame was planned (engine clock).
    pub start_ns: u64,
    /// Intended frames for the whole run of this worker.
    pub intended: u64,
    /// Planned length of the run (phases: their sum; a paced frame count: frames / rate), ns.
    pub planned_ns: u64,
    /// When the run's last frame slot ended (engine clock): the planned end shifted by the time
    /// smooth pacing did not recover, or the last departure if later.
    pub end_ns: u64,
    pub queue: TxQueueStats,
    /// Longest the worker fell behind its schedule, in ns (it was descheduled, or the queue
    /// pushed back).
    pub max_lag_ns: u64,
    /// How much later than planned the worker's last frame left (smooth pacing: the time lost
    /// to stalls, which it did not recover), ns.
    pub stretch_ns: u64,
    /// Catch-up pacing: largest number of frames sent at once to catch up (beyond one batch).
    pub max_catchup: u64,
    /// How smoothly the load was offered (peak window, gaps).
    pub smoothness: Smoothness,
    /// Per-frame inter-departure gaps (for merging workers).
    pub gaps: Option<Histogram<u64>>,
    /// Frames sent per counting interval (empty without intervals).
    pub intervals: Vec<u64>,
    /// The queue failed: the message (the trial reports it).
    pub error: Option<String>,
}

impl TxWorkerResult {
    /// How long a paced run took, as its achieved rate is read over it, ns: its planned length
    /// plus its stretch when it sent its intended frames. When it ended with frames left (at its
    /// hard end, as a tester asked for more than it can send does; or stopped), from its planned
    /// start to its last departure: the stretch then says how far behind the schedule the tester
    /// fell (its next frame's lateness), not how long it sent, and planned + stretch would read a
    /// tester sending 0.85 Mframes/s for 1 s, asked for 16.4 M, as sending 0.44 M.
    pub fn paced_span_ns(&self) -> u64 {
        let sent: u64 = self.shares.iter().map(|s| s.frames).sum();
        if sent < self.intended {
            self.last_ns.saturating_sub(self.start_ns)
        } else {
            self.planned_ns + self.stretch_ns
        }
    }
}

/// What bounds a worker's run.
#[derive(Debug, Clone, PartialEq)]
pub enum RunShape {
    /// A duration trial: the phases back to back from the start. A paced run may go on for up
    /// to `max_stretch_ns` past its planned end to send its intended frames (catch-up pacing:
    /// 2 ms).
    Phases { phases: Vec<RatePhase>, max_stretch_ns: u64 },
    /// Until every share has sent its frame limit.
    Frames,
    /// `bursts` bursts of `frames` frames, `gap_ns` between burst starts.
    Bursts { frames: u64, bursts: u64, gap_ns: u64 },
}

/// Parameters of a worker run.
pub struct TxPlan {
    pub shares: Vec<TxShare>,
    /// Trial epoch on the engine clock: signature timestamps are relative to it.
    pub epoch_ns: u64,
    /// When to start sending (engine clock).
    pub start_ns: u64,
    pub shape: RunShape,
    pub pacing: Pacing,
    /// Count frames per interval of this grid.
    pub intervals: Option<Arc<IntervalGrid>>,
    /// Warm-up: frames carry the warm-up flag and are not counted as trial frames.
    pub warmup: bool,
    /// The trial's tag, written into every frame's signature.
    pub trial: u32,
    /// Another TX worker is pinned to the same CPU: wait by yielding, not by spinning.
    pub cpu_shared: bool,
}

/// Frames due before the end may still go out in a short grace period after it (catch-up).
const END_GRACE_NS: u64 = 2_000_000;

/// One stretch of a run at one rate.
#[derive(Debug, Clone, Copy)]
struct Segment {
    /// Planned start (engine clock).
    start_ns: u64,
    /// Frames to send (`u64::MAX`: until `end_ns`, unpaced duration runs).
    frames: u64,
    /// Frames/s (infinite: as fast as possible).
    rate: f64,
    /// Planned end (duration runs).
    end_ns: Option<u64>,
    /// Follows the previous segment without a pause (phases), not after one (bursts).
    continuous: bool,
}

fn segments(shape: &RunShape, start: u64, rate: f64, limit: Option<u64>) -> Vec<Segment> {
    match shape {
        RunShape::Phases { phases, .. } => {
            let mut t = start;
            phases
                .iter()
                .map(|p| {
                    let r = rate * p.rate_scale;
                    let frames = if r.is_finite() { (p.duration_ns as f64 * r / 1e9).round() as u64 } else { u64::MAX };
                    let s = Segment { start_ns: t, frames, rate: r, end_ns: Some(t + p.duration_ns), continuous: true };
                    t += p.duration_ns;
                    s
                })
                .collect()
        }
        RunShape::Frames => {
            vec![Segment { start_ns: start, frames: limit.unwrap_or(0), rate, end_ns: None, continuous: true }]
        }
        RunShape::Bursts { frames, bursts, gap_ns } => {
            let mut left = limit.unwrap_or(0);
            (0..*bursts)
                .map(|i| {
                    let n = (*frames).min(left);
                    left -= n;
                    Segment { start_ns: start + i * gap_ns, frames: n, rate, end_ns: None, continuous: false }
                })
                .collect()
        }
    }
}

/// Run one TX worker to completion (or until `stop` is set). Never panics on I/O errors: they
/// end the worker and are reported in the result.
pub fn run_tx_worker(queue: &mut dyn TxQueue, plan: TxPlan, stop: &AtomicBool, live: &TxLive) -> TxWorkerResult {
    let (mut p, mut t) = TrialTx::new(plan, stop, live);
    clock::sleep_until(t.bounds.start_ns);
    let epoch = t.epoch_ns;
    send_loop(queue, &mut p, &mut t, epoch);
    t.finish(p.srcs, queue)
}

/// What bounds a run, fixed before its first frame.
struct RunBounds {
    start_ns: u64,
    /// Intended frames of the whole run.
    intended: u64,
    /// Planned length of the run, ns.
    planned_ns: u64,
    /// Past this, a duration run stops even with frames left (the trial is then tester-limited).
    hard_end: Option<u64>,
}

impl RunBounds {
    /// What `plan` intends (its shares' segments, `segs`, together) and how long it may take.
    fn new(plan: &TxPlan, segs: &[Vec<Segment>]) -> RunBounds {
        let total_rate: f64 = plan.shares.iter().map(|s| s.rate_pps).sum();
        let unpaced = !total_rate.is_finite();
        let all_limited = plan.shares.iter().all(|s| s.limit.is_some());
        let limit: Option<u64> = all_limited.then(|| plan.shares.iter().filter_map(|s| s.limit).sum());
        let start = plan.start_ns;
        let all = segs.iter().flatten();
        let planned_end = all.clone().map(|s| s.end_ns.unwrap_or(0)).max().unwrap_or(start).max(start);
        let intended = match (&plan.shape, unpaced) {
            (RunShape::Phases { .. }, false) => all.map(|s| s.frames).sum(),
            _ => limit.unwrap_or(0),
        };
        let planned_ns = match &plan.shape {
            RunShape::Phases { .. } => planned_end - start,
            _ if unpaced => 0,
            _ => (intended as f64 * 1e9 / total_rate) as u64,
        };
        let hard_end = match (&plan.shape, unpaced, plan.pacing) {
            (RunShape::Phases { .. }, true, _) => Some(planned_end),
            (RunShape::Phases { max_stretch_ns, .. }, false, Pacing::Smooth) => {
                Some(planned_end + (*max_stretch_ns).max(END_GRACE_NS))
            }
            (RunShape::Phases { .. }, false, Pacing::CatchUp) => Some(planned_end + END_GRACE_NS),
            _ => None,
        };
        RunBounds { start_ns: start, intended, planned_ns, hard_end }
    }
}

/// Where the worker is in its current segment: frame `k` is due at `sched.anchor + k × npf`.
struct SegmentClock {
    /// Index of the segment in the run's.
    index: usize,
    seg: Segment,
    /// Frames sent in this segment.
    sent: u64,
    /// When its frames are due (smooth pacing shifts the schedule and gives the shift back;
    /// catch-up never moves it).
    c: Cadence,
    wake: u64,
    /// Catch-up token bucket: depth `burst`, refilled at CATCHUP_FACTOR × rate.
    burst: f64,
    tokens: f64,
    tokens_at: u64,
}

impl SegmentClock {
    /// Segment `index`, frame 0 due at `anchor` (`anchor - seg.start_ns`: time lost before it).
    fn new(index: usize, seg: Segment, anchor: u64) -> SegmentClock {
        let burst = catchup_burst(seg.rate) as f64;
        SegmentClock {
            index,
            seg,
            sent: 0,
            c: Cadence::new(seg.rate, seg.start_ns, anchor),
            wake: wake_batch(seg.rate),
            burst,
            tokens: burst,
            tokens_at: anchor,
        }
    }

    /// Smooth pacing: give back lost time ([`SmoothSchedule::give_back`]).
    #[inline]
    fn recover(&mut self, now: u64) {
        self.c.sched.give_back(now);
    }

    /// A rate, not as fast as possible.
    #[inline]
    fn paced(&self) -> bool {
        self.seg.rate.is_finite()
    }

    /// The segment sent what it had to (or, unpaced, ran to its end).
    #[inline]
    fn done(&self, now: u64) -> bool {
        self.sent >= self.seg.frames || (!self.paced() && self.seg.end_ns.is_some_and(|e| now >= e))
    }

    /// Frames due now and not sent yet (unpaced: a batch).
    #[inline]
    fn due(&self, now: u64) -> u64 {
        if !self.paced() {
            UNPACED_BATCH as u64
        } else {
            self.c.due_by(now).min(self.seg.frames).saturating_sub(self.sent)
        }
    }

    /// When frame `k` of the segment was planned (before any shift of the schedule).
    #[inline]
    fn planned_at(&self, k: u64) -> u64 {
        self.seg.start_ns + (k as f64 * self.c.npf) as u64
    }
}

/// This worker's part of one stream as it sends it: its frames, its segments (the run's shape at
/// its rate) and the clock of the one it is in. The worker's picker asks it for frames
/// ([`Due::take`]); what it took is counted as picked (the queue may take them a send later).
struct Share {
    share: TxShare,
    src: Source,
    segs: Vec<Segment>,
    sc: SegmentClock,
    pacing: Pacing,
    /// The current segment starts after a pause (a burst): anchored when first picked.
    fresh: bool,
    /// Unpaced beside other shares: one frame a pick, in turn with them (each gets its part to
    /// the frame).
    turns: bool,
    picked: u64,
    /// When the first frame of its last run was due (its lateness at the hand-off).
    run_due: u64,
    done: bool,
    epoch_ns: u64,
    stretch_ns: u64,
    max_lag_ns: u64,
    max_catchup: u64,
}

impl Share {
    /// `share`'s frames over `segs` (none: nothing to send).
    fn new(share: TxShare, segs: Vec<Segment>, pacing: Pacing, epoch_ns: u64) -> Share {
        let s = &share.stream;
        let src = match (&s.stack, &s.config.replay) {
            (Some(stack), _) => {
                let len = share.keys.end - share.keys.start;
                let (stride, start) = s.walk.within(len);
                let first = stack.keys().cursor(share.keys.clone(), stride, start);
                Source::stack(stack.clone(), first, &s.size_schedule, &s.sizes, s.flow_base)
            }
            (None, Some(replay)) => Source::replay(replay.clone(), s.flow_base),
            (None, None) => unreachable!("a stream without a stack is a replay"),
        };
        let first = segs.first().copied().unwrap_or(Segment {
            start_ns: 0,
            frames: 0,
            rate: share.rate_pps,
            end_ns: None,
            continuous: true,
        });
        Share {
            sc: SegmentClock::new(0, first, first.start_ns),
            done: segs.is_empty() || share.limit == Some(0),
            share,
            src,
            segs,
            pacing,
            fresh: false,
            turns: false,
            picked: 0,
            run_due: 0,
            epoch_ns,
            stretch_ns: 0,
            max_lag_ns: 0,
            max_catchup: 0,
        }
    }

    /// Its frame limit is picked.
    #[inline]
    fn limit_reached(&self) -> bool {
        self.share.limit.is_some_and(|l| self.picked >= l)
    }

    /// A segment ended: how much later than planned its last frame left.
    fn close(&mut self) {
        let sc = &self.sc;
        if sc.paced() && sc.sent > 0 {
            let last = self.src.last_ts + self.epoch_ns;
            self.stretch_ns = self.stretch_ns.max(last.saturating_sub(sc.planned_at(sc.sent - 1)));
        }
    }

    /// The current segment is done: on to the next one (`None`: the share is done).
    fn next_segment(&mut self, now: u64) -> Option<u64> {
        self.close();
        let index = self.sc.index + 1;
        if index >= self.segs.len() || self.limit_reached() {
            self.done = true;
            return None;
        }
        let next = self.segs[index];
        if next.continuous {
            // The next phase starts where this one ends, shifted by the time lost so far.
            let shift = if self.pacing == Pacing::Smooth { self.sc.c.sched.shifted } else { 0 };
            self.sc = SegmentClock::new(index, next, next.start_ns + shift);
            Some(now)
        } else {
            self.sc = SegmentClock::new(index, next, next.start_ns);
            self.fresh = true;
            Some(next.start_ns)
        }
    }

    /// What the pacing mode lets go out of the `due` frames now (`None`: nothing, catch-up has no
    /// tokens yet); records the lag behind the schedule.
    #[inline]
    fn pace(&mut self, mut due: u64, now: u64) -> Option<u64> {
        let sc = &mut self.sc;
        if !sc.paced() {
            return Some(due);
        }
        self.max_lag_ns = self.max_lag_ns.max(now.saturating_sub(sc.c.at(sc.sent)));
        match self.pacing {
            Pacing::Smooth => {
                if due > sc.c.depth {
                    // Behind: the lost time is not recovered at once (`recover` gives it back
                    // at SMOOTH_RECOVERY of the time that passes). Shift the schedule so that
                    // `depth` frames are due now and the rest follow at the rate.
                    sc.c.within_depth(sc.sent, now);
                    due = sc.c.depth;
                }
            }
            Pacing::CatchUp => {
                let refill = now.saturating_sub(sc.tokens_at) as f64 * total_rate_scale(&sc.seg, CATCHUP_FACTOR);
                sc.tokens = (sc.tokens + refill).min(sc.burst);
                sc.tokens_at = now;
                if due > BATCH as u64 {
                    self.max_catchup = self.max_catchup.max((sc.tokens as u64).min(due));
                }
                if due as f64 > sc.tokens {
                    due = sc.tokens as u64;
                    if due == 0 {
                        return None;
                    }
                }
            }
        }
        Some(due)
    }

    /// When its next frame is due after taking some at `now` (the worker's hold applies to it
    /// as to the generator's flows: `pick::hold_ns`).
    #[inline]
    fn next_due(&self, now: u64) -> u64 {
        let sc = &self.sc;
        if !sc.paced() || sc.sent >= sc.seg.frames || self.limit_reached() {
            return now + 1;
        }
        sc.c.at(sc.sent).max(now + 1)
    }

    /// What it sent.
    fn result(self) -> TxShareResult {
        let src = &self.src;
        TxShareResult {
            stream: self.share.stream.index,
            frames: src.sent,
            bytes: src.bytes,
            per_flow: src.per_key(),
            first_flow: self.share.keys.start,
            first_ts_ns: src.first_ts,
            last_ts_ns: src.last_ts,
            stamped: src.stamped,
        }
    }
}

impl Due for Share {
    #[inline]
    fn live(&self, _gen: u32) -> bool {
        !self.done
    }

    /// A batch's worth of its frames due at `now` (at most one batch a pick), or none yet (no
    /// catch-up tokens, a segment just ended, a frame due by its time but not by the count).
    #[inline]
    fn take(&mut self, now: u64, _next: u64, room: usize) -> (u64, Option<u64>) {
        if self.fresh {
            // A burst starting late is measured from its actual start.
            let anchor = now.max(self.sc.seg.start_ns);
            self.sc = SegmentClock::new(self.sc.index, Segment { start_ns: anchor, ..self.sc.seg }, anchor);
            self.fresh = false;
        }
        if self.sc.done(now) || self.limit_reached() {
            return (0, self.next_segment(now));
        }
        if self.pacing == Pacing::Smooth && self.sc.paced() {
            self.sc.recover(now);
        }
        let (due, left) = (self.sc.due(now), self.sc.seg.frames - self.sc.sent);
        let Some(due) = self.pace(due, now) else { return (0, Some(now + 1)) };
        let sc = &mut self.sc;
        let most = if sc.paced() {
            BATCH
        } else if self.turns {
            1
        } else {
            UNPACED_BATCH
        };
        let mut want = due.min(most as u64).min(left).min(room as u64);
        if let Some(l) = self.share.limit {
            want = want.min(l - self.picked);
        }
        self.run_due = sc.c.at(sc.sent);
        sc.sent += want;
        if self.pacing == Pacing::CatchUp {
            sc.tokens -= want as f64;
        }
        self.picked += want;
        (want, Some(if self.turns { now } else { self.next_due(now) }))
    }
}

/// The trial's side of a TX worker's loop: its plan's bounds, stop flag and hard end, counting
/// intervals, offered-load meter, wait and result so far.
struct TrialTx<'a> {
    bounds: RunBounds,
    pacing: Pacing,
    epoch_ns: u64,
    warmup: bool,
    trial: u32,
    cpu_shared: bool,
    /// A duration run: counting intervals start with each phase's first frame.
    phased: bool,
    grid: Option<Arc<IntervalGrid>>,
    counter: Option<IntervalCounter>,
    meter: LoadMeter,
    waker: Waker,
    stop: &'a AtomicBool,
    live: &'a TxLive,
    res: TxWorkerResult,
    total_sent: u64,
    /// The segments whose first frame went (the meter and the grid told), by index.
    begun: usize,
    /// When the last batch's send was decided (its frames' stamp), engine clock.
    last_stamp: u64,
    /// How old a batch's first frame is when it goes: the wake batch of the shares' rates in the
    /// segment begun last (`pick::hold_ns`, as the generator's worker holds).
    hold: u64,
}

impl<'a> TrialTx<'a> {
    /// The run of `plan`, nothing sent yet: its shares, scheduled from its start, and the rest.
    fn new(plan: TxPlan, stop: &'a AtomicBool, live: &'a TxLive) -> (Picker<Share>, TrialTx<'a>) {
        // A worker with an unpaced share sends every share unpaced, in turn (each its part).
        let unpaced = plan.shares.iter().any(|s| !s.rate_pps.is_finite());
        let rate = |s: &TxShare| if unpaced { f64::INFINITY } else { s.rate_pps };
        let segs: Vec<Vec<Segment>> =
            plan.shares.iter().map(|s| segments(&plan.shape, plan.start_ns, rate(s), s.limit)).collect();
        let bounds = RunBounds::new(&plan, &segs);
        let res = TxWorkerResult {
            intended: bounds.intended,
            planned_ns: bounds.planned_ns,
            start_ns: bounds.start_ns,
            ..Default::default()
        };
        let (pacing, epoch) = (plan.pacing, plan.epoch_ns);
        let turns = unpaced && plan.shares.len() > 1;
        let mut p = Picker::new(
            plan.shares.into_iter().zip(segs).map(|(s, segs)| Share::new(s, segs, pacing, epoch)).collect::<Vec<_>>(),
        );
        for (k, s) in p.srcs.iter_mut().enumerate() {
            s.turns = turns;
            if !s.done {
                p.heap.push(s.sc.seg.start_ns, k as u32, 0);
            }
        }
        let t = TrialTx {
            bounds,
            pacing,
            epoch_ns: epoch,
            warmup: plan.warmup,
            trial: plan.trial,
            cpu_shared: plan.cpu_shared,
            phased: matches!(plan.shape, RunShape::Phases { .. }),
            grid: plan.intervals.clone(),
            counter: plan.intervals.map(|g| IntervalCounter::new(g, Side::Tx)),
            meter: LoadMeter::new(),
            waker: Waker::default(),
            stop,
            live,
            res,
            total_sent: 0,
            begun: 0,
            last_stamp: 0,
            hold: hold_ns(segment_rate(&p.srcs, 0)),
        };
        (p, t)
    }

    /// A duration run reached its hard end (with frames left: how late each share's next is).
    fn past_hard_end(&mut self, shares: &mut [Share], now: u64) -> bool {
        if self.bounds.hard_end.is_none_or(|h| now < h) {
            return false;
        }
        for s in shares.iter_mut().filter(|s| !s.done && s.sc.paced()) {
            let due = s.sc.planned_at(s.sc.sent);
            s.stretch_ns = s.stretch_ns.max(now.saturating_sub(due));
        }
        true
    }

    /// Wait until `next`, when share `sc`'s clock has frames to take: sleep until shortly before
    /// (by how late wake-ups have been recently, less the slack up to the depth: a wake-up late
    /// within it costs nothing), then spin. A wake-up later than that is time smooth pacing does
    /// not get back.
    fn wait_until(&mut self, queue: &mut dyn TxQueue, next: u64, sc: &SegmentClock, now: u64) {
        let slack = if self.pacing == Pacing::Smooth && sc.paced() {
            ((sc.c.depth - sc.wake) as f64 * sc.c.npf) as u64
        } else {
            0
        };
        let early = self.waker.margin_ns.saturating_sub(slack);
        if next > now + early + MIN_SLEEP_NS {
            let _ = queue.flush();
            let between = (sc.wake as f64 * sc.c.npf) as u64;
            self.waker.sleep_until((next - early).min(now + MAX_SLEEP_NS), between);
        } else if self.cpu_shared {
            // Another TX worker is pinned to this CPU: spinning would starve it, its wake-ups
            // would be late, its margin grow, and the two would take turns losing time.
            std::thread::yield_now();
        } else {
            // Alone on the CPU: spin (a yield lets deferred softirq work — on veth the DUT's
            // forwarding — run in bunches, and the DUT sees bursts).
            std::hint::spin_loop();
        }
    }

    /// A share's segment `index` sends its first frames: the offered-load meter and the counting
    /// intervals start it.
    fn begin(&mut self, shares: &[Share], index: usize, ts: u64) {
        let rate = segment_rate(shares, index);
        let continuous = shares.iter().filter_map(|s| s.segs.get(index)).all(|g| g.continuous);
        self.meter.segment(rate, continuous || index == 0);
        self.hold = hold_ns(rate);
        if self.phased {
            if let Some(g) = &self.grid {
                g.start_phase(index, ts);
            }
        }
        self.begun = index + 1;
    }

    /// The result: when the run ended, the queue drained, the meters' summaries, each share's
    /// counts.
    fn finish(mut self, shares: Vec<Share>, queue: &mut dyn TxQueue) -> TxWorkerResult {
        let mut res = std::mem::take(&mut self.res);
        // The schedule's end when a share sent its last segment whole; when it stopped early (the
        // hard end, a stop), the last send: not where the frames it never sent would have been due
        // (that would make the last counting interval, and the stretch, longer than the sending was).
        let whole = |s: &Share| s.sc.paced() && s.sc.seg.frames != u64::MAX && s.sc.sent >= s.sc.seg.frames;
        res.end_ns = if !shares.is_empty() && shares.iter().all(whole) {
            shares.iter().map(|s| s.sc.c.at(s.sc.seg.frames)).max().unwrap_or(0).max(self.last_stamp)
        } else {
            res.last_ns
        };
        if let Err(e) = drain_queue(queue, self.stop) {
            res.error.get_or_insert(e.to_string());
        }
        res.queue = queue.stats();
        res.smoothness = self.meter.summary();
        res.gaps = Some(self.meter.gaps);
        if let Some(c) = self.counter.as_mut() {
            c.flush_upto(u64::MAX);
        }
        res.intervals = self.counter.map(|c| c.counts).unwrap_or_default();
        res.stretch_ns = shares.iter().map(|s| s.stretch_ns).max().unwrap_or(0);
        res.max_lag_ns = shares.iter().map(|s| s.max_lag_ns).max().unwrap_or(0);
        res.max_catchup = shares.iter().map(|s| s.max_catchup).max().unwrap_or(0);
        res.shares = shares.into_iter().map(Share::result).collect();
        res
    }

    /// Account for the frames of `b` (some went): lateness, hold-ups, the offered-load meter, the
    /// live counters.
    #[inline]
    fn sent_frames(&mut self, p: &mut Picker<Share>, b: Batch) {
        let (sent, now, handed, after) = (b.n, b.now, b.handed, b.after);
        if self.total_sent == 0 {
            self.res.first_ns = now;
        }
        self.res.last_ns = after;
        self.last_stamp = now;
        self.total_sent += sent as u64;
        for (k, n) in p.pending.first(sent) {
            let s = &mut p.srcs[k as usize];
            if !s.sc.paced() {
                continue;
            }
            // How late the run's first frame really left (a hold-up after the pick looked).
            s.max_lag_ns = s.max_lag_ns.max(handed.saturating_sub(s.run_due));
            if self.pacing == Pacing::Smooth {
                // Held up between the decision and the hand-off (descheduled, or the queue was
                // slow to take it) so long that this batch and the frames due meanwhile are more
                // than the depth: it went out late as one burst, so the schedule shifts from it
                // as from a burst `pace` lets out, and the next frame follows one frame time
                // later. Without this, the frames that fell due meanwhile went out right after
                // it as a second burst (a 1-ms window held the intended 50 frames + 7).
                s.sc.c.handed_late(s.sc.sent, n, s.sc.seg.frames, handed);
            }
        }
        self.meter.batch(handed, after, sent as u64);
        self.live.frames.store(self.total_sent, Ordering::Relaxed);
        self.live.bytes.store(p.srcs.iter().map(|s| s.src.bytes).sum(), Ordering::Relaxed);
    }
}

impl TxSink for TrialTx<'_> {
    type Src = Share;

    /// Until every share is done, the hard end, a queue error or the stop flag.
    #[inline]
    fn before(&mut self, p: &mut Picker<Share>, _queue: &mut dyn TxQueue, now: u64) -> Option<u64> {
        (!self.stop.load(Ordering::Relaxed) && !self.past_hard_end(&mut p.srcs, now)).then_some(self.hold)
    }

    /// The segments the picks reach begin (the meter, the counting grid's phase).
    #[inline]
    fn picked(&mut self, p: &mut Picker<Share>, now: u64) {
        let top = p.pending.runs.iter().map(|&(k, _)| p.srcs[k as usize].sc.index).max().unwrap_or(0);
        while self.begun <= top {
            self.begin(&p.srcs, self.begun, now.saturating_sub(self.epoch_ns));
        }
    }

    /// Write the share's next frame; intervals count every frame by the stamp it carries.
    #[inline]
    fn writer(&mut self) -> impl FnMut(&mut [Share], usize, &mut [u8], &mut u64, u64) -> usize + '_ {
        let (trial, warmup, mut counter) = (self.trial, self.warmup, self.counter.as_mut());
        move |shares, k, buf, held, stamp| {
            if let Some(c) = counter.as_deref_mut() {
                c.add(stamp, 1);
            }
            shares[k].src.write(buf, held, trial, warmup, stamp).len
        }
    }

    /// Account for the batch's frames, and settle its interval counts for a watcher
    /// (`TrialControl::settled_intervals`: every later frame is stamped after `b.after`).
    #[inline]
    fn sent(&mut self, p: &mut Picker<Share>, b: Batch) {
        if b.n > 0 {
            self.sent_frames(p, b);
        }
        if let Some(c) = self.counter.as_mut() {
            c.flush_upto(b.after.saturating_sub(self.epoch_ns));
        }
    }

    /// The run ends; the error is in the result.
    fn failed(&mut self, _p: &mut Picker<Share>, e: PortError) -> bool {
        self.res.error = Some(e.to_string());
        false
    }

    /// Wait for the share due next; none: every share is done.
    fn idle(&mut self, p: &Picker<Share>, queue: &mut dyn TxQueue, now: u64) -> bool {
        let Some((next, k, _)) = p.heap.peek() else { return false };
        self.wait_until(queue, next + self.hold, &p.srcs[k as usize].sc, now);
        true
    }
}

/// The shares' rates in their segment `index` together, frames/s.
fn segment_rate(shares: &[Share], index: usize) -> f64 {
    shares.iter().filter_map(|s| s.segs.get(index)).map(|g| g.rate).sum()
}

/// Timed sleeps that end before a deadline by a margin learnt from how late recent wake-ups were.
///
/// The margin is at most half the time between two wake-ups: a worker that woke late because
/// another task held its CPU (a CPU hog at the same priority, the receiver sharing it) would
/// otherwise learn a margin longer than that time, never sleep again, and spin. A spinning worker
/// is a CPU hog itself: the scheduler then shares the CPU out in the other task's slices of
/// milliseconds and the worker falls further behind (measured beside a busy loop on each CPU: a
/// 4-s, 2-kfps trial sent 7 390 of 8 000 frames, stretched 340–390 ms, its margin stuck at 2 ms,
/// because a margin learns down only while the worker sleeps; bounded, 8 000, stretched 7–12 ms).
/// A sleeping worker with short slices wakes within 4–32 µs beside the same busy loop 95 % of the
/// time (bpftrace, sched_wakeup to sched_switch).
struct Waker {
    /// Wake this long before the next frame is due, then spin.
    margin_ns: u64,
}

impl Default for Waker {
    fn default() -> Self {
        Waker { margin_ns: 100_000 }
    }
}

impl Waker {
    const MIN_MARGIN_NS: u64 = 30_000;
    const MAX_MARGIN_NS: u64 = 2_000_000;

    /// Sleep until `target`, and learn from how late the wake-up was (`between`: the time between
    /// two wake-ups at the worker's rate, which bounds the margin).
    fn sleep_until(&mut self, target: u64, between: u64) {
        let now = clock::now_ns();
        if target <= now {
            return;
        }
        std::thread::sleep(std::time::Duration::from_nanos(target - now));
        self.learn(clock::now_ns().saturating_sub(target), between);
    }

    /// Up fast (twice the lateness just seen), down slowly (1/16 per sleep), within the bounds.
    fn learn(&mut self, late: u64, between: u64) {
        let cap = (between / 2).clamp(Self::MIN_MARGIN_NS, Self::MAX_MARGIN_NS);
        self.margin_ns = if 2 * late > self.margin_ns {
            (2 * late).min(cap)
        } else {
            (self.margin_ns - self.margin_ns / 16).clamp(Self::MIN_MARGIN_NS, cap)
        };
    }
}

/// Refill rate of the catch-up bucket, frames per ns.
#[inline]
fn total_rate_scale(seg: &Segment, factor: f64) -> f64 {
    seg.rate * factor / 1e9
}

/// Flush until the queue is idle (bounded: 1 s, or until stopped).
fn drain_queue(queue: &mut dyn TxQueue, stop: &AtomicBool) -> Result<(), PortError> {
    let deadline = clock::now_ns() + 1_000_000_000;
    loop {
        queue.flush()?;
        if queue.idle() || clock::now_ns() > deadline || stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
}

/// Split a stream over `shares` workers: contiguous blocks of its flow keys (share `s` of `q`
/// takes keys `⌊sN/q⌋..⌊(s+1)N/q⌋`), each at the stream's rate in proportion to its flows.
pub fn split_stream(stream: &Arc<CompiledStream>, shares: u64) -> Vec<TxShare> {
    let n = stream.nflows;
    // A replay keeps the capture's order: one worker sends it all.
    let shares = if stream.config.replay.is_some() { 1 } else { shares.min(n).max(1) };
    (0..shares)
        .map(|share| {
            let keys = share * n / shares..(share + 1) * n / shares;
            let frac = (keys.end - keys.start) as f64 / n as f64;
            TxShare {
                stream: stream.clone(),
                keys,
                rate_pps: stream.rate_pps * frac,
                limit: stream.frame_limit.map(|l| {
                    // Distribute the count exactly: the first (l % shares) shares get one more.
                    l / shares + u64::from(share < l % shares)
                }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{split_stream, Pacing, Segment, SegmentClock, Share, TxShareResult, TxWorkerResult, Waker};
    use crate::traffic::pacing::SMOOTH_RECOVERY;

    /// Smooth pacing's give-back, on the clock alone (no machine, no timing): a schedule 2 ms behind
    /// its plan drifts back at SMOOTH_RECOVERY of the time that passes, frames fall due that much
    /// faster, and it stops at the plan, never ahead of it.
    #[test]
    fn lost_time_is_given_back_at_the_recovery_rate_and_no_further() {
        let seg = Segment { start_ns: 1_000_000, frames: 1_000_000, rate: 50_000.0, end_ns: None, continuous: true };
        let t0 = seg.start_ns + 2_000_000;
        let mut sc = SegmentClock::new(0, seg, t0); // 2 ms lost at the start
        let due_without = sc.due(t0 + 50_000_000);
        for t in (t0..=t0 + 50_000_000).step_by(10_000) {
            sc.recover(t);
        }
        // 50 ms passed: 2 % of it (1 ms) given back, 50 more frames due than without give-back.
        let shift = sc.c.sched.shifted;
        assert_eq!(shift, sc.c.sched.anchor - seg.start_ns);
        assert!((shift as f64 - 2e6 + 50e6 * SMOOTH_RECOVERY).abs() < 1_000.0, "shift {shift} ns");
        assert_eq!(sc.due(t0 + 50_000_000) - due_without, 50);
        for t in (t0 + 50_000_000..=t0 + 200_000_000).step_by(10_000) {
            sc.recover(t);
        }
        assert_eq!((sc.c.sched.anchor, sc.c.sched.shifted), (seg.start_ns, 0), "back on the plan, not ahead of it");
    }
    use crate::traffic::stream::{compile, FlowOrder, StreamConfig};
    use netrig_wire::dissect::locate;
    use netrig_wire::stack::Site;
    use std::sync::Arc;

    /// A stream over three queues: each takes a contiguous block of the flows, at its part of
    /// the rate, visits each of its flows once a cycle in its own pseudorandom order, and counts
    /// what each flow was sent; the blocks cover every flow once.
    #[test]
    fn shares_walk_contiguous_blocks_of_the_flows_each_once_a_cycle() {
        let mut c = StreamConfig::new("s");
        (c.flows.src_ports, c.flows.dst_ips) = (5, 2);
        c.flows.order = FlowOrder::Pseudorandom { seed: 11 };
        let s = Arc::new(compile(0, &c, 100, 1514, 2).unwrap());
        let shares = split_stream(&s, 3);
        let blocks: Vec<_> = shares.iter().map(|sh| sh.keys.clone()).collect();
        assert_eq!(blocks, [0..3, 3..6, 6..10]);
        assert_eq!(shares[2].rate_pps, s.rate_pps * 0.4);
        let mut buf = [0u8; 128];
        for sh in shares {
            let (lo, len) = (sh.keys.start, sh.keys.end - sh.keys.start);
            let mut st = Share::new(sh, Vec::new(), Pacing::Smooth, 0);
            let mut seen = Vec::new();
            for j in 0..2 * len + 1 {
                let n = st.src.write(&mut buf, &mut 0, 7, false, j).len;
                let sig = locate(&buf[..n], Site::Payload).expect("a signed frame");
                assert_eq!(sig.seq, j / len, "flow {} sent once a cycle", sig.flow_id);
                seen.push(u64::from(sig.flow_id) - 100);
            }
            let mut cycle = seen[..len as usize].to_vec();
            cycle.sort_unstable();
            assert_eq!(cycle, (lo..lo + len).collect::<Vec<_>>());
            let r = st.result();
            assert_eq!((r.first_flow, r.per_flow.iter().sum::<u64>()), (lo, 2 * len + 1));
            let first = (seen[0] - lo) as usize;
            assert_eq!(r.per_flow[first], 3, "the first flow again after two cycles");
        }
    }

    #[test]
    fn a_late_wake_up_never_teaches_a_margin_that_leaves_no_sleep() {
        // 2 kfps, one frame per wake-up: 500 µs between wake-ups. A wake-up 3 ms late (another
        // task held the CPU) teaches at most half of that, so the worker still sleeps.
        let mut w = Waker::default();
        w.learn(3_000_000, 500_000);
        assert_eq!(w.margin_ns, 250_000);
        // On time again: the margin decays to its floor, never below it.
        for _ in 0..200 {
            w.learn(0, 500_000);
        }
        assert_eq!(w.margin_ns, Waker::MIN_MARGIN_NS);
        // At a low rate the learnt margin keeps its overall bound.
        w.learn(5_000_000, 100_000_000);
        assert_eq!(w.margin_ns, Waker::MAX_MARGIN_NS);
        // At a high rate the floor wins over half the time between wake-ups.
        w.learn(1_000_000, 20_000);
        assert_eq!(w.margin_ns, Waker::MIN_MARGIN_NS);
    }

    /// Two paced streams on one worker, 1 and 3 kframes/s for 1 s, picked on the clock alone:
    /// each share keeps its own rate (its frames, its 1-ms peak), and they interleave from the
    /// start instead of one sending its batches after the other's.
    #[test]
    fn shares_on_one_worker_each_keep_their_own_rate() {
        use super::{segments, RunShape};
        use crate::traffic::pick::{pick_due, Picks, Schedule};
        use crate::traffic::schedule::RatePhase;
        use crate::traffic::stream::Rate;
        let shape = RunShape::Phases {
            phases: vec![RatePhase { duration_ns: 1_000_000_000, rate_scale: 1.0 }],
            max_stretch_ns: 0,
        };
        let mut shares: Vec<Share> = [1_000.0, 3_000.0]
            .into_iter()
            .enumerate()
            .map(|(i, pps)| {
                let mut c = StreamConfig::new(format!("s{i}"));
                c.rate = Rate::Pps(pps);
                let share = split_stream(&Arc::new(compile(i, &c, 100, 1514, 2).unwrap()), 1).remove(0);
                Share::new(share, segments(&shape, 0, pps, None), Pacing::Smooth, 0)
            })
            .collect();
        let mut heap = Schedule::with_capacity(2);
        (0..2).for_each(|k| heap.push(0, k, 0));
        let (mut pending, mut times) = (Picks::default(), [Vec::new(), Vec::new()]);
        for t in (0..=1_010_000_000u64).step_by(20_000) {
            pick_due(&mut shares, &mut heap, &mut pending, t, 0);
            pending.drain().into_iter().for_each(|k| times[k as usize].push(t));
        }
        assert_eq!((times[0].len(), times[1].len()), (1_000, 3_000));
        for (k, pps) in [(0, 1.0), (1, 3.0)] {
            let peak = crate::traffic::pacing::most_in_window(&times[k], 1_000_000);
            assert!(peak as f64 <= pps + 3.0, "share {k}: {peak} frames in 1 ms");
        }
        assert!(times[0][1] < 10_000_000 && times[1][3] < 10_000_000, "both from the start");
    }

    #[test]
    fn a_run_cut_at_its_hard_end_is_read_over_the_time_it_sent_not_over_how_late_it_fell() {
        // 1 s planned at 16.4 Mframes/s from t = 10 s; the tester sent 0.85 M frames and stopped at
        // its hard end, 1.02 s in, its next frame then planned 52 ms in: 0.968 s late.
        let share = TxShareResult { frames: 850_000, ..Default::default() };
        let cut = TxWorkerResult {
            shares: vec![share.clone()],
            start_ns: 10_000_000_000,
            first_ns: 10_000_001_000,
            last_ns: 11_020_000_000,
            intended: 16_400_000,
            planned_ns: 1_000_000_000,
            stretch_ns: 968_000_000,
            ..Default::default()
        };
        assert_eq!(cut.paced_span_ns(), 1_020_000_000);
        // The same worker sending every intended frame, 5 ms late at the end (a stall it did not
        // give back): the planned length and the stretch.
        let whole = TxWorkerResult { intended: 850_000, stretch_ns: 5_000_000, ..cut };
        assert_eq!(whole.paced_span_ns(), 1_005_000_000);
    }
}
