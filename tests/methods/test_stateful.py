"""The stateful method's pieces without root: port ranges, parameters, the search, the conntrack
table parser and the ctnetlink flush message, and the method against a fake DUT that keeps a
conntrack table (connections created by forward frames, answered by reverse ones, remapped ports
refused)."""
from __future__ import annotations

import json
import socket
import struct
from dataclasses import replace

import pytest

from netrig.errors import CapabilityError, ConfigError, MethodologyError
from netrig.measure import DutModel, FlowTrial, SimulatedMeasurer, TrialCounts
from netrig.methodology.method import Context
from netrig.methods import REGISTRY
from netrig.methods.stateful import StatefulParams, bisect, measure_stateful, port_ranges
from netrig.model import FrameSize, LineRate
from netrig.testbed import conntrack

FRAME = FrameSize(size=64)
ENV = {"NETRIG_TESTBED_TOPOLOGY": "nat", "NETRIG_DUT_NETNS": "nrx-dut"}


def test_port_ranges_multiply_to_n_within_the_port_space():
    assert port_ranges(1000) == (1000, 1)
    assert port_ranges(65535) == (65535, 1)
    s, d = port_ranges(4_000_000)
    assert s * d == 4_000_000 and s <= 65535 and d <= 65535
    with pytest.raises(ConfigError, match="use e.g."):
        port_ranges(65537)  # prime, above one port range
    with pytest.raises(ConfigError, match="flows"):
        port_ranges(65535 * 65535)
    assert port_ranges(1 << 24) == (32768, 512)  # the most: one stream's flows
    for bad in (0, -1, 1.5, True, (1 << 24) + 1):
        with pytest.raises(ConfigError) as e:
            port_ranges(bad)  # type: ignore[arg-type]
        assert e.value.field == "connections"


@pytest.mark.parametrize("kw, field", [({"connections": 0}, "connections"),
                                       ({"establish_rate_pps": 0}, "establish_rate_pps"),
                                       ({"establish_rate_pps": float("nan")}, "establish_rate_pps"),
                                       ({"capacity_connections": "1000"}, "capacity_connections"),
                                       ({"capacity_connections": [10, 0]}, "capacity_connections[1]"),
                                       ({"throughput": "yes"}, "throughput"),
                                       ({"max_rate_pps": -1}, "max_rate_pps"),
                                       ({"resolution_pct": 0}, "resolution_pct"),
                                       ({"flow_order": "chaos"}, "flow_order"),
                                       ({"repetitions": 0}, "repetitions")])
def test_params_refuse_bad_values_naming_the_field(kw, field):
    with pytest.raises(ConfigError) as e:
        StatefulParams(**kw)
    assert e.value.field == field


def test_flow_trial_validation():
    with pytest.raises(ConfigError) as e:
        FlowTrial(1000, FRAME, 10, direction="both")
    assert e.value.field == "duration_s"
    for kw, field in [({"src_ports": 0}, "src_ports"), ({"dst_ports": 70000}, "dst_ports"),
                      ({"direction": "up"}, "direction"), ({"rate_pps": 0}, "rate_pps")]:
        with pytest.raises(ConfigError) as e:
            FlowTrial(**{"rate_pps": 1000, "frame_size": FRAME, "src_ports": 10, **kw})
        assert e.value.field == field
    assert FlowTrial(1000, FRAME, 100, 3).connections == 300


def test_bisect_finds_the_highest_passing_rate():
    s = bisect(lambda r: (r <= 123_456, r, False), 1_000_000, 1.0)
    assert s.rate_pps is not None and 0.99 * 123_456 <= s.rate_pps <= 123_456
    assert s.upper_pps is not None and s.upper_pps > 123_456 and not s.tester_limited
    # the tester tops out at 50 kpps: it passes what it reaches, the search says it was limited
    s = bisect(lambda r: (True, min(r, 50_000.0), r > 50_000), 1_000_000, 1.0)
    assert s.rate_pps is not None and 49_000 <= s.rate_pps <= 50_000 and s.tester_limited
    # nothing passes: no rate, and the search ends
    s = bisect(lambda r: (False, r, False), 1_000_000, 1.0)
    assert s.rate_pps is None and s.trials <= 24


