"""Parsing of values with units, as typed on the command line and in config files.

Rates: ``100kpps``, ``1.5Mpps``, ``1e6`` (frames/s), ``10Gbps`` / ``10Gbit/s`` (layer-1 bit/s, the
RFC 2544 convention: the 20 bytes of preamble and inter-frame gap count), ``10Gbps-l2`` (layer-2
bit/s, frame bytes only), ``50%`` (of the line rate). Durations: ``10s``, ``500ms``, ``2m``,
``1h``, plain numbers are seconds. Every parser raises ``ConfigError(field, message)`` naming the
field it was given, with an example of a valid value.
"""
from __future__ import annotations

import re

from netrig.errors import ConfigError

_SI = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_RATE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmgt]?)\s*(pps|fps|bps|bit/s|b/s|%)?\s*(-l[12])?\s*$", re.I)
_DUR_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(ns|us|ms|s|m|min|h)?\s*$", re.I)
_DUR_UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_rate(value: str | float | int, field: str = "rate") -> dict:
    """Parse a rate into the engine's form: ``{"pps": x}``, ``{"l1_bps": x}``, ``{"l2_bps": x}``
    or ``{"percent_line": x}``."""
    if isinstance(value, bool):
        raise ConfigError(field, f"{value!r} is not a rate (e.g. 100kpps, 1Gbps, 50%)")
    if isinstance(value, (int, float)):
        v = float(value)
        kind = "pps"
    else:
        m = _RATE_RE.match(str(value))
        if not m:
            raise ConfigError(field, f"{value!r} is not a rate: use e.g. 100kpps, 1.5Mpps, 10Gbps, 10Gbps-l2 or 50%")
        num, prefix, unit, layer = m.groups()
        unit = (unit or "pps").lower()
        if unit == "%" and prefix:
            raise ConfigError(field, f"{value!r}: a percentage takes no prefix (e.g. 50%)")
        v = float(num) * _SI[prefix.lower()]
        if unit in ("pps", "fps"):
            kind = "pps"
        elif unit == "%":
            kind = "percent_line"
        else:
            kind = "l2_bps" if (layer or "").lower() == "-l2" else "l1_bps"
        if layer and kind in ("pps", "percent_line"):
            raise ConfigError(field, f"{value!r}: -l1/-l2 only applies to bit rates (e.g. 10Gbps-l2)")
    if not v > 0:
        raise ConfigError(field, f"must be > 0 (got {value!r})")
    if kind == "percent_line" and v > 100:
        raise ConfigError(field, f"{value!r} is above 100 % of the line rate")
    return {kind: v}


def parse_duration(value: str | float | int, field: str = "duration") -> float:
    """Seconds from ``10s``, ``500ms``, ``2m``, ``1h`` or a number of seconds."""
    if isinstance(value, bool):
        raise ConfigError(field, f"{value!r} is not a duration (e.g. 10s, 500ms, 2m)")
    if isinstance(value, (int, float)):
        s = float(value)
    else:
        m = _DUR_RE.match(str(value))
        if not m:
            raise ConfigError(field, f"{value!r} is not a duration: use e.g. 10s, 500ms, 2m or 1h")
        s = float(m.group(1)) * _DUR_UNIT[(m.group(2) or "").lower()]
    if not s > 0:
        raise ConfigError(field, f"must be > 0 (got {value!r})")
    return s


