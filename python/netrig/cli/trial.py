"""``netrig trial``: one trial from a TX interface to an RX interface, with a live progress line
(timestamped lines without a terminal) and a final table (or ``--json``). Ctrl-C or SIGTERM stops
traffic and prints the partial result.

With ``--testbed ID`` (a test bed from ``netrig testbed up``) the ports, their namespaces, the
MACs and the addresses come from the test bed: ``netrig trial --testbed 1a2b --rate 100kpps``.

Events under load: ``--event CMD --at T`` (repeatable, paired in order) runs the shell command line
CMD T after the measured run begins, in the test bed's DUT namespace (without a test bed: on the
host, or in ``--event-netns``), and reports per flow the outage (last frame received before the
event's gap to the first after, by their transmit timestamps), the frames lost in it and the time
until forwarding was loss-free again: ``netrig trial --testbed 1a2b --duration 5s --event 'ip link
set dev eth1 down; sleep 0.3; ip link set dev eth1 up' --at 2s``."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence

from rich.text import Text

from netrig import _native
from netrig.cli.common import check_netns, console, event_pairs, port_ref, rename_field, require_root, testbed_options
from netrig.errors import ConfigError, InterfaceError, InterruptedTrial, TestbedError, interrupt_status
from netrig.measure.events import (
    DEFAULT_TIMEOUT_S,
    INTERVAL_S,
    CommandRunner,
    Event,
    EventClock,
    EventResult,
    EventRun,
    check_events,
    event_results,
)
from netrig.measure.platform import TrialPlatform, TrialStalls, WireLoss, platform_watch
from netrig.methodology.vocabulary import deprecated, option
from netrig.model import defaults, format_bps, format_pps, largest_frame
from netrig.testbed import TOPOLOGIES, Testbed
from netrig.testbed.placement import bookkeeping_on, thread_placement_restored
from netrig.testbed.state import ID_RE as TESTBED_ID_RE
from netrig.testbed.state import in_use, ports_held, shared_io
from netrig.trial import (
    DEFAULT_MAX_STRETCH_PCT,
    DEFAULT_RAW_ETHERTYPE,
    FLOW_KEYS,
    IO_MODES,
    PACING_MODES,
    PROTOCOLS,
    ListenResult,
    Port,
    Snapshot,
    Stream,
    TrialResult,
    linear_ramp,
    listen,
    parse_ethertype,
    run_trial,
)
from netrig.view.stalls import holder_words, ring_loss_words, stall_words

#: Addresses without a test bed: the tester addresses of the test beds' plan (RFC 2544 range).
DEFAULT_SRC_IP, DEFAULT_DST_IP = "198.18.0.2", "198.19.0.2"
#: How long a trial sends without --duration or --frames, s.
DEFAULT_DURATION_S = 10.0
#: Without a terminal, a progress line this often (seconds).
PLAIN_PROGRESS_S = 1.0

#: Engine / API field → the option that sets it, for error messages.
FIELDS = {
    "busy_poll_us": "--busy-poll",
    "ring_frames": "--ring-frames",
    "queues": "--queues",
    "frame_size": "--frame-size",
    "rate": "--rate",
    "rate_pps": "--rate",
    "duration_s": "--duration",
    "frames": "--frames",
    "src_ip": "--src-ip",
    "dst_ip": "--dst-ip",
    "src_mac": "--src-mac",
    "dst_mac": "--dst-mac",
    "vlan": "--vlan",
    "outer_vlan": "--outer-vlan",
    "protocol": "--protocol",
    "tcp_flags": "--tcp-flags",
    "tcp_seq": "--tcp-seq",
    "ethertype": "--ethertype",
    "flow_order": "--flow-order",
    "seed": "--seed",
    "flows": "--flows",
    "src_ips": "--vary",
    "dst_ips": "--vary",
    "src_ports": "--vary",
    "dst_ports": "--vary",
    "src_macs": "--vary",
    "dst_macs": "--vary",
    "vlans": "--vary",
    "tx_cpus": "--tx-cpus",
    "rx_cpus": "--rx-cpus",
    "line_rate_bps": "--line-rate",
    "i_know_this_is_live": "--i-know-this-is-live",
    "ifname": "--tx",
    "pacing": "--pacing",
    "ramp": "--ramp",
    "phases": "--ramp",
    "max_stretch_pct": "--max-stretch",
    "gap_slots": "--event",
    "interval_s": "--event",
    "pcap": "--pcap",
    "pcap_stamp": "--pcap-stamp",
}

#: Options that build frames from the template: a replay sends the capture's as they are.
TEMPLATE_OPTIONS = ("frame_size", "flows", "vary", "protocol", "tcp_flags", "tcp_seq", "ethertype", "vlan",
                    "outer_vlan", "flow_order", "seed", "src_mac", "dst_mac", "src_ip", "dst_ip")


#: Options that shape one protocol's headers: given with another --protocol they would be ignored.
PROTOCOL_OPTIONS = {"tcp_flags": "tcp", "tcp_seq": "tcp", "ethertype": "raw"}


def _check_protocol_options(args) -> None:
    """``--tcp-flags SA`` with UDP frames (or ``--ethertype`` without raw) is refused, not ignored."""
    for dest, protocol in PROTOCOL_OPTIONS.items():
        if getattr(args, dest) != DEFAULTS.get(dest) and args.protocol != protocol:
            option = "--" + dest.replace("_", "-")
            raise ConfigError(option, f"applies to --protocol {protocol} (the frames are {args.protocol}): add "
                                      f"--protocol {protocol}, or leave {option} out")


def _check_replay(args) -> None:
    """``--pcap`` with an option that builds frames, or ``--pcap-stamp`` alone: refused."""
    if args.pcap is None:
        if args.pcap_stamp:
            raise ConfigError("--pcap-stamp", "stamps a capture's frames: give the capture with --pcap FILE")
        return
    for dest in TEMPLATE_OPTIONS:
        if getattr(args, dest, None) != DEFAULTS.get(dest):
            option = "--" + dest.replace("_", "-")
            raise ConfigError(option, "not with --pcap: a replay sends the captured frames as they are (addresses, "
                                      "sizes, protocols, tags); leave it out, or drop --pcap to build frames")


def register(sub) -> None:
    p = sub.add_parser("trial", help="run one trial: send a paced stream, count every frame", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    option(p, "--testbed", "ports, namespaces, MACs and addresses come from it; --tx/--rx then name its ports [tx, "
                           "rx]")
    option(p, "--testbed-option", "for a topology built for the trial, e.g. rules=100", action="append", default=[])
    option(p, "--share-testbed", "with --testbed ID: each counts the other's frames as stray, and its trials are "
                                 "invalid")
    option(p, "--tx", "optionally in network namespace NS (with --testbed: its port name); repeatable, paired in "
                      "order with --rx: one stream per pair, several port pairs in one trial (--tx A --rx B --tx B "
                      "--rx A is bidirectional); without --rx the trial only transmits", action="append")
    option(p, "--rx", "optionally in network namespace NS (with --testbed: its port name); repeatable, paired in "
                      "order with --tx; without --tx the trial only receives: for --duration it counts whatever "
                      "arrives, netrig frames per sender's flow and the rest by EtherType and IP protocol",
           action="append")
    option(p, "--tx-netns", "network namespace of every --tx without its own @NS")
    option(p, "--rx-netns", "network namespace of every --rx without its own @NS")
    option(p, "--family", "with --testbed: of the test bed's addresses [4]", default=4, choices=(4, 6))
    option(p, "--frame-size", "64 (default), imix, simple-imix, random:64-1518, inc:64-1518:64", default="64")
    deprecated(p, "--size", "--frame-size")
    option(p, "--rate", "100kpps, 1.5Mpps, 1Gbps (L1), 1Gbps-l2, 50%% (needs --line-rate), or max (default 10kpps)",
           default="10kpps")
    option(p, "--duration", f"to send: 10s, 500ms, 2m (default {DEFAULT_DURATION_S:g}s)")
    option(p, "--frames", "send this many frames instead of a duration (e.g. 1M; not with --duration)")
    option(p, "--ramp", "a rate ramp in linear steps over --duration: from FROM %% to TO %% of --rate in STEPS equal "
                        "steps (both ends included; up or down), each step counted apart, e.g. 10:100:10")
    option(p, "--drain", f"default {defaults.DRAIN_S:g}s", default=f"{defaults.DRAIN_S:g}s")
    option(p, "--late", "default: the drain time")
    option(p, "--warmup", "traffic before the measurement, not counted (default 0)", default="0s")
    option(p, "--pacing", "what the sender does with time it lost to a stall: smooth (default: at most 2 %% above "
                          "the rate: the frames a stall delayed go out later, the time given back slowly, and what "
                          "is not given back stretches the trial, by at most "
                          "--max-stretch: beyond it the trial stops short of its frames, invalid) or catch-up (keeps "
                          "the duration: frames not caught up by its end are not sent, invalid; the backlog is "
                          "scheduled at 2x the rate, and a 1-ms window can carry more: its batches leave back to "
                          "back, 5x was measured after a stall)", default=PACING_MODES[0], choices=PACING_MODES)
    option(p, "--max-stretch", "smooth pacing: the trial may run this much longer (%% of its length) to send every "
                               f"frame; beyond it the trial is invalid, tester-limited (default "
                               f"{DEFAULT_MAX_STRETCH_PCT:g})", default=str(DEFAULT_MAX_STRETCH_PCT))
    option(p, "--io", f"{', '.join(IO_MODES)} (default auto: the fastest that works)", default="auto",
           choices=IO_MODES)
    option(p, "--queues", "TX and RX (default 1)", default="1")
    option(p, "--busy-poll", "af_xdp: busy-poll the driver this long (SO_BUSY_POLL, prefer busy poll): 50us; 0 = "
                             "off", default="0s")
    option(p, "--ring-frames", "af_xdp: UMEM frames per queue, half to receive (a power of two, 128-65536; default "
                               "16384); af_packet: ring slots. A larger receive ring holds longer stalls of the "
                               "receiver (docs/performance.md, \"A ring four times the size\")", default="0")
    _frame_options(p)
    _port_and_event_options(p)
    p.set_defaults(func=run)
    DEFAULTS.update({k: v for k, v in vars(p.parse_args([])).items() if k not in ("func", "command_prog")})


def _frame_options(p: argparse.ArgumentParser) -> None:
    """What the frames carry: protocol, flows, capture replay, addresses."""
    option(p, "--protocol", "udp (default), tcp, icmp (echo request; ICMPv6 over IPv6), or raw (no IP: the signature "
                            "right after the Ethernet header, see --ethertype); every protocol carries netrig's "
                            "signature, so every frame is counted per flow", default=PROTOCOLS[0], choices=PROTOCOLS)
    option(p, "--tcp-flags", "tcp: flags as letters of FSRPAUEC (FIN SYN RST PSH ACK URG ECE CWR), e.g. SA "
                             "(default A)", default="A")
    option(p, "--tcp-seq", "tcp: the sequence number (default 0)", default="0")
    option(p, "--ethertype", f"raw: the EtherType (default {DEFAULT_RAW_ETHERTYPE:#06x}, local experimental)",
           default=f"{DEFAULT_RAW_ETHERTYPE:#06x}")
    option(p, "--flows", "number of flows (varies the source port; the source MAC for --protocol raw)", default="1")
    option(p, "--vary", f"flows over a range of N values counting up from the stream's (repeatable; every "
                        f"combination is a flow): {', '.join(FLOW_KEYS)}; e.g. --vary dst_ips=16 --vary vlans=4",
           action="append")
    option(p, "--flow-order", "the order frames visit the flows: sequential (default) or pseudorandom (RFC 4814, "
                              "also spreading port numbers; reproducible from --seed)", default="sequential",
           choices=("sequential", "pseudorandom"))
    option(p, "--seed", "seed of the pseudorandom flow order (default 1)", default="1")
    option(p, "--pcap", "replay this capture (pcap or pcapng, Ethernet) instead of building frames: its frames in "
                        "order, looped as often as --duration/--frames need, at --rate (bit rates use the capture's "
                        "mean frame size); without --pcap-stamp the receiver cannot count them: loss is not measured")
    option(p, "--pcap-stamp", "with --pcap: write netrig's signature into every frame with room for it (the first 18 "
                              "bytes of a UDP/TCP payload, ICMP echo data or a raw L2 payload; checksums updated, "
                              "lengths unchanged), one flow per captured 5-tuple, so loss, reordering, duplicates "
                              "and latency are counted per flow; frames without room go out as captured, counted "
                              "apart")
    option(p, "--src-mac", "source MAC (default: the test bed's, else the TX interface's)")
    option(p, "--dst-mac", "destination MAC (default: the test bed's DUT, else the RX interface's; give the DUT's for "
                           "a router; required for a transmit-only trial without a test bed); repeatable: one stream "
                           "per MAC on every port pair, each at --rate and counted apart (a MAC demultiplexer's test)",
           action="append")
    option(p, "--src-ip", f"source address (default: the test bed's, else {DEFAULT_SRC_IP})")
    option(p, "--dst-ip", f"destination address (default: the test bed's, else {DEFAULT_DST_IP})")
    option(p, "--vlan", "802.1Q VLAN id (the first of --vary vlans=N)")
    option(p, "--outer-vlan", "802.1ad service VLAN id in front of the --vlan tag (QinQ)")


def _port_and_event_options(p: argparse.ArgumentParser) -> None:
    """Line rate, CPUs, the live-interface override, mid-trial events, output."""
    option(p, "--line-rate", "e.g. 10Gbps (default: the interface's speed; veth has none)")
    option(p, "--tx-cpus", "e.g. 2,3 (default: the engine's, or the test bed's tester CPUs)")
    deprecated(p, "--tx-cpu", "--tx-cpus", note="a CPU list: --tx-cpus 2,3", extend=True)
    option(p, "--rx-cpus", "e.g. 0,1 (default: the engine's, or the test bed's tester CPUs)")
    deprecated(p, "--rx-cpu", "--rx-cpus", note="a CPU list: --rx-cpus 0,1", extend=True)
    option(p, "--i-know-this-is-live", "(lo, a default route, addresses outside 198.18.0.0/15 and 2001:2::/48); test "
                                       "beds never need it")
    option(p, "--event", "in the test bed's DUT namespace (else on the host, or in --event-netns); the outage per "
                         "flow is measured", action="append")
    option(p, "--at", "2s, 500ms (repeatable)", action="append")
    option(p, "--event-netns", "run --event commands in this network namespace (without --testbed; default: the "
                               "host)")
    option(p, "--event-timeout", f"default {DEFAULT_TIMEOUT_S:g}s", default=f"{DEFAULT_TIMEOUT_S:g}s")
    option(p, "--json")


#: Every option's default, to tell which were given (a receive-only trial refuses sending options).
DEFAULTS: dict[str, object] = {}
#: What a receive-only trial (``--rx`` without ``--tx``) reads; every other option sends.
LISTEN_OPTIONS = ("testbed", "testbed_option", "rx", "rx_netns", "duration", "io", "queues", "busy_poll", "ring_frames",
                  "rx_cpus", "i_know_this_is_live", "json", "func", "command")


def duration_of(args) -> float:
    """``--duration`` in seconds (default :data:`DEFAULT_DURATION_S`)."""
    return DEFAULT_DURATION_S if args.duration is None else args.duration


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """What :func:`netrig.trial.run_trial` takes beyond the ports and streams: when the trial stops
    (``duration_s`` or ``frames``), drain, warm-up, the workers' CPUs, pacing, a ramp's phases and
    the counting interval (a ramp's step, or the events' 10 ms)."""

    duration_s: float | None
    frames: int | None
    drain_s: float
    late_s: float | None
    warmup_s: float
    tx_cpus: tuple[int, ...]
    rx_cpus: tuple[int, ...]
    pacing: str
    max_stretch_pct: float
    phases: list[tuple[float, float]] | None = None
    interval_s: float | None = None
    gap_slots: int = 1

    def kwargs(self) -> dict:
        """As keyword arguments of ``run_trial`` (and the trial's JSON config)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def stop_of(args) -> tuple[float | None, int | None]:
    """When the trial stops, ``(duration_s, frames)``: after ``--frames``, else after ``--duration``;
    both given, one would be ignored: refused."""
    if args.frames is None:
        return duration_of(args), None
    if args.duration is not None:
        raise ConfigError("--frames", f"not with --duration: a trial sends --frames {args.frames} or for "
                                      f"--duration {args.duration:g}s, not both; leave one of them out")
    return None, args.frames


def _ramp(text: str, frames: int | None, duration_s: float | None) -> tuple[list[tuple[float, float]], float]:
    """``--ramp FROM:TO:STEPS`` (percent of --rate) over the trial's duration: the rate phases and
    one counting interval per step."""
    if frames:
        raise ConfigError("--ramp", "a ramp runs for --duration (its steps share it), not for --frames")
    parts = text.split(":")
    try:
        lo, hi, steps = float(parts[0]), float(parts[1]), int(parts[2])
        if len(parts) != 3:
            raise ValueError
    except (ValueError, IndexError):
        raise ConfigError("--ramp", f"{text!r}: give FROM:TO:STEPS in % of --rate, e.g. 10:100:10") from None
    assert duration_s is not None
    step_s = duration_s / steps if steps > 0 else 0.0
    return linear_ramp(lo / 100, hi / 100, steps, step_s), step_s


def ramp_table(res: TrialResult, streams: list[Stream], phases: list[tuple[float, float]]):
    """One row per step of a ramp: intended load, frames sent (and their rate) and received, loss."""
    from rich.table import Table

    t = Table(title="ramp steps", show_header=True)
    for col in ("step", "start", "intended", "sent", "sent rate", "received", "lost"):
        t.add_column(col, justify="right")
    base = sum(s.spec(i).intended_rate_pps or 0.0 for i, s in enumerate(streams))
    for iv in res.intervals:
        scale = phases[iv.phase][1] if iv.phase < len(phases) else 1.0
        rate = iv.frames_sent / iv.duration_s if iv.duration_s else 0.0
        t.add_row(str(iv.phase + 1), f"{iv.start_s:.2f}s", format_pps(base * scale), f"{iv.frames_sent:,}",
                  format_pps(rate), f"{iv.frames_received:,}", f"{iv.frames_sent - iv.frames_received:,}")
    return t


def _flows(args) -> int | dict[str, int]:
    """``--flows`` alone (a count), or the ranges of ``--vary`` (with ``--flows`` as the source port /
    source MAC range when it is above 1)."""
    if not args.vary:
        return args.flows
    counts: dict[str, int] = {}
    if args.flows != 1:
        counts["src_macs" if args.protocol == "raw" else "src_ports"] = args.flows
    for item in args.vary:
        key, sep, value = item.partition("=")
        if not sep or key not in FLOW_KEYS:
            raise ConfigError("--vary", f"{item!r}: give RANGE=N with RANGE one of {', '.join(FLOW_KEYS)}")
        if key in counts:
            raise ConfigError("--vary", f"{key} is given twice (--flows sets the source port/MAC range)")
        try:
            counts[key] = int(value)
        except ValueError:
            raise ConfigError("--vary", f"{item!r}: N must be a whole number of values") from None
    return counts


def _line_rate(args, txi: _native.InterfaceInfo) -> float | None:
    if args.line_rate is not None:
        return args.line_rate
    return float(txi.speed_bps) if txi.speed_bps else None


@dataclasses.dataclass(frozen=True)
class Addressing:
    """A stream's addresses (a test bed's, else the defaults); a MAC ``None``: the interface's."""

    src_ip: str
    dst_ip: str
    src_mac: str | None = None
    dst_mac: str | None = None


@dataclasses.dataclass(frozen=True)
class Pair:
    """One port pair of the trial: where its stream goes out and comes in (``rx`` ``None``: transmit
    only), and the stream's addressing."""

    tx: tuple[str, str | None]
    rx: tuple[str, str | None] | None
    addr: Addressing


def _port_ref(text: str, default_ns: str | None, option: str) -> tuple[str, str | None]:
    return port_ref(text, default_ns, option, f"{option}-netns")


def _pairs(args) -> list[Pair]:
    """The trial's port pairs from ``--tx``/``--rx`` (paired in order), or the test bed's ports."""
    txs, rxs = args.tx or [], args.rx or []
    if not txs and (args.testbed is None or rxs):
        raise ConfigError("--tx", "is required: the interface to send from (or --testbed ID for a test bed's "
                                  "ports)")
    if rxs and len(rxs) != len(txs):
        raise ConfigError("--rx", f"{len(txs)} --tx but {len(rxs)} --rx: pair every --tx with an --rx in order "
                                  "(or give no --rx for a transmit-only trial)")
    if args.testbed is None:
        if getattr(args, "share_testbed", False):
            raise ConfigError("--share-testbed", "needs --testbed ID: it shares a test bed another run holds")
        if not rxs and not args.dst_mac:
            raise ConfigError("--dst-mac", "is required for a transmit-only trial (no --rx): the MAC to send to, "
                                           "e.g. the receiving NIC's")
        default = Addressing(DEFAULT_SRC_IP, DEFAULT_DST_IP)
        # The command's own threads are tester bookkeeping here too, on the CPUs it may use: as
        # ordinary threads they kept the workers waiting (4 × 3-s trials at the top rate on veth:
        # 4 waits, 10.3 ms, by `python`; one trial's receive ring dropped 287 frames).
        bookkeeping_on(sorted(os.sched_getaffinity(0)))
        return [Pair(_port_ref(t, args.tx_netns, "--tx"), _port_ref(r, args.rx_netns, "--rx") if rxs else None,
                     default) for t, r in zip(txs, rxs or [None] * len(txs))]
    for opt in ("tx_netns", "rx_netns"):
        if getattr(args, opt):
            raise ConfigError(f"--{opt.replace('_', '-')}", "comes from the test bed with --testbed: leave it out")
    for opt, names in (("--tx", txs), ("--rx", rxs)):
        if any("@" in n for n in names):
            raise ConfigError(opt, "names a test bed port with --testbed (its namespace comes from the test bed): "
                                   "leave out @NS")
    if args.share_testbed:
        args.io = shared_io(args.io, "--io")
    try:
        tb = Testbed.attach(args.testbed)
    except TestbedError as e:
        raise ConfigError("--testbed", str(e)) from None
    if tb.state.status != "up":
        raise ConfigError("--testbed", f"test bed {args.testbed} is {tb.state.status}, not up")
    repaired = tb.repair()
    if repaired:
        print(f"netrig: test bed {tb.id} repaired: restored {'; '.join(repaired)}", file=sys.stderr)
    # The tester keeps off the DUT's CPUs unless told otherwise: its workers, and this process
    # with every thread it starts (for the rest of this command).
    if tb.tester_cpus():
        args.tx_cpus = args.tx_cpus or tuple(tb.tester_cpus())
        args.rx_cpus = args.rx_cpus or tuple(tb.tester_cpus())
        bookkeeping_on(sorted(set(args.tx_cpus) | set(args.rx_cpus)))
    if not txs:
        txs, rxs = ["tx"], ["rx"]
    pairs = []
    for t_name, r_name in zip(txs, rxs or [None] * len(txs)):
        option = "--tx"
        try:
            t = tb.port(t_name)
            option = "--rx"
            r = tb.port(r_name) if r_name is not None else None
            # Transmit only: addressed as to the test bed's other port (through the DUT), nobody counts.
            to = r if r is not None else next((p for p in tb.ports if p.name != t.name), t)
            addr = Addressing(**tb.stream_defaults(tx=t.name, rx=to.name, family=args.family))
        except ConfigError as e:
            raise ConfigError(option, e.message) from None
        pairs.append(Pair((t.ifname, t.netns), (r.ifname, r.netns) if r is not None else None, addr))
    return pairs


def held_testbed(args) -> contextlib.AbstractContextManager[bool]:
    """The test bed of ``--testbed``, held for the trial (``testbed.state.in_use``): another run on it
    is refused naming the holder, unless ``--share-testbed``."""
    if args.testbed is None:
        return contextlib.nullcontext(False)
    return in_use(args.testbed, args.share_testbed)


def events_of(args) -> list[Event]:
    """The ``--event``/``--at`` pairs, checked against the trial's duration."""
    events = event_pairs(args.event, args.at)
    if not events:
        if args.event_netns:
            raise ConfigError("--event-netns", "needs an --event: it says where --event commands run")
        return []
    if args.frames is not None:
        raise ConfigError("--event", "needs a duration trial: use --duration instead of --frames")
    if args.testbed and args.event_netns:
        raise ConfigError("--event-netns", "comes from the test bed with --testbed (its DUT namespace): leave it out")
    duration = duration_of(args)
    try:
        check_events(events, duration, "--at")
    except ConfigError as e:
        raise ConfigError(e.field, e.message.replace("a longer duration", "a longer --duration")) from None
    check_netns(args.event_netns or None, "--event-netns")
    return events


def event_runner(args) -> CommandRunner:
    """Where ``--event`` commands run: the test bed's DUT namespace, else ``--event-netns`` or the host."""
    timeout = args.event_timeout
    if args.testbed is None:
        return CommandRunner(args.event_netns, {}, timeout)
    tb = Testbed.attach(args.testbed)
    env = tb.command_env()
    return CommandRunner(env.get("NETRIG_DUT_NETNS"), env, timeout)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What ``netrig trial`` runs: the ports (each interface once), one stream per port pair and
    destination MAC, whether anything receives, and the run's keyword arguments."""

    ports: list[Port]
    streams: list[Stream]
    receive: bool
    run: RunSpec

    @property
    def title(self) -> str:
        names = [p.ifname for p in self.ports]
        if not self.receive:
            return f"trial {', '.join(names)} (transmit only)"
        legs = [f"{self.ports[s.tx_port].ifname} → {self.ports[s.rx_port].ifname}" for s in self.streams]
        return "trial " + ", ".join(dict.fromkeys(legs))


def _infos(ports: list[Port], sending: set[int]) -> list[_native.InterfaceInfo]:
    """Each port's interface; one that does not exist is named with the option that gave it."""
    out = []
    for i, port in enumerate(ports):
        try:
            out.append(port.info())
        except InterfaceError as e:
            raise ConfigError("--tx" if i in sending else "--rx", str(e)) from None
    return out


def build(args) -> Plan:
    try:
        events = events_of(args)
        pairs = _pairs(args)
        ports: list[Port] = []
        index: dict[tuple[str, str | None], int] = {}

        def port(ref: tuple[str, str | None]) -> int:
            if ref not in index:
                index[ref] = len(ports)
                ports.append(_port(args, ref))
            return index[ref]

        _check_replay(args)
        _check_protocol_options(args)
        legs = [Leg(port(p.tx), port(p.rx) if p.rx is not None else None, p.addr) for p in pairs]
        receive = all(leg.rx is not None for leg in legs)
        infos = _infos(ports, {index[p.tx] for p in pairs})
        line = _line_rate(args, infos[0])
        if args.rate.kind == "percent_line" and line is None:
            raise ConfigError("--rate", f"{args.rate} is a share of the line rate, and {ports[0].ifname} reports no "
                                        "link speed (veth): give it with --line-rate, e.g. --line-rate 10Gbps")
        # Frames larger than the MTU allows are refused by the engine too; say it in CLI terms here.
        size, max_size = args.frame_size.size, largest_frame(min(i.mtu for i in infos))
        if size is not None and size > max_size and args.pcap is None:
            raise ConfigError("--frame-size", f"{size} B is above the MTU of {'/'.join(p.ifname for p in ports)} "
                                              f"(largest frame {max_size} B); raise the MTU or use smaller frames")
        streams = _streams(args, legs, ports, infos, line)
        return Plan(ports, streams, receive, _run_spec(args, events, receive))
    except ConfigError as e:
        raise rename_field(e, FIELDS) from None


def _port(args, ref: tuple[str, str | None]) -> Port:
    return Port(ref[0], netns=ref[1], io=args.io, queues=args.queues, ring_frames=args.ring_frames,
                busy_poll_us=round(args.busy_poll * 1e6), i_know_this_is_live=args.i_know_this_is_live)


@dataclasses.dataclass(frozen=True)
class Leg:
    """A port pair of the trial as indexes into its ports (``rx`` ``None``: transmit only)."""

    tx: int
    rx: int | None
    addr: Addressing


def _streams(args, legs: list[Leg], ports: list[Port], infos: list[_native.InterfaceInfo],
             line: float | None) -> list[Stream]:
    """One stream per port pair and destination MAC, each with the options' (parsed) values."""
    macs: list[str | None] = list(args.dst_mac or [None])
    if len(set(macs)) != len(macs):
        raise ConfigError("--dst-mac", "is given twice with the same MAC: give each destination once")
    rate_kw = {"rate_pps": args.rate.value} if args.rate.kind == "pps" else {"rate": args.rate}
    streams = []
    for leg in legs:
        rx_port = leg.rx if leg.rx is not None else leg.tx
        for mac in macs:
            dst = given(mac, leg.addr.dst_mac or (infos[leg.rx].mac if leg.rx is not None else ""))
            name = "cli"
            if len(legs) > 1 or len(macs) > 1:
                name = f"{ports[leg.tx].ifname}>{ports[leg.rx].ifname if leg.rx is not None else '-'}"
                name += f"@{dst}" if len(macs) > 1 else ""
            if args.pcap is not None:
                streams.append(Stream(pcap=args.pcap, pcap_stamp=args.pcap_stamp, line_rate_bps=line, name=name,
                                      tx_port=leg.tx, rx_port=rx_port, **rate_kw))
                continue
            streams.append(Stream(
                frame_size=args.frame_size, src_mac=given(args.src_mac, leg.addr.src_mac or infos[leg.tx].mac),
                dst_mac=dst, src_ip=given(args.src_ip, leg.addr.src_ip), dst_ip=given(args.dst_ip, leg.addr.dst_ip),
                vlan=args.vlan, flows=_flows(args), line_rate_bps=line, protocol=args.protocol,
                tcp_flags=args.tcp_flags, tcp_seq=args.tcp_seq, outer_vlan=args.outer_vlan,
                ethertype=parse_ethertype(args.ethertype, "--ethertype"), flow_order=args.flow_order, seed=args.seed,
                name=name, tx_port=leg.tx, rx_port=rx_port, **rate_kw))
    return streams


def given(value: str | None, default: str) -> str:
    """An address option's value, else the default (an empty value is refused by the stream, not replaced)."""
    return default if value is None else value


def _run_spec(args, events: list[Event], receive: bool) -> RunSpec:
    """When the trial stops, its drain, warm-up, CPUs and pacing, a ramp's phases, the events' intervals."""
    duration_s, frames = stop_of(args)
    if args.ramp is not None and events:
        raise ConfigError("--event", "not with --ramp: a ramp counts per step and an event per 10 ms; run the event "
                                     "at a constant --rate")
    if events and not receive:
        raise ConfigError("--event", "needs a receiving port (--rx): an outage is measured from the frames received")
    phases, interval_s = _ramp(args.ramp, frames, duration_s) if args.ramp is not None else (None, None)
    # Nothing receives: no frames in flight to wait for (unless a drain is asked for).
    drain_s = 0.0 if not receive and args.drain == defaults.DRAIN_S else args.drain
    spec = RunSpec(duration_s, frames, drain_s, args.late, args.warmup, args.tx_cpus or (), args.rx_cpus or (),
                   args.pacing, args.max_stretch, phases, interval_s)
    if events:
        spec = dataclasses.replace(spec, interval_s=INTERVAL_S, gap_slots=len(events) + 1)
    return spec


#: From this many flows a trial's table shows the memory their state took.
MANY_FLOWS = 1024


def flow_memory(nbytes: int, flows: int) -> str:
    """The flows' measured memory, in MiB and per flow."""
    return f"{nbytes / 2**20:,.1f} MiB, {nbytes / flows:,.0f} B per flow"


def unpinned(failures: Sequence[_native.PinFailure]) -> str:
    """The workers that did not get their CPU, for the CPUs row ("" when every one did)."""
    return "".join(f"\n[yellow]{f}[/]" for f in failures)


def _count_rows(t, res: TrialResult, receive: bool, replays: bool) -> None:
    """Frames sent and what came back; a transmit-only trial says its loss is not measured."""
    if not receive:
        t.add_row("frames sent", f"{res.frames_sent:,}")
        t.add_row("lost", "not measured: no receive port (--rx)")
        return
    t.add_row("frames sent / received", f"{res.frames_sent:,} / {res.frames_received:,}")
    if all(s.loss_measured for s in res.streams):
        t.add_row("lost (ratio)", f"{res.frames_lost:,} ({100 * res.loss_ratio:.4f} %)"
                  + (" of the stamped frames" if replays else ""))
    else:
        rx_port = sum(p.rx_frames for i, p in enumerate(res.ports) if any(s.rx_port == i for s in res.streams))
        t.add_row("lost", "not measured: the replayed frames carry no signature (--pcap-stamp stamps them)")
        t.add_row("receiving port saw (all frames)", f"{rx_port:,}")
    t.add_row("reordered / duplicated / late", f"{res.reordered:,} / {res.duplicated:,} / {res.late:,}")
    # Frames the receiver saw that are not this trial's: never counted as received.
    t.add_row("not counted: foreign / stray / forged",
              f"{res.frames_foreign:,} / {res.frames_stray:,} / {res.frames_forged:,}")


def result_table(res: TrialResult, stream: Stream, title: str, receive: bool = True, invalid: str | None = None):
    """The trial's figures; ``receive`` ``False`` (a transmit-only trial): nothing was counted at the
    far end, so loss, the received rate and latency are not shown as if they were measured;
    ``invalid``: why the trial is invalid, where more than its own counts say so (:class:`Judged`)."""
    from rich.table import Table

    t = Table(title=title, show_header=True)
    t.add_column("metric")
    t.add_column("value", justify="right")
    size = stream.mean_frame_size
    line = stream.line_rate_bps
    replays = [s.replay for s in res.streams if s.replay is not None]
    for r in replays:
        t.add_row("capture", f"{r.file}: {r.frames_per_pass:,} frames, {r.bytes_per_pass:,} B per pass")
        t.add_row("passes / stamped / unstamped", f"{r.passes:,.2f} / {r.frames_stamped:,} / {r.frames_unstamped:,}"
                  + (f" ({r.flows:,} flows)" if r.stamped else ""))
    _count_rows(t, res, receive, bool(replays))
    intended = res.intended_rate_pps
    t.add_row("intended rate", format_pps(intended) if intended else "max")
    l1_bps = res.tx_rate_pps * (size + _native.WIRE_OVERHEAD_BYTES) * 8
    t.add_row("achieved TX rate", f"{format_pps(res.tx_rate_pps)}  {format_bps(l1_bps)} L1")
    if receive:
        t.add_row("received rate", f"{format_pps(res.rx_rate_pps)}  {format_bps(res.rx_rate_pps * size * 8)} L2")
    if line:
        pct = 100 * res.tx_rate_pps / _native.line_rate_fps(line, size)
        t.add_row("% of line rate", f"{pct:.2f} % of {format_bps(line)}")
    lat = res.latency
    if lat.samples:
        us = lambda ns: f"{ns / 1000:.1f}"
        t.add_row("latency µs min/mean/p50", f"{us(lat.min_ns)} / {us(lat.mean_ns)} / {us(lat.p50_ns)}")
        t.add_row("latency µs p90/p99/p99.9/max",
                  f"{us(lat.p90_ns)} / {us(lat.p99_ns)} / {us(lat.p999_ns)} / {us(lat.max_ns)}")
        ipdv = (f"{us(lat.ipdv_mean_ns)} / {us(lat.ipdv_p99_ns)} / {us(lat.ipdv_max_ns)}" if lat.ipdv_samples
                else "not measured (no flow received two frames)")
        t.add_row("PDV p99 / IPDV mean/p99/max µs", f"{us(lat.pdv_ns)} / {ipdv}")
    sm = res.smoothness
    stretch = f"stretched {res.tx_stretch_ns / 1e6:.2f} ms" if res.pacing == "smooth" else \
        f"last frame {res.tx_stretch_ns / 1e6:.2f} ms late"
    t.add_row("pacing", f"{res.pacing}: {stretch}, max lag {res.tx_max_lag_ns / 1e6:.2f} ms")
    if sm.intended_frames > 0:
        t.add_row("peak in 1 ms (intended)", f"{sm.peak_frames:,} ({sm.intended_frames:,.1f}): {sm.peak_ratio:.3f}x")
    t.add_row("departure gap µs p50/p99/max",
              f"{sm.gap_p50_ns / 1000:.1f} / {sm.gap_p99_ns / 1000:.1f} / {sm.gap_max_ns / 1000:.1f}")
    t.add_row("tester RX drops", f"{res.tester_rx_drops:,}")
    flows = sum(s.flows for s in res.streams)
    if flows >= MANY_FLOWS:
        t.add_row("flow state memory (measured)", flow_memory(res.flow_memory_bytes, flows))
    t.add_row("I/O", " → ".join(f"{p.name} ({p.backend})" for p in res.ports))
    t.add_row("timestamps", res.ports[-1].timestamp_source)
    t.add_row("CPUs tx / rx",
              f"{','.join(map(str, res.tx_cpus))} / {','.join(map(str, res.rx_cpus))}{unpinned(res.pin_failures)}")
    reason = invalid or (None if res.valid else res.invalid_reason)
    t.add_row("valid", f"[red]no[/]: {reason}" if reason else "yes")
    return t


def listen_ports(args) -> list[Port]:
    """The ports of a receive-only trial; every option it would ignore is refused."""
    for dest, default in DEFAULTS.items():
        if dest not in LISTEN_OPTIONS and getattr(args, dest, default) != default:
            option = "--" + dest.replace("_", "-")
            raise ConfigError(option, "a receive-only trial (--rx without --tx) sends nothing: leave it out, or add "
                                      "--tx to send")
    refs: list[tuple[str, str | None]] = []
    if args.testbed is None:
        refs = [_port_ref(r, args.rx_netns, "--rx") for r in args.rx]
    else:
        if args.rx_netns or any("@" in r for r in args.rx):
            raise ConfigError("--rx", "names a test bed port with --testbed: leave out @NS and --rx-netns")
        try:
            tb = Testbed.attach(args.testbed)
            refs = [(p.ifname, p.netns) for p in (tb.port(r) for r in args.rx)]
        except TestbedError as e:
            raise ConfigError("--testbed", str(e)) from None
        except ConfigError as e:
            raise ConfigError("--rx", e.message) from None
    if len(set(refs)) != len(refs):
        raise ConfigError("--rx", "names the same interface twice: give each once")
    return [_port(args, ref) for ref in refs]


#: Names of EtherTypes and IP protocols in the receive-only table.
ETHERTYPES = {0x0800: "IPv4", 0x0806: "ARP", 0x86DD: "IPv6", 0x8100: "802.1Q", 0x88A8: "802.1ad", 0x88CC: "LLDP",
              0x88B5: "local experimental", 0x8809: "slow protocols (LACP)", 0x0000: "(runt)"}
IP_PROTOCOLS = {0: "hop-by-hop options", 1: "ICMP", 2: "IGMP", 6: "TCP", 17: "UDP", 47: "GRE", 50: "ESP",
                58: "ICMPv6", 132: "SCTP"}


def foreign_name(ethertype: int, proto: int | None) -> str:
    name = ETHERTYPES.get(ethertype, f"{ethertype:#06x}")
    if proto is None:
        return name if ethertype in ETHERTYPES else f"EtherType {name}"
    return f"{name}/{IP_PROTOCOLS.get(proto, f'protocol {proto}')}"


def listen_tables(res: ListenResult):
    """Per port, per sender's trial (its flows summed) and per kind of foreign frame."""
    from rich.table import Table

    ports = Table(title=f"received in {res.duration_s:.2f} s (receive only)")
    for col in ("port", "I/O", "frames", "rate", "tester ring drops"):
        ports.add_column(col, justify="left" if col in ("port", "I/O") else "right")
    for p in res.ports:
        rate = p.frames / res.duration_s if res.duration_s else 0.0
        ports.add_row(p.name, p.backend, f"{p.frames:,}", format_pps(rate), f"{p.ring_drops:,}")
    tables = [ports]
    senders: dict[int, list] = {}
    for f in res.flows:
        senders.setdefault(f.trial, []).append(f)
    if senders:
        t = Table(title="netrig frames, per sender's trial (its tag)")
        for col in ("trial tag", "flows", "frames", "missing", "duplicated", "reordered", "warm-up"):
            t.add_column(col, justify="right")
        for tag, flows in senders.items():
            t.add_row(f"{tag:#x}", f"{len(flows):,}", *(f"{sum(getattr(f, k) for f in flows):,}"
                                                     for k in ("frames", "missing", "duplicated", "reordered",
                                                               "warmup")))
        tables.append(t)
    if res.foreign:
        t = Table(title="other frames")
        for col in ("kind", "frames", "bytes"):
            t.add_column(col, justify="left" if col == "kind" else "right")
        for k in sorted(res.foreign, key=lambda k: -k.frames):
            t.add_row(foreign_name(k.ethertype, k.ip_proto), f"{k.frames:,}", f"{k.bytes:,}")
        tables.append(t)
    return tables


def run_listen(args) -> int:
    """``--rx`` without ``--tx``: count whatever arrives for ``--duration``."""
    try:
        ports = listen_ports(args)
        duration = duration_of(args)
    except ConfigError as e:
        raise rename_field(e, FIELDS) from None
    con = console(stderr=args.json)
    plain = Every(PLAIN_PROGRESS_S)

    def progress(snap: Snapshot) -> None:
        if plain.due():
            print(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} listening {snap.elapsed_s:.1f}s/{duration:g}s "
                  f"rx {snap.rx_frames:,}", file=sys.stderr, flush=True)

    interrupted: InterruptedTrial | None = None
    try:
        res: ListenResult = listen(ports, duration, rx_cpus=args.rx_cpus, progress=progress)
    except InterruptedTrial as e:
        partial = getattr(e, "partial", None)
        if partial is None:
            raise
        res, interrupted = partial, e
    except ConfigError as e:
        raise rename_field(e, {**FIELDS, "ifname": "--rx", "duration_s": "--duration"}) from None
    if args.json:
        print(json.dumps({"config": {"rx": [p.ifname for p in ports], "duration_s": duration},
                          "listen": res.to_dict(), "interrupted": interrupted is not None}, indent=2))
    else:
        for t in listen_tables(res):
            con.print(t)
    drops = sum(p.ring_drops for p in res.ports)
    if res.error:
        print(f"netrig: receiving stopped early: {res.error}", file=sys.stderr)
    for f in res.pin_failures:
        print(f"netrig: {f}: it ran where the scheduler put it", file=sys.stderr)
    if drops:
        print(f"netrig: the tester's own ring dropped {drops:,} frames: the counts above miss them (they are "
              "the tester's loss, not the sender's); try --queues, --io af_xdp or a quieter CPU", file=sys.stderr)
    if interrupted is not None:
        print(f"netrig: {interrupted.reason}: receiving stopped, nothing left running", file=sys.stderr)
        return interrupt_status(interrupted)
    return 1 if drops or res.error else 0


