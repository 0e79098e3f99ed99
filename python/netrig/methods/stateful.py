"""RFC 9693 stateful NAT/firewall benchmarking: connections through a DUT that tracks them.

The initiator (tx port) and the responder (rx port) share ``N = src_ports × dst_ports`` UDP (or TCP)
4-tuples, RFC 4814 pseudorandom by default (:class:`netrig.measure.FlowTrial`). One repetition:

1. **Preliminary phase** (RFC 9693 phase 1): the DUT's conntrack table is emptied, then the
   initiator sends one frame per 4-tuple at ``establish_rate_pps``. It must deliver every frame and
   leave exactly N entries in the table; on a NAT every reply tuple must keep the original source
   port (the responder answers each connection at the translated address and the same port: a
   remapped port is refused, not guessed). Then the responder sends one frame per connection back
   through the DUT: all must arrive and the table must still hold N (a reply creates nothing new).
2. **Throughput with state** (phase 2): a binary search for the highest rate, per direction, at which
   both directions at once (initiator → responder and the responder's answers through the NAT) lose
   nothing and the table still holds exactly N afterwards.
3. **Connection tear-down rate**: the responder validates all N connections once more, then the
   whole table is deleted (ctnetlink flush) and timed, and deleted again empty:
   ``N / (T_N − T_0)``.
4. **Maximum connection establishment rate**: a binary search for the highest rate of the
   preliminary phase (table emptied before each step) at which every frame passes and every
   connection is created (the table holds N).
5. **Table capacity** (``capacity_connections``): the preliminary phase and the responder's
   validation for each N given, with the memory the table took (nf_conntrack slab and MemAvailable
   per entry); the capacity is the largest N whose connections were all there.

Search steps are judged at the rate the tester really sent (the achieved rate): a frame-count step the tester sent
slower than asked that the DUT passed proves the rate it reached, never the one asked for, and ends
the search's upper end there (``tester_limited``) — unless the tester had sent a rate at least as
high in full earlier in the same search: that shortfall was a stall, and the step is repeated (up to
twice, ``repeated_trials``) before it counts.
"""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from netrig import _native
from netrig.errors import ConfigError, MethodologyError
from netrig.measure import FlowTrial, TableCounts, TrialCounts, TupleCheck
from netrig.methodology.method import Command, Context, Method, Section, Shortcut
from netrig.methodology.stats import check, median
from netrig.methodology.tester import PlatformStopped, ProvenLimit, Verdict, judged, tester_rx_drops
from netrig.methodology.vocabulary import option
from netrig.model import LineRate, rates
from netrig.results.typed import from_dict
from netrig.view import fmt
from netrig.view.frame_results import read_frame_results
from netrig.view.html import esc, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.run_view import RunView
from netrig.view.table import Table

METHOD_NAME = "stateful"
#: Test beds whose DUT tracks connections.
STATEFUL_TOPOLOGIES = ("nat", "firewall", "fwnat")
#: Most connections: one stream's flows (every flow has receive state in the tester).
MAX_CONNECTIONS = int(_native.MAX_FLOWS)
#: Most trials one search runs (a guard: the resolution ends it long before).
MAX_SEARCH_TRIALS = 24
FLOW_ORDERS = ("pseudorandom", "sequential")
#: Fewest new entries for which MemAvailable's drop per entry is reported (below, other activity on
#: the host outweighs the table).
MEMORY_MIN_ENTRIES = 100_000


