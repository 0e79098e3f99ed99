"""A real Prometheus (Debian's ``prometheus``, started here on loopback with a 1-s scrape interval
and its own data directory, killed at the end) scrapes a real ``netrig run`` on the router test bed
(RFC 2544 throughput, a few short trials), and its query API gives the frames sent and lost of
``result.json`` exactly."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import needs_root

from netrig.results import load_result

PROMETHEUS = shutil.which("prometheus")
pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(PROMETHEUS is None, reason="needs Prometheus (apt install prometheus: setup.sh)")]
ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
CONFIG = """
[testbed]
name = "router"
[selftest]
enabled = false
[trial]
duration_s = "0.5s"
drain_s = "0.2s"
[frames]
sizes = [64]
[[methods]]
[methods.rfc2544_throughput]
# Starting at 2 % of 10 GbE at 64 B (298 kfps), near the router's capacity behind the wire, the search
# takes several trials whichever way the first goes: a pass bisects up towards the top (4 %: beyond
# the router here; up to 100 % it took 10 trials, 7 of them beyond the tester), a failure down.
# (Capped at 2 %, a router that forwarded 298 kfps loss-free ended the search at its first trial:
# one record, nothing to add up.)
initial_rate_pct = 2.0
max_rate_pct = 4.0
min_rate_pct = 0.1
resolution_pct = 0.5
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(base: str, promql: str) -> float | None:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.load(r)
    assert doc["status"] == "success", doc
    res = doc["data"]["result"]
    return float(res[0]["value"][1]) if res else None


@contextlib.contextmanager
def prometheus(tmp: Path, target: str) -> Iterator[str]:
    """Prometheus scraping ``target`` every second; yields its base URL."""
    assert PROMETHEUS is not None
    (tmp / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
        f"scrape_configs:\n  - job_name: netrig\n    static_configs:\n      - targets: ['{target}']\n")
    port = free_port()
    log = (tmp / "prometheus.log").open("w")
    p = subprocess.Popen([PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'db'}",
                          f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{base}/-/ready", timeout=2) as r:
                if r.status == 200:
                    break
            assert p.poll() is None and time.monotonic() < deadline, (tmp / "prometheus.log").read_text()
            time.sleep(0.2)
        # Ready is not scraping: the first scrape of a target comes seconds later (discovery, then an
        # offset within the interval), and a run of a few seconds ended before it (nothing scraped,
        # so netrig rightly did not wait). The target's ``up`` (0 until the run listens) says it has begun.
        while query(base, "up") is None:
            assert p.poll() is None and time.monotonic() < deadline, "Prometheus never scraped the target"
            time.sleep(0.2)
        yield base
    finally:
        p.kill()
        p.wait()
        log.close()


def test_prometheus_reads_the_results_counts(tmp_path):
    (tmp_path / "run.toml").write_text(CONFIG)
    port = free_port()
    out = tmp_path / "out"
    with prometheus(tmp_path, f"127.0.0.1:{port}") as prom:
        run = subprocess.run([sys.executable, "-m", "netrig.cli.main", "run", str(tmp_path / "run.toml"), "--out",
                              str(out), "--quiet", "--metrics-listen", f"127.0.0.1:{port}"],
                             capture_output=True, text=True, env=ENV, timeout=300)
        assert run.returncode == 0, run.stderr
        doc = load_result(out)
        trials = [t for t in doc["trials"] if "counts" in t]
        assert len(trials) >= 2
        # The series went stale when the endpoint closed: read the last value each had.
        got = {k: query(prom, f"sum(last_over_time(netrig_frames_{k}_total[5m]))") for k in ("sent", "lost")}
        assert query(prom, "max(last_over_time(netrig_run_complete[5m]))") == 1, "Prometheus saw the run's end"
    assert got["sent"] == sum(t["counts"]["frames_sent"] for t in trials) > 0
    assert got["lost"] == sum(t["counts"]["frames_lost"] for t in trials)
