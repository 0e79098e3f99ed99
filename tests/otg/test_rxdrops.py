"""A served port's own receive drops since the last start (netrig.otg.rxdrops), on scripted engine
and kernel counters: the difference since the start, and a generator that kept its predecessor's
receive queues counting from where that one ended — never the earlier configs' drops again."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from netrig.otg import rxdrops
from netrig.otg.rxdrops import RxDrops
from netrig.otgclient.report import PortDrops


@dataclass
class Ring:
    rx_ring_drops: int


@dataclass
class Gen:
    """A generator's ring-drop counts per port, as its receivers last refreshed them."""

    rings: list[int]

    def port_stats(self) -> list[Ring]:
        return [Ring(r) for r in self.rings]


@dataclass
class Serve:
    name: str


@dataclass
class Plan:
    port_names: tuple[str, ...] = ("p0", "p1")
    serve_ports: tuple[Serve, ...] = (Serve("a1"), Serve("b1@ns"))


@pytest.fixture
def kernel(monkeypatch) -> dict[str, int | None]:
    """Each port's kernel receive drops (cumulative), by its --port name."""
    now: dict[str, int | None] = {"a1": 7, "b1@ns": 40}
    monkeypatch.setattr(rxdrops, "kernel_rx_drops", lambda s: now[s.name])
    return now


def report(d: RxDrops, plan: Any, g: Any) -> list[tuple[int, int | None]]:
    return [(p.rx_ring_drops, p.rx_kernel_drops) for p in d.report(plan, g)]


def test_drops_are_counted_from_the_start(kernel):
    d, plan, g = RxDrops(), Plan(), Gen([0, 3])
    d.start(plan, g)  # type: ignore[arg-type]
    g.rings[1], kernel["b1@ns"] = 3 + 118, 40 + 120
    assert d.report(plan, g)[1] == PortDrops(name="p1", location="b1@ns", rx_ring_drops=118,  # type: ignore[arg-type]
                                             rx_kernel_drops=120)
    kernel["a1"] = None  # its interface cannot be read now: unread, not 0
    assert report(d, plan, g) == [(0, None), (118, 120)]


def test_a_generator_that_kept_the_queues_counts_from_where_the_last_one_ended(kernel):
    d, plan = RxDrops(), Plan()
    old = Gen([0, 0])
    d.start(plan, old)  # type: ignore[arg-type]
    old.rings[1] = 7870  # a trial whose receiver fell behind
    d.handover(plan, old)  # type: ignore[arg-type]
    new = Gen([0, 0])  # the next config's generator, its receivers not refreshed yet
    d.start(plan, new)  # type: ignore[arg-type]
    assert report(d, plan, new) == [(0, 0), (0, 0)]
    new.rings[1] = 7870  # refreshed: the kept queue's count, with none of this trial's drops
    assert report(d, plan, new) == [(0, 0), (0, 0)]
    new.rings[1] = 7870 + 5
    assert report(d, plan, new) == [(0, 0), (5, 0)]
    fresh = Gen([0, 0])  # a queue opened afresh counts from 0: below what was carried, taken as it is
    d.handover(plan, new)  # type: ignore[arg-type]
    d.start(plan, fresh)  # type: ignore[arg-type]
    fresh.rings[1] = 12
    assert report(d, plan, fresh) == [(0, 0), (12, 0)]
