"""Issue 39: every rate the console prints is named for what it is — intended, achieved TX or
received — with the word the metrics use (``netrig.model.rates``), and a run's summary tables fit 100
columns in a pipe. On the simulated DUT: `netrig run` of one method of each kind, no root."""
from __future__ import annotations

import json

from netrig.cli.main import main
from netrig.model import rates
from netrig.telemetry import families as F

CONFIG = {
    "testbed": {"name": "simulated", "simulator": {"capacity_pps": 400000, "background_loss_ratio": 0.00001,
                                                   "buffer_frames": 500, "tester_ceiling_pps": 5e6}},
    "trial": {"duration_s": "1s"},
    "frames": {"sizes": [64, 1518, "imix"]},
    "methods": [
        {"rfc2544_throughput": {"resolution_pct": 2}},
        {"rfc2544_latency": {"trials": 1}},
        {"rfc2544_frame_loss": {}},
        {"rfc2544_back_to_back": {"trials": 1}},
        {"mlrsearch": {"goals": [{"name": "NDR", "duration_sum_s": 1}, {"name": "PDR", "loss_ratio": 0.005,
                                                                        "duration_sum_s": 1}]}},
        {"iperf": {"duration_s": 2}},
        {"soak": {"rate": "100kpps", "duration_s": "6s", "interval_s": "1s"}},
    ],
}


def test_a_runs_tables_fit_100_columns_in_a_pipe_and_name_their_rates(tmp_path, capsys):
    cfg = tmp_path / "all.json"
    cfg.write_text(json.dumps(CONFIG))
    assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) in (0, 1)
    captured = capsys.readouterr()
    out, err = captured.out, captured.err
    tables = [ln for ln in out.splitlines() if ln[:1] in "┏┃┡│└"]
    assert len(tables) > 40, out
    wide = [ln for ln in out.splitlines() if len(ln) > 100]
    assert not wide, "\n".join(wide)
    # the columns say which rate they show
    for head in (f"{rates.INTENDED} fps", f"{rates.RECEIVED} fps", f"at {rates.INTENDED}", "max loss-free"):
        assert head in out, head
    assert " fps (median) " not in out.replace(f"{rates.INTENDED} fps (median)", "").replace(
        f"{rates.RECEIVED} fps (median)", ""), "an unnamed median rate"
    # the log lines: the intended rate and the achieved TX rate of every trial, by name
    trial_lines = [ln for ln in err.splitlines() if " trial " in ln and ": intended " in ln]
    assert trial_lines and all(f", {rates.ACHIEVED} " in ln for ln in trial_lines), err
    # the soak's live lines say what they show: the received rate
    assert f"soak 0:00:01/0:00:06: {rates.RECEIVED} " in err, err
    # result.json: the same words in the keys of what the console printed
    doc = json.loads((tmp_path / "out" / "result.json").read_text())
    counts = doc["trials"][-1]["counts"]
    assert {f"{rates.INTENDED}_pps", f"{rates.ACHIEVED.split()[0]}_pps"} <= set(counts), counts
    iperf = next(s for s in doc["summary"] if s["method"] == "iperf")["results"][0]["repetitions"][0]
    assert {f"{rates.INTENDED}_pps", f"{rates.RECEIVED}_pps"} <= set(iperf), iperf


def test_the_metrics_name_the_rates_with_the_consoles_words():
    names = {f.name for f in F.ALL}
    for word in (rates.INTENDED, rates.ACHIEVED, rates.RECEIVED):
        key = word.split()[0]  # "achieved TX": the word, its qualifier said in the help
        assert f"netrig_{key}_rate_pps" in names and f"netrig_trial_{key}_rate_pps" in names, key
