//! The generator's TX worker: one per TX queue, pinned, serving every flow of its share.
//!
//! Flows start, pause, resume and stop by command ([`Cmd`], posted to the worker's [`Mailbox`]).
//! A running flow's frame `k` is due at `anchor + k / rate` (bursts: `anchor + b × (packets / rate
//! + gap) + i / rate` for frame `i` of burst `b`). The worker keeps one heap entry per running
//! flow, keyed by its next frame's due time (equal times in the order queued, so unpaced flows take
//! turns of [`TURN`] frames); every iteration it picks the frames due into a
//! pending list of runs (in due order, so each flow's frames stay in sequence) and hands them to the
//! queue in one `send`, whose fill writes each frame ([`netrig_wire::stack::CompiledStack::fill`])
//! and counts it. Picks the queue did not take stay pending for the next `send`.
//!
//! Pacing is smooth: a flow found behind by more than its depth (`pacing::smooth_depth`, as the
//! trial's worker's) shifts its schedule, never sending above its rate over a window longer than
//! that, and gives the time back as the trial's worker does (the same [`SmoothSchedule`]: 2 % of
//! the time that passes), so only what it could not give back stretches the flow. A batch waits
//! for its first frame to be `hold` old: the trial's wake batch (`pacing::wake_batch`) at the
//! running flows' rates together, so the worker sends a few frames at a time and sleeps in between
//! instead of spinning. An idle worker parks until a command.
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::flow::CompiledFlow;
use super::stats::{Counters, FlowCtl, FlowState, PortCounters, TxPacing};
use crate::clock;
use crate::port::TxQueue;
use crate::traffic::pacing::{wake_batch, Cadence, LoadMeter, SmoothSchedule, BATCH, MAX_SLEEP_NS, MIN_SLEEP_NS};
use crate::traffic::source::Source;
use crate::traffic::tx::{send_stamped, UNPACED_BATCH};

/// A command to a TX worker.
#[derive(Debug, Clone)]
pub(crate) enum Cmd {
    /// (Re)start flow `flow` (a global index) under `tag`, its first frame due at `at_ns` + its
    /// delay.
    Start {
        flow: usize,
        tag: u32,
        at_ns: u64,
    },
    Stop(usize),
    Pause(usize),
    /// Continue a paused flow, its schedule shifted by the pause.
    Resume {
        flow: usize,
        at_ns: u64,
    },
    /// Flow `flow` goes on as `compiled` (a new rate or frame sizes): its counters, sequence and
    /// tag go on; its next frame is due at the new rate, never before the old schedule's.
    Update {
        flow: usize,
        compiled: Arc<CompiledFlow>,
    },
    Shutdown,
}

/// Commands for one worker: posted under the lock, announced by the epoch, picked up between
/// batches (never in the per-frame path).
#[derive(Debug, Default)]
pub(crate) struct Mailbox {
    pub epoch: AtomicU64,
    pub cmds: Mutex<Vec<Cmd>>,
}

/// Everything a TX worker needs.
pub(crate) struct TxWorker {
    pub queue: Box<dyn TxQueue>,
    pub flows: Vec<Arc<CompiledFlow>>,
    pub ctl: Arc<[FlowCtl]>,
    pub pubs: Arc<[Counters]>,
    pub port: Arc<PortCounters>,
    pub mailbox: Arc<Mailbox>,
    pub epoch_ns: u64,
    pub errors: Arc<Mutex<Vec<String>>>,
    /// Another busy worker shares this CPU: wait by yielding, not by spinning.
    pub cpu_shared: bool,
}

/// One flow's sending state in its worker.
struct Slot {
    flow: Arc<CompiledFlow>,
    /// Its frames and what of them this start sent.
    src: Source,
    running: bool,
    /// Bumped by every command: heap entries of older generations are stale.
    gen: u32,
    tag: u32,
    picked: u64,
    /// Where this start's frames are due; `c.sched.shifted` is how far smooth pacing has it
    /// behind its plan (the flow's stretch).
    c: Cadence,
    paused_at: u64,
}

/// Wake this much before a frame is due.
const WAKE_MARGIN_NS: u64 = 60_000;

