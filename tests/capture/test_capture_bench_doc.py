"""``capture-bench.json`` is a type (``netrig.run.capture_bench.BenchDocument``): written from it and
read back into it, equal; the report is re-drawn from the file without re-running; a document of
another schema is refused with one line. No root: the document is made by hand."""
from __future__ import annotations

import json

import pytest

from netrig.errors import ResultError
from netrig.measure import TrialCounts
from netrig.methods.throughput import ThroughputResult
from netrig.model import FrameSize, LineRate
from netrig.run.capture_bench import (
    NOMINAL_BPS,
    RESULT_FILE,
    BenchDocument,
    BenchEntry,
    BenchParams,
    CurvePoint,
    curve_rows,
    load_bench,
    table_rows,
    write_report,
)


def document() -> BenchDocument:
    params = BenchParams(methods=("recvmmsg", "af_xdp"), sizes="64,imix", loads_pct=(50.0, 100.0))
    line = LineRate(NOMINAL_BPS, "nominal", "veth")
    doc = BenchDocument(params, "2026-11-28T00:00:00Z", ceilings={"recvmmsg": {"64": 440000.0, "imix": None}})
    for size, limit in ((64, 400000.0), ("imix", 200000.0)):
        frame = FrameSize.parse(size)
        tp = ThroughputResult(frame, line, 0.6 * limit, 0.6 * limit, 0.62 * limit, 7, False, None, 1000.0, True)
        half = TrialCounts(achieved_pps=limit / 2, frames_sent=100_000, frames_received=99_000,
                           raw={"capture": {"drops": 1000, "queue_drops": 0, "cpu_s": 0.4, "wall_s": 1.0}})
        full = TrialCounts(achieved_pps=limit * 0.9, frames_sent=200_000, frames_received=150_000, valid=False,
                           invalid_reason="tester sent 90 %")
        curve = (CurvePoint.of(50.0, limit / 2, half), CurvePoint.of(100.0, limit, full))
        doc.results.append(BenchEntry("recvmmsg", frame.label, frame.mean_size, limit * 1.1, limit, tp, 60.0, False,
                                      curve, "recvmmsg batch 10"))
    doc.complete = True
    return doc


def test_the_document_is_written_and_read_back_as_its_type(tmp_path):
    doc = document()
    (tmp_path / RESULT_FILE).write_text(json.dumps(doc.to_dict()))
    back = load_bench(str(tmp_path))
    assert json.loads(json.dumps(back.to_dict())) == json.loads((tmp_path / RESULT_FILE).read_text())
    assert back.results[0].throughput.rate_pps == 240000.0 and back.results[1].frame_size == "imix"
    point = back.results[0].point(50.0)
    assert point is not None and point.captured_pct == 99.0 and point.cpu_pct == pytest.approx(40.0)
    assert back.results[0].point(100.0).valid is False  # type: ignore[union-attr]
    assert table_rows(back) == (["method (intended fps)", "64", "imix"],
                                [["recvmmsg", "240 kfps (60%)", "120 kfps (60%)"], ["af_xdp", "-", "-"]])
    assert curve_rows(back)[1][0] == ["recvmmsg", "64", "99.0", "75.0 (inv)", "- %"]


def test_the_report_is_redrawn_from_the_file(tmp_path):
    doc = document()
    (tmp_path / RESULT_FILE).write_text(json.dumps(doc.to_dict()))
    write_report(load_bench(str(tmp_path)), str(tmp_path))
    html = (tmp_path / "report.html").read_text()
    assert html.count("<svg") == 2 and "recvmmsg" in html
    assert "240 kfps (60%)" in (tmp_path / "report.md").read_text()


def test_a_document_of_another_schema_is_refused_in_one_line(tmp_path):
    (tmp_path / RESULT_FILE).write_text(json.dumps({**document().to_dict(), "schema": "netrig.capture-bench/1"}))
    with pytest.raises(ResultError, match="schema 'netrig.capture-bench/1' is not 'netrig.capture-bench/2'"):
        load_bench(str(tmp_path))
    (tmp_path / RESULT_FILE).write_text(json.dumps({k: v for k, v in document().to_dict().items() if k != "params"}))
    with pytest.raises(ResultError, match="params"):
        load_bench(str(tmp_path))
