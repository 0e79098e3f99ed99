"""A tester that stalls, for the searches' tests: a measurer that logs every trial, and the rule
every search keeps (``netrig.methodology.tester.measure_judged``) checked on the log; and a real
stall, for the stall watch's tests: a process that takes a CPU (:func:`hog`)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from netrig.measure import Load, Measurer, TrialCounts
from netrig.methodology.tester import TRANSIENT_REPEATS

#: The name (``comm``) of the process :func:`hog` runs.
HOG = "netrig-hog"

_INJECTOR = textwrap.dedent("""
    import glob, os, sys, time
    cpu, delay, takes, length, gap = int(sys.argv[1]), *map(float, sys.argv[2:6])
    open("/proc/self/comm", "w").write("{hog}")
    os.sched_setaffinity(0, {{cpu}})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
    print("ready", flush=True)
    if len(sys.argv) > 6:  # the delay counts from the start of a thread of process argv[6] named argv[7]*
        def started():
            for f in glob.glob(f"/proc/{{sys.argv[6]}}/task/*/comm"):
                try:
                    if open(f).read().startswith(sys.argv[7]):
                        return True
                except OSError:
                    pass
            return False
        while not started():
            time.sleep(0.002)
    ran = time.thread_time_ns()
    time.sleep(delay)
    for i in range(int(takes)):
        # the take began when the CPU came back to it: its own run time since it slept earlier
        # (the interpreter's wake-up took 1.5 ms of a take once)
        t0 = time.monotonic_ns() - (time.thread_time_ns() - ran)
        end = t0 + length * 1e9
        while time.monotonic_ns() < end:
            pass
        print(t0, time.monotonic_ns(), flush=True)  # the take as it really was
        ran = time.thread_time_ns()
        time.sleep(gap)
    time.sleep(3600)  # until the test ends it (SIGTERM: no interpreter exit on anyone's CPU mid-trial)
""").format(hog=HOG)


@contextmanager
def hog(cpu: int, delay_s: float, takes: int, length_s: float, gap_s: float,
        after: tuple[int, str] | None = None) -> Iterator[list[tuple[int, int]]]:
    """A separate process (``comm`` :data:`HOG`) at SCHED_FIFO pinned to ``cpu`` that, ``delay_s``
    after the block starts (``after`` = (pid, name): after a thread of process pid whose name
    starts with name appears, such as a trial's ``netrig-tx``), takes the CPU ``takes`` times for
    ``length_s`` with ``gap_s`` between, then sleeps until the block ends it. Yields a list that
    holds, after the block, its takes as it timed them: ``(start, end)`` monotonic ns each, the
    start when the CPU came back to it (its clock read less its run time since it went to sleep)."""
    wait = (str(after[0]), after[1]) if after is not None else ()
    p = subprocess.Popen([sys.executable, "-c", _INJECTOR, str(cpu), str(delay_s), str(takes), str(length_s),
                          str(gap_s), *wait], stdout=subprocess.PIPE, text=True)
    done: list[tuple[int, int]] = []
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        yield done
    finally:
        p.terminate()
        p.wait(timeout=30)
        if p.stdout is not None:
            done += [(int(a), int(b)) for a, b in (ln.split() for ln in p.stdout.read().splitlines())]
            p.stdout.close()


class Logged:
    """A measurer that keeps every trial it ran: ``(rate asked, counts)``."""

    def __init__(self, inner: Measurer):
        self.inner = inner
        self.trials: list[tuple[float, TrialCounts]] = []

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        c = self.inner.measure(load, duration_s)
        self.trials.append((load.rate_pps, c))
        return c


def stalls_at_kept_loads(trials: list[tuple[float, TrialCounts]]) -> list[int]:
    """Indices of the trials the tester fell short on at a load no higher than one it had sent in
    full earlier: stalls, each to be repeated."""
    out, kept = [], 0.0
    for i, (rate, c) in enumerate(trials):
        if not c.valid and rate <= kept:
            out.append(i)
        if c.valid:
            kept = max(kept, rate)
    return out


def repeats(trials: list[tuple[float, TrialCounts]]) -> int:
    """How many of the stalls at kept loads were tried again right away (a search's ``repeated_trials``)."""
    return sum(1 for i in stalls_at_kept_loads(trials) if i + 1 < len(trials) and trials[i + 1][0] == trials[i][0])


def unrepeated_stalls(trials: list[tuple[float, TrialCounts]]) -> list[int]:
    """The stalls at kept loads that were not tried again right away, though fewer than
    ``TRANSIENT_REPEATS`` repeats of theirs came before."""
    out = []
    for i in stalls_at_kept_loads(trials):
        rate = trials[i][0]
        runs = 0  # the same load right before it, in a row
        while runs < i and trials[i - 1 - runs][0] == rate:
            runs += 1
        again = i + 1 < len(trials) and trials[i + 1][0] == rate
        if not again and runs < TRANSIENT_REPEATS:
            out.append(i)
    return out


class HostSpoils:
    """A measurer whose host takes the tester's CPU in every trial at a load in ``[low, high]``
    frames/s: the trial falls 10 % short, and the CPU the host measurably took (280 ms) covers its
    stretch (``host_take_s``), as a noisy host's steal did to a whole table-scale study. Elsewhere,
    ``inner``'s counts. ``asked``: every load asked for."""

    def __init__(self, inner: Measurer, low: float, high: float):
        self.inner, self.low, self.high = inner, low, high
        self.asked: list[float] = []

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        self.asked.append(load.rate_pps)
        c = self.inner.measure(load, duration_s)
        if not self.low <= load.rate_pps <= self.high:
            return c
        sent = int(0.9 * c.frames_sent)
        return replace(c, achieved_pps=0.9 * load.rate_pps, frames_sent=sent,
                       frames_received=min(sent, c.frames_received), valid=False,
                       invalid_reason="the tester's sending was stretched", host_take_s=0.28)
