"""The ``netrig`` command line.

One module per subcommand under ``netrig.cli`` (the shortcut commands of the methods come from the
registry through ``netrig.cli.shortcuts``); each defines ``register(subparsers)`` which adds its
parser(s) and sets ``func`` (``func(args) -> int``). This module only dispatches, and turns
every ``NetrigError`` into one line on stderr and exit status 2 — never a traceback.
"""
from __future__ import annotations

import argparse
import os
import sys

from netrig._native import __version__
from netrig.cli import compare, demo, ports, report, run, selftest, shortcuts, testbed, trial
from netrig.errors import NetrigError

#: Subcommand modules, in the order ``netrig --help`` lists them (``shortcuts``: one command per
#: shortcut command of the method registry, e.g. ``rfc2544``, ``ndr-pdr``).
COMMANDS = (ports, trial, testbed, run, shortcuts, selftest, report, compare, demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="netrig",
        description="netrig: a software network test rig (traffic generator, analyzer, methodology).",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in COMMANDS:
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(f"netrig {__version__}")
        return 0
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except NetrigError as e:
        print(f"netrig: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("netrig: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug in netrig: one line, the traceback only on request
        if os.environ.get("NETRIG_DEBUG"):
            raise
        print(f"netrig: internal error: {type(e).__name__}: {e} (set NETRIG_DEBUG=1 for the traceback, "
              "and please report it)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
