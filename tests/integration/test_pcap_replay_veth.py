"""pcap replay on a real veth pair: a capture written here (UDP in two flows, TCP, ICMP echo, an ARP
frame, an 802.1Q-tagged UDP frame, a UDP frame too short for the signature) is replayed.

- unstamped: a raw packet socket in the receiving namespace (not netrig's receive path) sees every
  frame byte for byte, in order, pass after pass; the result says loss was not measured;
- stamped: netrig's receiver counts every stamped frame in its flow (one per captured 5-tuple) with
  no loss, the sequence numbers on the wire run 0, 1, 2, … per flow, checksums stay valid, and the
  frames without room go out as captured, counted apart;
- through a namespace that drops every 10th frame of one flow, exactly that loss shows, in that flow.
"""
from __future__ import annotations

import struct
from pathlib import Path

import pytest
from tests.conftest import forwarding_namespace, needs_root, veth_pair

# A raw packet socket in the receiving namespace, independent of netrig's receive path.
from tests.integration.test_protocols_veth import _capture, _captured

import netrig

pytestmark = [needs_root, pytest.mark.root]

SRC, DST = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    acc = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while acc > 0xFFFF:
        acc = (acc & 0xFFFF) + (acc >> 16)
    return acc


def _ipv4(proto: int, seg: bytes) -> bytes:
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(seg), 0, 0, 64, proto, 0, bytes([198, 18, 0, 1]),
                      bytes([198, 19, 0, 1]))
    hdr = hdr[:10] + struct.pack("!H", 0xFFFF - _csum(hdr)) + hdr[12:]
    return hdr + seg


def _l4(proto: int, seg: bytearray, at: int) -> bytes:
    """`seg` with its checksum at `at` made valid (pseudo-header for UDP/TCP)."""
    pseudo = bytes([198, 18, 0, 1, 198, 19, 0, 1]) + struct.pack("!BBH", 0, proto, len(seg)) if proto != 1 else b""
    struct.pack_into("!H", seg, at, 0xFFFF - _csum(pseudo + bytes(seg)))
    return bytes(seg)


def udp(sport: int, payload: int, vlan: int | None = None) -> bytes:
    seg = bytearray(struct.pack("!HHHH", sport, 2000, 8 + payload, 0) + bytes(range(payload)))
    eth = DST + SRC + (struct.pack("!HH", 0x8100, vlan) if vlan else b"") + b"\x08\x00"
    return eth + _ipv4(17, _l4(17, seg, 6))


def tcp(payload: int) -> bytes:
    seg = bytearray(struct.pack("!HHIIBBHHH", 3000, 80, 7, 0, 5 << 4, 0x18, 1000, 0, 0) + b"x" * payload)
    return DST + SRC + b"\x08\x00" + _ipv4(6, _l4(6, seg, 16))


def icmp(data: int) -> bytes:
    seg = bytearray(struct.pack("!BBHHH", 8, 0, 0, 0x1234, 1) + b"p" * data)
    return DST + SRC + b"\x08\x00" + _ipv4(1, _l4(1, seg, 2))


def arp() -> bytes:
    return b"\xff" * 6 + SRC + b"\x08\x06" + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + SRC + bytes(
        [198, 18, 0, 1]) + b"\0" * 6 + bytes([198, 19, 0, 1])


#: The capture: frames with room for the signature, and (ARP, 10-byte UDP payload) without.
FRAMES = [udp(1001, 40), tcp(30), udp(1002, 60), icmp(32), arp(), udp(1001, 40), udp(1003, 10),
          udp(1004, 50, vlan=100), udp(1002, 60)]
STAMPABLE = [0, 1, 2, 3, 5, 7, 8]


