//! The receive analysis: every received frame is classified and counted per flow.
//!
//! For each frame the RX worker calls [`Analyzer::frame`]: the signature is located
//! (`netrig_wire::dissect::find_signature`); frames without one are counted as foreign. For a
//! signed frame of a known flow the analyser updates, without allocating:
//! - unique frames/bytes received, duplicates and reordering, from the sequence number against
//!   a per-flow sliding window bitmap (a frame whose sequence is below the highest seen is
//!   *reordered*; a sequence already seen inside the window is a *duplicate*);
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

use crate::port::RxMeta;
use crate::schedule::IntervalCounter;

/// Flow-id bit marking warm-up frames: counted, but not part of the measurement.
pub const WARMUP_FLOW_BIT: u32 = 0x8000_0000;

/// Highest latency the histograms record (longer is clamped): 60 s.
pub const MAX_LATENCY_NS: u64 = 60_000_000_000;

/// Per-flow receive state.
#[derive(Debug, Clone)]
pub struct FlowRx {
    pub received: u64,
    pub bytes: u64,
    pub reordered: u64,
    pub duplicated: u64,
    pub late: u64,
    /// Highest sequence seen + 1.
    next_seq: u64,
    /// Sliding window of seen sequences, bit `seq % window` (window = words.len() * 64).
    window: Box<[u64]>,
    last_latency: Option<u64>,
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
}

/// Flows with their own latency histogram.
pub const PER_FLOW_HIST_LIMIT: usize = 256;

/// Latency histogram precision: 3 significant digits (0.1 %).
fn new_hist() -> Histogram<u32> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("static histogram bounds are valid")
}

/// |IPDV| histogram precision: 2 significant digits (1 %) are enough for a percentile of a
/// variation; 0 (equal consecutive latencies) is recorded as 0.
fn new_ipdv_hist() -> Histogram<u32> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 2).expect("static histogram bounds are valid")
}

impl FlowRx {
    fn new(window_bits: usize, with_hist: bool) -> Self {
        FlowRx {
            received: 0,
            bytes: 0,
            reordered: 0,
            duplicated: 0,
            late: 0,
            next_seq: 0,
            window: vec![0u64; window_bits / 64].into_boxed_slice(),
            last_latency: None,
            ipdv_sum_ns: 0,
            ipdv_max_ns: 0,
            ipdv_count: 0,
            latency_sum_ns: 0,
            latency_min_ns: u64::MAX,
            latency_max_ns: 0,
            hist: with_hist.then(new_hist),
            ipdv_hist: with_hist.then(new_ipdv_hist),
        }
    }

    #[inline]
    fn window_bits(&self) -> u64 {
        self.window.len() as u64 * 64
    }

    #[inline]
    fn bit(&mut self, seq: u64) -> (&mut u64, u64) {
        let w = self.window_bits();
        let idx = seq % w;
        let mask = 1u64 << (idx % 64);
        (&mut self.window[(idx / 64) as usize], mask)
    }

