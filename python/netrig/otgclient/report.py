"""netrig's own ``GET /netrig/agents`` answer as both ends write and read it (docs/otg.md,
docs/distributed.md): every server's tester ports with the frames they dropped themselves since
its last start; a controller's agents, cross-agent flows and events beside them, kept as given.

Read with :data:`read` (``read(AgentsReport, answer)``), written with
:func:`netrig.otgclient.typed.to_json`.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from netrig.otgclient.typed import Reader

#: Reads a server's answer (integers sent as strings become ints).
read = Reader(coerce=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class PortDrops:
    """One tester port's own receive drops since its server's last start (a controller's receive
    start on an agent counts as one): frames the tester lost, never the DUT; and the frames it
    received that were none of the flows'."""

    #: The port's name in the config, and its location (``AGENT/LOCATION`` at a controller).
    name: str
    location: str
    #: Frames its receive ring dropped (the engine's ``rx_ring_drops``: AF_XDP's ``rx_dropped`` and
    #: ``rx_ring_full``, AF_PACKET's ``tp_drops``).
    rx_ring_drops: int = 0
    #: Frames its kernel dropped on receive before the ring — a full backlog or XDP queue, the NIC
    #: out of descriptors (``IFLA_STATS64``: :data:`KERNEL_RX_DROPS`); ``None``: not read. On veth
    #: it also counts the frames a full AF_XDP ring dropped: the same frames as ``rx_ring_drops``.
    rx_kernel_drops: int | None = None
    #: Frames it received that no flow of the config sent since the start, counted apart and never
    #: as received: without netrig's signature (``rx_foreign``), and signed by no current start
    #: (``rx_stray``: an earlier start's frames still in flight, another tester's). ``None``: a
    #: server that does not say.
    rx_foreign: int | None = None
    rx_stray: int | None = None
    #: Frames signed as a current start of a flow its server sends that the sender cannot have sent
    #: (a sequence number it had not reached, a transmit stamp from the future), counted apart and
    #: never as received, as a trial's forged frames are. ``None``: a server that does not say, or
    #: a port that received a flow sent by another server (a controller's other agent), whose
    #: counts are not there to judge its frames by.
    rx_forged: int | None = None
    #: Frames its kernel dropped on transmit after the tester handed them over (``IFLA_STATS64``'s
    #: ``tx_dropped``; on veth the peer's receive ring full: the peer's ingress, the tester's own
    #: when the peer is a tester port: ``tx_peer``). Counted as sent by the flows; ``None``: not read.
    tx_kernel_drops: int | None = None
    #: Where those dropped: the location of the served port at the other end of this port's veth,
    #: when there were drops and that end is one (a pair of tester ports); ``None`` otherwise.
    tx_peer: str | None = None

    def describe_tx(self) -> str | None:
        """``None`` unless this port's kernel dropped frames at a tester port's receive ring, else
        that, in words: the tester's loss."""
        if not self.tx_kernel_drops or self.tx_peer is None:
            return None
        return (f"the sending tester port {self.location}'s kernel dropped {self.tx_kernel_drops} frames at the "
                f"receive ring of tester port {self.tx_peer}")

    def describe(self) -> str | None:
        """``None`` when it dropped nothing, else what it dropped, in words."""
        if not self.rx_ring_drops and not self.rx_kernel_drops:
            return None
        kernel = self.rx_kernel_drops if self.rx_kernel_drops is not None else "unread"
        # veth counts a frame its XDP program could not put in a full AF_XDP ring as a drop too
        both = ": on veth the kernel's count holds the ring's" if self.rx_ring_drops and self.rx_kernel_drops else ""
        return (f"the receiving tester port {self.location} dropped frames itself ({self.rx_ring_drops} in its ring, "
                f"{kernel} in its kernel{both})")


