"""RFC 2544 §26.3 frame loss rate: from 100 % of line rate downwards in steps until two
successive trials show no loss. The curve (forwarded vs offered) shows receive livelock."""
from __future__ import annotations

from dataclasses import dataclass

from netrig.methodology.frames import FrameSize, LineRate, rate_object
from netrig.methodology.measurer import Load, Measurer
from netrig.methodology.stats import check


@dataclass(frozen=True)
class FrameLossParams:
    duration_s: float = 60.0
    step_pct: float = 10.0
    start_pct: float = 100.0
    min_pct: float = 0.0  # stop here even if loss never stopped
    stop_after_lossfree: int = 2
    repetitions: int | None = None

    def __post_init__(self) -> None:
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        check("step_pct", self.step_pct, lo=0, lo_open=True, hi=100)
        check("start_pct", self.start_pct, lo=0, lo_open=True, hi=1000)
        check("min_pct", self.min_pct, lo=0, hi=self.start_pct)
        check("stop_after_lossfree", self.stop_after_lossfree, lo=1, integer=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class LossPoint:
    offered_pct: float
    offered_pps: float
    achieved_pps: float
    forwarded_pps: float
    loss_ratio: float
    valid: bool

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class FrameLossResult:
    frame: FrameSize
    line_rate: LineRate
    curve: tuple[LossPoint, ...]

    @property
    def max_lossfree_pps(self) -> float | None:
        ok = [p.offered_pps for p in self.curve if p.valid and p.loss_ratio == 0.0]
        return max(ok) if ok else None

    @property
    def livelock(self) -> bool:
        """Forwarded rate at the highest load more than 10 % below the best forwarded rate."""
        valid = [p for p in self.curve if p.valid]
        if len(valid) < 2:
            return False
        top = max(valid, key=lambda p: p.offered_pps)
        return top.forwarded_pps < 0.9 * max(p.forwarded_pps for p in valid)

    @property
    def headline_pps(self) -> float | None:
        return self.max_lossfree_pps

    def stats_values(self) -> dict:
        return {"max_lossfree_pps": self.max_lossfree_pps}

    def to_dict(self) -> dict:
        return {"curve": [p.to_dict() for p in self.curve], "max_lossfree_pps": self.max_lossfree_pps,
                "max_lossfree": rate_object(self.max_lossfree_pps, self.frame, self.line_rate),
                "livelock": self.livelock}


def measure_frame_loss(measurer: Measurer, frame: FrameSize, line_rate: LineRate,
                       params: FrameLossParams = FrameLossParams()) -> FrameLossResult:
    line_fps = line_rate.fps(frame)
    points: list[LossPoint] = []
    lossfree = 0
    k = 0
    while True:
        pct = round(params.start_pct - k * params.step_pct, 9)
        if pct <= 0 or pct < params.min_pct - 1e-9:
            break
        rate = pct / 100 * line_fps
        c = measurer.measure(Load(rate, frame), params.duration_s)
        fwd = c.frames_received / params.duration_s
        points.append(LossPoint(pct, rate, c.offered_pps, fwd, c.loss_ratio, c.valid))
        if c.valid and c.frames_lost == 0:
            lossfree += 1
            if lossfree >= params.stop_after_lossfree:
                break
        else:
            lossfree = 0
        k += 1
    return FrameLossResult(frame, line_rate, tuple(points))
