//! The generator's RX worker: one per RX queue of every port, pinned, counting every frame.
//!
//! Per frame: the capture (while one runs on the port) keeps it; then the trial's analyser
//! (`crate::traffic::analyze::Analyzer`) counts it, with the generator's policy ([`FlowTags`]): the
//! signature at the frame's end names the flow and the start it belongs to (the tag). When that
//! start is the flow's current one, the flow's state counts it (the worker forgets an earlier
//! start's state at the first frame of a new one, after counting the frames it holds), else it is
//! stale (an earlier start's frame still in flight, another tester's). So the sequence window,
//! duplicates, reordering, gaps, latency (less the frame times of the flow's latency mode) and
//! IPDV are counted as a trial counts them. A frame of a flow this generator sends is judged as a
//! trial's is: a sequence number the sender has not reached yet, or a transmit stamp from the
//! future, is *forged* (counted per port, never received; the sender's count is read again only
//! when a sequence number passes the one read last). A flow sent elsewhere (another agent) cannot
//! be judged so: the port counts such flows' starts as *unjudged*. The state is plain memory this
//! worker alone touches; readers get a snapshot ([`Snapshots`]) the worker copies between two
//! batches. The port's totals are atomics this worker alone writes (frames, bytes and foreign
//! frames after each batch); the capture buffer is held locked by this worker for as long as the
//! capture runs (taken when it starts, released when it stops: no lock per frame).
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use netrig_wire::signature::{Signature, Site};

use super::capring::CaptureRing;
use super::stats::{Counters, FlowCtl, PortCounters, RxSnap};
use crate::port::{RxMeta, RxQueue, Waiting};
use crate::sys::wake::WakeFd;
use crate::traffic::analyze::{buckets, stamp_age, Analyzer, RxTotals, TagPolicy, STAMPED_AHEAD, UNTIMED};
use crate::traffic::flowstate::FlowStates;
use crate::traffic::rx::{receive, RxSink, RX_BATCH};

/// A port's capture switch: `on` and a generation the workers acknowledge.
#[derive(Debug, Default)]
pub(crate) struct CaptureCtl {
    pub on: AtomicBool,
    pub epoch: AtomicU64,
}

/// Everything an RX worker needs.
pub(crate) struct RxWorker {
    pub queue: Box<dyn RxQueue>,
    /// This worker's state of every flow (its port's counters with it), and where it answers
    /// readers.
    pub flows: RxFlows,
    pub snaps: Arc<Snapshots>,
    pub capture: Arc<CaptureCtl>,
    /// This worker's capture buffer; `acked`: the capture generation it has acted on.
    pub ring: Arc<Mutex<CaptureRing>>,
    pub acked: Arc<AtomicU64>,
    pub stop: Arc<AtomicBool>,
    pub errors: Arc<Mutex<Vec<String>>>,
    /// How it waits on its empty queue (set on the queue already).
    pub waiting: Waiting,
}

impl RxWorker {
    /// Count until the generator stops; then hand the queue back, open (see `Generator::release`).
    pub fn run(mut self) -> Box<dyn RxQueue> {
        self.queue.set_wake(self.snaps.wake.clone());
        self.serve();
        self.queue.set_wake(None);
        self.queue
    }

    fn serve(&mut self) {
        let ring = self.ring.clone();
        let mut sink = GenSink {
            flows: &mut self.flows,
            snaps: &self.snaps,
            capture: &self.capture,
            ring: &ring,
            acked: &self.acked,
            cap: None,
            seen: 0,
            polls: 0,
            waiting: &mut self.waiting,
        };
        if let Err(e) = receive(&mut *self.queue, &self.stop, &mut sink, false) {
            self.errors.lock().unwrap_or_else(|x| x.into_inner()).push(e);
        }
        drop(sink);
        self.flows.an.flush();
        self.flows.publish();
        self.flows.an.policy.port.ring_drops.store(self.queue.stats().ring_drops, Ordering::Relaxed);
        self.flows.answer(&self.snaps, usize::MAX, true);
    }
}

/// What a generator's RX worker does with a batch: keep its frames while a capture runs on the
/// port, count every frame into its flows, wait as its CPU allows, and answer readers.
struct GenSink<'a> {
    flows: &'a mut RxFlows,
    snaps: &'a Snapshots,
    capture: &'a CaptureCtl,
    ring: &'a Mutex<CaptureRing>,
    acked: &'a AtomicU64,
    /// The capture buffer, held for as long as the capture runs (no lock per frame).
    cap: Option<MutexGuard<'a, CaptureRing>>,
    /// The capture generation acted on.
    seen: u64,
    polls: u32,
    waiting: &'a mut Waiting,
}

