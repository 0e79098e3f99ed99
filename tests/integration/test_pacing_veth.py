"""Pacing, smoothness, continuous phased trials and burst mode on real veth pairs and test beds.

- a real trial records how smoothly it offered its load (peak frames in 1 ms, gaps, stretch);
- a phased trial is one engine trial with exact per-interval counts (an nftables rule drops every
  1000th frame: each interval loses exactly its share);
- system recovery and iperf-like runs are one engine trial each, through the policer test bed;
- back-to-back measures the policer's bucket in burst mode, never counting a tester failure as a
  failed burst.
"""
from __future__ import annotations

import pytest
from tests.conftest import forwarding_namespace, needs_root, veth_pair
from tests.host_steal import CpuStops, HostTake, Steal, abandoned_by_platform, excess_s, unseen_tester_s, valid_or_host

import netrig
from netrig.model import FrameSize, LineRate
from netrig.run.config import config_from_dict
from netrig.run.session import engine_session

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]

F64 = FrameSize(64)


def _ports(ns_a, if_a, ns_b, if_b, io="auto"):
    tx, rx = netrig.Port(if_a, netns=ns_a, io=io), netrig.Port(if_b, netns=ns_b, io=io)
    return tx, rx, tx.info().mac, rx.info().mac


def test_a_real_trial_records_how_smoothly_it_offered_its_load():
    with veth_pair("s") as (ns_a, if_a, ns_b, if_b):
        tx, rx, mac_a, mac_b = _ports(ns_a, if_a, ns_b, if_b)
        s = netrig.Stream(frame_size=64, rate_pps=50_000, src_mac=mac_a, dst_mac=mac_b)
        r = netrig.run_trial(tx, rx, [s], duration_s=2.0, drain_s=0.3, max_stretch_pct=50)
        sm = r.smoothness
        assert r.pacing == "smooth" and r.frames_sent == 100_000 and r.frames_lost == 0, r.to_dict(flows=False)
        assert sm.intended_frames == pytest.approx(50.0)
        # Never above the rate over 1 ms, whatever the machine did meanwhile.
        assert 50 <= sm.peak_frames <= 50 * 1.1 + 2, sm
        assert sm.gap_p50_ns == pytest.approx(20_000, rel=0.25), sm
        assert 0 < sm.gap_p50_ns <= sm.gap_p99_ns <= sm.gap_max_ns, sm
        # The sending window is the planned one plus the stretch (what was not given back).
        assert r.tx_rate_pps == pytest.approx(100_000 / (2.0 + r.tx_stretch_ns / 1e9), rel=1e-6)
        assert r.tx_rate_pps <= 50_000 * 1.0001
        d = r.to_dict(flows=False)
        assert set(d["smoothness"]) == {"peak_frames", "intended_frames", "peak_ratio", "gap_p50_ns", "gap_p99_ns",
                                        "gap_max_ns"}
        assert d["pacing"] == "smooth" and d["intervals"] == []


def test_a_tester_asked_for_more_than_it_can_send_reports_what_it_sent_over_the_time_it_sent():
    """16.4 Mframes/s on veth is far beyond any software tester: the run sends what it can, stops at
    its hard end with frames left, and is invalid (it could not keep the rate). Its achieved rate is
    its frames over the time it sent (as its TX window says), not over the planned second plus how
    late its next frame was (that read 0.44 M for 0.85 M sent, and a self-test searched from there)."""
    with veth_pair("o") as (ns_a, if_a, ns_b, if_b):
        tx, rx, mac_a, mac_b = _ports(ns_a, if_a, ns_b, if_b)
        s = netrig.Stream(frame_size=64, rate_pps=16_369_000, src_mac=mac_a, dst_mac=mac_b)
        r = netrig.run_trial(tx, rx, [s], duration_s=0.5, drain_s=0.3, learning=False)
        assert not r.valid and r.frames_sent < 16_369_000 // 2, r.to_dict(flows=False)
        assert r.tx_stretch_ns > 0.2e9, "its next frame was far behind the schedule"
        assert r.tx_rate_pps == pytest.approx(r.frames_sent / r.tx_window_s, rel=0.02), r.to_dict(flows=False)


