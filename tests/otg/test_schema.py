"""OTG objects are checked against snappi's model tables: every error names its JSON path; what
snappi lets through (unknown properties, two choice members, null) is refused too."""
from __future__ import annotations

import json
import logging

import pytest
import snappi

from netrig.errors import ConfigError
from netrig.otg import schema

logging.getLogger("snappi").setLevel(logging.ERROR)


def flow(**extra) -> dict:
    f = {"name": "f", "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}}}
    f.update(extra)
    return {"ports": [{"name": "p1", "location": "a"}, {"name": "p2", "location": "b"}], "flows": [f]}


@pytest.mark.parametrize("cfg, path, words", [
    (flow(packet=[{"choice": "ipv4", "ipv4": {"src": {"choice": "value", "value": "1.2.3.999"}}}]),
     "flows[0].packet[0].ipv4.src.value", "not an IPv4 address"),
    (flow(packet=[{"choice": "ethernet", "ethernet": {"dst": {"value": "00:11:22:33:44"}}}]),
     "flows[0].packet[0].ethernet.dst.value", "not a MAC address"),
    (flow(packet=[{"choice": "udp", "udp": {"src_port": {"choice": "value", "value": 70000}}}]),
     "flows[0].packet[0].udp.src_port.value", "out of range"),
    (flow(rate={"choice": "ppx"}), "flows[0].rate.choice", "not one of"),
    (flow(rate={"choice": "pps", "pps": 0}), "flows[0].rate.pps", "out of range"),
    (flow(bogus=1), "flows[0].bogus", "not a property of Flow"),
    (flow(rate={"pps": 10, "bps": 1000}), "flows[0].rate", "members of one choice"),
    (flow(rate={"choice": "pps", "bps": 1000}), "flows[0].rate.bps", "choice is 'pps'"),
    (flow(size=None), "flows[0].size", "null"),
    ({"flows": [{"name": "x"}]}, "flows[0].tx_rx", "required"),
    ({"ports": "p1"}, "ports", "not a list"),
])
def test_errors_name_the_path(cfg, path, words):
    with pytest.raises(ConfigError) as e:
        schema.check("Config", cfg)
    assert e.value.field == path and words in e.value.message, str(e.value)


def test_normalises_what_clients_send():
    # protojson (gosnappi) sends 64-bit integers as strings; a choice may be given by its member only.
    cfg = flow(rate={"pps": "1000"}, duration={"fixed_packets": {"packets": 5}})
    schema.check("Config", cfg)
    f = cfg["flows"][0]
    assert f["rate"] == {"choice": "pps", "pps": 1000}
    assert f["duration"]["choice"] == "fixed_packets"


def test_what_snappi_serialises_passes():
    c = snappi.Config()
    c.ports.port(name="p1", location="a").port(name="p2", location="b")
    f = c.flows.flow(name="f1")[-1]
    f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = "p1", ["p2"]
    eth, vlan, ip, udp = f.packet.ethernet().vlan().ipv4().udp()
    eth.src.increment.start, eth.src.increment.count = "02:00:00:00:00:01", 4
    vlan.id.values = [10, 20]
    ip.src.random.min, ip.src.random.max, ip.src.random.count = "198.18.0.1", "198.18.0.200", 9
    ip.priority.dscp.phb.value = 46
    udp.dst_port.decrement.start = 5000
    f.size.weight_pairs.custom.custom(size=64, weight=3.5)
    f.rate.percentage = 10
    f.duration.burst.inter_burst_gap.nanoseconds = 1000
    f.metrics.latency.mode = "cut_through"
    data = json.loads(c.serialize())
    assert schema.check("Config", data) is data


def test_defaults_come_from_the_model():
    s = schema.schema("PatternFlowIpv4TimeToLive")
    assert s.defaults["value"] == 64
    assert schema.schema("FlowRate").default_choice == "pps"
    assert schema.API_SPEC_RANGE.startswith(">=1.58.0")