def port_ranges(n: int, field_name: str = "connections") -> tuple[int, int]:
    """``(src_ports, dst_ports)`` with ``src_ports × dst_ports = n``, each at most 65535, the source
    range as large as it can be (the destination range the smallest divisor that fits)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(field_name, f"{n!r}: must be a whole number of connections ≥ 1")
    if n > MAX_CONNECTIONS:
        raise ConfigError(field_name, f"{n}: more connections than one stream of the tester has flows (at most "
                                      f"{MAX_CONNECTIONS})")
    first = max(1, math.ceil(n / 65535))
    for d in range(first, 65536):
        if n % d == 0 and n // d <= 65535:
            return n // d, d
    near = (n // first) * first
    raise ConfigError(field_name, f"{n}: not a product of two port ranges of at most 65535 ports each; "
                                  f"use e.g. {near}")


@dataclass(frozen=True)
class StatefulParams:
    connections: int = 10_000
    establish_rate_pps: float = 10_000.0
    throughput: bool = True
    teardown: bool = True
    establishment_rate: bool = True
    capacity_connections: tuple[int, ...] = ()
    max_rate_pps: float | None = None
    resolution_pct: float = 2.0
    duration_s: float = 10.0
    flow_order: str = "pseudorandom"
    seed: int = 1
    repetitions: int | None = None

    def __post_init__(self) -> None:
        port_ranges(self.connections)
        check("establish_rate_pps", self.establish_rate_pps, lo=0, lo_open=True)
        for name in ("throughput", "teardown", "establishment_rate"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, f"{getattr(self, name)!r}: must be true or false")
        caps = self.capacity_connections
        if isinstance(caps, (str, bytes)) or not isinstance(caps, (list, tuple)):
            raise ConfigError("capacity_connections", f"{caps!r}: give a list of connection counts, e.g. "
                                                      "[100000, 1000000]")
        for i, n in enumerate(caps):
            port_ranges(n, f"capacity_connections[{i}]")
        object.__setattr__(self, "capacity_connections", tuple(sorted(caps)))
        if self.max_rate_pps is not None:
            check("max_rate_pps", self.max_rate_pps, lo=0, lo_open=True)
        check("resolution_pct", self.resolution_pct, lo=0, lo_open=True, hi=50)
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        if self.flow_order not in FLOW_ORDERS:
            raise ConfigError("flow_order", f"{self.flow_order!r}: use one of {', '.join(FLOW_ORDERS)}")
        check("seed", self.seed, lo=0, integer=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class SearchResult:
    """A binary search's answer: ``rate_pps`` the highest rate that passed (the rate the tester
    really sent: achieved), ``upper_pps`` the lowest that failed (``None``: none failed), ``trials``, and
    ``tester_limited`` when the tester could not send a rate asked for."""

    rate_pps: float | None
    upper_pps: float | None
    trials: int
    tester_limited: bool
    #: Trials repeated because the tester fell short at a rate it had already sent in full in this
    #: search (a stall, not its limit); they are in ``trials``.
    repeated_trials: int = 0
    #: Why the host stopped the search (:class:`~netrig.methodology.tester.PlatformStopped`): the
    #: rate found is a lower bound (``tester_limited``). ``None``: it ran to its end.
    platform: str | None = None

    def to_dict(self) -> dict:
        return {"rate_pps": self.rate_pps, "upper_pps": self.upper_pps, "trials": self.trials,
                "tester_limited": self.tester_limited, "repeated_trials": self.repeated_trials,
                "platform": self.platform}


#: A search step: ``(passed, the rate the tester really sent, the tester fell short of the rate)``.
Step = tuple[bool, float, bool]


def bisect(step: Callable[[float], Step], top_pps: float, resolution_pct: float,
           max_trials: int = MAX_SEARCH_TRIALS, capped: bool = False) -> SearchResult:
    """Binary search in ``(0, top_pps]``: the first step at the top, then halving the bracket until
    it is narrower than ``resolution_pct`` % of its upper end. A step the tester fell short on ends
    the upper end there; if the DUT passed it, the rate reached is a proven lower end. ``capped``:
    ``top_pps`` is the tester's proven limit, so a DUT that passes there is tester-limited too. A step
    the host spoilt in every attempt (:class:`~netrig.methodology.tester.PlatformStopped`) ends the
    search: what passed is a lower bound, ``platform`` says why."""
    lo, hi = 0.0, top_pps
    best: float | None = None
    upper: float | None = None
    limited = False
    rate, trials = top_pps, 0
    while trials < max_trials:
        try:
            ok, achieved, short = step(rate)
        except PlatformStopped as stop:
            return SearchResult(best, upper, trials + 1, True, platform=str(stop))
        trials += 1
        if short:
            limited = True
            hi = rate
            if ok and achieved > lo:
                lo = best = achieved
        elif ok:
            lo = best = max(best or 0.0, rate)
        else:
            hi = upper = rate
        if best is not None and best >= hi * (1 - 1e-9):
            break
        if hi - lo <= hi * resolution_pct / 100 and (best is not None or hi < 1.0):
            break
        rate = (lo + hi) / 2
    limited = limited or (capped and best is not None and best >= top_pps * (1 - 1e-9))
    return SearchResult(best, upper, trials, limited and upper is None)


@dataclass(frozen=True)
class RateSearch(SearchResult):
    """A search of the method: its answer, what its rate counts (``connections/s``, ``per direction``);
    the throughput's trial duration, both directions at once."""

    rate_basis: str = ""
    duration_s: float | None = None
    bidirectional: bool | None = None

    def to_dict(self) -> dict:
        extra = {k: v for k, v in (("duration_s", self.duration_s), ("bidirectional", self.bidirectional))
                 if v is not None}
        return {**super().to_dict(), "rate_basis": self.rate_basis, **extra}

    @classmethod
    def of(cls, s: SearchResult, steps: Stalls, rate_basis: str, duration_s: float | None = None,
           bidirectional: bool | None = None) -> RateSearch:
        """The answer of ``s``, whose steps ran through ``steps`` (its repeats counted among its trials)."""
        return cls(s.rate_pps, s.upper_pps, s.trials + steps.repeated, s.tester_limited, steps.repeated,
                   s.platform, rate_basis, duration_s, bidirectional)


