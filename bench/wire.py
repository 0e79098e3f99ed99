#!/usr/bin/env python3
"""The embedded test bed as a DUT on a wire (docs/testbed.md, "The physics of the embedded test bed").

Part 1, per topology (the default placement: the DUT on its own CPU behind the wire): the DUT's
capacity — what it forwards when offered TOP fps — then REPS trials at twice that capacity (at TOP
when that is lower: a DUT faster than half the tester's limit cannot be overloaded twofold). Per
trial: the tester's offered rate against the intended one, netrig's lost frames, and the DUT's own
drop counters — its receive ring's (the wire's arrived − taken) plus any nftables rule that drops
(the policer's) — which must be equal.

Part 2, a slow DUT measured as the DUT: RFC 2544 throughput of the firewall with RULES rules and one
UDP flow (every frame walks every rule) on each I/O backend, with the self-test; the three must
agree (±5 % of their median) and none may be tester-limited.

Writes bench/results/<date>-wire.json and .md. Run with `make bench` (root). Environment: DUR (2),
REPS (3), TOP (250000), RULES (3000).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

import netrig  # noqa: E402
from netrig.run import run_config  # noqa: E402
from netrig.run.config import config_from_dict  # noqa: E402
from netrig.testbed import Testbed, nft  # noqa: E402

DUR = float(os.environ.get("DUR", 2))
REPS = int(os.environ.get("REPS", 3))
TOP = float(os.environ.get("TOP", 250_000))
RULES = int(os.environ.get("RULES", 3000))
TOPOLOGIES = [("bridge", {}), ("router", {}), ("nat", {}), ("acl", {"rules": 100}), ("firewall", {"rules": 100}),
              ("fwnat", {"rules": 100}), ("policer", {"cap": "50kpps"})]


def dut_drops(tb: Testbed) -> int:
    """The DUT's own drop counters now: its rings' and its nftables rules' that drop."""
    ring = sum(c.dropped for c in tb.wire_counts().values())
    rules = nft.counters(tb.dut_netns, tb.id) if tb.state.nft else []
    return ring + sum(r.packets or 0 for r in rules if '"drop"' in r.text)


def trial(tb: Testbed, rate: float) -> dict:
    tx, rx = tb.port("tx"), tb.port("rx")
    cpus = list(tb.tester_cpus())
    s = netrig.Stream(frame_size=64, rate_pps=rate, **tb.stream_defaults())
    d0 = dut_drops(tb)
    r = netrig.run_trial(netrig.Port(tx.ifname, netns=tx.netns), netrig.Port(rx.ifname, netns=rx.netns), [s],
                         duration_s=DUR, drain_s=0.5, tx_cpus=cpus, rx_cpus=cpus, max_stretch_pct=100)
    return {"intended_pps": rate, "offered_pps": r.tx_rate_pps, "accuracy": r.tx_rate_pps / rate,
            "forwarded_pps": r.frames_received / r.tx_window_s, "sent": r.frames_sent, "lost": r.frames_lost,
            "dut_drops": dut_drops(tb) - d0, "tester_rx_drops": r.tester_rx_drops, "valid": r.valid,
            "backend": r.ports[0].backend}


def topology(name: str, opts: dict) -> dict:
    with Testbed.create(name, **opts) as tb:
        capacity = trial(tb, TOP)["forwarded_pps"]
        rate = min(2 * capacity, TOP)
        runs = [trial(tb, rate) for _ in range(REPS)]
    row = {"topology": name, "options": opts, "capacity_pps": capacity, "rate_pps": rate, "runs": runs,
           "accuracy": statistics.median(r["accuracy"] for r in runs),
           "lost_equals_dut_drops": all(r["lost"] == r["dut_drops"] for r in runs)}
    print(json.dumps(row), flush=True)
    return row


def backends() -> list[dict]:
    out = []
    for io in ("af_xdp", "af_packet", "socket"):
        with tempfile.TemporaryDirectory() as d:
            cfg = config_from_dict({
                "testbed": {"name": "firewall", "options": {"rules": RULES}}, "ports": {"io": io},
                "frames": {"sizes": [64]}, "trial": {"duration_s": DUR},
                # 10 Mbit/s: 14.9 kfps at 64 B, above the DUT's few kfps, so 0.5 % resolution is 74 fps
                "line_rate": {"speed_bps": 10e6},
                "methods": [{"rfc2544_throughput": {"resolution_pct": 0.5}}], "output": {"dir": d}})
            doc = run_config(cfg, d)
        res = next(x for x in doc["summary"] if x.get("method") == "rfc2544_throughput")["results"][0]
        row = {"io": io, "throughput_pps": (res.get("headline") or {}).get("fps"),
               "flags": [f["code"] for f in res.get("flags", []) if f["code"] != "short_trials"]}
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def report(rows: list[dict], per_io: list[dict], stamp: str) -> str:
    md = [f"# The embedded test bed as a DUT on a wire ({stamp})", "",
          f"64 B, one UDP flow, {DUR:g} s trials, DUT on its own CPU behind the wire (1024-frame ring), tester on "
          f"the other; capacity = forwarded when offered {TOP:,.0f} fps; then {REPS} trials at 2 × capacity "
          f"(or the tester's {TOP:,.0f} fps when lower).",
          "", "| topology | capacity | offered at | offered / intended (median) | lost = DUT's drop counters |",
          "|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['topology']} {r['options'] or ''} | {r['capacity_pps']:,.0f} | {r['rate_pps']:,.0f} | "
                  f"{r['accuracy']:.4f} | {'yes' if r['lost_equals_dut_drops'] else 'NO'} "
                  f"({', '.join(str(x['lost']) + '/' + str(x['dut_drops']) for x in r['runs'])}) |")
    tps = [r["throughput_pps"] for r in per_io if r["throughput_pps"]]
    med = statistics.median(tps) if tps else 0
    md += ["", f"RFC 2544 throughput of the firewall with {RULES:,} rules (one flow), per I/O backend:", "",
           "| io | throughput | / median | flags |", "|---|---|---|---|"]
    md += [f"| {r['io']} | {r['throughput_pps'] or 0:,.0f} fps | {(r['throughput_pps'] or 0) / med:.3f} | "
           f"{', '.join(r['flags']) or '-'} |" for r in per_io] if med else ["| (no result) | | | |"]
    return "\n".join(md) + "\n"


def main() -> int:
    if os.geteuid() != 0:
        print("bench/wire.py: needs root (namespaces, raw sockets)", file=sys.stderr)
        return 2
    rows = [topology(n, o) for n, o in TOPOLOGIES]
    per_io = backends()
    stamp = dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    doc = {"date": stamp, "tool_version": netrig.__version__, "dur_s": DUR, "reps": REPS, "top_pps": TOP,
           "rules": RULES, "topologies": rows, "backends": per_io}
    (out / f"{stamp}-wire.json").write_text(json.dumps(doc, indent=2))
    md = report(rows, per_io, stamp)
    (out / f"{stamp}-wire.md").write_text(md)
    print(md)
    return 0 if all(r["lost_equals_dut_drops"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
