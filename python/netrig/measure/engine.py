"""The real measurer: runs ``netrig.run_trial`` between two tester ports.

* Learning frames (RFC 2544 §23): before the first trial of each frame size (and after a DUT
  reset), a short low-rate trial primes ARP/neighbour and switch tables; its counts are discarded.
* Validity: a trial whose achieved tx rate is more than ``tx_tolerance_pct`` below the intended
  rate, or that the engine marks invalid (the tester's own receiver dropped frames, a tester link
  went down, another trial's frames arrived, a flow received sequence numbers it never sent…), is
  invalid — a tester limit, not DUT loss. Frames that are not the trial's own are counted apart
  (``foreign``, ``stray``, ``forged``), never as received.
* Tester stalls: a VM or host can deschedule the sender for milliseconds; the engine then sends its
  backlog at up to twice the rate and records the longest delay (``tx_max_lag_ns``). A trial that
  lost frames while the delay exceeded ``stall_threshold_ms`` is repeated, up to ``stall_retries``
  times, because the catch-up burst may have caused the loss (a policer or a short buffer drops it);
  the repeated attempts are kept in the final trial's ``raw["stalled_attempts"]``. Loss-free trials
  are never repeated: a stall that lost nothing changed nothing.
* Bursts (back-to-back) are approximated by a trial of ``burst / rate`` seconds at the burst rate.
* Multi-phase trials (system recovery, iperf) run consecutive trials of one sampling interval
  each (drain 0 between them, the configured drain after the last), so every interval has its own
  counts; frames still in flight when an interval's trial ends are counted by it if they reach the
  tester within the engine's final 10 ms receive pass; later ones arrive during the next interval's
  trial as an earlier trial's frames (the engine never counts them as its own) and are credited to
  that interval, as late frames.

The engine's result is typed (``netrig._native.TrialResult``); it is converted here, field by
field, into the seam's :class:`~netrig.measure.seam.TrialCounts`, and kept whole in ``raw["engine"]``.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from netrig import _native
from netrig.measure.seam import Interval, LatencySummary, Load, Phase, TrialCounts, TrialMonitor
from netrig.model import FrameSize, defaults
from netrig.trial import Port, Stream, run_trial

#: Learning trial: frames/s and seconds, then this much drain (RFC 2544 §23).
LEARNING_RATE_PPS = 1000.0
LEARNING_DURATION_S = 0.1
LEARNING_DRAIN_S = 0.2


def latency_summary(lat: _native.LatencySummary) -> LatencySummary | None:
    """The seam's latency summary of an engine latency summary (``None`` when nothing was received)."""
    if lat.samples == 0:
        return None
    return LatencySummary(min_ns=lat.min_ns, mean_ns=lat.mean_ns, p50_ns=lat.p50_ns, p90_ns=lat.p90_ns,
                          p99_ns=lat.p99_ns, p999_ns=lat.p999_ns, max_ns=lat.max_ns, pdv_ns=lat.pdv_ns,
                          ipdv_ns=lat.ipdv_mean_ns, ipdv_p99_ns=lat.ipdv_p99_ns, ipdv_max_ns=lat.ipdv_max_ns)


