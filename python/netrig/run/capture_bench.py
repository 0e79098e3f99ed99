"""The capture-method benchmark (``netrig capture-bench``; lab report 002): packet-capture methods
compared by RFC 2544 throughput and by the "iperf-like" captured-% curve, over frame sizes.

```
 for each capture method m:
   Testbed("capture", capture_method=m)            tx namespace ──veth──▶ capture namespace:
     (built, torn down on success, failure, Ctrl-C)  netrig capture --capture-method m, pinned to CPU c,
                                                     its kernel receive path (RPS) on CPU c too
   for each frame size s:
     tester ceiling(m, s): TX-only trials with the capture application stopped (SIGSTOP): what the
       tester sends into this capture host when the application takes nothing; limit = ceiling / 1.1
       (RFC 8219's factor: a trial near the ceiling that stalls is the tester's, not the capture's)
     RFC 2544 throughput: measure_throughput(CaptureMeasurer, CapOnly(limit)) up to the limit,
       resolution r % of it; a trial the sender fell short in is the tester's (invalid), never the
       capture's: nothing of the capture runs on the sender's CPU (below)
     iperf-like: one trial per load (% of the limit): captured % = captured / sent, capture CPU
   every trial appended to trials.ndjson (fsync'd) and capture-bench.json rewritten after each size
 report.html / report.md: throughput vs frame size per method, captured % vs intended load per method
```

The ceiling is proven per method: on veth the capture host's kernel receive path competes with the
sender (RPS IPIs, the backlog's lock), differently for every method, and one ceiling for all (proven
beside the first method) moved by 2× between two runs. A trial the tester could not send at its rate
above what it proved, or whose capture counts could not be confirmed, is invalid: shown, never
counted as the capture method's loss (the throughput search treats it as the tester's limit, the
curve marks the point invalid). Unlike a forwarding DUT on veth, whose work runs in softirq on the
sender's CPU and can hold the sender back (netrig's "backpressure"), the capture application and
its kernel receive path (RPS) run on the capture CPU: a sender that falls short below its limit was
disturbed (measured: 3 attempts in a row at 96 % of 343 kfps while the same trials ran at 99.3 %
minutes later), so the shortfall is the tester's. (af_xdp's XDP program does run on the sender's
CPU; it costs the same with the application stopped, when the ceiling is proven.)
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, cast

from netrig.errors import INTERRUPTS, ConfigError, InterruptedTrial, ResultError, TestbedError, interrupt_reason
from netrig.measure import Load, Measurer, TrialCounts
from netrig.measure.capture import CaptureMeasurer, CaptureProcess
from netrig.methodology.tester import CapOnly
from netrig.methods.throughput import ThroughputParams, ThroughputResult, measure_throughput
from netrig.model import FrameSize, LineRate, defaults, format_pps, parse_frame_sizes, rates
from netrig.results.typed import from_dict
from netrig.testbed import Testbed
from netrig.testbed.options import CAPTURE_METHODS
from netrig.trial import Port

SCHEMA = "netrig.capture-bench/2"
#: The result document in the output directory.
RESULT_FILE = "capture-bench.json"
#: Nominal veth speed the percentages of the throughput search are expressed against.
NOMINAL_BPS = 10e9
#: The tester's ceiling is searched from here down (frames/s).
CEILING_START_PPS = 3e6
#: TX-only trials the ceiling search may take.
CEILING_TRIES = 12


@dataclass(frozen=True)
class BenchParams:
    """``loads_pct``: intended loads of the iperf-like curve, % of the tester's limit (its proven
    ceiling / 1.1); ``resolution_pct``: the throughput search's resolution, % of the limit."""

    methods: tuple[str, ...] = CAPTURE_METHODS
    sizes: tuple[FrameSize, ...] = parse_frame_sizes("64,512,1518,imix")
    batch: int = 10
    duration_s: float = 1.0
    drain_s: float = 0.3
    resolution_pct: float = 3.0
    loads_pct: tuple[float, ...] = (25.0, 50.0, 75.0, 100.0)
    capture_cpu: int = 0
    io: str = "af_packet"

    def __post_init__(self) -> None:
        if not self.methods:
            raise ConfigError("--capture-methods", "give at least one capture method")
        for m in self.methods:
            if m not in CAPTURE_METHODS:
                raise ConfigError("--capture-methods", f"{m!r} is not a capture method: use "
                                                       f"{', '.join(CAPTURE_METHODS)}")
        if len(set(self.methods)) != len(self.methods):
            raise ConfigError("--capture-methods", "lists a method more than once")
        object.__setattr__(self, "sizes", parse_frame_sizes(self.sizes, "--frame-sizes"))
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or not 1 <= self.batch <= 1024:
            raise ConfigError("--batch", f"{self.batch!r}: must be an integer from 1 to 1024")
        if not 0.05 <= self.duration_s <= 60:
            raise ConfigError("--duration", f"{self.duration_s:g}: must be 0.05 to 60 seconds")
        if not 0 <= self.drain_s <= 10:
            raise ConfigError("--drain", f"{self.drain_s:g}: must be 0 to 10 seconds")
        if not 0.1 <= self.resolution_pct <= 50:
            raise ConfigError("--resolution", f"{self.resolution_pct:g}: must be 0.1 to 50 (% of the tester's limit)")
        if not self.loads_pct or any(not 0 < x <= 100 for x in self.loads_pct):
            raise ConfigError("--loads", "give loads in % of the tester's limit, each above 0 and at most 100")

    def frames(self) -> tuple[FrameSize, ...]:
        return self.sizes

    @property
    def sizes_text(self) -> str:
        """The frame sizes as they are written: ``64,512,1518,imix``."""
        return ",".join(str(f.label) for f in self.sizes)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "sizes": self.sizes_text}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchParams:
        """Its ``to_dict()`` read back: the frame sizes as written (``64,512,1518,imix``), parsed once here."""
        if not isinstance(d, Mapping):
            raise ResultError(f"capture-bench params: expected an object, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        kw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k in known}
        return cls(**kw)


@dataclass(frozen=True)
class CurvePoint:
    """One load of the iperf-like curve: the intended rate (``rate_pps``, ``load_pct`` % of the
    tester's limit), the achieved TX rate, what the capture took of what was sent, and its CPU."""

    load_pct: float
    rate_pps: float
    achieved_pps: float
    frames_sent: int
    frames_captured: int
    captured_pct: float | None
    valid: bool
    invalid_reason: str | None = None
    drops: int | None = None
    queue_drops: int | None = None
    foreign: int = 0
    stray: int = 0
    cpu_s: float | None = None
    cpu_pct: float | None = None

    @classmethod
    def of(cls, load_pct: float, rate_pps: float, c: TrialCounts) -> CurvePoint:
        cap = from_dict(_Raw, c.raw).capture or CaptureCounts()
        wall = cap.wall_s or 0.0
        return cls(load_pct, rate_pps, c.achieved_pps, c.frames_sent, c.frames_received,
                   100.0 * c.frames_received / c.frames_sent if c.frames_sent else None, c.valid, c.invalid_reason,
                   cap.drops, cap.queue_drops, c.foreign, c.stray, cap.cpu_s,
                   100.0 * cap.cpu_s / wall if wall and cap.cpu_s is not None else None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CaptureCounts:
    """What the capture counted of one trial (``TrialCounts.raw``'s ``capture``, written by
    ``netrig.measure.capture.CaptureMeasurer``)."""

    drops: int | None = None
    queue_drops: int | None = None
    cpu_s: float | None = None
    wall_s: float | None = None


@dataclass(frozen=True)
class _Raw:
    capture: CaptureCounts | None = None


@dataclass(frozen=True)
class BenchEntry:
    """One capture method at one frame size: the tester's ceiling into its host and the limit
    (ceiling / 1.1), the RFC 2544 throughput up to the limit, and the iperf-like curve."""

    method: str
    frame_size: int | str
    mean_frame_size: float
    ceiling_pps: float
    limit_pps: float
    throughput: ThroughputResult
    throughput_pct_of_limit: float
    #: Nothing failed up to the limit (or the tester's own shortfall): the throughput is a lower bound.
    tester_limited: bool
    curve: tuple[CurvePoint, ...]
    notes: str = ""

    def point(self, load_pct: float) -> CurvePoint | None:
        return next((p for p in self.curve if p.load_pct == load_pct), None)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "frame_size": self.frame_size, "mean_frame_size": self.mean_frame_size,
                "ceiling_pps": self.ceiling_pps, "limit_pps": self.limit_pps, "throughput": self.throughput.to_dict(),
                "throughput_pct_of_limit": self.throughput_pct_of_limit, "tester_limited": self.tester_limited,
                "curve": [p.to_dict() for p in self.curve], "notes": self.notes}


@dataclass
class BenchDocument:
    """``capture-bench.json`` (docs/result-format.md, *The capture benchmark's result*): built as the
    benchmark runs, rewritten after every method × frame size, read back with :meth:`from_dict`."""

    params: BenchParams
    started_at: str
    #: Per method and frame size: the tester's proven TX-only rate into that method's host (``None``:
    #: it kept no rate).
    ceilings: dict[str, dict[str, float | None]] = field(default_factory=dict)
    results: list[BenchEntry] = field(default_factory=list)
    complete: bool = False
    errors: list[str] = field(default_factory=list)
    interrupted_reason: str | None = None
    wall_s: float = 0.0

    @property
    def sizes(self) -> list[int | str]:
        """The frame sizes measured, in order."""
        return list(dict.fromkeys(r.frame_size for r in self.results))

    def entry(self, method: str, frame_size: int | str) -> BenchEntry | None:
        return next((r for r in self.results if r.method == method and r.frame_size == frame_size), None)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"schema": SCHEMA, "kind": "capture-bench", "params": self.params.to_dict(),
                             "started_at": self.started_at, "ceilings": self.ceilings,
                             "results": [r.to_dict() for r in self.results], "complete": self.complete}
        if self.errors:
            d["errors"] = self.errors
        if self.interrupted_reason is not None:
            d["interrupted_reason"] = self.interrupted_reason
        d["wall_s"] = self.wall_s
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchDocument:
        """A ``capture-bench.json`` document (this schema) as its type; ``ResultError`` naming what
        is wrong."""
        head = from_dict(_Head, d, partial=True)
        if head.schema != SCHEMA:
            raise ResultError(f"capture-bench: schema {head.schema!r} is not {SCHEMA!r} (a newer or older netrig "
                              "wrote it)")
        doc = from_dict(_Stored, d)
        line = LineRate(NOMINAL_BPS, "nominal", "veth")
        results = []
        for r in doc.results:
            stored = from_dict(_StoredEntry, r)
            tp = from_dict(ThroughputResult, stored.throughput, frame=FrameSize.parse(stored.frame_size),
                           line_rate=line)
            results.append(from_dict(BenchEntry, r, throughput=tp))
        return cls(doc.params, doc.started_at, doc.ceilings, results, doc.complete, list(doc.errors),
                   doc.interrupted_reason, doc.wall_s)


