"""CPU accounting of one trial, exact rather than sampled: every party's CPU-seconds between the
trial's start and its stop.

Data flow::

    CpuAccount.start()  ── /proc/stat (per core: user, nice, system, irq, softirq, idle …)
                        ── /proc/<pid>/task/<tid>/stat of the watched threads (utime, stime)
    … the trial …
    CpuAccount.stop()   ── the same reads again ── differences in CPU-seconds ── CpuUsage

Watched threads are the kernel's packet workers (``ksoftirqd/N``, threaded NAPI ``napi/…``, the
test bed's wire rings ``cpumap/…``, where a DUT's stack runs) and
any process whose name matches a pattern the user gives (a DUT daemon: ``bird``, ``conntrackd``),
plus pids the caller names (its own iperf3 or sockperf processes, which it can also account with
``wait4``). On one host (the veth test bed) every party shares the cores: the per-core split says
where the time went (softirq is the forwarding and the receive path), the per-thread figures who
spent it.
"""
from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from netrig.monitor.monitor import CPU_FIELDS, read_proc_stat
from netrig.results.typed import from_dict

#: The kernel threads that do packet work, always watched.
KERNEL_THREADS = ("ksoftirqd/*", "napi/*", "cpumap/*")
_TICK = os.sysconf("SC_CLK_TCK")


def _thread_times(path: str) -> tuple[str, float, float] | None:
    """``(comm, user_s, sys_s)`` of ``/proc/…/stat`` (None when it is gone)."""
    try:
        with open(path, "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    lp, rp = raw.find("("), raw.rfind(")")
    if lp < 0 or rp < 0:
        return None
    rest = raw[rp + 2:].split()
    try:  # fields 14 and 15 (utime, stime); rest[0] is field 3
        return raw[lp + 1:rp], int(rest[11]) / _TICK, int(rest[12]) / _TICK
    except (IndexError, ValueError):
        return None


def matching_pids(patterns: Sequence[str]) -> dict[int, str]:
    """``{pid: name}`` of every process whose name matches one of ``patterns``."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            out[int(d)] = name
    return out


def _proc_times(pid: int) -> tuple[str, float, float] | None:
    """A process's name and CPU-seconds summed over its threads (None when it is gone)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    name, user, sys_ = "", 0.0, 0.0
    found = False
    for tid in tids:
        t = _thread_times(f"/proc/{pid}/task/{tid}/stat")
        if t is None:
            continue
        found = True
        name = name or t[0]
        user += t[1]
        sys_ += t[2]
    return (name, user, sys_) if found else None


@dataclass(frozen=True)
class ProcUsage:
    pid: int
    name: str
    user_s: float
    sys_s: float

    @property
    def total_s(self) -> float:
        return self.user_s + self.sys_s


@dataclass(frozen=True)
class CpuUsage:
    """CPU-seconds per core (split as ``/proc/stat`` splits it) and per watched process; also a stack
    trial's ``cpu`` as stored, read back by :meth:`from_dict` (``to_dict`` of that writes it again)."""

    wall_s: float = 0.0
    #: ``{"cpu0": {"user": s, "system": s, "irq": s, "softirq": s, …, "busy": s}, …}``
    cores: dict[str, dict[str, float]] = field(default_factory=dict)
    procs: tuple[ProcUsage, ...] = field(default_factory=tuple)

    @property
    def busy_s(self) -> float:
        """Busy CPU-seconds of every core together."""
        return self.total("busy")

    def total(self, kind: str) -> float:
        """CPU-seconds of one kind (``softirq``, ``system`` …) over every core."""
        return _total(self.cores, kind)

    def seconds(self, core: str, kind: str) -> float | None:
        """One core's CPU-seconds of one kind (``None``: not counted)."""
        return self.cores.get(core, {}).get(kind)

    def to_dict(self) -> dict[str, Any]:
        """As stored: seconds to 0.1 ms, ``busy_s`` the sum of the stored cores' (read back, the same)."""
        cores = {k: {n: round(v, 4) for n, v in c.items()} for k, c in self.cores.items()}
        return {"wall_s": round(self.wall_s, 6), "cores": cores,
                "busy_s": round(_total(cores, "busy"), 4),
                "procs": [{"pid": p.pid, "name": p.name, "user_s": round(p.user_s, 4), "sys_s": round(p.sys_s, 4)}
                          for p in self.procs]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CpuUsage:
        return from_dict(cls, d)


def _total(cores: Mapping[str, Mapping[str, float]], kind: str) -> float:
    return sum(c.get(kind, 0.0) for c in cores.values())


class CpuAccount:
    """Start, run the trial, stop: the :class:`CpuUsage` in between."""

    def __init__(self, patterns: Iterable[str] = (), pids: Iterable[int] = ()):
        self.patterns = tuple(KERNEL_THREADS) + tuple(patterns)
        self.extra_pids = tuple(pids)
        self._t0 = 0.0
        self._stat0: dict[str, list[int]] = {}
        self._procs0: dict[int, tuple[str, float, float]] = {}

    def _procs(self, pids: Iterable[int]) -> dict[int, tuple[str, float, float]]:
        out = {}
        for pid in pids:
            t = _proc_times(pid)
            if t is not None:
                out[pid] = t
        return out

    def start(self) -> CpuAccount:
        pids = set(matching_pids(self.patterns)) | set(self.extra_pids)
        self._procs0 = self._procs(pids)
        self._stat0 = read_proc_stat()
        self._t0 = time.monotonic()
        return self

    def stop(self) -> CpuUsage:
        wall = time.monotonic() - self._t0
        stat1 = read_proc_stat()
        procs1 = self._procs(self._procs0)
        cores = {}
        for cpu, vals in stat1.items():
            if cpu == "all" or cpu not in self._stat0:
                continue
            d = {name: max(0, a - b) / _TICK for name, a, b in zip(CPU_FIELDS, vals, self._stat0[cpu])}
            d["busy"] = sum(v for k, v in d.items() if k not in ("idle", "iowait"))
            cores[cpu] = d
        procs = []
        for pid, (name, u1, s1) in sorted(procs1.items()):
            _, u0, s0 = self._procs0[pid]
            u, s = max(0.0, u1 - u0), max(0.0, s1 - s0)
            if u + s > 0:
                procs.append(ProcUsage(pid, name, u, s))
        return CpuUsage(wall, cores, tuple(procs))
