"""Number formatting for report tables: every number with its unit."""
from __future__ import annotations

from typing import Any

from netrig.report.run_view import Stat, frame_size_label

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


def scaled(v: float, units: tuple[tuple[float, str], ...]) -> str:
    """``v`` with three significant digits in the largest unit it reaches (after rounding)."""
    for f, u in units:
        if abs(float(f"{v:.3g}")) >= f:
            return f"{float(f'{v / f:.3g}'):g}{u}"
    f, u = units[-1]
    return f"{float(f'{v / f:.3g}'):g}{u}"


SI = ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def si(v: float | None, unit: str = "") -> str:
    if v is None:
        return DASH
    return scaled(v, SI) + unit


def pct(v: float | None, digits: int = 1) -> str:
    return DASH if v is None else f"{v:.{digits}f} %"


def bps(v: float | None) -> str:
    if v is None:
        return DASH
    return scaled(v, ((1e9, " Gbit/s"), (1e6, " Mbit/s"), (1e3, " kbit/s"), (1.0, " bit/s")))


def ns(v: float | None) -> str:
    """Latency in the readable unit: ``850 ns``, ``68.2 µs``, ``4.23 ms``."""
    if v is None:
        return DASH
    return scaled(v, NS_UNITS)


NS_UNITS = ((1e9, " s"), (1e6, " ms"), (1e3, " µs"), (1.0, " ns"))


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
    if v is None:
        return DASH
    return scaled(v * 1e9, NS_UNITS)


def count(v: float | None) -> str:
    return DASH if v is None else f"{v:,.0f}"


def ratio_pct(v: float | None, base: float | None) -> str:
    """``v`` as % of ``base`` (e.g. ``78.4 %``)."""
    if v is None or not base:
        return DASH
    return f"{100 * v / base:.1f} %"
