"""``Monitor``: a background sampler of DUT and host state, aligned with trial start/stop marks.

Each sample (every ``interval_s``, default 1 s) holds, for the interval since the previous sample:

* ``cpu``: per CPU ``{"cpu0": {"user": %, "nice": %, "system": %, "irq": %, "softirq": %,
  "idle": %, "iowait": %, "steal": %, "busy": %}, ...}`` from ``/proc/stat`` deltas;
* ``procs``: per chosen pid ``{"cpu_percent", "rss_bytes", "name"}`` (psutil);
* ``mem``: ``{"total_bytes", "available_bytes", "used_bytes", "slab_bytes"}`` (``/proc/meminfo``);
* ``conntrack``: ``{netns: entries}`` (``nf_conntrack_count`` read inside each namespace);
* ``ifaces``: ``{"<netns>/<ifname>": {counter: value, ..., "rx_pps", "tx_pps"}}`` from netlink
  IFLA_STATS64 (absolute counters plus rates over the interval), and ``ethtool -S`` extras
  under ``"ethtool"`` when ``ethtool_stats=True``;
* ``t_s``: seconds since ``start()``.

``mark(label)`` records ``{"t_s": ..., "mark": label}`` events in the same list, so results can say
"between trial-start and trial-stop CPU 1 was 97 % softirq" (:meth:`MonitorResult.cpu_mean`).
"""
from __future__ import annotations

import bisect
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from netrig.errors import ConfigError
from netrig.testbed.nsthread import netlink_route, run_in_netns
from netrig.testbed.placement import observer

CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def read_proc_stat() -> dict[str, list[int]]:
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu"):
                parts = line.split()
                out[parts[0] if parts[0] != "cpu" else "all"] = [int(x) for x in parts[1:9]]
    return out


def cpu_percent(prev: dict[str, list[int]], cur: dict[str, list[int]]) -> dict[str, dict[str, float]]:
    res = {}
    for cpu, vals in cur.items():
        if cpu not in prev:
            continue
        d = [max(0, a - b) for a, b in zip(vals, prev[cpu])]
        total = sum(d) or 1
        pc = {name: round(100.0 * v / total, 2) for name, v in zip(CPU_FIELDS, d)}
        pc["busy"] = round(100.0 - pc["idle"] - pc["iowait"], 2)
        res[cpu] = pc
    return res


def read_meminfo() -> dict[str, int]:
    want = {"MemTotal": "total_bytes", "MemAvailable": "available_bytes", "Slab": "slab_bytes",
            "MemFree": "free_bytes"}
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, _, rest = line.partition(":")
            if k in want:
                out[want[k]] = int(rest.split()[0]) * 1024
    if "total_bytes" in out and "available_bytes" in out:
        out["used_bytes"] = out["total_bytes"] - out["available_bytes"]
    return out


