"""The CLI starts fast: building every command's parser (what `netrig --help` and every command do
first) imports neither the OTG model (snappi, ~0.5 s) nor pyroute2 (~0.2 s); they load when a
command needs them. `netrig --help` took 1.9 s before, 0.6 s after (2026-11-26, this 2-vCPU VM)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("snappi", "pyroute2")


def test_the_parser_imports_no_heavy_library():
    code = ("import sys\nfrom netrig.cli.main import build_parser\nbuild_parser()\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"imported while building the parser: {r.stdout.strip()}"


def _subparsers(parser) -> dict:
    import argparse
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_a_command_alone_parses_as_in_the_whole_parser():
    """Each command builds only its own parser (``command_modules``), and that parser is the one the
    whole ``netrig --help`` tree holds: same options, same help."""
    from netrig.cli.main import COMMANDS, build_parser, command_modules
    whole = _subparsers(build_parser())
    for name in COMMANDS:
        cmd = name.replace("_", "-")
        if cmd not in whole:  # ``shortcuts`` registers the methods' commands, not one of its name
            assert command_modules([cmd]) == list(COMMANDS)
            continue
        assert command_modules([cmd, "--help"]) == [name]
        alone = _subparsers(build_parser([cmd]))
        assert list(alone) == [cmd] and alone[cmd].format_help() == whole[cmd].format_help(), cmd
    assert command_modules(["rfc2544", "--testbed", "router"]) == list(COMMANDS)  # a method's shortcut


def test_a_testbed_command_starts_without_the_methods_or_the_engine_seam():
    """``netrig testbed status`` imports the test bed, not the methods, runs, reports or telemetry:
    0.21 s against 0.83 s when every command loaded everything (2026-11-28, this 2-vCPU VM)."""
    code = ("import sys\nfrom netrig.cli.main import build_parser\nbuild_parser(['testbed', 'status'])\n"
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[:2] in "
            "(['netrig', 'methods'], ['netrig', 'run'], ['netrig', 'measure'], ['netrig', 'report'], "
            "['netrig', 'telemetry']))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"imported to parse `netrig testbed status`: {r.stdout.strip()}"