impl RxSink for GenSink<'_> {
    fn before(&mut self) {
        let epoch = self.capture.epoch.load(Ordering::Acquire);
        if epoch != self.seen {
            self.seen = epoch;
            self.cap = None;
            if self.capture.on.load(Ordering::Acquire) {
                let mut g = self.ring.lock().unwrap_or_else(|e| e.into_inner());
                g.clear();
                self.cap = Some(g);
            }
            self.acked.store(epoch, Ordering::Release);
        }
    }

    #[inline(always)]
    fn frame(&mut self, f: &[u8], m: RxMeta) {
        if let Some(c) = self.cap.as_deref_mut() {
            c.push(f, m.ts_ns);
        }
        // Counted at the batch's end, its flow's state prefetched meanwhile.
        self.flows.an.push(f, m);
    }

    fn batch(&mut self, q: &mut dyn RxQueue, n: usize, _: u64, _: bool) {
        self.flows.an.flush();
        self.flows.publish();
        self.waiting.saw(q, n, RX_BATCH);
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(16) {
            self.flows.an.policy.port.ring_drops.store(q.stats().ring_drops, Ordering::Relaxed);
        }
        if n == 0 {
            // An ask may have ended the wait: look, and let the next wait sleep again.
            if let Some(w) = &self.snaps.wake {
                w.clear();
            }
        }
        self.flows.answer(self.snaps, if n > 0 { SNAP_CHUNK } else { usize::MAX }, false);
    }
}

/// How many flows a busy worker copies into a snapshot between two batches (an idle one copies
/// the rest at once): about 0.1 ms, so a snapshot of 2^20 flows never holds the ring up.
const SNAP_CHUNK: usize = 4096;
/// What reading one flow's latency buckets costs, in flows copied (a scan of its histogram's
/// 28 k buckets): a busy worker reads 16 of them between two batches.
const HIST_COST: usize = 256;
/// Longest a reader waits for a worker's snapshot before it takes the last one (a worker stalled
/// that long has dropped frames in its ring anyway, and says so in the port's ring drops).
const SNAP_WAIT: Duration = Duration::from_secs(2);

/// What a worker answered last: every flow's counts and the per-index counts of the flows with a
/// tag period (empty for the others).
#[derive(Debug, Default)]
pub(crate) struct SnapBuf {
    /// The request it answers; `gone`: the worker has ended (this is its last word).
    pub have: u64,
    pub gone: bool,
    pub flows: Vec<RxSnap>,
    pub tags: Vec<Box<[u64]>>,
    /// The latency request the buckets answer, and per flow with histograms of its own (the first
    /// [`PER_FLOW_HIST_LIMIT`]) its start's tag and buckets. Kept through answers without them.
    pub lat_have: u64,
    pub lat: Vec<(u32, FlowBuckets)>,
}

/// One flow's distributions over its start's unique frames, ns: latency (3 significant digits) and
/// |IPDV| (2), each as `(value, count)` pairs, lowest first ([`buckets`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowBuckets {
    pub latency: Vec<(u64, u64)>,
    pub ipdv: Vec<(u64, u64)>,
}

/// A worker's snapshot mailbox: readers ask, the worker answers between batches. The flow state
/// stays plain memory the worker alone touches (no atomics on the per-frame path). An idle worker
/// sleeps in `poll(2)`; the ask wakes it there (`wake`, in its queue's poll set), so a reader
/// waits for a copy, not for the rest of a 5-ms receive wait.
#[derive(Debug, Default)]
pub(crate) struct Snapshots {
    want: AtomicU64,
    /// The latest request that wants the latency buckets too.
    want_lat: AtomicU64,
    buf: Mutex<SnapBuf>,
    answered: Condvar,
    /// `None` if no eventfd could be had: then the answer comes when the wait ends.
    pub wake: Option<Arc<WakeFd>>,
}

impl Snapshots {
    pub fn new() -> Snapshots {
        Snapshots { wake: WakeFd::new().ok().map(Arc::new), ..Default::default() }
    }

    /// Ask the worker for a snapshot; returns the request to [`Self::wait`] for.
    pub fn ask(&self) -> u64 {
        let asked = self.want.fetch_add(1, Ordering::AcqRel) + 1;
        if let Some(w) = &self.wake {
            w.wake();
        }
        asked
    }

