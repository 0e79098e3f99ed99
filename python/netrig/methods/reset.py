"""RFC 2544 §26.6 reset: time from the last frame forwarded before a DUT reset (a user command) to
the first one after, at a constant rate (estimated as frames lost / offered rate)."""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from netrig.errors import ConfigError, MethodologyError
from netrig.measure import Load, Measurer
from netrig.methodology.method import Context, Method, Shortcut
from netrig.methodology.stats import check
from netrig.methods.sections import OTHER_METHODS, RFC2544
from netrig.model import FrameSize, LineRate
from netrig.view import fmt
from netrig.view.html import empty, esc, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.run_view import RunView, med, objs
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
            raise ConfigError("command", f"{self.command!r}: {e} (it is split like a shell command line, "
                                         "without running a shell)") from None
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
    rate_pps: float
    reset_time_s: float | None
    frames_lost: int

    @property
    def headline_pps(self) -> float | None:
        return None

    def stats_values(self) -> dict:
        return {"reset_time_s": self.reset_time_s}

    def to_dict(self) -> dict:
        return {"rate_pps": self.rate_pps, "reset_time_s": self.reset_time_s, "frames_lost": self.frames_lost}


def command_runner(command: str, timeout_s: float, env: Mapping[str, str] | None = None) -> Callable[[], None]:
    """A callable that runs the user's reset command (no shell) and raises on failure. ``env`` is
    added to its environment: the test bed's parts (``NETRIG_DUT_NETNS``, ``NETRIG_DUT_IFACES`` …),
    so the command can address the DUT, e.g. ``ip netns exec $NETRIG_DUT_NETNS …`` in a script."""
    argv = shlex.split(command)
    if not argv:
        raise ConfigError("rfc2544_reset.command", "is required: the command that resets the DUT")
    full_env = {**os.environ, **(env or {})}

    def run() -> None:
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=full_env)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise MethodologyError(f"reset command {command!r} failed: {e}") from None
        if p.returncode != 0:
            raise MethodologyError(f"reset command {command!r} exited {p.returncode}: {p.stderr.strip()[:200]}")

    return run


def measure_reset(measurer: Measurer, frame: FrameSize, line_rate: LineRate, throughput_pps: float,
                  params: ResetParams, reset: Callable[[], None] | None = None,
                  env: Mapping[str, str] | None = None) -> ResetResult:
    rate = max(throughput_pps * params.rate_pct / 100, 1.0)
    fn = reset or command_runner(params.command, params.command_timeout_s, env)
    after_s = params.reset_after_s if params.reset_after_s is not None else min(10.0, params.duration_s / 2)
    c = measurer.measure_reset(Load(rate, frame), params.duration_s, fn, after_s)
    return ResetResult(rate, c.reset_time_s, c.frames_lost)


# --------------------------------------------------------------------------------------------- #
# Reading it back from results

def table(r: RunView) -> Table:
    t = Table(["frame size", "reset time", "frames lost", "rate"])
    for e in r.method_results(METHOD_NAME):
        reps = objs(e, "repetitions")
        t.add([fmt.size(e.get("frame_size")), fmt.seconds(med(reps, "reset_time_s")),
               fmt.count(med(reps, "frames_lost")),
               fmt.fps(med(reps, "rate_pps"))])
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
        reset = (lambda: None) if ctx.simulated_dut and not params.command else None  # a model resets itself
        return measure_reset(ctx.measurer, ctx.frame, ctx.line_rate, ctx.throughput_or(1.0), params, reset=reset,
                             env=ctx.command_env)

    def console_rows(self, result: dict, flags: str) -> list[list[str]]:
        return [fmt.stat_seconds_row(result, "reset_time_s", flags)]

    def html(self, run: RunView) -> dict[str, str]:
        return {OTHER_METHODS.id: "<h3>" + esc("Reset (RFC 2544 §26.6)") + "</h3>"
                + (table_html(table(run)) or empty(f"No {self.label} in this result."))}

    def markdown(self, run: RunView) -> str:
        t = table(run)
        return section_md("Reset", table_md(t), "") if t else ""

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--reset-command", default="",
                            help="command that resets the DUT (for --tests reset); it runs without a shell, with "
                            "the test bed's parts in its environment: NETRIG_DUT_NETNS, NETRIG_DUT_IFACES, "
                            "NETRIG_TX_NETNS, NETRIG_TX_IFNAME, NETRIG_RX_NETNS, NETRIG_RX_IFNAME, NETRIG_TESTBED_ID")

    def cli_params(self, args: argparse.Namespace) -> dict:
        if not args.reset_command and args.testbed != "simulated":
            raise ConfigError("--reset-command", "is required for --tests reset: the command that resets the DUT")
        return {"command": args.reset_command}


METHOD = Reset()
