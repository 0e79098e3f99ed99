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

Import the parts from their modules (``netrig.telemetry.telemetry.Telemetry``): the package imports
nothing, so a command that only declares ``--metrics-listen`` does not load the exporter.
"""
