"""Back-to-back bursts: an invalid probe is the tester's failure, never a failed burst; a tester that
cannot reach the burst rate marks the result tester-limited instead of biasing it."""
from __future__ import annotations

from dataclasses import replace

import pytest

from netrig.measure import DutModel, Load, SimulatedMeasurer, TrialCounts
from netrig.measure.platform import StallEpisode, StallSide, TrialStalls
from netrig.methods.back_to_back import (
    BY_TESTER,
    CALIBRATION_BURSTS,
    HELD_RATE_SHARE,
    INVALID_RETRIES,
    MAX_REPACES,
    BackToBackParams,
    measure_back_to_back,
    stall_cause,
)
from netrig.model import FrameSize, LineRate

LR = LineRate(10e9, "nominal", "veth0")
F64 = FrameSize(64)


class Flaky:
    """A measurer whose every ``every``-th burst probe is invalid (the tester's receiver dropped
    frames, say), with the counts of a lossy burst: what a method must not take as DUT loss."""

    def __init__(self, inner: SimulatedMeasurer, every: int):
        self.inner, self.every, self.calls = inner, every, 0

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        self.calls += 1
        c = self.inner.measure(load, duration_s)
        if self.calls % self.every == 0:
            return replace(c, frames_received=c.frames_sent // 2, valid=False,
                           invalid_reason="the tester's receiver dropped 500 frames")
        return c

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("every", [2, 3, 7])
def test_an_invalid_probe_is_not_a_failed_burst(every):
    model = DutModel(capacity_pps=1e6, buffer_frames=1_000)
    truth = model.max_burst(LR.fps(F64), F64)
    r = measure_back_to_back(Flaky(SimulatedMeasurer(model), every), F64, LR, BackToBackParams(trials=5),
                             throughput_pps=1e6)
    assert len(r.bursts_frames) == 5 and r.abandoned_trials == 0
    for b in r.bursts_frames:
        assert b <= truth and truth - b <= max(1, truth // 1000) + 1, (b, truth)
    assert not r.tester_limited


def test_a_search_that_cannot_probe_is_abandoned_and_not_averaged():
    model = DutModel(capacity_pps=1e6, buffer_frames=1_000)
    m = Flaky(SimulatedMeasurer(model), 1)
    r = measure_back_to_back(m, F64, LR, BackToBackParams(trials=3))
    assert r.bursts_frames == () and r.abandoned_trials == 3
    assert m.calls == CALIBRATION_BURSTS + 3 * (1 + INVALID_RETRIES), \
        "the calibration tried its bursts, then each search tried its first probe and gave up"
    assert r.held_burst_rate_fps is None, "no valid calibration burst: no rate to hold"
    assert r.to_dict()["abandoned_trials"] == 3
    assert r.abandoned_reasons == ("the tester's receiver dropped 500 frames",) * 3
    assert r.to_dict()["abandoned_reasons"] == list(r.abandoned_reasons)


def test_a_tester_below_the_burst_rate_sends_whole_bursts_and_limits_the_result():
    # The tester reaches 1 Mpps of the 14.88 Mpps line rate and paces its bursts at 0.9 Mpps; the
    # DUT forwards 0.5 Mpps with a 1000-frame buffer: bursts at 0.9 Mpps pass up to
    # 1000 / (1 - 0.5 / 0.9) = 2250 frames.
    model = DutModel(capacity_pps=0.5e6, buffer_frames=1_000, tester_ceiling_pps=1e6)
    r = measure_back_to_back(SimulatedMeasurer(model), F64, LR, BackToBackParams(trials=3), throughput_pps=0.5e6)
    held = HELD_RATE_SHARE * 1e6
    truth = model.max_burst(held, F64)
    assert truth == pytest.approx(2_250, abs=2)
    for b in r.bursts_frames:
        assert b <= truth and truth - b <= max(1, truth // 1000) + 1, (b, truth)
    assert r.held_burst_rate_fps == pytest.approx(held)
    assert r.tester_limited and r.achieved_burst_rate_fps == pytest.approx(held)
    assert r.tester_limit_pps == pytest.approx(held)
    d = r.to_dict()
    assert d["tester_limited"] is True and d["achieved_burst_rate_fps"] == pytest.approx(held)
    assert d["held_burst_rate_fps"] == pytest.approx(held)


class Wavering(Flaky):
    """A tester whose top rate changes from burst to burst (1 Mpps, then 0.6 Mpps, ...) with no
    pause in any: veth's unpaced bursts left at 296-669 kfps. Paced below its slowest, it holds."""

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        self.calls += 1
        top = 1e6 if self.calls % self.every else 0.6e6
        return self.inner.measure(replace(load, rate_pps=min(load.rate_pps, top)), duration_s)


def test_a_tester_whose_top_rate_wavers_paces_every_probe_at_one_rate_it_holds():
    # Sent as fast as it could, the probes would meet the 0.5-Mpps DUT at 1 or 0.6 Mpps and pass
    # 2 000 or 6 000 frames by turns; paced at 0.9 x 0.6 Mpps, every burst passes the same number.
    model = DutModel(capacity_pps=0.5e6, buffer_frames=1_000)
    m = Wavering(SimulatedMeasurer(model), 2)
    r = measure_back_to_back(m, F64, LR, BackToBackParams(trials=4), throughput_pps=0.5e6)
    held = HELD_RATE_SHARE * 0.6e6
    truth = model.max_burst(held, F64)
    assert r.held_burst_rate_fps == pytest.approx(held) and r.repeated_probes == 0
    assert len(r.bursts_frames) == 4
    for b in r.bursts_frames:
        assert b <= truth and truth - b <= max(1, truth // 1000) + 1, (b, truth)


class Slow(Flaky):
    """A measurer whose every ``every``-th burst of the search (after the calibration) leaves at
    0.3 Mpps, with no single pause (a CPU shared all along): the DUT, a 0.5-Mpps forwarder, keeps up
    with that burst."""

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        self.calls += 1
        if self.calls > CALIBRATION_BURSTS and self.calls % self.every == 0:
            return self.inner.measure(replace(load, rate_pps=0.3e6), duration_s)
        return self.inner.measure(load, duration_s)


@pytest.mark.parametrize("every", [3, 5])
def test_a_burst_the_tester_sent_slowly_is_not_a_passed_burst(every):
    model = DutModel(capacity_pps=0.5e6, buffer_frames=1_000, tester_ceiling_pps=1e6)
    truth = model.max_burst(HELD_RATE_SHARE * 1e6, F64)
    m = Slow(SimulatedMeasurer(model), every)
    r = measure_back_to_back(m, F64, LR, BackToBackParams(trials=4), throughput_pps=0.5e6)
    assert len(r.bursts_frames) == 4 and r.abandoned_trials == 0
    for b in r.bursts_frames:
        assert b <= truth and truth - b <= max(1, truth // 1000) + 1, (b, truth)
    assert r.achieved_burst_rate_fps == pytest.approx(HELD_RATE_SHARE * 1e6), "a slow burst's rate is not the tester's"
    assert r.repeated_probes > 0 and r.to_dict()["repeated_probes"] == r.repeated_probes


class DutStalls(Flaky):
    """A measurer whose every ``every``-th probe of the search meets a 2.7-ms stall of the DUT's CPU,
    and its count is the stall's: a burst that passes loses half its frames, one that lost passes."""

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        self.calls += 1
        c = self.inner.measure(load, duration_s)
        if self.calls <= CALIBRATION_BURSTS or self.calls % self.every:
            return c
        stall = TrialStalls(StallSide(), StallSide((StallEpisode(0.001, 2.7, 1, False),)))
        got = c.frames_sent // 2 if c.frames_lost == 0 else c.frames_sent
        return replace(c, frames_received=got, stalls=stall)


@pytest.mark.parametrize("every", [2, 5])
def test_a_burst_the_duts_cpu_stalled_in_is_no_evidence_either_way(every):
    model = DutModel(capacity_pps=0.5e6, buffer_frames=1_000, tester_ceiling_pps=1e6)
    truth = model.max_burst(HELD_RATE_SHARE * 1e6, F64)
    r = measure_back_to_back(DutStalls(SimulatedMeasurer(model), every), F64, LR, BackToBackParams(trials=4),
                             throughput_pps=0.5e6)
    assert len(r.bursts_frames) == 4 and r.abandoned_trials == 0 and r.repeated_probes > 0
    for b in r.bursts_frames:
        assert b <= truth and truth - b <= max(1, truth // 1000) + 1, (b, truth)


def test_a_stall_names_who_stopped_the_cpu():
    """The reason a stalled burst is no evidence says whose stall it was, so the host's and the
    guest's are told from netrig's own threads on the DUT's CPU (the first rule's concern)."""
    assert stall_cause(StallEpisode(0.0, 2.8, 1, False)) == "the host stopped it"
    assert stall_cause(StallEpisode(0.0, 2.8, 1, True, "kdamond.0")) == "kdamond.0 held it"
    assert stall_cause(StallEpisode(0.0, 2.8, 1, True, "netrig-rx0", True)) == f"{BY_TESTER} netrig-rx0 held it"


class Slowed(Flaky):
    """A tester whose top rate falls to ``top`` for good after ``every`` bursts, with no pause in any
    (on veth its top rate halves for seconds at a time): from then on it cannot hold the rate it
    calibrated, and every passing burst leaves slowly."""

    def __init__(self, inner: SimulatedMeasurer, every: int, top: float):
        super().__init__(inner, every)
        self.top = top

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        self.calls += 1
        top = self.top if self.calls > self.every else 1e6
        return self.inner.measure(replace(load, rate_pps=min(load.rate_pps, top)), duration_s)


def test_a_tester_that_slows_for_good_paces_every_search_again_at_a_rate_it_holds():
    # Calibrated at 1 Mpps and pacing at 0.9 Mpps, the tester falls to 0.5 Mpps mid-search: its
    # passing bursts leave >= 1 ms slowly in every attempt. The measurement starts again at 0.9 x
    # 0.5 Mpps, and every burst is searched at that one rate (before: searches abandoned).
    model = DutModel(capacity_pps=0.2e6, buffer_frames=1_000)
    m = Slowed(SimulatedMeasurer(model), CALIBRATION_BURSTS + 12, 0.5e6)
    r = measure_back_to_back(m, F64, LR, BackToBackParams(trials=3), throughput_pps=0.2e6)
    held = HELD_RATE_SHARE * 0.5e6
    truth = model.max_burst(held, F64)
    assert r.held_burst_rate_fps == pytest.approx(held) and r.achieved_burst_rate_fps == pytest.approx(held)
    assert len(r.bursts_frames) == 3 and r.abandoned_trials == 0 and r.repeated_probes >= INVALID_RETRIES
    for b in r.bursts_frames:
        assert b <= truth and truth - b <= max(1, truth // 1000) + 1, (b, truth)


class Halving(Flaky):
    """A tester that sends every burst of the search at half the rate it paces it at."""

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        self.calls += 1
        slow = load.rate_pps / 2 if self.calls > CALIBRATION_BURSTS else load.rate_pps
        return self.inner.measure(replace(load, rate_pps=min(slow, 1e6)), duration_s)


def test_a_tester_that_never_holds_its_rate_gives_up_after_its_repaces_saying_why():
    model = DutModel(capacity_pps=0.2e6, buffer_frames=1_000)
    m = Halving(SimulatedMeasurer(model), 1)
    r = measure_back_to_back(m, F64, LR, BackToBackParams(trials=2), throughput_pps=0.2e6)
    assert r.bursts_frames == () and r.abandoned_trials == 2
    assert r.held_burst_rate_fps == pytest.approx(1e6 * HELD_RATE_SHARE * (HELD_RATE_SHARE / 2) ** MAX_REPACES)
    assert all("slower than at" in w and "the DUT drained meanwhile" in w for w in r.abandoned_reasons), r
    assert m.calls < 100, "it stops: a bounded number of repaces, each a bounded search"
