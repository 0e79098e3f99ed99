"""The real measurer: runs ``netrig.run_trial`` between two test-bed ports.

The engine API (``netrig.Port``, ``Stream``, ``run_trial``) and ``netrig.testbed`` are imported
lazily, so the methodology and its tests work without them.

* Learning frames (RFC 2544 §23): before the first trial of each frame size (and after a DUT
  reset), a short low-rate trial primes ARP/neighbour and switch tables; its counts are discarded.
* Validity: a trial whose achieved tx rate is more than ``tx_tolerance_pct`` below the intended
  rate, or that the engine marks invalid, is invalid — a tester limit, not DUT loss.
* Tester stalls: a VM or host can deschedule the sender for milliseconds; the engine then sends its
  backlog at up to twice the rate and records the longest delay (``tx_max_lag_ns``). A trial that
  lost frames while the delay exceeded ``stall_threshold_ms`` is repeated, up to ``stall_retries``
  times, because the catch-up burst may have caused the loss (a policer or a short buffer drops it);
  the repeated attempts are kept in the final trial's ``raw["stalled_attempts"]``. Loss-free trials
  are never repeated: a stall that lost nothing changed nothing.
* Bursts (back-to-back) are approximated by a trial of ``burst / rate`` seconds at the burst rate.
* Multi-phase trials (system recovery, iperf) run consecutive trials of one sampling interval
  each (drain 0 between them, the configured drain after the last), so every interval has its own
  counts; frames in flight across an interval border are counted in the later interval as late.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable, Iterator, Sequence

from netrig.errors import CapabilityError, EngineError
from netrig.methodology.frames import FrameSize
from netrig.methodology.measurer import Interval, LatencySummary, Load, Phase, TrialCounts


def _get(obj, name, default=None):
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _latency(res) -> LatencySummary | None:
    lat = _get(res, "latency")
    if lat is None:
        return None
    vals = {k: _get(lat, k) for k in LatencySummary.__dataclass_fields__}
    if all(v is None for v in vals.values()):
        return None
    return LatencySummary(**vals)


class EngineMeasurer:
    """A :class:`~netrig.methodology.measurer.Measurer` on real ports (``netrig.Port`` objects)."""

    def __init__(self, tx_port: Any, rx_port: Any, stream_template: dict, *, drain_s: float = 2.0,
                 warmup_s: float = 0.0, learning_frames: bool = True, tx_tolerance_pct: float = 2.0,
                 flows: int = 1, monitor_factory: Callable[[], Any] | None = None,
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

    def _api(self):
        try:
            from netrig import Stream, run_trial  # type: ignore[attr-defined]
        except ImportError as e:
            raise CapabilityError(f"the traffic engine is not available in this build ({e})") from None
        return Stream, run_trial

    def _stream(self, frame: FrameSize, rate_pps: float):
        Stream, _ = self._api()
        return Stream(frame_size=frame.engine_spec, rate_pps=rate_pps, flows=self.flows, **self.template)

    def _run(self, frame: FrameSize, rate_pps: float, duration_s: float, drain_s: float, progress=None):
        _, run_trial = self._api()
        return run_trial(tx=self.tx, rx=self.rx, streams=[self._stream(frame, rate_pps)], duration_s=duration_s,
                         drain_s=drain_s, warmup_s=self.warmup_s, progress=progress)

    def _learn(self, frame: FrameSize) -> None:
        if not self.learning_frames or frame.label in self._learned:
            return
        self._run(frame, 1000.0, 0.1, 0.2)
        self._learned.add(frame.label)

    def _counts(self, res, intended_pps: float, extra_raw: dict | None = None) -> TrialCounts:
        offered = float(_get(res, "tx_rate_pps") or 0.0)
        valid = bool(_get(res, "valid", True))
        reason = _get(res, "invalid_reason")
        if valid and offered < intended_pps * (1 - self.tolerance):
            valid = False
            reason = (f"tester sent {offered:.0f} fps, {100 * offered / intended_pps:.1f}% of the intended "
                      f"{intended_pps:.0f} fps")
        rx_drops = _get(res, "tester_rx_drops") or 0
        if valid and rx_drops:
            valid, reason = False, f"the tester's receiver dropped {rx_drops} frames"
        raw = {}
        to_dict = getattr(res, "to_dict", None)
        if callable(to_dict):
            raw["engine"] = to_dict()
        if extra_raw:
            raw.update(extra_raw)
        return TrialCounts(
            offered_pps=offered, frames_sent=int(_get(res, "frames_sent") or 0),
            frames_received=int(_get(res, "frames_received") or 0), duplicated=int(_get(res, "duplicated") or 0),
            reordered=int(_get(res, "reordered") or 0), late=int(_get(res, "late") or 0), latency=_latency(res),
            valid=valid, invalid_reason=reason, raw=raw,
        )

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
            if monitor is not None and hasattr(monitor, "mark"):
                monitor.mark("trial-start")
            res = self._run(load.frame_size, load.rate_pps, duration_s, self.drain_s)
            if monitor is not None and hasattr(monitor, "mark"):
                monitor.mark("trial-stop")
        finally:
            if monitor is not None:
                stop = getattr(monitor, "stop", None)
                out = stop() if callable(stop) else None
                to_dict = getattr(out if out is not None else monitor, "to_dict", None)
                extra["monitor"] = to_dict() if callable(to_dict) else None
        return self._counts(res, load.rate_pps, extra), int(_get(res, "tx_max_lag_ns") or 0)

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
                intervals.append(Interval(t0 + k * interval_s, dur, pi, c.frames_sent, c.frames_received + c.late))
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

        def progress(info) -> None:
            rx = _get(info, "frames_received", _get(info, "rx_frames"))
            if rx is not None:
                samples.append((time.monotonic() - t_start, int(rx)))

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


def _port_speed_bps(ifname: str, netns: str | None) -> float | None:
    """Link speed from sysfs (inside the port's namespace); None when unknown (veth)."""
    def read() -> float | None:
        try:
            with open(f"/sys/class/net/{ifname}/speed") as f:
                v = int(f.read().strip())
            return v * 1e6 if v > 0 else None
        except (OSError, ValueError):
            return None

    if netns is None:
        return read()
    try:
        from netrig.testbed.nsthread import run_in_netns

        return run_in_netns(netns, read, sysfs=True)
    except Exception:
        return None


@contextlib.contextmanager
def engine_session(config, role: str) -> Iterator[Any]:
    """Build the test bed (the DUT's, or ``selftest.testbed`` for the self-test) and yield a Session."""
    from netrig.methodology.runner import Session, _line_rate

    try:
        from netrig import Port  # type: ignore[attr-defined]
        from netrig.testbed import Testbed  # type: ignore[attr-defined]
    except ImportError as e:
        raise CapabilityError(f"the engine or test beds are not available in this build ({e})") from None
    name = config.selftest.testbed if role == "selftest" else config.testbed.name
    opts = dict(config.testbed.options) if role == "dut" else {}
    with Testbed.create(name, **opts) as tb:
        p = config.ports
        tx_name, rx_name = p.tx, p.rx
        tp, rp = tb.port(tx_name), tb.port(rx_name)
        tx = Port(tp.ifname, netns=tp.netns, io=p.io, queues=p.queues, busy_poll_us=p.busy_poll_us)
        rx = Port(rp.ifname, netns=rp.netns, io=p.io, queues=p.queues, busy_poll_us=p.busy_poll_us)
        template = tb.stream_defaults(tx=tx_name, rx=rx_name, family=p.family)
        monitor_factory = None
        if config.trial.monitor and role == "dut":
            try:
                from netrig.monitor import Monitor  # type: ignore[attr-defined]

                interval = min(1.0, max(0.1, config.trial.duration_s / 5))
                monitor_factory = lambda: Monitor(testbed=tb, interval_s=interval)  # noqa: E731
            except ImportError:
                monitor_factory = None
        t = config.trial
        m = EngineMeasurer(tx, rx, template, drain_s=t.drain_s, warmup_s=t.warmup_s,
                           learning_frames=t.learning_frames, tx_tolerance_pct=t.tx_tolerance_pct,
                           flows=p.flows, monitor_factory=monitor_factory,
                           stall_threshold_ms=t.stall_threshold_ms, stall_retries=t.stall_retries)
        env: dict = {}
        if role == "dut":
            try:
                from netrig.environment import capture  # type: ignore[attr-defined]

                env = capture(testbed=tb)
            except ImportError:
                env = {}
            except Exception as e:  # environment capture must never stop a run
                env = {"error": str(e)}
        lr = _line_rate(config, tp.ifname, _port_speed_bps(tp.ifname, tp.netns))
        try:
            desc = tb.describe()
        except Exception as e:
            desc = {"name": name, "error": str(e)}
        desc.setdefault("name", name)
        try:
            yield Session(m, lr, desc, env)
        except EngineError:
            raise