@dataclass
class MonitorResult:
    """Samples and marks of one monitoring run (``samples`` is time-ordered, marks included)."""

    interval_s: float
    samples: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    placement: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"interval_s": self.interval_s, "placement": self.placement, "samples": self.samples,
                "errors": self.errors}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MonitorResult:
        samples = d.get("samples")
        return cls(float(d.get("interval_s") or 0.0),
                   [s for s in samples if isinstance(s, dict)] if isinstance(samples, list) else [],
                   list(d.get("errors") or []), d.get("placement"))

    def cpu_seconds(self, kind: str = "softirq", start: str = "trial-start", stop: str = "trial-stop") -> float | None:
        """CPU-seconds of ``kind`` on all CPUs together over the samples between two marks (``None``
        without a CPU sample there): each sample's per-CPU percentages times its interval."""
        win = [s for s in self.window(start, stop) if "cpu" in s]
        if not win:
            return None
        return sum(sum(c.get(kind, 0.0) for name, c in s["cpu"].items() if name != "all") / 100
                   * s.get("dt_s", self.interval_s) for s in win)

    @property
    def marks(self) -> list[dict[str, Any]]:
        return [s for s in self.samples if "mark" in s]

    @property
    def data(self) -> list[dict[str, Any]]:
        return [s for s in self.samples if "mark" not in s]

    def window(self, start: str | None = None, stop: str | None = None) -> list[dict[str, Any]]:
        """Samples whose interval lies between marks ``start`` and ``stop`` (None = open end).

        A sample at ``t_s`` covers ``(t_s - interval, t_s]``; it is in the window when at least half
        of that interval is inside.
        """
        t0, t1 = float("-inf"), float("inf")
        for m in self.marks:
            if start is not None and m["mark"] == start:
                t0 = m["t_s"]
            if stop is not None and m["mark"] == stop:
                t1 = m["t_s"]
        out = []
        for s in self.data:
            lo = s["t_s"] - s.get("dt_s", self.interval_s)
            mid = (lo + s["t_s"]) / 2
            if t0 <= mid <= t1:
                out.append(s)
        return out

    def cpu_series(self, cpu: int | str, kind: str = "softirq") -> list[float]:
        key = cpu if isinstance(cpu, str) else f"cpu{cpu}"
        return [s["cpu"][key][kind] for s in self.data if key in s.get("cpu", {})]

    def cpu_softirq_max(self, cpu: int | str) -> float:
        vals = self.cpu_series(cpu, "softirq")
        return max(vals) if vals else 0.0

    def cpu_mean(self, start: str | None = None, stop: str | None = None,
                 kind: str = "softirq") -> dict[str, float]:
        """Mean of ``kind`` (softirq, busy, system, ...) per CPU over the samples in a marked window."""
        win = self.window(start, stop)
        acc: dict[str, list[float]] = {}
        for s in win:
            for cpu, pc in s.get("cpu", {}).items():
                acc.setdefault(cpu, []).append(pc[kind])
        return {cpu: round(sum(v) / len(v), 2) for cpu, v in acc.items() if v}

    def summary(self, start: str | None = None, stop: str | None = None) -> dict[str, Any]:
        """Per-CPU mean busy/softirq/system and the busiest CPU in the window (for reports)."""
        busy = self.cpu_mean(start, stop, "busy")
        soft = self.cpu_mean(start, stop, "softirq")
        sys_ = self.cpu_mean(start, stop, "system")
        per_cpu = {c: {"busy": busy[c], "softirq": soft.get(c, 0.0), "system": sys_.get(c, 0.0)}
                   for c in busy if c != "all"}
        top = max(per_cpu, key=lambda c: per_cpu[c]["busy"]) if per_cpu else None
        return {"window": [start, stop], "samples": len(self.window(start, stop)), "per_cpu": per_cpu,
                "busiest_cpu": top}


class Sampler:
    """What every monitor shares: samples and marks in ``result`` on one clock (seconds since
    ``_t0``), and ``with`` starting and stopping it. Subclasses set ``result``, ``_t0`` and
    ``_lock`` and define ``start`` and ``stop``."""

    result: MonitorResult
    _t0: float
    _lock: threading.Lock

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> MonitorResult:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def mark(self, label: str) -> None:
        with self._lock:
            # kept in time order even when a sample taken just before is appended just after
            bisect.insort(self.result.samples, {"t_s": round(time.monotonic() - self._t0, 4), "mark": str(label)},
                          key=lambda x: x["t_s"])