def drop_warnings(ports: Iterable[PortDrops], lossy_rx: set[str], lossy_tx: set[str]) -> list[str]:
    """A warning for each port that dropped frames itself since the last start, on receive where a
    flow received there lost frames (``lossy_rx``: those ports' names), or on transmit at another
    tester port's receive ring where a flow it sent lost frames (``lossy_tx``): what a traffic stop
    answers, so that an OTG client that reads only the flows' counts hears that part of their loss
    was the tester's. A port's drops beside no loss were not the flows' (a neighbour's multicast)."""
    said = [why for p in ports for why in (p.describe() if p.name in lossy_rx else None,
                                           p.describe_tx() if p.name in lossy_tx else None) if why]
    return [f"{why} since the last start: the flows received there count these frames as lost, the tester's "
            "loss, not the DUT's (each port's drops: GET /netrig/agents, ports)" for why in said]


@dataclass(frozen=True, slots=True, kw_only=True)
class PortPacing:
    """How one tester port's sender kept its schedule since its flows last started from idle (the
    engine's ``Generator.tx_pacing``): what a local trial's ``pacing`` says, for served flows."""

    #: The port's name in the config, and its location (``AGENT/LOCATION`` at a controller).
    name: str
    location: str
    #: Frames sent since (0: the rest means nothing).
    frames: int = 0
    #: The most any flow's schedule shifted (time smooth pacing gave up), and the longest a frame
    #: waited after it fell due, ns.
    stretch_ns: int = 0
    max_lag_ns: int = 0
    #: The most frames in any 1-ms window, and what the running flows' rates put there (0: unpaced).
    peak_frames: int = 0
    intended_frames: float = 0.0
    #: Inter-departure gap per frame: median, 99th percentile, longest, ns.
    gap_p50_ns: int = 0
    gap_p99_ns: int = 0
    gap_max_ns: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowSending:
    """How one flow was sent since its last start: its frames, and when its first and its last left
    (the sending engine's clock, ns: only their difference is read, so no clock offset enters).
    OTG's flow metrics carry arrival times only, and a DUT that delays the last frames more than the
    first stretches those: a sending rate read from arrivals makes the DUT's delay the tester's."""

    name: str
    frames: int = 0
    first_ns: int = 0
    last_ns: int = 0
    #: Of ``frames``, those with no room for the signature (a size too small for it after the
    #: flow's headers): sent whole and counted by the ports, never by the flow's receivers.
    untracked: int = 0

    def pps(self) -> float | None:
        """Frames over the sending window (``None`` with fewer than two frames)."""
        if self.frames < 2 or self.last_ns <= self.first_ns:
            return None
        return (self.frames - 1) / ((self.last_ns - self.first_ns) / 1e9)


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowSequence:
    """What one flow's receivers made of its sequence numbers since its last start, as a trial's
    do (each receive queue's sequence window): of its ``frames_rx``, the frames whose sequence had
    arrived before (``duplicated``), and those below the highest that had (``reordered``). OTG's
    flow metrics have no room for them."""

    name: str
    duplicated: int = 0
    reordered: int = 0
    #: Every arrival, counted with them (``None``: a server that does not say): read beside
    #: ``duplicated`` it gives the unique frames of one count, with no frame arriving in between.
    frames_rx: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowIpdv:
    """One flow's |IPDV| (RFC 5481: the difference of consecutive frames' latencies) since its
    last start, as each receive queue saw its frames: the sum, the number of differences and the
    largest, ns; for a server's first 256 flows also their ``buckets`` (``(value, count)``, lowest
    first, at 2 significant digits: :func:`quantile` is a histogram's), empty beyond them. Two
    hosts' clocks' offset cancels out of a difference, so a controller adds them over its agents
    as they are."""

    name: str
    sum_ns: int = 0
    samples: int = 0
    max_ns: int = 0
    buckets: tuple[tuple[float, int], ...] = ()