@dataclass(frozen=True)
class TableMemory:
    """The DUT's memory per conntrack entry a phase added: the conntrack slab, and ``MemAvailable``
    when enough entries were added to see it (``None``: not measured)."""

    entries_added: int
    slab_bytes_per_entry: float | None = None
    mem_bytes_per_entry: float | None = None

    @classmethod
    def of(cls, ct: TableCounts) -> TableMemory:
        entries = (ct.after or 0) - (ct.before or 0)
        sb, sa, mb, ma = ct.slab_bytes_before, ct.slab_bytes_after, ct.mem_available_before, ct.mem_available_after
        return cls(entries, (sa - sb) / entries if sb is not None and sa is not None and entries > 0 else None,
                   (mb - ma) / entries if mb is not None and ma is not None and entries >= MEMORY_MIN_ENTRIES else None)

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class PhaseResult:
    """A one-frame-per-connection phase (the preliminary one, the validation): what the tester sent and
    got back, the DUT's table before and after; the preliminary phase's tuple check and memory."""

    achieved_pps: float
    frames_sent: int
    frames_received: int
    tester_rx_drops: int
    valid: bool
    invalid_reason: str | None
    conntrack_before: int | None
    conntrack_after: int | None
    connections: int
    tuples: TupleCheck | None = None
    memory: TableMemory | None = None

    @classmethod
    def of(cls, c: TrialCounts, n: int, preliminary: bool = False) -> PhaseResult:
        ct = _ct(c)
        return cls(c.achieved_pps, c.frames_sent, c.frames_received, tester_rx_drops(c), c.valid, c.invalid_reason,
                   ct.before, ct.after, n, *((ct.tuples, TableMemory.of(ct)) if preliminary else (None, None)))

    def to_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k not in ("tuples", "memory")}
        if self.memory is None:  # the validation
            return out
        return {**out, "tuples": self.tuples.to_dict() if self.tuples else None, **self.memory.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> PhaseResult:
        mem = from_dict(TableMemory, d) if "entries_added" in d else None  # stored flat, beside the counts
        return replace(from_dict(cls, d, partial=True), memory=mem)


@dataclass(frozen=True)
class Teardown:
    """The tear-down: the entries flushed and how long it took, less the flush of the empty table."""

    entries: int | None
    teardown_s: float | None
    empty_flush_s: float | None
    rate_cps: float | None
    after: int | None
    validation_received: int
    method: str = "ctnetlink flush of the whole table, timed; minus the flush of the empty table"
    #: Why the tear-down flushed fewer entries than connections, when it did.
    note: str | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None or k != "note"}


@dataclass(frozen=True)
class CapacityPoint:
    """One table size tried: the connections established and answered, the table after each."""

    connections: int
    forward_received: int
    tester_rx_drops: int
    entries: int | None
    reverse_received: int
    entries_after: int | None
    ok: bool
    memory: TableMemory | None = None

    def to_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k != "memory"}
        return {**out, **(self.memory.to_dict() if self.memory else {})}

    @classmethod
    def from_dict(cls, d: dict) -> CapacityPoint:
        mem = from_dict(TableMemory, d) if "entries_added" in d else None
        return replace(from_dict(cls, {k: v for k, v in d.items() if k != "memory"}, partial=True), memory=mem)


