//! Picking frames by due time: the sources a TX worker sends, each with its clock, and the picks
//! it hands to its queue in one send.
//!
//! A worker keeps one [`Slot`] per traffic unit it sends (an OTG flow; a trial's share of a
//! stream): its frames ([`Source`]), when they are due ([`Cadence`]), its frame limit and what it
//! picked. A running slot is in the worker's [`Schedule`], keyed by its next frame's due time
//! (equal times in the order queued, so unpaced slots take turns of [`TURN`] frames). Each
//! iteration [`pick_due`] takes the frames due into [`Picks`], runs of one slot's frames in due
//! order (so each slot's frames stay in sequence), which the worker hands to the queue in one
//! send. Picks the queue did not take stay for the next send.
//!
//! Pacing is smooth: a slot found behind by more than its depth shifts its schedule
//! ([`Cadence::within_depth`]), never sending above its rate over a window longer than that,
//! and gives the time back (2 % of the time that passes), so only what it could not give back
//! stretches it. A batch waits for its first frame to be `hold` old ([`hold_ns`]).
//!
//! Both TX workers run the same loop around the picker ([`send_loop`]): before each pick their
//! [`TxSink`] says whether to go on and how long to hold (the generator applies its commands
//! there, the trial checks its stop flag and hard end); the picks go to the queue in one send
//! whose frames the sink writes and counts; after it the sink accounts for what went (lateness,
//! hold-ups, meters, live counters); with nothing due it waits by its own policy.
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::clock;
use crate::error::PortError;
use crate::port::TxQueue;
use crate::traffic::pacing::{wake_batch, Cadence, SmoothSchedule, BATCH, UNPACED_BATCH};
use crate::traffic::source::Source;

/// One traffic unit's sending state in its worker.
pub(crate) struct Slot {
    /// Its frames and what of them this start sent.
    pub src: Source,
    /// Where this start's frames are due; `c.sched.shifted` is how far smooth pacing has it
    /// behind its plan (the unit's stretch).
    pub c: Cadence,
    /// Frames/s (infinite: unpaced).
    pub rate: f64,
    /// Frames per start (`None`: until stopped).
    pub limit: Option<u64>,
    pub running: bool,
    /// Bumped by every change of its schedule: heap entries of older generations are stale.
    pub gen: u32,
    /// The tag its frames carry.
    pub tag: u32,
    pub picked: u64,
    /// When it was paused (0: not paused).
    pub paused_at: u64,
}

/// How old a batch's first frame is when it goes, at `rate` frames/s of the running slots
/// together: its wake batch less one frame time (a paced worker sends when that many are due).
pub(crate) fn hold_ns(rate: f64) -> u64 {
    if rate > 0.0 && rate.is_finite() {
        ((wake_batch(rate) - 1) as f64 * 1e9 / rate) as u64
    } else {
        0
    }
}

impl Slot {
    /// `src`'s frames at `rate` frames/s, `limit` a start, in bursts of (frames, gap after one).
    pub(crate) fn new(src: Source, rate: f64, limit: Option<u64>, bursts: Option<(u64, u64)>) -> Slot {
        let c = Cadence::new(rate, 0, 0);
        Slot {
            c: match bursts {
                Some((frames, gap_ns)) => c.in_bursts(frames, gap_ns),
                None => c,
            },
            src,
            rate,
            limit,
            running: false,
            gen: 0,
            tag: 0,
            picked: 0,
            paused_at: 0,
        }
    }

    /// When pick `k` is due.
    #[inline(always)]
    pub(crate) fn due(&self, k: u64) -> u64 {
        self.c.at(k)
    }

