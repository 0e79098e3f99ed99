"""The controller's pure parts: a config split per agent, the agents' metric rows merged."""
from __future__ import annotations

import dataclasses

import pytest

from netrig.cli.main import main
from netrig.controller import merge
from netrig.controller.agents import AgentSpec
from netrig.controller.clock import ClockEstimate
from netrig.controller.controller import Controller
from netrig.controller.split import split
from netrig.errors import ConfigError
from netrig.otg import metrics
from netrig.otg.objects import Config, ControlAction, ControlState, read
from netrig.otgclient.messages import FlowMetric, MetricLatency, PortMetric
from netrig.otgclient.report import FlowIpdv, FlowLatency, FlowSequence


def cfg() -> dict:
    ports = [{"name": n, "location": f"{n[0]}/{n}"} for n in ("a1", "a2", "b1")]
    flows = [{"name": n, "tx_rx": {"choice": "port", "port": {"tx_name": tx, "rx_names": rx}},
              "packet": [{"choice": "ethernet"}, {"choice": "ipv4", "ipv4": {"src": {"value": "198.18.0.1"}}}]}
             for n, tx, rx in (("fa", "a1", ["a2"]), ("fab", "a2", ["b1"]), ("fba", "b1", ["a1", "a2"]))]
    return {"ports": ports, "flows": flows, "layer1": [{"name": "l", "port_names": ["a1", "b1"]}]}


def split_of(doc: dict, agents: list[str]):
    return split(read(Config, doc, defer_headers=True), doc, agents)


def test_split_gives_each_agent_its_ports_and_every_flow_in_order():
    sp = split_of(cfg(), ["a", "b"])
    a, b = sp.parts["a"], sp.parts["b"]
    assert [p["location"] for p in a["ports"]] == ["a1", "a2"] and [p["name"] for p in b["ports"]] == ["b1"]
    assert [f["name"] for f in a["flows"]] == [f["name"] for f in b["flows"]] == ["fa", "fab", "fba"]
    # b does not send fa or fab: re-pointed at its own port, never started there; fab received on b1
    assert b["flows"][1]["tx_rx"]["port"] == {"tx_name": "b1", "rx_names": ["b1"]}
    assert a["flows"][2]["tx_rx"]["port"] == {"tx_name": "a1", "rx_names": ["a1", "a2"]}
    assert a["layer1"] == [{"name": "l", "port_names": ["a1"]}]
    assert sp.tx_flows("a", ["fa", "fab", "fba"]) == ["fa", "fab"]
    assert sp.rx_only_flows("a", ["fa", "fab", "fba"]) == ["fba"]
    assert [r.crosses for r in sp.routes] == [False, True, True]
    assert b["flows"][0]["packet"] == cfg()["flows"][0]["packet"]  # the headers as given, on every agent


@pytest.mark.parametrize("loc, words", [("eth1", "AGENT/INTERFACE"), ("c/eth1", "no agent 'c'"),
                                        ("a/", "AGENT/INTERFACE"), (None, "AGENT/INTERFACE")])
def test_bad_location_names_the_field(loc, words):
    c = cfg()
    c["ports"][1]["location"] = loc
    if loc is None:
        del c["ports"][1]["location"]
    with pytest.raises(ConfigError, match=r"ports\[1\]\.location") as e:
        split_of(c, ["a", "b"])
    assert words in str(e.value)


def test_bad_agent_option():
    assert AgentSpec.parse("a=http://198.18.0.2:8441").url == "http://198.18.0.2:8441"
    for bad in ("a", "a=ftp://x", "=http://x", "a b=http://x"):
        with pytest.raises(ConfigError, match="--agent"):
            AgentSpec.parse(bad)


