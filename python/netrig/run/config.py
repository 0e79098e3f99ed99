"""Test configuration: a TOML / YAML / JSON file validated into frozen dataclasses.

Every error names the field path and, for enumerations, the allowed values, e.g.
``methods[1].rfc2544_throughput.resolution_pct: must be > 0 (got -1)``. Unknown keys are errors
with a "did you mean" suggestion. Config is data: nothing in it is executed while it is read (the
reset command, a shell command line, runs only as the ``rfc2544_reset`` method's event, in the DUT's
namespace).

Fields are parsed by their type and name: ``*_s`` fields take durations (``2s``, ``500ms``),
``*_bps`` fields speeds (``10G``), ``sizes`` frame sizes. The methods and their parameter classes
come from the method registry (``netrig.methods``); each method fills its own defaults from the
rest of the config (e.g. ``duration_s`` = ``trial.duration_s``). See ``docs/methodology.md``.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import tomllib
import types
import typing
import urllib.parse
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from netrig._native import IO_MODES, MAX_FLOWS, MAX_QUEUES, PACING_MODES
from netrig.errors import ConfigError
from netrig.measure import DutModel
from netrig.measure.events import DEFAULT_TIMEOUT_S, MAX_EVENTS, Event, check_events
from netrig.measure.otg import OtgPair
from netrig.methodology.method import Method
from netrig.methods import REGISTRY
from netrig.model import (
    MAX_FRAME_SIZE,
    MAX_RATE_PPS,
    RFC2544_FRAME_SIZES,
    FrameSize,
    defaults,
    parse_duration,
    parse_frame_sizes,
    parse_speed,
)
from netrig.monitor import RemoteMonitor
from netrig.testbed import TOPOLOGIES, Testbed
from netrig.testbed.knobs import Knobs, placement_conflict
from netrig.testbed.state import ID_RE as TESTBED_ID_RE
from netrig.testbed.state import shared_io
from netrig.trial import DEFAULT_RAW_ETHERTYPE, Stream

#: Most repetitions of a method.
MAX_REPETITIONS = 10_000
#: The addresses a stream is checked with before its ports give theirs, in IPv6: the test beds'.
V6_SRC, V6_DST = "2001:2::2", "2001:2:0:1::2"

#: The sections an OTG tester (``[otg]``) replaces: its pairs are its ports, streams and test bed.
OTG_REPLACES = ("testbed", "ports", "stream")


@dataclass(frozen=True)
class TestbedConfig:
    """``name``: a topology from ``netrig.testbed`` (e.g. ``router``, ``policer``) built for the run
    and torn down after it, or ``simulated``. ``id``: instead, run on the existing test bed with
    this id (``netrig testbed up``; it is left standing). ``options`` are checked against the
    topology now, before anything starts. ``knobs``: host tuning knobs set for the run and
    restored after it (``netrig.testbed.knobs``; the tester's self-test gets the tester's and the
    host's)."""

    __test__ = False
    name: str = "router"
    options: dict = field(default_factory=dict)
    simulator: DutModel | None = None
    id: str | None = None
    knobs: Knobs = field(default_factory=Knobs)
    #: Measure on a test bed other runs use, on purpose (a shared-DUT experiment): the test bed is
    #: held shared, never beside a run that holds it alone; the run is flagged, receives with a
    #: backend that sees every frame (``state.SHARED_IO``) and counts the others' frames as stray.
    shared: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError("name", f"must be a test bed name (got {self.name!r})")
        if not isinstance(self.shared, bool):
            raise ConfigError("shared", f"{self.shared!r}: must be true or false")
        if self.shared and self.id is None:
            raise ConfigError("shared", "needs id (a test bed built by `netrig testbed up`): a test bed built for the "
                                        "run is its own")
        if not isinstance(self.knobs, Knobs):
            object.__setattr__(self, "knobs", Knobs.from_dict(self.knobs))
        if self.name == "simulated" and self.knobs:
            raise ConfigError("knobs", "the simulated test bed has no interfaces to tune; leave knobs out")
        if self.id is not None:
            if not isinstance(self.id, str) or not TESTBED_ID_RE.match(self.id):
                raise ConfigError("id", f"{self.id!r}: not a test-bed id (4 hex digits, see `netrig testbed status`)")
            if self.options:
                raise ConfigError("options", f"test bed {self.id} is already built: its options cannot change "
                                             "(build another with `netrig testbed up`)")
            return
        if self.name == "simulated":
            if self.options:
                raise ConfigError("options", "the simulated test bed takes no options (its DUT model is "
                                             "testbed.simulator)")
            if self.simulator is None:
                object.__setattr__(self, "simulator", DutModel())
            return
        if self.name not in TOPOLOGIES:
            raise ConfigError("name", f"{self.name!r}: unknown test bed; choose one of "
                                      f"{', '.join(TOPOLOGIES)} or simulated (or give the id of a built one)")
        try:
            tb = Testbed.create(self.name, **self.options)
        except ConfigError as e:
            raise ConfigError(f"options.{e.field}", e.message) from None
        if self.knobs.dut and not TOPOLOGIES[self.name].has_dut:
            raise ConfigError("knobs.dut", f"topology {self.name} has no DUT interfaces; tune its tester ports "
                                           "with knobs.tester, or interfaces by name with knobs.interfaces.<name>")
        if tb.options.dut_cpus is not None:
            clash = placement_conflict(self.knobs, tb.options.dut_placement)
            if clash:
                raise ConfigError(*clash)


@dataclass(frozen=True)
class PortsConfig:
    tx: str = "tx"
    rx: str = "rx"
    io: str = "auto"  # one of the engine's IO_MODES
    family: Literal[4, 6] = 4
    queues: int = 1
    flows: int = 1
    busy_poll_us: int = 0  # af_xdp: SO_BUSY_POLL microseconds (0 = off)
    # Frames each port's rings hold per queue (0: the backend's default; af_xdp: UMEM frames, half to
    # receive, a power of two 128..65536): a larger receive ring holds longer stalls of the receiver.
    ring_frames: int = 0
    # Override the transmit guard (lo, a default route, addresses outside the benchmarking ranges).
    i_know_this_is_live: bool = False
    # CPUs of the tester's TX and RX workers (queue i on cpus[i mod len]). Empty: the engine's split
    # (receivers on the lower half, senders on the upper), or, when the test bed's DUT runs its own
    # pinned threads on this host (forwarder, oneport, capture), every CPU the DUT does not hold.
    tx_cpus: tuple[int, ...] = ()
    rx_cpus: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        ncpu = os.cpu_count() or 1
        for name in ("tx_cpus", "rx_cpus"):
            for c in getattr(self, name):
                if not 0 <= c < ncpu:
                    raise ConfigError(name, f"CPU {c}: this host has CPUs 0..{ncpu - 1}")
        if self.io not in IO_MODES:
            raise ConfigError("io", f"must be one of {', '.join(IO_MODES)} (got {self.io!r})")
        for name, hi in (("queues", MAX_QUEUES), ("flows", MAX_FLOWS)):
            if not 1 <= getattr(self, name) <= hi:
                raise ConfigError(name, f"must be a positive integer, at most {hi} (got {getattr(self, name)})")
        if not 0 <= self.busy_poll_us <= 1_000_000:
            raise ConfigError("busy_poll_us", f"must be 0..1000000 microseconds (got {self.busy_poll_us})")
        if self.ring_frames < 0:
            raise ConfigError("ring_frames", f"must be 0 (the backend's default) or more (got {self.ring_frames}); "
                                             "each backend says its range when the port opens")
        if self.busy_poll_us and self.io not in ("auto", "af_xdp"):
            raise ConfigError("busy_poll_us", f"busy polling is an af_xdp option (io is {self.io!r})")


@dataclass(frozen=True)
class StreamTemplateConfig:
    """What every test frame of the run carries beyond its addressing: the :class:`netrig.Stream`
    fields of the same names (protocol and its parameters, VLAN tags, flow ranges and order).
    ``flows``: ranges by name (``src_ips``, ``dst_ips``, ``src_ports``, ``dst_ports``, ``src_macs``,
    ``dst_macs``, ``vlans``); ``ports.flows`` stays the source-port (raw: source-MAC) count."""

    protocol: str = "udp"
    tcp_flags: str = "A"
    tcp_seq: int = 0
    ethertype: int = DEFAULT_RAW_ETHERTYPE
    vlan: int | None = None
    outer_vlan: int | None = None
    flows: dict | None = None
    flow_order: str = "sequential"
    seed: int = 1

    def __post_init__(self) -> None:
        # Every check is the engine's, through a Stream (errors name the field); sizes, and the
        # address ranges in the ports' family, are checked against frames.sizes by TestConfig (here
        # in IPv6, whose range has room for every range a stream can have).
        Stream(rate_pps=1, frame_size=MAX_FRAME_SIZE, **self.stream_fields(), flows=self.flows or 1, src_ip=V6_SRC,
               dst_ip=V6_DST)

    def stream_fields(self) -> dict:
        """The fields to give every :class:`netrig.Stream` (without ``flows``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "flows"}

    def flows_with(self, count: int) -> int | dict[str, int]:
        """The stream's ``flows``: ``ports.flows`` (``count``) and these ranges together."""
        if not self.flows:
            return count
        key = "src_macs" if self.protocol == "raw" else "src_ports"
        if count > 1 and key in self.flows:
            raise ConfigError(f"stream.flows.{key}", f"is set twice: ports.flows ({count}) also sets the {key} range")
        return {**self.flows, **({key: count} if count > 1 else {})}


@dataclass(frozen=True)
class LineRateConfig:
    """``speed_bps`` overrides the interface speed; ``nominal_bps`` is used when the interface has none."""

    speed_bps: float | None = None
    nominal_bps: float = defaults.NOMINAL_LINE_RATE_BPS

    def __post_init__(self) -> None:
        if self.speed_bps is not None and not self.speed_bps > 0:
            raise ConfigError("speed_bps", f"must be > 0 (got {self.speed_bps})")
        if not self.nominal_bps > 0:
            raise ConfigError("nominal_bps", f"must be > 0 (got {self.nominal_bps})")


@dataclass(frozen=True)
class FramesConfig:
    sizes: tuple[FrameSize, ...] = tuple(FrameSize(size=s) for s in RFC2544_FRAME_SIZES)


@dataclass(frozen=True)
class TrialConfig:
    __test__ = False
    duration_s: float = defaults.TRIAL_DURATION_S
    drain_s: float = defaults.DRAIN_S
    # Latency above which a frame is late (lost to RFC 2544, left out of the percentiles); None: the
    # drain time.
    late_s: float | None = None
    warmup_s: float = 0.0
    learning_frames: bool = True
    tx_tolerance_pct: float = defaults.TX_TOLERANCE_PCT  # achieved tx rate more than this below intended -> invalid
    monitor: bool = False
    # What the tester does with time it lost to a stall: "smooth" (given back at most 2 % above the
    # rate; what is not given back stretches the trial, by at most tx_tolerance_pct) or "catch-up"
    # (keeps the duration; the backlog is scheduled at 2x the rate, its batches back to back: a 1-ms
    # window may carry more).
    pacing: str = "smooth"
    # A load whose peak in any 1 ms window is more than this above the intended count is flagged.
    smoothness_tolerance_pct: float = defaults.SMOOTHNESS_TOLERANCE_PCT
    # Catch-up pacing: a trial that lost frames while the tester's pacing stalled longer than this is
    # repeated (the catch-up burst, not the DUT, may have caused the loss), up to stall_retries times.
    # Smooth pacing: a trial invalid because stalls stretched it beyond tx_tolerance_pct is repeated.
    stall_threshold_ms: float = 5.0
    stall_retries: int = 2
    # Process-name patterns (shell globs: "bird", "conntrackd*") whose CPU-seconds every trial
    # accounts, besides the packet kernel threads (ksoftirqd, napi) that are always accounted.
    cpu_procs: tuple[str, ...] = ()
    # Monitor a DUT on another host over SSH instead of this host (netrig.monitor.remote): an alias of
    # the user's SSH config or user@host; keys from the user's config and agent, never a password.
    monitor_remote: str | None = None
    # The OpenSSH client config to use for it (default: the user's ~/.ssh/config).
    monitor_ssh_config: str | None = None
    # Events under load (netrig.measure.events): shell commands run in the DUT's namespace (on the
    # host when the test bed has none) at ``at_s`` into every timed trial of the methods that take
    # events (Method.event_trials); each trial records per flow what every event cost.
    events: tuple[Event, ...] = ()
    # An event's command still running after this long is killed (recorded as timed out).
    event_timeout_s: float = DEFAULT_TIMEOUT_S

    def __post_init__(self) -> None:
        if not isinstance(self.events, tuple) or not all(isinstance(e, Event) for e in self.events):
            raise ConfigError("events", "must be a list of {command = \"...\", at_s = \"2s\"} tables")
        if len(self.events) > MAX_EVENTS:
            raise ConfigError("events", f"{len(self.events)} events: at most {MAX_EVENTS} in one trial")
        if not self.event_timeout_s > 0:
            raise ConfigError("event_timeout_s", f"must be > 0 (got {self.event_timeout_s})")
        if self.monitor_remote is not None:
            RemoteMonitor.check_host(self.monitor_remote, "monitor_remote")
        if self.monitor_ssh_config is not None and not (isinstance(self.monitor_ssh_config, str)
                                                        and Path(self.monitor_ssh_config).is_file()):
            raise ConfigError("monitor_ssh_config", f"{self.monitor_ssh_config!r}: no such file (an OpenSSH client "
                                                    "config)")
        procs = self.cpu_procs
        if isinstance(procs, str) or not isinstance(procs, (list, tuple)) \
                or not all(isinstance(p, str) and p.strip() for p in procs):
            raise ConfigError("cpu_procs", f"must be a list of process-name patterns, e.g. [\"bird\"] (got {procs!r})")
        object.__setattr__(self, "cpu_procs", tuple(procs))
        if not self.duration_s > 0:
            raise ConfigError("duration_s", f"must be > 0 (got {self.duration_s})")
        for name in ("drain_s", "warmup_s"):
            if getattr(self, name) < 0:
                raise ConfigError(name, f"must be >= 0 (got {getattr(self, name)})")
        if self.late_s is not None and not self.late_s > 0:
            raise ConfigError("late_s", f"must be > 0 (got {self.late_s}): every frame would be late; leave it out "
                                        "for the drain time")
        if not 0 <= self.tx_tolerance_pct < 100:
            raise ConfigError("tx_tolerance_pct", f"must be 0..100 (got {self.tx_tolerance_pct})")
        if self.pacing not in PACING_MODES:
            raise ConfigError("pacing", f"{self.pacing!r}: use one of {', '.join(map(repr, PACING_MODES))} "
                                        "(smooth: at most 2 % above the rate, a stall it cannot give back "
                                        "stretches the trial; catch-up: keeps the duration, a backlog is "
                                        "scheduled at 2x the rate)")
        if not 0 <= self.smoothness_tolerance_pct <= 1000:
            raise ConfigError("smoothness_tolerance_pct", f"must be 0..1000 (got {self.smoothness_tolerance_pct})")
        if not self.stall_threshold_ms > 0:
            raise ConfigError("stall_threshold_ms", f"must be > 0 (got {self.stall_threshold_ms})")
        if isinstance(self.stall_retries, bool) or not isinstance(self.stall_retries, int) \
                or not 0 <= self.stall_retries <= 10:
            raise ConfigError("stall_retries", f"must be an integer 0..10 (got {self.stall_retries!r})")


@dataclass(frozen=True)
class SelftestConfig:
    enabled: bool = True
    factor: float = defaults.SELFTEST_FACTOR
    duration_s: float | None = None  # default: trial.duration_s
    #: Where the tester proves itself: ``auto`` — looped back through a Linux bridge behind the
    #: same wire on the same CPUs when the DUT's test bed has the wire (the tester's work on both
    #: CPUs is then what it will be through the DUT), else the ``loopback`` test bed — or a topology.
    testbed: str = "auto"
    resolution_pct: float = 1.0
    rates_pps: tuple[float, ...] = ()  # explicit rates to prove (netrig selftest --rate)

    def __post_init__(self) -> None:
        if not 1.0 <= self.factor <= 10:
            raise ConfigError("factor", f"must be between 1 and 10 (got {self.factor})")
        if self.duration_s is not None and not self.duration_s > 0:
            raise ConfigError("duration_s", f"must be > 0 (got {self.duration_s})")
        if not 0 < self.resolution_pct <= 50:
            raise ConfigError("resolution_pct", f"must be in (0, 50] (got {self.resolution_pct})")
        for i, r in enumerate(self.rates_pps):
            if not 0 < r <= MAX_RATE_PPS:
                raise ConfigError(f"rates_pps[{i}]", f"must be > 0 and at most {MAX_RATE_PPS:g} (got {r})")


@dataclass(frozen=True)
class ThresholdsConfig:
    """Pass/fail checks (all off by default)."""

    min_throughput_pct: float | None = None  # of line rate, for throughput / MLRsearch headline
    max_latency_ns: float | None = None  # worst case (p99.9) latency
    max_loss_ratio: float | None = None  # iperf

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name.endswith("_ratio") and v is not None and not 0 <= v <= 1:
                raise ConfigError(f.name, f"must be a ratio from 0 to 1 (0.01 is 1 %), got {v:g}: give the ratio, "
                                          "not a percentage")


@dataclass(frozen=True)
class OtgConfig:
    """``[otg]``: the tester is an OTG server — a `netrig serve` controller of agents on several
    hosts, or one `netrig serve` — reached at ``url`` (docs/distributed.md, "netrig run across
    hosts"). ``token_file``: its bearer token (the server's ``--token-file``); ``ca``: the CA (or
    certificate) that signed an https server's certificate (default: the system's CAs); ``cert`` and
    ``key``: a client certificate for a server started with ``--client-ca``. ``pairs``: the streams,
    each from port location ``tx`` to ``rx`` (``AGENT/IF`` at a controller) with the addressing that
    crosses the DUT; a trial's load is their aggregate, split evenly."""

    url: str
    pairs: tuple[OtgPair, ...]
    token_file: str | None = None
    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        u = urllib.parse.urlsplit(self.url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ConfigError("url", f"{self.url!r}: give the OTG server's URL, e.g. https://198.18.0.1:8443")
        if not self.pairs:
            raise ConfigError("pairs", "give at least one pair: [[otg.pairs]] tx = \"a/eth1\", rx = \"b/eth1\"")
        for name in ("token_file", "ca", "cert", "key"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ConfigError(name, f"{path!r}: no such file")
        if bool(self.cert) != bool(self.key):
            raise ConfigError("cert", "give cert and key together (a client certificate and its key)")
        if u.scheme == "http" and (self.ca or self.cert):
            raise ConfigError("ca" if self.ca else "cert", f"{self.url} is plain HTTP: TLS files need an https URL")


@dataclass(frozen=True)
class OutputConfig:
    dir: str = "netrig-results"


@dataclass(frozen=True)
class MethodConfig:
    """One entry of ``methods``: a registered method's name and its validated parameters."""

    name: str
    params: Any

    @property
    def method(self) -> Method:
        return REGISTRY.get(self.name)

    @property
    def label(self) -> str:
        return self.method.label

    @property
    def repetitions(self) -> int | None:
        return getattr(self.params, "repetitions", None)

    def params_dict(self) -> dict:
        """The parameters as the result document records them (``config.methods[i].<name>``)."""
        return _plain(self.params)


@dataclass(frozen=True)
class TestConfig:
    __test__ = False
    #: What reports call this configuration (a study's variant name); default: the test bed's name.
    name: str = ""
    testbed: TestbedConfig = TestbedConfig()
    ports: PortsConfig = PortsConfig()
    stream: StreamTemplateConfig = StreamTemplateConfig()
    line_rate: LineRateConfig = LineRateConfig()
    frames: FramesConfig = FramesConfig()
    trial: TrialConfig = TrialConfig()
    selftest: SelftestConfig = SelftestConfig()
    repetitions: int = 1
    methods: tuple[MethodConfig, ...] = ()
    thresholds: ThresholdsConfig = ThresholdsConfig()
    output: OutputConfig = OutputConfig()
    #: The tester is an OTG server (its pairs replace ``testbed``, ``ports`` and ``stream``).
    otg: OtgConfig | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ConfigError("name", f"must be a string (got {self.name!r})")
        if isinstance(self.repetitions, bool) or not isinstance(self.repetitions, int) \
                or not 1 <= self.repetitions <= MAX_REPETITIONS:
            raise ConfigError("repetitions", f"must be an integer 1..{MAX_REPETITIONS} (got {self.repetitions!r})")
        if self.testbed.shared:
            object.__setattr__(self, "ports", replace(self.ports, io=shared_io(self.ports.io, "ports.io")))
        flows = self.stream.flows_with(self.ports.flows)
        # the test bed's addresses in the ports' family (the trial takes the ports' own)
        src, dst = (V6_SRC, V6_DST) if self.ports.family == 6 else (Stream.src_ip, Stream.dst_ip)
        if self.stream != StreamTemplateConfig():
            for size in self.frames.sizes:
                try:
                    Stream(rate_pps=1, frame_size=size, **self.stream.stream_fields(), flows=flows, src_ip=src,
                           dst_ip=dst)
                except ConfigError as e:
                    field_ = "frames.sizes" if e.field == "frame_size" else f"stream.{e.field}"
                    raise ConfigError(field_, e.message) from None

    def to_dict(self) -> dict:
        d = _plain(self)
        if self.stream == StreamTemplateConfig():
            del d["stream"]  # UDP with no tags or ranges: results as before the stream table existed
        for k in ("tx_cpus", "rx_cpus"):
            if not d["ports"][k]:
                del d["ports"][k]  # the default placement: results as before the keys existed
        if self.otg is None:
            del d["otg"]  # results as before the key existed
        else:
            for k in OTG_REPLACES:
                d.pop(k, None)  # an OTG tester has none: what was run is what the file said
        return d

    def repetitions_for(self, m: MethodConfig) -> int:
        return m.repetitions or self.repetitions


# --------------------------------------------------------------------------------------------- #
# Parsing

def _suggest(key: str, allowed) -> str:
    close = difflib.get_close_matches(key, list(allowed), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown key; {hint}allowed: {', '.join(allowed)}"


def _convert(tp, value, path: str, name: str):
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value, path, name)
    if origin is Literal:
        if value in args and type(value) is type(args[args.index(value)]):
            return value
        if isinstance(value, str) and value.isdigit() and int(value) in args:
            return int(value)
        raise ConfigError(path, f"must be one of {', '.join(str(a) for a in args)} (got {value!r})")
    if name == "sizes":
        return parse_frame_sizes(value, path)
    if origin is tuple:
        item = args[0]
        if not isinstance(value, (list, tuple)):
            value = [value]
        return tuple(_convert(item, v, f"{path}[{i}]", name) for i, v in enumerate(value))
    if tp is Knobs:
        return Knobs.from_dict(value, path)
    if dataclasses.is_dataclass(tp):
        return build(tp, value, path)
    if tp is float:
        if name.endswith("_s"):
            return parse_duration(value, path, allow_zero=True)
        if name.endswith("_bps"):
            return parse_speed(value, path)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(path, f"must be a number (got {value!r})")
        try:
            v = float(value)
        except OverflowError:
            v = math.inf
        if not math.isfinite(v):
            raise ConfigError(path, f"must be a finite number (got {value!r})")
        if name.endswith("_pps") and v > MAX_RATE_PPS:
            raise ConfigError(path, f"{value!r} is above the limit of {MAX_RATE_PPS:g} frames/s")
        return v
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(path, f"must be an integer (got {value!r})")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(path, f"must be true or false (got {value!r})")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(path, f"must be a string (got {value!r})")
        return value
    if tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(path, f"must be a table/mapping (got {value!r})")
        return dict(value)
    return value


def build(cls, data, path: str = ""):
    """Build dataclass ``cls`` from a mapping; errors name ``path.field``."""
    if isinstance(data, cls):
        return data
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(path or "config", f"must be a table/mapping (got {data!r})")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    kwargs = {}
    for key, value in data.items():
        fpath = f"{path}.{key}" if path else str(key)
        if key not in names:
            raise ConfigError(fpath, _suggest(str(key), names))
        kwargs[key] = _convert(hints[key], value, fpath, key)
    for f in dataclasses.fields(cls):
        if f.init and f.name not in kwargs and f.default is dataclasses.MISSING \
                and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{path}.{f.name}" if path else f.name, "is required")
    try:
        return cls(**kwargs)
    except ConfigError as e:
        full = f"{path}.{e.field}" if path and not e.field.startswith(path) else e.field
        raise ConfigError(full, e.message) from None


def _build_method(item: Any, i: int, trial: TrialConfig) -> MethodConfig:
    path = f"methods[{i}]"
    if isinstance(item, str):
        item = {item: {}}
    if not isinstance(item, dict) or len(item) != 1:
        raise ConfigError(path, "must be a table with exactly one method name as key; "
                                f"allowed: {', '.join(REGISTRY.names)}")
    (name, params), = item.items()
    method = REGISTRY.get(str(name), f"{path}.{name}")
    if params is not None and not isinstance(params, dict):
        raise ConfigError(f"{path}.{name}", f"must be a table of the method's parameters (got {params!r})")
    params = method.config_defaults(dict(params or {}), trial.duration_s)
    return MethodConfig(method.name, build(method.params_type, params, f"{path}.{name}"))


def config_from_dict(data: dict) -> TestConfig:
    """Validate a plain mapping (a parsed file) into a :class:`TestConfig`."""
    if not isinstance(data, dict):
        raise ConfigError("config", "must be a table/mapping at the top level")
    data = dict(data)
    names = [f.name for f in dataclasses.fields(TestConfig)]
    for key in data:
        if key not in names:
            raise ConfigError(str(key), _suggest(str(key), names))
    trial = build(TrialConfig, data.get("trial"), "trial")
    methods_raw = data.pop("methods", None)
    if methods_raw is None:
        raise ConfigError("methods", f"is required: a list of methods; allowed: {', '.join(REGISTRY.names)}")
    if not isinstance(methods_raw, list):
        raise ConfigError("methods", "must be a list ([[methods]] tables in TOML)")
    sel = data.get("selftest") or {}
    if not methods_raw and not (isinstance(sel, dict) and sel.get("enabled", True)):
        raise ConfigError("methods", f"needs at least one method; allowed: {', '.join(REGISTRY.names)}")
    methods = tuple(_build_method(m, i, trial) for i, m in enumerate(methods_raw))
    providers = " or ".join(m.name for m in REGISTRY if m.provides_throughput)
    for i, m in enumerate(methods):
        src = getattr(m.params, "throughput_from", None)
        if src is not None and (src >= i or not methods[src].method.provides_throughput):
            raise ConfigError(f"methods[{i}].{m.name}.throughput_from",
                              f"must be the index of an earlier {providers} method (got {src})")
    data["methods"] = methods
    _check_events(trial, methods)
    config = build(TestConfig, data)
    if config.otg is not None:
        _check_otg(data, config)
    for i, m in enumerate(methods):
        beds = m.method.testbeds
        if beds is not None and not config.testbed.id and config.testbed.name not in beds and config.otg is None:
            raise ConfigError("testbed.name", f"{config.testbed.name!r}: method {m.name} (methods[{i}]) runs on "
                                              f"the {', '.join(beds)} test bed only")
    return config


def _check_otg(data: dict, config: TestConfig) -> None:
    """An OTG tester (``[otg]``): the sections it replaces are left out, what it cannot do refused."""
    for key in OTG_REPLACES:
        if key in data:
            raise ConfigError(key, f"an OTG tester ([otg]) has no {key} of this host: its pairs (otg.pairs) are its "
                                   f"ports and streams; leave [{key}] out")
    if config.selftest.enabled:
        raise ConfigError("selftest.enabled", "an OTG tester cannot prove itself on this host's loopback: set "
                                              "[selftest] enabled = false (its results then have no proven ceiling)")
    for i, pair in enumerate(config.otg.pairs if config.otg else ()):
        for size in config.frames.sizes:
            try:
                pair.check(size)
            except ConfigError as e:
                raise ConfigError("frames.sizes" if e.field == "frame_size" else f"otg.pairs[{i}].{e.field}",
                                  f"{e.message} (otg.pairs[{i}])") from None
    t = config.trial
    for name, given in (("events", bool(t.events)), ("monitor", t.monitor), ("monitor_remote", t.monitor_remote)):
        if given:
            raise ConfigError(f"trial.{name}", "not with an OTG tester ([otg]): leave it out")
    for i, m in enumerate(config.methods):
        if m.method.stack_kind is not None or m.method.testbeds is not None:
            beds = ", ".join(m.method.testbeds or ("tester stack",))
            raise ConfigError(f"methods[{i}].{m.name}", f"runs on a test bed of this host ({beds}), not through an "
                                                        "OTG tester ([otg]): leave it out, or run it without [otg]")


def _check_events(trial: TrialConfig, methods: tuple[MethodConfig, ...]) -> None:
    """``trial.events`` fall inside every trial of the methods that take them, and some method does."""
    if not trial.events:
        return
    takers = [(i, m) for i, m in enumerate(methods) if m.method.event_trials is not None]
    if not takers:
        able = ", ".join(m.name for m in REGISTRY if m.event_trials is not None)
        raise ConfigError("trial.events", f"none of the configured methods runs events (bursts, stack, stateful "
                                          f"and reset trials take none); methods that do: {able}")
    for i, m in takers:
        window = m.method.event_window_s(m.params)
        try:
            check_events(trial.events, window, "trial.events")
        except ConfigError as e:
            raise ConfigError("trial.events", f"{e.message} (the trials of {m.name}, methods[{i}], are "
                                              f"{window:g} s long)") from None


def load_config(path: str | Path) -> TestConfig:
    """Read and validate a TOML (.toml), YAML (.yaml/.yml) or JSON (.json) file."""
    return config_from_dict(read_document(path))


def read_document(path: str | Path) -> dict:
    """The mapping a TOML (.toml), YAML (.yaml/.yml) or JSON (.json) file holds; every problem is
    one ``ConfigError`` naming the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(str(p), "not a text file (a config is TOML, YAML or JSON text)") from None
    except OSError as e:
        raise ConfigError(str(p), f"cannot read the config file: {e.strerror}") from None
    if "\0" in text:
        raise ConfigError(str(p), "not a text file (it holds NUL bytes; a config is TOML, YAML or JSON text)")
    suffix = p.suffix.lower()
    try:
        if suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            _refuse_twice(_yaml_twice(yaml.compose(text, Loader=yaml.SafeLoader), "", set()), p)
            data = yaml.safe_load(text)
        elif suffix == ".json":
            data = json.loads(text, object_pairs_hook=_JsonObject.of)
            _refuse_twice(_JsonObject.twice_in(data, ""), p)
        else:
            raise ConfigError(str(p), "unknown file type; use .toml, .yaml, .yml or .json")
    except ConfigError:
        raise
    except Exception as e:  # parser errors carry line numbers
        raise ConfigError(str(p), f"cannot parse: {_one_line(str(e))}") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(str(p), f"must hold a table/mapping at the top level (got {type(data).__name__})")
    return data or {}


def _refuse_twice(twice: str | None, p: Path) -> None:
    """A key given twice in one table of a config file: refused (YAML and JSON parsers keep the last
    one silently; TOML's refuses it)."""
    if twice is not None:
        raise ConfigError(str(p), f"{twice}: keep one of them (the last would silently replace the first)")


def _key_path(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _yaml_twice(node: yaml.Node | None, path: str, seen: set[int]) -> str | None:
    """The first key given twice in one mapping of a composed YAML document (``trial.duration_s is
    given twice (lines 3 and 7)``), or ``None``."""
    if node is None or id(node) in seen:  # an alias repeats a node already walked
        return None
    seen.add(id(node))
    items: list[tuple[str, yaml.Node]] = []
    if isinstance(node, yaml.MappingNode):
        first: dict[tuple[str, str], int] = {}
        for k, v in node.value:
            name = _key_path(path, k.value if isinstance(k, yaml.ScalarNode) else "?")
            if isinstance(k, yaml.ScalarNode):
                line = k.start_mark.line + 1
                if (k.tag, k.value) in first:
                    was = first[k.tag, k.value]
                    return f"{name} is given twice ({f'lines {was} and {line}' if was != line else f'line {line}'})"
                first[k.tag, k.value] = line
            items.append((name, v))
    elif isinstance(node, yaml.SequenceNode):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(node.value)]
    return next((t for t in (_yaml_twice(v, name, seen) for name, v in items) if t), None)


class _JsonObject(dict):
    """A JSON object read by ``json.loads``; ``twice``: a key it holds twice (the last value kept)."""

    twice: str | None = None

    @classmethod
    def of(cls, pairs: list[tuple[str, Any]]) -> dict:
        """``object_pairs_hook``: a plain dict, or one of this class when a key is given twice."""
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        keys = [k for k, _ in pairs]
        out = cls(obj)
        out.twice = next(k for i, k in enumerate(keys) if k in keys[:i])
        return out

    @classmethod
    def twice_in(cls, data: Any, path: str) -> str | None:
        """The path of the first key given twice in ``data`` (parsed with :meth:`of`), or ``None``."""
        if isinstance(data, cls) and data.twice is not None:
            return f"{_key_path(path, data.twice)} is given twice"
        items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
        for k, v in items:
            sub = f"{path}[{k}]" if isinstance(data, list) else _key_path(path, k)
            found = cls.twice_in(v, sub)
            if found:
                return found
        return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _plain(obj):
    if isinstance(obj, Knobs):
        return obj.to_dict()
    if isinstance(obj, FrameSize):
        return obj.label
    if isinstance(obj, MethodConfig):
        return {obj.name: obj.params_dict()}
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if not f.name.startswith("_")}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj
