"""``netrig sweep --over``: values as typed, and errors that give the right reason."""
from __future__ import annotations

import pytest

from netrig.cli.main import main
from netrig.cli.sweep import parse_over


def test_values_are_read_as_typed():
    assert parse_over("flows=1,64k,-2,0.5,100kpps") == ("flows", [1, 64_000, -2, 0.5, "100kpps"])


@pytest.mark.parametrize("over, reason", [
    ("flows=1,-2", "ports.flows = -2: ports.flows: must be a positive integer, at most"),
    ("queues=1,0", "ports.queues = 0: ports.queues: must be a positive integer, at most"),
    ("flows=1,2.5", "ports.flows = 2.5: ports.flows: must be an integer (got 2.5)"),
])
def test_a_bad_count_is_refused_for_what_is_wrong_with_it(tmp_path, capsys, over, reason):
    assert main(["sweep", "--testbed", "simulated", "--no-selftest", "--over", over, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"netrig: error: --over: {reason}") and "\n" not in err, err
