//! The generator's TX worker: one per TX queue, pinned, serving every flow of its share.
//!
//! Flows start, pause, resume and stop by command ([`Cmd`], posted to the worker's [`Mailbox`]).
//! Each flow is a slot of the picker the trial's worker uses too (`crate::traffic::pick`): its
//! frames ([`Source`]), its cadence (frame `k` due at `anchor + k / rate`; bursts: `anchor + b ×
//! (packets / rate + gap) + i / rate` for frame `i` of burst `b`), smooth pacing with the trial's
//! depth and give-back. The worker runs the loop the trial's worker runs (`pick::send_loop`): every
//! iteration it picks the frames due into runs (in due order, so each flow's frames stay in
//! sequence) and hands them to the queue in one `send`; its side of the loop ([`GenTx`]) applies
//! the commands before each pick, writes each frame and counts it in the flow's and the port's
//! counters, and meters the batch. Picks the queue did not take stay for the next `send`. A batch waits for its first frame to be `hold` old: the
//! trial's wake batch (`pacing::wake_batch`) at the running flows' rates together, so the worker
//! sends a few frames at a time and sleeps in between instead of spinning. An idle worker parks
//! until a command.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::flow::CompiledFlow;
use super::stats::{Counters, FlowCtl, FlowState, PortCounters, TxPacing};
use crate::clock;
use crate::error::PortError;
use crate::port::TxQueue;
use crate::traffic::pacing::{LoadMeter, MAX_SLEEP_NS, MIN_SLEEP_NS};
use crate::traffic::pick::{held_up, hold_ns, send_loop, Batch, Picker, Slot, TxSink, HELD_UP_NS};
use crate::traffic::source::Source;

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

/// Everything a TX worker needs but its queue.
pub(crate) struct TxWorker {
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

/// Wake this much before a frame is due.
const WAKE_MARGIN_NS: u64 = 60_000;

/// The flow's slot: its stack from its first frame, flow id its index, its rate, limit and bursts.
fn slot(flow: &CompiledFlow) -> Slot {
    let first = flow.stack.keys().sequential();
    let src = Source::stack(flow.stack.clone(), first, &flow.size_schedule, &flow.sizes, flow.index as u32);
    Slot::new(src, flow.rate_pps, flow.limit, flow.bursts.map(|b| (b.packets, b.gap_ns)))
}

impl TxWorker {
    /// Send on `queue` until a `Shutdown` command; then hand the queue back, open (see
    /// `Generator::release`).
    pub fn run(self, mut queue: Box<dyn TxQueue>) -> Box<dyn TxQueue> {
        let mut p = Picker::new(self.flows.iter().map(|f| slot(f)).collect());
        let mut slot_of = vec![usize::MAX; self.ctl.len()];
        for (k, f) in self.flows.iter().enumerate() {
            slot_of[f.index] = k;
        }
        let epoch = self.epoch_ns;
        let mut sink = GenTx { w: self, slot_of, seen: 0, hold: 0, meter: TxMeter::new() };
        send_loop(&mut *queue, &mut p, &mut sink, epoch);
        queue
    }
}

/// The generator's side of a TX worker's loop: its commands, its flows' and port's counters, its
/// pacing meter, its wait.
struct GenTx {
    w: TxWorker,
    /// Each flow's slot by its global index (`usize::MAX`: another worker's).
    slot_of: Vec<usize>,
    /// The mailbox's epoch last read.
    seen: u64,
    /// How old a batch's first frame is when it goes ([`hold_ns`] of the running flows' rates).
    hold: u64,
    meter: TxMeter,
}

impl TxSink for GenTx {
    type Src = Slot;

    /// Apply the commands posted since the last look (`Shutdown`: flush and end).
    fn before(&mut self, p: &mut Picker<Slot>, queue: &mut dyn TxQueue, _now: u64) -> Option<u64> {
        let epoch = self.w.mailbox.epoch.load(Ordering::Acquire);
        if epoch == self.seen {
            return Some(self.hold);
        }
        self.seen = epoch;
        let cmds = std::mem::take(&mut *self.w.mailbox.cmds.lock().unwrap_or_else(|e| e.into_inner()));
        let was_active = p.srcs.iter().any(Slot::active);
        for cmd in cmds {
            if matches!(cmd, Cmd::Shutdown) {
                let _ = queue.flush();
                return None;
            }
            self.apply(cmd, p);
        }
        let rate: f64 = p.srcs.iter().filter(|s| s.running).map(|s| s.rate).sum();
        self.hold = hold_ns(rate);
        let active: f64 = p.srcs.iter().filter(|s| s.active()).map(|s| s.rate).sum();
        self.meter.segment(active, was_active, p.srcs.iter().any(Slot::active));
        Some(self.hold)
    }

