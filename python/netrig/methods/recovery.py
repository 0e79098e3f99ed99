"""RFC 2544 §26.5 system recovery: overload at 110 % of throughput, then 50 %; the time from the
switch until loss stops (resolution: one sampling interval)."""
from __future__ import annotations

from dataclasses import dataclass

from netrig.measure import Interval, Measurer, Phase
from netrig.methodology.method import Context, Method, Shortcut
from netrig.methodology.stats import check, median
from netrig.methods.sections import OTHER_METHODS, RFC2544
from netrig.model import FrameSize, LineRate
from netrig.view import fmt
from netrig.view.frame_results import read_frame_results
from netrig.view.html import empty, esc, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.run_view import RunView, Stat
from netrig.view.table import Table


@dataclass(frozen=True)
class RecoveryParams:
    overload_pct: float = 110.0  # of throughput (capped at line rate)
    recovery_pct: float = 50.0  # of throughput
    overload_duration_s: float = 60.0
    recovery_duration_s: float = 60.0
    interval_s: float = 1.0
    throughput_from: int | None = None
    repetitions: int | None = None

    def __post_init__(self) -> None:
        check("overload_pct", self.overload_pct, lo=100, lo_open=True, hi=1000)
        check("recovery_pct", self.recovery_pct, lo=0, lo_open=True, hi=100)
        check("overload_duration_s", self.overload_duration_s, lo=0, lo_open=True)
        check("recovery_duration_s", self.recovery_duration_s, lo=0, lo_open=True)
        check("interval_s", self.interval_s, lo=0, lo_open=True, hi=self.recovery_duration_s)
        if self.throughput_from is not None:
            check("throughput_from", self.throughput_from, lo=0, integer=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class RecoveryResult:
    frame: FrameSize
    line_rate: LineRate
    throughput_pps: float
    overload_pps: float
    recovery_pps: float
    intervals: tuple[Interval, ...]
    switch_s: float
    valid: bool = True

    @property
    def recovery_time_s(self) -> float | None:
        """Start of the first recovery-phase interval after which no interval loses frames."""
        rec = [i for i in self.intervals or () if i.phase == 1]
        if not rec or rec[-1].frames_lost > 0:
            return None
        k = len(rec)
        while k > 0 and rec[k - 1].frames_lost == 0:
            k -= 1
        return rec[k].since(self.switch_s) if k < len(rec) else None

    @property
    def recovered(self) -> bool:
        """Loss stopped in the recovery phase of a valid trial (an invalid one shows nothing of the DUT's)."""
        return self.valid and self.recovery_time_s is not None

    @property
    def headline_pps(self) -> float | None:
        return None

    def stats_values(self) -> dict:
        return {"recovery_time_s": self.recovery_time_s if self.valid else None}

    def to_dict(self) -> dict:
        return {"throughput_pps": self.throughput_pps, "overload_pps": self.overload_pps,
                "recovery_pps": self.recovery_pps, "recovery_time_s": self.recovery_time_s,
                "recovered": self.recovered, "valid": self.valid, "switch_s": self.switch_s,
                "intervals": [i.to_dict() for i in self.intervals]}


def measure_recovery(measurer: Measurer, frame: FrameSize, line_rate: LineRate, throughput_pps: float,
                     params: RecoveryParams = RecoveryParams(), tag: str = "") -> RecoveryResult:
    overload = min(throughput_pps * params.overload_pct / 100, line_rate.fps(frame))
    recovery = max(throughput_pps * params.recovery_pct / 100, 1.0)
    phases = [Phase(overload, params.overload_duration_s), Phase(recovery, params.recovery_duration_s)]
    c = measurer.measure_phases(frame, phases, params.interval_s, tag=tag)
    intervals = tuple(c.intervals or ())
    # The switch is where the recovery phase really began (later than planned when the tester's
    # smooth pacing stretched the overload phase after a stall).
    switch = next((i.t_s for i in intervals if i.phase == 1), params.overload_duration_s)
    return RecoveryResult(frame, line_rate, throughput_pps, overload, recovery, intervals, switch, c.valid)


# --------------------------------------------------------------------------------------------- #
# Reading it back from results

def table(r: RunView) -> Table:
    t = Table(["frame size", "throughput", "overload", "recovery load", "recovery time", "recovered"])
    for e in r.frame_results(METHOD_NAME, RecoveryResult):
        reps = e.repetitions
        valid = [x for x in reps if x.valid is not False]
        rates = [fmt.fps(median(x.throughput_pps for x in reps)), fmt.fps(median(x.overload_pps for x in reps)),
                 fmt.fps(median(x.recovery_pps for x in reps))]
        if not valid:  # an invalid trial's loss is the tester's: no recovery time, recovered or not
            t.add([fmt.size(e.frame_size), *rates, "—: every trial invalid", fmt.DASH])
            continue
        rt = (Stat.from_spread(e.spread("recovery_time_s")) if len(valid) == len(reps) else None) \
            or Stat.over(x.recovery_time_s for x in valid)
        t.add([fmt.size(e.frame_size), *rates,
               (fmt.seconds(rt.value) + (f" ({fmt.seconds(rt.lo)}–{fmt.seconds(rt.hi)})" if rt.spread else ""))
               if rt else "never",
               "yes" if all(x.recovered for x in valid) else "no"])
    return t


# --------------------------------------------------------------------------------------------- #
# The method

METHOD_NAME = "rfc2544_system_recovery"


class SystemRecovery(Method):
    name = METHOD_NAME
    label = "RFC 2544 §26.5 system recovery"
    short_name = "system_recovery"
    params_type = RecoveryParams
    needs_throughput = True
    sections = (OTHER_METHODS,)
    console_columns = ("recovery time (median)", "min–max")
    shortcut = Shortcut(RFC2544, "system-recovery", default=False)

    def config_defaults(self, params: dict, trial_duration_s: float) -> dict:
        return {"overload_duration_s": trial_duration_s, "recovery_duration_s": trial_duration_s, **params}

    def run(self, params: RecoveryParams, ctx: Context) -> RecoveryResult:
        return measure_recovery(ctx.measurer, ctx.frame, ctx.line_rate, ctx.throughput_or(1.0), params)

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        res = read_frame_results(result, RecoveryResult)
        valid = [x for x in res.repetitions if x.valid is not False]
        if not valid:  # an invalid trial's recovery means nothing
            return [[fmt.size(res.frame_size), "—: every trial invalid", "—", flags]]
        if not any(x.recovered for x in valid):
            return [[fmt.size(res.frame_size), "never recovered", "—", flags]]
        return [fmt.stat_seconds_row(res, "recovery_time_s", flags)]

    def html(self, run: RunView) -> dict[str, str]:
        return {OTHER_METHODS.id: "<h3>" + esc("System recovery (RFC 2544 §26.5)") + "</h3>"
                + (table_html(table(run)) or empty(f"No {self.label} in this result."))}

    def markdown(self, run: RunView) -> str:
        t = table(run)
        return section_md("System recovery", table_md(t), "") if t else ""


METHOD = SystemRecovery()
