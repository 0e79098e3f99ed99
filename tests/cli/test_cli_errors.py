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
