"""OTG metric tags on `netrig serve`, driven by snappi: a flow whose IPv4 source (its last two bits)
and UDP destination port are tagged counts each combination of their values exactly, sent and
received; what arrived is checked against the capture of the receiving port, frame by frame."""
from __future__ import annotations

import collections
import struct

import pytest
from tests.conftest import needs_root
from tests.otg.conftest import api, capture_state, control, serve, wait_stopped
from tests.otg.test_serve_veth import pcapng_frames

pytestmark = [needs_root, pytest.mark.root]

FRAMES = 3_000
PORTS = (5000, 5001, 5002)


def tagged_config(a, ports: list[str]):
    c = a.config()
    c.ports.port(name="p1", location=ports[0]).port(name="p2", location=ports[1])
    c.captures.capture(name="cap", port_names=["p2"], format="pcapng")
    f = c.flows.flow(name="tagged")[-1]
    f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = "p1", ["p2"]
    eth, ip, udp = f.packet.ethernet().ipv4().udp()
    eth.src.value, eth.dst.value = "02:00:00:00:01:01", "02:00:00:00:02:02"
    ip.src.increment.start, ip.src.increment.step, ip.src.increment.count = "198.18.0.1", "0.0.0.1", 4
    ip.src.metric_tags.add(name="src_low", offset=30, length=2)
    ip.dst.value = "198.19.0.1"
    udp.dst_port.values = list(PORTS)
    udp.dst_port.metric_tags.add(name="dport")
    f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 20_000, FRAMES
    f.metrics.enable, f.metrics.loss = True, True
    return c


def tag_rows(a, filters: dict[str, list[str]] | None = None) -> dict[tuple[str, ...], tuple[int, int]]:
    req = a.metrics_request()
    req.flow.flow_names = ["tagged"]
    req.flow.tagged_metrics.include = True
    for name, values in (filters or {}).items():
        req.flow.tagged_metrics.filters.add(name=name, values=values)
    (m,) = a.get_metrics(req).flow_metrics
    return {tuple(f"{t.name}={t.value.hex}" for t in row.tags): (row.frames_tx, row.frames_rx)
            for row in m.tagged_metrics}


def test_tagged_fields_count_each_combination_exactly(veth):
    ns_a, if_a, ns_b, if_b = veth
    with serve([f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"]) as url:
        a = api(url)
        a.set_config(tagged_config(a, [f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"]))
        capture_state(a, "start", ["p2"])
        control(a, "start")
        m = wait_stopped(a, ["tagged"])["tagged"]
        assert m.frames_tx == m.frames_rx == FRAMES
        rows = tag_rows(a)
        capture_state(a, "stop", ["p2"])
        req = a.capture_request()
        req.port_name = "p2"
        frames = pcapng_frames(a.get_capture(req).read())
        only = tag_rows(a, {"dport": ["0x1389"]})
    # frame j carries source .1+(j mod 4) and port PORTS[j mod 3]: twelve combinations, 250 frames each
    seen = collections.Counter(
        (f"src_low=0x{(f[29] & 3):x}", f"dport=0x{struct.unpack_from('!H', f, 36)[0]:04x}") for f in frames
        if len(f) >= 38 and f[12:14] == b"\x08\x00")
    assert sum(seen.values()) == FRAMES and len(seen) == 12
    assert rows == {k: (n, n) for k, n in seen.items()}, (rows, seen)
    assert all(n == FRAMES // 12 for n in seen.values())
    assert set(only) == {k for k in seen if k[1] == "dport=0x1389"}
