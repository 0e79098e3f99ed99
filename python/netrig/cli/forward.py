"""``netrig forward``: the host as the device under test, a forwarder like DPDK testpmd/l2fwd.

Frames received on a port are forwarded by one pinned worker per (port, queue), with the engine's
own port backends (af_xdp, af_packet, socket). Modes: ``io`` (unchanged, ports paired 1↔2, 3↔4, an
odd last port to itself), ``mac`` (source MAC := the egress port's, destination := its peer MAC),
``macswap`` (MACs swapped, sent back out of the ingress port), ``rxonly`` (counted and dropped),
``l2fwd`` (as ``mac``, ports strictly in pairs). With af_xdp every frame of a queue is steered to
the forwarder by an XDP program (``netrig_fwd``) that is detached when it stops. With ``--io
xdp`` nothing runs in user space: an XDP program per port (``netrig_xdpfwd``) rewrites and redirects
frames in the kernel (XDP_REDIRECT through a DEVMAP; XDP_TX for macswap; XDP_DROP for rxonly) on
every queue of the port; its counters come from a per-CPU map. On veth the egress veth's peer must
have an XDP program or GRO on, or the kernel drops the redirected frames (docs/forwarder.md).

Per-second counters (rx/tx frames per second, drops) per port and queue go to stderr; the JSON
summary goes to stdout (``--json`` or not), and with ``--out DIR`` to ``DIR/forward.json`` too.
Ctrl-C or SIGTERM stop it cleanly, as ``--duration`` does.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from netrig import _native
from netrig.cli.common import (
    add_metrics_listen,
    check_choice,
    check_netns,
    check_range,
    check_writable,
    metrics_endpoint,
    port_ref,
    rename_field,
    require_root,
)
from netrig.errors import ConfigError, Terminated
from netrig.methodology.vocabulary import JsonFlag, deprecated, option
from netrig.model import parse_duration
from netrig.testbed.state import ports_held

BACKENDS = ("af_xdp", "af_packet", "socket", "auto", "xdp")
#: The in-kernel backend (XDP_REDIRECT): no user-space worker, queue, CPU or batch.
KERNEL_BACKEND = "xdp"
#: Engine field → CLI option, for one-line errors that name the option.
OPTIONS = {"mode": "--forward-mode", "peer_mac": "--peer-mac", "cpus": "--dut-cpus", "batch": "--batch",
           "faults": "--faults", "ports": "--port", "ifname": "--port", "queues": "--queues", "io": "--io",
           "netns": "--netns"}


def register(sub) -> None:
    p = sub.add_parser("forward", help="forward frames between ports like testpmd (the host as the DUT)",
                       description=__doc__)
    option(p, "--port", "an interface to forward on, in namespace NS or --netns (ports pair up 1↔2, 3↔4, ...)",
           action="append", default=[])
    option(p, "--forward-mode", f"{', '.join(_native.FORWARD_MODES)} (default io)", default="io")
    deprecated(p, "--mode", "--forward-mode")
    option(p, "--io", f"{', '.join(BACKENDS)} (default af_xdp; xdp: forward in the kernel with XDP_REDIRECT, every "
                      "queue, no workers)", default="af_xdp")
    deprecated(p, "--backend", "--io")
    option(p, "--queues", f"pinned (1..{_native.MAX_QUEUES}, default 1)")
    option(p, "--peer-mac", "destination MAC of frames leaving each port, one per --port in order (modes mac, l2fwd; "
                            "default 02:00:00:00:00:<port index>)", action="append", default=[])
    option(p, "--duration", "stop after T: 10s, 500ms (default: run until Ctrl-C or SIGTERM)")
    option(p, "--netns", "of every --port without its own @NS")
    option(p, "--dut-cpus", "here of the forwarder's workers (worker i, port-major, on the i-th, cycling; default: "
                            "worker i on CPU i mod the CPUs)")
    deprecated(p, "--cpus", "--dut-cpus")
    option(p, "--batch", f"1..{_native.MAX_FORWARD_BATCH}, default 64")
    option(p, "--faults", "probabilities per frame drop, duplicate, reorder (held back until distance more frames "
                          "passed, default 3), delay=P@DURATION (held back that long; give it again for another "
                          "class), and seed (worker i seeded seed + i, default 1): e.g. "
                          "drop=0.01,duplicate=0.005,reorder=0.005,distance=20,delay=0.02@10ms; the summary's faults "
                          "says what it did")
    option(p, "--interval", "a statistics line per port and queue every T (default 1s; 0 = none)", default="1s")
    option(p, "--json", "the forwarder's summary is JSON either way (--json FILE, the old spelling, still writes "
                        "FILE: use --out DIR)", action=JsonFlag)
    option(p, "--out", "the JSON summary is written to DIR/forward.json too [none]")
    option(p, "--i-know-this-is-live", "override the transmit guard")
    add_metrics_listen(p, "the forwarder's counters per port and queue")
    p.set_defaults(func=run)


def build(args) -> dict[str, Any]:
    """Every option checked, before anything is opened; the Forwarder's keyword arguments."""
    if not args.port:
        raise ConfigError("--port", "give at least one interface to forward on (e.g. --port veth0 --port veth1)")
    check_choice(args.forward_mode, _native.FORWARD_MODES, "--forward-mode", "a forwarding mode")
    check_choice(args.io, BACKENDS, "--io", "a forwarder's I/O backend")
    kernel = args.io == KERNEL_BACKEND
    if kernel:
        why = "the xdp backend forwards in the kernel's receive path, on every queue, on the CPU that receives"
        for opt, value, what in (("--queues", args.queues, "leave it out"),
                                 ("--dut-cpus", args.dut_cpus, "no workers to pin"),
                                 ("--batch", args.batch, "no receive batch to size")):
            if value is not None:
                raise ConfigError(opt, f"{why}: {what}")
    queues = int(check_range(1 if args.queues is None else args.queues, "--queues", low=1, high=_native.MAX_QUEUES,
                             allow_low=True))
    batch = int(check_range(64 if args.batch is None else args.batch, "--batch", low=1,
                            high=_native.MAX_FORWARD_BATCH, allow_low=True))
    check_netns(args.netns, "--netns")
    check_writable(getattr(args, "json_file", None), "--json", "the summary")
    if args.out:
        try:
            os.makedirs(args.out, exist_ok=True)
        except OSError as e:
            raise ConfigError("--out", f"{args.out}: cannot make the directory ({e.strerror})") from None
        check_writable(os.path.join(args.out, "forward.json"), "--out", "the summary")
    refs = [port_ref(p, args.netns, "--port", "--netns") for p in args.port]
    faults = parse_faults(args.faults) if args.faults else None
    if args.peer_mac and len(args.peer_mac) != len(args.port):
        raise ConfigError("--peer-mac", f"give one per --port ({len(args.peer_mac)} for {len(args.port)} ports)")
    try:
        ports = [_native.Port(ifname, netns=ns, io="auto" if kernel else args.io, queues=queues,
                              i_know_this_is_live=args.i_know_this_is_live) for ifname, ns in refs]
        out: dict[str, Any] = {"ports": ports, "mode": args.forward_mode, "peer_macs": list(args.peer_mac) or None,
                               "cpus": list(args.dut_cpus) if args.dut_cpus else None, "batch": batch}
        if kernel:
            out["xdp_redirect"] = True
        if faults:
            out["faults"] = faults
        return out
    except ConfigError as e:
        raise rename_field(e, OPTIONS) from None


