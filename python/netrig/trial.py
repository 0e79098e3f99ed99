"""The engine from Python: ports, streams, and one trial.

Data flow: :class:`Stream` (a frozen dataclass of user-friendly values, parsed with
:mod:`netrig.model`) → ``_native.StreamSpec`` (validated by the engine on construction) and
:class:`Port` (``_native.Port``, validated likewise) → ``_native.TrialSpec`` → ``_native.Trial``
(opens the ports, checks the streams against them, runs TX/RX workers in engine threads with the
GIL released) → a live ``_native.Snapshot`` every ~0.2 s for ``progress`` → the typed, read-only
``_native.TrialResult`` with the totals the engine derives.

Every error surfaces as a :class:`~netrig.errors.ConfigError` naming the field when the
:class:`Stream` or :class:`Port` is constructed; what needs an open port (the MTU) is checked when
the trial opens its ports. Ctrl-C during :func:`run_trial` stops traffic, waits for the engine to
wind down (nothing is left running), and raises :class:`~netrig.errors.InterruptedTrial` whose
``partial`` attribute holds the result counted so far.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from netrig import _native
from netrig.errors import INTERRUPTS, ConfigError, InterruptedTrial, interrupt_reason
from netrig.model import (
    FrameSize,
    Rate,
    defaults,
    parse_count,
    parse_duration,
    parse_rate,
)

Port = _native.Port
TrialResult = _native.TrialResult
StreamResult = _native.StreamResult
FlowResult = _native.FlowResult
PortResult = _native.PortResult
Latency = _native.LatencySummary
Snapshot = _native.Snapshot
Smoothness = _native.Smoothness
IntervalResult = _native.IntervalResult
ListenResult = _native.ListenResult
HeardFlow = _native.HeardFlow
ForeignKind = _native.ForeignKind
IO_MODES: tuple[str, ...] = _native.IO_MODES
#: TX pacing modes, default first (see :func:`run_trial`).
PACING_MODES: tuple[str, ...] = _native.PACING_MODES
DEFAULT_MAX_STRETCH_PCT: float = _native.DEFAULT_MAX_STRETCH_PCT

#: Stream fields that take a value (``None`` would silently mean the engine's default).
_REQUIRED = ("frame_size", "src_mac", "dst_mac", "src_ip", "dst_ip", "src_port", "dst_port", "ttl", "flows",
             "flow_order", "seed", "udp_checksum", "name", "tx_port", "rx_port", "protocol", "tcp_flags", "tcp_seq",
             "ethertype")

#: The keys a ``flows`` mapping may have (counts of each range).
FLOW_KEYS = ("src_ips", "dst_ips", "src_ports", "dst_ports", "src_macs", "dst_macs", "vlans")
#: Stream protocols, default first.
PROTOCOLS: tuple[str, ...] = ("udp", "tcp", "icmp", "raw")
#: The EtherType of raw L2 streams unless given (IEEE 802 local experimental 1).
DEFAULT_RAW_ETHERTYPE = 0x88B5


def parse_ethertype(value: int | str, field: str = "ethertype") -> int:
    """An EtherType from an int or a string (``"0x88b5"``, ``"34997"``); range checks are the engine's."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(field, f"{value!r}: give an EtherType such as 0x88b5")
    if isinstance(value, str):
        try:
            value = int(value, 0)
        except ValueError:
            raise ConfigError(field, f"{value!r} is not a number: give an EtherType such as 0x88b5") from None
    if not 0 <= value <= 0xFFFF:
        raise ConfigError(field, f"{value:#x} does not fit 16 bits: give an EtherType such as 0x88b5")
    return value


_RATE_SPECS: dict[str, Callable[[float], _native.RateSpec]] = {
    "pps": _native.RateSpec.pps,
    "l1_bps": _native.RateSpec.l1_bps,
    "l2_bps": _native.RateSpec.l2_bps,
    "percent_line": _native.RateSpec.percent_line,
}