def streams_table(res: TrialResult, plan: Plan):
    """One row per stream (port pair and destination MAC): what it sent and what came back."""
    from rich.table import Table

    t = Table(title="per stream", show_header=True)
    for col in ("stream", "ports", "dst MAC", "sent", "received", "lost", "loss %", "sent rate"):
        t.add_column(col, justify="left" if col in ("stream", "ports", "dst MAC") else "right")
    for s, r in zip(plan.streams, res.streams):
        legs = plan.ports[s.tx_port].ifname + (f" → {plan.ports[s.rx_port].ifname}" if plan.receive else "")
        if not plan.receive:
            t.add_row(r.name, legs, s.dst_mac, f"{r.frames_sent:,}", "—", "—", "—", format_pps(r.tx_rate_pps))
            continue
        t.add_row(r.name, legs, s.dst_mac, f"{r.frames_sent:,}", f"{r.frames_received:,}", f"{r.frames_lost:,}",
                  f"{100 * r.loss_ratio:.4f}", format_pps(r.tx_rate_pps))
    return t


def events_table(results: tuple[EventResult, ...]):
    """Every event: what its command did, the outage (longest flow), frames lost, recovery; then
    the flows with an outage."""
    from rich.table import Table

    t = Table(title="events", show_header=True)
    for c in ("at", "command", "exit", "outage", "frames lost", "recovery", "flows out"):
        if c == "command":
            t.add_column(c, max_width=40, no_wrap=True, overflow="ellipsis")
        else:
            t.add_column(c, justify="right")
    ms = lambda s: "—" if s is None else f"{s * 1000:.1f} ms"
    for e in results:
        r = e.run
        status = "ok" if r.ok else f"[red]{r.problem()}[/]"
        out = ms(e.outage_s) if e.recovered else "[red]never recovered[/]"
        t.add_row(f"{r.at_s:g} s", r.command, status, out, f"{e.frames_lost:,}", ms(e.recovery_s),
                  f"{len(e.flows)}/{e.flows_total}")
    return t