#: ``--faults`` keys: their value types (``delay`` is ``P@DURATION``, one class each time it is given).
FAULT_KEYS = {"drop": float, "duplicate": float, "reorder": float, "distance": int, "seed": int, "delay": str}


def parse_faults(spec: str) -> dict[str, Any]:
    """``--faults`` as the Forwarder's ``faults``: ``KEY=VALUE`` pairs joined by commas."""
    out: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in spec.split(","))):
        key, eq, value = (x.strip() for x in item.partition("="))
        kind = FAULT_KEYS.get(key)
        if not eq or kind is None:
            raise ConfigError("--faults", f"{item!r}: give KEY=VALUE with KEY one of {', '.join(FAULT_KEYS)}")
        if key == "delay":
            out.setdefault("delay", []).append(_delay_class(item, value))
            continue
        try:
            out[key] = kind(value)
        except ValueError:
            raise ConfigError("--faults", f"{item!r}: {key} takes a{'n integer' if kind is int else ' number'}"
                              ) from None
    return out


def _delay_class(item: str, value: str) -> tuple[float, float]:
    """One ``delay=P@DURATION`` class: (probability, seconds)."""
    p, at, d = value.partition("@")
    try:
        if not at:
            raise ValueError(value)
        return float(p), parse_duration(d, "--faults")
    except (ValueError, ConfigError):
        raise ConfigError("--faults", f"{item!r}: delay takes PROBABILITY@DURATION, e.g. delay=0.02@10ms") from None


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _rate(now: list, before: list, dt: float, key: str) -> float:
    return sum(getattr(a, key) - getattr(b, key) for a, b in zip(now, before, strict=True)) / dt if dt > 0 else 0.0


