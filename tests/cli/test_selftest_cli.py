"""``netrig selftest``: with ``--rates`` it proves factor × the highest; without, factor × the line
rate (the help's "[line rate]"), searching down from it to the highest rate it proves when that
fails. Before, without ``--rates`` it stopped at once: "load.rate_pps: must be > 0 (got 0.0)"."""
from __future__ import annotations

from netrig.cli.main import main
from netrig.results import load_result


def test_without_rates_it_proves_the_line_rate(tmp_path, capsys):
    assert main(["selftest", "--testbed", "simulated", "--frame-sizes", "64", "--duration", "0.2s",
                 "--quiet", "--out", str(tmp_path)]) == 0, capsys.readouterr().err
    doc = load_result(tmp_path)
    (c,) = doc["selftest"]["ceilings"]
    assert abs(c["required_rate_pps"] - 1.1 * doc["frame_sizes"][0]["line_rate_fps"]) < 1, c
    assert c["passed"] and c["proven_rate_pps"] == c["required_rate_pps"], c  # the simulated tester has no ceiling


def test_with_rates_it_proves_the_factor_times_the_highest(tmp_path, capsys):
    assert main(["selftest", "--testbed", "simulated", "--frame-sizes", "64", "--duration", "0.2s",
                 "--rates", "10k,20k", "--quiet", "--out", str(tmp_path)]) == 0, capsys.readouterr().err
    (c,) = load_result(tmp_path)["selftest"]["ceilings"]
    assert abs(c["required_rate_pps"] - 22_000) < 1 and c["passed"], c
