//! The receive analysis: every received frame is classified and counted per flow, by every
//! entry point that counts (a trial's receivers, the OTG generator's, a listen's).
//!
//! For each frame the RX worker calls [`Analyzer::push`], and [`Analyzer::flush`] after each batch
//! it takes from its queue (or [`Analyzer::frame`], both at once). Which frames count is the
//! analyser's [`TagPolicy`]: a trial's one tag ([`OneTag`], below), the generator's tag per flow
//! (`run::generator::rx::FlowTags`) or a listen's any tag (`run::listen::AnyTag`). The signature
//! is located (`netrig_wire::dissect::locate` at the policy's site) and, for a trial, the frame
//! classified in this order:
//! - no signature: *foreign* (ARP, the host's traffic, learning frames);
//! - a signature with another trial's tag: *earlier trial* (a late frame of a trial this process
//!   ran before, see [`TrialIdent`]) or *other trial* (another tester's, or forged with a wrong
//!   tag); never a frame of this trial;
//! - this trial's tag with the warm-up flag: *warm-up*;
//! - this trial's tag and a flow id the trial does not have: *unknown flow*;
//! - this trial's tag and flow but impossible contents: *implausible* — a sequence number at or
//!   beyond what the trial's TX workers had sent when the frame arrived, or a TX timestamp in the
//!   future (beyond [`FUTURE_TOLERANCE_NS`]) or before the trial's epoch. Such a frame never
//!   touches its flow's state, so one forged sequence number cannot make the genuine frames that
//!   follow look reordered.
//!
//! For the remaining frames (this trial's, plausible) the analyser updates, without allocating:
//! - unique frames/bytes received, duplicates and reordering, from the sequence number (40 bits
//!   on the wire, extended to 64 against the flow's highest) against a per-flow sliding window
//!   bitmap (a frame whose sequence is below the highest seen is *reordered*; a sequence
//!   already seen inside the window is a *duplicate*);
//! - latency = receive time − transmit timestamp, into the flow's HDR histogram, plus IPDV
//!   (difference of consecutive frames' latencies, RFC 5481): its mean and maximum, and its
//!   magnitude into a second, coarser HDR histogram (for the 99th percentile);
//! - *late*: latency above the late threshold (the drain time by default). Late frames are
//!   counted separately and are not "received": RFC 2544 loss counts them as lost.
//!
//! Loss per flow is computed at collection time as `sent − received` from the TX workers'
//! per-flow counts.
use hdrhistogram::Histogram;
use netrig_wire::dissect;
use netrig_wire::signature::{Signature, Site, MASK_40, TRIAL_MASK};

use crate::port::RxMeta;
use crate::sys::prefetch::prefetch;
use crate::traffic::flowstate::{note_gap_in, FlowStates, SeqClass};
pub use crate::traffic::flowstate::{window_bits_for, SeqGap};
use crate::traffic::schedule::IntervalCounter;
use crate::traffic::timeline::LatencyTimeline;

/// Half the 40-bit range of sequence numbers and timestamps: differences below it count forward.
const HALF_40: u64 = 1 << 39;

/// A TX timestamp up to this far after the receive time is taken for clock granularity (latency
/// 0); further in the future the frame is implausible. Receive stamps of af_packet and sockets are
/// converted from the realtime clock, re-measured every second.
pub const FUTURE_TOLERANCE_NS: u64 = 10_000_000;

/// Trials of this process, before this one, whose late frames count as *earlier trial* rather
/// than *other trial* (tags are consecutive within a process).
pub const EARLIER_TRIALS: u32 = 64;

/// Which trial the analyser counts for: its tag, and how to tell the other tags apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrialIdent {
    /// This trial's nonce (the signature's tag).
    pub tag: u32,
    /// The `earlier` tags below `tag` (modulo 2^23) are trials this process ran before.
    pub earlier: u32,
    /// Tags of this process's trials that were still running when this one started: their
    /// frames are another trial's, not late frames of an earlier one.
    pub concurrent: Vec<u32>,
}

impl TrialIdent {
    /// A frame tagged `tag` (not this trial's) belongs to an earlier trial of this process.
    fn is_earlier(&self, tag: u32) -> bool {
        let d = self.tag.wrapping_sub(tag) & TRIAL_MASK;
        d >= 1 && d <= self.earlier && !self.concurrent.contains(&tag)
    }
}

/// How many frames this trial's TX workers have sent so far (all flows together, plus the
/// frames a worker may have on the wire before it publishes its count). Called only when a
/// sequence number reaches the last value read.
pub type SentSoFar = Box<dyn FnMut() -> u64 + Send>;

/// Highest latency the histograms record (longer is clamped): 60 s.
pub const MAX_LATENCY_NS: u64 = 60_000_000_000;

/// Largest number of gaps a flow keeps (see [`Analyzer::with_gap_slots`]).
pub const MAX_GAP_SLOTS: usize = 64;

/// One flow's receive counts, plain: what the compact state of an [`Analyzer`] reads back as
/// ([`Analyzer::flow`]), what merges over RX workers, and a listener's per-flow state.
#[derive(Debug, Clone)]
pub struct FlowRx {
    pub received: u64,
    pub bytes: u64,
    pub reordered: u64,
    pub duplicated: u64,
    pub late: u64,
    /// Highest sequence seen + 1.
    next_seq: u64,
    pub ipdv_sum_ns: u64,
    pub ipdv_max_ns: u64,
    pub ipdv_count: u64,
    pub latency_sum_ns: u128,
    pub latency_min_ns: u64,
    pub latency_max_ns: u64,
    /// Per-flow histogram for the first [`PER_FLOW_HIST_LIMIT`] flows; the others share the
    /// analyser's histogram (memory: ~110 KiB per histogram).
    pub hist: Option<Histogram<u32>>,
    /// |IPDV| histogram, for the same flows as `hist` (others share the analyser's; ~15 KiB).
    pub ipdv_hist: Option<Histogram<u32>>,
    /// Transmit time (ns since the epoch) of the frame with the highest sequence seen.
    last_tx_ns: u64,
    /// The longest gaps in the flow's sequence (unused slots have `missing == 0`), in no order.
    gaps: Box<[SeqGap]>,
}

/// The 64-bit sequence number of a 40-bit one: the value with those low bits nearest to
/// `next_seq`, the next expected sequence (forward when both are as near).
#[inline]
pub(crate) fn extend_seq(next_seq: u64, s40: u64) -> u64 {
    let d = s40.wrapping_sub(next_seq) & MASK_40;
    if d <= HALF_40 || next_seq < MASK_40 + 1 - d {
        next_seq + d
    } else {
        next_seq - (MASK_40 + 1 - d)
    }
}

