"""Frame sizes, frame-size mixes, the line rate, and rates reported four ways.

A frame size is the Ethernet frame *including* its 4-byte FCS (methodology §1). A
:class:`FrameSize` is one of: a fixed size (``64``), a weighted mix (``imix``, ``simple-imix`` or
any ``(size, weight)`` pairs), uniformly random sizes in a range (``random:64-1518``) or sizes
counting up in steps (``inc:64-1518:64``). Rates of a distribution count frames of every size;
bit rates and line rate use its mean size. The engine defines the mixes, the RFC 2544 sizes and
the bounds, and validates every distribution (``_native.FrameSizeSpec``); this module parses the
ways users write them, names them, and takes the rest from the engine.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from netrig import _native
from netrig.errors import ConfigError
from netrig.model.units import WIRE_OVERHEAD_BYTES, format_bps

#: RFC 2544 §9 standard Ethernet frame sizes (bytes incl. FCS).
RFC2544_FRAME_SIZES: tuple[int, ...] = tuple(_native.RFC2544_FRAME_SIZES)
#: Named mixes: ``name -> ((frame_size, weight), ...)``.
MIXES: dict[str, tuple[tuple[int, int], ...]] = {k: tuple(v) for k, v in _native.FRAME_SIZE_MIXES.items()}
MIN_FRAME_SIZE: int = _native.MIN_FRAME_SIZE
MAX_FRAME_SIZE: int = _native.MAX_FRAME_SIZE
#: Bytes of a frame beyond what its MTU limits: the Ethernet header (14) and the FCS.
MTU_OVERHEAD_BYTES = 14 + _native.FCS_BYTES
#: Bytes an 802.1Q tag adds to the largest frame a port sends.
VLAN_TAG_BYTES = 4


def largest_frame(mtu: int, vlan_tags: int = 0) -> int:
    """The largest frame (incl. FCS) a port of ``mtu`` sends: MTU + 18, and 4 more per 802.1Q tag
    (the kernel's rule, which the engine applies when it opens the port)."""
    return mtu + MTU_OVERHEAD_BYTES + VLAN_TAG_BYTES * vlan_tags

__all__ = ["FrameSize", "LineRate", "MIXES", "RFC2544_FRAME_SIZES", "MIN_FRAME_SIZE", "MAX_FRAME_SIZE",
           "WIRE_OVERHEAD_BYTES", "largest_frame", "parse_frame_sizes", "rate_object", "size_label", "size_sort_key"]

_RANDOM_RE = re.compile(r"^random:(\d+)-(\d+)$")
_INC_RE = re.compile(r"^inc(?:rement)?:(\d+)-(\d+)(?::(\d+))?$")
_MIX_RE = re.compile(r"^mix:(\d+x\d+(?:\+\d+x\d+)*)$")
_ALLOWED = ("a size in bytes (64), a mix (imix, simple-imix, mix:64x7+570x4), random:64-1518 "
            "or inc:64-1518:64")


@dataclass(frozen=True)
class FrameSize:
    """One frame-size distribution; give exactly one of ``size``, ``mix``, ``random``, ``increment``.

    ``size``: a fixed size in bytes incl. FCS; ``mix``: ``(size, weight)`` pairs, with ``name`` when
    it is a named mix; ``random``: ``(min, max)``; ``increment``: ``(min, max, step)``.
    """

    size: int | None = None
    name: str | None = None
    mix: tuple[tuple[int, int], ...] | None = None
    random: tuple[int, int] | None = None
    increment: tuple[int, int, int] | None = None

    def __post_init__(self) -> None:
        given = [x is not None for x in (self.size, self.mix, self.random, self.increment)]
        if sum(given) != 1:
            raise ConfigError("frame_size", "give exactly one of a size, a mix, random or increment")
        # The engine checks the bounds too, but a size below 0 or beyond its integer type fails to
        # convert first, and the error gave that type's range instead of the frame sizes'.
        for size in self.sizes:
            if isinstance(size, int) and not isinstance(size, bool) and not MIN_FRAME_SIZE <= size <= MAX_FRAME_SIZE:
                raise ConfigError("frame_size", f"{size} B is out of range: frame sizes are {MIN_FRAME_SIZE}.."
                                                f"{MAX_FRAME_SIZE} bytes including the {_native.FCS_BYTES}-byte FCS")
        if self.increment is not None and isinstance(self.increment[2], int) and self.increment[2] < 1:
            raise ConfigError("frame_size", f"the increment step must be > 0 bytes (got {self.increment[2]})")
        self.spec()  # the engine validates: bounds, weights, min <= max, step > 0

    def spec(self) -> _native.FrameSizeSpec:
        """The engine's form (validated there; errors name ``frame_size``)."""
        if self.size is not None:
            return _native.FrameSizeSpec.fixed(self.size)
        if self.mix is not None:
            return _native.FrameSizeSpec.weighted(self.mix)
        if self.random is not None:
            return _native.FrameSizeSpec.random(*self.random)
        assert self.increment is not None
        return _native.FrameSizeSpec.increment(*self.increment)

    # ---------------------------------------------------------------- construction
    @classmethod
    def parse(cls, value: Any, field: str = "frame_size") -> FrameSize:
        """From ``64``, ``"64"``, ``"imix"``, ``"random:64-1518"``, ``"inc:64-1518:64"``,
        ``"mix:64x7+570x4"``, ``[(64, 7), (570, 4)]``, ``("random", 64, 1518)`` or
        ``("increment", 64, 1518, 64)``; errors name ``field``."""
        try:
            return cls._parse(value)
        except ConfigError as e:
            raise ConfigError(field, e.message) from None

    @classmethod
    def _parse(cls, value: Any) -> FrameSize:
        if isinstance(value, FrameSize):
            return value
        if isinstance(value, bool):
            raise ConfigError("frame_size", f"{value!r} is not a frame size: use {_ALLOWED}")
        if isinstance(value, int):
            return cls(size=value)
        if isinstance(value, str):
            v = value.strip().lower()
            if v in MIXES:
                return cls(name=v, mix=MIXES[v])
            if v.isdigit():
                return cls(size=int(v))
            if m := _RANDOM_RE.match(v):
                return cls(random=(int(m.group(1)), int(m.group(2))))
            if m := _INC_RE.match(v):
                return cls(increment=(int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)))
            if m := _MIX_RE.match(v):
                return cls(mix=tuple((int(a), int(b)) for a, b in (p.split("x") for p in m.group(1).split("+"))))
            raise ConfigError("frame_size", f"{value!r} is not a frame size: use {_ALLOWED}")
        if isinstance(value, tuple) and value and value[0] in ("random", "increment"):
            if value[0] == "random" and len(value) == 3:
                return cls(random=(value[1], value[2]))
            if value[0] == "increment" and len(value) in (3, 4):
                return cls(increment=(value[1], value[2], value[3] if len(value) == 4 else 1))
            raise ConfigError("frame_size", f"{value!r}: use ('random', min, max) or ('increment', min, max, step)")
        if isinstance(value, (list, tuple)):
            pairs = []
            for item in value:
                if not (isinstance(item, (list, tuple)) and len(item) == 2):
                    raise ConfigError("frame_size", f"{item!r} in a weighted mix must be a (size, weight) pair")
                pairs.append((item[0], item[1]))
            return cls(mix=tuple(pairs))
        raise ConfigError("frame_size", f"{value!r} is not a frame size: use {_ALLOWED}")

    # ---------------------------------------------------------------- properties
    @property
    def sizes(self) -> tuple[int, ...]:
        """The sizes it names: the size, the mix's sizes, or the range's bounds."""
        if self.size is not None:
            return (self.size,)
        if self.mix is not None:
            return tuple(s for s, _ in self.mix)
        if self.random is not None:
            return self.random
        assert self.increment is not None
        return self.increment[:2]

    @property
    def label(self) -> int | str:
        """What results call it: the integer size, or a name (``imix``, ``random:64-1518``…)."""
        if self.size is not None:
            return self.size
        if self.mix is not None:
            return self.name or "mix:" + "+".join(f"{s}x{w}" for s, w in self.mix)
        if self.random is not None:
            return f"random:{self.random[0]}-{self.random[1]}"
        assert self.increment is not None
        lo, hi, step = self.increment
        return f"inc:{lo}-{hi}:{step}"

    @property
    def mean_size(self) -> float:
        """Mean frame size in bytes (incl. FCS): what bit rates and the line rate use."""
        return self.spec().mean_size

    @property
    def max_size(self) -> int:
        return max(self.sizes)

    def to_dict(self, line_rate: LineRate | None = None) -> dict:
        """The result document's frame-size entry (``docs/result-format.md``)."""
        d: dict = {"frame_size": self.label, "mean_frame_size": self.mean_size,
                   "mix": [list(p) for p in self.mix] if self.mix else None}
        if line_rate is not None:
            d["line_rate_fps"] = line_rate.fps(self)
        return d

    def __str__(self) -> str:
        return f"{self.size} B" if self.size is not None else str(self.label)


