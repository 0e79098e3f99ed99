"""One namespace's links, addresses, permanent neighbours and routes, read from netlink once into
types: what the test bed's health check, its repair and its description compare and show, and what
``netrig testbed clean`` removes.

The dumps are read raw (``_dump``), filtered by the kernel where it can, and only the fields these
types hold are decoded. pyroute2 (~0.2 s to import) is left to what changes a namespace: a trial's
health check of its test bed reads without it (a 1 000-frame ``netrig trial`` on a test bed took
0.81 s wall and 0.47 s of CPU with it, 0.73 s and 0.30 s without). pyroute2's messages are read here
and nowhere else."""
from __future__ import annotations

import itertools
import os
import socket
import struct
from dataclasses import dataclass
from typing import Any

from netrig.testbed.nsthread import run_in_netns

#: Netlink: a route dump request and its answers (``<linux/netlink.h>``, ``<linux/rtnetlink.h>``).
NETLINK_ROUTE, SOL_NETLINK, NETLINK_GET_STRICT_CHK = 0, 270, 12
NLMSG_ERROR, NLMSG_DONE, RTM_NEWROUTE, RTM_GETROUTE, RTA_TABLE = 2, 3, 24, 26, 15
RTM_NEWNEIGH, RTM_GETNEIGH, NDA_DST, NDA_LLADDR = 28, 30, 1, 2
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
RTM_NEWLINK, RTM_GETLINK, IFLA_IFNAME, IFLA_STATS64 = 16, 18, 3, 23
IFLA_ADDRESS, IFLA_MTU, IFLA_MASTER, IFLA_OPERSTATE, IFLA_LINKINFO, IFLA_INFO_KIND = 1, 4, 10, 16, 18, 1
RTM_NEWADDR, RTM_GETADDR, IFA_ADDRESS = 20, 22, 1
RTA_DST, RTA_OIF, RTA_GATEWAY = 1, 4, 5
#: ``IFLA_OPERSTATE``'s values (RFC 2863, ``<linux/if.h>``), as ``ip link`` names them.
OPERSTATES = ("UNKNOWN", "NOTPRESENT", "DOWN", "LOWERLAYERDOWN", "TESTING", "DORMANT", "UP")
#: ``struct rtnl_link_stats64``'s counters in the kernel's order (``<linux/if_link.h>``); a kernel
#: with fewer sends fewer.
STATS64 = ("rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_errors", "tx_errors", "rx_dropped",
           "tx_dropped", "multicast", "collisions", "rx_length_errors", "rx_over_errors", "rx_crc_errors",
           "rx_frame_errors", "rx_fifo_errors", "rx_missed_errors", "tx_aborted_errors", "tx_carrier_errors",
           "tx_fifo_errors", "tx_heartbeat_errors", "tx_window_errors", "rx_compressed", "tx_compressed",
           "rx_nohandler", "rx_otherhost_dropped")
#: Route protocols (``RTPROT_*``): the kernel's own (connected routes), ``ip route``'s default and
#: pyroute2's (what a test bed's build adds). The health check and the description read these.
RTPROT_KERNEL, RTPROT_BOOT, RTPROT_STATIC = 2, 3, 4
BUILD_PROTOS = (RTPROT_KERNEL, RTPROT_BOOT, RTPROT_STATIC)
#: The protocol of the ``routes`` option's host routes (an unassigned ``RTPROT`` value): they are
#: counted at the build, never dumped with the test bed's own.
BULK_PROTO = 250

