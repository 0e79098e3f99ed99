//! What a trial returns: per flow, per stream, per port, per interval, and the trial's whole
//! ([`TrialResult`]), with the totals derived from them.
use crate::pin::PinFailure;
use crate::traffic::analyze::{LatencySummary, SeqGap};
use crate::traffic::pacing::{Pacing, Smoothness};
use crate::traffic::timeline::LatencyWindow;

/// Result of one flow.
#[derive(Debug, Clone)]
pub struct FlowResult {
    pub flow_id: u32,
    pub tx_frames: u64,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicated: u64,
    pub late: u64,
    pub latency: LatencySummary,
    /// The longest gaps in the flow's received sequence (at most `gap_slots`), by start.
    pub gaps: Vec<SeqGap>,
    /// Transmit time of the highest sequence received, ns since the epoch (0: none received).
    pub last_rx_tx_ns: u64,
    /// Sequence numbers sent after the highest one received (a gap that never closed).
    pub tail_missing: u64,
}

/// Result of one stream.
#[derive(Debug, Clone)]
pub struct StreamResult {
    pub index: usize,
    pub name: String,
    pub tx_port: usize,
    pub rx_port: usize,
    pub frame_size_mean: f64,
    pub flows: u64,
    /// Intended rate in frames/s (infinite for `Rate::Max`).
    pub intended_rate_pps: f64,
    pub intended_frames: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Achieved transmit rate: frames / send window.
    pub tx_rate_pps: f64,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicated: u64,
    pub late: u64,
    pub latency: LatencySummary,
    pub flow_results: Vec<FlowResult>,
    /// The receiver counted this stream's frames (false: a replay without stamping; its loss
    /// is not measured and `lost` is 0 by construction, never a measurement).
    pub loss_measured: bool,
    /// A pcap replay: what was sent of the capture.
    pub replay: Option<crate::traffic::replay::ReplayResult>,
}

impl StreamResult {
    /// Frames the receiver could count: all sent, less a replay's unstamped ones.
    pub fn counted_frames(&self) -> u64 {
        self.tx_frames - self.replay.as_ref().map_or(0, |r| r.frames_unstamped)
    }

    /// Lost / counted frames (0 when none was counted).
    pub fn loss_ratio(&self) -> f64 {
        let n = self.counted_frames();
        if n == 0 {
            0.0
        } else {
            self.lost as f64 / n as f64
        }
    }
}

/// Tester-side counters of one port.
#[derive(Debug, Clone, Default)]
pub struct PortResult {
    pub name: String,
    pub backend: String,
    pub notes: String,
    pub timestamp_source: String,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub tx_backpressure: u64,
    /// Frames the kernel refused or dropped after the port's queues handed them over (counted in
    /// `tx_frames`): AF_XDP descriptors it rejected, and frames a copy-mode driver dropped (veth:
    /// its peer's receive ring full), each a frame that never left.
    pub tx_errors: u64,
    /// Every frame the port's RX workers saw, signed or not.
    pub rx_frames: u64,
    pub rx_bytes: u64,
    /// Frames without a netrig signature.
    pub rx_foreign: u64,
    /// Frames of this trial's tag with a flow id the trial does not have.
    pub rx_unknown_flow: u64,
    pub rx_warmup: u64,
    /// Signed frames of an earlier trial of this process (late arrivals).
    pub rx_earlier_trial: u64,
    /// Signed frames of a trial this process is not running (another tester, or forged).
    pub rx_other_trial: u64,
    /// This trial's tag and flow, impossible contents (TX time in the future or before the trial,
    /// a sequence number not sent yet).
    pub rx_implausible: u64,
    /// Frames the tester itself dropped (ring full): never DUT loss.
    pub rx_ring_drops: u64,
    pub rx_overruns: u64,
    /// Times the link's carrier went down during the trial (0 when not watched).
    pub link_down_events: u64,
    /// The link was up at the start and at the end of the trial (true when not watched).
    pub link_up: bool,
    /// The link's state was read before and after the trial (false when the port has no link to
    /// watch or its state could not be read).
    pub link_watched: bool,
}

