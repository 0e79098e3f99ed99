"""A read-only view of one result document (``docs/result-format.md``), shaped for plots and tables.

``RunView.load(path)`` reads a result file through ``netrig.results`` (``result.json``, its
directory, or an unfinished run's ``trials.ndjson``; one-line ``ResultError`` naming the file for
every problem, newer schema versions refused, older ones migrated), and then offers what every
report needs whatever the methods: identity, line rate, self-test, flags, trials, monitoring.
What a method measured is read by that method's own module (``netrig.methods``), from
:meth:`RunView.method_results`. Every optional section may be missing: accessors return empty
lists or ``None`` instead of raising.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from netrig.measure import Mark, MonitorSample
from netrig.model import MIXES, WIRE_OVERHEAD_BYTES, size_label, size_sort_key
from netrig.results import TORN_FLAG, load_document, migrate
from netrig.view.document import CeilingInfo, Document, FrameSizeInfo, SelftestInfo, TestbedInfo, VerdictInfo, text
from netrig.view.frame_results import (
    FrameResults,
    Spread,
    SummaryEntry,
    line_rate_of,
    pooled,
    read_frame_results,
    read_summary,
)
from netrig.view.reading import Flag, finite, read_each, read_one
from netrig.view.trial_record import TrialRecord, read_trials

R = TypeVar("R")

#: Test-bed options that say what the DUT does (shown with its name).
DUT_LINE_OPTIONS = ("rules", "cap", "nat", "log", "flowtable", "forward_backend", "forward_mode", "capture_method")
#: Flags that concern a result's detail (its table says so), not the reader's trust in the run:
#: trials the tester could not use were retried or left out, and the result stands.
DETAIL_FLAGS = frozenset({"invalid_trials"})
#: Notes that question a result (shown as bad).
BAD_NOTES = frozenset({"above_selftest_ceiling", "tester_limited", "incomplete", "throughput_disagreement",
                       "no_selftest", "dut_backpressure", "dut_shares_cpu", "trial_log_torn", "shared_testbed",
                       "platform_stopped", "no_throughput"})


def num(d: Any, *keys: str) -> float | None:
    """The first of ``keys`` in mapping ``d`` whose value is a finite number, else ``None``."""
    if not isinstance(d, dict):
        return None
    for k in keys:
        v = d.get(k)
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)) and math.isfinite(v):
            return float(v)
    return None


def obj(d: Any, key: str) -> dict:
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, dict) else {}


def objs(d: Any, key: str) -> list[dict]:
    v = d.get(key) if isinstance(d, dict) else None
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


#: A result's ``frame_size`` as text, and the order sizes are shown in (the model's definitions).
frame_size_label = size_label
frame_size_sort_key = size_sort_key


def _size_text(size: Any) -> str:
    lab = frame_size_label(size)
    return f"{lab} B" if lab.isdigit() else lab


@dataclass(frozen=True)
class Stat:
    """A value (median of repetitions) with the min / max of the repetitions."""

    value: float
    lo: float
    hi: float

    @classmethod
    def of(cls, value: float, lo: float | None = None, hi: float | None = None) -> Stat:
        return cls(value, value if lo is None else lo, value if hi is None else hi)

    @classmethod
    def over(cls, values: Iterable[float | None]) -> Stat | None:
        vals = [v for v in values if v is not None]
        if not vals:
            return None
        return cls(statistics.median(vals), min(vals), max(vals))

    @classmethod
    def from_stats(cls, s: Any) -> Stat | None:
        """From a ``{"min", "median", "max"}`` stats entry."""
        med = num(s, "median", "value")
        return None if med is None else cls.of(med, num(s, "min"), num(s, "max"))

    @classmethod
    def from_spread(cls, s: Spread) -> Stat | None:
        """From a typed ``stats`` entry (``FrameResults.spread``)."""
        return None if s.median is None else cls.of(s.median, s.min, s.max)

    def scaled(self, k: float) -> Stat:
        return Stat(self.value * k, self.lo * k, self.hi * k)

    @property
    def spread(self) -> bool:
        return self.hi > self.lo


@dataclass(frozen=True)
class Note:
    """A note the report shows before the numbers: a flag's ``code`` and ``message``, ``where`` it
    applies (``"run"``, or the results), and whether it questions a result (``bad``)."""

    code: str
    message: str
    where: str
    bad: bool


def parse_time(s: Any) -> datetime | None:
    if not isinstance(s, str):
        return None
    try:
        return datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True)
class RunFlag:
    """A flag of the run or of one of its results, and ``where`` it applies (``"run"``, or the
    method and frame size)."""

    code: str
    message: str
    where: str


class RunView:
    """One result document, with tolerant accessors for the report."""

    def __init__(self, doc: dict, path: str | Path = "<result>"):
        self.path = Path(path)
        self.doc = doc
        self._records: tuple[object, list[TrialRecord]] | None = None
        self.name = self.config_name()
        #: the files this view was drawn from (several after ``merge``)
        self.parts: list[Path] = [self.path]
        #: The documents drawn as one (:meth:`merge`), each with its own summary and trials: their
        #: method indices restart in each, so what pairs a result with its trials reads them apart.
        self.part_docs: list[dict] = [self.doc]

    @property
    def head(self) -> Document:
        """The document's top level as its type (read on every access: a report may add to ``doc``)."""
        return Document.read(self.doc)

    # -- loading ------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike) -> RunView:
        """Read, check and migrate a result file; every problem is one ``ResultError`` naming it."""
        doc, p = load_document(path)
        return cls(doc, p)

    @classmethod
    def from_doc(cls, doc: Any, path: str | Path = "<result>") -> RunView:
        """A view of a parsed document (checked and migrated like a file)."""
        return cls(migrate(doc, str(path)), path)

    @classmethod
    def merge(cls, views: Sequence[RunView]) -> RunView:
        """Several results of one configuration (e.g. the demo's RFC 2544 part and its NDR/PDR
        part) as one: summaries, trials, flags and verdicts concatenated; the first result's
        identity, environment and configuration; the first self-test found."""
        views = list(views)
        if len(views) == 1:
            return views[0]
        first = views[0]
        doc = dict(first.doc)
        for key in ("summary", "trials", "flags", "verdicts"):
            doc[key] = [x for v in views for x in (v.doc.get(key) or [])]
        sizes: dict[str, tuple[Any, dict]] = {}
        for v in views:
            for e in objs(v.doc, "frame_sizes"):
                size = (read_one(FrameSizeInfo, e) or FrameSizeInfo()).frame_size
                sizes.setdefault(frame_size_label(size), (size, e))
        doc["frame_sizes"] = [e for _, e in sorted(sizes.values(), key=lambda se: frame_size_sort_key(se[0]))]
        doc["selftest"] = next((v.head.selftest for v in views if isinstance(v.head.selftest, dict)), None)
        for key in ("environment", "testbed", "line_rate"):
            doc[key] = next((v.doc[key] for v in views if v.doc.get(key)), doc.get(key))
        completes = [v.complete for v in views]
        doc["complete"] = all(c is not False for c in completes)
        last = views[-1].head.finished_at
        doc["finished_at"] = last if last is not None else first.head.finished_at
        out = cls(doc, first.path)
        out.parts = [v.path for v in views]
        out.part_docs = [v.doc for v in views]
        out.name = first.name
        return out

    # -- identity -----------------------------------------------------------------------------
    @property
    def config(self) -> dict:
        return obj(self.doc, "config")

    @property
    def environment(self) -> dict:
        return obj(self.doc, "environment")

    @property
    def testbed(self) -> dict:
        tb = obj(self.doc, "testbed")
        return tb or obj(self.config, "testbed")

    @property
    def bed(self) -> TestbedInfo:
        """:attr:`testbed` as its type."""
        return read_one(TestbedInfo, self.testbed) or TestbedInfo()

    @property
    def tool_version(self) -> str:
        """The netrig that wrote it (``?`` when it does not say)."""
        v = self.head.tool_version
        return str(v) if v is not None else "?"

    @property
    def complete(self) -> bool | None:
        v = self.head.complete
        return v if isinstance(v, bool) else None

    @property
    def torn(self) -> list[str]:
        """What reading it left out, one line each: the torn last record of an unfinished run's
        trial log (a crash's)."""
        return [str(f.message) for f in self.head.run_flags if f.code == TORN_FLAG]

    def config_name(self) -> str:
        """A short configuration name for legends: ``config.name``, the test bed's name, or the
        file (its directory's name for ``result.json``)."""
        c = self.head.configured
        for v in (text(c.name), text(c.label), text(self.bed.name)):
            if v is not None:
                return v.strip()
        if self.path.name in ("result.json", "trials.ndjson") and self.path.parent.name:
            return self.path.parent.name
        return self.path.stem

    # -- line rate ----------------------------------------------------------------------------
    @property
    def speed_bps(self) -> float | None:
        return self.head.rate.rate_bps

    @property
    def line_rate_label(self) -> str:
        lr = self.head.rate
        if isinstance(lr.label, str):
            return lr.label
        if self.speed_bps is None:
            return "unknown (no line rate in the result)"
        return f"{self.speed_bps / 1e9:g} Gbit/s ({lr.source if lr.source is not None else 'unknown source'})"

    def _frame_size_entry(self, size: Any) -> FrameSizeInfo:
        label = frame_size_label(size)
        return next((e for e in self.head.sizes if frame_size_label(e.frame_size) == label), FrameSizeInfo())

    def mean_frame_size(self, size: Any) -> float | None:
        m = finite(self._frame_size_entry(size).mean_frame_size)
        if m is not None:
            return m
        if isinstance(size, (int, float)) and not isinstance(size, bool):
            return float(size)
        mix = MIXES.get(str(size).lower())
        if mix:
            return sum(s * w for s, w in mix) / sum(w for _, w in mix)
        return None

    def line_rate_pps(self, size: Any) -> float | None:
        """Frames/s at line rate for ``size``: ``L / ((size + 20) * 8)``."""
        v = finite(self._frame_size_entry(size).line_rate_fps)
        if v:
            return v
        m = self.mean_frame_size(size)
        if m is None or not self.speed_bps:
            return None
        return self.speed_bps / ((m + WIRE_OVERHEAD_BYTES) * 8)

    def pct_of_line_rate(self, size: Any, rate_pps: float | None) -> float | None:
        lr = self.line_rate_pps(size)
        return None if lr is None or rate_pps is None else 100.0 * rate_pps / lr

    def bps(self, size: Any, rate_pps: float | None, layer: int = 1) -> float | None:
        m = self.mean_frame_size(size)
        if m is None or rate_pps is None:
            return None
        return rate_pps * (m + (WIRE_OVERHEAD_BYTES if layer == 1 else 0)) * 8

    # -- cores / queues -----------------------------------------------------------------------
    def _find(self, keys: tuple[str, ...]) -> Any:
        srcs = [self.testbed, obj(self.testbed, "options"), obj(self.testbed, "dut"), self.config,
                obj(self.config, "ports"), obj(obj(self.config, "testbed"), "options"), obj(self.config, "engine")]
        for src in srcs:
            for k in keys:
                v = src.get(k)
                if isinstance(v, (int, str)) and not isinstance(v, bool):
                    return v
                if isinstance(v, list) and v and all(isinstance(x, (int, str)) for x in v):
                    return ",".join(str(x) for x in v)
        return None

    def cores(self) -> str:
        v = self._find(("dut_cores", "cores", "dut_cpus"))
        if v is not None:
            return str(v)
        placed = self.bed.placed.cpu_list
        if placed:
            return f"{len(placed)} (CPU {','.join(map(str, placed))})"
        env = self.environment
        n = num(env, "cpus", "cpu_count") or num(obj(env, "cpu"), "count", "logical")
        return f"{int(n)} (host)" if n else "—"

    def queues(self) -> str:
        v = self._find(("queues", "dut_queues", "rx_queues"))
        return "—" if v is None else str(v)

    # -- summaries ----------------------------------------------------------------------------
    def summary(self) -> list[SummaryEntry]:
        """Every ``summary`` entry as its type."""
        return read_summary(self.head.summary)

    def method_results(self, method: str) -> list[dict]:
        """Every frame-size result of every summary entry of ``method``, sorted by frame size."""
        found = [r for e in self.summary() if e.method == method for r in e.results]
        return [dict(r.stored) for r in sorted(found, key=lambda r: frame_size_sort_key(r.frame_size))]

    def frame_results(self, method: str, cls: type[R]) -> list[FrameResults[R]]:
        """:meth:`method_results` with every repetition read back as ``cls`` (the method's result type)."""
        lr = line_rate_of(self.doc)
        return [read_frame_results(r, cls, lr) for r in self.method_results(method)]

    def pooled_frame_results(self, method: str, cls: type[R]) -> list[FrameResults[R]]:
        """:meth:`frame_results`, with the results of ``method`` at one frame size whose parameters
        differ only in their repetitions read as one: every repetition together (the demo's 64-B
        throughput: one search in its RFC 2544 part, four before and four after its NDR/PDR
        search), so a report quotes their median once, as the console's answers do."""
        lr = line_rate_of(self.doc)
        groups: dict[tuple[str, str], list[FrameResults[R]]] = {}
        for e in self.summary():
            if e.method != method:
                continue
            basis = json.dumps({k: v for k, v in e.params.items() if k != "repetitions"}, sort_keys=True, default=str)
            for r in e.results:
                read = read_frame_results(dict(r.stored), cls, lr)
                groups.setdefault((size_label(r.frame_size), basis), []).append(read)
        out = [g[0] if len(g) == 1 else pooled(g) for g in groups.values()]
        return sorted(out, key=lambda r: size_sort_key(r.frame_size))

    def has_frame_results(self) -> bool:
        """It holds results of frame methods (not only stack methods, whose frame size is ``stack``:
        the self-test and the line rate say nothing about them)."""
        summary = self.summary()
        return any(r.frame_size != "stack" for e in summary for r in e.results) or not summary

    def methods(self) -> list[str]:
        return [e.method for e in self.summary()]

    def method_params(self, method: str) -> dict:
        return next((dict(e.params) for e in self.summary() if e.method == method), {})

    # -- self-test, flags ---------------------------------------------------------------------
    def selftest(self) -> SelftestInfo | None:
        return self.head.self_test

    def selftest_ceilings(self) -> list[CeilingInfo]:
        st = self.selftest()
        return sorted(st.ceiling_list if st else (), key=lambda c: frame_size_sort_key(c.frame_size))

    @property
    def selftest_factor(self) -> float:
        st = self.selftest()
        return (finite(st.factor) if st else None) or 1.1

    def proven_ceiling_pps(self, size: Any) -> float | None:
        """The tester's proven rate at ``size`` (self-test), or ``None`` when not proven."""
        label = frame_size_label(size)
        return next((c.proven_pps for c in self.selftest_ceilings() if frame_size_label(c.frame_size) == label), None)

    def flags(self) -> list[RunFlag]:
        """Run-wide flags, then every per-result flag (deduplicated)."""
        out: list[RunFlag] = []
        seen: set[tuple[str, str]] = set()

        def add(code: str, message: str, where: str) -> None:
            if (code, message) not in seen:
                seen.add((code, message))
                out.append(RunFlag(code, message, where))

        for f in self.head.run_flags:
            add(str(f.code or ""), str(f.message or ""), "run")
        for entry in self.summary():
            for r in entry.results:
                for rf in (read_one(_Flagged, r.stored) or _Flagged()).flag_list:
                    add(rf.code, rf.message, f"{entry.label}, {_size_text(r.frame_size)}")
        return out

    def dut_line(self) -> str | None:
        """One line saying what the DUT was: its test bed, the options it was built with, and where
        it ran (``None`` for a result without a test bed, or the simulated one)."""
        tb = self.bed
        name = text(tb.topology) or text(tb.name)
        if name is None or name == "simulated":
            return None
        uses = tb.reads  # the options the topology reads, recorded with the test bed
        opts = {k: v for k, v in tb.option_values.items() if v not in (None, False, [], "") and k in uses}
        shown = ", ".join(f"{k} {v}" for k, v in opts.items() if k in DUT_LINE_OPTIONS)
        where = tb.placed.note
        return f"{name}{f' ({shown})' if shown else ''}" + (f"; {where}" if isinstance(where, str) else "")

    def notes(self) -> list[Note]:
        """What a reader must know before the numbers, one note per kind. Flags of one code are one
        note (the first message, every place it applies to); ``DETAIL_FLAGS`` stay with their results
        (the tables' flags), never up here."""
        out: list[Note] = []
        if self.complete is False:
            out.append(Note("incomplete", str(self.head.interrupted_reason or "the run did not finish"),
                            "run", True))
        if not self.selftest() and self.has_frame_results():
            out.append(Note("no_selftest", "nothing proves the tester was not the bottleneck", "run", True))
        by_code: dict[str, tuple[int, list[str], list[str]]] = {}
        for f in self.flags():
            if f.code in DETAIL_FLAGS:
                continue
            if f.code not in by_code:
                by_code[f.code] = (len(out), [], [])
                out.append(Note(f.code, f.message, "run", f.code in BAD_NOTES))
            i, same, also = by_code[f.code]
            if f.where != "run":
                (same if f.message == out[i].message else also).append(f.where)
        for i, same, also in by_code.values():
            where = "; ".join(same)
            if also:  # the same kind elsewhere, with its own numbers: named, not repeated
                where += ("; " if where else "") + f"also {'; '.join(also)}: see each result's flags"
            out[i] = dataclasses.replace(out[i], where=where or "run")
        return out

    def verdicts(self) -> tuple[VerdictInfo, ...]:
        return self.head.verdict_list

    # -- trials and monitoring ----------------------------------------------------------------
    def trials(self) -> list[dict]:
        return objs(self.doc, "trials")

    def trial_records(self) -> list[TrialRecord]:
        """Every trial record as its type (read once per ``trials`` list)."""
        trials = self.head.trials
        if self._records is None or self._records[0] is not trials:
            self._records = (trials, read_trials(trials))
        return self._records[1]

    def trial_start_s(self) -> dict[int, float]:
        """Each trial's start (index in ``trials``) in seconds since the run's first trial."""
        records = self.trial_records()
        times = [parse_time(t.started_at) for t in records]
        base = next((t for t in times if t is not None), None)
        out, clock = {}, 0.0
        for t, at in zip(records, times):
            if base is not None and at is not None:
                clock = (at - base).total_seconds()
            out[t.index] = clock
            clock += (t.load.duration_s or 0.0) + 1.0
        return out

    def monitored_trials(self) -> list[TrialRecord]:
        """Every trial with DUT monitoring samples."""
        return [t for t in self.trial_records() if t.monitor_samples]


