"""The golden result files the report tests draw (``tests/data/``)."""
from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"


def golden_files() -> list[Path]:
    """Every checked-in result document the report must draw (hand-made and from real runs)."""
    out = []
    for p in sorted(DATA.glob("*.json")):
        try:
            doc = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("schema_version"), int) and isinstance(doc.get("summary"), list):
            out.append(p)
    return out


GOLDEN = golden_files()
ROUTER = DATA / "report-router-handmade.json"
NAT = DATA / "report-router-nat-handmade.json"
