"""The values behind the endpoint: every family's series by label values, thread-safe.

Writers are the run loop (progress events) and the sources of ``forward`` and ``serve``; the reader
is the endpoint's collector, which copies the values under the lock and formats them outside it.
A counter of a run only ever grows (:meth:`Store.add` refuses a negative step) and remembers when
it was created, which the OpenMetrics exposition shows (``_created``), so a restart is visible; a
live source's counter (:meth:`Store.set_counter`) is its source's value, reset when the source
restarts it.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from netrig.telemetry.families import Family

Labels = tuple[str, ...]


@dataclass
class Quantiles:
    """A summary series: quantiles of the latest observation set, sum and count over all of them."""

    quantiles: dict[float, float] = field(default_factory=dict)
    sum: float = 0.0
    count: int = 0


@dataclass(frozen=True)
class Snapshot:
    """A copy of the store for one scrape."""

    values: dict[Family, dict[Labels, float]]
    created: dict[tuple[Family, Labels], float]
    summaries: dict[Family, dict[Labels, Quantiles]]
    #: Which copy this is (1, 2, …): a scrape says which it served (:meth:`Store.served`).
    seq: int = 0


class Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._values: dict[Family, dict[Labels, float]] = {}
        self._created: dict[tuple[Family, Labels], float] = {}
        self._summaries: dict[Family, dict[Labels, Quantiles]] = {}
        #: Called at every scrape before the copy (sources that read live counters: forward, serve).
        self.sources: list[Callable[[Store], None]] = []
        #: Scrapes served (counted as their families are built), and when the last two were.
        self.scrapes = 0
        self.scraped_at: tuple[float, float] = (0.0, 0.0)
        #: Copies taken for scrapes, and the newest one a scrape served: a scrape whose copy was
        #: taken before a run ended, served after, does not carry the end.
        self.copies = 0
        self.served_copy = 0
        self._scraped = threading.Condition(self.lock)

    def add(self, fam: Family, labels: Labels, step: float) -> None:
        """Grow a counter by ``step`` (≥ 0)."""
        if step < 0:
            raise ValueError(f"{fam.name}{labels}: a counter cannot fall by {-step}")
        with self.lock:
            series = self._values.setdefault(fam, {})
            if labels not in series:
                self._created[(fam, labels)] = time.time()
            series[labels] = series.get(labels, 0) + step

    def set(self, fam: Family, labels: Labels, value: float) -> None:
        with self.lock:
            self._values.setdefault(fam, {})[labels] = value

    def set_counter(self, fam: Family, labels: Labels, value: float) -> None:
        """A counter read whole from a live source (forwarder, served flows). Such a counter falls
        only when its source restarted it (a flow started again): Prometheus sees the reset in the
        value itself, so these series carry no creation time (half the lines of a large scrape)."""
        with self.lock:
            self._values.setdefault(fam, {})[labels] = value

    def replace(self, fams: Iterable[Family], keep: Callable[[Labels], bool],
                values: Mapping[Family, Mapping[Labels, float]]) -> None:
        """Drop the series of ``fams`` that ``keep`` refuses, then set ``values`` (gauges of a state
        that moves on: the trial in progress, the newest DUT sample)."""
        with self.lock:
            for fam in fams:
                series = self._values.setdefault(fam, {})
                for labels in [k for k in series if not keep(k)]:
                    del series[labels]
            for fam, vals in values.items():
                self._values.setdefault(fam, {}).update(vals)

    def retain(self, fams: Iterable[Family], labels: Collection[Labels]) -> None:
        """Drop the series of ``fams`` not in ``labels`` (a source's flows that are gone)."""
        with self.lock:
            for fam in fams:
                series = self._values.setdefault(fam, {})
                for k in [k for k in series if k not in labels]:
                    del series[k]
                    self._created.pop((fam, k), None)

    def observe(self, fam: Family, labels: Labels, quantiles: Mapping[float, float], total: float,
                count: int) -> None:
        """A summary series: the latest quantiles; ``total`` and ``count`` added."""
        with self.lock:
            q = self._summaries.setdefault(fam, {}).setdefault(labels, Quantiles())
            if labels not in self._values.setdefault(fam, {}):
                self._values[fam][labels] = 0
                self._created[(fam, labels)] = time.time()
            q.quantiles = dict(quantiles)
            q.sum += total
            q.count += count

    def snapshot(self) -> Snapshot:
        for source in list(self.sources):
            source(self)
        with self.lock:
            self.copies += 1
            return Snapshot({f: dict(v) for f, v in self._values.items()}, dict(self._created),
                            {f: {k: Quantiles(dict(q.quantiles), q.sum, q.count) for k, q in v.items()}
                             for f, v in self._summaries.items()}, self.copies)

    def served(self, snap: Snapshot) -> None:
        """A scrape's families were built from ``snap`` (the collector says so)."""
        with self.lock:
            self.scrapes += 1
            self.scraped_at = (self.scraped_at[1], time.monotonic())
            self.served_copy = max(self.served_copy, snap.seq)
            self._scraped.notify_all()

    def await_fresh_scrape(self, timeout_s: float) -> bool:
        """Wait until a scrape whose copy is taken from now on was served (at most ``timeout_s``):
        it carries every value stored before the call."""
        with self.lock:
            taken = self.copies
            return self._scraped.wait_for(lambda: self.served_copy > taken, timeout_s)
