"""``netrig ndr-pdr``'s options become MLRsearch goals; a combination the search cannot run is refused."""
from __future__ import annotations

import pytest

from netrig.cli.main import build_parser, main
from netrig.errors import ConfigError
from netrig.methods.mlrsearch import METHOD


def _params(*argv: str) -> dict:
    return METHOD.cli_params(build_parser().parse_args(["ndr-pdr", "--testbed", "simulated", *argv]))


def test_the_default_initial_duration_is_shortened_to_a_shorter_final_one():
    goal = _params("--duration", "0.5s")["goals"][0]
    assert goal["initial_trial_duration_s"] == goal["final_trial_duration_s"] == 0.5
    goal = _params("--initial-duration", "0.2s", "--final-duration", "2s")["goals"][1]
    assert (goal["initial_trial_duration_s"], goal["final_trial_duration_s"]) == (0.2, 2.0)


@pytest.mark.parametrize("argv, final", [(("--final-duration", "1s"), "(1 s, --final-duration)"),
                                         (("--duration", "2s"), "(2 s, --duration)")])
def test_an_initial_duration_longer_than_the_final_one_is_refused(argv, final):
    with pytest.raises(ConfigError) as e:
        _params("--initial-duration", "5s", *argv)
    assert e.value.field == "--initial-duration"
    assert f"5s is longer than the final trial duration {final}" in e.value.message


def test_the_command_says_so_in_one_line(tmp_path, capsys):
    assert main(["ndr-pdr", "--testbed", "simulated", "--no-selftest", "--initial-duration", "5s",
                 "--final-duration", "1s", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("netrig: error: --initial-duration: 5s is longer") and "\n" not in err
