"""Every topology really carries frames across its DUT (raw-socket probe, counted at the receiver)."""
from __future__ import annotations

import json
import subprocess
import time

import pytest
from testbed_helpers import N, cross, needs_root

from netrig.errors import InterfaceError
from netrig.testbed import Testbed, nft
from netrig.testbed.nsthread import sysctl_in
from netrig.testbed.probe import Arrivals, Receiver, link_stats, send_frames, udp_frame

pytestmark = [pytest.mark.root, needs_root]
def test_loopback_both_directions(tb_ids):
    with Testbed.create("loopback") as tb:
        tb_ids.append(tb.id)
        assert [p.name for p in tb.ports] == ["tx", "rx"]
        assert tb.port("tx").peer_mac == tb.port("rx").mac
        assert cross(tb).count == N
        assert cross(tb, tx="rx", rx="tx").count == N


def test_bridge_switches_and_learned_macs(tb_ids):
    with Testbed.create("bridge") as tb:
        tb_ids.append(tb.id)
        rcv = cross(tb)
        assert rcv.count == N
        assert rcv.frames[0]["ttl"] == 64  # L2: not routed
        fdb = subprocess.run(["bridge", "-n", tb.dut_netns, "fdb", "show", "br", tb.name("br")],
                             capture_output=True, text=True).stdout
        for p in tb.ports:
            assert p.mac in fdb, f"bridge did not learn {p.name} {p.mac}:\n{fdb}"
        # the other tester port must not see frames flooded back to the sender
        assert cross(tb, tx="rx", rx="tx").count == N


@pytest.mark.parametrize("family", [4, 6])
def test_router_forwards(tb_ids, family):
    with Testbed.create("router") as tb:
        tb_ids.append(tb.id)
        tx, rx = tb.port("tx"), tb.port("rx")
        desc = tb.describe()
        dut_ifs = {i["ifname"]: i for i in desc["namespaces"][tb.dut_netns]["interfaces"]}
        # the MAC the tester sends to is the DUT's, read from the kernel
        assert tx.peer_mac == dut_ifs[tb.name("dtx")]["mac"]
        assert rx.peer_mac == dut_ifs[tb.name("drx")]["mac"]
        rcv = cross(tb, family=family)
        assert rcv.count == N
        f = rcv.frames[0]
        assert f["ttl"] == 63, "not routed (TTL/hop limit not decremented)"
        assert f["src_mac"] == rx.peer_mac and f["dst_mac"] == rx.mac
        assert f["src_ip"] == (tx.ipv4 if family == 4 else tx.ipv6)
        before = link_stats(tb.dut_netns, tb.name("drx"))["tx_packets"]
        assert before >= N
        # routed destination behind the receiver (multi-flow destinations)
        dst = "198.19.7.9" if family == 4 else "2001:2:0:100::9"
        assert cross(tb, family=family, dst_ip=dst).count == N


def test_router_description_is_json_and_complete(tb_ids):
    t0 = time.monotonic()
    with Testbed.create("router") as tb:
        build_s = time.monotonic() - t0
        tb_ids.append(tb.id)
        d = json.loads(json.dumps(tb.describe()))
        dut = d["namespaces"][tb.dut_netns]
        assert {r["dst"] for r in dut["routes"]} >= {"198.19.0.0/16", "198.18.0.0/16", "2001:2:0:100::/56"}
        assert {n["ip"] for n in dut["neighbours"]} >= {"198.18.0.2", "198.19.0.2", "2001:2::2", "2001:2:0:1::2"}
        assert dut["sysctls"]["net.ipv4.ip_forward"] == "1"
        assert d["placement"]["mode"] == "wire"
        t1 = time.monotonic()
    assert build_s < 2.0 and time.monotonic() - t1 < 2.0


@pytest.mark.parametrize("mode, expect4, expect6", [("masquerade", "198.19.0.1", "2001:2:0:1::1"),
                                                    ("static", "198.19.0.100", "2001:2:0:1::100")])
def test_nat_rewrites_source(tb_ids, mode, expect4, expect6):
    with Testbed.create("nat", nat=mode) as tb:
        tb_ids.append(tb.id)
        assert (tb.expected_rx_src_ip, tb.expected_rx_src_ipv6) == (expect4, expect6)
        r4 = cross(tb, family=4)
        assert r4.count == N and {f["src_ip"] for f in r4.frames} == {expect4}
        r6 = cross(tb, family=6)
        assert r6.count == N and {f["src_ip"] for f in r6.frames} == {expect6}
        assert int(sysctl_in(tb.dut_netns, "net.netfilter.nf_conntrack_count")) >= 1


def test_nat_conntrack_max_is_set_and_restored(tb_ids):
    old = sysctl_in(None, "net.netfilter.nf_conntrack_max")
    with Testbed.create("nat", conntrack_max=12345) as tb:
        tb_ids.append(tb.id)
        assert sysctl_in(None, "net.netfilter.nf_conntrack_max") == "12345"
        assert tb.describe()["global_sysctls"]["net.netfilter.nf_conntrack_max"]["old"] == old
    assert sysctl_in(None, "net.netfilter.nf_conntrack_max") == old


