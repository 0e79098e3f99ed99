"""Writing results so that nothing finished is lost: every trial record is appended to
``trials.ndjson`` and flushed + fsync'd before the next trial starts; ``result.json`` is replaced
atomically (write to a temporary file, fsync, rename)."""
from __future__ import annotations

import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from netrig.errors import ResultError

#: The result schema this netrig writes (``docs/result-format.md``); readers migrate older ones.
SCHEMA_VERSION = 2
TRIAL_LOG = "trials.ndjson"
RESULT_FILE = "result.json"


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _clean(obj):
    """JSON has no NaN/Infinity: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def dumps(obj, **kw) -> str:
    return json.dumps(_clean(obj), allow_nan=False, default=str, **kw)


class TrialLog:
    """Append-only NDJSON trial log. The first line is a header (``"type": "header"``)."""

    def __init__(self, out_dir: str | Path):
        self.dir = Path(out_dir)
        self.path = self.dir / TRIAL_LOG
        self._f: TextIO | None = None

    def open(self, header: dict | None) -> None:
        """Open for appending; write ``header`` first when the log is new."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            new = not self.path.exists() or self.path.stat().st_size == 0
            self._f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - held open across trials
        except OSError as e:
            raise ResultError(f"{self.path}: cannot open the trial log: {e.strerror}") from None
        if new and header is not None:
            self._write({"type": "header", **header})

    def _write(self, obj: dict) -> None:
        if self._f is None:
            raise ResultError(f"{self.path}: trial log is not open")
        try:
            self._f.write(dumps(obj) + "\n")
            self._f.flush()
            os.fsync(self._f.fileno())
        except OSError as e:
            raise ResultError(f"{self.path}: cannot write a trial record: {e.strerror}") from None

    def append(self, record: dict) -> None:
        self._write({"type": "trial", **record})

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def write_result(out_dir: str | Path, document: dict) -> Path:
    """Atomically write ``<out_dir>/result.json``."""
    d = Path(out_dir)
    path = d / RESULT_FILE
    tmp = d / (RESULT_FILE + ".tmp")
    try:
        d.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(dumps(document, indent=1))
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        raise ResultError(f"{path}: cannot write the result: {e.strerror}") from None
    return path
