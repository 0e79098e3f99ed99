"""Every method's answer on simulated DUTs with known truth is within its stated resolution."""

import pytest
from tests.stalls import HostSpoils

from netrig.errors import ConfigError, MethodologyError
from netrig.measure import DutModel, Interval, Load, SimulatedMeasurer, TrialCounts
from netrig.methodology.selftest import SelftestParams, prove_rate
from netrig.methodology.tester import CapOnly, ProvenLimit
from netrig.methods.back_to_back import BackToBackParams, measure_back_to_back
from netrig.methods.frame_loss import FrameLossParams, measure_frame_loss
from netrig.methods.iperf import IperfParams, measure_iperf
from netrig.methods.latency import LatencyParams, measure_latency
from netrig.methods.recovery import RecoveryParams, RecoveryResult, measure_recovery
from netrig.methods.reset import ResetParams, measure_reset, simulated_reset
from netrig.methods.throughput import ThroughputParams, measure_throughput
from netrig.model import FrameSize, LineRate, parse_frame_sizes, rate_object

LR = LineRate(10e9, "nominal", "veth0")
F64 = FrameSize(64)


def test_line_rate_and_rate_object():
    assert LR.fps(F64) == pytest.approx(14_880_952.38, rel=1e-9)
    assert LineRate(1e9).fps(FrameSize(1518)) == pytest.approx(81_274, rel=1e-4)
    r = rate_object(LR.fps(F64) / 2, F64, LR)
    assert r["pct_line_rate"] == pytest.approx(50.0)
    assert r["l1_bps"] == pytest.approx(5e9)
    assert r["l2_bps"] == pytest.approx(5e9 * 64 / 84)
    imix = FrameSize.parse("imix")
    assert imix.mean_size == pytest.approx((64 * 57 + 570 * 7 + 594 * 16 + 1518 * 20) / 100)
    assert FrameSize.parse("simple-imix").mean_size == pytest.approx((64 * 7 + 570 * 4 + 1518) / 12)
    assert [f.label for f in parse_frame_sizes("rfc")] == [64, 128, 256, 512, 1024, 1280, 1518]


@pytest.mark.parametrize("cap", [123_456.0, 1_000_000.0, 7_000_000.0, 14_000_000.0])
@pytest.mark.parametrize("resolution_pct", [1.0, 0.1])
def test_throughput_within_resolution(cap, resolution_pct):
    m = SimulatedMeasurer(DutModel(capacity_pps=cap))
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1, resolution_pct=resolution_pct))
    res = resolution_pct / 100 * LR.fps(F64)
    assert r.rate_pps <= cap and cap - r.rate_pps <= res
    assert r.upper_pps is not None and r.upper_pps > cap
    assert not r.tester_limited


def test_throughput_at_line_rate_needs_one_trial():
    m = SimulatedMeasurer(DutModel(capacity_pps=1e9))
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1))
    assert r.trials == 1 and r.rate_pps == pytest.approx(LR.fps(F64)) and r.upper_pps is None


def test_throughput_policer_in_bits_per_second():
    m = SimulatedMeasurer(DutModel(capacity_pps=1e9, capacity_bps=1e9))
    for size in (64, 512, 1518):
        f = FrameSize(size)
        r = measure_throughput(m, f, LR, ThroughputParams(duration_s=1, resolution_pct=0.1))
        truth = 1e9 / (size * 8)
        assert truth - 0.001 * LR.fps(f) <= r.rate_pps <= truth


def test_tester_limit_is_not_dut_loss():
    # the DUT could forward 5 Mpps but the tester only sends 2 Mpps: never report DUT loss above 2 M
    m = SimulatedMeasurer(DutModel(capacity_pps=5e6, tester_ceiling_pps=2e6))
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1, resolution_pct=0.1))
    assert r.tester_limited and r.tester_limit_pps == 2e6
    assert r.repeated_trials == 1  # the shortfall bounding the search, measured again: short again
    assert r.rate_pps <= 2e6 * 1.02 and r.rate_pps >= 2e6 - 0.001 * LR.fps(F64)


