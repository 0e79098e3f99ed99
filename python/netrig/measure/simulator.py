"""A simulated device under test with known capacity and loss behaviour.

Every model is deterministic: a trial's random draws come from a RNG seeded by the model's
``seed``, the trial's tag and the load, so the same trial always gives the same counts, and a
resumed run sees exactly what an uninterrupted one saw.

Models (combine freely):

(a) hard cap: no loss at ``rate <= C``; above, ``loss = 1 - C/rate``;
(b) background loss: every frame is lost with probability ``background_loss_ratio``;
(c) receive livelock: above ``C`` the forwarded rate *falls*:
    ``fwd = C * max(livelock_floor, 1 - livelock_slope * (rate - C) / C)``;
(d) a buffer of ``buffer_frames`` frames drained at ``C``: a burst of ``L`` frames at rate ``r``
    loses ``L * (1 - C/r) - B`` frames when that is positive;
(e) recovery: after an overload phase, loss (ratio ``recovery_loss_ratio``) persists for
    ``recovery_s`` seconds into the next phase;
(f) tester ceiling: the tester cannot offer more than ``tester_ceiling_pps``; a trial asking for
    more is invalid (a tester limit, not DUT loss) — except a burst, which the engine's burst mode
    sends whole at the tester's ceiling: valid, at the rate it achieved;
(g) backpressure: the DUT slows the sender to ``backpressure_pps`` (on veth the DUT's forwarding runs
    on the sender's CPU), so a trial asking for more is invalid although the tester alone (the
    self-test's looped-back model, which has no DUT) could send it;
(h) hiccups: with probability ``hiccup_probability`` per trial the DUT stops forwarding for
    ``hiccup_s`` seconds (everything sent meanwhile is lost);
(i) a noisy capacity: each trial's capacity is ``C × (1 + capacity_jitter_ratio × N(0, 1))``;
(j) tester stalls: with probability ``tester_stall_probability`` per trial the tester is descheduled
    long enough to stretch its sending beyond the tolerance, at any load: as the engine does, the
    trial stops there (a random part of the way through), invalid ("stretched"), having sent at
    ``1 − STALL_SHORTFALL`` of the rate until then.

A trial without a tag (a method driven directly, not through the run loop) is seeded by how many
times the same trial was asked for before, so repeating a trial draws new noise.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

from netrig.errors import CapabilityError, ConfigError
from netrig.measure.events import Event, EventResult, EventRun, FlowOutage, check_events
from netrig.measure.seam import (
    FlowTrial,
    Interval,
    IntervalSink,
    LatencySummary,
    Load,
    Phase,
    StackRequest,
    TrialCounts,
)
from netrig.measure.stack import cpu_per
from netrig.model import FrameSize


@dataclass(frozen=True)
class DutModel:
    """Parameters of a simulated DUT (and of the simulated tester in front of it)."""

    capacity_pps: float = 1_000_000.0
    capacity_bps: float | None = None  # L2 bit/s cap, e.g. a policer; min() with capacity_pps
    background_loss_ratio: float = 0.0
    livelock_slope: float = 0.0
    livelock_floor: float = 0.0
    buffer_frames: int = 0
    recovery_s: float = 0.0
    recovery_loss_ratio: float = 0.5
    tester_ceiling_pps: float | None = None
    tester_tolerance_ratio: float = 0.02
    backpressure_pps: float | None = None
    hiccup_probability: float = 0.0
    hiccup_s: float = 0.0
    capacity_jitter_ratio: float = 0.0
    tester_stall_probability: float = 0.0
    reset_time_s: float = 0.0
    latency_base_ns: float = 10_000.0
    latency_jitter_ns: float = 2_000.0
    trial_delay_s: float = 0.0  # wall-clock time each simulated trial takes (demos, Ctrl-C tests)
    seed: int = 1

    def __post_init__(self) -> None:
        for name in ("capacity_pps", "latency_base_ns"):
            if not getattr(self, name) > 0:
                raise ConfigError(name, f"must be > 0 (got {getattr(self, name)})")
        if self.capacity_bps is not None and not self.capacity_bps > 0:
            raise ConfigError("capacity_bps", f"must be > 0 (got {self.capacity_bps})")
        for name in ("background_loss_ratio", "recovery_loss_ratio", "livelock_floor", "tester_tolerance_ratio",
                     "hiccup_probability", "capacity_jitter_ratio", "tester_stall_probability"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ConfigError(name, f"must be between 0 and 1 (got {v})")
        for name in ("livelock_slope", "recovery_s", "reset_time_s", "latency_jitter_ns", "trial_delay_s", "hiccup_s"):
            if not getattr(self, name) >= 0:
                raise ConfigError(name, f"must be >= 0 (got {getattr(self, name)})")
        if self.buffer_frames < 0:
            raise ConfigError("buffer_frames", f"must be >= 0 (got {self.buffer_frames})")
        for name in ("tester_ceiling_pps", "backpressure_pps"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise ConfigError(name, f"must be > 0 (got {v})")

    def capacity(self, frame: FrameSize) -> float:
        """The DUT's true loss-free rate for this frame size (frames/s)."""
        c = self.capacity_pps
        if self.capacity_bps is not None:
            c = min(c, self.capacity_bps / (frame.mean_size * 8))
        return c

    def forwarding_rate(self, rate_pps: float, frame: FrameSize, capacity_pps: float | None = None) -> float:
        """Steady-state forwarded rate at an achieved (sent) rate (before background loss); ``capacity_pps``
        overrides the capacity (one trial's noisy capacity)."""
        c = self.capacity(frame) if capacity_pps is None else capacity_pps
        if rate_pps <= c:
            return rate_pps
        if self.livelock_slope > 0:
            return c * max(self.livelock_floor, 1.0 - self.livelock_slope * (rate_pps - c) / c)
        return c

    def max_burst(self, rate_pps: float, frame: FrameSize) -> int:
        """True longest loss-free burst at ``rate_pps`` (model d)."""
        c = self.capacity(frame)
        if rate_pps <= c:
            return 2**62
        return int(math.floor(self.buffer_frames / (1.0 - c / rate_pps) + 1e-9))

    def to_dict(self) -> dict:
        return asdict(self)


