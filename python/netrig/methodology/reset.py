"""RFC 2544 §26.6 reset: time from the last frame forwarded before a DUT reset (a user command) to
the first one after, at a constant rate (estimated as frames lost / offered rate)."""
from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from typing import Callable

from netrig.errors import ConfigError, MethodologyError
from netrig.methodology.frames import FrameSize, LineRate
from netrig.methodology.measurer import Load, Measurer
from netrig.methodology.stats import check


@dataclass(frozen=True)
class ResetParams:
    command: str = ""
    rate_pct: float = 100.0  # of throughput
    duration_s: float = 60.0
    reset_after_s: float | None = None  # default: min(10 s, duration_s / 2)
    command_timeout_s: float = 60.0
    throughput_from: int | None = None
    repetitions: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.command, str):
            raise ConfigError("command", f"must be a string (got {self.command!r})")
        check("rate_pct", self.rate_pct, lo=0, lo_open=True, hi=100)
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        if self.reset_after_s is None:
            object.__setattr__(self, "reset_after_s", min(10.0, self.duration_s / 2))
        check("reset_after_s", self.reset_after_s, lo=0, hi=self.duration_s, hi_open=True)
        check("command_timeout_s", self.command_timeout_s, lo=0, lo_open=True)
        if self.throughput_from is not None:
            check("throughput_from", self.throughput_from, lo=0, integer=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class ResetResult:
    rate_pps: float
    reset_time_s: float | None
    frames_lost: int

    @property
    def headline_pps(self) -> float | None:
        return None

    def stats_values(self) -> dict:
        return {"reset_time_s": self.reset_time_s}

    def to_dict(self) -> dict:
        return {"rate_pps": self.rate_pps, "reset_time_s": self.reset_time_s, "frames_lost": self.frames_lost}


def command_runner(command: str, timeout_s: float) -> Callable[[], None]:
    """A callable that runs the user's reset command (no shell) and raises on failure."""
    argv = shlex.split(command)
    if not argv:
        raise ConfigError("rfc2544_reset.command", "is required: the command that resets the DUT")

    def run() -> None:
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise MethodologyError(f"reset command {command!r} failed: {e}") from None
        if p.returncode != 0:
            raise MethodologyError(f"reset command {command!r} exited {p.returncode}: {p.stderr.strip()[:200]}")

    return run


def measure_reset(measurer: Measurer, frame: FrameSize, line_rate: LineRate, throughput_pps: float,
                  params: ResetParams, reset: Callable[[], None] | None = None) -> ResetResult:
    rate = max(throughput_pps * params.rate_pct / 100, 1.0)
    fn = reset or command_runner(params.command, params.command_timeout_s)
    c = measurer.measure_reset(Load(rate, frame), params.duration_s, fn, params.reset_after_s)
    return ResetResult(rate, c.reset_time_s, c.frames_lost)
