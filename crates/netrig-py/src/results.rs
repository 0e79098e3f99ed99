//! Results: read-only views of the engine's result structs.
//!
//! Each class is declared once, by [`result_class!`], as one list of fields, each with the
//! expression that converts it from the engine's struct. The macro generates the frozen pyclass,
//! its getters, `From<&engine struct>`, `__repr__` and the `dict()` behind `to_dict()`; derived
//! values are methods of the engine's structs, exposed as extra getters.
use std::sync::Arc;

use netrig_engine::run::listen;
use netrig_engine::run::trial::{self, LiveSnapshot};
use netrig_engine::sys::ifinfo::IfInfo;
use netrig_engine::traffic::analyze;
use netrig_engine::traffic::pacing;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::IntoPyObjectExt;

/// A field's value, as a getter returns it and as `to_dict()` stores it.
pub trait Field {
    fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;
    fn dict_value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.get(py)
    }
}

macro_rules! scalar_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                self.clone().into_bound_py_any(py)
            }
        }
    )*};
}
scalar_field!(u32, u64, usize, f64, bool, String, Option<u64>, Option<f64>, Option<String>, Option<bool>);

/// Sequences: a tuple from the getter, a list in dicts.
impl<T: Field> Field for Arc<[T]> {
    fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let items = self.iter().map(|x| x.get(py)).collect::<PyResult<Vec<_>>>()?;
        Ok(PyTuple::new(py, items)?.into_any())
    }
    fn dict_value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let items = self.iter().map(|x| x.dict_value(py)).collect::<PyResult<Vec<_>>>()?;
        Ok(PyList::new(py, items)?.into_any())
    }
}

