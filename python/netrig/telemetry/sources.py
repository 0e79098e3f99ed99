"""Live sources read at every scrape: the counters of a running forwarder (``netrig forward``) and
of served flow groups (``netrig serve``). Each is a function that writes its counters into the
store; a counter that a source restarts (a new forwarder, a flow started again) becomes a new
series with a new creation time, never a silent fall."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from netrig.telemetry import families as F
from netrig.telemetry.store import Store


class QueueStats(Protocol):
    """What a source reads of one forwarder queue (``_native.ForwardQueueStats``)."""

    @property
    def ifname(self) -> str: ...
    @property
    def queue(self) -> int: ...
    @property
    def rx_frames(self) -> int: ...
    @property
    def rx_bytes(self) -> int: ...
    @property
    def tx_frames(self) -> int: ...
    @property
    def tx_bytes(self) -> int: ...
    @property
    def tx_drops(self) -> int: ...
    @property
    def rx_ring_drops(self) -> int: ...
    @property
    def tx_errors(self) -> int: ...


def forwarder_source(stats: Callable[[], Iterable[QueueStats]]) -> Callable[[Store], None]:
    """A source of a forwarder's per-queue counters (``stats``: ``Forwarder.stats``, thread-safe)."""
    def read(store: Store) -> None:
        for q in stats():
            labels = (q.ifname, str(q.queue))
            for name, fam in F.FORWARD.items():
                store.set_counter(fam, labels, getattr(q, name))
    return read


@dataclass(frozen=True)
class FlowGroupCounts:
    """One served flow group now (an OTG flow of ``netrig serve``), cumulative since it started."""

    name: str
    tx_port: str
    rx_port: str
    frames_sent: int
    frames_received: int
    bytes_sent: int
    bytes_received: int


def fold(groups: Sequence[FlowGroupCounts], most: int = F.MAX_SERVED_GROUPS) -> list[FlowGroupCounts]:
    """At most ``most`` groups: past that, consecutive groups are summed into ranges named
    ``"<first>..<last>"`` (ports joined when they differ), so a scrape's cost stays bounded."""
    if len(groups) <= most:
        return list(groups)
    out = []
    for k in range(most):
        part = groups[k * len(groups) // most:(k + 1) * len(groups) // most]
        out.append(FlowGroupCounts(f"{part[0].name}..{part[-1].name}",
                                   ",".join(sorted({g.tx_port for g in part})),
                                   ",".join(sorted({g.rx_port for g in part})),
                                   *(sum(getattr(g, f) for g in part) for f in F.SERVED)))
    return out


def flow_group_source(read_groups: Callable[[], Iterable[FlowGroupCounts]]) -> Callable[[Store], None]:
    """A source of served flow groups (``read_groups`` is called at every scrape, on the endpoint's
    thread: it must be thread-safe, e.g. take the service's lock)."""
    def read(store: Store) -> None:
        seen = set()
        for g in fold(list(read_groups())):
            labels = (g.name, g.tx_port, g.rx_port)
            seen.add(labels)
            for name, fam in F.SERVED.items():
                store.set_counter(fam, labels, getattr(g, name))
        store.retain(F.SERVED.values(), seen)  # flows of an earlier config are gone
    return read
