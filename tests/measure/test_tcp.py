"""iperf3 really runs between two namespaces (netrig.measure.tcp): goodput, streams, intervals and
the CPU each process used; a refused or blocked port, a missing tool and bad parameters are one
line each; no iperf3 process outlives a run."""
from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from tests.conftest import needs_root, sh, veth_pair

from netrig.errors import ConfigError, ToolError
from netrig.measure import tcp
from netrig.measure.tcp import TcpParams, run_iperf3

needs_iperf3 = pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed (make setup)")
A, B = "198.18.0.1", "198.18.0.2"


def _addressed(ns_a: str, if_a: str, ns_b: str, if_b: str) -> None:
    sh("ip", "addr", "add", f"{A}/24", "dev", if_a, ns=ns_a)
    sh("ip", "addr", "add", f"{B}/24", "dev", if_b, ns=ns_b)
    sh("ip", "link", "set", "lo", "up", ns=ns_a)
    sh("ip", "link", "set", "lo", "up", ns=ns_b)


def _iperf3_running(ns: str) -> bool:
    return subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.strip() != ""


@needs_root
@needs_iperf3
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidir"])
def test_iperf3_measures_goodput_streams_and_cpu(direction):
    with veth_pair("tc") as (ns_a, if_a, ns_b, if_b):
        _addressed(ns_a, if_a, ns_b, if_b)
        r = run_iperf3(ns_a, ns_b, B, TcpParams(streams=3, duration_s=2, direction=direction, interval_s=0.5))
        assert r.goodput_bps > 1e8, r.to_dict()  # a veth pair carries far more than 100 Mbit/s
        assert set(r.goodput_by_direction) == ({"forward", "reverse"} if direction == "bidir" else {direction})
        assert all(v > 0 for v in r.goodput_by_direction.values())
        assert len(r.streams) == (6 if direction == "bidir" else 3)
        assert all(s.goodput_bps > 0 for s in r.streams)
        assert 3 <= len(r.intervals) <= 5 and all(i.goodput_bps > 0 for i in r.intervals)
        assert [p.name for p in r.processes] == ["iperf3 client", "iperf3 server"]
        assert all(p.total_s > 0.01 for p in r.processes), r.processes  # both moved data for 2 s
        assert r.cpu_s_per_gbit() is not None and r.cpu_s_per_gbit() > 0
        assert r.retransmits is not None and "iperf" in r.tool_version
        assert not _iperf3_running(ns_a) and not _iperf3_running(ns_b)


@needs_root
@needs_iperf3
@pytest.mark.parametrize("verdict,expect", [("reject with tcp reset", "connection refused"),
                                            ("drop", "does not pass TCP")])
def test_a_dut_that_blocks_tcp_is_one_line_naming_the_port(verdict, expect):
    with veth_pair("tb") as (ns_a, if_a, ns_b, if_b):
        _addressed(ns_a, if_a, ns_b, if_b)
        table = f"table inet t {{ chain in {{ type filter hook input priority 0; tcp dport 5299 {verdict}; }}; }}"
        subprocess.run(["ip", "netns", "exec", ns_b, "nft", "-f", "-"], input=table, text=True, check=True)
        t0 = time.monotonic()
        with pytest.raises(ToolError, match=f"iperf3 to {B} port 5299: .*{expect}") as e:
            run_iperf3(ns_a, ns_b, B, TcpParams(streams=1, duration_s=1, port=5299))
        assert "\n" not in str(e.value)
        assert time.monotonic() - t0 < tcp.CONNECT_TIMEOUT_S + 8
        assert not _iperf3_running(ns_a) and not _iperf3_running(ns_b)


@needs_root
@needs_iperf3
def test_a_server_address_not_in_the_namespace_is_one_line():
    with veth_pair("ta") as (ns_a, if_a, ns_b, if_b):
        _addressed(ns_a, if_a, ns_b, if_b)
        with pytest.raises(ToolError, match="iperf3 server on 198.18.0.9 port 5201 did not start"):
            run_iperf3(ns_a, ns_b, "198.18.0.9", TcpParams(streams=1, duration_s=1))
        assert not _iperf3_running(ns_b)


def test_a_missing_tool_names_it_and_the_remedy(monkeypatch):
    monkeypatch.setattr(tcp.shutil, "which", lambda name: None)
    with pytest.raises(ToolError, match=r"iperf3 is not installed: install it \(apt install iperf3"):
        run_iperf3(None, None, "127.0.0.1", TcpParams(duration_s=1))


@pytest.mark.parametrize("kw,field", [({"streams": 0}, "streams"), ({"streams": True}, "streams"),
                                      ({"duration_s": float("nan")}, "duration_s"), ({"duration_s": 1e9}, "duration_s"),
                                      ({"direction": "up"}, "direction"), ({"port": 70000}, "port"),
                                      ({"mss": 0}, "mss"), ({"window_bytes": 1.5}, "window_bytes")])
def test_bad_parameters_name_the_field(kw, field):
    with pytest.raises(ConfigError, match=field):
        TcpParams(**kw)


def test_a_bad_address_names_the_field():
    with pytest.raises(ConfigError, match="server_addr"):
        run_iperf3(None, None, "not an address", TcpParams(duration_s=1))