    /// How many frames from `picked` (due) go in one run: with it every one due by `now` and by
    /// `next` (the next entry's due time), one due at `next` only within a turn of [`TURN`]
    /// frames, at most `room` and the frames left. In O(1) but for bursts (at most one frame is
    /// due in any nanosecond below 10^9 frames/s, the rate's bound).
    #[inline]
    fn run_len(&self, now: u64, next: u64, room: usize) -> u64 {
        let (start, turn) = (self.picked, TURN as u64);
        let most = self.limit.map_or(u64::MAX, |l| l - start).min(room as u64);
        let n = if self.c.npf == 0.0 {
            // Unpaced: every frame due at the anchor; another entry due then takes turns.
            let at = self.c.sched.anchor;
            if at > now.min(next) {
                1
            } else if at == next {
                turn
            } else {
                most
            }
        } else if self.c.bursty() {
            let mut n = 1;
            while n < most {
                let d = self.due(start + n);
                if d > now || d > next || (d == next && n == turn) {
                    break;
                }
                n += 1;
            }
            n
        } else {
            let t = now.min(next);
            let mut end = self.c.due_by(t).max(start + 1);
            while end > start + 1 && self.due(end - 1) > t {
                end -= 1;
            }
            while self.due(end) <= t && end - start < most {
                end += 1;
            }
            if end - start > turn && self.due(start + turn) == next {
                turn
            } else {
                end - start
            }
        };
        n.clamp(1, most)
    }

    /// Every frame of this start has been picked.
    pub(crate) fn all_picked(&self) -> bool {
        self.limit.is_some_and(|l| self.picked >= l)
    }

    /// Running with frames left to pick.
    pub(crate) fn active(&self) -> bool {
        self.running && !self.all_picked()
    }

    /// Start from the first frame under `tag`, frame 0 due at `anchor`.
    pub(crate) fn start(&mut self, tag: u32, anchor: u64) {
        self.src.restart();
        self.picked = 0;
        (self.tag, self.running, self.paused_at) = (tag, true, 0);
        self.c.sched = SmoothSchedule::new(anchor, anchor);
    }

    /// Pause at `at` (the schedule is kept, to resume from).
    pub(crate) fn pause(&mut self, at: u64) {
        if self.running {
            self.running = false;
            self.paused_at = at;
        }
    }

    /// Go on at `at` after a pause: the schedule moves with it.
    pub(crate) fn resume(&mut self, at: u64) {
        if !self.running && self.paused_at > 0 {
            self.c.sched.resume(at.saturating_sub(self.paused_at), at);
            self.paused_at = 0;
            self.running = true;
        }
    }

    pub(crate) fn stop(&mut self) {
        self.running = false;
        self.paused_at = 0;
    }

    /// Go on at `rate` from `at`: the next frame (`picked`) due at the new rate, not before the
    /// old schedule had it (a paused slot's schedule is kept from its pause).
    pub(crate) fn retime(&mut self, rate: f64, at: u64) {
        let when = if self.paused_at > 0 { self.paused_at } else { at.max(self.due(self.picked)) };
        self.c.set_rate(rate);
        self.rate = rate;
        self.c.sched.anchor = when.saturating_sub(self.c.offset(self.picked));
    }
}

/// A send whose first frame reached the queue this much after the picks was held up: see
/// [`held_up`].
pub(crate) const HELD_UP_NS: u64 = 20_000;

/// A send held up between the picks and the hand-off (descheduled, or the queue slow to take
/// them) until `handed`: a slot whose frames in it and those due by then were more than its
/// depth had its frames in it go out late as one burst, so its schedule shifts from there, its
/// next frame one frame time later, and its give-back starts there (as the trial's worker does:
/// [`Cadence::handed_late`]). Without this the frames due meanwhile went out right after it as a
/// second burst.
pub(crate) fn held_up(slots: &mut [Slot], heap: &mut Schedule, sent: impl Iterator<Item = (u32, u64)>, handed: u64) {
    for (k, n) in sent {
        let s = &mut slots[k as usize];
        if !s.running || s.c.npf == 0.0 || !s.c.handed_late(s.picked, n, s.limit.unwrap_or(u64::MAX), handed) {
            continue;
        }
        s.gen = s.gen.wrapping_add(1);
        if !s.all_picked() {
            heap.push(s.due(s.picked), k, s.gen);
        }
    }
}