#: What a tester stall (model j) leaves of a trial's frames unsent: beyond the engine's 2 % stretch
#: tolerance, within what it repeats as a transient stall (``defaults.TRANSIENT_STRETCH_MAX``).
STALL_SHORTFALL = 0.03


def _binomial(rng: random.Random, n: int, p: float) -> int:
    """A binomial draw, exact for small means and normal-approximated for large ones."""
    if n <= 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    mean = n * p
    if mean < 30:  # Poisson approximation by inversion
        limit, k, prod = math.exp(-mean), 0, rng.random()
        while prod > limit:
            k += 1
            prod *= rng.random()
        return min(n, k)
    sd = math.sqrt(mean * (1.0 - p))
    return max(0, min(n, int(round(rng.gauss(mean, sd)))))


class SimulatedMeasurer:
    """A :class:`~netrig.methodology.measurer.Measurer` backed by a :class:`DutModel`."""

    def __init__(self, model: DutModel | None = None, sleep: Callable[[float], None] = time.sleep, **kw):
        self.model = model if model is not None else DutModel(**kw)
        self.trials = 0
        self._sleep = sleep
        self._asked: dict[tuple, int] = {}

    def _rng(self, tag: str, *parts) -> random.Random:
        if not tag:  # untagged: the n-th time the same trial is asked for
            n = self._asked.get(parts, 0)
            self._asked[parts] = n + 1
            parts = (n, *parts)
        h = hashlib.sha256(repr((self.model.seed, tag) + parts).encode()).digest()
        return random.Random(int.from_bytes(h[:8], "big"))

    def _tester(self, rate_pps: float) -> tuple[float, bool, str | None]:
        m = self.model
        top = min((x for x in (m.tester_ceiling_pps, m.backpressure_pps) if x is not None), default=None)
        if top is not None and rate_pps > top * (1 + m.tester_tolerance_ratio):
            return (top, False,
                    f"tester sent {top:.0f} fps, {100 * top / rate_pps:.1f}% of the intended {rate_pps:.0f} fps")
        return rate_pps, True, None

    def _stalled(self, rng: random.Random, rate_pps: float) -> float | None:
        """Model (j): the share of the trial the tester sent before a stall stopped it, or ``None``."""
        p = self.model.tester_stall_probability
        if not p or rng.random() >= p:
            return None
        return rng.uniform(0.01, 0.99)

    def _trial_capacity(self, rng: random.Random, frame: FrameSize) -> float:
        m = self.model
        c = m.capacity(frame)
        if m.capacity_jitter_ratio:
            c = max(0.0, c * (1.0 + m.capacity_jitter_ratio * rng.gauss(0.0, 1.0)))
        return c

    def _hiccup_s(self, rng: random.Random, duration_s: float) -> float:
        m = self.model
        if m.hiccup_probability and m.hiccup_s and rng.random() < m.hiccup_probability:
            return min(duration_s, m.hiccup_s)
        return 0.0

    def _latency(self, rng: random.Random, rate_pps: float, frame: FrameSize) -> LatencySummary:
        m = self.model
        util = min(rate_pps / m.capacity(frame), 1.0)
        base = m.latency_base_ns * (1.0 + 2.0 * util**4)
        j = m.latency_jitter_ns * (1.0 + util)
        p50 = base + rng.uniform(-0.05, 0.05) * j
        return LatencySummary(
            min_ns=base - j, mean_ns=p50 + 0.1 * j, p50_ns=p50, p90_ns=p50 + j, p99_ns=p50 + 2 * j,
            p999_ns=p50 + 4 * j + rng.uniform(0, j), max_ns=p50 + 10 * j, pdv_ns=(p50 + 4 * j) - (base - j),
            ipdv_ns=0.3 * j, ipdv_p99_ns=1.2 * j, ipdv_max_ns=3.0 * j,
        )

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        m = self.model
        self.trials += 1
        if m.trial_delay_s:
            self._sleep(m.trial_delay_s)
        frame = load.frame_size
        rng = self._rng(load.tag, round(load.rate_pps, 6), load.burst_frames, round(duration_s, 9), frame.label)
        achieved, valid, reason = self._tester(load.rate_pps)
        part = self._stalled(rng, achieved) if valid and load.burst_frames is None else None
        if part is not None:
            achieved, valid = achieved * (1 - STALL_SHORTFALL), False
            reason = "a paced worker's sending was stretched by tester stalls beyond the tolerance (a stall)"
        cap = self._trial_capacity(rng, frame)
        if load.burst_frames is not None:
            # Burst mode, as the engine does it: every frame of the burst is sent, as fast as the
            # tester can when the burst rate is beyond it; the burst is valid, its rate what it was.
            sent, valid, reason = load.burst_frames, True, None
            excess = sent * (1.0 - cap / achieved) - m.buffer_frames if achieved > cap else 0.0
            lost = int(math.ceil(excess - 1e-9)) if excess > 0 else 0
        else:
            sent = int(round(achieved * duration_s * (part or 1.0)))
            fwd = m.forwarding_rate(achieved, frame, cap)
            if fwd >= achieved:
                lost = 0
            else:
                lost = sent - int(math.floor(sent * fwd / achieved))
                lost = max(lost, 1)
            stall_s = self._hiccup_s(rng, duration_s)
            if stall_s:
                lost = max(lost, int(round(sent * stall_s / duration_s)))
        lost = min(sent, lost)
        lost += _binomial(rng, sent - lost, m.background_loss_ratio)
        received = sent - lost
        return TrialCounts(
            achieved_pps=achieved,
            intended_pps=load.rate_pps,
            frames_sent=sent,
            frames_received=received,
            latency=self._latency(rng, achieved, frame) if received else None,
            valid=valid,
            invalid_reason=reason,
            raw={"simulator": {"capacity_pps": m.capacity(frame), "seed": m.seed}},
        )

    def measure_phases(self, frame_size: FrameSize, phases: Sequence[Phase], interval_s: float,
                       tag: str = "", events: Sequence[Event] = (),
                       run_event: Callable[[Event], EventRun] | None = None) -> TrialCounts:
        """Continuous trial through ``phases``; per-interval counts. Model (e) adds loss for
        ``recovery_s`` after every overloaded phase; every event's command runs, then the model
        forwards nothing for ``reset_time_s`` (:func:`_event_outages`)."""
        m = self.model
        self.trials += 1
        if m.trial_delay_s:
            self._sleep(m.trial_delay_s)
        rng = self._rng(tag, tuple((p.rate_pps, p.duration_s) for p in phases), interval_s, frame_size.label)
        c = m.capacity(frame_size)
        intervals: list[Interval] = []
        t0 = 0.0
        overload_end: float | None = None
        all_valid, reason = True, None
        for pi, ph in enumerate(phases):
            achieved, valid, why = self._tester(ph.rate_pps)
            if not valid:
                all_valid, reason = False, why
            n = max(1, int(math.ceil(ph.duration_s / interval_s - 1e-9)))
            for k in range(n):
                start = k * interval_s
                dur = min(interval_s, ph.duration_s - start)
                sent = int(round(achieved * dur))
                fwd = m.forwarding_rate(achieved, frame_size)
                lost = 0 if fwd >= achieved else max(1, sent - int(math.floor(sent * fwd / achieved)))
                if overload_end is not None and achieved <= c:
                    a, b = t0 + start, t0 + start + dur
                    overlap = max(0.0, min(b, overload_end + m.recovery_s) - max(a, overload_end))
                    if overlap > 0:
                        lost = max(lost, int(math.ceil(sent * (overlap / dur) * m.recovery_loss_ratio)))
                lost = min(sent, lost)
                lost += _binomial(rng, sent - lost, m.background_loss_ratio)
                # Latency: the base, plus a full buffer's queueing delay while overloaded, draining
                # over the recovery after it.
                queue_ns = 1e9 * m.buffer_frames / c if c else 0.0
                lat = m.latency_base_ns + (queue_ns if achieved > c else 0.0)
                if overload_end is not None and achieved <= c and m.recovery_s > 0:
                    left = max(0.0, 1.0 - (t0 + start - overload_end) / m.recovery_s)
                    lat += queue_ns * left
                received = sent - lost
                intervals.append(Interval(t0 + start, dur, pi, sent, received, lat if received else None,
                                          lat + m.latency_jitter_ns if received else None))
            if achieved > c:
                overload_end = t0 + ph.duration_s
            t0 += ph.duration_s
        total_s = sum(p.duration_s for p in phases)
        results: tuple[EventResult, ...] | None = None
        if events:
            if run_event is None:
                raise ValueError("events need run_event, the function that runs their commands")
            check_events(events, total_s)
            intervals, results = _event_outages(intervals, events, run_event, m.reset_time_s)
        sent = sum(i.frames_sent for i in intervals)
        received = sum(i.frames_received for i in intervals)
        return TrialCounts(
            achieved_pps=sent / total_s, intended_pps=sum(p.rate_pps * p.duration_s for p in phases) / total_s,
            frames_sent=sent, frames_received=received, valid=all_valid,
            invalid_reason=reason, intervals=tuple(intervals), events=results,
            raw={"simulator": {"capacity_pps": c, "recovery_s": m.recovery_s}},
        )

    def measure_soak(self, load: Load, duration_s: float, interval_s: float, on_interval: IntervalSink,
                     events: Sequence[Event] = (), run_event: Callable[[Event], EventRun] | None = None) -> TrialCounts:
        """One continuous trial at the load (``measure_phases`` with one phase), its intervals handed to
        ``on_interval`` one by one; the simulated DUT has no monitor (samples are ``None``)."""
        c = self.measure_phases(load.frame_size, [Phase(load.rate_pps, duration_s)], interval_s, tag=load.tag,
                                events=events, run_event=run_event)
        for iv in c.intervals or ():
            on_interval(iv, None)
        return dataclasses.replace(c, intervals=None)

    def measure_stack(self, request: StackRequest) -> dict:
        """A stack trial on the model (:func:`simulated_stack`)."""
        self.trials += 1
        if self.model.trial_delay_s:
            self._sleep(self.model.trial_delay_s)
        return simulated_stack(self.model, request)

    def measure_flows(self, request: FlowTrial) -> TrialCounts:
        """The simulated DUT keeps no connection state: stateful trials need a real one."""
        raise CapabilityError("stateful trials need a real DUT with a conntrack table: use the nat, firewall or "
                              "fwnat test bed, not the simulated one")

    def measure_events(self, load: Load, duration_s: float, events: Sequence[Event],
                       run_event: Callable[[Event], EventRun]) -> TrialCounts:
        """A trial with events: every event's command runs (``run_event``), then the model forwards
        nothing for ``reset_time_s`` (one flow; no outage when it is 0)."""
        m = self.model
        self.trials += 1
        check_events(events, duration_s)
        achieved, valid, reason = self._tester(load.rate_pps)
        sent = int(round(achieved * duration_s))
        results = []
        lost = 0
        for e in sorted(events, key=lambda e: e.at_s):
            run = run_event(e)
            gap = min(sent - lost, int(round(achieved * m.reset_time_s)))
            lost += gap
            flows = (FlowOutage(0, gap, 0.0, gap / achieved),) if gap else ()
            results.append(EventResult(run, flows, m.reset_time_s if gap else 0.0, 1))
        fwd = m.forwarding_rate(achieved, load.frame_size)
        if fwd < achieved:
            lost = min(sent, lost + sent - int(math.floor(sent * fwd / achieved)))
        return TrialCounts(
            achieved_pps=achieved, intended_pps=load.rate_pps, frames_sent=sent, frames_received=sent - lost,
            valid=valid,
            invalid_reason=reason, events=tuple(results), raw={"simulator": {"reset_time_s": m.reset_time_s}},
        )

