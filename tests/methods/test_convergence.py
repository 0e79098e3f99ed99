"""BGP convergence after a withdraw (``bgp_convergence``): its RFC 7747 numbers from per-prefix
outages, its refusals, and the whole method on the router test bed with two BGP paths — BIRD in
the DUT's namespace moving 1 000 prefixes from the tester's preferred peer to its backup."""
from __future__ import annotations

import shutil

import pytest
from tests.conftest import needs_root
from tests.host_steal import HostTake, Steal, valid_or_host

from netrig.errors import ConfigError
from netrig.measure.events import EventResult, EventRun, FlowOutage
from netrig.methods.convergence import ConvergenceParams, converged, measure_convergence
from netrig.model import FrameSize
from netrig.run.config import config_from_dict
from netrig.run.runner import Runner
from netrig.testbed.options import TestbedOptions

F64 = FrameSize(64)


def test_the_numbers_of_one_withdraw_come_from_the_prefixes_losses():
    """Four prefixes at 400 fps (one frame each per 10 ms): three lost frames around the withdraw,
    one never came back, the fourth lost nothing (it is not among the outages)."""
    run = EventRun("withdraw", 1.0, started_ns=1, ended_ns=2, exit_status=0)
    flows = (FlowOutage(0, 3, -0.005, 0.025), FlowOutage(1, 6, 0.0, 0.055), FlowOutage(2, 40, 0.01, None))
    r = converged(EventResult(run, flows, None, 4), 400.0, 49)
    assert (r.prefixes, r.frames_lost, r.prefixes_lost, r.never_moved) == (4, 49, 3, 1)
    assert r.loss_derived_s == pytest.approx(49 / 400) and r.rate_derived_s is None
    assert r.resolution_s == pytest.approx(0.01)
    # per prefix: its frames lost × its period (0.03, 0.06, 0.4 and 0 s)
    assert r.route_median_s == pytest.approx(0.045) and r.route_max_s == pytest.approx(0.4)
    assert r.frames_lost_elsewhere == 0
    # the trial lost 11 frames more, outside the outages: reported apart, in no convergence time
    later = converged(EventResult(run, flows, None, 4), 400.0, 60)
    assert (later.frames_lost, later.frames_lost_elsewhere) == (49, 11)
    assert later.loss_derived_s == pytest.approx(49 / 400)
    moved = converged(EventResult(run, flows[:2], 0.06, 4), 400.0, 9)
    assert moved.rate_derived_s == 0.06 and moved.never_moved == 0
    assert moved.to_dict()["route_max_s"] == pytest.approx(0.06)


@pytest.mark.parametrize(("kw", "field"), [({"withdraw_at_s": 6.0}, "withdraw_at_s"), ({"rate_pps": 0}, "rate_pps"),
                                          ({"command": "birdc 'disable"}, "command")])
def test_bad_parameters_name_their_field(kw, field):
    with pytest.raises(ConfigError) as e:
        ConvergenceParams(**kw)
    assert e.value.field == field


def test_without_a_withdraw_command_it_says_which_test_bed_has_one():
    with pytest.raises(ConfigError, match="bgp_paths = 2") as e:
        measure_convergence(object(), F64, ConvergenceParams(), {})  # type: ignore[arg-type]
    assert e.value.field == "bgp_convergence.command"


@pytest.mark.parametrize(("opts", "field"), [({"bgp_paths": 2, "routes": 10}, "bgp_paths"),
                                             ({"bgp_paths": 2, "routes": 64_001, "routing": "bgp"}, "bgp_paths"),
                                             ({"bgp_paths": 3, "routes": 10, "routing": "bgp"}, "bgp_paths")])
def test_two_paths_are_learned_over_bgp_and_bounded(opts, field):
    with pytest.raises(ConfigError) as e:
        TestbedOptions(**opts)
    assert e.value.field == field


