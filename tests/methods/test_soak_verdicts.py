"""Soak verdicts on synthetic series (a leak of known slope is found with a confidence interval that
holds it; noise is not a leak; CPU spikes and loss episodes are found where they were put), and the
whole method on the simulated DUT: its intervals, its report, and a soak resumed from the interval
records an interrupted run left (no root needed)."""
from __future__ import annotations

import json
import math
import random

import pytest

from netrig.errors import ConfigError
from netrig.measure import Interval, Load, SimulatedMeasurer
from netrig.methods.soak import (
    SoakInterval,
    SoakParams,
    cpu_episodes,
    leak_verdicts,
    loss_episodes,
    slope_ci,
    t_quantile,
    trend,
)
from netrig.model import FrameSize
from netrig.report import write_report
from netrig.results import TrialLog, load_result
from netrig.results.typed import from_dict
from netrig.run.config import config_from_dict
from netrig.run.progress import Notice
from netrig.run.recording import RecordingMeasurer
from netrig.run.records import RecordedInterval
from netrig.run.runner import Runner

P = SoakParams(duration_s=7200, interval_s=10).thresholds()
MIB = 2 ** 20


def test_t_quantiles_match_the_tables():
    for df, want in [(1, 12.706), (2, 4.303), (3, 3.182), (5, 2.571), (10, 2.228), (30, 2.042), (1000, 1.962)]:
        assert t_quantile(0.975, df) == pytest.approx(want, rel=0.004), df


def _series(slope_per_s: float, sd: float, n: int = 720, dt: float = 10.0, seed: int = 1,
            base: float = 200 * MIB) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    ts = [i * dt for i in range(n)]
    return ts, [base + slope_per_s * t + rng.gauss(0, sd) for t in ts]


def test_a_leak_of_known_slope_is_found_with_an_interval_that_holds_it():
    # 1 MiB/h over 2 h on a 16 MiB process (about 10 % growth), with 64 KiB of sampling noise.
    covered = 0
    for seed in range(20):
        ts, ys = _series(MIB / 3600, 64 * 1024, base=16 * MIB, seed=seed)
        t = trend("RSS dut", "B", ts, ys, P)
        assert t is not None and t.leak, t.why
        assert t.slope_per_h == pytest.approx(MIB, rel=0.03)
        assert t.low_per_h > 0
        covered += t.low_per_h <= MIB <= t.high_per_h
    assert covered >= 17, "a 95 % interval holds the true slope about 19 times in 20"


def test_the_interval_covers_the_true_slope_about_as_often_as_it_says():
    hits = 0
    for seed in range(300):
        ts, ys = _series(0.5, 100.0, n=60, seed=seed)
        s = slope_ci(ts, ys, 0.95)
        assert s is not None
        hits += s.low <= 0.5 <= s.high
    assert 0.91 * 300 <= hits <= 0.985 * 300, hits


def test_autocorrelated_noise_widens_the_interval():
    rng = random.Random(7)
    ts, ys, y = [], [], 0.0
    for i in range(400):  # a random walk: no trend, strongly autocorrelated
        y += rng.gauss(0, 1.0)
        ts.append(float(i))
        ys.append(y)
    s = slope_ci(ts, ys, 0.95)
    assert s is not None and s.r1 > 0.8
    n, mx, my = len(ts), sum(ts) / len(ts), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in ts)
    a = my - s.slope * mx
    se_iid = math.sqrt(sum((y - a - s.slope * x) ** 2 for x, y in zip(ts, ys)) / (n - 2) / sxx)
    assert (s.high - s.low) > 3 * 2 * 1.966 * se_iid, "far wider than an i.i.d. fit's"


@pytest.mark.parametrize("slope,sd,why", [(0.0, 64 * 1024, "no growth"),
                                          # real but small growth: 2 % over the soak, below 5 %
                                          (0.02 * 200 * MIB / 7200, 16 * 1024, "noise, not a leak")])
def test_noise_and_small_growth_are_not_leaks(slope, sd, why):
    for seed in range(20):
        ts, ys = _series(slope, sd, seed=seed)
        t = trend("RSS dut", "B", ts, ys, P)
        assert t is not None and not t.leak, (seed, t)
    assert why in t.why