/// How long before `rx_rel` (receive time since the epoch, ns) a frame stamped `tx_ts_ns` (40-bit
/// ns since the epoch: it wraps every 18.3 min, so it is unwrapped against the receive time) was
/// sent: 0 when stamped after it was received by up to [`FUTURE_TOLERANCE_NS`] (clock
/// granularity), `None` when further ahead (forged, or another host's clock).
#[inline]
pub(crate) fn stamp_age(rx_rel: u64, tx_ts_ns: u64) -> Option<u64> {
    let raw = rx_rel.wrapping_sub(tx_ts_ns) & MASK_40;
    if raw <= HALF_40 {
        Some(raw)
    } else if MASK_40 + 1 - raw <= FUTURE_TOLERANCE_NS {
        Some(0)
    } else {
        None
    }
}

/// Flows with their own latency histogram.
pub const PER_FLOW_HIST_LIMIT: usize = 256;

/// Latency histogram precision: 3 significant digits (0.1 %).
pub(crate) fn new_hist() -> Histogram<u32> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("static histogram bounds are valid")
}

/// Record a frame's latency (0 as 1 ns, beyond [`MAX_LATENCY_NS`] as that).
#[inline]
pub(crate) fn record_latency(lat: &mut Histogram<u32>, latency: u64) {
    lat.saturating_record(latency.clamp(1, MAX_LATENCY_NS));
}

/// A histogram's recorded values as `(value, count)`, lowest first: each value the highest of its
/// bucket, so recording the pairs into a histogram of the same precision gives this one back, and
/// a quantile of them is [`Histogram::value_at_quantile`]'s.
pub(crate) fn buckets(h: &Histogram<u32>) -> Vec<(u64, u64)> {
    h.iter_recorded().map(|v| (v.value_iterated_to(), u64::from(v.count_at_value()))).collect()
}

/// |IPDV| histogram precision: 2 significant digits (1 %) are enough for a percentile of a
/// variation; 0 (equal consecutive latencies) is recorded as 0.
pub(crate) fn new_ipdv_hist() -> Histogram<u32> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 2).expect("static histogram bounds are valid")
}

impl FlowRx {
    /// Keep `g` if it is longer than the shortest gap kept (or a slot is free).
    fn note_gap(&mut self, g: SeqGap) {
        let mut words: Vec<[u64; 3]> = self.gaps.iter().map(|k| [k.missing, k.before_ns, k.after_ns]).collect();
        note_gap_in(&mut words, g);
        for (k, w) in self.gaps.iter_mut().zip(words) {
            *k = SeqGap { missing: w[0], before_ns: w[1], after_ns: w[2] };
        }
    }

    /// The longest gaps in the flow's sequence, at most as many as the analyser keeps, by start.
    pub fn gaps(&self) -> Vec<SeqGap> {
        let mut v: Vec<SeqGap> = self.gaps.iter().copied().filter(|g| g.missing > 0).collect();
        v.sort_unstable_by_key(|g| g.before_ns);
        v
    }

    /// Transmit time (ns since the epoch) of the highest sequence received (0: none received).
    pub fn last_tx_ns(&self) -> u64 {
        self.last_tx_ns
    }

    /// Highest sequence number seen + 1.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Fold `other` (the same flow seen by another RX worker) into this one.
    pub fn merge(&mut self, other: &FlowRx) {
        self.received += other.received;
        self.bytes += other.bytes;
        self.reordered += other.reordered;
        self.duplicated += other.duplicated;
        self.late += other.late;
        if other.next_seq > self.next_seq {
            self.last_tx_ns = other.last_tx_ns;
        }
        self.next_seq = self.next_seq.max(other.next_seq);
        if self.gaps.len() < other.gaps.len() {
            let mut v = self.gaps.to_vec();
            v.resize(other.gaps.len(), SeqGap::default());
            self.gaps = v.into_boxed_slice();
        }
        for g in other.gaps.iter().filter(|g| g.missing > 0) {
            self.note_gap(*g);
        }
        self.ipdv_sum_ns += other.ipdv_sum_ns;
        self.ipdv_max_ns = self.ipdv_max_ns.max(other.ipdv_max_ns);
        self.ipdv_count += other.ipdv_count;
        self.latency_sum_ns += other.latency_sum_ns;
        self.latency_min_ns = self.latency_min_ns.min(other.latency_min_ns);
        self.latency_max_ns = self.latency_max_ns.max(other.latency_max_ns);
        // Same bounds by construction, so add() cannot fail.
        if let Some(o) = &other.hist {
            let _ = self.hist.get_or_insert_with(new_hist).add(o);
        }
        if let Some(o) = &other.ipdv_hist {
            let _ = self.ipdv_hist.get_or_insert_with(new_ipdv_hist).add(o);
        }
    }
}

/// Counters of one RX worker that are not per flow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxTotals {
    /// Every frame the worker saw.
    pub frames: u64,
    pub bytes: u64,
    /// Frames without a netrig signature (ARP, the host's traffic, learning frames).
    pub foreign: u64,
    /// Frames of this trial's tag with a flow id this trial does not know.
    pub unknown_flow: u64,
    /// This trial's warm-up frames.
    pub warmup: u64,
    /// Signed frames of an earlier trial of this process (they arrived late).
    pub earlier_trial: u64,
    /// Signed frames of a trial this process is not running (another tester, a forged tag).
    pub other_trial: u64,
    /// Frames of this trial's tag and flow that cannot be genuine: TX time in the future or
    /// before the trial, or a sequence number the flow had not sent yet.
    pub implausible: u64,
}

/// Frames [`Analyzer::push`] holds between parsing a frame and counting it: enough for the
/// first frame's line to arrive from memory while the next ones are parsed.
pub const PIPELINE: usize = 16;

/// A frame of a known flow, parsed: what counting it needs.
#[derive(Debug, Clone, Copy, Default)]
struct Parsed {
    flow: u32,
    wire_len: u32,
    /// The signature's 40-bit sequence and transmit time.
    seq40: u64,
    tx_ts_ns: u64,
    /// Receive time since the epoch, and how long before it the frame was stamped ([`stamp_age`];
    /// [`STAMPED_AHEAD`]: further ahead than the tolerance), ns.
    rx_rel: u64,
    age: u64,
}

/// [`Parsed::age`] of a frame stamped further ahead of its arrival than [`FUTURE_TOLERANCE_NS`].
pub(crate) const STAMPED_AHEAD: u64 = u64::MAX;

/// The latency [`TagPolicy::latency`] gives a frame it counts without one (stamped by another
/// host's clock).
pub(crate) const UNTIMED: u64 = u64::MAX;

/// The frames pushed and not counted yet, oldest at `head` (a ring of [`PIPELINE`]).
#[derive(Debug, Default)]
struct Pending {
    frames: [Parsed; PIPELINE],
    head: usize,
    len: usize,
}

