"""A short ``netrig capture-bench`` (2 methods × 1 size, short trials) on real capture test beds:
the result JSON, the trial log and the report with both plots are written, every point says
what it captured, and no namespace, link or XDP program is left behind."""
from __future__ import annotations

import json
import subprocess

import pytest
from tests.conftest import needs_root

from netrig.cli.main import main

pytestmark = needs_root


def _netns() -> set[str]:
    return {ln.split()[0] for ln in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
            .stdout.splitlines() if ln.strip()}


def test_short_capture_bench_writes_result_and_report(tmp_path, capsys):
    before = _netns()
    out = tmp_path / "cb"
    rc = main(["capture-bench", "--methods", "recvmmsg,af_xdp", "--sizes", "512", "--duration", "0.5",
               "--drain", "0.1", "--loads", "50,100", "--resolution", "10", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    doc = json.loads((out / "capture-bench.json").read_text())
    assert doc["complete"] and doc["schema"] == "netrig.capture-bench/2"
    assert [r["method"] for r in doc["results"]] == ["recvmmsg", "af_xdp"]
    for r in doc["results"]:  # a ceiling proven per method, its limit / 1.1 caps every load
        assert doc["ceilings"][r["method"]]["512"] == r["ceiling_pps"] > 0
        assert r["limit_pps"] == pytest.approx(r["ceiling_pps"] / 1.1)
        assert r["throughput"]["found"] and 0 < r["throughput"]["rate_pps"] <= r["limit_pps"] * 1.0001
        assert [p["load_pct"] for p in r["curve"]] == [50.0, 100.0]
        for p in r["curve"]:
            assert p["frames_sent"] > 0 and p["frames_captured"] <= p["frames_sent"]
            assert p["cpu_s"] is not None and p["cpu_s"] >= 0
            if p["valid"]:
                assert p["stray"] == 0, "no other trial's frames counted"
                assert p["frames_captured"] > 0, "the capture runs again after the ceiling (SIGCONT)"
    trials = [json.loads(ln) for ln in (out / "trials.ndjson").read_text().splitlines()]
    assert {t["phase"] for t in trials} == {"ceiling", "throughput", "iperf"}
    html = (out / "report.html").read_text()
    assert html.count("<svg") == 2 and "recvmmsg" in html and "af_xdp" in html
    assert "RFC 2544 throughput" in (out / "report.md").read_text()
    assert _netns() - before == set(), "namespaces left behind"
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "-cap" not in links
