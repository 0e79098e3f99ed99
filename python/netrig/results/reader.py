"""Reading result documents — the only place that does: refuse newer schema versions, migrate older
ones, and turn every problem with a file into one ``ResultError`` line naming the file.

``load_result(path)`` accepts ``result.json``, a run directory, or an unfinished run's
``trials.ndjson`` (its header and trial lines become a document with ``"complete": false``).
"""
from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path

from netrig.errors import ResultError
from netrig.results.store import RESULT_FILE, SCHEMA_VERSION, TRIAL_LOG

#: The largest file read as a result, a trial log or a run's config (bytes): a larger one (a sparse
#: file, a disk image given by mistake) is refused by its size before a byte is read.
MAX_RESULT_BYTES = 512 << 20


def read_text(p: Path) -> str:
    """``p``'s text (UTF-8), refused by its size first (:data:`MAX_RESULT_BYTES`); ``OSError`` and
    ``UnicodeDecodeError`` are left to the caller, who names what the file should have been."""
    size = p.stat().st_size
    if size > MAX_RESULT_BYTES:
        raise ResultError(f"{p}: {size} bytes is above the largest netrig result read ({MAX_RESULT_BYTES} bytes): "
                          "not a netrig result? give the run directory's result.json or trials.ndjson")
    return p.read_text(encoding="utf-8")


#: Top-level keys that must be objects, and ones that must be lists, when present.
_OBJECTS = ("environment", "config", "selftest", "line_rate", "testbed")
_LISTS = ("trials", "summary", "frame_sizes", "flags", "verdicts")


def _v1_to_v2(doc: dict) -> dict:
    """Version 1 wrote ``latency.ipdv_ns`` as null in every trial (the engine's mean |IPDV| was
    read under another name) although the raw engine result beside it holds it. Recover the mean
    and the maximum from ``counts.raw.engine.latency``, then the latency method's per-trial and
    median IPDV and the self-test's latency floors from the recovered trials. The 99th percentile
    was not recorded by version 1 and stays null."""
    for t in doc.get("trials") or []:
        counts = t.get("counts") if isinstance(t, dict) else None
        lat = counts.get("latency") if isinstance(counts, dict) else None
        eng = (((counts or {}).get("raw") or {}).get("engine") or {}).get("latency") if counts else None
        if isinstance(lat, dict) and isinstance(eng, dict):
            if lat.get("ipdv_ns") is None and _finite(eng.get("ipdv_mean_ns")):
                lat["ipdv_ns"] = eng["ipdv_mean_ns"]
            if lat.get("ipdv_max_ns") is None and _finite(eng.get("ipdv_max_ns")):
                lat["ipdv_max_ns"] = eng["ipdv_max_ns"]
    trials = [t for t in doc.get("trials") or [] if isinstance(t, dict)]
    for entry in doc.get("summary") or []:
        if not isinstance(entry, dict) or entry.get("method") != "rfc2544_latency":
            continue
        for r in entry.get("results") or []:
            for rep_i, rep in enumerate(r.get("repetitions") or []):
                per = rep.get("per_trial") if isinstance(rep, dict) else None
                if not isinstance(per, list):
                    continue
                lats = [t["counts"]["latency"] for t in trials
                        if t.get("method_index") == entry.get("method_index")
                        and t.get("frame_size") == r.get("frame_size")
                        and t.get("repetition") == rep_i and isinstance(t.get("counts"), dict)
                        and t["counts"].get("valid", True) and isinstance(t["counts"].get("latency"), dict)]
                # per_trial holds the valid trials with latency in the order they ran: fill only on an exact match
                if len(lats) != len(per) or any(_key(a) != _key(b) for a, b in zip(lats, per) if isinstance(b, dict)):
                    continue
                for a, b in zip(lats, per):
                    if isinstance(b, dict) and b.get("ipdv_ns") is None:
                        b["ipdv_ns"] = a.get("ipdv_ns")
                vals = [b["ipdv_ns"] for b in per if isinstance(b, dict) and _finite(b.get("ipdv_ns"))]
                if rep.get("ipdv_ns") is None and vals:
                    rep["ipdv_ns"] = statistics.median(vals)
    st = doc.get("selftest")
    by_key = {t.get("key"): t for t in trials}
    for c in (st.get("ceilings") or []) if isinstance(st, dict) else []:
        floor = c.get("latency_floor") if isinstance(c, dict) else None
        if not isinstance(floor, dict) or floor.get("ipdv_ns") is not None:
            continue
        for k in c.get("trial_keys") or []:
            lat = ((by_key.get(k) or {}).get("counts") or {}).get("latency")
            if isinstance(lat, dict) and _key(lat) == _key(floor):
                floor["ipdv_ns"] = lat.get("ipdv_ns")
                floor["ipdv_max_ns"] = lat.get("ipdv_max_ns")
    doc["schema_version"] = 2
    return doc


