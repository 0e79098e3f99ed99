"""The ``flowtable`` option really offloads flows: after the first packets a flow's packets skip the
forward chain (its ``flow add`` rule stops counting) and conntrack marks the flow ``[OFFLOAD]``;
TTL, NAT and the firewall's drops still hold. On a kernel without flowtables the build fails with one
line naming the option and leaves nothing behind (and the other tests skip saying why)."""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from testbed_helpers import N, cross, needs_root

from netrig.errors import CapabilityError
from netrig.measure.tcp import TcpParams, run_iperf3
from netrig.testbed import Testbed, nft
from netrig.testbed.probe import link_stats

pytestmark = [pytest.mark.root, needs_root]


@contextmanager
def flowtable_bed(tb_ids: list[str], topology: str, **opts) -> Iterator[Testbed]:
    """A test bed with ``flowtable=True``; the test skips (naming what is missing) on a kernel without
    flowtables."""
    tb = Testbed.create(topology, flowtable=True, **opts)
    try:
        tb.__enter__()
    except CapabilityError as e:
        tb_ids.append(tb.id)
        pytest.skip(str(e))
    tb_ids.append(tb.id)
    try:
        yield tb
    finally:
        tb.__exit__(None, None, None)


def _offloaded(tb: Testbed) -> list[str]:
    return [line for line in nft.conntrack_entries(tb.dut_netns) if "[OFFLOAD]" in line]


def _crossed(tb: Testbed, n: int = N, **kw) -> tuple[int, list[dict]]:
    """Send n probe frames tx→rx; return how many the rx interface received and the first few frames.
    Counted by the interface: on a slow machine (an emulated VM) the fast path outruns the Python
    receiver, which then stops with frames still queued in its socket."""
    rx = tb.port("rx")
    before = link_stats(rx.netns, rx.ifname)["rx_packets"]
    frames = cross(tb, n=n, **kw).frames
    return link_stats(rx.netns, rx.ifname)["rx_packets"] - before, frames


def test_a_kernel_without_flowtables_is_one_line_and_leaves_nothing(tb_ids):
    tb = Testbed.create("router", flowtable=True)
    try:
        with tb:
            pass
    except CapabilityError as e:
        tb_ids.append(tb.id)
        assert str(e).startswith("flowtable: this kernel cannot create an nftables flowtable")
        assert "\n" not in str(e)
        return
    tb_ids.append(tb.id)
    pytest.skip("this kernel has flowtables (the offload tests below run)")


@pytest.mark.parametrize("family", [4, 6])
def test_one_way_udp_is_offloaded_from_its_second_packet(tb_ids, family):
    with flowtable_bed(tb_ids, "router") as tb:
        assert tb.describe()["flowtable"]["devices"] == [tb.name("dtx"), tb.name("drx")]
        assert nft.slow_path_packets(tb.dut_netns, tb.id) == 0
        received, frames = _crossed(tb, family=family)
        assert received == N
        # packet 1: conntrack entry not yet confirmed, not offloaded; packet 2: offloaded; then the fast path
        assert nft.slow_path_packets(tb.dut_netns, tb.id) == 2
        offloaded = _offloaded(tb)
        assert len(offloaded) == 1 and "[UNREPLIED]" in offloaded[0], nft.conntrack_entries(tb.dut_netns)
        received, frames = _crossed(tb, family=family)
        assert received == N and frames and {f["ttl"] for f in frames} == {63}, "not routed on the fast path"
        assert nft.slow_path_packets(tb.dut_netns, tb.id) == 2, "an offloaded flow went back to the slow path"


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed (make setup)")
def test_tcp_takes_the_fast_path_once_established(tb_ids):
    with flowtable_bed(tb_ids, "router", tester_stack=True) as tb:
        tx, rx = tb.port("tx"), tb.port("rx")
        before = link_stats(tb.dut_netns, tb.name("drx"))["tx_packets"]
        r = run_iperf3(tx.netns, rx.netns, rx.ipv4, TcpParams(streams=1, duration_s=1, port=5311))
        forwarded = link_stats(tb.dut_netns, tb.name("drx"))["tx_packets"] - before
        slow = nft.slow_path_packets(tb.dut_netns, tb.id)
        # veth carries GSO super-packets: a second of TCP is a few thousand of them, not a million
        assert r.goodput_bps > 0 and forwarded > 200, (r.goodput_bps, forwarded)
        # the handshakes and FINs of iperf3's control and data connections; all the data on the fast path
        assert slow is not None and slow < min(100, forwarded / 10), \
            f"{slow} of {forwarded} forwarded packets took the slow path"


def test_firewall_drops_are_never_offloaded_and_nat_holds_on_the_fast_path(tb_ids):
    with flowtable_bed(tb_ids, "fwnat", rules=10, nat="static") as tb:
        received, frames = _crossed(tb)
        assert received == N and {f["src_ip"] for f in frames} == {tb.expected_rx_src_ip}
        assert _crossed(tb, dst_ip=nft.FILLER_DST_IP, dst_port=3, n=100)[0] == 0
        rules = nft.counters(tb.dut_netns, tb.id)
        dropped = [r for r in rules if '"drop"' in r.text and r.packets]
        assert len(dropped) == 1 and dropped[0].packets == 100, "a dropped flow was offloaded"
        accepted = [r for r in rules if '"accept"' in r.text and "198.18.0.0" in r.text]
        assert accepted[0].packets == 2, "the accept rule saw more than the packets before the offload"
        assert len(_offloaded(tb)) == 1


def test_acl_with_flowtable_tracks_flows(tb_ids):
    with flowtable_bed(tb_ids, "acl", rules=5) as tb:
        assert _crossed(tb)[0] == N
        assert _crossed(tb, dst_ip=nft.FILLER_DST_IP, dst_port=2, n=50)[0] == 0
        assert nft.slow_path_packets(tb.dut_netns, tb.id) == 2 + 50
        assert len(_offloaded(tb)) == 1
        assert any("conntrack is on" in n for n in tb.describe()["notes"])
