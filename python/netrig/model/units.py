"""Values with units, as typed on the command line and in config files, and as printed.

Parsing (every parser raises ``ConfigError(field, message)`` naming the field it was given, with an
example of a valid value; NaN and infinities are refused everywhere):

* durations: ``10s``, ``500ms``, ``250us``, ``2m``/``2min``, ``1h``; a plain number is seconds;
* rates: ``100kpps``, ``1.5Mpps``, ``20 kfps``, ``1e6`` (frames/s), ``10Gbps`` / ``10Gbit/s``
  (layer-1 bit/s, the RFC 2544 convention: the 20 bytes of preamble and inter-frame gap count),
  ``10Gbps-l2`` (layer-2 bit/s, frame bytes only), ``50%`` (of the line rate), ``80%NDR`` (of the
  DUT's no-drop rate, where a method measures or is given it), ``max``;
* link speeds: ``10G``, ``10Gbit/s``, ``100M``, ``1e10`` (bit/s);
* counts: ``1000``, ``10k``, ``1M``.

Limits (the engine's, defined once there): a duration, warm-up or gap at most
:data:`MAX_DURATION_S` (one week), a drain or late threshold at most :data:`MAX_DRAIN_S` (a
minute), a rate at most :data:`MAX_RATE_PPS` frames/s or :data:`MAX_RATE_BPS` bit/s (also the
highest link speed), a count at most :data:`MAX_FRAMES`. Beyond them a value is a typo or an
overflow, never a test; the error names the field and the limit.

Formatting: three significant digits in the largest unit the value reaches *after* rounding
(``999.6e6`` bit/s is ``1 Gbit/s``, not ``1e+03 Mbit/s``).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal

from netrig import _native
from netrig.errors import ConfigError

#: Preamble (7) + start-of-frame delimiter (1) + inter-frame gap (12): bytes on the wire per frame
#: beyond the frame itself (methodology §1). Defined by the engine.
WIRE_OVERHEAD_BYTES: int = _native.WIRE_OVERHEAD_BYTES

#: Longest trial duration, warm-up or gap between bursts, seconds (one week).
MAX_DURATION_S: float = _native.MAX_DURATION_S
#: Longest drain after a trial (and late threshold), seconds.
MAX_DRAIN_S: float = _native.MAX_DRAIN_S
#: Highest rate of one stream, frames/s.
MAX_RATE_PPS: float = _native.MAX_RATE_PPS
#: Highest rate of one stream in bit/s, and the highest link speed.
MAX_RATE_BPS: float = _native.MAX_RATE_BPS
#: Most frames one stream may be asked for.
MAX_FRAMES: int = _native.MAX_FRAMES
#: Durations with a tighter limit than :data:`MAX_DURATION_S`, by field name.
_DURATION_LIMITS = {"drain_s": MAX_DRAIN_S, "late_s": MAX_DRAIN_S, "--drain": MAX_DRAIN_S, "--late": MAX_DRAIN_S}


def duration_limit(field: str) -> float:
    """The longest value the duration ``field`` (``drain_s``, ``trial.duration_s`` …) may take."""
    return _DURATION_LIMITS.get(field.rsplit(".", 1)[-1], MAX_DURATION_S)


def _seconds_text(s: float) -> str:
    return f"{s:g} s" + (" (one week)" if s == 604_800 else "")


_SI = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_NUM = r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)"
_RATE_RE = re.compile(rf"^\s*{_NUM}\s*([kmgt]?)\s*(pps|fps|bps|bit/s|b/s|%\s*ndr|%)?\s*(-l[12])?\s*$", re.I)
_DUR_RE = re.compile(rf"^\s*{_NUM}\s*(ns|us|µs|ms|s|sec|m|min|h)?\s*$", re.I)
_DUR_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "": 1.0, "m": 60.0,
             "min": 60.0, "h": 3600.0}
_SPEED_RE = re.compile(rf"^\s*{_NUM}\s*([kmgt]?)\s*(?:bit/s|bps|b/s|b)?\s*$", re.I)
_COUNT_RE = re.compile(rf"^\s*{_NUM}\s*([kmg]?)\s*$", re.I)


def _number(value: object, field: str, what: str, example: str) -> float | None:
    """A finite number from an int/float (``None`` for a string, which the caller parses)."""
    if isinstance(value, bool):
        raise ConfigError(field, f"{value!r} is not {what} (e.g. {example})")
    if isinstance(value, (int, float)):
        v = float(value)
        if not math.isfinite(v):
            raise ConfigError(field, f"must be a finite number (got {value!r})")
        return v
    if not isinstance(value, str):
        raise ConfigError(field, f"{value!r} is not {what} (e.g. {example})")
    return None


def parse_duration(value: object, field: str = "duration", *, allow_zero: bool = False,
                   max_s: float | None = None) -> float:
    """Seconds from ``10s``, ``500ms``, ``2m``, ``1h`` or a number of seconds; must be > 0 (or
    >= 0 with ``allow_zero``) and at most ``max_s`` (default: :func:`duration_limit` of ``field``)."""
    s = _number(value, field, "a duration", "10s, 500ms, 2m")
    if s is None:
        m = _DUR_RE.match(str(value))
        if not m:
            raise ConfigError(field, f"must be a duration like 2s or 500ms (got {value!r})")
        s = float(m.group(1)) * _DUR_UNIT[(m.group(2) or "").lower()]
    if not math.isfinite(s):
        raise ConfigError(field, f"must be a finite duration (got {value!r})")
    if s < 0 or (s == 0 and not allow_zero):
        raise ConfigError(field, f"must be {'>=' if allow_zero else '>'} 0 (got {value!r})")
    limit = duration_limit(field) if max_s is None else max_s
    if s > limit:
        raise ConfigError(field, f"{value!r} is above the limit of {_seconds_text(limit)}")
    return s


RateKind = Literal["pps", "l1_bps", "l2_bps", "percent_line", "percent_ndr", "max"]
#: What each kind of rate is written as (``Rate.__str__`` of a rate built from numbers).
_RATE_UNITS: dict[str, str] = {"pps": "pps", "l1_bps": "bps", "l2_bps": "bps-l2", "percent_line": "%",
                               "percent_ndr": "%NDR"}


@dataclass(frozen=True)
class Rate:
    """An intended rate as given: frames/s, layer-1 or layer-2 bit/s, % of the line rate, % of the
    DUT's NDR, or ``max`` (as fast as the tester can). ``value`` is ``None`` only for ``max``;
    ``text`` is how it was written (``"1.5Mpps"``; empty for a rate built from numbers)."""

    kind: RateKind
    value: float | None = None
    text: str = field(default="", compare=False)

    def __str__(self) -> str:
        if self.text:
            return self.text
        return "max" if self.value is None else f"{self.value:g}{_RATE_UNITS[self.kind]}"

    def frames_per_second(self, field: str) -> float:
        """The rate, which must be given in frames/s (a capacity, an NDR, a top rate); another kind is
        refused naming ``field``."""
        if self.kind != "pps" or self.value is None:
            raise ConfigError(field, f"{self}: give it in frames/s, e.g. 250kpps or 250000")
        return self.value

    def pps(self, mean_frame_size: float, line_rate_bps: float | None = None) -> float | None:
        """Frames/s at this mean frame size (``None`` for ``max``, % without a line rate, and % of
        an NDR, which only the method that knows the NDR converts)."""
        v = self.value
        if v is None or self.kind == "percent_ndr":
            return None
        if self.kind == "pps":
            return v
        if self.kind == "l1_bps":
            return _native.line_rate_fps(v, mean_frame_size)
        if self.kind == "l2_bps":
            return v / (mean_frame_size * 8)
        if line_rate_bps is None:
            return None
        return _native.line_rate_fps(v / 100 * line_rate_bps, mean_frame_size)


def parse_rate(value: object, field: str = "rate") -> Rate:
    """A :class:`Rate` from ``100kpps``, ``1Gbps``, ``1Gbps-l2``, ``50%``, ``80%NDR``, ``max`` or a
    number (fps)."""
    if isinstance(value, str) and value.strip().lower() == "max":
        return Rate("max", text=value.strip())
    v = _number(value, field, "a rate", "100kpps, 1Gbps, 50%")
    kind: RateKind = "pps"
    if v is None:
        m = _RATE_RE.match(str(value))
        if not m:
            raise ConfigError(field, f"{value!r} is not a rate: use e.g. 100kpps, 1.5Mpps, 10Gbps, 10Gbps-l2 or 50%")
        num, prefix, unit, layer = m.groups()
        unit = re.sub(r"\s", "", unit or "pps").lower()
        if unit.startswith("%") and prefix:
            raise ConfigError(field, f"{value!r}: a percentage takes no prefix (e.g. 50%)")
        v = float(num) * _SI[prefix.lower()]
        if unit in ("pps", "fps"):
            kind = "pps"
        elif unit == "%":
            kind = "percent_line"
        elif unit == "%ndr":
            kind = "percent_ndr"
        else:
            kind = "l2_bps" if (layer or "").lower() == "-l2" else "l1_bps"
        if layer and kind in ("pps", "percent_line", "percent_ndr"):
            raise ConfigError(field, f"{value!r}: -l1/-l2 only applies to bit rates (e.g. 10Gbps-l2)")
    if not math.isfinite(v):
        raise ConfigError(field, f"must be a finite rate (got {value!r})")
    if not v > 0:
        raise ConfigError(field, f"must be > 0 (got {value!r})")
    if kind == "percent_line" and v > 100:
        raise ConfigError(field, f"{value!r} is above 100 % of the line rate")
    if kind == "percent_ndr" and v > 100:
        raise ConfigError(field, f"{value!r}: a share of the NDR must be > 0 and <= 100 %")
    if kind == "pps" and v > MAX_RATE_PPS:
        raise ConfigError(field, f"{value!r} is above the limit of {MAX_RATE_PPS:g} frames/s per stream")
    if kind in ("l1_bps", "l2_bps") and v > MAX_RATE_BPS:
        raise ConfigError(field, f"{value!r} is above the limit of {MAX_RATE_BPS:g} bit/s (10 Tbit/s) per stream")
    return Rate(kind, v, value.strip() if isinstance(value, str) else "")


def parse_speed(value: object, field: str = "speed") -> float:
    """A link speed in bit/s from ``10G``, ``10Gbit/s``, ``100M`` or a number; must be > 0."""
    v = _number(value, field, "a speed", "10G, 1e10")
    if v is None:
        m = _SPEED_RE.match(str(value))
        if not m:
            raise ConfigError(field, f"must be a speed like 10G or 1e10 (got {value!r})")
        v = float(m.group(1)) * _SI[m.group(2).lower()]
    if not (math.isfinite(v) and v > 0):
        raise ConfigError(field, f"must be > 0 (got {value!r})")
    if v > MAX_RATE_BPS:
        raise ConfigError(field, f"{value!r} is above the limit of {MAX_RATE_BPS:g} bit/s (10 Tbit/s)")
    return v


def parse_count(value: object, field: str) -> int:
    """A count with optional k/M/G suffix: ``1M`` = 1,000,000; must be > 0."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        m = _COUNT_RE.match(str(value)) if isinstance(value, str) else None
        if not m:
            raise ConfigError(field, f"{value!r} is not a count (e.g. 1000, 10k, 1M)")
        x = float(m.group(1)) * _SI[m.group(2).lower()]
        if not math.isfinite(x) or x > MAX_FRAMES:
            raise ConfigError(field, f"{value!r} is above the limit of {MAX_FRAMES:g}")
        n = int(round(x))
    if n <= 0:
        raise ConfigError(field, f"must be > 0 (got {value!r})")
    if n > MAX_FRAMES:
        raise ConfigError(field, f"{value!r} is above the limit of {MAX_FRAMES:g}")
    return n


