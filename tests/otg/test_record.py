"""``netrig serve --record DIR``: each session is a netrig result with one ``otg`` trial per flow
run, exact counts, that ``netrig report`` draws."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tests.conftest import needs_root
from tests.otg.conftest import ROOT, api, control, serve, wait_stopped

from netrig.results import load_result

pytestmark = [needs_root, pytest.mark.root]


def test_recorded_session_reports(veth, tmp_path):
    ns_a, if_a, ns_b, if_b = veth
    ports = [f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"]
    with serve(ports, "--record", str(tmp_path / "runs")) as url:
        a = api(url)
        c = a.config()
        c.ports.port(name="p1", location=ports[0]).port(name="p2", location=ports[1])
        for name, frames in (("f1", 500), ("f2", 300)):
            f = c.flows.flow(name=name)[-1]
            f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = "p1", ["p2"]
            f.packet.ethernet().ipv4().udp()
            f.rate.pps, f.duration.fixed_packets.packets = 10_000, frames
            f.metrics.enable, f.metrics.latency.enable = True, True
        a.set_config(c)
        for _ in range(2):  # two runs of each flow
            control(a, "start")
            wait_stopped(a, ["f1", "f2"])
    (run,) = (tmp_path / "runs").iterdir()
    doc = load_result(run)
    assert doc["complete"] and doc["config"]["otg"]["flows"][0]["name"] == "f1"
    got = sorted((t["otg"]["flow"], t["repetition"], t["counts"]["frames_sent"], t["counts"]["frames_received"])
                 for t in doc["trials"])
    assert got == [("f1", 0, 500, 500), ("f1", 1, 500, 500), ("f2", 0, 300, 300), ("f2", 1, 300, 300)]
    assert all(t["kind"] == "otg" and t["counts"]["latency"]["min_ns"] > 0 for t in doc["trials"])
    for lat in (t["counts"]["latency"] for t in doc["trials"]):  # each run's own, from the receivers' buckets
        assert lat["min_ns"] <= lat["p50_ns"] <= lat["p99_ns"] <= lat["p999_ns"] <= lat["max_ns"] * 1.001 + 1, lat
        assert 0 <= lat["ipdv_ns"] <= lat["ipdv_max_ns"] <= lat["max_ns"] - lat["min_ns"], lat
        assert 0 <= lat["ipdv_p99_ns"] <= lat["ipdv_max_ns"] * 1.01 + 1, lat
    assert all((t["counts"]["duplicated"], t["counts"]["reordered"]) == (0, 0) for t in doc["trials"])
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    html = tmp_path / "report.html"
    subprocess.run([sys.executable, "-m", "netrig.cli.main", "report", str(run), "-o", str(html)],
                   env=env, check=True, capture_output=True, timeout=120)
    text = html.read_text()
    assert text.count("<td class=l>otg</td><td class=l>64 B</td>") == 4, "every run in the trials table"
    assert html.with_suffix(".md").exists()
