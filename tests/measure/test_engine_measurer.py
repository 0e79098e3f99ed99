"""EngineMeasurer's trial validity, pacing, stall handling, bursts and phased trials, on scripted
engine results (no traffic)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from netrig.errors import ConfigError
from netrig.measure import Load, Pacing, Phase, TrialCounts
from netrig.measure.engine import EngineMeasurer
from netrig.model import FrameSize
from netrig.run.config import TrialConfig


def smoothness(peak: int = 100, intended: float = 100.0):
    return SimpleNamespace(peak_frames=peak, intended_frames=intended, peak_ratio=peak / intended if intended else 0,
                           gap_p50_ns=10_000, gap_p99_ns=12_000, gap_max_ns=900_000)


def result(sent: int, received: int, lag_ms: float, rate: float = 100_000.0, *, peak: int = 100,
           stretch_ms: float = 0.0, intervals=(), pacing: str = "smooth", **kw):
    """What the engine's typed TrialResult offers the measurer (attributes only)."""
    fields = dict(tx_rate_pps=rate, frames_sent=sent, frames_received=received, duplicated=0, reordered=0,
                  late=0, latency=SimpleNamespace(samples=0), valid=True, invalid_reason=None,
                  tester_rx_drops=0, tx_max_lag_ns=int(lag_ms * 1e6), frames_foreign=0, frames_stray=0,
                  frames_forged=0, ports=(), pacing=pacing, tx_stretch_ns=int(stretch_ms * 1e6),
                  smoothness=smoothness(peak, 100.0), intervals=tuple(intervals), flow_memory_bytes=0,
                  pin_failures=(), latency_timeline=(), to_dict=lambda: {"frames_sent": sent})
    return SimpleNamespace(**{**fields, **kw})


def scripted(results, **kw) -> tuple[EngineMeasurer, list]:
    m = EngineMeasurer(None, None, {}, learning_frames=False, **kw)
    calls: list = []

    def run(frame, rate_pps, duration_s, drain_s, progress=None, **engine_kw):
        calls.append({"rate_pps": rate_pps, "duration_s": duration_s, **engine_kw})
        return results[len(calls) - 1]

    m._run = run  # the engine seam: everything else is the real measurer
    return m, calls


LOAD = Load(frame_size=FrameSize(size=64), rate_pps=100_000.0)


def test_smooth_pacing_never_repeats_a_trial_a_stall_cannot_have_caused_the_loss():
    # Smooth pacing sends no catch-up burst after a stall: a lossy trial is the DUT's, and repeating
    # it until it passes would bias the result upwards.
    m, calls = scripted([result(100_000, 97_000, lag_ms=30, stretch_ms=25), result(100_000, 100_000, lag_ms=1)])
    c = m.measure(LOAD, 1.0)
    assert len(calls) == 1 and c.frames_lost == 3_000 and "stalled_attempts" not in c.raw
    assert c.pacing == Pacing(mode="smooth", stretch_s=0.025, max_lag_s=0.03, peak_frames=100, intended_frames=100.0,
                              gap_p50_ns=10_000, gap_p99_ns=12_000, gap_max_ns=900_000, tolerance_pct=10.0)


def test_smooth_pacing_repeats_a_trial_whose_loss_its_give_back_after_a_stall_explains():
    # A 3-ms lag at 100 kfps, all given back by the end (no stretch): 300 frames left 2 % above the
    # rate, and a DUT with a small buffer may lose them; 44 lost is no evidence of the DUT at the rate.
    m, calls = scripted([result(100_000, 99_956, lag_ms=3), result(100_000, 100_000, lag_ms=0.3)])
    c = m.measure(LOAD, 1.0)
    assert len(calls) == 2 and c.frames_lost == 0 and c.valid
    assert c.raw["stalled_attempts"] == [{"tx_max_lag_ns": 3_000_000, "frames_sent": 100_000,
                                          "frames_received": 99_956, "achieved_pps": 100_000.0}]
    # more lost than it gave back, or a lag no stall's (batching's 0.3 ms): the DUT's, as measured
    for lost, lag_ms in ((301, 3), (20, 0.3)):
        m, calls = scripted([result(100_000, 100_000 - lost, lag_ms=lag_ms), result(100_000, 100_000, lag_ms=0.3)])
        assert m.measure(LOAD, 1.0).frames_lost == lost and len(calls) == 1


