"""The stub ``netrig/_native.pyi`` and the built module agree (``mypy.stubtest``)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(180)
def test_stub_matches_the_module():
    pytest.importorskip("mypy.stubtest")
    # From python/ so that mypy finds the stub next to the package (an editable install hides it).
    r = subprocess.run([sys.executable, "-m", "mypy.stubtest", "netrig._native"], cwd=ROOT / "python",
                       capture_output=True, text=True, timeout=170, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout, r.stdout


@pytest.mark.timeout(180)
def test_stubtest_catches_a_wrong_stub(tmp_path):
    """The check can fail: a stub that promises a function the module lacks is refused."""
    pytest.importorskip("mypy.stubtest")
    pkg = tmp_path / "netrig"
    shutil.copytree(ROOT / "python" / "netrig", pkg, ignore=shutil.ignore_patterns("__pycache__", ".mypy_cache"))
    stub = pkg / "_native.pyi"
    stub.write_text(stub.read_text() + "\ndef no_such_function(x: int) -> int: ...\n")
    r = subprocess.run([sys.executable, "-m", "mypy.stubtest", "netrig._native"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=170, check=False)
    assert r.returncode != 0 and "no_such_function" in r.stdout, r.stdout + r.stderr
