"""A run's telemetry (``netrig.telemetry.runs``): the exported counters are the sums of the trial
records of ``result.json`` exactly, only grow across trials, say a resume (replayed trials apart),
and a soak exports its settled intervals and its live verdicts — on the simulated DUT, in-process."""
from __future__ import annotations

import pytest
from tests.telemetry.helpers import registry_samples, total

from netrig.measure import TrialCounts
from netrig.results import load_result
from netrig.run.config import config_from_dict
from netrig.run.progress import RunStart, TrialEnd, TrialInfo, TrialProgress, TrialStart
from netrig.run.records import LoadRecord
from netrig.run.runner import Runner
from netrig.telemetry.collect import StoreCollector
from netrig.telemetry.runs import RunTelemetry
from netrig.telemetry.store import Store
from netrig.telemetry.telemetry import tee

SIM = {"testbed": {"name": "simulated", "simulator": {"capacity_pps": 300000, "background_loss_ratio": 0.0001}},
       "trial": {"duration_s": "1s"}, "frames": {"sizes": [64, 1518]}, "selftest": {"enabled": False}}


def exporter():
    from prometheus_client.registry import CollectorRegistry

    store = Store()
    reg = CollectorRegistry(auto_describe=False)
    reg.register(StoreCollector(store))
    return store, reg


def run(cfg: dict, out, progress, **kw) -> dict:
    return Runner(config_from_dict(cfg), out, progress=progress, **kw).run()


def sums(doc: dict, key: str) -> int:
    return sum(t["counts"][key] for t in doc["trials"] if "counts" in t)


def test_counters_are_the_results_sums_and_only_grow(tmp_path):
    store, reg = exporter()
    seen: list[tuple[float, float]] = []

    def after_trial(event):
        if isinstance(event, TrialEnd):
            s = registry_samples(reg)
            seen.append((total(s, "netrig_frames_sent_total"), total(s, "netrig_frames_lost_total")))

    cfg = {**SIM, "methods": [{"rfc2544_throughput": {}}, {"rfc2544_frame_loss": {}}]}
    doc = run(cfg, tmp_path / "r", tee(RunTelemetry(store), after_trial))
    s = registry_samples(reg)
    assert total(s, "netrig_frames_sent_total") == sums(doc, "frames_sent") > 0
    assert total(s, "netrig_frames_lost_total") == sums(doc, "frames_lost") > 0
    assert total(s, "netrig_frames_received_total") == sums(doc, "frames_received")
    assert total(s, "netrig_trials_total") == len(doc["trials"])
    assert all(a <= b for a, b in zip(seen, seen[1:])) and len(seen) == len(doc["trials"])
    run_label = doc["run_id"]
    assert total(s, "netrig_frames_sent_total", run=run_label, method="rfc2544_frame_loss", frame_size="1518") == \
        sum(t["counts"]["frames_sent"] for t in doc["trials"] if t["method"] == "rfc2544_frame_loss"
            and t["frame_size"] == 1518)
    assert total(s, "netrig_run_complete", run=run_label) == 1
    assert total(s, "netrig_trial_running") == 0, "nothing in progress after the run"
    lat = [x for x in s if x.name == "netrig_latency_seconds" and x.labels.get("quantile") == "0.99"]
    assert lat and all(0 < x.value < 1 for x in lat)
    assert total(s, "netrig_result", method="rfc2544_throughput", value="rate_pps") > 0


def test_trial_in_progress_is_live():
    store, reg = exporter()
    tel = RunTelemetry(store)
    tel(RunStart("r", "x", "o", 7))
    trial = TrialInfo("0/64/0/0", "soak", "soak", "Soak", 64, 0, 0, LoadRecord(64, 10.0, rate_pps=1000.0))
    tel(TrialStart(trial))
    tel(TrialProgress("running", 0.1, 100, 90))
    tel(TrialProgress("running", 0.3, 300, 290))
    s = registry_samples(reg)
    assert total(s, "netrig_trial_running", method="soak", kind="soak") == 1
    assert total(s, "netrig_trial_index") == 1 and total(s, "netrig_trials_estimated") == 7
    assert total(s, "netrig_trial_frames_sent") == 300 and total(s, "netrig_trial_intended_rate_pps") == 1000
    assert total(s, "netrig_trial_achieved_rate_pps") > 0 and total(s, "netrig_trial_received_rate_pps") > 0
    tel(TrialEnd(trial, False, TrialCounts(1000.0, 1000, 990)))
    s = registry_samples(reg)
    assert total(s, "netrig_trial_running") == 0 and total(s, "netrig_frames_lost_total") == 10
    assert total(s, "netrig_loss_ratio") == pytest.approx(0.01)
    assert total(s, "netrig_intended_rate_pps") == 1000 and total(s, "netrig_achieved_rate_pps") == 1000
    assert total(s, "netrig_received_rate_pps") == pytest.approx(990), "received over the sending window"


class Interrupt:
    """A progress function that stops the run (Ctrl-C) at its ``k``-th finished trial."""

    def __init__(self, k: int):
        self.k = k

    def __call__(self, event):
        if isinstance(event, TrialEnd):
            self.k -= 1
            if self.k == 0:
                raise KeyboardInterrupt


def test_a_resumed_run_says_so_and_its_sums_still_match(tmp_path):
    cfg = {**SIM, "frames": {"sizes": [64]}, "methods": [{"rfc2544_throughput": {}}]}
    first, _ = exporter()
    with pytest.raises(KeyboardInterrupt):
        run(cfg, tmp_path / "r", tee(RunTelemetry(first), Interrupt(3)))
    store, reg = exporter()
    doc = run(cfg, tmp_path / "r", RunTelemetry(store), resume=True)
    s = registry_samples(reg)
    assert total(s, "netrig_run_resumes") == 1
    replayed = [t for t in doc["trials"] if t["replayed"]]
    assert len(replayed) == 3
    assert total(s, "netrig_frames_sent_total", replayed="true") == sum(t["counts"]["frames_sent"] for t in replayed)
    assert total(s, "netrig_frames_sent_total") == sums(doc, "frames_sent")
    assert total(s, "netrig_frames_lost_total") == sums(load_result(tmp_path / "r"), "frames_lost")


def test_a_soak_exports_its_intervals_and_verdict_state(tmp_path):
    store, reg = exporter()
    cfg = {**SIM, "frames": {"sizes": [64]},
           "methods": [{"soak": {"rate": "100kpps", "duration_s": "6s", "interval_s": "1s"}}]}
    doc = run(cfg, tmp_path / "s", RunTelemetry(store))
    s = registry_samples(reg)
    rows = doc["summary"][0]["results"][0]["repetitions"][0]["intervals"]
    assert total(s, "netrig_intervals_total") == len(rows) == 6
    assert total(s, "netrig_interval_frames_lost_total") == sum(r["frames_lost"] for r in rows)
    assert total(s, "netrig_interval_frames_sent_total") == sum(r["frames_sent"] for r in rows)
    for value in ("leaks", "cpu_spikes", "loss_episodes", "loss_ratio"):
        assert [x for x in s if x.name == "netrig_result" and x.labels["value"] == value], value
