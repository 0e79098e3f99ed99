"""Scalability sweeps (a study with a ``[sweep]`` table, and ``netrig sweep``): one config key set
to each value, the first value the baseline, and the comparison's curve and scale-up per step."""
from __future__ import annotations

import subprocess
import sys

import pytest

from netrig.errors import ConfigError
from netrig.report import write_study
from netrig.run.study import StudyRunner, study_from_dict


def _sweep(**sweep) -> dict:
    return {
        "study": {"name": "sw"},
        "base": {"testbed": {"name": "simulated", "simulator": {"capacity_pps": 100_000}},
                 "frames": {"sizes": [64]}, "trial": {"duration_s": 0.2}, "selftest": {"enabled": False},
                 "methods": [{"rfc2544_throughput": {}}]},
        "sweep": {"over": "flows", "values": [1, 16, 256], **sweep},
    }


def test_a_sweep_makes_one_variant_per_value_with_the_first_as_baseline():
    s = study_from_dict(_sweep())
    assert [v.name for v in s.variants] == ["flows-1", "flows-16", "flows-256"]
    assert [v.config.ports.flows for v in s.variants] == [1, 16, 256]
    assert s.source["sweep"] == {"key": "ports.flows", "label": "flows", "values": [1, 16, 256]}
    big = study_from_dict(_sweep(values=[65_535, 1 << 20]))
    assert big.variants[0].config.ports.flows == 65_535
    assert big.variants[1].config.stream.flows == {"src_ports": 1024, "dst_ports": 1024}
    sizes = study_from_dict(_sweep(over="frame-size", values=[64, 1518]))
    assert [[f.label for f in v.config.frames.sizes] for v in sizes.variants] == [[64], [1518]]
    cap = study_from_dict(_sweep(over="testbed.simulator.capacity_pps", values=[1e5, 2e5], label="capacity"))
    assert [v.name for v in cap.variants] == ["capacity-100000.0", "capacity-200000.0"]
    assert cap.variants[1].config.testbed.simulator.capacity_pps == 2e5


def test_a_connections_sweep_sets_every_stateful_method_and_keeps_the_others():
    d = _sweep(over="connections", values=[10_000, 100_000])
    d["base"]["testbed"] = {"name": "nat"}
    d["base"]["methods"] = [{"rfc2544_throughput": {}}, {"stateful": {"establish_rate_pps": 5000}}]
    s = study_from_dict(d)
    assert [v.name for v in s.variants] == ["connections-10000", "connections-100000"]
    for v, n in zip(s.variants, (10_000, 100_000)):
        first, stateful = v.config.methods
        assert first.name == "rfc2544_throughput"
        assert stateful.params.connections == n and stateful.params.establish_rate_pps == 5000
    d["base"]["methods"] = [{"rfc2544_throughput": {}}]  # nothing to sweep
    with pytest.raises(ConfigError, match="stateful"):
        study_from_dict(d)
    d["base"]["methods"] = [{"stateful": {}}]
    d["sweep"]["values"] = [10_000, 100_003]  # not src ports × dst ports
    with pytest.raises(ConfigError) as e:
        study_from_dict(d)
    assert e.value.field.startswith("sweep.values[1]")


@pytest.mark.parametrize("change, field", [
    (lambda d: d["sweep"].update(values=[1]), "sweep.values"),
    (lambda d: d["sweep"].update(values=[1, 1]), "sweep.values"),
    (lambda d: d["sweep"].update(values=list(range(1, 40))), "sweep.values"),
    (lambda d: d["sweep"].update(values=[1, [2]]), "sweep.values[1]"),
    (lambda d: d["sweep"].update(values=[1, True]), "sweep.values[1]"),
    (lambda d: d["sweep"].update(over="Flows!"), "sweep.over"),
    (lambda d: d["sweep"].update(over="methods"), "sweep.over"),
    (lambda d: d["sweep"].update(label="a/b"), "sweep.label"),
    (lambda d: d["sweep"].update(extra=1), "sweep.extra"),
    (lambda d: d["sweep"].update(values=[1, 0]), "sweep.values[1] (ports.flows = 0): ports.flows"),
    (lambda d: d.update(variant=[{"name": "x"}]), "sweep"),
    (lambda d: d["sweep"].update(values=[1, 100_000]), "sweep.values[1]"),
    (lambda d: d["study"].update(baseline="flows-16"), "study.baseline"),
    (lambda d: d.update(sweep=[1, 2]), "sweep"),
])
def test_bad_sweeps_name_the_key(change, field):
    d = _sweep()
    change(d)
    with pytest.raises(ConfigError) as e:
        study_from_dict(d)
    assert e.value.field == field


def test_a_sweep_reports_the_curve_and_the_scale_up_per_step(tmp_path):
    """The simulated DUT's capacity doubles per point: the throughput the sweep measures doubles
    too, and the comparison says so step by step (2.00×) and draws the curve."""
    study = study_from_dict(_sweep(over="testbed.simulator.capacity_pps", values=[100_000, 200_000, 400_000],
                                   label="capacity"))
    outcomes = StudyRunner(study, tmp_path / "sw").run()
    assert all(o.complete for o in outcomes)
    out = write_study(tmp_path / "sw")
    md = out.with_suffix(".md").read_text()
    table = md.split("## Sweep", 1)[1].split("\n\n")[1].splitlines()
    assert table[0].startswith("| capacity | RFC 2544 throughput 64 B ↑ | × step |")
    assert [row.split("|")[3].strip() for row in table[2:]] == ["—", "2.00×", "2.00×"]
    assert 'data-plot="sweep"' in out.read_text()


def test_netrig_sweep_runs_a_sweep_from_the_command_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "netrig.cli.main", "sweep", "--over", "flows=1,4k", "--testbed",
                        "simulated", "--no-selftest", "--duration", "0.2s", "--sizes", "64", "--out",
                        str(tmp_path / "s"), "--quiet"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "s" / "flows-4000" / "result.json").exists()
    assert "| flows |" in (tmp_path / "s" / "compare.md").read_text()