@pytest.mark.parametrize("agents, names", [
    (["a=http://127.0.0.1:1", "b=http://127.0.0.2:1", "c=HTTP://127.0.0.1:1/"], "a and c"),
    (["a=https://127.0.0.1", "b=https://127.0.0.1:443"], "a and b"),  # the default port is the scheme's
])
def test_one_agent_under_two_names_is_refused_naming_both(agents, names, capsys):
    """Each name's part of a config would replace the other's on the one agent: refused at start,
    before any agent is reached."""
    argv = ["serve", "--http", "--listen", "127.0.0.1:1", *[w for a in agents for w in ("--agent", a)]]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    print(err)
    assert err.startswith("netrig: error: --agent: ") and f"{names} are one agent (" in err, err


def test_one_physical_port_reached_twice_is_refused_naming_both():
    c = cfg()
    c["ports"][2] = {"name": "b1", "location": "a/a1"}  # a1's own port, under another name
    with pytest.raises(ConfigError, match=r"ports\[2\]\.location") as e:
        split_of(c, ["a", "b"])
    assert "'a1'" in str(e.value) and "'b1'" in str(e.value) and "a/a1" in str(e.value)


def test_devices_and_lldp_are_refused_on_a_controller_saying_why_and_metric_tags_split():
    c = cfg()
    c["devices"] = [{"name": "d1", "ethernets": [{"name": "e1", "connection": {"choice": "port_name",
                                                                                "port_name": "a1"}}]}]
    with pytest.raises(ConfigError) as e:
        split_of(c, ["a", "b"])
    assert e.value.field == "devices" and "agent that holds the port" in e.value.message
    c = cfg()
    c["lldp"] = [{"name": "l", "connection": {"choice": "port_name", "port_name": "a1"}}]
    with pytest.raises(ConfigError) as e:
        split_of(c, ["a", "b"])
    assert e.value.field == "lldp" and "agent that holds the port" in e.value.message
    c = cfg()
    c["flows"][0]["packet"] = [{"choice": "ethernet"}, {"choice": "ipv4", "ipv4": {"src": {
        "choice": "values", "values": ["198.18.0.1", "198.18.0.2"], "metric_tags": [{"name": "src"}]}}}]
    assert len(split_of(c, ["a", "b"]).routes) == len(c["flows"])  # merged by the controller


def test_link_changes_updates_and_pings_are_refused_on_a_controller_saying_why():
    c = Controller([])
    with pytest.raises(ConfigError) as e:
        c.update_config({"flows": {"property_names": ["rate"], "flows": cfg()["flows"][:1]}})
    assert e.value.field == "choice" and "does not forward updates to its agents" in e.value.message
    link = read(ControlState, {"choice": "port", "port": {"choice": "link", "link": {"port_names": ["a1"],
                                                                                       "state": "down"}}})
    with pytest.raises(ConfigError) as e:
        c.control_state(link)
    assert e.value.field == "port" and "set them on the agent that serves the port" in e.value.message
    ping = read(ControlAction, {"choice": "protocol", "protocol": {"choice": "ipv4", "ipv4": {
        "choice": "ping", "ping": {"requests": [{"src_name": "d1.ipv4", "dst_ip": "198.18.0.2"}]}}}})
    with pytest.raises(ConfigError) as e:
        c.control_action(ping)
    assert e.value.field == "choice" and "no devices to ping from" in e.value.message


def tag(name: str, v: int) -> dict:
    return {"name": name, "value": {"choice": "hex", "hex": hex(v)}}


