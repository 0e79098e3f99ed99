#!/usr/bin/env python3
"""Hunt the tests that fail by chance (``make test-flakes``): run the suite's passes again and again,
in random order, with more workers and on a loaded machine, and list every test that failed with the
command that repeats its run.

    scripts/test-flakes.py [--rounds 10] [--workers 2,4] [--load] [--host 0] [--out DIR]

- pass 1 (the tests that leave the host alone, ``-m "not host"``): ``--rounds`` runs for each worker
  count in ``--workers``, each in a random global order (pytest-random-order, a new seed every run);
- ``--load``: one busy loop per CPU at normal priority beside pass 1, as a user's other work would be
  (this found the monitor tests that assumed a sample within 0.3 s);
- ``--host N``: the host pass (``-m host``, one test at a time, as ``make test`` runs it) N times, its
  modules in a random order and each module's tests shuffled within it.

Every run's JUnit XML and output are kept under ``--out`` (default ``/tmp/netrig-flakes-<time>``).
A test that fails is a race, an order dependence or a timing assumption to find and fix, never a retry,
a skip or a wider tolerance. Exits 1 if any run failed.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = str(ROOT / ".venv" / "bin" / "python")


@dataclass
class Run:
    """One pytest run: what was asked, how long it took and which tests failed."""

    name: str
    argv: list[str]
    seconds: float = 0.0
    failed: list[str] = field(default_factory=list)
    errors: int = 0
    tests: int = 0

    @property
    def command(self) -> str:
        return " ".join(self.argv)


def failures(xml: Path) -> tuple[int, list[str]]:
    """(tests run, ids of the tests that failed or errored) from a JUnit XML report."""
    if not xml.exists():
        return 0, ["<no report: pytest did not finish>"]
    root = ET.parse(xml).getroot()
    out, n = [], 0
    for case in root.iter("testcase"):
        n += 1
        if case.find("failure") is not None or case.find("error") is not None:
            out.append(f"{case.get('classname')}::{case.get('name')}")
    return n, out


def run(r: Run, out: Path) -> Run:
    xml = out / f"{r.name}.xml"
    t0 = time.monotonic()
    with open(out / f"{r.name}.log", "w") as log:
        subprocess.run([*r.argv, f"--junitxml={xml}"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL)
    r.seconds = time.monotonic() - t0
    r.tests, r.failed = failures(xml)
    status = "ok" if not r.failed else f"{len(r.failed)} FAILED: " + ", ".join(r.failed)
    print(f"{r.name}: {r.tests} tests in {r.seconds:.0f} s, {status}", flush=True)
    return r


@contextlib.contextmanager
def busy_loops(on: bool) -> Iterator[None]:
    """One busy loop per CPU at normal priority while the block runs (nothing when ``on`` is false)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)] \
        if on else []
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def pass1_runs(rounds: int, workers: list[int]) -> Iterator[Run]:
    for i in range(rounds):
        for n in workers:
            seed = random.randrange(1 << 30)
            yield Run(f"pass1-n{n}-r{i + 1}-seed{seed}",
                      [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(n), "-m", "not host",
                       "--random-order-bucket=global", f"--random-order-seed={seed}",
                       "tests"])


def host_runs(count: int) -> Iterator[Run]:
    for i in range(count):
        seed = random.randrange(1 << 30)
        yield Run(f"host-r{i + 1}-seed{seed}",
                  [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "host",
                   "--random-order-bucket=module", f"--random-order-seed={seed}", "tests"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10, help="pass-1 runs per worker count")
    ap.add_argument("--workers", default="2,4", help="pytest-xdist worker counts of pass 1, e.g. 2,4")
    ap.add_argument("--load", action="store_true", help="a busy loop per CPU beside pass 1")
    ap.add_argument("--host", type=int, default=0, help="host-pass runs (one test at a time; ~11 min each)")
    ap.add_argument("--out", type=Path, default=Path(f"/tmp/netrig-flakes-{time.strftime('%Y%m%dT%H%M%S')}"))
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    print(f"runs kept in {a.out}", flush=True)
    done: list[Run] = []
    with busy_loops(a.load):
        done += [run(r, a.out) for r in pass1_runs(a.rounds, [int(w) for w in a.workers.split(",")])]
    done += [run(r, a.out) for r in host_runs(a.host)]
    failed = [r for r in done if r.failed]
    print(f"\n{len(done)} runs, {len(failed)} with failures")
    by_test: dict[str, list[Run]] = {}
    for r in failed:
        for t in r.failed:
            by_test.setdefault(t, []).append(r)
    for t, runs in sorted(by_test.items()):
        print(f"  {t}: failed in {len(runs)} of {len(done)} runs; repeat one: {runs[0].command}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
