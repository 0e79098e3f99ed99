"""netrig's MLRsearch agrees with the reference package (MLRsearch==1.2.1) on simulated DUTs."""
from dataclasses import replace

import pytest

from netrig.measure import DutModel, SimulatedMeasurer
from netrig.methodology.mlr import SearchGoal
from netrig.methods.mlrsearch import MlrParams, measure_mlrsearch
from netrig.model import FrameSize, LineRate

LR = LineRate(10e9)

DUTS = {
    "hard cap 1 Mpps": DutModel(capacity_pps=1e6),
    "policer 500 Mbit/s": DutModel(capacity_pps=1e9, capacity_bps=5e8),
    "livelock": DutModel(capacity_pps=2e6, livelock_slope=0.5, livelock_floor=0.1),
    "background loss 0.2 %": DutModel(capacity_pps=1e6, background_loss_ratio=0.002),
    "slow DUT 50 kpps": DutModel(capacity_pps=5e4),
    "fast DUT at line rate": DutModel(capacity_pps=1e9),
    "tester ceiling 3 Mpps": DutModel(capacity_pps=5e6, tester_ceiling_pps=3e6, tester_tolerance_ratio=0.0),
}

GOAL_SETS = {
    "single trial": (SearchGoal("NDR", 0.0, 0.5, 0.005, 1, 1, 1), SearchGoal("PDR", 0.005, 0.5, 0.005, 1, 1, 1)),
    "exceed ratio, dursum 3": (SearchGoal("NDR", 0.0, 0.5, 0.005, 1, 1, 3), SearchGoal("PDR", 0.005, 0.5, 0.01, 0.5, 1, 3)),
}


@pytest.mark.parametrize("goals", list(GOAL_SETS.values()), ids=list(GOAL_SETS))
@pytest.mark.parametrize("dut", list(DUTS), ids=list(DUTS))
def test_agrees_with_reference(dut, goals):
    params = MlrParams(goals=goals, min_rate_pct=0.1)
    frame = FrameSize(64)
    ours = measure_mlrsearch(SimulatedMeasurer(DUTS[dut]), frame, LR, params)
    ref = measure_mlrsearch(SimulatedMeasurer(DUTS[dut]), frame, LR, replace(params, implementation="reference"))
    for a, b in zip(ours.goals, ref.goals):
        assert a.goal == b.goal
        if b.conditional_throughput_pps is None:
            assert a.conditional_throughput_pps is None, (a, b)
            continue
        assert a.conditional_throughput_pps is not None, (a, b)
        tol = a.goal.relative_width * max(a.upper_bound_pps or a.lower_bound_pps, b.upper_bound_pps or b.lower_bound_pps)
        assert abs(a.conditional_throughput_pps - b.conditional_throughput_pps) <= tol + 1, (dut, a, b)


def test_truth_within_width():
    cap = 1e6
    ours = measure_mlrsearch(SimulatedMeasurer(DutModel(capacity_pps=cap)), FrameSize(64), LR, MlrParams())
    for g in ours.goals:
        assert g.lower_bound_pps <= cap * (1 + g.goal.loss_ratio) + 1
        assert g.upper_bound_pps - g.lower_bound_pps <= g.goal.relative_width * g.upper_bound_pps * 1.0001
        assert cap * (1 - g.goal.relative_width) <= g.conditional_throughput_pps <= cap + 1
