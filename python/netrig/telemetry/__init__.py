"""Live telemetry: every run, soak, study, forwarder and served workload as an OpenMetrics
endpoint a Prometheus scrapes (``--metrics-listen ADDR:PORT``; docs/telemetry.md).

Data flow::

    Runner progress events ─┐  (trial_start/progress/end with the TrialCounts the record is written
    soak intervals + DUT ───┤   from; intervals; method results)
                            ▼
    runs.RunTelemetry ──▶ store.Store (series by labels; counters only grow) ◀── sources (forwarder,
                                 │                                                served flow groups)
                                 ▼ at every scrape
    collect.StoreCollector ──▶ prometheus_client (its own registry, OpenMetrics) ──▶ endpoint
        (the library's HTTP server thread, an observer of the run: SCHED_IDLE on any CPU)

``families`` names every metric once; ``breakdown`` reads the engine's per-stream, per-port and
per-flow-group counts of a finished trial through types.
"""
from __future__ import annotations

from netrig.telemetry.endpoint import OPTION, MetricsEndpoint, parse_listen
from netrig.telemetry.runs import RunTelemetry
from netrig.telemetry.sources import FlowGroupCounts
from netrig.telemetry.store import Store
from netrig.telemetry.telemetry import Telemetry, optional_telemetry, tee

__all__ = ["OPTION", "FlowGroupCounts", "MetricsEndpoint", "RunTelemetry", "Store", "Telemetry",
           "optional_telemetry", "parse_listen", "tee"]
