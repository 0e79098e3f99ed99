"""The agents' flow and port metrics → one tester's (docs/distributed.md).

A flow's sending side (frames and bytes sent, their rates, ``transmit``) comes from the agent that
sends it; its receiving side (frames and bytes received, rates, timestamps, latency) is the sum,
minimum or maximum over the agents that receive it. Loss is recomputed from the merged counts.
Latency between two agents holds their clocks' offset: it is corrected by the controller's
estimate, and when the estimate's uncertainty is larger than the corrected value the latency is
left out of the OTG metric (it would be a number without meaning) and the flow listed under
``/netrig/agents`` with its bound. A flow with a part on an agent that is down keeps that part's
last counts and reports no loss: it is stale, never lossy.
"""
from __future__ import annotations

from dataclasses import dataclass

from netrig.otg import clock
from netrig.otg.split import FlowRoute

RX_SUMS = ("frames_rx", "bytes_rx", "frames_rx_rate", "rx_rate_bytes", "rx_rate_bps", "rx_rate_kbps",
           "rx_rate_mbps", "rx_l1_rate_bps")


@dataclass(frozen=True)
class LatencyNote:
    """A cross-agent flow's latency correction: the clocks' offset removed and its bound, ns."""

    flow: str
    #: The average latency after the correction, ns (reported in OTG only when above the bound).
    average_ns: float
    offset_ns: float
    uncertainty_ns: float
    reported: bool


def ratio_of(flow: dict) -> float:
    """Frames expected across the receiving ports per frame sent (OTG ``rx_tx_ratio``)."""
    r = (flow.get("metrics") or {}).get("rx_tx_ratio") or {}
    if r.get("choice") == "rx_count":
        rx = (flow.get("tx_rx") or {}).get("port") or {}
        return float(max(len(rx.get("rx_names") or []), 1))
    return float(r.get("value") or 1.0)


def flow_row(route: FlowRoute, rows: dict[str, dict], flow: dict, clocks: dict[str, clock.ClockEstimate | None],
             down: set[str]) -> tuple[dict, LatencyNote | None]:
    """One flow's metric from its agents' ``rows`` (agent → that agent's row of the flow)."""
    out = dict(rows.get(route.tx_agent) or {"name": route.name, "transmit": "stopped"})
    rx_rows = [rows[a] for a in route.rx_agents if a in rows]
    for k in RX_SUMS:
        if any(k in r for r in rx_rows):
            out[k] = sum(r.get(k, 0) for r in rx_rows)
    _timestamps(out, route, rows, clocks)
    note = _latency(out, route, rows, clocks)
    if "loss" in out:
        expected = out.get("frames_tx", 0) * ratio_of(flow)
        out["loss"] = max(0.0, expected - out.get("frames_rx", 0)) / expected * 100 if expected else 0.0
    if down & set(route.agents):
        out.pop("loss", None)
        out["transmit"] = "stopped"
    return out, note


def _timestamps(out: dict, route: FlowRoute, rows: dict[str, dict],
                clocks: dict[str, clock.ClockEstimate | None]) -> None:
    """First and last arrival over the receiving agents, on the controller's clock."""
    stamps = []
    for a in route.rx_agents:
        ts, est = (rows.get(a) or {}).get("timestamps"), clocks.get(a)
        shift = est.offset_ns if est is not None and route.crosses else 0.0
        if ts:
            stamps.append((ts["first_timestamp_ns"] - shift, ts["last_timestamp_ns"] - shift))
    out.pop("timestamps", None)
    if stamps:
        out["timestamps"] = {"first_timestamp_ns": min(s[0] for s in stamps),
                             "last_timestamp_ns": max(s[1] for s in stamps)}


def _latency(out: dict, route: FlowRoute, rows: dict[str, dict],
             clocks: dict[str, clock.ClockEstimate | None]) -> LatencyNote | None:
    """Latency over the receiving agents, each corrected by its clock's offset from the sender's."""
    out.pop("latency", None)
    parts = []  # (min, max, average, frames, offset removed, uncertainty)
    for a in route.rx_agents:
        lat, n = (rows.get(a) or {}).get("latency"), (rows.get(a) or {}).get("frames_rx", 0)
        if not lat or not n:
            continue
        off = unc = 0.0
        if a != route.tx_agent:
            tx, rx = clocks.get(route.tx_agent), clocks.get(a)
            off, unc = clock.between(tx, rx) if tx and rx else (0.0, float("inf"))
        parts.append((lat["minimum_ns"] - off, lat["maximum_ns"] - off, lat["average_ns"] - off, n, off, unc))
    if not parts:
        return None
    frames = sum(p[3] for p in parts)
    avg = sum(p[2] * p[3] for p in parts) / frames
    unc = max(p[5] for p in parts)
    reported = unc <= abs(avg)
    if reported:
        out["latency"] = {"minimum_ns": max(0.0, min(p[0] for p in parts)),
                          "maximum_ns": max(0.0, max(p[1] for p in parts)), "average_ns": max(0.0, avg)}
    if not route.crosses:
        return None
    return LatencyNote(route.name, avg, sum(p[4] * p[3] for p in parts) / frames, unc, reported)


def port_row(row: dict, location: str, down: bool) -> dict:
    """An agent's port metric as the controller's: its global location; a port of an agent that is
    down reports its link down and nothing sending."""
    out = {**row, "location": location} if "location" in row else dict(row)
    if down:
        out["link"], out["transmit"] = "down", "stopped"
    return out
