"""The engine, from Python: typed specs in, typed results out (``crates/netrig-py``).

Every class here is a frozen PyO3 class. Specs validate their values once, on construction, in
the engine (``netrig-engine``), and raise ``netrig.errors.ConfigError`` naming the field; what can
only be checked against an open port (the MTU, queue counts) is checked when a :class:`Trial`
opens its ports. Results are read-only views of the engine's result structs with the derived
values the engine computes. This stub is checked against the built module by ``make lint``
(``mypy.stubtest``).
"""
from collections.abc import Sequence
from typing import final

__all__ = [
    "__version__", "BUILD_PROFILE", "WIRE_OVERHEAD_BYTES", "FCS_BYTES", "TRIAL_WORKERS", "MIN_FRAME_SIZE",
    "MAX_FRAME_SIZE",
    "RFC2544_FRAME_SIZES", "FRAME_SIZE_MIXES", "DEFAULT_DRAIN_S", "MAX_DURATION_S", "MAX_DRAIN_S", "MAX_RATE_PPS",
    "MAX_RATE_BPS", "MAX_FRAMES", "MAX_QUEUES", "MAX_FLOWS", "IO_MODES", "PACING_MODES", "SMOOTH_RECOVERY",
    "DEFAULT_MAX_STRETCH_PCT",
    "MAX_RAMP_STEPS", "FORWARD_MODES", "MAX_FORWARD_PORTS", "MAX_FORWARD_BATCH", "Forwarder", "ForwardQueueStats",
    "CAPTURE_METHODS", "MAX_CAPTURE_BATCH", "DEFAULT_CAPTURE_BATCH", "Capture", "CaptureStats", "CaptureTag",
    "ForwardPortInfo", "FrameSizeSpec", "RateSpec", "FlowSpec", "StopSpec", "PhaseSpec", "StreamSpec", "Port",
    "TrialSpec", "Snapshot", "Trial", "Listen", "LatencySummary", "SeqGap", "FlowResult", "StreamResult",
    "ReplayResult",
    "PortResult",
    "Smoothness", "IntervalResult", "TrialResult",
    "PinFailure", "HeardFlow", "ForeignKind", "ListenPort", "ListenResult",
    "InterfaceInfo", "IoProbe", "interface_info", "list_interfaces", "is_veth_peer", "probe_io", "probe_xdp_program",
    "sender_cpus", "line_rate_fps",
    "linear_ramp", "WIRE_DEFAULT_RING", "WIRE_MIN_RING", "WIRE_MAX_RING", "WireCounts",
    "wire_attach", "wire_counts", "wire_detach", "wire_cpumap_id", "WIRE_SLOT_NS", "StallWatch", "StallEpisode",
    "WireSlot", "LatencyWindow", "LATENCY_WINDOW_NS", "STACK_HEADERS", "SIGNATURE_BYTES", "FieldPattern", "PatternForm",
    "HeaderForm", "HeaderSpec",
    "PayloadSpec", "GenDurationSpec", "GenFlowSpec", "CaptureSpec", "Generator", "GenFlowStats", "GenPortStats",
    "GenTxPacing",
]

__version__: str
BUILD_PROFILE: str

# -- the vocabulary the engine defines ----------------------------------------------------------
#: Preamble + SFD + inter-frame gap, bytes per frame on the wire.
WIRE_OVERHEAD_BYTES: int
#: Ethernet FCS: counted in every frame size, not written by software.
FCS_BYTES: int
#: The thread names of a trial's TX and RX workers, before their index (``netrig-tx0``).
TRIAL_WORKERS: tuple[str, str]
MIN_FRAME_SIZE: int
MAX_FRAME_SIZE: int
#: RFC 2544 §9 standard frame sizes.
RFC2544_FRAME_SIZES: tuple[int, ...]
#: Named mixes: name -> ((frame size, weight), ...).
FRAME_SIZE_MIXES: dict[str, tuple[tuple[int, int], ...]]
DEFAULT_DRAIN_S: float
#: Limits: longest trial duration, warm-up or burst gap (s); longest drain / late threshold (s);
#: highest rate of a stream (frames/s, bit/s; also the highest link speed); most frames per stream.
MAX_DURATION_S: float
MAX_DRAIN_S: float
MAX_RATE_PPS: float
MAX_RATE_BPS: float
MAX_FRAMES: int
#: Most queues of a port; most flows of a trial.
MAX_QUEUES: int
MAX_FLOWS: int
#: Port I/O backends: "auto" and every backend the engine has.
IO_MODES: tuple[str, ...]
#: TX pacing modes, default first: "smooth" (at most 1 + SMOOTH_RECOVERY times the rate; a stall
#: stretches the trial),
#: "catch-up" (keeps the duration; a backlog is scheduled at 2x the rate, and its batches leave back to
#: back: a 1-ms window after a stall carried 5x the rate, measured).
PACING_MODES: tuple[str, ...]
#: Smooth pacing gives time a stall took back at this share of the time that passes (0.02): its
#: frames leave at most 1 + SMOOTH_RECOVERY times the rate.
SMOOTH_RECOVERY: float
#: How much longer than planned a paced trial may run (% of its length) before it is tester-limited.
DEFAULT_MAX_STRETCH_PCT: float
MAX_RAMP_STEPS: int
#: Forwarding modes of ``Forwarder`` (``netrig forward``).
FORWARD_MODES: tuple[str, ...]
MAX_FORWARD_PORTS: int
MAX_FORWARD_BATCH: int
#: Capture methods of ``Capture`` (``netrig capture``, ``netrig capture-bench``).
#: Header kinds of the generator's stacks: name → (length in bytes, ((field, bit offset, bits), ...));
#: a custom header's length is its bytes', GRE's is 8 with ``checksum_present`` 1.
STACK_HEADERS: dict[str, tuple[int, tuple[tuple[str, int, int], ...]]]
#: Bytes of the netrig signature (at the end of every generator frame).
SIGNATURE_BYTES: int
CAPTURE_METHODS: tuple[str, ...]
MAX_CAPTURE_BATCH: int
DEFAULT_CAPTURE_BATCH: int
#: The test bed's wire into a DUT: its receive ring per DUT CPU, frames (default, bounds).
WIRE_DEFAULT_RING: int
WIRE_MIN_RING: int
WIRE_MAX_RING: int

def line_rate_fps(bps: float, mean_frame_size: float) -> float:
    """Frames/s at line rate: bps / ((mean_frame_size + WIRE_OVERHEAD_BYTES) * 8)."""

def linear_ramp(from_scale: float, to_scale: float, steps: int, step_s: float) -> list[PhaseSpec]:
    """A rate ramp in linear steps: `steps` phases of `step_s` each, from `from_scale` to `to_scale` of
    the streams' rates (both included). Errors name `ramp`."""

def wire_attach(ifname: str, netns: str | None, cpus: list[int], ring: int) -> int:
    """Attach the test bed's wire to DUT interface `ifname` (in `netns`): arriving frames go to a
    receive ring of `ring` frames on one of `cpus`, where the DUT's stack takes them
    (`netrig_engine::sys::wire`). Returns the attached program's id."""

def wire_counts(ifname: str, netns: str | None = None) -> WireCounts | None:
    """The wire's counters on DUT interface `ifname`, or None when it carries no wire."""

def wire_detach(ifname: str, netns: str | None = None) -> None:
    """Remove the wire from `ifname` (nothing happens when it carries none)."""

