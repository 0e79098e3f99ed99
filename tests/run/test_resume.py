"""Results lose nothing: a run interrupted mid-way resumes to the same summary."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netrig.errors import ResultError
from netrig.results import SCHEMA_VERSION, load_result, read_trial_log
from netrig.run.config import config_from_dict
from netrig.run.runner import Runner
from netrig.run.session import simulated_session

CONFIG = {
    "testbed": {"name": "simulated",
                "simulator": {"capacity_pps": 400000, "background_loss_ratio": 0.00001, "buffer_frames": 500,
                              "recovery_s": 1.5, "tester_ceiling_pps": 5e6}},
    "trial": {"duration_s": "1s"},
    "frames": {"sizes": [64, 1518]},
    "repetitions": 2,
    "methods": [
        {"rfc2544_throughput": {"resolution_pct": 0.5}},
        {"rfc2544_latency": {"trials": 3}},
        {"rfc2544_frame_loss": {}},
        {"rfc2544_back_to_back": {"trials": 2}},
        {"rfc2544_system_recovery": {"overload_duration_s": 3, "recovery_duration_s": 4}},
        {"mlrsearch": {"goals": [{"name": "NDR", "duration_sum_s": 3}, {"name": "PDR", "loss_ratio": 0.005,
                                                                        "duration_sum_s": 3}]}},
        {"iperf": {"duration_s": 3}},
    ],
}


def _strip(summary):
    return json.loads(json.dumps(summary).replace("search_time_s", "x"), object_hook=lambda d: {
        k: v for k, v in d.items() if k != "x"})


class Boom:
    """A provider whose measurer raises KeyboardInterrupt after k real trials."""

    def __init__(self, k):
        self.k = k

    def __call__(self, config, role):
        import contextlib

        @contextlib.contextmanager
        def cm():
            with simulated_session(config, role) as s:
                inner = s.measurer
                outer = self

                class M:
                    def _tick(self):
                        if outer.k <= 0:
                            raise KeyboardInterrupt
                        outer.k -= 1

                    def measure(self, *a, **kw):
                        self._tick()
                        return inner.measure(*a, **kw)

                    def measure_phases(self, *a, **kw):
                        self._tick()
                        return inner.measure_phases(*a, **kw)

                    def measure_events(self, *a, **kw):
                        self._tick()
                        return inner.measure_events(*a, **kw)

                s.measurer = M()
                yield s

        return cm()


def test_document_shape(tmp_path):
    doc = Runner(config_from_dict(CONFIG), tmp_path / "a").run()
    assert doc["schema_version"] == SCHEMA_VERSION == 3 and doc["complete"] is True
    assert doc["line_rate"]["source"] == "nominal"
    assert doc["selftest"]["passed"] is False  # the simulated tester tops out at 5 Mpps < 1.1 × line rate
    header, recs = read_trial_log(tmp_path / "a")
    assert header["run_id"] == doc["run_id"] and len(recs) == len(doc["trials"])
    assert len({r["key"] for r in recs}) == len(recs)
    loaded = load_result(tmp_path / "a")
    assert loaded["summary"] == json.loads(json.dumps(doc["summary"]))
    tp = loaded["summary"][0]["results"][0]
    assert tp["frame_size"] == 64 and set(tp["stats"]["rate_pps"]) == {"min", "median", "max", "n"}
    assert tp["stats"]["rate_pps"]["n"] == 2
    assert {"fps", "pct_line_rate", "l1_bps", "l2_bps"} == set(tp["headline"])
    assert any(f["code"] == "short_trials" for f in tp["flags"])


@pytest.mark.parametrize("k", [0, 1, 7, 40, 150])
def test_interrupted_run_resumes_to_same_summary(tmp_path, k):
    full = Runner(config_from_dict(CONFIG), tmp_path / "full").run()
    out = tmp_path / "part"
    with pytest.raises(KeyboardInterrupt):
        Runner(config_from_dict(CONFIG), out, provider=Boom(k)).run()
    part = load_result(out)
    assert part["complete"] is False and "Ctrl-C" in part["interrupted_reason"]
    assert len(part["trials"]) == k
    _, recs = read_trial_log(out)
    assert len(recs) == k
    runner = Runner(config_from_dict(CONFIG), out, resume=True)
    doc = runner.run()
    assert doc["complete"] is True and doc["run_id"] == part["run_id"]
    assert runner.rec.measured == len(full["trials"]) - k  # nothing finished was redone
    assert sum(t["replayed"] for t in doc["trials"]) == k
    assert _strip(doc["summary"]) == _strip(full["summary"])
    assert doc["selftest"] == full["selftest"]


def test_resume_refuses_other_config(tmp_path):
    Runner(config_from_dict(CONFIG), tmp_path).run()
    other = dict(CONFIG, repetitions=3)
    with pytest.raises(ResultError, match="different configuration"):
        Runner(config_from_dict(other), tmp_path, resume=True).run()
    with pytest.raises(ResultError, match="already holds a run"):
        Runner(config_from_dict(CONFIG), tmp_path).run()


def test_reader_refuses_newer_and_garbage(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(ResultError, match="newer netrig"):
        load_result(tmp_path)
    (tmp_path / "result.json").write_text("{")
    with pytest.raises(ResultError, match="not valid JSON"):
        load_result(tmp_path)
    (tmp_path / "result.json").write_text("{}")
    with pytest.raises(ResultError, match="schema_version"):
        load_result(tmp_path)


def test_torn_last_line_is_ignored(tmp_path):
    Runner(config_from_dict(CONFIG), tmp_path).run()
    log = tmp_path / "trials.ndjson"
    n = len(read_trial_log(tmp_path)[1])
    with open(log, "a") as f:
        f.write('{"type": "trial", "key": "0/64/0')
    assert len(read_trial_log(tmp_path)[1]) == n


@pytest.mark.timeout(120)
def test_sigint_subprocess_then_resume(tmp_path):
    cfg = json.loads(json.dumps(CONFIG))
    cfg["testbed"]["simulator"]["trial_delay_s"] = 0.02
    cfg["output"] = {"dir": str(tmp_path / "out")}
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "python"))
    cmd = [sys.executable, "-m", "netrig.cli.main", "run", str(tmp_path / "c.json"), "--quiet"]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "out" / "trials.ndjson"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not log.exists() or log.read_text().count("\n") < 30):
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "--resume" in err
    part = load_result(tmp_path / "out")
    assert part["complete"] is False and len(part["trials"]) >= 1  # how many finished before SIGINT landed varies
    r = subprocess.run([sys.executable, "-m", "netrig.cli.main", "run", "--resume", str(tmp_path / "out"), "--quiet"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    done = load_result(tmp_path / "out")
    cfg["testbed"]["simulator"]["trial_delay_s"] = 0.0
    full = Runner(config_from_dict(cfg), tmp_path / "full").run()
    assert done["complete"] is True
    assert _strip(done["summary"]) == _strip(full["summary"])