/// How old a batch's first frame is when it goes, at `rate` frames/s of the running flows
/// together: its wake batch less one frame time (a trial's worker sends when that many are due).
fn hold_ns(rate: f64) -> u64 {
    if rate > 0.0 && rate.is_finite() {
        ((wake_batch(rate) - 1) as f64 * 1e9 / rate) as u64
    } else {
        0
    }
}

/// The flow's frames: its stack from its first frame, flow id its index.
fn source(flow: &CompiledFlow) -> Source {
    let first = flow.stack.keys().sequential();
    Source::stack(flow.stack.clone(), first, &flow.size_schedule, &wire_sizes(flow), flow.index as u32)
}

/// Each size's bytes with the FCS, by size index.
fn wire_sizes(flow: &CompiledFlow) -> Vec<u64> {
    flow.sizes.iter().map(|&n| n as u64).collect()
}

impl Slot {
    fn new(flow: Arc<CompiledFlow>) -> Slot {
        let c = Cadence::new(flow.rate_pps, 0, 0);
        Slot {
            c: match flow.bursts {
                Some(b) => c.in_bursts(b.packets, b.gap_ns),
                None => c,
            },
            src: source(&flow),
            running: false,
            gen: 0,
            tag: 0,
            picked: 0,
            paused_at: 0,
            flow,
        }
    }

    /// When pick `k` is due.
    #[inline(always)]
    fn due(&self, k: u64) -> u64 {
        self.c.at(k)
    }

    /// How many frames from `picked` (due) go in one run: with it every one due by `now` and by
    /// `next` (the next entry's due time), one due at `next` only within a turn of [`TURN`]
    /// frames, at most `room` and the frames left. In O(1) but for bursts (at most one frame is
    /// due in any nanosecond below 10^9 frames/s, the rate's bound).
    #[inline]
    fn run_len(&self, now: u64, next: u64, room: usize) -> u64 {
        let (start, turn) = (self.picked, TURN as u64);
        let most = self.flow.limit.map_or(u64::MAX, |l| l - start).min(room as u64);
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
        } else if self.flow.bursts.is_some() {
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
    fn all_picked(&self) -> bool {
        self.flow.limit.is_some_and(|l| self.picked >= l)
    }

    /// Running with frames left to pick.
    fn active(&self) -> bool {
        self.running && !self.all_picked()
    }

    /// Go on as `compiled`, from `at`: the next frame (`picked`) due at the new rate, not before
    /// the old schedule had it (a paused flow's schedule is kept from its pause). Sizes changed:
    /// the new size schedule from its start.
    fn update(&mut self, compiled: Arc<CompiledFlow>, at: u64) {
        let when = if self.paused_at > 0 { self.paused_at } else { at.max(self.due(self.picked)) };
        self.src.update(compiled.stack.clone(), &compiled.size_schedule, &wire_sizes(&compiled));
        self.c.set_rate(compiled.rate_pps);
        self.flow = compiled;
        self.c.sched.anchor = when.saturating_sub(self.c.offset(self.picked));
    }
}

impl TxWorker {
    /// Run until a `Shutdown` command; then hand the queue back, open (see `Generator::release`).
    pub fn run(mut self) -> Box<dyn TxQueue> {
        self.serve();
        self.queue
    }

