"""A tiny raw-socket prober: checks that frames really cross a test bed, independent of the engine.

``send_frames`` writes hand-made Ethernet/IPv4-or-IPv6/UDP frames on a tester port (AF_PACKET,
SOCK_RAW, inside the port's namespace); ``Receiver`` counts the probe frames that arrive on another
port and keeps their headers so a test can check what the DUT did to them (TTL, NAT source address,
MACs). Probe frames carry ``MAGIC`` at the start of the UDP payload so stray frames are ignored.
This is a correctness tool (tens of thousands of frames per second), not a traffic generator.
"""
from __future__ import annotations

import ipaddress
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from netrig.errors import ConfigError
from netrig.testbed.links import read_links
from netrig.testbed.nsthread import run_in_netns

MAGIC = b"NRPROBE!"
ETH_P_ALL = 0x0003
PACKET_IGNORE_OUTGOING = 23
SOL_PACKET = 263


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def _mac(m: str) -> bytes:
    return bytes.fromhex(m.replace(":", ""))


def udp_frame(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, src_port: int = 1024,
              dst_port: int = 1024, frame_size: int = 64, seq: int = 0, ttl: int = 64) -> bytes:
    """An Ethernet + IPv4/IPv6 + UDP frame of ``frame_size`` bytes *including* the 4-byte FCS."""
    src, dst = ipaddress.ip_address(src_ip), ipaddress.ip_address(dst_ip)
    if src.version != dst.version:
        raise ConfigError("dst_ip", f"{dst_ip}: not the same IP version as src_ip {src_ip}")
    hdr = 14 + (20 if src.version == 4 else 40) + 8
    payload_len = max(frame_size - 4 - hdr, len(MAGIC) + 8)
    payload = (MAGIC + struct.pack("!Q", seq)).ljust(payload_len, b"\0")
    udp_len = 8 + len(payload)
    if src.version == 4:
        iph = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, seq & 0xFFFF, 0, ttl, 17, 0,
                          src.packed, dst.packed)
        iph = iph[:10] + struct.pack("!H", _csum(iph)) + iph[12:]
        udp = struct.pack("!HHHH", src_port, dst_port, udp_len, 0) + payload
        return _mac(dst_mac) + _mac(src_mac) + b"\x08\x00" + iph + udp
    pseudo = src.packed + dst.packed + struct.pack("!I3xB", udp_len, 17)
    udp0 = struct.pack("!HHHH", src_port, dst_port, udp_len, 0) + payload
    ck = _csum(pseudo + udp0) or 0xFFFF
    udp = udp0[:6] + struct.pack("!H", ck) + udp0[8:]
    ip6 = struct.pack("!IHBB16s16s", 0x60000000, udp_len, 17, ttl, src.packed, dst.packed)
    return _mac(dst_mac) + _mac(src_mac) + b"\x86\xdd" + ip6 + udp


def _open(netns: str | None, ifname: str, rcvbuf: int = 0) -> socket.socket:
    def body() -> socket.socket:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        if rcvbuf:
            try:
                s.setsockopt(socket.SOL_SOCKET, 33, rcvbuf)  # SO_RCVBUFFORCE
            except OSError:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        try:
            s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        except OSError:
            pass
        s.bind((ifname, ETH_P_ALL))
        return s

    return run_in_netns(netns, body)


def send_frames(netns: str | None, ifname: str, frames: list[bytes] | bytes, count: int,
                rate_pps: float | None = None) -> int:
    """Send ``count`` frames (cycling through ``frames``), paced at ``rate_pps`` if given; returns sent.
    (A Python sender stalls, and so does the CPU that receives: a test that judges the DUT by what
    it passed judges it against :class:`Arrivals`.)"""
    if isinstance(frames, bytes):
        frames = [frames]
    s = _open(netns, ifname)
    sent = 0
    try:
        t0 = time.perf_counter()
        n = len(frames)
        for i in range(count):
            if rate_pps:
                due = t0 + i / rate_pps
                while time.perf_counter() < due:
                    pass
            try:
                s.send(frames[i % n])
                sent += 1
            except BlockingIOError:
                time.sleep(0.0001)
            except OSError as e:
                if e.errno == 105:  # ENOBUFS: peer ring full, drop like a NIC would
                    continue
                raise
    finally:
        s.close()
    return sent


@dataclass
class Received:
    count: int = 0
    frames: list[dict[str, Any]] = field(default_factory=list)


