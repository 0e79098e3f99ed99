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

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from netrig.errors import ConfigError
from netrig.model import FrameSize, LineRate, rate_object
from netrig.results.typed import from_dict

R = TypeVar("R")


def finite(v: Any) -> float | None:
    """``v`` as a float if it is a finite number (not a bool), else ``None``: what a report shows."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


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
class Flag:
    code: str
    message: str = ""


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


def _frame(size: Any) -> FrameSize | None:
    try:
        return FrameSize.parse(size)
    except (ConfigError, TypeError, ValueError):
        return None  # the stack methods' "stack": their results carry no frame of their own


def _obj(d: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    v = d.get(key)
    return v if isinstance(v, Mapping) else {}


def _objs(d: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    v = d.get(key)
    return [x for x in v if isinstance(x, Mapping)] if isinstance(v, list) else []


def line_rate_of(doc: Mapping[str, Any]) -> LineRate | None:
    """A result document's ``line_rate`` as the model's type (``None`` when it has none usable)."""
    lr = _obj(doc, "line_rate")
    bps = finite(lr.get("bps", lr.get("speed_bps")))
    source = lr.get("source")
    try:
        return LineRate(bps=bps, source=source if source in ("interface", "config", "nominal") else "nominal",
                        interface=lr.get("interface")) if bps else None
    except ConfigError:
        return None


def read_frame_results(result: Mapping[str, Any], cls: type[R], line_rate: LineRate | None = None) -> FrameResults[R]:
    """One ``summary[].results[]`` entry with its repetitions as ``cls``."""
    size = result.get("frame_size")
    frame = _frame(size)
    reps = tuple(from_dict(cls, rep, partial=True, frame=frame, line_rate=line_rate)
                 for rep in _objs(result, "repetitions"))
    stats = {str(k): Spread(finite(v.get("min")), finite(v.get("median", v.get("value"))), finite(v.get("max")))
             for k, v in _obj(result, "stats").items() if isinstance(v, Mapping)}
    head = result.get("headline")
    headline = Headline(*(finite(head.get(k)) for k in ("fps", "pct_line_rate", "l1_bps", "l2_bps"))) \
        if isinstance(head, Mapping) else None
    flags = tuple(Flag(str(f.get("code", "")), str(f.get("message", ""))) for f in _objs(result, "flags"))
    return FrameResults(size, reps, stats, headline, flags, result.get("complete") is not False)


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
        method, mi = str(d.get("method") or ""), d.get("method_index")
        results = tuple(StoredFrameResult(r.get("frame_size"), r.get("complete") is not False,
                                          tuple(_objs(r, "repetitions")),
                                          frozenset(str(f.get("code", "")) for f in _objs(r, "flags")), r)
                        for r in _objs(d, "results"))
        return cls(method, int(mi) if isinstance(mi, int) else 0, str(d.get("label") or method), _obj(d, "params"),
                   results)


def read_summary(summary: object) -> list[SummaryEntry]:
    """Every entry of a result document's ``summary`` (entries that are not objects are skipped)."""
    return [SummaryEntry.read(e) for e in summary if isinstance(e, Mapping)] if isinstance(summary, list) else []