def write_pcap(path: Path, frames: list[bytes]) -> Path:
    """A classic little-endian microsecond pcap, 1 ms between frames."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for i, f in enumerate(frames):
        out.append(struct.pack("<IIII", 1_700_000_000, i * 1000, len(f), len(f)) + f)
    path.write_bytes(b"".join(out))
    return path


def test_unstamped_replay_is_byte_identical_and_does_not_claim_loss(tmp_path):
    cap = write_pcap(tmp_path / "mixed.pcap", FRAMES)
    passes = 4
    n = passes * len(FRAMES)
    with veth_pair("y") as (ns_a, if_a, ns_b, if_b):
        tx, rx = netrig.Port(if_a, netns=ns_a), netrig.Port(if_b, netns=ns_b)
        s = netrig.Stream(pcap=str(cap), rate_pps=2000)
        sniff = _capture(ns_b, if_b, n)
        r = netrig.run_trial(tx, rx, [s], frames=n, drain_s=0.3, learning=False, max_stretch_pct=1000)
        wire = _captured(sniff)
    st = r.streams[0]
    assert wire == FRAMES * passes, "every frame as captured, in order, every pass"
    assert st.frames_sent == n and st.replay is not None
    assert (st.replay.passes, st.replay.frames_per_pass, st.replay.frames_unstamped) == (passes, len(FRAMES), n)
    assert st.replay.bytes_per_pass == sum(max(len(f), 60) + 4 for f in FRAMES)
    assert st.bytes_sent == passes * st.replay.bytes_per_pass
    # Nothing the receiver can count: loss is not measured (never 100 %), the port saw them all.
    assert not st.loss_measured and st.frames_lost == 0 and st.loss_ratio == 0
    assert r.ports[1].rx_frames == n and r.ports[1].rx_foreign == n
    assert r.valid, r.invalid_reason


def _signature(frame: bytes) -> tuple[int, int]:
    """(flow id, sequence) of a stamped frame on the wire: the signature at the start of its L4
    payload, behind the magic "NR". Read where it must be, not searched for: a stamped frame's
    transport checksum changes with its timestamp, and one frame in a few thousand has "NR" in it
    (the assertion on the sequences failed so once)."""
    ip = frame[18 if frame[12:14] == b"\x81\x00" else 14:]
    seg = ip[(ip[0] & 0x0F) * 4:]
    at = (seg[12] >> 4) * 4 if ip[9] == 6 else 8
    assert seg[at:at + 2] == b"NR", f"no signature at the L4 payload of {frame.hex()}"
    body = seg[at + 2:at + 18]
    return int.from_bytes(body[3:6], "big"), int.from_bytes(body[6:11], "big")


def test_stamped_replay_is_counted_per_flow_with_sequences_and_checksums(tmp_path):
    cap = write_pcap(tmp_path / "mixed.pcap", FRAMES)
    passes = 50
    n = passes * len(FRAMES)
    with veth_pair("z") as (ns_a, if_a, ns_b, if_b):
        tx, rx = netrig.Port(if_a, netns=ns_a), netrig.Port(if_b, netns=ns_b)
        s = netrig.Stream(pcap=str(cap), pcap_stamp=True, rate_pps=5000)
        sniff = _capture(ns_b, if_b, n)
        r = netrig.run_trial(tx, rx, [s], frames=n, drain_s=0.3, learning=False, max_stretch_pct=1000)
        wire = _captured(sniff)
    st = r.streams[0]
    d = st.to_dict(flows=False)
    stamped = passes * len(STAMPABLE)
    assert st.replay.frames_stamped == stamped and st.replay.frames_unstamped == n - stamped, d
    # Flows: UDP 1001, TCP, UDP 1002, ICMP, UDP 1004 in VLAN 100 (ARP and the short UDP have no room).
    assert st.replay.flows == 5 and len(r.flows) == 5
    assert st.loss_measured and st.frames_received == stamped and st.frames_lost == 0, d
    assert (st.reordered, st.duplicated) == (0, 0)
    per_flow = {f.flow_id: f for f in r.flows}
    assert sorted(f.frames_sent for f in per_flow.values()) == sorted([2 * passes, passes, 2 * passes, passes, passes])
    assert all(f.frames_received == f.frames_sent and f.frames_lost == 0 for f in per_flow.values())
    assert st.latency.max_ns > 0
    assert r.valid, r.invalid_reason
    # On the wire: same lengths; stamped frames carry flow and sequence 0, 1, 2, … per flow; the rest
    # are as captured; only the signature and the transport checksum changed, and it is valid.
    assert len(wire) == n
    seqs: dict[int, list[int]] = {}
    for k, f in enumerate(wire):
        orig = FRAMES[k % len(FRAMES)]
        assert len(f) == len(orig)
        if k % len(FRAMES) not in STAMPABLE:
            assert f == orig
            continue
        flow, seq = _signature(f)
        seqs.setdefault(flow, []).append(seq)
        off = 18 if f[12:14] == b"\x81\x00" else 14
        ip = f[off:]
        ihl = (ip[0] & 0x0F) * 4
        seg = ip[ihl:]
        pseudo = ip[12:20] + struct.pack("!BBH", 0, ip[9], len(seg)) if ip[9] != 1 else b""
        assert _csum(pseudo + seg) == 0xFFFF, f"frame {k}: transport checksum after stamping"
        assert _csum(ip[:ihl]) == 0xFFFF
    for flow, v in seqs.items():
        assert v == list(range(len(v))), f"flow {flow}: sequence numbers {v}"
    assert set(seqs) == set(per_flow)


def test_stamped_replay_through_a_lossy_namespace_shows_that_loss_in_its_flow(tmp_path):
    cap = write_pcap(tmp_path / "mixed.pcap", FRAMES)
    passes = 100
    n = passes * len(FRAMES)
    with veth_pair("x") as (ns_a, if_a, ns_b, if_b):
        # Every 10th frame from UDP port 1001 (two per pass: 200 frames, 20 dropped) is dropped.
        listen = forwarding_namespace(ns_b, if_b, "udp sport 1001 numgen inc mod 10 == 0 counter drop")
        tx, rx = netrig.Port(if_a, netns=ns_a), netrig.Port(listen, netns=ns_b)
        s = netrig.Stream(pcap=str(cap), pcap_stamp=True, rate_pps=5000)
        r = netrig.run_trial(tx, rx, [s], frames=n, drain_s=0.3, learning=False, max_stretch_pct=1000)
    st = r.streams[0]
    lossy = [f for f in r.flows if f.frames_lost]
    assert len(lossy) == 1 and lossy[0].frames_sent == 2 * passes and lossy[0].frames_lost == 2 * passes // 10, \
        [f.to_dict() for f in r.flows]
    assert st.frames_lost == 2 * passes // 10
    assert st.loss_ratio == pytest.approx(st.frames_lost / st.replay.frames_stamped)
    assert r.valid, r.invalid_reason
