"""TCP through the DUT with a real tool: iperf3 between two tester endpoints (issue 14).

Data flow::

    TcpParams ── check the tool ── server: ``ip netns exec SERVER_NS iperf3 -s -1 -J``
        ── wait until it listens ── client: ``ip netns exec CLIENT_NS iperf3 -c ADDR -P N -t T -J``
        ── both exit ── wait4(): each process's own user/sys CPU-seconds (exact, not sampled)
        ── parse the client's JSON (goodput total and per stream, per-second intervals,
           retransmits, RTT and cwnd where the kernel reports them) ── TcpResult

The endpoints are kernel stacks in namespaces (a test bed with ``tester_stack``, or any two
namespaces with routes through the DUT). Every process started is stopped on every exit path
(a ``finally`` kills and reaps it); a missing tool, a refused connection or a DUT that drops TCP is
one :class:`~netrig.errors.ToolError` line naming the tool, the address and the port, never a hang:
the client gets ``duration + connect timeout + grace`` and is killed after that.
"""
from __future__ import annotations

import ipaddress
import json
import math
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from netrig.errors import ConfigError, ResultError, ToolError
from netrig.measure.process import ProcessCpu, in_netns, listening, reap, stop
from netrig.results.typed import from_dict

__all__ = ["DIRECTIONS", "TcpParams", "TcpStream", "TcpInterval", "ProcessCpu", "TcpResult", "run_iperf3"]

#: forward: client → server (the tester's TX side sends); reverse: server → client; bidir: both.
DIRECTIONS = ("forward", "reverse", "bidir")
#: iperf3's default control port.
DEFAULT_PORT = 5201
#: How long the client may try to connect before the run is a refused/blocked connection.
CONNECT_TIMEOUT_S = 3.0
#: Beyond duration + connect timeout, how long before a silent client is killed.
GRACE_S = 10.0


@dataclass(frozen=True)
class TcpParams:
    """One iperf3 run. ``window``/``mss``/``length`` are passed as iperf3's ``-w``/``-M``/``-l``."""
    streams: int = 5
    duration_s: float = 10.0
    direction: str = "forward"
    window_bytes: int | None = None
    mss: int | None = None
    length_bytes: int | None = None
    port: int = DEFAULT_PORT
    interval_s: float = 1.0

    def __post_init__(self) -> None:
        def whole(name: str, v: Any, lo: int, hi: int) -> None:
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ConfigError(name, f"must be a whole number from {lo} to {hi} (got {v!r})")

        whole("streams", self.streams, 1, 128)
        whole("port", self.port, 1, 65535)
        for name, v in (("duration_s", self.duration_s), ("interval_s", self.interval_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ConfigError(name, f"must be a finite number of seconds > 0 (got {v!r})")
        if self.duration_s > 86_400:
            raise ConfigError("duration_s", f"{self.duration_s} s is above the limit of 86400 s")
        if self.direction not in DIRECTIONS:
            raise ConfigError("direction", f"must be one of {', '.join(DIRECTIONS)} (got {self.direction!r})")
        limits: tuple[tuple[str, int | None, int], ...] = (
            ("window_bytes", self.window_bytes, 1 << 30), ("mss", self.mss, 65_535),
            ("length_bytes", self.length_bytes, 1 << 27))
        for opt, n, hi in limits:
            if n is not None:
                whole(opt, n, 1, hi)


@dataclass(frozen=True)
class TcpStream:
    """One TCP connection, as the sender saw it (receiver's bytes where the direction is reverse)."""
    id: int
    direction: str
    goodput_bps: float
    retransmits: int | None
    mean_rtt_us: float | None
    max_rtt_us: float | None
    max_cwnd_bytes: int | None


@dataclass(frozen=True)
class TcpInterval:
    start_s: float
    duration_s: float
    goodput_bps: float
    retransmits: int | None


@dataclass(frozen=True)
class TcpResult:
    params: TcpParams
    server: str
    goodput_bps: float
    #: Goodput per direction for ``bidir`` (``{"forward": …, "reverse": …}``), else one entry.
    goodput_by_direction: dict[str, float]
    streams: tuple[TcpStream, ...]
    intervals: tuple[TcpInterval, ...]
    retransmits: int | None
    processes: tuple[ProcessCpu, ...]
    tool_version: str
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    def cpu_s_per_gbit(self) -> float | None:
        """CPU-seconds of client and server together per Gbit of goodput (None without goodput)."""
        gbit = self.goodput_bps * self.params.duration_s / 1e9
        return sum(p.total_s for p in self.processes) / gbit if gbit > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": "iperf3", "tool_version": self.tool_version, "server": self.server,
            "streams_requested": self.params.streams, "duration_s": self.params.duration_s,
            "direction": self.params.direction, "goodput_bps": self.goodput_bps,
            "goodput_by_direction": self.goodput_by_direction, "retransmits": self.retransmits,
            "streams": [s.__dict__ for s in self.streams], "intervals": [i.__dict__ for i in self.intervals],
            "processes": [{**p.__dict__, "total_s": p.total_s} for p in self.processes],
            "cpu_s_per_gbit": self.cpu_s_per_gbit(),
        }


def _tool() -> str:
    path = shutil.which("iperf3")
    if path is None:
        raise ToolError("iperf3 is not installed: install it (apt install iperf3; `make setup` does)")
    return path


def _version(tool: str) -> str:
    out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=10).stdout
    return out.split("\n", 1)[0].strip()