    /// Ask for a snapshot with the latency buckets; returns the request to
    /// [`Self::wait_latency`] for.
    pub fn ask_latency(&self) -> u64 {
        let asked = self.want.fetch_add(1, Ordering::AcqRel) + 1;
        self.want_lat.fetch_max(asked, Ordering::AcqRel);
        if let Some(w) = &self.wake {
            w.wake();
        }
        asked
    }

    /// The snapshot answering `asked` or a later one; the last one if the worker has ended or
    /// not answered within [`SNAP_WAIT`].
    pub fn wait(&self, asked: u64) -> MutexGuard<'_, SnapBuf> {
        self.wait_until(|g| g.have >= asked)
    }

    /// [`Self::wait`] for latency buckets answering `asked` or later.
    pub fn wait_latency(&self, asked: u64) -> MutexGuard<'_, SnapBuf> {
        self.wait_until(|g| g.lat_have >= asked)
    }

    fn wait_until(&self, done: impl Fn(&SnapBuf) -> bool) -> MutexGuard<'_, SnapBuf> {
        let deadline = std::time::Instant::now() + SNAP_WAIT;
        let mut g = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        while !done(&g) && !g.gone {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            g = self.answered.wait_timeout(g, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        g
    }
}

/// Rare per-flow counts, out of line: bytes of duplicates, and frames counted without a latency
/// (stamped further ahead of the receive time than
/// [`crate::traffic::analyze::FUTURE_TOLERANCE_NS`]: another host's clock).
#[derive(Debug, Clone, Copy, Default)]
struct Extra {
    dup_bytes: u64,
    untimed: u64,
    untimed_bytes: u64,
}

/// What a generator keeps of a flow beside the trial's state, in one place per flow: the start
/// the state counts (u32::MAX: none yet), the tag period (0: no per-index counts), the
/// engine-clock times of the first and last arrival, and the sequence bound: the frames the
/// flow's sender here had sent when last read (no genuine sequence number reaches it; 0: not read
/// yet this start; [`SENT_ELSEWHERE`]: the flow is sent by another generator, nothing is judged).
#[derive(Debug, Clone, Copy)]
struct FlowMeta {
    tag: u32,
    period: u32,
    first_ns: u64,
    last_ns: u64,
    bound: u64,
}

/// [`FlowMeta::bound`] of a flow whose sender is not this generator.
const SENT_ELSEWHERE: u64 = u64::MAX;

/// A generator's frames ([`TagPolicy`]): the signature at the frame's end; each flow counts the
/// frames of its current start (its [`FlowCtl::tag`]), the others are stale; a flow sent here is
/// bounded by its sender's count ([`Counters`]), a flow sent elsewhere is not judged; latency is
/// less the frame times of the flow's latency mode. The port's rare counts (stale, forged,
/// unjudged) are its atomics, written here.
pub(crate) struct FlowTags {
    ctl: Arc<[FlowCtl]>,
    /// The TX workers' counts of every flow (a flow this generator sends bounds its sequence).
    pubs: Arc<[Counters]>,
    port: Arc<PortCounters>,
    /// Frame-time corrections, picoseconds per byte: this port's, and per flow what its latency
    /// mode adds for the sending port (0 for cut-through).
    ps_per_byte: u64,
    flow_ps: Arc<[u64]>,
    epoch_ns: u64,
    meta: Vec<FlowMeta>,
    /// The tag of the start [`TagPolicy::admit`] found new, for [`TagPolicy::restart`].
    starting: u32,
    extra: HashMap<u32, Extra>,
    tag_counts: Vec<Box<[u64]>>,
}

impl TagPolicy for FlowTags {
    const SITE: Site = Site::End;
    const SHARED_HISTS: bool = false;
    const UNTIMED_FRAMES: bool = true;

    #[inline(always)]
    fn admit(&mut self, sig: &Signature, _: usize, _: &mut RxTotals) -> Option<(usize, bool)> {
        let i = sig.flow_id as usize;
        let tag = match self.ctl.get(i) {
            Some(c) => c.tag.load(Ordering::Relaxed),
            None => u32::MAX,
        };
        if sig.trial != tag || sig.warmup {
            PortCounters::add(&self.port.stale, 1);
            return None;
        }
        let new = self.meta[i].tag != tag;
        if new {
            self.starting = tag;
        }
        Some((i, new))
    }