def test_frame_loss_curve_and_livelock():
    cap = 5e6
    m = SimulatedMeasurer(DutModel(capacity_pps=cap, livelock_slope=0.8, livelock_floor=0.05))
    r = measure_frame_loss(m, F64, LR, FrameLossParams(duration_s=1, step_pct=10))
    pcts = [p.intended_pct for p in r.curve]
    assert pcts[0] == 100 and all(a - b == pytest.approx(10) for a, b in zip(pcts, pcts[1:]))
    # stops after two successive loss-free trials
    assert [p.loss_ratio == 0 for p in r.curve][-2:] == [True, True]
    assert all(p.loss_ratio > 0 for p in r.curve[:-2])
    for p in r.curve:  # each point matches the model
        truth = DutModel(capacity_pps=cap, livelock_slope=0.8, livelock_floor=0.05).forwarding_rate(p.intended_pps, F64)
        assert p.forwarded_pps == pytest.approx(truth, rel=1e-5, abs=2)
    assert r.livelock
    assert r.max_lossfree_pps <= cap and cap - r.max_lossfree_pps <= 0.1 * LR.fps(F64)


def test_frame_loss_no_livelock_with_hard_cap():
    r = measure_frame_loss(SimulatedMeasurer(DutModel(capacity_pps=5e6)), F64, LR, FrameLossParams(duration_s=1))
    assert not r.livelock


