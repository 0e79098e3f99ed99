"""A lossy DUT between the ports: a namespace that forwards between two veth pairs and drops one
frame in 1000 (nftables ``numgen``, counted). The flow's loss is the DUT's own drop counter, frame
for frame."""
from __future__ import annotations

import json

import pytest
from tests.conftest import forwarding_namespace, needs_root, sh
from tests.otg.conftest import api, control, serve, wait_stopped

pytestmark = [needs_root, pytest.mark.root]

FRAMES = 20_000


def dropped(ns: str) -> int:
    """The DUT's drop counter."""
    table = json.loads(sh("nft", "-j", "list", "table", "netdev", "netrig_test", ns=ns))
    rules = [item["rule"] for item in table["nftables"] if "rule" in item]
    return sum(e["counter"]["packets"] for r in rules for e in r["expr"] if "counter" in e)


def test_flow_loss_is_the_duts_drop_count(veth):
    ns_a, if_a, ns_b, if_b = veth
    rx_if = forwarding_namespace(ns_b, if_b, "numgen random mod 1000 == 0 counter drop")
    ports = [f"{if_a}@{ns_a}", f"{rx_if}@{ns_b}"]
    with serve(ports) as url:
        a = api(url)
        c = a.config()
        c.ports.port(name="tx", location=ports[0]).port(name="rx", location=ports[1])
        f = c.flows.flow(name="lossy")[-1]
        f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = "tx", ["rx"]
        eth, ip, _ = f.packet.ethernet().ipv4().udp()
        eth.src.value, eth.dst.value = "02:00:00:00:00:01", "02:00:00:00:00:02"
        ip.src.value, ip.dst.value = "198.18.0.1", "198.19.0.1"
        f.size.fixed = 128
        f.rate.pps = 40_000
        f.duration.fixed_packets.packets = FRAMES
        f.metrics.enable, f.metrics.loss = True, True
        a.set_config(c)
        control(a, "start")
        m = wait_stopped(a, ["lossy"])["lossy"]
    drops = dropped(ns_b)
    assert m.frames_tx == FRAMES
    assert m.frames_tx - m.frames_rx == drops > 0
    assert m.loss == pytest.approx(100 * drops / FRAMES)
