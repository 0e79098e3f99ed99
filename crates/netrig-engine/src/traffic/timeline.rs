//! Latency over time: what the frames sent in each window of [`WINDOW_NS`] (8.4 ms) of the trial
//! met on their way, so periodic spikes and stalls show where a trial's min/mean/max hides them.
//!
//! Each RX worker keeps, per window (by the frame's transmit time since the trial epoch), a
//! histogram of quarter-octave buckets (read back within 12 % of the value) and the exact
//! maximum. The windows are allocated once, before traffic, for the trial's planned length (at most
//! [`MAX_TIMELINE_NS`]); a frame counts with a shift, a leading-zero count and an add. The
//! collector adds the workers' windows and reads p50 / p99 from the merged buckets.

/// log2 of a window's length, ns: 2^23 ns = 8.39 ms.
pub const WINDOW_SHIFT: u32 = 23;
/// A window's length, ns.
pub const WINDOW_NS: u64 = 1 << WINDOW_SHIFT;
/// Trials longer than this (planned sending plus drain) get no timeline: a soak's intervals carry
/// its latency over time instead.
pub const MAX_TIMELINE_NS: u64 = 130_000_000_000;
/// log2 of the smallest latency told apart (256 ns); below it everything is in bucket 0.
const FLOOR_SHIFT: u32 = 8;
/// Quarter octaves from 2^8 to 2^32 ns (4.3 s); longer latencies share the last bucket.
const BUCKETS: usize = 4 * (32 - FLOOR_SHIFT as usize) + 1;

/// The bucket of a latency: quarter octaves above 256 ns.
#[inline]
fn bucket(latency_ns: u64) -> usize {
    if latency_ns < 1 << FLOOR_SHIFT {
        return 0;
    }
    let msb = 63 - latency_ns.leading_zeros();
    let quarter = ((latency_ns >> (msb - 2)) & 3) as usize;
    (((msb - FLOOR_SHIFT) as usize) * 4 + quarter + 1).min(BUCKETS - 1)
}

/// A value that represents bucket `b`: the geometric middle of its bounds.
fn bucket_value(b: usize) -> u64 {
    if b == 0 {
        return 1 << (FLOOR_SHIFT - 1);
    }
    let (octave, quarter) = ((b - 1) / 4, (b - 1) % 4);
    let low = (1u64 << (octave as u32 + FLOOR_SHIFT)) as f64 * (1.0 + quarter as f64 / 4.0);
    let high = (1u64 << (octave as u32 + FLOOR_SHIFT)) as f64 * (1.0 + (quarter + 1) as f64 / 4.0);
    (low * high).sqrt().round() as u64
}

/// One RX worker's windows.
#[derive(Debug, Clone)]
pub struct LatencyTimeline {
    counts: Vec<u32>,
    max_ns: Vec<u64>,
}

/// One window's latencies, over every RX worker.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencyWindow {
    /// Start since the trial epoch, ns (a multiple of [`WINDOW_NS`]).
    pub start_ns: u64,
    /// Frames sent in the window that were received and counted (not late).
    pub frames: u64,
    /// Median and 99th percentile, within 12 % (quarter-octave buckets); 0 without frames.
    pub p50_ns: u64,
    pub p99_ns: u64,
    /// Exact.
    pub max_ns: u64,
}

impl LatencyTimeline {
    /// Windows for a trial whose frames are sent at most `span_ns` after its epoch; None beyond
    /// [`MAX_TIMELINE_NS`].
    pub fn for_span(span_ns: u64) -> Option<Self> {
        if span_ns == 0 || span_ns > MAX_TIMELINE_NS {
            return None;
        }
        let windows = (span_ns >> WINDOW_SHIFT) as usize + 2;
        Some(LatencyTimeline { counts: vec![0; windows * BUCKETS], max_ns: vec![0; windows] })
    }