def _rule_packets(tb, needle):
    return sum(r.packets or 0 for r in nft.counters(tb.dut_netns, tb.id) if needle in r.text)


def test_firewall_drops_what_it_drops_and_logs(tb_ids):
    with Testbed.create("firewall", rules=50, log=True) as tb:
        tb_ids.append(tb.id)
        assert cross(tb).count == N
        # filler rule 3 drops UDP to 198.19.254.1 port 3
        assert cross(tb, dst_ip=nft.FILLER_DST_IP, dst_port=3, n=200).count == 0
        rules = nft.counters(tb.dut_netns, tb.id)
        dropped = [r for r in rules if '"drop"' in r.text and r.packets]
        assert len(dropped) == 1 and dropped[0].packets == 200
        accepted = [r for r in rules if '"log"' in r.text and r.packets]
        assert accepted and accepted[0].packets == N
        assert len([r for r in rules if r.chain == "forward"]) == 51  # 50 rules, accept = v4 + v6 lines
        log = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
        assert f"netrig_{tb.id} accept: " in log, "nft log line not in the kernel log"


@pytest.mark.parametrize("mode", ["masquerade", "static"])
def test_fwnat_filters_and_translates(tb_ids, mode):
    with Testbed.create("fwnat", rules=20, nat=mode) as tb:
        tb_ids.append(tb.id)
        assert tb.expected_rx_src_ip == ("198.19.0.100" if mode == "static" else "198.19.0.1")
        for family, src in ((4, tb.expected_rx_src_ip), (6, tb.expected_rx_src_ipv6)):
            rcv = cross(tb, family=family)
            assert rcv.count == N and {f["src_ip"] for f in rcv.frames} == {src}
        # the filler rules still drop: UDP to 198.19.254.1 port 7 is filler rule 7's
        assert cross(tb, dst_ip=nft.FILLER_DST_IP, dst_port=7, n=100).count == 0
        rules = nft.counters(tb.dut_netns, tb.id)
        dropped = [r for r in rules if '"drop"' in r.text and r.packets]
        assert len(dropped) == 1 and dropped[0].packets == 100
        snat = [r for r in rules if r.chain == "postrouting" and r.packets]
        # SNAT is decided per new conntrack entry: a flow's packets reach the rule until its entry is
        # confirmed, i.e. its first receive batch (the wire's ring thread takes 8 frames at a time,
        # as a NIC's NAPI poll does), never the 500 frames that crossed
        assert len(snat) == 2 and all(1 <= r.packets <= 8 for r in snat), snat
        assert len([r for r in rules if r.chain == "forward"]) == 21  # 20 rules, accept = v4 + v6 lines
        assert int(sysctl_in(tb.dut_netns, "net.netfilter.nf_conntrack_count")) >= 2


def _kmsg_lines(prefix: str) -> int:
    return subprocess.run(["dmesg"], capture_output=True, text=True).stdout.count(prefix)


def test_acl_log_logs_every_accepted_packet(tb_ids):
    with Testbed.create("acl", rules=5, log=True) as tb:
        tb_ids.append(tb.id)
        prefix = f"netrig_{tb.id} accept: "
        assert cross(tb, n=100).count == 100
        assert _kmsg_lines(prefix) == 100, "one kernel log line per accepted packet (no rate limit)"
        assert cross(tb, dst_ip=nft.FILLER_DST_IP, dst_port=2, n=50).count == 0
        assert _kmsg_lines(prefix) == 100, "dropped packets are not logged"


def test_acl_is_stateless_and_filters(tb_ids):
    with Testbed.create("acl", rules=20) as tb:
        tb_ids.append(tb.id)
        assert cross(tb).count == N
        assert cross(tb, dst_ip=nft.FILLER_DST_IP, dst_port=5, n=100).count == 0
        assert int(sysctl_in(tb.dut_netns, "net.netfilter.nf_conntrack_count")) == 0


def _token_bucket_passes(times: list[float], rate: float, burst: int) -> int:
    """How many of frames sent at ``times`` an nftables ``limit rate over R/second burst B packets``
    passes: a bucket of B packets, full at the start, refilled at R per second, one token a frame
    (net/netfilter/nft_limit.c)."""
    tokens, last, passed = float(burst), times[0], 0
    for t in times:
        tokens = min(float(burst), tokens + (t - last) * rate)
        last = t
        if tokens >= 1.0:
            tokens -= 1.0
            passed += 1
    return passed


