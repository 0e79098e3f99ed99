"""Terminal output for runs: a live progress display and the final summary tables (rich), one per
method as the method lays its rows out (``Method.console_rows``). A trial that is invalid, or whose
receiver saw frames that were not its own (stray, forged), gets a line of its own as it ends."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from netrig.cli.common import console as plain_console
from netrig.errors import INTERRUPTS, InterruptedTrial, NetrigError, interrupt_reason, interrupt_status
from netrig.measure.seam import STACK_KINDS, TrialCounts
from netrig.methods import REGISTRY
from netrig.model import format_bps, format_ns, format_pps
from netrig.report.tables import not_counted
from netrig.run.config import TestConfig
from netrig.run.runner import QUIET_FLAGS, Runner
from netrig.telemetry import Telemetry, tee
from netrig.view.frame_results import line_rate_of


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
    """``progress(event, info)`` callback that shows: method, frame size, load, trial n, elapsed and
    an estimate of the time remaining. Use as a context manager."""

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
        self.out_dir = None

    def __enter__(self):
        self.live.__enter__()
        return self

    def __exit__(self, *exc):
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

    def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event == "run_start":
            self.total = info.get("total_trials") or 0
            self.out_dir = info.get("out_dir")
            lr = info.get("line_rate")
            if lr is not None:
                self.console.print(f"line rate: {lr.label}")
        elif event == "method_start":
            self.console.print(f"[bold]{info['label']}[/bold]")
        elif event == "trial_start" and is_stack(info["load"]):
            self.line = f"{info['label']} | {stack_load(info['load'])} | rep {info['repetition'] + 1}"
            self._trial_t0 = time.monotonic()
            self._render("running")
        elif event == "trial_start":
            ld = info["load"]
            burst = f" burst {ld['burst_frames']}" if ld.get("burst_frames") else ""
            self.line = (f"{info['label']} | {info['frame_size']}{' B' if isinstance(info['frame_size'], int) else ''}"
                         f" | {format_pps(ld['rate_pps'])} ({ld['pct_line_rate']:.2f} %){burst}"
                         f" | rep {info['repetition'] + 1}")
            self._trial_t0 = time.monotonic()
            self._render("running")
        elif event == "trial_end":
            counts = info.get("counts")
            if isinstance(counts, TrialCounts) and not info.get("replayed") and (note := trial_note(counts)):
                self.console.print(f"  trial {self.done + 1} ({self.line}): {note}", markup=False, highlight=False)
            self.done += 1
            if info.get("replayed"):
                self.replayed += 1
            elif self._trial_t0 is not None:
                self.measured_s += time.monotonic() - self._trial_t0
                self.measured_n += 1
            self.total = max(self.total, self.done)
            self._render("done")
        elif event == "notice":
            self.console.print(f"[yellow]note[/yellow]: {info['message']}", soft_wrap=True)


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class PlainProgress:
    """``progress(event, info)`` for logs (no terminal, e.g. CI): one timestamped line per
    finished trial and per method, notices and the run's start, on ``stream``."""

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

    def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event == "run_start":
            self.total = info.get("total_trials") or 0
            lr = info.get("line_rate")
            self._line(f"run: ~{self.total} trials, output {info.get('out_dir')}"
                       + (f", line rate {lr.label}" if lr is not None else ""))
        elif event == "method_start":
            self._line(f"method: {info['label']}")
        elif event == "notice":
            self._line(f"note: {info['message']}")
        elif event == "trial_end":
            self.done += 1
            self.total = max(self.total, self.done)
            if is_stack(info["load"]):
                state = " [replayed]" if info.get("replayed") else ""
                self._line(f"trial {self.done}/~{self.total} {info['label']} rep {info['repetition'] + 1}: "
                           f"{stack_load(info['load'])}: {stack_outcome(info.get('result') or {})}{state}, "
                           f"elapsed {_dur(time.monotonic() - self.t0)}")
                return
            ld, c = info["load"], info["counts"]
            size = f"{info['frame_size']}{' B' if isinstance(info['frame_size'], int) else ''}"
            state = "replayed" if info.get("replayed") else ("valid" if c.valid else f"INVALID: {c.invalid_reason}")
            self._line(f"trial {self.done}/~{self.total} {info['label']} {size} rep {info['repetition'] + 1}: "
                       f"intended {format_pps(ld['rate_pps'])} ({ld['pct_line_rate']:.2f} %), "
                       f"achieved {format_pps(c.achieved_pps)}, sent {c.frames_sent:,}, "
                       f"received {c.frames_received:,}, loss {100 * c.loss_ratio:.4f} % "
                       f"[{state}], elapsed {_dur(time.monotonic() - self.t0)}")


def is_stack(load: dict) -> bool:
    """A stack trial's load (iperf3, sockperf: a tool's document, no frame counts); a stateful
    trial's load carries its request too, but it is counted like any other."""
    return (load.get("request") or {}).get("kind") in STACK_KINDS