#: The latency percentiles of a trial, by result field (``LatencySummary``'s).
QUANTILES = {"p50_ns": 0.5, "p90_ns": 0.9, "p99_ns": 0.99, "p999_ns": 0.999}


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowLatency:
    """One flow's latency since its last start over its unique frames, ns, as ``buckets`` of
    ``(value, count)``, lowest first: each value the highest of its bucket at 3 significant
    digits, so :meth:`quantile` is a histogram's (the trial's) and two receivers' buckets add
    (:func:`add_buckets`). At a controller each receiving agent's clock offset from the sender's
    is removed from its values, and ``uncertainty_ns`` is the correction's bound (0 within one
    agent): a quantile at or below it is not a measurement. A server has them for its first 256
    flows (each receiver's histograms)."""

    name: str
    buckets: tuple[tuple[float, int], ...] = ()
    uncertainty_ns: float = 0.0

    @property
    def frames(self) -> int:
        return sum(n for _, n in self.buckets)

    def quantile(self, q: float) -> float | None:
        return quantile(self.buckets, q)

    def on_time(self, late_ns: float) -> tuple[FlowLatency, int]:
        """The buckets at or below ``late_ns``, and the frames above it (late: a trial leaves them
        out of its latency and counts them lost), to the buckets' precision."""
        kept = tuple(b for b in self.buckets if b[0] <= late_ns)
        return dataclasses.replace(self, buckets=kept), self.frames - sum(n for _, n in kept)

    def percentiles(self) -> dict[str, float | None]:
        """:data:`QUANTILES` of the buckets, each ``None`` with no frames or at or below
        ``uncertainty_ns`` (not a measurement)."""
        return {k: v if (v := self.quantile(q)) is not None and v > self.uncertainty_ns else None
                for k, q in QUANTILES.items()}


def quantile(buckets: Iterable[tuple[float, int]], q: float) -> float | None:
    """The value below or at which a share ``q`` of the counts of ``buckets`` (``(value, count)``,
    lowest first) fall, as ``hdrhistogram::Histogram::value_at_quantile`` takes it (``None``: no
    counts)."""
    buckets = tuple(buckets)
    at, seen = max(1, math.ceil(q * sum(n for _, n in buckets))), 0
    for value, n in buckets:
        seen += n
        if seen >= at:
            return value
    return None


def add_buckets(*parts: Iterable[tuple[float, int]]) -> tuple[tuple[float, int], ...]:
    """Buckets summed value by value, lowest first."""
    total: dict[float, int] = {}
    for part in parts:
        for value, n in part:
            total[value] = total.get(value, 0) + n
    return tuple(sorted(total.items()))


#: The kernel's receive-drop counters of an interface that are the receiving host's own (its
#: queues and backlog full, its NIC out of descriptors): never a frame's content or the wire.
KERNEL_RX_DROPS = ("rx_dropped", "rx_missed_errors", "rx_fifo_errors", "rx_over_errors")
KERNEL_TX_DROPS = ("tx_dropped",)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentsReport:
    """``GET /netrig/agents``: ``ports``, ``sequence``, ``latency``, ``ipdv``, ``pacing`` and
    ``sending`` (``None``: a server that does not report them); the rest (a controller's ``agents``,
    ``flows``, ``events``, every server's ``supervision``) as given."""

    ports: tuple[PortDrops, ...] | None = None
    sequence: tuple[FlowSequence, ...] | None = None
    latency: tuple[FlowLatency, ...] | None = None
    ipdv: tuple[FlowIpdv, ...] | None = None
    pacing: tuple[PortPacing, ...] | None = None
    sending: tuple[FlowSending, ...] | None = None
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerRecord:
    """``/netrig/controller``: what the controller that set an agent's config left with it, so a
    controller started after it can take the run over (docs/distributed.md): the whole config (the
    agent's part is split from it) and the names of the agents it was split over. Empty: none."""

    config: dict[str, Any] = field(default_factory=dict)
    agents: tuple[str, ...] = ()
