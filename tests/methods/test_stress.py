"""Stress and spikes: load profiles that overload the DUT, and per episode the loss, the recovery time
and the latency while it recovers — from synthetic intervals, a simulated DUT that takes a known time
to recover, and a real policer."""
from __future__ import annotations

import pytest
from tests.conftest import needs_root
from tests.host_steal import HostTake, Steal, stopped_by_host, valid_or_host

from netrig.errors import ConfigError
from netrig.measure import Interval, Phase
from netrig.methods.stress import StressParams, episodes_of
from netrig.run.config import config_from_dict
from netrig.run.runner import Runner


def test_profiles_make_their_phases():
    step = StressParams(profile="step").phases(100_000, 1e9)
    assert [(p.rate_pps, p.duration_s) for p in step] == [(50_000, 2.0), (150_000, 2.0), (50_000, 4.0)]
    spike = StressParams(profile="spike", spikes=2).phases(100_000, 1e9)
    assert [p.rate_pps for p in spike] == [50_000, 300_000, 50_000, 300_000, 50_000]
    ramp = StressParams(profile="ramp", ramp_steps=4).phases(100_000, 1e9)
    assert [round(p.rate_pps) for p in ramp] == [50_000, 75_000, 100_000, 125_000, 150_000, 50_000]
    assert StressParams(peak_pct=500).phases(100_000, 200_000)[1].rate_pps == 200_000  # capped at line rate


@pytest.mark.parametrize("kw, field", [
    ({"profile": "wave"}, "profile"), ({"peak_pct": 90}, "peak_pct"), ({"base_pct": 100}, "base_pct"),
    ({"spikes": 0}, "spikes"), ({"interval_s": 5}, "interval_s"), ({"ramp_steps": 1}, "ramp_steps"),
])
def test_bad_params_name_the_field(kw, field):
    with pytest.raises(ConfigError) as e:
        StressParams(**kw)
    assert e.value.field == field


def iv(t, phase, sent, lost, lat):
    return Interval(t, 0.5, phase, sent, sent - lost, lat, lat * 2)


def test_an_episode_is_the_overload_and_its_recovery():
    phases = [Phase(50, 1.0), Phase(150, 1.0), Phase(50, 2.0)]
    ivs = (iv(0, 0, 25, 0, 10_000), iv(0.5, 0, 25, 0, 10_000),
           iv(1.0, 1, 75, 25, 90_000), iv(1.5, 1, 75, 25, 90_000),
           iv(2.0, 2, 25, 5, 60_000), iv(2.5, 2, 25, 1, 30_000), iv(3.0, 2, 25, 0, 12_000), iv(3.5, 2, 25, 0, 10_000))
    (ep,) = episodes_of(ivs, phases, 100)
    assert (ep.frames_sent, ep.frames_lost, ep.recovery_lost) == (150, 50, 6)
    assert ep.recovery_s == pytest.approx(1.0)  # the interval at 3.0 s is the first of the loss-free rest
    assert ep.recovery_latency_mean_ns == pytest.approx((20 * 60_000 + 24 * 30_000) / 44)
    assert ep.recovery_latency_max_ns == 120_000
    # Still losing at the end of the window: never recovered.
    (never,) = episodes_of(ivs[:-2] + (iv(3.0, 2, 25, 3, 10_000),), phases, 100)
    assert never.recovery_s is None


def run_sim(tmp_path, profile: str, **model) -> dict:
    cfg = config_from_dict({
        "testbed": {"name": "simulated", "simulator": {"capacity_pps": 100_000, **model}},
        "frames": {"sizes": [64]}, "trial": {"duration_s": 0.5}, "selftest": {"enabled": False},
        "methods": [{"rfc2544_throughput": {}},
                    {"stress": {"profile": profile, "before_s": 1, "overload_s": 1, "after_s": 2, "spikes": 2,
                                "spike_s": 0.3, "gap_s": 1.5}}]})
    doc = Runner(cfg, tmp_path / profile).run()
    assert doc["complete"]
    return next(r for r in doc["summary"] if r["method"] == "stress")["results"][0]["repetitions"][0]


def test_a_simulated_dut_recovers_in_the_time_it_is_built_to_take(tmp_path):
    rep = run_sim(tmp_path, "step", recovery_s=0.5, buffer_frames=5000)
    (ep,) = rep["episodes"]
    assert 0.3 <= ep["loss_ratio"] <= 0.37  # 150 % intended, 100 % forwarded
    assert 0.4 <= ep["recovery_s"] <= 0.6
    # The buffer drains during the recovery: latency above the baseline, which was before overload.
    assert ep["recovery_latency_mean_ns"] > 2 * rep["baseline_latency_ns"]
    spikes = run_sim(tmp_path, "spike", recovery_s=0.2)["episodes"]
    assert len(spikes) == 2 and all(0.1 <= e["recovery_s"] <= 0.3 for e in spikes)
    ramp = run_sim(tmp_path, "ramp")["episodes"]
    assert len(ramp) == 1 and ramp[0]["peak_pps"] == pytest.approx(1.5 * 99_900, rel=0.02)