def run(args) -> int:
    require_root("sending and receiving raw frames")
    # The command makes itself tester bookkeeping on a test bed (``bookkeeping_on``); called
    # in-process (the API, the tests) the caller's thread gets its placement back.
    with thread_placement_restored(), built_testbed(args):
        if args.rx and not args.tx:
            return run_listen(args)
        # The test bed is held before anything else touches it (a repair, the tester's CPUs): a
        # second run is refused at once, not once this one has made itself tester bookkeeping and
        # waits behind a busy worker of the run that holds it.
        with held_testbed(args):
            return run_held(args)


@contextlib.contextmanager
def built_testbed(args) -> Iterator[None]:
    """``--testbed NAME``: a test bed of that topology (with ``--testbed-option``) built for the trial
    and removed after it (on success, error and Ctrl-C); ``--testbed ID`` is used as it is."""
    opts = testbed_options(args.testbed_option)
    if args.testbed is None or TESTBED_ID_RE.match(args.testbed):
        if opts:
            raise ConfigError("--testbed-option", "applies to a topology built for the trial (--testbed NAME), "
                                                  "not to a test bed that is up already")
        yield
        return
    if args.testbed not in TOPOLOGIES:
        raise ConfigError("--testbed", f"{args.testbed!r} is neither a topology ({', '.join(TOPOLOGIES)}) nor the "
                                       "id of a test bed that is up (`netrig testbed status`)")
    try:
        tb = Testbed.create(args.testbed, **opts)
    except ConfigError as e:
        raise ConfigError(f"--testbed-option {e.field}", e.message) from None
    with tb:
        args.testbed = tb.id
        yield


