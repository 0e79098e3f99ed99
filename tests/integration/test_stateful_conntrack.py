"""RFC 9693 stateful trials on real nat and firewall test beds, checked against the DUT's conntrack
table: N connections established → the table holds N (on the NAT every reply tuple translated, every
port kept); the responder's frames come back to the initiator through that state; both directions at
once create nothing new; the tear-down empties the table; without the state the NAT passes nothing
back and the firewall's table grows (the checks the method relies on fire). Then the whole method
through the run loop."""
import json
import os

import pytest
from tests.host_steal import stopped_by_host

pytestmark = [pytest.mark.root]

if os.geteuid() != 0:
    pytest.skip("needs root: builds network namespaces and veth pairs", allow_module_level=True)

from netrig.measure import FlowTrial
from netrig.model import FrameSize
from netrig.run.config import config_from_dict
from netrig.run.runner import Runner
from netrig.run.session import open_session
from netrig.testbed.nsthread import sysctl_in

N = 1000
FRAME = FrameSize(size=64)


def _config(topology: str, methods: list, **trial: float) -> object:
    return config_from_dict({
        "testbed": {"name": topology, "options": {"conntrack_timeout_s": 600}},
        "trial": {"duration_s": 1.0, "drain_s": 0.3, **trial},
        "selftest": {"enabled": False},
        "frames": {"sizes": [64]},
        "methods": methods,
    })


def _ct(c) -> dict:
    return c.raw["conntrack"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("topology", ["nat", "firewall"])
def test_phases_against_conntrack(topology):
    cfg = _config(topology, [{"stateful": {}}])
    with open_session(cfg, "dut") as s:
        m = s.measurer
        dut = s.command_env["NETRIG_DUT_NETNS"]
        assert sysctl_in(dut, "net.netfilter.nf_conntrack_udp_timeout") == "600"
        # preliminary phase: one frame per 4-tuple → N connections in the table
        c = m.measure_flows(FlowTrial(5000, FRAME, N, flush_before=True, check_tuples=True))
        assert (c.frames_sent, c.frames_received) == (N, N)
        assert (_ct(c)["before"], _ct(c)["after"]) == (0, N)
        t = _ct(c)["tuples"]
        assert t["entries"] == N and t["port_changed"] == 0
        if topology == "nat":
            assert t["translated"] == N and t["nat_addresses"] == ["198.19.0.1"]
        else:
            assert t["translated"] == 0
        # the responder answers every connection once: all counted at the initiator, nothing new
        v = m.measure_flows(FlowTrial(5000, FRAME, N, direction="reverse"))
        assert v.raw["directions"]["reverse"]["frames_received"] == N and _ct(v)["after"] == N
        # both directions at once, with the state in place
        b = m.measure_flows(FlowTrial(2000, FRAME, N, direction="both", duration_s=1.0))
        d = b.raw["directions"]
        assert d["forward"]["frames_sent"] > 0 and d["reverse"]["frames_sent"] > 0
        assert d["forward"]["frames_received"] == d["forward"]["frames_sent"]
        assert d["reverse"]["frames_received"] == d["reverse"]["frames_sent"]
        assert _ct(b)["after"] == N
        # tear-down: the whole table deleted, timed against deleting it empty
        td = m.measure_flows(FlowTrial(5000, FRAME, N, direction="reverse", teardown=True))
        ct = _ct(td)
        assert ct["teardown_entries"] == N and ct["after_teardown"] == 0
        assert ct["teardown_s"] > ct["empty_flush_s"] > 0
        # without the state: the NAT has nothing to translate back to; the firewall's rules accept the
        # responder's frames as new connections, which the table shows (N more, not N)
        x = m.measure_flows(FlowTrial(5000, FRAME, N, direction="reverse"))
        if topology == "nat":
            assert x.frames_received == 0
        else:
            assert _ct(x)["after"] == N and _ct(x)["before"] == 0


@pytest.mark.timeout(180)
def test_method_through_the_run_loop(tmp_path):
    params = {"connections": N, "establish_rate_pps": 5000, "max_rate_pps": 100_000, "resolution_pct": 10,
              "duration_s": 0.5, "capacity_connections": [500, 2000]}
    Runner(_config("nat", [{"stateful": params}]), tmp_path).run()
    doc = json.loads((tmp_path / "result.json").read_text())
    rep = doc["summary"][0]["results"][0]["repetitions"][0]
    assert rep["preliminary"]["conntrack_after"] == N and rep["preliminary"]["tuples"]["port_changed"] == 0
    assert rep["validation"]["frames_received"] == N
    assert rep["teardown"]["entries"] == N and rep["teardown"]["after"] == 0 and rep["teardown_rate_cps"] > 0
    for search in (rep["establishment"], rep["throughput"]):
        stopped_by_host(search)
    assert rep["establishment_rate_cps"] > 5000 * 0.9
    assert rep["throughput_pps"] > 0
    assert [c["ok"] for c in rep["capacity"]] == [True, True] and rep["capacity_connections"] == 2000
    assert all(c["slab_bytes_per_entry"] > 0 for c in rep["capacity"])
    trials = [json.loads(line) for line in (tmp_path / "trials.ndjson").read_text().splitlines()]
    assert sum(1 for t in trials if t.get("kind") == "flows") == rep["throughput"]["trials"] + \
        rep["establishment"]["trials"] + 2 + 1 + 2 * 2