#[derive(Debug, Clone)]
pub struct TrialResult {
    pub streams: Vec<StreamResult>,
    pub ports: Vec<PortResult>,
    /// The trial's tag: the nonce in every frame's signature.
    pub trial_tag: u32,
    /// Intended duration of sending (duration stops) in seconds; for count/burst stops the
    /// actual send window.
    pub duration_s: f64,
    /// First to last frame sent, seconds.
    pub tx_window_s: f64,
    /// How long the trial waited for frames in flight after its last frame, seconds: its drain,
    /// or less when every frame it sent had arrived sooner (or it was stopped).
    pub drain_s: f64,
    pub valid: bool,
    pub invalid_reason: Option<String>,
    pub interrupted: bool,
    /// Latency over all streams.
    pub latency: LatencySummary,
    pub tx_cpus: Vec<usize>,
    pub rx_cpus: Vec<usize>,
    pub started_realtime_ns: u64,
    /// Longest a TX worker fell behind its schedule, ns.
    pub tx_max_lag_ns: u64,
    /// Catch-up pacing: largest catch-up burst a TX worker sent (frames at once beyond one batch).
    pub tx_max_catchup: u64,
    /// What the TX workers did with time they lost (see `crate::traffic::pacing`).
    pub pacing: Pacing,
    /// How much later than planned the last frame left (the largest over TX workers), ns: with
    /// smooth pacing, the time lost to stalls, by which the sending was stretched.
    pub tx_stretch_ns: u64,
    /// The stretch a paced trial was allowed (a share of its planned length).
    pub max_stretch_ratio: f64,
    /// How smoothly the load was offered: the most bunched TX worker's peak window, the
    /// inter-departure gaps of all.
    pub smoothness: Smoothness,
    /// Per-interval counts (trials with an interval length).
    pub intervals: Vec<IntervalResult>,
    /// Latency over time: windows of `timeline::WINDOW_NS` by transmit time since the epoch, from
    /// the first with a received frame to the last (duration trials up to
    /// `timeline::MAX_TIMELINE_NS`; empty otherwise).
    pub latency_timeline: Vec<LatencyWindow>,
    /// The trial epoch on the engine clock (`CLOCK_MONOTONIC` ns): signature timestamps, and so
    /// sequence gaps, are relative to it.
    pub epoch_ns: u64,
    /// When the measured run began (its first frame was due), `CLOCK_MONOTONIC` ns (0: never).
    pub run_start_ns: u64,
    /// Memory the flows took, measured: how much the process's resident set grew from before the
    /// workers allocated their per-flow state to the end of the drain (bytes; the process's other
    /// growth over the run is included, so small trials read a few hundred KiB).
    pub flow_memory_bytes: u64,
    /// Workers that do not run on the CPU they were placed on (`tx_cpus`, `rx_cpus`): the kernel
    /// refused the pin (see `crate::pin`); empty when every worker was pinned.
    pub pin_failures: Vec<PinFailure>,
}

/// Frames sent and received in one counting interval, both by the frame's transmit time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IntervalResult {
    /// Start since the run start, and length, seconds.
    pub start_s: f64,
    pub duration_s: f64,
    /// Index of the rate phase.
    pub phase: usize,
    pub tx_frames: u64,
    /// Frames sent in this interval that were received (not late).
    pub rx_frames: u64,
    /// Mean and highest latency of those frames, ns (0 when none was received).
    pub latency_mean_ns: f64,
    pub latency_max_ns: u64,
}

