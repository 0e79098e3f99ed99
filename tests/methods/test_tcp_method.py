"""The ``tcp`` method in the registry: a stack trial per repetition (not per frame size), recorded
and replayed on resume, reported and compared; on a real router test bed iperf3 really runs through
the DUT between the tester ports' kernel stacks, every party's CPU is accounted, and the tester's
stack never answers the engine's frames through the DUT."""
from __future__ import annotations

import json
import shutil

import pytest
from tests.conftest import if_counter, needs_root, sh
from tests.testbed.testbed_helpers import assert_gone

from netrig.errors import ConfigError
from netrig.methods import REGISTRY
from netrig.report import write_compare, write_report
from netrig.results import TRIAL_LOG
from netrig.run.config import config_from_dict
from netrig.run.runner import Runner

needs_iperf3 = pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed (make setup)")


def _sim(capacity: float = 500_000, **tcp) -> dict:
    return {"testbed": {"name": "simulated", "simulator": {"capacity_pps": capacity}}, "frames": {"sizes": [64, 1518]},
            "trial": {"duration_s": 1}, "methods": [{"rfc2544_throughput": {}},
                                                   {"tcp": {"duration_s": 2, "repetitions": 2, **tcp}}]}


def test_tcp_is_a_stack_method_of_the_registry():
    m = REGISTRY.get("tcp")
    assert m.stack_kind == "tcp" and m in REGISTRY.stack_methods()


def test_runs_once_per_repetition_not_per_frame_size(tmp_path):
    doc = Runner(config_from_dict(_sim()), tmp_path / "r").run()
    tcp = doc["summary"][1]
    assert [r["frame_size"] for r in tcp["results"]] == ["stack"]
    reps = tcp["results"][0]["repetitions"]
    assert len(reps) == 2 and all(r["goodput_bps"] > 1e9 for r in reps)
    stack_trials = [t for t in doc["trials"] if t["kind"] == "tcp"]
    assert len(stack_trials) == 2 and all("counts" not in t and t["result"]["cpu"]["busy_s"] > 0 for t in stack_trials)
    assert stack_trials[0]["load"]["request"]["params"]["streams"] == 5
    assert tcp["results"][0]["stats"]["busy_cpu_s_per_gbit"]["median"] > 0
    # the self-test proves only the frame methods' rates; the stack method asks for none
    assert [c["frame_size"] for c in doc["selftest"]["ceilings"]] == [64, 1518]


def test_resume_replays_recorded_stack_trials(tmp_path):
    out = tmp_path / "r"
    first = Runner(config_from_dict(_sim()), out).run()
    lines = (out / TRIAL_LOG).read_text().splitlines()
    keep = [ln for ln in lines if '"kind": "tcp"' not in ln or '"repetition": 0' in ln]
    assert len(keep) == len(lines) - 1  # the second repetition's stack trial is "lost"
    (out / TRIAL_LOG).write_text("\n".join(keep) + "\n")
    (out / "result.json").unlink()
    r = Runner(config_from_dict(_sim()), out, resume=True)
    doc = r.run()
    assert r.measured == 1  # only the lost stack trial ran again
    assert doc["summary"][1]["results"][0]["repetitions"][0] == first["summary"][1]["results"][0]["repetitions"][0]


def test_bad_parameters_name_the_field():
    with pytest.raises(ConfigError, match=r"methods\[1\]\.tcp\.direction"):
        config_from_dict(_sim(direction="sideways"))
    with pytest.raises(ConfigError, match=r"methods\[1\]\.tcp\.family"):
        config_from_dict(_sim(family=5))
    with pytest.raises(ConfigError, match=r"methods\[1\]\.tcp\.streams"):
        config_from_dict(_sim(streams=0))


