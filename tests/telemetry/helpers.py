"""Reading an endpoint back as Prometheus would: the OpenMetrics text parsed by the client library."""
from __future__ import annotations

import urllib.request

from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

ACCEPT = {"Accept": "application/openmetrics-text; version=1.0.0"}


def samples(text: str) -> list:
    return [s for fam in text_string_to_metric_families(text) for s in fam.samples]


def scrape(url: str) -> list:
    with urllib.request.urlopen(urllib.request.Request(url, headers=ACCEPT), timeout=10) as r:
        return samples(r.read().decode())


def registry_samples(registry) -> list:
    return samples(generate_latest(registry).decode())


def total(samples_: list, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(s.value for s in samples_ if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))