    /// Count a frame sent `tx_ts_ns` after the epoch that took `latency_ns`.
    #[inline]
    pub fn add(&mut self, tx_ts_ns: u64, latency_ns: u64) {
        let w = (tx_ts_ns >> WINDOW_SHIFT) as usize;
        if let Some(m) = self.max_ns.get_mut(w) {
            *m = (*m).max(latency_ns);
            self.counts[w * BUCKETS + bucket(latency_ns)] += 1;
        }
    }

    /// The windows from the first to the last that holds a frame, every worker's added.
    pub fn merged(timelines: &[&LatencyTimeline]) -> Vec<LatencyWindow> {
        let Some(n) = timelines.iter().map(|t| t.max_ns.len()).max() else { return Vec::new() };
        let mut out = Vec::with_capacity(n);
        let mut hist = [0u64; BUCKETS];
        for w in 0..n {
            hist.fill(0);
            let mut max_ns = 0;
            for t in timelines.iter().filter(|t| w < t.max_ns.len()) {
                max_ns = max_ns.max(t.max_ns[w]);
                for (h, c) in hist.iter_mut().zip(&t.counts[w * BUCKETS..(w + 1) * BUCKETS]) {
                    *h += u64::from(*c);
                }
            }
            let frames: u64 = hist.iter().sum();
            let at = |q: f64| {
                let rank = ((frames as f64 * q).ceil() as u64).max(1);
                let mut seen = 0;
                hist.iter().position(|&c| {
                    seen += c;
                    seen >= rank
                })
            };
            let value = |q: f64| if frames == 0 { 0 } else { at(q).map(bucket_value).unwrap_or(0).min(max_ns) };
            out.push(LatencyWindow {
                start_ns: (w as u64) << WINDOW_SHIFT,
                frames,
                p50_ns: value(0.5),
                p99_ns: value(0.99),
                max_ns,
            });
        }
        let first = out.iter().position(|w| w.frames > 0);
        let last = out.iter().rposition(|w| w.frames > 0);
        match (first, last) {
            (Some(a), Some(b)) => out[a..=b].to_vec(),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_reads_back_within_12_percent_of_its_values() {
        for v in [256u64, 300, 1000, 4_095, 4_096, 13_000, 999_999, 7_000_000, 1 << 31] {
            let got = bucket_value(bucket(v)) as f64;
            assert!((got / v as f64 - 1.0).abs() < 0.12, "{v} read back as {got}");
        }
        assert_eq!(bucket(10), 0);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert!((1..BUCKETS).all(|b| bucket_value(b) > bucket_value(b - 1)));
    }

    #[test]
    fn windows_merge_over_workers_with_exact_max_and_bucketed_percentiles() {
        let mut a = LatencyTimeline::for_span(100_000_000).unwrap();
        let mut b = LatencyTimeline::for_span(100_000_000).unwrap();
        // window 1: 98 frames at 10 µs and 2 at 1 ms (p99 falls on the spike); window 3: one frame
        for i in 0..98 {
            (if i % 2 == 0 { &mut a } else { &mut b }).add(WINDOW_NS + 1000 * i, 10_000);
        }
        a.add(WINDOW_NS + 5, 1_000_000);
        b.add(WINDOW_NS + 7, 1_000_123);
        a.add(3 * WINDOW_NS, 50_000);
        let w = LatencyTimeline::merged(&[&a, &b]);
        assert_eq!(w.len(), 3, "from the first window with a frame to the last");
        assert_eq!((w[0].start_ns, w[0].frames, w[0].max_ns), (WINDOW_NS, 100, 1_000_123));
        assert!((w[0].p50_ns as f64 / 10_000.0 - 1.0).abs() < 0.19);
        assert!((w[0].p99_ns as f64 / 1_000_000.0 - 1.0).abs() < 0.19);
        assert_eq!((w[1].frames, w[1].p50_ns, w[1].max_ns), (0, 0, 0));
        assert_eq!((w[2].frames, w[2].max_ns), (1, 50_000));
        assert!(w[2].p99_ns <= 50_000, "a percentile never above the exact maximum");
        assert!(LatencyTimeline::for_span(MAX_TIMELINE_NS + 1).is_none());
    }
}