    fn serve(&mut self) {
        let mut slots: Vec<Slot> = self.flows.iter().cloned().map(Slot::new).collect();
        let mut slot_of = vec![usize::MAX; self.ctl.len()];
        for (k, s) in slots.iter().enumerate() {
            slot_of[s.flow.index] = k;
        }
        let mut heap = Schedule::with_capacity(slots.len());
        let mut pending = Picks::default();
        let mut seen = 0u64;
        let mut hold = 0u64;
        let mut meter = TxMeter::new();
        loop {
            let epoch = self.mailbox.epoch.load(Ordering::Acquire);
            if epoch != seen {
                seen = epoch;
                let cmds = std::mem::take(&mut *self.mailbox.cmds.lock().unwrap_or_else(|e| e.into_inner()));
                let was_active = slots.iter().any(Slot::active);
                for cmd in cmds {
                    if matches!(cmd, Cmd::Shutdown) {
                        let _ = self.queue.flush();
                        return;
                    }
                    self.apply(cmd, &mut slots, &slot_of, &mut heap, &mut pending);
                }
                let rate: f64 = slots.iter().filter(|s| s.running).map(|s| s.flow.rate_pps).sum();
                hold = hold_ns(rate);
                let active: f64 = slots.iter().filter(|s| s.active()).map(|s| s.flow.rate_pps).sum();
                meter.segment(active, was_active, slots.iter().any(Slot::active));
            }
            let now = clock::now_ns();
            meter.lag(pick_due(&mut slots, &mut heap, &mut pending, now, hold));
            if !pending.is_empty() {
                match self.send(&mut slots, &pending, now) {
                    Ok((n, handed)) => {
                        // The frames are spread from their hand-off, as a trial's worker spreads them.
                        meter.batch(handed, clock::now_ns(), n as u64);
                        if handed > now + HELD_UP_NS {
                            held_up(&mut slots, &mut heap, pending.first(n), handed);
                        }
                        pending.consume(n);
                    }
                    Err(e) => self.failed(e, &mut slots, &mut heap, &mut pending),
                }
                meter.publish(&self.port, &slots, now, false);
                continue;
            }
            let _ = self.queue.flush();
            let next = heap.peek().map(|(due, _, _)| due + hold);
            meter.publish(&self.port, &slots, now, next.is_none());
            self.wait(next);
        }
    }

