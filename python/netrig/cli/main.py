"""The ``netrig`` command line.

One module per subcommand under ``netrig.cli`` (the shortcut commands of the methods come from the
registry through ``netrig.cli.shortcuts``); each defines ``register(subparsers)`` which adds its
parser(s) and sets ``func`` (``func(args) -> int``). This module only dispatches, and turns
every ``NetrigError`` into one line on stderr and exit status 2 — never a traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from typing import NoReturn

from netrig._native import __version__
from netrig.cli import (
    capture,
    capture_bench,
    compare,
    demo,
    forward,
    ports,
    report,
    rr,
    run,
    selftest,
    serve,
    shortcuts,
    study,
    sweep,
    tcp,
    testbed,
    trial,
)
from netrig.cli.common import NEEDS
from netrig.errors import NetrigError, Terminated

#: Subcommand modules, in the order ``netrig --help`` lists them (``shortcuts``: one command per
#: shortcut command of the method registry, e.g. ``rfc2544``, ``ndr-pdr``).
COMMANDS = (ports, trial, testbed, run, shortcuts, tcp, rr, study, sweep, selftest, report, compare, forward,
            capture_bench, capture, serve, demo)


class NetrigParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line naming the option (and where to read more),
    like every other netrig error; subcommand parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = NetrigParser(
        prog="netrig",
        description="netrig: a software network test rig (traffic generator, analyzer, methodology).",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in COMMANDS:
        mod.register(sub)
    return parser


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(f"netrig {__version__}")
        return 0
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    # SIGTERM and SIGHUP stop a command like Ctrl-C: traffic stops, finished trials are kept
    old = {sig: signal.signal(sig, _terminate) for sig in (signal.SIGTERM, signal.SIGHUP)} \
        if threading.current_thread() is threading.main_thread() else {}
    try:
        return int(args.func(args) or 0)
    except NetrigError as e:
        print(f"netrig: error: {_one_line(str(e))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, like other tools
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except PermissionError as e:
        where = f" ({e.filename})" if e.filename else ""
        print(f"netrig: error: permission denied{where}: this needs {NEEDS}, or write access to the "
              "files it names", file=sys.stderr)
        return 2
    except OSError as e:  # files the user named: one line, never a traceback
        where = f"{e.filename}: " if e.filename else ""
        print(f"netrig: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except Terminated as e:
        print(f"netrig: {e}", file=sys.stderr)
        return int(e.code) if isinstance(e.code, int) else 143
    except KeyboardInterrupt:
        print("netrig: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug in netrig: one line, the traceback only on request
        if os.environ.get("NETRIG_DEBUG"):
            raise
        print(f"netrig: internal error: {type(e).__name__}: {_one_line(str(e))} (set NETRIG_DEBUG=1 for the "
              "traceback, and please report it)", file=sys.stderr)
        return 3
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def _one_line(text: str) -> str:
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
