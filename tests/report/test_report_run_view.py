"""Reading result files: one-line errors for bad files, tolerant accessors for good ones."""
from __future__ import annotations

import copy
import json

import pytest
from report_golden import NAT, ROUTER

from netrig.errors import ResultError
from netrig.methods import frame_loss, iperf, latency, mlrsearch, throughput
from netrig.view.run_view import RunView, unique_names


def _err(tmp_path, text: str, name: str = "r.json") -> str:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(ResultError) as e:
        RunView.load(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg
    return msg


def test_missing_file_names_it(tmp_path):
    with pytest.raises(ResultError, match="no such result file"):
        RunView.load(tmp_path / "nope.json")


def test_bad_json_says_where(tmp_path):
    assert "not valid JSON" in _err(tmp_path, '{"schema_version": 1,')


def test_newer_schema_refused(tmp_path):
    msg = _err(tmp_path, json.dumps({"schema_version": 99, "summary": []}))
    assert "newer netrig" in msg and "99" in msg and "upgrade" in msg


@pytest.mark.parametrize(
    "doc, words",
    [
        ([1, 2], "not a JSON object"),
        ({"trials": []}, "no schema_version"),
        ({"schema_version": "1"}, "positive integer"),
        ({"schema_version": 1, "summary": {"a": 1}}, "'summary' must be a list"),
        ({"schema_version": 1, "config": [1]}, "'config' must be an object"),
    ],
)
def test_not_a_result(tmp_path, doc, words):
    assert words in _err(tmp_path, json.dumps(doc))


def test_empty_and_binary_files(tmp_path):
    assert "empty file" in _err(tmp_path, "")
    p = tmp_path / "bin.json"
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ResultError, match="cannot read"):
        RunView.load(p)


def test_directory_without_result(tmp_path):
    with pytest.raises(ResultError, match="no result.json"):
        RunView.load(tmp_path)


def test_run_directory_and_name(tmp_path):
    out = tmp_path / "nat-run"
    out.mkdir()
    doc = json.loads(ROUTER.read_text())
    doc["config"].pop("name")
    doc["testbed"].pop("name")
    (out / "result.json").write_text(json.dumps(doc))
    r = RunView.load(out)
    assert r.name == "nat-run"  # the run directory names the configuration


def test_unfinished_trial_log(tmp_path):
    doc = json.loads(ROUTER.read_text())
    lines = [json.dumps({"type": "header", "schema_version": 1, "run_id": "x", "config": doc["config"]})]
    lines += [json.dumps({"type": "trial", **t}) for t in doc["trials"][:5]]
    p = tmp_path / "trials.ndjson"
    p.write_text("\n".join(lines) + "\n")
    r = RunView.load(p)
    assert r.complete is False and len(r.trials()) == 5 and throughput.entries(r) == []


def _log(tmp_path, trials: int, tail: str):
    doc = json.loads(ROUTER.read_text())
    lines = [json.dumps({"type": "header", "schema_version": 2, "run_id": "x", "config": doc["config"]})]
    lines += [json.dumps({"type": "trial", **t}) for t in doc["trials"][:trials]]
    p = tmp_path / "trials.ndjson"
    p.write_text("\n".join(lines) + "\n" + tail)
    return p, lines


def test_a_torn_last_record_is_left_out_and_said_as_resume_does(tmp_path):
    p, lines = _log(tmp_path, 5, "")
    p.write_text(p.read_text() + lines[-1][:40])  # what a crash leaves: the last record cut off
    r = RunView.load(p)
    assert r.complete is False and len(r.trials()) == 5
    assert r.torn == [f"{p}:7: the last record was torn (the run was killed while writing it); left out, the 5 "
                      "complete trial records before it are read"]
    assert [f.code for f in r.flags()] == ["trial_log_torn"]
    assert RunView.load(_log(tmp_path, 5, "")[0]).torn == []


def test_a_corrupt_record_before_the_last_names_its_line(tmp_path):
    p, lines = _log(tmp_path, 3, "")
    p.write_text("\n".join([*lines[:2], lines[2][:40], *lines[3:]]) + "\n")
    with pytest.raises(ResultError) as e:
        RunView.load(p)
    assert str(e.value).startswith(f"{p}:3: corrupt line (not JSON)")


