"""One command's telemetry: a store, its collector in a registry of its own, and the endpoint."""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.registry import CollectorRegistry

from netrig.run.progress import ProgressEvent, ProgressFn
from netrig.telemetry.collect import StoreCollector
from netrig.telemetry.endpoint import OPTION, MetricsEndpoint, parse_listen
from netrig.telemetry.runs import RunTelemetry
from netrig.telemetry.sources import FlowGroupCounts, QueueStats, flow_group_source, forwarder_source
from netrig.telemetry.store import Store

#: Longest wait for a last scrape after the command's work ended, s.
LINGER_MAX_S = 15.0
#: Time given a scrape's response after its values were read, s.
RESPONSE_GRACE_S = 0.2


class Telemetry:
    """``/metrics`` on ``listen`` (``ADDR:PORT``), bound now (errors name ``option``) and served
    until :meth:`close` (or the end of a ``with`` block)."""

    def __init__(self, listen: str, option: str = OPTION):
        host, port = parse_listen(listen, option)
        self.store = Store()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(StoreCollector(self.store))
        self.endpoint = MetricsEndpoint(self.registry, host, port, option)

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        return self.endpoint.url

    def runs(self) -> RunTelemetry:
        """The progress function of runs (``Runner(progress=…)``, teed with the console's): its
        endpoint thread follows the run loop's placement from each run's start."""
        return RunTelemetry(self.store, on_run_start=self.endpoint.follow)

    def watch_forwarder(self, stats: Callable[[], Iterable[QueueStats]]) -> None:
        """Export a running forwarder's counters (``Forwarder.stats``), read at every scrape."""
        self.store.sources.append(forwarder_source(stats))

    def watch_flow_groups(self, read_groups: Callable[[], Iterable[FlowGroupCounts]]) -> None:
        """Export served flow groups (``netrig serve``), read at every scrape."""
        self.store.sources.append(flow_group_source(read_groups))

    def linger(self) -> float:
        """Let a scraper read the final values: when something scraped during the command, wait for
        one more scrape whose values are read from now on (one already reading when the command
        ended may lack its end: Prometheus once never saw a run complete) — at most twice the last
        gap between scrapes and a second, and never more than :data:`LINGER_MAX_S`. Returns the
        seconds waited (0: nobody scraped)."""
        store = self.store
        with store.lock:
            n, (before, last) = store.scrapes, store.scraped_at
        if not n:
            return 0.0
        gap = last - before if n > 1 else LINGER_MAX_S
        t0 = time.monotonic()
        if store.await_fresh_scrape(min(LINGER_MAX_S, 2 * gap + 1.0)):
            time.sleep(RESPONSE_GRACE_S)  # the response is being written
        return time.monotonic() - t0

    def close(self) -> None:
        self.endpoint.close()


@contextlib.contextmanager
def optional_telemetry(listen: str | None, option: str = OPTION) -> Iterator[Telemetry | None]:
    """A :class:`Telemetry` for the block when ``listen`` is given, else ``None``."""
    if listen is None:
        yield None
        return
    with Telemetry(listen, option) as tel:
        yield tel


def tee(*fns: ProgressFn | None) -> ProgressFn:
    """One progress function that calls every given one, in order."""
    chosen = [f for f in fns if f is not None]

    def progress(event: ProgressEvent) -> None:
        for f in chosen:
            f(event)
    return progress
