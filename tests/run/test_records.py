"""The trial log read as types (``netrig.run.records``): a record is read once, where the log is
parsed; a damaged one is refused in one line naming its trial before anything runs, and a record made
for another load is refused when the resumed run asks for its trial."""
from __future__ import annotations

import json

import pytest

from netrig.errors import ResultError
from netrig.measure import Phase, TrialCounts
from netrig.run.config import config_from_dict
from netrig.run.records import LoadRecord, RecordedInterval, RecordedTrial
from netrig.run.runner import Runner

CONFIG = {"testbed": {"name": "simulated", "simulator": {"capacity_pps": 300000}}, "trial": {"duration_s": "1s"},
          "frames": {"sizes": [64]}, "selftest": {"enabled": False},
          "methods": [{"rfc2544_throughput": {"resolution_pct": 5.0}}]}


def record(**over) -> dict:
    load = LoadRecord(64, 1.0, rate_pps=1000.0, pct_line_rate=0.07)
    rec = {"seq": 0, "key": "0/64/0/0", "method": "rfc2544_throughput", "method_index": 0, "frame_size": 64,
           "repetition": 0, "trial_index": 0, "kind": "rate", "load": load.to_dict(), "phases": None,
           "counts": TrialCounts(1000.0, 1000, 1000).to_dict()}
    return {**rec, **over}


def test_a_record_is_read_as_its_type_and_its_load_written_back_the_same():
    t = RecordedTrial.read(record())
    assert t.key == "0/64/0/0" and t.counts is not None and t.counts.frames_sent == 1000
    assert t.load.to_dict() == record()["load"] == {"rate_pps": 1000.0, "frame_size": 64, "burst_frames": None,
                                                    "duration_s": 1.0, "pct_line_rate": 0.07}
    assert t.same_request("rate", LoadRecord(64, 1.0 + 1e-12, rate_pps=1000.0), None), "rounding is the same load"
    assert not t.same_request("rate", LoadRecord(64, 1.0, rate_pps=2000.0), None)
    assert not t.same_request("burst", t.load, None)
    phases = RecordedTrial.read(record(kind="phases", phases=[{"rate_pps": 1000.0, "duration_s": 1.0}]))
    assert phases.same_request("phases", phases.load, (Phase(1000.0, 1.0),))
    assert not phases.same_request("phases", phases.load, (Phase(1000.0, 2.0),))


@pytest.mark.parametrize("damage, why", [
    ({"load": {"rate_pps": "fast", "frame_size": 64, "duration_s": 1.0}}, "TypeError"),
    ({"counts": {"frames_sent": 1}}, "no 'achieved_pps'"),
    ({"phases": [{"rate_pps": -1.0, "duration_s": 1.0}]}, "ConfigError"),
    ({"counts": None}, "no counts"),
])
def test_a_damaged_record_is_refused_naming_its_trial(damage, why):
    with pytest.raises(ResultError, match=f"resume: the recorded trial 0/64/0/0 is damaged .*{why}"):
        RecordedTrial.read(record(**damage))


def test_a_stack_record_has_its_document_and_no_counts():
    load = LoadRecord("stack", 5.0, request={"kind": "tcp", "family": 4, "params": {"streams": 1}})
    t = RecordedTrial.read(record(kind="tcp", load=load.to_dict(), counts=None, result={"goodput_bps": 1e9}))
    assert t.counts is None and t.result == {"goodput_bps": 1e9} and t.load.request == load.request
    assert t.load.to_dict() == {"frame_size": "stack", "duration_s": 5.0, "request": load.request}


def test_an_interval_record_is_read_with_its_sample():
    load = LoadRecord(64, 10.0, rate_pps=1000.0, pct_line_rate=0.07, interval_s=1.0)
    iv = RecordedInterval.read({"key": "0/64/0/0", "segment": 0, "index": 3, "t_s": 3.0, "duration_s": 1.0,
                                "frames_sent": 1000, "frames_received": 999, "at": "x", "load": load.to_dict(),
                                "monitor": {"t_s": 3.0, "cpu": {"all": 12.0}}})
    assert iv.end_s == 4.0 and iv.load.same_soak(load) and iv.sample is not None and iv.sample.cpu == {"all": 12.0}
    with pytest.raises(ResultError, match="an interval record of soak trial 0/64/0/0 is damaged"):
        RecordedInterval.read({"key": "0/64/0/0", "segment": 0})


def _log_lines(out) -> list[dict]:
    return [json.loads(x) for x in (out / "trials.ndjson").read_text().splitlines()]


def _write(out, lines: list[dict]) -> None:
    (out / "trials.ndjson").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_a_resume_refuses_a_damaged_log_before_anything_runs(tmp_path):
    out = tmp_path / "r"
    Runner(config_from_dict(CONFIG), out).run()
    lines = _log_lines(out)
    lines[2]["load"]["duration_s"] = "one second"
    _write(out, lines)
    before = (out / "trials.ndjson").read_text()
    with pytest.raises(ResultError, match=f"the recorded trial {lines[2]['key']} is damaged .*remove its line"):
        Runner(config_from_dict(CONFIG), out, resume=True).run()
    assert (out / "trials.ndjson").read_text() == before, "nothing ran, nothing was appended"


def test_a_resume_refuses_a_trial_recorded_for_another_load(tmp_path):
    out = tmp_path / "r"
    Runner(config_from_dict(CONFIG), out).run()
    lines = _log_lines(out)
    lines[1]["load"]["rate_pps"] *= 2
    _write(out, lines)
    with pytest.raises(ResultError, match=f"resume: trial {lines[1]['key']} asks for .* but the recorded one was"):
        Runner(config_from_dict(CONFIG), out, resume=True).run()
