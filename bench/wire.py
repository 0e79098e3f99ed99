#!/usr/bin/env python3
"""The embedded test bed as a DUT on a wire (docs/testbed.md, "The physics of the embedded test bed").

First, the tester's ceiling: netrig's own self-test (RFC 8219 §9.2, the loopback test bed, no DUT)
at 64 B, on the CPUs the tester uses behind the wire and the default I/O backend, as the trials here:
the highest rate it proves loss-free in DUR-s trials. It scales with the machine (a fixed cap made
every topology read the cap on a faster one, and no DUT drop).

Part 1, per topology (the default placement: the DUT on its own CPU behind the wire): the DUT's
capacity — what it forwards when offered the tester's ceiling — then REPS trials at twice that
capacity, capped at the ceiling (a DUT faster than half the tester's ceiling cannot be overloaded
twofold); each row says which bound applied (``bound``: ``dut_capacity`` or ``tester_ceiling``). Per
trial: the tester's offered rate against the intended one, netrig's lost frames, and the DUT's own
drop counters — its receive ring's (the wire's arrived − taken) plus any nftables rule that drops
(the policer's) — which must be equal.

Part 2, a slow DUT measured as the DUT: RFC 2544 throughput of the firewall with RULES rules and one
UDP flow (every frame walks every rule) on each I/O backend, with the self-test; the three must
agree (±5 % of their median) and none may be tester-limited.

Writes bench/results/<date>-wire.json and .md. Run with `make bench` (root). Environment: DUR (2),
REPS (3), RULES (3000), TOPOLOGIES (a comma list of the topologies of part 1: all), BACKENDS (a comma
list of part 2's I/O backends: all; empty: skip part 2).
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
from netrig.model import FrameSize, LineRate  # noqa: E402
from netrig.run import run_config  # noqa: E402
from netrig.run.config import config_from_dict  # noqa: E402
from netrig.testbed import Testbed, nft  # noqa: E402

DUR = float(os.environ.get("DUR", 2))
REPS = int(os.environ.get("REPS", 3))
RULES = int(os.environ.get("RULES", 3000))
ALL_TOPOLOGIES = [("bridge", {}), ("router", {}), ("nat", {}), ("acl", {"rules": 100}), ("firewall", {"rules": 100}),
                  ("fwnat", {"rules": 100}), ("policer", {"cap": "50kpps"})]
PICKED = os.environ.get("TOPOLOGIES")
TOPOLOGIES = [t for t in ALL_TOPOLOGIES if PICKED is None or t[0] in PICKED.split(",")]
BACKENDS = [b for b in os.environ.get("BACKENDS", "af_xdp,af_packet,socket").split(",") if b]
#: What the self-test is asked to prove: the 64-B line rate of 10 Gbit/s, far above a software tester
#: on veth, so it searches down to its ceiling (to 1 % of it).
PROBE = LineRate(10e9).fps(FrameSize.parse(64))


def tester_ceiling() -> dict:
    """The tester's ceiling at 64 B: the self-test's proven rate on the loopback test bed, on the CPUs
    the tester has behind the wire (those the first topology leaves it) and the default I/O backend."""
    name, opts = ALL_TOPOLOGIES[0]
    with Testbed.create(name, **opts) as tb:
        cpus = list(tb.tester_cpus())
    with tempfile.TemporaryDirectory() as d:
        cfg = config_from_dict({
            "testbed": {"name": "loopback"}, "ports": {"tx_cpus": cpus, "rx_cpus": cpus},
            "frames": {"sizes": [64]}, "trial": {"duration_s": DUR}, "methods": [], "output": {"dir": d},
            "selftest": {"enabled": True, "testbed": "loopback", "rates_pps": [PROBE]}})
        doc = run_config(cfg, d)
    c = doc["selftest"]["ceilings"][0]
    backends = {p["backend"] for t in doc["trials"] for p in t["counts"]["raw"]["engine"]["ports"]}
    row = {"ceiling_pps": c["proven_rate_pps"], "asked_pps": c["required_rate_pps"], "tester_cpus": cpus,
           "backends": sorted(backends), "trials": len(doc["trials"]), "trial_s": DUR}
    print(json.dumps(row), flush=True)
    return row


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


def topology(name: str, opts: dict, ceiling: float) -> dict:
    """The DUT's capacity (offered the tester's ``ceiling``), then REPS trials at twice it, capped at
    ``ceiling``."""
    with Testbed.create(name, **opts) as tb:
        capacity = trial(tb, ceiling)["forwarded_pps"]
        rate = min(2 * capacity, ceiling)
        runs = [trial(tb, rate) for _ in range(REPS)]
    row = {"topology": name, "options": opts, "capacity_pps": capacity, "rate_pps": rate,
           "bound": "dut_capacity" if 2 * capacity <= ceiling else "tester_ceiling", "runs": runs,
           "accuracy": statistics.median(r["accuracy"] for r in runs),
           "lost_equals_dut_drops": all(r["lost"] == r["dut_drops"] for r in runs)}
    print(json.dumps(row), flush=True)
    return row


def backends() -> list[dict]:
    out = []
    for io in BACKENDS:
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


def report(rows: list[dict], per_io: list[dict], tester: dict, stamp: str) -> str:
    md = [f"# The embedded test bed as a DUT on a wire ({stamp})", "",
          f"The tester's ceiling at 64 B: {tester['ceiling_pps']:,.0f} fps, proven loss-free by netrig's self-test on "
          f"the loopback test bed ({', '.join(tester['backends'])}, CPUs {tester['tester_cpus']}, "
          f"{tester['trials']} trials of {DUR:g} s).", "",
          f"64 B, one UDP flow, {DUR:g} s trials, DUT on its own CPU behind the wire (1024-frame ring), tester on "
          f"the other; capacity = forwarded when offered the tester's ceiling; then {REPS} trials at 2 × capacity "
          "or the ceiling, whichever is lower (bound).",
          "", "| topology | capacity | offered at | bound | offered / intended (median) | lost = DUT's drop counters |",
          "|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['topology']} {r['options'] or ''} | {r['capacity_pps']:,.0f} | {r['rate_pps']:,.0f} | "
                  f"{r['bound'].replace('_', ' ')} | "
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
    tester = tester_ceiling()
    rows = [topology(n, o, tester["ceiling_pps"]) for n, o in TOPOLOGIES]
    per_io = backends()
    stamp = dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    doc = {"date": stamp, "tool_version": netrig.__version__, "dur_s": DUR, "reps": REPS, "tester": tester,
           "rules": RULES, "topologies": rows, "backends": per_io}
    (out / f"{stamp}-wire.json").write_text(json.dumps(doc, indent=2))
    md = report(rows, per_io, tester, stamp)
    (out / f"{stamp}-wire.md").write_text(md)
    print(md)
    return 0 if all(r["lost_equals_dut_drops"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
