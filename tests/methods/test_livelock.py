"""The receive-livelock method: on simulated DUTs with a known MLFRR and collapse slope the
estimates land within 2 %; the CPU per frame comes from monitoring; it runs, reports and compares
through the registry like every method."""
from dataclasses import replace

import pytest

from netrig.cli.main import main
from netrig.measure import DutModel, Load, SimulatedMeasurer, TrialCounts
from netrig.methodology.tester import ProvenLimit
from netrig.methods.livelock import LivelockParams, LoadPoint, fit, measure_livelock, softirq_seconds
from netrig.model import FrameSize, LineRate
from netrig.report import write_compare, write_report
from netrig.results import load_result
from netrig.run.config import config_from_dict
from netrig.run.runner import Runner

LR = LineRate(10e9)
F64 = FrameSize(64)
FAST = LivelockParams(duration_s=1, points=12, resolution_pct=0.25)


@pytest.mark.parametrize("cap,slope", [(2e6, 0.8), (5.5e6, 0.3), (1e6, 0.5), (3e6, 0.0)])
def test_estimates_within_two_percent(cap, slope):
    m = SimulatedMeasurer(DutModel(capacity_pps=cap, livelock_slope=slope, livelock_floor=0.05))
    r = measure_livelock(m, F64, LR, FAST)
    assert r.mlfrr_pps == pytest.approx(cap, rel=0.02)
    assert r.collapse_slope == pytest.approx(slope, rel=0.02, abs=0.005)
    assert r.max_lossfree_pps <= cap and cap - r.max_lossfree_pps <= r.resolution_pps * 1.001
    assert r.fit_points >= 2


def test_the_floor_is_not_fitted_as_collapse():
    """A DUT whose forwarding bottoms out early: the fit stops where the line no longer fits."""
    model = DutModel(capacity_pps=4e6, livelock_slope=1.5, livelock_floor=0.4)
    r = measure_livelock(SimulatedMeasurer(model), F64, LR, FAST)
    assert r.mlfrr_pps == pytest.approx(4e6, rel=0.02) and r.collapse_slope == pytest.approx(1.5, rel=0.02)
    assert r.floor_pps == pytest.approx(0.4 * 4e6, rel=0.01)


def test_no_loss_no_knee():
    r = measure_livelock(SimulatedMeasurer(DutModel(capacity_pps=1e9)), F64, LR, replace(FAST, points=4))
    assert r.mlfrr_pps is None and r.collapse_slope is None
    assert r.max_lossfree_pps == pytest.approx(LR.fps(F64))
    assert r.headline_pps == r.max_lossfree_pps


def test_tester_limited_loads_are_not_collapse():
    """Above the tester's ceiling trials are invalid: left out of the fit, never read as livelock."""
    model = DutModel(capacity_pps=2e6, livelock_slope=0.5, tester_ceiling_pps=6e6, tester_tolerance_ratio=0.0)
    r = measure_livelock(SimulatedMeasurer(model), F64, LR, FAST)
    assert any(not p.valid for p in r.points)
    assert r.mlfrr_pps == pytest.approx(2e6, rel=0.02) and r.collapse_slope == pytest.approx(0.5, rel=0.02)


def test_a_dut_that_holds_the_sender_back_fails_the_load_but_is_not_fitted_as_collapse():
    """Backpressure (on veth the DUT's forwarding runs on the sender's CPU): above 1.5 Mfps the DUT
    slows the sender, which the self-test proved could send 6 Mfps. Those loads failed — the knee is
    bisected below them — and they are drawn, flagged, at what was forwarded per second of the real
    sending; the model is not fitted to them."""
    model = DutModel(capacity_pps=4e6, livelock_slope=0.5, backpressure_pps=1.5e6, tester_tolerance_ratio=0.0)
    r = measure_livelock(SimulatedMeasurer(model), F64, LR, FAST, ProvenLimit(6e6))
    held = [p for p in r.points if p.backpressure]
    assert held and all(not p.valid and p.failed for p in held)
    assert all(p.forwarded_pps == pytest.approx(1.5e6, rel=0.01) for p in held)
    assert r.mlfrr_pps is None and r.collapse_slope is None and r.fit_points == 0
    assert r.max_lossfree_pps <= 1.5e6 and 1.5e6 - r.max_lossfree_pps <= r.resolution_pps * 1.001
    assert r.backpressure_from_pps == min(p.intended_pps for p in held) > 1.5e6
    d = r.to_dict()
    assert d["backpressure_trials"] == len(held) and all("backpressure" in p for p in d["points"])
    # Without a self-test nothing is known: the same shortfall is the tester's, not a failed load.
    blind = measure_livelock(SimulatedMeasurer(model), F64, LR, FAST)
    assert not any(p.backpressure for p in blind.points) and blind.backpressure_from_pps is None


