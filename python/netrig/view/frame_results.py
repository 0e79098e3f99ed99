"""One frame size of a method's summary entry (``summary[].results[]``), its repetitions read back as
the method's own result type (``netrig.results.typed``), so that console rows, report sections, plots
and ratio tables read attributes mypy checks, not string keys.

    for fr in run.frame_results(METHOD_NAME, ThroughputResult):   # list[FrameResults[ThroughputResult]]
        fr.repetitions[0].lower_pps                                # a renamed field is a type error
        fr.stat("rate_pps"), fr.headline.fps, fr.flag_codes

A summary entry is the edge: its keys are read here once. Repetitions are read ``partial``ly (a
hand-made or cut-short document lacks fields a run always writes; they read as ``None``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from netrig.errors import ConfigError
from netrig.model import FrameSize, LineRate, rate_object
from netrig.results.typed import from_dict
from netrig.view.reading import Flag, LineRateInfo, finite, read_each, read_one

__all__ = ["finite", "Flag", "Spread", "Headline", "FrameResults", "line_rate_of", "read_frame_results",
           "StoredFrameResult", "SummaryEntry", "read_summary"]

R = TypeVar("R")


@dataclass(frozen=True)
class Spread:
    """A ``stats`` entry: min / median / max over repetitions (``None`` where none had a value)."""

    min: float | None = None
    median: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class Headline:
    """The rate headline of a frame size (``model.rate_object``): fps, % line rate, L1 and L2 bit/s."""

    fps: float | None = None
    pct_line_rate: float | None = None
    l1_bps: float | None = None
    l2_bps: float | None = None

    @classmethod
    def of(cls, fps: float, frame: FrameSize, line_rate: LineRate) -> Headline:
        """``fps`` the four ways at ``frame`` and ``line_rate``."""
        return cls(**rate_object(fps, frame, line_rate) or {})


@dataclass(frozen=True)
class FrameResults(Generic[R]):
    """A method's results at one frame size: its typed repetitions and their summary."""

    frame_size: Any
    repetitions: tuple[R, ...]
    stats: Mapping[str, Spread] = field(default_factory=dict)
    headline: Headline | None = None
    flags: tuple[Flag, ...] = ()
    complete: bool = True

    @property
    def flag_codes(self) -> set[str]:
        return {f.code for f in self.flags}

    def spread(self, key: str) -> Spread:
        """The ``stats`` entry of ``key`` (all ``None`` when the summary has none)."""
        return self.stats.get(key) or Spread()


class Measurable(Protocol):
    """A search's result that may have measured nothing (its ``not_measured``: why)."""

    @property
    def not_measured(self) -> str | None: ...


def not_measured(r: FrameResults[Any]) -> str | None:
    """Why one frame size has no answer at all: every repetition measured nothing, for one reason
    (a search whose every trial was the tester's); else ``None``."""
    reps: tuple[Measurable, ...] = r.repetitions
    reasons = {x.not_measured for x in reps}
    return reasons.pop() if len(reasons) == 1 and None not in reasons else None


def _frame(size: Any) -> FrameSize | None:
    try:
        return FrameSize.parse(size)
    except (ConfigError, TypeError, ValueError):
        return None  # the stack methods' "stack": their results carry no frame of their own


@dataclass(frozen=True)
class _Stored:
    """A ``summary[].results[]`` entry as stored, its parts read below."""

    frame_size: Any = None
    repetitions: Any = None
    stats: Any = None
    headline: Any = None
    flags: Any = None
    complete: Any = None

    @property
    def repetition_list(self) -> list[Mapping[str, Any]]:
        return [x for x in self.repetitions if isinstance(x, Mapping)] if isinstance(self.repetitions, list) else []

    @property
    def flag_list(self) -> tuple[Flag, ...]:
        return tuple(Flag(str(f.code) if f.code is not None else "", str(f.message) if f.message is not None else "")
                     for f in read_each(Flag, self.flags))


