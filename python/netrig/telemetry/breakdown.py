"""The engine's breakdown of one finished trial, read through types: per stream, per port and per
flow group (a range of a stream's flow ids), from the engine result a trial's counts keep
(``TrialCounts.raw["engine"]``: ``_native.TrialResult.to_dict()``, the same record ``result.json``
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

from netrig.measure import TrialCounts
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
        engine = counts.raw.get("engine") if isinstance(counts.raw, Mapping) else None
        if not isinstance(engine, Mapping):
            return None
        try:
            return cls(tuple(_stream(s) for s in engine.get("streams") or ()),
                       tuple(_port(p) for p in engine.get("ports") or ()))
        except (KeyError, TypeError, ValueError):
            return None


def _stream(s: Mapping[str, Any]) -> StreamCounts:
    return StreamCounts(str(s["name"]), int(s["frames_sent"]), int(s["frames_received"]), int(s["bytes_sent"]),
                        int(s["bytes_received"]), flow_groups(s.get("flow_results") or (), int(s["flows"])))


def _port(p: Mapping[str, Any]) -> PortCounts:
    return PortCounts(str(p["name"]), int(p["tx_frames"]), int(p["rx_frames"]), int(p["tx_bytes"]),
                      int(p["rx_bytes"]), int(p["rx_ring_drops"]))


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
