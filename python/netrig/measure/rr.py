"""Request/response through the DUT with a real tool: sockperf ping-pong between two tester
endpoints (issue 14) — the idea of netperf's TCP_RR and UDP_RR.

Data flow::

    RrParams ── check the tool ── server: ``ip netns exec SERVER_NS sockperf server -i ADDR -p PORT [--tcp]``
        ── wait until it listens (TCP) or is bound (UDP) ── client: ``ip netns exec CLIENT_NS sockperf
           ping-pong -i ADDR -p PORT [--tcp] -m SIZE -t T --mps RATE|max --full-rtt``
        ── TCP: wait until the client is connected ── the client exits ── the server is stopped (SIGINT)
        ── wait4(): each process's own user/sys CPU-seconds (exact, not sampled)
        ── parse the client's summary ── RrResult

What is measured. One message is in flight: the client sends ``size_bytes``, the server sends the
same bytes back, and the client sends the next one when the reply is in (``mps`` None: at once,
sockperf's ``max``). A *transaction* is one such round trip. ``mps`` is a fixed schedule from the
start of the run, kept by spinning: requests that fell behind it (a delayed reply, a descheduled
client) go out back to back until it is met again, so after a stall in the warm-up the measured
window's rate can exceed ``mps``.

* **Latency is the round-trip time** (``rtt``), from the client's send to its receipt of the reply
  (sockperf ``--full-rtt``). sockperf's default "latency" is half of that, an estimate of the
  one-way delay; netrig never reports the half, so no number is ambiguous.
* **Percentiles are sockperf's own and exact**: it keeps every sample of the measured window,
  sorts them and reports nearest-rank percentiles (index ``round(p·n) − 1``) to the nanosecond —
  no histogram, so parsing the summary loses nothing that ``--full-log`` would add.
* **The measured window** is sockperf's "valid duration": the run without its first 400 ms
  (warm-up) and last 50 ms (cool-down), so ``-t 1`` measures about 0.55 s, ``-t 10`` about 9.55 s.
  ``tps`` = samples / measured window (round trips per second, one connection).
* **CPU** is each process's whole life (``wait4``): warm-up, the ~2 s sockperf idles around the
  run, and the server's wait included; ``cpu_s_per_million_transactions`` divides client + server
  CPU by every round trip of the run (warm-up included), so both sides of the ratio cover the same time.

Tools: sockperf only. iperf 2's ``--bounceback`` is TCP only and reports its own histogram
format; a second parser would add no protocol and no number sockperf lacks, so it is not supported.
sockperf 3.7 (Debian, Ubuntu) speaks IPv4 only; IPv6 needs sockperf 3.8 or later.

The endpoints are kernel stacks in namespaces (a test bed with ``tester_stack``, or any two
namespaces with routes through the DUT). Every process started is stopped and reaped on every exit
path, Ctrl-C included. A missing tool, an address not in the server's namespace, a busy port, a
refused connection and a DUT that drops the traffic are each one :class:`~netrig.errors.ToolError`
line naming the tool, the address and the port — never a hang: a TCP client must be connected
within ``CONNECT_TIMEOUT_S``, and every client is killed after ``duration + STARTUP_S + GRACE_S``.
"""
from __future__ import annotations

import ipaddress
import math
import re
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import IO, Any

from netrig.errors import ConfigError, ToolError
from netrig.measure.process import ProcessCpu, in_netns, listening, reap, running, stop

__all__ = ["PROTOCOLS", "RrParams", "RttSummary", "RrResult", "check_sockperf", "run_sockperf"]