def test_catch_up_a_lossy_trial_during_a_tester_stall_is_repeated_and_the_attempts_are_kept():
    m, calls = scripted([result(100_000, 97_000, lag_ms=30), result(100_000, 100_000, lag_ms=1)], pacing="catch-up")
    c = m.measure(LOAD, 1.0)
    assert len(calls) == 2
    assert c.frames_lost == 0 and c.valid
    assert c.raw["stalled_attempts"] == [{"tx_max_lag_ns": 30_000_000, "frames_sent": 100_000,
                                          "frames_received": 97_000, "achieved_pps": 100_000.0}]


def test_catch_up_loss_without_a_stall_and_a_stall_without_loss_are_taken_as_measured():
    m, calls = scripted([result(100_000, 97_000, lag_ms=1)], pacing="catch-up")
    assert m.measure(LOAD, 1.0).frames_lost == 3_000 and len(calls) == 1
    m, calls = scripted([result(100_000, 100_000, lag_ms=50)], pacing="catch-up")
    c = m.measure(LOAD, 1.0)
    assert c.frames_lost == 0 and len(calls) == 1 and "stalled_attempts" not in c.raw


def test_catch_up_retries_are_bounded_and_the_last_attempt_counts():
    m, calls = scripted([result(100_000, 90_000 + i, lag_ms=20) for i in range(5)], stall_retries=2,
                        pacing="catch-up")
    c = m.measure(LOAD, 1.0)
    assert len(calls) == 3
    assert c.frames_received == 90_002 and len(c.raw["stalled_attempts"]) == 2
    m, calls = scripted([result(100_000, 90_000, lag_ms=20)], stall_retries=0, pacing="catch-up")
    assert m.measure(LOAD, 1.0).frames_lost == 10_000 and len(calls) == 1


def test_the_threshold_is_configurable():
    m, calls = scripted([result(100_000, 97_000, lag_ms=8), result(100_000, 100_000, lag_ms=0)],
                        stall_threshold_ms=10.0, pacing="catch-up")
    assert m.measure(LOAD, 1.0).frames_lost == 3_000 and len(calls) == 1


def test_a_stretched_trial_is_invalid_through_its_achieved_rate_and_repeated():
    # 100 000 frames sent over 1.05 s: 95 % of the rate, beyond the 2 % tolerance, by one 45-ms stall.
    # A stall is transient: the trial is repeated (invalid trials are never DUT results, so nothing
    # is biased).
    stretched = result(100_000, 100_000, lag_ms=45, rate=100_000 / 1.05, stretch_ms=50)
    m, calls = scripted([stretched, result(100_000, 99_000, lag_ms=1, stretch_ms=3)])
    c = m.measure(LOAD, 1.0)
    assert len(calls) == 2 and c.valid and c.frames_lost == 1_000
    [a] = c.raw["stretched_attempts"]
    assert a["stretch_s"] == pytest.approx(0.05) and "95.2% of the intended" in a["invalid_reason"]
    # A tester that cannot reach the rate fails every attempt: bounded, and the trial stays invalid.
    m, calls = scripted([stretched] * 5, stall_retries=2)
    c = m.measure(LOAD, 1.0)
    assert len(calls) == 3 and not c.valid and len(c.raw["stretched_attempts"]) == 2
    # Stretched by half the trial: no stall is that long; the tester cannot keep the rate, and the
    # trial is not repeated (a search above the tester's ceiling would pay three trials per step).
    slow = result(60_000, 60_000, lag_ms=500, rate=60_000 / 1.5, stretch_ms=500)
    m, calls = scripted([slow] * 5, stall_retries=2)
    c = m.measure(LOAD, 1.0)
    assert len(calls) == 1 and not c.valid and "stretched_attempts" not in c.raw


