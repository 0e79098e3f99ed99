"""Environment capture: complete, JSON-able, and never raising on a missing tool."""
from __future__ import annotations

import json
import os

import pytest

from netrig.environment import capture, parse_ethtool


def test_capture_host_is_json_and_has_the_basics():
    env = capture(interfaces=["lo"])
    json.dumps(env)
    assert env["kernel"]["release"] and env["cpu"]["count"] >= 1 and env["memory"]["MemTotal"] > 0
    assert env["netrig"]["version"] and env["netrig"]["build_profile"]
    assert "net.core.rmem_max" in env["sysctls"]
    lo = env["interfaces"][0]
    assert lo["ifname"] == "lo" and "sysfs" in lo


def test_missing_ethtool_is_recorded_not_raised(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    env = capture(interfaces=["lo", "nrnosuch0"])
    assert env["interfaces"][0]["driver"] == "unavailable: ethtool not installed"
    assert env["netrig"]["git_commit"].startswith("unavailable") or len(env["netrig"]["git_commit"]) == 40


def test_parse_ethtool_rings_and_fallback():
    text = ("Ring parameters for x:\nPre-set maximums:\nRX:\t\t4096\nTX:\t\t4096\n"
            "Current hardware settings:\nRX:\t\t256\nTX:\t\t256\n")
    assert parse_ethtool("-g", text) == {"max": {"RX": 4096, "TX": 4096}, "current": {"RX": 256, "TX": 256}}
    assert parse_ethtool("-k", "unavailable: no") == "unavailable: no"


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: builds network namespaces and veth pairs")
def test_capture_with_testbed():
    from netrig.testbed import Testbed

    with Testbed.create("router", dut_cpus="1", dut_placement="threaded-napi") as tb:
        env = capture(testbed=tb)
        json.dumps(env)
        names = {(i["netns"], i["ifname"]) for i in env["interfaces"]}
        assert (tb.dut_netns, tb.name("dtx")) in names
        dtx = next(i for i in env["interfaces"] if i["ifname"] == tb.name("dtx"))
        assert dtx["driver"]["driver"] == "veth" and dtx["sysfs"]["threaded"] == "1"
        assert env["testbed"]["placement"]["mode"] == "threaded-napi"
        assert env["testbed_sysctls"][tb.dut_netns]["net.ipv4.ip_forward"] == "1"
