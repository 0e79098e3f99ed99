"""``netrig capture-bench``: the capture-method benchmark of lab report 002.

For each capture method (``netrig capture`` as the DUT on the receiving end of a veth test bed,
pinned to one CPU) and frame size: the tester's own ceiling into that capture host (TX-only trials,
the capture application stopped; its limit is the ceiling / 1.1), the RFC 2544 throughput (the
highest rate at which the capture captured every frame of the trial, binary search) and the
iperf-like curve (captured % at loads given in % of the tester's limit, with the capture process's
CPU). Writes ``capture-bench.json``, ``trials.ndjson``, ``report.html`` (plots)
and ``report.md`` into ``--out``; ``--json`` prints the result document (``capture-bench.json``)
instead of the table.
"""
from __future__ import annotations

import json
import os
import sys
import time

from netrig.cli.capture import one_cpu
from netrig.cli.common import check_range, require_root
from netrig.errors import INTERRUPTS, InterruptedTrial, interrupt_reason, interrupt_status
from netrig.methodology.vocabulary import deprecated, option
from netrig.run.capture_bench import BenchParams, run_bench, table_rows
from netrig.testbed.options import CAPTURE_METHODS

DEFAULTS = BenchParams()


def register(sub) -> None:
    p = sub.add_parser("capture-bench", help="benchmark packet-capture methods (RFC 2544 and iperf-like; report 002)",
                       description=__doc__)
    option(p, "--capture-methods", f"{', '.join(CAPTURE_METHODS)} (default all)",
           default=",".join(CAPTURE_METHODS))
    deprecated(p, "--methods", "--capture-methods")
    option(p, "--frame-sizes", f"e.g. 64,512,1518,imix (default {DEFAULTS.sizes_text})", default=DEFAULTS.sizes_text)
    deprecated(p, "--sizes", "--frame-sizes")
    option(p, "--batch", f"recvmmsg (1..1024, default {DEFAULTS.batch})", default=str(DEFAULTS.batch))
    option(p, "--loads", "iperf-like loads in %% of the tester's limit: its ceiling into the method's capture host, "
                         "proven with the capture stopped, / 1.1 (default 25,50,75,100)",
           default=",".join(f"{x:g}" for x in DEFAULTS.loads_pct))
    option(p, "--duration", f"each trial sends: 1s, 500ms (default {DEFAULTS.duration_s:g}s)",
           default=f"{DEFAULTS.duration_s:g}s")
    option(p, "--drain", f"before the capture's counts are read (default {DEFAULTS.drain_s * 1000:g}ms)",
           default=f"{DEFAULTS.drain_s * 1000:g}ms")
    option(p, "--resolution", f"default {DEFAULTS.resolution_pct}", default=str(DEFAULTS.resolution_pct))
    option(p, "--dut-cpus", f"here the one CPU of the capture process and of its kernel receive path (default "
                            f"{DEFAULTS.capture_cpu})", default=str(DEFAULTS.capture_cpu))
    deprecated(p, "--cpu", "--dut-cpus")
    option(p, "--out", "default runs/capture-bench-<time>")
    option(p, "--json", "capture-bench.json: the methods' ceilings, throughputs and curves")
    p.set_defaults(func=run)


def params(args) -> BenchParams:
    cpu = one_cpu(args.dut_cpus)
    assert cpu is not None  # the option has a default
    return BenchParams(
        methods=args.capture_methods, sizes=args.frame_sizes,
        batch=int(check_range(args.batch, "--batch", low=1, high=1024, allow_low=True)),
        duration_s=check_range(args.duration, "--duration", high=60, unit="s"),
        drain_s=check_range(args.drain, "--drain", high=10, allow_low=True, unit="s"),
        resolution_pct=check_range(args.resolution, "--resolution", high=50), loads_pct=args.loads,
        capture_cpu=cpu)


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
    if args.json:
        print(json.dumps(doc.to_dict(), indent=1))
    if not doc.results:
        print(f"capture-bench: no result: no method measured a point (see the notes above and {out}/report.html)",
              file=sys.stderr)
        return 1
    if args.json:
        return 0
    head, rows = table_rows(doc)
    print("  ".join(head))
    for r in rows:
        print("  ".join(r))
    print(f"capture-bench: {len(doc.results)} results in {time.monotonic() - t0:.0f} s; {out}/report.html")
    return 0