    /// Flow `i`'s first frame of its start: forget the earlier start.
    #[cold]
    fn restart(&mut self, i: usize, flows: &mut FlowStates) {
        flows.reset(i);
        let m = &mut self.meta[i];
        (m.tag, m.first_ns, m.last_ns, m.bound) = (self.starting, 0, 0, 0);
        self.extra.remove(&(i as u32));
        self.tag_counts[i].fill(0);
    }

    #[inline(always)]
    fn plausible(&mut self, i: usize, seq: u64, _: &mut RxTotals) -> bool {
        let meta = &mut self.meta[i];
        seq < meta.bound || !forged_seq(meta, &self.pubs[i], seq, &self.port)
    }

    #[inline(always)]
    fn stamped(&mut self, rx_rel: u64, tx_ts_ns: u64, _: &mut RxTotals) -> Option<u64> {
        Some(stamp_age(rx_rel, tx_ts_ns).unwrap_or(STAMPED_AHEAD))
    }

    #[inline(always)]
    fn latency(&mut self, i: usize, age: u64, wire: u32) -> Option<u64> {
        if age == STAMPED_AHEAD {
            // Sent here: forged; by another host's clock: counted without a latency.
            if self.meta[i].bound != SENT_ELSEWHERE {
                PortCounters::add(&self.port.forged, 1);
                return None;
            }
            return Some(UNTIMED);
        }
        match self.ps_per_byte + self.flow_ps[i] {
            0 => Some(age), // no division per frame where frames take no time (veth)
            ps => Some(age.saturating_sub(u64::from(wire) * ps / 1000)),
        }
    }

    #[inline(always)]
    fn arrived(&mut self, i: usize, seq: u64, rx_rel: u64) {
        let meta = &mut self.meta[i];
        let at = rx_rel + self.epoch_ns;
        if meta.first_ns == 0 {
            meta.first_ns = at;
        }
        meta.last_ns = at;
        if meta.period > 0 {
            self.tag_counts[i][(seq % u64::from(meta.period)) as usize] += 1;
        }
    }

    #[cold]
    fn duplicate(&mut self, i: usize, wire: u32) {
        self.extra.entry(i as u32).or_default().dup_bytes += u64::from(wire);
    }

    #[cold]
    fn untimed(&mut self, i: usize, wire: u32) {
        let e = self.extra.entry(i as u32).or_default();
        (e.untimed, e.untimed_bytes) = (e.untimed + 1, e.untimed_bytes + u64::from(wire));
    }
}

/// A sequence number at or past `meta.bound`: read the sender's count again (a flow sent here) and
/// say whether `seq` is still past it (forged: counted on the port). A flow sent elsewhere is
/// marked so once per start and counted unjudged on the port.
#[cold]
fn forged_seq(meta: &mut FlowMeta, sender: &Counters, seq: u64, port: &PortCounters) -> bool {
    if sender.tag.load(Ordering::Acquire) != meta.tag {
        meta.bound = SENT_ELSEWHERE;
        PortCounters::add(&port.unjudged, 1);
        return false;
    }
    meta.bound = sender.frames.load(Ordering::Relaxed);
    let forged = seq >= meta.bound;
    if forged {
        PortCounters::add(&port.forged, 1);
    }
    forged
}

/// One worker's receive state of every flow: the analyser with the generator's policy
/// ([`FlowTags`]), and the snapshot it is copying for readers.
pub(crate) struct RxFlows {
    an: Analyzer<FlowTags>,
    /// A snapshot being copied: the request it answers, the latency request it answers too (if
    /// any), the next flow; the copy.
    answering: Option<(u64, Option<u64>, usize)>,
    staging: SnapBuf,
}

impl FlowTags {
    /// The policy of a worker on `port` counting flows whose tag periods are `periods` (0: no
    /// per-index counts) and whose frames are stamped against `epoch_ns`.
    pub fn new(
        (ctl, pubs): (Arc<[FlowCtl]>, Arc<[Counters]>),
        port: Arc<PortCounters>,
        (ps_per_byte, flow_ps): (u64, Arc<[u64]>),
        periods: &[u32],
        epoch_ns: u64,
    ) -> FlowTags {
        FlowTags {
            ctl,
            pubs,
            port,
            ps_per_byte,
            flow_ps,
            epoch_ns,
            meta: periods
                .iter()
                .map(|&period| FlowMeta { tag: u32::MAX, period, first_ns: 0, last_ns: 0, bound: 0 })
                .collect(),
            starting: u32::MAX,
            extra: HashMap::new(),
            tag_counts: periods.iter().map(|&t| vec![0; t as usize].into_boxed_slice()).collect(),
        }
    }
}

