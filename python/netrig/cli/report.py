"""``netrig report RESULT [-o report.html]``: draw the HTML report and Markdown summary of a result."""
from __future__ import annotations

import argparse
import sys

from netrig.cli.common import check_file_name
from netrig.methodology.vocabulary import option
from netrig.report import write_report


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        help="draw the HTML report (and a Markdown summary) of a result file",
        description="Draw a self-contained HTML report with plots, and a Markdown summary beside it "
        "(same name, .md), from a result file alone. Nothing is re-run.",
    )
    p.add_argument("result", metavar="RESULT", nargs="+",
                   help="result.json, its run directory, or an unfinished run's trials.ndjson; several results of "
                   "one configuration (e.g. the demo's rfc2544 and ndr-pdr parts) are drawn as one report")
    option(p, "--output", "the report (default: report.html beside the first result.json, else RESULT with .html)",
           flags=("-o",))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_file_name(args.output, "-o", "report.html")
    out = write_report(args.result, args.output, notify=lambda line: print(f"netrig: {line}", file=sys.stderr))
    print(out)
    print(out.with_suffix(".md"))
    return 0