def test_the_report_draws_held_back_loads_and_says_why_there_is_no_fit(tmp_path):
    cfg = config_from_dict({  # the self-test (on, by default) proves the tester's rate
        "testbed": {"name": "simulated", "simulator": {"capacity_pps": 4e6, "livelock_slope": 0.5,
                                                       "backpressure_pps": 1.5e6}},
        "trial": {"duration_s": 1}, "frames": {"sizes": [64]},
        "methods": [{"livelock": {"points": 8, "resolution_pct": 0.5}}]})
    out = tmp_path / "held"
    Runner(cfg, out).run()
    res = load_result(out / "result.json")["summary"][0]["results"][0]
    points = [p for rep in res["repetitions"] for p in rep["points"]]
    assert any(p["backpressure"] for p in points), "the self-test proved the rate: a DUT result"
    page = write_report(out / "result.json")
    html = page.read_text()
    assert "DUT slowed the sender" in html and "no collapse to fit" in html and "cannot livelock" in html
    md = page.with_suffix(".md").read_text()
    assert "DUT slowed the sender from" in md and "no collapse to fit" in md


def test_fit_from_a_single_lossy_load():
    clean = LoadPoint(1e6, 1e6, 1e6, 0.0, True)
    knee, slope, n = fit([clean, LoadPoint(2e6, 2e6, 0.5e6, 0.75, True)], 0.02)
    assert (knee, n) == (1e6, 1) and slope == pytest.approx(0.5)
    # forwarding still grew past the last loss-free load: a cap at what it forwarded, slope unknown (0)
    assert fit([clean, LoadPoint(2e6, 2e6, 1.5e6, 0.25, True)], 0.02) == (1.5e6, 0.0, 1)
    assert fit([clean], 0.02) is None


def monitor(softirq_pct: float) -> dict:
    """Monitor samples: 2 CPUs at ``softirq_pct`` for 1 s between the trial marks, and one outside."""
    cpu = {"cpu0": {"softirq": softirq_pct}, "cpu1": {"softirq": softirq_pct}, "all": {"softirq": softirq_pct}}
    return {"interval_s": 0.5, "samples": [
        {"mark": "trial-start", "t_s": 0.0}, {"t_s": 0.5, "dt_s": 0.5, "cpu": cpu}, {"t_s": 1.0, "dt_s": 0.5, "cpu": cpu},
        {"mark": "trial-stop", "t_s": 1.0}, {"t_s": 1.5, "dt_s": 0.5, "cpu": {"cpu0": {"softirq": 100.0}}}]}


def _counts(raw: dict) -> TrialCounts:
    return TrialCounts(1e5, 100, 100, raw=raw)


def test_softirq_seconds_in_the_trial_window():
    assert softirq_seconds(_counts({"monitor": monitor(25.0)})) == pytest.approx(2 * 0.25 * 1.0)
    assert softirq_seconds(_counts({})) is None


def test_softirq_seconds_from_the_trials_exact_accounting_first():
    raw = {"cpu": {"cores": {"cpu0": {"softirq": 0.3}, "cpu1": {"softirq": 0.2}}}, "monitor": monitor(25.0)}
    assert softirq_seconds(_counts(raw)) == pytest.approx(0.5)


class Monitored(SimulatedMeasurer):
    """A simulated DUT that is also monitored: softirq load proportional to the forwarded rate."""

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        c = super().measure(load, duration_s)
        pct = min(100.0, 100 * (c.frames_received / duration_s) / 4e6)  # 2 CPUs: 250 ns per frame
        return replace(c, raw={**c.raw, "monitor": monitor(pct)})


def test_cpu_per_frame_below_the_knee():
    r = measure_livelock(Monitored(DutModel(capacity_pps=3e6, livelock_slope=0.4)), F64, LR, FAST)
    assert r.cpu_ns_per_frame == pytest.approx(500.0, rel=0.01)  # 2 CPUs × 1 s × pct / frames


def run_simulated(tmp_path, name, slope):
    cfg = config_from_dict({
        "testbed": {"name": "simulated", "simulator": {"capacity_pps": 2e6, "livelock_slope": slope,
                                                       "livelock_floor": 0.05}},
        "trial": {"duration_s": 1}, "selftest": {"enabled": False}, "frames": {"sizes": [64, 1518]},
        "methods": [{"livelock": {"points": 8, "resolution_pct": 0.5}}]})
    out = tmp_path / name
    Runner(cfg, out).run()
    return out / "result.json"


