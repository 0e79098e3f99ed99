"""The agents' flow and port metrics → one tester's (docs/distributed.md).

A flow's sending side (frames and bytes sent, their rates, ``transmit``) comes from the agent that
sends it; its receiving side (frames and bytes received, rates, timestamps, latency) is the sum,
minimum or maximum over the agents that receive it. Loss is recomputed from the merged counts.
Latency between two agents holds their clocks' offset: it is corrected by the controller's
estimate, and each of its statistics (minimum, average, maximum) is reported in the OTG metric only
when it exceeds the estimate's uncertainty — a value within its own bound could be 0, or less, and
is no measurement: it is left out, never clamped to 0 — and the flow is listed under
``/netrig/agents`` with its corrected values and their bound. A flow's ``port_tx`` and ``port_rx``
are the config's (the sending agent's own row names the stand-in port it was given: ``split``). A
flow with a part on an agent that is down keeps that part's last counts and reports no loss: it is
stale, never lossy.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from netrig.controller import clock
from netrig.controller.split import FlowRoute
from netrig.otg import metrics
from netrig.otg.objects import Flow
from netrig.otgclient.messages import FlowMetric, MetricLatency, MetricTimestamp, PortMetric
from netrig.otgclient.report import FlowIpdv, FlowLatency, FlowSending, FlowSequence, add_buckets

#: A flow's latency statistics, as OTG's ``MetricLatency`` names them.
STATISTICS = ("minimum_ns", "average_ns", "maximum_ns")


@dataclass(frozen=True)
class LatencyNote:
    """A cross-agent flow's latency correction: its statistics after the clocks' offset was
    removed, the offset and its bound, ns, and where they came from (``clock``: a source of
    :data:`clock.Source`, or its receiving agents' sources joined by "+"). A statistic is
    reported in OTG only when above the bound."""

    flow: str
    minimum_ns: float
    average_ns: float
    maximum_ns: float
    offset_ns: float
    uncertainty_ns: float
    clock: str = "exchange"

    @property
    def reported(self) -> tuple[str, ...]:
        """The statistics the OTG metric carries (:data:`STATISTICS` above the bound)."""
        return tuple(k for k in STATISTICS if getattr(self, k) > self.uncertainty_ns)


#: Each agent's clock estimate (``None``: none yet).
Clocks = dict[str, clock.ClockEstimate | None]
N = TypeVar("N", int, float)
#: A per-flow answer of an agent, combined by flow name (:func:`_by_name`).
R = TypeVar("R", FlowSequence, FlowIpdv, FlowSending)


def _rx(tx: FlowMetric, rx: Sequence[FlowMetric], get: Callable[[FlowMetric], N | None]) -> N | None:
    """A receiving side's counter summed over the receiving agents (the sender's row's when none
    reports it)."""
    values = [v for r in rx if (v := get(r)) is not None]
    return sum(values) if values else get(tx)


def flow_row(route: FlowRoute, rows: dict[str, FlowMetric], flow: Flow, clocks: Clocks,
             down: set[str]) -> tuple[FlowMetric, LatencyNote | None]:
    """One flow's metric from its agents' ``rows`` (agent → that agent's row of the flow)."""
    tx = rows.get(route.tx_agent) or FlowMetric(name=route.name, transmit="stopped")
    rx = [rows[a] for a in route.rx_agents if a in rows]
    frames_rx = _rx(tx, rx, lambda r: r.frames_rx)
    latency, note = _latency(route, rows, clocks)
    loss = None if route.untracked else tx.loss  # the agents' frames_tx count frames no receiver can
    if loss is not None:
        expected = (tx.frames_tx or 0) * flow.metrics.ratio(len(route.rx_ports))
        loss = max(0.0, expected - (frames_rx or 0)) / expected * 100 if expected else 0.0
    stale = bool(down & set(route.agents))
    out = dataclasses.replace(
        tx, frames_rx=frames_rx, bytes_rx=_rx(tx, rx, lambda r: r.bytes_rx),
        frames_rx_rate=_rx(tx, rx, lambda r: r.frames_rx_rate), rx_rate_bytes=_rx(tx, rx, lambda r: r.rx_rate_bytes),
        rx_rate_bps=_rx(tx, rx, lambda r: r.rx_rate_bps), rx_rate_kbps=_rx(tx, rx, lambda r: r.rx_rate_kbps),
        rx_rate_mbps=_rx(tx, rx, lambda r: r.rx_rate_mbps), rx_l1_rate_bps=_rx(tx, rx, lambda r: r.rx_l1_rate_bps),
        timestamps=_timestamps(route, rows, clocks), latency=latency, loss=None if stale else loss,
        transmit="stopped" if stale else tx.transmit, port_tx=route.tx_port, port_rx=route.rx_ports[0])
    return out, note


def _timestamps(route: FlowRoute, rows: dict[str, FlowMetric], clocks: Clocks) -> MetricTimestamp | None:
    """First and last arrival over the receiving agents, on the controller's clock."""
    stamps = []
    for a in route.rx_agents:
        row, est = rows.get(a), clocks.get(a)
        ts = row.timestamps if row is not None else None
        shift = est.offset_ns if est is not None and route.crosses else 0.0
        if ts is not None and ts.first_timestamp_ns is not None and ts.last_timestamp_ns is not None:
            stamps.append((ts.first_timestamp_ns - shift, ts.last_timestamp_ns - shift))
    if not stamps:
        return None
    return MetricTimestamp(first_timestamp_ns=min(s[0] for s in stamps), last_timestamp_ns=max(s[1] for s in stamps))


def _correction(route: FlowRoute, agent: str, clocks: Clocks) -> clock.Correction | None:
    """What removes receiving ``agent``'s clock offset from the sender's out of a latency it
    measured (``None``: the sender's own agent, nothing to remove; an unbounded one without both
    clocks' estimates)."""
    if agent == route.tx_agent:
        return None
    tx, rx = clocks.get(route.tx_agent), clocks.get(agent)
    return clock.between(tx, rx) if tx and rx else clock.Correction(0.0, float("inf"), "exchange")


def _latency(route: FlowRoute, rows: dict[str, FlowMetric],
             clocks: Clocks) -> tuple[MetricLatency | None, LatencyNote | None]:
    """Latency over the receiving agents, each corrected by its clock's offset from the sender's.
    A flow within one agent is exact; a cross-agent one keeps only the statistics above the
    correction's bound (``None``: none is)."""
    parts = []  # (min, max, average, frames, offset removed, uncertainty)
    sources: set[clock.Source] = set()
    for a in route.rx_agents:
        row = rows.get(a)
        lat, n = (row.latency, row.frames_rx) if row is not None else (None, None)
        if lat is None or not n or lat.minimum_ns is None or lat.maximum_ns is None or lat.average_ns is None:
            continue
        off = unc = 0.0
        if (c := _correction(route, a, clocks)) is not None:
            off, unc = c.offset_ns, c.uncertainty_ns
            sources.add(c.source)
        parts.append((lat.minimum_ns - off, lat.maximum_ns - off, lat.average_ns - off, n, off, unc))
    if not parts:
        return None, None
    frames = sum(p[3] for p in parts)
    values = {"minimum_ns": min(p[0] for p in parts), "average_ns": sum(p[2] * p[3] for p in parts) / frames,
              "maximum_ns": max(p[1] for p in parts)}
    if not route.crosses:
        return MetricLatency(**values), None
    note = LatencyNote(route.name, **values, offset_ns=sum(p[4] * p[3] for p in parts) / frames,
                       uncertainty_ns=max(p[5] for p in parts), clock="+".join(sorted(sources)) or "exchange")
    kept = {k: values[k] for k in note.reported}
    return (MetricLatency(**kept) if kept else None), note


def port_row(row: PortMetric, location: str, down: bool) -> PortMetric:
    """An agent's port metric as the controller's: its global location; a port of an agent that is
    down reports its link down and nothing sending."""
    if row.location is not None:
        row = dataclasses.replace(row, location=location)
    if down:
        row = dataclasses.replace(row, link="down", transmit="stopped")
    return row


def tagged_rows(route: FlowRoute, rows: dict[str, FlowMetric], req: metrics.TaggedRequest,
                loss: bool) -> list[dict] | None:
    """A tagged flow's ``Flow.TaggedMetric`` objects over its agents: sent per combination as its
    sending agent counted, received summed over its receiving agents (None: not a tagged flow, or
    not asked for)."""
    tx = rows.get(route.tx_agent)
    if not req.include or tx is None or tx.tagged_metrics is None:
        return None
    rx = [list(r.tagged_metrics or ()) for a in route.rx_agents if (r := rows.get(a)) is not None]
    return metrics.merged_tagged_metrics(list(tx.tagged_metrics), rx, loss, req)


def _by_name(answers: Sequence[Sequence[R] | None], add: Callable[[R, R], R],
             empty: Callable[[str], R]) -> list[dict[str, object]] | None:
    """Every agent's per-flow answers combined by flow name (``add(total so far, one)``, starting
    from ``empty(name)``); ``None`` when an agent did not say (a server older than them): a partial
    sum would read as fewer."""
    if any(a is None for a in answers):
        return None
    total: dict[str, R] = {}
    for a in answers:
        for q in a or ():
            total[q.name] = add(total.get(q.name) or empty(q.name), q)
    return [dataclasses.asdict(q) for q in total.values()]


def sequence(answers: Sequence[Sequence[FlowSequence] | None]) -> list[dict[str, object]] | None:
    """Every flow's duplicated and reordered frames over the agents' answers (``GET /netrig/agents``'
    ``sequence``): summed by flow name, since each agent counts the frames it received itself."""
    return _by_name(answers, lambda h, q: FlowSequence(
        name=q.name, duplicated=h.duplicated + q.duplicated, reordered=h.reordered + q.reordered,
        frames_rx=None if h.frames_rx is None or q.frames_rx is None else h.frames_rx + q.frames_rx),
        lambda name: FlowSequence(name=name, frames_rx=0))


def latency(routes: Sequence[FlowRoute], answers: dict[str, Sequence[FlowLatency] | None],
            clocks: dict[str, Clocks]) -> list[dict[str, object]] | None:
    """Every flow's latency buckets over the agents that receive it (``GET /netrig/agents``'
    ``latency``), each receiving agent's values less its clock's offset from the sender's (by the
    flow's ``clocks``, flow name → estimates), with the largest bound of those corrections
    (:func:`_latency`'s, per agent). A flow an agent has no buckets for (beyond its first 256) has
    none; ``None`` when an agent did not say."""
    if any(a is None for a in answers.values()):
        return None
    by_agent = {a: {f.name: f for f in got or ()} for a, got in answers.items()}
    out = []
    for r in routes:
        parts, unc = [], 0.0
        for a in r.rx_agents:
            got = by_agent.get(a, {}).get(r.name)
            if got is None:
                break
            off = 0.0
            if (c := _correction(r, a, clocks.get(r.name, {}))) is not None:
                off, unc = c.offset_ns, max(unc, c.uncertainty_ns)
            parts.append([(v - off, n) for v, n in got.buckets])
        else:
            out.append(dataclasses.asdict(FlowLatency(name=r.name, buckets=add_buckets(*parts), uncertainty_ns=unc)))
    return out


def sending(answers: Sequence[Sequence[FlowSending] | None]) -> list[dict[str, object]] | None:
    """Every flow's sending window over the agents' answers (``GET /netrig/agents``' ``sending``):
    its sending agent's, the one that sent its frames (a receiving agent holds it unsent)."""
    return _by_name(answers, lambda h, q: q if q.frames > h.frames else h, lambda name: FlowSending(name=name))


def ipdv(answers: Sequence[Sequence[FlowIpdv] | None]) -> list[dict[str, object]] | None:
    """Every flow's |IPDV| over the agents' answers (``GET /netrig/agents``' ``ipdv``): sums,
    counts and buckets added, the largest kept, by flow name (no clock correction: an offset
    cancels out of a difference)."""
    return _by_name(answers, lambda h, q: FlowIpdv(name=q.name, sum_ns=h.sum_ns + q.sum_ns,
                                                   samples=h.samples + q.samples, max_ns=max(h.max_ns, q.max_ns),
                                                   buckets=add_buckets(h.buckets, q.buckets)),
                    lambda name: FlowIpdv(name=name))