PROTOCOLS = ("tcp", "udp")
#: sockperf's default port.
DEFAULT_PORT = 11111
#: sockperf's message size limits (its header needs 14 bytes; 65507 is UDP's largest payload).
MIN_SIZE_BYTES, MAX_SIZE_BYTES = 14, 65_507
MAX_MPS = 10_000_000
MAX_DURATION_S = 86_400
#: How long the server may take to listen / bind.
SERVER_START_S = 5.0
#: How long a TCP client may take to connect before the DUT counts as dropping TCP.
CONNECT_TIMEOUT_S = 3.0
#: What sockperf's client spends beyond ``-t`` (warm-up messages, its pauses around the run: ~2.2 s).
STARTUP_S = 3.0
#: Beyond duration + startup, how long before a silent client is killed.
GRACE_S = 10.0
#: sockperf leaves the run's last 50 ms out of the measured window (its warm-up, 400 ms, it prints).
COOLDOWN_S = 0.05
#: A measured window this much shorter than the run's (beyond a paced run's last gap) means the
#: round trips stopped: sockperf's window ends at the last round trip it saw. (A client descheduled
#: that long just before the end would look the same; a stop closer to the end goes unnamed, and
#: tps, over the window sockperf measured, is right either way.)
STALL_S = 0.25
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class RrParams:
    """One sockperf ping-pong run. ``mps`` None: as fast as the round trips allow (``--mps=max``)."""
    protocol: str = "tcp"
    size_bytes: int = 64
    duration_s: float = 10.0
    mps: int | None = None
    port: int = DEFAULT_PORT

    def __post_init__(self) -> None:
        def whole(name: str, v: Any, lo: int, hi: int) -> None:
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ConfigError(name, f"must be a whole number from {lo} to {hi} (got {v!r})")

        if self.protocol not in PROTOCOLS:
            raise ConfigError("protocol", f"must be one of {', '.join(PROTOCOLS)} (got {self.protocol!r})")
        whole("size_bytes", self.size_bytes, MIN_SIZE_BYTES, MAX_SIZE_BYTES)
        whole("port", self.port, 1, 65535)
        if self.mps is not None:
            whole("mps", self.mps, 1, MAX_MPS)
        d = self.duration_s
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not math.isfinite(d) or d != int(d) \
                or not 1 <= d <= MAX_DURATION_S:
            raise ConfigError("duration_s", f"must be a whole number of seconds from 1 to {MAX_DURATION_S} "
                                            f"(sockperf runs whole seconds; got {d!r})")


@dataclass(frozen=True)
class RttSummary:
    """Round-trip times (µs) over the measured window: sockperf's exact nearest-rank percentiles."""
    samples: int
    mean_us: float
    stddev_us: float
    min_us: float
    p50_us: float
    p90_us: float
    p99_us: float
    p99_9_us: float
    max_us: float
    #: Every percentile sockperf printed, by level: ``{"25": …, "50": …, …, "99.999": …}``.
    percentiles_us: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "mean": self.mean_us, "stddev": self.stddev_us, "min": self.min_us,
                "p50": self.p50_us, "p90": self.p90_us, "p99": self.p99_us, "p99_9": self.p99_9_us,
                "max": self.max_us, "percentiles": dict(self.percentiles_us)}


@dataclass(frozen=True)
class RrResult:
    params: RrParams
    server: str
    #: sockperf's measured window ("valid duration"), seconds.
    measured_s: float
    rtt: RttSummary
    #: Requests without a reply, replies seen twice, replies out of order (measured window).
    dropped: int
    duplicated: int
    out_of_order: int
    #: The whole run (warm-up and cool-down included): its length and its completed round trips.
    run_s: float
    transactions_total: int
    #: Messages the server answered over its life (its own count; warm-up messages included).
    server_messages: int | None
    processes: tuple[ProcessCpu, ...]
    tool_version: str
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def samples(self) -> int:
        return self.rtt.samples

    @property
    def tps(self) -> float:
        """Transactions (round trips) per second over the measured window, on the one connection."""
        return self.rtt.samples / self.measured_s if self.measured_s > 0 else 0.0

    def cpu_s_per_million_transactions(self) -> float | None:
        """CPU-seconds of client and server together per million round trips of the whole run."""
        if self.transactions_total <= 0:
            return None
        return sum(p.total_s for p in self.processes) / (self.transactions_total / 1e6)

    def to_dict(self) -> dict[str, Any]:
        p = self.params
        return {
            "tool": "sockperf", "tool_version": self.tool_version, "server": self.server, "port": p.port,
            "protocol": p.protocol, "size_bytes": p.size_bytes, "duration_s": p.duration_s, "mps": p.mps,
            "measured_s": self.measured_s, "samples": self.samples, "tps": self.tps, "rtt_us": self.rtt.to_dict(),
            "dropped": self.dropped, "duplicated": self.duplicated, "out_of_order": self.out_of_order,
            "run_s": self.run_s, "transactions_total": self.transactions_total,
            "server_messages": self.server_messages,
            "processes": [{**c.__dict__, "total_s": c.total_s} for c in self.processes],
            "cpu_s_per_million_transactions": self.cpu_s_per_million_transactions(),
        }


def check_sockperf(family: int = 4, where: str = "") -> tuple[str, str]:
    """sockperf's path and version; a ToolError when it is missing or cannot speak IPv``family``
    (``where``: the address and port it is for, named in the message)."""
    path = shutil.which("sockperf")
    if path is None:
        raise ToolError(f"sockperf is not installed{f' (needed for request/response to {where})' if where else ''}: "
                        "install it (apt install sockperf; `make setup` does)")
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"version\s+(\d+)\.(\d+)(\S*)", out)
    version = f"sockperf {m.group(1)}.{m.group(2)}{m.group(3)}" if m else (out.strip().split("\n", 1)[0] or "sockperf")
    if family == 6 and (not m or (int(m.group(1)), int(m.group(2))) < (3, 8)):
        raise ToolError(f"{version}{f' to {where}' if where else ''}: this sockperf speaks IPv4 only; IPv6 needs "
                        "sockperf 3.8 or later")
    return path, version


