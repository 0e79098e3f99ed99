"""The raw netlink readers of ``netrig.testbed.links`` read what ``ip -j`` reads, without pyroute2:
a trial's health check of its test bed must not pay pyroute2's import."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import needs_root, sh, veth_pair

from netrig.testbed.links import read_addrs, read_links, read_routes

ROOT = Path(__file__).resolve().parents[2]


def ip_json(ns: str, *argv: str) -> list[dict]:
    return json.loads(sh("ip", "-j", *argv, ns=ns))


@needs_root
def test_links_addresses_and_routes_are_those_ip_reads():
    with veth_pair("l") as (ns, ifname, _, _):
        sh("ip", "link", "add", "nrtbr", "type", "bridge", ns=ns)
        sh("ip", "link", "set", ifname, "master", "nrtbr", "mtu", "1400", ns=ns)
        sh("ip", "addr", "add", "198.18.7.1/24", "dev", "nrtbr", ns=ns)
        sh("ip", "link", "set", "nrtbr", "up", ns=ns)
        sh("ip", "route", "add", "198.19.0.0/16", "via", "198.18.7.2", ns=ns)
        links = read_links(ns)
        for want in ip_json(ns, "-d", "link"):
            got = links[want["ifname"]]
            assert (got.index, got.up, got.carrier, got.operstate, got.mtu, got.mac) == \
                (want["ifindex"], "UP" in want["flags"], "LOWER_UP" in want["flags"], want["operstate"], want["mtu"],
                 want["address"]), (got, want)
            assert got.kind == want.get("linkinfo", {}).get("info_kind"), (got, want)
            assert got.master == (links[want["master"]].index if "master" in want else None)
            assert got.stats is not None and got.stats["rx_packets"] >= 0
        assert sorted((a.index, a.address, a.prefixlen) for a in read_addrs(ns)) == sorted(
            (i["ifindex"], a["local"], a["prefixlen"]) for i in ip_json(ns, "addr") for a in i["addr_info"])
        routes = {(r.dst, r.gateway) for r in read_routes(ns)}
        assert {("198.18.7.0/24", None), ("198.19.0.0/16", "198.18.7.2")} <= routes, routes


@needs_root
def test_reading_a_namespace_does_not_load_pyroute2():
    with veth_pair("p") as (ns, _, _, _):
        code = ("import sys; from netrig.testbed.links import read_addrs, read_links, read_routes; "
                f"read_links({ns!r}); read_addrs({ns!r}); read_routes({ns!r}); "
                "print(sorted(m for m in sys.modules if m.startswith('pyroute2')))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={"PYTHONPATH": str(ROOT / "python")}, timeout=60).stdout
        assert out.strip() == "[]", out
