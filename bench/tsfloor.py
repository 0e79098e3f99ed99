#!/usr/bin/env python3
"""Timestamp floor: the latency netrig measures with nothing between its ports.

Builds the ``loopback`` test bed (two tester namespaces joined by one veth pair, no DUT) and runs,
per I/O backend, REPS trials of DUR seconds at RATE (default 10 kpps, 64 B, sender pinned to CPU 1,
receiver to CPU 0). Everything it reports is the tester's own floor: TX stamp in user space just
before the frame is queued, RX stamp from the backend's source (``ports[].timestamp_source``).
Medians over the repetitions of min / p50 / p99 / p99.9.

Writes bench/results/<date>-tsfloor.{json,md}. Run with ``make bench-tsfloor`` (root).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

import netrig  # noqa: E402
from netrig.testbed import Testbed  # noqa: E402

IOS = os.environ.get("IOS", "af_xdp af_packet socket").split()
REPS = int(os.environ.get("REPS", 3))
DUR = float(os.environ.get("DUR", 5))
RATE = float(os.environ.get("RATE", 10_000))
KEYS = ("min_ns", "p50_ns", "p99_ns", "p999_ns")


def one(tb: Testbed, io: str) -> dict:
    tx, rx = tb.port("tx"), tb.port("rx")
    ptx = netrig.Port(tx.ifname, netns=tx.netns, io=io)
    prx = netrig.Port(rx.ifname, netns=rx.netns, io=io)
    s = netrig.Stream(**tb.stream_defaults(), frame_size=64, rate_pps=RATE)
    r = netrig.run_trial(ptx, prx, [s], duration_s=DUR, drain_s=0.5, tx_cpus=[1], rx_cpus=[0])
    st = r.streams[0]
    lat = st.latency.to_dict()
    return {"frames_sent": st.frames_sent, "frames_lost": st.frames_lost,
            "timestamp_source": r.ports[1].timestamp_source,
            **{k: lat[k] for k in KEYS}}


def main() -> int:
    cases: dict[str, dict] = {}
    with Testbed.create("loopback") as tb:
        for io in IOS:
            runs = [one(tb, io) for _ in range(REPS)]
            cases[io] = {"runs": runs, "timestamp_source": runs[-1]["timestamp_source"],
                         **{k: statistics.median(r[k] for r in runs) for k in KEYS}}
            c = cases[io]
            print(f"{io:10s} {c['timestamp_source']:16s} " + "  ".join(f"{k[:-3]} {c[k] / 1e3:8.1f} us" for k in KEYS),
                  flush=True)
    stamp = dt.datetime.now()
    doc = {"date": stamp.isoformat(timespec="seconds"), "testbed": "loopback", "frame_size": 64, "rate_pps": RATE,
           "duration_s": DUR, "reps": REPS, "tx_cpu": 1, "rx_cpu": 0, "cases": cases}
    out = HERE / "results" / f"{stamp:%Y-%m-%dT%H%M%S}-tsfloor"
    out.parent.mkdir(exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(doc, indent=2))
    lines = [f"Timestamp floor, loopback test bed, 64 B at {RATE:g} pps, median of {REPS} x {DUR:g} s "
             "(sender CPU 1, receiver CPU 0)", "", "| io | RX timestamp | min | p50 | p99 | p99.9 |",
             "|---|---|---|---|---|---|"]
    for io, c in cases.items():
        lines.append(f"| {io} | {c['timestamp_source']} | " + " | ".join(f"{c[k] / 1e3:.1f} µs" for k in KEYS) + " |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