def cpu_list(text: str, field: str = "dut_cpus") -> tuple[int, ...]:
    """``"1"``, ``"0-1"``, ``"0,2-3"`` → sorted CPU numbers (the syntax of a CPU list; errors name ``field``)."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        m = re.match(r"^(\d+)(?:-(\d+))?$", part)
        if not m:
            raise ConfigError(field, f"{text!r}: not a CPU list; use e.g. 1, 0-1 or 0,1")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ConfigError(field, f"{text!r}: range {part} is backwards")
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


# --------------------------------------------------------------------------------------------- #
# Formatting

SI_PREFIXES = ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
BPS_UNITS = ((1e12, " Tbit/s"), (1e9, " Gbit/s"), (1e6, " Mbit/s"), (1e3, " kbit/s"), (1.0, " bit/s"))
FPS_UNITS = ((1e9, " Gfps"), (1e6, " Mfps"), (1e3, " kfps"), (1.0, " fps"))
NS_UNITS = ((1e9, " s"), (1e6, " ms"), (1e3, " µs"), (1.0, " ns"))


def scaled(v: float, units: tuple[tuple[float, str], ...]) -> str:
    """``v`` with three significant digits in the largest unit it reaches after rounding."""
    for f, u in units:
        if abs(float(f"{v:.3g}")) >= f:
            return f"{float(f'{v / f:.3g}'):g}{u}"
    f, u = units[-1]
    return f"{float(f'{v / f:.3g}'):g}{u}"


def format_si(v: float, unit: str = "") -> str:
    """``1234567`` → ``1.23M`` (+ ``unit``)."""
    return scaled(v, SI_PREFIXES) + unit


def format_bps(bps: float) -> str:
    """``1.23 Gbit/s``."""
    return scaled(bps, BPS_UNITS)


def format_pps(pps: float) -> str:
    """``1.23 Mfps``."""
    return scaled(pps, FPS_UNITS)


def scaled_range(lo: float, hi: float, units: tuple[tuple[float, str], ...]) -> str:
    """``lo–hi`` in their readable units, the unit once when both ends share it: ``24.9–25.1 kfps``,
    ``980 kfps–1.02 Mfps``."""
    a, b = scaled(lo, units), scaled(hi, units)
    (na, ua), (nb, ub) = a.split(" ", 1), b.split(" ", 1)
    return f"{na}–{nb} {ua}" if ua == ub else f"{a}–{b}"


def format_pps_range(lo: float, hi: float) -> str:
    """``24.9–25.1 kfps``: a spread of rates (repetitions' min–max)."""
    return scaled_range(lo, hi, FPS_UNITS)


def format_ns_range(lo: float, hi: float) -> str:
    """``9.8–10.1 µs``: a spread of latencies."""
    return scaled_range(lo, hi, NS_UNITS)


def format_ns(ns: float) -> str:
    """A latency in its readable unit: ``850 ns``, ``68.2 µs``, ``4.23 ms``."""
    return scaled(ns, NS_UNITS)


def format_seconds(s: float) -> str:
    """A time in its readable unit: ``1.5 s``, ``12 ms``."""
    return scaled(s * 1e9, NS_UNITS)