/// Which frames an [`Analyzer`] counts, and what it keeps beside the flows' state: a trial's one
/// tag ([`OneTag`]), an OTG generator's tag per flow (`run::generator::rx::FlowTags`) or a
/// listen's any tag (`run::listen::AnyTag`). The analyser calls it in this order for a signed
/// frame; each `false`/`None` ends the frame.
pub trait TagPolicy {
    /// Where the signature sits in its frames.
    const SITE: Site;
    /// Flows without a histogram of their own record into the analyser's shared ones.
    const SHARED_HISTS: bool;
    /// [`Self::latency`] may give [`UNTIMED`].
    const UNTIMED_FRAMES: bool;
    /// The flows' sequence gaps are kept (a trial's outages; no other reader has them).
    const GAPS: bool = false;
    /// The state of `nflows` flows: windows by their number, histograms for the first
    /// [`PER_FLOW_HIST_LIMIT`].
    fn states(nflows: usize) -> FlowStates
    where
        Self: Sized,
    {
        FlowStates::new(nflows, PER_FLOW_HIST_LIMIT, || (new_hist(), new_ipdv_hist()))
    }
    /// A frame without a signature, of `wire` bytes (counted foreign in the totals).
    #[inline(always)]
    fn foreign(&mut self, _frame: &[u8], _wire: u64) {}
    /// The flow a signed frame counts into, and whether it is the first frame of the flow's new
    /// start (the analyser then counts what it holds and calls [`Self::restart`]); `None`: not
    /// this run's (counted here or in `t`).
    fn admit(&mut self, sig: &Signature, nflows: usize, t: &mut RxTotals) -> Option<(usize, bool)>;
    /// Forget flow `flow`'s earlier start (its state in `flows` too).
    fn restart(&mut self, _flow: usize, _flows: &mut FlowStates) {}
    /// Whether sequence `seq` of flow `flow` can be genuine (counted where it cannot).
    fn plausible(&mut self, flow: usize, seq: u64, t: &mut RxTotals) -> bool;
    /// A frame of an admitted flow stamped `tx_ts_ns` and received at `rx_rel`: how long before it
    /// was sent ([`stamp_age`]; [`STAMPED_AHEAD`] when further ahead than the tolerance and
    /// [`Self::latency`]'s to judge), or `None` if it cannot be genuine (counted).
    fn stamped(&mut self, rx_rel: u64, tx_ts_ns: u64, t: &mut RxTotals) -> Option<u64>;
    /// The latency of a plausible frame of `wire` bytes, `age` old: `None` if it cannot be genuine
    /// (counted), [`UNTIMED`] to count it without a latency.
    #[inline(always)]
    fn latency(&mut self, _flow: usize, age: u64, _wire: u32) -> Option<u64> {
        Some(age)
    }
    /// A frame that passed, before its sequence is recorded.
    #[inline(always)]
    fn arrived(&mut self, _flow: usize, _seq: u64, _rx_rel: u64) {}
    /// A duplicate, or a frame counted without a latency.
    fn duplicate(&mut self, _flow: usize, _wire: u32) {}
    fn untimed(&mut self, _flow: usize, _wire: u32) {}
}

/// A trial's frames: one tag, told from earlier and other trials' ([`TrialIdent`]); sequence
/// numbers bounded by what all its TX workers have sent ([`SentSoFar`]); a stamp ahead of the
/// tolerance or before the epoch is implausible.
pub struct OneTag {
    ident: TrialIdent,
    /// No genuine sequence number reaches it: the TX frames sent when last read.
    seq_bound: u64,
    sent_so_far: SentSoFar,
}

impl TagPolicy for OneTag {
    const SITE: Site = Site::Payload;
    const SHARED_HISTS: bool = true;
    const UNTIMED_FRAMES: bool = false;
    const GAPS: bool = true;

    #[inline(always)]
    fn admit(&mut self, sig: &Signature, nflows: usize, t: &mut RxTotals) -> Option<(usize, bool)> {
        if sig.trial != self.ident.tag {
            self.stray(sig.trial, t);
            return None;
        }
        if sig.warmup {
            t.warmup += 1;
            return None;
        }
        if sig.flow_id as usize >= nflows {
            t.unknown_flow += 1;
            return None;
        }
        Some((sig.flow_id as usize, false))
    }

    #[inline(always)]
    fn plausible(&mut self, _: usize, seq: u64, t: &mut RxTotals) -> bool {
        if seq >= self.seq_bound {
            // Ahead of what the TX had sent when last asked: ask again.
            self.seq_bound = (self.sent_so_far)();
            if seq >= self.seq_bound {
                t.implausible += 1;
                return false;
            }
        }
        true
    }

    #[inline(always)]
    fn stamped(&mut self, rx_rel: u64, tx_ts_ns: u64, t: &mut RxTotals) -> Option<u64> {
        // Stamped too far ahead, or before the trial's epoch (only decidable in the first 2^39 ns).
        match stamp_age(rx_rel, tx_ts_ns) {
            Some(age) if age <= rx_rel => Some(age),
            _ => {
                t.implausible += 1;
                None
            }
        }
    }
}

impl OneTag {
    /// Counts a signed frame that is not this trial's.
    #[cold]
    fn stray(&self, tag: u32, t: &mut RxTotals) {
        if self.ident.is_earlier(tag) {
            t.earlier_trial += 1;
        } else {
            t.other_trial += 1;
        }
    }
}

/// One RX worker's analysis state.
pub struct Analyzer<P: TagPolicy = OneTag> {
    /// Every flow's state, compact (`crate::traffic::flowstate`); [`Self::flow`] reads one back.
    pub(crate) flows: FlowStates,
    pub totals: RxTotals,
    /// Latency of flows without a histogram of their own.
    pub shared_hist: Histogram<u32>,
    /// |IPDV| of flows without a histogram of their own.
    pub shared_ipdv_hist: Histogram<u32>,
    /// Engine-clock time of the trial epoch; signature timestamps are relative to it.
    epoch_ns: u64,
    late_ns: u64,
    pub(crate) policy: P,
    /// Received frames per counting interval, by their transmit timestamp (`crate::traffic::schedule`).
    pub intervals: Option<IntervalCounter>,
    /// Latency over time (`crate::traffic::timeline`), for trials short enough to keep one.
    pub timeline: Option<LatencyTimeline>,
    pending: Pending,
}

impl Analyzer {
    /// An analyser for trial tag 0 without a bound on sequence numbers (see [`Self::for_trial`]).
    pub fn new(nflows: usize, epoch_ns: u64, late_ns: u64) -> Self {
        let policy = OneTag { ident: TrialIdent::default(), seq_bound: u64::MAX, sent_so_far: Box::new(|| u64::MAX) };
        Analyzer::with_policy(nflows, epoch_ns, late_ns, policy)
    }