@dataclass(frozen=True)
class StatefulResult:
    connections: int
    src_ports: int
    dst_ports: int
    preliminary: PhaseResult
    validation: PhaseResult
    throughput: RateSearch | None = None
    teardown: Teardown | None = None
    establishment: RateSearch | None = None
    capacity: tuple[CapacityPoint, ...] = ()

    @property
    def headline_pps(self) -> float | None:
        return None

    @property
    def platform(self) -> str | None:
        """Why the host stopped one of its searches (its ``platform``), if it did."""
        return next((x.platform for x in (self.establishment, self.throughput) if x and x.platform), None)

    @property
    def establishment_rate_cps(self) -> float | None:
        return self.establishment.rate_pps if self.establishment else None

    @property
    def throughput_pps(self) -> float | None:
        return self.throughput.rate_pps if self.throughput else None

    @property
    def teardown_rate_cps(self) -> float | None:
        return self.teardown.rate_cps if self.teardown else None

    @property
    def capacity_connections(self) -> int | None:
        ok = [c.connections for c in self.capacity or () if c.ok]
        return max(ok) if ok else None

    def stats_values(self) -> dict[str, float | None]:
        return {"establishment_rate_cps": self.establishment_rate_cps, "teardown_rate_cps": self.teardown_rate_cps,
                "throughput_pps": self.throughput_pps}

    def to_dict(self) -> dict:
        return {"connections": self.connections, "src_ports": self.src_ports, "dst_ports": self.dst_ports,
                "preliminary": self.preliminary.to_dict(), "validation": self.validation.to_dict(),
                "establishment_rate_cps": self.establishment_rate_cps,
                "establishment": self.establishment.to_dict() if self.establishment else None,
                "teardown_rate_cps": self.teardown_rate_cps,
                "teardown": self.teardown.to_dict() if self.teardown else None,
                "throughput_pps": self.throughput_pps,
                "throughput": self.throughput.to_dict() if self.throughput else None,
                "capacity_connections": self.capacity_connections, "capacity": [c.to_dict() for c in self.capacity]}


# --------------------------------------------------------------------------------------------- #
# Measuring

def _ct(c: TrialCounts) -> TableCounts:
    """The DUT's conntrack table around the trial, as the engine measured it."""
    return c.conntrack or TableCounts()


def judge(c: TrialCounts, rate_pps: float, directions: int, passed: bool, limit: ProvenLimit) -> Step:
    """A search step's outcome: a trial the tester sent short of the rate is the DUT's failure when the
    self-test proved the (aggregate) rate (backpressure: on veth the DUT's work slows the sender),
    else the tester's limit; otherwise it passed or failed as ``passed`` says."""
    verdict = limit.verdict(c, rate_pps * directions)
    if verdict is Verdict.BACKPRESSURE:
        return False, c.achieved_pps / directions, False
    if verdict is Verdict.TESTER:
        return passed, c.achieved_pps / directions, True
    return passed, c.achieved_pps / directions, False


class Stalls:
    """The steps of one search: a step the tester fell short on at a rate no higher than one it sent in
    full earlier in the same search is a stall, repeated (:func:`~netrig.methodology.tester.judged`),
    never the tester's limit."""

    def __init__(self, limit: ProvenLimit, directions: int):
        self.limit, self.directions = limit, directions
        self.kept: float | None = None  # the highest aggregate rate the tester sent in full
        self.repeated = 0

    def step(self, run: Callable[[], TrialCounts], rate_pps: float,
             passed: Callable[[TrialCounts], bool]) -> Step:
        """Run the step at ``rate_pps`` (per direction), repeated while it stalls; its outcome (:func:`judge`)."""
        aggregate = rate_pps * self.directions
        try:
            c, verdict, repeats = judged(run, aggregate, self.limit, self.kept)
        except PlatformStopped as stop:
            self.repeated += stop.attempts - 1
            raise
        self.repeated += repeats
        if verdict is Verdict.VALID:
            self.kept = max(self.kept or 0.0, aggregate)
        return judge(c, rate_pps, self.directions, passed(c), self.limit)