impl RxFlows {
    pub fn new(policy: FlowTags) -> RxFlows {
        let (n, epoch_ns) = (policy.meta.len(), policy.epoch_ns);
        // Late frames are the reader's to tell, from the latency buckets.
        let an = Analyzer::with_policy(n, epoch_ns, u64::MAX, policy);
        RxFlows { an, answering: None, staging: SnapBuf::default() }
    }

    /// Publish the port's totals (after each batch).
    fn publish(&self) {
        let (t, port) = (&self.an.totals, &self.an.policy.port);
        port.frames.store(t.frames, Ordering::Relaxed);
        port.bytes.store(t.bytes, Ordering::Relaxed);
        port.foreign.store(t.foreign, Ordering::Relaxed);
    }

    fn snap(&self, i: usize) -> RxSnap {
        let (states, pol) = (&self.an.flows, &self.an.policy);
        let n = states.counts(i);
        let c = states.cold(i);
        let e = if pol.extra.is_empty() {
            Extra::default()
        } else {
            pol.extra.get(&(i as u32)).copied().unwrap_or_default()
        };
        let m = &pol.meta[i];
        RxSnap {
            tag: m.tag,
            frames: n.received + e.untimed + c.duplicated,
            bytes: n.bytes + e.untimed_bytes + e.dup_bytes,
            duplicated: c.duplicated,
            reordered: c.reordered,
            first_ns: m.first_ns,
            last_ns: m.last_ns,
            lat_sum: u64::try_from(n.latency_sum_ns).unwrap_or(u64::MAX),
            lat_min: n.latency_min_ns,
            lat_max: n.latency_max_ns,
            lat_frames: n.received,
            ipdv_sum: n.ipdv_sum_ns,
            ipdv_max: n.ipdv_max_ns,
        }
    }

