#!/usr/bin/env python3
"""Regenerate docs/cli.md from the argparse definitions, so the CLI reference stays true.

    .venv/bin/python scripts/gen-cli-doc.py > docs/cli.md
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
os.environ["COLUMNS"] = "100"

from netrig.cli.main import build_parser

INTRO = """# netrig command-line reference

Generated from the parsers by `scripts/gen-cli-doc.py`; do not edit by hand.

Conventions: options are kebab-case on the command line and the same words in snake_case in config
files and JSON. Rates take units (`100kpps`, `1.5Mpps`, `10Gbps` = layer-1 bit/s, `10Gbps-l2`,
`50%` of the line rate); durations too (`10s`, `500ms`, `2m`). Frame sizes include the 4-byte FCS.
Every error is one line on stderr naming the option or field and the remedy; exit status 2 for bad
input, 1 for a trial that ran but is invalid, 130 after Ctrl-C (partial results are kept).
"""


def walk(parser: argparse.ArgumentParser, prefix: str, out: list[str]) -> None:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    out.append(f"## `{prefix}`\n\n```\n{parser.format_help().rstrip()}\n```\n")
    for s in subs:
        for name, p in s.choices.items():
            walk(p, f"{prefix} {name}", out)


def main() -> None:
    out = [INTRO]
    walk(build_parser(), "netrig", out)
    print("\n".join(out))


if __name__ == "__main__":
    main()
