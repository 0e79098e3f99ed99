"""Reading a stored result document into types, tolerantly (reports draw what a document has and
say what it lacks): a part that is missing or not an object reads as ``None``, a list of them as
empty (entries that are not objects are left out), a field that is missing as ``None``; a number a
report computes with is checked finite where it is used (:func:`finite`)."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from netrig.errors import ResultError
from netrig.results.typed import from_dict

T = TypeVar("T")


def finite(v: Any) -> float | None:
    """``v`` as a float if it is a finite number (not a bool), else ``None``: what a report shows."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def read_one(cls: type[T], v: object) -> T | None:
    """``v`` as ``cls`` when it is an object (a field it lacks is ``None``), else ``None``."""
    if not isinstance(v, Mapping):
        return None
    try:
        return from_dict(cls, v, partial=True)
    except (ResultError, TypeError, ValueError):
        return None


def read_each(cls: type[T], v: object) -> tuple[T, ...]:
    """Every entry of the list ``v`` that is an object, as ``cls``."""
    if not isinstance(v, list):
        return ()
    return tuple(x for x in (read_one(cls, e) for e in v) if x is not None)


@dataclass(frozen=True)
class Flag:
    """A flag of a result or of the run: its code and what it says."""

    code: str
    message: str = ""


@dataclass(frozen=True)
class LineRateInfo:
    """``line_rate``: bit/s (``bps``; ``speed_bps`` in older documents), where it came from
    (``source``, ``interface``), a label."""

    bps: Any = None
    speed_bps: Any = None
    label: Any = None
    source: Any = None
    interface: Any = None

    @property
    def rate_bps(self) -> float | None:
        v = finite(self.bps)
        v = v if v is not None else finite(self.speed_bps)
        return v if v and v > 0 else None