def rate_spec(rate: Rate) -> _native.RateSpec:
    """The engine's form of a :class:`~netrig.model.units.Rate`."""
    if rate.value is None:
        return _native.RateSpec.max()
    if rate.kind == "percent_ndr":
        raise ConfigError("rate", f"{rate} is a share of the DUT's NDR, which only a method that measures it knows "
                                  "(netrig soak): give frames/s, bit/s, % of the line rate or max")
    return _RATE_SPECS[rate.kind](rate.value)


T = TypeVar("T")


class Converted(Generic[T]):
    """A dataclass field read as its type ``T`` and set from what the API accepts (a string, a
    number …): ``convert`` turns it into ``T`` once, when the object is made (the API's edge);
    a value that is ``T`` already (what the command line hands over) passes as it is."""

    def __init__(self, convert: Callable[[Any], T], default: Any) -> None:
        self.convert = convert
        self.default = convert(default)

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_converted_{name}"

    @overload
    def __get__(self, obj: None, owner: type) -> T: ...
    @overload
    def __get__(self, obj: object, owner: type) -> T: ...
    def __get__(self, obj: object | None, owner: type) -> T:
        return self.default if obj is None else obj.__dict__[self.slot]

    def __set__(self, obj: object, value: object) -> None:
        obj.__dict__[self.slot] = self.convert(value)


def _frame_size(value: object) -> FrameSize:
    return FrameSize.parse(value, "frame_size")


def _rate(value: object) -> Rate | None:
    return value if value is None or isinstance(value, Rate) else parse_rate(value, "rate")


