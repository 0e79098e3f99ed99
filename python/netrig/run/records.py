"""A run's trial log as types: what the recording measurer writes (``trials.ndjson``) and what a
resumed run reads back (docs/result-format.md, *Trial records* and *Resuming*).

Records are read once, where the trial log is parsed (:meth:`RecordedTrial.read`,
:meth:`RecordedInterval.read`, :meth:`LogHeader.read`, through ``netrig.results.typed.from_dict``):
a damaged record is refused there with one line naming its trial, and the run loop compares a new
request with a recorded one field by field (:meth:`RecordedTrial.same_request`), never by key.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netrig.errors import NetrigError, ResultError
from netrig.measure import Phase, TrialCounts
from netrig.measure.events import Event
from netrig.monitor.monitor import CompactSample
from netrig.results import read_trial_log
from netrig.results.typed import from_dict

#: A frame size as results name it (``FrameSize.label``): bytes, or a mix's name.
FrameLabel = int | str

_DAMAGED = ("remove its line from trials.ndjson to measure it again, or start a new run")


@dataclass(frozen=True)
class LoadRecord:
    """What a trial was asked (a trial record's ``load``): the intended rate (aggregate, one
    direction; ``None`` for a stack trial), its share of line rate, the duration; a burst's frames,
    the counting interval of a multi-phase or soak trial, the user's events, a stateful or stack
    trial's request (``FlowTrial.to_dict()``, ``StackRequest.to_dict()``)."""

    frame_size: FrameLabel | None
    duration_s: float | None
    rate_pps: float | None = None
    burst_frames: int | None = None
    pct_line_rate: float | None = None
    interval_s: float | None = None
    events: tuple[Event, ...] | None = None
    request: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record's ``load``: a rate trial's keys (``burst_frames`` too, ``null`` or not), then
        what its kind adds."""
        d: dict[str, Any] = {"frame_size": self.frame_size, "duration_s": self.duration_s}
        if self.rate_pps is not None:
            d = {"rate_pps": self.rate_pps, "frame_size": self.frame_size, "burst_frames": self.burst_frames,
                 "duration_s": self.duration_s, "pct_line_rate": self.pct_line_rate}
        if self.interval_s is not None:
            d["interval_s"] = self.interval_s
        if self.events is not None:
            d["events"] = [e.to_dict() for e in self.events]
        if self.request is not None:
            d["request"] = self.request
        return d

    def same(self, other: LoadRecord) -> bool:
        """``other`` asks for this load: frame size, burst, request, and rate and duration within
        rounding (a float written to JSON and read back)."""
        return str(self.frame_size) == str(other.frame_size) and self.burst_frames == other.burst_frames \
            and self.request == other.request and close(self.rate_pps, other.rate_pps) \
            and close(self.duration_s, other.duration_s)

    def same_soak(self, other: LoadRecord) -> bool:
        """``other`` is the same soak: frame size, rate, duration and interval."""
        return str(self.frame_size) == str(other.frame_size) and close(self.rate_pps, other.rate_pps) \
            and close(self.duration_s, other.duration_s) and close(self.interval_s, other.interval_s)

    def check(self) -> None:
        """Raise ``TypeError`` when a number of the record is not one (a damaged or hand-edited log)."""
        for v in (self.rate_pps, self.duration_s, self.interval_s):
            close(v, v)


@dataclass(frozen=True)
class RecordedTrial:
    """One trial record of an interrupted run, as a resumed run replays it. ``stored`` is the
    record as it was on disk (the run's ``trials`` carry it on, marked ``replayed``)."""

    key: str
    kind: str = "rate"
    load: LoadRecord = field(default_factory=lambda: LoadRecord(None, None))
    phases: tuple[Phase, ...] | None = None
    #: ``None``: a stack trial (its tool's document is ``result``).
    counts: TrialCounts | None = None
    result: dict[str, Any] | None = None
    stored: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def read(cls, rec: Mapping[str, Any]) -> RecordedTrial:
        """A record of ``trials.ndjson``; ``ResultError`` naming the trial when it cannot be
        replayed (a value of the wrong type: a damaged or hand-edited log)."""
        key = from_dict(_Keyed, rec, partial=True).key
        try:
            t = from_dict(cls, rec, stored=dict(rec))
            t.load.check()
        except (TypeError, ValueError, KeyError, AttributeError, NetrigError) as e:
            raise ResultError(f"resume: the recorded trial {key} is damaged ({type(e).__name__}: {e}); "
                              f"{_DAMAGED}") from None
        if t.counts is None and (not isinstance(t.result, dict) or t.load.request is None):
            raise ResultError(f"resume: the recorded trial {key} is damaged (no counts, or no result or request); "
                              f"{_DAMAGED}")
        return t

    def same_request(self, kind: str, load: LoadRecord, phases: tuple[Phase, ...] | None) -> bool:
        """This record answers a request of ``kind`` for ``load`` (and ``phases``)."""
        if self.kind != kind or not self.load.same(load):
            return False
        if phases is None:
            return True
        mine = self.phases or ()
        return len(mine) == len(phases) and all(
            close(a.rate_pps, b.rate_pps) and close(a.duration_s, b.duration_s) for a, b in zip(mine, phases))


@dataclass(frozen=True)
class RecordedInterval:
    """One settled interval of a soak trial (an ``interval`` record): soak time ``t_s``, in
    continuous trial ``segment``, and the DUT's compact monitor sample then."""

    key: str
    segment: int
    index: int
    t_s: float
    duration_s: float
    frames_sent: int
    frames_received: int
    load: LoadRecord
    kind: str = "soak"
    monitor: dict[str, Any] | None = None

    @classmethod
    def read(cls, rec: Mapping[str, Any]) -> RecordedInterval:
        key = from_dict(_Keyed, rec, partial=True).key
        try:
            iv = from_dict(cls, rec)
            iv.load.check()
        except (TypeError, ValueError, KeyError, AttributeError, NetrigError) as e:
            raise ResultError(f"resume: an interval record of soak trial {key} is damaged "
                              f"({type(e).__name__}: {e}); {_DAMAGED}") from None
        return iv

    @property
    def end_s(self) -> float:
        return self.t_s + self.duration_s

    @property
    def sample(self) -> CompactSample | None:
        return from_dict(CompactSample, self.monitor) if self.monitor else None


@dataclass(frozen=True)
class LogHeader:
    """The trial log's first line: the run's identity and configuration."""

    config: dict[str, Any] | None = None
    run_id: str | None = None
    started_at: str | None = None
    resumed: tuple[str, ...] = ()

    @classmethod
    def read(cls, header: Mapping[str, Any]) -> LogHeader:
        h = from_dict(cls, header, partial=True)
        return LogHeader(h.config if isinstance(h.config, dict) else None, h.run_id, h.started_at,
                         tuple(h.resumed or ()))


def read_log(out_dir: str | Path) -> tuple[LogHeader | None, list[RecordedTrial], list[RecordedInterval]]:
    """The trial log of the run in ``out_dir`` as types (migrated to the current schema): its header,
    trial records and soak interval records; ``ResultError`` naming the first damaged record."""
    raw_intervals: list[dict] = []
    header, trials = read_trial_log(out_dir, raw_intervals)
    return (LogHeader.read(header) if header is not None else None, [RecordedTrial.read(t) for t in trials],
            [RecordedInterval.read(r) for r in raw_intervals])


@dataclass(frozen=True)
class _Keyed:
    """What names a record in an error: its replay key."""

    key: str | None = None


def close(a: float | None, b: float | None) -> bool:
    """``a`` and ``b`` equal within rounding (both ``None`` is equal); ``TypeError`` for a value
    that is no number."""
    if a is None or b is None:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) \
            or not isinstance(b, (int, float)):
        raise TypeError(f"{a!r} is not a number")
    return abs(float(a) - float(b)) <= 1e-9 * max(abs(float(a)), abs(float(b)), 1e-12)