@dataclass(frozen=True)
class _StoredSpread:
    min: Any = None
    median: Any = None
    #: Older documents: a single value.
    value: Any = None
    max: Any = None

    @property
    def spread(self) -> Spread:
        return Spread(finite(self.min), finite(self.median if self.median is not None else self.value),
                      finite(self.max))


@dataclass(frozen=True)
class _LineRated:
    line_rate: Any = None


def line_rate_of(doc: Mapping[str, Any]) -> LineRate | None:
    """A result document's ``line_rate`` as the model's type (``None`` when it has none usable)."""
    lr = read_one(LineRateInfo, (read_one(_LineRated, doc) or _LineRated()).line_rate) or LineRateInfo()
    bps = lr.rate_bps
    try:
        return LineRate(bps=bps, source=lr.source if lr.source in ("interface", "config", "nominal") else "nominal",
                        interface=lr.interface if isinstance(lr.interface, str) else None) if bps else None
    except ConfigError:
        return None


def pooled(results: Sequence[FrameResults[R]]) -> FrameResults[R]:
    """Results at one frame size read as one: every repetition, every flag once, no stored summary
    (the readers summarise the repetitions afresh), complete when each was."""
    flags = {(f.code, f.message): f for r in results for f in r.flags}
    return FrameResults(results[0].frame_size, tuple(x for r in results for x in r.repetitions), {}, None,
                        tuple(flags.values()), all(r.complete for r in results))


def read_frame_results(result: Mapping[str, Any], cls: type[R], line_rate: LineRate | None = None) -> FrameResults[R]:
    """One ``summary[].results[]`` entry with its repetitions as ``cls``."""
    r = read_one(_Stored, result) or _Stored()
    frame = _frame(r.frame_size)
    reps = tuple(from_dict(cls, rep, partial=True, frame=frame, line_rate=line_rate) for rep in r.repetition_list)
    stats = {str(k): s.spread for k, v in (r.stats.items() if isinstance(r.stats, Mapping) else ())
             if (s := read_one(_StoredSpread, v)) is not None}
    head = read_one(Headline, r.headline)
    headline = Headline(*(finite(x) for x in (head.fps, head.pct_line_rate, head.l1_bps, head.l2_bps))) \
        if head is not None else None
    return FrameResults(r.frame_size, reps, stats, headline, r.flag_list, r.complete is not False)


@dataclass(frozen=True)
class StoredFrameResult:
    """One ``summary[].results[]`` entry as stored: its frame size, whether it completed, its
    repetitions (each read by its method's own type) and the stored object (flags are added to it)."""

    frame_size: Any
    complete: bool
    repetitions: tuple[Mapping[str, Any], ...]
    flag_codes: frozenset[str]
    stored: Mapping[str, Any] = field(compare=False, repr=False)


@dataclass(frozen=True)
class SummaryEntry:
    """One ``summary[]`` entry: a configured method, its place in the run, its parameters as stored,
    and its results per frame size."""

    method: str
    method_index: int
    label: str
    params: Mapping[str, Any]
    results: tuple[StoredFrameResult, ...]

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> SummaryEntry:
        e = read_one(_StoredEntry, d) or _StoredEntry()
        method, mi = str(e.method or ""), e.method_index
        results = tuple(StoredFrameResult(r.frame_size, r.complete is not False, tuple(r.repetition_list),
                                          frozenset(f.code for f in r.flag_list), stored)
                        for stored in (e.results if isinstance(e.results, list) else [])
                        if (r := read_one(_Stored, stored)) is not None)
        return cls(method, mi if isinstance(mi, int) and not isinstance(mi, bool) else 0, str(e.label or method),
                   e.params if isinstance(e.params, Mapping) else {}, results)


@dataclass(frozen=True)
class _StoredEntry:
    method: Any = None
    method_index: Any = None
    label: Any = None
    params: Any = None
    results: Any = None


def read_summary(summary: object) -> list[SummaryEntry]:
    """Every entry of a result document's ``summary`` (entries that are not objects are skipped)."""
    return [SummaryEntry.read(e) for e in summary if isinstance(e, Mapping)] if isinstance(summary, list) else []
