"""The run loop's progress events: one frozen type per kind, written by the run loop
(:class:`netrig.run.runner.Runner`) and the recording measurer, read by attribute by the console
(``netrig.cli.console``) and the telemetry exporter (``netrig.telemetry.runs``).

``progress(event)`` (:data:`ProgressFn`) takes a :data:`ProgressEvent`, the union of the kinds, so
mypy checks every reader against the fields the writers set. A consumer matches the kinds it
wants and ignores the others (``match event: case TrialEnd(): …``).

====================  ==========================================================================
kind                  when, and what it says
====================  ==========================================================================
:class:`RunStart`     a session is up: the run's name and id, the estimated trials, the line rate
:class:`RunEnd`       the run ended: complete or not, and why not
:class:`MethodStart`  a configured method begins
:class:`Notice`       something the user should know (a repaired test bed or trial log, a soak's
                      live verdicts)
:class:`TrialStart`   a trial is about to be measured (never a replayed one)
:class:`TrialProgress`  the engine's live snapshot of the trial in progress (~every 0.2 s)
:class:`TrialEnd`     a trial finished or was replayed: its counts (the very ``TrialCounts`` its
                      record is written from), or a stack trial's outcome
:class:`IntervalSettled`  a soak interval settled (or was replayed): its counts, the DUT sample
:class:`MethodResultUpdate`  a method's result, live (the soak's verdicts) or at a repetition's end
====================  ==========================================================================
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from netrig.measure import FlowTrial, Interval, StackRequest, TrialCounts
from netrig.methodology.method import MethodResult
from netrig.model import LineRate
from netrig.monitor.monitor import CompactSample, MonitorResult
from netrig.run.records import FrameLabel, LoadRecord


@dataclass(frozen=True)
class RunStart:
    """A run's session is up (sent again when a later session, e.g. the DUT's after the
    self-test's, takes over)."""

    run: str
    run_id: str
    out_dir: str
    total_trials: int
    resumes: int = 0
    line_rate: LineRate | None = None


@dataclass(frozen=True)
class RunEnd:
    complete: bool
    #: Why it stopped early (``None``: it finished).
    reason: str | None = None


@dataclass(frozen=True)
class MethodStart:
    method: str
    label: str
    method_index: int


@dataclass(frozen=True)
class Notice:
    message: str


@dataclass(frozen=True)
class TrialInfo:
    """Which trial: where it belongs (its replay key, method, frame size, repetition, index) and
    what it asks (``load``, as its record holds it; a stack trial's ``stack`` and a stateful
    trial's ``flows`` request as typed)."""

    key: str
    kind: str
    method: str
    label: str
    frame_size: FrameLabel
    repetition: int
    trial_index: int
    load: LoadRecord
    stack: StackRequest | None = None
    flows: FlowTrial | None = None


@dataclass(frozen=True)
class TrialStart:
    trial: TrialInfo
    #: A soak's continuous trial (0, or more after a resume) and the soak time it still has to run.
    segment: int | None = None
    remaining_s: float | None = None


@dataclass(frozen=True)
class TrialProgress:
    """The engine's live snapshot of the trial in progress (``trial.Snapshot``)."""

    phase: str
    elapsed_s: float
    tx_frames: int
    rx_frames: int


@dataclass(frozen=True)
class CpuPer:
    """Busy CPU-seconds per unit of what a stack trial moved (``netrig.measure.stack.cpu_per``)."""

    busy_s_per_gbit: float | None = None
    busy_s_per_mtrans: float | None = None


@dataclass(frozen=True)
class StackOutcome:
    """What the console and the telemetry show of a stack trial's document (the tool's result):
    goodput (tcp) or transactions/s (rr), the CPU per unit, the DUT monitor's samples."""

    goodput_bps: float | None = None
    tps: float | None = None
    cpu_per: CpuPer | None = None
    monitor: MonitorResult | None = None


@dataclass(frozen=True)
class TrialEnd:
    trial: TrialInfo
    #: Answered from an interrupted run's record (``--resume``), not measured.
    replayed: bool
    #: ``None``: a stack trial (``outcome`` instead).
    counts: TrialCounts | None = None
    outcome: StackOutcome | None = None


@dataclass(frozen=True)
class IntervalSettled:
    """A soak interval settled (its counts are final; ``interval.t_s`` is soak time), with the DUT
    monitor's compact sample then; ``replayed`` on resume, from the interval records."""

    trial: TrialInfo
    interval: Interval
    sample: CompactSample | None
    replayed: bool


@dataclass(frozen=True)
class MethodResultUpdate:
    method: str
    frame_size: FrameLabel
    result: MethodResult


ProgressEvent = (RunStart | RunEnd | MethodStart | Notice | TrialStart | TrialProgress | TrialEnd | IntervalSettled
                 | MethodResultUpdate)
#: ``progress(event)``: told every event of a run; it ignores the kinds it does not want.
ProgressFn = Callable[[ProgressEvent], None]


def ignore(event: ProgressEvent) -> None:
    """The progress function of a run nobody watches."""
