"""MLRsearch (draft-ietf-bmwg-mlrsearch): conditional throughput for several loss-ratio goals at
once (default NDR 0 % and PDR 0.5 %), netrig's own implementation. The method around it (parameters,
presentation, choice of implementation) is ``netrig.methods.mlrsearch``; the reference package's
adapter is ``netrig.methodology.mlr_reference``.

Definitions follow the draft; the search strategy is netrig's own:

* A trial is *long* for a goal when its duration is at least the goal's final trial duration,
  otherwise *short*; it is *bad* when its loss ratio exceeds the goal's loss ratio.
* A trial's loss ratio is what the DUT lost of what the tester offered (``frames_lost /
  frames_sent``). Only a trial the tester could not send (invalid) also counts its unsent frames as
  lost, as the draft's effective loss ratio does: whether a trial fell short is the measurer's
  verdict, never an intended-vs-sent frame count that differs by rounding.
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

Strategy (see ``docs/methodology.md``):

* Loads lie on a logarithmic grid from the maximum load down, one step = the narrowest goal width,
  so loads measured for one goal or stage are reused by the others (an NDR upper bound is often
  the PDR lower bound) and two neighbouring loads always satisfy the width.
* Per goal a *coarse* stage (single trials of the initial duration, the goal's width) then the
  *final* stage (the goal's trials and duration sum), which first measures the coarse stage's
  lower bound, then its upper bound, until each is classified; only if one flips does it search on.
* The first trial is at the maximum load. The forwarding rate seen at an upper bound points at the
  answer (a DUT that caps forwards its capacity): the next load is that rate (divided by
  ``1 − loss_ratio``); a lower bound found there is checked one width above (a cliff is found in
  three trials). Otherwise the search gallops away from the bound that moved last (1, 2, 4 …
  widths, never past the middle) and bisects.
* A forwarding-rate hint never walks down further than one trial's evidence allows: it is taken
  only between the current bounds, and once it failed the search falls back to galloping, so a
  hiccup (a trial that lost frames by chance) costs a few trials, not the answer.
* The highest load is the self-test's proven ceiling / factor when that is lower than the
  configured maximum; a goal whose lower bound is that load is reported "≥ load (tester-limited)".
  Trials the tester could not send count as bad (the search goes lower), and a goal whose upper
  bound rests on such trials is tester-limited too; a trial that fell short while the self-test
  proved far more is DUT backpressure, the DUT's failure like loss.
* A trial the host spoilt in every attempt (:class:`~netrig.methodology.tester.PlatformStopped`)
  is no bad trial: it stops the search, each goal not done keeps its bounds so far as a lower bound
  (``tester_limited``), and ``platform`` says why.
* A trial that sent nothing is an error (a tester or test-bed fault, not a DUT at zero); an error
  or Ctrl-C mid-search re-raises with the partial result attached
  (:func:`netrig.methodology.method.partial_result`).
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from netrig.errors import ConfigError, MethodologyError
from netrig.measure import Load, Measurer, TrialCounts
from netrig.methodology.method import with_partial
from netrig.methodology.stats import check
from netrig.methodology.tester import (
    NO_LIMIT,
    NOT_MEASURED,
    TRANSIENT_REPEATS,
    PlatformStopped,
    ProvenLimit,
    Verdict,
    measure_judged,
)
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
    #: The answer is bounded by the tester, not the DUT: its lower bound is the highest load the
    #: tester vouches for, or its upper bound rests on trials the tester could not send. The
    #: conditional throughput is then a lower bound ("≥").
    tester_limited: bool = False
    #: The stage whose bounds these are: ``final``; a search stopped early (an error, Ctrl-C, the
    #: time budget) before the final stage had any bound reports its ``middle`` or ``coarse`` ones.
    stage: str = "final"

    def to_dict(self, frame: FrameSize, line_rate: LineRate) -> dict:
        return {"name": self.goal.name, "goal": self.goal.to_dict(),
                "conditional_throughput_pps": self.conditional_throughput_pps,
                "lower_bound_pps": self.lower_bound_pps, "upper_bound_pps": self.upper_bound_pps,
                "tester_limited": self.tester_limited, "stage": self.stage,
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
    #: Sum of the trial durations asked for (the search's cost in trial time).
    trial_duration_sum_s: float = 0.0
    #: The highest load the search used: the configured maximum, or the tester's limit below it.
    max_load_pps: float | None = None
    #: The self-test's limit (proven ceiling / factor) when it capped the maximum load.
    tester_cap_pps: float | None = None
    #: Trials the tester could not send (not DUT results; counted as bad, as the draft does).
    tester_trials: int = 0
    #: Trials in which the DUT slowed the sender below the load (DUT results: the load failed), and
    #: the highest rate the tester reached through the DUT in them.
    backpressure_trials: int = 0
    backpressure_pps: float | None = None
    #: False when the search stopped on an error or Ctrl-C (a partial result).
    complete: bool = True
    #: Trials repeated because the tester fell short at a load it had already sent in full in this
    #: search (a stall, not a limit); they are in ``trials`` and their time in ``trial_duration_sum_s``.
    repeated_trials: int = 0
    #: Why there is no answer at all (:data:`~netrig.methodology.tester.NOT_MEASURED`: every trial was
    #: the tester's, so no goal has a bound); ``None``: measured.
    not_measured: str | None = None
    #: Why the host stopped the search (:class:`~netrig.methodology.tester.PlatformStopped`); the goals
    #: it had not finished are lower bounds. ``None``: not stopped by the host.
    platform: str | None = None

    def goal(self, name: str) -> GoalResult:
        return next(g for g in self.goals if g.goal.name == name)

    @property
    def headline_pps(self) -> float | None:
        return self.goals[0].conditional_throughput_pps if self.goals else None

    @property
    def tester_limited(self) -> bool:
        """The headline (first goal) is bounded by the tester: a lower bound."""
        return bool(self.goals) and self.goals[0].tester_limited

    @property
    def tester_limit_pps(self) -> float | None:
        """Where the tester limited the headline: its lower bound (the highest load it vouches for
        or could send)."""
        if not self.tester_limited:
            return None
        g = self.goals[0]
        return g.lower_bound_pps if g.lower_bound_pps is not None else self.max_load_pps

    def stats_values(self) -> dict:
        return {f"{g.goal.name}_pps": g.conditional_throughput_pps for g in self.goals}

    def to_dict(self) -> dict:
        return {"goals": [g.to_dict(self.frame, self.line_rate) for g in self.goals], "trials": self.trials,
                "search_time_s": self.search_time_s, "implementation": self.implementation,
                "timed_out": self.timed_out, "trial_duration_sum_s": self.trial_duration_sum_s,
                "max_load_pps": self.max_load_pps, "tester_cap_pps": self.tester_cap_pps,
                "tester_trials": self.tester_trials, "backpressure_trials": self.backpressure_trials,
                "backpressure_pps": self.backpressure_pps, "tester_limited": self.tester_limited,
                "tester_limit_pps": self.tester_limit_pps, "complete": self.complete,
                "repeated_trials": self.repeated_trials, "not_measured": self.not_measured, "platform": self.platform}


def offered_in_time(counts: TrialCounts, duration_s: float, verdict: Verdict) -> int:
    """The frames the trial offered at its load: every frame of a valid trial; of an invalid one,
    what its achieved rate carried in the trial's duration. A sender that fell behind sends the
    rest late, at a lower load (an OTG flow sends all its frames, however late; the engine's, those
    within the stretch it allows): they were not offered at the load the trial stands for."""
    if verdict is Verdict.VALID:
        return counts.frames_sent
    return min(counts.frames_sent, int(counts.achieved_pps * duration_s))


def trial_loss_ratio(counts: TrialCounts, rate_pps: float, duration_s: float, verdict: Verdict) -> float:
    """The trial's loss ratio for the search: lost over sent; a trial the tester could not send
    (invalid, either verdict) also counts as lost the frames it did not offer at the load
    (:func:`offered_in_time`; the draft's effective loss ratio). Raises when nothing was sent: no
    loss ratio can be read from that."""
    sent = counts.frames_sent
    if sent <= 0:
        raise MethodologyError(
            f"MLRsearch: the trial at {rate_pps:.0f} fps for {duration_s:g} s sent no frames "
            f"({counts.invalid_reason or 'no reason given'}): the tester or the test bed failed, "
            "this is not a DUT result; check the ports with `netrig ports` and run `netrig selftest`")
    if verdict is Verdict.VALID:
        return min(1.0, counts.frames_lost / sent)
    intended = rate_pps * duration_s
    unsent = max(0.0, intended - offered_in_time(counts, duration_s, verdict))
    return min(1.0, (counts.frames_lost + unsent) / max(intended, sent))


@dataclass(frozen=True)
class _Target:
    loss_ratio: float
    exceed_ratio: float
    width: float
    trial_duration_s: float
    duration_sum_s: float


@dataclass(frozen=True)
class _Trial:
    duration_s: float
    loss_ratio: float
    verdict: Verdict


def _sums(trials: Sequence[_Trial], t: _Target) -> tuple[float, float, float, float]:
    gl = bl = gs = bs = 0.0
    for tr in trials:
        d = tr.duration_s
        bad = tr.loss_ratio > t.loss_ratio
        if d >= t.trial_duration_s - 1e-9:
            bl, gl = (bl + d, gl) if bad else (bl, gl + d)
        else:
            bs, gs = (bs + d, gs) if bad else (bs, gs + d)
    return gl, bl, gs, bs


def classify(trials: Sequence[_Trial], t: _Target) -> str | None:
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


def rests_on_tester(trials: Sequence[_Trial], t: _Target) -> bool:
    """An upper bound rests on the tester when the load would not be one without the trials the
    tester could not send: a valid trial there that lost frames makes it the DUT's (a tester stall
    in one trial at a load where the DUT lost frames in the others is not the tester's limit)."""
    return (any(tr.verdict is Verdict.TESTER for tr in trials)
            and not any(tr.verdict is not Verdict.TESTER and tr.loss_ratio > t.loss_ratio for tr in trials))


def pessimistic_loss_ratio(trials: Sequence[_Trial], t: _Target) -> float:
    long = sorted((tr.loss_ratio, tr.duration_s) for tr in trials if tr.duration_s >= t.trial_duration_s - 1e-9)
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


#: A goal whose duration sum spans more final trials than this gets a middle stage.
MIDDLE_TRIALS = 4

#: An upper bound contradicted by the rest is measured up to this many times (interleaved).
CHALLENGES = 3

#: How much farther each step of a gallop away from a bound goes.
GALLOP = 4


class _Grid:
    """Loads ``max × (1 − width)^k`` for k = 0 … ``last``, the last one clamped to the minimum load:
    index 0 is the highest load, a larger index a lower load."""

    def __init__(self, min_load: float, max_load: float, width: float):
        self.max_load = max_load
        self.min_load = min(min_load, max_load)
        self.step = -math.log1p(-width)
        self.last = max(0, math.ceil(math.log(max_load / self.min_load) / self.step - 1e-9))

    def load(self, k: int) -> float:
        return self.min_load if k >= self.last else self.max_load * math.exp(-k * self.step)

    def floor(self, load: float) -> int:
        """Index of the highest grid load at or below ``load`` (``last`` below the minimum)."""
        if load >= self.max_load * (1 - 1e-12):
            return 0
        if load <= self.min_load:
            return self.last
        return min(self.last, math.ceil(math.log(self.max_load / load) / self.step - 1e-9))

    def steps(self, width: float) -> int:
        """How many grid steps a bracket of relative ``width`` spans."""
        return max(1, int(math.floor(math.log1p(-width) / -self.step + 1e-9)))


@dataclass
class _State:
    """One target's search state (indices on the grid)."""

    init_lo: int | None
    init_hi: int | None
    d_up: int
    d_down: int
    last: int | None = None
    kind: str = ""
    moved: str | None = None
    #: The upper bound was measured twice: take its hint even below the middle of the bracket.
    trust_hint: bool = False
    #: The upper bound whose hint last restarted the gallop up from the lower bound.
    reset_for: int | None = None


class _Search:
    def __init__(self, measurer: Measurer, frame: FrameSize, grid: _Grid, budget_s: float, limit: ProvenLimit):
        self.m, self.frame, self.grid, self.limit = measurer, frame, grid, limit
        self.db: dict[int, list[_Trial]] = {}
        self.budget_s, self.spent_s, self.trials = budget_s, 0.0, 0
        self.timed_out = False
        self.tester_trials = self.backpressure_trials = self.repeated_trials = 0
        self.backpressure_pps: float | None = None
        #: The highest load the tester sent in full (a shortfall at or below it is a stall).
        self.kept: float | None = None
        self.platform: str | None = None  # why the host stopped the search (PlatformStopped)

    # ---------------------------------------------------------------- trials
    def measure(self, k: int, duration_s: float) -> bool:
        """One trial at grid load ``k``; False (and ``timed_out``) when the budget would be exceeded."""
        if self.spent_s + duration_s > self.budget_s * (1 + 1e-9):
            self.timed_out = True
            return False
        load = self.grid.load(k)
        # a shortfall at a load the tester sent in full before is a stall: repeated, within the budget
        most = min(TRANSIENT_REPEATS, int((self.budget_s * (1 + 1e-9) - self.spent_s) / duration_s) - 1)
        try:
            c, verdict, repeats = measure_judged(self.m, Load(load, self.frame), duration_s, self.limit, self.kept,
                                                 most)
        except PlatformStopped as stop:  # no bad trial: nothing in the database, the search ends
            self.spent_s += stop.attempts * duration_s
            self.trials += stop.attempts
            self.repeated_trials += stop.attempts - 1
            self.platform = str(stop)
            raise
        self.spent_s += repeats * duration_s
        self.trials += repeats
        self.repeated_trials += repeats
        if verdict is Verdict.VALID:
            self.kept = max(self.kept or 0.0, load)
        if verdict is Verdict.TESTER:
            self.tester_trials += 1
        elif verdict is Verdict.BACKPRESSURE:
            self.backpressure_trials += 1
            self.backpressure_pps = max(self.backpressure_pps or 0.0, c.achieved_pps)
        lr = trial_loss_ratio(c, load, duration_s, verdict)
        self.db.setdefault(k, []).append(_Trial(duration_s, lr, verdict))
        self.spent_s += duration_s
        self.trials += 1
        return True

    # ---------------------------------------------------------------- bounds
    def cls(self, k: int, t: _Target) -> str | None:
        return classify(self.db[k], t) if k in self.db else None

    def bounds(self, t: _Target) -> tuple[int | None, int | None]:
        cls = {k: classify(v, t) for k, v in self.db.items()}
        ups = [k for k, c in cls.items() if c == "upper"]
        ub = max(ups) if ups else None
        lows = [k for k, c in cls.items() if c == "lower" and (ub is None or k > ub)]
        return (min(lows) if lows else None), ub

    def done(self, t: _Target, lb: int | None, ub: int | None) -> bool:
        if lb == 0 or ub == self.grid.last:
            return True
        if lb is None or ub is None:
            return False
        lo, hi = self.grid.load(lb), self.grid.load(ub)
        return hi - lo <= t.width * hi * (1 + 1e-9)

    def hint(self, ub: int, t: _Target) -> int | None:
        """The grid load the upper bound's forwarding rate points at (its least lossy bad trial's
        forwarded rate / (1 − loss ratio)), if below the upper bound."""
        bad = [tr.loss_ratio for tr in self.db.get(ub, []) if tr.loss_ratio > t.loss_ratio]
        if not bad:
            return None
        k = self.grid.floor(self.grid.load(ub) * (1.0 - min(bad)) / (1.0 - t.loss_ratio))
        return k if k > ub else None

    def suspicious(self, ub: int, lb: int, t: _Target) -> bool:
        """The upper bound's trials say the DUT forwards less than other trials showed: it forwarded
        more at a higher load (checked up to ``CHALLENGES`` trials), or, for a bound measured once,
        a load more than a width above its hint passed."""
        h = self.hint(ub, t)
        if h is None:
            return False
        n, hint_load = len(self.db[ub]), self.grid.load(h)
        if n < CHALLENGES and self.forwarded_above(ub) > hint_load * (1 + t.width):
            return True
        return n == 1 and self.grid.load(lb) > hint_load * (1 + t.width) ** 2

    def forwarded_above(self, k: int) -> float:
        """The highest rate the DUT forwarded in any trial at a load above grid load ``k``."""
        return max((self.grid.load(j) * (1.0 - tr.loss_ratio) for j, trs in self.db.items() if j < k for tr in trs),
                   default=0.0)

    # ---------------------------------------------------------------- strategy
    def next_load(self, t: _Target, st: _State, lb: int | None, ub: int | None) -> tuple[int, str]:
        def inside(k: int) -> bool:
            return (lb is None or k < lb) and (ub is None or k > ub)

        # 1. keep measuring an undecided load; 2. the preceding stage's bounds, lower first
        if st.last is not None and inside(st.last) and self.cls(st.last, t) is None:
            return st.last, "again"
        for k in (st.init_lo, st.init_hi):
            if k is not None and inside(k) and self.cls(k, t) is None:
                return k, "refine"
        if lb is None and ub is None:
            return 0, "max"
        # a one-trial upper bound contradicted by the rest (its hint far below its check's pass,
        # or the DUT forwarded more at a higher load): measure it again, now that a lower bound
        # below it has put at least one other trial in between (a disturbance may last a while)
        if ub is not None and lb is not None and st.last != ub and self.suspicious(ub, lb, t):
            st.trust_hint = True
            return ub, "verify"
        last = self.grid.last
        mid = (lb + ub) // 2 if lb is not None and ub is not None else None
        # 3. the forwarding rate at the upper bound: below it when there is no lower bound (at least
        #    the current step down); inside the bracket when that beats bisecting; at or below the
        #    lower bound, it says the answer is just above that
        if ub is not None and (h := self.hint(ub, t)) is not None:
            down = min(last, ub + st.d_down)
            h = max(h, down)  # a hint that keeps failing does not creep down
            if lb is None:
                # nor walk below what the DUT forwarded at a higher load on one trial's word
                h = min(h, max(down, self.grid.floor(self.forwarded_above(ub))))
                return h, "hint"
            assert mid is not None
            if inside(h) and (h <= mid or st.trust_hint):
                st.trust_hint = False
                return h, "hint"
            if h >= lb:
                if st.reset_for is None:  # once per stage: start one width above (a cliff)
                    st.reset_for, st.d_up = ub, self.grid.steps(t.width)
                return max(lb - st.d_up, mid), "up"
        # 4. one bound only: extend away from it
        if ub is None:
            assert lb is not None
            return max(0, lb - st.d_up), "up"
        if lb is None or mid is None:
            return min(last, ub + st.d_down), "down"
        # 5. both: gallop from the bound that moved last, never past the middle; else bisect
        if st.moved == "up" and lb - st.d_up > mid:
            return lb - st.d_up, "up"
        if st.moved == "down" and ub + st.d_down < mid:
            return ub + st.d_down, "down"
        return mid, "mid"

    def run_target(self, t: _Target, st: _State, preceding: Sequence[_Target] = ()) -> bool:
        """Measure until ``t`` is done (True) or the budget ends (False). Also return False as soon
        as the stage would search beyond the bounds it started from while a preceding stage is no
        longer done (one of its bounds flipped): searching on with that stage's shorter trials
        and smaller duration sums is far cheaper."""
        while not self.timed_out:
            lb, ub = self.bounds(t)
            if self.done(t, lb, ub):
                # done, unless the upper bound rests on trials the rest contradicts (a hiccup):
                # those are measured again first, even right away
                if lb is None or ub is None or not self.suspicious(ub, lb, t):
                    return True
                k, kind = ub, "verify"
            else:
                k, kind = self.next_load(t, st, lb, ub)
            if kind not in ("again", "refine") and any(not self.done(p, *self.bounds(p)) for p in preceding):
                return False
            if not self.measure(k, t.trial_duration_s):
                return False
            if kind != "again":
                st.kind = kind
            st.last = k
            c = self.cls(k, t)
            if c == "lower" and (lb is None or k < lb):
                st.moved = "up"
                if st.kind == "hint":
                    st.d_up = self.grid.steps(t.width)  # check one width above the hint
                elif st.kind == "up":
                    st.d_up *= GALLOP
            elif c == "upper" and (ub is None or k > ub):
                st.moved = "down"
                if st.kind in ("down", "hint"):
                    st.d_down *= GALLOP
        return False

    def run_goal(self, goal: SearchGoal) -> None:
        """Each stage in turn, refining the bounds of the one before; back to the first stage that
        is no longer done whenever a refined bound flipped."""
        chain = _targets(goal)
        n = self.grid.steps(goal.relative_width)
        states = [_State(None, None, n, n) for _ in chain]  # kept across re-entries: gallops go on growing
        while not self.timed_out:
            i = next((i for i, t in enumerate(chain) if not self.done(t, *self.bounds(t))), None)
            if i is None:
                return
            st = states[i]
            st.init_lo, st.init_hi = self.bounds(chain[i - 1]) if i else (None, None)
            st.last = None
            self.run_target(chain[i], st, chain[:i])

    # ---------------------------------------------------------------- results
    def result(self, goals: Sequence[SearchGoal], frame: FrameSize, line_rate: LineRate, t0: float,
               capped: bool, complete: bool) -> MlrResult:
        out = []
        nothing = self.trials > 0 and all(tr.verdict is Verdict.TESTER for trs in self.db.values() for tr in trs)
        for goal in goals:
            if nothing:  # no bound rests on the DUT: every trial was the tester's
                out.append(GoalResult(goal, None, None, None))
                continue
            chain = _targets(goal)
            stage, t = len(chain) - 1, chain[-1]
            lb, ub = self.bounds(t)
            finished = self.done(t, lb, ub)
            stopped = not complete or self.timed_out or self.platform
            if lb is None and ub is None and stopped:  # the furthest stage with a bound
                stage = next((i for i in range(len(chain) - 1, -1, -1) if self.bounds(chain[i]) != (None, None)), stage)
                t = chain[stage]
                lb, ub = self.bounds(t)
            ct = (self.grid.load(lb) * (1.0 - pessimistic_loss_ratio(self.db[lb], t))) if lb is not None else None
            limited = ((capped and lb == 0) or (ub is not None and rests_on_tester(self.db[ub], t))
                       or (self.platform is not None and not finished))
            out.append(GoalResult(goal, ct, self.grid.load(lb) if lb is not None else None,
                                  self.grid.load(ub) if ub is not None else None, limited,
                                  _stage_name(stage, len(chain))))
        return MlrResult(frame, line_rate, tuple(out), self.trials, time.monotonic() - t0, "netrig", self.timed_out,
                         self.spent_s, self.grid.max_load, self.limit.limit_pps if capped else None,
                         self.tester_trials, self.backpressure_trials, self.backpressure_pps, complete,
                         self.repeated_trials, (self.platform or NOT_MEASURED) if nothing else None, self.platform)


def _stage_name(i: int, n: int) -> str:
    return "final" if i == n - 1 else ("coarse" if i == 0 else "middle")


def _targets(goal: SearchGoal) -> list[_Target]:
    """The stages of a goal, all at the goal's width: single trials of the initial duration; when
    the duration sum spans more than ``MIDDLE_TRIALS`` final trials, a middle stage of final trials
    with the geometric mean of one trial and the duration sum (noise shows after a few trials
    there, not after the whole sum); the goal itself. Identical stages are merged."""
    g = goal
    chain = [_Target(g.loss_ratio, g.exceed_ratio, g.relative_width, g.initial_trial_duration_s,
                     g.initial_trial_duration_s)]
    if g.duration_sum_s > MIDDLE_TRIALS * g.final_trial_duration_s * (1 + 1e-9):
        chain.append(_Target(g.loss_ratio, g.exceed_ratio, g.relative_width, g.final_trial_duration_s,
                             math.sqrt(g.final_trial_duration_s * g.duration_sum_s)))
    chain.append(_Target(g.loss_ratio, g.exceed_ratio, g.relative_width, g.final_trial_duration_s,
                         g.duration_sum_s))
    return [t for i, t in enumerate(chain) if i == 0 or t != chain[i - 1]]


def search(measurer: Measurer, frame: FrameSize, line_rate: LineRate, goals: Sequence[SearchGoal],
           min_rate_pct: float, max_rate_pct: float, search_duration_max_s: float,
           limit: ProvenLimit = NO_LIMIT) -> MlrResult:
    """Search all goals between ``min_rate_pct`` and ``max_rate_pct`` of line rate (at most the
    tester's ``limit``); returns the conditional throughput and bounds per goal."""
    if not goals:
        raise ConfigError("goals", "needs at least one goal")
    if not (math.isfinite(search_duration_max_s) and search_duration_max_s > 0):
        raise ConfigError("search_duration_max_s", f"must be a finite number > 0 (got {search_duration_max_s})")
    fps = line_rate.fps(frame)
    max_load = fps * max_rate_pct / 100
    capped = limit.caps(max_load)
    max_load = limit.cap(max_load)
    grid = _Grid(fps * min_rate_pct / 100, max_load, min(g.relative_width for g in goals))
    s = _Search(measurer, frame, grid, search_duration_max_s, limit)
    t0 = time.monotonic()
    try:
        for goal in goals:
            s.run_goal(goal)
    except PlatformStopped:
        pass  # the search ends where the host stopped it (s.platform)
    except BaseException as e:
        with_partial(e, lambda: s.result(goals, frame, line_rate, t0, capped, complete=False))
        raise
    if s.trials == 0:
        raise MethodologyError(f"MLRsearch ran no trials: search_duration_max_s ({search_duration_max_s:g} s) "
                               "is shorter than the first trial")
    return s.result(goals, frame, line_rate, t0, capped, complete=True)