def test_stalls_that_add_up_over_a_long_trial_are_not_repeated():
    """A 60-s trial on a busy VM, stretched 3.5 s (5.8 %) by stalls of at most 8 ms: no one stall
    explains it, the tester cannot keep the rate there, and each repeat failed again — two hidden
    repeats made the self-test's 60-s trial take 3 min 10 s. One 300-ms stall over the tolerance
    of 1.2 s is repeated."""
    many = result(5_670_904, 5_670_904, lag_ms=8, rate=5_670_904 / 63.5, stretch_ms=3_500)
    m, calls = scripted([many] * 3, stall_retries=2)
    c = m.measure(LOAD, 60.0)
    assert len(calls) == 1 and not c.valid and "stretched_attempts" not in c.raw
    one = result(5_670_904, 5_670_904, lag_ms=300, rate=5_670_904 / 61.45, stretch_ms=1_450)
    m, calls = scripted([one, result(6_000_000, 6_000_000, lag_ms=1, stretch_ms=100)], stall_retries=2)
    c = m.measure(LOAD, 60.0)
    assert len(calls) == 2 and c.valid and len(c.raw["stretched_attempts"]) == 1


def test_a_bunched_load_is_marked_in_the_trial_and_survives_the_record():
    m, _ = scripted([result(100_000, 100_000, lag_ms=5, peak=114)], smoothness_tolerance_pct=10.0)
    c = m.measure(LOAD, 1.0)
    assert c.pacing is not None and c.pacing.bunched and c.pacing.peak_ratio == pytest.approx(1.14)
    back = TrialCounts.from_dict(c.to_dict())
    assert back.pacing == c.pacing and back.to_dict()["pacing"]["bunched"] is True
    m, _ = scripted([result(100_000, 100_000, lag_ms=5, peak=113)], smoothness_tolerance_pct=10.0)
    assert not m.measure(LOAD, 1.0).pacing.bunched, "three frames of timing granularity are allowed"


def test_a_burst_is_one_engine_trial_in_burst_mode_and_its_rate_is_not_held_against_it():
    # The tester reached 0.6 Mpps of the 14.88 Mpps burst rate: a valid burst at the rate it achieved.
    m, calls = scripted([result(1_000, 1_000, lag_ms=0, rate=600_000.0)])
    c = m.measure(Load(14_880_952.0, FrameSize(size=64), burst_frames=1_000), 1_000 / 14_880_952.0)
    assert calls == [{"rate_pps": 14_880_952.0, "duration_s": None, "burst_frames": 1_000}]
    assert c.valid and c.frames_sent == 1_000 and c.achieved_pps == 600_000.0


def test_a_burst_the_tester_paused_in_is_invalid_when_it_passed_and_the_duts_failure_when_it_lost():
    # Its CPU held 2.5 ms mid-burst: the DUT drained meanwhile, so more frames pass than back to back;
    # one that lost frames all the same would have lost them sent without the pause (smooth pacing
    # sends no backlog after it): the DUT's failure, not the tester's (CI abandoned searches so).
    held = SimpleNamespace(**{**vars(smoothness()), "gap_max_ns": 2_500_000})
    passed = result(1_400, 1_400, lag_ms=0, rate=300_000.0, smoothness=held)
    lost = result(1_400, 1_100, lag_ms=0, rate=300_000.0, smoothness=held)
    m, _ = scripted([passed, lost, result(1_400, 1_200, lag_ms=0, rate=600_000.0)])
    load = Load(14_880_952.0, FrameSize(size=64), burst_frames=1_400)
    c = m.measure(load, 1_400 / 14_880_952.0)
    assert not c.valid and "paused 2.5 ms mid-burst" in c.invalid_reason
    c = m.measure(load, 1_400 / 14_880_952.0)
    assert c.valid and c.frames_lost == 300
    assert m.measure(load, 1_400 / 14_880_952.0).valid  # 0.9 ms: batches' own gaps, not a pause


