"""CPU accounting of a trial (netrig.monitor.cpu): a busy loop shows up as busy CPU-seconds on the
cores, and a named process as its own user/system CPU-seconds."""
from __future__ import annotations

import os
import subprocess
import time

from netrig.monitor.cpu import CpuAccount, CpuUsage


def _spin(seconds: float) -> float:
    t0 = time.process_time()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return time.process_time() - t0


def test_busy_loop_is_busy_cpu_seconds():
    a = CpuAccount().start()
    used = _spin(0.4)
    u = a.stop()
    assert 0.35 < u.wall_s < 1.0
    # the loop's own CPU time is on the cores (ticks are 10 ms: allow two per core)
    assert u.busy_s >= used - 0.02 * len(u.cores), (used, u.to_dict())
    assert set(u.cores) == {f"cpu{i}" for i in range(os.cpu_count() or 1)}
    for c in u.cores.values():
        assert {"user", "system", "irq", "softirq", "idle", "busy"} <= set(c)


def test_named_process_is_accounted_and_round_trips():
    p = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.05)
        a = CpuAccount(["yes"]).start()
        time.sleep(0.5)
        u = a.stop()
    finally:
        p.kill()
        p.wait()
    mine = [x for x in u.procs if x.pid == p.pid]
    assert mine and mine[0].name == "yes"
    assert mine[0].total_s > 0.1, u.to_dict()  # it spun the whole time, on a 2-core VM shared with others
    again = CpuUsage.from_dict(u.to_dict())
    assert again.procs[0].name == u.procs[0].name and abs(again.busy_s - u.busy_s) < 0.01
