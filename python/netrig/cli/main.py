"""The ``netrig`` command line.

One module per subcommand under ``netrig.cli`` (the shortcut commands of the methods come from the
registry through ``netrig.cli.shortcuts``); each defines ``register(subparsers)`` which adds its
parser(s) and sets ``func`` (``func(args) -> int``). This module only dispatches, and turns
every ``NetrigError`` into one line on stderr and exit status 2 — never a traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import signal
import sys
import threading
from typing import Any, NoReturn

from netrig._native import __version__
from netrig.cli.common import NEEDS
from netrig.errors import NetrigError, Terminated
from netrig.methodology.vocabulary import BadValue, option

#: Subcommand modules of ``netrig.cli``, in the order ``netrig --help`` lists them (``shortcuts``: one
#: command per shortcut command of the method registry, e.g. ``rfc2544``, ``ndr-pdr``).
COMMANDS = ("ports", "trial", "testbed", "run", "shortcuts", "tcp", "rr", "study", "sweep", "selftest", "report",
            "compare", "forward", "capture_bench", "capture", "serve", "demo")


class NetrigParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line naming the option (and where to read more),
    like every other netrig error; subcommand parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """Every value parsed into its type (``netrig.methodology.vocabulary``); a bad one raises the
        ConfigError naming its option."""
        if args is None:
            args = sys.argv[1:]
        try:
            ns, extra = super().parse_known_args(_negative_values(list(args)), namespace)
        except BadValue as e:
            raise e.error from None
        if self.prog != "netrig" and not hasattr(ns, "command_prog"):  # the innermost command parsed
            ns.command_prog = self.prog
        return ns, extra

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        """An unknown option names the help of the command it was given to (``netrig trial --help``)."""
        ns, extra = self.parse_known_args(args, namespace)
        if extra:
            prog = getattr(ns, "command_prog", self.prog)
            self.exit(2, f"{prog}: error: unrecognized arguments: {' '.join(extra)} (see {prog} --help)\n")
        return ns


def _negative_values(argv: list[str]) -> list[str]:
    """``--duration -1s`` as ``--duration=-1s``: a value that starts with a minus and a digit goes to
    the option before it, whose own check then says what is wrong (argparse would take it for an
    option and say only "expected one argument")."""
    out: list[str] = []
    for tok in argv:
        prev = out[-1] if out else ""
        if re.match(r"-\d", tok) and prev.startswith("--") and "=" not in prev and prev != "--":
            out[-1] = f"{prev}={tok}"
        else:
            out.append(tok)
    return out


def command_modules(argv: list[str] | None = None) -> list[str]:
    """The subcommand modules a command line needs: the one named like its command (``capture-bench``
    is ``capture_bench``) when there is one, else all of them (``--help``, ``--version``, a method's
    shortcut command, a typo). A command then imports only what it runs: ``netrig testbed status``
    starts in a fraction of the time the whole package takes to import."""
    first = next((tok for tok in argv or () if not tok.startswith("-")), None)
    if first is None and list(argv or ()) == ["--version"]:
        return []
    name = (first or "").replace("-", "_")
    return [name] if name in COMMANDS and name != "shortcuts" else list(COMMANDS)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of only the command ``argv`` names (``command_modules``)."""
    parser = NetrigParser(
        prog="netrig",
        description="netrig: a software network test rig (traffic generator, analyzer, methodology).",
    )
    option(parser, "--version", "print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in command_modules(argv):
        importlib.import_module(f"netrig.cli.{name}").register(sub)
    return parser


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    # SIGTERM and SIGHUP stop a command like Ctrl-C: traffic stops, finished trials are kept
    old = {sig: signal.signal(sig, _terminate) for sig in (signal.SIGTERM, signal.SIGHUP)} \
        if threading.current_thread() is threading.main_thread() else {}
    try:
        args = parser.parse_args(argv)
        if args.version:
            print(f"netrig {__version__}")
            return 0
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
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
