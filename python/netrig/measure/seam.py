"""The measurer seam: every method talks to this interface and nothing else.

A *measurer* runs one trial at a load for a duration and returns counts. The real one
(:class:`netrig.measure.engine.EngineMeasurer`) drives the engine on a test bed; the simulated one
(:class:`netrig.measure.simulator.SimulatedMeasurer`) is a loss model with a seeded RNG, so every
search is testable in milliseconds; the run loop wraps either in a recording measurer that writes
every trial to disk.

Rates are **aggregate, one direction** (tx port(s) → rx port(s)), in frames/s.

Besides frame trials, a measurer runs **stack trials** (:class:`StackRequest`): a real tool (iperf3
for TCP, sockperf for request/response) between the tester ports' kernel stacks through the DUT,
with the CPU of every party over the trial. Their result is the tool's result document (a dict,
recorded and replayed as it is); frame size plays no part in them.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

from netrig.errors import ConfigError, ResultError
from netrig.measure.events import Event, EventResult, EventRun
from netrig.measure.platform import LatencyTimeline, TrialStalls
from netrig.model import FrameSize, defaults
from netrig.monitor.cpu import CpuUsage, ProcUsage
from netrig.monitor.monitor import CompactSample, Mark, MemInfo, MonitorResult, MonitorSample, ProcSample
from netrig.results.typed import from_dict
from netrig.testbed.conntrack import TableCounts, TupleCheck

#: What the measurer hands a method from the infrastructure below it, as types: the engine's CPU
#: accounting, the DUT monitor's samples, the DUT's conntrack table around a stateful trial. Methods
#: and reports import them from here (layers 5 and 6 import nothing of layer 3).
__all__ = ["Load", "Phase", "LatencySummary", "Pacing", "DutRing", "Interval", "TrialCounts", "FlowTrial",
           "StackRequest", "STACK_KINDS", "FLOW_DIRECTIONS", "IntervalSink", "TrialMonitor", "Measurer",
           "CpuUsage", "ProcUsage", "CompactSample", "MemInfo", "MonitorResult", "MonitorSample", "Mark", "ProcSample",
           "TableCounts", "TupleCheck", "Measured", "EngineRecord", "EnginePort", "transient_stretch"]


@dataclass(frozen=True)
class Load:
    """What one trial offers: ``rate_pps`` (aggregate, one direction) of ``frame_size`` frames.

    ``burst_frames`` set means a single burst of that many frames at ``rate_pps`` (back-to-back).
    ``tag`` identifies the trial in the run (its replay key); simulators mix it into their seed so a
    trial's outcome depends only on what was asked, never on what ran before.
    """

    rate_pps: float
    frame_size: FrameSize
    burst_frames: int | None = None
    tag: str = ""

    def __post_init__(self) -> None:
        if not self.rate_pps > 0:
            raise ConfigError("load.rate_pps", f"must be > 0 (got {self.rate_pps})")
        if self.burst_frames is not None and self.burst_frames < 1:
            raise ConfigError("load.burst_frames", f"must be >= 1 (got {self.burst_frames})")


@dataclass(frozen=True)
class Phase:
    """One phase of a multi-phase trial (system recovery): a load held for ``duration_s``."""

    rate_pps: float
    duration_s: float

    def __post_init__(self) -> None:
        if not self.rate_pps > 0:
            raise ConfigError("phase.rate_pps", f"must be > 0 (got {self.rate_pps})")
        if not self.duration_s > 0:
            raise ConfigError("phase.duration_s", f"must be > 0 (got {self.duration_s})")


@dataclass(frozen=True)
class LatencySummary:
    """Every-frame one-way latency distribution of a trial, in nanoseconds.

    ``pdv_ns`` is RFC 5481 PDV at the 99th percentile (p99 − min); ``ipdv_ns`` the mean |IPDV|
    between consecutive frames of a flow, ``ipdv_p99_ns`` / ``ipdv_max_ns`` its 99th percentile and
    maximum. Any may be ``None`` (not measured, or a result written before it was)."""

    min_ns: float | None = None
    mean_ns: float | None = None
    p50_ns: float | None = None
    p90_ns: float | None = None
    p99_ns: float | None = None
    p999_ns: float | None = None
    max_ns: float | None = None
    pdv_ns: float | None = None
    ipdv_ns: float | None = None
    ipdv_p99_ns: float | None = None
    ipdv_max_ns: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> LatencySummary | None:
        if not d:
            return None
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})


def transient_stretch(stretch_s: float, max_lag_s: float, duration_s: float, tolerance_ratio: float) -> bool:
    """Smooth pacing stretched a trial beyond its tolerance (``tolerance_ratio`` of ``duration_s``) by
    one transient stall, so a repeat may pass: its longest lag alone accounts for the excess (without
    that stall the trial was within the tolerance), and the whole stretch is at most
    ``TRANSIENT_STRETCH_MAX`` of the duration. Stalls that add up over a trial (60 s on a busy VM:
    3–6 s of 8-ms stalls) are a tester that cannot keep the rate there; each repeat failed again
    and cost the whole trial (two hidden repeats made a 60-s self-test trial take 3 min 10 s)."""
    allowed = tolerance_ratio * duration_s
    return allowed < stretch_s <= min(defaults.TRANSIENT_STRETCH_MAX * duration_s, allowed + max_lag_s)


@dataclass(frozen=True)
class Pacing:
    """How the tester sent a trial's load, measured in its TX workers.

    ``mode`` is ``"smooth"`` (time lost to a tester stall is given back at most 2 % faster than the
    rate; what is not stretches the sending) or ``"catch-up"`` (a backlog is scheduled at twice the rate; a 1-ms
    window after a stall may carry more);
    ``stretch_s`` how much later than planned the last frame left; ``max_lag_s`` the longest the
    tester fell behind its schedule. ``peak_frames`` is the most frames handed to the port in any
    1 ms window and ``intended_frames`` what the intended rate puts there (0: unpaced, no peak);
    ``gap_*_ns`` the inter-departure gap per frame (median, 99th percentile, longest).
    ``tolerance_pct`` is ``trial.smoothness_tolerance_pct`` when the trial ran: the load is
    *bunched* when the peak exceeds the intended count by more than that and three frames (timing
    granularity: a sender that was late sends a few frames at once, then its successors on time)."""

    #: Frames a 1 ms window may hold beyond the intended count for timing granularity alone.
    ALLOWANCE_FRAMES = 3

    mode: str
    stretch_s: float = 0.0
    max_lag_s: float = 0.0
    peak_frames: int = 0
    intended_frames: float = 0.0
    gap_p50_ns: float | None = None
    gap_p99_ns: float | None = None
    gap_max_ns: float | None = None
    tolerance_pct: float = 10.0

    @property
    def peak_ratio(self) -> float | None:
        """Peak over intended frames in 1 ms (``None`` when unpaced)."""
        return self.peak_frames / self.intended_frames if self.intended_frames > 0 else None

    @property
    def bunched(self) -> bool:
        return self.intended_frames > 0 and \
            self.peak_frames > self.intended_frames * (1 + self.tolerance_pct / 100) + self.ALLOWANCE_FRAMES

    def to_dict(self) -> dict:
        return {**asdict(self), "peak_ratio": self.peak_ratio, "bunched": self.bunched}

    @classmethod
    def from_dict(cls, d: dict | None) -> Pacing | None:
        if not d:
            return None
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass(frozen=True)
class DutRing:
    """The DUT's own receive-ring counters over one trial (a test bed's wire, ``dut_placement``
    wire): frames that arrived at its interfaces, frames its CPUs took, and those the full ring
    dropped. Read after the drain, so ``dropped`` is exact; on a DUT that does nothing else with
    the trial's frames, it equals the tester's count of lost frames."""

    arrived: int
    taken: int
    dropped: int
    #: CPU time the tester's own receive path took on the DUT's CPUs, ns per frame received: their
    #: softirq time over the trial. veth delivers a frame to the tester's port in softirq on the CPU
    #: that transmits into it — the DUT's — while the DUT's own work runs in its ring thread's
    #: process context. Reported, never subtracted (``None``: not measured).
    tester_share_ns: float | None = None
    #: The DUT's own CPU-seconds over the trial: its CPUs' busy time less that softirq share.
    dut_cpu_s: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> DutRing | None:
        return from_dict(cls, d) if d else None


@dataclass(frozen=True)
class Interval:
    """Counts of one sampling interval of a multi-phase or iperf trial."""

    t_s: float
    duration_s: float
    phase: int
    frames_sent: int
    frames_received: int
    #: Mean and highest one-way latency of the frames received, ns (``None``: not measured).
    latency_mean_ns: float | None = None
    latency_max_ns: float | None = None

    @property
    def frames_lost(self) -> int:
        return max(0, self.frames_sent - self.frames_received)

    @property
    def rx_pps(self) -> float:
        return self.frames_received / self.duration_s if self.duration_s > 0 else 0.0

    def since(self, t_s: float) -> float:
        """Seconds from ``t_s`` to this interval's start. The engine's starts are whole nanoseconds
        as floats: the difference is rounded back to nanoseconds, or one 0.5-s interval after a
        start at 1.907019281 s reads 0.5000000000000002 s (1 start in 20)."""
        return round(self.t_s - t_s, 9)

    def to_dict(self) -> dict:
        return {
            "t_s": self.t_s,
            "duration_s": self.duration_s,
            "phase": self.phase,
            "frames_sent": self.frames_sent,
            "frames_received": self.frames_received,
            "frames_lost": self.frames_lost,
            "rx_pps": self.rx_pps,
            **({"latency_mean_ns": self.latency_mean_ns, "latency_max_ns": self.latency_max_ns}
               if self.latency_mean_ns is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: dict) -> Interval:
        return from_dict(cls, {"phase": 0, **d})  # intervals of one phase, written before phases were


@dataclass(frozen=True)
class TrialCounts:
    """The outcome of one trial (methodology §2). ``valid=False`` means the *tester* failed
    (could not send at the rate, dropped frames itself): it is not a DUT result.

    Frames the receiver saw that are not the trial's own are counted apart, never as received:
    ``foreign`` (no netrig signature), ``stray`` (another trial's: late frames of an earlier
    trial, another tester's) and ``forged`` (this trial's tag, but an unknown flow or impossible
    contents: a sequence number not sent yet, a transmit time in the future or before the trial)."""

    #: The achieved rate: frames the tester really sent over its sending window (RFC 2285's
    #: "offered load"), frames/s.
    achieved_pps: float
    frames_sent: int
    frames_received: int
    duplicated: int = 0
    reordered: int = 0
    late: int = 0
    latency: LatencySummary | None = None
    valid: bool = True
    invalid_reason: str | None = None
    intervals: tuple[Interval, ...] | None = None
    reset_time_s: float | None = None
    foreign: int = 0
    stray: int = 0
    forged: int = 0
    pacing: Pacing | None = None
    #: A trial with events (:meth:`Measurer.measure_events`): what each did and cost, in order.
    events: tuple[EventResult, ...] | None = None
    #: The DUT's receive-ring counters over the trial (a test bed with the wire), else None.
    dut_ring: DutRing | None = None
    #: Memory the trial's per-flow state took, measured by the engine (the resident set's growth
    #: over the trial, bytes); None when not measured (a simulated DUT, results before 2026-11-26).
    flow_memory_bytes: int | None = None
    #: Tester workers that did not run on the CPU they were placed on (the kernel refused the pin),
    #: one sentence each (``"netrig-tx0 not pinned to CPU 1: …"``); empty when all were pinned.
    pin_failures: tuple[str, ...] = ()
    #: The intended rate: what the trial was asked to send, frames/s; None when it was unpaced (as
    #: fast as possible) or is not known.
    intended_pps: float | None = None
    #: The platform's stalls over the trial, the DUT's and the tester's (``measure.platform``); None
    #: when not measured (a simulated DUT, no BPF, records before 2026-11-28).
    stalls: TrialStalls | None = None
    #: Of the frames lost, those the DUT's receive ring dropped while a DUT stall longer than the
    #: ring's time at the trial's load was under way (``measure.platform.loss_in_stalls``); None
    #: when not measured (no wire, no stall watch).
    loss_in_stalls: int | None = None
    #: The trial's latency over time, its spikes and their period (``measure.platform``).
    latency_timeline: LatencyTimeline | None = None
    #: An invalid trial the platform spoilt: the CPU time the host measurably took from the tester
    #: (steal, or its CPU stops the guest did not see), which covers the sending's stretch beyond the
    #: tolerance in every attempt. Neither the tester's limit nor a DUT result; None otherwise.
    host_take_s: float | None = None
    raw: dict = field(default_factory=dict, compare=False)

    @property
    def frames_lost(self) -> int:
        return max(0, self.frames_sent - self.frames_received)

    @property
    def loss_all_in_stalls(self) -> bool:
        """A lossy trial whose every lost frame the DUT's ring dropped during a DUT stall."""
        return self.frames_lost > 0 and self.loss_in_stalls is not None and self.loss_in_stalls >= self.frames_lost

    @property
    def loss_ratio(self) -> float:
        return self.frames_lost / self.frames_sent if self.frames_sent else 0.0

    @cached_property
    def measured(self) -> Measured:
        """What the measurer recorded beside the counts (``raw``), as types: read once (a report
        asks a trial for its CPU and its monitor samples dozens of times; ``raw`` is complete when
        the counts are made and never changes after)."""
        try:
            return from_dict(Measured, self.raw)
        except (ResultError, TypeError, ValueError):  # a hand-made or foreign record: nothing typed to show
            return Measured()

    @property
    def cpu_usage(self) -> CpuUsage | None:
        """The CPU-seconds the engine accounted over the trial (``raw.cpu``), ``None`` if none."""
        cpu = self.measured.cpu
        return cpu if cpu is not None and cpu.cores else None

    @property
    def dut_monitor(self) -> MonitorResult | None:
        """The DUT monitor's samples over the trial (``raw.monitor``), ``None`` if it was not watched."""
        return self.measured.monitor

    @property
    def conntrack(self) -> TableCounts | None:
        """The DUT's conntrack table around a stateful trial (``raw.conntrack``), ``None`` if not read."""
        return self.measured.conntrack

    def to_dict(self) -> dict:
        return {
            "intended_pps": self.intended_pps,
            "achieved_pps": self.achieved_pps,
            "frames_sent": self.frames_sent,
            "frames_received": self.frames_received,
            "frames_lost": self.frames_lost,
            "loss_ratio": self.loss_ratio,
            "duplicated": self.duplicated,
            "reordered": self.reordered,
            "late": self.late,
            "valid": self.valid,
            "invalid_reason": self.invalid_reason,
            "latency": self.latency.to_dict() if self.latency else None,
            "intervals": [i.to_dict() for i in self.intervals] if self.intervals is not None else None,
            "reset_time_s": self.reset_time_s,
            "foreign": self.foreign,
            "stray": self.stray,
            "forged": self.forged,
            "pacing": self.pacing.to_dict() if self.pacing else None,
            "events": [e.to_dict() for e in self.events] if self.events is not None else None,
            "dut_ring": self.dut_ring.to_dict() if self.dut_ring is not None else None,
            "flow_memory_bytes": self.flow_memory_bytes,
            "pin_failures": list(self.pin_failures),
            "stalls": self.stalls.to_dict() if self.stalls is not None else None,
            "loss_in_stalls": self.loss_in_stalls,
            "latency_timeline": self.latency_timeline.to_dict() if self.latency_timeline is not None else None,
            "host_take_s": self.host_take_s,
            "raw": self.raw,
        }

    @classmethod
    def from_dict(cls, d: dict) -> TrialCounts:
        """The counts ``to_dict`` wrote (``frames_lost``, ``loss_ratio``: derived, not read); a count
        that is not a number is a ``ValueError`` naming it (a damaged record)."""
        c = from_dict(cls, d)
        for name, v in (("achieved_pps", c.achieved_pps), ("frames_sent", c.frames_sent),
                        ("frames_received", c.frames_received), ("duplicated", c.duplicated),
                        ("reordered", c.reordered), ("late", c.late), ("foreign", c.foreign), ("stray", c.stray),
                        ("forged", c.forged)):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"counts.{name}: {v!r} is not a number")
        return c


