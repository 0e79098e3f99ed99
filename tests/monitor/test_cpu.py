"""CPU accounting of a trial (netrig.monitor.cpu): a busy loop shows up as busy CPU-seconds on the
cores, and a named process as its own user/system CPU-seconds."""
from __future__ import annotations

import os
import subprocess
import time

import psutil

from netrig.monitor.cpu import CpuAccount, CpuUsage


def _spin(seconds: float) -> float:
    t0 = time.process_time()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return time.process_time() - t0


def test_busy_loop_is_busy_cpu_seconds():
    t0 = time.monotonic()
    a = CpuAccount().start()
    used = _spin(0.4)
    u = a.stop()
    assert 0.4 <= u.wall_s <= time.monotonic() - t0
    # the loop's own CPU time is on the cores (ticks are 10 ms: allow two per core)
    assert u.busy_s >= used - 0.02 * len(u.cores), (used, u.to_dict())
    assert set(u.cores) == {f"cpu{i}" for i in range(os.cpu_count() or 1)}
    for c in u.cores.values():
        assert {"user", "system", "irq", "softirq", "idle", "busy"} <= set(c)


def _cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def test_named_process_is_accounted_and_round_trips():
    """The account holds what the process used between start and stop: no less than it used from
    just after the start to just before the stop, no more than from just before to just after
    (one 10-ms tick of rounding each way). It runs until it has used 0.1 s, however busy the
    machine is (a fixed 0.5 s gave it 0.08 s beside the suite's other workers)."""
    p = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL)
    try:
        before = _cpu_s(p.pid)
        a = CpuAccount(["yes"]).start()
        after_start = _cpu_s(p.pid)
        deadline = time.monotonic() + 60
        while _cpu_s(p.pid) - after_start < 0.1 and time.monotonic() < deadline:
            time.sleep(0.02)
        before_stop = _cpu_s(p.pid)
        u = a.stop()
        after = _cpu_s(p.pid)
    finally:
        p.kill()
        p.wait()
    mine = [x for x in u.procs if x.pid == p.pid]
    assert mine and mine[0].name == "yes"
    assert before_stop - after_start >= 0.1, "yes used 0.1 s within a minute"
    assert before_stop - after_start - 0.011 <= mine[0].total_s <= after - before + 0.011, (before, after_start,
                                                                                           before_stop, after,
                                                                                           u.to_dict())
    again = CpuUsage.from_dict(u.to_dict())
    assert again.procs[0].name == u.procs[0].name and abs(again.busy_s - u.busy_s) < 0.01