LINES = [
    "ipv4     2 udp      17 29 src=198.18.0.2 dst=198.19.0.2 sport=1024 dport=80 [UNREPLIED] "
    "src=198.19.0.2 dst=198.19.0.1 sport=80 dport=1024 mark=0 zone=0 use=2",
    "ipv4     2 udp      17 29 src=198.18.0.2 dst=198.19.0.2 sport=1025 dport=80 [UNREPLIED] "
    "src=198.19.0.2 dst=198.19.0.1 sport=80 dport=41000 mark=0 zone=0 use=2",
    "ipv4     2 tcp      6 10 SYN_SENT src=198.18.0.2 dst=198.19.0.2 sport=9 dport=9 "
    "src=198.19.0.2 dst=198.18.0.2 sport=9 dport=9 mark=0 use=1",
    "ipv4     2 udp      17 29 src=198.18.0.9 dst=198.19.0.2 sport=1 dport=1 src=198.19.0.2 dst=198.18.0.9 sport=1 "
    "dport=1",
    "garbage",
]


def test_tuple_check_counts_translations_and_remapped_ports():
    c = conntrack.check_tuples(LINES, "udp", "198.18.0.2")
    assert (c.entries, c.translated, c.port_changed) == (2, 2, 1)
    assert c.nat_addresses == ["198.19.0.1"]
    assert c.examples == ["198.18.0.2:1025 -> 198.19.0.1:41000"]
    assert conntrack.check_tuples(LINES, "tcp", "198.18.0.2").translated == 0
    assert conntrack.parse_entry("garbage") is None


def test_flush_message_and_ack():
    msg = conntrack.flush_message(7)
    length, mtype, flags, seq, _ = struct.unpack_from("=IHHII", msg)
    assert (length, mtype, seq) == (len(msg), (1 << 8) | 2, 7) and flags & 1 and flags & 4
    assert struct.unpack_from("=B", msg, 16)[0] == socket.AF_UNSPEC
    ack = struct.pack("=IHHII", 36, 2, 0, 7, 0) + struct.pack("=i", 0) + msg
    assert conntrack.parse_ack(ack, 7) == 0
    assert conntrack.parse_ack(struct.pack("=IHHII", 36, 2, 0, 7, 0) + struct.pack("=i", -2) + msg, 7) == 2


class TableDut:
    """A fake measurer with a conntrack table: forward frames create connections (up to ``capacity``:
    beyond it they are dropped), reverse ones pass only for connections in the table; ``remap``
    source ports are translated to other ports; an establishment faster than ``cps`` loses frames."""

    def __init__(self, capacity: int = 10**9, cps: float = 80_000.0, remap: int = 0, bidir_pps: float = 30_000.0):
        self.table: set[int] = set()
        self.capacity, self.cps, self.remap, self.bidir = capacity, cps, remap, bidir_pps
        self.requests: list[FlowTrial] = []

    def measure_flows(self, r: FlowTrial) -> TrialCounts:
        self.requests.append(r)
        ct: dict = {}
        if r.flush_before:
            self.table.clear()
        ct["before"] = len(self.table)
        n = r.connections
        sent = n if r.duration_s is None else int(r.rate_pps * r.duration_s) * r.directions
        received = sent
        if r.direction == "forward":
            ok = n if r.rate_pps <= self.cps else int(n * self.cps / r.rate_pps)
            for i in range(ok):
                if len(self.table) < self.capacity:
                    self.table.add(i)
            received = min(ok, self.capacity)
        elif r.direction == "reverse":
            received = len(self.table)
        elif r.rate_pps > self.bidir:
            received = int(sent * self.bidir / r.rate_pps)
        ct["after"] = len(self.table)
        if r.check_tuples:
            ct["tuples"] = {"entries": len(self.table), "port_changed": self.remap,
                            "examples": ["198.18.0.2:1 -> 198.19.0.1:2"] if self.remap else []}
        if r.teardown:
            ct.update(teardown_entries=len(self.table), teardown_s=0.002 + len(self.table) * 1e-6,
                      empty_flush_s=0.002, after_teardown=0)
            self.table.clear()
        return TrialCounts(achieved_pps=r.rate_pps * r.directions, frames_sent=sent, frames_received=received,
                           raw={"conntrack": ct})


def ctx(dut: object, **kw: object) -> Context:
    return Context(measurer=dut, frame=FRAME, line_rate=LineRate(10e9), trial_duration_s=1.0,  # type: ignore[arg-type]
                   command_env=ENV, **kw)  # type: ignore[arg-type]


