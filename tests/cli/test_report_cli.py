"""``netrig report``: what it reads and where it writes, each problem in one line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from netrig.cli.main import main

ROUTER = Path(__file__).resolve().parents[1] / "data" / "report-router-handmade.json"


def test_a_torn_trial_log_is_drawn_from_its_complete_records_and_said_in_one_line(tmp_path, capsys):
    doc = json.loads(ROUTER.read_text())
    lines = [json.dumps({"type": "header", "schema_version": 2, "run_id": "x", "config": doc["config"]})]
    lines += [json.dumps({"type": "trial", **t}) for t in doc["trials"][:4]]
    log = tmp_path / "run" / "trials.ndjson"
    log.parent.mkdir()
    log.write_text("\n".join(lines) + "\n" + lines[-1][:50])  # a crash cut the last record off
    assert main(["report", str(log.parent)]) == 0
    out, err = capsys.readouterr()
    assert out.split() == [str(log.parent / "report.html"), str(log.parent / "report.md")]
    assert err == f"netrig: {log}:6: the last record was torn (the run was killed while writing it); left out, " \
                  "the 4 complete trial records before it are read\n"
    assert "the last record was torn" in (log.parent / "report.md").read_text()


@pytest.mark.parametrize("out, says", [("", "'' is empty"), ("{tmp}", "'{tmp}' is a directory")])
def test_an_output_that_is_no_file_name_is_refused_naming_the_option(tmp_path, capsys, out, says):
    out, says = out.format(tmp=tmp_path), says.format(tmp=tmp_path)
    assert main(["report", str(ROUTER), "-o", out]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"netrig: error: -o: {says}, not a file name: give the file to write, e.g. -o ")
    assert err.count("\n") == 1 and err.rstrip().endswith("report.html")
