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