def test_the_method_on_a_fake_stateful_dut():
    dut = TableDut(capacity=5000)
    p = StatefulParams(connections=2000, establish_rate_pps=10_000, capacity_connections=(1000, 5000, 8000),
                       max_rate_pps=1e6, duration_s=1.0)
    r = measure_stateful(p, ctx(dut))
    assert r.preliminary.conntrack_after == 2000 and r.validation.frames_received == 2000
    assert r.establishment_rate_cps is not None and 0.97 * 80_000 <= r.establishment_rate_cps <= 80_000
    assert r.throughput_pps is not None and 0.97 * 30_000 <= r.throughput_pps <= 30_000
    assert r.teardown is not None and r.teardown.entries == 2000
    assert r.teardown_rate_cps == pytest.approx(2000 / (2000 * 1e-6))
    assert [c.ok for c in r.capacity] == [True, True, False] and r.capacity_connections == 5000
    d = r.to_dict()
    assert d["capacity_connections"] == 5000 and d["src_ports"] * d["dst_ports"] == 2000
    # the preliminary phase and every establishment step start from an empty table
    assert dut.requests[0].flush_before and dut.requests[0].check_tuples
    assert all(q.flush_before for q in dut.requests if q.direction == "forward")


def test_remapped_source_ports_are_refused():
    with pytest.raises(MethodologyError, match="remapped the source port of 3"):
        measure_stateful(StatefulParams(connections=100), ctx(TableDut(remap=3)))


def test_a_preliminary_phase_that_does_not_fill_the_table_stops_the_method():
    with pytest.raises(MethodologyError, match="preliminary phase"):
        measure_stateful(StatefulParams(connections=1000), ctx(TableDut(capacity=500)))


def test_simulated_and_stateless_test_beds_are_refused():
    with pytest.raises(ConfigError) as e:
        measure_stateful(StatefulParams(), replace(ctx(TableDut()), command_env={"NETRIG_TESTBED_TOPOLOGY": "router"}))
    assert e.value.field == "testbed"
    with pytest.raises(CapabilityError):
        SimulatedMeasurer(DutModel()).measure_flows(FlowTrial(1000, FRAME, 10))
    assert "stateful" in REGISTRY and REGISTRY.get("stateful").shortcut is not None


def test_a_search_capped_at_the_tester_limit_says_so():
    s = bisect(lambda r: (True, r, False), 70_000, 1.0, capped=True)
    assert s.rate_pps == 70_000 and s.tester_limited and s.trials == 1