def parse_frame_sizes(value: Any, field: str = "frames.sizes") -> tuple[FrameSize, ...]:
    """Parse ``"64,512,1518"``, ``"rfc"``, ``"imix"`` or a list into frame sizes (no duplicates)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("rfc", "rfc2544")):
        return tuple(FrameSize(size=s) for s in RFC2544_FRAME_SIZES)
    if isinstance(value, str):
        items: list = value.replace(" ", "").split(",")
        if not value.strip():
            raise ConfigError(field, "needs at least one frame size (e.g. 64,512,1518, rfc or imix)")
        if "" in items:
            raise ConfigError(field, f"{value!r} has an empty item: give sizes separated by single commas")
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    if not items:
        raise ConfigError(field, "needs at least one frame size")
    out = tuple(FrameSize.parse(v, f"{field}[{i}]") for i, v in enumerate(items))
    labels = [f.label for f in out]
    dups = sorted({str(x) for x in labels if labels.count(x) > 1})
    if dups:
        raise ConfigError(field, f"lists {', '.join(dups)} more than once")
    return out


@dataclass(frozen=True)
class LineRate:
    """The link speed rates are relative to.

    ``source`` is ``"interface"`` (read from the port), ``"config"`` (set by the user) or
    ``"nominal"`` (the interface has no speed, e.g. veth: a nominal speed is assumed).
    """

    bps: float
    source: str = "nominal"
    interface: str | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.bps, (int, float)) and math.isfinite(self.bps) and self.bps > 0):
            raise ConfigError("line_rate.bps", f"must be > 0 (got {self.bps})")
        if self.source not in ("interface", "config", "nominal"):
            raise ConfigError("line_rate.source", f"must be one of interface, config, nominal (got {self.source!r})")

    def fps(self, frame: FrameSize) -> float:
        """Maximum frames/s at this speed: ``bps / ((mean_size + 20) * 8)`` (the engine's formula)."""
        return _native.line_rate_fps(self.bps, frame.mean_size)

    @property
    def label(self) -> str:
        speed = format_bps(self.bps)
        if self.source == "nominal":
            return f"{speed} (nominal: {self.interface or 'the interface'} has no link speed)"
        if self.source == "config":
            return f"{speed} (configured)"
        return f"{speed} ({self.interface} link speed)"

    def to_dict(self) -> dict:
        return {"bps": self.bps, "source": self.source, "interface": self.interface, "label": self.label}


def rate_object(fps: float | None, frame: FrameSize, line_rate: LineRate) -> dict | None:
    """A rate reported the four ways (methodology §1): fps, % line rate, L1 and L2 bit/s."""
    if fps is None:
        return None
    return {
        "fps": float(fps),
        "pct_line_rate": 100.0 * fps / line_rate.fps(frame),
        "l1_bps": fps * (frame.mean_size + WIRE_OVERHEAD_BYTES) * 8,
        "l2_bps": fps * frame.mean_size * 8,
    }


def size_label(size: Any) -> str:
    """A result document's ``frame_size`` as text: ``64`` → ``"64"``; names stay names."""
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        return str(int(size)) if float(size).is_integer() else f"{size:g}"
    if isinstance(size, str):
        return size
    return "mix" if size is not None else "?"


def size_sort_key(size: Any) -> tuple:
    """Numeric sizes first in increasing order, then named distributions alphabetically."""
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        return (0, float(size), "")
    return (1, 0.0, size_label(size))
