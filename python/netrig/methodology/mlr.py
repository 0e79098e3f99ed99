"""MLRsearch (draft-ietf-bmwg-mlrsearch): conditional throughput for several loss-ratio goals at
once (default NDR 0 % and PDR 0.5 %), netrig's own implementation. The method around it (parameters,
presentation, choice of implementation) is ``netrig.methods.mlrsearch``; the reference package's
adapter is ``netrig.methodology.mlr_reference``.

Definitions follow the draft; the search strategy is netrig's own:

* A trial is *long* for a goal when its duration is at least the goal's final trial duration,
  otherwise *short*; it is *bad* when its loss ratio exceeds the goal's loss ratio.
* A load is classified per goal from the duration sums of its good/bad long/short trials:
  short good trials may offset short bad ones (in proportion exceed/(1−exceed)); the load is a
  *lower bound* if even counting the missing duration (up to ``duration_sum``) as bad keeps the
  bad share ≤ ``exceed_ratio``; an *upper bound* if even counting it as good makes the share
  exceed it; otherwise undecided (measure it again).
* Relevant upper bound = the smallest upper-bound load; relevant lower bound = the largest
  lower-bound load below it. A goal is done when ``(RUB − RLB) ≤ relative_width × RUB``, or when
  the maximum load is a lower bound, or the minimum load is an upper bound.
* Conditional throughput = RLB × (1 − q), q the loss ratio at quantile (1 − exceed_ratio) of the
  RLB's long trials weighted by duration, missing duration counted as full loss.

Strategy: per goal, a coarse stage (single trials of the initial duration, width × 8) then the
final stage; loads are bisected in logarithmic space; the first lower bound is guessed from the
forwarding rate seen at an upper bound; bounds missing on one side are expanded geometrically.
Invalid trials (tester could not send) count their unsent frames as lost, as in the draft.
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from netrig.errors import ConfigError, MethodologyError
from netrig.measure import Load, Measurer, TrialCounts
from netrig.methodology.stats import check
from netrig.model import FrameSize, LineRate, rate_object


@dataclass(frozen=True)
class SearchGoal:
    """One MLRsearch goal; field names as in the draft (durations in seconds)."""

    name: str = "NDR"
    loss_ratio: float = 0.0
    exceed_ratio: float = 0.5
    relative_width: float = 0.005
    initial_trial_duration_s: float = 1.0
    final_trial_duration_s: float = 1.0
    duration_sum_s: float = 21.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ConfigError("name", f"must be a short word like NDR or PDR (got {self.name!r})")
        check("loss_ratio", self.loss_ratio, lo=0, hi=1, hi_open=True)
        check("exceed_ratio", self.exceed_ratio, lo=0, hi=1, hi_open=True)
        check("relative_width", self.relative_width, lo=0, lo_open=True, hi=1, hi_open=True)
        check("initial_trial_duration_s", self.initial_trial_duration_s, lo=0, lo_open=True)
        check("final_trial_duration_s", self.final_trial_duration_s, lo=self.initial_trial_duration_s)
        check("duration_sum_s", self.duration_sum_s, lo=self.final_trial_duration_s)

    def to_dict(self) -> dict:
        return asdict(self)


DEFAULT_GOALS = (SearchGoal("NDR", 0.0), SearchGoal("PDR", 0.005))


@dataclass(frozen=True)
class GoalResult:
    goal: SearchGoal
    conditional_throughput_pps: float | None
    lower_bound_pps: float | None
    upper_bound_pps: float | None

    def to_dict(self, frame: FrameSize, line_rate: LineRate) -> dict:
        return {"name": self.goal.name, "goal": self.goal.to_dict(),
                "conditional_throughput_pps": self.conditional_throughput_pps,
                "lower_bound_pps": self.lower_bound_pps, "upper_bound_pps": self.upper_bound_pps,
                "rate": rate_object(self.conditional_throughput_pps, frame, line_rate)}


@dataclass(frozen=True)
class MlrResult:
    frame: FrameSize
    line_rate: LineRate
    goals: tuple[GoalResult, ...]
    trials: int
    search_time_s: float
    implementation: str = "netrig"
    timed_out: bool = False

    def goal(self, name: str) -> GoalResult:
        return next(g for g in self.goals if g.goal.name == name)

    @property
    def headline_pps(self) -> float | None:
        return self.goals[0].conditional_throughput_pps if self.goals else None

    def stats_values(self) -> dict:
        return {f"{g.goal.name}_pps": g.conditional_throughput_pps for g in self.goals}

    def to_dict(self) -> dict:
        return {"goals": [g.to_dict(self.frame, self.line_rate) for g in self.goals], "trials": self.trials,
                "search_time_s": self.search_time_s, "implementation": self.implementation,
                "timed_out": self.timed_out}


def effective_loss_ratio(counts: TrialCounts, rate_pps: float, duration_s: float) -> float:
    """Lost plus unsent frames over the larger of intended and sent (the draft's trial loss ratio)."""
    intended = int(round(rate_pps * duration_s))
    unsent = abs(intended - counts.frames_sent)
    overall = max(intended, counts.frames_sent)
    return min(1.0, (counts.frames_lost + unsent) / overall) if overall else 0.0


@dataclass(frozen=True)
class _Target:
    loss_ratio: float
    exceed_ratio: float
    width: float
    trial_duration_s: float
    duration_sum_s: float
    final: bool


@dataclass
class _LoadTrials:
    trials: list[tuple[float, float]] = field(default_factory=list)  # (duration_s, loss_ratio)


def _sums(trials: list[tuple[float, float]], t: _Target) -> tuple[float, float, float, float]:
    gl = bl = gs = bs = 0.0
    for d, lr in trials:
        bad = lr > t.loss_ratio
        if d >= t.trial_duration_s - 1e-9:
            bl, gl = (bl + d, gl) if bad else (bl, gl + d)
        else:
            bs, gs = (bs + d, gs) if bad else (bs, gs + d)
    return gl, bl, gs, bs


def classify(trials: list[tuple[float, float]], t: _Target) -> str | None:
    """``"lower"``, ``"upper"`` or ``None`` (undecided) for one load and target."""
    gl, bl, gs, bs = _sums(trials, t)
    e = t.exceed_ratio
    excess = bl + max(0.0, bs - gs * e / (1.0 - e))
    dursum = max(gl + excess, t.duration_sum_s)
    limit = dursum * e
    if dursum - gl <= limit + 1e-12:
        return "lower"
    if excess > limit + 1e-12:
        return "upper"
    return None


def pessimistic_loss_ratio(trials: list[tuple[float, float]], t: _Target) -> float:
    long = sorted((lr, d) for d, lr in trials if d >= t.trial_duration_s - 1e-9)
    total = max(t.duration_sum_s, sum(d for _, d in long))
    remaining = total * (1.0 - t.exceed_ratio)
    ratio: float | None = None
    for lr, d in long:
        if ratio is not None and remaining <= 1e-12:
            break
        ratio = lr
        remaining -= d
    if ratio is None or remaining > 1e-12:
        return 1.0
    return ratio


class _Search:
    def __init__(self, measurer: Measurer, frame: FrameSize, min_load: float, max_load: float,
                 budget_s: float):
        self.m, self.frame = measurer, frame
        self.min_load, self.max_load = min_load, max_load
        self.db: dict[float, _LoadTrials] = {}
        self.order: list[float] = []
        self.budget_s, self.spent_s, self.trials = budget_s, 0.0, 0
        self.timed_out = False

    def measure(self, load: float, duration_s: float) -> None:
        load = min(self.max_load, max(self.min_load, load))
        key = self._key(load)
        c = self.m.measure(Load(key, self.frame), duration_s)
        self.db.setdefault(key, _LoadTrials()).trials.append((duration_s, effective_loss_ratio(c, key, duration_s)))
        self.order.append(key)
        self.spent_s += duration_s
        self.trials += 1
        if self.spent_s > self.budget_s:
            self.timed_out = True

    def _key(self, load: float) -> float:
        for k in self.db:  # reuse an existing load within 1e-9 relative
            if abs(k - load) <= 1e-9 * max(k, load):
                return k
        return float(load)

    def bounds(self, t: _Target) -> tuple[float | None, float | None]:
        cls = {k: classify(v.trials, t) for k, v in self.db.items()}
        ups = [k for k, c in cls.items() if c == "upper"]
        ub = min(ups) if ups else None
        lows = [k for k, c in cls.items() if c == "lower" and (ub is None or k < ub)]
        return (max(lows) if lows else None), ub

    def done(self, t: _Target, lb, ub) -> bool:
        if lb is not None and lb >= self.max_load * (1 - 1e-12):
            return True
        if ub is not None and ub <= self.min_load * (1 + 1e-12):
            return True
        return lb is not None and ub is not None and ub - lb <= t.width * ub * (1 + 1e-9)

    def run_target(self, t: _Target) -> None:
        expansions = 0
        last_side = None
        while not self.timed_out:
            lb, ub = self.bounds(t)
            if self.done(t, lb, ub):
                return
            # An undecided load inside the current interval: keep measuring it.
            pending = [k for k in reversed(self.order)
                       if classify(self.db[k].trials, t) is None
                       and (lb is None or k > lb) and (ub is None or k < ub)]
            if pending:
                self.measure(pending[0], t.trial_duration_s)
                continue
            if lb is None and ub is None:
                cand = self.max_load
            elif ub is None:
                side = "up"
                expansions = expansions + 1 if last_side == side else 0
                last_side = side
                cand = lb * (1 + 4 * t.width) ** (2**expansions)
            elif lb is None:
                side = "down"
                if last_side != side:
                    expansions = 0
                    lr = max(x for _, x in self.db[ub].trials)
                    hint = ub * (1 - lr) / (1 - t.loss_ratio)
                    cand = min(hint, ub * (1 - 2 * t.width))
                else:
                    expansions += 1
                    cand = ub * (1 - 4 * t.width) ** (2**expansions)
                last_side = side
            else:
                last_side = None
                cand = math.sqrt(lb * ub)
            cand = min(self.max_load, max(self.min_load, cand))
            self.measure(cand, t.trial_duration_s)


def _targets(goal: SearchGoal) -> list[_Target]:
    coarse = _Target(goal.loss_ratio, goal.exceed_ratio, min(0.5, goal.relative_width * 8),
                     goal.initial_trial_duration_s, goal.initial_trial_duration_s, False)
    final = _Target(goal.loss_ratio, goal.exceed_ratio, goal.relative_width, goal.final_trial_duration_s,
                    goal.duration_sum_s, True)
    return [coarse, final]


def search(measurer: Measurer, frame: FrameSize, line_rate: LineRate, goals: Sequence[SearchGoal],
           min_rate_pct: float, max_rate_pct: float, search_duration_max_s: float) -> MlrResult:
    """Search all goals between ``min_rate_pct`` and ``max_rate_pct`` of line rate; returns the
    conditional throughput and bounds per goal."""
    fps = line_rate.fps(frame)
    s = _Search(measurer, frame, fps * min_rate_pct / 100, fps * max_rate_pct / 100, search_duration_max_s)
    t0 = time.monotonic()
    for goal in goals:
        for t in _targets(goal):
            s.run_target(t)
    results = []
    for goal in goals:
        t = _targets(goal)[-1]
        lb, ub = s.bounds(t)
        ct = lb * (1.0 - pessimistic_loss_ratio(s.db[lb].trials, t)) if lb is not None else None
        results.append(GoalResult(goal, ct, lb, ub))
    if s.trials == 0:
        raise MethodologyError("MLRsearch ran no trials")
    return MlrResult(frame, line_rate, tuple(results), s.trials, time.monotonic() - t0, "netrig", s.timed_out)
