"""Every golden result renders exactly as recorded in ``tests/data/rendered/``.

The snapshot of a report is its HTML with each inline SVG replaced by the texts it draws (titles,
axis labels, tick labels, legends, annotations: ``svg.fonttype`` is ``none``, so every text stays
text) and file paths replaced by ``<data>``, plus the Markdown beside it. Paths drawn with another
matplotlib version differ in their coordinates, not in their texts, so the snapshot holds across
machines while any change of a table cell, a flag, a section or a plot's labels fails here.

A change that is meant to alter reports updates the snapshots on purpose:
``NETRIG_UPDATE_SNAPSHOTS=1 pytest tests/report/test_report_snapshots.py`` and the diff of
``tests/data/rendered/`` shows exactly what changed.
"""
from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest
from report_golden import DATA, GOLDEN, NAT, ROUTER

from netrig.report import write_report

RENDERED = DATA / "rendered"
_SVG = re.compile(r"<svg\b.*?</svg>", re.S)
_TEXT = re.compile(r"<text\b[^>]*>(.*?)</text>", re.S)
#: A line break before these tags keeps a snapshot's diff readable (one table row per line).
_BREAK = re.compile(r"(?<!\n)(<(?:section|h2|h3|figure|figcaption|table|tr|p|li|details|div)\b)")


def normalise(text: str, tmp: Path) -> str:
    """Paths out, each SVG reduced to the texts it draws (one per line), a line per table row."""
    def svg(m: re.Match) -> str:
        texts = [" ".join(html.unescape(re.sub(r"<[^>]+>", "", t)).split()) for t in _TEXT.findall(m.group(0))]
        return "<svg>\n  " + "\n  ".join(t for t in texts if t) + "\n</svg>"

    text = _BREAK.sub(r"\n\1", _SVG.sub(svg, text))
    return text.replace(str(DATA), "<data>").replace(str(tmp), "<out>")


def check(name: str, text: str) -> None:
    path = RENDERED / name
    if os.environ.get("NETRIG_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.is_file(), f"no snapshot {path}: run with NETRIG_UPDATE_SNAPSHOTS=1 to record it"
    want = path.read_text()
    if text != want:
        a, b = want.splitlines(), text.splitlines()
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        lo = max(0, first - 2)
        raise AssertionError(f"{name} differs from its snapshot at line {first + 1}:\n"
                             f"--- snapshot\n" + "\n".join(a[lo:first + 3]) + "\n+++ now\n" + "\n".join(b[lo:first + 3]))


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_report_matches_snapshot(rendered, path):
    out = rendered(path)  # the drawing the HTML tests read too
    check(f"{path.stem}.html.txt", normalise(out.read_text(), out.parent))
    check(f"{path.stem}.md", normalise(out.with_suffix(".md").read_text(), out.parent))


def test_demo_parts_report_matches_snapshot(tmp_path):
    parts = [DATA / "report-router-demo-rfc2544.json", DATA / "report-router-demo-ndr-pdr.json"]
    out = write_report(parts, tmp_path / "report.html")
    check("router-demo.html.txt", normalise(out.read_text(), tmp_path))
    check("router-demo.md", normalise(out.with_suffix(".md").read_text(), tmp_path))


def test_compare_matches_snapshot(rendered):
    out = rendered(ROUTER, NAT, compare=True)
    check("compare-router-nat.html.txt", normalise(out.read_text(), out.parent))
    check("compare-router-nat.md", normalise(out.with_suffix(".md").read_text(), out.parent))
