"""BGP convergence after a route withdrawal (RFC 7747's withdrawal case, its terms from RFC 6412 and
RFC 4098): traffic at a constant rate to N prefixes, one flow each, that the DUT holds via a
preferred next hop; mid-trial the tester withdraws them there (a user command, or the test bed's
``NETRIG_BGP_WITHDRAW``), and the DUT moves them to its backup path. One use of events under load
(``netrig.measure.events``): the withdraw is the trial's one event, and each prefix's outage is its
flow's sequence gap around it (transmit times of the last frame before and the first after).

Reported per repetition, in RFC 6412's terms:

* the **loss-derived convergence time**: frames lost / the offered rate, the frames lost in the
  prefixes' outages until forwarding was loss-free again (RFC 6412's convergence packet loss);
  frames the trial lost elsewhere (a DUT's ring drop seconds later) are reported apart
  (``frames_lost_elsewhere``), never in a convergence time;
* the **rate-derived convergence time**: from the withdraw command's start until forwarding is
  loss-free again (the trial counts every 10 ms): the last prefix moved by then, seen within one
  prefix's period;
* per prefix, the **route-specific loss-derived convergence time**: its frames lost / its rate (one
  frame every N / rate seconds, the **resolution**); their median and longest over all prefixes, and
  how many prefixes lost any;
* the prefixes that **never moved** (no frame after the withdraw): a DUT without a backup path.

After the trial the restore command (``restore_command``, or the test bed's ``NETRIG_BGP_RESTORE``)
advertises the routes again and returns once the DUT holds them via the preferred next hop, so that
every repetition starts from the same table. A withdraw or restore that fails stops the method with
its one-line reason (nothing converged: nothing to measure).
"""
from __future__ import annotations

import shlex
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, replace

from netrig.errors import ConfigError, MethodologyError
from netrig.measure import Load, Measurer
from netrig.measure.events import CommandRunner, Event, EventResult, EventRun
from netrig.methodology.method import Context, Method
from netrig.methodology.stats import check, median
from netrig.methods.sections import OTHER_METHODS
from netrig.model import FrameSize, LineRate
from netrig.view import fmt
from netrig.view.frame_results import read_frame_results
from netrig.view.html import esc, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.run_view import RunView
from netrig.view.table import Table

#: The test bed's own withdraw and restore (router, ``routing = "bgp"``, ``bgp_paths = 2``).
WITHDRAW_ENV, RESTORE_ENV = "NETRIG_BGP_WITHDRAW", "NETRIG_BGP_RESTORE"


@dataclass(frozen=True)
class ConvergenceParams:
    rate_pps: float = 10_000.0
    duration_s: float = 6.0
    withdraw_at_s: float = 2.0
    command: str = ""  # the withdraw; default: the test bed's NETRIG_BGP_WITHDRAW
    restore_command: str = ""  # default: the test bed's NETRIG_BGP_RESTORE
    command_timeout_s: float = 120.0
    repetitions: int | None = None

    def __post_init__(self) -> None:
        for name in ("command", "restore_command"):
            line = getattr(self, name)
            if not isinstance(line, str):
                raise ConfigError(name, f"must be a shell command line (got {line!r})")
            try:
                shlex.split(line)
            except ValueError as e:
                raise ConfigError(name, f"{line!r}: {e} (a shell command line: balance its quotes)") from None
        check("rate_pps", self.rate_pps, lo=0, lo_open=True)
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        check("withdraw_at_s", self.withdraw_at_s, lo=0, lo_open=True, hi=self.duration_s, hi_open=True)
        check("command_timeout_s", self.command_timeout_s, lo=0, lo_open=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class ConvergenceResult:
    """One withdraw and what it cost (see the module), in seconds; ``rate_derived_s`` ``None`` when
    forwarding was never loss-free again (a prefix never moved, or the trial ended first)."""

    rate_pps: float
    prefixes: int
    frames_lost: int
    loss_derived_s: float
    rate_derived_s: float | None
    prefixes_lost: int
    never_moved: int
    route_median_s: float
    route_max_s: float
    resolution_s: float
    event: EventResult | None = None
    frames_lost_elsewhere: int = 0

    @property
    def headline_pps(self) -> float | None:
        return None

    def stats_values(self) -> dict:
        return {"loss_derived_s": self.loss_derived_s, "rate_derived_s": self.rate_derived_s}

    def to_dict(self) -> dict:
        return {"rate_pps": self.rate_pps, "prefixes": self.prefixes, "frames_lost": self.frames_lost,
                "loss_derived_s": self.loss_derived_s, "rate_derived_s": self.rate_derived_s,
                "prefixes_lost": self.prefixes_lost, "never_moved": self.never_moved,
                "route_median_s": self.route_median_s, "route_max_s": self.route_max_s,
                "resolution_s": self.resolution_s, "event": self.event.to_dict() if self.event else None,
                "frames_lost_elsewhere": self.frames_lost_elsewhere}


def converged(ev: EventResult, rate_pps: float, trial_lost: int) -> ConvergenceResult:
    """The RFC 6412 numbers of one withdraw from its per-flow outages (one flow per prefix, every
    prefix at ``rate_pps`` / prefixes, the rate the tester offered; those without an outage lost
    nothing); of the trial's ``trial_lost`` frames, those outside the outages are reported apart."""
    n = max(ev.flows_total, 1)
    period = n / rate_pps
    per_route = [f.frames_lost * period for f in ev.flows] + [0.0] * (n - len(ev.flows))
    never = sum(not f.recovered for f in ev.flows)
    lost = ev.frames_lost
    return ConvergenceResult(rate_pps, ev.flows_total, lost, lost / rate_pps,
                             None if never else ev.recovery_s, len(ev.flows), never,
                             statistics.median(per_route), max(per_route), period, ev, max(0, trial_lost - lost))


def _commands(params: ConvergenceParams, env: Mapping[str, str]) -> tuple[str, str]:
    withdraw = params.command or env.get(WITHDRAW_ENV, "")
    if not withdraw.strip():
        raise ConfigError("bgp_convergence.command", "is required: the command that withdraws the prefixes from "
                                                     "the DUT's preferred next hop (the router test bed with "
                                                     "routing = \"bgp\" and bgp_paths = 2 gives its own)")
    return withdraw, params.restore_command or env.get(RESTORE_ENV, "")


class _Withdraws:
    """The withdraw as an event that can run again: the measurer runs a trial a stall stretched once
    more, events and all, and a second withdraw of routes already withdrawn moves nothing (a
    repetition read 0 frames lost). Before every withdraw but the first, the restore runs first."""

    def __init__(self, runner: CommandRunner, restore: str):
        self.runner, self.restore, self.done = runner, restore, 0

    def __call__(self, event: Event) -> EventRun:
        if self.done and self.restore.strip():
            back = self.runner(Event(self.restore, event.at_s))
            if not back.ok:
                return replace(back, command=event.command, error=f"the restore before it {back.problem()}")
        self.done += 1
        return self.runner(event)


def measure_convergence(measurer: Measurer, frame: FrameSize, params: ConvergenceParams,
                        env: Mapping[str, str]) -> ConvergenceResult:
    """One trial at ``rate_pps`` with the withdraw as its event (run with the test bed's parts in
    its environment), then the restore; a withdraw or restore that fails raises
    ``MethodologyError`` naming the command's problem."""
    withdraw, restore = _commands(params, env)
    runner = CommandRunner(None, env, params.command_timeout_s)
    c = measurer.measure_events(Load(params.rate_pps, frame), params.duration_s,
                                [Event(withdraw, params.withdraw_at_s)], _Withdraws(runner, restore))
    ev = c.events[0] if c.events else None
    back = runner(Event(restore, 0.0)) if restore.strip() else None
    if ev is not None and not ev.run.ok:
        raise MethodologyError(f"bgp_convergence: the withdraw {withdraw!r} {ev.run.problem()}")
    if back is not None and not back.ok:
        raise MethodologyError(f"bgp_convergence: the restore {restore!r} {back.problem()}: the DUT's table is "
                               "not what the next repetition needs")
    if ev is None:
        raise MethodologyError("bgp_convergence: this measurer keeps no per-flow gaps (it needs the engine)")
    # what the tester really offered: a trial it sent slower (flagged) lost its frames at that rate
    return converged(ev, min(params.rate_pps, c.achieved_pps) or params.rate_pps, c.frames_lost)


# --------------------------------------------------------------------------------------------- #
# Reading it back from results

def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1000:.1f} ms"


