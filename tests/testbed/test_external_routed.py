"""The external test bed on a routed DUT (issue 43): the tester's ports get their addresses and
gateways, the DUT's MACs are resolved by ARP/ND, and the DUT resolves the tester's the same way.

A "real DUT" here is a Linux router in a namespace of the test's own, joined to two interfaces of
the host's namespace by veth pairs: what the external test bed sees of two NICs cabled to a router.
It has no permanent neighbour; what it learns it learns by ARP and ND from the tester's kernel."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid

import pytest
from tests.conftest import needs_root, sh
from tests.host_steal import steady_trial

from netrig.testbed import nft
from netrig.testbed import state as st

pytestmark = [needs_root, pytest.mark.root]

NETRIG = [sys.executable, "-m", "netrig.cli.main"]
#: The DUT's addresses on its two interfaces, and the tester's.
DUT = (("198.18.0.1/24", "2001:2::1/64"), ("198.19.0.1/24", "2001:2:0:1::1/64"))
TESTER = ("198.18.0.2/24+2001:2::2/64", "198.19.0.2/24+2001:2:0:1::2/64")
GATEWAYS = ("198.18.0.1+2001:2::1", "198.19.0.1+2001:2:0:1::1")


@contextlib.contextmanager
def routed_dut():
    """A router namespace whose two interfaces' peers are in the host's namespace: (netns, host
    interfaces, the DUT's interfaces' MACs)."""
    uid = uuid.uuid4().hex[:5]
    ns, host = f"nrxdut{uid}", (f"nrxa{uid}", f"nrxb{uid}")
    sh("ip", "netns", "add", ns)
    try:
        for k, (h, (v4, v6)) in enumerate(zip(host, DUT)):
            sh("ip", "link", "add", h, "type", "veth", "peer", "name", f"d{k}", "netns", ns)
            sh("sysctl", "-qw", f"net.ipv6.conf.{h}.accept_ra=0")
            sh("ip", "link", "set", h, "up")
            sh("ip", "addr", "add", v4, "dev", f"d{k}", ns=ns)
            sh("ip", "addr", "add", v6, "dev", f"d{k}", "nodad", ns=ns)
            sh("ip", "link", "set", f"d{k}", "up", ns=ns)
        sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=ns)
        sh("sysctl", "-qw", "net.ipv6.conf.all.forwarding=1", ns=ns)
        macs = [json.loads(sh("ip", "-j", "link", "show", f"d{k}", ns=ns))[0]["address"] for k in (0, 1)]
        yield ns, host, macs
    finally:
        for h in host:
            sh("ip", "link", "del", h, check=False)
        sh("ip", "netns", "del", ns, check=False)


def netrig(*args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, *NETRIG, *args], capture_output=True, text=True, timeout=120)


def host_addresses(ifname: str) -> set[str]:
    return {f"{a['local']}/{a['prefixlen']}" for i in json.loads(sh("ip", "-j", "addr", "show", "dev", ifname))
            for a in i["addr_info"] if a.get("scope") == "global"}


def test_a_routed_dut_resolves_the_tester_and_the_tester_the_dut_ipv4_and_ipv6():
    with routed_dut() as (ns, host, dut_macs):
        up = netrig("testbed", "up", "external", "--ifaces", ",".join(host),
                    "--testbed-option", f"addresses={','.join(TESTER)}",
                    "--testbed-option", f"gateways={','.join(GATEWAYS)}")
        assert up.returncode == 0, up.stderr
        tb_id = up.stdout.split()[1]
        try:
            state = st.read_state(tb_id)
            tx, rx = state.ports
            # the gateways' MACs, resolved by ARP at the build, are where each port sends
            assert (tx.peer_mac, rx.peer_mac) == tuple(dut_macs)
            assert (tx.ipv4, rx.ipv4, tx.ipv6, rx.ipv6) == ("198.18.0.2", "198.19.0.2", "2001:2::2", "2001:2:0:1::2")
            assert host_addresses(host[0]) == {"198.18.0.2/24", "2001:2::2/64"}
            before = int(sh("cat", "/sys/class/net/d1/statistics/tx_packets", ns=ns))
            # every CPU is the tester's, whatever the calling process may run on (it was refused:
            # "CPU 1 does not exist (this machine has CPUs 0-0)")
            one = ("taskset", "-c", "0") if os.cpu_count() and os.cpu_count() > 1 else ()
            res = steady_trial(tb_id, "--tx-cpus", str((os.cpu_count() or 1) - 1), prefix=one)["result"]
            assert res["frames_received"] == 20_000 and list(res["tx_cpus"]) == [(os.cpu_count() or 1) - 1]
            assert steady_trial(tb_id, "--family", "6", "--frame-size", "128")["result"]["frames_received"] == 20_000
            assert int(sh("cat", "/sys/class/net/d1/statistics/tx_packets", ns=ns)) - before >= 40_000
            # the DUT learnt the tester's MACs by ARP and ND: none of its entries is permanent
            neigh = json.loads(sh("ip", "-j", "neigh", "show", ns=ns))
            learnt = {n["dst"]: n.get("lladdr") for n in neigh if "PERMANENT" not in n.get("state", [])}
            macs = {p.ipv4: p.mac for p in (tx, rx)} | {p.ipv6: p.mac for p in (tx, rx)}
            assert {a: learnt.get(a) for a in macs} == macs, neigh
            assert not [n for n in neigh if "PERMANENT" in n.get("state", [])]
        finally:
            down = netrig("testbed", "down", tb_id)
        assert down.returncode == 0, down.stderr
        assert host_addresses(host[0]) == host_addresses(host[1]) == set()
        assert nft.tester_quiet_table(tb_id) not in nft_tables()


def nft_tables() -> set[str]:
    return {t["table"]["name"] for t in json.loads(sh("nft", "-j", "list", "tables"))["nftables"] if "table" in t}


def test_a_gateway_that_never_answers_fails_the_build_naming_it_and_leaves_nothing():
    with routed_dut() as (_, host, _macs):
        r = netrig("testbed", "up", "external", "--ifaces", ",".join(host),
                   "--testbed-option", f"addresses={','.join(TESTER)}",
                   "--testbed-option", "gateways=198.18.0.9,198.19.0.1")
        assert r.returncode != 0 and "Traceback" not in r.stderr
        assert "198.18.0.9 did not answer ARP/ND on " + host[0] in r.stderr, r.stderr
        assert host_addresses(host[0]) == host_addresses(host[1]) == set()
        assert not {t for t in nft_tables() if t.endswith("_tester")}


@pytest.mark.parametrize("opts,field,words", [
    (("addresses=198.18.0.2/24",), "addresses", "1 given for 2 interfaces"),
    (("addresses=198.18.0.2/24,198.19.0.2/24", "gateways=198.19.0.1,198.19.0.1"), "gateways",
     "198.19.0.1: not another address in 198.18.0.2/24"),
    (("addresses=198.18.0.2/24+198.18.1.2/24,198.19.0.2/24",), "addresses", "two IPv4 entries"),
    (("addresses=198.18.0.300/24,198.19.0.2/24",), "addresses", "not an IPv4 or IPv6 prefix"),
    (("gateways=198.18.0.1,198.19.0.1",), "gateways", "give addresses too"),
])
def test_bad_addresses_are_one_line_naming_the_option(opts, field, words):
    args = [a for o in opts for a in ("--testbed-option", o)]
    r = netrig("testbed", "up", "external", "--ifaces", "lo,lo", *args)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert field in line and words in line, line
