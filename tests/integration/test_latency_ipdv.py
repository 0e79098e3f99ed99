"""A real latency measurement through the router test bed carries IPDV (mean and p99) everywhere a
user reads it: every trial in ``trials.ndjson``, the method result in ``result.json``, the console
summary and the HTML report. (Version 1 results held ``ipdv_ns: null`` in all of them.)"""
import json
import os
import re

import pytest

pytestmark = [pytest.mark.root]

if os.geteuid() != 0:
    pytest.skip("needs root: builds network namespaces and veth pairs", allow_module_level=True)

from tests.host_steal import HostTake, Steal, unmeasured_by_host, valid_or_host

from netrig.cli.console import run_with_console
from netrig.report import write_report
from netrig.run.config import config_from_dict


@pytest.mark.timeout(240)
def test_latency_ipdv_reaches_every_output(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # one console line per table row
    cfg = config_from_dict({
        "testbed": {"name": "router"},
        "line_rate": {"speed_bps": "1G"},
        # IPDV reaching every output is asked, not at what rate: catch-up pacing sends what a stall of
        # the tester's CPU held back after it and keeps the trial's length, where smooth pacing
        # stretched it (a clean clone: 20 and 74 ms of 0.5-s latency trials, both invalid, with
        # 7 and 47 ms of host stops the stall watch saw, 14 of them in 0.5 s)
        "trial": {"duration_s": 0.5, "drain_s": 0.3, "pacing": "catch-up"},
        "selftest": {"enabled": False},
        "frames": {"sizes": [64]},
        "methods": [{"rfc2544_throughput": {"max_rate_pct": 10, "initial_rate_pct": 5, "resolution_pct": 2}},
                    {"rfc2544_latency": {"trials": 2, "rate_pct": 50}}],
    })
    out = tmp_path / "run"
    steal = Steal()
    assert run_with_console(cfg, out, quiet=True) == 0

    doc = json.loads((out / "result.json").read_text())
    result = next(s for s in doc["summary"] if s["method"] == "rfc2544_latency")["results"][0]
    unmeasured_by_host(result)
    trials = [json.loads(line) for line in (out / "trials.ndjson").read_text().splitlines()[1:]]
    lat = [t["counts"]["latency"] for t in trials if t["method"] == "rfc2544_latency"]
    assert len(lat) == 2
    for x in lat:
        assert x["ipdv_ns"] > 0 and x["ipdv_p99_ns"] > 0 and x["ipdv_max_ns"] >= x["ipdv_p99_ns"]

    rep = result["repetitions"][0]
    if rep["ipdv_ns"] is None:  # no valid trial: each was the tester's, which only the host may excuse
        spoilt = [t["counts"] for t in trials if t["method"] == "rfc2544_latency"]
        assert rep["invalid_trials"] == len(spoilt) == 2, rep
        valid_or_host(False, "; ".join(c["invalid_reason"] for c in spoilt),
                      sum(c["pacing"]["stretch_s"] for c in spoilt), HostTake.of(steal, spoilt))
    assert rep["ipdv_ns"] > 0 and rep["ipdv_p99_ns"] > 0

    console = capsys.readouterr().out
    row = next(line for line in console.splitlines() if "IPDV" not in line and "64 B" in line and " / " in line)
    assert "IPDV mean / p99" in console and re.search(r"[\d.]+ [nµm]?s / [\d.]+ [nµm]?s", row), console

    html = write_report(out / "result.json").read_text()
    row = re.search(r"<tr><td class=l>64 B</td>(.*?)</tr>", html[html.index('scope="col">IPDV p99'):]).group(1)
    cells = re.findall(r"<td>([^<]*)</td>", row)
    assert cells[-2] != "—" and cells[-1] != "—", cells  # IPDV and IPDV p99 columns