    /// Frames of this trial's flows counted once each, on time or late: what arrived of what was
    /// sent. Every frame is in the totals' `frames`; one the analyser does not count into a flow is
    /// in exactly one of their other counters, or a duplicate. Read after a flush.
    pub fn arrived(&self) -> u64 {
        let t = &self.totals;
        let apart = t.foreign + t.unknown_flow + t.warmup + t.earlier_trial + t.other_trial + t.implausible;
        t.frames.saturating_sub(apart + self.flows.duplicated)
    }

    /// Count for the trial `ident`; `sent_so_far` bounds sequence numbers (see [`SentSoFar`]).
    pub fn for_trial(mut self, ident: TrialIdent, sent_so_far: SentSoFar) -> Self {
        self.policy = OneTag { ident, sent_so_far, seq_bound: 0 };
        self
    }
}

impl<P: TagPolicy> Analyzer<P> {
    /// An analyser of `nflows` flows whose frames `policy` admits ([`TagPolicy::states`]);
    /// latencies above `late_ns` are late.
    pub fn with_policy(nflows: usize, epoch_ns: u64, late_ns: u64, policy: P) -> Self {
        Analyzer {
            flows: P::states(nflows),
            totals: RxTotals::default(),
            shared_hist: new_hist(),
            shared_ipdv_hist: new_ipdv_hist(),
            epoch_ns,
            late_ns,
            policy,
            intervals: None,
            timeline: None,
            pending: Pending::default(),
        }
    }

    /// Keep the `slots` longest sequence gaps of every flow (1 by default; at most
    /// [`MAX_GAP_SLOTS`]): a trial with events keeps one per event and one more, so every event's
    /// outage is among them. Allocates once, here; a gap costs a scan of the slots when it closes.
    pub fn with_gap_slots(mut self, slots: usize) -> Self {
        self.flows.set_gap_slots(slots.clamp(1, MAX_GAP_SLOTS));
        self
    }

    /// Analyse one received frame (`frame` without FCS) and count it at once: [`Self::push`]
    /// then [`Self::flush`].
    #[inline]
    pub fn frame(&mut self, frame: &[u8], meta: RxMeta) {
        self.push(frame, meta);
        self.flush();
    }

    /// Take one received frame (`frame` without FCS): classify it by its signature now, start
    /// loading its flow's line into the cache, and count it into its flow [`PIPELINE`] frames
    /// later, when the line has arrived (the oldest pending frame is counted first, so a flow's
    /// frames are counted in the order they arrived). The flows' counts, `implausible` and the
    /// intervals are complete after [`Self::flush`]; the other totals at once.
    #[inline]
    pub fn push(&mut self, frame: &[u8], meta: RxMeta) {
        let Some(p) = self.parse(frame, meta) else { return };
        prefetch(&self.flows.hot[p.flow as usize]);
        let q = &mut self.pending;
        if q.len == PIPELINE {
            let oldest = std::mem::replace(&mut q.frames[q.head], p);
            q.head = (q.head + 1) % PIPELINE;
            self.count(oldest);
        } else {
            q.frames[(q.head + q.len) % PIPELINE] = p;
            q.len += 1;
        }
    }

    /// Count every frame [`Self::push`] took and has not counted yet.
    #[inline]
    pub fn flush(&mut self) {
        while self.pending.len > 0 {
            let q = &mut self.pending;
            let p = q.frames[q.head];
            (q.head, q.len) = ((q.head + 1) % PIPELINE, q.len - 1);
            self.count(p);
        }
    }

    /// Classify a frame by its signature (totals counted); `None` unless the policy admits it.
    #[inline]
    fn parse(&mut self, frame: &[u8], meta: RxMeta) -> Option<Parsed> {
        let t = &mut self.totals;
        t.frames += 1;
        let wire_len = frame.len() as u64 + 4;
        t.bytes += wire_len;
        let Some(sig) = dissect::locate(frame, P::SITE) else {
            t.foreign += 1;
            self.policy.foreign(frame, wire_len);
            return None;
        };
        let (flow, restart) = self.policy.admit(&sig, self.flows.len(), t)?;
        if restart {
            // The frames held are of the earlier start.
            self.flush();
            self.policy.restart(flow, &mut self.flows);
        }
        let rx_rel = meta.ts_ns.saturating_sub(self.epoch_ns);
        let age = self.policy.stamped(rx_rel, sig.tx_ts_ns, &mut self.totals)?;
        Some(Parsed {
            flow: flow as u32,
            wire_len: wire_len as u32,
            seq40: sig.seq,
            tx_ts_ns: sig.tx_ts_ns,
            rx_rel,
            age,
        })
    }

    /// Count a parsed frame into its flow (its line loaded by now, see [`Self::push`]).
    #[inline(always)]
    fn count(&mut self, p: Parsed) {
        let (flow, age) = (p.flow as usize, p.age);
        let hot = &self.flows.hot[flow];
        let (expected, last_tx_ns) = (hot.next_seq, hot.last_tx_ns);
        let seq = extend_seq(expected, p.seq40);
        if !self.policy.plausible(flow, seq, &mut self.totals) {
            return;
        }
        let Some(latency) = self.policy.latency(flow, age, p.wire_len) else { return };
        self.policy.arrived(flow, seq, p.rx_rel);
        match self.flows.record_seq(flow, seq) {
            SeqClass::Duplicate => return self.policy.duplicate(flow, p.wire_len),
            SeqClass::Reordered => {}
            SeqClass::Ahead if P::GAPS => {
                // In order or ahead: a jump ahead closes a gap (from the flow's second frame on).
                let tx_ns = p.rx_rel.saturating_sub(latency); // 0 untimed: such a flow's gaps have no times
                if seq > expected && expected > 0 {
                    self.flows
                        .note_gap(flow, SeqGap { missing: seq - expected, before_ns: last_tx_ns, after_ns: tx_ns });
                }
                self.flows.hot[flow].last_tx_ns = tx_ns;
            }
            SeqClass::Ahead => {}
        }
        if P::UNTIMED_FRAMES && latency == UNTIMED {
            return self.policy.untimed(flow, p.wire_len);
        }
        if latency > self.late_ns {
            self.flows.count_late(flow);
            return;
        }
        if let Some(iv) = self.intervals.as_mut() {
            iv.add_received(p.tx_ts_ns, latency);
        }
        if let Some(t) = self.timeline.as_mut() {
            t.add(p.tx_ts_ns, latency);
        }
        let ipdv = self.flows.count_received(flow, p.wire_len, latency);
        let (lat_hist, ipdv_hist) = match self.flows.hists.get_mut(flow) {
            Some((l, i)) => (l, i),
            None if P::SHARED_HISTS => (&mut self.shared_hist, &mut self.shared_ipdv_hist),
            None => return,
        };
        record_latency(lat_hist, latency);
        if let Some(d) = ipdv {
            ipdv_hist.saturating_record(d.min(MAX_LATENCY_NS));
        }
    }