    /// Wait until `until` (engine clock) or a command; without anything due, until a command.
    fn wait(&self, until: Option<u64>) {
        let Some(until) = until else {
            std::thread::park_timeout(std::time::Duration::from_nanos(MAX_SLEEP_NS * 20));
            return;
        };
        let now = clock::now_ns();
        if until > now + MIN_SLEEP_NS + WAKE_MARGIN_NS {
            let d = (until - now - WAKE_MARGIN_NS).min(MAX_SLEEP_NS);
            std::thread::park_timeout(std::time::Duration::from_nanos(d));
        } else if self.cpu_shared {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }

    fn apply(&mut self, cmd: Cmd, slots: &mut [Slot], slot_of: &[usize], heap: &mut Schedule, pending: &mut Picks) {
        let (flow, at) = match cmd {
            Cmd::Start { flow, at_ns, .. } | Cmd::Resume { flow, at_ns } => (flow, at_ns),
            Cmd::Stop(flow) | Cmd::Pause(flow) | Cmd::Update { flow, .. } => (flow, clock::now_ns()),
            Cmd::Shutdown => return,
        };
        let Some(&k) = slot_of.get(flow).filter(|&&k| k != usize::MAX) else { return };
        let s = &mut slots[k];
        // Picks not sent yet are taken back: a stopped or paused flow sends nothing more.
        s.picked -= pending.take_back(k as u32);
        s.gen = s.gen.wrapping_add(1);
        match cmd {
            Cmd::Start { tag, .. } => {
                s.src.restart();
                s.picked = 0;
                (s.tag, s.running, s.paused_at) = (tag, true, 0);
                let anchor = at + s.flow.config.delay_ns;
                s.c.sched = SmoothSchedule::new(anchor, anchor);
                self.pubs[flow].reset(tag);
            }
            Cmd::Pause(_) if s.running => {
                s.running = false;
                s.paused_at = at;
            }
            Cmd::Resume { .. } if !s.running && s.paused_at > 0 => {
                s.c.sched.resume(at.saturating_sub(s.paused_at), at);
                s.paused_at = 0;
                s.running = true;
            }
            Cmd::Stop(_) => {
                s.running = false;
                s.paused_at = 0;
            }
            Cmd::Update { compiled, .. } => s.update(compiled, at),
            _ => {}
        }
        if s.running && !s.all_picked() {
            heap.push(s.due(s.picked), k as u32, s.gen);
        }
    }

    /// Send the pending picks (as many as the queue takes) and count them; how many it sent, and
    /// when the first was handed to the queue (after anything that held the send up).
    fn send(&mut self, slots: &mut [Slot], pending: &Picks, now: u64) -> Result<(usize, u64), String> {
        let epoch = self.epoch_ns;
        let (ctl, pubs, port) = (&self.ctl, &self.pubs, &self.port);
        let mut runs = pending.runs.iter();
        let (mut k, mut left) = (0usize, 0u32);
        let fill = |buf: &mut [u8], held: &mut u64, stamp: u64| -> usize {
            if left == 0 {
                let &(slot, n) = runs.next().expect("one pick per frame");
                (k, left) = (slot as usize, n);
            }
            left -= 1;
            let s = &mut slots[k];
            let f = &*s.flow;
            pubs[f.index].count_tag(s.src.sent);
            let w = s.src.write(buf, held, s.tag, false, stamp);
            pubs[f.index].count(w.wire, stamp + epoch);
            if !w.signed {
                PortCounters::add(&pubs[f.index].untracked, 1);
            }
            PortCounters::add(&port.frames, 1);
            PortCounters::add(&port.bytes, w.wire);
            if f.limit == Some(s.src.sent) {
                ctl[f.index].finish();
            }
            w.len
        };
        send_stamped(&mut *self.queue, pending.frames, now, epoch, fill).map_err(|e| e.to_string())
    }

    /// The queue failed: every flow of this worker stops; the error is reported.
    fn failed(&mut self, e: String, slots: &mut [Slot], heap: &mut Schedule, pending: &mut Picks) {
        self.errors.lock().unwrap_or_else(|x| x.into_inner()).push(e);
        for s in slots.iter_mut() {
            s.running = false;
            s.gen = s.gen.wrapping_add(1);
            self.ctl[s.flow.index].set_state(FlowState::Stopped);
        }
        heap.clear();
        pending.clear();
    }
}

/// A send whose first frame reached the queue this much after the picks was held up: see
/// [`held_up`].
const HELD_UP_NS: u64 = 20_000;

/// A send held up between the picks and the hand-off (descheduled, or the queue slow to take
/// them) until `handed`: a flow of it that fell more than its depth behind meanwhile had its
/// frames in it go out late as one burst, so its schedule shifts from there, its next frame one
/// frame time later, and its give-back starts there (as the trial's worker does). Without this
/// the frames due meanwhile went out right after it as a second burst.
fn held_up(slots: &mut [Slot], heap: &mut Schedule, sent: impl Iterator<Item = u32>, handed: u64) {
    for k in sent {
        let s = &mut slots[k as usize];
        if !s.running || s.c.npf == 0.0 || !s.c.behind(s.picked, handed) {
            continue;
        }
        s.c.held_up(s.picked - 1, handed);
        s.gen = s.gen.wrapping_add(1);
        if !s.all_picked() {
            heap.push(s.due(s.picked), k, s.gen);
        }
    }
}

/// Frames a flow picks at most before another flow due at the same time takes its turn.
const TURN: usize = BATCH;

/// The running flows' next due times: the earliest first and, among equal ones, the one queued
/// first. Unpaced flows are all due now, so the order they were queued in is their turn.
struct Schedule {
    heap: BinaryHeap<Reverse<(u64, u64, u32, u32)>>,
    queued: u64,
}

impl Schedule {
    fn with_capacity(n: usize) -> Schedule {
        Schedule { heap: BinaryHeap::with_capacity(n), queued: 0 }
    }

    /// Flow slot `k`'s next frame is due at `due` (`gen`: the slot's generation).
    fn push(&mut self, due: u64, k: u32, gen: u32) {
        self.queued += 1;
        self.heap.push(Reverse((due, self.queued, k, gen)));
    }

    /// The earliest entry: (due, slot, generation).
    fn peek(&self) -> Option<(u64, u32, u32)> {
        self.heap.peek().map(|&Reverse((due, _, k, gen))| (due, k, gen))
    }

    fn pop(&mut self) {
        self.heap.pop();
    }

    fn clear(&mut self) {
        self.heap.clear();
    }
}

/// The frames picked and not sent yet, in the order they go: runs of one flow slot's frames
/// (an entry per run, not per frame).
#[derive(Default)]
struct Picks {
    runs: VecDeque<(u32, u32)>,
    /// Frames in all the runs.
    frames: usize,
}

impl Picks {
    fn is_empty(&self) -> bool {
        self.frames == 0
    }

    /// `n` more frames of slot `k`.
    fn push(&mut self, k: u32, n: usize) {
        self.frames += n;
        match self.runs.back_mut() {
            Some((last, m)) if *last == k => *m += n as u32,
            _ => self.runs.push_back((k, n as u32)),
        }
    }