@dataclass(frozen=True)
class Stream:
    """One stream of signed test frames, validated on construction (errors name the field).

    ``frame_size``: a :class:`netrig.model.FrameSize`, or what :meth:`FrameSize.parse` reads: bytes
    including FCS (64), a mix name (``"imix"``), ``"random:64-1518"``, ``"inc:64-1518:64"``, weighted
    pairs, ``("random", 64, 1518)`` / ``("increment", 64, 1518, 64)`` — read back as a
    ``FrameSize``. Rate: ``rate_pps`` (frames/s) or ``rate``: a :class:`netrig.model.Rate` or what
    ``parse_rate`` reads (``"100kpps"``, ``"1Gbps"``, ``"1Gbps-l2"``, ``"50%"`` — % needs
    ``line_rate_bps`` — or ``"max"``), read back as a ``Rate``. Both are converted once, here.
    ``protocol``: ``udp`` (default), ``tcp`` (``tcp_flags`` as letters of FSRPAUEC, default ``"A"``;
    ``tcp_seq``), ``icmp`` (echo request, ICMPv6 over IPv6: identifier = ``src_port``, sequence
    number = ``dst_port``) or ``raw`` (no IP: the signature right after the Ethernet header, under
    ``ethertype``, default 0x88b5). ``vlan``: 802.1Q tag; ``outer_vlan``: an 802.1ad tag in front
    of it (QinQ). Every protocol carries the signature, so every frame is counted per flow.
    ``flows``: number of flows (varies the source port; the source MAC for raw streams), or a
    mapping with ``src_ips``, ``dst_ips``, ``src_ports``, ``dst_ports``, ``src_macs``,
    ``dst_macs``, ``vlans`` (VLAN ids from ``vlan`` up); ``flow_order`` sequential or
    pseudorandom (RFC 4814, from ``seed``). ``tx_port``/``rx_port`` index the trial's ports.

    ``pcap``: replay this capture (pcap or pcapng, Ethernet) instead of building frames: its frames
    in order, looped, at the stream's rate (bit rates convert with the capture's mean size); the
    addressing, protocol, VLAN, frame size and flow fields are then not used (leave them unset).
    ``pcap_stamp``: write the signature into every frame with room for it (UDP/TCP payload, ICMP
    echo data, raw L2 payload; checksums updated, lengths unchanged), one flow per captured
    5-tuple, so the receiver counts loss, reordering, duplicates and latency; without it the
    receiver cannot tell the frames apart and the stream's loss is not measured.
    """

    frame_size: Converted[FrameSize] = Converted(_frame_size, 64)
    rate_pps: float | None = None
    rate: Converted[Rate | None] = Converted(_rate, None)
    src_mac: str = "02:00:00:00:00:01"
    dst_mac: str = "02:00:00:00:00:02"
    src_ip: str = "198.18.0.1"
    dst_ip: str = "198.19.0.1"
    src_port: int = 1024
    dst_port: int = 1024
    vlan: int | None = None
    ttl: int = 64
    flows: int | Mapping[str, int] = 1
    flow_order: str = "sequential"
    seed: int = 1
    udp_checksum: bool = False
    line_rate_bps: float | None = None
    name: str = ""
    tx_port: int = 0
    rx_port: int = 1
    protocol: str = "udp"
    tcp_flags: str = "A"
    tcp_seq: int = 0
    ethertype: int | str = DEFAULT_RAW_ETHERTYPE
    outer_vlan: int | None = None
    pcap: str | None = None
    pcap_stamp: bool = False

    def __post_init__(self) -> None:
        self.spec(0)  # every check, now: errors name the field

    def spec(self, index: int) -> _native.StreamSpec:
        """The engine's stream spec, named ``stream{index}`` unless the stream has a name."""
        return self._build(self.name or f"stream{index}")

    @property
    def mean_frame_size(self) -> float:
        """Mean frame size in bytes incl. FCS (what bit rates and the line rate use)."""
        if self.pcap is not None:
            return self.spec(0).mean_frame_size
        return self.frame_size.mean_size

    def to_dict(self) -> dict:
        """The stream as plain values (``netrig trial --json``'s config): the frame size by its label,
        the rate as written."""
        return {**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
                "frame_size": self.frame_size.label, "rate": None if self.rate is None else str(self.rate)}

    # ---------------------------------------------------------------- building the spec
    def _build(self, name: str) -> _native.StreamSpec:
        for f in _REQUIRED:
            if getattr(self, f) is None:
                raise ConfigError(f, "must be given (None is not a value here; leave the argument out for the default)")
        if (self.rate_pps is None) == (self.rate is None):
            raise ConfigError("rate", "give exactly one of rate_pps (frames/s) or rate "
                                      "(e.g. '100kpps', '1Gbps', '50%', 'max')")
        if self.pcap is not None:
            self._check_replay()
        try:
            return _native.StreamSpec(
                frame_size=self.frame_size.spec(),
                rate=self._rate(), name=name, tx_port=self.tx_port, rx_port=self.rx_port,
                src_mac=self.src_mac, dst_mac=self.dst_mac, src_ip=self.src_ip, dst_ip=self.dst_ip,
                src_port=self.src_port, dst_port=self.dst_port, vlan=self.vlan, ttl=self.ttl,
                udp_checksum=self.udp_checksum, flows=self._flows(), line_rate_bps=self.line_rate_bps,
                protocol=self.protocol, tcp_flags=self.tcp_flags, tcp_seq=self.tcp_seq,
                ethertype=parse_ethertype(self.ethertype), outer_vlan=self.outer_vlan,
                pcap=None if self.pcap is None else str(self.pcap), pcap_stamp=self.pcap_stamp)
        except ConfigError as e:
            raise ConfigError(self._field(e.field), e.message) from None

    def _check_replay(self) -> None:
        """A replay sends the capture's frames: the fields that build frames must keep their defaults."""
        if not isinstance(self.pcap, (str, os.PathLike)) or not str(self.pcap):
            raise ConfigError("pcap", f"{self.pcap!r}: give the path of a pcap or pcapng capture")
        for f in ("frame_size", "protocol", "flows", "flow_order"):
            if getattr(self, f) != getattr(_DEFAULT, f):
                raise ConfigError(f, f"{getattr(self, f)!r}: a replay sends the capture's frames as they are "
                                     f"(sizes, protocols, flows): leave {f} unset with pcap")

    def _rate(self) -> _native.RateSpec:
        if self.rate_pps is not None:
            return _native.RateSpec.pps(self.rate_pps)
        assert self.rate is not None  # _build checked that one of them is given
        return rate_spec(self.rate)

    def _flows(self) -> _native.FlowSpec:
        if isinstance(self.flows, Mapping):
            unknown = sorted(set(self.flows) - set(FLOW_KEYS))
            if unknown:
                raise ConfigError("flows", f"unknown key(s) {unknown}: allowed are {', '.join(FLOW_KEYS)}")
            counts = dict(self.flows)
        elif isinstance(self.flows, int) and not isinstance(self.flows, bool):
            counts = {"src_macs" if self.protocol == "raw" else "src_ports": self.flows}
        else:
            raise ConfigError("flows", f"{self.flows!r}: give a count or a mapping of {', '.join(FLOW_KEYS)}")
        return _native.FlowSpec(**{k: counts.get(k, 1) for k in FLOW_KEYS}, order=self.flow_order, seed=self.seed)

    def _field(self, field: str) -> str:
        """The Stream field an engine error is about."""
        if field == "rate" and self.rate_pps is not None:
            return "rate_pps"
        if field == "flows.order":
            return "flow_order"
        if field == "flows.seed":
            return "seed"
        if field.startswith("flows") and not isinstance(self.flows, Mapping):
            return "flows"
        return field