def _event_outages(intervals: Sequence[Interval], events: Sequence[Event], run_event: Callable[[Event], EventRun],
                   reset_time_s: float) -> tuple[list[Interval], tuple[EventResult, ...]]:
    """Every event's command runs (``run_event``); the model then forwards nothing for
    ``reset_time_s`` from the event's time: the intervals lose what was sent in that window (one
    flow), and each event's result says so."""
    out = list(intervals)
    results = []
    for e in sorted(events, key=lambda e: e.at_s):
        run = run_event(e)
        a, b = e.at_s, e.at_s + reset_time_s
        gap = 0
        for k, iv in enumerate(out):
            overlap = max(0.0, min(b, iv.t_s + iv.duration_s) - max(a, iv.t_s))
            if overlap <= 0 or iv.duration_s <= 0:
                continue
            lose = min(iv.frames_received, int(round(iv.frames_sent * overlap / iv.duration_s)))
            gap += lose
            out[k] = replace(iv, frames_received=iv.frames_received - lose)
        flows = (FlowOutage(0, gap, 0.0, reset_time_s),) if gap else ()
        results.append(EventResult(run, flows, reset_time_s if gap else 0.0, 1))
    return out, tuple(results)


#: The simulated stack trials' cost: busy CPU-seconds per Gbit of TCP goodput, per million
#: transactions (a model, not a measurement: it makes the CPU columns and ratios testable).
SIM_CPU_S_PER_GBIT = 0.08
SIM_CPU_S_PER_MTRANS = 4.0
#: TCP payload per full-size frame (1518 B frame, 1448 B of payload with timestamps).
SIM_TCP_PAYLOAD = 1448