def test_tagged_rows_merge_senders_counts_with_every_receivers():
    """A tagged flow's rows: sent as the sending agent counted them, received summed over its
    receiving agents per combination, loss recomputed; empty rows, filters and names as asked."""
    c = cfg()
    route = dataclasses.replace(split_of(c, ["a", "b"]).routes[2], rx_agents=("a", "b"))
    tx = [{"tags": [tag("p", 0)], "frames_tx": 10, "frames_rx": 0}, {"tags": [tag("p", 1)], "frames_tx": 10,
                                                                       "frames_rx": 0},
          {"tags": [tag("p", 2)], "frames_tx": 0, "frames_rx": 0}]
    rows = {"b": FlowMetric(name="fba", frames_tx=20, loss=0.0, tagged_metrics=tuple(tx)),
            "a": FlowMetric(name="fba", frames_rx=12, tagged_metrics=({"tags": [tag("p", 0)], "frames_rx": 6},
                                                                       {"tags": [tag("p", 1)], "frames_rx": 6}))}
    rows["b"] = dataclasses.replace(rows["b"], tagged_metrics=(*tx[:1], {**tx[1], "frames_rx": 3}, tx[2]))
    got = merge.tagged_rows(route, rows, metrics.tagged_request(None, lambda _: None), loss=True)
    assert [(r["tags"][0]["value"]["hex"], r["frames_tx"], r["frames_rx"], r["loss"]) for r in got] == [
        ("0x0", 10, 6, 40.0), ("0x1", 10, 9, 10.0)]
    every = merge.tagged_rows(route, rows, metrics.tagged_request({"include_empty_metrics": True}, lambda _: None),
                              loss=False)
    assert len(every) == 3 and "loss" not in every[0]
    one = merge.tagged_rows(route, rows, metrics.tagged_request(
        {"filters": [{"name": "p", "values": ["0x1"]}], "metric_names": ["frames_rx"]}, lambda _: None), loss=True)
    assert one == [{"tags": [tag("p", 1)], "frames_rx": 9}]
    assert merge.tagged_rows(route, rows, metrics.tagged_request({"include": False}, lambda _: None), True) is None


def test_merge_sums_receivers_corrects_latency_and_marks_stale():
    c = cfg()
    sp = split_of(c, ["a", "b"])
    fba = sp.routes[2]
    rows = {"b": FlowMetric(name="fba", frames_tx=100, frames_rx=0, transmit="stopped", loss=100.0),
            "a": FlowMetric(name="fba", frames_rx=100, frames_tx=0, loss=0.0,
                            latency=MetricLatency(minimum_ns=9000.0, maximum_ns=12000.0, average_ns=10000.0))}
    clocks = {"a": ClockEstimate(2000, 100), "b": ClockEstimate(-1000, 200)}
    flow = read(Config, c).flows[2]
    row, note = merge.flow_row(fba, rows, flow, clocks, set())
    assert (row.frames_tx, row.frames_rx, row.loss, row.transmit) == (100, 100, 0.0, "stopped")
    assert row.latency == MetricLatency(minimum_ns=6000.0, maximum_ns=9000.0, average_ns=7000.0)
    assert note == merge.LatencyNote("fba", 6000.0, 7000.0, 9000.0, 3000.0, 300.0)
    assert note.reported == ("minimum_ns", "average_ns", "maximum_ns")
    wide = {"a": ClockEstimate(2000, 9000), "b": ClockEstimate(-1000, 200)}
    row, note = merge.flow_row(fba, rows, flow, wide, set())
    assert row.latency is None and note is not None and not note.reported  # bound above the value
    row, _ = merge.flow_row(fba, rows, flow, clocks, {"b"})
    assert row.loss is None and row.transmit == "stopped"  # stale, never loss
    # two receiving ports and rx_count: twice the frames sent are expected
    doubled = read(Config, {**c, "flows": [{**c["flows"][2], "metrics": {"rx_tx_ratio": {"choice": "rx_count"}}}]})
    row, _ = merge.flow_row(fba, rows, doubled.flows[0], clocks, set())
    assert row.loss == 50.0


def test_a_flow_with_frames_too_small_for_the_signature_reports_no_loss_across_agents():
    """The sender counts its untracked frames, no receiver can: a merged loss would be false."""
    c = cfg()
    c["flows"][2]["packet"] = [{"choice": "ethernet"}, {"choice": "vlan"}, {"choice": "ipv4"}, {"choice": "tcp"}]
    c["flows"][2]["size"] = {"choice": "increment", "increment": {"start": 64, "end": 80, "step": 4}}
    sp = split_of(c, ["a", "b"])
    assert [r.untracked for r in sp.routes] == [False, False, True]
    rows = {"b": FlowMetric(name="fba", frames_tx=100, frames_rx=0, transmit="stopped", loss=100.0),
            "a": FlowMetric(name="fba", frames_rx=20, frames_tx=0, loss=0.0)}
    row, _ = merge.flow_row(sp.routes[2], rows, read(Config, c).flows[2], {}, set())
    assert (row.frames_tx, row.frames_rx, row.loss) == (100, 20, None)


