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
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Self

from netrig.errors import ConfigError, wait_for
from netrig.results.typed import from_dict
from netrig.testbed.links import link_counters, route_socket
from netrig.testbed.nsthread import run_in_netns
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


@dataclass(frozen=True)
class MemInfo:
    """The host's memory (``/proc/meminfo``), bytes; a counter the host did not give is ``None``."""

    total_bytes: int | None = None
    available_bytes: int | None = None
    free_bytes: int | None = None
    slab_bytes: int | None = None
    used_bytes: int | None = None

    @classmethod
    def of(cls, total: int | None, available: int | None, free: int | None, slab: int | None) -> MemInfo:
        """From the kernel's four counters; ``used`` is total less available."""
        used = total - available if total is not None and available is not None else None
        return cls(total, available, free, slab, used)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


#: ``/proc/meminfo`` lines a sample keeps.
MEMINFO_LINES = ("MemTotal", "MemAvailable", "MemFree", "Slab")


def meminfo_of(kib: Mapping[str, int]) -> MemInfo:
    """:class:`MemInfo` of ``/proc/meminfo``'s lines (``{"MemTotal": kB, …}``, read here or on a
    remote DUT)."""
    total, avail, free, slab = (kib[k] * 1024 if k in kib else None for k in MEMINFO_LINES)
    return MemInfo.of(total, avail, free, slab)


def read_meminfo() -> MemInfo:
    kib = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, _, rest = line.partition(":")
            if k in MEMINFO_LINES:
                kib[k] = int(rest.split()[0])
    return meminfo_of(kib)


@dataclass(frozen=True)
class ProcSample:
    """One watched process in a sample: CPU (percent of one CPU over the interval) and RSS; its
    name where the sample is keyed by pid (a compact sample's key holds it)."""

    cpu_percent: float | None = None
    rss_bytes: int | None = None
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"cpu_percent": self.cpu_percent, "rss_bytes": self.rss_bytes}
        return {"name": self.name, **d} if self.name is not None else d


@dataclass(frozen=True)
class Mark:
    """A label on the monitor's clock (``trial-start``, ``trial-stop``)."""

    t_s: float
    mark: str

    def to_dict(self) -> dict[str, Any]:
        return {"t_s": self.t_s, "mark": self.mark}


@dataclass(frozen=True)
class MonitorSample:
    """One interval's sample (see the module's description), ``t_s`` on the monitor's clock;
    a part the monitor did not read is ``None`` and not written."""

    t_s: float
    dt_s: float | None = None
    #: ``{cpu: {field: percent}}``: the fields of ``/proc/stat`` (:data:`CPU_FIELDS`) and ``busy``.
    cpu: dict[str, dict[str, float]] | None = None
    mem: MemInfo | None = None
    #: By pid.
    procs: dict[str, ProcSample] | None = None
    #: ``{netns: entries}``.
    conntrack: dict[str, int | None] | None = None
    #: ``{"<netns>/<ifname>": {counter: value, …, "rx_pps", "tx_pps"}}`` (the kernel's counter names).
    ifaces: dict[str, dict[str, Any]] | None = None

    def share(self, cpu: str, kind: str) -> float | None:
        """CPU ``cpu``'s share of ``kind`` (``busy``, ``softirq`` …), percent."""
        return (self.cpu or {}).get(cpu, {}).get(kind)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t_s": self.t_s, "dt_s": self.dt_s}
        if self.cpu is not None:
            out["cpu"] = self.cpu
        if self.mem is not None:
            out["mem"] = self.mem.to_dict()
        if self.procs is not None:
            out["procs"] = {pid: p.to_dict() for pid, p in self.procs.items()}
        if self.conntrack is not None:
            out["conntrack"] = self.conntrack
        if self.ifaces is not None:
            out["ifaces"] = self.ifaces
        return out


def read_sample(d: Mapping[str, Any]) -> MonitorSample | Mark:
    """A stored sample or mark (``to_dict``) as its type."""
    return from_dict(Mark if "mark" in d else MonitorSample, d)  # type: ignore[return-value]


def with_rates(cur: dict[str, Any], prev: Mapping[str, Any] | None, dt: float) -> dict[str, Any]:
    """An interface's counters and, with the previous sample's, its packet rates over the interval
    (``rx_pps``, ``tx_pps``)."""
    if not prev:
        return cur
    return {**cur, **{f"{d}_pps": round((cur.get(f"{d}_packets", 0) - prev.get(f"{d}_packets", 0)) / dt, 1)
                      for d in ("rx", "tx")}}