/// Frames a slot picks at most before another slot due at the same time takes its turn.
pub(crate) const TURN: usize = BATCH;

/// The running slots' next due times: the earliest first and, among equal ones, the one queued
/// first. Unpaced slots are all due now, so the order they were queued in is their turn.
pub(crate) struct Schedule {
    heap: BinaryHeap<Reverse<(u64, u64, u32, u32)>>,
    queued: u64,
}

impl Schedule {
    pub(crate) fn with_capacity(n: usize) -> Schedule {
        Schedule { heap: BinaryHeap::with_capacity(n), queued: 0 }
    }

    /// Flow slot `k`'s next frame is due at `due` (`gen`: the slot's generation).
    pub(crate) fn push(&mut self, due: u64, k: u32, gen: u32) {
        self.queued += 1;
        self.heap.push(Reverse((due, self.queued, k, gen)));
    }

    /// The earliest entry: (due, slot, generation).
    pub(crate) fn peek(&self) -> Option<(u64, u32, u32)> {
        self.heap.peek().map(|&Reverse((due, _, k, gen))| (due, k, gen))
    }

    pub(crate) fn pop(&mut self) {
        self.heap.pop();
    }

    pub(crate) fn clear(&mut self) {
        self.heap.clear();
    }
}

/// The frames picked and not sent yet, in the order they go: runs of one flow slot's frames
/// (an entry per run, not per frame).
#[derive(Default)]
pub(crate) struct Picks {
    pub(crate) runs: VecDeque<(u32, u32)>,
    /// Frames in all the runs.
    pub(crate) frames: usize,
}

impl Picks {
    pub(crate) fn is_empty(&self) -> bool {
        self.frames == 0
    }

    /// `n` more frames of slot `k`.
    pub(crate) fn push(&mut self, k: u32, n: usize) {
        self.frames += n;
        match self.runs.back_mut() {
            Some((last, m)) if *last == k => *m += n as u32,
            _ => self.runs.push_back((k, n as u32)),
        }
    }

    /// The runs of the first `n` frames: each run's slot and its frames among them.
    pub(crate) fn first(&self, n: usize) -> impl Iterator<Item = (u32, u64)> + '_ {
        let mut left = n;
        self.runs.iter().map_while(move |&(k, m)| {
            let take = left.min(m as usize);
            left -= take;
            (take > 0).then_some((k, take as u64))
        })
    }

    /// The first `n` frames went.
    pub(crate) fn consume(&mut self, mut n: usize) {
        self.frames -= n;
        while n > 0 {
            let front = self.runs.front_mut().expect("the frames sent were picked");
            let m = (front.1 as usize).min(n);
            front.1 -= m as u32;
            n -= m;
            if front.1 == 0 {
                self.runs.pop_front();
            }
        }
    }

    /// Take slot `k`'s frames back; how many.
    pub(crate) fn take_back(&mut self, k: u32) -> u64 {
        let mut taken = 0;
        self.runs.retain(|&(s, m)| {
            taken += if s == k { u64::from(m) } else { 0 };
            s != k
        });
        self.frames -= taken as usize;
        taken
    }

    pub(crate) fn clear(&mut self) {
        self.runs.clear();
        self.frames = 0;
    }

    /// Every pick in order, a slot per frame (tests).
    #[cfg(test)]
    pub(crate) fn drain(&mut self) -> Vec<u32> {
        let all = self.runs.iter().flat_map(|&(k, m)| std::iter::repeat_n(k, m as usize)).collect();
        self.clear();
        all
    }
}