def table(r: RunView) -> Table:
    t = Table(["frame size", "rep", "prefixes", "rate", "loss-derived", "rate-derived", "prefixes that lost",
               "per prefix: median", "longest", "never moved", "resolution", "lost elsewhere"])
    for e in r.frame_results(METHOD_NAME, ConvergenceResult):
        for k, x in enumerate(e.repetitions):
            t.add([fmt.size(e.frame_size), str(k + 1), fmt.count(x.prefixes), fmt.fps(x.rate_pps),
                   _ms(x.loss_derived_s), _ms(x.rate_derived_s), fmt.count(x.prefixes_lost), _ms(x.route_median_s),
                   _ms(x.route_max_s), fmt.count(x.never_moved), _ms(x.resolution_s),
                   fmt.count(x.frames_lost_elsewhere)])
    t.caption = ("RFC 6412's terms, from the withdraw command's start: loss-derived = frames lost / rate; "
                 "rate-derived = until forwarding was loss-free again (10-ms intervals); per prefix its frames "
                 "lost / its rate, known to the resolution (one frame per prefix every prefixes / rate); lost "
                 "elsewhere: frames the trial lost outside the prefixes' outages, in no convergence time")
    return t


# --------------------------------------------------------------------------------------------- #
# The method

METHOD_NAME = "bgp_convergence"


class Convergence(Method):
    name = METHOD_NAME
    label = "BGP convergence after a withdraw (RFC 7747)"
    short_name = "convergence"
    params_type = ConvergenceParams
    sections = (OTHER_METHODS,)
    console_columns = ("loss-derived (median)", "rate-derived (median)")

    def run(self, params: ConvergenceParams, ctx: Context) -> ConvergenceResult:
        return measure_convergence(ctx.measurer, ctx.frame, params, ctx.command_env)

    def top_rate_pps(self, params: ConvergenceParams, frame: FrameSize, line_rate: LineRate) -> float:
        return params.rate_pps

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        fr = read_frame_results(result, ConvergenceResult)
        reps = fr.repetitions
        return [[fmt.size(fr.frame_size), _ms(median(x.loss_derived_s for x in reps)),
                 _ms(median(x.rate_derived_s for x in reps)), flags]]

    def html(self, run: RunView) -> dict[str, str]:
        t = table(run)
        return {OTHER_METHODS.id: "<h3>" + esc(self.label) + "</h3>" + table_html(t)} if t else {}

    def markdown(self, run: RunView) -> str:
        t = table(run)
        return section_md("BGP convergence", table_md(t), "") if t else ""


METHOD = Convergence()
