"""``netrig demo`` (what ``make demo`` runs): build the router test bed, self-test the tester,
run RFC 2544 throughput + latency + frame loss over the RFC frame sizes with short trials and
NDR/PDR at 64 B, write the JSON results, print the summary, and write the HTML report."""
from __future__ import annotations

import sys
from pathlib import Path

from netrig.cli.common import require_root


def register(sub) -> None:
    p = sub.add_parser("demo", help="router test bed: self-test, RFC 2544, NDR/PDR, HTML report", description=__doc__)
    p.add_argument("--out", default="demo-out", help="output directory (default demo-out)")
    p.add_argument("--testbed", default="router", help="test bed topology (default router; 'simulated' needs no root)")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.testbed != "simulated":
        require_root("the demo builds network namespaces and")
    from netrig.methodology.demo import run_demo

    rc = run_demo(args.out, args.testbed)
    if rc != 0:
        return rc
    from netrig.report import write_report

    out = Path(args.out)
    results = [out / sub / "result.json" for sub in ("rfc2544", "ndr-pdr") if (out / sub / "result.json").exists()]
    if results:
        html = write_report(results, out / "report.html")
        print(f"report: {Path(html).resolve()}")
    return 0
