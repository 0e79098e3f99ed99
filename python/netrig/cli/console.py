"""Terminal output for runs: a live progress display and the final summary tables (rich), one per
method as the method lays its rows out (``Method.console_rows``). A trial that is invalid, or whose
receiver saw frames that were not its own (stray, forged), gets a line of its own as it ends."""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rich.cells import cell_len
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from netrig.cli.common import console as plain_console
from netrig.errors import INTERRUPTS, InterruptedTrial, NetrigError, interrupt_reason, interrupt_status
from netrig.measure import StackRequest, TrialCounts
from netrig.measure.rr import RrParams
from netrig.measure.tcp import TcpParams
from netrig.methodology.method import STACK_FRAME
from netrig.methodology.selftest import stored_ceilings
from netrig.methods import REGISTRY
from netrig.model import format_bps, format_ns, format_pps, rates
from netrig.report.tables import answers_table, not_counted
from netrig.results.typed import from_dict
from netrig.run import consistency
from netrig.run.config import TestConfig
from netrig.run.progress import (
    CpuPer,
    MethodStart,
    Notice,
    ProgressEvent,
    RunStart,
    StackOutcome,
    TrialEnd,
    TrialInfo,
    TrialStart,
)
from netrig.run.records import FrameLabel
from netrig.run.runner import NO_THROUGHPUT, QUIET_FLAGS, Runner
from netrig.telemetry.telemetry import Telemetry, tee
from netrig.view import fmt
from netrig.view.frame_results import line_rate_of, read_summary
from netrig.view.run_view import RunView
from netrig.view.stalls import stall_note


def trial_note(c: TrialCounts) -> str:
    """What the console says about a finished trial: why it is invalid, and the frames its receiver
    did not count (foreign, stray, forged) when some were stray or forged; empty when nothing to say."""
    parts = [] if c.valid else [f"invalid: {c.invalid_reason or 'tester problem'}"]
    if c.stray or c.forged:
        parts.append(f"not counted: {not_counted(c)}")
    return "; ".join(parts)