def _fmt_pps(v: float) -> str:
    return f"{v / 1e6:.3f} Mpps" if v >= 1e5 else f"{v / 1e3:.1f} kpps"


@dataclasses.dataclass(frozen=True)
class Counts:
    """A forwarder's counts summed over its queues (of one port, or of all)."""

    rx_frames: int
    rx_bytes: int
    tx_frames: int
    tx_bytes: int
    tx_drops: int
    rx_ring_drops: int
    tx_errors: int

    @classmethod
    def of(cls, stats: Sequence[Any]) -> Counts:
        return cls(**{f.name: sum(getattr(s, f.name) for s in stats) for f in dataclasses.fields(cls)})


#: The counts of the summary's ``totals`` (no bytes).
TOTALS = ("rx_frames", "tx_frames", "tx_drops", "rx_ring_drops", "tx_errors")


@dataclasses.dataclass(frozen=True)
class Interval:
    """One ``--interval`` of the run: when it ended, the rates over it, the drops per second."""

    t_s: float
    rx_pps: float
    tx_pps: float
    tx_drops: float
    rx_ring_drops: float

    @classmethod
    def between(cls, now: list, before: list, t_s: float, dt: float) -> Interval:
        return cls(round(t_s, 3), round(_rate(now, before, dt, "rx_frames"), 1),
                   round(_rate(now, before, dt, "tx_frames"), 1), _rate(now, before, 1.0, "tx_drops"),
                   _rate(now, before, 1.0, "rx_ring_drops"))