#: The defaults, to tell which fields a replay stream was given.
_DEFAULT = Stream.__new__(Stream)
for _f in dataclasses.fields(Stream):
    object.__setattr__(_DEFAULT, _f.name, _f.default)


def _seconds(value: float | str, field: str) -> float:
    """Seconds from a number (checked by the engine) or a duration like ``500ms``."""
    return parse_duration(value, field, allow_zero=True) if isinstance(value, str) else value


def _stop_spec(duration_s: float | str | None, frames: int | str | None,
               bursts: tuple[int | str, int | str, float] | None) -> _native.StopSpec:
    given = [x is not None for x in (duration_s, frames, bursts)]
    if sum(given) != 1:
        raise ConfigError("duration_s", "give exactly one of duration_s, frames or bursts")
    if duration_s is not None:
        return _native.StopSpec.duration(parse_duration(duration_s, "duration_s")
                                         if isinstance(duration_s, str) else duration_s)
    if frames is not None:
        return _native.StopSpec.frames(parse_count(frames, "frames") if isinstance(frames, str) else frames)
    try:
        n, count, gap = bursts  # type: ignore[misc]
    except (TypeError, ValueError):
        raise ConfigError("bursts", "give (frames per burst, number of bursts, gap between burst starts in s)") \
            from None
    return _native.StopSpec.bursts(parse_count(n, "bursts") if isinstance(n, str) else n,
                                   parse_count(count, "bursts") if isinstance(count, str) else count, gap)


def _phase_specs(phases: Sequence[tuple[float | str, float]] | None) -> list[_native.PhaseSpec]:
    out = []
    for i, p in enumerate(phases or ()):
        try:
            dur, scale = p
        except (TypeError, ValueError):
            raise ConfigError(f"phases[{i}]", f"{p!r}: give (duration_s, rate_scale)") from None
        try:
            out.append(_native.PhaseSpec(_seconds(dur, "duration_s"), scale))
        except ConfigError as e:
            raise ConfigError(f"phases[{i}].{e.field}", e.message) from None
    return out


def linear_ramp(from_scale: float, to_scale: float, steps: int, step_s: float | str) -> list[tuple[float, float]]:
    """A rate ramp in linear steps, as ``phases`` for :func:`run_trial`: ``steps`` phases of ``step_s``
    each, the load going from ``from_scale`` to ``to_scale`` × the streams' rates in equal steps (both
    included; up or down). With ``interval_s=step_s`` the result counts every step apart. Errors
    name ``ramp``."""
    if isinstance(steps, int) and not isinstance(steps, bool) and not 2 <= steps <= _native.MAX_RAMP_STEPS:
        # the engine refuses it too, but reads the step's length first: a bad count was blamed on that
        raise ConfigError("ramp", f"{steps} steps: a ramp has 2..{_native.MAX_RAMP_STEPS} steps (one phase per step)")
    phases = _native.linear_ramp(from_scale, to_scale, steps, _seconds(step_s, "ramp"))
    return [(p.duration_s, p.rate_scale) for p in phases]


