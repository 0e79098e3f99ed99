"""The controller's pure parts: a config split per agent, the clock estimate, metrics merged."""
from __future__ import annotations

import pytest

from netrig.errors import ConfigError
from netrig.otg import clock, merge
from netrig.otg.agents import AgentSpec
from netrig.otg.split import split


def cfg() -> dict:
    ports = [{"name": n, "location": f"{n[0]}/{n}"} for n in ("a1", "a2", "b1")]
    flows = [{"name": n, "tx_rx": {"choice": "port", "port": {"tx_name": tx, "rx_names": rx}}}
             for n, tx, rx in (("fa", "a1", ["a2"]), ("fab", "a2", ["b1"]), ("fba", "b1", ["a1", "a2"]))]
    return {"ports": ports, "flows": flows, "layer1": [{"name": "l", "port_names": ["a1", "b1"]}]}


def test_split_gives_each_agent_its_ports_and_every_flow_in_order():
    sp = split(cfg(), ["a", "b"])
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


@pytest.mark.parametrize("loc, words", [("eth1", "AGENT/INTERFACE"), ("c/eth1", "no agent 'c'"),
                                        ("a/", "AGENT/INTERFACE"), (None, "AGENT/INTERFACE")])
def test_bad_location_names_the_field(loc, words):
    c = cfg()
    c["ports"][1]["location"] = loc
    with pytest.raises(ConfigError, match=r"ports\[1\]\.location") as e:
        split(c, ["a", "b"])
    assert words in str(e.value)


def test_bad_agent_option():
    assert AgentSpec.parse("a=http://198.18.0.2:8441").url == "http://198.18.0.2:8441"
    for bad in ("a", "a=ftp://x", "=http://x", "a b=http://x"):
        with pytest.raises(ConfigError, match="--agent"):
            AgentSpec.parse(bad)


def test_clock_keeps_the_tightest_exchange_and_widens_it_with_age():
    t = clock.ClockTracker()
    # round trip 1 µs of which the agent took 200 ns: ± 400; the agent 5 µs ahead
    t.add(clock.Sample(1_000_000, 1_005_400, 1_005_600, 1_001_000), None)
    t.add(clock.Sample(2_000_000, 2_050_000, 2_050_000, 2_100_000), None)  # round trip 100 µs
    est = t.estimate(now_ns=1_001_000)
    assert (est.offset_ns, est.uncertainty_ns) == (5000.0, 400.0)
    assert t.estimate(now_ns=1_001_000 + 1_000_000_000).uncertainty_ns == pytest.approx(400 + 50_000)
    assert clock.parse_stamps("12 34") == (12, 34) and clock.parse_stamps("x") is None


def test_ptp_from_pmc_and_between():
    out = "\tmaster_offset              -37\n\tgmPresent                  true\n\tgmIdentity   001122.fffe.334455\n"
    p = clock.parse_pmc(out)
    assert p == clock.Ptp("001122.fffe.334455", -37.0)
    assert clock.parse_pmc("gmPresent false") is None
    tx, rx = clock.ClockEstimate(100, 20, p), clock.ClockEstimate(-50, 30, clock.Ptp(p.grandmaster, 12))
    assert clock.between(tx, rx) == (0.0, 49.0)  # same grandmaster: PTP's bound
    assert clock.between(clock.ClockEstimate(100, 20), clock.ClockEstimate(-50, 30)) == (-150, 50)


def test_merge_sums_receivers_corrects_latency_and_marks_stale():
    sp = split(cfg(), ["a", "b"])
    fba = sp.routes[2]
    rows = {"b": {"name": "fba", "frames_tx": 100, "frames_rx": 0, "transmit": "stopped", "loss": 100.0},
            "a": {"name": "fba", "frames_rx": 100, "frames_tx": 0, "loss": 0.0,
                  "latency": {"minimum_ns": 9000.0, "maximum_ns": 12000.0, "average_ns": 10000.0}}}
    clocks = {"a": clock.ClockEstimate(2000, 100), "b": clock.ClockEstimate(-1000, 200)}
    flow = cfg()["flows"][2]
    row, note = merge.flow_row(fba, rows, flow, clocks, set())
    assert (row["frames_tx"], row["frames_rx"], row["loss"]) == (100, 100, 0.0)
    assert row["latency"]["average_ns"] == 7000.0 and note == merge.LatencyNote("fba", 7000.0, 3000.0, 300.0, True)
    wide = {"a": clock.ClockEstimate(2000, 9000), "b": clock.ClockEstimate(-1000, 200)}
    row, note = merge.flow_row(fba, rows, flow, wide, set())
    assert "latency" not in row and note is not None and not note.reported  # bound above the value
    row, _ = merge.flow_row(fba, rows, flow, clocks, {"b"})
    assert "loss" not in row and row["transmit"] == "stopped"  # stale, never loss
