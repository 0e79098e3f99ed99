"""Writing results so that nothing finished is lost: every trial record is appended to
``trials.ndjson`` and flushed + fsync'd before the next trial starts; ``result.json`` is replaced
atomically (write to a temporary file, fsync, rename)."""
from __future__ import annotations

import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path

from netrig.errors import ResultError

#: The result schema this netrig writes (``docs/result-format.md``); readers migrate older ones.
SCHEMA_VERSION = 3
TRIAL_LOG = "trials.ndjson"
RESULT_FILE = "result.json"
CONFIG_FILE = "config.json"


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
    """Append-only NDJSON trial log. The first line is a header (``"type": "header"``).

    Every record is written with one ``write`` on an unbuffered file and fsync'd; a write that
    fails (disk full) is cut off again, so the log never holds a half record it wrote itself. A
    torn last line left by a crash (``kill -9``, power loss) is removed by :meth:`open` before
    anything is appended, and said so (:attr:`repaired`)."""

    def __init__(self, out_dir: str | Path):
        self.dir = Path(out_dir)
        self.path = self.dir / TRIAL_LOG
        self._fd: int | None = None
        #: What :meth:`open` repaired (``None``: nothing).
        self.repaired: str | None = None

    def open(self, header: dict | None, *, fresh: bool = False) -> None:
        """Open for appending; write ``header`` first when the log is new (or ``fresh``: replace
        whatever is there, e.g. a run that failed before its first trial)."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_TRUNC if fresh else 0)
            self._fd = os.open(self.path, flags, 0o644)
            size = os.fstat(self._fd).st_size
            if size:
                self._cut_torn_line(size)
            new = os.lseek(self._fd, 0, os.SEEK_END) == 0
        except OSError as e:
            self.close()
            raise ResultError(f"{self.path}: cannot open the trial log: {e.strerror}") from None
        if new and header is not None:
            self._write({"type": "header", **header})

    def _cut_torn_line(self, size: int) -> None:
        """Remove a last line without its newline (the record a crash cut off)."""
        assert self._fd is not None
        tail_len = min(size, 1 << 20)
        with open(self.path, "rb") as f:
            f.seek(size - tail_len)
            tail = f.read(tail_len)
        if tail.endswith(b"\n"):
            return
        nl = tail.rfind(b"\n")
        if nl < 0 and tail_len < size:
            raise OSError(0, f"the last line of {self.path} is over 1 MiB long and has no newline")
        keep = size - tail_len + nl + 1
        os.ftruncate(self._fd, keep)
        os.fsync(self._fd)
        self.repaired = (f"{self.path}: the last line was torn ({size - keep} bytes without a newline, "
                         "written when the run was killed); removed it, so that trial is measured again")

    def _write(self, obj: dict) -> None:
        if self._fd is None:
            raise ResultError(f"{self.path}: trial log is not open")
        data = (dumps(obj) + "\n").encode()
        pos = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            os.fsync(self._fd)
        except OSError as e:
            try:  # leave no half record behind: the log stays resumable
                os.ftruncate(self._fd, pos)
            except OSError:
                pass
            raise ResultError(f"{self.path}: cannot write a trial record: {e.strerror}") from None

    def append(self, record: dict) -> None:
        self._write({"type": "trial", **record})

    def append_interval(self, record: dict) -> None:
        """One interval of a running soak trial (``"type": "interval"``, its trial's ``key``): written
        as the interval ends, so a crash loses at most the intervals not yet settled."""
        self._write({"type": "interval", **record})

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (temporary file, fsync, rename); ``ResultError`` on failure."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except OSError as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise ResultError(f"{p}: cannot write: {e.strerror}") from None
    return p


def write_result(out_dir: str | Path, document: dict) -> Path:
    """Atomically write ``<out_dir>/result.json``."""
    return write_text_atomic(Path(out_dir) / RESULT_FILE, dumps(document, indent=1) + "\n")
