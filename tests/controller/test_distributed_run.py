"""`netrig run` across hosts (issue 30's done-when): two agents in their own namespaces (each a
management address on the veth management network and two test ports), a controller, a 4-port
set-up through a bridge DUT; `netrig run` with RFC 2544 throughput uses the controller as its
measurer. Every pair crosses agents: frames really forwarded (the DUT's own counters) and counted
exactly, a throughput found. The namespaces and processes are those of ``test_distributed``'s
``bed``, torn down however the test ends."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tests.conftest import needs_root, sh
from tests.controller.test_distributed import bed, mac
from tests.otg.conftest import ROOT

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]

#: (tx, rx) port of each pair: a1 → b1 and b2 → a2, both across the agents.
PAIRS = (("a1", "b1"), ("b2", "a2"))

CONFIG = """
name = "across two agents"
[otg]
url = "{url}"
{pairs}
[selftest]
enabled = false
[line_rate]
speed_bps = "10M"
[frames]
sizes = [128]
[trial]
duration_s = "0.5s"
learning_frames = false
tx_tolerance_pct = 20
[[methods]]
[methods.rfc2544_throughput]
initial_rate_pct = 50
resolution_pct = 25
"""


def pair_toml(tx: str, rx: str) -> str:
    return (f'[[otg.pairs]]\ntx = "{tx[0]}/{tx}"\nrx = "{rx[0]}/{rx}"\nsrc_mac = "{mac(tx)}"\ndst_mac = "{mac(rx)}"\n'
            'src_ip = "198.18.0.1"\ndst_ip = "198.19.0.1"\n')


def dut_counts(ns: str) -> dict[str, tuple[int, int]]:
    """Frames each DUT port took in and sent out: (rx_packets, tx_packets)."""
    out = {}
    for port in ("a1", "a2", "b1", "b2"):
        stat = [int(sh("cat", f"/sys/class/net/d{port}/statistics/{k}_packets", ns=ns)) for k in ("rx", "tx")]
        out[port] = (stat[0], stat[1])
    return out


def test_netrig_run_rfc2544_throughput_across_two_agents(tmp_path):
    with bed(tmp_path) as b:
        b.agent("a"), b.agent("b")
        _, url = b.controller()
        sh("sysctl", "-qw", "net.ipv6.conf.dut0.disable_ipv6=1", ns=b.ns["d"])  # the DUT sends nothing itself
        cfg = tmp_path / "run.toml"
        cfg.write_text(CONFIG.format(url=url, pairs="".join(pair_toml(tx, rx) for tx, rx in PAIRS)))
        out = tmp_path / "out"
        before = dut_counts(b.ns["d"])
        env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
        r = subprocess.run([sys.executable, "-m", "netrig.cli.main", "run", str(cfg), "--out", str(out), "--quiet"],
                           env=env, capture_output=True, text=True, timeout=300)
        after = dut_counts(b.ns["d"])
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "result.json").read_text())
    assert doc["complete"] and doc["testbed"]["name"] == "otg"
    assert [a["state"] for a in doc["testbed"]["agents"]] == ["up", "up"]
    (method,) = doc["summary"]
    (res,) = method["results"]
    trials = [t for t in doc["trials"] if t.get("method") == "rfc2544_throughput"]
    assert res["headline"] is not None and res["headline"]["fps"] > 0, res  # a throughput found
    assert len(trials) >= 2  # the search took steps through the controller
    sent = received = 0
    for t in trials:
        c = t["counts"]
        flows = c["raw"]["otg"]["flows"]
        planned = round(t["load"]["rate_pps"] * 0.5)
        assert sum(f["frames_tx"] for f in flows) == c["frames_sent"] == planned, t  # every frame sent, counted
        assert c["valid"], c["invalid_reason"]
        sent, received = sent + c["frames_sent"], received + c["frames_received"]
    # What the tester counted is what the DUT's ports took in from the senders and forwarded.
    into = {tx: after[tx][0] - before[tx][0] for tx, _ in PAIRS}
    outof = {rx: after[rx][1] - before[rx][1] for _, rx in PAIRS}
    assert sum(into.values()) == sent, (into, sent)
    assert sum(outof.values()) == received, (outof, received)
    assert received == sent  # a bridge with room to spare loses nothing at these rates
    print(f"throughput {res['headline']['fps']:.0f} fps over {len(trials)} trials; {sent} frames across the agents")