    /// Record sequence `seq`; returns false if it is a duplicate.
    #[inline]
    fn record_seq(&mut self, seq: u64) -> bool {
        let w = self.window_bits();
        if seq >= self.next_seq {
            // Advance the window: clear the bits of sequences that fall out of it.
            let advance = seq + 1 - self.next_seq;
            if advance >= w {
                self.window.iter_mut().for_each(|x| *x = 0);
            } else {
                for s in self.next_seq..=seq {
                    let (word, mask) = self.bit(s);
                    *word &= !mask;
                }
            }
            let (word, mask) = self.bit(seq);
            *word |= mask;
            self.next_seq = seq + 1;
            true
        } else if self.next_seq - seq > w {
            // Too old to tell duplicate from reordered: count it as reordered.
            self.reordered += 1;
            true
        } else {
            let (word, mask) = self.bit(seq);
            if *word & mask != 0 {
                self.duplicated += 1;
                false
            } else {
                *word |= mask;
                self.reordered += 1;
                true
            }
        }
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
        self.next_seq = self.next_seq.max(other.next_seq);
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
    /// Signed frames of a flow id this trial does not know.
    pub unknown_flow: u64,
    /// Signed warm-up frames.
    pub warmup: u64,
}

/// One RX worker's analysis state.
pub struct Analyzer {
    pub flows: Vec<FlowRx>,
    pub totals: RxTotals,
    /// Latency of flows without a histogram of their own.
    pub shared_hist: Histogram<u32>,
    /// |IPDV| of flows without a histogram of their own.
    pub shared_ipdv_hist: Histogram<u32>,
    /// Engine-clock time of the trial epoch; signature timestamps are relative to it.
    epoch_ns: u64,
    late_ns: u64,
    /// Received frames per counting interval, by their transmit timestamp (`crate::schedule`).
    pub intervals: Option<IntervalCounter>,
}

/// Window size per flow: large for few flows, smaller for many (bounded memory).
pub fn window_bits_for(flows: usize) -> usize {
    let bits = (1usize << 22) / flows.max(1);
    bits.clamp(256, 1 << 17).next_power_of_two()
}

impl Analyzer {
    pub fn new(nflows: usize, epoch_ns: u64, late_ns: u64) -> Self {
        let w = window_bits_for(nflows);
        Analyzer {
            flows: (0..nflows).map(|i| FlowRx::new(w, i < PER_FLOW_HIST_LIMIT)).collect(),
            totals: RxTotals::default(),
            shared_hist: new_hist(),
            shared_ipdv_hist: new_ipdv_hist(),
            epoch_ns,
            late_ns,
            intervals: None,
        }
    }

    /// Analyse one received frame (`frame` without FCS).
    #[inline]
    pub fn frame(&mut self, frame: &[u8], meta: RxMeta) {
        let t = &mut self.totals;
        t.frames += 1;
        let wire_len = frame.len() as u64 + 4;
        t.bytes += wire_len;
        let Some(sig) = dissect::find_signature(frame) else {
            t.foreign += 1;
            return;
        };
        if sig.flow_id & WARMUP_FLOW_BIT != 0 {
            t.warmup += 1;
            return;
        }
        let Some(f) = self.flows.get_mut(sig.flow_id as usize) else {
            t.unknown_flow += 1;
            return;
        };
        // Signature timestamps are 48-bit ns since the epoch (78 h); unwrap against rx time.
        let rx_rel = meta.ts_ns.saturating_sub(self.epoch_ns);
        let mask = netrig_wire::signature::MASK_48;
        let latency = (rx_rel.wrapping_sub(sig.tx_ts_ns)) & mask;
        // A receive stamp a little before the transmit stamp (clock granularity) reads as a
        // huge 48-bit value: treat it as zero.
        let latency = if latency > mask / 2 { 0 } else { latency };
        if !f.record_seq(sig.seq) {
            return;
        }
        if latency > self.late_ns {
            f.late += 1;
            return;
        }
        f.received += 1;
        f.bytes += wire_len;
        if let Some(iv) = self.intervals.as_mut() {
            iv.add(sig.tx_ts_ns, 1);
        }
        f.latency_sum_ns += latency as u128;
        f.latency_min_ns = f.latency_min_ns.min(latency);
        f.latency_max_ns = f.latency_max_ns.max(latency);
        f.hist.as_mut().unwrap_or(&mut self.shared_hist).saturating_record(latency.clamp(1, MAX_LATENCY_NS));
        if let Some(prev) = f.last_latency {
            let d = latency.abs_diff(prev);
            f.ipdv_sum_ns += d;
            f.ipdv_count += 1;
            if d > f.ipdv_max_ns {
                f.ipdv_max_ns = d;
            }
            f.ipdv_hist.as_mut().unwrap_or(&mut self.shared_ipdv_hist).saturating_record(d.min(MAX_LATENCY_NS));
        }
        f.last_latency = Some(latency);
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
        }
    }
}