class Receiver:
    """Counts probe frames arriving on ``ifname`` in ``netns`` (a background thread)::

        with Receiver(ns, "nr12ab-rx") as rx:
            send_frames(...)
        rx.count, rx.frames[0]["src_ip"]
    """

    def __init__(self, netns: str | None, ifname: str, keep: int = 16):
        self.netns, self.ifname, self.keep = netns, ifname, keep
        self.result = Received()
        self._stop = threading.Event()
        self._sock = _open(netns, ifname, rcvbuf=32 << 20)
        self._sock.settimeout(0.05)
        self._thread = threading.Thread(target=self._run, name=f"netrig-probe-rx-{ifname}", daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self, drain_s: float = 0.2) -> Received:
        if self._thread.is_alive():
            time.sleep(drain_s)
            self._stop.set()
            self._thread.join()
        self._sock.close()
        return self.result

    @property
    def count(self) -> int:
        return self.result.count

    @property
    def frames(self) -> list[dict[str, Any]]:
        return self.result.frames

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(2048)
            except TimeoutError:
                continue
            except OSError:
                return
            info = parse(data)
            if info is None:
                continue
            self.result.count += 1
            if len(self.result.frames) < self.keep:
                self.result.frames.append(info)


PACKET_STATISTICS = 6
#: SO_TIMESTAMPNS (= SCM_TIMESTAMPNS) in asm-generic/socket.h; Python's socket module lacks it.
SO_TIMESTAMPNS = 35


class Arrivals:
    """The kernel's receive times of the probe frames that reach ``ifname`` in ``netns``, taken where
    the receiving stack processes them (the packet tap, in the same pass as its forwarding and
    filtering), not where they were sent: a DUT whose CPU is stopped gets the frames sent meanwhile
    all at once when it runs again, and a policer there sees them so. Read after the traffic (no
    thread beside the sender): the socket's buffer holds ``capacity`` frames::

        with Arrivals(dut_ns, "nr12ab-dtx") as at:
            send_frames(...)
        at.times, at.dropped
    """

    def __init__(self, netns: str | None, ifname: str, capacity: int = 65_536):
        self.times: list[float] = []
        self.dropped = 0
        # a frame's truesize: up to a page and its skb
        self._sock = _open(netns, ifname, rcvbuf=min(capacity * 8192, 1 << 30))
        self._sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self._sock.setblocking(False)

    def __enter__(self) -> Arrivals:
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._drain()
        finally:
            self._sock.close()

    def _drain(self) -> None:
        while True:
            try:
                data, anc, _, _ = self._sock.recvmsg(2048, socket.CMSG_SPACE(16))
            except BlockingIOError:
                break
            if parse(data) is None:
                continue
            stamp = next((d for lvl, typ, d in anc if lvl == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS),
                         None)
            if stamp is not None:
                sec, nsec = struct.unpack("qq", stamp[:16])
                self.times.append(sec + nsec * 1e-9)
        # tpacket_stats: packets, drops (reading them resets them)
        self.dropped = struct.unpack("II", self._sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))[1]


def parse(data: bytes) -> dict[str, Any] | None:
    """Headers of a probe frame (None if ``data`` is not one)."""
    if len(data) < 14:
        return None
    et = struct.unpack("!H", data[12:14])[0]
    d: dict[str, Any] = {"dst_mac": data[0:6].hex(":"), "src_mac": data[6:12].hex(":"), "len": len(data)}
    if et == 0x0800 and len(data) >= 42:
        ihl = (data[14] & 0xF) * 4
        d.update(family=4, ttl=data[22], src_ip=str(ipaddress.IPv4Address(data[26:30])),
                 dst_ip=str(ipaddress.IPv4Address(data[30:34])))
        l4 = 14 + ihl
    elif et == 0x86DD and len(data) >= 62:
        d.update(family=6, ttl=data[21], src_ip=str(ipaddress.IPv6Address(data[22:38])),
                 dst_ip=str(ipaddress.IPv6Address(data[38:54])))
        l4 = 54
    else:
        return None
    if data[l4 + 8:l4 + 8 + len(MAGIC)] != MAGIC:
        return None
    d["src_port"], d["dst_port"] = struct.unpack("!HH", data[l4:l4 + 4])
    d["seq"] = struct.unpack("!Q", data[l4 + 8 + len(MAGIC):l4 + 16 + len(MAGIC)])[0]
    return d


def link_stats(netns: str | None, ifname: str) -> dict[str, int]:
    """IFLA_STATS64 counters of ``ifname`` in ``netns`` (rx_packets, tx_packets, rx_dropped, ...)."""
    link = read_links(netns).get(ifname)
    if link is None:
        raise ConfigError("ifname", f"{ifname}: no such interface in netns {netns or '(host)'}")
    return link.stats or {}
