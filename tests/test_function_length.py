"""The house limit on Python function length, as `make lint` checks it (scripts/function-length.py):
a function of 80 lines passes, one of 81 fails naming its file, line and length; the tree itself passes."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "function-length.py"


def check(*paths: Path | str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, paths)], capture_output=True, text=True)


def function(lines: int) -> str:
    return "def f():\n" + "".join(f"    x = {i}\n" for i in range(lines - 1))


def test_a_function_over_80_lines_fails_lint(tmp_path):
    (tmp_path / "ok.py").write_text(function(80))
    assert check(tmp_path).returncode == 0
    (tmp_path / "long.py").write_text("class C:\n    " + function(81).replace("\n    ", "\n        "))
    r = check(tmp_path)
    assert r.returncode == 1
    assert r.stdout.strip() == f"{tmp_path / 'long.py'}:2: f is 81 lines (limit 80): split it"


def test_the_tree_keeps_the_limit():
    r = check(*(ROOT / d for d in ("python", "tests", "bench", "scripts")))
    assert r.returncode == 0, r.stdout
