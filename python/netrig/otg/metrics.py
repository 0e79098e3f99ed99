"""Engine counters → OTG flow and port metrics (``Flow.Metric``, ``Port.Metric``).

Rates are differences of successive samples (at least :data:`RATE_WINDOW_S` apart; a poll sooner
than that repeats the last rates). A flow's ``transmit`` is ``started`` until its last frame has
had time to arrive: the engine says it is done, and either every expected frame arrived (counted
once: a duplicate is no arrival of a frame still in flight) or the drain time passed since the
last one left — so a client that polls until ``stopped`` reads final
counts. Only properties that every supported client version knows are sent (gosnappi refuses
unknown ones).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from netrig import _native
from netrig.errors import ConfigError
from netrig.model import WIRE_OVERHEAD_BYTES

if TYPE_CHECKING:  # the mapping imports the OTG model (snappi: 0.45 s), which a client of metrics never needs
    from netrig.otg import tags
    from netrig.otg.mapping import Plan

#: Shortest time between two rate samples, seconds.
RATE_WINDOW_S = 0.2


@dataclass
class Rates:
    """Per-second rates of counters, from successive samples: per counter ``[t, frames, bytes, fps,
    bytes/s]`` of the last sample."""

    samples: dict[tuple[str, str], list] = field(default_factory=dict)

    def rate(self, key: tuple[str, str], frames: int, nbytes: int, now: float) -> tuple[float, float]:
        """(frames/s, bytes/s) of counter ``key`` now."""
        s = self.samples.get(key)
        if s is None or frames < s[1]:
            self.samples[key] = [now, frames, nbytes, 0.0, 0.0]
            return 0.0, 0.0
        dt = now - s[0]
        if dt >= RATE_WINDOW_S:
            s[3], s[4] = (frames - s[1]) / dt, (nbytes - s[2]) / dt
            s[0], s[1], s[2] = now, frames, nbytes
        return s[3], s[4]

    def reset(self, names: Sequence[str]) -> None:
        for n in names:
            for kind in ("tx", "rx"):
                self.samples.pop((kind, n), None)


def transmit(s: _native.GenFlowStats, ratio: float, drain_ns: int, now_ns: int) -> str:
    """OTG's transmit state of a flow (see the module doc)."""
    if s.state == "running":
        return "started"
    if s.state == "paused":
        return "paused"
    if s.state == "done":
        # Unique arrivals: a DUT's duplicates would otherwise make up for frames still in flight.
        arrived = s.rx_frames - s.rx_duplicated >= (s.tx_frames - s.tx_untracked) * ratio
        return "stopped" if arrived or now_ns - s.tx_last_ns >= drain_ns else "started"
    return "stopped"


@dataclass(frozen=True)
class TaggedRequest:
    """What a metrics request asks of tagged flows (``FlowTaggedMetricsFilter``): the tag counts
    of ``tags_of(flow index)`` (``(sent, received)`` per frame index, None: not counted)."""

    tags_of: Callable[[int], tuple[list[int], list[int]] | None]
    include: bool = True
    include_empty: bool = False
    names: tuple[str, ...] = ()
    #: Per tag name, the values kept (as integers); a tag not named keeps every value.
    filters: dict[str, frozenset[int]] = field(default_factory=dict)


def tagged_request(d: dict | None, tags_of: Callable[[int], tuple[list[int], list[int]] | None]) -> TaggedRequest:
    """A flow metrics request's ``tagged_metrics`` (``FlowTaggedMetricsFilter``; left out: the
    model's defaults, tagged metrics included) over the counts ``tags_of`` gives."""
    d = d or {}
    filters: dict[str, frozenset[int]] = {}
    for k, f in enumerate(d.get("filters") or ()):
        try:
            filters[f["name"]] = frozenset(int(v, 0) for v in f.get("values") or ())
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"flow.tagged_metrics.filters[{k}]", "give a tag name and its values as hex "
                                                                   "(0x0a) or decimal strings") from None
    return TaggedRequest(tags_of, bool(d.get("include", True)), bool(d.get("include_empty_metrics", False)),
                         tuple(d.get("metric_names") or ()), filters)