    /// How many flows the analyser counts.
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// Flow `i`'s counts, read back from the compact state (its histograms copied).
    pub fn flow(&self, i: usize) -> FlowRx {
        debug_assert_eq!(self.pending.len, 0, "frames pushed and not flushed");
        let s = &self.flows;
        let h = &s.hot[i];
        let n = s.counts(i);
        let c = s.cold(i);
        let hists = s.hists.get(i);
        FlowRx {
            received: n.received,
            bytes: n.bytes,
            reordered: c.reordered,
            duplicated: c.duplicated,
            late: c.late,
            next_seq: h.next_seq,
            ipdv_sum_ns: h.ipdv_sum_ns,
            ipdv_max_ns: n.ipdv_max_ns,
            ipdv_count: n.received.saturating_sub(1),
            latency_sum_ns: n.latency_sum_ns,
            latency_min_ns: n.latency_min_ns,
            latency_max_ns: n.latency_max_ns,
            hist: hists.map(|h| h.0.clone()),
            ipdv_hist: hists.map(|h| h.1.clone()),
            last_tx_ns: h.last_tx_ns,
            gaps: s.gaps(i).chain(std::iter::repeat(SeqGap::default())).take(s.gap_slots()).collect(),
        }
    }
}

/// Latency summary of a histogram (all in ns).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencySummary {
    pub samples: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// RFC 5481 PDV at the 99th percentile: p99 − min.
    pub pdv_ns: u64,
    /// Mean |IPDV| between consecutive frames of a flow.
    pub ipdv_mean_ns: f64,
    /// 99th percentile of |IPDV| (0 without an IPDV histogram), at most `ipdv_max_ns`.
    pub ipdv_p99_ns: u64,
    pub ipdv_max_ns: u64,
    /// Differences the IPDV is over (pairs of consecutive frames of a flow): 0 when no flow
    /// received two frames, and then no IPDV was measured (its fields are 0, not a measured 0).
    pub ipdv_samples: u64,
}

impl LatencySummary {
    /// Summary of a flow (or of an aggregate built with [`FlowRx::merge`]). Flows without a
    /// histogram of their own get min/mean/max only.
    pub fn from_flow(f: &FlowRx) -> Self {
        if f.received == 0 {
            return LatencySummary::default();
        }
        let mean_ns = f.latency_sum_ns as f64 / f.received as f64;
        let ipdv_mean_ns = if f.ipdv_count > 0 { f.ipdv_sum_ns as f64 / f.ipdv_count as f64 } else { 0.0 };
        // A bucket's highest value can lie above the largest sample: never report more than it.
        let ipdv_p99_ns =
            f.ipdv_hist.as_ref().filter(|h| !h.is_empty()).map_or(0, |h| h.value_at_quantile(0.99).min(f.ipdv_max_ns));
        let Some(h) = f.hist.as_ref().filter(|h| !h.is_empty()) else {
            return LatencySummary {
                samples: f.received,
                min_ns: f.latency_min_ns,
                mean_ns,
                max_ns: f.latency_max_ns,
                ipdv_mean_ns,
                ipdv_p99_ns,
                ipdv_max_ns: f.ipdv_max_ns,
                ipdv_samples: f.ipdv_count,
                ..Default::default()
            };
        };
        let p99 = h.value_at_quantile(0.99);
        LatencySummary {
            samples: h.len(),
            min_ns: f.latency_min_ns.min(h.min()),
            mean_ns,
            p50_ns: h.value_at_quantile(0.5),
            p90_ns: h.value_at_quantile(0.9),
            p99_ns: p99,
            p999_ns: h.value_at_quantile(0.999),
            max_ns: f.latency_max_ns,
            pdv_ns: p99.saturating_sub(f.latency_min_ns.min(h.min())),
            ipdv_mean_ns,
            ipdv_p99_ns,
            ipdv_max_ns: f.ipdv_max_ns,
            ipdv_samples: f.ipdv_count,
        }
    }
}