def run_trial(
    tx: Port | None = None,
    rx: Port | None = None,
    streams: Sequence[Stream] = (),
    *,
    ports: Sequence[Port] | None = None,
    duration_s: float | str | None = None,
    frames: int | str | None = None,
    bursts: tuple[int | str, int | str, float] | None = None,
    drain_s: float | str = defaults.DRAIN_S,
    warmup_s: float | str = 0.0,
    learning: bool = True,
    late_s: float | str | None = None,
    tx_cpus: Sequence[int] | None = None,
    rx_cpus: Sequence[int] | None = None,
    progress: Callable[[Snapshot], None] | None = None,
    progress_interval_s: float = 0.2,
    pacing: str = PACING_MODES[0],
    max_stretch_pct: float = DEFAULT_MAX_STRETCH_PCT,
    phases: Sequence[tuple[float | str, float]] | None = None,
    interval_s: float | str | None = None,
    gap_slots: int = 1,
    max_flow_results: int | None = None,
    receive: bool = True,
    on_intervals: Callable[[list[IntervalResult]], None] | None = None,
    follow: Callable[[_native.Trial], None] | None = None,
    watch: _native.StallWatch | None = None,
    keep: KeptPorts | None = None,
) -> TrialResult:
    """Run one trial and return its :class:`TrialResult`.

    Two-port form: ``run_trial(tx, rx, [stream, ...], duration_s=10)`` — streams go from ``tx`` to
    ``rx``; with ``rx=None`` the trial only transmits (counts are the sender's). Multi-port form:
    ``run_trial(ports=[p0, p1, p2, p3], streams=[...])`` with each stream's ``tx_port``/``rx_port``
    indexing ``ports`` (``receive=False``: nothing receives, every stream's ``rx_port`` is ignored
    and counts are the senders'). Stop after ``duration_s``, ``frames`` or ``bursts`` = (frames per burst,
    bursts, gap between burst starts in s). ``progress`` is called with a live :class:`Snapshot`
    (``phase``, ``elapsed_s``, ``tx_frames``, ``rx_frames``) about every ``progress_interval_s``.

    Pacing: ``"smooth"`` (default) never offers more than 1.02 × the intended rate — time the sender loses
    to a stall is given back at most 2 % faster than the rate, every frame is sent, and what was
    not given back stretches the trial (by up to
    ``max_stretch_pct`` of its length; beyond it the trial is invalid, tester-limited);
    ``"catch-up"`` keeps the wall-clock duration and schedules a backlog at twice the rate (its batches
    leave back to back: a 1-ms window after a stall may carry more; 5x was measured). The
    result's ``smoothness`` and ``tx_stretch_ns`` say what happened. ``phases`` =
    ``[(duration_s, rate_scale), ...]`` runs one continuous trial through loads of ``rate_scale`` ×
    the streams' rates (``duration_s`` defaults to their sum); ``interval_s`` counts frames sent and
    received per interval of each phase (``result.intervals``). ``gap_slots`` is how many of its
    longest sequence gaps every flow keeps (``FlowResult.gaps``: an outage's frames and the transmit
    times around it; events under load keep one per event and one more); ``max_flow_results``: how
    many flows per stream have their own result (``None``: the engine's default). ``on_intervals`` is called
    while the trial runs (every ``progress_interval_s``) with the intervals whose counts became final
    since the last call (an interval's end more than the late threshold in the past: the same counts
    the result will have; the run's last interval is in the result only). ``follow`` is called with
    the engine's trial as soon as it runs, so a thread of the caller's can keep time with the run
    itself (``run_start_ns``): the progress callbacks come from this thread, which the tester's
    bookkeeping priority lets a busy tester CPU hold up for seconds. ``watch``: the platform's stall
    watch (``measure.platform``), told of each TX and RX worker as it starts, so a wait of the
    tester's own workers for their CPU is an episode, naming what ran instead. ``keep``: the
    caller's :class:`KeptPorts`, which keeps the ports open from this trial to the next.
    """
    ports, streams, receive = _trial_ports(tx, rx, ports, streams, receive)
    phase_specs = _phase_specs(phases)
    if phase_specs and duration_s is None and frames is None and bursts is None:
        duration_s = sum(p.duration_s for p in phase_specs)
    spec = _native.TrialSpec(
        list(ports), [s.spec(i) for i, s in enumerate(streams)], _stop_spec(duration_s, frames, bursts),
        drain_s=_seconds(drain_s, "drain_s"), warmup_s=_seconds(warmup_s, "warmup_s"), learning=learning,
        late_s=None if late_s is None else _seconds(late_s, "late_s"), tx_cpus=tuple(tx_cpus or ()),
        rx_cpus=tuple(rx_cpus or ()), receive=receive, pacing=pacing, max_stretch_pct=max_stretch_pct,
        phases=phase_specs, interval_s=None if interval_s is None else _seconds(interval_s, "interval_s"),
        gap_slots=gap_slots, max_flow_results=max_flow_results)
    trial = keep.trial(spec, watch) if keep is not None else _native.Trial(spec, watch)
    if follow is not None:
        follow(trial)
    return _watch(trial, progress, progress_interval_s, "trial", "traffic stopped", on_intervals)


