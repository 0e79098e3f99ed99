"""Errors a user meets before anything runs (issue 27): one line naming the option and the remedy,
and the help of the command the option was given to. No privileges needed."""
from __future__ import annotations

import pytest

from netrig.cli.main import main


def _error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv, prog", [
    (["trial", "--bogus"], "netrig trial"),
    (["rfc2544", "--testbed", "simulated", "--bogus", "1"], "netrig rfc2544"),
    (["testbed", "up", "router", "--bogus"], "netrig testbed up"),
])
def test_an_unknown_option_names_the_commands_help(capsys, argv, prog):
    err = _error(capsys, argv)
    assert f"(see {prog} --help)" in err and "--bogus" in err, err


def test_a_negative_duration_is_netrigs_own_message(capsys):
    assert main(["forward", "--port", "a", "--duration", "-1s"]) == 2
    err = capsys.readouterr().err
    assert "netrig: error: --duration: must be a duration like 2s or 500ms (got '-1s')" in err, err
    assert "expected one argument" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("spec, says", [
    ("drop", "'drop': give KEY=VALUE with KEY one of drop, duplicate, reorder, distance, seed, delay"),
    ("delay=0.1", "'delay=0.1': delay takes PROBABILITY@DURATION, e.g. delay=0.02@10ms"),
    ("delay=0.1@soon", "'delay=0.1@soon': delay takes PROBABILITY@DURATION"),
    ("delay=0.1@20s", "a delay of 20000 ms: give more than 0 and at most 10 s"),
    ("delay=0.5@1ms,drop=0.6", "drop + duplicate + reorder + delays is 1.1: at most 1"),
    ("jitter=1", "'jitter=1': give KEY=VALUE"),
    ("distance=2.5", "'distance=2.5': distance takes an integer"),
    ("drop=lots", "'drop=lots': drop takes a number"),
])
def test_a_bad_fault_spec_is_one_line_naming_the_key(capsys, spec, says):
    assert main(["forward", "--port", "a", "--faults", spec]) == 2
    err = capsys.readouterr().err
    assert f"netrig: error: --faults: {says}" in err and len(err.strip().splitlines()) == 1, err


def test_a_fault_spec_becomes_the_forwarders_faults():
    from netrig.cli.forward import parse_faults

    assert parse_faults("drop=0.01, reorder=0.02,distance=20,seed=3") == {"drop": 0.01, "reorder": 0.02,
                                                                       "distance": 20, "seed": 3}
    assert parse_faults("delay=0.02@10ms,drop=0.1,delay=0.005@0.1") == {"delay": [(0.02, 0.01), (0.005, 0.1)],
                                                                          "drop": 0.1}
