#!/usr/bin/env python3
"""Per-flow accounting at scale: netrig TX+RX on one veth pair at its top rate with 1 flow and with
FLOWS flows (default 2^20), interleaved repetitions, the sender pinned to CPU 1 and the receiver to
CPU 0 (as bench/run.py). Reports the median received rate of each, their ratio (FLOWS / 1 flow), and
the memory the flows take: the peak resident set during the trial minus the resident set before it
(sampled every 20 ms), per flow, beside the engine's own measurement (`flow_memory_bytes`). Then one
trial of BIG flows (default 2^24, the per-stream limit) for BIG_DUR s (10): its peak resident set
and whether every flow's loss is exact (frames lost = sent − received, and the trial valid).

Every frame is still counted per flow at FLOWS flows (the trial's loss, duplicates and reordering are
per flow); a run where the tester's own ring dropped frames is flagged in the table. The platform's
stall watch (`measure.platform`) runs over every trial: each row carries the tester's stalls (its
CPUs stopped by the host, its workers kept waiting by another task), and a trial whose ring dropped
says in the report what held its CPUs meanwhile.

Writes bench/results/<date>-flows.json and .md. Run with `make bench` (root). Environment: DUR (5),
REPS (3), FLOWS (1048576), IO (af_xdp), BIG (16777216; 0: skip), BIG_DUR (10), RING (the ports'
ring frames; 0: the backend's default).
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
from netrig.measure.platform import PlatformWatch, platform_watch  # noqa: E402
from netrig.testbed.placement import observer  # noqa: E402

DUR = float(os.environ.get("DUR", 5))
REPS = int(os.environ.get("REPS", 3))
FLOWS = int(os.environ.get("FLOWS", 1 << 20)) // 1024 * 1024 or 1024
IO = os.environ.get("IO", "af_xdp")
RING = int(os.environ.get("RING", 0))
BIG = int(os.environ.get("BIG", 1 << 24)) // 1024 * 1024
BIG_DUR = float(os.environ.get("BIG_DUR", 10))
TXCPU, RXCPU = 1, 0


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def mac(ns: str, ifname: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, "cat", f"/sys/class/net/{ifname}/address"],
                          capture_output=True, text=True, check=True).stdout.strip()


def one(pair: tuple[str, str, str, str], flows: int, rep: int, watch: PlatformWatch | None,
        dur_s: float = DUR) -> dict:
    ntx, itx, nrx, irx = pair
    tx, rx = (netrig.Port(i, netns=n, io=IO, ring_frames=RING) for n, i in ((ntx, itx), (nrx, irx)))
    # Past one port range the flows span source addresses too: 1024 ports × N addresses.
    spread = flows if flows <= 1024 else {"src_ports": 1024, "src_ips": flows // 1024}
    s = netrig.Stream(frame_size=64, rate="max", src_mac=mac(ntx, itx), dst_mac=mac(nrx, irx), flows=spread)
    before = rss_kib()
    peak = [before]
    stop = threading.Event()

    def sample() -> None:
        observer()  # SCHED_IDLE: the receiver on its CPU never waits for the sampler
        while not stop.wait(0.02):
            peak[0] = max(peak[0], rss_kib())

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        r = netrig.run_trial(tx, rx, [s], duration_s=dur_s, drain_s=0.5, tx_cpus=[TXCPU], rx_cpus=[RXCPU],
                             max_stretch_pct=100, watch=watch.watch if watch is not None else None)
    finally:
        stop.set()
        th.join()
    stalls = watch.trial(r, None).stalls.tester.to_dict() if watch is not None else None
    return {"flows": flows, "rep": rep, "tx_pps": r.tx_rate_pps, "rx_pps": r.frames_received / r.tx_window_s,
            "frames_sent": r.frames_sent, "frames_received": r.frames_received, "lost": r.frames_lost,
            "tester_rx_drops": r.tester_rx_drops, "valid": r.valid,
            "loss_exact": r.frames_lost == r.frames_sent - r.frames_received and r.valid,
            "flow_memory_bytes": r.flow_memory_bytes,
            "rss_before_kib": before, "rss_peak_kib": peak[0], "rss_delta_kib": peak[0] - before,
            "backends": [p.backend for p in r.ports], "tester_stalls": stalls}


def dropped(row: dict) -> str:
    """What held the tester's CPUs in a trial whose own ring dropped frames (its longest stalls)."""
    st = row["tester_stalls"]
    if st is None:
        return "the stall watch was off"
    if not st["count"]:
        return "no stall of the tester's CPUs or workers over the threshold"
    top = sorted(st["episodes"], key=lambda e: -e["length_ms"])[:3]
    held = ", ".join(f"{e['length_ms']:.1f} ms on CPU {e['cpu']} at {e['start_s']:.2f} s"
                     f" ({'by ' + e['by'] if e.get('by') else 'the host'})" for e in top)
    return f"{st['count']} stalls, {st['total_ms']:.1f} ms in all; the longest {held}"