def arrived(c: TrialCounts) -> int:
    """Frames of a one-frame-per-connection trial the DUT delivered: those counted, once each, and those
    the tester's own receive ring dropped (they passed the DUT; the trial is invalid, flagged, and the
    table check decides about the connections)."""
    return c.frames_received - c.duplicated + tester_rx_drops(c)


def _created(c: TrialCounts, n: int) -> bool:
    """Every frame of a one-frame-per-connection trial passed the DUT and its table holds exactly ``n``."""
    return c.frames_sent == n and arrived(c) == n and _ct(c).after == n


class Stateful:
    """One repetition of the method on the measurer seam."""

    def __init__(self, params: StatefulParams, ctx: Context):
        self.p, self.ctx = params, ctx
        self.src_ports, self.dst_ports = port_ranges(params.connections)

    def trial(self, rate_pps: float, n: int | None = None, **kw: object) -> TrialCounts:
        s, d = (self.src_ports, self.dst_ports) if n is None else port_ranges(n)
        req = FlowTrial(rate_pps=rate_pps, frame_size=self.ctx.frame, src_ports=s, dst_ports=d,
                        flow_order=self.p.flow_order, seed=self.p.seed, **kw)  # type: ignore[arg-type]
        return self.ctx.measurer.measure_flows(req)

    def establish(self, n: int, rate_pps: float, check_tuples: bool = False) -> TrialCounts:
        return self.trial(rate_pps, n, flush_before=True, check_tuples=check_tuples)

    def preliminary(self) -> tuple[PhaseResult, PhaseResult]:
        n, rate = self.p.connections, self.p.establish_rate_pps
        c = self.establish(n, rate, check_tuples=True)
        pre = PhaseResult.of(c, n, preliminary=True)
        if not _created(c, n):
            raise MethodologyError(
                f"preliminary phase: {c.frames_received} of {n} frames passed and the DUT's table holds "
                f"{pre.conntrack_after} entries at {rate:.0f} connections/s; every connection must be established "
                "first: lower establish_rate_pps, or raise the test bed's conntrack_max")
        tuples = pre.tuples or TupleCheck()
        if tuples.entries != n:
            raise MethodologyError(f"preliminary phase: the DUT's table lists {tuples.entries} of the {n} "
                                   "connections from the initiator's address")
        if tuples.port_changed:
            raise MethodologyError(
                f"preliminary phase: the DUT remapped the source port of {tuples.port_changed} of {n} connections "
                f"(e.g. {', '.join(tuples.examples)}); the responder answers each connection at its "
                "original port, so its return traffic would miss them: netrig refuses to measure with it")
        v = self.trial(rate, direction="reverse")
        val = PhaseResult.of(v, n)
        if arrived(v) != n or val.conntrack_after != n:
            raise MethodologyError(
                f"validation: {v.frames_received} of the responder's {n} frames came back through the DUT and its "
                f"table holds {val.conntrack_after} entries (expected {n}): the connections are not all in the table")
        return pre, val

    def throughput(self, top: float, capped: bool) -> RateSearch:
        n, stalls = self.p.connections, Stalls(self.ctx.tester_limit, 2)

        def step(rate: float) -> Step:
            return stalls.step(lambda: self.trial(rate, direction="both", duration_s=self.p.duration_s), rate,
                               lambda c: c.frames_lost == 0 and _ct(c).after == n)

        s = bisect(step, top, self.p.resolution_pct, capped=capped)
        return RateSearch.of(s, stalls, "per direction", self.p.duration_s, True)

    def teardown(self) -> Teardown:
        n = self.p.connections
        c = self.trial(self.p.establish_rate_pps, direction="reverse", teardown=True)
        ct = _ct(c)
        entries, t_n, t_0 = ct.teardown_entries, ct.teardown_s, ct.empty_flush_s
        rate = entries / (t_n - t_0) if entries and t_n is not None and t_0 is not None and t_n > t_0 else None
        note = None
        if entries != n or arrived(c) != n:
            note = (f"before the tear-down the table held {entries} entries and {c.frames_received} of {n} "
                    "validation frames came back (connections expired or lost during the test)")
        return Teardown(entries, t_n, t_0, rate, ct.after_teardown, arrived(c), note=note)

    def establishment(self, top: float, capped: bool) -> RateSearch:
        n, stalls = self.p.connections, Stalls(self.ctx.tester_limit, 1)

        def step(rate: float) -> Step:
            return stalls.step(lambda: self.establish(n, rate), rate, lambda c: _created(c, n))

        s = bisect(step, top, self.p.resolution_pct, capped=capped)
        return RateSearch.of(s, stalls, "connections/s")

    def capacity(self) -> list[CapacityPoint]:
        out = []
        for n in self.p.capacity_connections:
            c = self.establish(n, self.p.establish_rate_pps)
            v = self.trial(self.p.establish_rate_pps, n, direction="reverse")
            back, ct, ct_v = arrived(v), _ct(c), _ct(v)
            out.append(CapacityPoint(n, arrived(c), tester_rx_drops(c) + tester_rx_drops(v), ct.after, back,
                                     ct_v.after, _created(c, n) and back == n and ct_v.after == n, TableMemory.of(ct)))
        return out