@dataclass(frozen=True)
class EnginePort:
    """What is read of one port of the engine's result (``TrialResult.to_dict``, ``ports[]``)."""

    timestamp_source: str | None = None


@dataclass(frozen=True)
class EngineRecord:
    """What is read of the engine's own result kept with the counts (``raw.engine``): the frames the
    tester's receiver dropped itself, its ports."""

    tester_rx_drops: int | None = None
    ports: tuple[EnginePort, ...] = ()


@dataclass(frozen=True)
class Measured:
    """The parts of a trial's ``raw`` record that are types: the engine's CPU accounting (``cpu``),
    the DUT monitor's record (``monitor``), the DUT's conntrack table (``conntrack``, stateful
    trials). The rest of ``raw`` is the engine's or a tool's own document."""

    cpu: CpuUsage | None = None
    monitor: MonitorResult | None = None
    conntrack: TableCounts | None = None
    engine: EngineRecord | None = None


#: Directions of a :class:`FlowTrial`: the initiator's frames, the responder's, or both at once.
FLOW_DIRECTIONS = ("forward", "reverse", "both")


@dataclass(frozen=True)
class FlowTrial:
    """One trial over a fixed set of connections (RFC 9693 stateful benchmarking): the
    ``src_ports × dst_ports`` 4-tuples between the initiator (tx port) and the responder (rx port).

    ``direction``: ``forward`` (initiator → responder: through the DUT, creating state), ``reverse``
    (the responder answers every connection, to the address the DUT translated it to: through the
    DUT's state) or ``both`` at once. ``duration_s`` ``None``: each connection is used exactly once
    (one frame per 4-tuple, ``forward`` or ``reverse`` only: the preliminary phase, or the validation
    that every connection is in the table); otherwise ``rate_pps`` per direction for ``duration_s``.
    The order is RFC 4814 pseudorandom from ``seed`` (ports and order) or sequential; the reverse
    stream mirrors the forward one, 4-tuple by 4-tuple.

    The DUT's conntrack table is part of the trial (read in its namespace, recorded with the counts
    in ``raw.conntrack``): ``flush_before`` empties it first; ``check_tuples`` reads every entry
    after the trial and counts those whose reply tuple does not mirror the original one's ports;
    ``teardown`` then times deleting the whole table and deleting it again empty (RFC 9693's
    tear-down measurement)."""

    rate_pps: float
    frame_size: FrameSize
    src_ports: int
    dst_ports: int = 1
    direction: str = "forward"
    duration_s: float | None = None
    flow_order: str = "pseudorandom"
    seed: int = 1
    flush_before: bool = False
    check_tuples: bool = False
    teardown: bool = False
    tag: str = ""

    def __post_init__(self) -> None:
        if not self.rate_pps > 0:
            raise ConfigError("rate_pps", f"must be > 0 (got {self.rate_pps})")
        for name in ("src_ports", "dst_ports"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 65535:
                raise ConfigError(name, f"{v!r}: must be an integer from 1 to 65535")
        if self.direction not in FLOW_DIRECTIONS:
            raise ConfigError("direction", f"{self.direction!r}: use one of {', '.join(FLOW_DIRECTIONS)}")
        if self.duration_s is None and self.direction == "both":
            raise ConfigError("duration_s", "a trial in both directions needs a duration")
        if self.duration_s is not None and not self.duration_s > 0:
            raise ConfigError("duration_s", f"must be > 0 (got {self.duration_s})")

    @property
    def connections(self) -> int:
        return self.src_ports * self.dst_ports

    @property
    def directions(self) -> int:
        return 2 if self.direction == "both" else 1

    def to_dict(self) -> dict:
        d = asdict(self)
        d["frame_size"] = self.frame_size.label
        d.pop("tag")
        return d


#: Stack trials: ``kind`` → the tool that runs it.
STACK_KINDS = {"tcp": "iperf3", "rr": "sockperf"}


@dataclass(frozen=True)
class StackRequest:
    """One stack trial: ``kind`` (a key of :data:`STACK_KINDS`), the IP ``family`` (4 or 6) and the
    tool's parameters (a frozen dataclass: ``netrig.measure.tcp.TcpParams`` …; its ``duration_s``
    is the trial's)."""

    kind: str
    family: int
    params: Any

    def __post_init__(self) -> None:
        if self.kind not in STACK_KINDS:
            raise ConfigError("kind", f"{self.kind!r}: a stack trial is one of {', '.join(STACK_KINDS)}")
        if self.family not in (4, 6):
            raise ConfigError("family", f"{self.family!r}: must be 4 or 6")

    @property
    def duration_s(self) -> float:
        return float(self.params.duration_s)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "family": self.family, "params": asdict(self.params)}