#: One combination of tag values, as rows are built: ((name, hex, value) per tag), sent, received.
TagRow = tuple[tuple[tuple[str, str, int], ...], int, int]


def tagged_metrics(f: tags.FlowTags, counts: tuple[list[int], list[int]], loss: bool,
                   req: TaggedRequest) -> list[dict]:
    """A tagged flow's ``Flow.TaggedMetric`` objects: one per combination of tag values."""
    return tag_rows(((tuple((t.name, t.hex(v), v) for t, v in zip(f.tags, values)), tx, rx)
                     for values, tx, rx in f.rows(*counts)), loss, req)


def merged_tagged_metrics(tx: Sequence[dict], rx: Sequence[Sequence[dict]], loss: bool,
                          req: TaggedRequest) -> list[dict]:
    """One tagged flow's ``Flow.TaggedMetric`` objects from its agents' (a controller's): sent as
    the sending agent counted them (``tx``: its rows, every combination), received summed over the
    receiving agents' rows (``rx``) combination by combination."""
    def key(m: dict) -> tuple[tuple[str, str, int], ...]:
        return tuple((t["name"], t["value"]["hex"], int(t["value"]["hex"], 16)) for t in m["tags"])

    sums: dict[tuple[tuple[str, str, int], ...], list[int]] = {key(m): [m.get("frames_tx") or 0, 0] for m in tx}
    for rows in rx:
        for m in rows:
            sums.setdefault(key(m), [0, 0])[1] += m.get("frames_rx") or 0
    return tag_rows(((k, t, r) for k, (t, r) in sums.items()), loss, req)


def tag_rows(rows: Iterable[TagRow], loss: bool, req: TaggedRequest) -> list[dict]:
    """``Flow.TaggedMetric`` objects of ``rows`` as ``req`` asks: empty ones only when asked for,
    the values its filters keep, the metrics it names."""
    out = []
    for tags_, tx, rx in rows:
        if not (tx or rx or req.include_empty):
            continue
        if any(name in req.filters and v not in req.filters[name] for name, _, v in tags_):
            continue
        named = [{"name": name, "value": {"choice": "hex", "hex": h}} for name, h, _ in tags_]
        m: dict = {"tags": named, "frames_tx": tx, "frames_rx": rx}
        if loss:
            m["loss"] = max(0.0, tx - rx) / tx * 100 if tx else 0.0
        if req.names:
            m = {k: v for k, v in m.items() if k == "tags" or k in req.names}
        out.append(m)
    return out


def expected_rx(s: _native.GenFlowStats, rx_tx_ratio: float) -> float:
    """The frames a flow's receivers should have counted: its signed frames sent (the others are
    counted per port only) times the frames expected per frame sent."""
    return (s.tx_frames - s.tx_untracked) * rx_tx_ratio


