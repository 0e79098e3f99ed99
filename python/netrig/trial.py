"""The engine from Python: ports, streams, and one trial.

Data flow: :class:`Stream` and :class:`Port` (frozen, validated on construction) → the native
``Trial`` (opens ports, validates against them, runs TX/RX workers in engine threads with the GIL
released) → live ``snapshot()`` every ~0.2 s for ``progress`` → a result dict → the frozen
:class:`TrialResult` with derived values as properties.

Ctrl-C during :func:`run_trial` stops traffic, waits for the engine to wind down (nothing is left
running), and raises :class:`~netrig.errors.InterruptedTrial` whose ``partial`` attribute holds the
result counted so far.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from netrig import _native
from netrig.errors import ConfigError, InterruptedTrial
from netrig.units import mean_frame_size, parse_count, parse_duration, parse_frame_size, parse_rate

IO_MODES = ("auto", "af_xdp", "af_packet", "socket")
_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}$")


@dataclass(frozen=True)
class Port:
    """A tester port: an interface (in a network namespace, optionally) and how to drive it."""

    ifname: str
    netns: str | None = None
    io: str = "auto"
    queues: int = 1
    ring_frames: int = 0
    #: AF_XDP busy polling: ``SO_BUSY_POLL`` microseconds with ``SO_PREFER_BUSY_POLL`` (0 = off).
    busy_poll_us: int = 0

    def __post_init__(self) -> None:
        if not self.ifname or not isinstance(self.ifname, str) or len(self.ifname) > 15:
            raise ConfigError("ifname", f"{self.ifname!r} is not an interface name (1-15 characters)")
        if self.io not in IO_MODES:
            raise ConfigError("io", f"{self.io!r}: allowed values are {', '.join(IO_MODES)}")
        if not isinstance(self.queues, int) or not 1 <= self.queues <= 64:
            raise ConfigError("queues", f"must be 1..64 (got {self.queues!r})")
        if isinstance(self.busy_poll_us, bool) or not isinstance(self.busy_poll_us, int) \
                or not 0 <= self.busy_poll_us <= 1_000_000:
            raise ConfigError("busy_poll_us", f"must be an integer 0..1000000 microseconds (got {self.busy_poll_us!r})")
        if self.busy_poll_us and self.io not in ("auto", "af_xdp"):
            raise ConfigError("busy_poll_us", f"busy polling is an af_xdp option (io is {self.io!r}): "
                                              "use the af_xdp backend or turn busy polling off")

    def info(self) -> dict:
        """Interface facts: ifindex, MTU, MAC, speed, driver, queues."""
        return _native.interface_info(self.ifname, self.netns)

    def _native(self) -> dict:
        return {"ifname": self.ifname, "netns": self.netns, "io": self.io, "queues": self.queues,
                "ring_frames": self.ring_frames, "busy_poll_us": self.busy_poll_us}


@dataclass(frozen=True)
class Stream:
    """One stream of signed test frames.

    ``frame_size``: bytes including FCS (64), a mix name (``"imix"``), weighted pairs, or
    ``("random", 64, 1518)`` / ``("increment", 64, 1518, 64)``. Rate: ``rate_pps`` or ``rate``
    (``"100kpps"``, ``"1Gbps"``, ``"50%"``; % needs ``line_rate_bps``) or ``"max"``.
    ``flows``: number of flows (varies the UDP source port), or a dict with ``src_ips``,
    ``dst_ips``, ``src_ports``, ``dst_ports``; ``flow_order`` sequential or pseudorandom (RFC 4814).
    """

    frame_size: Any = 64
    rate_pps: float | None = None
    rate: str | float | None = None
    src_mac: str = "02:00:00:00:00:01"
    dst_mac: str = "02:00:00:00:00:02"
    src_ip: str = "198.18.0.1"
    dst_ip: str = "198.19.0.1"
    src_port: int = 1024
    dst_port: int = 1024
    vlan: int | None = None
    ttl: int = 64
    flows: int | dict = 1
    flow_order: str = "sequential"
    seed: int = 1
    udp_checksum: bool = False
    line_rate_bps: float | None = None
    name: str = ""
    tx_port: int = 0
    rx_port: int = 1

    def __post_init__(self) -> None:
        parse_frame_size(self.frame_size, "frame_size")
        if (self.rate_pps is None) == (self.rate is None):
            raise ConfigError("rate", "give exactly one of rate_pps (frames/s) or rate (e.g. '100kpps', '1Gbps', '50%', 'max')")
        if self.rate_pps is not None and not (isinstance(self.rate_pps, (int, float)) and self.rate_pps > 0):
            raise ConfigError("rate_pps", f"must be a number > 0 (got {self.rate_pps!r})")
        if self.rate is not None and self.rate != "max":
            spec = parse_rate(self.rate, "rate")
            if "percent_line" in spec and not self.line_rate_bps:
                raise ConfigError("rate", "a rate in % needs line_rate_bps (the link speed; veth has none)")
        for f in ("src_mac", "dst_mac"):
            v = getattr(self, f)
            if not isinstance(v, str) or not _MAC_RE.match(v):
                raise ConfigError(f, f"{v!r} is not a MAC address (e.g. 02:00:00:00:00:01)")
        try:
            a = ipaddress.ip_address(self.src_ip)
        except ValueError:
            raise ConfigError("src_ip", f"{self.src_ip!r} is not an IPv4 or IPv6 address") from None
        try:
            b = ipaddress.ip_address(self.dst_ip)
        except ValueError:
            raise ConfigError("dst_ip", f"{self.dst_ip!r} is not an IPv4 or IPv6 address") from None
        if a.version != b.version:
            raise ConfigError("dst_ip", "source and destination must be of the same IP family")
        for f in ("src_port", "dst_port"):
            v = getattr(self, f)
            if not isinstance(v, int) or not 0 <= v <= 65535:
                raise ConfigError(f, f"must be 0..65535 (got {v!r})")
        if self.vlan is not None and not (isinstance(self.vlan, int) and 1 <= self.vlan <= 4094):
            raise ConfigError("vlan", f"must be 1..4094 (got {self.vlan!r})")
        if self.flow_order not in ("sequential", "pseudorandom"):
            raise ConfigError("flow_order", f"{self.flow_order!r}: allowed values are sequential, pseudorandom")
        self._flows_native()

    @property
    def mean_frame_size(self) -> float:
        return mean_frame_size(parse_frame_size(self.frame_size))

    def _flows_native(self) -> dict:
        keys = ("src_ips", "dst_ips", "src_ports", "dst_ports")
        if isinstance(self.flows, bool):
            raise ConfigError("flows", f"{self.flows!r} is not a flow count")
        if isinstance(self.flows, int):
            if self.flows < 1:
                raise ConfigError("flows", f"must be >= 1 (got {self.flows})")
            d = {"src_ips": 1, "dst_ips": 1, "src_ports": self.flows, "dst_ports": 1}
        elif isinstance(self.flows, dict):
            unknown = set(self.flows) - set(keys)
            if unknown:
                raise ConfigError("flows", f"unknown key(s) {sorted(unknown)}: allowed are {', '.join(keys)}")
            d = {k: int(self.flows.get(k, 1)) for k in keys}
            bad = [k for k, v in d.items() if v < 1]
            if bad:
                raise ConfigError(f"flows.{bad[0]}", "must be >= 1")
        else:
            raise ConfigError("flows", f"{self.flows!r}: give a count or a dict of {', '.join(keys)}")
        d["order"] = self.flow_order
        d["seed"] = self.seed
        return d

    def _native(self, stop: dict, index: int) -> dict:
        rate = {"max": True} if self.rate == "max" else (
            {"pps": float(self.rate_pps)} if self.rate_pps is not None else parse_rate(self.rate, "rate"))
        return {
            "name": self.name or f"stream{index}",
            "tx_port": self.tx_port, "rx_port": self.rx_port,
            "src_mac": self.src_mac, "dst_mac": self.dst_mac, "src_ip": self.src_ip, "dst_ip": self.dst_ip,
            "src_port": self.src_port, "dst_port": self.dst_port, "vlan": self.vlan, "ttl": self.ttl,
            "udp_checksum": self.udp_checksum,
            "line_rate_bps": int(self.line_rate_bps) if self.line_rate_bps else None,
            "frame_size": parse_frame_size(self.frame_size), "flows": self._flows_native(),
            "rate": rate, "stop": stop,
        }


@dataclass(frozen=True)
class Latency:
    """Latency distribution in nanoseconds (every received frame, software timestamps)."""

    samples: int = 0
    min_ns: int = 0
    mean_ns: float = 0.0
    p50_ns: int = 0
    p90_ns: int = 0
    p99_ns: int = 0
    p999_ns: int = 0
    max_ns: int = 0
    pdv_ns: int = 0
    ipdv_mean_ns: float = 0.0
    ipdv_max_ns: int = 0


@dataclass(frozen=True)
class FlowResult:
    flow_id: int
    frames_sent: int
    frames_received: int
    bytes_received: int
    frames_lost: int
    reordered: int
    duplicated: int
    late: int
    latency: Latency


@dataclass(frozen=True)
class StreamResult:
    index: int
    name: str
    tx_port: int
    rx_port: int
    frame_size_mean: float
    flows: int
    intended_rate_pps: float | None
    intended_frames: int
    frames_sent: int
    bytes_sent: int
    tx_rate_pps: float
    frames_received: int
    bytes_received: int
    frames_lost: int
    reordered: int
    duplicated: int
    late: int
    latency: Latency
    flow_results: tuple[FlowResult, ...]

    @property
    def loss_ratio(self) -> float:
        return self.frames_lost / self.frames_sent if self.frames_sent else 0.0


@dataclass(frozen=True)
class PortResult:
    """Tester-side counters of one port (drops here are the tester's, never the DUT's)."""

    name: str
    backend: str
    notes: str
    timestamp_source: str
    tx_frames: int
    tx_bytes: int
    tx_backpressure: int
    tx_errors: int
    rx_frames: int
    rx_bytes: int
    rx_foreign: int
    rx_unknown_flow: int
    rx_warmup: int
    rx_ring_drops: int
    rx_overruns: int


@dataclass(frozen=True)
class TrialResult:
    """One trial's counts (methodology §2). Totals are over all streams."""

    streams: tuple[StreamResult, ...]
    ports: tuple[PortResult, ...]
    duration_s: float
    tx_window_s: float
    drain_s: float
    valid: bool
    invalid_reason: str | None
    interrupted: bool
    latency: Latency
    tx_cpus: tuple[int, ...]
    rx_cpus: tuple[int, ...]
    started_realtime_ns: int
    #: Longest the tester fell behind its schedule, ns (the backlog is then sent at ≤ 2× the rate).
    tx_max_lag_ns: int = 0
    #: Largest catch-up burst (frames at once beyond one batch).
    tx_max_catchup: int = 0

    @property
    def frames_sent(self) -> int:
        return sum(s.frames_sent for s in self.streams)

    @property
    def frames_received(self) -> int:
        return sum(s.frames_received for s in self.streams)

    @property
    def frames_lost(self) -> int:
        return sum(s.frames_lost for s in self.streams)

    @property
    def loss_ratio(self) -> float:
        return self.frames_lost / self.frames_sent if self.frames_sent else 0.0

    @property
    def reordered(self) -> int:
        return sum(s.reordered for s in self.streams)

    @property
    def duplicated(self) -> int:
        return sum(s.duplicated for s in self.streams)

    @property
    def late(self) -> int:
        return sum(s.late for s in self.streams)

    @property
    def intended_rate_pps(self) -> float | None:
        r = [s.intended_rate_pps for s in self.streams]
        return None if any(x is None for x in r) else sum(r)  # type: ignore[misc]

    @property
    def tx_rate_pps(self) -> float:
        """Achieved transmit rate, frames/s, all streams."""
        return sum(s.tx_rate_pps for s in self.streams)

    @property
    def rx_rate_pps(self) -> float:
        return self.frames_received / self.duration_s if self.duration_s else 0.0

    @property
    def tester_rx_drops(self) -> int:
        """Frames the tester's own receive rings dropped (not DUT loss)."""
        return sum(p.rx_ring_drops for p in self.ports)

    @property
    def flows(self) -> tuple[FlowResult, ...]:
        return tuple(f for s in self.streams for f in s.flow_results)

    @property
    def io(self) -> tuple[str, ...]:
        return tuple(p.backend for p in self.ports)

    def to_dict(self, flows: bool = True) -> dict:
        d = asdict(self)
        if not flows:
            for s in d["streams"]:
                s.pop("flow_results", None)
        d.update(frames_sent=self.frames_sent, frames_received=self.frames_received, frames_lost=self.frames_lost,
                 loss_ratio=self.loss_ratio, reordered=self.reordered, duplicated=self.duplicated, late=self.late,
                 tx_rate_pps=self.tx_rate_pps, rx_rate_pps=self.rx_rate_pps,
                 intended_rate_pps=self.intended_rate_pps, tester_rx_drops=self.tester_rx_drops)
        return d

    @classmethod
    def from_native(cls, d: dict) -> "TrialResult":
        def lat(x: dict) -> Latency:
            return Latency(**x)

        streams = tuple(
            StreamResult(**{**s, "latency": lat(s["latency"]),
                            "flow_results": tuple(FlowResult(**{**f, "latency": lat(f["latency"])})
                                                  for f in s["flow_results"])})
            for s in d["streams"])
        return cls(streams=streams, ports=tuple(PortResult(**p) for p in d["ports"]),
                   duration_s=d["duration_s"], tx_window_s=d["tx_window_s"], drain_s=d["drain_s"], valid=d["valid"],
                   invalid_reason=d["invalid_reason"], interrupted=d["interrupted"], latency=lat(d["latency"]),
                   tx_cpus=tuple(d["tx_cpus"]), rx_cpus=tuple(d["rx_cpus"]),
                   started_realtime_ns=d["started_realtime_ns"], tx_max_lag_ns=d.get("tx_max_lag_ns", 0),
                   tx_max_catchup=d.get("tx_max_catchup", 0))