/// A fresh, empty flow state (for aggregating).
pub fn empty_flow() -> FlowRx {
    FlowRx::new(64, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_window_classifies() {
        let mut f = FlowRx::new(256, false);
        for s in [0, 1, 2, 4, 3, 3, 5, 1000, 10, 999] {
            f.record_seq(s);
        }
        // 3 arrived after 4: reordered; second 3: duplicate; 10 is > 256 behind 1000: reordered
        // (too old to tell); 999 is new within the window: reordered.
        assert_eq!(f.duplicated, 1);
        assert_eq!(f.reordered, 3);
        assert_eq!(f.next_seq(), 1001);
    }

    #[test]
    fn window_wraps_cleanly() {
        let mut f = FlowRx::new(256, false);
        for s in 0..10_000u64 {
            assert!(f.record_seq(s));
        }
        assert_eq!((f.duplicated, f.reordered), (0, 0));
        assert!(!f.record_seq(9_990), "recent duplicate is detected after many wraps");
        assert!(f.record_seq(20_000));
        assert!(f.record_seq(19_999));
        assert_eq!(f.reordered, 1);
    }

    /// A signed 64-byte frame of flow 0 with sequence `seq`, sent at `tx_ns` since the epoch.
    fn frame(seq: u64, tx_ns: u64) -> Vec<u8> {
        use netrig_wire::builder::{build_udp_frame, patch_signature, L3Spec, TemplateSpec};
        let spec = TemplateSpec {
            src_mac: netrig_wire::ethernet::EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_mac: netrig_wire::ethernet::EthernetAddress([2, 0, 0, 0, 0, 2]),
            vlan: None,
            l3: L3Spec::V4 { src: [198, 18, 0, 1].into(), dst: [198, 19, 0, 1].into(), ttl: 64, dscp: 0 },
            src_port: 1024,
            dst_port: 1024,
            udp_checksum: false,
        };
        let mut buf = vec![0u8; 60];
        let info = build_udp_frame(&spec, 60, &mut buf).unwrap();
        let sig = netrig_wire::signature::Signature { flow_id: 0, seq, tx_ts_ns: tx_ns };
        patch_signature(&mut buf, &info, &sig).unwrap();
        buf
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
    fn ipdv_mean_p99_and_max_from_known_latencies() {
        // 100 consecutive differences of 100 ns, then one of 50 µs.
        let mut lat: Vec<u64> = (0..=100).map(|i| 10_000 + 100 * (i % 2)).collect();
        lat.push(60_000);
        let mut an = Analyzer::new(1, 0, u64::MAX / 4);
        feed(&mut an, 0, &lat);
        let s = LatencySummary::from_flow(&an.flows[0]);
        assert_eq!(s.samples, 102);
        assert_eq!(s.ipdv_max_ns, 50_000);
        assert_eq!(s.ipdv_p99_ns, 100, "99 % of the differences are 100 ns");
        assert!((s.ipdv_mean_ns - 60_000.0 / 101.0).abs() < 1e-9, "{}", s.ipdv_mean_ns);

        // The same frames seen by two RX workers (the first and second half) merge to the same
        // percentile; each worker only knows the differences inside its half.
        let (mut a, mut b) = (Analyzer::new(1, 0, u64::MAX / 4), Analyzer::new(1, 0, u64::MAX / 4));
        feed(&mut a, 0, &lat[..51]);
        feed(&mut b, 51, &lat[51..]);
        let mut m = a.flows[0].clone();
        m.merge(&b.flows[0]);
        let s = LatencySummary::from_flow(&m);
        assert_eq!((s.samples, s.ipdv_p99_ns, s.ipdv_max_ns), (102, 100, 50_000));
    }

    #[test]
    fn ipdv_p99_never_exceeds_the_maximum() {
        // 2 significant digits: 12_345 lies in a bucket whose highest value is above it.
        let mut an = Analyzer::new(1, 0, u64::MAX / 4);
        feed(&mut an, 0, &[1_000, 13_345, 1_000]);
        let s = LatencySummary::from_flow(&an.flows[0]);
        assert_eq!((s.ipdv_p99_ns, s.ipdv_max_ns), (12_345, 12_345));
    }

    #[test]
    fn flows_without_their_own_histogram_share_one() {
        let n = PER_FLOW_HIST_LIMIT + 1;
        let an = Analyzer::new(n, 0, u64::MAX / 4);
        assert!(an.flows[PER_FLOW_HIST_LIMIT - 1].ipdv_hist.is_some());
        assert!(an.flows[PER_FLOW_HIST_LIMIT].ipdv_hist.is_none() && an.flows[PER_FLOW_HIST_LIMIT].hist.is_none());
    }

    #[test]
    fn window_sizes_are_bounded() {
        assert_eq!(window_bits_for(1), 1 << 17);
        assert_eq!(window_bits_for(1 << 20), 256);
    }
}
