"""netrig's own ``GET /netrig/agents`` answer as both ends write and read it (docs/otg.md,
docs/distributed.md): every server's tester ports with the frames they dropped themselves since
its last start; a controller's agents, cross-agent flows and events beside them, kept as given.

Read with :data:`read` (``read(AgentsReport, answer)``), written with
:func:`netrig.otgclient.typed.to_json`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from netrig.otgclient.typed import Reader

#: Reads a server's answer (integers sent as strings become ints).
read = Reader(coerce=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class PortDrops:
    """One tester port's own receive drops since its server's last start (a controller's receive
    start on an agent counts as one): frames the tester lost, never the DUT."""

    #: The port's name in the config, and its location (``AGENT/LOCATION`` at a controller).
    name: str
    location: str
    #: Frames its receive ring dropped (the engine's ``rx_ring_drops``: AF_XDP's ``rx_dropped`` and
    #: ``rx_ring_full``, AF_PACKET's ``tp_drops``).
    rx_ring_drops: int = 0
    #: Frames its kernel dropped on receive before the ring — a full backlog or XDP queue, the NIC
    #: out of descriptors (``IFLA_STATS64``: :data:`KERNEL_RX_DROPS`); ``None``: not read.
    rx_kernel_drops: int | None = None

    def describe(self) -> str | None:
        """``None`` when it dropped nothing, else what it dropped, in words."""
        if not self.rx_ring_drops and not self.rx_kernel_drops:
            return None
        return (f"the receiving tester port {self.location} dropped frames itself ({self.rx_ring_drops} in its ring, "
                f"{self.rx_kernel_drops if self.rx_kernel_drops is not None else 'unread'} in its kernel)")


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowSequence:
    """What one flow's receivers made of its sequence numbers since its last start, as a trial's
    do (each receive queue's sequence window): of its ``frames_rx``, the frames whose sequence had
    arrived before (``duplicated``), and those below the highest that had (``reordered``). OTG's
    flow metrics have no room for them."""

    name: str
    duplicated: int = 0
    reordered: int = 0


#: The kernel's receive-drop counters of an interface that are the receiving host's own (its
#: queues and backlog full, its NIC out of descriptors): never a frame's content or the wire.
KERNEL_RX_DROPS = ("rx_dropped", "rx_missed_errors", "rx_fifo_errors", "rx_over_errors")


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentsReport:
    """``GET /netrig/agents``: ``ports`` and ``sequence`` (``None``: a server that does not report
    them); the rest (a controller's ``agents``, ``flows``, ``events``, every server's
    ``supervision``) as given."""

    ports: tuple[PortDrops, ...] | None = None
    sequence: tuple[FlowSequence, ...] | None = None
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerRecord:
    """``/netrig/controller``: what the controller that set an agent's config left with it, so a
    controller started after it can take the run over (docs/distributed.md): the whole config (the
    agent's part is split from it) and the names of the agents it was split over. Empty: none."""

    config: dict[str, Any] = field(default_factory=dict)
    agents: tuple[str, ...] = ()
