"""Shared fixtures for the report tests."""
from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from report_golden import ROUTER

from netrig.report import write_compare, write_report


@pytest.fixture
def router_doc() -> dict:
    return copy.deepcopy(json.loads(ROUTER.read_text()))


@pytest.fixture
def minimal_doc() -> dict:
    """A result with nothing but the required top level: every section must say it has no data."""
    return {"schema_version": 1, "tool_version": "0.1.0", "complete": False, "trials": [], "summary": []}


@pytest.fixture(scope="session")
def rendered(tmp_path_factory) -> Callable[..., Path]:
    """``rendered(path)`` (or a list of result files): the report of a golden result, drawn once for
    the session into a directory of its own (``report.html`` and ``report.md``); ``rendered(a, b,
    compare=True)``: their comparison (``compare.html``/``.md``). The HTML, snapshot and browser
    tests read the same drawing instead of drawing each report again (matplotlib: seconds each)."""
    done: dict[tuple, Path] = {}

    def draw(*paths: Path | Sequence[Path], compare: bool = False) -> Path:
        key = (tuple(str(p) for p in paths), compare)
        if key not in done:
            d = tmp_path_factory.mktemp("rendered")
            if compare:
                done[key] = write_compare(list(paths), d / "compare.html")  # type: ignore[arg-type]
            else:
                (what,) = paths
                done[key] = write_report(what, d / "report.html")
        return done[key]
    return draw