def test_host_memory_is_shown_but_not_judged_unless_asked():
    rows = [from_dict(SoakInterval, {"t_s": i * 10.0, "duration_s": 10.0, "segment": 0, "frames_sent": 1,
                                     "frames_received": 1, "frames_lost": 0,
                                     "monitor": {"mem": {"used_bytes": 10**9 + i * 10**7, "slab_bytes": 10**8}}})
            for i in range(50)]
    (used,) = [t for t in leak_verdicts(rows, P) if t.series.startswith("host memory used")]
    assert not used.leak and not used.judged and "not judged" in used.why
    (used,) = [t for t in leak_verdicts(rows, SoakParams(host_memory_verdict=True).thresholds()) if
               t.series.startswith("host memory used")]
    assert used.leak and used.judged


def _rows(n: int, lost_at: dict[int, int] | None = None, busy_at: dict[int, float] | None = None) \
        -> list[SoakInterval]:
    out = []
    for i in range(n):
        lost = (lost_at or {}).get(i, 0)
        out.append(from_dict(SoakInterval, {
            "t_s": float(i), "duration_s": 1.0, "segment": 0 if i < 40 else 1, "frames_sent": 1000,
            "frames_received": 1000 - lost, "frames_lost": lost,
            "monitor": {"cpu": {"all": 30.0, "cpu0": (busy_at or {}).get(i, 20.0), "cpu1": 99.0},
                        "procs": {"dut[7]": {"cpu_percent": 5.0, "rss_bytes": 1000}}}}))
    return out


def test_loss_episodes_are_found_with_their_times_frames_and_a_new_segment_ends_one():
    eps = loss_episodes(_rows(60, {5: 3, 6: 10, 7: 1, 20: 2, 39: 4, 40: 4}), 1)
    assert [(e.start_s, e.duration_s, e.frames_lost) for e in eps] == \
        [(5.0, 3.0, 14), (20.0, 1.0, 2), (39.0, 1.0, 4), (40.0, 1.0, 4)]
    assert eps[0].peak == pytest.approx(0.01)
    assert [e.start_s for e in loss_episodes(_rows(60, {5: 3, 6: 10, 7: 1, 20: 2}), 3)] == [5.0]


def test_cpu_spikes_are_episodes_and_a_core_busy_throughout_is_saturated_not_spiking():
    eps, saturated = cpu_episodes(_rows(30, busy_at={10: 97.0, 11: 95.0, 25: 100.0}), 90.0)
    assert [(e.series, e.start_s, e.duration_s, e.peak) for e in eps] == \
        [("cpu0", 10.0, 2.0, 97.0), ("cpu0", 25.0, 1.0, 100.0)]
    assert saturated == ["cpu1"]


def test_hostile_parameters_name_their_field():
    for kw, field in [({"rate": "max"}, "rate"), ({"rate": "0%NDR"}, "rate"), ({"interval_s": 0.0}, "interval_s"),
                      ({"duration_s": 20.0, "interval_s": 10.0}, "duration_s"), ({"confidence_pct": 100.0},
                                                                                 "confidence_pct"),
                      ({"stage_pct": 51.0}, "stage_pct"), ({"host_memory_verdict": "yes"}, "host_memory_verdict")]:
        with pytest.raises(ConfigError) as e:
            SoakParams(**kw)
        assert e.value.field == field


def _config(tmp_path, **soak) -> dict:
    return {"testbed": {"name": "simulated", "simulator": {"capacity_pps": 1e6}}, "selftest": {"enabled": False},
            "frames": {"sizes": [64]}, "output": {"dir": str(tmp_path / "out")},
            "methods": [{"soak": {"rate": "80%NDR", "duration_s": "60s", "interval_s": "2s", **soak}}]}


