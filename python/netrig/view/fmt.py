"""Number formatting for report tables: every number with its unit, ``—`` for nothing.

The unit scaling itself is the model's (``netrig.model.units``); this module adds what tables
need around it: a dash for missing values, thousands separators, and a repetitions' range.
"""
from __future__ import annotations

from typing import Any

from netrig.model import format_bps, format_ns, format_seconds, format_si
from netrig.view.frame_results import FrameResults
from netrig.view.run_view import Stat, frame_size_label

DASH = "—"


def size(s: Any) -> str:
    lab = frame_size_label(s)
    return f"{lab} B" if lab.isdigit() else lab


def fps(v: float | None) -> str:
    return DASH if v is None else f"{v:,.0f} fps"


def fps_stat(s: Stat | None) -> str:
    """``575,474 fps (564k–587k)``: median with the repetitions' range."""
    if s is None:
        return DASH
    out = fps(s.value)
    if s.spread:
        out += f" ({si(s.lo)}–{si(s.hi)})"
    return out


def at_least(text: str, bounded: bool) -> str:
    """``≥ 545,454 fps (tester-limited)`` for a result the tester, not the DUT, bounded."""
    return f"≥ {text} (tester-limited)" if bounded and text != DASH else text


def not_measured(why: str) -> str:
    """``not measured: the tester could not send any load`` for a search that measured nothing."""
    return f"not measured: {why}"


def si(v: float | None, unit: str = "") -> str:
    return DASH if v is None else format_si(v, unit)


def pct(v: float | None, digits: int = 1) -> str:
    return DASH if v is None else f"{v:.{digits}f} %"


def bps(v: float | None) -> str:
    return DASH if v is None else format_bps(v)


def ns(v: float | None) -> str:
    """Latency in the readable unit: ``850 ns``, ``68.2 µs``, ``4.23 ms``."""
    return DASH if v is None else format_ns(v)


def ns_stat(s: Stat | None) -> str:
    """``68.2 µs (66.5–69.9)``: median with the repetitions' range (unit given once if shared)."""
    if s is None:
        return DASH
    out = ns(s.value)
    if s.spread:
        lo, hi = ns(s.lo), ns(s.hi)
        unit = out.split(" ")[-1]
        if lo.endswith(" " + unit) and hi.endswith(" " + unit):
            lo, hi = lo[: -len(unit) - 1], hi[: -len(unit) - 1]
        out += f" ({lo}–{hi})"
    return out


def when(s: object) -> str:
    """``2026-11-21T21:02:11.000000Z`` → ``2026-11-21 21:02:11 UTC``."""
    if not isinstance(s, str):
        return DASH
    t = s.replace("T", " ")
    if t.endswith("Z"):
        t = t[:-1].split(".")[0] + " UTC"
    return t


def seconds(v: float | None) -> str:
    return DASH if v is None else format_seconds(v)


def count(v: float | None) -> str:
    return DASH if v is None else f"{v:,.0f}"


def ratio_pct(v: float | None, base: float | None) -> str:
    """``v`` as % of ``base`` (e.g. ``78.4 %``)."""
    if v is None or not base:
        return DASH
    return f"{100 * v / base:.1f} %"


def stat_seconds_row(result: FrameResults[Any], key: str, flags: str) -> list[str]:
    """A console row of a time statistic: frame size, median and min–max in seconds, flags."""
    v = result.spread(key)

    def s(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f} s"

    return [size(result.frame_size), s(v.median), f"{s(v.min)}–{s(v.max)}", flags]
