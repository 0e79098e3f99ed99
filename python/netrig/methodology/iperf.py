"""iperf-like "best effort" mode (RFC 1242 frame loss rate): a fixed rate for a duration, the
received rate every interval and in total."""
from __future__ import annotations

from dataclasses import dataclass

from netrig.methodology.frames import FrameSize, LineRate, rate_object
from netrig.methodology.measurer import Interval, Measurer, Phase
from netrig.methodology.stats import check


@dataclass(frozen=True)
class IperfParams:
    rate_pct: float = 100.0  # of line rate
    duration_s: float = 10.0
    interval_s: float = 1.0
    repetitions: int | None = None

    def __post_init__(self) -> None:
        check("rate_pct", self.rate_pct, lo=0, lo_open=True, hi=1000)
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        check("interval_s", self.interval_s, lo=0, lo_open=True, hi=self.duration_s)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class IperfResult:
    frame: FrameSize
    line_rate: LineRate
    offered_pps: float
    duration_s: float
    intervals: tuple[Interval, ...]
    valid: bool

    @property
    def received_pps(self) -> float:
        return sum(i.frames_received for i in self.intervals) / self.duration_s

    @property
    def loss_ratio(self) -> float:
        sent = sum(i.frames_sent for i in self.intervals)
        return 1 - sum(i.frames_received for i in self.intervals) / sent if sent else 0.0

    @property
    def headline_pps(self) -> float | None:
        return self.received_pps

    def stats_values(self) -> dict:
        return {"received_pps": self.received_pps}

    def to_dict(self) -> dict:
        return {"offered_pps": self.offered_pps, "received_pps": self.received_pps,
                "received": rate_object(self.received_pps, self.frame, self.line_rate),
                "loss_ratio": self.loss_ratio, "valid": self.valid,
                "per_interval": [{"t_s": i.t_s, "rx_pps": i.rx_pps, "frames_received": i.frames_received}
                                 for i in self.intervals]}


def measure_iperf(measurer: Measurer, frame: FrameSize, line_rate: LineRate,
                  params: IperfParams = IperfParams(), tag: str = "") -> IperfResult:
    rate = line_rate.fps(frame) * params.rate_pct / 100
    c = measurer.measure_phases(frame, [Phase(rate, params.duration_s)], params.interval_s, tag=tag)
    return IperfResult(frame, line_rate, rate, params.duration_s, tuple(c.intervals or ()), c.valid)
