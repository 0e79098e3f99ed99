"""``netrig compare A B [...] [-o compare.html]``: overlay several results, ratios to the first."""
from __future__ import annotations

import argparse
import sys

from netrig.cli.common import check_file_name
from netrig.methodology.vocabulary import option
from netrig.report import load_run, write_compare
from netrig.report.tables import line_rate_warning


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compare",
        help="overlay several results in one HTML report, with ratios to the first (the baseline)",
        description="Overlay the plots of several results and tabulate each against the first (the baseline) "
        "per frame size, e.g. NAT or firewall throughput as a percentage of plain routing. Writes HTML and a "
        "Markdown summary beside it (same name, .md).",
    )
    p.add_argument("results", metavar="RESULT", nargs="+", help="result files; the first is the baseline")
    option(p, "--output", "the comparison (default: compare.html)", flags=("-o",), default="compare.html")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_file_name(args.output, "-o", "compare.html")
    out = write_compare(args.results, args.output)
    if (warning := line_rate_warning([load_run(p) for p in args.results])) is not None:
        print(f"netrig compare: warning: {warning}", file=sys.stderr)
    print(out)
    print(out.with_suffix(".md"))
    return 0