@needs_root
@pytest.mark.root
def test_a_real_policer_loses_in_overload_and_recovers_at_once(tmp_path):
    """The policer test bed (a tc policer at 30 kfps): 150 % of its throughput loses about a third,
    and forwarding is loss-free again within one interval of the overload's end. The policer polices
    inline, as frames arrive (as tests/integration/test_policer_throughput.py's does): behind the wire
    it polices when the DUT's CPU takes them, in bursts after each vCPU stall, and its small bucket
    then drops below its cap (the throughput came out at ~15 kfps, so 150 % of it lost nothing).
    The search's resolution is 0.02 % of line rate (~3 kfps, a tenth of the cap): the policer
    forwards its bucket on top of its cap, so the failed trial's forwarded rate it follows can lie
    above the cap and lose a few frames again; at 2 % (~300 kfps) the search then halved to ~15 kfps
    and stopped there, within its resolution (1 run in ~70)."""
    cfg = config_from_dict({
        "testbed": {"name": "policer", "options": {"cap": "30kpps", "dut_placement": "inline"}},
        "frames": {"sizes": [64]},
        "trial": {"duration_s": 0.5, "drain_s": 0.3}, "selftest": {"enabled": False},
        # searched below 1 % of the line rate (149 kfps, five times the cap): 6 trials, not 12
        "methods": [{"rfc2544_throughput": {"max_rate_pct": 1.0, "initial_rate_pct": 1.0, "resolution_pct": 0.02}},
                    {"stress": {"before_s": 1, "overload_s": 1, "after_s": 1.5, "interval_s": 0.1}}]})
    steal = Steal()
    doc = Runner(cfg, tmp_path / "p").run()
    assert doc["complete"], doc.get("interrupted_reason")
    tput = next(r for r in doc["summary"] if r["method"] == "rfc2544_throughput")["results"][0]["repetitions"][0]
    # the rate the overload is 150 % of; tester-limited only where the host took the CPU from the
    # trials the tester flagged at loads it keeps on a quiet machine, up to the cap (seen: 0.5-s
    # trials capped at 1.8 kfps, 89 s of steal in the suite)
    stopped_by_host(tput)
    spoilt = [t["counts"] for t in doc["trials"] if t["method"] == "rfc2544_throughput"
              and not t["counts"]["valid"] and t["load"]["rate_pps"] <= 31_000]
    valid_or_host(tput["found"] and not tput["tester_limited"], f"throughput {tput}",
                  sum(c["pacing"]["stretch_s"] for c in spoilt if c.get("pacing")), HostTake.of(steal, spoilt))
    # The cap, to the resolution and its bucket (31 kfps), met by what the passing trial really
    # offered: one the tester stretched within the tolerance that kept it valid sent its frames over
    # a longer time and met more of the policer's tokens (31 025 fps intended passed while the host
    # took 51 s of steal in a clean clone's suite).
    assert 27_000 <= tput["offered_pps"] <= min(tput["rate_pps"], 31_000), tput
    rep = next(r for r in doc["summary"] if r["method"] == "stress")["results"][0]["repetitions"][0]
    (ep,) = rep["episodes"]
    # The policer (30 kfps) drops about a third of an overload interval the tester sent as planned:
    # 4 500 frames in 0.1 s (the first one less: the bucket). One it did not is the tester's and is
    # not judged: sent over a longer time, 150 % meets more of the policer's tokens (a clean clone's
    # overload, 45 432 frames over 1.41 s, not 1 s, lost 14 % while the host took 140 s of steal).
    over = [iv for iv in rep["intervals"] if iv["phase"] == 1][1:]
    planned = [iv for iv in over if iv["duration_s"] <= 0.1 * 1.01 and iv["frames_sent"] >= 0.99 * ep["peak_pps"] * 0.1]
    if not planned:
        pytest.skip(f"the tester sent no overload interval as planned (its CPU stopped in each): {over}")
    lost = sum(iv["frames_lost"] for iv in planned) / sum(iv["frames_sent"] for iv in planned)
    assert 0.2 <= lost <= 0.45, planned
    assert ep["recovery_s"] is not None and ep["recovery_s"] <= 0.25, ep
    assert rep["baseline_latency_ns"] and rep["baseline_latency_ns"] > 0