@dataclasses.dataclass
class RateWindow:
    """The progress line's rates over the last look: when it was, the counts then, the rates."""

    t: float = dataclasses.field(default_factory=time.monotonic)
    tx_frames: int = 0
    rx_frames: int = 0
    tx_pps: float = 0.0
    rx_pps: float = 0.0

    def update(self, snap: Snapshot) -> tuple[float, float]:
        """The TX and RX rates since the last look at least 0.15 s ago (which this one becomes)."""
        now = time.monotonic()
        dt = now - self.t
        if dt > 0.15:
            self.tx_pps, self.rx_pps = (snap.tx_frames - self.tx_frames) / dt, (snap.rx_frames - self.rx_frames) / dt
            self.t, self.tx_frames, self.rx_frames = now, snap.tx_frames, snap.rx_frames
        return self.tx_pps, self.rx_pps


class Every:
    """Due once per ``period_s`` (the timestamped progress lines without a terminal)."""

    def __init__(self, period_s: float) -> None:
        self.period_s, self.next = period_s, time.monotonic() + period_s

    def due(self) -> bool:
        if time.monotonic() < self.next:
            return False
        self.next += self.period_s
        return True


def progress_line(snap: Snapshot, total_s: float | None, window: RateWindow) -> str:
    """One progress line. While sending: the rates over the last look (``window`` keeps it). Once the
    sending is over (draining, done): the trial's own mean rates and its drain time apart, never a
    "0 fps" that is only the sender having stopped, nor an elapsed time past the duration."""
    txr, rxr = window.update(snap)
    when, what = f"{snap.elapsed_s:6.1f}s" + (f"/{total_s:.0f}s" if total_s else ""), ""
    if total_s and snap.phase in ("draining", "done"):
        txr, rxr, what = snap.tx_frames / total_s, snap.rx_frames / total_s, "mean "
        when = f"{total_s:6.1f}s/{total_s:.0f}s +{max(0.0, snap.elapsed_s - total_s):.1f}s drain"
    return (f"[bold]{snap.phase:>8}[/] {when}  tx {snap.tx_frames:>12,} ({what}{format_pps(max(txr, 0))})  "
            f"rx {snap.rx_frames:>12,} ({what}{format_pps(max(rxr, 0))})")