class KeptPorts:
    """The ports of a caller's last trial, kept open for its next one: trials on the same ports
    skip opening and closing them (on veth with AF_XDP: two sockets and a UMEM per port, the XDP
    link). Here a 50-ms trial took 204 ms opening and closing its ports, 96 ms on kept ones; the
    close alone waits out ~60 ms of RCU grace periods. Between trials the XDP program stays
    attached and steers nothing: frames go to the kernel. Ports that no longer fit the next trial
    (other interfaces or options, larger frames than they carry) are closed before it opens its
    own. :meth:`close` closes them now; the end of the object does too."""

    def __init__(self) -> None:
        self._last: _native.Trial | None = None

    def trial(self, spec: _native.TrialSpec, watch: _native.StallWatch | None) -> _native.Trial:
        """Start ``spec`` on the kept ports where they fit, keeping its own for the next."""
        trial = _native.Trial(spec, watch, reuse=self._last, keep=True)
        self._last = trial
        return trial

    def close(self) -> None:
        last, self._last = self._last, None
        if last is not None:
            last.release()


def _one_port_each(ports: list[Port], streams: Sequence[Stream]) -> tuple[list[Port], Sequence[Stream]]:
    """The same Port object given twice (one-port loopback: tx is rx) is opened once, its streams
    sending and receiving on it: one socket per queue receives only what arrives on the wire (AF_XDP
    sees ingress only; AF_PACKET and sockets ignore outgoing frames), so nothing the tester sent is
    counted as received."""
    uniq: list[Port] = []
    remap: dict[int, int] = {}
    for i, p in enumerate(ports):
        j = next((k for k, q in enumerate(uniq) if q is p), None)
        if j is None:
            j = len(uniq)
            uniq.append(p)
        remap[i] = j
    if len(uniq) == len(ports):
        return ports, streams
    return uniq, [dataclasses.replace(s, tx_port=remap.get(s.tx_port, s.tx_port),
                                      rx_port=remap.get(s.rx_port, s.rx_port)) for s in streams]