    /// Answer what `snaps` asks, `chunk` flows at a time (call between batches); `last`: the
    /// worker ends, answer in full and for good.
    fn answer(&mut self, snaps: &Snapshots, chunk: usize, last: bool) {
        let want = snaps.want.load(Ordering::Acquire);
        let want_lat = snaps.want_lat.load(Ordering::Acquire);
        let lat_due = want_lat > self.staging.lat_have;
        let (asked, lat, from) = match self.answering {
            _ if last => (want, Some(want_lat), 0),
            Some(a) => a,
            None if want > self.staging.have || lat_due => (want, lat_due.then_some(want_lat), 0),
            None => return,
        };
        let to = self.copy(from, chunk, lat.is_some());
        if to < self.an.policy.meta.len() {
            self.answering = Some((asked, lat, to));
            return;
        }
        let mut g = match snaps.buf.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) if last => snaps.buf.lock().unwrap_or_else(|e| e.into_inner()),
            Err(TryLockError::WouldBlock) => {
                self.answering = Some((asked, lat, to)); // a reader holds it: publish after the next batch
                return;
            }
        };
        std::mem::swap(&mut g.flows, &mut self.staging.flows);
        std::mem::swap(&mut g.tags, &mut self.staging.tags);
        if let Some(l) = lat {
            std::mem::swap(&mut g.lat, &mut self.staging.lat);
            (g.lat_have, self.staging.lat_have) = (l, l);
        }
        (g.have, g.gone) = (asked, last);
        self.staging.have = asked;
        self.answering = None;
        drop(g);
        snaps.answered.notify_all();
    }

    /// Copy flows from `from` into the staging snapshot, `chunk` flows' worth (a histogram's
    /// buckets, with `lat`, count [`HIST_COST`] flows); returns the next flow to copy.
    fn copy(&mut self, from: usize, chunk: usize, lat: bool) -> usize {
        let (n, nh) = (self.an.policy.meta.len(), self.an.flows.hists.len());
        if self.staging.flows.len() != n {
            self.staging.flows = vec![RxSnap::default(); n];
            self.staging.tags = self.an.policy.tag_counts.clone();
        }
        if lat && self.staging.lat.len() != nh {
            self.staging.lat = vec![(u32::MAX, FlowBuckets::default()); nh];
        }
        let (mut i, mut budget) = (from, chunk);
        while i < n && budget > 0 {
            self.staging.flows[i] = self.snap(i);
            self.staging.tags[i].copy_from_slice(&self.an.policy.tag_counts[i]);
            budget -= 1;
            if lat && i < nh {
                let (l, d) = &self.an.flows.hists[i];
                self.staging.lat[i] =
                    (self.an.policy.meta[i].tag, FlowBuckets { latency: buckets(l), ipdv: buckets(d) });
                budget = budget.saturating_sub(HIST_COST);
            }
            i += 1;
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::analyze::FUTURE_TOLERANCE_NS;
    use netrig_wire::signature::Signature;

    /// A 64-byte frame whose last bytes are the signature of `flow`'s frame `seq` of start `tag`,
    /// sent 1 µs before `ts_ns`.
    fn signed(tag: u32, flow: u32, seq: u64, ts_ns: u64) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        let sig = Signature { trial: tag, warmup: false, flow_id: flow, seq, tx_ts_ns: ts_ns - 1000 };
        sig.emit(&mut f[60 - netrig_wire::signature::LEN..]);
        f
    }

    /// `n` flows, with no start yet, and their senders' counts.
    fn ctls(n: usize) -> (Arc<[FlowCtl]>, Arc<[Counters]>) {
        ((0..n).map(|_| FlowCtl::default()).collect(), (0..n).map(|_| Counters::default()).collect())
    }

    /// A worker's state of flows `ctl` with the epoch at 0 and no frame-time corrections.
    fn rx_flows((ctl, pubs): &(Arc<[FlowCtl]>, Arc<[Counters]>), periods: &[u32]) -> RxFlows {
        let flow_ps: Arc<[u64]> = vec![0; ctl.len()].into();
        let port = Arc::new(PortCounters::default());
        RxFlows::new(FlowTags::new((ctl.clone(), pubs.clone()), port, (0, flow_ps), periods, 0))
    }

    fn port(flows: &RxFlows) -> &PortCounters {
        &flows.an.policy.port
    }

    /// Count `frames` (tag, flow, seq), 10 µs apart.
    fn count(flows: &mut RxFlows, frames: &[(u32, u32, u64)]) {
        count_sent(flows, frames.iter().map(|&(t, f, s)| (t, f, s, 0)));
    }

    /// Count frames (tag, flow, seq, how far ahead of its arrival it is stamped), in one batch.
    fn count_sent(flows: &mut RxFlows, frames: impl Iterator<Item = (u32, u32, u64, u64)>) {
        for (k, (tag, flow, seq, ahead)) in frames.enumerate() {
            let ts = 1_000_000 + 10_000 * k as u64;
            flows.an.push(&signed(tag, flow, seq, ts + ahead), RxMeta { ts_ns: ts, ..Default::default() });
        }
        flows.an.flush();
    }

    #[test]
    fn frames_a_flow_sent_here_cannot_have_sent_are_forged_and_a_flow_sent_elsewhere_is_not_judged() {
        let c = ctls(2);
        let (ctl, pubs) = &c;
        ctl[0].tag.store(5, Ordering::Relaxed);
        ctl[1].tag.store(7, Ordering::Relaxed);
        pubs[0].reset(5);
        (0..3).for_each(|_| pubs[0].count(64, 1));
        let mut flows = rx_flows(&c, &[0, 0]);
        let future = 2 * FUTURE_TOLERANCE_NS;
        let frames = [(5, 0, 0, 0), (5, 0, 1, 0), (5, 0, 3, 0), (5, 0, 1 << 38, 0), (5, 0, 2, 0), (5, 0, 2, future)];
        count_sent(&mut flows, frames.into_iter());
        let s = flows.snap(0);
        assert_eq!((s.frames, s.duplicated, s.reordered), (3, 0, 0), "0, 1, 2; the forged ones touch nothing");
        assert_eq!(port(&flows).forged.load(Ordering::Relaxed), 3, "not sent yet (2), stamped in the future (1)");
        pubs[0].count(64, 1);
        count_sent(&mut flows, [(5, 0, 3, 0)].into_iter());
        assert_eq!((flows.snap(0).frames, port(&flows).forged.load(Ordering::Relaxed)), (4, 3), "sent now: received");
        let elsewhere = [(7, 1, 0, 0), (7, 1, 1 << 38, 0), (7, 1, 1, future)];
        count_sent(&mut flows, elsewhere.into_iter());
        assert_eq!(flows.snap(1).frames, 3, "another sender's counts are not here: every frame is received");
        let p = port(&flows);
        assert_eq!((p.forged.load(Ordering::Relaxed), p.unjudged.load(Ordering::Relaxed)), (3, 1));
    }

    #[test]
    fn a_flow_counts_duplicates_and_reordering_as_a_trial_does_and_restarts_with_its_tag() {
        let c = ctls(2);
        c.0[0].tag.store(5, Ordering::Relaxed);
        let mut flows = rx_flows(&c, &[0, 3]);
        count(&mut flows, &[(5, 0, 0), (5, 0, 1), (5, 0, 3), (5, 0, 2), (5, 0, 2), (4, 0, 4), (5, 1, 0)]);
        let s = flows.snap(0);
        assert_eq!((s.tag, s.frames, s.bytes, s.duplicated, s.reordered), (5, 5, 320, 1, 1));
        assert_eq!((s.lat_frames, s.lat_min, s.lat_max, s.lat_sum), (4, 1000, 1000, 4000));
        assert_eq!((s.first_ns, s.last_ns), (1_000_000, 1_040_000));
        assert_eq!(port(&flows).stale.load(Ordering::Relaxed), 2, "another start's frame, and a flow not started");
        c.0[0].tag.store(6, Ordering::Relaxed);
        // The new start's first frames come in the batch that ends the old one's.
        count(&mut flows, &[(5, 0, 5), (5, 0, 6), (6, 0, 0), (6, 0, 1)]);
        let s = flows.snap(0);
        assert_eq!((s.tag, s.frames, s.duplicated, s.reordered, s.lat_frames), (6, 2, 0, 0, 2), "the new start alone");
        assert_eq!(port(&flows).stale.load(Ordering::Relaxed), 4);
        c.0[1].tag.store(9, Ordering::Relaxed);
        count(&mut flows, &[(9, 1, 0), (9, 1, 1), (9, 1, 4), (9, 1, 4)]);
        assert_eq!(&flows.an.policy.tag_counts[1][..], &[1, 3, 0], "every arrival at its index modulo 3");
    }

    /// A new start's first frame arrives while frames of the old one are held for counting: they
    /// are counted into the old start, which the new one then forgets.
    #[test]
    fn frames_held_when_a_flow_restarts_are_counted_before_it() {
        let c = ctls(1);
        c.0[0].tag.store(5, Ordering::Relaxed);
        let mut flows = rx_flows(&c, &[0]);
        for (k, (tag, seq)) in [(5, 0), (5, 1), (5, 2), (6, 0), (6, 1)].into_iter().enumerate() {
            if k == 3 {
                c.0[0].tag.store(6, Ordering::Relaxed);
            }
            let ts = 1_000_000 + 10_000 * k as u64;
            flows.an.push(&signed(tag, 0, seq, ts), RxMeta { ts_ns: ts, ..Default::default() });
        }
        flows.an.flush();
        let s = flows.snap(0);
        assert_eq!(
            (s.tag, s.frames, s.reordered, s.first_ns),
            (6, 2, 0, 1_030_000),
            "the old start's frames not in it"
        );
    }

    /// The per-frame cost of counting, pinned, best of 5 (`cargo test --release -- --ignored
    /// rx_count_cost --nocapture`): 1, 4096 and 2^20 flows, frames round robin over the flows.
    #[test]
    #[ignore = "timing: run alone, pinned"]
    fn rx_count_cost() {
        crate::pin::PinLog::new().pin_self(1);
        for n in [1usize, 4096, 1 << 20] {
            let c = ctls(n);
            c.0.iter().for_each(|c| c.tag.store(3, Ordering::Relaxed));
            // Sent here, far ahead of the receiver: the bound is read once per flow.
            c.1.iter().for_each(|p| {
                p.reset(3);
                p.frames.store(u64::MAX / 2, Ordering::Relaxed);
            });
            let mut flows = rx_flows(&c, &vec![0; n]);
            let mut f = signed(3, 0, 0, 1 << 30);
            let at = f.len() - netrig_wire::signature::LEN;
            let total = 4_000_000u64.max(2 * n as u64);
            let (mut best, mut k) = (f64::MAX, 0u64);
            for _ in 0..5 {
                let t = std::time::Instant::now();
                for _ in 0..total {
                    let (flow_id, seq) = ((k % n as u64) as u32, k / n as u64);
                    Signature { trial: 3, warmup: false, flow_id, seq, tx_ts_ns: 1 << 29 }.emit(&mut f[at..]);
                    // As a worker: pushed per frame, counted per batch.
                    flows.an.push(std::hint::black_box(&f), RxMeta { ts_ns: (1 << 30) + 500, queue: 0 });
                    k += 1;
                    if k.is_multiple_of(crate::traffic::rx::RX_BATCH as u64) {
                        flows.an.flush();
                    }
                }
                flows.an.flush();
                best = best.min(t.elapsed().as_nanos() as f64 / total as f64);
            }
            println!("rx_count_cost flows {n}: {best:.1} ns per frame");
        }
    }

    /// The quantile of `(value, count)` pairs as `Histogram::value_at_quantile` takes it.
    fn quantile(b: &[(u64, u64)], q: f64) -> u64 {
        let at = ((q * b.iter().map(|x| x.1).sum::<u64>() as f64).ceil() as u64).max(1);
        let mut seen = 0;
        b.iter()
            .find(|x| {
                seen += x.1;
                seen >= at
            })
            .map_or(0, |x| x.0)
    }

    #[test]
    fn latency_buckets_give_the_histograms_quantiles_in_chunks_and_stay_through_plain_answers() {
        let n = 40; // flows with histograms: 16 per busy chunk
        let c = ctls(n);
        c.0.iter().for_each(|c| c.tag.store(3, Ordering::Relaxed));
        let (mut flows, snaps) = (rx_flows(&c, &vec![0; n]), Snapshots::default());
        for k in 0..1000u64 {
            // Latencies 1..1000 µs, and a duplicate of every tenth frame (not a latency sample).
            let ts = 10_000_000_000 + k * 10_000;
            let sig = Signature { trial: 3, warmup: false, flow_id: 0, seq: k, tx_ts_ns: ts - (k + 1) * 1000 };
            let mut f = vec![0u8; 60];
            sig.emit(&mut f[60 - netrig_wire::signature::LEN..]);
            for _ in 0..1 + u64::from(k % 10 == 0) {
                flows.an.frame(&f, RxMeta { ts_ns: ts, ..Default::default() });
            }
        }
        let asked = snaps.ask_latency();
        flows.answer(&snaps, SNAP_CHUNK, false);
        flows.answer(&snaps, SNAP_CHUNK, false);
        assert_eq!(snaps.buf.lock().unwrap().lat_have, 0, "32 of 40 histograms read: nothing published");
        flows.answer(&snaps, SNAP_CHUNK, false);
        let got = snaps.wait_latency(asked);
        let (tag, b) = &got.lat[0];
        assert_eq!((*tag, b.latency.iter().map(|x| x.1).sum::<u64>(), got.lat.len()), (3, 1000, n));
        assert_eq!(b.ipdv.iter().map(|x| x.1).sum::<u64>(), 999, "one |IPDV| between each two latencies");
        let (lat, ipdv) = &flows.an.flows.hists[0];
        for q in [0.0001, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(quantile(&b.latency, q), lat.value_at_quantile(q), "q {q}");
            assert_eq!(quantile(&b.ipdv, q), ipdv.value_at_quantile(q), "|IPDV| q {q}");
        }
        assert!(got.lat[1].1.latency.is_empty(), "a flow with no frames has no buckets");
        drop(got);
        let plain = snaps.ask();
        flows.answer(&snaps, usize::MAX, false);
        let got = snaps.wait(plain);
        assert_eq!((got.lat_have, got.lat[0].1.latency.len()), (asked, b_len(&flows)), "kept through a plain answer");
    }

    fn b_len(flows: &RxFlows) -> usize {
        buckets(&flows.an.flows.hists[0].0).len()
    }

    #[test]
    fn a_snapshot_is_answered_in_chunks_between_batches_and_the_last_one_stays() {
        let n = 2 * SNAP_CHUNK + 10;
        let c = ctls(n);
        let (mut flows, snaps) = (rx_flows(&c, &vec![0; n]), Snapshots::default());
        let last = (n - 1) as u32;
        c.0[n - 1].tag.store(7, Ordering::Relaxed);
        count(&mut flows, &[(7, last, 0)]);
        let asked = snaps.ask();
        flows.answer(&snaps, SNAP_CHUNK, false);
        flows.answer(&snaps, SNAP_CHUNK, false);
        assert_eq!(snaps.buf.lock().unwrap().have, 0, "two chunks of three copied: nothing published");
        count(&mut flows, &[(7, last, 1)]);
        flows.answer(&snaps, SNAP_CHUNK, false);
        let got = snaps.wait(asked);
        assert_eq!((got.have, got.gone, got.flows.len(), got.flows[n - 1].frames), (asked, false, n, 2));
        drop(got);
        flows.answer(&snaps, SNAP_CHUNK, false); // nothing asked: nothing done
        assert!(flows.answering.is_none());
        flows.answer(&snaps, usize::MAX, true);
        let asked_late = snaps.ask();
        let got = snaps.wait(asked_late);
        assert!(got.gone && got.have < asked_late && got.flows[n - 1].frames == 2, "the worker's last word");
    }
}