def run_held(args) -> int:
    plan = build(args)
    # The ports are held before anything starts: a second netrig process on one of them is refused at once.
    with ports_held([(p.ifname, p.netns) for p in plan.ports], "--tx", getattr(args, "share_testbed", False)):
        return run_plan(args, plan)


def run_plan(args, plan: Plan) -> int:
    events = events_of(args)
    clock = EventClock(events, event_runner(args)) if events else None
    con = console(stderr=args.json)
    window = RateWindow()

    def line(snap: Snapshot) -> str:
        return progress_line(snap, plan.run.duration_s, window)

    from rich.live import Live

    live = Live("", console=con, refresh_per_second=8, transient=True) if con.is_terminal else None
    plain = Every(PLAIN_PROGRESS_S)

    def progress(snap: Snapshot) -> None:
        if clock is not None:
            clock.progress(snap.phase, snap.elapsed_s)
        if live is not None:
            live.update(line(snap))
        elif plain.due():  # no terminal (CI logs): a timestamped line now and then
            text = " ".join(Text.from_markup(line(snap)).plain.split())
            print(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} {text}", file=sys.stderr, flush=True)

    try:
        if live is not None:
            live.start()
        try:
            with clock.on_time() if clock is not None else contextlib.nullcontext():
                res, seen = _watched_run(args, plan, progress, clock.follow if clock is not None else None)
        finally:
            if live is not None:
                live.stop()
            runs: list[EventRun] = clock.finish(timeout_s=60.0) if clock is not None else []
    except InterruptedTrial as e:
        _print_partial(args, con, plan, getattr(e, "partial", None))
        print(f"netrig: {e.reason}: traffic stopped, nothing left running", file=sys.stderr)
        return interrupt_status(e)
    except ConfigError as e:
        raise rename_field(e, FIELDS) from None
    return _print_result(args, con, plan, Judged.of(res, testbed_problems(args), seen), events, runs)