@pytest.mark.parametrize("buffer_frames", [100, 2000, 50_000])
@pytest.mark.parametrize("cap", [1e6, 9e6])
def test_back_to_back_and_rfc9004_buffer_time(buffer_frames, cap):
    model = DutModel(capacity_pps=cap, buffer_frames=buffer_frames)
    r = measure_back_to_back(SimulatedMeasurer(model), F64, LR, BackToBackParams(trials=5), throughput_pps=cap)
    truth = model.max_burst(LR.fps(F64), F64)
    assert len(r.bursts_frames) == 5
    for b in r.bursts_frames:
        assert b <= truth and truth - b <= max(1, truth // 1000) + 1
    n, R = r.mean_burst_frames, LR.fps(F64)
    assert r.implied_buffer_time_s == pytest.approx(n / R)
    assert r.corrected_buffer_time_s == pytest.approx((n - (n / R) * cap) / R)
    # the corrected buffer time is the time to fill B frames at the excess rate: ~ B / R
    assert r.corrected_buffer_time_s == pytest.approx(buffer_frames / R, rel=0.01, abs=2 / R)


def test_back_to_back_whole_burst_fits():
    r = measure_back_to_back(SimulatedMeasurer(DutModel(capacity_pps=1e9)), F64, LR,
                             BackToBackParams(trials=2, max_burst_frames=10_000))
    assert r.bursts_frames == (10_000, 10_000) and r.max_burst_reached


@pytest.mark.parametrize("rec_s", [0.0, 0.5, 3.4, 7.0])
@pytest.mark.parametrize("interval_s", [1.0, 0.25])
def test_system_recovery_time(rec_s, interval_s):
    cap = 1e6
    m = SimulatedMeasurer(DutModel(capacity_pps=cap, recovery_s=rec_s))
    r = measure_recovery(m, F64, LR, cap, RecoveryParams(overload_duration_s=5, recovery_duration_s=12,
                                                         interval_s=interval_s))
    assert r.overload_pps == pytest.approx(1.1 * cap) and r.recovery_pps == pytest.approx(0.5 * cap)
    assert r.recovered
    assert rec_s <= r.recovery_time_s + 1e-9 < rec_s + interval_s + 1e-9


def test_system_recovery_time_is_whole_intervals_wherever_the_phase_starts():
    """The engine's interval starts are nanoseconds over 1e9; one interval after a switch at
    1.907019281 s is 0.5 s, not the floats' 0.5000000000000002."""
    start_ns = 1_907_019_281
    ivs = tuple(Interval((start_ns + k * 500_000_000) / 1e9, 0.5, 1, 1000, 1000 - (k == 0)) for k in range(3))
    r = RecoveryResult(F64, LR, 1e6, 1.1e6, 0.5e6, ivs, ivs[0].t_s, True)
    assert r.recovery_time_s == 0.5


def test_system_recovery_never_recovers():
    m = SimulatedMeasurer(DutModel(capacity_pps=1e6, recovery_s=100))
    r = measure_recovery(m, F64, LR, 1e6, RecoveryParams(overload_duration_s=2, recovery_duration_s=5))
    assert r.recovery_time_s is None and not r.recovered


def test_reset_time():
    m = SimulatedMeasurer(DutModel(capacity_pps=1e6, reset_time_s=1.25))
    calls = []
    r = measure_reset(m, F64, LR, 1e6, ResetParams(duration_s=10),
                      run_event=lambda e: calls.append(e) or simulated_reset(e))
    assert [e.at_s for e in calls] == [5.0] and r.reset_time_s == pytest.approx(1.25, abs=1e-5)
    assert r.event is not None and r.event.recovery_s == pytest.approx(1.25)


def test_reset_command_failure_is_a_clear_error():
    m = SimulatedMeasurer(DutModel())
    with pytest.raises(MethodologyError, match="reset command"):
        measure_reset(m, F64, LR, 1e6, ResetParams(command="false", duration_s=10))
    with pytest.raises(MethodologyError, match="timed out"):
        measure_reset(m, F64, LR, 1e6, ResetParams(command="sleep 5", duration_s=10, command_timeout_s=0.2))


def test_latency_typical_and_worst_case():
    m = SimulatedMeasurer(DutModel(capacity_pps=1e6))
    r = measure_latency(m, F64, LR, 1e6, LatencyParams(duration_s=1, trials=20))
    assert len(r.per_trial) == 20
    p50s = sorted(t.p50_ns for t in r.per_trial)
    assert r.typical_ns == pytest.approx((p50s[9] + p50s[10]) / 2)
    assert r.worst_case_ns >= r.typical_ns
    assert r.to_dict()["pdv_ns"] is not None and r.to_dict()["ipdv_ns"] is not None


def test_iperf_per_interval():
    m = SimulatedMeasurer(DutModel(capacity_pps=1e6))
    r = measure_iperf(m, F64, LR, IperfParams(rate_pct=10, duration_s=5, interval_s=1))
    assert len(r.per_interval) == 5
    assert r.received_pps == pytest.approx(1e6, rel=1e-6)
    assert r.loss_ratio == pytest.approx(1 - 1e6 / (0.1 * LR.fps(F64)), rel=1e-4)


def test_selftest_proves_or_finds_ceiling():
    tester = SimulatedMeasurer(DutModel(capacity_pps=1e15, tester_ceiling_pps=3e6, tester_tolerance_ratio=0))
    ok = prove_rate(tester, F64, LR, 2e6, SelftestParams(duration_s=1))
    assert ok.passed and ok.proven_rate_pps == pytest.approx(2.2e6)
    bad = prove_rate(tester, F64, LR, 3e6, SelftestParams(duration_s=1))
    assert not bad.passed and 0.99 * 3e6 <= bad.proven_rate_pps <= 3e6


def test_simulator_is_deterministic_per_trial():
    m = SimulatedMeasurer(DutModel(background_loss_ratio=0.01))
    a = m.measure(Load(5e5, F64, tag="k1"), 1.0)
    b = m.measure(Load(5e5, F64, tag="k1"), 1.0)
    c = m.measure(Load(5e5, F64, tag="k2"), 1.0)
    assert a == b and a.frames_lost > 0
    assert c.frames_lost != a.frames_lost or c == a


def test_params_validation_names_field():
    with pytest.raises(ConfigError, match="resolution_pct: must be > 0"):
        ThroughputParams(resolution_pct=0)
    with pytest.raises(ConfigError, match="trials: must be >= 1"):
        LatencyParams(trials=0)
    with pytest.raises(ConfigError, match="overload_pct"):
        RecoveryParams(overload_pct=90)


# ------------------------------------------------------------------------------------------------ #
# What the tester can prove, and a DUT that slows the tester

def test_throughput_goes_below_the_resolution_rather_than_report_zero():
    """The bracket [0, resolution) must not end the search: a DUT that forwards 4.5 kfps loss-free
    has a throughput of 4.5 kfps, not 0 (the resolution is 14.9 kfps here)."""
    m = SimulatedMeasurer(DutModel(capacity_pps=4500))
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1, resolution_pct=0.1))
    assert r.found and 4400 <= r.rate_pps <= 4500 and r.headline_pps == r.rate_pps


def test_dut_backpressure_is_measured_not_reported_as_zero():
    """veth: the DUT's forwarding runs on the sender's CPU, so a DUT with 3000 firewall rules slows
    the tester to 4.5 kfps. The self-test proved 600 kfps: the shortfall is the DUT's, the search
    goes on down and reports what the DUT forwarded without loss."""
    m = SimulatedMeasurer(DutModel(capacity_pps=1e6, backpressure_pps=4500, tester_tolerance_ratio=0))
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1, resolution_pct=0.1), ProvenLimit(600e3 / 1.1))
    assert r.found and 4400 <= r.rate_pps <= 4500
    assert r.backpressure_trials > 0 and r.backpressure_pps == pytest.approx(4500)
    assert not r.tester_limited and r.upper_pps is not None