/// A fresh, empty flow state (for aggregating).
pub fn empty_flow() -> FlowRx {
    FlowRx {
        received: 0,
        bytes: 0,
        reordered: 0,
        duplicated: 0,
        late: 0,
        next_seq: 0,
        ipdv_sum_ns: 0,
        ipdv_max_ns: 0,
        ipdv_count: 0,
        latency_sum_ns: 0,
        latency_min_ns: u64::MAX,
        latency_max_ns: 0,
        hist: None,
        ipdv_hist: None,
        last_tx_ns: 0,
        gaps: Box::new([SeqGap::default()]),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::traffic::flowstate::record_in_window;

    /// `seqs` through a window of 256 bits: (duplicated, reordered, next sequence).
    fn classify(seqs: impl IntoIterator<Item = u64>) -> (u64, u64, u64) {
        let (mut w, mut next, mut n) = ([0u64; 4], 0, (0, 0));
        for s in seqs {
            match record_in_window(&mut w, &mut next, s) {
                SeqClass::Duplicate => n.0 += 1,
                SeqClass::Reordered => n.1 += 1,
                SeqClass::Ahead => {}
            }
        }
        (n.0, n.1, next)
    }

    #[test]
    fn sequence_window_classifies() {
        // 3 arrived after 4: reordered; second 3: duplicate; 10 is > 256 behind 1000: reordered
        // (too old to tell); 999 is new within the window: reordered.
        assert_eq!(classify([0, 1, 2, 4, 3, 3, 5, 1000, 10, 999]), (1, 3, 1001));
    }

    #[test]
    fn window_wraps_cleanly() {
        assert_eq!(classify(0..10_000u64), (0, 0, 10_000));
        // A recent duplicate is detected after many wraps.
        assert_eq!(classify((0..10_000u64).chain([9_990])), (1, 0, 10_000));
        assert_eq!(classify((0..10_000u64).chain([20_000, 19_999])), (0, 1, 20_001));
    }

    /// A signed 64-byte frame of flow 0 with sequence `seq`, sent at `tx_ns` since the epoch.
    fn frame(seq: u64, tx_ns: u64) -> Vec<u8> {
        signed(0, false, 0, seq, tx_ns)
    }

    /// A signed 64-byte frame with every signature field chosen (also the capture's tests').
    pub(crate) fn signed(trial: u32, warmup: bool, flow_id: u32, seq: u64, tx_ns: u64) -> Vec<u8> {
        use netrig_wire::frames::{FrameSpec, L3Spec};
        let spec = FrameSpec::udp(
            netrig_wire::ethernet::EthernetAddress([2, 0, 0, 0, 0, 1]),
            netrig_wire::ethernet::EthernetAddress([2, 0, 0, 0, 0, 2]),
            L3Spec::V4 { src: [198, 18, 0, 1].into(), dst: [198, 19, 0, 1].into(), ttl: 64, dscp: 0 },
            1024,
            1024,
        );
        let sig = netrig_wire::signature::Signature { trial, warmup, flow_id, seq, tx_ts_ns: tx_ns };
        spec.frame(60, &sig).unwrap()
    }

    /// Feeds frames of the given latencies (ns), 1 µs apart, to `an` starting at sequence `seq0`.
    fn feed(an: &mut Analyzer, seq0: u64, latencies: &[u64]) {
        for (k, &lat) in latencies.iter().enumerate() {
            let seq = seq0 + k as u64;
            let tx = 1_000_000 + seq * 1_000;
            an.frame(&frame(seq, tx), RxMeta { ts_ns: tx + lat, queue: 0 });
        }
    }

    #[test]
    fn the_longest_gaps_are_kept_with_their_transmit_times() {
        let mut an = Analyzer::new(1, 0, u64::MAX / 4).with_gap_slots(2);
        // Sequences 0..10, 12..20 (1 missing), 50..60 (30 missing), 61..70 (1 missing, shorter).
        let seqs: Vec<u64> = (0..10).chain(11..20).chain(50..60).chain(61..70).collect();
        for &seq in &seqs {
            let tx = 1_000_000 + seq * 1_000;
            an.frame(&frame(seq, tx), RxMeta { ts_ns: tx + 5_000, queue: 0 });
        }
        let g = an.flow(0).gaps();
        assert_eq!(g.len(), 2);
        // The longest: 20..49 missing, between seq 19 and seq 50.
        assert_eq!(g[1], SeqGap { missing: 30, before_ns: 1_019_000, after_ns: 1_050_000 });
        assert_eq!(g[1].duration_ns(), 31_000);
        // Of the two 1-frame gaps (2 µs each), the first one kept its slot.
        assert_eq!((g[0].missing, g[0].duration_ns()), (1, 2_000));
        assert_eq!(an.flow(0).last_tx_ns(), 1_069_000);
        // A reordered frame inside a gap neither opens nor changes one.
        an.frame(&frame(30, 1_030_000), RxMeta { ts_ns: 1_100_000, queue: 0 });
        assert_eq!(an.flow(0).gaps(), g);
        // Merging another worker's view of the flow keeps the longest of both.
        let mut m = an.flow(0).clone();
        let mut other = Analyzer::new(1, 0, u64::MAX / 4);
        for seq in [100u64, 200] {
            other.frame(&frame(seq, seq * 10_000), RxMeta { ts_ns: seq * 10_000 + 1, queue: 0 });
        }
        m.merge(&other.flow(0));
        let mg = m.gaps();
        assert_eq!(mg.len(), 2);
        // By start: the other worker's 99-frame gap (1 ms), then the 30-frame one.
        assert_eq!(mg[0], SeqGap { missing: 99, before_ns: 1_000_000, after_ns: 2_000_000 });
        assert_eq!(mg[1].missing, 30);
    }

    #[test]
    fn a_flow_without_loss_has_no_gap() {
        let mut an = Analyzer::new(1, 0, u64::MAX / 4);
        feed(&mut an, 0, &[10_000; 100]);
        assert!(an.flow(0).gaps().is_empty());
    }

    #[test]
    fn ipdv_mean_p99_and_max_from_known_latencies() {
        // 100 consecutive differences of 100 ns, then one of 50 µs.
        let mut lat: Vec<u64> = (0..=100).map(|i| 10_000 + 100 * (i % 2)).collect();
        lat.push(60_000);
        let mut an = Analyzer::new(1, 0, u64::MAX / 4);
        feed(&mut an, 0, &lat);
        let s = LatencySummary::from_flow(&an.flow(0));
        assert_eq!((s.samples, s.ipdv_samples), (102, 101));
        assert_eq!(s.ipdv_max_ns, 50_000);
        assert_eq!(s.ipdv_p99_ns, 100, "99 % of the differences are 100 ns");
        assert!((s.ipdv_mean_ns - 60_000.0 / 101.0).abs() < 1e-9, "{}", s.ipdv_mean_ns);

        // The same frames seen by two RX workers (the first and second half) merge to the same
        // percentile; each worker only knows the differences inside its half.
        let (mut a, mut b) = (Analyzer::new(1, 0, u64::MAX / 4), Analyzer::new(1, 0, u64::MAX / 4));
        feed(&mut a, 0, &lat[..51]);
        feed(&mut b, 51, &lat[51..]);
        let mut m = a.flow(0).clone();
        m.merge(&b.flow(0));
        let s = LatencySummary::from_flow(&m);
        assert_eq!((s.samples, s.ipdv_p99_ns, s.ipdv_max_ns), (102, 100, 50_000));
    }

    #[test]
    fn a_flow_of_one_frame_has_latency_and_no_ipdv() {
        let mut an = Analyzer::new(1, 0, u64::MAX / 4);
        feed(&mut an, 0, &[10_000]);
        let s = LatencySummary::from_flow(&an.flow(0));
        assert_eq!((s.samples, s.ipdv_samples, s.ipdv_max_ns), (1, 0, 0));
    }

    #[test]
    fn ipdv_p99_never_exceeds_the_maximum() {
        // 2 significant digits: 12_345 lies in a bucket whose highest value is above it.
        let mut an = Analyzer::new(1, 0, u64::MAX / 4);
        feed(&mut an, 0, &[1_000, 13_345, 1_000]);
        let s = LatencySummary::from_flow(&an.flow(0));
        assert_eq!((s.ipdv_p99_ns, s.ipdv_max_ns), (12_345, 12_345));
    }

    #[test]
    fn flows_without_their_own_histogram_share_one() {
        let n = PER_FLOW_HIST_LIMIT + 1;
        let an = Analyzer::new(n, 0, u64::MAX / 4);
        assert!(an.flow(PER_FLOW_HIST_LIMIT - 1).ipdv_hist.is_some());
        assert!(an.flow(PER_FLOW_HIST_LIMIT).ipdv_hist.is_none() && an.flow(PER_FLOW_HIST_LIMIT).hist.is_none());
    }

    const TAG: u32 = 1000;

    /// An analyser of trial `TAG` (three earlier trials, of which 997 still runs, and 1001 running
    /// alongside) whose TX has
    /// sent `sent` frames; the second value counts how often the bound was asked for.
    fn trial_analyzer(nflows: usize, sent: u64) -> (Analyzer, std::sync::Arc<std::sync::atomic::AtomicU64>) {
        use std::sync::atomic::{AtomicU64, Ordering};
        let asked = std::sync::Arc::new(AtomicU64::new(0));
        let a = asked.clone();
        let ident = TrialIdent { tag: TAG, earlier: 3, concurrent: vec![1001, 997] };
        let an = Analyzer::new(nflows, 0, 1_000_000_000).for_trial(
            ident,
            Box::new(move || {
                a.fetch_add(1, Ordering::Relaxed);
                sent
            }),
        );
        (an, asked)
    }

    fn at(ts_ns: u64) -> RxMeta {
        RxMeta { ts_ns, queue: 0 }
    }

    #[test]
    fn frames_of_other_trials_are_counted_apart_by_kind() {
        let (mut an, _) = trial_analyzer(1, 100);
        an.frame(&signed(TAG, false, 0, 0, 1_000), at(2_000));
        an.frame(&signed(TAG - 1, false, 0, 1, 1_000), at(2_000)); // the previous trial: late
        an.frame(&signed(TAG - 2, true, 0, 1, 1_000), at(2_000)); // its warm-up too
        an.frame(&signed(TAG - 4, false, 0, 1, 1_000), at(2_000)); // beyond the earlier trials
        an.frame(&signed(997, false, 0, 1, 1_000), at(2_000)); // earlier tag, but still running
        an.frame(&signed(1001, false, 0, 1, 1_000), at(2_000)); // a concurrent trial
        an.frame(&signed(0x55_5555, false, 0, 1, 1_000), at(2_000)); // another process
        an.frame(&signed(TAG, true, 0, 1, 1_000), at(2_000)); // this trial's warm-up
        an.frame(&signed(TAG, false, 7, 1, 1_000), at(2_000)); // a flow the trial does not have
        an.frame(&frame(0, 0)[..40], at(2_000)); // not netrig's
        let t = an.totals;
        assert_eq!((t.earlier_trial, t.other_trial, t.warmup, t.unknown_flow, t.foreign), (2, 4, 1, 1, 1));
        assert_eq!((t.frames, an.arrived()), (10, 1));
        let f = &an.flow(0);
        assert_eq!((f.received, f.reordered, f.duplicated, f.next_seq()), (1, 0, 0, 1), "only this trial's frame");
    }

    #[test]
    fn earlier_trials_wrap_around_the_tag_space() {
        let ident = TrialIdent { tag: 1, earlier: 3, concurrent: Vec::new() };
        assert!(ident.is_earlier(0) && ident.is_earlier(TRIAL_MASK) && ident.is_earlier(TRIAL_MASK - 1));
        assert!(!ident.is_earlier(TRIAL_MASK - 2) && !ident.is_earlier(1) && !ident.is_earlier(2));
    }

    #[test]
    fn a_forged_sequence_number_is_implausible_and_leaves_the_flow_alone() {
        // 600 genuine frames; after the 100th, one frame claims sequence 2^39 + 5 (the TX has
        // sent only 600): it is counted apart, and the 500 that follow are in order.
        let (mut an, asked) = trial_analyzer(1, 600);
        for seq in 0..600u64 {
            an.frame(&signed(TAG, false, 0, seq, 1_000 + seq), at(5_000 + seq));
            if seq == 99 {
                an.frame(&signed(TAG, false, 0, (1 << 39) + 5, 1_100), at(5_100));
                an.frame(&signed(TAG, false, 0, 600, 1_100), at(5_100)); // one past the last sent
            }
        }
        let f = &an.flow(0);
        assert_eq!((f.received, f.reordered, f.duplicated, f.late), (600, 0, 0, 0));
        assert_eq!(an.totals.implausible, 2);
        assert!(asked.load(std::sync::atomic::Ordering::Relaxed) <= 3, "the bound is asked for only when reached");
    }

    #[test]
    fn the_sequence_bound_is_refreshed_as_the_sender_progresses() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let sent = std::sync::Arc::new(AtomicU64::new(10));
        let s = sent.clone();
        let mut an = Analyzer::new(1, 0, u64::MAX / 4)
            .for_trial(TrialIdent { tag: TAG, ..Default::default() }, Box::new(move || s.load(Ordering::Relaxed)));
        for seq in 0..10 {
            an.frame(&signed(TAG, false, 0, seq, 1), at(2));
        }
        an.frame(&signed(TAG, false, 0, 10, 1), at(2));
        assert_eq!((an.flow(0).received, an.totals.implausible), (10, 1), "frame 10 was not sent yet");
        sent.store(20, Ordering::Relaxed);
        an.frame(&signed(TAG, false, 0, 10, 1), at(2));
        assert_eq!((an.flow(0).received, an.totals.implausible), (11, 1), "now it was");
    }

    #[test]
    fn transmit_times_in_the_future_or_before_the_trial_are_implausible() {
        let (mut an, _) = trial_analyzer(1, 100);
        let epoch = 1_000_000_000;
        an.epoch_ns = epoch;
        // Received 5 ms after the epoch.
        let rx = at(epoch + 5_000_000);
        an.frame(&signed(TAG, false, 0, 0, 4_000_000), rx); // 1 ms latency
        an.frame(&signed(TAG, false, 0, 1, 5_000_100), rx); // 100 ns "early": clock granularity
        an.frame(&signed(TAG, false, 0, 2, 5_000_000 + FUTURE_TOLERANCE_NS + 1), rx); // the future
        an.frame(&signed(TAG, false, 0, 3, MASK_40 - 1_000), rx); // before the epoch
        an.frame(&signed(TAG, false, 0, 4, HALF_40 + 6_000_000), rx); // far in the future
        let f = &an.flow(0);
        assert_eq!((f.received, an.totals.implausible), (2, 3));
        assert_eq!((f.latency_min_ns, f.latency_max_ns), (0, 1_000_000));
        assert_eq!(f.next_seq(), 2, "implausible frames do not touch the sequence window");
    }

    #[test]
    fn sequence_numbers_are_extended_across_the_40_bit_wrap() {
        let next = MASK_40 - 2;
        assert_eq!(extend_seq(next, MASK_40 - 1), MASK_40 - 1);
        assert_eq!(extend_seq(next, 1), MASK_40 + 2, "just past the wrap");
        assert_eq!(extend_seq(next, MASK_40 - 100), MASK_40 - 100, "a little behind");
        let next = (3 << 40) + 10;
        assert_eq!(extend_seq(next, MASK_40), (3 << 40) - 1, "behind, across the wrap");
        assert_eq!(extend_seq(next, 12), (3 << 40) + 12);
        assert_eq!(extend_seq(10, MASK_40), MASK_40, "never below zero");
        assert_eq!(extend_seq(10, 3), 3);

        // A flow crossing the wrap is counted in order, without a reordered frame.
        let (mut an, _) = trial_analyzer(1, u64::MAX);
        an.flow(0).next_seq = MASK_40 - 50;
        for k in 0..100u64 {
            an.frame(&signed(TAG, false, 0, (MASK_40 - 50 + k) & MASK_40, 1), at(2));
        }
        let f = &an.flow(0);
        assert_eq!((f.received, f.reordered, f.duplicated, f.next_seq()), (100, 0, 0, MASK_40 + 50));
    }
}