@pytest.mark.slow
def test_policer_passes_what_a_token_bucket_of_the_cap_passes(tb_ids):
    """The policer passes what a token bucket of the cap passes of the frames as they reached it.
    A Python sender stalls now and then (the CI failure of 2026-11-25: 3772 of 4000 pps over a 2-s
    window), and the DUT's CPU is stopped now and then too: the wire hands the DUT the frames sent
    meanwhile all at once, and a bucket of a few frames passes few of a bunch (a clean clone under
    7 % steal: 11 586 passed where the sender's times said 11 976). Neither is the policer's doing,
    so the test judges it against the times the DUT's stack took each frame (a packet tap on its
    ingress, in the same pass as the policer), not against cap × time or the send times.
    Measured: the model within 10 frames of 11 607–11 989 passed over four runs, one with both
    CPUs busy; a cap 5 % off (3800 or 4200 pps) misses the 1 % tolerance by far."""
    cap = 4000
    with Testbed.create("policer", cap=f"{cap}pps") as tb:
        tb_ids.append(tb.id)
        burst = tb.state.policer.burst
        tx, rx = tb.port("tx"), tb.port("rx")
        frame = udp_frame(**tb.stream_defaults())
        with Arrivals(tb.dut_netns, tb.name("dtx")) as seen:
            sent = send_frames(tx.netns, tx.ifname, frame, 48_000, 16_000)  # 3 s at 4x the cap
            time.sleep(0.2)
        # the policer's own accept counter: the receiving link also counts the DUT's own IPv6
        # chatter (a CI run had 2 such frames above the bound)
        passed = _rule_packets(tb, '"accept"')
        assert link_stats(rx.netns, rx.ifname)["rx_packets"] >= passed, "accepted frames got lost"
        assert sent >= 40_000, f"the probe sender fell short ({sent}); the machine is overloaded"
        assert seen.dropped == 0 and len(seen.times) >= 40_000, \
            f"the DUT's ingress tap kept {len(seen.times)} frames and dropped {seen.dropped}"
        times = seen.times
        span = times[-1] - times[0]
        expected = _token_bucket_passes(times, cap, burst)
        assert expected >= 0.5 * cap * span, \
            f"the DUT took less than the cap most of the time ({expected} of {cap * span:.0f})"
        # whatever the sender did, no more than the cap over the run plus one bucket
        assert passed <= cap * span + burst + 2, f"passed {passed} in {span:.2f} s at cap {cap} pps"
        assert abs(passed - expected) <= 0.01 * expected, \
            f"policer passed {passed} frames, a {cap} pps bucket of {burst} passes {expected} " \
            f"({passed / span:.0f} against {expected / span:.0f} pps)"


def test_fourport_pairs_are_independent(tb_ids):
    with Testbed.create("fourport") as tb:
        tb_ids.append(tb.id)
        assert [p.name for p in tb.ports] == ["p0", "p1", "p2", "p3"]
        assert tb.stream_defaults()["dst_mac"] == tb.port("p1").mac
        p3 = tb.port("p3")
        with Receiver(p3.netns, p3.ifname) as other:
            assert cross(tb, tx="p0", rx="p1").count == N
        assert other.count == 0
        assert cross(tb, tx="p2", rx="p3").count == N


def test_external_checks_interfaces(tb_ids):
    with pytest.raises(InterfaceError, match="^ifaces: interface nrnosuch0 does not exist"), \
            Testbed.create("external", ifaces=("nrnosuch0",)):
        pass
    with Testbed.create("external", ifaces=("lo",)) as tb:
        tb_ids.append(tb.id)
        assert tb.port("p0").ifname == "lo" and tb.port("p0").netns is None
        assert tb.describe()["namespaces"]["(host)"]["interfaces"]
    assert subprocess.run(["ip", "link", "show", "lo"], capture_output=True).returncode == 0


def test_tester_stack_default_routes_are_healthy_and_repaired(tb_ids):
    """A test bed with tester stacks is healthy as built (its default routes were read as missing,
    so every tcp and study trial logged "test bed repaired"); a default route deleted is named and
    restored."""
    with Testbed.create("router", tester_stack=True) as tb:
        tb_ids.append(tb.id)
        assert tb.health() == []
        assert tb.repair() == []
        tx_ns = tb.port("tx").netns
        subprocess.run(["ip", "-n", tx_ns, "route", "del", "default"], check=True)
        assert tb.health() == [f"route 0.0.0.0/0 via 198.18.0.1 (netns {tx_ns}) is missing"]
        assert tb.repair() == [f"route 0.0.0.0/0 via 198.18.0.1 (netns {tx_ns})"]
        assert tb.health() == []


def test_a_link_whose_peer_just_went_down_has_no_carrier_at_once(tb_ids):
    """The operational state follows a carrier through linkwatch, at most once a second for a veth
    whose ends share an index in their namespaces: read just after its peer goes down, a link can
    still say ``UP``. The health check reads the carrier as it is now."""
    with Testbed.create("loopback") as tb:
        tb_ids.append(tb.id)
        tx, rx = tb.port("tx"), tb.port("rx")
        subprocess.run(["ip", "-n", rx.netns, "link", "set", rx.ifname, "down"], check=True)
        time.sleep(2.1)  # the down applied within a second; the next event runs at once
        subprocess.run(["ip", "-n", rx.netns, "link", "set", rx.ifname, "up"], check=True)
        time.sleep(0.05)  # applied; the next run waits a second
        subprocess.run(["ip", "-n", rx.netns, "link", "set", rx.ifname, "down"], check=True)
        problems = tb.health()
        assert f"link {tx.ifname} (netns {tx.netns}) has no carrier (no carrier: is its peer down?)" in problems, problems
