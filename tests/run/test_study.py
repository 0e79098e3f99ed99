"""Studies (netrig.run.study): variants validated before anything runs, run one after another into
one directory, continued after Ctrl-C without redoing finished variants, refused over a different
study, and reported as one comparison with every variant against the baseline."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from tests.conftest import needs_root
from tests.testbed.testbed_helpers import assert_gone

from netrig.errors import ConfigError, ResultError
from netrig.report import write_study
from netrig.run.runner import Runner
from netrig.run.study import StudyRunner, load_study, merge, study_from_dict


def _study(**extra) -> dict:
    return {
        "study": {"name": "sim", "title": "Simulated service cost", "baseline": "routing", **extra},
        "base": {"testbed": {"name": "simulated", "simulator": {"capacity_pps": 400_000}},
                 "frames": {"sizes": [64]}, "trial": {"duration_s": 1},
                 "methods": [{"rfc2544_throughput": {}}, {"tcp": {"duration_s": 2}}]},
        "variant": [{"name": "nat", "description": "half the capacity",
                     "testbed": {"simulator": {"capacity_pps": 200_000}}},
                    {"name": "routing"}],
    }


def test_merge_tables_key_by_key_and_replaces_the_rest():
    assert merge({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"c": 3}, "l": [2]}) == {"a": {"b": 1, "c": 3}, "l": [2]}


def test_variants_merge_into_the_base_and_the_baseline_goes_first():
    s = study_from_dict(_study())
    assert [v.name for v in s.variants] == ["routing", "nat"]
    nat = s.variants[1].config
    assert nat.name == "nat" and nat.testbed.simulator.capacity_pps == 200_000
    assert nat.frames.sizes[0].label == 64 and [m.name for m in nat.methods] == ["rfc2544_throughput", "tcp"]


@pytest.mark.parametrize("change, field", [
    (lambda d: d["variant"].append({"name": "nat"}), "variant[2].name"),
    (lambda d: d["variant"].append({"testbed": {}}), "variant[2].name"),
    (lambda d: d["study"].update(baseline="nope"), "study.baseline"),
    (lambda d: d["variant"][0].update(trial={"duraton_s": 1}), "variant[0] (nat).trial.duraton_s"),
    (lambda d: d["variant"][0].update(methods=[{"tcp": {"streams": 0}}]), "variant[0] (nat).methods[0].tcp.streams"),
    (lambda d: d.update(extra=1), "extra"),
    (lambda d: d["study"].update(name="../x"), "study.name"),
    (lambda d: d.update(variant=[]), "variant"),
])
def test_bad_studies_name_the_key(change, field):
    d = _study()
    change(d)
    with pytest.raises(ConfigError) as e:
        study_from_dict(d)
    assert e.value.field == field


def test_runs_every_variant_and_compares_them(tmp_path):
    out = tmp_path / "s"
    outcomes = StudyRunner(study_from_dict(_study()), out).run()
    assert [(o.name, o.state, o.complete) for o in outcomes] == [("routing", "done", True), ("nat", "done", True)]
    html = write_study(out)
    text = html.read_text()
    assert 'data-plot="study"' in text and "Study: Simulated service cost" in text
    assert "50.0 %" in text  # nat's throughput and goodput against routing
    md = html.with_suffix(".md").read_text()
    assert "| TCP goodput (5 × forward) ↑ | " in md and "| RFC 2544 throughput 64 B ↑ | " in md
    assert (out / "nat" / "report.html").exists() and (out / "routing" / "report.html").exists()
    state = json.loads((out / "study.json").read_text())
    assert state["complete"] and state["baseline"] == "routing"


def test_ctrl_c_keeps_what_finished_and_the_next_run_continues(tmp_path):
    out = tmp_path / "s"
    study = study_from_dict(_study())
    calls: list[str] = []

    def stop_on_nat(config, d, resume):
        calls.append(config.name)
        if config.name == "nat":
            raise KeyboardInterrupt
        return Runner(config, d, resume=resume).run()

    with pytest.raises(KeyboardInterrupt):
        StudyRunner(study, out, run_variant=stop_on_nat).run()
    state = json.loads((out / "study.json").read_text())
    assert [v["state"] for v in state["variants"]] == ["done", "interrupted"] and not state["complete"]
    outcomes = StudyRunner(study, out).run()
    assert [o.state for o in outcomes] == ["kept", "done"]
    assert calls == ["routing", "nat"]


def test_a_failing_variant_is_recorded_and_the_study_goes_on(tmp_path):
    def fail_nat(config, d, resume):
        if config.name == "nat":
            raise ResultError("nat: its test bed cannot be built")
        return Runner(config, d, resume=resume).run()

    outcomes = StudyRunner(study_from_dict(_study()), tmp_path / "s", run_variant=fail_nat).run()
    assert outcomes[1].state == "failed" and "cannot be built" in (outcomes[1].error or "")
    assert "cannot be built" in write_study(tmp_path / "s").read_text()


def test_a_variant_the_machine_cannot_run_is_skipped_with_its_reason(tmp_path):
    from netrig.errors import CapabilityError

    def no_flowtable(config, d, resume):
        if config.name == "nat":
            raise CapabilityError("flowtable: this kernel cannot create an nftables flowtable")
        return Runner(config, d, resume=resume).run()

    out = tmp_path / "s"
    outcomes = StudyRunner(study_from_dict(_study()), out, run_variant=no_flowtable).run()
    assert outcomes[1].state == "skipped" and "flowtable" in (outcomes[1].error or "")
    assert json.loads((out / "study.json").read_text())["complete"]  # nothing left to run here


def test_a_different_study_in_the_same_directory_is_refused(tmp_path):
    out = tmp_path / "s"
    StudyRunner(study_from_dict(_study()), out).run()
    other = _study()
    other["variant"][0]["testbed"]["simulator"]["capacity_pps"] = 100_000
    with pytest.raises(ResultError, match="different study"):
        StudyRunner(study_from_dict(other), out).run()


def test_cli_runs_a_study_file(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text("""
[study]
name = "cli"
[base]
testbed = { name = "simulated" }
frames = { sizes = [1518] }
trial = { duration_s = 1 }
methods = [ { tcp = { duration_s = 1 } } ]
[[variant]]
name = "a"
[[variant]]
name = "b"
testbed = { simulator = { capacity_pps = 100000 } }
""")
    r = subprocess.run([sys.executable, "-m", "netrig.cli.main", "study", str(f), "--out", str(tmp_path / "o"),
                        "--quiet"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "o" / "compare.html").exists() and "comparison:" in r.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[study]\nname = "x"\n[[variant]]\nname = "a"\nmethods = [ { tcpp = {} } ]\n')
    r = subprocess.run([sys.executable, "-m", "netrig.cli.main", "study", str(bad)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "variant[0] (a).methods[0].tcpp" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_example_studies_are_valid():
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    for name in ("service-cost.toml", "host-tuning.toml", "flows-sweep.toml", "routes-sweep.toml", "table-scale.toml"):
        s = load_study(root / "examples" / name)
        assert len(s.variants) >= 4, name


def test_a_routes_sweep_spreads_the_traffic_over_the_routes():
    """Each point of a routes sweep loads N host routes and sends to N destinations, one per
    route, in RFC 4814's pseudorandom order."""
    from pathlib import Path
    s = load_study(Path(__file__).resolve().parents[2] / "examples" / "routes-sweep.toml")
    last = s.variants[-1].config
    assert last.testbed.options["routes"] == 65_534
    assert last.stream.flows == {"dst_ips": 65_534} and last.stream.flow_order == "pseudorandom"