def test_a_phased_trial_is_one_trial_with_exact_per_interval_counts():
    """Every 1000th test frame is dropped by nftables before netrig's receiver: the loss of each
    interval is that of the frames sent in it, and the phases keep their own rates."""
    with veth_pair("p") as (ns_a, if_a, ns_b, if_b):
        listen = forwarding_namespace(ns_b, if_b, "udp dport 1024 numgen inc mod 1000 == 0 counter drop")
        tx = netrig.Port(if_a, netns=ns_a, io="af_packet")
        rx = netrig.Port(listen, netns=ns_b, io="af_packet")
        s = netrig.Stream(frame_size=64, rate_pps=20_000, src_mac=tx.info().mac, dst_mac=rx.info().mac)
        r = netrig.run_trial(tx, rx, [s], phases=[(1.0, 1.0), (1.0, 0.5)], interval_s=0.25, drain_s=0.5,
                             learning=False, max_stretch_pct=50)
        iv = r.intervals
        assert r.frames_sent == 30_000 and r.frames_lost == 30, r.to_dict(flows=False)
        assert [i.phase for i in iv] == [0] * 4 + [1] * 4
        assert sum(i.frames_sent for i in iv[:4]) == 20_000 and sum(i.frames_sent for i in iv[4:]) == 10_000
        assert sum(i.frames_sent - i.frames_received for i in iv) == 30
        for i in iv:
            rate = 20_000 if i.phase == 0 else 10_000
            assert i.frames_sent <= rate * i.duration_s * 1.05 + 2, i
            # 1 in 1000 lost, in every interval (the drop counter runs over the whole trial).
            assert abs((i.frames_sent - i.frames_received) - i.frames_sent / 1000) <= 1, i
        assert iv[4].start_s == pytest.approx(1.0, abs=0.002 + r.tx_stretch_ns / 1e9)


@pytest.fixture
def policer():
    cfg = config_from_dict({"testbed": {"name": "policer", "options": {"cap": "40kpps", "cap_burst": 1000}},
                            "trial": {"duration_s": 2.0, "drain_s": 0.3}, "selftest": {"enabled": False},
                            "frames": {"sizes": [64]}, "methods": [{"iperf": {}}]})
    with engine_session(cfg, "dut") as session:
        yield session


def spoilt(res, steal: Steal, measurer) -> None:
    """Skip when the host took the CPU from an engine trial whose stretch the tester flagged
    (:func:`tests.host_steal.valid_or_host`; the host's take as the product measures it, steal or
    the stall watch's unseen stops of the tester's CPUs): its shape and rates are then the platform's."""
    took = HostTake(steal, unseen_tester_s(measurer, res))
    valid_or_host(res.valid, res.invalid_reason, excess_s(res.to_dict(flows=False)), took)


@pytest.mark.timing
def test_recovery_and_iperf_are_one_engine_trial_each(policer):
    from netrig.methods.iperf import IperfParams, measure_iperf
    from netrig.methods.recovery import RecoveryParams, measure_recovery

    m, lr = policer.measurer, LineRate(10e9, "nominal", "veth")
    calls: list = []
    results: list = []
    run = m._run

    def counting(*a, **kw):
        calls.append(kw.get("phases"))
        results.append(run(*a, **kw))
        return results[-1]

    m._run = counting
    m._learned.add(F64.label)  # no learning trial: count only the measured ones
    # 110 % of the 40 kfps cap for 2 s (the policer drops ~1/11), then 50 %: loss stops at once.
    steal = Steal()
    rec = measure_recovery(m, F64, lr, 40_000, RecoveryParams(overload_duration_s=2, recovery_duration_s=2,
                                                              interval_s=0.5))
    spoilt(results[-1], steal, m)
    # One engine trial for the whole run (a trial a platform stall stretched is run again, whole).
    n = len(calls)
    assert 1 <= n <= 3 and all(c == [(2.0, 1.0), (2.0, pytest.approx(0.5 / 1.1))] for c in calls), calls
    over = [i for i in rec.intervals if i.phase == 0]
    after = [i for i in rec.intervals if i.phase == 1]
    assert len(over) == 4 and len(after) == 4
    # The policer (40 kfps, a 1000-frame bucket) drops ~1/11 of an overload interval the tester sent
    # as planned: 22 000 frames in 0.5 s. One it did not is the tester's and is not judged: a stop of
    # its CPU leaves a gap the bucket refills over (1000 frames in 25 ms), and the phase's last
    # interval is longer by the stretch (CI: 23 381 frames, 3.6 % lost, after such a stop).
    planned = [i for i in over[1:] if i.duration_s <= 0.5 * 1.01 and i.frames_sent >= 0.99 * rec.overload_pps * 0.5]
    if not planned:
        pytest.skip(f"the tester sent no overload interval as planned (its CPU stopped in each): {over}")
    assert all(0.05 < i.frames_lost / i.frames_sent < 0.14 for i in planned), over
    # Loss stops at once, give or take the frames the DUT still had queued: on veth its forwarding
    # runs in softirq on the sender's CPU, and a backlog from the overload that it processes a
    # moment late meets an empty policer bucket (a frame or two, seen in about 1 run in 7).
    assert all(i.frames_lost == 0 for i in after[1:]), after
    assert after[0].frames_lost <= 3, after
    assert rec.recovery_time_s <= 0.5 and rec.valid
    steal = Steal()
    ip = measure_iperf(m, F64, lr, IperfParams(rate_pct=0.1, duration_s=2.0, interval_s=0.5))
    spoilt(results[-1], steal, m)
    assert 1 <= len(calls) - n <= 3 and all(c == [(2.0, 1.0)] for c in calls[n:]), calls
    assert len(ip.per_interval) == 4 and ip.valid
    assert ip.loss_ratio == 0.0
    assert ip.received_pps == pytest.approx(14_881, rel=0.03)