@dataclass(frozen=True)
class _Figures:
    """The numbers of one iperf3 sum, interval or stream end (``-J``), as far as netrig reads them."""

    bits_per_second: float = 0.0
    start: float = 0.0
    seconds: float = 0.0
    retransmits: int | None = None
    #: A stream's end: whether this side sent (``False``: the data came the other way).
    sender: bool | None = None
    socket: int | None = None
    mean_rtt: float | None = None
    max_rtt: float | None = None
    max_snd_cwnd: int | None = None


_NONE = _Figures()


@dataclass(frozen=True)
class _StreamEnd:
    sender: _Figures = _NONE
    receiver: _Figures = _NONE


@dataclass(frozen=True)
class _End:
    sum_received: _Figures = _NONE
    sum_received_bidir_reverse: _Figures = _NONE
    sum_sent: _Figures = _NONE
    sum_sent_bidir_reverse: _Figures = _NONE
    streams: tuple[_StreamEnd, ...] = ()


@dataclass(frozen=True)
class _Interval:
    sum: _Figures = _NONE
    sum_bidir_reverse: _Figures = _NONE


@dataclass(frozen=True)
class Iperf3Doc:
    """iperf3's JSON document (``-J``): what netrig reads of it, parsed once."""

    end: _End = _End()
    intervals: tuple[_Interval, ...] = ()
    error: str | None = None

    @classmethod
    def parse(cls, text: str) -> tuple[Iperf3Doc, dict[str, Any]] | None:
        """The document and the JSON it came from; ``None`` for output that is not one."""
        try:
            raw = json.loads(text) if text.strip() else None
            return (from_dict(cls, raw), raw) if isinstance(raw, dict) else None
        except (json.JSONDecodeError, ResultError, TypeError, ValueError):
            return None


def _error_line(doc: Iperf3Doc | None, stderr: str, server: str, port: int, timed_out: bool) -> str:
    msg = (doc.error if doc else None) or stderr.strip().splitlines()[-1:] and stderr.strip().splitlines()[-1] or ""
    where = f"{server} port {port}"
    if timed_out:
        return (f"iperf3 to {where}: no result within the run's time: the DUT may drop or stall TCP "
                f"(check its firewall/NAT rules for port {port})")
    if "refused" in msg:
        return f"iperf3 to {where}: connection refused: nothing listens there, or the DUT rejects TCP port {port}"
    if "timed out" in msg or "unable to connect" in msg or "No route" in msg:
        return f"iperf3 to {where}: {msg.removeprefix('error - ')}: the DUT does not pass TCP to port {port}"
    return f"iperf3 to {where}: {msg.removeprefix('error - ') or 'failed without a message'}"