def test_the_bgp_routes_study_learns_each_table_over_bgp_and_spreads_over_it():
    from pathlib import Path
    s = load_study(Path(__file__).resolve().parents[2] / "examples" / "bgp-routes.toml")
    points = [(v.config.testbed.options, v.config.stream.flows, v.config.ports.family) for v in s.variants]
    assert points == [({"routing": "bgp", "routes": n}, {"dst_ips": n}, 6) for n in (1000, 100_000, 1 << 20)]


def test_the_table_scale_study_spreads_each_variant_over_its_table():
    """Every variant of examples/table-scale.toml sends one destination per route or neighbour of
    its test bed, in RFC 4814's order; a hosts sweep does the same."""
    from pathlib import Path
    s = load_study(Path(__file__).resolve().parents[2] / "examples" / "table-scale.toml")
    for v in s.variants:
        opts = v.config.testbed.options
        n = opts.get("routes") or opts.get("hosts")
        assert v.config.stream.flows == {"dst_ips": n} and v.config.stream.flow_order == "pseudorandom", v.name
    assert max(v.config.testbed.options.get("hosts") or 0 for v in s.variants) == 65_533
    million = [v.config for v in s.variants if v.config.testbed.options.get("routes") == 1 << 20]
    assert [(c.ports.family, [f.size for f in c.frames.sizes]) for c in million] == [(6, [84])], "IPv6 holds a million"
    swept = study_from_dict({"study": {"name": "h"}, "base": {"testbed": {"name": "router"},
                                                              "methods": [{"rfc2544_throughput": {}}]},
                             "sweep": {"over": "hosts", "values": [10, 2000]}})
    last = swept.variants[-1].config
    assert last.testbed.options["hosts"] == 2000 and last.stream.flows == {"dst_ips": 2000}


@needs_root
@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed (make setup)")
def test_real_study_router_against_acl_with_knobs_restored(tmp_path):
    """Two real test beds, iperf3 through each, a knob on one variant: the study finishes, the ACL's
    goodput is compared with routing's, and the knob was applied and restored."""
    study = study_from_dict({
        "study": {"name": "real"},
        "base": {"testbed": {"name": "router"}, "selftest": {"enabled": False}, "trial": {"duration_s": 1},
                 "methods": [{"tcp": {"duration_s": 1, "streams": 2}}]},
        "variant": [{"name": "routing"},
                    {"name": "acl-gro", "testbed": {"name": "acl", "options": {"rules": 50},
                                                    "knobs": {"dut": {"features": {"gro": "on"}}}}}],
    })
    outcomes = StudyRunner(study, tmp_path / "s").run()
    assert [o.state for o in outcomes] == ["done", "done"], [(o.name, o.error) for o in outcomes]
    acl = json.loads((tmp_path / "s" / "acl-gro" / "result.json").read_text())
    assert acl["summary"][0]["results"][0]["repetitions"][0]["goodput_bps"] > 1e8
    knobs = acl["testbed"]["knobs"]
    assert knobs["restored"] is True and any("features.gro" in v for v in knobs["applied"]["dut"].values())
    text = write_study(tmp_path / "s").read_text()
    assert 'data-plot="study"' in text and "acl-gro" in text
    for v in ("routing", "acl-gro"):  # each variant's test bed is gone (others may be up on a shared machine)
        assert_gone(json.loads((tmp_path / "s" / v / "result.json").read_text())["testbed"]["id"])
