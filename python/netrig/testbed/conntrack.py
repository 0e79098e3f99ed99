"""The DUT's connection tracking table, read and emptied from inside its namespace.

* :func:`count` — ``nf_conntrack_count`` of the namespace (entries in its table now);
* :func:`tuple_check` — every entry's original and reply tuple from ``/proc/net/nf_conntrack``,
  checked against what a stateful trial assumes: the DUT kept each connection's ports (a source NAT
  that remapped a source port breaks the mirrored return traffic, so it is counted and named);
* :func:`flush` — delete every entry of the namespace's table over ctnetlink (``IPCTNL_MSG_CT_DELETE``
  without attributes, what ``conntrack -F`` sends), timed from the request to the kernel's
  acknowledgement: the deletion has finished when the acknowledgement arrives;
* :func:`slab_bytes` — the memory of the ``nf_conntrack`` slab cache (host-wide), for the memory one
  entry takes.
"""
from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields

from netrig.errors import CapabilityError, TestbedError
from netrig.testbed.nsthread import run_in_netns

NETLINK_NETFILTER = 12
NFNL_SUBSYS_CTNETLINK = 1
IPCTNL_MSG_CT_DELETE = 2
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLMSG_ERROR = 2


def count(netns: str | None) -> int:
    """Entries in ``netns``'s conntrack table now (``net.netfilter.nf_conntrack_count``)."""
    def body() -> int:
        with open("/proc/sys/net/netfilter/nf_conntrack_count") as f:
            return int(f.read().strip())

    try:
        return run_in_netns(netns, body)
    except FileNotFoundError:
        raise CapabilityError("conntrack: net.netfilter.nf_conntrack_count is missing (no nf_conntrack in "
                              "this kernel, or the DUT has no conntrack rules)") from None


@dataclass(frozen=True)
class ConnTuple:
    """One direction of a conntrack entry: addresses and (for TCP/UDP) ports."""

    src: str
    dst: str
    sport: str | None = None
    dport: str | None = None


@dataclass(frozen=True)
class ConntrackEntry:
    proto: str
    original: ConnTuple
    reply: ConnTuple


_TUPLE_KEYS = frozenset(f.name for f in fields(ConnTuple))


def parse_entry(line: str) -> ConntrackEntry | None:
    """One ``/proc/net/nf_conntrack`` line as its protocol, original and reply tuple (ports absent for
    protocols without them); ``None`` for a line that is not an entry."""
    parts = line.split()
    if len(parts) < 4:
        return None
    orig: dict[str, str] = {}
    reply: dict[str, str] = {}
    for p in parts[4:]:
        k, eq, v = p.partition("=")
        if eq and k in _TUPLE_KEYS:
            (orig if k not in orig else reply)[k] = v
    try:
        return ConntrackEntry(parts[2], ConnTuple(**orig), ConnTuple(**reply))
    except TypeError:  # a tuple without its addresses
        return None


@dataclass
class TupleCheck:
    """What the table held, per its tuples: ``entries`` of the trial's protocol from the initiator's
    address, how many a NAT translated (``translated``: reply destination ≠ original source),
    ``port_changed``: entries whose reply destination port is not the original source port (the
    source port was remapped), with up to ``examples`` of them, and the translated addresses seen."""

    entries: int = 0
    translated: int = 0
    port_changed: int = 0
    nat_addresses: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"entries": self.entries, "translated": self.translated, "port_changed": self.port_changed,
                "nat_addresses": self.nat_addresses, "examples": self.examples}


