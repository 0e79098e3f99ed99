"""RFC 2544 §26.6 reset: time from the last frame forwarded before a DUT reset (a user command) to
the first one after, at a constant rate — one use of events under load (``netrig.measure.events``):
the reset command is the trial's one event, and the reset time is the longest outage of any flow,
measured from the receiver's sequence numbers and transmit timestamps."""
from __future__ import annotations

import argparse
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from netrig.errors import ConfigError, MethodologyError
from netrig.measure import Load, Measurer
from netrig.measure.events import CommandRunner, Event, EventResult, EventRun
from netrig.methodology.method import Context, Method, Shortcut
from netrig.methodology.stats import check, median
from netrig.methodology.vocabulary import option
from netrig.methods.sections import OTHER_METHODS, RFC2544
from netrig.model import FrameSize, LineRate
from netrig.view import fmt
from netrig.view.frame_results import read_frame_results
from netrig.view.html import empty, esc, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.run_view import RunView
from netrig.view.table import Table


@dataclass(frozen=True)
class ResetParams:
    command: str = ""
    rate_pct: float = 100.0  # of throughput
    duration_s: float = 60.0
    reset_after_s: float | None = None  # default: min(10 s, duration_s / 2)
    command_timeout_s: float = 60.0
    throughput_from: int | None = None
    repetitions: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.command, str):
            raise ConfigError("command", f"must be a string (got {self.command!r})")
        try:
            shlex.split(self.command)
        except ValueError as e:
            raise ConfigError("command", f"{self.command!r}: {e} (it is a shell command line: balance its "
                                         "quotes)") from None
        check("rate_pct", self.rate_pct, lo=0, lo_open=True, hi=100)
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        if self.reset_after_s is None:
            object.__setattr__(self, "reset_after_s", min(10.0, self.duration_s / 2))
        check("reset_after_s", self.reset_after_s, lo=0, hi=self.duration_s, hi_open=True)
        check("command_timeout_s", self.command_timeout_s, lo=0, lo_open=True)
        if self.throughput_from is not None:
            check("throughput_from", self.throughput_from, lo=0, integer=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class ResetResult:
    """``reset_time_s``: the longest outage of any flow (``None``: some flow never received again);
    ``frames_lost``: all the trial lost; ``event``: the reset as an event (``EventResult.to_dict``:
    the command's run, per-flow outages, recovery time)."""

    rate_pps: float
    reset_time_s: float | None
    frames_lost: int
    event: EventResult | None = None

    @property
    def headline_pps(self) -> float | None:
        return None

    def stats_values(self) -> dict:
        return {"reset_time_s": self.reset_time_s}

    def to_dict(self) -> dict:
        return {"rate_pps": self.rate_pps, "reset_time_s": self.reset_time_s, "frames_lost": self.frames_lost,
                "recovery_s": self.event.recovery_s if self.event else None,
                "event": self.event.to_dict() if self.event else None}


def simulated_reset(event: Event) -> EventRun:
    """A simulated DUT resets itself: the event "runs" and succeeds at once."""
    now = time.monotonic_ns()
    return EventRun(event.command, event.at_s, started_ns=now, ended_ns=now, exit_status=0)


def measure_reset(measurer: Measurer, frame: FrameSize, line_rate: LineRate, throughput_pps: float,
                  params: ResetParams, run_event: Callable[[Event], EventRun] | None = None,
                  env: Mapping[str, str] | None = None) -> ResetResult:
    """One trial at ``rate_pct`` of throughput with the reset command as its event, run in the DUT's
    namespace (``env["NETRIG_DUT_NETNS"]``) with the test bed's parts in its environment. A command
    that fails or times out raises ``MethodologyError`` (no reset happened: nothing to measure)."""
    rate = max(throughput_pps * params.rate_pct / 100, 1.0)
    if run_event is None:
        if not params.command.strip():
            raise ConfigError("rfc2544_reset.command", "is required: the command that resets the DUT")
        env = dict(env or {})
        run_event = CommandRunner(env.get("NETRIG_DUT_NETNS"), env, params.command_timeout_s)
    after_s = params.reset_after_s if params.reset_after_s is not None else min(10.0, params.duration_s / 2)
    c = measurer.measure_events(Load(rate, frame), params.duration_s, [Event(params.command or "reset", after_s)],
                                run_event)
    ev: EventResult | None = c.events[0] if c.events else None
    if ev is not None and not ev.run.ok:
        raise MethodologyError(f"reset command {params.command!r} {ev.run.problem()}")
    if ev is None:  # a measurer without per-flow gaps: the loss at the achieved rate
        reset_s = c.frames_lost / c.achieved_pps if c.achieved_pps else None
    else:
        reset_s = ev.outage_s
    return ResetResult(rate, reset_s, c.frames_lost, ev)


# --------------------------------------------------------------------------------------------- #
# Reading it back from results

def table(r: RunView) -> Table:
    t = Table(["frame size", "reset time", "recovery", "frames lost", "rate"])
    for e in r.frame_results(METHOD_NAME, ResetResult):
        reps = e.repetitions
        t.add([fmt.size(e.frame_size), fmt.seconds(median(x.reset_time_s for x in reps)),
               fmt.seconds(median(x.event.recovery_s if x.event else None for x in reps)),
               fmt.count(median(x.frames_lost for x in reps)), fmt.fps(median(x.rate_pps for x in reps))])
    return t


def outage_table(r: RunView) -> Table:
    """Every reset (each repetition's event): the command's exit, and per flow the outage (last frame
    received before to first after, by transmit time) and the frames lost in it."""
    t = Table(["frame size", "rep", "command", "flow", "outage", "frames lost", "last before", "first after"])
    ms = lambda v: "never" if v is None else f"{v * 1000:.1f} ms"
    for e in r.frame_results(METHOD_NAME, ResetResult):
        size = fmt.size(e.frame_size)
        for k, rep in enumerate(e.repetitions):
            ev = rep.event
            status = "ok" if ev and ev.run.ok else f"exit {ev.run.exit_status if ev else None}"
            if not ev or not ev.flows:
                t.add([size, str(k + 1), status, "—", "no outage", "0", "—", "—"])
            for f in ev.flows if ev else ():
                t.add([size, str(k + 1), status, str(f.flow_id), ms(f.outage_s), fmt.count(f.frames_lost),
                       ms(f.before_s), ms(f.after_s)])
    t.caption = "times from the reset command's start; per flow from its sequence numbers and transmit timestamps"
    return t


# --------------------------------------------------------------------------------------------- #
# The method

METHOD_NAME = "rfc2544_reset"


class Reset(Method):
    name = METHOD_NAME
    label = "RFC 2544 §26.6 reset"
    short_name = "reset"
    params_type = ResetParams
    needs_throughput = True
    sections = (OTHER_METHODS,)
    console_columns = ("reset time (median)", "min–max")
    shortcut = Shortcut(RFC2544, "reset", default=False)
    cli_fields = {"command": "--reset-command"}

    def run(self, params: ResetParams, ctx: Context) -> ResetResult:
        run_event = simulated_reset if ctx.simulated_dut and not params.command else None  # a model resets itself
        return measure_reset(ctx.measurer, ctx.frame, ctx.line_rate, ctx.throughput_or(1.0), params,
                             run_event=run_event, env=ctx.command_env)

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        return [fmt.stat_seconds_row(read_frame_results(result, ResetResult), "reset_time_s", flags)]

    def html(self, run: RunView) -> dict[str, str]:
        outages = outage_table(run)
        return {OTHER_METHODS.id: "<h3>" + esc("Reset (RFC 2544 §26.6)") + "</h3>"
                + (table_html(table(run)) or empty(f"No {self.label} in this result."))
                + (("<h4>" + esc("Outage per flow") + "</h4>" + table_html(outages)) if outages else "")}

    def markdown(self, run: RunView) -> str:
        t = table(run)
        outages = outage_table(run)
        body = table_md(t) + ("\n\n**Outage per flow**\n\n" + table_md(outages) if outages else "")
        return section_md("Reset", body, "") if t else ""

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        option(parser, "--reset-command", "command that resets the DUT (for --tests reset): a shell command line run "
                                          "in the DUT's namespace (the event of one trial with events), with the test "
                                          "bed's parts in its environment: NETRIG_DUT_NETNS, NETRIG_DUT_IFACES, "
                                          "NETRIG_TX_NETNS, NETRIG_TX_IFNAME, NETRIG_RX_NETNS, NETRIG_RX_IFNAME, "
                                          "NETRIG_TESTBED_ID", default="")

    def cli_params(self, args: argparse.Namespace) -> dict:
        if not args.reset_command and args.testbed != "simulated":
            raise ConfigError("--reset-command", "is required for --tests reset: the command that resets the DUT")
        return {"command": args.reset_command}


METHOD = Reset()
