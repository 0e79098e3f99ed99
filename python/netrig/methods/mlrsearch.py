"""MLRsearch (draft-ietf-bmwg-mlrsearch): NDR, PDR and any other loss-ratio goals at once.

The search itself is :mod:`netrig.methodology.mlr` (netrig's own) or the reference package through
:mod:`netrig.methodology.mlr_reference` (``implementation = "reference"``); both answer the same
goals with the same result. Its CLI shortcut is ``netrig ndr-pdr``.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from netrig.errors import ConfigError
from netrig.measure import Measurer
from netrig.methodology.method import Answer, Command, Context, Method, Section, Shortcut
from netrig.methodology.mlr import GoalResult, MlrResult, SearchGoal, search
from netrig.methodology.mlr_reference import search_reference
from netrig.methodology.stats import check
from netrig.methodology.tester import NO_LIMIT, ProvenLimit
from netrig.methodology.vocabulary import deprecated, option
from netrig.model import FrameSize, LineRate, format_bps, format_pps, rates
from netrig.results.typed import from_dict
from netrig.view import fmt
from netrig.view.frame_results import Headline, finite, not_measured, read_frame_results
from netrig.view.html import empty, figure, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.plotkit import (
    fig_legend,
    mark_lower_bounds,
    plot,
    rate_axis,
    run_colour,
    si,
    size_title,
    subplots,
)
from netrig.view.run_view import (
    RunView,
    Stat,
    frame_size_label,
    frame_size_sort_key,
)
from netrig.view.table import Table, by_size, ratio_header, size_of_label, sizes_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DEFAULT_GOALS = (SearchGoal("NDR", 0.0), SearchGoal("PDR", 0.005))
#: ``netrig ndr-pdr``'s initial trial duration, s (shortened to the final one when that is shorter).
INITIAL_DURATION_S = 1.0


@dataclass(frozen=True)
class MlrParams:
    """``goals``: the loss-ratio goals (default NDR 0 % and PDR 0.5 %); loads between
    ``min_rate_pct`` and ``max_rate_pct`` of line rate; the search stops after
    ``search_duration_max_s`` of trials; ``implementation``: ``netrig`` or ``reference``."""

    goals: tuple[SearchGoal, ...] = DEFAULT_GOALS
    min_rate_pct: float = 1.0
    max_rate_pct: float = 100.0
    search_duration_max_s: float = 1200.0
    implementation: str = "netrig"
    repetitions: int | None = None

    def __post_init__(self) -> None:
        if not self.goals:
            raise ConfigError("goals", "needs at least one goal")
        names = [g.name for g in self.goals]
        if len(set(names)) != len(names):
            raise ConfigError("goals", f"goal names must be unique (got {names})")
        check("max_rate_pct", self.max_rate_pct, lo=0, lo_open=True, hi=1000)
        check("min_rate_pct", self.min_rate_pct, lo=0, lo_open=True, hi=self.max_rate_pct, hi_open=True)
        check("search_duration_max_s", self.search_duration_max_s, lo=0, lo_open=True)
        if self.implementation not in ("netrig", "reference"):
            raise ConfigError("implementation", f"must be one of netrig, reference (got {self.implementation!r})")
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


def measure_mlrsearch(measurer: Measurer, frame: FrameSize, line_rate: LineRate,
                      params: MlrParams = MlrParams(), limit: ProvenLimit = NO_LIMIT) -> MlrResult:
    """Search every goal of ``params`` with the implementation it names, at loads up to the
    tester's ``limit`` (the self-test's proven ceiling / factor)."""
    fn = search_reference if params.implementation == "reference" else search
    return fn(measurer, frame, line_rate, params.goals, params.min_rate_pct, params.max_rate_pct,
              params.search_duration_max_s, limit=limit)


# --------------------------------------------------------------------------------------------- #
# Reading it back from results

NONE = "No MLRsearch (NDR/PDR) in this result."


@dataclass(frozen=True)
class GoalEntry:
    """One goal at one frame size over the repetitions (bounds are medians)."""

    name: str
    loss_ratio: float | None
    relative_width: float | None
    conditional: Stat | None
    lower_pps: float | None
    upper_pps: float | None
    tester_limited: bool


@dataclass(frozen=True)
class Entry:
    frame_size: Any
    goals: list[GoalEntry]


def _goal_name(g: GoalResult) -> str:
    goal = g.goal
    return str(goal.name if goal is not None and goal.name else f"loss ≤ {goal.loss_ratio if goal else None}")


def entries(run: RunView) -> list[Entry]:
    """Per frame size, every goal (NDR, PDR…) from the typed repetitions."""
    out = []
    for r in run.frame_results(METHOD_NAME, MlrResult):
        by_name: dict[str, list[GoalResult]] = {}
        for rep in r.repetitions:
            for g in rep.goals or ():
                by_name.setdefault(_goal_name(g), []).append(g)
        goals = []
        for name, gs in by_name.items():
            lo = Stat.over(finite(g.lower_bound_pps) for g in gs)
            hi = Stat.over(finite(g.upper_bound_pps) for g in gs)
            ct = Stat.over(finite(g.conditional_throughput_pps) for g in gs)
            if lo is None and hi is None and ct is None:
                continue
            goal = gs[0].goal
            goals.append(GoalEntry(name, finite(goal.loss_ratio) if goal else None,
                                   finite(goal.relative_width) if goal else None, ct, lo.value if lo else None,
                                   hi.value if hi else None, any(g.tester_limited is True for g in gs)))
        if goals:
            out.append(Entry(r.frame_size, goals))
    return out


def table(run: RunView) -> Table:
    t = Table(["frame size", "goal", "loss ratio", "conditional throughput", "% line rate", "bit/s (L1)",
               "lower bound", "upper bound", "relative width"])
    for e in entries(run):
        for g in e.goals:
            ct: Stat | None = g.conditional
            v = ct.value if ct else g.lower_pps
            no_upper = "none (the tester's limit, loss-free)" if g.tester_limited else "none (max rate loss-free)"
            t.add([fmt.size(e.frame_size), g.name,
                   fmt.DASH if g.loss_ratio is None else f"{g.loss_ratio:g}",
                   fmt.at_least(fmt.fps_stat(ct) if ct else fmt.fps(v), g.tester_limited),
                   fmt.pct(run.pct_of_line_rate(e.frame_size, v)),
                   fmt.bps(run.bps(e.frame_size, v)), fmt.fps(g.lower_pps),
                   fmt.fps(g.upper_pps) if g.upper_pps is not None else no_upper,
                   fmt.pct(100 * g.relative_width, 2) if g.relative_width is not None else fmt.DASH])
    measured = {frame_size_label(e.frame_size) for e in entries(run)}
    for r in run.frame_results(METHOD_NAME, MlrResult):
        why = not_measured(r)
        if why and frame_size_label(r.frame_size) not in measured:
            t.add([fmt.size(r.frame_size), "every goal", fmt.DASH, fmt.not_measured(why), *[fmt.DASH] * 5])
    return t


@plot("ndr_pdr")
def ndr_pdr_plot(runs: Sequence[RunView]) -> Figure | None:
    """MLRsearch conditional throughput per goal (NDR, PDR…) and frame size: the bar is the
    median conditional throughput, the whisker the [lower, upper] bound interval."""
    rows = []  # (label, run index, goal)
    for i, r in enumerate(runs):
        for e in entries(r):
            for g in e.goals:
                rows.append((e.frame_size, g.name, i, g))
    if not rows:
        return None
    rows.sort(key=lambda x: (frame_size_sort_key(x[0]), x[1], x[2]))
    groups: list[tuple[Any, str]] = []
    for size, name, _, _ in rows:
        if (frame_size_label(size), name) not in [(frame_size_label(s), n) for s, n in groups]:
            groups.append((size, name))
    fig, axes = subplots(h=max(2.4, 0.42 * len(rows) + 1.2))
    ax = axes[0][0]
    n = len(runs)
    h = 0.8 / n
    vals = []
    for size, name, i, g in rows:
        k = [(frame_size_label(s), nm) for s, nm in groups].index((frame_size_label(size), name))
        y = k + (i - (n - 1) / 2) * h
        ct = g.conditional
        lo = g.lower_pps if g.lower_pps is not None else (ct.value if ct else None)
        hi = g.upper_pps
        v = ct.value if ct else lo
        if v is None:
            continue
        if g.tester_limited:
            ax.barh(y, v, height=h * 0.85, fill=False, edgecolor=run_colour(i), hatch="//", lw=1.2,
                    label=runs[i].name if k == 0 else None)
            mark_lower_bounds(ax, [v], [y], run_colour(i), direction="right")
        else:
            ax.barh(y, v, height=h * 0.85, color=run_colour(i), alpha=0.85,
                    label=runs[i].name if k == 0 else None)
        if lo is not None and hi is not None:
            ax.errorbar([(lo + hi) / 2], [y], xerr=[[(hi - lo) / 2], [(hi - lo) / 2]], color="black", lw=1.2, capsize=4)
        txt = f"{si(v)}fps"
        pct = runs[i].pct_of_line_rate(size, v)
        if pct is not None:
            txt += f" ({pct:.1f} %)"
        if hi is None:
            txt += ", no upper bound (" + ("the tester's limit: ≥)" if g.tester_limited else "max rate loss-free)")
        ax.annotate(txt, (v, y), xytext=(14 if g.tester_limited else 4, 0), textcoords="offset points", va="center",
                    fontsize=7.5)
        vals += [x for x in (lo, v, hi) if x is not None]
    ax.set_yticks(range(len(groups)), [f"{size_title(s)}\n{nm}" for s, nm in groups])
    ax.invert_yaxis()
    log = rate_axis(ax, vals, axis="x")
    ax.set_xlim(min(vals) / 2 if log else 0, max(vals) * (6 if log else 1.45))
    ax.set_xlabel("conditional throughput (frames/s); whisker = [lower, upper] bound")
    ax.grid(axis="y", visible=False)
    ax.set_title("NDR / PDR (MLRsearch)")
    if n > 1 or any(g.tester_limited for _, _, _, g in rows):
        fig_legend(fig, [ax])
    return fig


# --------------------------------------------------------------------------------------------- #
# The method

METHOD_NAME = "mlrsearch"
SECTION = Section("ndr-pdr", "NDR / PDR (MLRsearch)", shown_when_empty=True)


class MlrSearch(Method):
    name = METHOD_NAME
    label = "MLRsearch (NDR/PDR)"
    params_type = MlrParams
    provides_throughput = True
    sections = (SECTION,)
    plots = (ndr_pdr_plot,)
    console_columns = ("goal", f"{rates.INTENDED} fps", "% line rate", "L1 bit/s", "L2 bit/s")
    shortcut = Shortcut(Command("ndr-pdr", "MLRsearch: NDR and PDR (conditional throughput) on a test bed",
                                "Find NDR and PDR at once with MLRsearch (draft-ietf-bmwg-mlrsearch).",
                                sizes_default="64"), "ndr-pdr")
    cli_fields = {"loss_ratio": "--pdr-loss", "relative_width": "--width", "exceed_ratio": "--exceed-ratio",
                  "initial_trial_duration_s": "--initial-duration", "final_trial_duration_s": "--final-duration",
                  "duration_sum_s": "--duration-sum", "implementation": "--implementation"}

    def config_defaults(self, params: dict, trial_duration_s: float) -> dict:
        return params

    def run(self, params: MlrParams, ctx: Context) -> MlrResult:
        return measure_mlrsearch(ctx.measurer, ctx.frame, ctx.line_rate, params, ctx.tester_limit)

    def estimate_trials(self, params: MlrParams, frame: FrameSize, line_fps: float) -> int:
        return sum(8 + int(g.duration_sum_s / g.final_trial_duration_s) * 3 for g in params.goals)

    def top_rate_pct(self, params: MlrParams) -> float:
        return params.max_rate_pct

    def selftest_trial_s(self, params: MlrParams) -> float | None:
        return max(g.final_trial_duration_s for g in params.goals)

    def verdict_values(self, result: dict) -> dict[str, float | None]:
        head = read_frame_results(result, MlrResult).headline
        return {"throughput_pct": head.pct_line_rate} if head else {}

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        fr = read_frame_results(result, MlrResult, line_rate)
        frame, rows, why = FrameSize.parse(fr.frame_size), [], not_measured(fr)
        for gi, g in enumerate(fr.repetitions[0].goals if fr.repetitions else ()):
            name = g.goal.name
            med = fr.spread(f"{name}_pps").median
            rate = Headline.of(med, frame, line_rate) if med is not None and line_rate is not None else None
            bounded = any(x.tester_limited is True for rep in fr.repetitions for x in rep.goals or ()
                          if x.goal.name == name)
            rows.append([fmt.size(fr.frame_size) if gi == 0 else "", f"{name} ({100 * g.goal.loss_ratio:g} %)",
                         fmt.at_least(format_pps(med), bounded) if med is not None else (
                             fmt.not_measured(why) if why else "none"),
                         f"{rate.pct_line_rate:.2f}" if rate and rate.pct_line_rate is not None else "-",
                         format_bps(rate.l1_bps) if rate and rate.l1_bps is not None else "-",
                         format_bps(rate.l2_bps) if rate and rate.l2_bps is not None else "-",
                         flags if gi == 0 else ""])
        return rows

    def zero_loss_bounds(self, repetition: dict, params: dict) -> tuple[float, float | None, str] | None:
        """The first goal with loss ratio 0 (NDR)."""
        rep = from_dict(MlrResult, repetition, partial=True)
        if rep.complete is False:
            return None
        for g in rep.goals or ():
            goal, lower = g.goal, finite(g.lower_bound_pps)
            if goal is None or finite(goal.loss_ratio) != 0.0 or lower is None:
                continue
            e, dsum, d = finite(goal.exceed_ratio), finite(goal.duration_sum_s), finite(goal.final_trial_duration_s)
            basis = (f"MLRsearch {goal.name or 'NDR'}: a load passes when at most {100 * (e or 0):g} % of "
                     f"{dsum or 0:g} s of {d or 0:g} s trials lose frames")
            return lower, None if g.tester_limited is True else finite(g.upper_bound_pps), basis
        return None

    def answers(self, repetition: dict, params: dict) -> list[Answer]:
        """Every goal's conditional throughput (NDR, PDR, …) with its bounds and how it decides."""
        rep = from_dict(MlrResult, repetition, partial=True)
        out = []
        for g in rep.goals or () if rep.complete is not False else ():
            goal, lower = g.goal, finite(g.lower_bound_pps)
            if goal is None or lower is None:
                continue
            e, dsum, d, loss = (finite(goal.exceed_ratio), finite(goal.duration_sum_s),
                                finite(goal.final_trial_duration_s), finite(goal.loss_ratio) or 0.0)
            basis = (f"MLRsearch {goal.name or '?'}: a load passes when at most {100 * (e or 0):g} % of "
                     f"{dsum or 0:g} s of {d or 0:g} s trials lose more than {100 * loss:g} % of frames")
            out.append(Answer(goal.name or "?", finite(g.conditional_throughput_pps) or lower, lower,
                              None if g.tester_limited is True else finite(g.upper_bound_pps), basis, loss == 0.0,
                              g.tester_limited is True))
        return out

    def html(self, run: RunView) -> dict[str, str]:
        nd = figure(ndr_pdr_plot, [run])
        return {SECTION.id: nd + table_html(table(run), left=2) if nd else empty(NONE)}

    def compare_html(self, runs: Sequence[RunView]) -> dict[str, str]:
        return {SECTION.id: figure(ndr_pdr_plot, runs) or empty("No MLRsearch (NDR/PDR) in these results.")}

    def markdown(self, run: RunView) -> str:
        return section_md("NDR / PDR (MLRsearch)", table_md(table(run)), "No MLRsearch in this result.")

    def ratio_table(self, runs: Sequence[RunView]) -> tuple[str, Table] | None:
        t = Table(ratio_header([r.name for r in runs], "goal"))
        data = [by_size(entries(r)) for r in runs]
        for lab in sizes_of(data):
            goals: list[str] = []
            for d in data:
                for g in (d[lab].goals if lab in d else []):
                    if g.name not in goals:
                        goals.append(g.name)
            for gname in goals:
                vals = []
                for d in data:
                    ge = next((g for g in (d[lab].goals if lab in d else []) if g.name == gname), None)
                    vals.append((ge.conditional.value if ge.conditional else ge.lower_pps) if ge else None)
                row = [fmt.size(size_of_label(lab)), gname, fmt.fps(vals[0])]
                for v in vals[1:]:
                    row += [fmt.fps(v), fmt.ratio_pct(v, vals[0])]
                t.add(row)
        return ("NDR / PDR (MLRsearch conditional throughput)", t) if t else None

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        option(parser, "--pdr-loss", "PDR goal loss ratio [0.005]", default="0.005")
        option(parser, "--width", "goal relative width [0.005]", default="0.005")
        option(parser, "--exceed-ratio", "goal exceed ratio [0.5]", default="0.5")
        option(parser, "--initial-duration", f"initial trial duration, at most the final one [{INITIAL_DURATION_S:g}s "
                                             "or the final duration when shorter]")
        option(parser, "--final-duration", "final trial duration [--duration or 1s]")
        option(parser, "--duration-sum", "goal duration sum [3 × final duration]")
        option(parser, "--implementation", "netrig or reference (the MLRsearch package) [netrig]", default="netrig")
        deprecated(parser, "--size", "--frame-sizes")

    def cli_params(self, args: argparse.Namespace) -> dict:
        given = "--final-duration" if args.final_duration is not None else "--duration"  # errors name the option
        final = args.final_duration or args.duration or 1.0
        initial = INITIAL_DURATION_S if args.initial_duration is None else args.initial_duration
        if args.initial_duration is None:
            initial = min(initial, final)
        elif initial > final:
            raise ConfigError("--initial-duration", f"{initial:g}s is longer than the final trial duration ({final:g} "
                                                    f"s, {given}): MLRsearch lengthens its trials up to the final "
                                                    f"one; give at most {final:g}s or raise {given}")
        dsum = args.duration_sum or 3 * final
        common = {"exceed_ratio": args.exceed_ratio, "relative_width": args.width, "initial_trial_duration_s": initial,
                  "final_trial_duration_s": final, "duration_sum_s": dsum}
        return {"goals": [{"name": "NDR", "loss_ratio": 0.0, **common},
                          {"name": "PDR", "loss_ratio": args.pdr_loss, **common}],
                "implementation": args.implementation}


METHOD = MlrSearch()