def summary(fwd: _native.Forwarder, stats: list, elapsed: float, seconds: list[Interval], stopped_by: str) -> dict:
    """The JSON summary: per port (its interface, counts, mean rates, per-queue counts), totals, intervals."""
    per_s = (lambda n: n / elapsed) if elapsed > 0 else (lambda n: 0.0)
    ports = []
    for i, info in enumerate(fwd.ports):
        mine = [s for s in stats if s.port == i]
        c = Counts.of(mine)
        ports.append({**info.to_dict(), **dataclasses.asdict(c), "rx_pps": per_s(c.rx_frames),
                      "tx_pps": per_s(c.tx_frames), "queue_stats": [s.to_dict() for s in mine]})
    c = Counts.of(stats)
    rates = sorted(s.tx_pps for s in seconds)
    totals = {**{k: getattr(c, k) for k in TOTALS}, "rx_pps": per_s(c.rx_frames), "tx_pps": per_s(c.tx_frames),
              "tx_pps_median_interval": rates[len(rates) // 2] if rates else None}
    faults = fwd.fault_counts()
    return {"mode": fwd.mode, "duration_s": round(elapsed, 3), "stopped_by": stopped_by,
            **({"faults": faults} if faults is not None else {}),
            "workers": [{"port": s.port, "ifname": s.ifname, "queue": s.queue, "cpu": s.cpu} for s in stats],
            "ports": ports, "totals": totals, "intervals": [dataclasses.asdict(s) for s in seconds]}


def durations(args) -> tuple[float | None, float]:
    """``--duration`` (``None``: until stopped) and ``--interval`` in seconds."""
    return args.duration, check_range(args.interval, "--interval", high=3600, allow_low=True, unit="s")


def run(args) -> int:
    duration, interval = durations(args)
    kwargs = build(args)
    require_root("forwarding (raw sockets, XDP)")
    # Held while it forwards: a second netrig process on one of its ports is refused at once.
    held = ports_held([(p.ifname, p.netns) for p in kwargs["ports"]], "--port")
    with held, metrics_endpoint(args.metrics_listen) as tel:
        try:
            fwd = _native.Forwarder(**kwargs)
        except ConfigError as e:
            raise rename_field(e, OPTIONS) from None
        if tel is not None:  # read at every scrape, by a thread that never takes a busy CPU from a worker
            tel.watch_forwarder(fwd.stats)
            tel.endpoint.follow(idle=True)
        return _forward(args, fwd, duration, interval, args.io == KERNEL_BACKEND)


def _forward(args, fwd: _native.Forwarder, duration: float | None, interval: float, kernel: bool) -> int:
    stopped_by = "duration"
    t0 = time.monotonic()
    seconds: list[Interval] = []
    try:
        for info in fwd.ports:
            _say(f"forward: {info.ifname} ({info.mac}) {info.backend}: {info.notes}")
        if kernel:
            _say(f"forward: mode {fwd.mode}, in the kernel (XDP programs, every queue); Ctrl-C stops")
        else:
            pins = ", ".join(f"{s.ifname} q{s.queue} on CPU {s.cpu}" for s in fwd.stats())
            _say(f"forward: mode {fwd.mode}, workers {pins}; Ctrl-C stops")
        prev, prev_t = fwd.stats(), t0
        tick = interval if interval > 0 else 0.2
        while fwd.running:
            now = time.monotonic()
            left = (t0 + duration - now) if duration is not None else tick
            if left <= 0:
                break
            time.sleep(min(tick, left))
            cur, t = fwd.stats(), time.monotonic()
            if interval > 0 and t - prev_t >= interval * 0.5:
                dt = t - prev_t
                seconds.append(Interval.between(cur, prev, t - t0, dt))
                for a, b in zip(cur, prev, strict=True):
                    _say(f"{t - t0:7.1f}s {a.ifname} q{a.queue}: rx {_fmt_pps((a.rx_frames - b.rx_frames) / dt)}"
                              f"  tx {_fmt_pps((a.tx_frames - b.tx_frames) / dt)}"
                              f"  drops {a.tx_drops - b.tx_drops}  ring drops {a.rx_ring_drops - b.rx_ring_drops}")
                prev, prev_t = cur, t
        if not fwd.running:
            stopped_by = "worker error"
    except KeyboardInterrupt:
        stopped_by = "interrupt"
    except Terminated:
        stopped_by = "signal"
    # Nothing interrupts the stop: the workers end, the ports close and the XDP programs detach.
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        elapsed = time.monotonic() - t0
        last = fwd.stats()
        final = fwd.stop() or last
        doc = summary(fwd, final, elapsed, seconds, stopped_by)
        text = json.dumps(doc, indent=2)
        files = [getattr(args, "json_file", None), os.path.join(args.out, "forward.json") if args.out else None]
        for path in filter(None, files):
            with open(path, "w") as f:
                f.write(text + "\n")
        if not files[0]:  # the old --json FILE wrote the file instead of stdout
            sys.stdout.write(text + "\n")
        c = Counts.of(final)
        _say(f"forward: stopped ({stopped_by}) after {elapsed:.1f} s: rx {c.rx_frames} tx {c.tx_frames} "
             f"({_fmt_pps(c.tx_frames / elapsed if elapsed > 0 else 0.0)}), drops {c.tx_drops}, "
             f"ring drops {c.rx_ring_drops}")
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return 0
