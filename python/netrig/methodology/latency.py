"""RFC 2544 §26.2 latency at the throughput rate, reported the RFC 8219 way.

RFC 2544 tags one frame per 120 s trial and repeats 20 times. netrig timestamps every frame, so
each trial gives a whole distribution; over the ``trials`` repetitions of the RFC procedure we
report *typical* latency = median of the per-trial medians and *worst case* = median of the
per-trial 99.9th percentiles (RFC 8219 §7.3), plus PDV and IPDV (medians of per-trial values).
"""
from __future__ import annotations

from dataclasses import dataclass

from netrig.methodology.frames import FrameSize, LineRate, rate_object
from netrig.methodology.measurer import LatencySummary, Load, Measurer
from netrig.methodology.stats import check, median


@dataclass(frozen=True)
class LatencyParams:
    duration_s: float = 120.0
    trials: int = 20
    rate_pct: float = 100.0  # percent of the throughput rate
    throughput_from: int | None = None
    repetitions: int | None = None

    def __post_init__(self) -> None:
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        check("trials", self.trials, lo=1, integer=True)
        check("rate_pct", self.rate_pct, lo=0, lo_open=True, hi=1000)
        if self.throughput_from is not None:
            check("throughput_from", self.throughput_from, lo=0, integer=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class LatencyResult:
    frame: FrameSize
    line_rate: LineRate
    rate_pps: float
    per_trial: tuple[LatencySummary, ...]
    invalid_trials: int = 0

    def _med(self, attr: str) -> float | None:
        return median(getattr(t, attr) for t in self.per_trial)

    @property
    def typical_ns(self) -> float | None:
        return self._med("p50_ns")

    @property
    def worst_case_ns(self) -> float | None:
        return self._med("p999_ns")

    @property
    def rate(self) -> dict | None:
        return rate_object(self.rate_pps, self.frame, self.line_rate)

    @property
    def headline_pps(self) -> float | None:
        return self.rate_pps

    def stats_values(self) -> dict:
        return {"typical_ns": self.typical_ns, "worst_case_ns": self.worst_case_ns}

    def to_dict(self) -> dict:
        return {
            "rate_pps": self.rate_pps, "rate": self.rate,
            "per_trial": [t.to_dict() for t in self.per_trial],
            "typical_ns": self.typical_ns, "worst_case_ns": self.worst_case_ns,
            "min_ns": min((t.min_ns for t in self.per_trial if t.min_ns is not None), default=None),
            "mean_ns": self._med("mean_ns"),
            "max_ns": max((t.max_ns for t in self.per_trial if t.max_ns is not None), default=None),
            "pdv_ns": self._med("pdv_ns"), "ipdv_ns": self._med("ipdv_ns"),
            "invalid_trials": self.invalid_trials,
        }


def measure_latency(measurer: Measurer, frame: FrameSize, line_rate: LineRate, throughput_pps: float,
                    params: LatencyParams = LatencyParams()) -> LatencyResult:
    rate = max(throughput_pps * params.rate_pct / 100.0, 1.0)
    per_trial: list[LatencySummary] = []
    invalid = 0
    for _ in range(params.trials):
        counts = measurer.measure(Load(rate, frame), params.duration_s)
        if not counts.valid:
            invalid += 1
            continue
        if counts.latency is not None:
            per_trial.append(counts.latency)
    return LatencyResult(frame, line_rate, rate, tuple(per_trial), invalid)
