#!/usr/bin/env python3
"""The stall watch's own cost, and the stalls of this machine at rest (``make bench-stalls``, root).

1. Cost: a busy loop pinned to CPU ``CPU`` (default the last) counts its iterations for ``DUR``
   seconds, alternately without and with the stall watch on that CPU (its 1-kHz tick program, the
   scheduler tracepoints, the loop's thread watched), ``REPS`` pairs. The cost is the share of
   iterations the watch takes away, median over the pairs (each pair run back to back, so a slow
   phase of the host hits both). The BPF programs' own run time comes from the kernel's BPF
   statistics (``kernel.bpf_stats_enabled``, switched on for the measurement and restored).
2. Rest: the episodes on every CPU over ``REST`` seconds with nothing else running (count per
   second, lengths' median and maximum, and the share of time the CPUs did not run).

Writes bench/results/<date>-stalls.{json,md}. The numbers go to docs/performance.md (stall watch).
"""
from __future__ import annotations

import datetime as dt
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

from netrig import _native  # noqa: E402
from netrig.measure.platform import CPU_KINDS, cpu_stop, merged  # noqa: E402

CPU = int(os.environ.get("CPU", (os.cpu_count() or 1) - 1))
DUR = float(os.environ.get("DUR", 2.0))
REPS = int(os.environ.get("REPS", 7))
REST = float(os.environ.get("REST", 20.0))
STATS = Path("/proc/sys/kernel/bpf_stats_enabled")


def spin(cpu: int, seconds: float, out: mp.Queue) -> None:
    os.sched_setaffinity(0, {cpu})
    out.put(threading_tid())
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        n += 1
    out.put(n)


def threading_tid() -> int:
    import threading
    return threading.get_native_id()


def loop_rate(watch_cpu: bool) -> float:
    """Iterations per second of the pinned loop, with or without the watch."""
    q: mp.Queue = mp.Queue()
    p = mp.Process(target=spin, args=(CPU, DUR, q))
    watch = None
    p.start()
    tid = q.get()
    if watch_cpu:
        watch = _native.StallWatch([CPU], 0.001, 0.001)
        watch.watch(tid)
    n = q.get()
    p.join()
    if watch is not None:
        watch.close()
    return n / DUR


def cost() -> dict:
    ratios = []
    for _ in range(REPS):
        off = loop_rate(False)
        on = loop_rate(True)
        ratios.append(1 - on / off)
        print(f"  loop {off / 1e6:7.2f} M/s without, {on / 1e6:7.2f} M/s with: cost {100 * ratios[-1]:+.2f} %",
              flush=True)
    return {"reps": REPS, "duration_s": DUR, "cpu": CPU, "cost_pct_median": round(100 * statistics.median(ratios), 3),
            "cost_pct_each": [round(100 * r, 3) for r in ratios]}


def bpf_time(seconds: float = 5.0) -> dict:
    """The programs' own run time per second of a CPU, from the kernel's BPF statistics."""
    before = STATS.read_text().strip()
    STATS.write_text("1")
    try:
        with _native.StallWatch(list(range(os.cpu_count() or 1)), 0.001, 0.001):
            time.sleep(0.2)
            a = _prog_stats()
            time.sleep(seconds)
            b = _prog_stats()
    finally:
        STATS.write_text(before)
    out = {}
    for name, (ns, cnt) in b.items():
        ns0, cnt0 = a.get(name, (0, 0))
        runs = cnt - cnt0
        out[name] = {"runs_per_s": round(runs / seconds, 1),
                     "ns_per_run": round((ns - ns0) / runs, 1) if runs else None,
                     "cpu_pct": round(100 * (ns - ns0) / 1e9 / seconds / (os.cpu_count() or 1), 4)}
    return out


def _prog_stats() -> dict[str, tuple[int, int]]:
    """run_time_ns and run_cnt of the loaded stall-watch programs by name, those of one name summed
    (the wake-up program runs on two tracepoints) (``bpftool``, Debian's package of that name;
    empty without it)."""
    try:
        r = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, timeout=10)
        progs = json.loads(r.stdout or "[]")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}
    out: dict[str, tuple[int, int]] = {}
    for p in progs:
        name = str(p.get("name", ""))
        if name.startswith(("netrig_tick", "netrig_wake", "netrig_switch")):
            ns, cnt = out.get(name, (0, 0))
            out[name] = (ns + int(p.get("run_time_ns", 0)), cnt + int(p.get("run_cnt", 0)))
    return out


def rest() -> dict:
    cpus = list(range(os.cpu_count() or 1))
    with _native.StallWatch(cpus, 0.001, 0.001) as w:
        t0 = time.monotonic_ns()
        time.sleep(REST)
        eps, lost = w.episodes(t0, time.monotonic_ns())
    cpu_eps = merged(cpu_stop(e, 500_000, 0) for e in eps if e.kind in CPU_KINDS)
    lens = [e.length_ms for e in cpu_eps]
    return {"seconds": REST, "cpus": cpus, "episodes": len(cpu_eps), "per_s": round(len(cpu_eps) / REST, 2),
            "median_ms": round(statistics.median(lens), 2) if lens else None,
            "max_ms": round(max(lens), 2) if lens else None,
            "stopped_pct": round(100 * sum(lens) / 1e3 / REST / len(cpus), 3), "lost": lost}


def main() -> int:
    print(f"cost of the watch on CPU {CPU} ({REPS} pairs of {DUR} s):", flush=True)
    c = cost()
    print(f"  median {c['cost_pct_median']:.2f} % of the CPU", flush=True)
    b = bpf_time()
    for name, v in b.items():
        print(f"  {name}: {v['runs_per_s']} runs/s, {v['ns_per_run']} ns each, {v['cpu_pct']} % of a CPU", flush=True)
    print(f"the machine at rest, {REST} s:", flush=True)
    r = rest()
    print(f"  {r['episodes']} CPU stalls ({r['per_s']}/s), median {r['median_ms']} ms, max {r['max_ms']} ms, "
          f"CPUs stopped {r['stopped_pct']} % of the time", flush=True)
    stamp = dt.datetime.now()
    doc = {"date": stamp.isoformat(timespec="seconds"), "cost": c, "bpf": b, "rest": r}
    out = HERE / "results" / f"{stamp:%Y-%m-%dT%H%M%S}-stalls"
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    out.with_suffix(".md").write_text(
        f"# stall watch, {doc['date']}\n\n| measure | value |\n|---|---|\n"
        f"| cost on its CPU (busy loop, median of {REPS}) | {c['cost_pct_median']} % |\n"
        + "".join(f"| {n} | {v['runs_per_s']} runs/s × {v['ns_per_run']} ns |\n" for n, v in b.items())
        + f"| CPU stalls at rest | {r['per_s']}/s, median {r['median_ms']} ms, max {r['max_ms']} ms |\n"
        f"| CPUs stopped at rest | {r['stopped_pct']} % |\n")
    print(f"wrote {out}.json", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