def _watched_run(args, plan: Plan, progress: Callable[[Snapshot], None],
                 follow: Callable[[_native.Trial], None] | None) -> tuple[TrialResult, TrialPlatform | None]:
    """The trial under the platform's stall watch (``measure.platform.platform_watch``: the test bed's
    DUT CPUs and tasks, the tester's CPUs and, told by the engine, its workers): its result and
    the platform over its sending, the stalls and the DUT ring's drops in them (None where the
    kernel refuses the watch)."""
    tb = _attached(args.testbed)
    with platform_watch(tb, (*plan.run.tx_cpus, *plan.run.rx_cpus)) as (platform, _note):
        res = run_trial(ports=plan.ports, streams=plan.streams, receive=plan.receive, progress=progress,
                        follow=follow, watch=platform.watch if platform is not None else None, **plan.run.kwargs())
        return res, platform.trial(res, res.intended_rate_pps) if platform is not None else None


def _attached(tb_id: str | None) -> Testbed | None:
    """The test bed ``tb_id`` (None: ports by name, or one that cannot be read: the repair after
    the trial says what is wrong with it)."""
    if tb_id is None:
        return None
    try:
        return Testbed.attach(tb_id)
    except TestbedError:
        return None


def testbed_problems(args) -> list[str]:
    """After the trial, what is broken in its test bed (``--testbed``), in words, as ``netrig run``
    judges its trials: what a repair cannot restore (a DUT process that died, a link gone or down,
    a namespace gone) made the trial measure a broken test bed, not the DUT. What a link flap
    removed (routes, neighbours) is restored, as before every trial of a run."""
    if args.testbed is None:
        return []
    try:
        Testbed.attach(args.testbed).repair()
    except TestbedError as e:
        return [str(e)]
    return []