impl TrialResult {
    pub fn tx_frames(&self) -> u64 {
        self.streams.iter().map(|s| s.tx_frames).sum()
    }
    pub fn rx_frames(&self) -> u64 {
        self.streams.iter().map(|s| s.rx_frames).sum()
    }
    pub fn lost(&self) -> u64 {
        self.streams.iter().map(|s| s.lost).sum()
    }
    /// Lost / counted over all streams (0 when nothing was counted; a replay's unstamped frames
    /// are not counted).
    pub fn loss_ratio(&self) -> f64 {
        let sent: u64 = self.streams.iter().map(|s| s.counted_frames()).sum();
        if sent == 0 {
            0.0
        } else {
            self.lost() as f64 / sent as f64
        }
    }
    pub fn reordered(&self) -> u64 {
        self.streams.iter().map(|s| s.reordered).sum()
    }
    pub fn duplicated(&self) -> u64 {
        self.streams.iter().map(|s| s.duplicated).sum()
    }
    pub fn late(&self) -> u64 {
        self.streams.iter().map(|s| s.late).sum()
    }
    /// Intended frames/s of all streams; `None` when any stream is unbounded (`Rate::Max`).
    pub fn intended_rate_pps(&self) -> Option<f64> {
        self.streams.iter().map(|s| s.intended_rate_pps.is_finite().then_some(s.intended_rate_pps)).sum()
    }
    /// Achieved transmit rate of all streams, frames/s.
    pub fn tx_rate_pps(&self) -> f64 {
        self.streams.iter().map(|s| s.tx_rate_pps).sum()
    }
    /// Received frames / duration, frames/s.
    pub fn rx_rate_pps(&self) -> f64 {
        if self.duration_s > 0.0 {
            self.rx_frames() as f64 / self.duration_s
        } else {
            0.0
        }
    }
    /// Frames the tester's own receive rings dropped (not DUT loss).
    pub fn tester_rx_drops(&self) -> u64 {
        self.ports.iter().map(|p| p.rx_ring_drops).sum()
    }
    /// Frames without a netrig signature, all ports.
    pub fn foreign(&self) -> u64 {
        self.ports.iter().map(|p| p.rx_foreign).sum()
    }
    /// Signed frames of other trials (earlier trials' late frames and other testers'), all ports.
    pub fn stray(&self) -> u64 {
        self.ports.iter().map(|p| p.rx_earlier_trial + p.rx_other_trial).sum()
    }
    /// Frames with this trial's tag that cannot be its own (unknown flow, implausible), all ports.
    pub fn forged(&self) -> u64 {
        self.ports.iter().map(|p| p.rx_unknown_flow + p.rx_implausible).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::trial::DEFAULT_MAX_STRETCH_RATIO;

    fn stream(tx: u64, lost: u64, rate: f64) -> StreamResult {
        StreamResult {
            index: 0,
            name: "s".into(),
            tx_port: 0,
            rx_port: 1,
            frame_size_mean: 64.0,
            flows: 1,
            intended_rate_pps: rate,
            intended_frames: tx,
            tx_frames: tx,
            tx_bytes: tx * 64,
            tx_rate_pps: tx as f64,
            rx_frames: tx - lost,
            rx_bytes: (tx - lost) * 64,
            lost,
            reordered: 1,
            duplicated: 2,
            late: 3,
            latency: LatencySummary::default(),
            flow_results: Vec::new(),
            loss_measured: true,
            replay: None,
        }
    }

    #[test]
    fn result_derives_totals() {
        let mut r = TrialResult {
            streams: vec![stream(100, 3, 100.0), stream(100, 3, 100.0)],
            ports: vec![
                PortResult { rx_ring_drops: 5, rx_other_trial: 2, rx_foreign: 9, ..Default::default() },
                PortResult { rx_earlier_trial: 1, rx_unknown_flow: 3, rx_implausible: 4, ..Default::default() },
            ],
            trial_tag: 7,
            duration_s: 2.0,
            tx_window_s: 2.0,
            drain_s: 0.5,
            valid: true,
            invalid_reason: None,
            interrupted: false,
            latency: LatencySummary::default(),
            tx_cpus: vec![1],
            rx_cpus: vec![0],
            started_realtime_ns: 0,
            tx_max_lag_ns: 0,
            tx_max_catchup: 0,
            pacing: Pacing::Smooth,
            tx_stretch_ns: 0,
            max_stretch_ratio: DEFAULT_MAX_STRETCH_RATIO,
            smoothness: Smoothness::default(),
            intervals: Vec::new(),
            latency_timeline: Vec::new(),
            epoch_ns: 0,
            run_start_ns: 0,
            flow_memory_bytes: 0,
            pin_failures: Vec::new(),
        };
        assert_eq!((r.tx_frames(), r.rx_frames(), r.lost()), (200, 194, 6));
        assert!((r.loss_ratio() - 0.03).abs() < 1e-12);
        assert_eq!((r.reordered(), r.duplicated(), r.late(), r.tester_rx_drops()), (2, 4, 6, 5));
        assert_eq!((r.foreign(), r.stray(), r.forged()), (9, 3, 7));
        assert_eq!(r.intended_rate_pps(), Some(200.0));
        assert_eq!((r.tx_rate_pps(), r.rx_rate_pps()), (200.0, 97.0));
        r.streams[1].intended_rate_pps = f64::INFINITY;
        assert_eq!(r.intended_rate_pps(), None, "one unbounded stream makes the total unbounded");
    }
}