/// Pick every frame due by `now - hold` (the earliest due first) into `pending`; the longest any
/// picked frame waited after it fell due, ns.
#[inline]
pub(crate) fn pick_due<S: Due>(slots: &mut [S], heap: &mut Schedule, pending: &mut Picks, now: u64, hold: u64) -> u64 {
    let mut lag = 0;
    while pending.frames < UNPACED_BATCH {
        let Some((due, k, gen)) = heap.peek() else { return lag };
        let s = &mut slots[k as usize];
        if !s.live(gen) {
            heap.pop();
            continue;
        }
        // A batch starts once its first frame is `hold` old, then takes every frame due.
        if due > now || (pending.is_empty() && due + hold > now) {
            return lag;
        }
        heap.pop();
        lag = lag.max(now - due);
        // The slot's frames due before the next entry's go in one run: one heap operation per
        // run, not per frame (one slot alone: one per batch). Frames due with the next entry's
        // end the run after a turn: unpaced slots (every frame due now) take turns.
        let next = heap.peek().map_or(u64::MAX, |(d, _, _)| d);
        let (run, then) = s.take(now, next, UNPACED_BATCH - pending.frames);
        if run > 0 {
            pending.push(k, run as usize);
        }
        if let Some(t) = then {
            heap.push(t, k, gen);
        }
    }
    lag
}

/// What the picker asks of a slot (the generator's [`Slot`]; a trial's share).
pub(crate) trait Due {
    /// Its heap entry of generation `gen` is current and it runs.
    fn live(&self, gen: u32) -> bool;
    /// Its next frame was due by `now`: how many frames go in this run (the entry due next is
    /// due at `next`; at most `room`), and when its next frame is due after them (`None`: no more
    /// until it is told otherwise).
    fn take(&mut self, now: u64, next: u64, room: usize) -> (u64, Option<u64>);
}

impl Due for Slot {
    #[inline]
    fn live(&self, gen: u32) -> bool {
        gen == self.gen && self.running
    }

    #[inline]
    fn take(&mut self, now: u64, next: u64, room: usize) -> (u64, Option<u64>) {
        // Smooth pacing: time lost earlier is given back slowly; behind by more than the depth,
        // the schedule shifts (also over what was just given back: a hold-up gives nothing back).
        self.c.sched.give_back(now);
        self.c.within_depth(self.picked, now);
        let run = self.run_len(now, next, room);
        self.picked += run;
        (run, (!self.all_picked()).then(|| self.due(self.picked)))
    }
}

/// A TX worker's sources, the schedule of their due times and the frames picked, not sent yet.
pub(crate) struct Picker<S> {
    pub srcs: Vec<S>,
    pub heap: Schedule,
    pub pending: Picks,
}

impl<S> Picker<S> {
    /// `srcs`, none of them scheduled yet.
    pub(crate) fn new(srcs: Vec<S>) -> Picker<S> {
        Picker { heap: Schedule::with_capacity(srcs.len()), srcs, pending: Picks::default() }
    }
}

/// What a TX worker does around the picker ([`send_loop`]): the trial's run (its plan, stop flag,
/// hard end, intervals and result), the generator's (its commands, counters and pacing meter).
pub(crate) trait TxSink {
    type Src: Due;
    /// Before each pick at `now` (commands; the stop flag, the hard end): how old a batch's first
    /// frame is when it goes ([`hold_ns`]), or `None`: the loop ends.
    fn before(&mut self, p: &mut Picker<Self::Src>, queue: &mut dyn TxQueue, now: u64) -> Option<u64>;
    /// Frames were picked to go at `now`.
    fn picked(&mut self, _p: &mut Picker<Self::Src>, _now: u64) {}
    /// For one send: what writes source `k`'s next frame into `buf` stamped `stamp` (`held`: see
    /// [`TxQueue::send_held`]) and counts it, returning its length (what it reads is taken once
    /// a send, not once a frame).
    fn writer(&mut self) -> impl FnMut(&mut [Self::Src], usize, &mut [u8], &mut u64, u64) -> usize + '_;
    /// The first `b.n` picks went (still in `p.pending`).
    fn sent(&mut self, p: &mut Picker<Self::Src>, b: Batch);
    /// The queue failed: whether the loop goes on.
    fn failed(&mut self, p: &mut Picker<Self::Src>, e: PortError) -> bool;
    /// Nothing is due at `now`: wait for the next frame (or a command); `false`: the loop ends.
    fn idle(&mut self, p: &Picker<Self::Src>, queue: &mut dyn TxQueue, now: u64) -> bool;
}