#: ``IFF_UP``: the link was set up (``ip link set X up``).
IFF_UP = 0x1
#: ``IFF_LOWER_UP``: it has a carrier now. The operational state follows the carrier through
#: linkwatch, up to a second late: a veth whose peer just went down can still read ``UP``.
IFF_LOWER_UP = 0x10000
#: ``NUD_PERMANENT``: a neighbour entry somebody set (the build), never learnt or aged.
NUD_PERMANENT = 0x80
#: The local routing table, and its broadcast routes' type, scope and protocol as the kernel adds
#: them with an IPv4 address (``RT_TABLE_LOCAL``, ``RTN_BROADCAST``, ``RT_SCOPE_LINK``, ``RTPROT_KERNEL``).
TABLE_LOCAL, RTN_BROADCAST, SCOPE_LINK, PROTO_KERNEL = 255, 3, 253, 2


@dataclass(frozen=True)
class Link:
    index: int
    ifname: str
    #: Set up (``IFF_UP``), whether or not it has a carrier.
    up: bool
    #: ``UP``, ``DOWN``, ``LOWERLAYERDOWN``, ``UNKNOWN`` … (``IFLA_OPERSTATE``).
    operstate: str | None
    #: A carrier, as of now (``IFF_LOWER_UP``).
    carrier: bool = True
    kind: str | None = None
    mac: str | None = None
    mtu: int | None = None
    master: int | None = None
    #: The kernel's 64-bit counters (``IFLA_STATS64``: ``rx_packets``, ``tx_dropped`` …).
    stats: dict[str, int] | None = None


@dataclass(frozen=True)
class Address:
    index: int
    address: str
    prefixlen: int


@dataclass(frozen=True)
class Neighbour:
    index: int
    ip: str
    mac: str
    permanent: bool


@dataclass(frozen=True)
class Route:
    family: int
    #: ``198.19.0.0/16``; a default route as ``0.0.0.0/0`` or ``::/0``.
    dst: str
    gateway: str | None
    oif: int | None

    @property
    def default(self) -> bool:
        return self.dst in ("0.0.0.0/0", "::/0")


def read_links(ns: str | None) -> dict[str, Link]:
    """``{ifname: Link}`` of every link in namespace ``ns``."""
    out = {}
    for _, raw in run_in_netns(ns, _dump, RTM_GETLINK, [bytes(16)]):
        for at, length in _messages(raw):
            index, flags = struct.unpack_from("=iI", raw, at + 16 + 4)
            a = _attrs(raw, at + 16 + 16, at + length)
            info = a.get(IFLA_LINKINFO)
            kind = _attrs(info, 0, len(info)).get(IFLA_INFO_KIND) if info is not None else None
            oper = a.get(IFLA_OPERSTATE)
            link = Link(index, _text(a[IFLA_IFNAME]), bool(flags & IFF_UP),
                        OPERSTATES[oper[0]] if oper is not None and oper[0] < len(OPERSTATES) else None,
                        bool(flags & IFF_LOWER_UP), _text(kind) if kind is not None else None,
                        ":".join(f"{b:02x}" for b in a[IFLA_ADDRESS]) if IFLA_ADDRESS in a else None,
                        _u32(a.get(IFLA_MTU)), _u32(a.get(IFLA_MASTER)) or None, _stats64(a.get(IFLA_STATS64)))
            out[link.ifname] = link
    return out


def _text(b: bytes) -> str:
    return b.rstrip(b"\0").decode()


def _u32(b: bytes | None) -> int | None:
    return struct.unpack_from("=I", b)[0] if b is not None else None