def run_iperf3(client_netns: str | None, server_netns: str | None, server_addr: str,
               params: TcpParams | None = None) -> TcpResult:
    """Run iperf3 (server in ``server_netns`` on ``server_addr``, client in ``client_netns``) and
    return what it measured and the CPU both processes used."""
    params = params or TcpParams()
    try:  # an address, never a name: no lookup leaves the test bed
        addr = str(ipaddress.ip_address(server_addr))
    except ValueError:
        raise ConfigError("server_addr", f"{server_addr!r} is not an IPv4 or IPv6 address") from None
    tool = _tool()
    version = _version(tool)
    if listening(server_netns, params.port):
        raise ToolError(f"iperf3: TCP port {params.port} is already in use in namespace {server_netns or '(host)'}: "
                        "choose another port")
    server = client = None
    out: list[str] = []
    err: list[str] = []
    try:
        server = subprocess.Popen(
            in_netns(server_netns, [tool, "-s", "-1", "-B", addr, "-p", str(params.port)]),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 5.0
        while not listening(server_netns, params.port):
            if server.poll() is not None or time.monotonic() > deadline:
                why = (server.stderr.read() if server.stderr else "").strip() if server.poll() is not None else ""
                raise ToolError(f"iperf3 server on {addr} port {params.port} did not start: "
                                + (why or "is the address on an interface of that namespace?"))
            time.sleep(0.02)
        argv = [tool, "-c", addr, "-p", str(params.port), "-P", str(params.streams), "-t", f"{params.duration_s:g}",
                "-i", f"{params.interval_s:g}", "-J", "--connect-timeout", str(int(CONNECT_TIMEOUT_S * 1000))]
        if params.direction == "reverse":
            argv.append("-R")
        elif params.direction == "bidir":
            argv.append("--bidir")
        for opt, v in (("-w", params.window_bytes), ("-M", params.mss), ("-l", params.length_bytes)):
            if v is not None:
                argv += [opt, str(v)]
        client = subprocess.Popen(in_netns(client_netns, argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, text=True)
        # Read the client's output while it runs (its JSON can outgrow a pipe's buffer); reap it
        # with wait4 for its CPU, killing it if it outlives the run.
        readers = [threading.Thread(target=lambda f=f, b=b: b.append(f.read()), daemon=True)
                   for f, b in ((client.stdout, out), (client.stderr, err))]
        for t in readers:
            t.start()
        c_status, c_cpu = reap(client, params.duration_s + CONNECT_TIMEOUT_S + GRACE_S)
        for t in readers:
            t.join(5.0)
        if c_status is None:
            raise ToolError(_error_line(None, "", addr, params.port, timed_out=True))
        parsed = Iperf3Doc.parse("".join(out))
        failed = c_status != 0 or parsed is None or parsed[0].error
        # a one-off server (-1) ends with its client's test; one never reached would wait on (iperf3
        # -J exits 0 with an error in its JSON): stop it at once
        s_cpu = None if failed else reap(server, 5.0)[1]
    finally:
        stop(client)
        stop(server)
    if failed or parsed is None:
        raise ToolError(_error_line(parsed[0] if parsed else None, "".join(err), addr, params.port, timed_out=False))
    procs = tuple(
        ProcessCpu(name, ns, cpu.user_s, cpu.sys_s)
        for name, ns, cpu in (("iperf3 client", client_netns, c_cpu), ("iperf3 server", server_netns, s_cpu))
        if cpu is not None)
    return _parse(*parsed, params, addr, procs, version)


def _parse(doc: Iperf3Doc, raw: dict[str, Any], params: TcpParams, server: str, procs: tuple[ProcessCpu, ...],
           version: str) -> TcpResult:
    end = doc.end
    bidir, reverse = params.direction == "bidir", params.direction == "reverse"
    # Goodput is what the receiver got: sum_received (client → server), for -R the same sum
    # (iperf3 reports from the data's point of view), bidir adds the reverse sums.
    by_dir: dict[str, float] = {"forward": end.sum_received.bits_per_second,
                                "reverse": end.sum_received_bidir_reverse.bits_per_second} if bidir else \
        {params.direction: end.sum_received.bits_per_second}
    streams = []
    for k, st in enumerate(end.streams):
        snd = st.sender
        d = "reverse" if (snd.sender is False and not reverse) or (reverse and snd.sender is not True) \
            else params.direction if not bidir else "forward"
        streams.append(TcpStream(
            id=snd.socket if snd.socket is not None else k, direction=d, goodput_bps=st.receiver.bits_per_second,
            retransmits=snd.retransmits, mean_rtt_us=snd.mean_rtt, max_rtt_us=snd.max_rtt,
            max_cwnd_bytes=snd.max_snd_cwnd))
    intervals = tuple(TcpInterval(iv.sum.start, iv.sum.seconds,
                                  iv.sum.bits_per_second + (iv.sum_bidir_reverse.bits_per_second if bidir else 0.0),
                                  iv.sum.retransmits) for iv in doc.intervals)
    retrans = end.sum_sent.retransmits
    if bidir and retrans is not None:
        retrans += end.sum_sent_bidir_reverse.retransmits or 0
    return TcpResult(params, server, sum(by_dir.values()), by_dir, tuple(streams), intervals, retrans,
                     procs, version, raw={"iperf3": raw})
