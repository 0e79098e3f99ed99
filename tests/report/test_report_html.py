"""The HTML report and Markdown summary: every section, no external URL, robust to gaps."""
from __future__ import annotations

import json
import re

import pytest
from report_golden import DATA, GOLDEN, NAT, ROUTER

from netrig.cli.main import main
from netrig.errors import ResultError
from netrig.report import write_compare, write_report
from netrig.report.html import COMPARE_SECTIONS, REPORT_SECTIONS
from netrig.results import SCHEMA_VERSION

EXTERNAL = re.compile(r"""(?:href|src|action)\s*=\s*["']?\s*(?:https?:|//|ftp:)|url\(\s*["']?(?:https?:|//)|@import""", re.I)


def assert_self_contained(html: str) -> None:
    assert "http://" not in html and "https://" not in html, "an absolute URL in the page"
    m = EXTERNAL.search(html)
    assert m is None, f"external reference: {html[max(0, m.start() - 40):m.end() + 40]}"
    assert "<script src" not in html and "<link" not in html


class Reports:
    """A golden file's report and summary, drawn when a test first asks for it (once for the
    session, see conftest): each test waits for its own drawing only. Drawing them all in one
    module fixture made the first test of the module, on each worker, wait for every one (64 s on
    an idle machine; beyond the 300-s test timeout on a loaded one)."""

    def __init__(self, rendered):
        self.rendered = rendered

    def __getitem__(self, path) -> tuple[str, str]:
        out = self.rendered(path)
        return out.read_text(), out.with_suffix(".md").read_text()


@pytest.fixture(scope="module")
def reports(rendered) -> Reports:
    return Reports(rendered)


@pytest.fixture(scope="module")
def compared(rendered) -> tuple[str, str]:
    out = rendered(ROUTER, NAT, compare=True)
    return out.read_text(), out.with_suffix(".md").read_text()


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_report_has_every_section(reports, path):
    html, md = reports[path]
    for sid in REPORT_SECTIONS:
        assert f'<section id="{sid}">' in html, sid
    assert_self_contained(html)
    assert md.startswith("# netrig report") and "| configuration |" in md


def test_router_report_contents(reports):
    html, md = reports[ROUTER]
    plots = re.findall(r'data-plot="([^"]+)"', html)
    for name in ("throughput", "forwarded_vs_intended", "frame_loss", "latency_vs_frame_size", "latency_vs_load",
                 "ndr_pdr", "selftest", "iperf", "timeline", "trial_timeline"):
        assert name in plots, name
    assert html.count("<svg") == len(plots)
    assert "1 Gbit/s (configured: veth has no link speed)" in html  # line rate and its source printed
    assert "above_selftest_ceiling" in html and 'class="flagged"' in html  # results above the ceiling flagged
    assert "<details>" in html and "All 147 trials" in html
    assert "max loss-free" in html and "forwarding collapses" in html
    assert "575,474 fps" in html  # 64 B median throughput in the summary table
    assert "575,474 fps" in md and "| 64 B |" in md and "above_selftest_ceiling" in md


def test_default_output_beside_result(tmp_path, minimal_doc):
    d = tmp_path / "run1"
    d.mkdir()
    (d / "result.json").write_text(json.dumps(minimal_doc))
    out = write_report(d / "result.json")
    assert out == d / "report.html" and (d / "report.md").is_file()


def test_a_report_that_cannot_be_written_leaves_no_temp_file_behind(tmp_path, minimal_doc):
    (tmp_path / "result.json").write_text(json.dumps(minimal_doc))
    (tmp_path / "out").mkdir()  # where the report's file belongs: os.replace fails
    with pytest.raises(ResultError, match="cannot write the report"):
        write_report(tmp_path / "result.json", tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "result.json"]


def test_missing_sections_render(tmp_path, minimal_doc):
    p = tmp_path / "min.json"
    p.write_text(json.dumps(minimal_doc))
    html = write_report(p, tmp_path / "min.html").read_text()
    for sid in REPORT_SECTIONS:
        assert f'<section id="{sid}">' in html
    assert "No RFC 2544 throughput in this result." in html
    assert "No DUT monitoring samples" in html and "No tester self-test" in html
    assert "incomplete" in html
    assert "<svg" not in html


def test_partial_sections(tmp_path, router_doc):
    """Only throughput, no self-test, no environment, a trial without counts: still renders."""
    router_doc["summary"] = [s for s in router_doc["summary"] if s["method"] == "rfc2544_throughput"]
    for k in ("selftest", "environment", "testbed", "frame_sizes", "flags", "verdicts"):
        router_doc.pop(k)
    router_doc["trials"] = router_doc["trials"][:10]
    router_doc["trials"].append({"seq": 999, "method": "rfc2544_throughput"})
    p = tmp_path / "partial.json"
    p.write_text(json.dumps(router_doc))
    html = write_report(p, tmp_path / "partial.html").read_text()
    assert 'data-plot="throughput"' in html and "No MLRsearch" in html and "no self-test" in html


def test_compare(compared):
    html, md = compared
    for sid in COMPARE_SECTIONS:
        assert f'<section id="{sid}">' in html, sid
    assert_self_contained(html)
    assert "router+nat" in html and "% of baseline" in html
    row = next(line for line in md.splitlines() if line.startswith("| 64 B |"))
    # NAT throughput at 64 B as % of routing: a number well below 100 %
    pct = float(re.findall(r"([\d.]+) %", row)[0])
    assert 50 < pct < 100


def test_compare_needs_two(tmp_path):
    from netrig.errors import ResultError

    with pytest.raises(ResultError, match="at least two"):
        write_compare([ROUTER], tmp_path / "x.html")


def _small(tmp_path, src, name: str):
    """``src`` with only its throughput summary (fast to draw)."""
    doc = json.loads(src.read_text())
    doc["summary"] = [s for s in doc["summary"] if s["method"] == "rfc2544_throughput"]
    doc["trials"] = doc["trials"][:20]
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_cli_report_and_errors(tmp_path, capsys):
    a, b = _small(tmp_path, ROUTER, "a.json"), _small(tmp_path, NAT, "b.json")
    assert main(["report", str(a), "-o", str(tmp_path / "a.html")]) == 0
    assert (tmp_path / "a.html").is_file() and (tmp_path / "a.md").is_file()
    assert str(tmp_path / "a.html") in capsys.readouterr().out
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))
    assert main(["report", str(newer)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "newer.json" in err and f"schema_version {SCHEMA_VERSION + 1}" in err
    assert main(["compare", str(a), str(tmp_path / "missing.json"), "-o", str(tmp_path / "c.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "missing.json" in err
    assert main(["compare", str(a), str(b), "-o", str(tmp_path / "c.html")]) == 0
    assert "% of baseline" in (tmp_path / "c.md").read_text()


def test_demo_parts_drawn_as_one_report(tmp_path):
    """``make demo`` writes an RFC 2544 result and an NDR/PDR result; one report draws both."""
    parts = [DATA / "report-simulated-demo-rfc2544.json", DATA / "report-simulated-demo-ndr-pdr.json"]
    if not all(p.is_file() for p in parts):
        pytest.skip("simulated demo results not in tests/data")
    html = write_report(parts, tmp_path / "demo.html").read_text()
    for name in ("throughput", "forwarded_vs_intended", "latency_vs_frame_size", "ndr_pdr"):
        assert f'data-plot="{name}"' in html, name
    assert_self_contained(html)
    assert parts[1].name in html  # the footer names every file drawn