class Monitor(Sampler):
    """Sample CPU, memory, conntrack and interface counters in a background thread::

        with Monitor(interval_s=0.5, netns_ifaces=tb.monitor_targets(), pids=[os.getpid()],
                     conntrack_netns=[tb.dut_netns]) as mon:
            mon.mark("trial-start"); ...; mon.mark("trial-stop")
        res = mon.result
    """

    def __init__(self, interval_s: Any = 1.0, netns_ifaces: dict[str | None, list[str]] | None = None,
                 pids: list[int] | None = None, conntrack_netns: list[str | None] | None = None,
                 ethtool_stats: bool = False, testbed: Any = None):
        if hasattr(interval_s, "monitor_targets"):  # Monitor(tb): watch a whole test bed, 1 s interval
            testbed, interval_s = interval_s, 1.0
        if testbed is not None:
            if netns_ifaces is None:
                netns_ifaces = testbed.monitor_targets()
            if conntrack_netns is None and getattr(testbed, "dut_netns", None):
                conntrack_netns = [testbed.dut_netns]
            placed = getattr(testbed, "placement", None)
            self.placement = placed.to_dict() if placed is not None else None
        else:
            self.placement = None
        if not isinstance(interval_s, (int, float)) or not 0.01 <= interval_s <= 3600:
            raise ConfigError("interval_s", f"{interval_s!r}: must be between 0.01 and 3600 seconds")
        self.interval_s = float(interval_s)
        self.netns_ifaces = dict(netns_ifaces or {})
        self.pids = list(pids or [])
        if conntrack_netns is None:
            conntrack_netns = [ns for ns in self.netns_ifaces if ns and ns.endswith("-dut")]
        self.conntrack_netns = list(conntrack_netns)
        self.ethtool_stats = ethtool_stats
        self.result = MonitorResult(self.interval_s, placement=self.placement)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._lock = threading.Lock()
        self._nl: dict[str | None, Any] = {}
        self._procs: dict[int, Any] = {}

    # --------------------------------------------------------------- lifecycle
    def start(self) -> Monitor:
        if self._thread is not None:
            raise ConfigError("monitor", "already started")
        try:
            import psutil

            for pid in self.pids:
                try:
                    p = psutil.Process(pid)
                    p.cpu_percent(None)  # prime
                    self._procs[pid] = p
                except psutil.Error as e:
                    self.result.errors.append(f"pid {pid}: {e}")
        except ImportError:
            self.result.errors.append("psutil unavailable: per-process CPU not sampled")
        self._t0 = time.monotonic()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="netrig-monitor", daemon=True)
        self._thread.start()
        ready.wait(10.0)
        return self

    def stop(self) -> MonitorResult:
        """Stop sampling (a final, possibly shorter, interval is sampled) and return the result."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        return self.result

    # --------------------------------------------------------------- sampling
    def _run(self, ready: threading.Event) -> None:
        # The samples use only idle CPU time, on any CPU (``placement.observer``): they never keep a
        # worker waiting, and a spinning TX worker cannot starve them.
        observer()
        # netlink handles are opened, used and closed in this thread only (pyroute2 is per-thread)
        try:
            self._open_netlink()
            self._prev_stat = read_proc_stat()
            self._prev_t = time.monotonic()
            self._prev_if = self._read_ifaces()
        finally:
            ready.set()
        try:
            next_t = self._prev_t + self.interval_s
            while not self._stop.wait(max(0.0, next_t - time.monotonic())):
                self._sample()
                next_t += self.interval_s
                if next_t < time.monotonic():  # fell behind: skip, don't burst
                    next_t = time.monotonic() + self.interval_s
            self._sample()
        except Exception as e:
            self._err(f"monitor stopped early: {e}")
        finally:
            for nl in self._nl.values():
                try:
                    nl.close()
                except Exception:
                    pass
            self._nl.clear()

    def _open_netlink(self) -> None:
        for ns in self.netns_ifaces:
            try:
                self._nl[ns] = netlink_route(ns)
            except Exception as e:
                self.result.errors.append(f"netns {ns}: cannot open netlink: {e}")

    def _read_ifaces(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, int]] = {}
        for ns, ifaces in self.netns_ifaces.items():
            nl = self._nl.get(ns)
            if nl is None:
                continue
            try:
                links = {lk.get_attr("IFLA_IFNAME"): lk for lk in nl.get_links()}
            except Exception as e:
                self._err(f"netns {ns}: {e}")
                continue
            for ifname in ifaces:
                lk = links.get(ifname)
                if lk is None:
                    continue
                stats = lk.get_attr("IFLA_STATS64")
                out[f"{ns or 'host'}/{ifname}"] = {k: int(v) for k, v in dict(stats).items()
                                                   if v}  # zeros omitted to keep samples small
                out[f"{ns or 'host'}/{ifname}"].setdefault("rx_packets", 0)
                out[f"{ns or 'host'}/{ifname}"].setdefault("tx_packets", 0)
        return out

    def _err(self, msg: str) -> None:
        if msg not in self.result.errors:
            self.result.errors.append(msg)

    def _sample(self) -> None:
        now = time.monotonic()
        dt = max(1e-6, now - self._prev_t)
        sample: dict[str, Any] = {"t_s": round(now - self._t0, 4), "dt_s": round(dt, 4)}
        try:
            cur = read_proc_stat()
            sample["cpu"] = cpu_percent(self._prev_stat, cur)
            self._prev_stat = cur
        except OSError as e:
            self._err(f"/proc/stat: {e}")
        try:
            sample["mem"] = read_meminfo()
        except OSError as e:
            self._err(f"/proc/meminfo: {e}")
        if self._procs:
            procs = {}
            for pid, p in self._procs.items():
                try:
                    with p.oneshot():
                        procs[str(pid)] = {"name": p.name(), "cpu_percent": p.cpu_percent(None),
                                           "rss_bytes": p.memory_info().rss}
                except Exception as e:
                    self._err(f"pid {pid}: {e}")
            sample["procs"] = procs
        if self.conntrack_netns:
            sample["conntrack"] = self._conntrack()
        ifs = self._read_ifaces()
        for key, c in ifs.items():
            p = self._prev_if.get(key)
            if p:
                c["rx_pps"] = round((c.get("rx_packets", 0) - p.get("rx_packets", 0)) / dt, 1)
                c["tx_pps"] = round((c.get("tx_packets", 0) - p.get("tx_packets", 0)) / dt, 1)
        if self.ethtool_stats:
            for ns, ifaces in self.netns_ifaces.items():
                for ifname in ifaces:
                    key = f"{ns or 'host'}/{ifname}"
                    if key in ifs:
                        extra = ethtool_stats(ns, ifname)
                        if extra:
                            ifs[key]["ethtool"] = extra
        self._prev_if = {k: {kk: vv for kk, vv in v.items() if isinstance(vv, int)} for k, v in ifs.items()}
        sample["ifaces"] = ifs
        self._prev_t = now
        with self._lock:
            bisect.insort(self.result.samples, sample, key=lambda x: x["t_s"])

    def _conntrack(self) -> dict[str, int | None]:
        def body() -> int | None:
            try:
                with open("/proc/sys/net/netfilter/nf_conntrack_count") as f:
                    return int(f.read())
            except OSError:
                return None

        out = {}
        for ns in self.conntrack_netns:
            try:
                out[ns or "host"] = run_in_netns(ns, body)
            except Exception as e:
                self._err(f"conntrack in {ns}: {e}")
        return out


#: Interface counters a compact sample keeps (cumulative): drops and errors, never packets.
DROP_COUNTERS = ("rx_dropped", "tx_dropped", "rx_missed_errors", "rx_over_errors", "rx_fifo_errors",
                 "tx_fifo_errors", "rx_errors", "tx_errors")


@dataclass(frozen=True)
class ProcSample:
    """One DUT process in a compact sample."""

    cpu_percent: float | None = None
    rss_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"cpu_percent": self.cpu_percent, "rss_bytes": self.rss_bytes}


@dataclass(frozen=True)
class MemSample:
    """The host's memory in a compact sample (a counter the host did not give is ``None``)."""

    available_bytes: int | None = None
    used_bytes: int | None = None
    slab_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class CompactSample:
    """:func:`compact_sample`'s document as a type (read with ``netrig.results.typed.from_dict``);
    a part the sample lacked is ``None`` and not written."""

    t_s: float | None = None
    dt_s: float | None = None
    cpu: dict[str, float | None] | None = None
    softirq: dict[str, float | None] | None = None
    procs: dict[str, ProcSample] | None = None
    mem: MemSample | None = None
    conntrack: dict[str, int] | None = None
    drops: dict[str, dict[str, int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t_s": self.t_s, "dt_s": self.dt_s}
        for k in ("cpu", "softirq", "conntrack", "drops"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.procs is not None:
            out["procs"] = {k: p.to_dict() for k, p in self.procs.items()}
        if self.mem is not None:
            out["mem"] = self.mem.to_dict()
        return out


def compact_sample(sample: dict[str, Any] | None) -> dict[str, Any] | None:
    """The numbers of one monitor sample (local or remote) a long run keeps per interval, small
    enough for hours of them: ``t_s``, ``dt_s``; ``cpu`` busy % per core (``all`` too);
    ``softirq`` % per core; ``procs`` ``{"<name>[<pid>]": {"cpu_percent", "rss_bytes"}}``; ``mem``
    ``{available_bytes, used_bytes, slab_bytes}``; ``conntrack`` ``{netns: entries}``; ``drops``
    ``{iface: {counter: cumulative value}}`` of :data:`DROP_COUNTERS` (non-zero ones). ``None``
    for no sample."""
    if not sample:
        return None
    out: dict[str, Any] = {"t_s": sample.get("t_s"), "dt_s": sample.get("dt_s")}
    cpu = sample.get("cpu")
    if isinstance(cpu, dict):
        out["cpu"] = {c: v.get("busy") for c, v in cpu.items() if isinstance(v, dict)}
        out["softirq"] = {c: v.get("softirq") for c, v in cpu.items() if isinstance(v, dict) and c != "all"}
    procs = sample.get("procs")
    if isinstance(procs, dict):
        out["procs"] = {f"{v.get('name', '?')}[{pid}]": {"cpu_percent": v.get("cpu_percent"),
                                                         "rss_bytes": v.get("rss_bytes")}
                        for pid, v in procs.items() if isinstance(v, dict)}
    mem = sample.get("mem")
    if isinstance(mem, dict):
        out["mem"] = {k: mem[k] for k in ("available_bytes", "used_bytes", "slab_bytes") if k in mem}
    if isinstance(sample.get("conntrack"), dict):
        out["conntrack"] = dict(sample["conntrack"])
    ifaces = sample.get("ifaces")
    if isinstance(ifaces, dict):
        out["drops"] = {name: {k: c[k] for k in DROP_COUNTERS if c.get(k)} for name, c in ifaces.items()
                        if isinstance(c, dict)}
    return out


def latest_sample(sampler: Sampler) -> dict[str, Any] | None:
    """The newest data sample of a running sampler; older samples are dropped (a long run keeps
    them compacted elsewhere, not in memory)."""
    with sampler._lock:
        samples = sampler.result.samples
        idx = next((i for i in range(len(samples) - 1, -1, -1) if "mark" not in samples[i]), None)
        if idx is None:
            return None
        last = samples[idx]
        del samples[:idx]
        return last


def ethtool_stats(ns: str | None, ifname: str) -> dict[str, int]:
    """``ethtool -S`` of ``ifname`` inside ``ns`` as ``{name: value}`` (empty when unavailable)."""
    def body() -> str:
        try:
            r = subprocess.run(["ethtool", "-S", ifname], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return r.stdout if r.returncode == 0 else ""

    try:
        text = run_in_netns(ns, body)
    except Exception:
        return {}
    out = {}
    for line in text.splitlines()[1:]:
        k, _, v = line.strip().partition(":")
        v = v.strip()
        if k and v.lstrip("-").isdigit():
            out[k.strip()] = int(v)
    return out


__all__ = ["Monitor", "MonitorResult", "CompactSample", "MemSample", "ProcSample", "compact_sample", "latest_sample",
           "DROP_COUNTERS", "ethtool_stats", "read_proc_stat", "cpu_percent", "read_meminfo"]
