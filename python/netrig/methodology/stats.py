"""Small statistics helpers: min / median / max over repetitions, quantiles."""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

from netrig.errors import ConfigError


def summarize(values: Iterable[float | None]) -> dict:
    """``{"min", "median", "max", "n"}`` of the non-null values (all ``None`` when there are none)."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"min": None, "median": None, "max": None, "n": 0}
    return {"min": min(vals), "median": statistics.median(vals), "max": max(vals), "n": len(vals)}


def median(values: Iterable[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return statistics.median(vals) if vals else None


def check(name: str, value: object, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
          hi_open: bool = False, integer: bool = False) -> None:
    """Validate a parameter (a finite number, or an integer); raise ``ConfigError(name, ...)`` naming
    the field."""
    if integer:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(name, f"must be an integer (got {value!r})")
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(name, f"must be a number (got {value!r})")
    elif not math.isfinite(value):
        raise ConfigError(name, f"must be a finite number (got {value})")
    if lo is not None and (value <= lo if lo_open else value < lo):
        raise ConfigError(name, f"must be {'>' if lo_open else '>='} {lo} (got {value})")
    if hi is not None and (value >= hi if hi_open else value > hi):
        raise ConfigError(name, f"must be {'<' if hi_open else '<='} {hi} (got {value})")

