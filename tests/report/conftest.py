"""Shared fixtures for the report tests."""
from __future__ import annotations

import copy
import json

import pytest
from report_golden import ROUTER


@pytest.fixture
def router_doc() -> dict:
    return copy.deepcopy(json.loads(ROUTER.read_text()))


@pytest.fixture
def minimal_doc() -> dict:
    """A result with nothing but the required top level: every section must say it has no data."""
    return {"schema_version": 1, "tool_version": "0.1.0", "complete": False, "trials": [], "summary": []}
