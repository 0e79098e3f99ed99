"""A stored trial record (``result.json`` ``trials[]``, a ``trials.ndjson`` line) read as a type.

The record is what the recording measurer wrote (docs/result-format.md, *Trial records*): where the
trial belongs (method, frame size, repetition, index), what it was asked (``load``), what it
counted (``counts``: :class:`~netrig.measure.TrialCounts`, read with its own ``from_dict``). A stack
trial has no counts (its tool's document is ``result``); records of an older schema are migrated
before they get here (``netrig.results.migrate``). Reports and methods read trials through this
type, never by key: a field renamed in the writer is a failure here, not a blank column.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from netrig.errors import ResultError
from netrig.measure import CpuUsage, LatencySummary, Mark, MonitorResult, MonitorSample, Pacing, TrialCounts
from netrig.measure.events import EventResult
from netrig.view.reading import finite, read_one


@dataclass(frozen=True)
class TrialLoad:
    """What the trial was asked: its rate, duration, share of line rate; a burst's frames; the
    counting interval of a multi-phase trial. ``None`` where the trial kind has none."""

    rate_pps: float | None = None
    duration_s: float | None = None
    pct_line_rate: float | None = None
    burst_frames: int | None = None
    interval_s: float | None = None

    @classmethod
    def read(cls, d: object) -> TrialLoad:
        r = read_one(cls, d) or cls()
        return cls(finite(r.rate_pps), finite(r.duration_s), finite(r.pct_line_rate), _int(r.burst_frames),
                   finite(r.interval_s))


@dataclass(frozen=True)
class _Stored:
    """A trial record as stored, its parts read by :meth:`TrialRecord.read`."""

    seq: Any = None
    method: Any = None
    method_index: Any = None
    frame_size: Any = None
    repetition: Any = None
    trial_index: Any = None
    kind: Any = None
    load: Any = None
    counts: Any = None
    replayed: Any = None
    started_at: Any = None
    verdict: Any = None


@dataclass(frozen=True)
class TrialRecord:
    """One trial of a run, at position ``index`` of its ``trials``."""

    index: int
    seq: int
    method: str
    #: The method's place in the run's ``methods`` (``None``: the self-test's trials, or not said).
    method_index: int | None
    frame_size: Any
    repetition: int | None
    trial_index: int | None
    kind: str
    load: TrialLoad
    #: ``None``: a stack trial, or a record without (readable) counts.
    counts: TrialCounts | None
    replayed: bool = False
    started_at: str | None = None
    #: ``backpressure``: an invalid trial that was the DUT's failure (the DUT slowed the sender).
    verdict: str | None = None
    #: The record as stored, for the parts that are the engine's or a tool's own documents (a stack
    #: trial's ``result``).
    stored: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def read(cls, index: int, d: Mapping[str, Any]) -> TrialRecord:
        r = read_one(_Stored, d) or _Stored()
        seq = _int(r.seq)
        return cls(index, seq if seq is not None else index, str(r.method or ""), _int(r.method_index), r.frame_size,
                   _int(r.repetition), _int(r.trial_index), str(r.kind or "rate"), TrialLoad.read(r.load),
                   _counts(r.counts), r.replayed is True, r.started_at if isinstance(r.started_at, str) else None,
                   r.verdict if isinstance(r.verdict, str) else None, d)

    @property
    def valid(self) -> bool:
        """Not invalid: a trial without counts (a stack trial) is not flagged here."""
        return self.counts is None or self.counts.valid

    @property
    def latency(self) -> LatencySummary | None:
        return self.counts.latency if self.counts is not None else None

    @property
    def pacing(self) -> Pacing | None:
        return self.counts.pacing if self.counts is not None else None

    @property
    def cpu(self) -> CpuUsage | None:
        """The CPU-seconds the engine accounted over the trial (``counts.raw.cpu``), ``None`` if none."""
        return self.counts.cpu_usage if self.counts is not None else None

    @property
    def monitor(self) -> MonitorResult | None:
        """The DUT monitor's record over the trial (``counts.raw.monitor``), ``None`` if unwatched."""
        return self.counts.dut_monitor if self.counts is not None else None

    @property
    def monitor_samples(self) -> list[MonitorSample | Mark]:
        """The DUT monitor's samples and marks over the trial, in time order."""
        return list(self.monitor.samples) if self.monitor is not None else []

    @property
    def events(self) -> tuple[EventResult, ...]:
        return tuple(self.counts.events or ()) if self.counts is not None else ()


def read_trials(trials: object) -> list[TrialRecord]:
    """Every record of a run's ``trials`` list (entries that are not objects are skipped)."""
    if not isinstance(trials, list):
        return []
    return [TrialRecord.read(i, t) for i, t in enumerate(trials) if isinstance(t, Mapping)]


def _counts(c: object) -> TrialCounts | None:
    """A record's counts; ``None`` when it has none, or none a report can read (a hand-edited or
    foreign record: its row shows dashes, the report is still drawn)."""
    if not isinstance(c, Mapping):
        return None
    try:
        return TrialCounts.from_dict(dict(c))
    except (KeyError, TypeError, ValueError, ResultError):
        return None


def _int(v: object) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