@dataclasses.dataclass(frozen=True)
class Judged:
    """A trial's result and its validity, the test bed's state after it included."""

    res: TrialResult
    valid: bool
    invalid_reason: str | None
    #: The platform's stalls over the trial's sending (None: not measured).
    stalls: TrialStalls | None = None
    #: The DUT ring's drops over it and those in DUT stalls (None: no wire, or not measured).
    wire: WireLoss | None = None

    @staticmethod
    def of(res: TrialResult, problems: Sequence[str], seen: TrialPlatform | None = None) -> Judged:
        """An invalid trial's reason says who held the tester's CPUs over it, when any stall did; a
        trial whose DUT ring dropped frames while netrig's own threads held the DUT's CPU is invalid."""
        stalls, wire = (seen.stalls, seen.wire) if seen is not None else (None, None)
        reasons = [f"after the trial: {p}" for p in problems]
        held = holder_words(stalls.tester) if stalls is not None and not res.valid else ""
        ours = wire.tester_reason() if wire is not None else None
        reasons += filter(None, [res.invalid_reason, held and f"the tester's CPUs were held {held}", ours])
        return Judged(res, res.valid and not problems and not ours, "; ".join(reasons) or None, stalls, wire)

    def to_dict(self) -> dict:
        stalls = {"stalls": self.stalls.to_dict()} if self.stalls is not None else {}
        wire = {"dut_ring_loss": self.wire.to_dict()} if self.wire is not None else {}
        return {**self.res.to_dict(), "valid": self.valid, "invalid_reason": self.invalid_reason, **stalls, **wire}