def flow_metrics(plan: Plan, stats: Sequence[_native.GenFlowStats], which: Sequence[int], rates: Rates,
                 drain_ns: int, realtime_offset_ns: int, names: Sequence[str] = (),
                 tagged: TaggedRequest | None = None) -> list[dict]:
    """``Flow.Metric`` objects of flows ``which`` (``stats``: theirs, in that order; ``names``: only
    these metrics, as OTG's ``metric_names``; ``tagged``: a tagged flow's counts per tag value)."""
    now, now_ns = time.monotonic(), time.monotonic_ns()
    out = []
    wire = WIRE_OVERHEAD_BYTES * 8  # layer-1 rates: preamble, SFD, gap
    for i, s in zip(which, stats):
        f = plan.flows[i]
        tx_frames, rx_frames = s.tx_frames, s.rx_frames
        tx_fps, tx_bps = rates.rate(("tx", f.name), tx_frames, s.tx_bytes, now)
        rx_fps, rx_bps = rates.rate(("rx", f.name), rx_frames, s.rx_bytes, now)
        state = transmit(s, f.rx_tx_ratio, drain_ns, now_ns)
        if state != "started":
            tx_fps = tx_bps = 0.0
        tx_bits, rx_bits = tx_bps * 8, rx_bps * 8
        m: dict = {"name": f.name, "port_tx": f.tx, "port_rx": f.rx[0] if f.rx else "", "transmit": state,
                   "frames_tx": tx_frames, "frames_rx": rx_frames, "bytes_tx": s.tx_bytes, "bytes_rx": s.rx_bytes,
                   "frames_tx_rate": tx_fps, "frames_rx_rate": rx_fps,
                   "tx_rate_bytes": tx_bps, "tx_rate_bps": tx_bits, "tx_rate_kbps": tx_bits / 1e3,
                   "tx_rate_mbps": tx_bits / 1e6, "tx_l1_rate_bps": tx_bits + tx_fps * wire,
                   "rx_rate_bytes": rx_bps, "rx_rate_bps": rx_bits, "rx_rate_kbps": rx_bits / 1e3,
                   "rx_rate_mbps": rx_bits / 1e6, "rx_l1_rate_bps": rx_bits + rx_fps * wire}
        if f.loss:
            expected = expected_rx(s, f.rx_tx_ratio)
            m["loss"] = max(0.0, expected - rx_frames) / expected * 100 if expected else 0.0
        if f.timestamps and rx_frames:
            m["timestamps"] = {"first_timestamp_ns": float(s.rx_first_ns + realtime_offset_ns),
                               "last_timestamp_ns": float(s.rx_last_ns + realtime_offset_ns)}
        if f.latency and s.latency_frames:
            m["latency"] = {"minimum_ns": float(s.latency_min_ns), "maximum_ns": float(s.latency_max_ns),
                            "average_ns": s.latency_sum_ns / s.latency_frames}
        if names:
            m = {k: v for k, v in m.items() if k == "name" or k in names}
        counts = tagged.tags_of(i) if tagged is not None and tagged.include and f.tags is not None else None
        if counts is not None and f.tags is not None and tagged is not None:
            m["tagged_metrics"] = tagged_metrics(f.tags, counts, f.loss, tagged)
        out.append(m)
    return out


def port_metrics(plan: Plan, ports: Sequence[_native.GenPortStats], which: Sequence[int], rates: Rates,
                 sending: set[str], names: Sequence[str] = ()) -> list[dict]:
    """``Port.Metric`` objects of ports ``which`` (``sending``: names of ports with flows started)."""
    now = time.monotonic()
    out = []
    for i in which:
        name, p = plan.port_names[i], ports[i]
        tx_fps, tx_bps = rates.rate(("port-tx", name), p.tx_frames, p.tx_bytes, now)
        rx_fps, rx_bps = rates.rate(("port-rx", name), p.rx_frames, p.rx_bytes, now)
        m: dict = {"name": name, "location": plan.serve_ports[i].name,
                   "link": "down" if p.link_up is False else "up",
                   "capture": "started" if p.capturing else "stopped",
                   "frames_tx": p.tx_frames, "frames_rx": p.rx_frames, "bytes_tx": p.tx_bytes, "bytes_rx": p.rx_bytes,
                   "frames_tx_rate": tx_fps, "frames_rx_rate": rx_fps, "bytes_tx_rate": tx_bps, "bytes_rx_rate": rx_bps,
                   "transmit": "started" if name in sending else "stopped"}
        if plan.line_rates[i]:
            m["speed"] = int(plan.line_rates[i] or 0)
        if names:
            m = {k: v for k, v in m.items() if k == "name" or k in names}
        out.append(m)
    return out