def test_phases_are_one_continuous_engine_trial_with_the_engines_interval_counts():
    iv = [SimpleNamespace(start_s=0.0, duration_s=1.0, phase=0, frames_sent=110, frames_received=100,
                          latency_mean_ns=20_000.0, latency_max_ns=90_000),
          SimpleNamespace(start_s=1.0, duration_s=1.02, phase=1, frames_sent=50, frames_received=50,
                          latency_mean_ns=12_000.0, latency_max_ns=30_000)]
    m, calls = scripted([result(160, 150, lag_ms=0, rate=160 / 2.02, intervals=iv)])
    c = m.measure_phases(FrameSize(size=64), [Phase(110.0, 1.0), Phase(50.0, 1.0)], 1.0)
    assert len(calls) == 1
    assert calls[0]["phases"] == [(1.0, 1.0), (1.0, 50.0 / 110.0)] and calls[0]["interval_s"] == 1.0
    assert calls[0]["rate_pps"] == 110.0 and calls[0]["duration_s"] == 2.0
    assert [(i.phase, i.frames_sent, i.frames_received, i.duration_s) for i in c.intervals] == \
        [(0, 110, 100, 1.0), (1, 50, 50, 1.02)]
    assert [(i.latency_mean_ns, i.latency_max_ns) for i in c.intervals] == [(20_000.0, 90_000), (12_000.0, 30_000)]
    assert c.frames_lost == 10 and c.valid


def test_a_phased_trial_one_stall_stretched_is_run_again_and_its_overload_loss_never_is():
    """The iperf-like run of 2 s at 14.9 kfps on a CI machine: one ~30-ms stall stretched it past the
    2 % tolerance, and, unlike an ordinary trial, the phased one was not repeated, so an invalid
    result stood for a stall of the platform. A phased trial's loss (a recovery run's overload) is
    the answer, never a reason to repeat it, even in catch-up pacing."""
    stretched = result(29_441, 29_441, lag_ms=31, rate=29_441 / 2.04, stretch_ms=62)
    m, calls = scripted([stretched, result(29_762, 29_762, lag_ms=2, rate=29_762 / 2.001, stretch_ms=1)])
    c = m.measure_phases(FrameSize(size=64), [Phase(14_881.0, 2.0)], 0.5)
    assert len(calls) == 2 and c.valid and c.frames_sent == 29_762
    [a] = c.raw["stretched_attempts"]
    assert a["stretch_s"] == pytest.approx(0.062) and "of the intended" in a["invalid_reason"]
    lossy = result(60_000, 55_000, lag_ms=30, rate=30_000.0)
    m, calls = scripted([lossy, result(60_000, 60_000, lag_ms=0, rate=30_000.0)], pacing="catch-up")
    c = m.measure_phases(FrameSize(size=64), [Phase(33_000.0, 1.0), Phase(27_000.0, 1.0)], 0.5)
    assert len(calls) == 1 and c.frames_lost == 5_000 and "stalled_attempts" not in c.raw


@pytest.mark.parametrize("kw, field", [({"stall_threshold_ms": 0}, "stall_threshold_ms"),
                                       ({"stall_retries": -1}, "stall_retries"),
                                       ({"stall_retries": 1.5}, "stall_retries"),
                                       ({"pacing": "fast"}, "pacing"),
                                       ({"smoothness_tolerance_pct": -1}, "smoothness_tolerance_pct")])
def test_bad_trial_settings_name_the_field(kw, field):
    with pytest.raises(ConfigError) as e:
        TrialConfig(**kw)
    assert field in str(e.value)


def test_frames_that_are_not_the_trials_own_are_carried_into_the_counts():
    """foreign, stray and forged frames reach the trial record, and the engine's reason for an
    invalid trial (here: another trial's frames) is kept as it is."""
    why = "port b: 300 frames of another netrig trial arrived"
    m, _ = scripted([result(100_000, 99_850, lag_ms=0, frames_foreign=4, frames_stray=300, frames_forged=2,
                            valid=False, invalid_reason=why)])
    c = m.measure(LOAD, 1.0)
    assert (c.foreign, c.stray, c.forged, c.frames_lost) == (4, 300, 2, 150)
    assert not c.valid and c.invalid_reason == why
    d = c.to_dict()
    assert (d["foreign"], d["stray"], d["forged"]) == (4, 300, 2)
    assert type(c).from_dict(d) == c
    old = {k: v for k, v in d.items() if k not in ("foreign", "stray", "forged")}
    assert (type(c).from_dict(old).stray, type(c).from_dict(old).forged) == (0, 0), "older records read as 0"


