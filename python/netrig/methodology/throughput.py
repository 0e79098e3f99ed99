"""RFC 2544 §26.1 throughput: the highest offered rate with zero loss, by binary search."""
from __future__ import annotations

from dataclasses import dataclass

from netrig.methodology.frames import FrameSize, LineRate, rate_object
from netrig.methodology.measurer import Load, Measurer
from netrig.methodology.stats import check


@dataclass(frozen=True)
class ThroughputParams:
    """``resolution_pct``: the search stops when the bracket is at most this % of line rate wide."""

    duration_s: float = 60.0
    resolution_pct: float = 0.1
    initial_rate_pct: float = 100.0
    min_rate_pct: float = 0.0
    max_rate_pct: float = 100.0
    acceptable_loss_ratio: float = 0.0
    repetitions: int | None = None

    def __post_init__(self) -> None:
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        check("resolution_pct", self.resolution_pct, lo=0, lo_open=True, hi=100)
        check("max_rate_pct", self.max_rate_pct, lo=0, lo_open=True, hi=1000)
        check("min_rate_pct", self.min_rate_pct, lo=0, hi=self.max_rate_pct, hi_open=True)
        check("initial_rate_pct", self.initial_rate_pct, lo=0, lo_open=True, hi=self.max_rate_pct)
        check("acceptable_loss_ratio", self.acceptable_loss_ratio, lo=0, hi=1, hi_open=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class ThroughputResult:
    frame: FrameSize
    line_rate: LineRate
    rate_pps: float
    lower_pps: float
    upper_pps: float | None
    trials: int
    tester_limited: bool
    tester_limit_pps: float | None
    resolution_pps: float
    found: bool

    @property
    def rate(self) -> dict | None:
        return rate_object(self.rate_pps, self.frame, self.line_rate)

    @property
    def headline_pps(self) -> float | None:
        return self.rate_pps

    def stats_values(self) -> dict:
        return {"rate_pps": self.rate_pps}

    def to_dict(self) -> dict:
        return {
            "rate_pps": self.rate_pps, "rate": self.rate, "lower_pps": self.lower_pps,
            "upper_pps": self.upper_pps, "trials": self.trials, "tester_limited": self.tester_limited,
            "tester_limit_pps": self.tester_limit_pps, "resolution_pps": self.resolution_pps,
            "found": self.found,
        }


def passes(counts, acceptable_loss_ratio: float) -> bool:
    """A valid trial passes when its loss is acceptable (zero loss by default)."""
    if acceptable_loss_ratio == 0.0:
        return counts.frames_lost == 0
    return counts.loss_ratio <= acceptable_loss_ratio


def measure_throughput(measurer: Measurer, frame: FrameSize, line_rate: LineRate,
                       params: ThroughputParams = ThroughputParams()) -> ThroughputResult:
    """Binary search in ``[min_rate, max_rate]`` (percent of line rate) to ``resolution_pct``.

    A trial the tester could not send (``valid=False``) is not DUT loss: it lowers the search's
    upper end (nothing at or above it can be tested) and marks the result ``tester_limited``.
    """
    line_fps = line_rate.fps(frame)
    lo = params.min_rate_pct / 100 * line_fps
    hi = params.max_rate_pct / 100 * line_fps
    res = params.resolution_pct / 100 * line_fps
    rate = params.initial_rate_pct / 100 * line_fps
    best: float | None = None
    upper: float | None = None
    tester_limit: float | None = None
    trials = 0
    while True:
        counts = measurer.measure(Load(rate, frame), params.duration_s)
        trials += 1
        if not counts.valid:
            tester_limit = counts.offered_pps if tester_limit is None else min(tester_limit, counts.offered_pps)
            hi = rate
            upper = rate
        elif passes(counts, params.acceptable_loss_ratio):
            best = rate
            lo = rate
        else:
            hi = rate
            upper = rate
        if hi - lo <= res * (1 + 1e-9) or (best is not None and best >= hi):
            break
        rate = (lo + hi) / 2
        if rate <= 0:
            break
    return ThroughputResult(
        frame=frame, line_rate=line_rate, rate_pps=best if best is not None else 0.0,
        lower_pps=best if best is not None else 0.0, upper_pps=upper, trials=trials,
        tester_limited=tester_limit is not None, tester_limit_pps=tester_limit, resolution_pps=res,
        found=best is not None,
    )