def test_back_to_back_measures_the_policer_bucket_in_burst_mode(policer):
    """nft ``limit rate over 40000/second burst 1000 packets``: bursts at rate R pass up to
    1000 / (1 − 40 000 / R) frames. Before burst mode, a trial the tester could not run at line
    rate counted as a failed burst and the answer came out low (848 or 973); sent as fast as the
    tester could, bursts left at 296-669 kfps by turns, a passing one was often "slow" against the
    median, and three in a row abandoned the search (CI, and 2 runs in 6 here). Paced at 90 % of the
    slowest calibration burst, CI still abandoned both searches (held 486 kfps, sent 474): its
    16-ms first probe lost frames and paused in each attempt, then counted invalid; a stall of the
    DUT's CPU mid-burst read 0.969 of the top here."""
    from netrig.methods.back_to_back import BackToBackParams, measure_back_to_back

    lr = LineRate(10e9, "nominal", "veth")
    r = measure_back_to_back(policer.measurer, F64, lr, BackToBackParams(trials=2, max_burst_frames=8_000))
    abandoned_by_platform(r.abandoned_reasons)
    assert r.abandoned_trials == 0 and len(r.bursts_frames) == 2, r.abandoned_reasons
    # veth: far below 14.88 Mpps, so every probe is paced at a rate the tester holds
    assert r.tester_limited and r.held_burst_rate_fps is not None and r.achieved_burst_rate_fps is not None
    top = 1000 / (1 - 40_000 / r.achieved_burst_rate_fps)
    # Paced, the policer meets the bursts at the rate the tester sent them: 18 searches here at held
    # rates of 243-504 kfps passed 0.990-1.000 of ``top``.
    for b in r.bursts_frames:
        assert 0.97 * top <= b <= 1.03 * top, (b, top, r.achieved_burst_rate_fps)


def test_a_receiver_on_the_senders_cpu_does_not_take_half_of_it():
    """Where a DUT holds the other CPUs (a forwarder test bed), the tester's sender and receiver
    share one. The AF_XDP receiver polls an empty ring before sleeping only on a CPU of its own:
    next to the sender that polling took half the CPU and stretched a 28 kfps trial by 44 %.

    The host's stops of that CPU stretch a smooth trial too (every stop beyond 80 µs, less the 2 %
    it gives back): a clean clone's trial stretched 127 ms with steal counting none. What the
    sharing costs is the stretch less the stops (:class:`tests.host_steal.CpuStops`), measured
    0-8 ms where the stretch reached 78 ms."""
    with veth_pair("c") as (ns_a, if_a, ns_b, if_b), CpuStops([0]) as stops:
        tx, rx, mac_a, mac_b = _ports(ns_a, if_a, ns_b, if_b, io="af_xdp")
        s = netrig.Stream(frame_size=64, rate_pps=50_000, src_mac=mac_a, dst_mac=mac_b)
        r = netrig.run_trial(tx, rx, [s], duration_s=2.0, drain_s=0.3, tx_cpus=[0], rx_cpus=[0],
                             max_stretch_pct=50)
        assert r.io == ("af_xdp", "af_xdp") and list(r.tx_cpus) == list(r.rx_cpus) == [0]
        assert r.frames_sent == 100_000 and r.frames_lost == 0, r.to_dict(flows=False)
        # sharing a CPU must not stretch it (it was 880 ms)
        host = stops.over(r)
        assert r.tx_stretch_ns / 1e9 - host < 0.1, \
            f"stretched {r.tx_stretch_ns / 1e6:.1f} ms, {host * 1e3:.1f} of them CPU 0's stops"