/// The compact state against a plain model: every field a flow reports, on random frame
/// sequences (in order, reordered, duplicated, jumps, late, latencies beyond the hot line's
/// 32 bits, counters about to carry).
#[cfg(test)]
mod model_tests {
    use super::tests::signed;
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    /// One flow's counts the plain way: every sequence seen in a set, 64/128-bit counters.
    #[derive(Default)]
    struct Model {
        seen: HashSet<u64>,
        next_seq: u64,
        received: u64,
        bytes: u64,
        reordered: u64,
        duplicated: u64,
        late: u64,
        latencies: Vec<u64>,
        last_tx_ns: u64,
        gaps: Vec<SeqGap>,
        /// Counts a preloaded hot line started from (no frames of them).
        preloaded_sum_ns: u128,
        preloaded_frames: u64,
    }

    impl Model {
        /// A 64-byte frame; `window` sequences back a duplicate is still told apart.
        fn frame(&mut self, seq: u64, tx: u64, latency: u64, window: u64) {
            if seq < self.next_seq {
                if self.next_seq - seq <= window && !self.seen.insert(seq) {
                    self.duplicated += 1;
                    return;
                }
                self.seen.insert(seq);
                self.reordered += 1;
            } else {
                if seq > self.next_seq && self.next_seq > 0 {
                    let g = SeqGap { missing: seq - self.next_seq, before_ns: self.last_tx_ns, after_ns: tx };
                    self.keep_gap(g, GAP_SLOTS);
                }
                self.seen.insert(seq);
                self.next_seq = seq + 1;
                self.last_tx_ns = tx;
            }
            if latency > LATE_NS {
                self.late += 1;
                return;
            }
            self.received += 1;
            self.bytes += 64;
            self.latencies.push(latency);
        }