def test_the_flows_measured_memory_reaches_the_record_and_older_records_load_without_it():
    m, _ = scripted([result(1_000, 1_000, lag_ms=0, flow_memory_bytes=108_003_328)])
    c = m.measure(LOAD, 1.0)
    assert c.flow_memory_bytes == 108_003_328
    d = c.to_dict()
    assert d["flow_memory_bytes"] == 108_003_328 and type(c).from_dict(d) == c
    old = {k: v for k, v in d.items() if k != "flow_memory_bytes"}
    assert type(c).from_dict(old).flow_memory_bytes is None, "a record before the key: not measured"


def test_workers_the_kernel_would_not_pin_reach_the_record_and_older_records_load_without_them():
    unpinned = type("PinFailure", (), {"__str__": lambda self: "netrig-tx0 not pinned to CPU 1: Operation not permitted"})
    m, _ = scripted([result(1_000, 1_000, lag_ms=0, pin_failures=(unpinned(),))])
    c = m.measure(LOAD, 1.0)
    assert c.pin_failures == ("netrig-tx0 not pinned to CPU 1: Operation not permitted",)
    d = c.to_dict()
    assert type(c).from_dict(d) == c
    assert type(c).from_dict({k: v for k, v in d.items() if k != "pin_failures"}).pin_failures == ()


def test_a_stretch_the_hosts_stops_of_the_tester_cpu_explain_is_repeated_never_a_ceiling():
    """The demo's 1024-B search: the host stopped the tester's CPU 11 times (1.5-2.5 ms, 18.5 ms in
    all, unseen by the guest) in a trial stretched 35 ms, 15 ms beyond its 20-ms tolerance; no one
    stop explains that, the stops together do. Repeated, not taken as the tester's limit; the same
    stretch with the stops the guest's own (another task ran) is the tester's CPU, and stays."""
    from netrig.measure.platform import StallEpisode, StallSide, TrialPlatform, TrialStalls

    def platform(seen_by_guest: bool) -> SimpleNamespace:
        eps = tuple(StallEpisode(0.08 * i, 1.5 + (i % 2), 0, seen_by_guest) for i in range(11))
        return SimpleNamespace(trial=lambda res, intended: TrialPlatform(TrialStalls(StallSide(eps), StallSide()),
                                                                        None, None))
    stretched = result(58_070, 58_070, lag_ms=1.9, rate=58_070 / 1.035, stretch_ms=35)
    fine = result(58_070, 58_070, lag_ms=1, rate=58_070.0, stretch_ms=3)
    m, calls = scripted([stretched, fine], platform=platform(False))
    c = m.measure(Load(frame_size=FrameSize(size=1024), rate_pps=58_070.0), 1.0)
    assert len(calls) == 2 and c.valid and len(c.raw["stretched_attempts"]) == 1
    m, calls = scripted([stretched, fine], platform=platform(True))
    c = m.measure(Load(frame_size=FrameSize(size=1024), rate_pps=58_070.0), 1.0)
    assert len(calls) == 1 and not c.valid


