#!/usr/bin/env python3
"""Per-flow accounting at scale: netrig TX+RX on one veth pair at its top rate with 1 flow and with
FLOWS flows (default 2^20), interleaved repetitions, the sender pinned to CPU 1 and the receiver to
CPU 0 (as bench/run.py). Reports the median received rate of each, their ratio (FLOWS / 1 flow), and
the memory the flows take: the peak resident set during the trial minus the resident set before it
(sampled every 20 ms), per flow.

Every frame is still counted per flow at FLOWS flows (the trial's loss, duplicates and reordering are
per flow); a run where the tester's own ring dropped frames is flagged in the table.

Writes bench/results/<date>-flows.json and .md. Run with `make bench` (root). Environment: DUR (5),
REPS (3), FLOWS (1048576), IO (af_xdp).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "python"))

from tests.conftest import veth_pair  # noqa: E402

import netrig  # noqa: E402

DUR = float(os.environ.get("DUR", 5))
REPS = int(os.environ.get("REPS", 3))
FLOWS = int(os.environ.get("FLOWS", 1 << 20)) // 1024 * 1024 or 1024
IO = os.environ.get("IO", "af_xdp")
TXCPU, RXCPU = 1, 0


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def mac(ns: str, ifname: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, "cat", f"/sys/class/net/{ifname}/address"],
                          capture_output=True, text=True, check=True).stdout.strip()


def one(pair: tuple[str, str, str, str], flows: int, rep: int) -> dict:
    ntx, itx, nrx, irx = pair
    tx, rx = netrig.Port(itx, netns=ntx, io=IO), netrig.Port(irx, netns=nrx, io=IO)
    # Past one port range the flows span source addresses too: 1024 ports × N addresses.
    spread = flows if flows <= 1024 else {"src_ports": 1024, "src_ips": flows // 1024}
    s = netrig.Stream(frame_size=64, rate="max", src_mac=mac(ntx, itx), dst_mac=mac(nrx, irx), flows=spread)
    before = rss_kib()
    peak = [before]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            peak[0] = max(peak[0], rss_kib())

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        r = netrig.run_trial(tx, rx, [s], duration_s=DUR, drain_s=0.5, tx_cpus=[TXCPU], rx_cpus=[RXCPU],
                             max_stretch_pct=100)
    finally:
        stop.set()
        th.join()
    return {"flows": flows, "rep": rep, "tx_pps": r.tx_rate_pps, "rx_pps": r.frames_received / r.tx_window_s,
            "frames_sent": r.frames_sent, "frames_received": r.frames_received, "lost": r.frames_lost,
            "tester_rx_drops": r.tester_rx_drops,
            "rss_before_kib": before, "rss_peak_kib": peak[0], "rss_delta_kib": peak[0] - before,
            "backends": [p.backend for p in r.ports]}


def main() -> int:
    if os.geteuid() != 0:
        print("bench/flows.py: needs root (namespaces, raw sockets)", file=sys.stderr)
        return 2
    rows = []
    with veth_pair("bf") as pair:
        for rep in range(1, REPS + 1):
            for flows in (1, FLOWS):
                row = one(pair, flows, rep)
                print(json.dumps(row), flush=True)
                rows.append(row)
                time.sleep(2.5)  # an XSK queue can be re-bound ~2 s after the previous socket closed
    med = lambda f, k: statistics.median(r[k] for r in rows if r["flows"] == f)
    one_rx, many_rx = med(1, "rx_pps"), med(FLOWS, "rx_pps")
    delta = med(FLOWS, "rss_delta_kib") - med(1, "rss_delta_kib")
    stamp = dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    doc = {"date": stamp, "tool_version": netrig.__version__, "io": IO, "dur_s": DUR, "reps": REPS,
           "flows": FLOWS, "tx_cpu": TXCPU, "rx_cpu": RXCPU, "runs": rows,
           "summary": {"rx_pps_1_flow": one_rx, "rx_pps_many": many_rx, "ratio": many_rx / one_rx if one_rx else None,
                       "memory_kib": delta, "bytes_per_flow": delta * 1024 / FLOWS}}
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / f"{stamp}-flows.json").write_text(json.dumps(doc, indent=2))
    drops = sum(r["tester_rx_drops"] for r in rows)
    md = [f"# netrig per-flow accounting at {FLOWS:,} flows ({stamp})", "",
          f"veth pair, {IO}, 64 B at the top rate, TX on CPU {TXCPU}, RX on CPU {RXCPU}; median of {REPS} × "
          f"{DUR:g} s, interleaved", "",
          "| flows | rx pps (median) | tx pps (median) | RSS growth in the trial |", "|---|---|---|---|",
          f"| 1 | {one_rx:,.0f} | {med(1, 'tx_pps'):,.0f} | {med(1, 'rss_delta_kib'):,} KiB |",
          f"| {FLOWS:,} | {many_rx:,.0f} | {med(FLOWS, 'tx_pps'):,.0f} | {med(FLOWS, 'rss_delta_kib'):,} KiB |", "",
          f"Rate at {FLOWS:,} flows / 1 flow: **{many_rx / one_rx:.2f}×**; the flows take {delta / 1024:.0f} MiB "
          f"({delta * 1024 / FLOWS:.0f} B per flow, sender and receiver state together)."]
    if drops:
        md.append(f"\nThe tester's own RX ring dropped {drops:,} frames over all runs (its loss, not the DUT's).")
    (out / f"{stamp}-flows.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