@dataclass
class TableCounts:
    """The DUT's conntrack table around one stateful trial (``TrialCounts.conntrack``): its
    entries before and after, the kernel's conntrack slab and ``MemAvailable`` then, the time of a
    flush before; the tuple check and the tear-down (entries, the flush of them all, what was left,
    the flush of the empty table) when the trial asked for them. ``None``: not measured."""

    flush_before_s: float | None = None
    before: int | None = None
    slab_bytes_before: int | None = None
    mem_available_before: int | None = None
    after: int | None = None
    slab_bytes_after: int | None = None
    mem_available_after: int | None = None
    tuples: TupleCheck | None = None
    teardown_entries: int | None = None
    teardown_s: float | None = None
    after_teardown: int | None = None
    empty_flush_s: float | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def check_tuples(lines: Iterable[str], proto: str, initiator_ip: str, max_examples: int = 3) -> TupleCheck:
    """:class:`TupleCheck` of conntrack lines for connections of ``proto`` from ``initiator_ip``."""
    out = TupleCheck()
    nat: set[str] = set()
    for line in lines:
        e = parse_entry(line)
        if e is None or e.proto != proto or e.original.src != initiator_ip:
            continue
        o, r = e.original, e.reply
        out.entries += 1
        if r.dst != o.src:
            out.translated += 1
            if len(nat) < 16:
                nat.add(r.dst)
        if r.dport != o.sport:
            out.port_changed += 1
            if len(out.examples) < max_examples:
                out.examples.append(f"{o.src}:{o.sport} -> {r.dst}:{r.dport}")
    out.nat_addresses = sorted(nat)
    return out


def _lines() -> Iterator[str]:
    with open("/proc/thread-self/net/nf_conntrack") as f:  # thread-self: this thread's namespace
        yield from f


def tuple_check(netns: str | None, proto: str, initiator_ip: str) -> TupleCheck:
    """:func:`check_tuples` of ``netns``'s table, streamed (millions of entries are never held at once)."""
    try:
        return run_in_netns(netns, lambda: check_tuples(_lines(), proto, initiator_ip))
    except FileNotFoundError:
        raise CapabilityError("conntrack: /proc/net/nf_conntrack is missing (kernel without "
                              "CONFIG_NF_CONNTRACK_PROCFS): the reply tuples cannot be checked") from None


def flush_message(seq: int, family: int = socket.AF_UNSPEC) -> bytes:
    """The ctnetlink request that deletes every entry of a table (of ``family``; AF_UNSPEC: all)."""
    nfgen = struct.pack("=BBH", family, 0, 0)
    msg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE
    return struct.pack("=IHHII", 16 + len(nfgen), msg_type, NLM_F_REQUEST | NLM_F_ACK, seq, 0) + nfgen


def parse_ack(data: bytes, seq: int) -> int:
    """The error code of the netlink acknowledgement to ``seq`` in ``data`` (0: done)."""
    off = 0
    while off + 16 <= len(data):
        length, mtype, _flags, mseq, _pid = struct.unpack_from("=IHHII", data, off)
        if length < 16:
            break
        if mtype == NLMSG_ERROR and mseq == seq and off + 20 <= len(data):
            return -struct.unpack_from("=i", data, off + 16)[0]
        off += (length + 3) & ~3
    raise TestbedError("conntrack flush: no acknowledgement from the kernel")


def flush(netns: str | None, timeout_s: float = 120.0) -> float:
    """Delete every entry of ``netns``'s conntrack table; returns the seconds from sending the
    request to the kernel's acknowledgement (the deletion runs synchronously before it)."""
    def body() -> float:
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:
            s.settimeout(timeout_s)
            s.bind((0, 0))
            seq = int(time.monotonic_ns() & 0x7FFFFFFF)
            t0 = time.perf_counter()
            s.send(flush_message(seq))
            err = parse_ack(s.recv(65536), seq)
            elapsed = time.perf_counter() - t0
        finally:
            s.close()
        if err and err != 2:  # ENOENT: the table was empty already
            raise TestbedError(f"conntrack flush in {netns}: {os.strerror(err)}")
        return elapsed

    try:
        return run_in_netns(netns, body)
    except OSError as e:
        raise TestbedError(f"conntrack flush in {netns}: {e.strerror or e}") from None


def slab_bytes(cache: str = "nf_conntrack") -> int | None:
    """Bytes the slab cache ``cache`` holds (active objects × object size; host-wide), ``None``
    when ``/proc/slabinfo`` is unreadable or lacks it."""
    try:
        with open("/proc/slabinfo") as f:
            for line in f:
                p = line.split()
                if p and p[0] == cache and len(p) > 3:
                    return int(p[1]) * int(p[3])
    except (OSError, ValueError):
        return None
    return None


def mem_available_bytes() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None
