"""The RFC 8219 self-test (``netrig.methodology.selftest.prove_rate``) behind a tester that stalls:
a stall is repeated, never taken for the tester's ceiling, and the proven rate is never below a
valid loss-free trial of the proof's own."""
from __future__ import annotations

import pytest
from tests.stalls import Logged, repeats, unrepeated_stalls

from netrig.measure import DutModel, SimulatedMeasurer, TrialCounts
from netrig.methodology.selftest import SelftestParams, SelftestResult, prove_rate
from netrig.model import FrameSize, LineRate

LR = LineRate(10e9, "nominal", "veth0")
F64 = FrameSize(64)


def stalling(ceiling_pps: float, stall_probability: float, seed: int) -> Logged:
    """A looped-back tester that sends at most ``ceiling_pps`` and stalls (an invalid, stretched
    trial) in a random share of its trials at any load, seeded."""
    return Logged(SimulatedMeasurer(DutModel(capacity_pps=1e15, tester_ceiling_pps=ceiling_pps,
                                             tester_tolerance_ratio=0, tester_stall_probability=stall_probability,
                                             seed=seed)))


@pytest.mark.parametrize("seed", range(30))
def test_a_stall_never_proves_less_than_a_valid_trial_of_its_own(seed):
    """On af_packet a stall right after a valid 451 kfps trial "proved" 1.12 kfps: its trial, stopped
    early, received little over the planned duration, and that pointed the search down."""
    tester = stalling(700e3, 0.3, seed)
    c = prove_rate(tester, F64, LR, LR.fps(F64), SelftestParams(duration_s=1, resolution_pct=1))
    good = [rate for rate, x in tester.trials if x.valid and x.frames_lost == 0]
    assert c.proven_rate_pps == max(good), tester.trials
    # every stall at a load the tester had sent in full was tried again (up to TRANSIENT_REPEATS times)
    assert not unrepeated_stalls(tester.trials), tester.trials
    assert c.repeated_trials == repeats(tester.trials)
    # a stall lowers no bracket by more than its shortfall: the ceiling is found near the truth
    assert 0.95 * 700e3 <= c.proven_rate_pps <= 700e3


def test_a_stall_after_a_valid_trial_is_repeated_and_said_so():
    """The tester sent 400 kfps in full, then stalled at a lower load: the trial is repeated
    (``repeated_trials``), and the proof goes on from it, not from what the stalled trial received."""

    class StallsOnce:
        def __init__(self):
            self.asked: list[float] = []

        def measure(self, load, duration_s):
            self.asked.append(load.rate_pps)
            rate = min(load.rate_pps, 400e3)
            sent = int(rate * duration_s)
            if len(self.asked) == 2:  # the trial after the first: stopped after 1 % of its duration
                return TrialCounts(achieved_pps=load.rate_pps * 0.97, intended_pps=load.rate_pps,
                                   frames_sent=sent // 100, frames_received=sent // 100, valid=False,
                                   invalid_reason="stretched")
            lost = 0 if load.rate_pps <= 390e3 else sent // 100
            return TrialCounts(achieved_pps=rate, intended_pps=load.rate_pps, frames_sent=sent,
                               frames_received=sent - lost, valid=load.rate_pps <= 400e3)

    m = StallsOnce()
    c = prove_rate(m, F64, LR, 400e3 / 1.1, SelftestParams(duration_s=1, resolution_pct=1))
    assert m.asked[1] == m.asked[2] and c.repeated_trials == 1, m.asked
    assert 0.99 * 390e3 <= c.proven_rate_pps <= 390e3, m.asked
    assert c.to_dict()["repeated_trials"] == 1


def test_a_trial_the_host_spoilt_is_never_a_ceiling():
    """A clean study on a noisy host: every trial above 100 kfps stretched by what the host
    measurably took (steal covering the stretch), and the proof walked down to 360 fps, each
    trial read as the tester's limit. A trial the platform spoilt is repeated, and when every
    attempt is spoilt the proof stops: what it proved is a lower bound, vouching for and capping
    nothing above it."""

    class NoisyHost:
        def __init__(self):
            self.asked: list[float] = []

        def measure(self, load, duration_s):
            self.asked.append(load.rate_pps)
            sent = int(min(load.rate_pps, 700e3) * duration_s)
            if load.rate_pps > 100e3:  # the host took 280 ms of a trial stretched 96 ms
                return TrialCounts(achieved_pps=load.rate_pps * 0.9, intended_pps=load.rate_pps,
                                   frames_sent=sent * 9 // 10, frames_received=sent * 9 // 10, valid=False,
                                   invalid_reason="stretched", host_take_s=0.28)
            return TrialCounts(achieved_pps=load.rate_pps, intended_pps=load.rate_pps, frames_sent=sent,
                               frames_received=sent, valid=True)

    m = NoisyHost()
    c = prove_rate(m, F64, LR, 400e3 / 1.1, SelftestParams(duration_s=1, resolution_pct=1))
    assert m.asked == [400e3] * 3, "the first load, tried again twice (TRANSIENT_REPEATS), then the proof stops"
    assert c.platform and "the host took 280 ms" in c.platform and c.repeated_trials == 2
    assert c.not_measured == c.platform, "nothing proven: not measured, the host named (it read '≥ 0 fps')"
    assert not c.passed and c.to_dict()["platform"] == c.platform
    result = SelftestResult(SelftestParams(), "bridge", (c,))
    assert result.limit_pps(F64) is None and result.is_above(F64, 1.0), "a lower bound caps nothing"
