#!/usr/bin/env python3
"""What exporting costs the engine: netrig TX+RX on one veth pair at its top rate, with FLOWS flows
(default 4096), without and with the telemetry endpoint (``--metrics-listen``), interleaved
repetitions in one run, the sender pinned to CPU 1 and the receiver to CPU 0 (as bench/flows.py).

With the endpoint the trial runs as a run's does: the run loop is tester bookkeeping (SCHED_IDLE,
``placement.keep_off_dut``) and feeds the endpoint its progress events (trial start, the engine's
live snapshots every 0.2 s, the trial's end with the engine's per-stream, per-port and per-flow-group
breakdown); a scraper reads /metrics every SCRAPE_S (0.1 s: ten times the 1-s interval the
Prometheus test uses) for the whole trial. Without it, none of that. The run loop is bookkeeping in
both arms, so only the endpoint differs.

Reports the median received rate of each arm and their ratio (with / without; the goal is ≥ 0.98),
the scrapes' wall time during traffic (median, max) and the CPU time of one scrape of the run's
metrics after the trials (the endpoint's thread does that work). Writes
bench/results/<date>-telemetry.json and .md. Run with `make bench` (root). Environment: DUR (3),
REPS (3), FLOWS (4096), IO (af_xdp), SCRAPE_S (0.1).
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
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "python"))

from tests.conftest import veth_pair  # noqa: E402

import netrig  # noqa: E402
from netrig.measure import TrialCounts  # noqa: E402
from netrig.run.progress import RunStart, TrialEnd, TrialInfo, TrialProgress, TrialStart  # noqa: E402
from netrig.run.records import LoadRecord  # noqa: E402
from netrig.telemetry.telemetry import Telemetry  # noqa: E402
from netrig.testbed.placement import keep_off_dut  # noqa: E402

DUR = float(os.environ.get("DUR", 3))
REPS = int(os.environ.get("REPS", 3))
FLOWS = int(os.environ.get("FLOWS", 4096))
IO = os.environ.get("IO", "af_xdp")
SCRAPE_S = float(os.environ.get("SCRAPE_S", 0.1))
TXCPU, RXCPU = 1, 0


def mac(ns: str, ifname: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, "cat", f"/sys/class/net/{ifname}/address"],
                          capture_output=True, text=True, check=True).stdout.strip()


class Scraper:
    """Reads ``url`` every SCRAPE_S until stopped; keeps each scrape's wall time."""

    def __init__(self, url: str):
        self.url, self.times = url, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # the scraper is another program
        while not self.stop.wait(SCRAPE_S):
            t = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=5) as r:
                r.read()
            self.times.append(time.perf_counter() - t)


