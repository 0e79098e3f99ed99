#!/usr/bin/env python3
"""Memory soak: netrig TX+RX at the top rate for SOAK_S seconds (default 600) on a veth pair,
sampling the process's RSS every 10 s. Pass: the RSS at the end is within 5 % (or 4 MiB) of the
RSS after the first minute, and the regression slope is not significantly positive.

Writes bench/results/<date>-soak.json. Run with `make bench-soak` (root)."""
from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "python"))

from tests.conftest import veth_pair  # noqa: E402

import netrig  # noqa: E402
from run import rss_kib  # noqa: E402  (bench/run.py, same folder)

SOAK_S = float(os.environ.get("SOAK_S", 600))
IO = os.environ.get("IO", "af_xdp")


def main() -> int:
    samples: list[tuple[float, int]] = []
    box: dict = {}
    with veth_pair("soak") as (ns_a, if_a, ns_b, if_b):
        tx, rx = netrig.Port(if_a, netns=ns_a, io=IO), netrig.Port(if_b, netns=ns_b, io=IO)
        s = netrig.Stream(frame_size=64, rate="max", src_mac=tx.info().mac, dst_mac=rx.info().mac, flows=16)
        th = threading.Thread(target=lambda: box.update(res=netrig.run_trial(
            tx, rx, [s], duration_s=SOAK_S, drain_s=0.5, tx_cpus=[1], rx_cpus=[0])))
        t0 = time.monotonic()
        th.start()
        while th.is_alive():
            samples.append((time.monotonic() - t0, rss_kib()))
            th.join(10.0)
    res = box["res"]
    steady = [(t, r) for t, r in samples if t >= 60] or samples
    ts, rs = [t for t, _ in steady], [r for _, r in steady]
    slope = statistics.linear_regression(ts, rs).slope if len(steady) > 2 else 0.0  # KiB/s
    first, last = rs[0], rs[-1]
    ok = abs(last - first) <= max(0.05 * first, 4096)
    doc = {"soak_s": SOAK_S, "io": IO, "frames_sent": res.frames_sent, "frames_received": res.frames_received,
           "tx_pps": res.frames_sent / res.duration_s, "rss_samples_kib": samples, "rss_first_minute_kib": first,
           "rss_end_kib": last, "rss_slope_kib_per_min": slope * 60, "no_growth": ok}
    out = HERE / "results" / f"{dt.datetime.now():%Y-%m-%dT%H%M%S}-soak.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(doc, indent=2))
    print(json.dumps({k: v for k, v in doc.items() if k != "rss_samples_kib"}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