#: ``on_interval(interval, sample)`` of a soak trial: one interval's final counts and the DUT
#: monitor's newest sample then, compacted (``None`` unmonitored).
IntervalSink = Callable[[Interval, CompactSample | None], None]


class TrialMonitor(Protocol):
    """Samples the DUT around one trial (``netrig.monitor.Monitor`` is one)."""

    def start(self) -> Any: ...

    def mark(self, label: str) -> None: ...

    def stop(self) -> Any:
        """Stop sampling; returns something with ``to_dict()``."""
        ...


@runtime_checkable
class Measurer(Protocol):
    """Runs trials. Implementations: ``SimulatedMeasurer``, ``EngineMeasurer``, ``RecordingMeasurer``."""

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        """One trial: offer ``load`` for ``duration_s`` (for a burst: the burst), drain, count."""
        ...

    def measure_phases(self, frame_size: FrameSize, phases: Sequence[Phase], interval_s: float,
                       tag: str = "", events: Sequence[Event] = (),
                       run_event: Callable[[Event], EventRun] | None = None) -> TrialCounts:
        """One continuous trial through several loads; ``intervals`` holds per-interval counts. With
        ``events`` their commands run during it, as in :meth:`measure_events`."""
        ...

    def measure_events(self, load: Load, duration_s: float, events: Sequence[Event],
                       run_event: Callable[[Event], EventRun]) -> TrialCounts:
        """A trial during which every event's command runs (``run_event(event)``) ``event.at_s``
        after the measured run begins; ``events`` holds what each did and cost per flow
        (``netrig.measure.events``)."""
        ...

    def measure_soak(self, load: Load, duration_s: float, interval_s: float, on_interval: IntervalSink,
                     events: Sequence[Event] = (), run_event: Callable[[Event], EventRun] | None = None) -> TrialCounts:
        """One continuous trial at ``load`` for ``duration_s``, counted per interval of ``interval_s``
        by transmit time. ``on_interval`` gets every interval while the trial runs, as soon as its
        counts are final (the last ones when it ends), with the newest DUT monitor sample; the
        returned counts have no ``intervals`` (they went to ``on_interval``). With ``events`` their
        commands run during it, as in :meth:`measure_events`."""
        ...

    def measure_stack(self, request: StackRequest) -> dict:
        """One stack trial: the tool's result document, with ``cpu`` (every party's CPU-seconds
        over the trial, ``netrig.monitor.cpu.CpuUsage.to_dict``)."""
        ...

    def measure_flows(self, request: FlowTrial) -> TrialCounts:
        """One trial over a set of connections through a stateful DUT (:class:`FlowTrial`), with the
        DUT's conntrack table read around it (``raw.conntrack``) and per direction counts
        (``raw.directions``)."""
        ...