/// A frozen result class from one field list: `name: Type = conversion from the engine value`.
/// `derived` fields have getters but stay out of `dict()`; `methods` go into the class as is.
macro_rules! result_class {
    (
        $(#[$doc:meta])*
        class $name:ident($e:ident: &$src:ty) {
            $( $(#[$fdoc:meta])* $field:ident: $ty:ty = $conv:expr, )*
        }
        $(derived {
            $( $(#[$ddoc:meta])* $dfield:ident: $dty:ty = $dconv:expr, )*
        })?
        $(methods { $($methods:tt)* })?
    ) => {
        $(#[$doc])*
        #[pyclass(frozen, module = "netrig._native")]
        #[derive(Debug, Clone)]
        pub struct $name {
            $( $field: $ty, )*
            $($( $dfield: $dty, )*)?
        }

        impl From<&$src> for $name {
            fn from($e: &$src) -> Self {
                $name { $( $field: $conv, )* $($( $dfield: $dconv, )*)? }
            }
        }

        impl $name {
            /// Every (not derived) field by name, nested results as dicts.
            pub fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                let d = PyDict::new(py);
                $( d.set_item(stringify!($field), Field::dict_value(&self.$field, py)?)?; )*
                Ok(d)
            }
        }

        impl Field for $name {
            fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                Ok(Bound::new(py, self.clone())?.into_any())
            }
            fn dict_value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                Ok(self.dict(py)?.into_any())
            }
        }

        #[pymethods]
        impl $name {
            $(
                $(#[$fdoc])*
                #[getter]
                fn $field<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                    Field::get(&self.$field, py)
                }
            )*
            $($(
                $(#[$ddoc])*
                #[getter]
                fn $dfield<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                    Field::get(&self.$dfield, py)
                }
            )*)?

            fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                let fields: Vec<String> = vec![$(
                    format!("{}={}", stringify!($field), Field::get(&self.$field, py)?.repr()?),
                )*];
                Ok(format!("{}({})", stringify!($name), fields.join(", ")))
            }

            $($($methods)*)?
        }
    };
}

fn seq<S, T: for<'a> From<&'a S>>(items: &[S]) -> Arc<[T]> {
    items.iter().map(T::from).collect()
}

result_class! {
    /// A worker that does not run on the CPU it was placed on: the kernel refused to pin it (a CPU
    /// outside the process's cpuset, one taken offline, a sandbox that forbids it). It ran anyway,
    /// wherever the scheduler put it.
    class PinFailure(f: &netrig_engine::pin::PinFailure) {
        /// The worker's thread name (`netrig-tx0`, `netrig-rx0`, `netrig-listen0`, `nr-fwd-p0q0`, …).
        worker: String = f.worker.clone(),
        /// The CPU it was placed on.
        cpu: usize = f.cpu,
        /// Why it is not there (the kernel's answer).
        error: String = f.error.clone(),
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }

        fn __str__(&self) -> String {
            format!("{} not pinned to CPU {}: {}", self.worker, self.cpu, self.error)
        }
    }
}

result_class! {
    /// One-way latency of every received frame, and IPDV between consecutive frames of a flow (ns).
    class LatencySummary(l: &analyze::LatencySummary) {
        samples: u64 = l.samples,
        min_ns: u64 = l.min_ns,
        mean_ns: f64 = l.mean_ns,
        p50_ns: u64 = l.p50_ns,
        p90_ns: u64 = l.p90_ns,
        p99_ns: u64 = l.p99_ns,
        p999_ns: u64 = l.p999_ns,
        max_ns: u64 = l.max_ns,
        /// RFC 5481 PDV at the 99th percentile: p99 − min.
        pdv_ns: u64 = l.pdv_ns,
        /// Mean |IPDV| (RFC 5481) between consecutive frames of a flow.
        ipdv_mean_ns: f64 = l.ipdv_mean_ns,
        /// 99th percentile of |IPDV| (0 for flows without a histogram of their own).
        ipdv_p99_ns: u64 = l.ipdv_p99_ns,
        ipdv_max_ns: u64 = l.ipdv_max_ns,
        /// Differences the IPDV is over (pairs of consecutive frames of a flow): 0 when no flow
        /// received two frames, and then no IPDV was measured.
        ipdv_samples: u64 = l.ipdv_samples,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// A run of sequence numbers a flow did not receive, between two frames it did.
    class SeqGap(g: &analyze::SeqGap) {
        /// Sequence numbers missing between the two frames.
        missing: u64 = g.missing,
        /// Transmit time of the last frame received before the gap, ns since the trial epoch.
        before_ns: u64 = g.before_ns,
        /// Transmit time of the first frame received after it, ns since the trial epoch.
        after_ns: u64 = g.after_ns,
        /// `after_ns - before_ns`: the outage the gap stands for.
        duration_ns: u64 = g.duration_ns(),
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// Counts of one flow.
    class FlowResult(f: &trial::FlowResult) {
        flow_id: u32 = f.flow_id,
        frames_sent: u64 = f.tx_frames,
        frames_received: u64 = f.rx_frames,
        bytes_received: u64 = f.rx_bytes,
        frames_lost: u64 = f.lost,
        reordered: u64 = f.reordered,
        duplicated: u64 = f.duplicated,
        late: u64 = f.late,
        latency: LatencySummary = (&f.latency).into(),
        /// The longest gaps in the flow's received sequence (at most the trial's `gap_slots`), by start.
        gaps: Arc<[SeqGap]> = seq(&f.gaps),
        /// Transmit time of the highest sequence received, ns since the trial epoch (0: none).
        last_rx_tx_ns: u64 = f.last_rx_tx_ns,
        /// Sequence numbers sent after the highest one received (a gap that never closed).
        tail_missing: u64 = f.tail_missing,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// Counts of one stream.
    class StreamResult(s: &trial::StreamResult) {
        index: usize = s.index,
        name: String = s.name.clone(),
        tx_port: usize = s.tx_port,
        rx_port: usize = s.rx_port,
        frame_size_mean: f64 = s.frame_size_mean,
        flows: u64 = s.flows,
        /// Frames/s the stream asked for (`None` for `max`).
        intended_rate_pps: Option<f64> = s.intended_rate_pps.is_finite().then_some(s.intended_rate_pps),
        intended_frames: u64 = s.intended_frames,
        frames_sent: u64 = s.tx_frames,
        bytes_sent: u64 = s.tx_bytes,
        /// Achieved transmit rate, frames/s.
        tx_rate_pps: f64 = s.tx_rate_pps,
        frames_received: u64 = s.rx_frames,
        bytes_received: u64 = s.rx_bytes,
        frames_lost: u64 = s.lost,
        reordered: u64 = s.reordered,
        duplicated: u64 = s.duplicated,
        late: u64 = s.late,
        latency: LatencySummary = (&s.latency).into(),
        flow_results: Arc<[FlowResult]> = seq(&s.flow_results),
        /// The receiver counted this stream's frames (false: a replay without stamping; its
        /// `frames_lost` is 0 by construction, not measured).
        loss_measured: bool = s.loss_measured,
        /// A pcap replay: what was sent of the capture (`None` for a template stream).
        replay: Option<ReplayResult> = s.replay.as_ref().map(ReplayResult::from),
    }
    derived {
        /// Lost / counted (a replay's unstamped frames are not counted; 0 when none was).
        loss_ratio: f64 = s.loss_ratio(),
    }
    methods {
        #[pyo3(signature = (flows=true))]
        fn to_dict<'py>(&self, py: Python<'py>, flows: bool) -> PyResult<Bound<'py, PyDict>> {
            let d = self.dict(py)?;
            if !flows {
                d.del_item("flow_results")?;
            }
            Ok(d)
        }
    }
}

result_class! {
    /// What a pcap replay sent: passes through the capture, frames with and without the signature.
    class ReplayResult(r: &netrig_engine::traffic::replay::ReplayResult) {
        /// The capture file.
        file: String = r.file.clone(),
        /// Frames were stamped with the signature where they had room.
        stamped: bool = r.stamped,
        frames_per_pass: u64 = r.frames_per_pass,
        /// Bytes of one pass, frame sizes incl. FCS (short frames counted as 64).
        bytes_per_pass: u64 = r.bytes_per_pass,
        /// Frames sent / frames per pass.
        passes: f64 = r.passes,
        frames_stamped: u64 = r.frames_stamped,
        /// Frames sent as captured, without the signature (not counted by the receiver).
        frames_unstamped: u64 = r.frames_unstamped,
        /// Flows of a stamped replay (captured 5-tuples); 0 without stamping.
        flows: u64 = r.flows,
        /// Frames of the capture that already carried a netrig signature.
        signed_in_capture: u64 = r.signed_in_capture,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

impl Field for Option<ReplayResult> {
    fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Some(r) => r.get(py),
            None => Ok(py.None().into_bound(py)),
        }
    }
    fn dict_value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Some(r) => r.dict_value(py),
            None => Ok(py.None().into_bound(py)),
        }
    }
}