def _stop_spec(duration_s, frames, bursts) -> dict:
    given = [x is not None for x in (duration_s, frames, bursts)]
    if sum(given) != 1:
        raise ConfigError("duration_s", "give exactly one of duration_s, frames or bursts")
    if duration_s is not None:
        return {"duration_s": parse_duration(duration_s, "duration_s")}
    if frames is not None:
        return {"frames": parse_count(frames, "frames")}
    try:
        n, count, gap = bursts
    except (TypeError, ValueError):
        raise ConfigError("bursts", "give (frames per burst, number of bursts, gap between burst starts in s)") from None
    return {"bursts": {"frames": parse_count(n, "bursts[0]"), "count": parse_count(count, "bursts[1]"),
                       "gap_s": float(gap)}}


def run_trial(
    tx: Port | None = None,
    rx: Port | None = None,
    streams: Sequence[Stream] = (),
    *,
    ports: Sequence[Port] | None = None,
    duration_s: float | str | None = None,
    frames: int | str | None = None,
    bursts: tuple | None = None,
    drain_s: float = 2.0,
    warmup_s: float = 0.0,
    learning: bool = True,
    late_s: float | None = None,
    tx_cpus: Sequence[int] | None = None,
    rx_cpus: Sequence[int] | None = None,
    progress: Callable[[dict], None] | None = None,
    progress_interval_s: float = 0.2,
) -> TrialResult:
    """Run one trial and return its :class:`TrialResult`.

    Two-port form: ``run_trial(tx, rx, [stream, ...], duration_s=10)`` — streams go from ``tx`` to
    ``rx``; with ``rx=None`` the trial only transmits (counts are the sender's). Multi-port form: ``run_trial(ports=[p0, p1, p2, p3], streams=[...])`` with each stream's
    ``tx_port``/``rx_port`` indexing ``ports``. ``progress`` is called with live counters
    (``phase``, ``elapsed_s``, ``tx_frames``, ``rx_frames``) about every ``progress_interval_s``.
    """
    receive = True
    if ports is None:
        if tx is None:
            raise ConfigError("ports", "give tx and rx ports, or ports=[...]")
        if rx is None:
            # Transmit only: no RX workers (the receiver is someone else's, e.g. an XDP drop).
            ports, receive = [tx], False
            streams = [dataclasses.replace(s, tx_port=0, rx_port=0) for s in streams]
        else:
            ports = [tx, rx]
    if not streams:
        raise ConfigError("streams", "a trial needs at least one stream")
    for i, p in enumerate(ports):
        if not isinstance(p, Port):
            raise ConfigError(f"ports[{i}]", f"{p!r} is not a netrig.Port")
    stop = _stop_spec(duration_s, frames, bursts)
    if drain_s < 0:
        raise ConfigError("drain_s", f"must be >= 0 (got {drain_s})")
    native_streams = [s._native(stop, i) for i, s in enumerate(streams)]
    cfg: dict = {"drain_s": float(drain_s), "warmup_s": float(warmup_s), "learning": bool(learning),
                 "late_s": late_s, "tx_cpus": list(tx_cpus or []), "rx_cpus": list(rx_cpus or []),
                 "receive": receive}
    handle = _native.Trial([p._native() for p in ports], native_streams, cfg)
    try:
        while not handle.wait(progress_interval_s):
            if progress is not None:
                progress(dict(handle.snapshot()))
    except KeyboardInterrupt:
        handle.stop()
        while not handle.wait(0.5):
            pass
        err = InterruptedTrial("trial interrupted by the user (Ctrl-C); traffic stopped")
        err.partial = TrialResult.from_native(handle.result())  # type: ignore[attr-defined]
        raise err from None
    if progress is not None:
        progress(dict(handle.snapshot()))
    return TrialResult.from_native(handle.result())


__all__ = ["Port", "Stream", "run_trial", "TrialResult", "StreamResult", "FlowResult", "PortResult", "Latency",
           "IO_MODES"]
