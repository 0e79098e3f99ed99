"""``netrig capture-bench``: the capture-method benchmark of lab report 002.

For each capture method (``netrig capture`` as the DUT on the receiving end of a veth test bed,
pinned to one CPU) and frame size: the tester's own ceiling into that capture host (TX-only trials,
the capture application stopped; its limit is the ceiling / 1.1), the RFC 2544 throughput (the
highest rate at which the capture captured every frame of the trial, binary search) and the
iperf-like curve (captured % at loads given in % of the tester's limit, with the capture process's
CPU). Writes ``capture-bench.json``, ``trials.ndjson``, ``report.html`` (plots)
and ``report.md`` into ``--out``.
"""
from __future__ import annotations

import os
import sys
import time

from netrig.cli.common import check_duration, check_number, require_root
from netrig.errors import INTERRUPTS, ConfigError, InterruptedTrial, interrupt_reason, interrupt_status
from netrig.methodology.vocabulary import helptext
from netrig.run.capture_bench import BenchParams, run_bench, table_rows
from netrig.testbed.options import CAPTURE_METHODS

DEFAULTS = BenchParams()


def register(sub) -> None:
    p = sub.add_parser("capture-bench", help="benchmark packet-capture methods (RFC 2544 and iperf-like; report 002)",
                       description=__doc__)
    p.add_argument("--methods", default=",".join(CAPTURE_METHODS), metavar="LIST",
                   help=f"capture methods, comma-separated ({', '.join(CAPTURE_METHODS)}; default all)")
    p.add_argument("--sizes", default=DEFAULTS.sizes,
                   help=helptext("--sizes", f"e.g. 64,512,1518,imix (default {DEFAULTS.sizes})"))
    p.add_argument("--batch", default=str(DEFAULTS.batch), metavar="N",
                   help=helptext("--batch", f"recvmmsg (1..1024, default {DEFAULTS.batch})"))
    p.add_argument("--loads", default=",".join(f"{x:g}" for x in DEFAULTS.loads_pct), metavar="LIST",
                   help="iperf-like loads in %% of the tester's limit: its ceiling into the method's capture host, "
                        "proven with the capture stopped, / 1.1 (default 25,50,75,100)")
    p.add_argument("--duration", default=f"{DEFAULTS.duration_s:g}s", metavar="T",
                   help=helptext("--duration", f"each trial sends: 1s, 500ms (default {DEFAULTS.duration_s:g}s)"))
    p.add_argument("--drain", default=f"{DEFAULTS.drain_s * 1000:g}ms", metavar="T",
                   help=helptext("--drain", f"before the capture's counts are read (default "
                                            f"{DEFAULTS.drain_s * 1000:g}ms)"))
    p.add_argument("--resolution", default=str(DEFAULTS.resolution_pct), metavar="PCT",
                   help=helptext("--resolution", f"default {DEFAULTS.resolution_pct}"))
    p.add_argument("--cpu", default=str(DEFAULTS.capture_cpu), metavar="N",
                   help=helptext("--cpu", "and of its kernel receive path (default 0)"))
    p.add_argument("--out", metavar="DIR", help=helptext("--out", "default runs/capture-bench-<time>"))
    p.set_defaults(func=run)


def params(args) -> BenchParams:
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    loads = []
    for x in args.loads.split(","):
        try:
            loads.append(float(x))
        except ValueError:
            raise ConfigError("--loads", f"{x!r} is not a number: give loads like 10,50,100") from None
    cpus = os.cpu_count() or 1
    return BenchParams(
        methods=methods, sizes=args.sizes,
        batch=int(check_number(args.batch, "--batch", integer=True, low=1, high=1024, allow_low=True)),
        duration_s=check_duration(args.duration, "--duration", high=60),
        drain_s=check_duration(args.drain, "--drain", high=10, allow_zero=True),
        resolution_pct=check_number(args.resolution, "--resolution", high=50), loads_pct=tuple(loads),
        capture_cpu=int(check_number(args.cpu, "--cpu", integer=True, low=0, high=cpus - 1, allow_low=True)))


def run(args) -> int:
    p = params(args)
    require_root("the capture benchmark (namespaces, raw sockets, XDP)")
    out = args.out or os.path.join("runs", time.strftime("capture-bench-%Y%m%d-%H%M%S"))
    t0 = time.monotonic()
    try:
        doc = run_bench(p, out, notify=lambda s: print(s, file=sys.stderr, flush=True))
    except (*INTERRUPTS, InterruptedTrial) as e:
        print(f"capture-bench: {interrupt_reason(e)}; the points that finished are in {out}/capture-bench.json "
              "and report.html", file=sys.stderr)
        return interrupt_status(e)
    if not doc.results:
        print(f"capture-bench: no result: no method measured a point (see the notes above and {out}/report.html)",
              file=sys.stderr)
        return 1
    head, rows = table_rows(doc)
    print("  ".join(head))
    for r in rows:
        print("  ".join(r))
    print(f"capture-bench: {len(doc.results)} results in {time.monotonic() - t0:.0f} s; {out}/report.html")
    return 0
