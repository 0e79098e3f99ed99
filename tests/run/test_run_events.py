"""Events under load in a run (``trial.events``): the run loop runs them in every timed trial of the
methods that take them, and in no other trial; results record what each cost; a resumed run replays
the trials with events and measures the rest to the same summary."""
import json

import pytest
from tests.run.test_resume import Boom, _strip

from netrig.report import write_report
from netrig.results import load_result
from netrig.run.config import config_from_dict
from netrig.run.runner import Runner

#: The simulated DUT forwards nothing for 0.2 s after every event's command ran.
CONFIG = {
    "testbed": {"name": "simulated", "simulator": {"capacity_pps": 1e6, "reset_time_s": 0.2,
                                                   "tester_ceiling_pps": 2e7}},
    "frames": {"sizes": [64]},
    "trial": {"duration_s": "1s", "drain_s": 0, "events": [{"command": "echo ran-$NETRIG_TEST_MARK", "at_s": 0.5}]},
    "selftest": {"enabled": False},
    "methods": [
        {"rfc2544_frame_loss": {"start_pct": 4, "step_pct": 1, "min_pct": 2}},
        {"rfc2544_back_to_back": {"trials": 1}},
        {"iperf": {"rate_pct": 5, "duration_s": 2, "interval_s": 0.1}},
        {"soak": {"rate": "1000pps", "duration_s": "3s", "interval_s": "0.5s"}},
    ],
}


def test_events_run_in_every_timed_trial_of_the_methods_that_take_them(tmp_path):
    doc = Runner(config_from_dict(CONFIG), tmp_path / "r").run()
    by_method: dict[str, list[dict]] = {}
    for t in doc["trials"]:
        by_method.setdefault(t["method"], []).append(t)
    assert [t["kind"] for t in by_method["rfc2544_frame_loss"]] == ["events"] * 3  # 4 %, 3 %, 2 %
    # Back-to-back: bursts, after the throughput search it needs first: neither runs events.
    assert {t["kind"] for t in by_method["rfc2544_back_to_back"]} == {"rate", "burst"}
    assert all(t["counts"]["events"] is None for t in by_method["rfc2544_back_to_back"])
    assert [t["kind"] for t in by_method["iperf"]] == ["phases"]
    assert [t["kind"] for t in by_method["soak"]] == ["soak"]
    for m in ("rfc2544_frame_loss", "iperf", "soak"):
        for t in by_method[m]:
            assert t["load"]["events"] == [{"command": "echo ran-$NETRIG_TEST_MARK", "at_s": 0.5}], (m, t["load"])
            (ev,) = t["counts"]["events"]
            assert ev["event"]["ok"] and ev["event"]["output_tail"].startswith("ran-"), ev["event"]
            # The model's 0.2-s outage, and every frame the trial lost is the event's.
            assert ev["outage_s"] == pytest.approx(0.2, rel=1e-3) and ev["recovery_s"] == pytest.approx(0.2)
            lost = t["counts"]["frames_sent"] - t["counts"]["frames_received"]
            assert ev["frames_lost"] == lost > 0, (m, ev["frames_lost"], lost)
            rate = t["load"]["rate_pps"]
            assert ev["frames_lost"] == pytest.approx(0.2 * rate, rel=0.06), (m, rate)
    # The frame-loss curve is the events' cost: 20 % of a 1-s trial at every load.
    fl = doc["summary"][0]["results"][0]
    pts = fl["repetitions"][0]["curve"]
    assert [p["loss_ratio"] for p in pts] == pytest.approx([0.2, 0.2, 0.2], abs=0.005)
    flags = {s["method"]: {f["code"] for r in s["results"] for f in r["flags"]} for s in doc["summary"]}
    assert "events_under_load" in flags["rfc2544_frame_loss"] and "events_under_load" in flags["soak"]
    assert "events_under_load" not in flags["rfc2544_back_to_back"]
    html = write_report(tmp_path / "r" / "result.json").read_text()
    assert html.count("echo ran-$NETRIG_TEST_MARK") >= 5  # a row per trial with the event
    assert "Events under load" in html


@pytest.mark.parametrize("k", [1, 3, 5])
def test_a_run_with_events_resumes_to_the_same_summary(tmp_path, k):
    full = Runner(config_from_dict(CONFIG), tmp_path / "full").run()
    out = tmp_path / "part"
    with pytest.raises(KeyboardInterrupt):
        Runner(config_from_dict(CONFIG), out, provider=Boom(k)).run()
    runner = Runner(config_from_dict(CONFIG), out, resume=True)
    doc = runner.run()
    assert doc["complete"] is True and sum(t["replayed"] for t in doc["trials"]) == k
    assert _strip(doc["summary"]) == _strip(full["summary"])
    assert load_result(out)["trials"][0]["counts"]["events"][0]["event"]["ok"]


def test_events_change_the_config_so_a_resume_without_them_is_refused(tmp_path):
    Runner(config_from_dict(CONFIG), tmp_path).run()
    other = json.loads(json.dumps(CONFIG))
    del other["trial"]["events"]
    with pytest.raises(Exception, match="different configuration"):
        Runner(config_from_dict(other), tmp_path, resume=True).run()