def test_throughput_never_asks_more_than_the_tester_proved():
    m = SimulatedMeasurer(DutModel(capacity_pps=5e6))
    asked = []
    inner = m.measure
    m.measure = lambda load, d: (asked.append(load.rate_pps), inner(load, d))[1]
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1), ProvenLimit(2e6))
    assert max(asked) == pytest.approx(2e6) and r.trials == 1
    assert r.tester_limited and r.tester_limit_pps == pytest.approx(2e6) and r.tester_cap_pps == pytest.approx(2e6)
    assert r.upper_pps is None  # "≥ 2 Mfps": no upper bound


def test_without_a_selftest_a_shortfall_is_the_testers():
    m = SimulatedMeasurer(DutModel(capacity_pps=1e6, backpressure_pps=4500, tester_tolerance_ratio=0))
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1, resolution_pct=0.1))
    assert r.tester_limited and r.backpressure_trials == 0  # nothing proves the tester could do more


def test_frame_loss_sweep_starts_at_what_the_tester_proved():
    r = measure_frame_loss(SimulatedMeasurer(DutModel(capacity_pps=1e6)), F64, LR,
                           FrameLossParams(duration_s=1), ProvenLimit(2e6))
    assert r.curve[0].intended_pps == pytest.approx(2e6)
    assert [round(p.intended_pct - r.curve[0].intended_pct, 6) for p in r.curve] == [0, -10]


def test_frame_loss_sweep_under_backpressure_finds_a_loss_free_load():
    m = SimulatedMeasurer(DutModel(capacity_pps=1e6, backpressure_pps=4500, tester_tolerance_ratio=0))
    r = measure_frame_loss(m, F64, LR, FrameLossParams(duration_s=1), ProvenLimit(600e3 / 1.1))
    assert r.curve[0].backpressure and not r.curve[0].valid
    assert r.max_lossfree_pps is not None and r.max_lossfree_pps <= 4500


def test_livelock_sweep_ends_at_what_the_tester_proved():
    from netrig.methods.livelock import LivelockParams, measure_livelock

    r = measure_livelock(SimulatedMeasurer(DutModel(capacity_pps=1e6)), F64, LR, LivelockParams(duration_s=1),
                         ProvenLimit(2e6))
    assert max(p.intended_pps for p in r.points) == pytest.approx(2e6)


def test_selftest_starts_from_what_the_tester_reached():
    """On veth the nominal 10 Gbit/s is far above a software tester: the ceiling search starts at
    what the failed trial sent, not at half the required rate."""
    tester = SimulatedMeasurer(DutModel(capacity_pps=1e15, tester_ceiling_pps=700e3, tester_tolerance_ratio=0))
    c = prove_rate(tester, F64, LR, LR.fps(F64), SelftestParams(duration_s=1, resolution_pct=1))
    assert 0.99 * 700e3 <= c.proven_rate_pps <= 700e3 and tester.trials <= 6


def test_a_dut_losing_a_small_share_at_every_load_is_bisected_not_stepped_down():
    """A capture application loses 1 % at any load above 100 kfps (and nothing below): following
    each failed trial's forwarded rate would step down 1 % per trial; bisection takes a few."""

    class SmallLoss:
        def __init__(self):
            self.asked = []

        def measure(self, load, duration_s):
            self.asked.append(load.rate_pps)
            sent = int(load.rate_pps * duration_s)
            got = sent if load.rate_pps <= 100e3 else int(sent * 0.99)
            return TrialCounts(achieved_pps=load.rate_pps, frames_sent=sent, frames_received=got)

    m = SmallLoss()
    top = 550e3 / LR.fps(F64) * 100
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1, resolution_pct=top * 0.03,
                                                        initial_rate_pct=top, max_rate_pct=top))
    assert r.found and 100e3 - 0.03 * 550e3 <= r.rate_pps <= 100e3
    assert r.trials <= 8, m.asked