def parse_count(value: str | int, field: str) -> int:
    """An integer count with optional k/M/G suffix: ``1M`` = 1,000,000."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        m = re.match(r"^\s*([0-9]*\.?[0-9]+)\s*([kmg]?)\s*$", str(value), re.I)
        if not m:
            raise ConfigError(field, f"{value!r} is not a count (e.g. 1000, 10k, 1M)")
        n = int(round(float(m.group(1)) * _SI[m.group(2).lower()]))
    if n <= 0:
        raise ConfigError(field, f"must be > 0 (got {value!r})")
    return n


#: Named frame-size mixes (methodology §1).
MIXES = {
    "imix": [(64, 57), (570, 7), (594, 16), (1518, 20)],
    "simple-imix": [(64, 7), (570, 4), (1518, 1)],
}

#: RFC 2544 standard frame sizes.
RFC2544_SIZES = (64, 128, 256, 512, 1024, 1280, 1518)


def parse_frame_size(value, field: str = "frame_size") -> dict:
    """Frame size in the engine's form. Accepts ``64``, ``"imix"``, ``"simple-imix"``,
    ``[(64, 7), (570, 4)]`` (weighted), ``"random:64-1518"``, ``("random", 64, 1518)``,
    ``"inc:64-1518:64"``, ``("increment", 64, 1518, 64)``."""
    def size(v) -> int:
        try:
            n = int(v)
        except (TypeError, ValueError):
            raise ConfigError(field, f"{v!r} is not a frame size in bytes") from None
        if n < 64:
            raise ConfigError(field, f"{n} B is below the Ethernet minimum of 64 B (sizes include the 4-byte FCS)")
        return n

    if isinstance(value, bool):
        raise ConfigError(field, f"{value!r} is not a frame size")
    if isinstance(value, int):
        return {"fixed": size(value)}
    if isinstance(value, str):
        v = value.strip().lower()
        if v in MIXES:
            return {"weighted": MIXES[v]}
        m = re.match(r"^random:(\d+)-(\d+)$", v)
        if m:
            return {"random": (size(m.group(1)), size(m.group(2)))}
        m = re.match(r"^inc(?:rement)?:(\d+)-(\d+)(?::(\d+))?$", v)
        if m:
            return {"increment": (size(m.group(1)), size(m.group(2)), int(m.group(3) or 1))}
        if v.isdigit():
            return {"fixed": size(v)}
        raise ConfigError(field, f"{value!r} is not a frame size: use a number of bytes (64), imix, simple-imix, "
                                 "random:64-1518 or inc:64-1518:64")
    if isinstance(value, tuple) and value and value[0] in ("random", "increment"):
        if value[0] == "random" and len(value) == 3:
            return {"random": (size(value[1]), size(value[2]))}
        if value[0] == "increment" and len(value) in (3, 4):
            return {"increment": (size(value[1]), size(value[2]), int(value[3]) if len(value) == 4 else 1)}
        raise ConfigError(field, f"{value!r}: use ('random', min, max) or ('increment', min, max, step)")
    if isinstance(value, (list, tuple)):
        pairs = []
        for item in value:
            try:
                s, w = item
            except (TypeError, ValueError):
                raise ConfigError(field, f"{item!r} in a weighted mix must be a (size, weight) pair") from None
            if int(w) < 0:
                raise ConfigError(field, f"weight {w} must be >= 0")
            pairs.append((size(s), int(w)))
        if not pairs or not any(w for _, w in pairs):
            raise ConfigError(field, "a weighted mix needs at least one size with a weight > 0")
        return {"weighted": pairs}
    raise ConfigError(field, f"{value!r} is not a frame size")


def mean_frame_size(spec: dict) -> float:
    """Mean size in bytes of an engine frame-size spec."""
    if "fixed" in spec:
        return float(spec["fixed"])
    if "weighted" in spec:
        tot = sum(w for _, w in spec["weighted"])
        return sum(s * w for s, w in spec["weighted"]) / tot
    if "random" in spec:
        lo, hi = spec["random"]
        return (lo + hi) / 2
    lo, hi, step = spec["increment"]
    sizes = list(range(lo, hi + 1, step))
    return sum(sizes) / len(sizes)


def line_rate_fps(speed_bps: float, frame_size: float) -> float:
    """Frames per second at line rate (methodology §1: 20 bytes of wire overhead per frame)."""
    return speed_bps / ((frame_size + 20) * 8)


def format_rate(pps: float) -> str:
    """``1.23 Mpps``-style text."""
    for div, unit in ((1e9, "Gpps"), (1e6, "Mpps"), (1e3, "kpps")):
        if pps >= div:
            return f"{pps / div:.3g} {unit}"
    return f"{pps:.3g} pps"


def format_bps(bps: float) -> str:
    for div, unit in ((1e12, "Tbit/s"), (1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bps >= div:
            return f"{bps / div:.3g} {unit}"
    return f"{bps:.3g} bit/s"
