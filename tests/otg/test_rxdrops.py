"""A served port's own receive drops since the last start (netrig.otg.rxdrops), on scripted engine
and kernel counters: the difference since the start, and a generator that kept its predecessor's
receive queues counting from where that one ended — never the earlier configs' drops again."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from tests.conftest import needs_root, veth_pair

from netrig.otg import rxdrops
from netrig.otg.rxdrops import RxDrops
from netrig.otgclient.report import PortDrops


@dataclass
class Ring:
    rx_ring_drops: int
    rx_foreign: int = 0
    rx_stale: int = 0
    rx_forged: int = 0
    rx_unjudged: int = 0


@dataclass
class Gen:
    """A generator's ring-drop counts per port, as its receivers last refreshed them, the frames
    of no flow they took (unsigned, and signed by no current start), the forged ones, and the starts
    of flows sent elsewhere they saw."""

    rings: list[int]
    foreign: list[int] | None = None
    stale: list[int] | None = None
    forged: list[int] | None = None
    unjudged: list[int] | None = None

    def port_stats(self) -> list[Ring]:
        zero = [0] * len(self.rings)
        return [Ring(*c) for c in zip(self.rings, self.foreign or zero, self.stale or zero, self.forged or zero,
                                       self.unjudged or zero)]


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
    tx = {"a1": 2, "b1@ns": 0}
    monkeypatch.setattr(rxdrops, "kernel_drops", lambda s: None if now[s.name] is None else (now[s.name], tx[s.name]))
    return now


def report(d: RxDrops, plan: Any, g: Any) -> list[tuple[int, int | None]]:
    return [(p.rx_ring_drops, p.rx_kernel_drops) for p in d.report(plan, g)]


def test_drops_are_counted_from_the_start(kernel):
    d, plan, g = RxDrops(), Plan(), Gen([0, 3])
    d.start(plan, g)  # type: ignore[arg-type]
    g.rings[1], kernel["b1@ns"] = 3 + 118, 40 + 120
    assert d.report(plan, g)[1] == PortDrops(name="p1", location="b1@ns", rx_ring_drops=118,  # type: ignore[arg-type]
                                             rx_kernel_drops=120, rx_foreign=0, rx_stray=0, rx_forged=0,
                                             tx_kernel_drops=0)
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


def test_frames_of_no_flow_are_counted_from_the_start(kernel):
    """A port that took 5 unsigned frames and 2 of an earlier start before this one counts only
    those after it: 3 unsigned (an LLDP neighbour's), 4 of the earlier start still in flight."""
    d, plan, g = RxDrops(), Plan(), Gen([0, 0], foreign=[0, 5], stale=[0, 2])
    d.start(plan, g)  # type: ignore[arg-type]
    g.foreign, g.stale = [0, 8], [0, 6]  # type: ignore[assignment]
    p = d.report(plan, g)[1]  # type: ignore[arg-type]
    assert (p.rx_foreign, p.rx_stray, p.describe()) == (3, 4, None), "taken apart, never the tester's drops"


def test_forged_frames_are_counted_from_the_start_and_unsaid_once_a_flow_sent_elsewhere_arrived(kernel):
    """A port that judged 1 forged frame before the start and 3 after says 3; once it saw the start
    of a flow another agent sends (whose sender's counts it has not), forged is not said at all."""
    d, plan, g = RxDrops(), Plan(), Gen([0, 0], forged=[0, 1], unjudged=[2, 0])
    d.start(plan, g)  # type: ignore[arg-type]
    g.forged = [0, 4]
    assert [p.rx_forged for p in d.report(plan, g)] == [0, 3]  # type: ignore[arg-type]
    g.unjudged = [2, 1]
    assert [p.rx_forged for p in d.report(plan, g)] == [0, None]  # type: ignore[arg-type]


def test_what_a_port_dropped_on_transmit_is_reported_since_the_start(monkeypatch):
    """The same kernel read gives the port's transmit drops (its veth's other end's ring full): since
    the start, with the served port at that end when it is one, unread when the interface cannot be
    read; the other end is looked for only when there were drops."""
    now: dict[str, tuple[int, int] | None] = {"a1": (0, 500), "b1@ns": (0, 0)}
    monkeypatch.setattr(rxdrops, "kernel_drops", lambda s: now[s.name])
    asked = []
    monkeypatch.setattr(rxdrops, "veth_peer", lambda plan, i: asked.append(i) or "b1@ns")
    d, plan, g = RxDrops(), Plan(), Gen([0, 0])
    d.start(plan, g)  # type: ignore[arg-type]
    now["a1"] = (0, 500 + 1287)
    got = d.report(plan, g)  # type: ignore[arg-type]
    assert [(p.tx_kernel_drops, p.tx_peer) for p in got] == [(1287, "b1@ns"), (0, None)] and asked == [0]
    assert got[0].describe_tx() == ("the sending tester port a1's kernel dropped 1287 frames at the receive ring "
                                    "of tester port b1@ns")
    now["a1"] = None
    assert [p.tx_kernel_drops for p in d.report(plan, g)] == [None, 0]  # type: ignore[arg-type]


@needs_root
@pytest.mark.root
def test_a_served_port_finds_the_served_port_at_its_veths_other_end():
    """On a real veth pair across two namespaces each end is the other's (the engine reads the veth's
    peer and the id one namespace gives the other); loopback is neither's, and has none."""
    with veth_pair("vp") as (ns_a, if_a, ns_b, if_b):
        plan = Plan(serve_ports=(Port(f"{if_a}@{ns_a}", if_a, ns_a), Port(f"{if_b}@{ns_b}", if_b, ns_b),
                                 Port(f"lo@{ns_b}", "lo", ns_b)))
        assert [rxdrops.veth_peer(plan, i) for i in range(3)] == [f"{if_b}@{ns_b}", f"{if_a}@{ns_a}", None]  # type: ignore[arg-type]


@dataclass
class Where:
    netns: str | None


@dataclass
class Port:
    """A served port as rxdrops reads it: its name, interface and namespace."""

    name: str
    ifname: str
    ns: str | None

    @property
    def port(self) -> Where:
        return Where(self.ns)


def test_a_stop_warns_of_each_port_that_dropped_frames_itself_and_of_none_other():
    """One warning per tester drop (a receiving port's, a sending port's at another tester port's
    ring) beside a flow that lost frames (received there, sent from there), each saying that the
    flows count these frames as lost and whose loss that is; drops beside no loss say nothing."""
    from netrig.otgclient.report import drop_warnings

    quiet = PortDrops(name="p0", location="a1", rx_kernel_drops=0, rx_foreign=4)
    ring = PortDrops(name="p1", location="b1@ns", rx_ring_drops=118, rx_kernel_drops=118)
    sent = PortDrops(name="p0", location="a1", rx_kernel_drops=0, tx_kernel_drops=9, tx_peer="b1@ns")
    assert drop_warnings([quiet], {"p0", "p1"}, {"p0"}) == []
    assert drop_warnings([quiet, ring, sent], set(), set()) == [], "no flow lost a frame: they were none of its"
    told = drop_warnings([quiet, ring, sent], {"p1"}, {"p0"})
    assert told == [
        "the receiving tester port b1@ns dropped frames itself (118 in its ring, 118 in its kernel: on veth the "
        "kernel's count holds the ring's) since the last start: the flows received there count these frames as "
        "lost, the tester's loss, not the DUT's (each port's drops: GET /netrig/agents, ports)",
        "the sending tester port a1's kernel dropped 9 frames at the receive ring of tester port b1@ns since the "
        "last start: the flows received there count these frames as lost, the tester's loss, not the DUT's (each "
        "port's drops: GET /netrig/agents, ports)"]