/// A send that went: `n` of the picks, decided at `now`, handed to the queue from `handed`, the
/// send returned at `after`; `late`: the longest one of its runs' first frames waited after it
/// fell due until `handed`, ns (a send held up after the pick is late too).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batch {
    pub n: usize,
    pub now: u64,
    pub handed: u64,
    pub after: u64,
    pub late: u64,
}

/// The TX worker's loop: pick what is due, hand it to `queue` in one send (stamps since `epoch`),
/// account for it, or wait; until the sink ends it.
#[inline]
pub(crate) fn send_loop<K: TxSink>(queue: &mut dyn TxQueue, p: &mut Picker<K::Src>, sink: &mut K, epoch: u64) {
    let mut now = clock::now_ns();
    while let Some(hold) = sink.before(p, queue, now) {
        let lag = pick_due(&mut p.srcs, &mut p.heap, &mut p.pending, now, hold);
        if p.pending.is_empty() {
            if !sink.idle(p, queue, now) {
                return;
            }
            now = clock::now_ns();
            continue;
        }
        sink.picked(p, now);
        let (srcs, mut runs) = (&mut p.srcs, p.pending.runs.iter());
        let (mut k, mut left, mut write) = (0usize, 0u32, sink.writer());
        let sent = send_stamped(queue, p.pending.frames, now, epoch, move |buf, held, stamp| {
            if left == 0 {
                let &(slot, n) = runs.next().expect("one pick per frame");
                (k, left) = (slot as usize, n);
            }
            left -= 1;
            write(srcs, k, buf, held, stamp)
        });
        match sent {
            Ok((n, handed)) => {
                let after = clock::now_ns();
                sink.sent(p, Batch { n, now, handed, after, late: lag + handed.saturating_sub(now) });
                p.pending.consume(n);
                now = after;
            }
            Err(e) => {
                if !sink.failed(p, e) {
                    return;
                }
                now = clock::now_ns();
            }
        }
    }
}

