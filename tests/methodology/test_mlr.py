"""netrig's MLRsearch agrees with the reference package (MLRsearch==1.2.1) on simulated DUTs, spends
no more trial time than it, and stays right when measurers and DUTs misbehave."""
import importlib.util
import random
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from tests.stalls import HostSpoils, Logged, repeats, unrepeated_stalls

from netrig.errors import ConfigError, MethodologyError
from netrig.measure import DutModel, Load, SimulatedMeasurer, TrialCounts
from netrig.methodology.method import partial_result
from netrig.methodology.mlr import SearchGoal, Verdict, _Target, _Trial, classify, rests_on_tester
from netrig.methodology.tester import ProvenLimit
from netrig.methods.mlrsearch import MlrParams, measure_mlrsearch
from netrig.model import FrameSize, LineRate

LR = LineRate(10e9)
F64 = FrameSize(64)


def _bench():
    path = Path(__file__).resolve().parents[2] / "bench" / "mlr_compare.py"
    spec = importlib.util.spec_from_file_location("mlr_compare", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["mlr_compare"] = mod
    spec.loader.exec_module(mod)
    return mod


BENCH = _bench()
DEFINED = [d for d, (_, defined) in BENCH.DUTS.items() if defined]


@pytest.mark.parametrize("goals", list(BENCH.GOALS))
@pytest.mark.parametrize("dut", DEFINED)
def test_agrees_with_reference(dut, goals):
    row = BENCH.run(dut, goals)
    for a, b in zip(row.netrig.goals, row.reference.goals):
        assert a.goal == b.goal
    assert row.agrees(), BENCH.table([row])


def test_spends_no_more_trial_time_than_reference():
    rows = BENCH.rows()
    ours = sum(r.netrig.trial_duration_sum_s for r in rows)
    ref = sum(r.reference.trial_duration_sum_s for r in rows)
    assert ours <= ref, BENCH.table(rows)
    # also on the DUTs with a well-defined answer alone (the reference can be cheap by being wrong)
    defined = [r for r in rows if r.defined]
    assert sum(r.netrig.trial_duration_sum_s for r in defined) <= sum(r.reference.trial_duration_sum_s
                                                                      for r in defined)


def test_truth_within_width():
    cap = 1e6
    ours = measure_mlrsearch(SimulatedMeasurer(DutModel(capacity_pps=cap)), F64, LR, MlrParams())
    for g in ours.goals:
        assert g.lower_bound_pps <= cap * (1 + g.goal.loss_ratio) + 1
        assert g.upper_bound_pps - g.lower_bound_pps <= g.goal.relative_width * g.upper_bound_pps * 1.0001
        assert cap * (1 - g.goal.relative_width) <= g.conditional_throughput_pps <= cap + 1


def test_a_cliff_takes_three_trials():
    """Max load, the forwarding rate it showed, one width above: the reference's count too."""
    goal = SearchGoal("NDR", 0.0, 0.5, 0.005, 1, 1, 1)
    r = measure_mlrsearch(SimulatedMeasurer(DutModel(capacity_pps=1e6)), F64, LR, MlrParams(goals=(goal,)))
    assert r.trials == 3 and 995_000 <= r.goal("NDR").conditional_throughput_pps <= 1e6


# ------------------------------------------------------------------------------------------------ #
# Measurers and DUTs that misbehave

DEMO_GOALS = (SearchGoal("NDR", 0.0, 0.5, 0.01, 0.5, 0.5, 1.0), SearchGoal("PDR", 0.005, 0.5, 0.01, 0.5, 0.5, 1.0))


@pytest.mark.parametrize("goals", [DEMO_GOALS, BENCH.GOALS["3 s sum, PDR from 0.5 s"]], ids=["demo", "3 s sum"])
@pytest.mark.parametrize("speed_bps", [1e9, 10e9])
def test_truncated_frame_counts_are_not_loss(goals, speed_bps):
    """A measurer that sends ``int(duration × load)`` frames sent what it was asked for: losing
    nothing is losing nothing (today's main read it as one lost frame and found NDR 722 kfps)."""
    r = measure_mlrsearch(BENCH.TruncatingMeasurer(DutModel(capacity_pps=1e6)), F64, LineRate(speed_bps),
                          MlrParams(goals=goals, min_rate_pct=0.1))
    for g in r.goals:
        assert g.conditional_throughput_pps >= 1e6 * (1 - g.goal.relative_width), g


class FirstTrialHiccups(SimulatedMeasurer):
    """The first trial at a load loses 70 % of its frames with probability 10 % (a hiccup)."""

    def __init__(self, model, seed):
        super().__init__(model)
        self.rng, self.seen = random.Random(seed), set()

    def measure(self, load, duration_s):
        c = super().measure(load, duration_s)
        first = load.rate_pps not in self.seen
        self.seen.add(load.rate_pps)
        if first and self.rng.random() < 0.1:
            return replace(c, frames_received=c.frames_sent - max(c.frames_lost, int(0.7 * c.frames_sent)))
        return c


HICCUP_DUTS = {"cliff": DutModel(capacity_pps=1e6),
               "livelock": DutModel(capacity_pps=2e6, livelock_slope=0.5, livelock_floor=0.1),
               "lossless": DutModel(capacity_pps=1e12)}


@pytest.mark.parametrize("goals", [(SearchGoal("NDR", 0.0, 0.5, 0.005, 1, 1, 1),), DEMO_GOALS,
                                   BENCH.GOALS["3 s sum, PDR from 0.5 s"]], ids=["single trial", "demo", "3 s sum"])
@pytest.mark.parametrize("dut", list(HICCUP_DUTS))
def test_a_hiccup_does_not_walk_the_search_down(dut, goals):
    """A first trial at a load that lost frames by chance is measured again when the rest
    contradicts it (today's main: NDR −70 % on a livelock DUT with one unlucky seed)."""
    model = HICCUP_DUTS[dut]
    truth = min(model.capacity(F64), LR.fps(F64))
    for seed in range(15):
        r = measure_mlrsearch(FirstTrialHiccups(model, seed), F64, LR, MlrParams(goals=goals, min_rate_pct=0.1))
        ndr = r.goals[0]
        assert ndr.conditional_throughput_pps >= truth * (1 - 2 * ndr.goal.relative_width), (seed, ndr)


class Disturbed(SimulatedMeasurer):
    """Trials number ``at`` (counted from 0) lose 70 % of their frames."""

    def __init__(self, model, at):
        super().__init__(model)
        self.at, self.n = at, 0

    def measure(self, load, duration_s):
        c = super().measure(load, duration_s)
        self.n += 1
        if self.n - 1 in self.at:
            return replace(c, frames_received=c.frames_sent - max(c.frames_lost, int(0.7 * c.frames_sent)))
        return c


@pytest.mark.parametrize("at", [(0,), (1,), (2,), (0, 1), (1, 2)])
@pytest.mark.parametrize("dut", list(HICCUP_DUTS))
def test_a_disturbance_over_two_trials_costs_trials_not_the_answer(dut, at):
    goals = BENCH.GOALS["3 s sum, PDR from 0.5 s"]
    model = HICCUP_DUTS[dut]
    clean = measure_mlrsearch(SimulatedMeasurer(model), F64, LR, MlrParams(goals=goals, min_rate_pct=0.1))
    r = measure_mlrsearch(Disturbed(model, at), F64, LR, MlrParams(goals=goals, min_rate_pct=0.1))
    truth = min(model.capacity(F64), LR.fps(F64))
    assert r.goals[0].conditional_throughput_pps >= truth * (1 - 2 * goals[0].relative_width)
    assert r.trial_duration_sum_s <= clean.trial_duration_sum_s + 16


@pytest.mark.parametrize("field,value", [("relative_width", float("nan")), ("loss_ratio", float("nan")),
                                         ("exceed_ratio", float("nan")), ("duration_sum_s", float("inf")),
                                         ("final_trial_duration_s", float("nan"))])
def test_non_finite_goal_fields_are_config_errors(field, value):
    with pytest.raises(ConfigError, match=f"{field}: must be a finite number"):
        SearchGoal(**{field: value})


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_non_finite_search_duration_is_a_config_error(value):
    with pytest.raises(ConfigError, match="search_duration_max_s: must be a finite number"):
        MlrParams(search_duration_max_s=value)


def test_the_budget_ends_the_search():
    r = measure_mlrsearch(SimulatedMeasurer(DutModel(capacity_pps=1e6, capacity_jitter_ratio=0.05)), F64, LR,
                          MlrParams(search_duration_max_s=10))
    assert r.timed_out and r.trial_duration_sum_s <= 10


class SendsNothing(SimulatedMeasurer):
    def measure(self, load, duration_s):
        c = super().measure(load, duration_s)
        return replace(c, frames_sent=0, frames_received=0, valid=False, invalid_reason="the port is down")


@pytest.mark.parametrize("implementation", ["netrig", "reference"])
def test_a_measurer_that_sends_nothing_is_an_error_not_a_dut_at_zero(implementation):
    with pytest.raises(MethodologyError, match="sent no frames.*the port is down.*not a DUT result"):
        measure_mlrsearch(SendsNothing(DutModel()), F64, LR, MlrParams(implementation=implementation))


class Breaks(SimulatedMeasurer):
    def __init__(self, model, after):
        super().__init__(model)
        self.after = after

    def measure(self, load, duration_s):
        if self.trials >= self.after:
            raise OSError("the tester's port vanished")
        return super().measure(load, duration_s)


@pytest.mark.parametrize("implementation", ["netrig", "reference"])
def test_an_error_mid_search_keeps_the_partial_result(implementation):
    with pytest.raises(OSError) as ei:
        measure_mlrsearch(Breaks(DutModel(capacity_pps=1e6), 4), F64, LR, MlrParams(implementation=implementation))
    partial = partial_result(ei.value)
    assert partial is not None and not partial.complete and partial.trials == 4
    assert partial.to_dict()["complete"] is False
    if implementation == "netrig":  # its bounds so far: the coarse stage found NDR on a cliff in three trials
        ndr = partial.goal("NDR")
        assert ndr.stage == "coarse" and 995_000 <= ndr.lower_bound_pps <= 1e6


# ------------------------------------------------------------------------------------------------ #
# The tester's limit

def test_max_load_is_capped_at_the_tester_limit_and_a_pass_there_is_a_lower_bound():
    m = SimulatedMeasurer(DutModel(capacity_pps=5e6))
    r = measure_mlrsearch(m, F64, LR, MlrParams(), limit=ProvenLimit(2e6))
    assert r.max_load_pps == 2e6 and r.tester_cap_pps == 2e6
    for g in r.goals:
        assert g.lower_bound_pps == pytest.approx(2e6) and g.upper_bound_pps is None and g.tester_limited
    assert r.tester_limited and r.tester_limit_pps == pytest.approx(2e6)


def test_an_upper_bound_on_tester_failures_is_flagged():
    """No self-test: the tester fails above 3 Mfps and the DUT forwards 5 Mfps."""
    m = SimulatedMeasurer(DutModel(capacity_pps=5e6, tester_ceiling_pps=3e6, tester_tolerance_ratio=0.0))
    r = measure_mlrsearch(m, F64, LR, MlrParams())
    assert r.tester_trials > 0 and r.goal("NDR").tester_limited and r.tester_limited


def test_a_tester_stall_at_a_load_the_dut_fails_is_not_a_tester_limit():
    """The demo's NDR: at 97.6 kfps one trial the tester could not send and two valid ones with
    loss; the upper bound is the DUT's (the valid trials make it one), not the tester's."""
    t = _Target(0.0, 0.5, 0.005, 1.0, 3.0)
    stall = _Trial(1.0, 0.08, Verdict.TESTER)
    lossy = [_Trial(1.0, 0.0235, Verdict.VALID), _Trial(1.0, 0.0147, Verdict.VALID)]
    assert classify([stall, *lossy], t) == "upper" and not rests_on_tester([stall, *lossy], t)
    stalls = [stall, stall, _Trial(1.0, 0.0, Verdict.VALID)]
    assert classify(stalls, t) == "upper" and rests_on_tester(stalls, t), "only the stalls make it upper"
    assert not rests_on_tester(lossy, t)
    # The demo's 5-s duration sum: the two valid lossy trials alone leave the load undecided (2 s of
    # loss, 2.5 s needed), yet the DUT lost frames there; the bound is the DUT's ("≥ 102 kfps
    # (tester-limited)" was printed with the tester proven at 269 kfps).
    t5 = _Target(0.0, 0.5, 0.005, 1.0, 5.0)
    assert classify([stall, *lossy], t5) == "upper" and not rests_on_tester([stall, *lossy], t5)
    assert rests_on_tester([stall, stall, stall, _Trial(1.0, 0.0, Verdict.VALID)], t5)


class StallsOnceNearTheAnswer(SimulatedMeasurer):
    """A 1 Mfps DUT behind a tester that stalls (an invalid, stretched trial) on the first trial it
    is asked below 1 Mfps after it sent a higher load in full."""

    def __init__(self):
        super().__init__(DutModel(capacity_pps=1e6))
        self.asked: list[float] = []

    def measure(self, load, duration_s):
        first = bool(self.asked) and load.rate_pps < 1e6 and not any(r < 1e6 for r in self.asked)
        self.asked.append(load.rate_pps)
        c = super().measure(load, duration_s)
        if not first:
            return c
        return replace(c, achieved_pps=0.97 * load.rate_pps, frames_sent=c.frames_sent // 50,
                       frames_received=c.frames_sent // 50, valid=False, invalid_reason="stretched")


@pytest.mark.parametrize("implementation", ["netrig", "reference"])
def test_a_stall_at_a_load_the_tester_sent_before_is_repeated_not_an_upper_bound(implementation):
    """Single-trial goals: taken as a failed load, the stall at 998 kfps made it the upper bound and
    put NDR a grid step or more below the DUT's 1 Mfps."""
    if implementation == "reference" and importlib.util.find_spec("MLRsearch") is None:
        pytest.skip("the reference implementation needs the MLRsearch package")
    goal = SearchGoal("NDR", 0.0, 0.5, 0.005, 1.0, 1.0, 1.0)
    m = StallsOnceNearTheAnswer()
    r = measure_mlrsearch(m, F64, LR, MlrParams(goals=(goal,), implementation=implementation))
    ndr = r.goal("NDR")
    assert r.repeated_trials == 1 and r.trials == len(m.asked) and r.to_dict()["repeated_trials"] == 1, m.asked
    assert 1e6 * (1 - 2 * goal.relative_width) <= ndr.lower_bound_pps <= 1e6 and not ndr.tester_limited, m.asked


@pytest.mark.parametrize("seed", range(20))
def test_under_random_stalls_an_answer_is_right_or_says_tester_limited(seed):
    """A tester that stalls in a fifth of its trials at any load: every stall at a load it sent in
    full before is repeated, so the NDR is the DUT's, within the width — unless the stalls came
    before the tester sent anything in full, and then the goal says the tester limited it."""
    goal = SearchGoal("NDR", 0.0, 0.5, 0.005, 1.0, 1.0, 1.0)
    m = Logged(SimulatedMeasurer(DutModel(capacity_pps=1e6, tester_stall_probability=0.2, seed=seed)))
    r = measure_mlrsearch(m, F64, LR, MlrParams(goals=(goal,)))
    ndr = r.goal("NDR")
    assert not unrepeated_stalls(m.trials) and r.repeated_trials == repeats(m.trials), m.trials
    assert ndr.tester_limited or 1e6 * (1 - 2 * goal.relative_width) <= ndr.lower_bound_pps <= 1e6, ndr


def test_dut_backpressure_is_the_dut_failing_not_a_tester_limit():
    """The self-test proved 600 kfps; through the DUT the tester reaches 4.5 kfps."""
    m = SimulatedMeasurer(DutModel(capacity_pps=1e6, backpressure_pps=4500, tester_tolerance_ratio=0.0))
    r = measure_mlrsearch(m, F64, LineRate(1e9), MlrParams(goals=DEMO_GOALS, min_rate_pct=0.1),
                          limit=ProvenLimit(600e3))
    ndr = r.goal("NDR")
    assert not ndr.tester_limited and r.backpressure_trials > 0 and r.backpressure_pps == pytest.approx(4500)
    assert 4500 * (1 - 2 * ndr.goal.relative_width) <= ndr.conditional_throughput_pps <= 4500


def test_trial_counts_drive_the_loss_ratio():
    """A valid trial's loss is lost / sent whatever was intended; an invalid one counts its unsent."""
    from netrig.methodology.mlr import trial_loss_ratio
    from netrig.methodology.tester import Verdict

    c = TrialCounts(achieved_pps=999_999.4, frames_sent=999_999, frames_received=999_999)
    assert trial_loss_ratio(c, 1e6, 1.0, Verdict.VALID) == 0.0
    short = TrialCounts(achieved_pps=500_000, frames_sent=500_000, frames_received=500_000, valid=False)
    assert trial_loss_ratio(short, 1e6, 1.0, Verdict.BACKPRESSURE) == pytest.approx(0.5)
    # an OTG flow sends every frame, late: the 28 % its achieved rate could not carry in the trial's
    # second were not offered at the load (they counted as offered, so a tester that fell short at
    # the maximum load passed it, and NDR/PDR over OTG read "not measured")
    late = TrialCounts(achieved_pps=720_000, frames_sent=1_000_000, frames_received=1_000_000, valid=False)
    assert trial_loss_ratio(late, 1e6, 1.0, Verdict.TESTER) == pytest.approx(0.28)
    assert Load(1.0, F64)  # the seam accepts tiny loads


@pytest.mark.parametrize("implementation", ["netrig", "reference"])
def test_a_load_the_host_spoilt_in_every_attempt_stops_the_search_at_a_lower_bound(implementation):
    """The DUT forwards 1 Mfps; the host takes the tester's CPU at every load from 1 Mfps up (each
    trial there 10 % short, the CPU taken covering it). Counted as bad trials, those loads put the
    NDR's upper bound on the host. The spoilt load is tried three times, then the search stops: no
    bound rests on it, and the goal's lower bound is a lower bound ("≥"), the host named."""
    if implementation == "reference" and importlib.util.find_spec("MLRsearch") is None:
        pytest.skip("the reference implementation needs the MLRsearch package")
    goal = SearchGoal("NDR", 0.0, 0.5, 0.005, 1.0, 1.0, 1.0)
    m = HostSpoils(SimulatedMeasurer(DutModel(capacity_pps=1e6)), 1.0e6, 1.2e6)
    r = measure_mlrsearch(m, F64, LR, MlrParams(goals=(goal,), implementation=implementation))
    spoilt = [x for x in m.asked if 1.0e6 <= x <= 1.2e6]
    assert m.asked[-3:] == spoilt == [spoilt[0]] * 3, m.asked
    assert r.trials == len(m.asked) and r.repeated_trials == 2 and r.tester_trials == 0, m.asked
    assert r.platform and "the host took 280 ms" in r.platform and r.to_dict()["platform"] == r.platform
    ndr = r.goal("NDR")
    if implementation == "reference":  # it gives no bounds before its end
        assert r.not_measured == r.platform and ndr.conditional_throughput_pps is None
        return
    assert ndr.tester_limited and r.not_measured is None
    assert 1e6 * (1 - goal.relative_width) <= ndr.lower_bound_pps < 1e6 and ndr.upper_bound_pps > 1.2e6, m.asked
