"""Schema 3: "offered" named the achieved rate in trial counts and the intended rate in method results;
version 3 says ``achieved_pps`` and ``intended_pps`` / ``intended_pct``. A version-2 document (and a
version-2 trial log, also one a newer netrig resumed) reads back with the new keys and the same
values; what the current code writes round-trips."""
from __future__ import annotations

import copy
import json

import pytest

from netrig.measure import TrialCounts
from netrig.methods.frame_loss import FrameLossResult
from netrig.methods.livelock import LivelockResult
from netrig.results import SCHEMA_VERSION, load_result, migrate, read_trial_log
from netrig.results.typed import from_dict
from netrig.run.config import config_from_dict
from netrig.run.runner import Runner


def _trial(key: str, kind: str, load: dict, counts: dict, **extra) -> dict:
    return {"seq": 0, "key": key, "method": "rfc2544_frame_loss", "method_index": 0, "frame_size": 64,
            "repetition": 0, "trial_index": 0, "kind": kind, "load": load, "phases": None, "counts": counts, **extra}


def _v2_doc() -> dict:
    rate = {"rate_pps": 1_000_000.0, "frame_size": 64, "burst_frames": None, "duration_s": 2.0, "pct_line_rate": 6.72}
    return {
        "schema_version": 2, "tool": "netrig", "run_id": "x", "complete": True,
        "trials": [
            _trial("0/64/0/0", "rate", rate, {
                "offered_pps": 990_000.0, "frames_sent": 1_980_000, "frames_received": 1_980_000, "valid": True,
                "raw": {"stalled_attempts": [{"tx_max_lag_ns": 9e6, "frames_sent": 1_900_000,
                                              "frames_received": 1_800_000, "offered_pps": 950_000.0}],
                        "stretched_attempts": [{"frames_sent": 1_000, "offered_pps": 500.0, "stretch_s": 0.1}]}}),
            _trial("0/64/0/1", "flows", {**rate, "rate_pps": 1_000.0, "request": {"direction": "both"}},
                   {"offered_pps": 1_990.0, "frames_sent": 3_980, "frames_received": 3_980}),
            _trial("0/64/0/2", "phases", {**rate, "rate_pps": 100.0},
                   {"offered_pps": 190.0, "frames_sent": 570, "frames_received": 570},
                   phases=[{"rate_pps": 100.0, "duration_s": 1.0}, {"rate_pps": 250.0, "duration_s": 2.0}]),
            _trial("otg/f1/1", "otg", {**rate, "rate_pps": 777.0},
                   {"offered_pps": 777.0, "frames_sent": 10, "frames_received": 10,
                    "raw": {"otg": {"offered_from": "each flow's frames over its first to last arrival"}}}),
        ],
        "summary": [
            {"method": "rfc2544_frame_loss", "method_index": 0, "results": [{"frame_size": 64, "repetitions": [
                {"curve": [{"offered_pct": 100.0, "offered_pps": 1_488_095.2, "achieved_pps": 1_400_000.0,
                            "forwarded_pps": 700_000.0, "loss_ratio": 0.5, "valid": True, "backpressure": False},
                           {"offered_pct": 90.0, "offered_pps": 1_339_285.7, "achieved_pps": 1_339_000.0,
                            "forwarded_pps": 1_339_000.0, "loss_ratio": 0.0, "valid": True, "backpressure": False}],
                 "max_lossfree_pps": 1_339_285.7, "livelock": True}]}]},
            {"method": "livelock", "method_index": 1, "results": [{"frame_size": 64, "repetitions": [
                {"points": [{"offered_pps": 500_000.0, "achieved_pps": 499_000.0, "forwarded_pps": 499_000.0,
                             "loss_ratio": 0.0, "valid": True, "softirq_s": None, "backpressure": False}]}]}]},
            {"method": "iperf", "method_index": 2, "results": [{"frame_size": 64, "repetitions": [
                {"offered_pps": 300_000.0, "received_pps": 299_000.0, "loss_ratio": 0.003, "per_interval": []}]}]},
            {"method": "stateful", "method_index": 3, "results": [{"frame_size": 64, "repetitions": [
                {"connections": 10, "preliminary": {"offered_pps": 9_000.0, "frames_sent": 10},
                 "validation": {"offered_pps": 8_000.0, "frames_sent": 10}}]}]},
        ],
    }