def test_router_numbers():
    r = RunView.load(ROUTER)
    assert r.name == "router" and r.speed_bps == 1e9
    tp = {t.frame_size: t for t in throughput.entries(r)}
    # 1518 B is limited by the nominal 1 Gbit/s line rate: 81,274 fps = 100 %
    assert tp[1518].rate.value == pytest.approx(81274.4, rel=1e-4)
    assert tp[1518].pct is not None and tp[1518].pct.value == pytest.approx(100, abs=0.01)
    assert tp[64].rate.lo < tp[64].rate.value < tp[64].rate.hi
    assert tp["imix"].above_ceiling and not tp[64].above_ceiling
    fl = {f.frame_size: f for f in frame_loss.entries(r)}
    assert fl[64].max_lossfree is not None and fl[64].max_lossfree.value == pytest.approx(446428.6, rel=1e-4)
    assert fl[64].collapse is not None and fl[1518].collapse is None
    assert [p.intended_pps for p in fl[64].points] == sorted(p.intended_pps for p in fl[64].points)
    lat = {e.frame_size: e for e in latency.entries(r)}
    assert set(lat[64].pcts) >= {"min", "p50", "p90", "p99", "p99.9", "max"}
    assert lat[64].pcts["min"].value < lat[64].pcts["p50"].value < lat[64].pcts["p99.9"].value
    nd = mlrsearch.entries(r)[0]
    assert [g.name for g in nd.goals] == ["NDR", "PDR"]
    c0, c1 = nd.goals[0].conditional, nd.goals[1].conditional
    assert c0 is not None and c1 is not None and c0.value < c1.value
    assert r.monitored_trials() and iperf.entries(r)[0].series


def test_throughput_results_under_the_same_parameters_are_one_row_and_one_median():
    """The demo's 64-B headline: one search in one part, four repetitions in another, under the same
    parameters but their repetitions: one row of every repetition, its median the report's summary
    quotes (as the console's answers do). Under another trial duration: a row of its own."""
    doc = json.loads(ROUTER.read_text())
    entry = next(e for e in doc["summary"] if e["method"] == "rfc2544_throughput")
    more = copy.deepcopy(entry)
    more["method_index"] = max(e["method_index"] for e in doc["summary"]) + 1
    more["params"]["repetitions"] = 4
    more["results"] = [copy.deepcopy(entry["results"][0])]
    reps = more["results"][0]["repetitions"]
    reps.append(copy.deepcopy(reps[0]))
    for rep, rate in zip(reps, (500_000.0, 510_000.0, 520_000.0, 530_000.0)):
        rep["rate_pps"] = rate
    doc["summary"].append(more)
    rows = [e for e in throughput.entries(RunView.from_doc(doc)) if e.frame_size == 64]
    assert [(e.repetitions, e.rate.value, e.rate.lo, e.rate.hi) for e in rows] == \
        [(7, 530_000.0, 500_000.0, 587_100.1)], "563,848.6, 587,100.1, 575,474.3 and the four: one median"
    more["params"]["duration_s"] = 60.0
    rows = [e for e in throughput.entries(RunView.from_doc(doc)) if e.frame_size == 64]
    assert sorted(e.repetitions for e in rows) == [3, 4], "another trial duration: not pooled"


def test_unique_names():
    a, b = RunView.load(ROUTER), RunView.load(ROUTER)
    c = RunView.load(NAT)
    unique_names([a, b, c])
    assert len({a.name, b.name, c.name}) == 3 and c.name == "router+nat"


def test_trial_records_are_typed_and_a_record_without_readable_counts_is_a_row_of_dashes():
    """Reports read trials as ``TrialRecord``: the load and ``TrialCounts`` typed; a record whose
    counts cannot be read (hand-edited) has none, and the trial table still draws it."""
    from netrig.report.tables import trials_table

    r = RunView.load(ROUTER)
    recs = r.trial_records()
    assert len(recs) == len(r.trials()) and all(t.counts is not None for t in recs)
    first = recs[0]
    assert first.index == 0 and first.load.rate_pps is not None and first.counts.frames_sent > 0
    assert first.latency is not None and first.latency.p50_ns is not None
    doc = copy.deepcopy(r.doc)
    doc["trials"][0]["counts"] = {"frames_sent": "many"}
    broken = RunView(doc)
    assert broken.trial_records()[0].counts is None
    row = trials_table(broken).rows[0]
    assert row[10:14] == ["—"] * 4