        fn keep_gap(&mut self, g: SeqGap, slots: usize) {
            if self.gaps.len() < slots {
                self.gaps.push(g);
            } else if let Some(k) = self.gaps.iter_mut().min_by_key(|k| k.duration_ns()) {
                if g.duration_ns() > k.duration_ns() {
                    *k = g;
                }
            }
        }

        fn check(&self, f: &FlowRx) {
            let l = &self.latencies;
            let ipdv: Vec<u64> = l.windows(2).map(|w| w[0].abs_diff(w[1])).collect();
            assert_eq!((f.received, f.bytes, f.next_seq()), (self.received, self.bytes, self.next_seq));
            assert_eq!((f.reordered, f.duplicated, f.late), (self.reordered, self.duplicated, self.late));
            assert_eq!(f.latency_sum_ns, self.preloaded_sum_ns + l.iter().map(|&x| x as u128).sum::<u128>());
            assert_eq!(f.latency_min_ns, l.iter().copied().min().unwrap_or(u64::MAX));
            assert_eq!(f.latency_max_ns, l.iter().copied().max().unwrap_or(0));
            let count = ipdv.len() as u64 + self.preloaded_frames.min(self.received.saturating_sub(1));
            assert_eq!((f.ipdv_sum_ns, f.ipdv_count), (ipdv.iter().sum(), count));
            assert_eq!(f.ipdv_max_ns, ipdv.iter().copied().max().unwrap_or(0));
            assert_eq!(f.last_tx_ns(), self.last_tx_ns);
            let mut want = self.gaps.clone();
            want.sort_unstable_by_key(|g| g.before_ns);
            assert_eq!(f.gaps(), want);
        }
    }

    /// A frame: flow, how its sequence moves (0: next, 1..: jump ahead, <0: back), latency kind.
    fn frames() -> impl Strategy<Value = Vec<(usize, i64, u8, u64)>> {
        let step = prop_oneof![6 => Just(0i64), 2 => 1i64..150, 3 => -150i64..0];
        prop::collection::vec((0usize..3, step, 0u8..10, 0u64..5_000), 1..400)
    }

    const LATE_NS: u64 = 8_000_000_000;
    const GAP_SLOTS: usize = 2;
    const WIDE_NS: u64 = 1 << 32;

    /// The frames through [`Analyzer::push`], flushed after every `batch` (as an RX worker flushes
    /// after each batch from its queue; 1: [`Analyzer::frame`]).
    fn run(nflows: usize, preload: bool, frames: &[(usize, i64, u8, u64)], batch: usize) {
        let mut an = Analyzer::new(nflows, 0, LATE_NS).with_gap_slots(GAP_SLOTS);
        let window = an.flows.window_bits() as u64;
        let mut models: Vec<Model> = (0..3).map(|_| Model::default()).collect();
        if preload {
            // Flow 1 a few frames from carrying out of its 32-bit received and bytes counts and
            // its 64-bit latency sum.
            let h = &mut an.flows.hot[1];
            (h.received, h.bytes, h.latency_sum_ns) = (u32::MAX - 2, u32::MAX - 100, u64::MAX - 10_000);
            let m = &mut models[1];
            (m.received, m.bytes) = ((u32::MAX - 2) as u64, (u32::MAX - 100) as u64);
            (m.preloaded_sum_ns, m.preloaded_frames) = ((u64::MAX - 10_000) as u128, (u32::MAX - 2) as u64);
        }
        let mut cursor = [0u64; 3];
        for (k, &(flow, step, kind, jitter)) in frames.iter().enumerate() {
            let seq = cursor[flow].saturating_add_signed(step);
            cursor[flow] = cursor[flow].max(seq + 1);
            let tx = 1_000 + seq * 1_000;
            let latency = match kind {
                0 => WIDE_NS + jitter * 1_000_000,     // beyond 32 bits, received
                1 => LATE_NS + 1 + jitter,             // late
                2 => u32::MAX as u64 - 2 + jitter % 4, // at the edge of the hot line's range
                _ => 10_000 + jitter,
            };
            an.push(&signed(0, false, flow as u32, seq, tx), at(tx + latency));
            if (k + 1) % batch == 0 {
                an.flush();
            }
            models[flow].frame(seq, tx, latency, window);
        }
        an.flush();
        assert_eq!(an.totals.frames, frames.len() as u64);
        let arrived: u64 = models.iter().map(|m| m.received - m.preloaded_frames + m.late).sum();
        assert_eq!(an.arrived(), arrived, "every frame once, on time or late; no duplicate");
        for (i, m) in models.iter().enumerate() {
            m.check(&an.flow(i));
        }
    }

    fn at(ts_ns: u64) -> RxMeta {
        RxMeta { ts_ns, queue: 0 }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// Few flows: each flow's window lies out of line (2^17 sequences).
        #[test]
        fn few_flows_match_the_model(f in frames(), batch in 1usize..3 * PIPELINE) {
            run(3, false, &f, batch);
        }

        /// Many flows: the window is the hot line's 64 bits.
        #[test]
        fn many_flows_match_the_model(f in frames(), batch in 1usize..3 * PIPELINE) {
            run(crate::traffic::flowstate::INLINE_WINDOW_FLOWS, false, &f, batch);
        }

        /// Counters carrying out of the hot line's words into the flow's wide record.
        #[test]
        fn carries_match_the_model(f in frames(), batch in 1usize..3 * PIPELINE) {
            run(3, true, &f, batch);
        }
    }
}
