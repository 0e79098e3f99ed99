#!/usr/bin/env python3
"""Is `make demo` quotable? REPS back-to-back demos (each builds its test bed, self-tests the tester,
runs RFC 2544 and NDR/PDR; docs/testbed.md, "What the demo measures"), and per run the DUT's RFC 2544
throughput at 64 B, its NDR and PDR, whether any is a tester-limited lower bound, how long the
run took, and the DUT's CPU time per frame (the platform's speed in that run). The issue's goal:
throughput and NDR each within ±3 % of their median over three runs, none tester-limited; and each
run's 64-B headline interval (RFC 2544 throughput's range over its repetitions within the run,
``netrig.run.consistency.answers``) contains the other runs' medians.

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
from netrig.run import consistency  # noqa: E402
from netrig.view.trial_record import read_trials  # noqa: E402

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


def headline(docs: list[dict]) -> dict:
    """The 64-B answers side by side as the demo prints them: each one's median and range over its
    repetitions, and the cause the run gives for their difference."""
    a = next(x for x in consistency.answers(docs) if x.frame_label == "64")
    return {"cause": a.cause, **{r.name: {"median": r.median if r.bounded else None,
                                          "min": min(r.values, default=None), "max": max(r.values, default=None),
                                          "values": list(r.values), "at_least": list(r.at_least)} for r in a.rows}}


def numbers(out: Path) -> dict:
    """The 64-byte numbers of the demo in ``out``."""
    rfc, ndr = load_result(out / "rfc2544" / "result.json"), load_result(out / "ndr-pdr" / "result.json")
    thr = _at_64(_method(rfc, "rfc2544_throughput"))
    goals = {g["name"]: g for g in _at_64(_method(ndr, "mlrsearch"))["goals"]}
    return {"answers": headline([rfc, ndr]), "dut_us_per_frame": dut_cost([rfc, ndr]),
            "throughput_pps": thr["rate_pps"], "throughput_resolution_pps": thr["resolution_pps"],
            "throughput_tester_limited": thr["tester_limited"],
            **{f"{n.lower()}_pps": g["conditional_throughput_pps"] for n, g in goals.items()},
            **{f"{n.lower()}_tester_limited": g["tester_limited"] for n, g in goals.items()}}


def dut_cost(docs: list[dict]) -> float | None:
    """The DUT's CPU time per frame it took (µs; the wire measures it), median over the 64-B
    throughput trials that lost nothing: the same frames through the same rules, so a run whose
    frames cost more ran on a slower CPU (its host's contention), not a worse DUT."""
    costs = [c.dut_ring.dut_cpu_s / c.dut_ring.taken * 1e6 for d in docs for t in read_trials(d["trials"])
             if t.method == "rfc2544_throughput" and t.frame_size == 64 and (c := t.counts) is not None
             and c.valid and not c.frames_lost and c.dut_ring and c.dut_ring.dut_cpu_s and c.dut_ring.taken]
    return round(statistics.median(costs), 3) if costs else None


def _k(v: float | None) -> str:
    return "—" if v is None else f"{v / 1e3:.1f} k"


def _us(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f} µs"


def spread(values: list[float | None]) -> dict:
    """Median and worst deviation of the runs that have an answer; a run without one (a search the
    host stopped before anything passed: not measured) is counted apart and fails the spread."""
    got = [v for v in values if v is not None]
    if not got:
        return {"median": None, "values": values, "worst_pct": None, "within": False, "missing": len(values)}
    med = statistics.median(got)
    worst = max(abs(v - med) / med * 100 for v in got)
    return {"median": med, "values": values, "worst_pct": round(worst, 2),
            "within": worst <= SPREAD_PCT and len(got) == len(values), "missing": len(values) - len(got)}


#: The headline whose interval within a run is checked against the other runs.
HEADLINE = "RFC 2544 §26.1 throughput"


def intervals(runs: list[dict]) -> dict:
    """Whether each run's headline range over its own repetitions contains the other runs' medians."""
    hs = [r["answers"][HEADLINE] for r in runs]
    per = [{"min": h["min"], "max": h["max"], "median": h["median"], "at_least": h["at_least"],
            "contains_others": h["median"] is not None and all(
                o["median"] is not None and h["min"] <= o["median"] <= h["max"] for j, o in enumerate(hs) if j != i)}
           for i, h in enumerate(hs)]
    return {"headline": HEADLINE, "runs": per, "all_contain": all(p["contains_others"] for p in per)}


def main(argv: list[str]) -> int:
    """REPS demos, each run's numbers printed as one JSON line as soon as it ends; ``--from-log
    FILE``: the report of the runs such lines in FILE hold (a bench stopped after its runs loses
    nothing)."""
    if argv[:1] == ["--from-log"] and len(argv) == 2:
        runs = [json.loads(line) for line in Path(argv[1]).read_text().splitlines() if line.startswith('{"rc"')]
        return report(runs)
    runs = []
    with tempfile.TemporaryDirectory(prefix="netrig-bench-demo-") as tmp:
        for i in range(REPS):
            runs.append(one_run(Path(tmp) / f"run{i}"))
            print(json.dumps(runs[-1]), flush=True)
    return report(runs)


def report(runs: list[dict]) -> int:
    """The bench's JSON and Markdown under bench/results from the runs' numbers; 0 when quotable."""
    doc: dict[str, Any] = {"reps": len(runs), "bench": "demo", "intervals": intervals(runs),
           "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
           "runs": runs, "throughput": spread([r["answers"][HEADLINE]["median"] for r in runs]),
           "ndr": spread([r["ndr_pps"] for r in runs]), "pdr": spread([r["pdr_pps"] for r in runs]),
           "tester_limited": any(v for r in runs for k, v in r.items() if k.endswith("tester_limited"))}
    stamp = dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    out = HERE / "results" / f"{stamp}-demo"
    out.with_suffix(".json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [f"# make demo, {len(runs)} back-to-back runs ({doc['date']})", "",
             "| run | s | throughput 64 B (median of its repetitions) | RFC 2544 part's one | NDR | PDR | "
             "tester-limited | DUT CPU per frame |", "|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(runs):
        lim = any(v for k, v in r.items() if k.endswith("tester_limited"))
        lines.append(f"| {i + 1} | {r['seconds']:.0f} | {_k(r['answers'][HEADLINE]['median'])} | "
                     f"{_k(r['throughput_pps'])} | {_k(r['ndr_pps'])} | "
                     f"{_k(r['pdr_pps'])} | {'yes' if lim else 'no'} | {_us(r.get('dut_us_per_frame'))} |")
    for i, p in enumerate(doc["intervals"]["runs"]):
        bounds = "".join(f", ≥ {v / 1e3:.1f} k" for v in p["at_least"])
        lines.append(f"\nrun {i + 1}: 64-B headline {_k(p['median'])}, range {_k(p['min'])}–{_k(p['max'])} over its "
                     f"bracketed repetitions{bounds and ' (lower bounds only' + bounds + ')'}: "
                     f"{'contains' if p['contains_others'] else 'does NOT contain'} the other runs' medians. "
                     f"{runs[i]['answers']['cause']}")
    for key in ("throughput", "ndr", "pdr"):
        s = doc[key]
        none = f"; {s['missing']} run(s) without an answer" if s["missing"] else ""
        lines.append(f"\n{key}: median {_k(s['median'])}fps, worst ±{s['worst_pct']} % "
                     f"({'within' if s['within'] else 'OUTSIDE'} ±{SPREAD_PCT:g} %{none})")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if doc["throughput"]["within"] and doc["ndr"]["within"] and not doc["tester_limited"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