@dataclass(frozen=True)
class _Flagged:
    """A stored result's flags."""

    flags: Any = None

    @property
    def flag_list(self) -> list[RunFlag]:
        return [RunFlag(str(f.code or ""), str(f.message or ""), "") for f in read_each(Flag, self.flags)]


def flag_codes(r: dict) -> set[str]:
    return {f.code for f in (read_one(_Flagged, r) or _Flagged()).flag_list}


def sample_time_s(s: MonitorSample | Mark) -> float:
    return s.t_s


#: The parts of a CPU's time a report draws, in percent.
CPU_PARTS = ("user", "system", "irq", "softirq", "idle")


def sample_cpus(s: MonitorSample | Mark) -> dict[str, dict[str, float | None]]:
    """``{"cpu0": {"user": %, "system": %, "irq": %, "softirq": %, "idle": %}, …}`` in percent (a
    mark: none)."""
    out = {}
    for name, v in (s.cpu or {}).items() if isinstance(s, MonitorSample) else ():
        if not isinstance(v, dict):
            continue
        vals = {k: finite(v.get(k)) for k in CPU_PARTS}
        total = sum(x for x in vals.values() if x is not None)
        if 0 < total <= 1.5:  # fractions, not percent
            vals = {k: (x * 100 if x is not None else None) for k, x in vals.items()}
        out[f"cpu{name}" if name.isdigit() else name] = vals
    return out


def sample_mem_used_bytes(s: MonitorSample | Mark) -> float | None:
    m = s.mem if isinstance(s, MonitorSample) else None
    if m is None:
        return None
    if m.used_bytes is not None:
        return float(m.used_bytes)
    return float(m.total_bytes - m.available_bytes) if m.total_bytes is not None and m.available_bytes is not None \
        else None


def unique_names(runs: Iterable[RunView]) -> None:
    """Make legend names unique: append the file name (then a number) where names repeat."""
    runs = list(runs)
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.name] = counts.get(r.name, 0) + 1
    for r in runs:
        if counts[r.name] > 1:
            r.name = f"{r.name} ({r.path.parent.name + '/' if r.path.name == 'result.json' else ''}{r.path.name})"
    seen: dict[str, int] = {}
    for r in runs:
        if r.name in seen:
            seen[r.name] += 1
            r.name = f"{r.name} #{seen[r.name]}"
        else:
            seen[r.name] = 1


def med(entries: Iterable[dict], key: str) -> float | None:
    """The median of ``key`` over ``entries`` (e.g. a result's repetitions), ``None`` if none has it."""
    s = Stat.over(num(x, key) for x in entries)
    return s.value if s else None