def _dur(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class LiveProgress:
    """A progress function (:data:`~netrig.run.progress.ProgressFn`) that shows: method, frame size,
    intended load, trial n, elapsed and an estimate of the time remaining. Use as a context manager."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.live = Live(Text("starting…"), console=self.console, refresh_per_second=4, transient=True)
        self.t0 = time.monotonic()
        self.total = 0
        self.done = 0
        self.replayed = 0
        self.measured_s = 0.0
        self.measured_n = 0
        self.line = ""
        self._trial_t0: float | None = None
        self.out_dir: str | None = None

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.live.__exit__(*exc)

    def _remaining(self) -> float | None:
        if not self.measured_n or not self.total:
            return None
        left = max(0, self.total - self.done)
        return left * self.measured_s / self.measured_n

    def _render(self, status: str) -> None:
        rem = self._remaining()
        txt = Text.assemble(
            (f"{status} ", "bold cyan"), self.line,
            f"  trial {self.done + 1}/~{max(self.total, self.done + 1)}",
            f"  elapsed {_dur(time.monotonic() - self.t0)}",
            f"  remaining ~{_dur(rem)}" if rem is not None else "",
            f"  ({self.replayed} replayed)" if self.replayed else "",
        )
        self.live.update(txt)

    def __call__(self, event: ProgressEvent) -> None:
        match event:
            case RunStart():
                self.total, self.out_dir = event.total_trials, event.out_dir
                if event.line_rate is not None:
                    self.console.print(f"line rate: {event.line_rate.label}")
            case MethodStart():
                self.console.print(f"[bold]{event.label}[/bold]")
            case TrialStart():
                self.line = f"{event.trial.label} | {trial_load(event.trial)} | rep {event.trial.repetition + 1}"
                self._trial_t0 = time.monotonic()
                self._render("running")
            case TrialEnd():
                self._trial_end(event)
            case Notice():
                self.console.print(f"[yellow]note[/yellow]: {event.message}", soft_wrap=True)

    def _trial_end(self, event: TrialEnd) -> None:
        if event.counts is not None and not event.replayed and (note := trial_note(event.counts)):
            self.console.print(f"  trial {self.done + 1} ({self.line}): {note}", markup=False, highlight=False)
        self.done += 1
        if event.replayed:
            self.replayed += 1
        elif self._trial_t0 is not None:
            self.measured_s += time.monotonic() - self._trial_t0
            self.measured_n += 1
        self.total = max(self.total, self.done)
        self._render("done")


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class PlainProgress:
    """A progress function for logs (no terminal, e.g. CI): one timestamped line per finished
    trial and per method, notices and the run's start, on ``stream``."""

    def __init__(self, stream: IO[str] | None = None):
        self.stream = stream or sys.stderr
        self.total = 0
        self.done = 0
        self.t0 = time.monotonic()

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def _line(self, text: str) -> None:
        print(f"{_stamp()} {text}", file=self.stream, flush=True)

    def __call__(self, event: ProgressEvent) -> None:
        match event:
            case RunStart():
                self.total = event.total_trials
                lr = event.line_rate
                self._line(f"run: ~{self.total} trials, output {event.out_dir}"
                           + (f", line rate {lr.label}" if lr is not None else ""))
            case MethodStart():
                self._line(f"method: {event.label}")
            case Notice():
                self._line(f"note: {event.message}")
            case TrialEnd():
                self.done += 1
                self.total = max(self.total, self.done)
                t = event.trial
                self._line(f"trial {self.done}/~{self.total} {t.label}{_size(t.frame_size)} rep {t.repetition + 1}: "
                           f"{trial_outcome(event)}, elapsed {_dur(time.monotonic() - self.t0)}")


def _size(frame_size: FrameLabel) -> str:
    """`` 64 B``, `` imix``; nothing for a stack trial's frame (its load says what it moved)."""
    if frame_size == STACK_FRAME.label:
        return ""
    return f" {frame_size}{' B' if isinstance(frame_size, int) else ''}"


def trial_load(t: TrialInfo) -> str:
    """What a trial asks, in a few words: ``64 B | intended 100 kfps (1.00 %) burst 500``, or a
    stack trial's request (:func:`stack_load`)."""
    if t.stack is not None:
        return stack_load(t.stack)
    ld = t.load
    burst = f" burst {ld.burst_frames}" if ld.burst_frames else ""
    return (f"{_size(t.frame_size).strip()} | {rates.INTENDED} {format_pps(ld.rate_pps or 0)} "
            f"({ld.pct_line_rate or 0:.2f} %){burst}")


def trial_outcome(event: TrialEnd) -> str:
    """A finished trial in one line's words: its intended and achieved (TX) rates, frames sent and
    received, loss and state; a stack trial's request and outcome."""
    t = event.trial
    state = "replayed" if event.replayed else ""
    if t.stack is not None or event.counts is None:
        what = stack_outcome(event.outcome) if event.outcome is not None else "no result"
        return f"{trial_load(t)}: {what}" + (f" [{state}]" if state else "")
    c = event.counts
    state = state or ("valid" if c.valid else f"INVALID: {c.invalid_reason}")
    stalls = stall_note(c)
    return (f"{rates.INTENDED} {format_pps(t.load.rate_pps or 0)} ({t.load.pct_line_rate or 0:.2f} %), "
            f"{rates.ACHIEVED} {format_pps(c.achieved_pps)}, sent {c.frames_sent:,}, "
            f"received {c.frames_received:,}, loss {100 * c.loss_ratio:.4f} % [{state}]"
            + (f"; {stalls}" if stalls else ""))


def stack_load(req: StackRequest) -> str:
    """``tcp IPv4 5 streams forward, 5 s`` for a stack trial's request."""
    p = req.params
    if isinstance(p, TcpParams):
        what = f"{p.streams} streams {p.direction}"
    elif isinstance(p, RrParams):
        what = f"{p.protocol} {p.size_bytes} B"
    else:
        what = type(p).__name__
    return f"{req.kind} IPv{req.family} {what}, {req.duration_s:g} s"


def stack_outcome(o: StackOutcome) -> str:
    """A stack trial's result in a few words: goodput or transactions per second, and CPU."""
    parts = []
    if o.goodput_bps is not None:
        parts.append(f"goodput {o.goodput_bps / 1e9:.3g} Gbit/s")
    if o.tps is not None:
        parts.append(f"{o.tps:,.0f} transactions/s")
    per = o.cpu_per or CpuPer()
    if per.busy_s_per_gbit is not None:
        parts.append(f"{per.busy_s_per_gbit:.3g} CPU-s/Gbit")
    if per.busy_s_per_mtrans is not None:
        parts.append(f"{per.busy_s_per_mtrans:.3g} CPU-s per M transactions")
    return ", ".join(parts) or "no result"


def progress_display(console: Console) -> LiveProgress | PlainProgress:
    """A live display on a terminal, timestamped lines otherwise (CI logs)."""
    return LiveProgress(console) if console.is_terminal else PlainProgress(console.file)


def _fmt_ns(v: float | None) -> str:
    return "-" if v is None else format_ns(v)


#: Piped (no terminal), a summary table is at most this wide: a long cell (flags) wraps at its words.
TABLE_WIDTH = 100


@dataclass(frozen=True)
class VerdictRow:
    """One pass/fail check of a result (``verdicts[]``)."""

    check: str
    frame_size: int | str
    threshold: float
    value: float | None
    passed: bool


@dataclass(frozen=True)
class _Flag:
    code: str
    message: str = ""


@dataclass(frozen=True)
class _Flagged:
    """A ``summary[].results[]`` entry's flags, in order."""

    flags: tuple[_Flag, ...] = ()


@dataclass(frozen=True)
class _SelftestHead:
    """What the self-test table's title says (``selftest``)."""

    testbed: str = "?"
    factor: float = 1.1
    passed: bool = False


@dataclass(frozen=True)
class Shown:
    """The parts of a result document the console shows, read once (``from_dict``)."""

    summary: tuple[dict[str, Any], ...] = ()
    selftest: _SelftestHead | None = None
    verdicts: tuple[VerdictRow, ...] = ()

    @classmethod
    def of(cls, doc: dict) -> Shown:
        return from_dict(cls, doc, partial=True)


#: A cell at most this wide is a value (a rate, a time) and never wraps; a longer one is words.
VALUE_CELL = 24


def column_widths(heads: Sequence[str], rows: Sequence[Sequence[str]], room: int | None) -> list[int]:
    """Widths for a table's columns in ``room`` characters (``None``: as wide as they need): a value
    never wraps, a header or a long text cell wraps at its words only, and the room left over goes to
    the columns that need the least of it to keep their header on one line."""
    def word(text: str) -> int:
        return max(map(cell_len, text.split()), default=0)

    def least(cell: str) -> int:
        return cell_len(cell) if cell_len(cell) <= VALUE_CELL else word(cell)

    cols = range(len(heads))
    natural = [max([cell_len(heads[i]), *(cell_len(r[i]) for r in rows)]) for i in cols]
    if room is None or sum(natural) <= room:
        return natural
    widths = [max([word(heads[i]), *(least(r[i]) for r in rows)]) for i in cols]
    spare = room - sum(widths)
    for i in sorted(cols, key=lambda i: natural[i] - widths[i]):
        grow = max(0, min(natural[i] - widths[i], spare))
        widths[i] += grow
        spare -= grow
    return widths


@dataclass(frozen=True)
class SummaryTable:
    """One table of the summary: its title, columns, rows, and the lines said below it (each frame
    size's flags)."""

    title: str
    heads: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()

    def table(self, width: int | None = None) -> Table:
        """The table in at most ``width`` characters when its values fit (``None``: as wide as it
        needs); its title is the caller's to print."""
        room = width - 3 * len(self.heads) - 1 if width is not None else None
        t = Table(title_justify="left")
        for head, w in zip(self.heads, column_widths(self.heads, self.rows, room)):
            t.add_column(head, width=w, overflow="fold")
        for r in self.rows:
            t.add_row(*r)
        return t


def summary_tables(doc: dict) -> list[SummaryTable]:
    """One table per method of a result document (methods this netrig does not know are left out);
    each frame size's flags (and what a method says with them) below its table."""
    tables = []
    label, line_rate = RunView(doc).line_rate_label, line_rate_of(doc)
    for s in read_summary(list(Shown.of(doc).summary)):
        if s.method not in REGISTRY:
            continue
        method = REGISTRY.get(s.method)
        rows: list[list[str]] = []
        unrun_notes = []
        for r in s.results:
            flagged = from_dict(_Flagged, r.stored, partial=True).flags
            codes = dict.fromkeys(f.code for f in flagged)
            flags = ", ".join(c for c in codes if c not in QUIET_FLAGS)
            unrun = next((f.message for f in flagged if f.code == NO_THROUGHPUT), None)
            if unrun is not None and not r.repetitions:  # the method never ran here: why, below its table
                rows.append([fmt.size(r.frame_size), fmt.not_measured("no throughput"),
                             *[fmt.DASH] * (len(method.console_columns) - 1), flags])
                unrun_notes.append(f"  {fmt.size(r.frame_size)}: {unrun}")
            else:
                rows.extend(method.console_rows(dict(r.stored), flags, line_rate))
        frame = ""
        notes = []
        for row in rows:
            frame = row[0] or frame  # a method's further rows of one frame size leave it blank
            if row[-1]:
                notes.append(f"  {frame} flags: {row[-1]}")
        tables.append(SummaryTable(f"{s.label}  (line rate {label})", ("frame", *method.console_columns),
                                   tuple(tuple(row[:-1]) for row in rows), (*notes, *unrun_notes)))
    return tables


def selftest_table(doc: dict) -> SummaryTable | None:
    """The self-test's ceilings per frame size (``None``: the run had no self-test)."""
    head = Shown.of(doc).selftest
    if head is None:
        return None
    run = RunView(doc)
    ceilings = stored_ceilings(run)
    share = any(c.tester_share_ns is not None for c in ceilings)
    rows = []
    for c in ceilings:
        l1, floor = run.bps(c.frame.label, c.proven_rate_pps), c.latency_floor
        rows.append((fmt.size(c.frame.label), format_pps(c.required_rate_pps),
                     fmt.not_measured(c.not_measured) if c.not_measured else
                     f"≥ {format_pps(c.proven_rate_pps)} (platform)" if c.platform else format_pps(c.proven_rate_pps),
                     format_bps(l1) if l1 is not None else "-", "yes" if c.passed else "no",
                     f"{_fmt_ns(floor.p50_ns)} / {_fmt_ns(floor.p99_ns)}" if floor else "-",
                     c.timestamp_source or "-", *([_fmt_ns(c.tester_share_ns)] if share else [])))
    return SummaryTable(f"RFC 8219 self-test on {head.testbed} ({head.factor}× reserve): "
                        f"{'passed' if head.passed else 'NOT passed'}",
                        ("frame", "required fps", "proven fps", "proven L1 bit/s", "passed", "latency floor p50 / p99",
                         "RX stamps", *(["tester on DUT CPU / frame"] if share else [])), tuple(rows),
                        tuple(f"  {fmt.size(c.frame.label)}: {c.platform}" for c in ceilings if c.platform))


def _print_table(console: Console, t: SummaryTable) -> None:
    """``t``: its title a line of its own, as wide as it needs (never wrapped), the table as wide as
    the terminal, or at most :data:`TABLE_WIDTH` without one, then its notes."""
    console.print(t.title, soft_wrap=True, markup=False)
    console.print(t.table(console.width if console.is_terminal else min(console.width, TABLE_WIDTH)))
    for line in t.notes:
        console.print(line, soft_wrap=True, markup=False)


def print_summary(doc: dict, console: Console | None = None) -> None:
    console = console or plain_console()
    st = selftest_table(doc)
    if st is not None:
        _print_table(console, st)
    for t in summary_tables(doc):
        _print_table(console, t)
    for v in Shown.of(doc).verdicts:
        console.print(f"{'PASS' if v.passed else 'FAIL'} {v.check} {v.frame_size}: {v.value} "
                      f"(threshold {v.threshold})")


def print_answers(docs: Sequence[dict], console: Console | None = None) -> None:
    """The answers to "how much does the DUT forward?" side by side at each frame size where
    several methods gave one and they differ or there are three or more (the demo's 64 B), each
    method's way of deciding and the measured cause below."""
    console = console or plain_console()
    for a in consistency.answers(docs):
        if len(a.rows) < 3 and a.agree:
            continue
        t = answers_table(a)
        notes = tuple(f"  {row[-1]}" for row in t.rows) + (f"  {a.cause[:1].upper()}{a.cause[1:]}.",)
        title = f"{len(a.rows)} answers at {fmt.size(a.frame_label)}: how much does the DUT forward?"
        _print_table(console, SummaryTable(title, tuple(t.header[:-1]), tuple(tuple(r[:-1]) for r in t.rows), notes))


def _kept(err: Console, runner: Runner, out: Path, what: str) -> None:
    """Say what an early end kept, and the one command that continues the run."""
    if not runner.document:
        if runner.resume:
            err.print(f"{what} before the first trial; the run in {out} is as it was", soft_wrap=True)
            err.print(f"continue with: netrig run --resume {out}", soft_wrap=True)
        else:
            err.print(f"{what} before the first trial; nothing to keep", soft_wrap=True)
        return
    where = (f'partial result in {out}/result.json ("complete": false)' if runner.write_error is None
             else f"result.json not written ({runner.write_error})")
    err.print(f"{what}: {runner.finished_trials} finished trial(s) kept in {out}/trials.ndjson; {where}",
              soft_wrap=True)
    err.print(f"continue with: netrig run --resume {out}", soft_wrap=True)


def run_with_console(config: TestConfig, out_dir: str | Path | None, *, resume: bool = False, command: str = "",
                     quiet: bool = False, telemetry: Telemetry | None = None, as_json: bool = False) -> int:
    """Run a config with the live display (timestamped lines without a terminal) and the summary
    tables (``as_json``: the result document on stdout instead, ``--json``); Ctrl-C, SIGTERM and
    errors keep what finished and say how to continue. With ``telemetry`` the run is exported there
    too (``--metrics-listen``).

    Returns the exit status: 0 done, 1 a pass/fail threshold failed, 2 an error after which the run
    resumes, 130 interrupted (Ctrl-C), 128 + n stopped by signal n (143: SIGTERM).
    """
    out = Path(out_dir or config.output.dir)
    err = plain_console(stderr=True)
    progress = progress_display(err) if not quiet else None
    runner = Runner(config, out, resume=resume, command=command,
                    progress=tee(progress, telemetry.runs() if telemetry is not None else None))
    try:
        if progress is not None:
            with progress:
                doc = runner.run()
        else:
            doc = runner.run()
    except (*INTERRUPTS, InterruptedTrial) as e:
        _kept(err, runner, out, f"[yellow]{interrupt_reason(e)}[/yellow]")
        return interrupt_status(e)
    except NetrigError as e:
        if not runner.resumable:
            raise
        err.print(f"netrig: error: {' '.join(str(e).split())}", markup=False, soft_wrap=True)
        _kept(err, runner, out, "stopped")
        return 2
    if as_json:
        print(json.dumps(doc, indent=1, default=str))
    else:
        out_console = plain_console()
        print_summary(doc, out_console)
        out_console.print(f"result: {out}/result.json")
    return 1 if any(not v.passed for v in Shown.of(doc).verdicts) else 0