def _finite(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _key(lat: dict) -> tuple:
    return tuple(lat.get(k) for k in ("min_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns"))


#: Version 2's method-result keys that held a rate under the name ``offered``, per method: the old
#: key → the new one (what the value was: the rate asked for, or the rate the tester really sent).
_V3_RESULT_KEYS: dict[str, dict[str, str]] = {
    "rfc2544_frame_loss": {"offered_pps": "intended_pps", "offered_pct": "intended_pct"},
    "livelock": {"offered_pps": "intended_pps"},
    "iperf": {"offered_pps": "intended_pps"},
    "stateful": {"offered_pps": "achieved_pps"},
}


def _v2_to_v3(doc: dict) -> dict:
    """Version 2 named the rate a trial really sent ``counts.offered_pps`` while method results used
    ``offered`` for the rate asked for. Version 3 says ``achieved_pps`` for the one and
    ``intended_pps`` / ``intended_pct`` for the other: every trial's counts (and the attempts and
    OTG notes in its ``raw``) are renamed, ``counts.intended_pps`` is filled from the trial's load,
    and the frame-loss curves, livelock points, iperf repetitions and stateful phases of ``summary``
    are renamed after what their values were. Records already in version 3 (a version-2 trial log
    resumed by a newer netrig) are left as they are."""
    for t in doc.get("trials") or []:
        if isinstance(t, dict):
            trial_v3(t)
    for entry in doc.get("summary") or []:
        keys = _V3_RESULT_KEYS.get(str(entry.get("method"))) if isinstance(entry, dict) else None
        if keys:
            for r in entry.get("results") or []:
                for rep in (r.get("repetitions") or []) if isinstance(r, dict) else []:
                    _rename_keys(rep, keys)
    doc["schema_version"] = 3
    return doc


def trial_v3(t: dict) -> None:
    """One trial record brought to version 3, in place (see :func:`_v2_to_v3`)."""
    counts = t.get("counts")
    if not isinstance(counts, dict):
        return
    _rename(counts, "offered_pps", "achieved_pps")
    if "intended_pps" not in counts:
        counts["intended_pps"] = _intended_pps(t)
    raw = counts.get("raw")
    if isinstance(raw, dict):
        for name in ("stalled_attempts", "stretched_attempts"):
            attempts = raw.get(name)
            for attempt in attempts if isinstance(attempts, list) else []:
                if isinstance(attempt, dict):
                    _rename(attempt, "offered_pps", "achieved_pps")
        if isinstance(raw.get("otg"), dict):
            _rename(raw["otg"], "offered_from", "achieved_from")


def _intended_pps(t: dict) -> float | None:
    """The rate a version-2 trial record was asked for: its load's (aggregate: both directions of a
    stateful trial in both; the time-weighted mean of a multi-phase trial's); ``None`` when not known
    (an OTG record's load holds the rate it achieved)."""
    if t.get("kind") == "otg":
        return None
    phases = t.get("phases")
    if isinstance(phases, list) and phases and all(
            isinstance(p, dict) and _finite(p.get("rate_pps")) and _finite(p.get("duration_s")) for p in phases):
        total = sum(p["duration_s"] for p in phases)
        if total > 0:
            return sum(p["rate_pps"] * p["duration_s"] for p in phases) / total
    load = t.get("load")
    if not isinstance(load, dict):
        return None
    rate = load.get("rate_pps")
    if not isinstance(rate, (int, float)) or not _finite(rate) or rate <= 0:
        return None
    request = load.get("request")
    return float(rate) * (2 if isinstance(request, dict) and request.get("direction") == "both" else 1)


def _rename(d: dict, old: str, new: str) -> None:
    """``d[old]`` as ``d[new]`` (a value already under ``new`` wins; ``old`` goes either way)."""
    if old in d:
        value = d.pop(old)
        d.setdefault(new, value)


def _rename_keys(obj: object, keys: dict[str, str]) -> None:
    """Every ``keys`` rename in ``obj`` and the objects and lists nested in it."""
    if isinstance(obj, dict):
        for old, new in keys.items():
            _rename(obj, old, new)
        for v in obj.values():
            _rename_keys(v, keys)
    elif isinstance(obj, list):
        for v in obj:
            _rename_keys(v, keys)


#: ``MIGRATIONS[n]`` upgrades a version-n document to version n+1, in place.
MIGRATIONS: dict[int, Callable[[dict], dict]] = {1: _v1_to_v2, 2: _v2_to_v3}


def migrate(doc: object, source: str = "result") -> dict:
    """Check a parsed document's shape and schema version, and bring it to :data:`SCHEMA_VERSION`."""
    if not isinstance(doc, dict):
        raise ResultError(f"{source}: not a netrig result (the top level is not a JSON object)")
    if "schema_version" not in doc:
        raise ResultError(f"{source}: not a netrig result (no schema_version field)")
    v = doc["schema_version"]
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ResultError(f"{source}: schema_version must be a positive integer, got {v!r}")
    if v > SCHEMA_VERSION:
        raise ResultError(f"{source}: written by a newer netrig (schema_version {v}); this netrig reads "
                          f"≤ {SCHEMA_VERSION}: upgrade netrig to read it")
    for key in _OBJECTS:
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise ResultError(f"{source}: field {key!r} must be an object, got {type(doc[key]).__name__}")
    for key in _LISTS:
        if doc.get(key) is not None and not isinstance(doc[key], list):
            raise ResultError(f"{source}: field {key!r} must be a list, got {type(doc[key]).__name__}")
    while v < SCHEMA_VERSION:
        doc = MIGRATIONS[v](doc)
        v = doc["schema_version"]
    return _written_since(_throughput_bounds(doc))


def _repetitions(doc: dict, method: str) -> Iterator[dict]:
    """Every stored repetition of ``method`` in ``doc``'s summary."""
    for entry in doc.get("summary") or []:
        if isinstance(entry, dict) and entry.get("method") == method:
            for r in entry.get("results") or []:
                yield from (x for x in ((r.get("repetitions") or []) if isinstance(r, dict) else [])
                            if isinstance(x, dict))


def _written_since(doc: dict) -> dict:
    """Repetitions written (same schema version) before their result type's ``to_dict`` wrote every
    field the type is read back from (``netrig.results.typed``): a back-to-back burst rate stored
    as ``line_rate_fps``; a system recovery without ``switch_s``, the start of its first recovery
    interval (as the method takes it)."""
    for rep in _repetitions(doc, "rfc2544_back_to_back"):
        if "burst_rate_fps" not in rep and "line_rate_fps" in rep:
            rep["burst_rate_fps"] = rep.pop("line_rate_fps")
    for rep in _repetitions(doc, "rfc2544_system_recovery"):
        if "switch_s" not in rep:
            rep["switch_s"] = next((i.get("t_s") for i in rep.get("intervals") or []
                                    if isinstance(i, dict) and i.get("phase") == 1), None)
    return doc


def _throughput_bounds(doc: dict) -> dict:
    """RFC 2544 throughput repetitions written before ``bounded_by_tester`` (same schema version) meant
    "some trial was invalid" by ``tester_limited``, not "the answer is the tester's bound": as the
    result type says it now, they were not bounded, and the upper end they name is not claimed."""
    for entry in doc.get("summary") or []:
        if not isinstance(entry, dict) or entry.get("method") != "rfc2544_throughput":
            continue
        for r in entry.get("results") or []:
            for rep in (r.get("repetitions") or []) if isinstance(r, dict) else []:
                if not isinstance(rep, dict) or "bounded_by_tester" in rep:
                    continue
                if rep.get("tester_limited") is True:
                    rep["upper_pps"] = None
                rep["tester_limited"] = rep["bounded_by_tester"] = False
    return doc


def result_path(path: str | os.PathLike) -> Path:
    """The file to read for ``path``: itself, or a run directory's ``result.json`` (else its
    ``trials.ndjson``)."""
    p = Path(path)
    if p.is_dir():
        if (p / RESULT_FILE).is_file():
            return p / RESULT_FILE
        if (p / TRIAL_LOG).is_file():
            return p / TRIAL_LOG
        raise ResultError(f"{p}: directory holds no {RESULT_FILE} (nor {TRIAL_LOG})")
    return p


def load_result(path: str | os.PathLike) -> dict:
    """The document at ``path`` (``result.json``, a run directory or a ``trials.ndjson``), checked
    and migrated to the current schema version."""
    return load_document(path)[0]


def load_document(path: str | os.PathLike) -> tuple[dict, Path]:
    """``(document, file read)``: :func:`load_result` and which file it read."""
    p = result_path(path)
    try:
        text = read_text(p)
    except FileNotFoundError:
        raise ResultError(f"{p}: no such result file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ResultError(f"{p}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    if not text.strip():
        raise ResultError(f"{p}: empty file, not a netrig result")
    return migrate(_parse(p, text), str(p)), p


def _parse(p: Path, text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        if _is_header(text.lstrip().split("\n", 1)[0]):  # an unfinished run's trials.ndjson
            return _unfinished(p, text)
        raise ResultError(f"{p}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None


def _is_header(line: str) -> bool:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        return False
    return isinstance(obj, dict) and obj.get("type") == "header"


#: The flag of a result read from a trial log whose last record a crash cut off.
TORN_FLAG = "trial_log_torn"


def _unfinished(p: Path, text: str) -> dict:
    """The document of an unfinished run's trial log: its header, its trials, ``"complete": false``;
    a torn last record is left out and flagged (:data:`TORN_FLAG`)."""
    records, torn = _log_records(p, text)
    doc = {k: v for k, v in records[0].items() if k != "type"}
    doc["trials"] = [{k: v for k, v in r.items() if k != "type"} for r in records[1:] if r.get("type") == "trial"]
    doc["complete"] = False
    if torn:
        doc["flags"] = [{"code": TORN_FLAG, "message": f"{torn}; left out, the {len(doc['trials'])} complete "
                                                       "trial records before it are read"}]
    return doc


def _log_records(p: Path, text: str) -> tuple[list[dict], str | None]:
    """The records of trial-log text, each checked, and what to say of a torn last line (a record a
    crash cut off: not JSON; left out) or ``None``; any other bad line is an error naming it."""
    lines = text.splitlines()
    records: list[dict] = []
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines) - 1:
                return records, f"{p}:{n + 1}: the last record was torn (the run was killed while writing it)"
            raise ResultError(f"{p}:{n + 1}: corrupt line (not JSON); the log is damaged: "
                              "remove that line to resume, or start a new run") from None
        problem = _record_problem(obj)
        if problem:
            raise ResultError(f"{p}:{n + 1}: {problem}; the log is damaged: remove that line to resume, "
                              "or start a new run")
        records.append(obj)
    return records, None


def _record_problem(obj: object) -> str | None:
    """What is wrong with the shape of one trial-log line (None: nothing)."""
    if not isinstance(obj, dict):
        return f"a line must be a JSON object, got {type(obj).__name__}"
    kind = obj.get("type")
    if kind == "header":
        if not isinstance(obj.get("config"), dict):
            return "the header's config must be an object"
        return None
    if kind == "interval":
        if not isinstance(obj.get("key"), str) or not isinstance(obj.get("segment"), int) \
                or not isinstance(obj.get("index"), int):
            return "an interval record needs a string key and integer segment and index"
        for name in ("duration_s", "t_s"):
            if isinstance(obj.get(name), bool) or not isinstance(obj.get(name), (int, float)):
                return f"interval {obj['key']}#{obj['index']}: {name} must be a number"
        for name in ("frames_sent", "frames_received"):
            if isinstance(obj.get(name), bool) or not isinstance(obj.get(name), int) or obj[name] < 0:
                return f"interval {obj['key']}#{obj['index']}: {name} must be an integer >= 0"
        return None
    if kind != "trial":
        return f"unknown record type {kind!r} (header, trial or interval)"
    if not isinstance(obj.get("key"), str):
        return "a trial record's key must be a string"
    # a frame trial has counts; a stack trial (iperf3, sockperf) has the tool's result instead
    for name in ("load", "result" if "counts" not in obj and "result" in obj else "counts"):
        if not isinstance(obj.get(name), dict):
            return f"trial {obj['key']}: {name} must be an object, got {type(obj.get(name)).__name__}"
    if obj.get("phases") is not None and not isinstance(obj["phases"], list):
        return f"trial {obj['key']}: phases must be a list"
    return None


def read_trial_log(out_dir: str | Path, intervals: list[dict] | None = None) -> tuple[dict | None, list[dict]]:
    """``(header, trial records)`` from ``<out_dir>/trials.ndjson``, migrated to the current schema
    version; the interval records of soak trials are appended to ``intervals`` when given. A torn last
    line (crash while writing) is ignored (``TrialLog.open`` cuts it and says so); any other bad line
    is an error."""
    p = Path(out_dir) / TRIAL_LOG
    try:
        text = read_text(p)
    except FileNotFoundError:
        raise ResultError(f"{p}: no trial log here; is {out_dir} a netrig output directory?") from None
    except OSError as e:
        raise ResultError(f"{p}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ResultError(f"{p}: not a trial log (not UTF-8 text)") from None
    header, trials = None, []
    for obj in _log_records(p, text)[0]:
        kind = obj.pop("type", None)
        if kind == "header":
            header = obj
        elif kind == "trial":
            trials.append(obj)
        elif kind == "interval" and intervals is not None:
            intervals.append(obj)
    if header is not None:
        doc = migrate({**header, "trials": trials}, str(p))
        trials = doc.pop("trials")
        header = doc
    return header, trials