result_class! {
    /// Tester-side counters of one port (drops here are the tester's, never the DUT's).
    class PortResult(p: &trial::PortResult) {
        name: String = p.name.clone(),
        backend: String = p.backend.clone(),
        notes: String = p.notes.clone(),
        timestamp_source: String = p.timestamp_source.clone(),
        tx_frames: u64 = p.tx_frames,
        tx_bytes: u64 = p.tx_bytes,
        tx_backpressure: u64 = p.tx_backpressure,
        tx_errors: u64 = p.tx_errors,
        rx_frames: u64 = p.rx_frames,
        rx_bytes: u64 = p.rx_bytes,
        /// Frames without a netrig signature.
        rx_foreign: u64 = p.rx_foreign,
        /// Frames of this trial's tag with a flow id the trial does not have.
        rx_unknown_flow: u64 = p.rx_unknown_flow,
        rx_warmup: u64 = p.rx_warmup,
        /// Signed frames of an earlier trial of this process (late arrivals).
        rx_earlier_trial: u64 = p.rx_earlier_trial,
        /// Signed frames of a trial this process is not running (another tester, or forged).
        rx_other_trial: u64 = p.rx_other_trial,
        /// This trial's tag and flow with impossible contents (TX time in the future or before
        /// the trial, a sequence number not sent yet).
        rx_implausible: u64 = p.rx_implausible,
        rx_ring_drops: u64 = p.rx_ring_drops,
        rx_overruns: u64 = p.rx_overruns,
        /// Times the link's carrier went down during the trial.
        link_down_events: u64 = p.link_down_events,
        /// The link was up at the start and at the end of the trial.
        link_up: bool = p.link_up,
        /// The link's state was read before and after the trial.
        link_watched: bool = p.link_watched,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// One trial's counts (methodology §2); totals are over all streams.
    class TrialResult(r: &trial::TrialResult) {
        streams: Arc<[StreamResult]> = seq(&r.streams),
        ports: Arc<[PortResult]> = seq(&r.ports),
        /// The trial's tag: the nonce in every frame's signature.
        trial_tag: u32 = r.trial_tag,
        duration_s: f64 = r.duration_s,
        tx_window_s: f64 = r.tx_window_s,
        /// How long the trial waited for frames in flight after its last frame, s: its drain, or
        /// less when every frame it sent had arrived sooner (or it was stopped).
        drain_s: f64 = r.drain_s,
        valid: bool = r.valid,
        invalid_reason: Option<String> = r.invalid_reason.clone(),
        interrupted: bool = r.interrupted,
        latency: LatencySummary = (&r.latency).into(),
        tx_cpus: Arc<[usize]> = r.tx_cpus.iter().copied().collect(),
        rx_cpus: Arc<[usize]> = r.rx_cpus.iter().copied().collect(),
        started_realtime_ns: u64 = r.started_realtime_ns,
        /// Longest the tester fell behind its schedule, ns.
        tx_max_lag_ns: u64 = r.tx_max_lag_ns,
        /// Catch-up pacing: largest catch-up burst (frames at once beyond one batch).
        tx_max_catchup: u64 = r.tx_max_catchup,
        /// What the TX workers did with time they lost: `"smooth"` or `"catch-up"`.
        pacing: String = r.pacing.as_str().to_string(),
        /// How much later than planned the last frame left (smooth pacing: the stretch), ns.
        tx_stretch_ns: u64 = r.tx_stretch_ns,
        /// The stretch this trial was allowed, % of its planned length.
        max_stretch_pct: f64 = r.max_stretch_ratio * 100.0,
        /// How smoothly the load was offered.
        smoothness: Smoothness = (&r.smoothness).into(),
        /// Per-interval counts (trials with an interval length).
        intervals: Arc<[IntervalResult]> = seq(&r.intervals),
        /// The trial epoch, `CLOCK_MONOTONIC` ns (what `time.monotonic_ns()` reads): sequence gaps'
        /// transmit times are relative to it.
        epoch_ns: u64 = r.epoch_ns,
        /// When the measured run began, `CLOCK_MONOTONIC` ns (0: it never did).
        run_start_ns: u64 = r.run_start_ns,
        /// Memory the flows took, measured: the resident set's growth from before the workers
        /// allocated their per-flow state to the end of the drain, bytes.
        flow_memory_bytes: u64 = r.flow_memory_bytes,
        /// Workers that do not run on the CPU they were placed on (`tx_cpus`, `rx_cpus`): the
        /// kernel refused the pin. Empty when every worker was pinned.
        pin_failures: Arc<[PinFailure]> = seq(&r.pin_failures),
        // Totals over all streams (derived by the engine, stored with the result).
        frames_sent: u64 = r.tx_frames(),
        frames_received: u64 = r.rx_frames(),
        frames_lost: u64 = r.lost(),
        /// Lost / sent over all streams (0 when nothing was sent).
        loss_ratio: f64 = r.loss_ratio(),
        reordered: u64 = r.reordered(),
        duplicated: u64 = r.duplicated(),
        late: u64 = r.late(),
        /// Achieved transmit rate, frames/s, all streams.
        tx_rate_pps: f64 = r.tx_rate_pps(),
        /// Frames received / duration, frames/s.
        rx_rate_pps: f64 = r.rx_rate_pps(),
        /// Frames/s all streams asked for (`None` when any stream is unbounded).
        intended_rate_pps: Option<f64> = r.intended_rate_pps(),
        /// Frames the tester's own receive rings dropped (not DUT loss).
        tester_rx_drops: u64 = r.tester_rx_drops(),
        /// Frames without a netrig signature, all ports.
        frames_foreign: u64 = r.foreign(),
        /// Signed frames of other trials (earlier trials' late frames, other testers'), all ports.
        frames_stray: u64 = r.stray(),
        /// Frames with this trial's tag that cannot be its own (unknown flow, implausible).
        frames_forged: u64 = r.forged(),
    }
    derived {
        /// Every flow result of every stream.
        flows: Arc<[FlowResult]> = r.streams.iter().flat_map(|s| s.flow_results.iter().map(FlowResult::from)).collect(),
        /// The I/O backend of every port.
        io: Arc<[String]> = r.ports.iter().map(|p| p.backend.clone()).collect(),
        /// Latency over time: windows of `LATENCY_WINDOW_NS` (8.4 ms) by transmit time since the
        /// epoch, from the first with a received frame to the last (duration trials up to 130 s;
        /// empty otherwise). Kept out of `to_dict()`: a record stores it compactly.
        latency_timeline: Arc<[LatencyWindow]> = seq(&r.latency_timeline),
    }
    methods {
        /// Every field and every derived total, as plain JSON-able values.
        #[pyo3(signature = (flows=true))]
        fn to_dict<'py>(&self, py: Python<'py>, flows: bool) -> PyResult<Bound<'py, PyDict>> {
            let d = self.dict(py)?;
            if !flows {
                if let Some(streams) = d.get_item("streams")? {
                    for s in streams.try_iter()? {
                        s?.downcast::<PyDict>()?.del_item("flow_results")?;
                    }
                }
            }
            Ok(d)
        }
    }
}

