"""A number is shown only when it means something (issue 27): the console shows a value measured
from valid trials, or a dash with the reason — never a placeholder 0, "None" or a share of a rate
that was not found; a command with no result says so and fails. Output without a terminal is as
wide as it needs, never wrapped mid-word. No privileges needed."""
from __future__ import annotations

import io

from rich.table import Table

from netrig.cli import capture_bench, console
from netrig.cli.common import console as plain_console
from netrig.cli.main import main
from netrig.measure.seam import TrialCounts
from netrig.methods import back_to_back, livelock, recovery, stress
from netrig.results import load_result
from netrig.run.capture_bench import BenchDocument
from netrig.run.progress import TrialEnd, TrialInfo
from netrig.run.records import LoadRecord


def test_back_to_back_with_every_trial_abandoned_shows_the_reason_not_zeros():
    result = {"frame_size": 64, "stats": {"mean_burst_frames": {"median": 0.0}},
              "repetitions": [{"bursts_frames": [], "abandoned_trials": 50, "implied_buffer_time_s": 0.0}]}
    [row] = back_to_back.METHOD.console_rows(result, "")
    assert row[1] == "—: every trial abandoned" and "0 ns" not in row and "0" not in row[1:4], row


def test_system_recovery_of_an_invalid_trial_is_not_a_recovery_time():
    result = {"frame_size": 64, "stats": {"recovery_time_s": {"median": 0.0, "min": 0.0, "max": 0.0}},
              "repetitions": [{"valid": False, "recovered": True, "recovery_time_s": 0.0}]}
    [row] = recovery.METHOD.console_rows(result, "")
    assert row[1] == "—: every trial invalid" and "0.000 s" not in " ".join(row), row


def test_stress_without_loss_after_the_overload_shows_no_zero_recovery():
    rep = {"valid": True, "recovery_s": 0.0, "episodes": [{"frames_lost": 0, "recovery_s": 0.0}]}
    [row] = stress.METHOD.console_rows({"frame_size": 64, "repetitions": [rep]}, "")
    assert row[1] == "—: no loss after the overload", row
    [row] = stress.METHOD.console_rows({"frame_size": 64, "repetitions": [{**rep, "valid": False}]}, "")
    assert row[1] == "—: every trial invalid", row


def test_livelock_shows_no_share_of_an_mlfrr_it_did_not_find():
    result = {"frame_size": 64, "stats": {"max_lossfree_pps": {"median": 1000.0}}, "headline": {"pct_line_rate": 5.0}}
    [row] = livelock.METHOD.console_rows(result, "")
    assert row[1] == "none" and row[2] == "—" and "5.00" not in row, row


def test_a_stateful_trial_is_counted_like_any_trial_in_progress_lines():
    out = io.StringIO()
    progress = console.PlainProgress(out)
    load = LoadRecord(64, 2.0, rate_pps=1000.0, pct_line_rate=0.1, request={"connections": 10, "frame_size": "64"})
    counts = TrialCounts(achieved_pps=1000.0, frames_sent=2000, frames_received=2000)
    progress(TrialEnd(TrialInfo("0/64/0/0", "flows", "stateful", "stateful", 64, 0, 0, load), False, counts))
    line = out.getvalue()
    assert "None" not in line and "no result" not in line and "sent 2,000, received 2,000" in line, line
    assert "intended 1 kfps (0.10 %), achieved TX 1 kfps" in line, line