def test_a_simulated_soak_measures_the_ndr_first_and_reports_its_timeline(tmp_path):
    notes: list[str] = []
    cfg = config_from_dict(_config(tmp_path))
    doc = Runner(cfg, tmp_path / "out", progress=lambda e: notes.append(e.message) if isinstance(e, Notice) else None).run()
    e = doc["summary"][0]["results"][0]["repetitions"][0]
    assert e["ndr_pps"] == pytest.approx(1e6, rel=0.01)
    assert e["rate_pps"] == pytest.approx(0.8 * e["ndr_pps"])
    assert len(e["intervals"]) == 30 and e["covered_s"] == pytest.approx(60.0)
    assert e["frames_lost"] == 0 and e["loss_episodes"] == [] and e["leak"] is False
    assert sum(n.startswith("soak 0:") for n in notes) >= 1 and notes[-1].startswith("final soak 0:01:00/0:01:00")
    kinds = [t["kind"] for t in doc["trials"]]
    assert kinds[-1] == "soak" and kinds.count("rate") == len(kinds) - 1 >= 2, "the NDR search, then one soak trial"
    write_report(tmp_path / "out")
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'data-plot="soak"' in html and "Soak: stability over time" in html
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Loss episodes: 0" in md


def test_a_soak_given_its_ndr_does_not_measure_it(tmp_path):
    doc = Runner(config_from_dict(_config(tmp_path, ndr_pps=500_000.0)), tmp_path / "out").run()
    e = doc["summary"][0]["results"][0]["repetitions"][0]
    assert e["rate_pps"] == pytest.approx(400_000.0)
    assert [t["kind"] for t in doc["trials"]] == ["soak"]


def test_recorded_intervals_are_replayed_and_the_soak_continues_as_a_new_segment(tmp_path):
    log = TrialLog(tmp_path)
    log.open({"config": {}})
    frame = FrameSize(size=64)
    load_d = {"rate_pps": 1000.0, "frame_size": 64, "burst_frames": None, "duration_s": 10.0,
              "pct_line_rate": 0.0, "interval_s": 1.0}
    prior = [{"key": "0/64/0/0", "segment": 0, "index": i, "t_s": float(i), "duration_s": 1.0, "frames_sent": 1000,
              "frames_received": 1000 - (i == 2), "load": load_d, "monitor": None} for i in range(4)]
    from netrig.model import LineRate

    prior = [RecordedInterval.read(r) for r in prior]
    rec = RecordingMeasurer(log, {}, LineRate(1e9), intervals=prior)
    rec.inner = SimulatedMeasurer()
    rec.begin("soak", 0, frame, 0, "Soak")
    got: list[Interval] = []
    counts = rec.measure_soak(Load(1000.0, frame), 10.0, 1.0, lambda iv, s: got.append(iv))
    assert [iv.phase for iv in got] == [0] * 4 + [1] * 6
    assert [iv.t_s for iv in got] == [float(i) for i in range(10)], "soak time runs on"
    assert got[2].frames_lost == 1
    assert counts.frames_sent == 6000
    log.close()
    lines = [json.loads(x) for x in (tmp_path / "trials.ndjson").read_text().splitlines()]
    assert [x["type"] for x in lines] == ["header"] + ["interval"] * 6 + ["trial"]
    assert lines[-1]["segments"] == 2 and lines[1]["index"] == 4 and lines[1]["t_s"] == 4.0
    # A different load: refused, not mixed in.
    rec2 = RecordingMeasurer(TrialLog(tmp_path / "b"), {}, LineRate(1e9), intervals=prior)
    rec2.inner = SimulatedMeasurer()
    rec2.begin("soak", 0, frame, 0, "Soak")
    with pytest.raises(Exception, match="resume: soak trial 0/64/0/0 asks for"):
        rec2.measure_soak(Load(2000.0, frame), 10.0, 1.0, lambda iv, s: None)


def test_a_complete_soak_is_replayed_whole(tmp_path):
    out = tmp_path / "out"
    Runner(config_from_dict(_config(tmp_path, ndr_pps=500_000.0)), out).run()
    first = load_result(out)["summary"][0]["results"][0]["repetitions"][0]
    doc = Runner(config_from_dict(_config(tmp_path, ndr_pps=500_000.0)), out, resume=True).run()
    again = doc["summary"][0]["results"][0]["repetitions"][0]
    assert again["intervals"] == first["intervals"] and doc["trials"][0]["replayed"] is True