def summarise(rows: list[dict], big: dict | None) -> dict:
    med = lambda f, k: statistics.median(r[k] for r in rows if r["flows"] == f)
    one_rx, many_rx = med(1, "rx_pps"), med(FLOWS, "rx_pps")
    delta = med(FLOWS, "rss_delta_kib") - med(1, "rss_delta_kib")
    engine = med(FLOWS, "flow_memory_bytes") - med(1, "flow_memory_bytes")
    return {"rx_pps_1_flow": one_rx, "rx_pps_many": many_rx, "ratio": many_rx / one_rx if one_rx else None,
            "tx_pps_1_flow": med(1, "tx_pps"), "tx_pps_many": med(FLOWS, "tx_pps"),
            "rss_delta_kib_1_flow": med(1, "rss_delta_kib"), "rss_delta_kib_many": med(FLOWS, "rss_delta_kib"),
            "memory_kib": delta, "bytes_per_flow": delta * 1024 / FLOWS,
            "engine_bytes_per_flow": engine / FLOWS, "tester_rx_drops": sum(r["tester_rx_drops"] for r in rows),
            "big": big}


def ring_note() -> str:
    return f"ring frames {RING:,} per port" if RING else "the ports' default rings"


def markdown(stamp: str, s: dict, rows: list[dict], note: str) -> list[str]:
    md = [f"# netrig per-flow accounting at {FLOWS:,} flows ({stamp})", "",
          f"veth pair, {IO}, 64 B at the top rate, TX on CPU {TXCPU}, RX on CPU {RXCPU}; median of {REPS} × "
          f"{DUR:g} s, interleaved; {ring_note()}; stall watch {note}", "",
          "| flows | rx pps (median) | tx pps (median) | RSS growth in the trial |", "|---|---|---|---|",
          f"| 1 | {s['rx_pps_1_flow']:,.0f} | {s['tx_pps_1_flow']:,.0f} | {s['rss_delta_kib_1_flow']:,} KiB |",
          f"| {FLOWS:,} | {s['rx_pps_many']:,.0f} | {s['tx_pps_many']:,.0f} | {s['rss_delta_kib_many']:,} KiB |", "",
          f"Rate at {FLOWS:,} flows / 1 flow: **{s['ratio']:.2f}×**; the flows take {s['memory_kib'] / 1024:.0f} MiB "
          f"({s['bytes_per_flow']:.0f} B per flow, sender and receiver state together; the engine's own "
          f"measurement: {s['engine_bytes_per_flow']:.0f} B).",
          f"\nThe tester's own RX ring dropped {s['tester_rx_drops']:,} frames over all runs "
          "(its loss, not the DUT's)."]
    md += [f"- {r['flows']:,} flows, repetition {r['rep']}: {r['tester_rx_drops']:,} dropped; {dropped(r)}."
           for r in rows if r["tester_rx_drops"]]
    big = s["big"]
    if big:
        md.append(f"\n{big['flows']:,} flows, one {BIG_DUR:g}-s trial: peak RSS {big['rss_peak_kib'] / 2**20:.2f} GiB "
                  f"(growth {big['rss_delta_kib'] / 2**20:.2f} GiB), {big['frames_sent']:,} frames sent, "
                  f"{big['lost']:,} lost, loss exact per flow: {'yes' if big['loss_exact'] else 'NO'}.")
    return md


def main() -> int:
    if os.geteuid() != 0:
        print("bench/flows.py: needs root (namespaces, raw sockets)", file=sys.stderr)
        return 2
    rows, big = [], None
    with veth_pair("bf") as pair, platform_watch(None, [TXCPU, RXCPU]) as (watch, note):
        for rep in range(1, REPS + 1):
            for flows in (1, FLOWS):
                row = one(pair, flows, rep, watch)
                print(json.dumps(row), flush=True)
                rows.append(row)
                time.sleep(2.5)  # an XSK queue can be re-bound ~2 s after the previous socket closed
        if BIG:
            big = one(pair, BIG, 1, watch, BIG_DUR)
            print(json.dumps(big), flush=True)
    summary = summarise(rows, big)
    stamp = dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    doc = {"date": stamp, "tool_version": netrig.__version__, "io": IO, "dur_s": DUR, "reps": REPS,
           "flows": FLOWS, "ring_frames": RING, "tx_cpu": TXCPU, "rx_cpu": RXCPU, "stall_watch": note,
           "runs": rows, "summary": summary}
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / f"{stamp}-flows.json").write_text(json.dumps(doc, indent=2))
    md = markdown(stamp, summary, rows + [big] if big else rows, note)
    (out / f"{stamp}-flows.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