def wire_cpumap_id(ifname: str, netns: str | None = None) -> int | None:
    """The id of the ring map (CPUMAP) of the wire on `ifname`, or None when it carries no wire:
    what `StallWatch.watch_wire` counts in time."""

#: The length of a latency-timeline window (`TrialResult.latency_timeline`), ns: 2^23, 8.4 ms.
LATENCY_WINDOW_NS: int

@final
class LatencyWindow:
    """One window of a trial's latency over time (`netrig_engine::timeline`)."""

    @property
    def start_ns(self) -> int:
        """Start since the trial epoch, ns."""
    @property
    def frames(self) -> int:
        """Frames sent in the window that were received and counted (not late)."""
    @property
    def p50_ns(self) -> int:
        """Median and 99th percentile, within 12 % (quarter-octave buckets); 0 without frames."""
    @property
    def p99_ns(self) -> int: ...
    @property
    def max_ns(self) -> int:
        """Exact."""
    def to_dict(self) -> dict[str, int]: ...

#: The length of a wire slot (`StallWatch.wire_slots`), ns: 2^19, 0.52 ms.
WIRE_SLOT_NS: int

@final
class StallEpisode:
    """One stall episode the kernel saw (`netrig_engine::stalls`)."""

    @property
    def kind(self) -> str:
        """"cpu": the CPU did not run (its timer tick came late: the host stopped the vCPU, unseen by
        the guest's scheduler); "late": a busy CPU took a timer's interrupt late (the same, bounded
        exactly); "task": a watched task was ready to run and did not (the guest ran another task
        on its CPU)."""
    @property
    def start_ns(self) -> int:
        """"cpu": the last tick before the gap; "late": when the timer was due; "task": when the task
        began waiting (CLOCK_MONOTONIC ns)."""
    @property
    def len_ns(self) -> int:
        """"cpu": the gap between two ticks; "late": how late the timer was taken; "task": how long
        the task waited, ns."""
    @property
    def cpu(self) -> int: ...
    @property
    def pid(self) -> int:
        """"task": the watched task's id; 0 for "cpu"."""
    @property
    def by(self) -> str:
        """"task": the task that held the CPU before the watched one ran again; "" for "cpu"."""
    @property
    def by_pid(self) -> int:
        """"task": that task's thread id (0 for "cpu")."""
    @property
    def by_self(self) -> bool:
        """"task": that task was a thread of this process (netrig's own) when the episode was read."""
    def to_dict(self) -> dict[str, int | str | bool]: ...

@final
class WireSlot:
    """The watched wires' counts in one time slot (`WIRE_SLOT_NS`, 0.52 ms)."""

    @property
    def start_ns(self) -> int:
        """The slot's start, CLOCK_MONOTONIC ns."""
    @property
    def arrived(self) -> int:
        """Frames that arrived at a DUT receive ring."""
    @property
    def dropped(self) -> int:
        """Frames a full ring dropped."""
    @property
    def taken(self) -> int:
        """Frames the DUT's CPUs took off their rings."""
    def to_dict(self) -> dict[str, int]: ...

@final
class StallWatch:
    """Watch `cpus` for stalls: a tick every `period_s` on each, an episode for a gap longer than the
    period by more than `threshold_s`, and for a watched task that waited longer than `threshold_s`;
    the thread that reads the kernel's rings runs on `drain_cpus` (default: where the caller may).
    Raises CapabilityError where the kernel refuses a BPF program or perf event (not root, no BPF).
    Detached on `close()` or when collected."""

    def __new__(cls, cpus: Sequence[int], period_s: float | None = None, threshold_s: float | None = None,
                drain_cpus: Sequence[int] | None = None) -> StallWatch: ...
    def watch(self, tid: int) -> None:
        """Watch task `tid` (a thread id): each wait to run longer than the threshold is an episode."""
    def unwatch(self, tid: int) -> None:
        """Stop watching task `tid`."""
    def episodes(self, from_ns: int, to_ns: int) -> tuple[list[StallEpisode], int]:
        """The episodes overlapping `[from_ns, to_ns]` (CLOCK_MONOTONIC), by start, and how many
        episodes were lost so far (the kernel's ring overwrote them before they were read)."""
    def missed(self) -> int:
        """Events the kernel skipped the watch's programs for since it started (a wake-up, switch or
        tick on a CPU already in a BPF program or a BPF system call): a window's episodes may then
        be incomplete."""
    def watch_wire(self, map_id: int) -> None:
        """Count the wire whose ring map (CPUMAP) has id `map_id` in time slots (`wire_cpumap_id`)."""
    def wire_slots(self, from_ns: int, to_ns: int) -> tuple[list[WireSlot], bool] | None:
        """The watched wires' slots overlapping `[from_ns, to_ns]` and whether all were still held (the
        last 4.6 minutes are), or None when no wire is watched."""
    @property
    def tasks_watched(self) -> bool:
        """Task waits are recorded too (the scheduler's tracepoints were readable), not only the CPUs' ticks."""
    @property
    def timers_late(self) -> bool:
        """Timers a busy CPU took late are recorded too ("late" episodes: the kernel's BTF gave their layout)."""
    @property
    def cpus(self) -> list[int]: ...
    @property
    def period_ns(self) -> int: ...
    @property
    def threshold_ns(self) -> int: ...
    def close(self) -> None:
        """Detach the programs and stop draining (idempotent)."""
    def __enter__(self) -> StallWatch: ...
    def __exit__(self, _a: object, _b: object, _c: object) -> None: ...

@final
class WireCounts:
    """The wire into a DUT interface on a test bed: its counters since it was attached."""

    @property
    def arrived(self) -> int:
        """Frames that arrived at the DUT's interface."""
    @property
    def taken(self) -> int:
        """Frames the DUT's CPU took off its receive ring."""
    @property
    def unsteered(self) -> int:
        """Frames the wire could not steer to a DUT CPU (processed where they arrived)."""
    @property
    def dropped(self) -> int:
        """Frames the DUT's receive ring dropped (exact once the ring has drained)."""
    def to_dict(self) -> dict[str, int]: ...

# -- specs --------------------------------------------------------------------------------------
@final
class FrameSizeSpec:
    """Frame sizes in bytes incl. FCS: fixed, weighted mix, uniform random, or incrementing."""

    @staticmethod
    def fixed(size: int) -> FrameSizeSpec: ...
    @staticmethod
    def weighted(mix: Sequence[tuple[int, int]]) -> FrameSizeSpec: ...
    @staticmethod
    def random(min: int, max: int) -> FrameSizeSpec: ...
    @staticmethod
    def increment(min: int, max: int, step: int) -> FrameSizeSpec: ...
    @property
    def kind(self) -> str:
        """``"fixed"``, ``"weighted"``, ``"random"`` or ``"increment"``."""
    @property
    def mean_size(self) -> float: ...
    @property
    def min_size(self) -> int: ...
    @property
    def max_size(self) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...

@final
class RateSpec:
    """An intended rate: frames/s, L1 or L2 bit/s, % of the line rate, or as fast as possible."""

    @staticmethod
    def pps(value: float) -> RateSpec: ...
    @staticmethod
    def l1_bps(value: float) -> RateSpec: ...
    @staticmethod
    def l2_bps(value: float) -> RateSpec: ...
    @staticmethod
    def percent_line(value: float) -> RateSpec: ...
    @staticmethod
    def max() -> RateSpec: ...
    @property
    def kind(self) -> str:
        """``"pps"``, ``"l1_bps"``, ``"l2_bps"``, ``"percent_line"`` or ``"max"``."""
    @property
    def value(self) -> float | None: ...
    def __eq__(self, other: object, /) -> bool: ...