@dataclass
class MonitorResult:
    """Samples and marks of one monitoring run (``samples`` is time-ordered, marks included)."""

    interval_s: float
    samples: list[MonitorSample | Mark] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    placement: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"interval_s": self.interval_s, "placement": self.placement,
                "samples": [s.to_dict() for s in self.samples], "errors": self.errors}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MonitorResult:
        r = from_dict(_Stored, d)
        return cls(r.interval_s or 0.0, [read_sample(s) for s in r.samples or () if isinstance(s, Mapping)],
                   list(r.errors or ()), r.placement)

    def cpu_seconds(self, kind: str = "softirq", start: str = "trial-start", stop: str = "trial-stop") -> float | None:
        """CPU-seconds of ``kind`` on all CPUs together over the samples between two marks (``None``
        without a CPU sample there): each sample's per-CPU percentages times its interval."""
        win = [s for s in self.window(start, stop) if s.cpu is not None]
        if not win:
            return None
        return sum(sum(c.get(kind, 0.0) for name, c in (s.cpu or {}).items() if name != "all") / 100
                   * (s.dt_s or self.interval_s) for s in win)

    @property
    def marks(self) -> list[Mark]:
        return [s for s in self.samples if isinstance(s, Mark)]

    @property
    def data(self) -> list[MonitorSample]:
        return [s for s in self.samples if isinstance(s, MonitorSample)]

    def window(self, start: str | None = None, stop: str | None = None) -> list[MonitorSample]:
        """Samples whose interval lies between marks ``start`` and ``stop`` (None = open end).

        A sample at ``t_s`` covers ``(t_s - interval, t_s]``; it is in the window when at least half
        of that interval is inside.
        """
        t0, t1 = float("-inf"), float("inf")
        for m in self.marks:
            if start is not None and m.mark == start:
                t0 = m.t_s
            if stop is not None and m.mark == stop:
                t1 = m.t_s
        return [s for s in self.data if t0 <= s.t_s - (s.dt_s or self.interval_s) / 2 <= t1]

    def cpu_series(self, cpu: int | str, kind: str = "softirq") -> list[float]:
        key = cpu if isinstance(cpu, str) else f"cpu{cpu}"
        return [v for s in self.data if (v := s.share(key, kind)) is not None]

    def cpu_softirq_max(self, cpu: int | str) -> float:
        vals = self.cpu_series(cpu, "softirq")
        return max(vals) if vals else 0.0

    def cpu_mean(self, start: str | None = None, stop: str | None = None,
                 kind: str = "softirq") -> dict[str, float]:
        """Mean of ``kind`` (softirq, busy, system, ...) per CPU over the samples in a marked window."""
        acc: dict[str, list[float]] = {}
        for s in self.window(start, stop):
            for cpu, pc in (s.cpu or {}).items():
                acc.setdefault(cpu, []).append(pc[kind])
        return {cpu: round(sum(v) / len(v), 2) for cpu, v in acc.items() if v}

    def summary(self, start: str | None = None, stop: str | None = None) -> dict[str, Any]:
        """Per-CPU mean busy/softirq/system and the busiest CPU in the window (for reports)."""
        busy = self.cpu_mean(start, stop, "busy")
        soft = self.cpu_mean(start, stop, "softirq")
        sys_ = self.cpu_mean(start, stop, "system")
        cpus = [c for c in busy if c != "all"]
        per_cpu = {c: {"busy": busy[c], "softirq": soft.get(c, 0.0), "system": sys_.get(c, 0.0)} for c in cpus}
        top = max(cpus, key=lambda c: busy[c]) if cpus else None
        return {"window": [start, stop], "samples": len(self.window(start, stop)), "per_cpu": per_cpu,
                "busiest_cpu": top}