    /// Write the frame and count it in the flow's and the port's counters.
    #[inline]
    fn writer(&mut self) -> impl FnMut(&mut [Slot], usize, &mut [u8], &mut u64, u64) -> usize + '_ {
        let (flows, pubs, port, ctl, epoch) =
            (&self.w.flows, &self.w.pubs, &*self.w.port, &self.w.ctl, self.w.epoch_ns);
        move |slots, k, buf, held, stamp| {
            let (s, f) = (&mut slots[k], &*flows[k]);
            let c = &pubs[f.index];
            c.count_tag(s.src.sent);
            let w = s.src.write(buf, held, s.tag, false, stamp);
            c.count(w.wire, stamp + epoch);
            if !w.signed {
                PortCounters::add(&c.untracked, 1);
            }
            PortCounters::add(&port.frames, 1);
            PortCounters::add(&port.bytes, w.wire);
            if f.limit == Some(s.src.sent) {
                ctl[f.index].finish();
            }
            w.len
        }
    }

    fn sent(&mut self, p: &mut Picker<Slot>, b: Batch) {
        // The frames are spread from their hand-off, as a trial's worker spreads them, and a run's
        // lateness is how late its first frame reached the queue, as a trial's is.
        self.meter.batch(b.handed, b.after, b.n as u64);
        self.meter.lag(b.late);
        if b.handed > b.now + HELD_UP_NS {
            held_up(&mut p.srcs, &mut p.heap, p.pending.first(b.n), b.handed);
        }
        self.meter.publish(&self.w.port, &p.srcs, b.now, false);
    }

    /// Every flow of this worker stops; the error is reported.
    fn failed(&mut self, p: &mut Picker<Slot>, e: PortError) -> bool {
        self.w.errors.lock().unwrap_or_else(|x| x.into_inner()).push(e.to_string());
        for (s, f) in p.srcs.iter_mut().zip(&self.w.flows) {
            s.running = false;
            s.gen = s.gen.wrapping_add(1);
            self.w.ctl[f.index].set_state(FlowState::Stopped);
        }
        p.heap.clear();
        p.pending.clear();
        true
    }

    /// Wait for the next batch's first frame to be `hold` old, or a command; without anything
    /// due, for a command.
    fn idle(&mut self, p: &Picker<Slot>, queue: &mut dyn TxQueue, now: u64) -> bool {
        let _ = queue.flush();
        let next = p.heap.peek().map(|(due, _, _)| due + self.hold);
        self.meter.publish(&self.w.port, &p.srcs, now, next.is_none());
        self.wait(next);
        true
    }
}

impl GenTx {
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
        } else if self.w.cpu_shared {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }

    fn apply(&mut self, cmd: Cmd, p: &mut Picker<Slot>) {
        let (flow, at) = match cmd {
            Cmd::Start { flow, at_ns, .. } | Cmd::Resume { flow, at_ns } => (flow, at_ns),
            Cmd::Stop(flow) | Cmd::Pause(flow) | Cmd::Update { flow, .. } => (flow, clock::now_ns()),
            Cmd::Shutdown => return,
        };
        let Some(&k) = self.slot_of.get(flow).filter(|&&k| k != usize::MAX) else { return };
        let s = &mut p.srcs[k];
        // Picks not sent yet are taken back: a stopped or paused flow sends nothing more.
        s.picked -= p.pending.take_back(k as u32);
        s.gen = s.gen.wrapping_add(1);
        match cmd {
            Cmd::Start { tag, .. } => {
                s.start(tag, at + self.w.flows[k].config.delay_ns);
                self.w.pubs[flow].reset(tag);
            }
            Cmd::Pause(_) => s.pause(at),
            Cmd::Resume { .. } => s.resume(at),
            Cmd::Stop(_) => s.stop(),
            Cmd::Update { compiled, .. } => {
                s.src.update(compiled.stack.clone(), &compiled.size_schedule, &compiled.sizes);
                s.retime(compiled.rate_pps, at);
                self.w.flows[k] = compiled;
            }
            Cmd::Shutdown => {}
        }
        if s.running && !s.all_picked() {
            p.heap.push(s.due(s.picked), k as u32, s.gen);
        }
    }
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