def test_a_stretch_the_hosts_steal_explains_is_repeated_and_the_guests_own_load_is_not(monkeypatch):
    """The guest's steal time on the tester's TX CPU over the trial (the host ran something else
    while the vCPU wanted to run) counts as the host's stops do: a 68-ms stretch of a 2-s trial
    with 60 ms stolen from CPU 0 is repeated; the same steal on a CPU the tester does not send
    from, or none, leaves it the tester's."""
    from netrig.measure import engine
    from netrig.monitor.cpu import CpuUsage

    def stealing(cpu: str, steal_s: float):
        usage = CpuUsage(wall_s=2.3, cores={f"cpu{k}": {"busy": 1.0, "steal": steal_s if f"cpu{k}" == cpu else 0.0}
                                            for k in (0, 1)})
        start = SimpleNamespace(stop=lambda: usage)
        monkeypatch.setattr(engine, "CpuAccount", lambda procs: SimpleNamespace(start=lambda: start))

    stretched = result(60_000, 60_000, lag_ms=5.7, rate=60_000 / 2.068, stretch_ms=68)
    fine = result(60_000, 60_000, lag_ms=1, rate=30_000.0, stretch_ms=3)
    load = Load(frame_size=FrameSize(size=64), rate_pps=30_000.0)
    for cpu, steal_s, tx_cpus, runs in (("cpu0", 0.06, (0,), 2), ("cpu1", 0.06, (0,), 1), ("cpu0", 0.0, (0,), 1),
                                        ("cpu1", 0.06, (), 2)):
        stealing(cpu, steal_s)
        m, calls = scripted([stretched, fine], tx_cpus=tx_cpus)
        c = m.measure(load, 2.0)
        assert len(calls) == runs and c.valid == (runs == 2), (cpu, steal_s, tx_cpus)
    # stretched 30 % (beyond what one stall is taken to explain): repeated only when the host's
    # measured take covers the excess over the tolerance (0.6 s − 0.04 s)
    long = result(60_000, 60_000, lag_ms=40, rate=60_000 / 2.6, stretch_ms=600)
    for steal_s, runs in ((0.57, 2), (0.5, 1)):
        stealing("cpu0", steal_s)
        m, calls = scripted([long, fine], tx_cpus=(0,))
        m.measure(load, 2.0)
        assert len(calls) == runs, steal_s
    # spoilt in every attempt: the platform's (host_take_s), so a search never takes it for the
    # tester's limit; a stretch the host's take does not cover stays the tester's
    for steal_s, take in ((0.57, 0.57), (0.5, None)):
        stealing("cpu0", steal_s)
        m, calls = scripted([long] * 3, tx_cpus=(0,), stall_retries=2)
        c = m.measure(load, 2.0)
        assert not c.valid and c.host_take_s == take and TrialCounts.from_dict(c.to_dict()).host_take_s == take


def test_ring_drops_while_netrigs_own_thread_held_the_duts_cpu_make_the_trial_the_testers():
    """A trial that lost 110 frames, all in the DUT's ring while a thread of netrig's own process held
    the DUT's CPU (the stall watch's ``by_tester``): invalid, the tester's loss, never the DUT's."""
    from netrig.measure.platform import StallSide, TrialPlatform, TrialStalls, WireLoss

    m, _ = scripted([result(100_000, 99_890, lag_ms=0)])
    seen = TrialPlatform(TrialStalls(StallSide(), StallSide()), WireLoss(110, 110, 1.0, by_tester=110), None)
    m.platform = SimpleNamespace(trial=lambda res, intended: seen)  # type: ignore[assignment]
    c = m.measure(LOAD, 1.0)
    assert not c.valid and c.invalid_reason == ("110 frames the DUT's ring dropped while netrig's own threads held "
                                                "its CPU: the tester's loss, not the DUT's")
    seen = TrialPlatform(TrialStalls(StallSide(), StallSide()), WireLoss(110, 110, 1.0), None)
    m, _ = scripted([result(100_000, 99_890, lag_ms=0)])
    m.platform = SimpleNamespace(trial=lambda res, intended: seen)  # type: ignore[assignment]
    assert m.measure(LOAD, 1.0).valid, "another task's take of the DUT's CPU: the DUT's loss"


def test_a_trial_where_no_flow_received_two_frames_has_latency_and_no_ipdv():
    """One frame to each of a million destinations: latency, and no IPDV (None, not a measured 0)."""
    from netrig.measure.engine import latency_summary

    lat = SimpleNamespace(samples=320_000, min_ns=5_608, mean_ns=50_656.0, p50_ns=38_799, p90_ns=60_000, p99_ns=90_000,
                          p999_ns=1_394_687, max_ns=3_801_840, pdv_ns=84_392, ipdv_mean_ns=0.0, ipdv_p99_ns=0,
                          ipdv_max_ns=0, ipdv_samples=0)
    s = latency_summary(lat)  # type: ignore[arg-type]
    assert s is not None and (s.p50_ns, s.ipdv_ns, s.ipdv_p99_ns, s.ipdv_max_ns) == (38_799, None, None, None)
    paired = SimpleNamespace(**{**vars(lat), "ipdv_mean_ns": 812.4, "ipdv_p99_ns": 9_800, "ipdv_max_ns": 402_000,
                                "ipdv_samples": 1})
    two = latency_summary(paired)  # type: ignore[arg-type]
    assert two is not None and (two.ipdv_ns, two.ipdv_p99_ns, two.ipdv_max_ns) == (812.4, 9_800, 402_000)