def stack_load(load: dict) -> str:
    """``tcp 5 streams forward, 5 s`` for a stack trial's load."""
    req = load.get("request") or {}
    p = req.get("params") or {}
    what = f"{p.get('streams')} streams {p.get('direction')}" if req.get("kind") == "tcp" else \
        f"{p.get('protocol', '')} {p.get('size_bytes', '')} B".strip()
    return f"{req.get('kind')} IPv{req.get('family')} {what}, {load.get('duration_s', 0):g} s"


def stack_outcome(doc: dict) -> str:
    """A stack trial's result in a few words: goodput or transactions per second, and CPU."""
    parts = []
    if doc.get("goodput_bps") is not None:
        parts.append(f"goodput {doc['goodput_bps'] / 1e9:.3g} Gbit/s")
    if doc.get("tps") is not None:
        parts.append(f"{doc['tps']:,.0f} transactions/s")
    per = doc.get("cpu_per") or {}
    if per.get("busy_s_per_gbit") is not None:
        parts.append(f"{per['busy_s_per_gbit']:.3g} CPU-s/Gbit")
    if per.get("busy_s_per_mtrans") is not None:
        parts.append(f"{per['busy_s_per_mtrans']:.3g} CPU-s per M transactions")
    return ", ".join(parts) or "no result"


def progress_display(console: Console) -> LiveProgress | PlainProgress:
    """A live display on a terminal, timestamped lines otherwise (CI logs)."""
    return LiveProgress(console) if console.is_terminal else PlainProgress(console.file)


def _fmt_ns(v: float | None) -> str:
    return "-" if v is None else format_ns(v)


def summary_tables(doc: dict) -> list[Table]:
    """One table per method of a result document (methods this netrig does not know are left out)."""
    tables = []
    lr, line_rate = doc.get("line_rate") or {}, line_rate_of(doc)
    for s in doc.get("summary", []):
        if s.get("method") not in REGISTRY:
            continue
        method = REGISTRY.get(s["method"])
        t = Table(title=f"{s['label']}  (line rate {lr.get('label', '?')})", title_justify="left")
        for c in ("frame", *method.console_columns, "flags"):
            t.add_column(c, overflow="fold")
        for r in s["results"]:
            flags = ", ".join(f["code"] for f in r["flags"] if f["code"] not in QUIET_FLAGS)
            for row in method.console_rows(r, flags, line_rate):
                t.add_row(*row)
        tables.append(t)
    return tables


def _print_table(console: Console, table: Table) -> None:
    """``table``; without a terminal its title is a line of its own, as wide as it needs (rich wraps
    a title to the table's width)."""
    if not console.is_terminal and isinstance(table.title, str):
        console.print(table.title, soft_wrap=True)
        table.title = None
    console.print(table)


def print_summary(doc: dict, console: Console | None = None) -> None:
    console = console or plain_console()
    st = doc.get("selftest")
    if st:
        t = Table(title=f"RFC 8219 self-test on {st['testbed']} ({st['factor']}× reserve): "
                        f"{'passed' if st['passed'] else 'NOT passed'}", title_justify="left")
        share = any(c.get("tester_share_ns") is not None for c in st["ceilings"])
        for c in ("frame", "required fps", "proven fps", "proven L1 bit/s", "passed", "latency floor p50 / p99",
                  "RX stamps", *(["tester on DUT CPU / frame"] if share else [])):
            t.add_column(c)
        for c in st["ceilings"]:
            fs = f"{c['frame_size']} B" if isinstance(c["frame_size"], int) else str(c["frame_size"])
            floor = c.get("latency_floor") or {}
            t.add_row(fs, format_pps(c["required_rate_pps"]), format_pps(c["proven_rate_pps"]),
                      format_bps(c["proven"]["l1_bps"]) if c.get("proven") else "-", "yes" if c["passed"] else "no",
                      f"{_fmt_ns(floor.get('p50_ns'))} / {_fmt_ns(floor.get('p99_ns'))}" if floor else "-",
                      c.get("timestamp_source") or "-", *([_fmt_ns(c.get("tester_share_ns"))] if share else []))
        _print_table(console, t)
    for t in summary_tables(doc):
        _print_table(console, t)
    for v in doc.get("verdicts", []):
        console.print(f"{'PASS' if v['passed'] else 'FAIL'} {v['check']} {v['frame_size']}: {v['value']} "
                      f"(threshold {v['threshold']})")


def _kept(err: Console, runner: Runner, out: Path, what: str) -> None:
    """Say what an early end kept, and the one command that continues the run."""
    if not runner.document:
        if runner.resume:
            err.print(f"{what} before the first trial; the run in {out} is as it was", soft_wrap=True)
            err.print(f"continue with: netrig run --resume {out}", soft_wrap=True)
        else:
            err.print(f"{what} before the first trial; nothing to keep", soft_wrap=True)
        return
    n = len(runner.document.get("trials", []))
    where = (f'partial result in {out}/result.json ("complete": false)' if runner.write_error is None
             else f"result.json not written ({runner.write_error})")
    err.print(f"{what}: {n} finished trial(s) kept in {out}/trials.ndjson; {where}", soft_wrap=True)
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
    return 1 if any(not v["passed"] for v in doc.get("verdicts", [])) else 0