def _connected(netns: str | None, port: int) -> bool:
    """A TCP connection to ``port`` is established in ``netns`` (the client's, made for this run)."""
    r = subprocess.run(in_netns(netns, ["ss", "-Htn", "state", "established", f"dport = :{port}"]),
                       capture_output=True, text=True, timeout=10)
    return bool(r.stdout.strip())


def _text(f: IO[str]) -> str:
    f.seek(0)
    return _ANSI.sub("", f.read())


def _tool_error(text: str) -> str | None:
    """sockperf's ``ERROR:`` message as one line (it exits 0 and prints errors on stdout)."""
    i = text.find("ERROR:")
    if i < 0:
        return None
    msg = text[i + len("ERROR:"):].split("sockperf:", 1)[0]
    return " ".join(msg.replace("`", "'").split())


def _errno(msg: str) -> int | None:
    m = re.search(r"errno=(\d+)", msg)
    return int(m.group(1)) if m else None


def run_sockperf(client_netns: str | None, server_netns: str | None, server_addr: str,
                 params: RrParams | None = None) -> RrResult:
    """Run sockperf ping-pong (server in ``server_netns`` on ``server_addr``, client in
    ``client_netns``) and return the round trips it measured and the CPU both processes used."""
    params = params or RrParams()
    try:  # an address, never a name: no lookup leaves the test bed
        ip = ipaddress.ip_address(server_addr)
    except ValueError:
        raise ConfigError("server_addr", f"{server_addr!r} is not an IPv4 or IPv6 address") from None
    addr, proto, port = str(ip), params.protocol, params.port
    where = f"{addr} port {port} ({proto})"
    tool, version = check_sockperf(ip.version, where)
    if listening(server_netns, port, proto):
        raise ToolError(f"sockperf server on {where}: {proto.upper()} port {port} is already in use in namespace "
                        f"{server_netns or '(host)'}: choose another port")
    tcp = ["--tcp"] if proto == "tcp" else []
    server = client = None
    with ExitStack() as files:
        s_out = files.enter_context(tempfile.TemporaryFile("w+"))
        c_out = files.enter_context(tempfile.TemporaryFile("w+"))
        try:
            server = subprocess.Popen(in_netns(server_netns, [tool, "server", "-i", addr, "-p", str(port), *tcp]),
                                      stdout=s_out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            _await_server(server, s_out, server_netns, where, port, proto)
            argv = [tool, "ping-pong", "-i", addr, "-p", str(port), *tcp, "-m", str(params.size_bytes),
                    "-t", str(int(params.duration_s)), f"--mps={params.mps if params.mps else 'max'}", "--full-rtt"]
            client = subprocess.Popen(in_netns(client_netns, argv), stdout=c_out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL)
            if proto == "tcp":
                _await_connection(client, client_netns, where, port)
            budget = params.duration_s + STARTUP_S + GRACE_S
            c_status, c_cpu = reap(client, budget)
            if c_status is None:
                raise ToolError(f"sockperf to {where}: no result within {budget:g} s: the DUT may stall the round "
                                f"trips (check its firewall/NAT rules for {proto.upper()} port {port})")
            _, s_cpu = reap(server, 0.0, signal.SIGINT)  # the server runs until told; SIGINT ends it cleanly
        finally:
            stop(client)
            stop(server)
        c_text, s_text = _text(c_out), _text(s_out)
    procs = (ProcessCpu("sockperf client", client_netns, c_cpu.user_s, c_cpu.sys_s),
             ProcessCpu("sockperf server", server_netns, s_cpu.user_s, s_cpu.sys_s))
    return _parse(c_text, s_text, params, addr, where, procs, version)


def _await_server(server: subprocess.Popen, out: IO[str], netns: str | None, where: str, port: int,
                  proto: str) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while not listening(netns, port, proto):
        if not running(server) or time.monotonic() > deadline:
            msg = _tool_error(_text(out)) if not running(server) else None
            errno = _errno(msg or "")
            hint = (f"the address is not on an interface of namespace {netns or '(host)'}" if errno == 99 else
                    f"{proto.upper()} port {port} is already in use: choose another port" if errno == 98 else
                    msg or f"nothing {'listens' if proto == 'tcp' else 'is bound'} after {SERVER_START_S:g} s")
            raise ToolError(f"sockperf server on {where} did not start: {hint}")
        time.sleep(0.02)


def _await_connection(client: subprocess.Popen, netns: str | None, where: str, port: int) -> None:
    """A TCP client is connected within CONNECT_TIMEOUT_S, or has ended (refused: parsed later)."""
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while running(client) and not _connected(netns, port):
        if time.monotonic() > deadline:
            raise ToolError(f"sockperf to {where}: no connection within {CONNECT_TIMEOUT_S:g} s: the DUT drops "
                            f"TCP to port {port} (check its firewall/NAT rules)")
        time.sleep(0.02)


_FLOAT = r"([0-9]+(?:\.[0-9]+)?)"


def _parse(text: str, server_text: str, params: RrParams, addr: str, where: str, procs: tuple[ProcessCpu, ...],
           version: str) -> RrResult:
    msg = _tool_error(text)
    if msg is not None:
        if _errno(msg) == 111:
            raise ToolError(f"sockperf to {where}: connection refused: nothing listens there, or the DUT rejects "
                            f"TCP to port {params.port}")
        raise ToolError(f"sockperf to {where}: {msg}")
    if "No messages were received" in text:
        raise ToolError(f"sockperf to {where}: no reply to any request: the DUT drops or rejects "
                        f"{params.protocol.upper()} to port {params.port} (check its firewall/NAT rules), or nothing "
                        "answers there")

    def find(what: str, pattern: str) -> re.Match[str]:
        m = re.search(pattern, text)
        if m is None:
            last = " ".join(text.strip().splitlines()[-1:]).removeprefix("sockperf: ") or "no output"
            raise ToolError(f"sockperf to {where}: no {what} in its output (its last line: {last})")
        return m

    total = find("run summary", rf"\[Total Run\] RunTime={_FLOAT} sec; Warm up time=(\d+) msec;"
                                rf".*?ReceivedMessages=(\d+)")
    run_s, window_s = float(total.group(1)), float(total.group(1)) - int(total.group(2)) / 1000 - COOLDOWN_S
    pace_s = 2.0 / params.mps if params.mps else 0.0  # the last request of a paced run may leave this gap
    proto = params.protocol.upper()
    lost = (f"a request or reply was lost and sockperf does not send another (the DUT loses {proto} to port "
            f"{params.port}, or stopped passing it)")
    valid = re.search(rf"\[Valid Duration\] RunTime={_FLOAT} sec;.*?ReceivedMessages=(\d+)", text)
    if valid is None or int(valid.group(2)) == 0:
        if pace_s >= window_s:
            raise ToolError(f"sockperf to {where}: no round trip fell in the measured window ({window_s:.2f} s of "
                            f"the {run_s:g} s run) at {params.mps} per second: raise the rate or the duration")
        raise ToolError(f"sockperf to {where}: the round trips stopped after {total.group(3)} round trips, before the "
                        f"measured window began: {lost}")
    # sockperf's window runs from the first to the last round trip in it: a stall ends it early.
    measured_s = float(valid.group(1))
    if window_s - measured_s > STALL_S + pace_s:
        raise ToolError(f"sockperf to {where}: the round trips stopped {window_s - measured_s:.2f} s before the end "
                        f"of the measured window (after {valid.group(2)} of them): {lost}")
    avg = find("mean round-trip time", rf"avg-rtt={_FLOAT} \(std-dev={_FLOAT}")
    losses = find("loss counts", r"# dropped messages = (\d+); # duplicated messages = (\d+); "
                                 r"# out-of-order messages = (\d+)")
    samples = int(find("sample count", r"Total (\d+) observations").group(1))
    mx = float(find("maximum", rf"<MAX> observation = \s*{_FLOAT}").group(1))
    mn = float(find("minimum", rf"<MIN> observation = \s*{_FLOAT}").group(1))
    pct = {f"{float(lv):g}": float(v) for lv, v in re.findall(rf"percentile\s+{_FLOAT} = \s*{_FLOAT}", text)}
    # sockperf omits a level whose rank rounds to 0 (few samples, low levels): that rank is the minimum.
    rtt = RttSummary(samples=samples, mean_us=float(avg.group(1)), stddev_us=float(avg.group(2)), min_us=mn,
                     p50_us=pct.get("50", mn), p90_us=pct.get("90", mn), p99_us=pct.get("99", mn),
                     p99_9_us=pct.get("99.9", mn), max_us=mx, percentiles_us=pct)
    served = re.search(r"Total (\d+) messages received and handled", server_text)
    return RrResult(params=params, server=addr, measured_s=measured_s, rtt=rtt,
                    dropped=int(losses.group(1)), duplicated=int(losses.group(2)), out_of_order=int(losses.group(3)),
                    run_s=run_s, transactions_total=int(total.group(3)),
                    server_messages=int(served.group(1)) if served else None, processes=procs, tool_version=version,
                    raw={"sockperf_client": text, "sockperf_server": server_text})
