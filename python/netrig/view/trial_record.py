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

from netrig.measure import LatencySummary, Pacing, TrialCounts
from netrig.measure.events import EventResult
from netrig.monitor.cpu import CpuUsage


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
        if not isinstance(d, Mapping):
            return cls()
        return cls(_number(d.get("rate_pps")), _number(d.get("duration_s")), _number(d.get("pct_line_rate")),
                   _int(d.get("burst_frames")), _number(d.get("interval_s")))


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
    #: The record as stored, for the parts that are the engine's or a tool's own documents (DUT
    #: monitor samples, a stack trial's ``result``).
    stored: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def read(cls, index: int, d: Mapping[str, Any]) -> TrialRecord:
        c, seq = d.get("counts"), _int(d.get("seq"))
        started, verdict = d.get("started_at"), d.get("verdict")
        return cls(index, seq if seq is not None else index, str(d.get("method") or ""), _int(d.get("method_index")),
                   d.get("frame_size"), _int(d.get("repetition")), _int(d.get("trial_index")),
                   str(d.get("kind") or "rate"), TrialLoad.read(d.get("load")), _counts(c), d.get("replayed") is True,
                   started if isinstance(started, str) else None, verdict if isinstance(verdict, str) else None, d)

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
    def monitor_samples(self) -> list[dict]:
        """The DUT monitor's samples over the trial (the monitor's own documents)."""
        return monitor_samples(self.stored)

    @property
    def events(self) -> tuple[EventResult, ...]:
        return tuple(self.counts.events or ()) if self.counts is not None else ()


def monitor_samples(t: Mapping[str, Any]) -> list[dict]:
    """DUT monitoring samples of a stored trial record: wherever the measurer put them
    (``counts.raw.monitor``, ``raw.monitor`` or ``monitor``), as a list or as ``{"samples": [...]}``."""
    counts = t.get("counts")
    raw = counts.get("raw") if isinstance(counts, Mapping) else None
    for holder in (raw, t.get("raw"), t):
        m = holder.get("monitor") if isinstance(holder, Mapping) else None
        if isinstance(m, list):
            return [s for s in m if isinstance(s, dict)]
        if isinstance(m, Mapping) and isinstance(m.get("samples"), list):
            samples = [s for s in m["samples"] if isinstance(s, dict)]
            if samples:
                return samples
    return []


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
    except (KeyError, TypeError, ValueError):
        return None


def _number(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _int(v: object) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