@dataclass(frozen=True)
class _Head:
    schema: str | None = None


@dataclass(frozen=True)
class _Stored:
    """The document as stored, its entries still to be typed (each needs its frame size and the line
    rate to read its throughput)."""

    params: BenchParams
    started_at: str
    results: tuple[dict[str, Any], ...]
    ceilings: dict[str, dict[str, float | None]] = field(default_factory=dict)
    complete: bool = False
    errors: tuple[str, ...] = ()
    interrupted_reason: str | None = None
    wall_s: float = 0.0


@dataclass(frozen=True)
class _StoredEntry:
    frame_size: int | str
    throughput: dict[str, Any]


def load_bench(out_dir: str) -> BenchDocument:
    """The benchmark's result in ``out_dir`` (``capture-bench.json``)."""
    path = os.path.join(out_dir, RESULT_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise ResultError(f"{path}: cannot read ({e})") from None
    if not isinstance(data, dict):
        raise ResultError(f"{path}: not a capture-bench result (not an object)")
    try:
        return BenchDocument.from_dict(data)
    except (ResultError, ConfigError, TypeError, ValueError, KeyError) as e:
        raise ResultError(f"{path}: {e}") from None


class _Log:
    """Every trial on disk (fsync'd) before the next starts."""

    def __init__(self, path: str):
        self.f = open(path, "a")  # noqa: SIM115 (closed by close(), in run_bench's finally)

    def record(self, **rec: Any) -> None:
        self.f.write(json.dumps(rec) + "\n")
        self.f.flush()
        os.fsync(self.f.fileno())

    def close(self) -> None:
        self.f.close()


class _Recording:
    def __init__(self, inner: CaptureMeasurer, log: _Log, context: dict[str, Any]):
        self.inner, self.log, self.context = inner, log, context

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        c = self.inner.measure(load, duration_s)
        self.log.record(**self.context, rate_pps=load.rate_pps, duration_s=duration_s, counts=c.to_dict())
        return c


def tester_ceiling(m: Any, frame: FrameSize, duration_s: float, start_pps: float = CEILING_START_PPS) -> float:
    """The highest rate the tester sends at (TX-only trials, valid: the rate kept, nothing stretched
    beyond the tolerance): from ``start_pps`` down, each next try 95 % of what the failed one
    reached (its achieved rate over its sending window), at most 90 % of the last try."""
    rate = start_pps
    for _ in range(CEILING_TRIES):
        c = m.measure(Load(rate, frame), duration_s)
        if c.valid:
            return rate
        rate = min(rate * 0.9, max(c.achieved_pps * 0.95, rate * 0.5))
    raise TestbedError(f"frame size {frame.label}: the tester kept no rate down to {rate:,.0f} fps "
                       f"({CEILING_TRIES} TX-only trials); is the machine overloaded?")


@dataclass(frozen=True)
class _Stats:
    """The capture's counters file, for what it opened (library version, XDP mode)."""

    notes: str = ""


def run_bench(p: BenchParams, out_dir: str, notify: Callable[[str], None] = lambda s: None) -> BenchDocument:
    """Run the benchmark into ``out_dir`` (created); return the result document (also on disk)."""
    os.makedirs(out_dir, exist_ok=True)
    doc = BenchDocument(p, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    log = _Log(os.path.join(out_dir, "trials.ndjson"))
    t0 = time.monotonic()
    try:
        for method in p.methods:
            with Testbed.create("capture", capture_method=method, capture_batch=p.batch,
                                dut_cpus=str(p.capture_cpu)) as tb:
                info = tb.state.capture
                assert info is not None  # the capture topology records its capture process
                proc = CaptureProcess(info.pid, info.stats)
                tx_port = tb.port("tx")
                tx = Port(tx_port.ifname, netns=tx_port.netns, io=p.io)
                template = {**tb.stream_defaults("tx", "tx"), "dst_mac": tx_port.peer_mac, "dst_ip": "198.18.0.3"}
                for frame in p.frames():
                    entry = _measure_size(p, doc, method, frame, CaptureBed(tx, template, proc, log), notify)
                    if entry is not None:
                        doc.results.append(entry)
                        _save(doc, out_dir, t0)
            with contextlib.suppress(OSError):  # the capture's counters file goes with its test bed
                os.remove(info.stats)
        doc.complete = True
    except (*INTERRUPTS, InterruptedTrial) as e:  # what finished stays in the document
        doc.interrupted_reason = interrupt_reason(e)
        raise
    finally:
        log.close()
        _save(doc, out_dir, t0)
    return doc


@dataclass(frozen=True)
class CaptureBed:
    """One method's capture test bed as the trials use it: the tester's port and stream template,
    the capture process, the trial log."""

    tx: Port
    template: dict[str, Any]
    proc: CaptureProcess
    log: _Log


def _measure_size(p: BenchParams, doc: BenchDocument, method: str, frame: FrameSize, bed: CaptureBed,
                  notify: Callable[[str], None]) -> BenchEntry | None:
    """One method at one frame size: the tester's ceiling (the capture stopped), the throughput up to
    its limit, the curve; ``None`` when the tester kept no rate (said in ``doc.errors``)."""
    tx, template, proc, log = bed.tx, bed.template, bed.proc, bed.log
    label = str(frame.label)
    ceilings = doc.ceilings.setdefault(method, {})
    # Start above what an earlier method's host took at this size, not at 3 Mfps.
    known = [c for m in doc.ceilings.values() if (c := m.get(label))]
    start = min(CEILING_START_PPS, 1.5 * max(known)) if known else CEILING_START_PPS
    notify(f"{method}, {label}: the tester's ceiling (TX-only, the capture stopped)")
    alone = _Recording(CaptureMeasurer(tx, template, proc, drain_s=0.05, tx_only=True), log,
                       {"phase": "ceiling", "method": method, "frame_size": label})
    try:
        with proc.paused():
            ceiling = ceilings[label] = tester_ceiling(alone, frame, p.duration_s, start)
    except TestbedError as e:  # the tester, not the capture: say so, go on
        ceilings[label] = None
        doc.errors.append(f"{method}: {e}")
        notify(f"{method}, {label}: skipped: {e}")
        return None
    limit = ceiling / defaults.SELFTEST_FACTOR
    line = LineRate(NOMINAL_BPS, "nominal", "veth")
    m = _Recording(CaptureMeasurer(tx, template, proc, drain_s=p.drain_s), log,
                   {"phase": "throughput", "method": method, "frame_size": label})
    top_pct = 100 * limit / line.fps(frame)
    tp = measure_throughput(cast(Measurer, m), frame, line, ThroughputParams(
        duration_s=p.duration_s, resolution_pct=p.resolution_pct * top_pct / 100,
        initial_rate_pct=top_pct, max_rate_pct=top_pct), CapOnly(limit))
    m.context = {"phase": "iperf", "method": method, "frame_size": label}
    curve = tuple(CurvePoint.of(load, limit * load / 100, m.measure(Load(limit * load / 100, frame), p.duration_s))
                  for load in p.loads_pct)
    entry = BenchEntry(method, frame.label, frame.mean_size, ceiling, limit, tp, 100 * tp.rate_pps / limit,
                       tp.found and (tp.tester_limited or tp.upper_pps is None), curve, _notes(proc))
    top = entry.point(100.0)
    notify(f"{method:10s} {label:>5}: throughput {'≥ ' if entry.tester_limited else ''}{format_pps(tp.rate_pps)} "
           f"{rates.INTENDED} ({entry.throughput_pct_of_limit:.0f}% of the tester's limit, {format_pps(limit)}); "
           f"captured at 100%: {_fmt(top.captured_pct if top else None)} %")
    return entry


def _notes(proc: CaptureProcess) -> str:
    stats = proc._read()
    return stats.notes if stats is not None else ""


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _save(doc: BenchDocument, out_dir: str, t0: float) -> None:
    doc.wall_s = round(time.monotonic() - t0, 1)
    tmp = os.path.join(out_dir, RESULT_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(doc.to_dict(), f, indent=1)
    os.replace(tmp, os.path.join(out_dir, RESULT_FILE))
    write_report(doc, out_dir)


# --------------------------------------------------------------------------------------------- #
# The report

def table_rows(doc: BenchDocument) -> tuple[list[str], list[list[str]]]:
    """The throughput (intended frames/s, and % of the tester's limit) per method (rows) and size
    (columns)."""
    sizes = doc.sizes
    head = [f"method ({rates.INTENDED} fps)", *[str(s) for s in sizes]]
    rows = []
    for m in doc.params.methods:
        row = [m]
        for s in sizes:
            e = doc.entry(m, s)
            if e is None:
                row.append("-")
                continue
            lim = "≥ " if e.tester_limited else ""
            row.append(f"{lim}{format_pps(e.throughput.rate_pps)} ({e.throughput_pct_of_limit:.0f}%)")
        rows.append(row)
    return head, rows


def curve_rows(doc: BenchDocument) -> tuple[list[str], list[list[str]]]:
    loads = list(doc.params.loads_pct)
    head = ["method", "size", *[f"{x:g}%" for x in loads], "CPU at 100%"]
    rows = []
    for e in doc.results:
        cells = []
        for x in loads:
            pt = e.point(x)
            cells.append("-" if pt is None else (_fmt(pt.captured_pct) + ("" if pt.valid else " (inv)")))
        top = e.point(max(loads))
        rows.append([e.method, str(e.frame_size), *cells, _fmt(top.cpu_pct if top else None) + " %"])
    return head, rows


LIMIT_NOTE = ("The tester's limit is its ceiling into each method's capture host, proven with the capture "
              "application stopped, divided by 1.1 (RFC 8219): '≥' marks a method that captured every frame up "
              "to it (tester-limited).")
CURVE_NOTE = ("(inv): the tester could not keep the load (it fell short or stalled; the capture's CPU is another "
              "one): what it captured is shown, but it is not the capture's result.")


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def plots(doc: BenchDocument) -> dict[str, str]:
    """``{"curve": svg, "throughput": svg}`` (empty when nothing was measured)."""
    from netrig.view.plotkit import figure_svg, run_colour, subplots

    if not doc.results:
        return {}
    methods, sizes = list(doc.params.methods), doc.sizes
    out = {}
    fig, axes = subplots(1, len(sizes), w=3.4 * len(sizes) + 1, h=3.4, sharey=True)
    for j, s in enumerate(sizes):
        ax = axes[0][j]
        for i, m in enumerate(methods):
            e = doc.entry(m, s)
            if e is None:
                continue
            pts = [pt for pt in e.curve if pt.captured_pct is not None]
            ax.plot([pt.load_pct for pt in pts], [pt.captured_pct for pt in pts], marker="o", ms=3,
                    color=run_colour(i), label=m)
            bad = [pt for pt in pts if not pt.valid]
            if bad:
                ax.plot([pt.load_pct for pt in bad], [pt.captured_pct for pt in bad], "x", color="k")
        ax.set_title(f"{s} B" if isinstance(s, int) else str(s))
        ax.set_xlabel("intended load (% of the tester's limit)")
        ax.set_ylim(0, 105)
    axes[0][0].set_ylabel("captured (%)")
    axes[0][-1].legend(fontsize=7, loc="lower left")
    out["curve"] = figure_svg(fig, "cbc")
    fig, axes = subplots(1, 1, w=7.0, h=3.6)
    ax = axes[0][0]
    xs = list(range(len(sizes)))
    for i, m in enumerate(methods):
        entries = [doc.entry(m, s) for s in sizes]
        ax.plot(xs, [e.throughput.rate_pps if e else float("nan") for e in entries], marker="o", color=run_colour(i),
                label=m)
        # what the tester proved into each method's host, / 1.1
        ax.plot(xs, [e.limit_pps if e else float("nan") for e in entries], ls=":", lw=0.8, color=run_colour(i))
    ax.set_xticks(xs)
    ax.set_xticklabels([str(s) for s in sizes])
    ax.set_xlabel("frame size (bytes)")
    ax.set_ylabel("RFC 2544 throughput (intended frames/s)")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    out["throughput"] = figure_svg(fig, "cbt")
    return out


def write_report(doc: BenchDocument, out_dir: str) -> None:
    """``report.html`` (tables, inline SVG plots) and ``report.md`` next to the result."""
    from netrig.view.html import esc

    th, tr = table_rows(doc)
    ch, cr = curve_rows(doc)
    p = doc.params
    intro = (f"Capture methods {', '.join(p.methods)}; sizes {p.sizes}; trials {p.duration_s} s, drain "
             f"{p.drain_s} s; throughput resolution {p.resolution_pct} % of the tester's limit; wall time "
             f"{doc.wall_s} s{'' if doc.complete else ' (incomplete)'}.")
    md = ["# Capture-method benchmark", "", intro, "",
          "## RFC 2544 throughput (intended frames/s, % of the tester's limit)", "", LIMIT_NOTE, "",
          _md_table(th, tr), "", "## Iperf-like: captured % by intended load (% of the tester's limit)", "",
          _md_table(ch, cr), "", CURVE_NOTE, ""]
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(md))

    def html_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
        h = "".join(f"<th>{esc(x)}</th>" for x in head)
        b = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
        return f"<table><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>"

    figs = plots(doc)
    body = [f"<h1>Capture-method benchmark</h1><p>{esc(intro)}</p>",
            "<h2>RFC 2544 throughput</h2>", f"<p>{esc(LIMIT_NOTE)}</p>", html_table(th, tr),
            f"<figure class='plot'>{figs.get('throughput', '')}<figcaption>Throughput vs frame size per method "
            "(dotted: the tester's limit into that method's host)</figcaption></figure>",
            "<h2>Iperf-like: captured % vs intended load</h2>", html_table(ch, cr), f"<p>{esc(CURVE_NOTE)}</p>",
            f"<figure class='plot'>{figs.get('curve', '')}<figcaption>Captured % vs intended load per method "
            "(x: invalid trial, the tester's)</figcaption></figure>"]
    with open(os.path.join(out_dir, "report.html"), "w") as f:
        f.write("<!doctype html><html><head><meta charset='utf-8'><title>netrig capture-bench</title>"
                "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
                "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}</style></head><body>"
                + "".join(body) + "</body></html>\n")