def measure_stateful(params: StatefulParams, ctx: Context) -> StatefulResult:
    topo = ctx.command_env.get("NETRIG_TESTBED_TOPOLOGY")
    if ctx.simulated_dut or (topo is not None and topo not in STATEFUL_TOPOLOGIES):
        raise ConfigError("testbed", f"{topo or 'simulated'}: the stateful method needs a DUT with a conntrack table: "
                                     f"use one of {', '.join(STATEFUL_TOPOLOGIES)}")
    m = Stateful(params, ctx)
    want = params.max_rate_pps or ctx.line_rate.fps(ctx.frame)
    top, lim = ctx.tester_limit.cap(want), ctx.tester_limit
    pre, val = m.preliminary()
    # both directions together never ask for more than the tester proved in one
    tp = m.throughput(lim.cap(2 * want) / 2, lim.caps(2 * want)) if params.throughput else None
    td = m.teardown() if params.teardown else None
    est = m.establishment(top, lim.caps(want)) if params.establishment_rate else None
    cap = m.capacity()
    return StatefulResult(params.connections, m.src_ports, m.dst_ports, pre, val, tp, td, est, tuple(cap))


# --------------------------------------------------------------------------------------------- #
# Reading it back from results

STATEFUL = Section("stateful", "Stateful NAT/firewall (RFC 9693)", compare_title="Stateful (RFC 9693)")
COMMAND = Command("stateful", "RFC 9693 stateful NAT/firewall: connection rates, throughput with state, capacity",
                  "RFC 9693 stateful benchmarking on a nat, firewall or fwnat test bed: N connections "
                  "established through the DUT (checked in its conntrack table), then the throughput with the "
                  "state in place and return traffic, the tear-down rate, the maximum connection establishment "
                  "rate and the table capacity.", sizes_default="64")


def table(r: RunView) -> Table:
    t = Table(["frame size", "connections", "establishment rate", "tear-down rate", "throughput with state",
               "bytes/entry"])
    for e in r.frame_results(METHOD_NAME, StatefulResult):
        reps = e.repetitions
        per = median(x.preliminary.memory.slab_bytes_per_entry for x in reps if x.preliminary and x.preliminary.memory)
        t.add([fmt.size(e.frame_size), fmt.count(median(x.connections for x in reps)),
               fmt.si(median(x.establishment_rate_cps for x in reps), "conn/s"),
               fmt.si(median(x.teardown_rate_cps for x in reps), "conn/s"),
               fmt.fps(median(x.throughput_pps for x in reps)) + " ×2", fmt.count(per)])
    t.caption = ("median of repetitions; throughput per direction with return traffic through the DUT; "
                 "bytes/entry: the nf_conntrack slab per connection established")
    return t


def capacity_table(r: RunView) -> Table:
    t = Table(["frame size", "rep", "connections", "in table", "returned", "slab B/entry", "memory B/entry", "ok"])
    for e in r.frame_results(METHOD_NAME, StatefulResult):
        for k, rep in enumerate(e.repetitions):
            for c in rep.capacity or ():
                mem = c.memory or TableMemory(0)
                t.add([fmt.size(e.frame_size), str(k + 1), fmt.count(c.connections), fmt.count(c.entries),
                       fmt.count(c.reverse_received), fmt.count(mem.slab_bytes_per_entry),
                       fmt.count(mem.mem_bytes_per_entry), "yes" if c.ok else "no"])
    return t