    /// The slot of each run that holds some of the first `n` frames.
    fn first(&self, n: usize) -> impl Iterator<Item = u32> + '_ {
        let mut upto = 0usize;
        self.runs
            .iter()
            .take_while(move |&&(_, m)| {
                let more = upto < n;
                upto += m as usize;
                more
            })
            .map(|&(k, _)| k)
    }

    /// The first `n` frames went.
    fn consume(&mut self, mut n: usize) {
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
    fn take_back(&mut self, k: u32) -> u64 {
        let mut taken = 0;
        self.runs.retain(|&(s, m)| {
            taken += if s == k { u64::from(m) } else { 0 };
            s != k
        });
        self.frames -= taken as usize;
        taken
    }

    fn clear(&mut self) {
        self.runs.clear();
        self.frames = 0;
    }

    /// Every pick in order, a slot per frame (tests).
    #[cfg(test)]
    fn drain(&mut self) -> Vec<u32> {
        let all = self.runs.iter().flat_map(|&(k, m)| std::iter::repeat_n(k, m as usize)).collect();
        self.clear();
        all
    }
}

/// Pick every frame due by `now - hold` (the earliest due first) into `pending`; the longest any
/// picked frame waited after it fell due, ns.
#[inline]
fn pick_due(slots: &mut [Slot], heap: &mut Schedule, pending: &mut Picks, now: u64, hold: u64) -> u64 {
    let mut lag = 0;
    while pending.frames < UNPACED_BATCH {
        let Some((due, k, gen)) = heap.peek() else { return lag };
        let s = &mut slots[k as usize];
        if gen != s.gen || !s.running {
            heap.pop();
            continue;
        }
        // A batch starts once its first frame is `hold` old, then takes every frame due.
        if due > now || (pending.is_empty() && due + hold > now) {
            return lag;
        }
        heap.pop();
        lag = lag.max(now - due);
        // Smooth pacing: time lost earlier is given back slowly; behind by more than the depth,
        // the schedule shifts (also over what was just given back: a hold-up gives nothing back).
        s.c.sched.give_back(now);
        s.c.within_depth(s.picked, now);
        // The flow's frames due before the next entry's go in one run: one heap operation per
        // run, not per frame (one flow alone: one per batch). Frames due with the next entry's
        // end the run after a turn: unpaced flows (every frame due now) take turns.
        let next = heap.peek().map_or(u64::MAX, |(d, _, _)| d);
        let run = s.run_len(now, next, UNPACED_BATCH - pending.frames);
        s.picked += run;
        pending.push(k, run as usize);
        if !s.all_picked() {
            heap.push(s.due(s.picked), k, gen);
        }
    }
    lag
}

/// Published at most this often while a worker sends, ns (and once when nothing is left due).
const PUBLISH_NS: u64 = 20_000_000;

/// A worker's schedule keeping since its flows last started from idle ([`TxPacing`]), published
/// to its port's counters between batches.
struct TxMeter {
    load: LoadMeter,
    frames: u64,
    max_lag_ns: u64,
    /// Sent since the last publish; when the next may be.
    dirty: bool,
    next_ns: u64,
}

impl TxMeter {
    fn new() -> TxMeter {
        TxMeter { load: LoadMeter::new(), frames: 0, max_lag_ns: 0, dirty: false, next_ns: 0 }
    }

    /// The flows with frames to send changed (now adding up to `rate` frames/s): a new
    /// peak-window segment; from idle, everything measured before is forgotten (a new trial).
    fn segment(&mut self, rate: f64, was_active: bool, active: bool) {
        if !was_active && active {
            *self = TxMeter { dirty: true, ..TxMeter::new() };
        }
        self.load.segment(if rate > 0.0 { rate } else { f64::INFINITY }, was_active);
    }

    #[inline]
    fn lag(&mut self, lag_ns: u64) {
        self.max_lag_ns = self.max_lag_ns.max(lag_ns);
    }

    #[inline]
    fn batch(&mut self, first_ns: u64, last_ns: u64, n: u64) {
        self.load.batch(first_ns, last_ns, n);
        self.frames += n;
        self.dirty = true;
    }