/// Hand up to `want` frames, decided at `now`, to `queue` ([`TxQueue::send_held`]), each written by
/// `frame(buf, held, stamp)`: `stamp` is the decision time since `epoch`, read afresh every
/// [`BATCH`] frames of a larger (unpaced) batch so that no stamp is older than a batch. The
/// frames sent, and when the first was handed to the queue (after anything that held the send
/// up: the span a batch's frames are spread over starts there).
#[inline]
pub(crate) fn send_stamped(
    queue: &mut dyn TxQueue,
    want: usize,
    now: u64,
    epoch: u64,
    mut frame: impl FnMut(&mut [u8], &mut u64, u64) -> usize,
) -> Result<(usize, u64), PortError> {
    let (mut n, mut handed, mut stamp) = (0usize, now, now.saturating_sub(epoch));
    let sent = queue.send_held(want, &mut |buf: &mut [u8], held: &mut u64| {
        if n.is_multiple_of(BATCH) {
            let t = clock::now_ns();
            if n == 0 {
                handed = t;
            } else {
                stamp = t.saturating_sub(epoch);
            }
        }
        n += 1;
        frame(buf, held, stamp)
    })?;
    debug_assert_eq!(sent, n);
    Ok((sent, handed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_wire::stack::{compile, HeaderKind, HeaderSpec, KeySpec, Payload, Site, StackSpec};
    use std::sync::Arc;

    /// A running slot of 64-byte UDP frames at `rate` frames/s (infinite: unpaced).
    fn slot(rate: f64, limit: Option<u64>, bursts: Option<(u64, u64)>) -> Slot {
        let h = |kind| HeaderSpec { kind, fields: Vec::new(), bytes: Vec::new() };
        let headers = [HeaderKind::Ethernet, HeaderKind::Ipv4, HeaderKind::Udp].map(h).to_vec();
        let spec = StackSpec { headers, payload: Payload::zeros(), site: Site::End, keys: KeySpec::default() };
        let stack = Arc::new(compile(&spec, &[60]).unwrap());
        let src = Source::stack(stack.clone(), stack.keys().sequential(), &[0], &[64], 0);
        let mut s = Slot::new(src, rate, limit, bursts);
        s.running = true;
        s
    }

    fn unpaced() -> Slot {
        slot(f64::INFINITY, None, None)
    }

    fn picks(slots: &mut [Slot], now: u64) -> (Vec<u32>, usize) {
        let mut heap = Schedule::with_capacity(slots.len());
        for (k, s) in slots.iter().enumerate() {
            heap.push(s.due(0), k as u32, s.gen);
        }
        let mut pending = Picks::default();
        pick_due(slots, &mut heap, &mut pending, now, 0);
        (pending.drain(), heap.heap.len())
    }

    /// Picks kept as runs give back the frames in order, a slot per frame, through a partial send
    /// and a flow taken back.
    #[test]
    fn picks_keep_their_order_as_runs() {
        let mut p = Picks::default();
        [(0, 3), (0, 2), (1, 4), (2, 1), (1, 2)].into_iter().for_each(|(k, n)| p.push(k, n));
        assert_eq!((p.runs.len(), p.frames), (4, 12), "a flow's next run joins its last");
        assert_eq!(p.first(6).collect::<Vec<_>>(), [(0, 5), (1, 1)], "each run's frames among the first 6");
        p.consume(6);
        assert_eq!(p.take_back(1), 5);
        assert_eq!((p.frames, p.drain()), (1, vec![2]));
        assert!(p.is_empty());
    }

    /// A run's length taken at once is the one the per-frame loop took, frame for frame: random
    /// rates (paced, unpaced, in bursts), anchors, frame limits, times, next entries and room.
    #[test]
    fn a_runs_length_is_the_per_frame_loops() {
        let reference = |s: &Slot, now: u64, next: u64, room: u64| {
            let (mut run, mut k) = (0, s.picked);
            loop {
                (k, run) = (k + 1, run + 1);
                if s.limit.is_some_and(|l| k >= l) || run == room {
                    return run;
                }
                let d = s.due(k);
                if d > now || d > next || (d == next && run == TURN as u64) {
                    return run;
                }
            }
        };
        let mut rng = crate::rng::XorShift::new(42);
        let mut r = |n: u64| rng.next_u64() % n;
        for i in 0..30_000u64 {
            let rate = if i % 4 == 0 { f64::INFINITY } else { 1.0 + r(3_000_000) as f64 };
            let (limit, bursts) = match i % 3 {
                0 => (None, None),
                1 => (Some(1 + r(5000)), None),
                _ if i % 4 == 0 => (None, None),
                _ => (None, Some((1 + r(50), r(100_000)))),
            };
            let mut s = slot(rate, limit, bursts);
            s.c.sched.anchor = r(1 << 40);
            s.picked = r(s.limit.unwrap_or(5000));
            let due = s.due(s.picked);
            let now = due + [0, 1, r(100), r(5_000_000), 50_000_000][i as usize % 5];
            let next = match r(6) {
                0 => u64::MAX,
                1 => due,
                2 => now,
                3 => s.due(s.picked + r(2 * TURN as u64)), // a frame due with the next entry
                _ => (due + r(3_000_000)).saturating_sub(1_000_000),
            };
            let room = 1 + r(UNPACED_BATCH as u64);
            let want = reference(&s, now, next, room);
            assert_eq!(s.run_len(now, next, room as usize), want, "case {i}: {:?} {now} {next} {room}", s.c);
        }
    }

    #[test]
    fn picks_are_in_due_order_across_flows() {
        // 1000 and 500 frames/s from 0, at 1.5 ms: frames due at 0 (both), then 1 ms (the first).
        let mut slots = [slot(1000.0, None, None), slot(500.0, None, None)];
        assert_eq!(picks(&mut slots, 1_500_000), (vec![0, 1, 0], 2));
        assert_eq!((slots[0].picked, slots[1].picked), (2, 1));
    }

    #[test]
    fn unpaced_flows_take_turns() {
        // Before: the flow queued second picked every frame of a batch but one, batch after batch.
        let mut slots = [unpaced(), unpaced(), unpaced()];
        let mut heap = Schedule::with_capacity(slots.len());
        for (k, s) in slots.iter().enumerate() {
            heap.push(s.due(0), k as u32, s.gen);
        }
        let mut pending = Picks::default();
        let mut each = [0usize; 3];
        for i in 1..=20u64 {
            pick_due(&mut slots, &mut heap, &mut pending, i * 100_000, 0);
            let p: Vec<u32> = pending.drain();
            assert!(p.chunk_by(|a, b| a == b).all(|run| run.len() <= TURN), "{p:?}");
            p.iter().for_each(|&k| each[k as usize] += 1);
        }
        let (lo, hi) = (each.iter().min().unwrap(), each.iter().max().unwrap());
        assert!(hi - lo <= 20 * TURN && *lo > 0, "{each:?}");
        assert!((hi - lo) * 10 < *hi, "{each:?}");
    }

    /// Smooth pacing on the clock alone: a flow held 2 ms shifts its schedule, gives the time back
    /// at SMOOTH_RECOVERY of the time that passes (1 ms in 50 ms), never bunching more than its
    /// depth over the rate, and ends on its plan, not ahead of it (as the trial's worker).
    #[test]
    fn a_flow_held_up_gives_the_time_back_and_no_more() {
        use crate::traffic::pacing::{most_in_window, smooth_depth, SMOOTH_RECOVERY};
        let mut slots = [slot(50_000.0, None, None)];
        let mut heap = Schedule::with_capacity(1);
        heap.push(slots[0].due(0), 0, slots[0].gen);
        let mut pending = Picks::default();
        let mut times = Vec::new();
        let mut at = |t: u64, slots: &mut [Slot], times: &mut Vec<u64>| {
            pick_due(slots, &mut heap, &mut pending, t, 0);
            times.extend(pending.drain().into_iter().map(|_| t));
        };
        let step = 10_000;
        (0..=10_000_000).step_by(step).for_each(|t| at(t, &mut slots, &mut times));
        (12_000_000..=62_000_000).step_by(step).for_each(|t| at(t, &mut slots, &mut times));
        // Behind 2 ms less the depth (4 frames due at once: 60 µs), 1 ms of it given back in the
        // 50 ms since.
        let owed = 2e6 - 60e3 - 50e6 * SMOOTH_RECOVERY;
        assert!((slots[0].c.sched.shifted as f64 - owed).abs() < 30e3, "{} ns behind", slots[0].c.sched.shifted);
        (62_000_000..=200_000_000).step_by(step).for_each(|t| at(t, &mut slots, &mut times));
        assert_eq!(slots[0].c.sched.shifted, 0);
        assert_eq!(slots[0].picked, 200_000_000 / 20_000 + 1, "back on the plan, not ahead of it");
        let peak = most_in_window(&times, 1_000_000);
        let bound = 50.0 * (1.0 + SMOOTH_RECOVERY) + smooth_depth(50_000.0) as f64 + 1.0;
        assert!(peak as f64 <= bound, "{peak} frames in 1 ms");
    }

    #[test]
    fn one_flow_fills_a_batch_and_stops_at_its_limit() {
        let mut slots = [unpaced()];
        let (p, heap) = picks(&mut slots, 1_000_000);
        assert!(p.len() >= UNPACED_BATCH && p.iter().all(|&k| k == 0), "{}", p.len());
        assert_eq!((slots[0].picked, heap), (p.len() as u64, 1));
        // A paced flow 1 ms behind sends its depth at once, as a trial's worker: one batch.
        let mut slots = [slot(1e9, None, None)];
        let (p, heap) = picks(&mut slots, 1_000_000);
        assert_eq!((p.len(), heap), (BATCH, 1));
        let mut slots = [slot(1e9, Some(5), None)];
        assert_eq!(picks(&mut slots, 1_000_000), (vec![0; 5], 0));
    }
}
