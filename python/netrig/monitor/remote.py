"""``RemoteMonitor``: the same samples as :class:`netrig.monitor.Monitor`, of a Linux DUT on
another host, over one SSH session.

Data flow::

    RemoteMonitor.start()
      └─ ssh -T -o BatchMode=yes [-F config] HOST sh -s      (the OpenSSH client: the user's
           stdin: SAMPLER (POSIX sh, no Python on the DUT)     config, keys and agent; never a
           stdout: one record per interval                    password, never a prompt)
                ├─ "@@ <uptime s>"           the DUT's clock, for the interval length
                ├─ "cpu…" lines              /proc/stat            → sample.cpu   (% per CPU)
                ├─ "Mem…:", "Slab:"          /proc/meminfo         → sample.mem
                ├─ "if <name> <counters>"    /proc/net/dev         → sample.ifaces: "remote/<if>"
                ├─ "ct <n>"                  nf_conntrack_count    → sample.conntrack: "remote"
                ├─ "p <pid> <ticks> <rss pages> <comm>"   chosen processes → sample.procs
                └─ "@@end"
      reader thread: parse each record into a sample (rates from the DUT's uptime deltas), append
    mark(label) / stop() / result: as Monitor (``MonitorResult``, marks on the local clock)

A sample's ``t_s`` is the local time the record arrived (marks are local too); ``dt_s`` is the
DUT's own interval. Per-process CPU is ``utime + stime`` ticks over the interval, as a percentage of
one CPU (psutil's convention); RSS from ``/proc/<pid>/statm``. Interfaces are read from
``/proc/net/dev`` of the login's network namespace.

Credentials: the host is passed to ``ssh`` as given (an alias of the user's ``~/.ssh/config`` or
``user@host``); ``BatchMode=yes`` makes a missing key an error instead of a prompt, and only the
host string is recorded in results.
"""
from __future__ import annotations

import re
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from netrig.errors import ConfigError, NetrigError, wait_for
from netrig.monitor.monitor import (
    CPU_FIELDS,
    MonitorResult,
    MonitorSample,
    ProcSample,
    Sampler,
    cpu_percent,
    meminfo_of,
    with_rates,
)

#: Seconds to wait for the first record (ssh connect, login, first sample).
CONNECT_TIMEOUT_S = 15.0

_HOST = re.compile(r"^[A-Za-z0-9_.@:%\[\]-]+$")
_PROC = re.compile(r"^[A-Za-z0-9_.:+@-]+\*?$")

# The sampler, run by the DUT's /bin/sh: one record per interval until ssh ends (the next write then
# fails). Shell builtins only, but for `sleep`: one fork per interval. Processes are chosen by comm
# (an exact name, or a prefix with a trailing *).
SAMPLER = r"""
set -u
iv=$1; shift
pat="$*"
ps=$(getconf PAGESIZE 2>/dev/null || echo 4096)
echo "@@hz $(getconf CLK_TCK 2>/dev/null || echo 100) $ps $(nproc 2>/dev/null || echo 0)"
while :; do
  read -r up _ </proc/uptime
  echo "@@ $up"
  while read -r l; do case $l in cpu*) echo "$l";; *) break;; esac; done </proc/stat
  while read -r l; do
    case $l in MemTotal:*|MemAvailable:*|MemFree:*|Slab:*) echo "$l";; esac
  done </proc/meminfo
  { read -r _; read -r _
    while IFS=': ' read -r n rb rp re rd _ _ _ _ tb tp te td _; do
      echo "if $n $rb $rp $re $rd $tb $tp $te $td"
    done; } </proc/net/dev
  ct=; read -r ct 2>/dev/null </proc/sys/net/netfilter/nf_conntrack_count  # no newline read: sysctl files
  [ -z "$ct" ] || echo "ct $ct"                                             # end at a byte-wise reader
  if [ -n "$pat" ]; then
    for d in /proc/[0-9]*; do
      read -r c 2>/dev/null <"$d/comm" || continue
      set -f
      for p in $pat; do
        case "$c" in
          $p)
            read -r st 2>/dev/null <"$d/stat" || continue
            rest=${st##*) }
            set -- $rest
            shift 11
            t=$(( $1 + $2 ))
            read -r _ rss _ 2>/dev/null <"$d/statm" || rss=0
            echo "p ${d#/proc/} $t $rss $c"
            break;;
        esac
      done
      set +f
    done
  fi
  echo "@@end"
  sleep "$iv" || exit 0
done
"""