result_class! {
    /// How smoothly a trial's load was offered, measured in the TX workers per batch.
    class Smoothness(s: &pacing::Smoothness) {
        /// Most frames handed to the queue in any 1 ms window (the most bunched TX worker).
        peak_frames: u64 = s.peak_frames,
        /// Frames the intended rate puts in 1 ms (0 when unpaced).
        intended_frames: f64 = s.intended_frames,
        /// `peak_frames / intended_frames` (0 when unpaced).
        peak_ratio: f64 = s.peak_ratio,
        /// Inter-departure gap per frame: median, 99th percentile, and the longest, ns.
        gap_p50_ns: u64 = s.gap_p50_ns,
        gap_p99_ns: u64 = s.gap_p99_ns,
        gap_max_ns: u64 = s.gap_max_ns,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// Frames sent and received in one counting interval, both by the frame's transmit time.
    class IntervalResult(i: &trial::IntervalResult) {
        /// Start since the run start, seconds.
        start_s: f64 = i.start_s,
        duration_s: f64 = i.duration_s,
        /// Index of the rate phase.
        phase: usize = i.phase,
        frames_sent: u64 = i.tx_frames,
        /// Frames sent in this interval that were received (not late).
        frames_received: u64 = i.rx_frames,
        /// Mean and highest latency of those frames, ns (0 when none was received).
        latency_mean_ns: f64 = i.latency_mean_ns,
        latency_max_ns: u64 = i.latency_max_ns,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// One window of a trial's latency over time (`netrig_engine::traffic::timeline`).
    class LatencyWindow(w: &netrig_engine::traffic::timeline::LatencyWindow) {
        /// Start since the trial epoch, ns.
        start_ns: u64 = w.start_ns,
        /// Frames sent in the window that were received and counted (not late).
        frames: u64 = w.frames,
        /// Median and 99th percentile, within 12 % (quarter-octave buckets); 0 without frames.
        p50_ns: u64 = w.p50_ns,
        p99_ns: u64 = w.p99_ns,
        /// Exact.
        max_ns: u64 = w.max_ns,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// Live counters of a running trial.
    class Snapshot(s: &LiveSnapshot) {
        phase: String = s.phase.as_str().to_string(),
        elapsed_s: f64 = s.elapsed_s,
        tx_frames: u64 = s.tx_frames,
        rx_frames: u64 = s.rx_frames,
        /// The running trial's tag (0 before the trial claimed one).
        trial_tag: u32 = s.trial_tag,
    }
}

result_class! {
    /// Facts about one interface.
    class InterfaceInfo(i: &IfInfo) {
        name: String = i.name.clone(),
        ifindex: u32 = i.ifindex,
        mtu: usize = i.mtu,
        mac: String = i.mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"),
        /// Link speed in bit/s (`None` when the interface reports none, e.g. veth).
        speed_bps: Option<u64> = i.speed_bps,
        driver: String = i.driver.clone(),
        rx_queues: usize = i.rx_queues,
        tx_queues: usize = i.tx_queues,
        oper_up: bool = i.oper_up,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// Whether an I/O backend opens on an interface (for transmit), and its notes or error.
    class IoProbe(p: &(&'static str, std::result::Result<String, String>)) {
        backend: String = p.0.to_string(),
        ok: bool = p.1.is_ok(),
        detail: String = p.1.clone().unwrap_or_else(|e| e),
    }
}

result_class! {
    /// One flow of signed frames a listen heard: a sender's trial tag and flow id.
    class HeardFlow(f: &listen::HeardFlow) {
        trial: u32 = f.trial,
        flow_id: u32 = f.flow_id,
        /// Unique frames received.
        frames: u64 = f.frames,
        bytes: u64 = f.bytes,
        duplicated: u64 = f.duplicated,
        reordered: u64 = f.reordered,
        /// Lowest and highest sequence number heard.
        first_seq: u64 = f.first_seq,
        last_seq: u64 = f.last_seq,
        /// Sequence numbers between the first and the last heard that never arrived.
        missing: u64 = f.missing,
        /// Warm-up frames (counted apart).
        warmup: u64 = f.warmup,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// Frames without a netrig signature of one kind.
    class ForeignKind(k: &listen::ForeignKind) {
        ethertype: u32 = u32::from(k.ethertype),
        /// IP protocol (IPv4) or next header (IPv6); `None` when not IP.
        ip_proto: Option<u64> = k.ip_proto.map(u64::from),
        frames: u64 = k.frames,
        bytes: u64 = k.bytes,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// One port of a listen.
    class ListenPort(p: &listen::ListenPort) {
        name: String = p.name.clone(),
        backend: String = p.backend.clone(),
        frames: u64 = p.frames,
        bytes: u64 = p.bytes,
        /// Frames lost in the tester's own ring (never the sender's or the network's loss).
        ring_drops: u64 = p.ring_drops,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// What a listen (receive only) heard.
    class ListenResult(r: &listen::ListenResult) {
        duration_s: f64 = r.duration_ns as f64 / 1e9,
        started_realtime_ns: u64 = r.started_realtime_ns,
        interrupted: bool = r.interrupted,
        ports: Arc<[ListenPort]> = seq(&r.ports),
        flows: Arc<[HeardFlow]> = seq(&r.flows),
        foreign: Arc<[ForeignKind]> = seq(&r.foreign),
        /// Signed frames of flows beyond the number a listen tracks.
        untracked: u64 = r.untracked,
        rx_cpus: Arc<[usize]> = r.cpus.iter().copied().collect(),
        /// A receive error that stopped a worker early, if any.
        error: Option<String> = r.error.clone(),
        /// Workers that do not run on the CPU they were placed on (`rx_cpus`): the kernel refused
        /// the pin. Empty when every worker was pinned.
        pin_failures: Arc<[PinFailure]> = seq(&r.pin_failures),
    }
    derived {
        frames: u64 = r.frames(),
        signed_frames: u64 = r.signed_frames(),
        foreign_frames: u64 = r.foreign_frames(),
        missing: u64 = r.missing(),
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            let d = self.dict(py)?;
            d.set_item("frames", self.frames)?;
            d.set_item("signed_frames", self.signed_frames)?;
            d.set_item("foreign_frames", self.foreign_frames)?;
            d.set_item("missing", self.missing)?;
            Ok(d)
        }
    }
}

fn mac_text(m: &[u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

result_class! {
    /// Counters of one port and queue of a running forwarder (cumulative since it started).
    class ForwardQueueStats(s: &netrig_engine::run::forward::ForwardQueueStats) {
        /// Index of the port in the forwarder's port list.
        port: usize = s.port,
        ifname: String = s.ifname.clone(),
        queue: usize = s.queue,
        /// CPU the worker receiving on this queue is pinned to (`None`: pinning failed).
        cpu: Option<u64> = s.cpu.map(|c| c as u64),
        rx_frames: u64 = s.rx_frames,
        rx_bytes: u64 = s.rx_bytes,
        tx_frames: u64 = s.tx_frames,
        tx_bytes: u64 = s.tx_bytes,
        /// Frames the forwarder dropped on the way out of this queue (egress queue full, or too large).
        tx_drops: u64 = s.tx_drops,
        /// Frames the backend lost on this queue before the worker saw them (ring full).
        rx_ring_drops: u64 = s.rx_ring_drops,
        /// Frames the kernel rejected on transmit.
        tx_errors: u64 = s.tx_errors,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// One port of a forwarder, as opened.
    class ForwardPortInfo(p: &netrig_engine::run::forward::ForwardPort) {
        ifname: String = p.ifname.clone(),
        /// `af_xdp`, `af_packet`, `socket`, or `xdp` (forwarded in the kernel).
        backend: String = p.backend.clone(),
        queues: usize = p.queues,
        mac: String = mac_text(&p.mac),
        zero_copy: bool = p.zero_copy,
        max_frame_len: usize = p.max_frame_len,
        /// What was probed and chosen (XDP mode, copy or zero-copy, rings).
        notes: String = p.notes.clone(),
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// Frames and bytes (with FCS) a capture saw of one sender's trial tag.
    class CaptureTag(t: &netrig_engine::run::capture::TagCount) {
        /// The trial tag (its low 23 bits, as carried in the signature).
        tag: u32 = t.tag,
        frames: u64 = t.frames,
        bytes: u64 = t.bytes,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// A capture's counters at one moment (cumulative since it started).
    class CaptureStats(s: &netrig_engine::run::capture::CaptureStats) {
        /// Every frame captured, and its bytes (with FCS).
        frames: u64 = s.counts.frames,
        bytes: u64 = s.counts.bytes,
        /// Signed measurement frames per sender's trial tag.
        tags: Arc<[CaptureTag]> = seq(&s.counts.tags),
        /// Signed warm-up frames.
        warmup: u64 = s.counts.warmup,
        /// Frames without a netrig signature.
        foreign: u64 = s.counts.foreign,
        /// The method's own drop counter (`Capture.drops_source`).
        drops: u64 = s.drops,
        /// `threads`: frames dropped because the hand-over queue was full.
        queue_drops: u64 = s.queue_drops,
        /// The capture confirmed the counters after finding its source empty.
        settled: bool = s.settled,
        elapsed_s: f64 = s.elapsed_s,
        /// Workers that do not run on the capture's CPU: the kernel refused the pin. Empty when
        /// pinned, or not asked to.
        pin_failures: Arc<[PinFailure]> = seq(&s.pin_failures),
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// The wire into a DUT interface on a test bed: its counters since it was attached.
    class WireCounts(w: &netrig_engine::sys::wire::WireCounts) {
        /// Frames that arrived at the DUT's interface.
        arrived: u64 = w.arrived,
        /// Frames the DUT's CPU took off its receive ring.
        taken: u64 = w.taken,
        /// Frames the wire could not steer to a DUT CPU (processed where they arrived).
        unsteered: u64 = w.unsteered,
    }
    derived {
        /// Frames the DUT's receive ring dropped (exact once the ring has drained).
        dropped: u64 = w.dropped(),
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// One generator flow's counts now, its current start's (engine-clock times in ns; 0: none).
    class GenFlowStats(s: &netrig_engine::run::generator::FlowStats) {
        /// `stopped`, `running`, `paused` or `done` (sent every frame of its duration).
        state: String = netrig_engine::run::generator::FlowState::from(s.state).as_str().to_string(),
        tx_frames: u64 = s.tx_frames,
        tx_bytes: u64 = s.tx_bytes,
        tx_first_ns: u64 = s.tx_first_ns,
        tx_last_ns: u64 = s.tx_last_ns,
        /// Of `tx_frames`, those sent without room for the signature: counted per port, never
        /// received per flow.
        tx_untracked: u64 = s.tx_untracked,
        /// Every arrival of the current start, duplicates included, and its bytes.
        rx_frames: u64 = s.rx_frames,
        rx_bytes: u64 = s.rx_bytes,
        /// Of `rx_frames`: sequences that had arrived before, and sequences below the highest
        /// that had (each receive queue's sequence window, as a trial's).
        rx_duplicated: u64 = s.rx_duplicated,
        rx_reordered: u64 = s.rx_reordered,
        rx_first_ns: u64 = s.rx_first_ns,
        rx_last_ns: u64 = s.rx_last_ns,
        /// Latency of the unique received frames, ns (per the flow's latency mode).
        latency_min_ns: u64 = s.latency_min_ns,
        latency_max_ns: u64 = s.latency_max_ns,
        latency_sum_ns: u64 = s.latency_sum_ns,
        latency_frames: u64 = s.latency_frames,
        /// |IPDV| (RFC 5481) between consecutive latencies as each receive queue saw them: sum,
        /// number and maximum, ns (two hosts' clock offset cancels out of it).
        ipdv_sum_ns: u64 = s.ipdv_sum_ns,
        ipdv_samples: u64 = s.ipdv_samples,
        ipdv_max_ns: u64 = s.ipdv_max_ns,
    }
}

result_class! {
    /// One generator port's counts since the generator was made.
    class GenPortStats(s: &netrig_engine::run::generator::PortStats) {
        tx_frames: u64 = s.tx_frames,
        tx_bytes: u64 = s.tx_bytes,
        rx_frames: u64 = s.rx_frames,
        rx_bytes: u64 = s.rx_bytes,
        /// Frames without a signature at their end.
        rx_foreign: u64 = s.rx_foreign,
        /// Signed frames of no current start of this generator's flows.
        rx_stale: u64 = s.rx_stale,
        /// Frames the tester's own receive ring dropped.
        rx_ring_drops: u64 = s.rx_ring_drops,
        /// Frames of a flow this generator sends that it cannot have sent (forged).
        rx_forged: u64 = s.rx_forged,
        /// Starts of flows sent elsewhere seen (their frames are not judged for forgery).
        rx_unjudged: u64 = s.rx_unjudged,
        /// The link is up (None: no link to read).
        link_up: Option<bool> = s.link_up,
        capturing: bool = s.capturing,
    }
}

result_class! {
    /// How a generator port's TX workers kept their schedule since its flows last started from idle.
    class GenTxPacing(p: &netrig_engine::run::generator::TxPacing) {
        /// Frames sent since then (0: the rest means nothing).
        frames: u64 = p.frames,
        /// The most any flow's schedule shifted (time smooth pacing gave up), ns.
        stretch_ns: u64 = p.stretch_ns,
        /// The longest a frame waited after it fell due, ns (up to 50 µs by design when busy).
        max_lag_ns: u64 = p.max_lag_ns,
        /// The peak 1-ms window against the running flows' rates, and the inter-departure gaps.
        smoothness: Smoothness = (&p.smoothness).into(),
    }
}

result_class! {
    /// One stall episode the kernel saw (`netrig_engine::stalls`).
    class StallEpisode(e: &netrig_engine::stalls::RawEpisode) {
        /// "cpu": the CPU did not run (its timer tick came late: the host stopped the vCPU, unseen by
        /// the guest's scheduler); "late": a busy CPU took a timer's interrupt late (the same, bounded
        /// exactly); "task": a watched task was ready to run and did not (the guest ran another task
        /// on its CPU).
        kind: String = match e.kind {
            netrig_engine::stalls::StallKind::Cpu => "cpu".to_string(),
            netrig_engine::stalls::StallKind::Late => "late".to_string(),
            netrig_engine::stalls::StallKind::Task => "task".to_string(),
        },
        /// "cpu": the last tick before the gap; "late": when the timer was due; "task": when the task
        /// began waiting (CLOCK_MONOTONIC ns).
        start_ns: u64 = e.start_ns,
        /// "cpu": the gap between two ticks; "late": how late the timer was taken; "task": how long
        /// the task waited, ns.
        len_ns: u64 = e.len_ns,
        cpu: u32 = e.cpu,
        /// "task": the watched task's id; 0 for "cpu".
        pid: u32 = e.pid,
        /// "task": the task that held the CPU before the watched one ran again; "" for "cpu".
        by: String = e.by.clone(),
        /// "task": that task's thread id (0 for "cpu").
        by_pid: u32 = e.by_pid,
        /// "task": that task was a thread of this process (netrig's own) when the episode was read.
        by_self: bool = e.by_self,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}

result_class! {
    /// The watched wires' counts in one time slot (`netrig_engine::stalls::WIRE_SLOT_NS`, 0.52 ms).
    class WireSlot(w: &netrig_engine::stalls::WireSlot) {
        /// The slot's start, CLOCK_MONOTONIC ns.
        start_ns: u64 = w.start_ns,
        /// Frames that arrived at a DUT receive ring.
        arrived: u64 = w.arrived,
        /// Frames a full ring dropped.
        dropped: u64 = w.dropped,
        /// Frames the DUT's CPUs took off their rings.
        taken: u64 = w.taken,
    }
    methods {
        fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            self.dict(py)
        }
    }
}
