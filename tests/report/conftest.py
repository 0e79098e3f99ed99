"""Shared fixtures for the report tests."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from report_golden import ROUTER

from netrig.report import write_compare, write_report


@pytest.fixture
def router_doc() -> dict:
    return json.loads(ROUTER.read_text())  # a new document each time: a test may change it


@pytest.fixture
def minimal_doc() -> dict:
    """A result with nothing but the required top level: every section must say it has no data."""
    return {"schema_version": 1, "tool_version": "0.1.0", "complete": False, "trials": [], "summary": []}


@contextmanager
def _alone(lock: Path) -> Iterator[None]:
    """Held by one process at a time (an exclusive ``flock`` of ``lock``)."""
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def rendered(tmp_path_factory) -> Callable[..., Path]:
    """``rendered(path)`` (or a list of result files): the report of a golden result, drawn once for
    the run into a directory of its own (``report.html`` and ``report.md``); ``rendered(a, b,
    compare=True)``: their comparison (``compare.html``/``.md``). The HTML, snapshot and browser
    tests read the same drawing instead of drawing each report again (matplotlib: seconds each).
    The workers of a parallel run (pytest-xdist) share the drawings: the first to ask for one draws
    it while the others wait for it, under a lock of its own."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's, not this worker's

    def draw(*paths: Path | Sequence[Path], compare: bool = False) -> Path:
        key = repr((tuple(str(p) for p in paths), compare))
        d = shared / f"rendered-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        out = d / ("compare.html" if compare else "report.html")
        with _alone(d.with_suffix(".lock")):
            if not (d / "drawn").is_file():
                d.mkdir(exist_ok=True)
                if compare:
                    write_compare(list(paths), out)  # type: ignore[arg-type]
                else:
                    (what,) = paths
                    write_report(what, out)
                (d / "drawn").touch()
        return out
    return draw