class RemoteMonitorError(NetrigError):
    """The remote DUT could not be monitored (SSH failed, or the host is not a Linux with /proc)."""


class RemoteMonitor(Sampler):
    """Sample a Linux DUT over SSH in a background thread, like :class:`Monitor` does locally::

        with RemoteMonitor("dut1", interval_s=1.0, procs=["bird", "conntrackd"]) as mon:
            mon.mark("trial-start"); ...; mon.mark("trial-stop")
        res = mon.result            # samples keyed "remote/<ifname>", conntrack {"remote": n}
    """

    def __init__(self, host: str, interval_s: float = 1.0, procs: list[str] | tuple[str, ...] = (),
                 ssh_config: str | Path | None = None, connect_timeout_s: float = CONNECT_TIMEOUT_S):
        self.host = self.check_host(host)
        if isinstance(interval_s, bool) or not isinstance(interval_s, (int, float)) or not 0.05 <= interval_s <= 3600:
            raise ConfigError("interval_s", f"{interval_s!r}: must be between 0.05 and 3600 seconds")
        self.interval_s = float(interval_s)
        for p in procs:
            if not isinstance(p, str) or not _PROC.match(p):
                raise ConfigError("monitor.procs", f"{p!r}: a process name (comm), optionally ending in * "
                                                   "(letters, digits, . _ - : + @)")
        self.procs = tuple(procs)
        if ssh_config is not None and not Path(ssh_config).is_file():
            raise ConfigError("monitor.ssh_config", f"{ssh_config}: no such file (an OpenSSH client config)")
        self.ssh_config = str(ssh_config) if ssh_config is not None else None
        self.connect_timeout_s = float(connect_timeout_s)
        self.result = MonitorResult(self.interval_s)
        self._proc: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None
        self._err_thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._first = threading.Event()
        self._t0 = 0.0
        self._stderr: list[str] = []

    @staticmethod
    def check_host(host: Any, field: str = "monitor.remote") -> str:
        """``host`` if it is an SSH destination ssh cannot read as an option, else a ConfigError."""
        if not isinstance(host, str) or not host or host.startswith("-") or not _HOST.match(host):
            raise ConfigError(field, f"{host!r} is not an SSH host: give a name from your ~/.ssh/config or "
                                     "user@host (letters, digits, . - _ @ :)")
        return host

    def command(self) -> list[str]:
        """The ``ssh`` command line (no secrets: keys come from the user's config and agent)."""
        cmd = ["ssh", "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(1, int(self.connect_timeout_s))}",
               "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        if self.ssh_config:
            cmd += ["-F", self.ssh_config]
        procs = " ".join(shlex.quote(p) for p in self.procs)
        script = f"sh -c {shlex.quote(SAMPLER)} sampler {self.interval_s:g} {procs}"
        return [*cmd, "--", self.host, script]

    # --------------------------------------------------------------- lifecycle
    def start(self) -> RemoteMonitor:
        if self._proc is not None:
            raise ConfigError("monitor", "already started")
        self._t0 = time.monotonic()
        try:
            self._proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, bufsize=1, start_new_session=True)
        except OSError as e:
            raise RemoteMonitorError(f"monitor.remote {self.host}: cannot run ssh ({e}): install the OpenSSH "
                                     "client (apt install openssh-client)") from e
        self._err_thread = threading.Thread(target=self._drain_stderr, args=(self._proc.stderr,),
                                            name="netrig-ssh-stderr", daemon=True)
        self._err_thread.start()
        self._thread = threading.Thread(target=self._read, args=(self._proc.stdout,), name="netrig-remote-monitor",
                                        daemon=True)
        self._thread.start()
        if not wait_for(self._first, self.connect_timeout_s) or not self.result.data:
            why = self._why()
            self.stop()
            raise RemoteMonitorError(f"monitor.remote {self.host}: no sample within {self.connect_timeout_s:g} s "
                                     f"({why}); check that `ssh -o BatchMode=yes {self.host} true` works without a "
                                     "prompt (a key in your agent or ~/.ssh/config) and that the host is a Linux "
                                     "with /proc")
        return self

    def stop(self) -> MonitorResult:
        """End the session (the DUT's sampler exits with it) and return the result."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for th in (self._thread, self._err_thread):
            if th is not None:
                th.join(5)
        self._thread = self._err_thread = None
        if proc is not None:
            for f in (proc.stdout, proc.stderr):
                if f is not None:
                    f.close()
        return self.result

    # --------------------------------------------------------------- reading
    def _why(self) -> str:
        lines = [ln.strip() for ln in self._stderr if ln.strip()]
        if lines:
            return "ssh: " + lines[-1]
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            return f"ssh exited with status {proc.returncode}"
        return "no answer"

    def _drain_stderr(self, f: IO[str] | None) -> None:
        if f is None:
            return
        for line in f:
            self._stderr.append(line.rstrip("\n"))
            del self._stderr[:-20]

    def _read(self, f: IO[str] | None) -> None:
        if f is None:
            return
        parser = RecordParser()
        try:
            for line in f:
                sample = parser.feed(line.rstrip("\n"))
                if sample is None:
                    continue
                self._add(replace(sample, t_s=round(time.monotonic() - self._t0, 4)))
                self._first.set()
        except (OSError, ValueError) as e:
            self._err(f"remote {self.host}: {e}")
        finally:
            self._first.set()

    def _err(self, msg: str) -> None:
        if msg not in self.result.errors:
            self.result.errors.append(msg)


#: ``/proc/net/dev``'s counters the sampler sends, in its order.
NET_DEV = ("rx_bytes", "rx_packets", "rx_errors", "rx_dropped", "tx_bytes", "tx_packets", "tx_errors", "tx_dropped")


@dataclass
class _Record:
    """One record of the sampler, as its lines arrive."""

    up: float
    stat: dict[str, list[int]] = field(default_factory=dict)
    #: ``/proc/meminfo`` lines, kB.
    mem: dict[str, int] = field(default_factory=dict)
    ifs: dict[str, dict[str, int]] = field(default_factory=dict)
    ct: int | None = None
    #: ``{pid: (CPU ticks, RSS pages, comm)}``.
    procs: dict[str, tuple[int, int, str]] = field(default_factory=dict)


class RecordParser:
    """Turns the sampler's lines into samples (the first record only primes the deltas)."""

    def __init__(self) -> None:
        self.hz = 100
        self.page = 4096
        self._rec: _Record | None = None
        self._prev: _Record | None = None

    def feed(self, line: str) -> MonitorSample | None:
        """The sample a record's last line completes (its ``t_s`` is the caller's to set)."""
        if line.startswith("@@hz "):
            parts = line.split()
            self.hz, self.page = int(parts[1]) or 100, int(parts[2]) or 4096
            return None
        if line.startswith("@@ "):
            self._rec = _Record(float(line.split()[1]))
            return None
        rec = self._rec
        if rec is None:
            return None
        if line == "@@end":
            self._rec = None
            prev, self._prev = self._prev, rec
            return self._sample(prev, rec) if prev is not None else None
        parts = line.split()
        if not parts:
            return None
        head = parts[0]
        if head.startswith("cpu"):
            rec.stat[head if head != "cpu" else "all"] = [int(x) for x in parts[1:1 + len(CPU_FIELDS)]]
        elif head.endswith(":") and len(parts) >= 2:
            rec.mem[head[:-1]] = int(parts[1])
        elif head == "if" and len(parts) == 10:
            rec.ifs[parts[1]] = dict(zip(NET_DEV, map(int, parts[2:])))
        elif head == "ct" and len(parts) == 2 and parts[1].isdigit():
            rec.ct = int(parts[1])
        elif head == "p" and len(parts) >= 5:
            rec.procs[parts[1]] = (int(parts[2]), int(parts[3]), " ".join(parts[4:]))
        return None

    def _sample(self, prev: _Record, cur: _Record) -> MonitorSample:
        dt = max(1e-6, cur.up - prev.up)
        ifs = {f"remote/{name}": with_rates(dict(c), prev.ifs.get(name), dt) for name, c in cur.ifs.items()}
        procs = None
        if cur.procs:
            procs = {}
            for pid, (ticks, rss, name) in cur.procs.items():
                before = prev.procs.get(pid)
                cpu = 100.0 * (ticks - before[0]) / self.hz / dt if before else 0.0
                procs[pid] = ProcSample(round(max(0.0, cpu), 1), rss * self.page, name)
        return MonitorSample(0.0, round(dt, 4), cpu_percent(prev.stat, cur.stat), meminfo_of(cur.mem), procs,
                             {"remote": cur.ct} if cur.ct is not None else None, ifs)


__all__ = ["RemoteMonitor", "RemoteMonitorError", "RecordParser", "SAMPLER"]