def one(pair: tuple[str, str, str, str], tel: Telemetry | None, rep: int) -> dict:
    ntx, itx, nrx, irx = pair
    tx, rx = netrig.Port(itx, netns=ntx, io=IO), netrig.Port(irx, netns=nrx, io=IO)
    flows = FLOWS if FLOWS <= 1024 else {"src_ports": 1024, "src_ips": FLOWS // 1024}
    s = netrig.Stream(frame_size=64, rate="max", src_mac=mac(ntx, itx), dst_mac=mac(nrx, irx), flows=flows)
    trial = TrialInfo("0/64/0/0", "rate", "bench", "bench", 64, 0, 0, LoadRecord(64, DUR, rate_pps=1e7))
    runs = tel.runs() if tel is not None else None
    scraper = Scraper(tel.url) if tel is not None else None
    with keep_off_dut([TXCPU, RXCPU]):
        if runs is not None and scraper is not None:
            runs(RunStart(f"bench-{rep}", "bench", "", 1))
            runs(TrialStart(trial))
            scraper.thread.start()
        live = None if runs is None else (lambda snap: runs(TrialProgress(snap.phase, snap.elapsed_s, snap.tx_frames,
                                                                           snap.rx_frames)))
        r = netrig.run_trial(tx, rx, [s], duration_s=DUR, drain_s=0.5, tx_cpus=[TXCPU], rx_cpus=[RXCPU],
                             max_stretch_pct=100, progress=live)
        if runs is not None and scraper is not None:
            scraper.stop.set()
            scraper.thread.join()
            # what the engine measurer keeps of a trial: the engine's whole result (every flow)
            counts = TrialCounts(r.tx_rate_pps, r.frames_sent, r.frames_received, raw={"engine": r.to_dict()})
            runs(TrialEnd(trial, False, counts))
    times = sorted(scraper.times) if scraper is not None else []
    return {"endpoint": tel is not None, "rep": rep, "tx_pps": r.tx_rate_pps,
            "rx_pps": r.frames_received / r.tx_window_s, "frames_sent": r.frames_sent,
            "frames_received": r.frames_received, "tester_rx_drops": r.tester_rx_drops,
            "scrapes": len(times), "scrape_ms_median": 1e3 * statistics.median(times) if times else None,
            "scrape_ms_max": 1e3 * times[-1] if times else None, "backends": [p.backend for p in r.ports]}


def scrape_cpu_ms(tel: Telemetry) -> float:
    from prometheus_client.openmetrics.exposition import generate_latest

    best = float("inf")
    for _ in range(5):
        t = time.thread_time()
        generate_latest(tel.registry)
        best = min(best, time.thread_time() - t)
    return best * 1e3


def main() -> int:
    if os.geteuid() != 0:
        print("bench/telemetry.py: needs root (namespaces, raw sockets)", file=sys.stderr)
        return 2
    rows = []
    with veth_pair("bt") as pair, Telemetry("127.0.0.1:0") as tel:
        for rep in range(1, REPS + 1):
            for arm in (None, tel):
                row = one(pair, arm, rep)
                print(json.dumps(row), flush=True)
                rows.append(row)
                time.sleep(2.5)  # an XSK queue can be re-bound ~2 s after the previous socket closed
        cpu_ms = scrape_cpu_ms(tel)
    med = lambda on, k: statistics.median(r[k] for r in rows if r["endpoint"] is on)
    off_rx, on_rx = med(False, "rx_pps"), med(True, "rx_pps")
    ratio = on_rx / off_rx if off_rx else None
    stamp = dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    doc = {"date": stamp, "tool_version": netrig.__version__, "io": IO, "dur_s": DUR, "reps": REPS, "flows": FLOWS,
           "scrape_s": SCRAPE_S, "tx_cpu": TXCPU, "rx_cpu": RXCPU, "runs": rows,
           "summary": {"rx_pps_without": off_rx, "rx_pps_with": on_rx, "ratio": ratio,
                       "scrape_ms_median": med(True, "scrape_ms_median"), "scrape_ms_max": med(True, "scrape_ms_max"),
                       "scrape_cpu_ms_after": cpu_ms, "goal_ratio": 0.98, "met": ratio is not None and ratio >= 0.98}}
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / f"{stamp}-telemetry.json").write_text(json.dumps(doc, indent=2))
    md = [f"# What the telemetry endpoint costs the engine ({stamp})", "",
          f"veth pair, {IO}, 64 B at the top rate, {FLOWS:,} flows, TX on CPU {TXCPU}, RX on CPU {RXCPU}; median of "
          f"{REPS} × {DUR:g} s, interleaved; with the endpoint: live snapshots, a scrape every {SCRAPE_S:g} s", "",
          "| endpoint | rx pps (median) | tx pps (median) | scrape wall time (median / max) |", "|---|---|---|---|",
          f"| without | {off_rx:,.0f} | {med(False, 'tx_pps'):,.0f} | - |",
          f"| with | {on_rx:,.0f} | {med(True, 'tx_pps'):,.0f} | {med(True, 'scrape_ms_median'):.1f} ms / "
          f"{med(True, 'scrape_ms_max'):.1f} ms |", "",
          f"With / without: **{ratio:.3f}×** (goal ≥ 0.98); one scrape of the run's metrics afterwards: "
          f"{cpu_ms:.1f} ms of CPU."]
    (out / f"{stamp}-telemetry.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