def test_capture_bench_with_no_result_fails(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(capture_bench, "require_root", lambda what: None)
    monkeypatch.setattr(capture_bench, "run_bench", lambda p, out, notify: BenchDocument(p, "2026-11-28T00:00:00Z"))
    assert main(["capture-bench", "--out", str(tmp_path / "cb")]) == 1
    captured = capsys.readouterr()
    assert "no result" in captured.err and captured.out == ""


def test_tables_without_a_terminal_are_not_wrapped_mid_word(capsys):
    t = Table(title="x")
    for c in ("tester_limited", "port"):
        t.add_column(c, overflow="fold")
    words = ["tester_limited_" + "x" * 60, "nr050d-" + "y" * 80]
    t.add_row(*words)
    plain_console().print(t)
    plain_console().print("a line " * 30)
    out = capsys.readouterr().out
    assert all(w in out for w in words), out
    assert ("a line " * 30).strip() in out


def test_stateful_tester_limited_rates_are_lower_bounds():
    from netrig.methods import stateful

    search = {"rate_pps": 50_000.0, "upper_pps": 60_000.0, "trials": 8, "tester_limited": True}
    rep = {"connections": 1000, "establishment": search, "establishment_rate_cps": 50_000.0,
           "teardown": {**search, "tester_limited": False}, "teardown_rate_cps": 40_000.0,
           "throughput": search, "throughput_pps": 90_000.0}
    [row] = stateful.METHOD.console_rows({"frame_size": 64, "repetitions": [rep]}, "")
    assert row[2].startswith("≥ ") and row[4].startswith("≥ ") and not row[3].startswith("≥"), row


def test_the_soak_row_says_its_trial_was_invalid_and_which_cpus_saturated():
    from netrig.methods import soak

    rep = {"rate_pps": 1e5, "covered_s": 60, "rx_pps": 9e4, "frames_lost": 10, "valid": False,
           "invalid_reason": "the tester fell short of the rate", "cpu_saturated": ["cpu0", "cpu1"]}
    [row] = soak.METHOD.console_rows({"frame_size": 64, "repetitions": [rep]}, "")
    assert "saturated throughout: cpu0, cpu1" in row[6] and row[-1].startswith("INVALID: the tester fell"), row


def test_summary_titles_without_a_terminal_are_one_line(capsys):
    """A summary table's title (method and line rate) is one line in a pipe, not wrapped to the width
    of a narrow table ("… (nominal: simulated" / "has no link speed))")."""
    from tests.report.report_golden import DATA

    doc = load_result(DATA / "report-simulated-demo-rfc2544.json")  # a version-1 file: migrated
    label = "10 Gbit/s (nominal: simulated has no link speed, and a label longer than any table here)"
    doc["line_rate"] = {**(doc.get("line_rate") or {}), "label": label}
    console.print_summary(doc, plain_console())
    out = capsys.readouterr().out
    titles = [ln for ln in out.splitlines() if "(line rate " in ln]
    assert titles and all(ln.rstrip().endswith(f"(line rate {label})") for ln in titles), out


def test_the_soak_live_verdicts_say_its_trial_was_invalid_and_which_cpus_saturated():
    """The soak's verdict lines on the console (each interval's, and the final one) say what the JSON
    says: the trial was invalid, and the CPUs busy throughout (not counted as spikes)."""
    from netrig.methods import soak
    from netrig.model import FrameSize, LineRate
    from netrig.monitor.monitor import CompactSample

    rows = [soak.SoakInterval(10.0 * i, 10.0, 0, 1000, 990, 10, CompactSample(cpu={"cpu0": 100.0, "cpu1": 99.0}))
            for i in range(6)]
    counts = TrialCounts(achieved_pps=100.0, frames_sent=6000, frames_received=5940, valid=False,
                         invalid_reason="the tester fell short of the rate")
    res = soak.SoakResult.build(FrameSize(64), LineRate(1e9), soak.SoakParams(duration_s=60, interval_s=10), 100.0,
                                None, rows, counts)
    line = soak.live_line(res)
    assert "saturated throughout: cpu0, cpu1" in line and "INVALID: the tester fell short of the rate" in line, line
    valid = soak.SoakResult.build(FrameSize(64), LineRate(1e9), soak.SoakParams(duration_s=60, interval_s=10), 100.0,
                                  None, rows, TrialCounts(achieved_pps=100.0, frames_sent=6000, frames_received=5940))
    assert "INVALID" not in soak.live_line(valid)


def test_a_trial_progress_line_after_sending_shows_the_trials_rates_not_zero():
    """`netrig trial` used to end on "done 3.0s/1s tx 20,000 (0 fps)": the rate of a sender that had
    stopped, and the drain counted as trial time."""
    from types import SimpleNamespace

    from netrig.cli.trial import RateWindow, progress_line

    state = RateWindow(t=0.0)
    running = progress_line(SimpleNamespace(phase="running", elapsed_s=0.5, tx_frames=10_000, rx_frames=9_990),
                            1.0, state)
    assert "0.5s/1s" in running and "tx       10,000" in running
    done = progress_line(SimpleNamespace(phase="done", elapsed_s=3.0, tx_frames=20_000, rx_frames=19_000), 1.0, state)
    assert "1.0s/1s +2.0s drain" in done, done
    assert "(mean 20 kfps)" in done and "(mean 19 kfps)" in done and "(0 fps)" not in done, done


def test_a_trial_line_says_intended_for_the_rate_asked_and_achieved_for_the_rate_sent():
    """Issue 27: "offered" stood for the rate asked on the console and for the rate sent in the result."""
    out = io.StringIO()
    load = LoadRecord(64, 2.0, rate_pps=1_000_000.0, pct_line_rate=6.72)
    counts = TrialCounts(achieved_pps=990_000.0, intended_pps=1_000_000.0, frames_sent=1_980_000,
                         frames_received=1_000_000)
    trial = TrialInfo("2/64/0/0", "rate", "rfc2544_frame_loss", "RFC 2544 frame loss", 64, 0, 0, load)
    console.PlainProgress(out)(TrialEnd(trial, False, counts))
    line = out.getvalue()
    assert "intended 1 Mfps (6.72 %)" in line and "achieved TX 990 kfps" in line and "offered" not in line, line


def _report_of(tmp_path, edit) -> object:
    """The handmade router result, edited by ``edit(summary entries by method)``, loaded as a report."""
    import json
    from pathlib import Path

    from netrig.report import load_run
    doc = json.loads((Path(__file__).resolve().parents[1] / "data" / "report-router-handmade.json").read_text())
    edit({x["method"]: x for x in doc["summary"]})
    p = tmp_path / "result.json"
    p.write_text(json.dumps(doc))
    return load_run(p)


def test_the_result_and_report_of_abandoned_and_invalid_trials_hold_no_number(tmp_path):
    """Back-to-back with every search abandoned and system recovery from an invalid trial: the JSON
    holds null where it held 0 (and 'recovered' is false), and the report tables say why, as the
    console does — no '0', '0 ns' or 'recovered yes'."""
    from netrig.measure.seam import Interval
    from netrig.model import FrameSize, LineRate
    frame, line = FrameSize(size=64), LineRate(10e9)
    b2b = back_to_back.BackToBackResult(frame, line, 14.88e6, (), 1e6, False, 1, None, abandoned_trials=50)
    assert b2b.to_dict()["mean_burst_frames"] is None and b2b.to_dict()["implied_buffer_time_s"] is None
    assert b2b.stats_values() == {"mean_burst_frames": None, "corrected_buffer_time_s": None}
    iv = (Interval(0.0, 1.0, 0, 100, 90), Interval(1.0, 1.0, 1, 50, 50), Interval(2.0, 1.0, 1, 50, 50))
    rec = recovery.RecoveryResult(frame, line, 1e5, 1.1e5, 5e4, iv, 1.0, valid=False)
    assert rec.recovery_time_s == 0.0 and not rec.recovered and rec.stats_values() == {"recovery_time_s": None}

    def edit(m):
        for r in m["rfc2544_back_to_back"]["results"]:
            r["stats"] = {"mean_burst_frames": {"median": 0.0, "min": 0.0, "max": 0.0, "n": 1}}
            r["repetitions"] = [{**b2b.to_dict(), "mean_burst_frames": 0.0, "implied_buffer_time_s": 0.0}]
        for r in m["rfc2544_system_recovery"]["results"]:
            r["stats"] = {"recovery_time_s": {"median": 0.0, "min": 0.0, "max": 0.0, "n": 1}}
            r["repetitions"] = [{**r["repetitions"][0], "valid": False, "recovered": True, "recovery_time_s": 0.0}]
    run = _report_of(tmp_path, edit)  # as written before: zeros in the stats and the repetitions
    [row] = back_to_back.table(run).rows
    assert row[1] == "—: every trial abandoned" and "0" not in row[1:6] and "0 ns" not in row, row
    [row] = recovery.table(run).rows
    assert row[4] == "—: every trial invalid" and row[5] != "yes" and "0 ns" not in row, row