def test_a_port_of_an_agent_down_has_its_link_down():
    row = PortMetric(name="a1", location="a1", link="up", transmit="started", frames_tx=5)
    assert merge.port_row(row, "a/a1", False) == PortMetric(name="a1", location="a/a1", link="up",
                                                            transmit="started", frames_tx=5)
    down = merge.port_row(row, "a/a1", True)
    assert (down.location, down.link, down.transmit, down.frames_tx) == ("a/a1", "down", "stopped", 5)


def fab_rows(raw: MetricLatency) -> dict[str, FlowMetric]:
    """Flow fab (a2 → b1) as its agents report it: a sends (its row names the stand-in port it was
    given, a2, as the receiver), b receives with ``raw`` latency (its clock's offset in it)."""
    return {"a": FlowMetric(name="fab", port_tx="a2", port_rx="a2", frames_tx=100, frames_rx=0, loss=100.0,
                            transmit="stopped"),
            "b": FlowMetric(name="fab", port_tx="b1", port_rx="b1", frames_tx=0, frames_rx=100, loss=0.0,
                            latency=raw)}


def test_merge_names_the_ports_that_sent_and_received():
    """Issue 45: a flow received on b1 was reported with the sending agent's stand-in port."""
    c = cfg()
    sp = split_of(c, ["a", "b"])
    row, _ = merge.flow_row(sp.routes[1], fab_rows(MetricLatency(minimum_ns=1.0, maximum_ns=1.0, average_ns=1.0)),
                            read(Config, c).flows[1], {"a": ClockEstimate(0, 0), "b": ClockEstimate(0, 0)}, set())
    assert (row.port_tx, row.port_rx) == ("a2", "b1")
    row, _ = merge.flow_row(sp.routes[1], {}, read(Config, c).flows[1], {}, {"a", "b"})  # no row at all: stale
    assert (row.port_tx, row.port_rx, row.loss) == ("a2", "b1", None)


def test_a_cross_agent_latency_statistic_within_its_bound_is_never_reported():
    """Issue 45: one host, one clock, the true latency ~5 µs; the receiver fell behind, so its average
    and maximum are far above the clocks' ±600-µs bound, its minimum within it. Only the statistics
    above the bound are values: never the minimum, never a corrected minimum clamped to 0."""
    c = cfg()
    sp, flow = split_of(c, ["a", "b"]), read(Config, c).flows[1]
    clocks = {"a": ClockEstimate(0, 300_000), "b": ClockEstimate(60_000, 300_000)}  # b's estimate 60 µs ahead
    behind = MetricLatency(minimum_ns=5_000.0, average_ns=40e6, maximum_ns=350e6)
    row, note = merge.flow_row(sp.routes[1], fab_rows(behind), flow, clocks, set())
    assert row.latency == MetricLatency(average_ns=40e6 - 60_000, maximum_ns=350e6 - 60_000)
    assert note is not None and note.minimum_ns == -55_000.0 and note.reported == ("average_ns", "maximum_ns")
    # an estimate off by more than its bound makes every value negative: none is reported (was: 0, 0, 0)
    wrong = {"a": ClockEstimate(0, 50_000), "b": ClockEstimate(2e6, 50_000)}
    row, note = merge.flow_row(sp.routes[1], fab_rows(MetricLatency(minimum_ns=2_000.0, average_ns=5_000.0,
                                                                    maximum_ns=9_000.0)), flow, wrong, set())
    assert row.latency is None and note is not None and note.reported == ()