@needs_root
@pytest.mark.root
@pytest.mark.skipif(shutil.which("bird") is None, reason="routing bgp needs BIRD 2 (apt install bird2: setup.sh)")
@pytest.mark.parametrize(("family", "size"), [(4, 64), (6, 84)])
def test_a_withdraw_moves_every_prefix_to_the_backup_and_the_restore_moves_them_back(tmp_path, family, size):
    """1 000 prefixes at 20 kfps (one frame per prefix every 50 ms), withdrawn from the preferred
    peer 1.5 s into a 4-s trial, twice, in either family: every prefix moves, frames are lost only in the prefixes'
    outages. The second repetition loses frames again only because the restore put every prefix back
    on the preferred peer (the restore command waits until the DUT's FIB says so)."""
    n = 1000
    cfg = config_from_dict({
        "testbed": {"name": "router", "options": {"routes": n, "routing": "bgp", "bgp_paths": 2}},
        # the prefixes' outages are asked, not the tester's smoothness: catch-up pacing sends what a
        # stall of the tester's CPU held back after it and keeps the trial's 4 s, where smooth pacing
        # stretched it (a clean clone: 224 ms, 5.6 %, invalid, while steal counted 140 ms)
        "ports": {"family": family}, "frames": {"sizes": [size]},
        "trial": {"duration_s": 1, "drain_s": 0.3, "pacing": "catch-up"},
        "selftest": {"enabled": False}, "stream": {"flow_order": "pseudorandom", "flows": {"dst_ips": n}},
        "methods": [{"bgp_convergence": {"rate_pps": 20_000, "duration_s": 4, "withdraw_at_s": 1.5,
                                         "repetitions": 2}}]})
    steal = Steal()
    doc = Runner(cfg, tmp_path / "c").run()
    assert doc["complete"], doc.get("interrupted_reason")
    trials = [t["counts"] for t in doc["trials"] if t["method"] == "bgp_convergence"]
    spoilt = [c for c in trials if not c["valid"]]
    valid_or_host(not spoilt, "; ".join(str(c["invalid_reason"]) for c in spoilt),
                  sum(c["pacing"]["stretch_s"] for c in spoilt if c.get("pacing")), HostTake.of(steal, spoilt))
    (res,) = next(m for m in doc["summary"] if m["method"] == "bgp_convergence")["results"]
    for rep, counts in zip(res["repetitions"], trials, strict=True):
        ev = rep["event"]
        assert ev["event"]["ok"], ev["event"]
        assert rep["prefixes"] == n and rep["never_moved"] == 0, rep
        assert rep["frames_lost"] > 0, "the preferred peer dropped what it withdrew until the DUT moved"
        # every lost frame is in a prefix's outage around the withdraw, or the DUT's ring dropped it
        # (its own loss, elsewhere: 988 frames 2.3 s after the withdraw once) or a stall took it
        lost = counts["frames_sent"] - counts["frames_received"]
        assert rep["frames_lost"] == ev["frames_lost"] and rep["frames_lost"] + rep["frames_lost_elsewhere"] == lost
        explained = (counts["dut_ring"] or {}).get("dropped", 0) + (counts["loss_in_stalls"] or 0)
        assert rep["frames_lost_elsewhere"] <= explained, (rep["frames_lost_elsewhere"], counts["dut_ring"])
        # at the rate the tester offered (its achieved rate: a little under 20 kfps when it fell behind)
        assert rep["rate_pps"] == pytest.approx(min(counts["achieved_pps"], 20_000))
        assert rep["loss_derived_s"] == pytest.approx(rep["frames_lost"] / rep["rate_pps"])
        assert rep["loss_derived_s"] <= rep["rate_derived_s"] < 2.5, rep
        assert rep["resolution_s"] == pytest.approx(n / rep["rate_pps"])
        assert 0 < rep["route_max_s"] <= rep["rate_derived_s"] + rep["resolution_s"]


@needs_root
@pytest.mark.root
@pytest.mark.skipif(shutil.which("bird") is None, reason="routing bgp needs BIRD 2 (apt install bird2: setup.sh)")
def test_every_prefix_beyond_the_first_1024_is_seen(tmp_path):
    """Trials with events report every flow's outage, not the engine's first 1 024 per stream:
    3 000 prefixes at 30 kfps, all of them counted."""
    cfg = config_from_dict({
        "testbed": {"name": "router", "options": {"routes": 3000, "routing": "bgp", "bgp_paths": 2}},
        "frames": {"sizes": [64]}, "trial": {"duration_s": 1, "drain_s": 0.3}, "selftest": {"enabled": False},
        "stream": {"flow_order": "pseudorandom", "flows": {"dst_ips": 3000}},
        "methods": [{"bgp_convergence": {"rate_pps": 30_000, "duration_s": 3, "withdraw_at_s": 1}}]})
    doc = Runner(cfg, tmp_path / "c").run()
    assert doc["complete"], doc.get("interrupted_reason")
    (rep,) = next(m for m in doc["summary"] if m["method"] == "bgp_convergence")["results"][0]["repetitions"]
    assert rep["prefixes"] == 3000 and rep["event"]["flows_total"] == 3000
    assert rep["frames_lost"] == rep["event"]["frames_lost"], "every lost frame in a prefix's outage"


def test_a_withdraw_run_again_restores_first():
    """The measurer runs a stretched trial again, events and all: the second withdraw finds the
    routes already withdrawn unless the restore runs before it."""
    from netrig.measure.events import CommandRunner, Event
    from netrig.methods.convergence import _Withdraws

    ran: list[str] = []

    class Recording(CommandRunner):
        def __call__(self, event: Event) -> EventRun:
            ran.append(event.command)
            return EventRun(event.command, event.at_s, started_ns=1, ended_ns=2, exit_status=0)

    w = _Withdraws(Recording(), "restore")
    assert w(Event("withdraw", 1.0)).ok and w(Event("withdraw", 1.0)).ok
    assert ran == ["withdraw", "restore", "withdraw"]