@dataclass(frozen=True)
class _Stored:
    """A monitor record as stored (``MonitorResult.to_dict``), its samples read one by one."""

    interval_s: float | None = None
    samples: list[Any] | None = None
    errors: list[str] | None = None
    placement: dict[str, Any] | None = None


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
        self._add(Mark(round(time.monotonic() - self._t0, 4), str(label)))

    def _add(self, sample: MonitorSample | Mark) -> None:
        with self._lock:
            # kept in time order even when a sample taken just before is appended just after
            bisect.insort(self.result.samples, sample, key=lambda x: x.t_s)


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
        self._nl: dict[str | None, socket.socket] = {}
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
        wait_for(ready, 10.0)
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
        # The samples use only the idle time of the tester's CPUs (``placement.observer``), never the
        # DUT's; each costs under 1 ms of CPU, so a worker that wakes meanwhile waits that long at most.
        observer()
        # its netlink sockets (one per namespace, made there) are opened, used and closed in this thread
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
                nl.close()
            self._nl.clear()

    def _open_netlink(self) -> None:
        for ns in self.netns_ifaces:
            try:
                self._nl[ns] = run_in_netns(ns, route_socket) if ns is not None else route_socket()
            except Exception as e:
                self.result.errors.append(f"netns {ns}: cannot open netlink: {e}")

    def _read_ifaces(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for ns, ifaces in self.netns_ifaces.items():
            nl = self._nl.get(ns)
            if nl is None:
                continue
            try:
                links = link_counters(nl)
            except OSError as e:
                self._err(f"netns {ns}: {e}")
                continue
            for ifname in ifaces:
                stats = links.get(ifname)
                if stats is None:
                    continue
                # zeros omitted to keep samples small; the packet counters always there
                counts = {k: v for k, v in stats.items() if v}
                out[f"{ns or 'host'}/{ifname}"] = {"rx_packets": 0, "tx_packets": 0, **counts}
        return out

    def _err(self, msg: str) -> None:
        if msg not in self.result.errors:
            self.result.errors.append(msg)

    def _sample(self) -> None:
        now = time.monotonic()
        dt = max(1e-6, now - self._prev_t)
        cpu = mem = None
        try:
            cur = read_proc_stat()
            cpu = cpu_percent(self._prev_stat, cur)
            self._prev_stat = cur
        except OSError as e:
            self._err(f"/proc/stat: {e}")
        try:
            mem = read_meminfo()
        except OSError as e:
            self._err(f"/proc/meminfo: {e}")
        counts = self._read_ifaces()
        ifs = {key: with_rates(dict(c), self._prev_if.get(key), dt) for key, c in counts.items()}
        if self.ethtool_stats:
            for ns, ifaces in self.netns_ifaces.items():
                for ifname in ifaces:
                    key = f"{ns or 'host'}/{ifname}"
                    if key in ifs and (extra := ethtool_stats(ns, ifname)):
                        ifs[key]["ethtool"] = extra
        self._prev_if = counts
        self._prev_t = now
        self._add(MonitorSample(round(now - self._t0, 4), round(dt, 4), cpu, mem, self._proc_samples(),
                                self._conntrack() if self.conntrack_netns else None, ifs))

    def _proc_samples(self) -> dict[str, ProcSample] | None:
        if not self._procs:
            return None
        procs = {}
        for pid, p in self._procs.items():
            try:
                with p.oneshot():
                    procs[str(pid)] = ProcSample(p.cpu_percent(None), p.memory_info().rss, p.name())
            except Exception as e:
                self._err(f"pid {pid}: {e}")
        return procs

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
class CompactSample:
    """:func:`compact_sample`'s document as a type (read with ``netrig.results.typed.from_dict``);
    a part the sample lacked is ``None`` and not written."""

    t_s: float | None = None
    dt_s: float | None = None
    #: Busy percent per core (``all`` too).
    cpu: dict[str, float | None] | None = None
    #: Softirq percent per core.
    softirq: dict[str, float | None] | None = None
    #: ``{"<name>[<pid>]": ProcSample}``.
    procs: dict[str, ProcSample] | None = None
    #: Available, used and slab bytes.
    mem: MemInfo | None = None
    conntrack: dict[str, int | None] | None = None
    #: ``{iface: {counter: cumulative value}}`` of :data:`DROP_COUNTERS`, the non-zero ones.
    drops: dict[str, dict[str, int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t_s": self.t_s, "dt_s": self.dt_s}
        if self.cpu is not None:
            out["cpu"] = self.cpu
        if self.softirq is not None:
            out["softirq"] = self.softirq
        if self.procs is not None:
            out["procs"] = {k: p.to_dict() for k, p in self.procs.items()}
        if self.mem is not None:
            out["mem"] = self.mem.to_dict()
        if self.conntrack is not None:
            out["conntrack"] = self.conntrack
        if self.drops is not None:
            out["drops"] = self.drops
        return out


def compact_sample(sample: MonitorSample | None) -> CompactSample | None:
    """The numbers of one monitor sample (local or remote) a long run keeps per interval, small
    enough for hours of them (:class:`CompactSample`). ``None`` for no sample."""
    if sample is None:
        return None
    cpu = sample.cpu or {}
    m = sample.mem
    return CompactSample(
        sample.t_s, sample.dt_s,
        cpu={c: sample.share(c, "busy") for c in cpu} if sample.cpu is not None else None,
        softirq={c: sample.share(c, "softirq") for c in cpu if c != "all"} if sample.cpu is not None else None,
        procs={f"{p.name or '?'}[{pid}]": replace(p, name=None) for pid, p in sample.procs.items()}
        if sample.procs is not None else None,
        mem=MemInfo(available_bytes=m.available_bytes, used_bytes=m.used_bytes, slab_bytes=m.slab_bytes)
        if m is not None else None,
        conntrack=dict(sample.conntrack) if sample.conntrack is not None else None,
        drops={name: {k: c[k] for k in DROP_COUNTERS if c.get(k)} for name, c in sample.ifaces.items()}
        if sample.ifaces is not None else None)


def latest_sample(sampler: Sampler) -> MonitorSample | None:
    """The newest data sample of a running sampler; older samples are dropped (a long run keeps
    them compacted elsewhere, not in memory)."""
    with sampler._lock:
        samples = sampler.result.samples
        idx = next((i for i in range(len(samples) - 1, -1, -1) if isinstance(samples[i], MonitorSample)), None)
        if idx is None:
            return None
        last = samples[idx]
        del samples[:idx]
        assert isinstance(last, MonitorSample)
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


__all__ = ["Monitor", "MonitorResult", "MonitorSample", "Mark", "CompactSample", "MemInfo", "ProcSample",
           "compact_sample", "latest_sample", "with_rates", "meminfo_of", "read_sample", "DROP_COUNTERS",
           "ethtool_stats", "read_proc_stat", "cpu_percent", "read_meminfo"]
