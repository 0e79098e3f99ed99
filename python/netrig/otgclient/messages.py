"""The OTG answers a client reads, as frozen dataclasses named after the model's classes (their
properties, in its order; ``tests/otg/test_objects.py`` holds them equal to snappi's tables).

Read with :data:`read` (``read(MetricsResponse, answer)``); written back with
:func:`netrig.otgclient.typed.to_json` (a controller's merged rows).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from netrig.otgclient.typed import Reader

#: Reads a server's answers (integers sent as strings, as protojson does, become ints).
read = Reader(coerce=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricTimestamp:
    first_timestamp_ns: float | None = None
    last_timestamp_ns: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricLatency:
    minimum_ns: float | None = None
    maximum_ns: float | None = None
    average_ns: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowMetric:
    """One flow's metrics (``Flow.Metric``); ``None``: the server left it out."""

    name: str | None = None
    port_tx: str | None = None
    port_rx: str | None = None
    transmit: str | None = None
    frames_tx: int | None = None
    frames_rx: int | None = None
    bytes_tx: int | None = None
    bytes_rx: int | None = None
    frames_tx_rate: float | None = None
    frames_rx_rate: float | None = None
    loss: float | None = None
    timestamps: MetricTimestamp | None = None
    latency: MetricLatency | None = None
    tagged_metrics: tuple[Any, ...] | None = None
    tx_l1_rate_bps: float | None = None
    rx_l1_rate_bps: float | None = None
    tx_rate_bytes: float | None = None
    rx_rate_bytes: float | None = None
    tx_rate_bps: float | None = None
    rx_rate_bps: float | None = None
    tx_rate_kbps: float | None = None
    rx_rate_kbps: float | None = None
    tx_rate_mbps: float | None = None
    rx_rate_mbps: float | None = None
    packet_loss_duration: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PortMetric:
    """One port's metrics (``Port.Metric``); ``None``: the server left it out."""

    name: str | None = None
    location: str | None = None
    link: str | None = None
    capture: str | None = None
    frames_tx: int | None = None
    frames_rx: int | None = None
    bytes_tx: int | None = None
    bytes_rx: int | None = None
    frames_tx_rate: float | None = None
    frames_rx_rate: float | None = None
    bytes_tx_rate: float | None = None
    bytes_rx_rate: float | None = None
    transmit: str | None = None
    last_change: int | None = None
    data_integrity: dict[str, Any] | None = None
    speed: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsResponse:
    """``monitor/metrics``' answer: the rows of its choice (protocol metrics: ``others``)."""

    choice: str | None = None
    port_metrics: tuple[PortMetric, ...] = ()
    flow_metrics: tuple[FlowMetric, ...] = ()
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Warnings:
    """``set_config``'s and ``control/state``'s answer (the model's ``Warning``)."""

    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Error:
    """Every failure's answer."""

    code: int
    kind: str | None = None
    errors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Version:
    """``capabilities/version``' answer."""

    api_spec_version: str = ""
    sdk_version: str = ""
    app_version: str = ""