def listen(
    ports: Sequence[Port],
    duration_s: float | str,
    *,
    rx_cpus: Sequence[int] | None = None,
    progress: Callable[[Snapshot], None] | None = None,
    progress_interval_s: float = 0.2,
) -> ListenResult:
    """Receive only: count whatever arrives on ``ports`` for ``duration_s`` and return a
    :class:`ListenResult` — signed frames per sender's trial and flow (unique, duplicated,
    reordered, and ``missing``: sequence numbers between the first and the last heard that never
    arrived), every other frame by EtherType and IP protocol. Nothing is sent. Ctrl-C or SIGTERM
    stops it; :class:`netrig.errors.InterruptedTrial` then carries the partial result."""
    if isinstance(ports, (str, bytes)) or not isinstance(ports, Sequence):
        raise ConfigError("ports", f"must be a list of netrig.Port (got {ports!r})")
    handle = _native.Listen(list(ports), _seconds(duration_s, "duration_s"), rx_cpus=tuple(rx_cpus or ()))
    return _watch(handle, progress, progress_interval_s, "listen", "receiving stopped")


def _trial_ports(tx: Port | None, rx: Port | None, ports: Sequence[Port] | None, streams: Sequence[Stream],
                 receive: bool) -> tuple[list[Port], list[Stream], bool]:
    """``run_trial``'s two forms as one: the ports (each interface once), the streams indexing
    them, and whether anything receives."""
    if isinstance(streams, (str, bytes)) or not isinstance(streams, Sequence):
        raise ConfigError("streams", f"must be a list of netrig.Stream (got {streams!r})")
    if ports is None:
        if tx is None:
            raise ConfigError("ports", "give tx and rx ports, or ports=[...]")
        if rx is None:
            # Transmit only: no RX workers (the receiver is someone else's, e.g. an XDP drop).
            ports, receive = [tx], False
            streams = [dataclasses.replace(s, tx_port=0, rx_port=0) if isinstance(s, Stream) else s
                       for s in streams]
        else:
            ports = [tx, rx]
    elif not receive:
        streams = [dataclasses.replace(s, rx_port=s.tx_port) if isinstance(s, Stream) else s for s in streams]
    for i, s in enumerate(streams):
        if not isinstance(s, Stream):
            raise ConfigError(f"streams[{i}]", f"{s!r} is not a netrig.Stream")
    ports_, streams_ = _one_port_each(list(ports), streams)
    return ports_, list(streams_), receive


def _watch(handle: Any, progress: Callable[[Snapshot], None] | None, every_s: float, what: str, stopped: str,
           on_intervals: Callable[[list[IntervalResult]], None] | None = None) -> Any:
    """Wait for an engine job (trial or listen), reporting progress and (trials) the intervals whose
    counts have settled; on Ctrl-C or SIGTERM stop it and raise :class:`InterruptedTrial` with its
    partial result; if a callback fails, stop it and raise that error."""
    settled = 0
    try:
        while not handle.wait(every_s):
            if progress is not None:
                progress(handle.snapshot())
            if on_intervals is not None:
                new = handle.settled_intervals(settled)
                if new:
                    settled += len(new)
                    on_intervals(new)
    except INTERRUPTS as e:  # Ctrl-C, or SIGTERM (netrig.errors.Terminated)
        handle.stop()
        while not handle.wait(0.5):
            pass
        reason = interrupt_reason(e)
        err = InterruptedTrial(f"{what} {reason}; {stopped}", reason)
        err.partial = handle.result()  # type: ignore[attr-defined]
        raise err from None
    except BaseException:  # a callback failed (a full disk…): no traffic goes on without its caller
        handle.stop()
        while not handle.wait(0.5):
            pass
        raise
    if progress is not None:
        progress(handle.snapshot())
    return handle.result()


__all__ = [
    "DEFAULT_MAX_STRETCH_PCT",
    "linear_ramp",
    "listen",
    "IO_MODES",
    "PACING_MODES",
    "FlowResult",
    "ForeignKind",
    "HeardFlow",
    "IntervalResult",
    "Latency",
    "ListenResult",
    "Port",
    "PortResult",
    "Smoothness",
    "Snapshot",
    "Stream",
    "StreamResult",
    "TrialResult",
    "rate_spec",
    "run_trial",
]