def test_report_and_comparison_show_goodput_and_cpu(tmp_path):
    Runner(config_from_dict(_sim(500_000)), tmp_path / "a").run()
    Runner(config_from_dict(_sim(250_000)), tmp_path / "b").run()
    html = write_report(tmp_path / "a" / "result.json").read_text()
    assert 'data-plot="tcp"' in html and "CPU of every party" in html and "Gbit/s" in html
    cmp = write_compare([tmp_path / "a" / "result.json", tmp_path / "b" / "result.json"], tmp_path / "c.html")
    text = cmp.read_text()
    assert "TCP through the DUT" in text and "50.0 %" in text  # half the capacity: half the goodput


def test_external_test_bed_is_refused_before_anything_runs(tmp_path):
    cfg = config_from_dict({"testbed": {"name": "external", "options": {"ifaces": "eth8,eth9"}},
                            "methods": [{"tcp": {}}]})
    with pytest.raises(ConfigError, match="tester_stack"):
        Runner(cfg, tmp_path / "x").run()
    assert not (tmp_path / "x").exists()


@needs_root
@needs_iperf3
def test_real_router_tcp_with_every_partys_cpu(tmp_path):
    cfg = config_from_dict({"testbed": {"name": "router"}, "frames": {"sizes": [1518]}, "trial": {"duration_s": 1},
                            "selftest": {"enabled": False},
                            "methods": [{"tcp": {"duration_s": 2, "streams": 3}}]})
    doc = Runner(cfg, tmp_path / "r").run()
    assert doc["complete"], doc.get("interrupted_reason")
    rep = doc["summary"][0]["results"][0]["repetitions"][0]
    assert rep["goodput_bps"] > 5e8, rep  # a veth router carries Gbit/s of TCP
    names = {p["name"] for p in rep["processes"]}
    assert any("client" in n for n in names) and any("server" in n for n in names)
    assert all(p["total_s"] > 0 for p in rep["processes"])
    cores = rep["cpu"]["cores"]
    assert cores and sum(c["softirq"] for c in cores.values()) > 0  # forwarding and receive work is softirq
    per = rep["cpu_per"]
    assert per["busy_s_per_gbit"] > 0
    tools = sum(p["total_s"] for p in rep["processes"])
    # the tools are part of all the cores' busy time (rusage is exact, /proc/stat counts 4 ms ticks)
    assert tools <= per["busy_s"] * 1.1 + 0.1, (tools, per)
    assert doc["testbed"]["options"]["tester_stack"] is True
    assert_gone(doc["testbed"]["id"])  # its own test bed (others may be up on a shared machine)


@needs_root
def test_tester_stack_never_answers_engine_frames_through_the_dut(tmp_path):
    """UDP test frames to the receiving port's own address: with a kernel stack there, it would send
    ICMP port-unreachable back through the DUT. Nothing may come back."""
    from netrig.testbed import Testbed
    from netrig.trial import Port, Stream, run_trial

    with Testbed.create("router", tester_stack=True) as tb:
        tx, rx = tb.port("tx"), tb.port("rx")
        dut = tb.dut_netns
        drx = next(i.ifname for i in tb.state.interfaces if i.netns == dut and i.ifname.endswith("drx"))
        back0 = if_counter(dut, drx, "rx_packets")
        s = Stream(**tb.stream_defaults(), frame_size=128, rate_pps=2000)
        res = run_trial(Port(tx.ifname, netns=tx.netns, io="af_packet"), Port(rx.ifname, netns=rx.netns, io="af_packet"),
                        [s], duration_s=1.0, drain_s=0.3)
        assert sum(p.rx_frames for p in res.ports) > 100, res.to_dict()  # frames reached the stack
        back = if_counter(dut, drx, "rx_packets") - back0
        rules = json.loads(sh("nft", "-j", "list", "table", "inet", f"netrig_{tb.id}_tester", ns=rx.netns))
        dropped = sum(e["counter"]["packets"] for item in rules["nftables"] if "rule" in item
                      for e in item["rule"]["expr"] if isinstance(e, dict) and "counter" in e)
        assert dropped >= 1, "the receiving port's stack never tried to answer: the test proves nothing"
        # what may still come back is the stack's own link-up chatter (IPv6 ND/MLD), never an answer
        assert back <= 5, f"{back} frames came back from the receiving tester port through the DUT"
