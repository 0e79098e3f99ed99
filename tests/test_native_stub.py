"""The stub ``netrig/_native.pyi`` and the built module agree (``mypy.stubtest``)."""
from __future__ import annotations

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
