"""One namespace's links, addresses, permanent neighbours and routes, read from netlink (pyroute2)
once into types: what the test bed's health check, its repair and its description compare and show,
and what ``netrig testbed clean`` removes. pyroute2's messages are read here and nowhere else."""
from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

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


def read_routes(ipr: Any, table: int = 254) -> list[Route]:
    """The routes of ``table`` (the main one), IPv4 then IPv6."""
    out = []
    for fam in (socket.AF_INET, socket.AF_INET6):
        for r in ipr.get_routes(family=fam, table=table):
            dst = r.get_attr("RTA_DST") or ("0.0.0.0" if fam == socket.AF_INET else "::")
            out.append(Route(4 if fam == socket.AF_INET else 6, f"{dst}/{r['dst_len']}", r.get_attr("RTA_GATEWAY"),
                             r.get_attr("RTA_OIF")))
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
