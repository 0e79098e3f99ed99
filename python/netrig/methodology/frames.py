"""Frame sizes and frame-size mixes (IMIX presets), and the line rate in frames/s.

A frame size is the Ethernet frame *including* its 4-byte FCS (methodology §1). A mix is a list of
``(frame_size, weight)`` pairs; rates of a mix count frames of every size, and bit rates use the
weighted mean size.
"""
from __future__ import annotations

from dataclasses import dataclass

from netrig.errors import ConfigError

#: RFC 2544 §9 standard Ethernet frame sizes.
RFC2544_FRAME_SIZES: tuple[int, ...] = (64, 128, 256, 512, 1024, 1280, 1518)

#: Named mixes: ``name -> ((frame_size, weight), ...)``.
MIX_PRESETS: dict[str, tuple[tuple[int, int], ...]] = {
    "imix": ((64, 57), (570, 7), (594, 16), (1518, 20)),
    "simple-imix": ((64, 7), (570, 4), (1518, 1)),
}

#: Preamble (7) + start-of-frame delimiter (1) + inter-frame gap (12), bytes per frame.
WIRE_OVERHEAD_BYTES = 20
MIN_FRAME_SIZE = 64
MAX_FRAME_SIZE = 16384


@dataclass(frozen=True)
class FrameSize:
    """One tested frame size: a fixed size (``size``) or a named mix (``name`` + ``mix``)."""

    size: int | None = None
    name: str | None = None
    mix: tuple[tuple[int, int], ...] | None = None

    def __post_init__(self) -> None:
        if (self.size is None) == (self.mix is None):
            raise ConfigError("frame_size", "give either a size in bytes or a mix")
        if self.size is not None and not MIN_FRAME_SIZE <= self.size <= MAX_FRAME_SIZE:
            raise ConfigError(
                "frame_size",
                f"must be {MIN_FRAME_SIZE}..{MAX_FRAME_SIZE} bytes incl. FCS (got {self.size})",
            )

    @classmethod
    def parse(cls, value: int | str, field: str = "frame_size") -> "FrameSize":
        """Parse ``64``, ``"64"``, ``"imix"`` or ``"simple-imix"``."""
        if isinstance(value, FrameSize):
            return value
        if isinstance(value, bool):
            raise ConfigError(field, f"must be a size in bytes or one of {sorted(MIX_PRESETS)} (got {value!r})")
        if isinstance(value, int):
            try:
                return cls(size=value)
            except ConfigError as e:
                raise ConfigError(field, e.message) from None
        if isinstance(value, str):
            text = value.strip().lower()
            if text in MIX_PRESETS:
                return cls(name=text, mix=MIX_PRESETS[text])
            if text.isdigit():
                return cls.parse(int(text), field)
        raise ConfigError(
            field, f"must be a size in bytes (64..{MAX_FRAME_SIZE}) or one of {sorted(MIX_PRESETS)} (got {value!r})"
        )

    @property
    def label(self) -> int | str:
        """What results call it: the integer size, or the mix name."""
        return self.size if self.size is not None else self.name  # type: ignore[return-value]

    @property
    def mean_size(self) -> float:
        """Weighted mean frame size in bytes (incl. FCS)."""
        if self.size is not None:
            return float(self.size)
        assert self.mix is not None
        total = sum(w for _, w in self.mix)
        return sum(s * w for s, w in self.mix) / total

    @property
    def engine_spec(self):
        """The value to pass as ``Stream(frame_size=...)``."""
        if self.size is not None:
            return self.size
        return [(s, w) for s, w in self.mix]  # type: ignore[union-attr]

    def to_dict(self, line_rate: "LineRate | None" = None) -> dict:
        d = {
            "frame_size": self.label,
            "mean_frame_size": self.mean_size,
            "mix": [list(p) for p in self.mix] if self.mix else None,
        }
        if line_rate is not None:
            d["line_rate_fps"] = line_rate.fps(self)
        return d

    def __str__(self) -> str:
        return f"{self.size} B" if self.size is not None else str(self.name)


def parse_frame_sizes(value, field: str = "frames.sizes") -> tuple[FrameSize, ...]:
    """Parse ``"64,512,1518"``, ``"rfc"``, ``"imix"`` or a list into frame sizes."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("rfc", "rfc2544", "")):
        return tuple(FrameSize(size=s) for s in RFC2544_FRAME_SIZES)
    if isinstance(value, str):
        items: list = [v for v in value.replace(" ", "").split(",") if v]
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
        if not self.bps > 0:
            raise ConfigError("line_rate.bps", f"must be > 0 (got {self.bps})")
        if self.source not in ("interface", "config", "nominal"):
            raise ConfigError("line_rate.source", f"must be one of interface, config, nominal (got {self.source!r})")

    def fps(self, frame: FrameSize) -> float:
        """Maximum frames/s at this speed: ``bps / ((mean_size + 20) * 8)``."""
        return self.bps / ((frame.mean_size + WIRE_OVERHEAD_BYTES) * 8)

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


def format_bps(bps: float) -> str:
    for unit, div in (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= div:
            return f"{bps / div:.4g} {unit}"
    return f"{bps:.4g} bit/s"


def format_pps(pps: float) -> str:
    for unit, div in (("Mfps", 1e6), ("kfps", 1e3)):
        if pps >= div:
            return f"{pps / div:.4g} {unit}"
    return f"{pps:.4g} fps"
