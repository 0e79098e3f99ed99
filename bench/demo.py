#!/usr/bin/env python3
"""Is `make demo` quotable? REPS back-to-back demos (each builds its test bed, self-tests the tester,
runs RFC 2544 and NDR/PDR; docs/testbed.md, "What the demo measures"), and per run the DUT's RFC 2544
throughput at 64 B, its NDR and PDR, whether any is a tester-limited lower bound, and how long the
run took. The issue's goal: throughput and NDR each within ±3 % of their median over three runs,
none tester-limited.

Writes bench/results/<date>-demo.json and .md. Run with `make bench-demo` (root; ~5 min per run).
Environment: REPS (3).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

from netrig.cli.demo import run_demo  # noqa: E402
from netrig.results import load_result  # noqa: E402

REPS = int(os.environ.get("REPS", 3))
SPREAD_PCT = 3.0


def _method(result: dict, name: str) -> dict:
    return next(m for m in result["summary"] if m["method"] == name)


def _at_64(method: dict) -> dict:
    return next(r for r in method["results"] if r["frame_size"] == 64)["repetitions"][0]


def one_run(out: Path) -> dict:
    """One demo into ``out``; its 64-byte numbers."""
    t0 = time.monotonic()
    rc = run_demo(out, quiet=True)
    return {"rc": rc, "seconds": round(time.monotonic() - t0, 1), **numbers(out)}


def numbers(out: Path) -> dict:
    """The 64-byte numbers of the demo in ``out``."""
    thr = _at_64(_method(load_result(out / "rfc2544" / "result.json"), "rfc2544_throughput"))
    goals = {g["name"]: g for g in _at_64(_method(load_result(out / "ndr-pdr" / "result.json"), "mlrsearch"))["goals"]}
    return {"throughput_pps": thr["rate_pps"], "throughput_resolution_pps": thr["resolution_pps"],
            "throughput_tester_limited": thr["tester_limited"],
            **{f"{n.lower()}_pps": g["conditional_throughput_pps"] for n, g in goals.items()},
            **{f"{n.lower()}_tester_limited": g["tester_limited"] for n, g in goals.items()}}


def spread(values: list[float]) -> dict:
    med = statistics.median(values)
    worst = max(abs(v - med) / med * 100 for v in values)
    return {"median": med, "values": values, "worst_pct": round(worst, 2), "within": worst <= SPREAD_PCT}


def main() -> int:
    runs = []
    with tempfile.TemporaryDirectory(prefix="netrig-bench-demo-") as tmp:
        for i in range(REPS):
            runs.append(one_run(Path(tmp) / f"run{i}"))
            print(json.dumps(runs[-1]), flush=True)
    doc: dict[str, Any] = {"bench": "demo", "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "reps": REPS,
           "runs": runs, "throughput": spread([r["throughput_pps"] for r in runs]),
           "ndr": spread([r["ndr_pps"] for r in runs]), "pdr": spread([r["pdr_pps"] for r in runs]),
           "tester_limited": any(v for r in runs for k, v in r.items() if k.endswith("tester_limited"))}
    stamp = dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    out = HERE / "results" / f"{stamp}-demo"
    out.with_suffix(".json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [f"# make demo, {REPS} back-to-back runs ({doc['date']})", "",
             "| run | s | throughput 64 B | NDR | PDR | tester-limited |", "|---|---|---|---|---|---|"]
    for i, r in enumerate(runs):
        lim = any(v for k, v in r.items() if k.endswith("tester_limited"))
        lines.append(f"| {i + 1} | {r['seconds']:.0f} | {r['throughput_pps'] / 1e3:.1f} k | "
                     f"{r['ndr_pps'] / 1e3:.1f} k | {r['pdr_pps'] / 1e3:.1f} k | {'yes' if lim else 'no'} |")
    for key in ("throughput", "ndr", "pdr"):
        s = doc[key]
        lines.append(f"\n{key}: median {s['median'] / 1e3:.1f} kfps, worst ±{s['worst_pct']} % "
                     f"({'within' if s['within'] else 'OUTSIDE'} ±{SPREAD_PCT:g} %)")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if doc["throughput"]["within"] and doc["ndr"]["within"] and not doc["tester_limited"] else 1


if __name__ == "__main__":
    sys.exit(main())