def test_cap_only_caps_the_search_but_never_blames_a_shortfall_on_the_dut():
    """The capture benchmark's limit: a sender that fell short below it was disturbed (nothing of the
    capture runs on its CPU), so the search counts the trial as the tester's, not as a failed load."""
    from netrig.methodology.tester import CapOnly, ProvenLimit, Verdict

    short = TrialCounts(achieved_pps=90e3, frames_sent=90_000, frames_received=90_000, valid=False,
                        invalid_reason="the tester sent 90.0% of the intended 100000 fps")
    assert ProvenLimit(200e3).verdict(short, 100e3) is Verdict.BACKPRESSURE
    assert CapOnly(200e3).verdict(short, 100e3) is Verdict.TESTER
    assert CapOnly(200e3).cap(300e3) == 200e3
    m = SimulatedMeasurer(DutModel(capacity_pps=1e9))
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1), CapOnly(2e6))
    assert r.tester_limited and r.rate_pps == pytest.approx(2e6) and r.upper_pps is None


class StalledOnce:
    """A DUT that forwards 30 kfps loss-free (a policer) behind a tester that stalls on the first
    ``stalls`` trials of the first load it is asked below 40 kfps: they fall short, invalid (a vCPU
    stall longer than the engine's own repeats allow)."""

    def __init__(self, stalls: int):
        self.stalls = stalls
        self.asked: list[float] = []

    def measure(self, load, duration_s):
        self.asked.append(load.rate_pps)
        sent = int(load.rate_pps * duration_s)
        first_low = next((r for r in self.asked if r <= 40e3), None)
        if load.rate_pps == first_low and self.stalls > 0:
            self.stalls -= 1
            return TrialCounts(achieved_pps=load.rate_pps * 0.8, frames_sent=int(sent * 0.8),
                               frames_received=int(sent * 0.8), valid=False, invalid_reason="stretched")
        got = min(sent, int(30e3 * duration_s))
        return TrialCounts(achieved_pps=load.rate_pps, frames_sent=sent, frames_received=got)


def test_a_stall_at_a_load_the_tester_already_sent_is_repeated_not_taken_for_its_limit():
    """The tester sent 200 kfps through the DUT (which lost most of it): a shortfall at 29.97 kfps
    later in the search is a stall, not the tester's limit. Taken as the limit, it capped the
    search, which then bisected to 15 kfps and reported that as the DUT's throughput."""
    m = StalledOnce(stalls=1)
    top = 200e3 / LR.fps(F64) * 100
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1, resolution_pct=2.0,
                                                        initial_rate_pct=top, max_rate_pct=top))
    assert r.found and 29e3 <= r.rate_pps <= 30e3, m.asked
    assert not r.tester_limited and r.repeated_trials == 1 and r.trials == len(m.asked)
    assert m.asked[1] == m.asked[2]  # the stalled load, repeated


def test_a_load_the_tester_never_sends_bounds_the_search_as_the_testers_limit():
    """Stalls on every repeat: the load is the tester's limit, and the answer below it is a lower
    bound ("≥", tester-limited) though the DUT failed a higher load."""
    m = StalledOnce(stalls=100)
    top = 200e3 / LR.fps(F64) * 100
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1, resolution_pct=2.0,
                                                        initial_rate_pct=top, max_rate_pct=top))
    assert r.repeated_trials == 2 and r.upper_pps == pytest.approx(200e3), m.asked
    assert r.found and r.rate_pps == pytest.approx(m.asked[1] / 2) and r.tester_limited


class ShortAtFirst:
    """A 120-kpps policer behind a tester that falls short on its first trial at each load in
    ``loads`` (the host stopped it for a while, by less than the trial stretched), and sends every
    other trial in full."""

    def __init__(self, loads: set[float]):
        self.loads = loads
        self.asked: list[float] = []

    def measure(self, load, duration_s):
        self.asked.append(load.rate_pps)
        sent = int(load.rate_pps * duration_s)
        near = next((x for x in self.loads if abs(x - load.rate_pps) < 1), None)
        if near is not None:
            self.loads.discard(near)
            return TrialCounts(achieved_pps=load.rate_pps * 0.93, frames_sent=int(sent * 0.93),
                               frames_received=int(sent * 0.93), valid=False, invalid_reason="stretched")
        return TrialCounts(achieved_pps=load.rate_pps, frames_sent=sent, frames_received=min(sent, int(120e3 * duration_s)))