def test_runs_reports_and_compares_through_the_registry(tmp_path):
    a, b = run_simulated(tmp_path, "gro-on", 0.8), run_simulated(tmp_path, "gro-off", 0.2)
    doc = load_result(a)
    entry = doc["summary"][0]
    assert entry["label"] == "Receive livelock (MLFRR)"
    st = entry["results"][0]["stats"]
    assert st["mlfrr_pps"]["median"] == pytest.approx(2e6, rel=0.02)
    assert st["collapse_slope"]["median"] == pytest.approx(0.8, rel=0.02)
    html = write_report(a).read_text()
    assert '<section id="livelock">' in html and 'data-plot="livelock"' in html and "MLFRR" in html
    cmp = write_compare([a, b], tmp_path / "cmp.html").read_text()
    assert 'data-plot="livelock"' in cmp and "gro-off" in cmp and "Maximum loss-free forwarding rate" in cmp
    # a report of a run without the method has no livelock section
    bare = tmp_path / "bare.json"
    bare.write_text('{"schema_version": 2, "summary": [], "trials": []}')
    assert 'id="livelock"' not in write_report(bare).read_text()


def test_cli_shortcut(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["livelock", "--testbed", "simulated", "--sim-capacity-pps", "2e6", "--duration", "1s",
                 "--no-selftest", "--points", "6", "--out", str(out), "--quiet"]) == 0
    assert "Receive livelock (MLFRR)" in capsys.readouterr().out
    assert main(["livelock", "--testbed", "simulated", "--points", "2", "--out", str(tmp_path / "x"),
                 "--quiet"]) == 2
    assert "--points: must be >= 3" in capsys.readouterr().err


def test_the_loads_are_placed_around_a_capacity_far_below_the_line_rate():
    """The acl test bed with 3 000 rules forwards far less than 5 % of the line rate: an even grid
    from there put every load above its capacity, found no knee and exited 0. Found first, the
    capacity centres the sweep: the forwarded rate is seen rising, then falling, and the knee fits."""
    m = SimulatedMeasurer(DutModel(capacity_pps=300e3, livelock_slope=0.5, livelock_floor=0.05))
    r = measure_livelock(m, F64, LR, FAST)
    assert r.capacity_from == "the sweep's throughput search" and r.knee_in_reach
    assert 300e3 - r.resolution_pps <= r.capacity_pps <= 300e3
    rising = [p for p in r.points if p.valid and not p.lossy]
    falling = [p for p in r.points if p.valid and p.lossy]
    assert len({round(p.intended_pps) for p in rising}) >= 3 and len(falling) >= 3
    assert max(p.intended_pps for p in rising) <= 300e3 < min(p.intended_pps for p in falling)
    assert r.mlfrr_pps == pytest.approx(300e3, rel=0.02) and r.collapse_slope == pytest.approx(0.5, rel=0.02)
    assert 300e3 - r.resolution_pps <= r.max_lossfree_pps <= 300e3
    assert r.to_dict()["capacity_pps"] == r.capacity_pps and m.trials == len(r.points)


def test_the_runs_throughput_places_the_loads_without_a_search_of_its_own(tmp_path):
    cfg = config_from_dict({
        "testbed": {"name": "simulated", "simulator": {"capacity_pps": 300e3, "livelock_slope": 0.5}},
        "trial": {"duration_s": 1}, "selftest": {"enabled": False}, "frames": {"sizes": [64]},
        "methods": [{"rfc2544_throughput": {"resolution_pct": 0.1}},
                    {"livelock": {"points": 9, "resolution_pct": 0.25}}]})
    Runner(cfg, tmp_path).run()
    doc = load_result(tmp_path / "result.json")
    tp = doc["summary"][0]["results"][0]["repetitions"][0]["rate_pps"]
    rep = doc["summary"][1]["results"][0]["repetitions"][0]
    assert rep["capacity_from"] == "the run's throughput" and rep["capacity_pps"] == tp
    livelock_trials = [t for t in doc["trials"] if t["method"] == "livelock"]
    assert len(livelock_trials) == len(rep["points"])
    # no search of its own (it would begin at the top load): the sweep begins below the capacity
    assert livelock_trials[0]["load"]["rate_pps"] == pytest.approx(tp / 3)
    assert rep["mlfrr_pps"] == pytest.approx(300e3, rel=0.02)


def test_no_knee_only_where_the_loads_show_it(tmp_path):
    """A DUT faster than every load: the loads span min_pct to the top, all loss-free, and the
    report says there is no knee in reach instead of drawing none."""
    r = measure_livelock(SimulatedMeasurer(DutModel(capacity_pps=1e9)), F64, LR, replace(FAST, points=4))
    assert not r.knee_in_reach and r.capacity_pps is None and r.top_pps == pytest.approx(LR.fps(F64))
    cfg = config_from_dict({"testbed": {"name": "simulated", "simulator": {"capacity_pps": 1e9}},
                            "trial": {"duration_s": 1}, "selftest": {"enabled": False}, "frames": {"sizes": [64]},
                            "methods": [{"livelock": {"points": 4}}]})
    Runner(cfg, tmp_path).run()
    md = write_report(tmp_path / "result.json").with_suffix(".md").read_text()
    assert "no knee in reach — the DUT forwarded every load up to 14,880,952 fps intended without loss" in md, md
