"""docs/telemetry.md lists every exported family as ``netrig.telemetry.families`` defines it: its
exposed name, type and labels (and no family that does not exist)."""
from __future__ import annotations

import re
from pathlib import Path

from netrig.telemetry.families import ALL, Family

DOC = Path(__file__).resolve().parents[2] / "docs" / "telemetry.md"


def exposed(f: Family) -> str:
    return f.name + {"counter": "_total", "info": "_info"}.get(f.kind, "")


def rows() -> dict[str, list[str]]:
    out = {}
    for line in DOC.read_text().splitlines():
        m = re.match(r"\| `(netrig_\w+)` \|", line)
        if m:
            out[m.group(1)] = [c.strip() for c in line.strip("|").split("|")]
    return out


def test_every_family_is_documented_as_defined():
    doc = rows()
    for f in ALL:
        assert exposed(f) in doc, f"docs/telemetry.md lacks {exposed(f)}"
        _, kind, labels, _unit, _meaning = doc[exposed(f)]
        assert kind == f.kind and labels == ", ".join(f.labels), exposed(f)
    assert set(doc) == {exposed(f) for f in ALL}, "docs/telemetry.md names a family netrig does not export"


def test_the_promql_names_exist():
    names = {exposed(f) for f in ALL} | {f"{f.name}_{s}" for f in ALL if f.kind == "summary" for s in ("sum", "count")}
    used = set(re.findall(r"\b(netrig_\w+)", DOC.read_text()))
    assert used <= names, f"docs/telemetry.md queries unknown metrics: {sorted(used - names)}"
