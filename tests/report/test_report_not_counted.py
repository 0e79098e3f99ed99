"""Frames a trial's receiver saw but did not count (foreign, stray, forged) are shown where there
were any: a column of the report's trial table, a line of the run console."""
from __future__ import annotations

import io

from rich.console import Console

from netrig.cli.console import LiveProgress, trial_note
from netrig.measure.seam import TrialCounts
from netrig.report.tables import not_counted, trials_table
from netrig.run.progress import TrialEnd, TrialInfo, TrialStart
from netrig.run.records import LoadRecord
from netrig.view.run_view import RunView


def _doc(router_doc: dict, counts: dict) -> RunView:
    router_doc["trials"][0]["counts"].update(counts)
    return RunView.from_doc(router_doc)


def test_the_trial_table_has_a_not_counted_column_only_when_some_trial_has_such_frames(router_doc):
    plain = trials_table(RunView.from_doc(router_doc))
    assert "not counted" not in plain.header, "reports of clean runs do not change"
    t = trials_table(_doc(router_doc, {"foreign": 3, "stray": 300, "forged": 0}))
    col = t.header.index("not counted")
    assert col == len(t.header) - 2, "just before 'valid'"
    assert t.rows[0][col] == "foreign 3 · stray 300"
    assert t.rows[1][col] == "—"
    assert all(len(r) == len(t.header) for r in t.rows)


def test_not_counted_lists_what_is_not_zero():
    counts = TrialCounts(achieved_pps=1.0, frames_sent=1, frames_received=1)
    assert not_counted(counts) == "" and not_counted(None) == ""
    assert not_counted(TrialCounts(achieved_pps=1.0, frames_sent=1, frames_received=1, forged=2, stray=1_200)) == \
        "stray 1,200 · forged 2"


def test_the_console_says_why_a_trial_is_invalid_and_what_was_not_counted():
    ok = TrialCounts(achieved_pps=1.0, frames_sent=10, frames_received=10, foreign=5)
    assert trial_note(ok) == "", "foreign frames alone (ARP, the host's traffic) are no news"
    bad = TrialCounts(achieved_pps=1.0, frames_sent=10, frames_received=10, foreign=5, stray=300, valid=False,
                      invalid_reason="port b: 300 frames of another netrig trial arrived")
    assert trial_note(bad) == ("invalid: port b: 300 frames of another netrig trial arrived; "
                               "not counted: foreign 5 · stray 300")
    buf = io.StringIO()
    progress = LiveProgress(Console(file=buf, width=200))
    trial = TrialInfo("0/64/0/0", "rate", "rfc2544_throughput", "throughput", 64, 0, 0,
                      LoadRecord(64, 1.0, rate_pps=1e5, pct_line_rate=1.0))
    progress(TrialStart(trial))
    progress(TrialEnd(trial, False, bad))
    progress(TrialEnd(trial, False, ok))
    out = buf.getvalue()
    assert "trial 1 (throughput | 64 B | intended 100 kfps (1.00 %) | rep 1): invalid: port b: 300 frames" in out, out
    assert "trial 2" not in out
