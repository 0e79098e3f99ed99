"""A short ``netrig capture-bench`` (2 methods × 1 size, short trials) on real capture test beds:
the result JSON, the trial log and the report with both plots are written, every point says
what it captured, and no namespace, link or XDP program is left behind."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from tests.conftest import needs_root

from netrig.cli.main import main
from netrig.run.capture_bench import load_bench

pytestmark = needs_root


def _netns() -> set[str]:
    return {ln.split()[0] for ln in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
            .stdout.splitlines() if ln.strip()}


@pytest.mark.timing
def test_short_capture_bench_writes_result_and_report(tmp_path, capsys):
    before = _netns()
    out = tmp_path / "cb"
    rc = main(["capture-bench", "--methods", "recvmmsg,af_xdp", "--sizes", "512", "--duration", "0.5",
               "--drain", "0.1", "--loads", "50,100", "--resolution", "25", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    doc = json.loads((out / "capture-bench.json").read_text())
    assert doc["complete"] and doc["schema"] == "netrig.capture-bench/2"
    assert json.loads(json.dumps(load_bench(str(out)).to_dict())) == doc, "read back as its type, the same document"
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


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stopped_capture_bench_keeps_its_document_and_leaves_nothing(tmp_path, sig, status):
    """Stopped while the capture application is paused for the tester's ceiling: the exit status says
    how, the document says why and is not complete, and no namespace or capture process remains."""
    before, captures_before = _netns(), _captures()
    out = tmp_path / "cb"
    p = subprocess.Popen([sys.executable, "-m", "netrig.cli.main", "capture-bench", "--methods", "recvfrom",
                          "--sizes", "64", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    assert p.stderr is not None
    for line in p.stderr:  # the ceiling's TX-only trials run with the capture stopped (SIGSTOP)
        if "the tester's ceiling" in line:
            break
    time.sleep(1.0)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == status, err
    assert "the points that finished are in" in err and "Traceback" not in err
    doc = json.loads((out / "capture-bench.json").read_text())
    assert doc["complete"] is False and doc["interrupted_reason"]
    assert _netns() - before == set(), "namespaces left behind"
    assert _captures() <= captures_before, "a capture process was left running"


def _captures() -> set[str]:
    """Pids of running ``netrig capture`` processes (a test bed's capture DUT)."""
    out = subprocess.run(["pgrep", "-f", "netrig.cli.main capture --port"], capture_output=True, text=True).stdout
    return set(out.split())
