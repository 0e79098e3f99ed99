"""Streams beyond UDP on a real veth pair: TCP, ICMP/ICMPv6 echo, raw L2, 802.1Q and QinQ. For
each, every frame sent is counted by netrig's receiver in its flow, and a raw packet socket in the
receiving namespace (independent of netrig's receive path) sees frames of the configured protocol
on the wire: IP protocol, TCP flags and checksums, ICMP type, EtherType, VLAN tags."""
from __future__ import annotations

import json
import struct
import subprocess
import sys
import time

import pytest
from tests.conftest import needs_root, veth_pair

import netrig

pytestmark = [needs_root, pytest.mark.root]

#: Runs in the receiving namespace: captures `count` frames on `ifname` with an AF_PACKET socket and
#: prints them as JSON, with the VLAN tag the kernel moved into the packet's metadata put back.
CAPTURE = r"""
import json, socket, struct, sys, time
ifname, count = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(263, 8, 1)  # SOL_PACKET, PACKET_AUXDATA
s.bind((ifname, 0))
s.settimeout(0.2)
print("ready", flush=True)
out, end = [], time.time() + 10
while len(out) < count and time.time() < end:
    try:
        data, anc, _, _ = s.recvmsg(4096, 64)
    except socket.timeout:
        continue
    for level, kind, aux in anc:
        if level == 263 and kind == 8:
            status, _, _, _, _, tci, tpid = struct.unpack("IIIHHHH", aux[:20])
            if status & (1 << 4):
                tpid = tpid if status & (1 << 6) else 0x8100
                data = data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
    if data[12:14] != b"\x88\xb5" or b"NR" in data:  # not a learning frame
        out.append(data.hex())
print(json.dumps(out), flush=True)
"""


def _capture(ns: str, ifname: str, count: int) -> subprocess.Popen:
    p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", CAPTURE, ifname, str(count)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def _captured(p: subprocess.Popen) -> list[bytes]:
    out, _ = p.communicate(timeout=30)
    return [bytes.fromhex(h) for h in json.loads(out.strip().splitlines()[-1])]


def _csum(*parts: bytes) -> int:
    """Ones'-complement sum (0xFFFF over a segment with a valid checksum)."""
    data = b"".join(parts)
    if len(data) % 2:
        data += b"\0"
    acc = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while acc > 0xFFFF:
        acc = (acc & 0xFFFF) + (acc >> 16)
    return acc


def _l3(frame: bytes) -> tuple[list[tuple[int, int]], int, bytes]:
    """(VLAN tags as (tpid, vid) outside in, the inner EtherType, the payload after the tags)."""
    tags, off = [], 12
    while struct.unpack_from("!H", frame, off)[0] in (0x8100, 0x88A8):
        tpid, tci = struct.unpack_from("!HH", frame, off)
        tags.append((tpid, tci & 0x0FFF))
        off += 4
    return tags, struct.unpack_from("!H", frame, off)[0], frame[off + 2:]


def _check_ip(ethertype: int, ip: bytes, protocol: str) -> bytes:
    """Checks the IP header and the transport checksum; returns the transport segment."""
    if ethertype == 0x0800:
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack_from("!H", ip, 2)[0]
        assert _csum(ip[:ihl]) == 0xFFFF, "IPv4 header checksum"
        proto, seg = ip[9], ip[ihl:total]
        pseudo = ip[12:20] + struct.pack("!BBH", 0, proto, len(seg))
    else:
        assert ethertype == 0x86DD
        plen = struct.unpack_from("!H", ip, 4)[0]
        proto, seg = ip[6], ip[40:40 + plen]
        pseudo = ip[8:40] + struct.pack("!IxxxB", len(seg), proto)
    want = {"tcp": 6, "icmp": 1 if ethertype == 0x0800 else 58, "udp": 17}[protocol]
    assert proto == want, f"IP protocol {proto}, expected {want}"
    if proto == 1:
        assert _csum(seg) == 0xFFFF, "ICMPv4 checksum"
    elif proto == 17 and ethertype == 0x0800 and seg[6:8] == b"\0\0":
        pass  # UDP over IPv4 without a checksum (netrig's default)
    else:
        assert _csum(pseudo, seg) == 0xFFFF, f"transport checksum (protocol {proto})"
    return seg