def _stats64(b: bytes | None) -> dict[str, int] | None:
    """``IFLA_STATS64`` by name (:data:`STATS64`); a kernel with fewer counters sends fewer."""
    if b is None:
        return None
    n = min(len(STATS64), len(b) // 8)
    return dict(zip(STATS64, struct.unpack_from(f"={n}Q", b)))


def link_counters(s: socket.socket) -> dict[str, dict[str, int]]:
    """``{ifname: {counter: value}}`` (``IFLA_STATS64``) of every link in the namespace of the
    netlink socket ``s``, from one raw ``RTM_GETLINK`` dump: 0.2 ms of CPU for a test bed's
    namespace, where pyroute2 took 1.5 ms (the DUT monitor reads three every sample)."""
    out = {}
    for _, raw in _dump(RTM_GETLINK, [bytes(16)], s):
        for at, length in _messages(raw):
            attrs = _attrs(raw, at + 16 + 16, at + length)
            name, stats = attrs.get(IFLA_IFNAME), _stats64(attrs.get(IFLA_STATS64))
            if name is not None and stats is not None:
                out[_text(name)] = stats
    return out


def read_addrs(ns: str | None) -> list[Address]:
    """The IPv4 then IPv6 addresses of namespace ``ns``."""
    out = []
    for fam, raw in run_in_netns(ns, _dump, RTM_GETADDR, [struct.pack("=BBBBI", f, 0, 0, 0, 0)
                                                            for f in (socket.AF_INET, socket.AF_INET6)]):
        for at, length in _messages(raw):
            prefixlen, index = struct.unpack_from("=xBxxI", raw, at + 16)
            addr = _attrs(raw, at + 16 + 8, at + length).get(IFA_ADDRESS)
            if addr is not None:
                out.append(Address(index, socket.inet_ntop(fam, addr), prefixlen))
    return out


def read_neighbours(ipr: Any) -> list[Neighbour]:
    return [Neighbour(n["ifindex"], n.get_attr("NDA_DST"), (n.get_attr("NDA_LLADDR") or "").lower(),
                      bool(n["state"] & NUD_PERMANENT)) for n in ipr.get_neighbours()]


def read_permanent_neighbours(ns: str | None) -> list[Neighbour]:
    """The permanent neighbour entries of namespace ``ns``. The dump is read raw and only the
    permanent entries are decoded: the ``hosts`` option's 65 533 resolved neighbours took pyroute2
    about 10 s to parse, before every trial's health check."""
    out = []
    for fam, raw in run_in_netns(ns, _dump, RTM_GETNEIGH, [struct.pack("=BxxxiHBB", f, 0, 0, 0, 0)
                                                             for f in (socket.AF_INET, socket.AF_INET6)]):
        for at, length in _messages(raw):
            index, state = struct.unpack_from("=iH", raw, at + 20)
            if state & NUD_PERMANENT:
                attrs = _attrs(raw, at + 16 + 12, at + length)
                dst, mac = attrs.get(NDA_DST), attrs.get(NDA_LLADDR, b"")
                if dst is not None:
                    out.append(Neighbour(index, socket.inet_ntop(fam, dst), ":".join(f"{b:02x}" for b in mac), True))
    return out


def _attrs(buf: bytes, at: int, end: int) -> dict[int, bytes]:
    """A message's attributes from ``at`` to ``end``: {type: payload}."""
    out = {}
    while at + 4 <= end:
        length, kind = struct.unpack_from("=HH", buf, at)
        if length < 4:
            break
        out[kind & 0x3FFF] = bytes(buf[at + 4:at + length])
        at += (length + 3) & ~3
    return out


def read_routes(ns: str | None, table: int = 254, protos: tuple[int, ...] = BUILD_PROTOS,
                families: tuple[int, ...] = (socket.AF_INET, socket.AF_INET6), rtype: int = 0) -> list[Route]:
    """The routes of ``table`` (the main one) in namespace ``ns`` whose protocol is one of
    ``protos`` (and whose type is ``rtype``, 0: any), IPv4 then IPv6. The kernel filters the dump
    (``NETLINK_GET_STRICT_CHK``): pyroute2 filters after parsing every route, two minutes for the
    million of the ``routes`` option."""
    out = []
    requests = [_route_request(f, table, p, rtype) for f in families for p in protos]
    for fam, raw in run_in_netns(ns, _dump, RTM_GETROUTE, requests):
        for at, length in _messages(raw):
            a = _attrs(raw, at + 16 + 12, at + length)
            dst = socket.inet_ntop(fam, a[RTA_DST]) if RTA_DST in a else ("0.0.0.0" if fam == socket.AF_INET else "::")
            gw = socket.inet_ntop(fam, a[RTA_GATEWAY]) if RTA_GATEWAY in a else None
            out.append(Route(4 if fam == socket.AF_INET else 6, f"{dst}/{raw[at + 17]}", gw, _u32(a.get(RTA_OIF))))
    return out


def _route_request(fam: int, table: int, proto: int, rtype: int) -> bytes:
    """A strict ``RTM_GETROUTE`` dump request's body: ``struct rtmsg`` and the table."""
    return struct.pack("=BBBBBBBBI", fam, 0, 0, 0, table, proto, 0, rtype, 0) + struct.pack("=HHI", 8, RTA_TABLE, table)


def _dump(kind: int, bodies: list[bytes], s: socket.socket | None = None) -> list[tuple[int, bytes]]:
    """One ``kind`` dump per request body (its first byte the family), filtered by the kernel:
    (family, the replies' messages run together). On ``s``, or on a socket of the calling thread's
    namespace for these dumps only."""
    if s is None:
        with route_socket() as own:
            return _dump(kind, bodies, own)
    out: list[tuple[int, bytes]] = []
    for body in bodies:
        seq = next(_SEQ)
        s.send(struct.pack("=IHHII", 16 + len(body), kind, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body)
        out.append((body[0], _replies(s, seq)))
    return out


#: Dump requests' sequence numbers, unique in the process: a socket kept for many dumps (the DUT
#: monitor's) may hold the rest of one a failure left unread, and only this dump's answer is read.
_SEQ = itertools.count(1)


def route_socket() -> socket.socket:
    """A raw rtnetlink socket in the calling thread's namespace, dumps filtered by the kernel."""
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
    s.setsockopt(SOL_NETLINK, NETLINK_GET_STRICT_CHK, 1)
    return s


def _replies(s: socket.socket, seq: int) -> bytes:
    """Dump ``seq``'s messages (routes, neighbours, links), up to its ``NLMSG_DONE`` (another dump's
    are passed over); an ``NLMSG_ERROR`` raises."""
    got = bytearray()
    while True:
        buf = s.recv(1 << 20)
        for at, length in _messages(buf):
            kind, _, got_seq = struct.unpack_from("=HHI", buf, at + 4)
            if got_seq != seq:
                continue
            if kind == NLMSG_DONE:
                return bytes(got)
            if kind == NLMSG_ERROR:
                errno = -struct.unpack_from("=i", buf, at + 16)[0]
                raise OSError(errno, f"netlink dump: {os.strerror(errno)}")
            if kind in (RTM_NEWROUTE, RTM_NEWNEIGH, RTM_NEWLINK, RTM_NEWADDR):
                got += buf[at:at + length]


def _messages(buf: bytes) -> list[tuple[int, int]]:
    """(offset, length) of the netlink messages in ``buf``."""
    out, at = [], 0
    while at + 16 <= len(buf):
        length = struct.unpack_from("=I", buf, at)[0]
        if length < 16:
            break
        out.append((at, length))
        at += (length + 3) & ~3
    return out


def read_broadcasts(ns: str | None) -> set[tuple[int | None, str]]:
    """The IPv4 broadcast routes of the local table: (interface index, address). The kernel
    filters the dump: parsing every route took pyroute2 12 s with the ``routes`` option's 65 534."""
    return {(r.oif, r.dst.split("/")[0]) for r in read_routes(ns, TABLE_LOCAL, (PROTO_KERNEL,), (socket.AF_INET,),
                                                              RTN_BROADCAST)}


def del_broadcast(ipr: Any, index: int, ip: str) -> None:
    """Delete the broadcast route of ``ip`` on interface ``index`` (the kernel's, from an address)."""
    ipr.route("del", dst=ip, dst_len=32, table=TABLE_LOCAL, type=RTN_BROADCAST, oif=index, scope=SCOPE_LINK,
              proto=PROTO_KERNEL)
