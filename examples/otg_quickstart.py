"""netrig serve from snappi: one flow with varying addresses and ports and IMIX sizes
(64-byte frames hold Ethernet, IPv4, UDP and the 18-byte signature; a VLAN tag would need 68).

Start the server first (as root; two ports, here a veth pair between two namespaces):

    netrig serve --port veth0@nsa --port veth1@nsb

then run this (snappi comes with netrig):

    python examples/otg_quickstart.py --location https://127.0.0.1:8443 --tx veth0@nsa --rx veth1@nsb
"""
from __future__ import annotations

import argparse
import time

import snappi


def build(api, tx: str, rx: str, packets: int, pps: int):
    """The configuration: ports p1 (tx) and p2 (rx), flow f1."""
    cfg = api.config()
    cfg.ports.port(name="p1", location=tx).port(name="p2", location=rx)
    f = cfg.flows.flow(name="f1")[-1]
    f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = "p1", ["p2"]
    eth, ip, udp = f.packet.ethernet().ipv4().udp()
    eth.src.value, eth.dst.value = "02:00:00:00:00:01", "02:00:00:00:00:02"
    ip.src.increment.start, ip.src.increment.count = "198.18.0.1", 10
    ip.dst.value = "198.19.0.1"
    udp.src_port.random.min, udp.src_port.random.max, udp.src_port.random.count = 1024, 65535, 100
    f.size.weight_pairs.predefined = "imix"
    f.rate.pps = pps
    f.duration.fixed_packets.packets = packets
    f.metrics.enable, f.metrics.loss, f.metrics.latency.enable = True, True, True
    return cfg


def run(api, limit_s: float):
    """Starts every flow and polls its metrics until it has stopped; returns f1's metrics."""
    cs = api.control_state()
    cs.traffic.flow_transmit.state = "start"
    api.set_control_state(cs)
    req = api.metrics_request()
    req.flow.flow_names = ["f1"]
    end = time.monotonic() + limit_s
    while True:
        m = api.get_metrics(req).flow_metrics[0]
        if m.transmit == "stopped" or time.monotonic() > end:
            return m
        time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--location", default="https://127.0.0.1:8443", help="the server's URL")
    ap.add_argument("--tx", required=True, help="the sending port's location (a --port of netrig serve)")
    ap.add_argument("--rx", required=True, help="the receiving port's location")
    ap.add_argument("--packets", type=int, default=50_000)
    ap.add_argument("--pps", type=int, default=10_000)
    args = ap.parse_args()
    api = snappi.api(location=args.location, verify=False, version_check=True)
    api.set_config(build(api, args.tx, args.rx, args.packets, args.pps))
    m = run(api, limit_s=60 + args.packets / args.pps)
    lat = m.latency
    print(f"f1: {m.transmit}, sent {m.frames_tx}, received {m.frames_rx}, loss {m.loss} %")
    print(f"latency (store and forward) min {lat.minimum_ns} ns, avg {lat.average_ns} ns, max {lat.maximum_ns} ns")


if __name__ == "__main__":
    main()