def test_a_shortfall_bounding_the_search_is_measured_again_before_it_is_the_testers_limit():
    """The clean clone's policer search: short at 149, 74 and 37 kfps before anything was sent in
    full, then 36.6 kfps sent in full, read "≥ 36.6 kfps, tester-limited" under a 120-kpps cap. Each
    shortfall that bounds the bracket is measured once more: sent in full, the search goes on above
    it and finds the cap; a limit that is real stands (``test_tester_limit_is_not_dut_loss``)."""
    top = 148_810 / LR.fps(F64) * 100
    m = ShortAtFirst({148_810.0, 74_405.0, 37_202.5})
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1, resolution_pct=0.005,
                                                        initial_rate_pct=top, max_rate_pct=top))
    assert r.found and 120e3 - 0.00005 * LR.fps(F64) <= r.rate_pps <= 120e3 and not r.tester_limited, m.asked
    asked = [round(a) for a in m.asked]
    assert m.asked[:4] == pytest.approx([148_810, 74_405, 37_202.5, 18_601.25]), m.asked  # as the clone's
    # 149 kfps, above a load the DUT failed, no longer bounds the search: never measured again
    assert asked.count(74_405) == asked.count(37_202) == 2 and asked.count(148_810) == 1 and r.repeated_trials == 2
    assert r.trials == len(m.asked)


def test_a_load_the_host_spoilt_in_every_attempt_stops_the_search_at_a_lower_bound():
    """On a noisy host every trial near the DUT's 1 Mfps stretched by less than the CPU the host
    took: taken as the tester's limit, each lowered the search, and the answer read "tester-limited"
    far below the DUT. The spoilt load is tried three times, then the search stops: what passed is a
    lower bound, and the result says the host stopped it."""
    m = HostSpoils(SimulatedMeasurer(DutModel(capacity_pps=1e6)), 900e3, 1.2e6)
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1, initial_rate_pct=800e3 / LR.fps(F64) * 100))
    assert m.asked[0] == pytest.approx(800e3) and m.asked[2:] == [pytest.approx(999e3)] * 3, m.asked
    assert r.found and r.rate_pps == pytest.approx(800e3) and r.tester_limited and r.tester_limit_pps is None
    assert r.trials == len(m.asked) == 5 and r.repeated_trials == 2 and r.not_measured is None
    assert r.platform and "the host took 280 ms" in r.platform and "at 998,999 fps, in every attempt" in r.platform
    assert r.to_dict()["platform"] == r.platform


def test_a_search_the_host_stopped_before_anything_passed_measured_nothing():
    m = HostSpoils(SimulatedMeasurer(DutModel(capacity_pps=1e6)), 900e3, 1.2e6)
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1))
    assert len(m.asked) == 4 and r.trials == 4 and not r.found, m.asked
    assert r.not_measured == r.platform and r.headline_pps is None and r.upper_pps == pytest.approx(LR.fps(F64))


def test_a_shortfall_at_a_load_the_selftest_proved_is_repeated_not_the_testers_limit():
    """Behind the wire (every shortfall the tester's): the self-test sent 145 kfps in full, then the
    throughput search fell short at its cap (132 kfps) and halfway down (66 kfps) once each, took
    both for the tester's limit and reported "≥ 33 kfps (tester-limited)". A shortfall at a load no
    higher than the self-test's limit is a stall: tried again."""

    class ShortOnceAtEachLoad:
        def __init__(self):
            self.asked: list[float] = []

        def measure(self, load, duration_s):
            first = load.rate_pps not in self.asked
            self.asked.append(load.rate_pps)
            sent = int(load.rate_pps * duration_s)
            if first:
                return TrialCounts(achieved_pps=load.rate_pps * 0.975, intended_pps=load.rate_pps,
                                   frames_sent=sent * 39 // 40, frames_received=sent * 39 // 40, valid=False,
                                   invalid_reason="stretched")
            return TrialCounts(achieved_pps=load.rate_pps, intended_pps=load.rate_pps, frames_sent=sent,
                               frames_received=sent)

    m = ShortOnceAtEachLoad()
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1), CapOnly(132e3))
    assert m.asked[:2] == [pytest.approx(132e3)] * 2, m.asked
    assert r.found and r.rate_pps == pytest.approx(132e3) and r.repeated_trials == 1, r
    assert r.tester_limited and r.tester_cap_pps == pytest.approx(132e3)  # the cap: a lower bound, said so
