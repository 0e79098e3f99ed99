"""Reading result documents: refuse newer schema versions, migrate older ones."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from netrig.errors import ResultError
from netrig.results.store import RESULT_FILE, SCHEMA_VERSION, TRIAL_LOG

#: ``MIGRATIONS[n]`` upgrades a version-n document to version n+1 (none yet: 1 is the first).
MIGRATIONS: dict[int, Callable[[dict], dict]] = {}


def migrate(doc: dict, source: str = "result") -> dict:
    if not isinstance(doc, dict):
        raise ResultError(f"{source}: not a netrig result document (top level is not an object)")
    v = doc.get("schema_version")
    if not isinstance(v, int) or isinstance(v, bool):
        raise ResultError(f"{source}: not a netrig result document (no integer schema_version)")
    if v > SCHEMA_VERSION:
        raise ResultError(
            f"{source}: written by a newer netrig (schema_version {v}); this netrig reads <= {SCHEMA_VERSION}. "
            "Upgrade netrig to read it."
        )
    while v < SCHEMA_VERSION:
        if v not in MIGRATIONS:
            raise ResultError(f"{source}: schema_version {v} is too old and cannot be migrated")
        doc = MIGRATIONS[v](doc)
        v = doc["schema_version"]
    return doc


def load_result(path: str | Path) -> dict:
    """Load ``result.json`` (or a run directory containing it) as a migrated dict."""
    p = Path(path)
    if p.is_dir():
        p = p / RESULT_FILE
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ResultError(f"{p}: cannot read: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ResultError(f"{p}: not valid JSON: {e}") from None
    return migrate(doc, str(p))


def read_trial_log(out_dir: str | Path) -> tuple[dict | None, list[dict]]:
    """``(header, trial records)`` from ``<out_dir>/trials.ndjson``. A torn last line (crash while
    writing) is ignored; any other bad line is an error."""
    p = Path(out_dir) / TRIAL_LOG
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ResultError(f"{p}: no trial log here; is {out_dir} a netrig output directory?") from None
    except OSError as e:
        raise ResultError(f"{p}: cannot read: {e.strerror}") from None
    header, trials = None, []
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines) - 1:
                break
            raise ResultError(f"{p}:{n + 1}: corrupt line") from None
        kind = obj.pop("type", None)
        if kind == "header":
            header = migrate(obj, str(p))
        elif kind == "trial":
            trials.append(obj)
    return header, trials
