"""``netrig tcp`` builds a test bed with tester stacks, runs iperf3 through the DUT for real,
reports goodput and CPU, and leaves no namespace, link or process behind; bad input is one line."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from tests.conftest import needs_root

NETRIG = [sys.executable, "-m", "netrig.cli.main"]
needs_iperf3 = pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed (make setup)")


def _state() -> tuple[str, str]:
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return ns, "\n".join(sorted(ln.split(":")[1] for ln in links.splitlines()))


@needs_root
@needs_iperf3
def test_tcp_through_a_linux_router_reports_goodput_and_cpu_and_cleans_up():
    before = _state()
    r = subprocess.run([*NETRIG, "tcp", "--testbed", "router", "--duration", "1s", "--streams", "2",
                        "--interval", "0.5s", "--line-rate", "100G", "--json"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["testbed"] == "router" and doc["streams_requested"] == 2 and len(doc["streams"]) == 2
    assert doc["line_rate"]["bps"] == 100e9 and doc["line_rate"]["source"] == "config"
    assert doc["goodput_pct_line_rate"] == {"forward": pytest.approx(100 * doc["goodput_bps"] / 100e9)}
    assert doc["goodput_bps"] > 1e8 and doc["retransmits"] is not None
    assert [p["name"] for p in doc["processes"]] == ["iperf3 client", "iperf3 server"]
    assert all(p["total_s"] > 0 for p in doc["processes"]) and doc["cpu_s_per_gbit"] > 0
    assert _state() == before
    assert subprocess.run(["pgrep", "-x", "iperf3"], capture_output=True).returncode == 1


@needs_root
@needs_iperf3
def test_tcp_reverse_through_nat_and_a_custom_port():
    """Through the masquerading NAT test bed the client (port tx) opens the connection, the server
    (port rx) sends: conntrack carries the reverse data back."""
    before = _state()
    r = subprocess.run([*NETRIG, "tcp", "--testbed", "nat", "--duration", "1s", "--streams", "1", "--server-port", "5301",
                        "--direction", "reverse"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "goodput" in r.stdout and "CPU iperf3 client" in r.stdout
    assert _state() == before


@needs_root
@needs_iperf3
def test_tcp_takes_knobs_and_monitors_the_run(tmp_path):
    """--knob sets a tuning knob for the run and restores it; --monitor samples the CPUs during it
    (per-CPU busy and softirq time on the console, the samples in the JSON), as on the methods."""
    before = _state()
    r = subprocess.run([*NETRIG, "tcp", "--testbed", "router", "--duration", "1s", "--streams", "1",
                        "--knob", "dut.features.gro=off", "--monitor", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "monitor (" in r.stdout and "cpu0: busy " in r.stdout and "softirq" in r.stdout, r.stdout
    doc = json.loads((tmp_path / "tcp.json").read_text())
    assert doc["knobs"]["requested"] == {"dut": {"features": {"gro": "off"}}} and doc["knobs"]["restored"] is True
    assert doc["monitor"]["samples"] and set(doc["monitor"]["summary"]["per_cpu"]) >= {"cpu0"}
    assert _state() == before


@pytest.mark.parametrize("argv,field", [
    (["--streams", "0"], "--streams"), (["--duration", "0s"], "--duration"), (["--duration", "1e99s"], "--duration"),
    (["--server-port", "0"], "--server-port"), (["--mss", "0"], "--mss"), (["--interval", "x"], "--interval"),
    (["--testbed-option", "nonsense=1"], "--testbed-option"), (["--testbed-option", "tester_stack=false"], "tester_stack"),
    (["--knob", "gro=off"], "--knob"), (["--knob", "dut.features.nosuchfeature=off"], "--knob dut.features"),
    (["--line-rate", "fast"], "--line-rate"), (["--line-rate", "0"], "--line-rate"),
])
def test_bad_input_is_one_line_naming_the_option(argv, field):
    r = subprocess.run([*NETRIG, "tcp", "--testbed", "router", *argv], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in r.stderr, r.stderr


def test_an_unknown_testbed_is_one_line():
    r = subprocess.run([*NETRIG, "tcp", "--testbed", "nosuchthing"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--testbed" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_goodput_is_a_share_of_the_line_rate_per_direction():
    """With a line rate (--line-rate, or the speed port tx reports) each direction's goodput is also
    a share of it; without one nothing is said of it."""
    from types import SimpleNamespace

    from netrig.cli.tcp import line_rate_line, of_line_rate
    from netrig.model import LineRate

    r = SimpleNamespace(goodput_by_direction={"forward": 9.4e9, "reverse": 4.7e9})
    line = LineRate(10e9, "config")
    assert of_line_rate(r, line)["goodput_pct_line_rate"] == {"forward": pytest.approx(94.0),
                                                              "reverse": pytest.approx(47.0)}
    assert "goodput of the line rate 10 Gbit/s (configured): forward 94.0 %, reverse 47.0 %" in line_rate_line(r, line)
    assert of_line_rate(r, None) == {} and line_rate_line(r, None) == ""
