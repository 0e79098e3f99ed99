"""`netrig serve` driven by gosnappi (tests/otg/gosnappi, built here from the Go module proxy): its
version check passes, a flow with patterns is counted exactly, the capture comes back, a refused
config is an OTG error naming the path."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.conftest import needs_root
from tests.otg.conftest import serve

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]

SRC = Path(__file__).resolve().parent / "gosnappi"
FRAMES = 1000


#: Built by scripts/gosnappi-client.sh: ahead of the tests by ``make test``; here unless it is fresh.
BUILD = SRC.parents[2] / "scripts" / "gosnappi-client.sh"
CLIENT = SRC.parents[2] / "target" / "gosnappi" / "client"


@pytest.fixture(scope="module")
def client() -> Path:
    if shutil.which("go") is None:
        pytest.skip("needs the go toolchain")
    r = subprocess.run([str(BUILD), "build"], capture_output=True, text=True, timeout=1800)
    if r.returncode != 0 and ("proxy" in r.stderr or "dial" in r.stderr or "lookup" in r.stderr):
        pytest.skip(f"the Go module proxy is out of reach: {r.stderr.strip()[-200:]}")
    assert r.returncode == 0, r.stderr
    return CLIENT


def test_gosnappi_client(client, veth):
    ns_a, if_a, ns_b, if_b = veth
    ports = [f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"]
    with serve(ports) as url:
        r = subprocess.run([str(client), "-location", url, "-tx", ports[0], "-rx", ports[1], "-frames", str(FRAMES)],
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["server_version"].startswith(">=1.58.0") and out["client_version"] == "1.61.0"
    assert out["frames_tx"] == out["frames_rx"] == FRAMES == out["port_tx"]
    assert out["latency_avg_ns"] > 0
    assert out["capture_bytes"] == 24 + FRAMES * (16 + 256), "classic pcap: 256-byte frames with their FCS"
    assert "devices[0].ipv4_loopbacks: not supported" in out["refusal"]
