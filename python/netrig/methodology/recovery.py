"""RFC 2544 §26.5 system recovery: overload at 110 % of throughput, then 50 %; the time from the
switch until loss stops (resolution: one sampling interval)."""
from __future__ import annotations

from dataclasses import dataclass

from netrig.methodology.frames import FrameSize, LineRate
from netrig.methodology.measurer import Interval, Measurer, Phase
from netrig.methodology.stats import check


@dataclass(frozen=True)
class RecoveryParams:
    overload_pct: float = 110.0  # of throughput (capped at line rate)
    recovery_pct: float = 50.0  # of throughput
    overload_duration_s: float = 60.0
    recovery_duration_s: float = 60.0
    interval_s: float = 1.0
    throughput_from: int | None = None
    repetitions: int | None = None

    def __post_init__(self) -> None:
        check("overload_pct", self.overload_pct, lo=100, lo_open=True, hi=1000)
        check("recovery_pct", self.recovery_pct, lo=0, lo_open=True, hi=100)
        check("overload_duration_s", self.overload_duration_s, lo=0, lo_open=True)
        check("recovery_duration_s", self.recovery_duration_s, lo=0, lo_open=True)
        check("interval_s", self.interval_s, lo=0, lo_open=True, hi=self.recovery_duration_s)
        if self.throughput_from is not None:
            check("throughput_from", self.throughput_from, lo=0, integer=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class RecoveryResult:
    frame: FrameSize
    line_rate: LineRate
    throughput_pps: float
    overload_pps: float
    recovery_pps: float
    intervals: tuple[Interval, ...]
    switch_s: float
    valid: bool = True

    @property
    def recovery_time_s(self) -> float | None:
        """Start of the first recovery-phase interval after which no interval loses frames."""
        rec = [i for i in self.intervals if i.phase == 1]
        if not rec or rec[-1].frames_lost > 0:
            return None
        k = len(rec)
        while k > 0 and rec[k - 1].frames_lost == 0:
            k -= 1
        return rec[k].t_s - self.switch_s if k < len(rec) else None

    @property
    def recovered(self) -> bool:
        return self.recovery_time_s is not None

    @property
    def headline_pps(self) -> float | None:
        return None

    def stats_values(self) -> dict:
        return {"recovery_time_s": self.recovery_time_s}

    def to_dict(self) -> dict:
        return {"throughput_pps": self.throughput_pps, "overload_pps": self.overload_pps,
                "recovery_pps": self.recovery_pps, "recovery_time_s": self.recovery_time_s,
                "recovered": self.recovered, "valid": self.valid,
                "intervals": [i.to_dict() for i in self.intervals]}


def measure_recovery(measurer: Measurer, frame: FrameSize, line_rate: LineRate, throughput_pps: float,
                     params: RecoveryParams = RecoveryParams(), tag: str = "") -> RecoveryResult:
    overload = min(throughput_pps * params.overload_pct / 100, line_rate.fps(frame))
    recovery = max(throughput_pps * params.recovery_pct / 100, 1.0)
    phases = [Phase(overload, params.overload_duration_s), Phase(recovery, params.recovery_duration_s)]
    c = measurer.measure_phases(frame, phases, params.interval_s, tag=tag)
    return RecoveryResult(frame, line_rate, throughput_pps, overload, recovery, tuple(c.intervals or ()),
                          params.overload_duration_s, c.valid)