def test_a_v2_document_reads_as_v3_with_the_same_values():
    doc = migrate(_v2_doc())
    assert doc["schema_version"] == SCHEMA_VERSION == 3
    rate, flows, phases, otg = (t["counts"] for t in doc["trials"])
    assert "offered_pps" not in json.dumps(doc) and "offered_pct" not in json.dumps(doc)
    # trial counts: the value that was offered_pps is the achieved rate; the intended one is the load's
    assert rate["achieved_pps"] == 990_000.0 and rate["intended_pps"] == 1_000_000.0
    assert rate["raw"]["stalled_attempts"][0]["achieved_pps"] == 950_000.0
    assert rate["raw"]["stretched_attempts"][0]["achieved_pps"] == 500.0
    assert flows["achieved_pps"] == 1_990.0 and flows["intended_pps"] == 2_000.0  # both directions
    assert phases["intended_pps"] == pytest.approx(200.0)  # (100 × 1 s + 250 × 2 s) / 3 s
    assert otg["achieved_pps"] == 777.0 and otg["intended_pps"] is None  # its load holds the achieved rate
    assert otg["raw"]["otg"]["achieved_from"].startswith("each flow's")
    assert TrialCounts.from_dict(rate).achieved_pps == 990_000.0
    # method results: frame-loss curve and livelock points held the intended rate under "offered"
    fl, ll, ip, st = (e["results"][0]["repetitions"][0] for e in doc["summary"])
    p100 = fl["curve"][0]
    assert (p100["intended_pct"], p100["intended_pps"], p100["achieved_pps"]) == (100.0, 1_488_095.2, 1_400_000.0)
    assert ll["points"][0]["intended_pps"] == 500_000.0 and ll["points"][0]["achieved_pps"] == 499_000.0
    assert ip["intended_pps"] == 300_000.0
    assert st["preliminary"]["achieved_pps"] == 9_000.0 and st["validation"]["achieved_pps"] == 8_000.0
    # and they read back as the method result types
    typed = from_dict(FrameLossResult, fl, partial=True)
    assert [p.intended_pct for p in typed.curve] == [100.0, 90.0]
    assert typed.max_lossfree_pps == pytest.approx(1_339_285.7)
    assert from_dict(LivelockResult, ll, partial=True).points[0].intended_pps == 500_000.0


def test_a_v2_file_loads_through_the_reader(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps(_v2_doc()))
    doc = load_result(tmp_path)
    assert doc["schema_version"] == 3 and doc["trials"][0]["counts"]["intended_pps"] == 1_000_000.0


def test_the_migration_leaves_v3_records_alone():
    """A version-2 trial log resumed by this netrig holds both: the new records keep their values."""
    doc = _v2_doc()
    new = {"achieved_pps": 1.0, "intended_pps": 5.0, "frames_sent": 1, "frames_received": 1}
    doc["trials"].append(_trial("0/64/0/3", "rate", {"rate_pps": 7.0}, copy.deepcopy(new)))
    assert migrate(doc)["trials"][-1]["counts"] == new


def _log_as_v2(path) -> None:
    """Rewrite a trial log as version 2 wrote it."""
    out = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec["type"] == "header":
            rec["schema_version"] = 2
        elif "counts" in rec:
            c = rec["counts"]
            c["offered_pps"] = c.pop("achieved_pps")
            c.pop("intended_pps")
        out.append(json.dumps(rec))
    path.write_text("\n".join(out) + "\n")


CONFIG = {
    "testbed": {"name": "simulated", "simulator": {"capacity_pps": 400_000}},
    "trial": {"duration_s": "1s"},
    "selftest": {"enabled": False},
    "frames": {"sizes": [64]},
    "methods": [{"rfc2544_frame_loss": {"start_pct": 5, "step_pct": 1}}],
}


def test_a_v3_run_round_trips_and_a_v2_trial_log_resumes(tmp_path):
    full = Runner(config_from_dict(CONFIG), tmp_path / "full").run()
    assert full["schema_version"] == 3
    for t in full["trials"]:
        c = t["counts"]
        assert "offered_pps" not in c and c["intended_pps"] == t["load"]["rate_pps"] and c["achieved_pps"] > 0
        assert TrialCounts.from_dict(c).to_dict() == c
    curve = full["summary"][0]["results"][0]["repetitions"][0]["curve"]
    assert [p["intended_pps"] for p in curve] == [t["load"]["rate_pps"] for t in full["trials"]]
    assert load_result(tmp_path / "full")["trials"] == json.loads(json.dumps(full["trials"]))

    # the same run stopped after two trials by a version-2 netrig, resumed by this one
    part = tmp_path / "part"
    part.mkdir()
    lines = (tmp_path / "full" / "trials.ndjson").read_text().splitlines()
    (part / "trials.ndjson").write_text("\n".join(lines[:3]) + "\n")
    _log_as_v2(part / "trials.ndjson")
    header, recs = read_trial_log(part)
    assert header is not None and header["schema_version"] == 3
    assert [r["counts"]["intended_pps"] for r in recs] == [t["load"]["rate_pps"] for t in full["trials"][:2]]
    resumed = Runner(config_from_dict(CONFIG), part, resume=True).run()
    assert [t["replayed"] for t in resumed["trials"]][:3] == [True, True, False]
    strip = ("seq", "replayed", "started_at", "finished_at")
    assert [{k: v for k, v in t.items() if k not in strip} for t in resumed["trials"]] == \
        [{k: v for k, v in t.items() if k not in strip} for t in full["trials"]]
    # the log now holds version-2 and version-3 records under a version-2 header: it still reads
    _, recs = read_trial_log(part)
    assert [r["counts"]["achieved_pps"] for r in recs] == [t["counts"]["achieved_pps"] for t in full["trials"]]