def simulated_stack(model: DutModel, request: StackRequest) -> dict:
    """A stack trial's result document on a simulated DUT: TCP goodput at the DUT's capacity for
    full-size frames, request/response at one transaction per round trip of twice the latency."""
    d = request.duration_s
    p = request.params
    sim = {"simulated": True}
    if request.kind == "tcp":
        full = model.capacity(FrameSize(size=1518))
        dirs = ("forward", "reverse") if p.direction == "bidir" else (p.direction,)
        per_dir = full * SIM_TCP_PAYLOAD * 8 * (1.0 - model.background_loss_ratio)
        gbit = per_dir * len(dirs) * d / 1e9
        busy = gbit * SIM_CPU_S_PER_GBIT
        streams = [{"id": i + 1, "direction": dirs[i % len(dirs)], "goodput_bps": per_dir * len(dirs) / p.streams,
                    "retransmits": 0, "mean_rtt_us": 2 * model.latency_base_ns / 1e3,
                    "max_rtt_us": 2 * (model.latency_base_ns + model.latency_jitter_ns) / 1e3,
                    "max_cwnd_bytes": None} for i in range(p.streams)]
        procs = [{"name": "iperf3 client", "netns": None, "user_s": busy / 8, "sys_s": busy / 4,
                  "total_s": 3 * busy / 8},
                 {"name": "iperf3 server", "netns": None, "user_s": busy / 8, "sys_s": busy / 4,
                  "total_s": 3 * busy / 8}]
        doc = {"tool": "iperf3", "tool_version": "simulated", "server": "simulated",
               "streams_requested": p.streams, "duration_s": d, "direction": p.direction,
               "goodput_bps": per_dir * len(dirs), "goodput_by_direction": dict.fromkeys(dirs, per_dir),
               "retransmits": 0, "streams": streams,
               "intervals": [{"start_s": float(i), "duration_s": 1.0, "goodput_bps": per_dir * len(dirs),
                              "retransmits": 0} for i in range(int(d))],
               "processes": procs, "cpu_s_per_gbit": 3 * busy / 4 / gbit if gbit else None, **sim}
    else:
        rtt_us = 2 * model.latency_base_ns / 1e3
        n = int(d * 1e6 / rtt_us)
        busy = n / 1e6 * SIM_CPU_S_PER_MTRANS
        j = 2 * model.latency_jitter_ns / 1e3
        doc = {"tool": "sockperf", "tool_version": "simulated", "server": "simulated", "port": p.port,
               "protocol": p.protocol, "size_bytes": p.size_bytes, "duration_s": d, "mps": p.mps, "measured_s": d,
               "samples": n, "tps": n / d, "transactions_total": n,
               "rtt_us": {"samples": n, "mean": rtt_us, "min": rtt_us - j, "p50": rtt_us, "p90": rtt_us + j,
                          "p99": rtt_us + 2 * j, "p99_9": rtt_us + 3 * j, "max": rtt_us + 4 * j},
               "dropped": 0, "duplicated": 0, "out_of_order": 0,
               "processes": [{"name": "sockperf client", "netns": None, "user_s": busy / 4, "sys_s": busy / 4,
                              "total_s": busy / 2},
                             {"name": "sockperf server", "netns": None, "user_s": busy / 4, "sys_s": busy / 4,
                              "total_s": busy / 2}],
               "cpu_s_per_million_transactions": SIM_CPU_S_PER_MTRANS, **sim}
    doc["cpu"] = {"wall_s": d, "cores": {"cpu0": {"user": busy / 4, "system": busy / 4, "softirq": busy / 2,
                                                 "busy": busy}}, "busy_s": busy, "procs": []}
    doc["cpu_per"] = cpu_per(doc)
    return doc