    /// Publish when something changed and `PUBLISH_NS` passed, or at once when `idle`.
    fn publish(&mut self, port: &PortCounters, slots: &[Slot], now: u64, idle: bool) {
        if !self.dirty || (!idle && now < self.next_ns) {
            return;
        }
        let p = TxPacing {
            frames: self.frames,
            stretch_ns: slots.iter().map(|s| s.c.sched.shifted).max().unwrap_or(0),
            max_lag_ns: self.max_lag_ns,
            smoothness: self.load.summary(),
        };
        *port.pacing.lock().unwrap_or_else(|e| e.into_inner()) = p;
        (self.dirty, self.next_ns) = (false, now + PUBLISH_NS);
    }
}

impl FlowCtl {
    /// The TX worker sent a flow's last frame: done, unless it was stopped meanwhile.
    pub(crate) fn finish(&self) {
        if self.state() == FlowState::Running {
            self.set_state(FlowState::Done);
        }
    }
}

/// Post `cmds` to a worker and wake it.
pub(crate) fn post(mailbox: &Mailbox, thread: &std::thread::Thread, cmds: impl IntoIterator<Item = Cmd>) {
    mailbox.cmds.lock().unwrap_or_else(|e| e.into_inner()).extend(cmds);
    mailbox.epoch.fetch_add(1, Ordering::Release);
    thread.unpark();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::generator::{compile_flow, GenDuration, GenFlowConfig};
    use crate::traffic::stream::Rate;

    fn slot(index: usize, rate: Rate, duration: GenDuration) -> Slot {
        let mut c = GenFlowConfig::new("f");
        (c.rate, c.duration) = (rate, duration);
        let mut s = Slot::new(Arc::new(compile_flow(index, &c, 1514, None).unwrap()));
        s.running = true;
        s
    }

    fn unpaced(index: usize) -> Slot {
        slot(index, Rate::Max, GenDuration::Continuous)
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
        assert_eq!(p.first(6).collect::<Vec<_>>(), [0, 1]);
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
                if s.flow.limit.is_some_and(|l| k >= l) || run == room {
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
            let rate = if i % 4 == 0 { Rate::Max } else { Rate::Pps(1.0 + r(3_000_000) as f64) };
            let duration = match i % 3 {
                0 => GenDuration::Continuous,
                1 => GenDuration::Frames(1 + r(5000)),
                _ if i % 4 == 0 => GenDuration::Continuous,
                _ => GenDuration::Bursts { packets: 1 + r(50), count: 0, gap_ns: r(100_000) },
            };
            let mut s = slot(0, rate, duration);
            s.c.sched.anchor = r(1 << 40);
            s.picked = r(s.flow.limit.unwrap_or(5000));
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
        let mut slots =
            [slot(0, Rate::Pps(1000.0), GenDuration::Continuous), slot(1, Rate::Pps(500.0), GenDuration::Continuous)];
        assert_eq!(picks(&mut slots, 1_500_000), (vec![0, 1, 0], 2));
        assert_eq!((slots[0].picked, slots[1].picked), (2, 1));
    }

    #[test]
    fn unpaced_flows_take_turns() {
        // Before: the flow queued second picked every frame of a batch but one, batch after batch.
        let mut slots = [unpaced(0), unpaced(1), unpaced(2)];
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
        let mut slots = [slot(0, Rate::Pps(50_000.0), GenDuration::Continuous)];
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
        let mut slots = [unpaced(0)];
        let (p, heap) = picks(&mut slots, 1_000_000);
        assert!(p.len() >= UNPACED_BATCH && p.iter().all(|&k| k == 0), "{}", p.len());
        assert_eq!((slots[0].picked, heap), (p.len() as u64, 1));
        // A paced flow 1 ms behind sends its depth at once, as a trial's worker: one batch.
        let mut slots = [slot(0, Rate::Pps(1e9), GenDuration::Continuous)];
        let (p, heap) = picks(&mut slots, 1_000_000);
        assert_eq!((p.len(), heap), (BATCH, 1));
        let mut slots = [slot(0, Rate::Pps(1e9), GenDuration::Frames(5))];
        assert_eq!(picks(&mut slots, 1_000_000), (vec![0; 5], 0));
    }
}