@final
class FlowSpec:
    """A stream's flows: every combination of the address and port ranges."""

    def __new__(
        cls,
        src_ips: int = 1,
        dst_ips: int = 1,
        src_ports: int = 1,
        dst_ports: int = 1,
        order: str = "sequential",
        seed: int = 1,
        src_macs: int = 1,
        dst_macs: int = 1,
        vlans: int = 1,
    ) -> FlowSpec: ...
    @property
    def src_ips(self) -> int: ...
    @property
    def dst_ips(self) -> int: ...
    @property
    def src_ports(self) -> int: ...
    @property
    def dst_ports(self) -> int: ...
    @property
    def src_macs(self) -> int: ...
    @property
    def dst_macs(self) -> int: ...
    @property
    def vlans(self) -> int: ...
    @property
    def order(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def count(self) -> int: ...

@final
class StopSpec:
    """When the streams of a trial stop."""

    @staticmethod
    def duration(duration_s: float) -> StopSpec: ...
    @staticmethod
    def frames(count: int) -> StopSpec: ...
    @staticmethod
    def bursts(frames: int, count: int, gap_s: float) -> StopSpec: ...
    @property
    def kind(self) -> str:
        """``"duration"``, ``"frames"`` or ``"bursts"``."""

@final
class PhaseSpec:
    """One rate phase of a duration trial: every stream at ``rate_scale`` x its rate for ``duration_s``."""

    def __new__(cls, duration_s: float, rate_scale: float = 1.0) -> PhaseSpec: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def rate_scale(self) -> float: ...

@final
class StreamSpec:
    """One stream of signed test frames, validated against everything but the port."""

    def __new__(
        cls,
        *,
        frame_size: FrameSizeSpec,
        rate: RateSpec,
        name: str = "",
        tx_port: int = 0,
        rx_port: int = 1,
        src_mac: str = "02:00:00:00:00:01",
        dst_mac: str = "02:00:00:00:00:02",
        src_ip: str = "198.18.0.1",
        dst_ip: str = "198.19.0.1",
        src_port: int = 1024,
        dst_port: int = 1024,
        vlan: int | None = None,
        ttl: int = 64,
        udp_checksum: bool = False,
        flows: FlowSpec | None = None,
        line_rate_bps: float | None = None,
        protocol: str = "udp",
        tcp_flags: str = "A",
        tcp_seq: int = 0,
        ethertype: int = 0x88B5,
        outer_vlan: int | None = None,
        pcap: str | None = None,
        pcap_stamp: bool = False,
    ) -> StreamSpec: ...
    @property
    def name(self) -> str: ...
    @property
    def tx_port(self) -> int: ...
    @property
    def rx_port(self) -> int: ...
    @property
    def frame_size(self) -> FrameSizeSpec: ...
    @property
    def rate(self) -> RateSpec: ...
    @property
    def flows(self) -> FlowSpec: ...
    @property
    def line_rate_bps(self) -> float | None: ...
    @property
    def protocol(self) -> str:
        """`udp`, `tcp`, `icmp` or `raw`."""
    @property
    def tcp_flags(self) -> str | None:
        """TCP flags as letters (`None` unless TCP)."""
    @property
    def ethertype(self) -> int | None:
        """The EtherType of a raw stream (`None` unless raw)."""
    @property
    def vlan(self) -> int | None: ...
    @property
    def outer_vlan(self) -> int | None: ...
    @property
    def pcap(self) -> str | None:
        """The capture a replay stream sends (`None`: frames built from the template)."""
    @property
    def pcap_stamp(self) -> bool:
        """A replay stamps the signature into the frames with room for it."""
    @property
    def pcap_frames(self) -> int | None:
        """Frames of the capture (one pass), `None` unless a replay."""
    @property
    def mean_frame_size(self) -> float:
        """Mean frame size in bytes incl. FCS (a replay: the capture's, short frames counted as 64)."""
    @property
    def intended_rate_pps(self) -> float | None:
        """Frames/s this stream asks for (``None`` for ``max``)."""

@final
class Port:
    """A tester port: an interface (in a network namespace, optionally) and how to drive it."""

    def __new__(
        cls,
        ifname: str,
        netns: str | None = None,
        io: str = "auto",
        queues: int = 1,
        ring_frames: int = 0,
        busy_poll_us: int = 0,
        *,
        i_know_this_is_live: bool = False,
        control_to_kernel: bool = False,
    ) -> Port: ...
    @property
    def ifname(self) -> str: ...
    @property
    def netns(self) -> str | None: ...
    @property
    def io(self) -> str: ...
    @property
    def queues(self) -> int: ...
    @property
    def ring_frames(self) -> int: ...
    @property
    def busy_poll_us(self) -> int:
        """AF_XDP busy polling: SO_BUSY_POLL microseconds with SO_PREFER_BUSY_POLL (0 = off)."""
    @property
    def i_know_this_is_live(self) -> bool:
        """The transmit guard is overridden for this port (the user said it may be a live network)."""
    @property
    def control_to_kernel(self) -> bool:
        """The kernel gets the port's ARP, ND, ICMP and LLDP frames (its devices and lldpd answer them)."""
    def info(self) -> InterfaceInfo:
        """Interface facts: ifindex, MTU, MAC, speed, driver, queues."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class TrialSpec:
    """Ports, streams and how the trial runs; stream port indices are checked against ``ports``."""

    def __new__(
        cls,
        ports: Sequence[Port],
        streams: Sequence[StreamSpec],
        stop: StopSpec,
        *,
        drain_s: float = ...,
        warmup_s: float = 0.0,
        learning: bool = True,
        late_s: float | None = None,
        tx_cpus: Sequence[int] = (),
        rx_cpus: Sequence[int] = (),
        receive: bool = True,
        max_flow_results: int | None = 1024,
        pacing: str = "smooth",
        max_stretch_pct: float = 2.0,
        phases: Sequence[PhaseSpec] = (),
        interval_s: float | None = None,
        gap_slots: int = 1,
    ) -> TrialSpec: ...

# -- running ------------------------------------------------------------------------------------
@final
class Snapshot:
    """Live counters of a running trial."""

    @property
    def phase(self) -> str: ...
    @property
    def elapsed_s(self) -> float: ...
    @property
    def tx_frames(self) -> int: ...
    @property
    def rx_frames(self) -> int: ...
    @property
    def trial_tag(self) -> int:
        """The running trial's tag (0 before the trial claimed one)."""

@final
class Trial:
    """A trial running in an engine thread; opening the ports raises before any traffic. ``keep``:
    after a successful run its ports stay open for the next trial (``reuse``), until that one takes
    them, ``release()`` closes them, or the object ends. ``reuse``: a trial whose kept ports this one
    takes where they are what it would open (the same interfaces and options, passing the transmit
    guard again, able to carry its frames); otherwise they are closed first."""

    def __new__(cls, spec: TrialSpec, watch: StallWatch | None = None, reuse: Trial | None = None,
                keep: bool = False) -> Trial:
        """``watch``: told of each TX and RX worker as it starts (by thread id): each is watched while
        the trial lives, so its waits for its CPU are episodes."""
    def release(self) -> None:
        """Close the ports kept for a next trial now (GIL released); nothing when none are kept."""
    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the end (GIL released); true when it has ended."""
    def stop(self) -> None:
        """Stop traffic now; the result keeps what was counted."""
    def snapshot(self) -> Snapshot: ...
    def run_start_ns(self, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` (GIL released) for the measured run's start to be known: its time
        on ``time.monotonic_ns()``'s clock, or None. For a thread of the caller's that keeps time with
        the run (events) without the progress callbacks, which a busy tester CPU can hold up."""
    def settled_intervals(self, first: int) -> list[IntervalResult]:
        """The counting intervals from index ``first`` on whose counts are final while the trial runs
        (ended more than the late threshold ago; the run's last interval is in the result only)."""
    def result(self) -> TrialResult:
        """The result (waits for the end); raises the engine's error if the trial failed."""

@final
class Listen:
    """Receive only: count whatever arrives on ``ports`` for ``duration_s`` (signed frames per
    sender's trial and flow, the rest by EtherType and IP protocol); opening the ports raises first."""

    def __new__(cls, ports: Sequence[Port], duration_s: float, *, rx_cpus: Sequence[int] = ()) -> Listen: ...
    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the end (GIL released); true when it has ended."""
    def stop(self) -> None:
        """Stop listening now; the result keeps what was counted."""
    def snapshot(self) -> Snapshot: ...
    def result(self) -> ListenResult:
        """The result (waits for the end); raises the engine's error if the listen failed."""

# -- results ------------------------------------------------------------------------------------
@final
class PinFailure:
    """A worker that does not run on the CPU it was placed on: the kernel refused to pin it (a CPU
    outside the process's cpuset, one taken offline, a sandbox that forbids it). It ran anyway,
    wherever the scheduler put it."""

    @property
    def worker(self) -> str:
        """The worker's thread name (`netrig-tx0`, `netrig-rx0`, `netrig-listen0`, `nr-fwd-p0q0`, …)."""
    @property
    def cpu(self) -> int:
        """The CPU it was placed on."""
    @property
    def error(self) -> str:
        """Why it is not there (the kernel's answer)."""
    def to_dict(self) -> dict[str, object]: ...

@final
class LatencySummary:
    """One-way latency of every received frame, and IPDV between consecutive frames of a flow (ns)."""

    @property
    def samples(self) -> int: ...
    @property
    def min_ns(self) -> int: ...
    @property
    def mean_ns(self) -> float: ...
    @property
    def p50_ns(self) -> int: ...
    @property
    def p90_ns(self) -> int: ...
    @property
    def p99_ns(self) -> int: ...
    @property
    def p999_ns(self) -> int: ...
    @property
    def max_ns(self) -> int: ...
    @property
    def pdv_ns(self) -> int:
        """RFC 5481 PDV at the 99th percentile: p99 − min."""
    @property
    def ipdv_mean_ns(self) -> float:
        """Mean |IPDV| (RFC 5481) between consecutive frames of a flow."""
    @property
    def ipdv_p99_ns(self) -> int: ...
    @property
    def ipdv_max_ns(self) -> int: ...
    @property
    def ipdv_samples(self) -> int:
        """Differences the IPDV is over (pairs of consecutive frames of a flow): 0 when no flow
        received two frames, and then no IPDV was measured."""
    def to_dict(self) -> dict[str, int | float]: ...

@final
class SeqGap:
    """A run of sequence numbers a flow did not receive, between two frames it did."""

    @property
    def missing(self) -> int:
        """Sequence numbers missing between the two frames."""
    @property
    def before_ns(self) -> int:
        """Transmit time of the last frame received before the gap, ns since the trial epoch."""
    @property
    def after_ns(self) -> int:
        """Transmit time of the first frame received after it, ns since the trial epoch."""
    @property
    def duration_ns(self) -> int:
        """`after_ns - before_ns`: the outage the gap stands for."""
    def to_dict(self) -> dict[str, object]: ...

@final
class FlowResult:
    @property
    def flow_id(self) -> int: ...
    @property
    def frames_sent(self) -> int: ...
    @property
    def frames_received(self) -> int: ...
    @property
    def bytes_received(self) -> int: ...
    @property
    def frames_lost(self) -> int: ...
    @property
    def reordered(self) -> int: ...
    @property
    def duplicated(self) -> int: ...
    @property
    def late(self) -> int: ...
    @property
    def latency(self) -> LatencySummary: ...
    @property
    def gaps(self) -> tuple[SeqGap, ...]:
        """The longest gaps in the flow's received sequence (at most the trial's `gap_slots`), by start."""
    @property
    def last_rx_tx_ns(self) -> int:
        """Transmit time of the highest sequence received, ns since the trial epoch (0: none)."""
    @property
    def tail_missing(self) -> int:
        """Sequence numbers sent after the highest one received (a gap that never closed)."""
    def to_dict(self) -> dict[str, object]: ...

@final
class StreamResult:
    @property
    def index(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def tx_port(self) -> int: ...
    @property
    def rx_port(self) -> int: ...
    @property
    def frame_size_mean(self) -> float: ...
    @property
    def flows(self) -> int: ...
    @property
    def intended_rate_pps(self) -> float | None: ...
    @property
    def intended_frames(self) -> int: ...
    @property
    def frames_sent(self) -> int: ...
    @property
    def bytes_sent(self) -> int: ...
    @property
    def tx_rate_pps(self) -> float: ...
    @property
    def frames_received(self) -> int: ...
    @property
    def bytes_received(self) -> int: ...
    @property
    def frames_lost(self) -> int: ...
    @property
    def reordered(self) -> int: ...
    @property
    def duplicated(self) -> int: ...
    @property
    def late(self) -> int: ...
    @property
    def latency(self) -> LatencySummary: ...
    @property
    def flow_results(self) -> tuple[FlowResult, ...]: ...
    @property
    def loss_measured(self) -> bool:
        """The receiver counted this stream's frames (false: a replay without stamping; its
        `frames_lost` is 0 by construction, not measured)."""
    @property
    def replay(self) -> ReplayResult | None:
        """A pcap replay: what was sent of the capture (`None` for a template stream)."""
    @property
    def loss_ratio(self) -> float:
        """Lost / counted (a replay's unstamped frames are not counted; 0 when none was)."""
    def to_dict(self, flows: bool = True) -> dict[str, object]: ...

@final
class ReplayResult:
    """What a pcap replay sent: passes through the capture, frames with and without the signature."""

    @property
    def file(self) -> str:
        """The capture file."""
    @property
    def stamped(self) -> bool:
        """Frames were stamped with the signature where they had room."""
    @property
    def frames_per_pass(self) -> int: ...
    @property
    def bytes_per_pass(self) -> int:
        """Bytes of one pass, frame sizes incl. FCS (short frames counted as 64)."""
    @property
    def passes(self) -> float:
        """Frames sent / frames per pass."""
    @property
    def frames_stamped(self) -> int: ...
    @property
    def frames_unstamped(self) -> int:
        """Frames sent as captured, without the signature (not counted by the receiver)."""
    @property
    def flows(self) -> int:
        """Flows of a stamped replay (captured 5-tuples); 0 without stamping."""
    @property
    def signed_in_capture(self) -> int:
        """Frames of the capture that already carried a netrig signature."""
    def to_dict(self) -> dict[str, object]: ...

@final
class PortResult:
    """Tester-side counters of one port (drops here are the tester's, never the DUT's)."""

    @property
    def name(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def notes(self) -> str: ...
    @property
    def timestamp_source(self) -> str: ...
    @property
    def tx_frames(self) -> int: ...
    @property
    def tx_bytes(self) -> int: ...
    @property
    def tx_backpressure(self) -> int: ...
    @property
    def tx_errors(self) -> int:
        """Frames the kernel refused or dropped after the port handed them over (AF_XDP: rejected
        descriptors; a copy-mode driver's drop, on veth its peer's receive ring full): never left."""
    @property
    def rx_frames(self) -> int: ...
    @property
    def rx_bytes(self) -> int: ...
    @property
    def rx_foreign(self) -> int:
        """Frames without a netrig signature."""
    @property
    def rx_unknown_flow(self) -> int:
        """Frames of this trial's tag with a flow id the trial does not have."""
    @property
    def rx_warmup(self) -> int: ...
    @property
    def rx_earlier_trial(self) -> int:
        """Signed frames of an earlier trial of this process (late arrivals)."""
    @property
    def rx_other_trial(self) -> int:
        """Signed frames of a trial this process is not running (another tester, or forged)."""
    @property
    def rx_implausible(self) -> int:
        """This trial's tag and flow with impossible contents (TX time in the future or before
        the trial, a sequence number not sent yet)."""
    @property
    def rx_ring_drops(self) -> int: ...
    @property
    def rx_overruns(self) -> int: ...
    @property
    def link_down_events(self) -> int:
        """Times the link's carrier went down during the trial."""
    @property
    def link_up(self) -> bool:
        """The link was up at the start and at the end of the trial."""
    @property
    def link_watched(self) -> bool:
        """The link's state was read before and after the trial."""
    def to_dict(self) -> dict[str, object]: ...

@final
class Smoothness:
    """How smoothly a trial's load was offered, measured in the TX workers per batch."""

    @property
    def peak_frames(self) -> int:
        """Most frames handed to the queue in any 1 ms window (the most bunched TX worker)."""
    @property
    def intended_frames(self) -> float:
        """Frames the intended rate puts in 1 ms (0 when unpaced)."""
    @property
    def peak_ratio(self) -> float:
        """``peak_frames / intended_frames`` (0 when unpaced)."""
    @property
    def gap_p50_ns(self) -> int: ...
    @property
    def gap_p99_ns(self) -> int: ...
    @property
    def gap_max_ns(self) -> int: ...
    def to_dict(self) -> dict[str, object]: ...

@final
class IntervalResult:
    """Frames sent and received in one counting interval, both by the frame's transmit time."""

    @property
    def start_s(self) -> float:
        """Start since the run start, seconds."""
    @property
    def duration_s(self) -> float: ...
    @property
    def phase(self) -> int:
        """Index of the rate phase."""
    @property
    def frames_sent(self) -> int: ...
    @property
    def frames_received(self) -> int:
        """Frames sent in this interval that were received (not late)."""
    @property
    def latency_mean_ns(self) -> float:
        """Mean and highest latency of those frames, ns (0 when none was received)."""
    @property
    def latency_max_ns(self) -> int: ...
    def to_dict(self) -> dict[str, object]: ...

@final
class TrialResult:
    """One trial's counts (methodology §2); totals are over all streams."""

    @property
    def streams(self) -> tuple[StreamResult, ...]: ...
    @property
    def ports(self) -> tuple[PortResult, ...]: ...
    @property
    def trial_tag(self) -> int:
        """The trial's tag: the nonce in every frame's signature."""
    @property
    def duration_s(self) -> float: ...
    @property
    def tx_window_s(self) -> float: ...
    @property
    def drain_s(self) -> float:
        """How long the trial waited for frames in flight after its last frame, s: its drain, or
        less when every frame it sent had arrived sooner (or it was stopped)."""
    @property
    def valid(self) -> bool: ...
    @property
    def invalid_reason(self) -> str | None: ...
    @property
    def interrupted(self) -> bool: ...
    @property
    def latency(self) -> LatencySummary: ...
    @property
    def tx_cpus(self) -> tuple[int, ...]: ...
    @property
    def rx_cpus(self) -> tuple[int, ...]: ...
    @property
    def started_realtime_ns(self) -> int: ...
    @property
    def tx_max_lag_ns(self) -> int:
        """Longest the tester fell behind its schedule, ns."""
    @property
    def tx_max_catchup(self) -> int:
        """Catch-up pacing: largest catch-up burst (frames at once beyond one batch)."""
    @property
    def pacing(self) -> str:
        """What the TX workers did with time they lost: ``"smooth"`` or ``"catch-up"``."""
    @property
    def tx_stretch_ns(self) -> int:
        """How much later than planned the last frame left (smooth pacing: the stretch), ns."""
    @property
    def max_stretch_pct(self) -> float:
        """The stretch this trial was allowed, % of its planned length."""
    @property
    def smoothness(self) -> Smoothness:
        """How smoothly the load was offered."""
    @property
    def intervals(self) -> tuple[IntervalResult, ...]:
        """Per-interval counts (trials with an interval length)."""
    @property
    def epoch_ns(self) -> int:
        """The trial epoch, `CLOCK_MONOTONIC` ns (what `time.monotonic_ns()` reads): sequence gaps'
        transmit times are relative to it."""
    @property
    def run_start_ns(self) -> int:
        """When the measured run began, `CLOCK_MONOTONIC` ns (0: it never did)."""
    @property
    def flow_memory_bytes(self) -> int:
        """Memory the flows took, measured: the resident set's growth from before the workers
        allocated their per-flow state to the end of the drain, bytes."""
    @property
    def pin_failures(self) -> tuple[PinFailure, ...]:
        """Workers that do not run on the CPU they were placed on (`tx_cpus`, `rx_cpus`): the
        kernel refused the pin. Empty when every worker was pinned."""
    # derived
    @property
    def frames_sent(self) -> int: ...
    @property
    def frames_received(self) -> int: ...
    @property
    def frames_lost(self) -> int: ...
    @property
    def loss_ratio(self) -> float: ...
    @property
    def reordered(self) -> int: ...
    @property
    def duplicated(self) -> int: ...
    @property
    def late(self) -> int: ...
    @property
    def intended_rate_pps(self) -> float | None: ...
    @property
    def tx_rate_pps(self) -> float:
        """Achieved transmit rate, frames/s, all streams."""
    @property
    def rx_rate_pps(self) -> float: ...
    @property
    def tester_rx_drops(self) -> int:
        """Frames the tester's own receive rings dropped (not DUT loss)."""
    @property
    def frames_foreign(self) -> int:
        """Frames without a netrig signature, all ports."""
    @property
    def frames_stray(self) -> int:
        """Signed frames of other trials (earlier trials' late frames, other testers'), all ports."""
    @property
    def frames_forged(self) -> int:
        """Frames with this trial's tag that cannot be its own (unknown flow, implausible)."""
    @property
    def flows(self) -> tuple[FlowResult, ...]: ...
    @property
    def io(self) -> tuple[str, ...]: ...
    @property
    def latency_timeline(self) -> tuple[LatencyWindow, ...]:
        """Latency over time: windows of `LATENCY_WINDOW_NS` (8.4 ms) by transmit time since the
        epoch, from the first with a received frame to the last (duration trials up to 130 s;
        empty otherwise). Kept out of `to_dict()`: a record stores it compactly."""
    def to_dict(self, flows: bool = True) -> dict[str, object]:
        """Every field and every derived total, as plain JSON-able values."""

# -- interfaces ---------------------------------------------------------------------------------
@final
class InterfaceInfo:
    @property
    def name(self) -> str: ...
    @property
    def ifindex(self) -> int: ...
    @property
    def mtu(self) -> int: ...
    @property
    def mac(self) -> str: ...
    @property
    def speed_bps(self) -> int | None: ...
    @property
    def driver(self) -> str: ...
    @property
    def rx_queues(self) -> int: ...
    @property
    def tx_queues(self) -> int: ...
    @property
    def oper_up(self) -> bool: ...
    def to_dict(self) -> dict[str, object]: ...

@final
class IoProbe:
    """Whether an I/O backend opens on an interface (for transmit), and its notes or error."""

    @property
    def backend(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def detail(self) -> str: ...

@final
class ForwardQueueStats:
    """Counters of one port and queue of a running forwarder (cumulative since it started)."""

    @property
    def port(self) -> int:
        """Index of the port in the forwarder's port list."""
    @property
    def ifname(self) -> str: ...
    @property
    def queue(self) -> int: ...
    @property
    def cpu(self) -> int | None:
        """CPU the worker receiving on this queue is pinned to (`None`: pinning failed)."""
    @property
    def rx_frames(self) -> int: ...
    @property
    def rx_bytes(self) -> int: ...
    @property
    def tx_frames(self) -> int: ...
    @property
    def tx_bytes(self) -> int: ...
    @property
    def tx_drops(self) -> int:
        """Frames the forwarder dropped on the way out of this queue (egress queue full, or too large)."""
    @property
    def rx_ring_drops(self) -> int:
        """Frames the backend lost on this queue before the worker saw them (ring full)."""
    @property
    def tx_errors(self) -> int:
        """Frames the kernel rejected on transmit."""
    def to_dict(self) -> dict[str, object]: ...

@final
class ForwardPortInfo:
    """One port of a forwarder, as opened."""

    @property
    def ifname(self) -> str: ...
    @property
    def backend(self) -> str:
        """`af_xdp`, `af_packet`, `socket`, or `xdp` (forwarded in the kernel)."""
    @property
    def queues(self) -> int: ...
    @property
    def mac(self) -> str: ...
    @property
    def zero_copy(self) -> bool: ...
    @property
    def max_frame_len(self) -> int: ...
    @property
    def notes(self) -> str:
        """What was probed and chosen (XDP mode, copy or zero-copy, rings)."""
    def to_dict(self) -> dict[str, object]: ...

@final
class Forwarder:
    """A forwarder (``netrig forward``) running in engine threads: the host as the DUT. Opens every
    port (``rx_all``: with af_xdp an XDP program steers every frame to it) and starts one pinned
    worker per (port, queue); errors name ``ports``, ``mode``, ``peer_mac``, ``cpus``, ``batch``. With
    ``xdp_redirect=True`` nothing runs in user space: one XDP program per port forwards in the kernel
    (DEVMAP + XDP_REDIRECT, every queue; ports opened with ``io="auto"``, one queue, no ``cpus`` or
    ``batch``); ``stats()`` then has one entry per port (queue 0, ``cpu`` None) from per-CPU maps."""

    def __new__(
        cls,
        ports: Sequence[Port],
        mode: str,
        peer_macs: Sequence[str | None] | None = None,
        cpus: Sequence[int] | None = None,
        batch: int | None = None,
        xdp_redirect: bool | None = None,
        faults: dict[str, float] | None = None,
    ) -> Forwarder: ...
    @property
    def ports(self) -> list[ForwardPortInfo]:
        """The ports as opened (backend, MAC, notes)."""
    @property
    def mode(self) -> str: ...
    @property
    def running(self) -> bool:
        """The workers still forward (not stopped, no worker failed)."""
    def stats(self) -> list[ForwardQueueStats]:
        """Counters now, per port and queue (after `stop`: the final ones are what `stop` returned)."""
    def fault_counts(self) -> dict[str, int] | None:
        """What the fault injector did so far, also after `stop`: frames `passed`, `dropped`,
        `duplicated`, `held` back and sent `reordered` (after a higher sequence of their flow); None
        without `faults`."""
    def pin_failures(self) -> list[PinFailure]:
        """Workers that do not run on their CPU: the kernel refused the pin (their queues' `cpu` is
        `None`). Empty when every worker was pinned, and after `stop`."""
    def stop(self) -> list[ForwardQueueStats]:
        """Stop the workers, close the ports (XDP programs detached) and return the final counters;
        raises the error a worker ended with. A second call returns an empty list."""

@final
class CaptureTag:
    """Frames and bytes (with FCS) a capture saw of one sender's trial tag."""

    @property
    def tag(self) -> int:
        """The trial tag (its low 23 bits, as carried in the signature)."""
    @property
    def frames(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    def to_dict(self) -> dict[str, object]: ...

@final
class CaptureStats:
    """A capture's counters at one moment (cumulative since it started)."""

    @property
    def frames(self) -> int:
        """Every frame captured, and its bytes (with FCS)."""
    @property
    def bytes(self) -> int: ...
    @property
    def tags(self) -> tuple[CaptureTag, ...]:
        """Signed measurement frames per sender's trial tag."""
    @property
    def warmup(self) -> int:
        """Signed warm-up frames."""
    @property
    def foreign(self) -> int:
        """Frames without a netrig signature."""
    @property
    def drops(self) -> int:
        """The method's own drop counter (`Capture.drops_source`)."""
    @property
    def queue_drops(self) -> int:
        """`threads`: frames dropped because the hand-over queue was full."""
    @property
    def settled(self) -> bool:
        """The capture confirmed the counters after finding its source empty."""
    @property
    def elapsed_s(self) -> float: ...
    @property
    def pin_failures(self) -> tuple[PinFailure, ...]:
        """Workers that do not run on the capture's CPU: the kernel refused the pin. Empty when
        pinned, or not asked to."""
    def to_dict(self) -> dict[str, object]: ...

@final
class Capture:
    """A capture application (`netrig capture`): one capture method counting what it sees on an
    interface, in engine threads pinned to one CPU."""

    def __new__(
        cls,
        method: str,
        ifname: str,
        netns: str | None = None,
        cpu: int | None = None,
        batch: int | None = None,
    ) -> Capture: ...
    @property
    def method(self) -> str: ...
    @property
    def notes(self) -> str:
        """What was opened (library version, XDP mode, socket options)."""
    @property
    def drops_source(self) -> str:
        """Where `CaptureStats.drops` comes from."""
    @property
    def running(self) -> bool:
        """Capturing (not stopped, no worker failed)."""
    @property
    def error(self) -> str | None:
        """The error a worker stopped with, if any."""
    def stats(self, wait_s: float = 1.0) -> CaptureStats:
        """The counters now: settled (`settled` true) once the capture found its source empty,
        waiting at most `wait_s` for that."""
    def stop(self) -> CaptureStats | None:
        """Stop capturing, close the source (XDP program detached) and return the final counters;
        raises the error a worker ended with. A second call returns ``None``."""

def interface_info(ifname: str, netns: str | None = None) -> InterfaceInfo: ...
def list_interfaces(netns: str | None = None) -> list[str]: ...
def is_veth_peer(ifname: str, peer: str, netns: str | None = None, peer_netns: str | None = None) -> bool:
    """``ifname`` (in ``netns``) is a veth whose other end is ``peer`` (in ``peer_netns``)."""
def sender_cpus(tx_cpus: Sequence[int] = ...) -> list[int]:
    """The CPUs the engine's senders run on, given their configured CPUs (empty: the engine's split,
    the upper half of the online CPUs): where a daemon that transmits on a tester port belongs."""
def probe_io(ifname: str, netns: str | None = None) -> list[IoProbe]: ...
def probe_xdp_program(ifname: str) -> tuple[bool, str]:
    """Whether the AF_XDP steering program loads on ``ifname`` (nothing attached): (ok, detail)."""

@final
class HeardFlow:
    """One flow of signed frames a listen heard: a sender's trial tag and flow id."""

    @property
    def trial(self) -> int: ...
    @property
    def flow_id(self) -> int: ...
    @property
    def frames(self) -> int:
        """Unique frames received."""
    @property
    def bytes(self) -> int: ...
    @property
    def duplicated(self) -> int: ...
    @property
    def reordered(self) -> int: ...
    @property
    def first_seq(self) -> int:
        """Lowest and highest sequence number heard."""
    @property
    def last_seq(self) -> int: ...
    @property
    def missing(self) -> int:
        """Sequence numbers between the first and the last heard that never arrived."""
    @property
    def warmup(self) -> int:
        """Warm-up frames (counted apart)."""
    def to_dict(self) -> dict[str, object]: ...

@final
class ForeignKind:
    """Frames without a netrig signature of one kind."""

    @property
    def ethertype(self) -> int: ...
    @property
    def ip_proto(self) -> int | None:
        """IP protocol (IPv4) or next header (IPv6); ``None`` when not IP."""
    @property
    def frames(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    def to_dict(self) -> dict[str, object]: ...

@final
class ListenPort:
    """One port of a listen."""

    @property
    def name(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def frames(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def ring_drops(self) -> int:
        """Frames lost in the tester's own ring (never the sender's or the network's loss)."""
    def to_dict(self) -> dict[str, object]: ...

@final
class ListenResult:
    """What a listen (receive only) heard."""

    @property
    def duration_s(self) -> float: ...
    @property
    def started_realtime_ns(self) -> int: ...
    @property
    def interrupted(self) -> bool: ...
    @property
    def ports(self) -> tuple[ListenPort, ...]: ...
    @property
    def flows(self) -> tuple[HeardFlow, ...]: ...
    @property
    def foreign(self) -> tuple[ForeignKind, ...]: ...
    @property
    def untracked(self) -> int:
        """Signed frames of flows beyond the number a listen tracks."""
    @property
    def rx_cpus(self) -> tuple[int, ...]: ...
    @property
    def error(self) -> str | None:
        """A receive error that stopped a worker early, if any."""
    @property
    def pin_failures(self) -> tuple[PinFailure, ...]:
        """Workers that do not run on the CPU they were placed on (`rx_cpus`): the kernel refused
        the pin. Empty when every worker was pinned."""
    @property
    def frames(self) -> int: ...
    @property
    def signed_frames(self) -> int: ...
    @property
    def foreign_frames(self) -> int: ...
    @property
    def missing(self) -> int: ...
    def to_dict(self) -> dict[str, object]: ...


@final
class FieldPattern:
    """The values one header field takes, frame after frame (frame ``j`` takes value ``j mod count``)."""

    @staticmethod
    def fixed(value: int) -> FieldPattern: ...
    @staticmethod
    def auto(fallback: int) -> FieldPattern:
        """Derived from the stack (lengths, types, checksums), else ``fallback``."""
    @staticmethod
    def values(values: Sequence[int]) -> FieldPattern: ...
    @staticmethod
    def counter(start: int, step: int, count: int, down: bool = False) -> FieldPattern: ...
    @staticmethod
    def random(min: int, max: int, count: int, seed: int) -> FieldPattern: ...
    def values_at(self, bits: int, n: int) -> list[int]:
        """The values of frames 0..``n`` in a field of ``bits`` bits (what the stack writes there)."""
    @property
    def period(self) -> int:
        """Frames before the values repeat."""
    @staticmethod
    def bad_checksum() -> FieldPattern:
        """A checksum field's value that never verifies."""

@final
class PatternForm:
    """How the values of one OTG pattern class convert to the engine's patterns: one pass over the
    parsed JSON. ``format``: ``int``, ``mac``, ``ipv4`` or ``ipv6``; the model's defaults,
    converted; the class's properties (``keys``), its choice's members and default choice."""

    def __new__(cls, format: str, lo: int, hi: int, value: int, values: Sequence[int],
                counter: tuple[int, int, int], random: tuple[int, int, int, int],
                sub_keys: Sequence[str], keys: Sequence[str], members: Sequence[str],
                default_choice: str) -> PatternForm: ...
    def convert(self, d: object) -> FieldPattern | None:
        """``d`` as the engine's pattern when its choice is plain (``value``, ``values``,
        ``increment``, ``decrement``, ``random``) and it is what the model accepts; else None
        (auto, checksums, metric tags, a malformed object). A bad value: ``ValueError``."""

@final
class HeaderForm:
    """How one OTG header kind's body converts to the engine's header in one pass: its properties
    by path inside the body (``skip``, ``pattern`` with the class's form and the engine's field
    name, ``nest``), the engine's fields whose default is not 0, and the fields that share bits."""

    def __new__(cls, kind: str, props: Sequence[tuple[str, str, PatternForm | None, str]],
                defaults: Sequence[tuple[str, FieldPattern]], overlaps: Sequence[str]) -> HeaderForm: ...
    def convert(self, body: object) -> HeaderSpec | None:
        """``body`` as the engine's header, the defaults added; None when anything in it is not
        plain (a refused property, a checksum or ``auto`` field, a bad value: the caller's)."""

@final
class HeaderSpec:
    """One header of a stack: its kind (``STACK_HEADERS``), the fields it sets, a custom header's bytes."""

    def __new__(cls, kind: str, fields: Sequence[tuple[str, FieldPattern]] | None = None,
                data: bytes | None = None) -> HeaderSpec: ...
    @property
    def kind(self) -> str: ...

@final
class PayloadSpec:
    """What fills a frame after its headers: ``fixed`` (a byte pattern, repeated or then zeros),
    ``increment_byte``, ``decrement_byte``, ``increment_word``, ``decrement_word``."""

    def __new__(cls, kind: str, pattern: bytes | None = None, repeat: bool = True) -> PayloadSpec: ...

@final
class GenDurationSpec:
    """How long a generator flow sends once started."""

    @staticmethod
    def continuous() -> GenDurationSpec: ...
    @staticmethod
    def frames(count: int) -> GenDurationSpec: ...
    @staticmethod
    def seconds(seconds: float) -> GenDurationSpec:
        """rate × seconds frames."""
    @staticmethod
    def bursts(packets: int, count: int, gap_s: float) -> GenDurationSpec:
        """``count`` bursts (0: until stopped) of ``packets`` frames, ``gap_s`` between them."""

@final
class GenFlowSpec:
    """One generator flow, validated as far as it can be without its ports (errors name the flow's
    fields: ``size``, ``packet[1].ipv4.src``, ``rate``, ``duration``)."""

    def __new__(cls, name: str, tx_port: int, rx_ports: Sequence[int], headers: Sequence[HeaderSpec],
                frame_size: FrameSizeSpec, rate: RateSpec, duration: GenDurationSpec, *,
                payload: PayloadSpec | None = None, delay_s: float = 0.0, gap_bytes: int = 12,
                latency: str = "store_forward", tag_period: int = 0) -> GenFlowSpec: ...
    @property
    def name(self) -> str: ...
    @property
    def untracked_sizes(self) -> list[int]:
        """The flow's frame sizes (with FCS) without room for the signature after its headers: sent
        untracked, counted per port and never per flow."""

@final
class CaptureSpec:
    """A capture on one port of a generator. ``filter``: ``(byte offset, value, care bits, negate)``
    terms a frame must all match to be kept (``netrig.otg.capfilter``)."""

    def __new__(cls, port: int, snaplen: int = 65535, overwrite: bool = True,
                buffer_bytes: int = 67108864,
                filter: list[tuple[int, bytes, bytes, bool]] = ...) -> CaptureSpec: ...

@final
class GenFlowStats:
    """One generator flow's counts now, its current start's (engine-clock times in ns; 0: none)."""

    @property
    def state(self) -> str:
        """``stopped``, ``running``, ``paused`` or ``done`` (sent every frame of its duration)."""
    @property
    def tx_frames(self) -> int: ...
    @property
    def tx_bytes(self) -> int: ...
    @property
    def tx_first_ns(self) -> int: ...
    @property
    def tx_last_ns(self) -> int: ...
    @property
    def tx_untracked(self) -> int:
        """Of ``tx_frames``, those sent without room for the signature: counted per port, never
        received per flow."""
    @property
    def rx_frames(self) -> int:
        """Every arrival of the current start, duplicates included, and its bytes."""
    @property
    def rx_bytes(self) -> int: ...
    @property
    def rx_duplicated(self) -> int:
        """Of ``rx_frames``: sequences that had arrived before, and sequences below the highest
        that had (each receive queue's sequence window, as a trial's)."""
    @property
    def rx_reordered(self) -> int: ...
    @property
    def rx_first_ns(self) -> int: ...
    @property
    def rx_last_ns(self) -> int: ...
    @property
    def latency_min_ns(self) -> int: ...
    @property
    def latency_max_ns(self) -> int: ...
    @property
    def latency_sum_ns(self) -> int: ...
    @property
    def latency_frames(self) -> int: ...
    @property
    def ipdv_sum_ns(self) -> int:
        """|IPDV| (RFC 5481) between consecutive latencies as each receive queue saw them: sum,
        number and maximum, ns (two hosts' clock offset cancels out of it)."""
    @property
    def ipdv_samples(self) -> int: ...
    @property
    def ipdv_max_ns(self) -> int: ...

@final
class GenTxPacing:
    """How a generator port's TX workers kept their schedule since its flows last started from idle."""

    @property
    def frames(self) -> int:
        """Frames sent since then (0: the rest means nothing)."""
    @property
    def stretch_ns(self) -> int:
        """The most any flow's schedule shifted (time smooth pacing gave up), ns."""
    @property
    def max_lag_ns(self) -> int:
        """The longest a run's first frame waited after it fell due until it reached the queue, ns
        (up to the worker's hold, a wake batch's time, by design when busy)."""
    @property
    def smoothness(self) -> Smoothness:
        """The peak 1-ms window against the running flows' rates, and the inter-departure gaps."""

@final
class GenPortStats:
    """One generator port's counts since the generator was made."""

    @property
    def tx_frames(self) -> int: ...
    @property
    def tx_bytes(self) -> int: ...
    @property
    def rx_frames(self) -> int: ...
    @property
    def rx_bytes(self) -> int: ...
    @property
    def rx_foreign(self) -> int:
        """Frames without a signature at their end."""
    @property
    def rx_stale(self) -> int:
        """Signed frames of no current start of this generator's flows."""
    @property
    def rx_ring_drops(self) -> int:
        """Frames the tester's own receive ring dropped."""
    @property
    def rx_forged(self) -> int:
        """Frames of a flow this generator sends that it cannot have sent (forged)."""
    @property
    def rx_unjudged(self) -> int:
        """Starts of flows sent elsewhere seen (their frames are not judged for forgery)."""
    @property
    def link_up(self) -> bool | None: ...
    @property
    def capturing(self) -> bool: ...

@final
class Generator:
    """Flows on ports kept open: start, pause, resume, stop by index; counters at any time; captures.

    Made with its ports opened (each passes the transmit guard) and every flow compiled;
    nothing is sent until a flow starts. ``close()`` stops everything and closes the ports.
    ``reuse``: the generator this one replaces; its ports stay open for this one where they are
    what this one would open (the same interfaces and options, passing the guard again), and it
    is closed either way.
    """

    def __new__(cls, ports: Sequence[Port], flows: Sequence[GenFlowSpec],
                captures: Sequence[CaptureSpec] | None = None, line_rates: Sequence[float | None] | None = None,
                tx_cpus: Sequence[int] | None = None, rx_cpus: Sequence[int] | None = None,
                reuse: Generator | None = None) -> Generator: ...
    def start(self, flows: Sequence[int], tags: Sequence[int] | None = None) -> list[int]:
        """Start these flows (those stopped or done), together; returns the ones started. ``tags``:
        one per flow (below 2^23), sent under instead of fresh ones (a distributed controller's)."""
    def expect(self, flows: Sequence[int], tags: Sequence[int]) -> None:
        """Count these flows' frames sent under ``tags`` from now on, sending nothing (the receive
        side of flows another agent sends)."""
    def update(self, flows: Sequence[int], specs: Sequence[GenFlowSpec]) -> None:
        """Change these flows' rate and frame sizes in place (``specs[k]`` for ``flows[k]``, as the flow
        was configured but for its rate and size): their counters, sequence and tag go on."""
    def stop(self, flows: Sequence[int]) -> None: ...
    def pause(self, flows: Sequence[int]) -> None: ...
    def resume(self, flows: Sequence[int]) -> None: ...
    def flow_stats(self, which: Sequence[int] | None = None) -> list[GenFlowStats]:
        """The counts now (each flow's current start's) of flows ``which`` (None: every flow)."""
    def flow_tags(self, flow: int) -> tuple[list[int], list[int]] | None:
        """Flow ``flow``'s frames per frame index modulo its tag period, ``(sent, received)`` (its
        current start's); None for a flow without tags."""
    def flow_latency(self) -> list[tuple[list[tuple[int, int]], list[tuple[int, int]]] | None]:
        """Every flow's latency and |IPDV| distributions, ns, over its current start's unique frames:
        each ``(value, count)`` pairs, lowest first, each value the highest of its bucket (3 and 2
        significant digits: their quantiles are a histogram's, and the pairs of two receivers add);
        None for a flow beyond the first 256, which has no histograms."""
    def flow_states(self) -> list[str]:
        """Every flow's state: ``stopped``, ``running``, ``paused`` or ``done``."""
    def port_stats(self) -> list[GenPortStats]: ...
    def tx_pacing(self) -> list[GenTxPacing | None]: ...
    def set_capture(self, port: int, on: bool) -> None: ...
    def capture_file(self, port: int, pcapng: bool, if_name: str) -> bytes: ...
    def capture_dropped(self, port: int) -> int: ...
    def ports(self) -> list[tuple[str, str, str, int | None]]:
        """Per port: (name, backend, notes, line rate in bit/s or None)."""
    @property
    def realtime_offset_ns(self) -> int: ...
    def errors(self) -> list[str]: ...
    def pin_failures(self) -> list[PinFailure]:
        """Workers that do not run on their CPU: the kernel refused the pin (each worker pins itself
        when it starts, so a failure shows from then on). Empty when every worker was pinned."""
    def close(self) -> None: ...
