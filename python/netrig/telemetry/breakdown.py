"""The engine's breakdown of one finished trial, read through types: per stream, per port and per
flow group (a range of a stream's flow ids), from the engine result a trial's counts keep (the
``engine`` of ``TrialCounts.raw``: ``_native.TrialResult.to_dict()``, the same record ``result.json``
holds). A trial without one (a simulated DUT, a stack trial) has no breakdown.

Flow groups bound the series a stream adds: its N flows are cut into at most
:data:`~netrig.telemetry.families.FLOW_GROUPS` ranges of flow ids (``"0-255"``), so a scrape
costs the same at 1 flow and at 2^20.
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from netrig.errors import ResultError
from netrig.measure import TrialCounts
from netrig.results.typed import from_dict
from netrig.telemetry.families import FLOW_GROUPS


@dataclass(frozen=True)
class GroupCounts:
    """Frames of one flow group of a stream."""

    name: str
    frames_sent: int
    frames_received: int
    frames_lost: int


@dataclass(frozen=True)
class StreamCounts:
    name: str
    frames_sent: int
    frames_received: int
    bytes_sent: int
    bytes_received: int
    groups: tuple[GroupCounts, ...]


@dataclass(frozen=True)
class PortCounts:
    name: str
    tx_frames: int
    rx_frames: int
    tx_bytes: int
    rx_bytes: int
    rx_ring_drops: int


@dataclass(frozen=True)
class Breakdown:
    streams: tuple[StreamCounts, ...]
    ports: tuple[PortCounts, ...]

    @classmethod
    def of(cls, counts: TrialCounts) -> Breakdown | None:
        """The breakdown of a trial's counts (``None``: no engine result, or not one this reads)."""
        try:
            engine = from_dict(_Raw, counts.raw).engine if isinstance(counts.raw, Mapping) else None
            if engine is None:
                return None
            return cls(tuple(StreamCounts(s.name, s.frames_sent, s.frames_received, s.bytes_sent, s.bytes_received,
                                          flow_groups(s.flow_results or (), s.flows)) for s in engine.streams),
                       engine.ports)
        except (ResultError, KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class _Stream:
    """A stream of the engine's result (``StreamResult.to_dict()``); its per-flow counts stay the
    engine's list (read in one pass by :func:`flow_groups`: a typed object per flow would cost
    seconds at a million flows, at every trial's end)."""

    name: str
    frames_sent: int
    frames_received: int
    bytes_sent: int
    bytes_received: int
    flows: int
    flow_results: Any = None


@dataclass(frozen=True)
class _Engine:
    """The part of the engine's result (``TrialResult.to_dict()``) the breakdown reads."""

    streams: tuple[_Stream, ...] = ()
    ports: tuple[PortCounts, ...] = ()


@dataclass(frozen=True)
class _Raw:
    """A trial's raw counts (``TrialCounts.raw``): the engine's result, when an engine ran it."""

    engine: _Engine | None = None


def group_bounds(flows: int) -> list[tuple[int, int]]:
    """The flow-id ranges (first, last) of a stream of ``flows`` flows: at most ``FLOW_GROUPS``."""
    n = max(1, min(FLOW_GROUPS, flows))
    return [(g * flows // n, (g + 1) * flows // n - 1) for g in range(n)]


def flow_groups(flows: Sequence[Mapping[str, Any]], count: int) -> tuple[GroupCounts, ...]:
    """Per-flow counts (``FlowResult.to_dict()``) summed into the stream's flow groups; none when the
    trial kept no per-flow counts."""
    if not flows or count < 1:
        return ()
    bounds = group_bounds(count)
    starts = [lo for lo, _ in bounds]
    sums = [[0, 0, 0] for _ in bounds]
    for f in flows:
        row = sums[max(0, bisect_right(starts, int(f["flow_id"])) - 1)]
        row[0] += int(f["frames_sent"])
        row[1] += int(f["frames_received"])
        row[2] += int(f["frames_lost"])
    return tuple(GroupCounts(f"{lo}-{hi}", *row) for (lo, hi), row in zip(bounds, sums))
