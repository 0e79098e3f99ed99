"""A file far larger than any netrig result (issue 41, case 10: a 1 GiB sparse file) is refused by its
size before a byte is read, by ``netrig report`` and ``netrig run --resume``: one line naming the file
and the limit, in a process that never grows by the file's size."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from netrig.results import MAX_RESULT_BYTES

ROOT = Path(__file__).resolve().parents[2]
SPARSE_BYTES = 1 << 30
#: Most a refusing process may hold, KiB: the interpreter with netrig imported, far below the file.
MAX_RSS_KB = 400 << 10
PROBE = ("import resource, sys; from netrig.cli.main import main; rc = main(sys.argv[1:]); "
         "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(rc)")


def sparse(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(SPARSE_BYTES)
    return path


@pytest.mark.parametrize("name, argv", [
    ("result.json", ["report", "{f}", "-o", "{d}/r.html"]),
    ("trials.ndjson", ["report", "{d}", "-o", "{d}/r.html"]),
    ("trials.ndjson", ["run", "--resume", "{d}"]),
    ("config.json", ["run", "--resume", "{d}"]),
])
def test_a_sparse_gigabyte_is_refused_by_its_size(tmp_path, name, argv):
    d = tmp_path / "run"
    f = sparse(d / name)
    r = subprocess.run([sys.executable, "-c", PROBE, *(a.format(f=f, d=d) for a in argv)], capture_output=True,
                       text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT / "python")})
    err = r.stderr.strip()
    assert r.returncode == 2 and err.count("\n") == 0, err
    assert f"{f}: {SPARSE_BYTES} bytes is above the largest netrig result read ({MAX_RESULT_BYTES} bytes)" in err, err
    assert int(r.stdout.split()[-1]) < MAX_RSS_KB, "the file was read"