class StatefulMethod(Method):
    name = METHOD_NAME
    label = "RFC 9693 stateful NAT/firewall"
    short_name = "stateful"
    params_type = StatefulParams
    sections = (STATEFUL,)
    console_columns = ("connections", "establish (conn/s)", "tear-down (conn/s)",
                       f"throughput ({rates.INTENDED} fps) ×2", "capacity")
    shortcut = Shortcut(COMMAND, "stateful")
    testbeds = STATEFUL_TOPOLOGIES
    cli_fields = {"connections": "--connections", "establish_rate_pps": "--establish-rate",
                  "capacity_connections": "--capacity", "max_rate_pps": "--max-rate"}

    def run(self, params: StatefulParams, ctx: Context) -> StatefulResult:
        return measure_stateful(params, ctx)

    def estimate_trials(self, params: StatefulParams, frame: object, line_fps: float) -> int:
        return 2 + (12 if params.throughput else 0) + (1 if params.teardown else 0) \
            + (12 if params.establishment_rate else 0) + 2 * len(params.capacity_connections)

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        res = read_frame_results(result, StatefulResult)
        reps = res.repetitions

        def bound(searches: list[RateSearch | Teardown | None], values: list[float | None],
                  show: Callable[[float | None], str]) -> str:  # a tester-limited search found a lower bound
            limited = any(isinstance(x, RateSearch) and x.tester_limited for x in searches)
            text = show(median(values))
            return f"≥ {text}" if limited and text != fmt.DASH else text

        return [[fmt.size(res.frame_size), fmt.count(median(x.connections for x in reps)),
                 bound([x.establishment for x in reps], [x.establishment_rate_cps for x in reps], fmt.count),
                 bound([x.teardown for x in reps], [x.teardown_rate_cps for x in reps], fmt.count),
                 bound([x.throughput for x in reps], [x.throughput_pps for x in reps], fmt.fps),
                 fmt.count(median(x.capacity_connections for x in reps)), flags]]

    def html(self, run: RunView) -> dict[str, str]:
        t, cap = table(run), capacity_table(run)
        if not t:
            return {}  # the section shows only in runs of this method
        body = table_html(t)
        if cap:
            body += "<h4>" + esc("Connection tracking table capacity") + "</h4>" + table_html(cap)
        return {STATEFUL.id: body}

    def markdown(self, run: RunView) -> str:
        t, cap = table(run), capacity_table(run)
        if not t:
            return ""
        body = table_md(t) + ("\n\n**Table capacity**\n\n" + table_md(cap) if cap else "")
        return section_md("Stateful NAT/firewall (RFC 9693)", body, "")

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        option(parser, "--connections", "N, the connections established through the DUT (src ports × dst ports)",
               default=str(StatefulParams.connections))
        option(parser, "--establish-rate", "frames (= new connections) per second of the preliminary phase and "
                                           "validations, e.g. 10kpps", default=f"{StatefulParams.establish_rate_pps:g}")
        option(parser, "--capacity", "table capacity: comma list of connection counts to establish and validate "
                                     "(e.g. 100000,1000000)", default="")
        option(parser, "--max-rate", "top of the rate searches, frames/s, e.g. 1Mpps (default: the tester's proven "
                                     "limit or the line rate)")
        option(parser, "--skip", "parts to leave out: throughput, teardown, establishment", default=())

    def cli_params(self, args: argparse.Namespace) -> dict:
        caps = []
        for part in str(args.capacity).split(","):
            if part.strip():
                try:
                    caps.append(int(part.strip().replace("_", "")))
                except ValueError:
                    raise ConfigError("--capacity", f"{part.strip()!r}: not a whole number of connections "
                                                    "(e.g. --capacity 100000,1000000)") from None
        skip = set(args.skip)
        bad = skip - {"throughput", "teardown", "establishment"}
        if bad:
            raise ConfigError("--skip", f"{', '.join(sorted(bad))}: use throughput, teardown and/or establishment")
        out: dict = {"connections": args.connections,
                     "establish_rate_pps": args.establish_rate.frames_per_second("--establish-rate"),
                     "capacity_connections": caps, "throughput": "throughput" not in skip,
                     "teardown": "teardown" not in skip, "establishment_rate": "establishment" not in skip}
        if args.max_rate is not None:
            out["max_rate_pps"] = args.max_rate.frames_per_second("--max-rate")
        return out


METHOD = StatefulMethod()
