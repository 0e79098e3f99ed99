"""``netrig capture``: a packet-capture application, the DUT of the capture-method benchmark.

Captures on one interface with one method (``recvfrom``, ``recvmmsg``, ``threads``, ``tpacket_v3``,
``libpcap``, ``af_xdp``), pinned to one CPU, and counts every frame it captured per sender's trial
tag (the same minimal processing for every method). On SIGUSR1 it writes its counters and its own
CPU time (``getrusage``) as JSON to ``--stats`` (atomically; ``seq`` counts the requests): this is
how ``netrig capture-bench`` reads what it captured of each trial. SIGTERM, Ctrl-C or ``--duration``
stop it; the final summary goes to stdout (and to ``--stats``).
"""
from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from typing import Any

from netrig import _native
from netrig.cli.common import (
    check_choice,
    check_netns,
    check_range,
    check_writable,
    port_ref,
    rename_field,
    require_root,
)
from netrig.errors import ConfigError, Terminated
from netrig.methodology.vocabulary import deprecated, option
from netrig.testbed.state import ports_held

#: Engine field → CLI option, for one-line errors that name the option.
OPTIONS = {"method": "--capture-method", "ifname": "--port", "batch": "--batch", "cpu": "--dut-cpus",
           "netns": "--netns"}
#: The line the test bed waits for before it starts trials.
READY = "capture: ready"


def register(sub) -> None:
    p = sub.add_parser("capture", help="a packet-capture application (the DUT of netrig capture-bench)",
                       description=__doc__)
    option(p, "--port", "the one to capture on")
    option(p, "--capture-method", f"{', '.join(_native.CAPTURE_METHODS)} (default recvfrom)", default="recvfrom")
    deprecated(p, "--method", "--capture-method")
    option(p, "--batch", f"recvmmsg (1..{_native.MAX_CAPTURE_BATCH}, default {_native.DEFAULT_CAPTURE_BATCH})",
           default=str(_native.DEFAULT_CAPTURE_BATCH))
    option(p, "--dut-cpus", "here the one CPU the capture process is pinned to (default: not pinned)")
    deprecated(p, "--cpu", "--dut-cpus")
    option(p, "--netns", "of --port without its own @NS")
    option(p, "--stats", "write the counters here on SIGUSR1 and at the end")
    option(p, "--duration", "stop after T: 10s, 500ms (default: until SIGTERM or Ctrl-C)")
    p.set_defaults(func=run)


def build(args) -> dict[str, Any]:
    """Every option checked before anything is opened; the ``_native.Capture`` keyword arguments."""
    if not args.port:
        raise ConfigError("--port", "give the interface to capture on (e.g. --port veth1)")
    check_choice(args.capture_method, _native.CAPTURE_METHODS, "--capture-method", "a capture method")
    ifname, netns = port_ref(args.port, args.netns, "--port", "--netns")
    check_range(args.batch, "--batch", low=1, high=_native.MAX_CAPTURE_BATCH, allow_low=True)
    check_netns(netns, "--netns")
    check_writable(args.stats, "--stats", "the counters")
    return {"method": args.capture_method, "ifname": ifname, "netns": netns, "cpu": one_cpu(args.dut_cpus),
            "batch": args.batch}


def one_cpu(cpus: tuple[int, ...] | None) -> int | None:
    """The one CPU of ``--dut-cpus`` a capture process is pinned to (``None``: not pinned)."""
    if cpus is None:
        return None
    if len(cpus) != 1:
        raise ConfigError("--dut-cpus", f"{','.join(map(str, cpus))}: the capture process runs on one CPU: give one")
    return cpus[0]


def document(cap: _native.Capture, stats: _native.CaptureStats, seq: int, final: bool) -> dict[str, Any]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"seq": seq, "final": final, "method": cap.method, "notes": cap.notes, "drops_source": cap.drops_source,
            "pid": os.getpid(), "cpu_user_s": ru.ru_utime, "cpu_sys_s": ru.ru_stime, **stats.to_dict(),
            "tags": [t.to_dict() for t in stats.tags]}


def _write(path: str, doc: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


def run(args) -> int:
    kwargs = build(args)
    require_root("capturing (raw sockets, XDP)")
    # Held while it captures: a second netrig process on its port is refused at once.
    with ports_held([(kwargs["ifname"], kwargs["netns"])], "--port"):
        return _run(args, kwargs)


def _run(args, kwargs: dict[str, Any]) -> int:
    duration = args.duration
    asked = [0]
    old_usr1 = signal.signal(signal.SIGUSR1, lambda s, f: asked.__setitem__(0, asked[0] + 1))
    try:
        cap = _native.Capture(**kwargs)
    except ConfigError as e:
        raise rename_field(e, OPTIONS) from None
    seq = 0
    stopped_by = "duration"
    t0 = time.monotonic()
    try:
        print(f"capture: {cap.method} on {args.port}: {cap.notes}", file=sys.stderr, flush=True)
        print(f"{READY} (SIGUSR1 writes the counters to --stats; SIGTERM stops)", file=sys.stderr, flush=True)
        while cap.running:
            if duration is not None and time.monotonic() - t0 >= duration:
                break
            if asked[0] != seq:
                seq = asked[0]
                if args.stats:
                    _write(args.stats, document(cap, cap.stats(2.0), seq, False))
                continue
            time.sleep(0.01)
        if not cap.running:
            stopped_by = "worker error"
    except KeyboardInterrupt:
        stopped_by = "interrupt"
    except Terminated:
        stopped_by = "signal"
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        error = cap.error
        final = cap.stop()
        doc = {**document(cap, final, seq, True), "stopped_by": stopped_by, "error": error} if final else {}
        if args.stats and doc:
            _write(args.stats, doc)
        sys.stdout.write(json.dumps(doc) + "\n")
        print(f"capture: stopped ({stopped_by}): {doc.get('frames', 0)} frames, drops {doc.get('drops', 0)}",
              file=sys.stderr, flush=True)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        signal.signal(signal.SIGUSR1, old_usr1)
    return 1 if stopped_by == "worker error" else 0
