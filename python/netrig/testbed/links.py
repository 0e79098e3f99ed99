"""One namespace's links, addresses, permanent neighbours and routes, read from netlink (pyroute2)
once into types: what the test bed's health check, its repair and its description compare and show,
and what ``netrig testbed clean`` removes. pyroute2's messages are read here and nowhere else."""
from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from typing import Any

from netrig.testbed.nsthread import run_in_netns

#: Netlink: a route dump request and its answers (``<linux/netlink.h>``, ``<linux/rtnetlink.h>``).
NETLINK_ROUTE, SOL_NETLINK, NETLINK_GET_STRICT_CHK = 0, 270, 12
NLMSG_ERROR, NLMSG_DONE, RTM_NEWROUTE, RTM_GETROUTE, RTA_TABLE = 2, 3, 24, 26, 15
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
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


def link_of(msg: Any) -> Link:
    info = msg.get_attr("IFLA_LINKINFO")
    stats = msg.get_attr("IFLA_STATS64")
    return Link(msg["index"], msg.get_attr("IFLA_IFNAME"), bool(msg["flags"] & IFF_UP), msg.get_attr("IFLA_OPERSTATE"),
                bool(msg["flags"] & IFF_LOWER_UP), info.get_attr("IFLA_INFO_KIND") if info else None,
                msg.get_attr("IFLA_ADDRESS"),
                msg.get_attr("IFLA_MTU"), msg.get_attr("IFLA_MASTER") or None,
                {k: int(v) for k, v in dict(stats).items()} if stats is not None else None)


def read_links(ipr: Any) -> dict[str, Link]:
    """``{ifname: Link}`` of every link in the namespace ``ipr`` talks to."""
    return {lk.ifname: lk for lk in map(link_of, ipr.get_links())}


def read_addrs(ipr: Any) -> list[Address]:
    return [Address(a["index"], a.get_attr("IFA_ADDRESS"), a["prefixlen"]) for a in ipr.get_addr()]


def read_neighbours(ipr: Any) -> list[Neighbour]:
    return [Neighbour(n["ifindex"], n.get_attr("NDA_DST"), (n.get_attr("NDA_LLADDR") or "").lower(),
                      bool(n["state"] & NUD_PERMANENT)) for n in ipr.get_neighbours()]


def read_routes(ns: str | None, table: int = 254, protos: tuple[int, ...] = BUILD_PROTOS) -> list[Route]:
    """The routes of ``table`` (the main one) in namespace ``ns`` whose protocol is one of
    ``protos``, IPv4 then IPv6. The kernel filters the dump (``NETLINK_GET_STRICT_CHK``): pyroute2
    filters after parsing every route, two minutes for the million of the ``routes`` option."""
    from pyroute2.netlink.rtnl.rtmsg import rtmsg  # as slow to import as the rest of pyroute2

    out = []
    for fam, raw in run_in_netns(ns, _dump_routes, table, protos):
        for at, length in _messages(raw):
            r = rtmsg(raw[at:at + length])
            r.decode()
            dst = r.get_attr("RTA_DST") or ("0.0.0.0" if fam == socket.AF_INET else "::")
            out.append(Route(4 if fam == socket.AF_INET else 6, f"{dst}/{r['dst_len']}", r.get_attr("RTA_GATEWAY"),
                             r.get_attr("RTA_OIF")))
    return out


def _dump_routes(table: int, protos: tuple[int, ...]) -> list[tuple[int, bytes]]:
    """``RTM_GETROUTE`` dumps of ``table`` for each family and protocol, filtered by the kernel:
    (family, the replies' route messages run together)."""
    out: list[tuple[int, bytes]] = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE) as s:
        s.setsockopt(SOL_NETLINK, NETLINK_GET_STRICT_CHK, 1)
        for seq, (fam, proto) in enumerate(((f, p) for f in (socket.AF_INET, socket.AF_INET6) for p in protos), 1):
            rtm = struct.pack("=BBBBBBBBI", fam, 0, 0, 0, table, proto, 0, 0, 0)  # struct rtmsg
            body = rtm + struct.pack("=HHI", 8, RTA_TABLE, table)
            s.send(struct.pack("=IHHII", 16 + len(body), RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body)
            out.append((fam, _replies(s)))
    return out


def _replies(s: socket.socket) -> bytes:
    """A dump's route messages, up to its ``NLMSG_DONE``; an ``NLMSG_ERROR`` raises."""
    got = bytearray()
    while True:
        buf = s.recv(1 << 20)
        for at, length in _messages(buf):
            kind = struct.unpack_from("=H", buf, at + 4)[0]
            if kind == NLMSG_DONE:
                return bytes(got)
            if kind == NLMSG_ERROR:
                errno = -struct.unpack_from("=i", buf, at + 16)[0]
                raise OSError(errno, f"route dump: {os.strerror(errno)}")
            if kind == RTM_NEWROUTE:
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


def read_broadcasts(ipr: Any) -> set[tuple[int, str]]:
    """The IPv4 broadcast routes of the local table: (interface index, address)."""
    return {(r.get_attr("RTA_OIF"), r.get_attr("RTA_DST")) for r in ipr.get_routes(family=socket.AF_INET,
                                                                                   table=TABLE_LOCAL)
            if r["type"] == RTN_BROADCAST}


def del_broadcast(ipr: Any, index: int, ip: str) -> None:
    """Delete the broadcast route of ``ip`` on interface ``index`` (the kernel's, from an address)."""
    ipr.route("del", dst=ip, dst_len=32, table=TABLE_LOCAL, type=RTN_BROADCAST, oif=index, scope=SCOPE_LINK,
              proto=PROTO_KERNEL)