CASES = [
    # protocol, family, vlan, outer_vlan, extra Stream fields, flow ranges
    ("tcp", 4, None, None, {"tcp_flags": "SA", "tcp_seq": 123456}, {"src_ips": 2, "dst_ports": 3}),
    ("tcp", 6, 100, None, {"tcp_flags": "PA"}, {"vlans": 3, "dst_macs": 2}),
    ("icmp", 4, None, None, {}, {"src_ports": 4}),
    ("icmp", 6, 200, 30, {}, {"dst_ips": 2, "vlans": 2}),
    ("raw", 4, None, None, {"ethertype": 0x88B6}, {"src_macs": 3, "dst_macs": 2}),
    ("raw", 4, 300, 40, {}, {"vlans": 4}),
    ("udp", 4, 400, 50, {}, {"vlans": 2, "src_ports": 2}),
]


@pytest.mark.parametrize("protocol,family,vlan,outer,extra,ranges", CASES,
                         ids=[f"{c[0]}-v{c[1]}-{'qinq' if c[3] else 'vlan' if c[2] else 'untagged'}" for c in CASES])
def test_every_protocol_is_sent_counted_per_flow_and_on_the_wire_as_configured(protocol, family, vlan, outer, extra,
                                                                                ranges):
    n = 6_000
    with veth_pair("p") as (ns_a, if_a, ns_b, if_b):
        # af_packet on both ends: AF_XDP's steering program takes UDP only (auto passes it over).
        tx, rx = netrig.Port(if_a, netns=ns_a, io="auto"), netrig.Port(if_b, netns=ns_b, io="auto")
        addrs = ({"src_ip": "198.18.0.2", "dst_ip": "198.19.0.2"} if family == 4
                 else {"src_ip": "2001:2::2", "dst_ip": "2001:2:0:1::2"})
        s = netrig.Stream(frame_size=128, rate_pps=20_000, src_mac=tx.info().mac, dst_mac=rx.info().mac,
                          protocol=protocol, vlan=vlan, outer_vlan=outer, flows=ranges, flow_order="pseudorandom",
                          seed=7, **addrs, **extra)
        nflows = 1
        for k in ranges.values():
            nflows *= k
        cap = _capture(ns_b, if_b, 2 * nflows)
        # A counting test: on this shared machine the sender may be descheduled and its run stretched;
        # the counts must be exact whatever the stretch (pacing is tested elsewhere).
        r = netrig.run_trial(tx, rx, [s], frames=n, drain_s=0.3, max_stretch_pct=1000)
        frames = _captured(cap)
        d = r.to_dict(flows=False)
        assert r.frames_sent == n
        assert r.frames_received == n, d
        assert (r.frames_lost, r.duplicated, r.frames_forged, r.frames_stray) == (0, 0, 0, 0), d
        assert r.valid, r.invalid_reason
        assert len(r.flows) == nflows
        assert all(f.frames_sent == f.frames_received == n // nflows for f in r.flows)
        if protocol != "udp" or outer is not None:
            # AF_XDP's steering program matches only UDP with at most one tag: auto says why it passed it over.
            notes = str(r.ports[1].notes)
            assert "AF_XDP receives only UDP" in notes or "af_xdp" not in notes, notes
        # On the wire, as configured.
        assert len(frames) == 2 * nflows, f"captured {len(frames)}"
        seen_vids, seen_macs = set(), set()
        for f in frames:
            tags, ethertype, payload = _l3(f)
            want_tags = [t for t in ((0x88A8, outer), (0x8100, vlan)) if t[1] is not None]
            assert [t[0] for t in tags] == [t[0] for t in want_tags], tags
            if outer is not None:
                assert tags[0][1] == outer
            if vlan is not None:
                seen_vids.add(tags[-1][1])
            seen_macs.add((f[:6].hex(), f[6:12].hex()))
            if protocol == "raw":
                assert ethertype == extra.get("ethertype", 0x88B5)
                assert payload[:2] == b"NR", "the signature right after the Ethernet header"
                continue
            assert ethertype == (0x0800 if family == 4 else 0x86DD)
            seg = _check_ip(ethertype, payload, protocol)
            if protocol == "tcp":
                flags = {"SA": 0x12, "PA": 0x18}[extra["tcp_flags"]]
                assert seg[13] == flags and seg[12] >> 4 == 5
                assert struct.unpack_from("!I", seg, 4)[0] == extra.get("tcp_seq", 0)
                assert seg[20:22] == b"NR"
            elif protocol == "icmp":
                assert seg[0] == (8 if family == 4 else 128) and seg[1] == 0, "echo request"
                assert seg[8:10] == b"NR"
            else:
                assert seg[8:10] == b"NR"
        if "vlans" in ranges:
            assert seen_vids == set(range(vlan, vlan + ranges["vlans"]))
        macs = ranges.get("src_macs", 1) * ranges.get("dst_macs", 1)
        assert len(seen_macs) == macs


@pytest.mark.slow
def test_template_rates_on_veth():
    """Not an assertion on speed: the frames/s each template reaches at the highest rate on af_packet,
    printed for the record (run with -s)."""
    with veth_pair("r") as (ns_a, if_a, ns_b, if_b):
        tx, rx = netrig.Port(if_a, netns=ns_a, io="af_packet"), netrig.Port(if_b, netns=ns_b, io="af_packet")
        for protocol in ("udp", "tcp", "icmp", "raw"):
            s = netrig.Stream(frame_size=128, rate="max", src_mac=tx.info().mac, dst_mac=rx.info().mac,
                              protocol=protocol, flows=16 if protocol != "raw" else 1)
            t0 = time.monotonic()
            r = netrig.run_trial(tx, rx, [s], duration_s=1, drain_s=0.2, learning=False)
            print(f"{protocol}: {r.tx_rate_pps:,.0f} fps sent, {r.rx_rate_pps:,.0f} fps received "
                  f"({time.monotonic() - t0:.1f} s)")
            assert r.frames_sent > 0 and r.frames_received > 0


def test_tcp_and_icmp_are_routed_and_counted_through_the_router_testbed():
    """Through a Linux router DUT (`netrig testbed up router`), from the command line: TCP and ICMP /
    ICMPv6 echo frames with flows over addresses and ports are forwarded by the kernel (their checksums
    must hold for it to do so) and every one is counted."""
    from tests.integration.test_faults import built_testbed
    from tests.integration.test_faults import netrig as cli

    with built_testbed("router") as tb_id:
        for family, protocol, extra in [(4, "tcp", ["--tcp-flags", "PA", "--vary", "dst_ports=8"]),
                                        (6, "tcp", ["--tcp-flags", "S", "--vary", "src_ips=4"]),
                                        (4, "icmp", ["--flows", "16"]),
                                        (6, "icmp", ["--vary", "src_ports=2", "--vary", "dst_ports=2"])]:
            r = cli("trial", "--testbed", tb_id, "--family", str(family), "--protocol", protocol, *extra,
                    "--flow-order", "pseudorandom", "--frame-size", "128", "--rate", "10kpps", "--frames", "4000",
                    "--drain", "0.3s", "--max-stretch", "1000", "--json")  # counting, not pacing
            assert r.returncode == 0, r.stderr
            doc = json.loads(r.stdout)
            res = doc["result"]
            what = f"{protocol} IPv{family}"
            assert res["frames_sent"] == res["frames_received"] == 4000, (what, res)
            assert doc["config"]["protocol"] == protocol