class EngineMeasurer:
    """A :class:`~netrig.measure.seam.Measurer` on real ports.

    ``stream_template`` holds the addressing every stream uses (``src_mac``, ``dst_mac``,
    ``src_ip``, ``dst_ip``: a test bed's ``stream_defaults()``)."""

    def __init__(self, tx_port: Port, rx_port: Port, stream_template: dict, *, drain_s: float = defaults.DRAIN_S,
                 warmup_s: float = 0.0, learning_frames: bool = True,
                 tx_tolerance_pct: float = defaults.TX_TOLERANCE_PCT, flows: int = 1,
                 monitor_factory: Callable[[], TrialMonitor] | None = None,
                 stall_threshold_ms: float = 5.0, stall_retries: int = 2):
        self.tx, self.rx = tx_port, rx_port
        self.template = dict(stream_template)
        self.drain_s, self.warmup_s = drain_s, warmup_s
        self.learning_frames = learning_frames
        self.tolerance = tx_tolerance_pct / 100
        self.flows = flows
        self.monitor_factory = monitor_factory
        self.stall_ns = int(stall_threshold_ms * 1e6)
        self.stall_retries = stall_retries
        self._learned: set = set()

    # ---------------------------------------------------------------- the engine seam
    def _run(self, frame: FrameSize, rate_pps: float, duration_s: float, drain_s: float,
             progress: Callable[[_native.Snapshot], None] | None = None) -> _native.TrialResult:
        stream = Stream(frame_size=frame, rate_pps=rate_pps, flows=self.flows, **self.template)
        return run_trial(self.tx, self.rx, [stream], duration_s=duration_s, drain_s=drain_s, warmup_s=self.warmup_s,
                         progress=progress)

    def _learn(self, frame: FrameSize) -> None:
        if not self.learning_frames or frame.label in self._learned:
            return
        self._run(frame, LEARNING_RATE_PPS, LEARNING_DURATION_S, LEARNING_DRAIN_S)
        self._learned.add(frame.label)

    def _counts(self, res: _native.TrialResult, intended_pps: float, extra_raw: dict | None = None) -> TrialCounts:
        offered = res.tx_rate_pps
        valid, reason = res.valid, res.invalid_reason
        if valid and offered < intended_pps * (1 - self.tolerance):
            valid = False
            reason = (f"tester sent {offered:.0f} fps, {100 * offered / intended_pps:.1f}% of the intended "
                      f"{intended_pps:.0f} fps")
        if valid and res.tester_rx_drops:
            valid, reason = False, f"the tester's receiver dropped {res.tester_rx_drops} frames"
        return TrialCounts(
            offered_pps=offered, frames_sent=res.frames_sent, frames_received=res.frames_received,
            duplicated=res.duplicated, reordered=res.reordered, late=res.late, latency=latency_summary(res.latency),
            valid=valid, invalid_reason=reason, foreign=res.frames_foreign, stray=res.frames_stray,
            forged=res.frames_forged, raw={"engine": res.to_dict(), **(extra_raw or {})},
        )

    # ---------------------------------------------------------------- the measurer seam
    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        self._learn(load.frame_size)
        stalled: list[dict] = []
        while True:
            counts, lag_ns = self._measure_once(load, duration_s)
            if not (counts.valid and counts.frames_lost > 0 and lag_ns > self.stall_ns) \
                    or len(stalled) >= self.stall_retries:
                break
            stalled.append({"tx_max_lag_ns": lag_ns, "frames_sent": counts.frames_sent,
                            "frames_received": counts.frames_received, "offered_pps": counts.offered_pps})
        if not stalled:
            return counts
        return TrialCounts(**{**counts.__dict__, "raw": {**counts.raw, "stalled_attempts": stalled}})

    def _measure_once(self, load: Load, duration_s: float) -> tuple[TrialCounts, int]:
        monitor = self.monitor_factory() if self.monitor_factory else None
        extra: dict = {}
        if monitor is not None:
            monitor.start()
        try:
            if monitor is not None:
                monitor.mark("trial-start")
            res = self._run(load.frame_size, load.rate_pps, duration_s, self.drain_s)
            if monitor is not None:
                monitor.mark("trial-stop")
        finally:
            if monitor is not None:
                extra["monitor"] = monitor.stop().to_dict()
        return self._counts(res, load.rate_pps, extra), res.tx_max_lag_ns

    def measure_phases(self, frame_size: FrameSize, phases: Sequence[Phase], interval_s: float,
                       tag: str = "") -> TrialCounts:
        self._learn(frame_size)
        intervals: list[Interval] = []
        valid, reason, t0 = True, None, 0.0
        raws = []
        for pi, ph in enumerate(phases):
            n = max(1, int(round(ph.duration_s / interval_s)))
            for k in range(n):
                dur = min(interval_s, ph.duration_s - k * interval_s)
                last = pi == len(phases) - 1 and k == n - 1
                res = self._run(frame_size, ph.rate_pps, dur, self.drain_s if last else 0.0)
                c = self._counts(res, ph.rate_pps)
                if not c.valid:
                    valid, reason = False, c.invalid_reason
                carried = sum(p.rx_earlier_trial for p in res.ports)  # the previous interval's, in flight
                intervals.append(Interval(t0 + k * interval_s, dur, pi, c.frames_sent,
                                          c.frames_received + c.late + carried))
                raws.append({"frames_sent": c.frames_sent, "frames_received": c.frames_received, "late": c.late})
            t0 += ph.duration_s
        sent = sum(i.frames_sent for i in intervals)
        recv = sum(i.frames_received for i in intervals)
        return TrialCounts(offered_pps=sent / max(t0, 1e-9), frames_sent=sent, frames_received=min(sent, recv),
                           valid=valid, invalid_reason=reason, intervals=tuple(intervals),
                           raw={"intervals": raws, "method": "consecutive per-interval trials"})

    def measure_reset(self, load: Load, duration_s: float, reset: Callable[[], None],
                      reset_after_s: float) -> TrialCounts:
        self._learn(load.frame_size)
        samples: list[tuple[float, int]] = []
        t_start = time.monotonic()
        error: list[BaseException] = []

        def progress(snap: _native.Snapshot) -> None:
            samples.append((time.monotonic() - t_start, snap.rx_frames))

        def do_reset() -> None:
            time.sleep(reset_after_s)
            try:
                reset()
            except BaseException as e:  # reported after the trial
                error.append(e)

        th = threading.Thread(target=do_reset, name="netrig-reset", daemon=True)
        th.start()
        res = self._run(load.frame_size, load.rate_pps, duration_s, self.drain_s, progress=progress)
        th.join(timeout=duration_s + 60)
        if error:
            raise error[0]
        c = self._counts(res, load.rate_pps)
        gap = None
        for (ta, ra), (tb, rb) in zip(samples, samples[1:]):
            if rb == ra and ta >= reset_after_s - 0.5:
                gap = (gap or 0.0) + (tb - ta)
        rt = c.frames_lost / c.offered_pps if c.offered_pps else None
        self._learned.discard(load.frame_size.label)
        return TrialCounts(**{**c.__dict__, "reset_time_s": rt,
                              "raw": {**c.raw, "rx_stall_s": gap, "progress_samples": len(samples)}})