def test_each_flows_duplicates_and_reordering_are_summed_over_its_receiving_agents():
    a = (FlowSequence(name="f1", duplicated=2, reordered=1, frames_rx=60), FlowSequence(name="f2", frames_rx=0))
    b = (FlowSequence(name="f1", duplicated=3, reordered=0, frames_rx=40), FlowSequence(name="f3", reordered=7))
    assert merge.sequence([a, b]) == [{"name": "f1", "duplicated": 5, "reordered": 1, "frames_rx": 100},
                                      {"name": "f2", "duplicated": 0, "reordered": 0, "frames_rx": 0},
                                      {"name": "f3", "duplicated": 0, "reordered": 7, "frames_rx": None}]
    assert merge.sequence([a, None]) is None, "an agent that did not say: no partial sum"


def test_each_flows_latency_buckets_are_merged_over_its_receivers_less_each_ones_clock_offset():
    sp = split_of(cfg(), ["a", "b"])
    fba = sp.routes[2]  # sent on b, received on a
    clocks = {"fba": {"a": ClockEstimate(2000, 100), "b": ClockEstimate(-1000, 200)}}
    answers = {"a": (FlowLatency(name="fba", buckets=((9000, 60), (12000, 40))),),
               "b": (FlowLatency(name="fba"),)}
    assert merge.latency([fba], answers, clocks) == [
        {"name": "fba", "buckets": ((6000.0, 60), (9000.0, 40)), "uncertainty_ns": 300.0}]
    assert merge.latency([fba], {"a": (), "b": ()}, clocks) == [], "no buckets on its receiver: none merged"
    assert merge.latency([fba], {**answers, "b": None}, clocks) is None, "an agent that did not say"


def test_each_flows_ipdv_is_summed_over_its_receiving_agents_without_a_clock_correction():
    a = (FlowIpdv(name="f1", sum_ns=100, samples=10, max_ns=30, buckets=((10, 6), (30, 4))),)
    b = (FlowIpdv(name="f1", sum_ns=50, samples=5, max_ns=40, buckets=((10, 4), (40, 1))), FlowIpdv(name="f2"))
    assert merge.ipdv([a, b]) == [{"name": "f1", "sum_ns": 150, "samples": 15, "max_ns": 40,
                                   "buckets": ((10, 10), (30, 4), (40, 1))},
                                  {"name": "f2", "sum_ns": 0, "samples": 0, "max_ns": 0, "buckets": ()}]
    assert merge.ipdv([a, None]) is None


def test_a_stopped_flows_latency_stays_corrected_by_the_clocks_of_when_it_stopped():
    """PTP's bound is the largest offset over a sliding window: read a moment apart, a finished flow's
    12-µs average was a value in its metric and left out of its note, read after it within a 24-µs
    bound (a clean clone). A flow's correction is fixed when it is first read stopped; a start frees it."""
    from types import SimpleNamespace

    from netrig.controller.controller import Controller

    c = Controller([SimpleNamespace(name="a"), SimpleNamespace(name="b")], log=lambda line: None)
    try:
        sp = split_of(cfg(), ["a", "b"])
        fab, flow = sp.routes[1], read(Config, cfg()).flows[1]
        stopped = fab_rows(MetricLatency(minimum_ns=5_000.0, average_ns=12_000.0, maximum_ns=20_000.0))
        sending = {**stopped, "a": dataclasses.replace(stopped["a"], transmit="started")}
        narrow = {"a": ClockEstimate(0, 5_000), "b": ClockEstimate(0, 5_000)}
        wide = {"a": ClockEstimate(0, 12_000), "b": ClockEstimate(0, 12_000)}
        assert c._flow_clocks(fab, sending, narrow) is narrow and c._flow_clocks(fab, sending, wide) is wide
        assert c._flow_clocks(fab, stopped, narrow) is narrow
        assert c._flow_clocks(fab, stopped, wide) is narrow, "stopped: the clocks of when it stopped"
        row, note = merge.flow_row(fab, stopped, flow, c._flow_clocks(fab, stopped, wide), set())
        assert row.latency is not None and row.latency.average_ns == 12_000.0 and "average_ns" in note.reported
        c._forget([fab.name])  # what a start of the flow does first (Controller._start)
        assert c._flow_clocks(fab, sending, wide) is wide
    finally:
        c.pool.shutdown()