class StallingDut(TableDut):
    """The tester stalls (an invalid, stretched trial: 97 % of the rate, stopped early) in the first
    ``stalls`` search steps at a rate the DUT passes, each below a step before it."""

    def __init__(self, stalls: int = 1):
        super().__init__()
        self.stalls, self.stalled = stalls, 0
        self.top: dict[str, float] = {}

    def measure_flows(self, r: FlowTrial) -> TrialCounts:
        c = super().measure_flows(r)
        kind = "both" if r.direction == "both" else ("establish" if r.flush_before else "")
        passes = r.rate_pps <= (self.bidir if kind == "both" else self.cps)
        below = bool(kind) and passes and r.rate_pps < self.top.get(kind, 0.0)
        if kind:
            self.top[kind] = max(self.top.get(kind, 0.0), r.rate_pps)
        if not below or self.stalled >= self.stalls:
            return c
        self.stalled += 1
        return replace(c, achieved_pps=0.97 * c.achieved_pps, frames_sent=c.frames_sent // 10,
                       frames_received=c.frames_received // 10, valid=False, invalid_reason="stretched")


@pytest.mark.parametrize("stalls", [1, 2])
def test_a_stall_below_a_rate_the_tester_sent_is_repeated_not_its_limit(stalls):
    """The tester sent 1 Mfps per direction in full (the DUT lost most of it); a step below it that
    fell short was a stall: repeated. Taken as the tester's limit, it capped the search at a rate
    the DUT passes, far below its 30 kfps (or 80 k connections/s)."""
    p = StatefulParams(connections=2000, establish_rate_pps=10_000, teardown=False, max_rate_pps=1e6, duration_s=1.0)
    dut = StallingDut(stalls=stalls)
    r = measure_stateful(p, ctx(dut))
    tp, est = r.throughput, r.establishment
    assert tp is not None and est is not None and dut.stalled == stalls
    assert 0.97 * 30_000 <= tp.rate_pps <= 30_000 and not tp.tester_limited
    assert 0.97 * 80_000 <= est.rate_pps <= 80_000 and not est.tester_limited
    assert tp.repeated_trials + est.repeated_trials == stalls
    assert r.to_dict()["throughput"]["repeated_trials"] == tp.repeated_trials


class HostSpoiltDut(TableDut):
    """The host takes the tester's CPU in every bidirectional throughput step between 26 and 29 kfps
    per direction: 10 % short, the CPU it took covering the stretch (``host_take_s``)."""

    def __init__(self):
        super().__init__()
        self.spoilt: list[float] = []

    def measure_flows(self, r: FlowTrial) -> TrialCounts:
        c = super().measure_flows(r)
        if r.direction != "both" or not 26e3 <= r.rate_pps <= 29e3:
            return c
        self.spoilt.append(r.rate_pps)
        return replace(c, achieved_pps=0.9 * c.achieved_pps, frames_sent=c.frames_sent * 9 // 10,
                       frames_received=c.frames_received * 9 // 10, valid=False, invalid_reason="stretched",
                       host_take_s=0.28)


def test_a_step_the_host_spoilt_in_every_attempt_stops_the_search_at_a_lower_bound():
    """The throughput search passes 23.4 kfps per direction, then the step at 27.3 kfps, below the DUT's
    30 kfps, is spoilt by the host: tried three times, then the search stops — "≥ 23.4 kfps", the host
    named, never a tester limit walked down below the DUT's."""
    p = StatefulParams(connections=2000, establish_rate_pps=10_000, teardown=False, max_rate_pps=125e3,
                       duration_s=1.0)
    dut = HostSpoiltDut()
    r = measure_stateful(p, ctx(dut))
    tp = r.throughput
    assert tp is not None and dut.spoilt == [dut.spoilt[0]] * 3, dut.spoilt
    assert tp.tester_limited and tp.platform and "the host took 280 ms" in tp.platform, tp
    assert tp.rate_pps == pytest.approx(23_437.5) and dut.spoilt[0] == pytest.approx(27_343.75), dut.spoilt
    assert tp.upper_pps == pytest.approx(31_250) and tp.repeated_trials == 2 and tp.trials == 8, tp
    assert r.platform == tp.platform and r.to_dict()["throughput"]["platform"] == tp.platform
    assert r.establishment is not None and r.establishment.platform is None


class RingDroppingDut(TableDut):
    """The tester's own receive ring drops 7 frames of every trial: they passed the DUT."""

    def measure_flows(self, r: FlowTrial) -> TrialCounts:
        c = super().measure_flows(r)
        return replace(c, frames_received=c.frames_received - 7, valid=False,
                       invalid_reason="the tester's receive ring dropped 7 frames",
                       raw={**c.raw, "engine": {"tester_rx_drops": 7}})


def test_the_testers_own_ring_drops_are_not_lost_connections():
    r = measure_stateful(StatefulParams(connections=1000, throughput=False, establishment_rate=False,
                                        capacity_connections=(500,)), ctx(RingDroppingDut()))
    assert r.preliminary.tester_rx_drops == 7 and r.preliminary.conntrack_after == 1000
    assert r.capacity[0].ok and r.capacity[0].tester_rx_drops == 14


def test_report_sections_read_the_result_back():
    from netrig.view.run_view import RunView
    r = measure_stateful(StatefulParams(connections=2000, capacity_connections=(1000,), max_rate_pps=1e6),
                         ctx(TableDut()))
    doc = {"summary": [{"method": "stateful", "results": [{"frame_size": 64, "repetitions": [r.to_dict()]}]}]}
    m = REGISTRY.get("stateful")
    html = m.html(RunView(doc))["stateful"]
    assert "2,000" in html and "conn/s" in html and "Connection tracking table capacity" in html
    assert "Stateful NAT/firewall" in m.markdown(RunView(doc))
    assert m.html(RunView({"summary": []})) == {} and m.markdown(RunView({"summary": []})) == ""
    row = m.console_rows({"frame_size": 64, "repetitions": [r.to_dict()]}, "")[0]
    assert row[1] == "2,000" and row[-2] == "1,000"
    stored = json.loads(json.dumps(r.to_dict()))
    assert m.read_result(stored, FRAME, LineRate(10e9)) == r, "read back as its type, every part"