def _print_partial(args, con, plan: Plan, partial: TrialResult | None) -> None:
    """What an interrupted trial had counted."""
    if partial is None:
        return
    if args.json:
        print(json.dumps({"interrupted": True, "result": partial.to_dict()}, indent=2))
        return
    con.print(result_table(partial, plan.streams[0], "partial result (interrupted)", plan.receive))
    if len(plan.streams) > 1:
        con.print(streams_table(partial, plan))


def _print_result(args, con, plan: Plan, judged: Judged, events, runs) -> int:
    """The trial's table (or JSON), its events, and its exit status."""
    stream, res = plan.streams[0], judged.res
    results = event_results(res, runs) if runs else ()
    if args.json:
        config = {**stream.to_dict(), **plan.run.kwargs(), "events": [e.to_dict() for e in events]}
        if len(plan.streams) > 1:
            config["streams"] = [s.to_dict() for s in plan.streams]
        doc: dict = {"config": config, "result": judged.to_dict()}
        if runs:
            doc["events"] = [e.to_dict() for e in results]
        print(json.dumps(doc, indent=2, default=str))
    else:
        con.print(result_table(res, stream, plan.title, plan.receive, judged.invalid_reason))
        if len(plan.streams) > 1:
            con.print(streams_table(res, plan))
        if plan.run.phases is not None:
            con.print(ramp_table(res, plan.streams, plan.run.phases))
        if judged.stalls is not None:
            con.print(f"  stalls over 1 ms: {stall_words(judged.stalls)}", soft_wrap=True)
        if judged.wire is not None:
            con.print(f"  DUT ring: {ring_loss_words(judged.wire)}", soft_wrap=True)
        for p in res.ports:  # what --io picked and why (driver, XDP mode, zero-copy or not)
            con.print(f"  {p.name}: {p.backend}: {p.notes}", soft_wrap=True)
        if results:
            con.print(events_table(results))
    failed = [r for r in runs if not r.ok]
    for r in failed:  # reported, the trial's counts stand
        print(f"netrig: --event {r.command!r} at {r.at_s:g}s {r.problem()}: fix the command (try it by hand in "
              f"{'namespace ' + r.netns if r.netns else 'a shell'}) or raise --event-timeout", file=sys.stderr)
    return 0 if judged.valid and not failed else 1
