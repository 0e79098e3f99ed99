"""The store as the Prometheus client library's metric families, at every scrape.

One :class:`StoreCollector` is registered in the endpoint's own registry (never the library's
global one, so nothing else of the process is exported by accident); ``collect`` copies the store
under its lock and builds the families outside it. The library formats them (OpenMetrics for
Prometheus, which asks for it; the classic text format otherwise).
"""
from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from netrig.telemetry.families import Family
from netrig.telemetry.store import Labels, Quantiles, Snapshot, Store


def _counter(fam: Family, series: dict[Labels, float], snap: Snapshot) -> Metric:
    m = CounterMetricFamily(fam.name, fam.help, labels=fam.labels, unit=fam.unit)
    for labels, value in sorted(series.items()):
        m.add_metric(labels, value, created=snap.created.get((fam, labels)))
    return m


def _gauge(fam: Family, series: dict[Labels, float]) -> Metric:
    m = GaugeMetricFamily(fam.name, fam.help, labels=fam.labels, unit=fam.unit)
    for labels, value in sorted(series.items()):
        m.add_metric(labels, value)
    return m


def _info(fam: Family, series: dict[Labels, float]) -> Metric:
    m = InfoMetricFamily(fam.name, fam.help, labels=())
    for labels in sorted(series):
        m.add_metric((), dict(zip(fam.labels, labels)))
    return m


def _summary(fam: Family, series: dict[Labels, Quantiles], snap: Snapshot) -> Metric:
    """A summary with quantiles (the client library's summary family has none: samples are added
    as the OpenMetrics format defines them)."""
    m = Metric(fam.name, fam.help, "summary", fam.unit)
    for labels, q in sorted(series.items()):
        base = dict(zip(fam.labels, labels))
        for quantile, value in sorted(q.quantiles.items()):
            m.add_sample(fam.name, {**base, "quantile": f"{quantile:g}"}, value)
        m.add_sample(f"{fam.name}_sum", base, q.sum)
        m.add_sample(f"{fam.name}_count", base, q.count)
        created = snap.created.get((fam, labels))
        if created is not None:
            m.add_sample(f"{fam.name}_created", base, created)
    return m


class StoreCollector(Collector):
    """Every family of a :class:`Store` that has series."""

    def __init__(self, store: Store):
        self.store = store

    def collect(self) -> Iterator[Metric]:
        snap = self.store.snapshot()
        for fam, series in sorted(snap.values.items(), key=lambda kv: kv[0].name):
            if not series:
                continue
            if fam.kind == "counter":
                yield _counter(fam, series, snap)
            elif fam.kind == "gauge":
                yield _gauge(fam, series)
            elif fam.kind == "info":
                yield _info(fam, series)
            else:
                yield _summary(fam, snap.summaries.get(fam, {}), snap)
        self.store.served(snap)
