"""RFC 2544 §26.3 frame loss rate: from 100 % of line rate downwards in steps until two
successive trials show no loss. The curve (forwarded vs intended rate) shows receive livelock.

The sweep starts at the highest load the tester vouches for (the self-test's proven ceiling /
factor) when that is below ``start_pct``, and steps down from there. A load at which the DUT slowed
the sender (backpressure: the tester fell short though the self-test proved far more) is a DUT
result — the DUT could not take it — kept in the curve as ``backpressure`` and never counted as
loss-free. If the steps run out before any load was loss-free, the sweep halves the load until one
is, so a DUT that forwards anything loss-free has a maximum loss-free rate."""
from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from netrig.measure import Load, Measurer
from netrig.methodology.method import Context, Method, Section, Shortcut
from netrig.methodology.stats import check
from netrig.methodology.tester import NO_LIMIT, NOT_MEASURED, ProvenLimit, Verdict
from netrig.methodology.vocabulary import option
from netrig.methods.sections import RFC2544
from netrig.model import FrameSize, LineRate, defaults, format_pps, rate_object, rates
from netrig.results.typed import from_dict
from netrig.view import fmt
from netrig.view.frame_results import finite, not_measured, read_frame_results
from netrig.view.html import details, empty, figure, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.plotkit import (
    diagonal_axes,
    facets,
    fig_legend,
    legend,
    mark_invalid,
    plot,
    rate_axis,
    run_colour,
    si,
    size_from_label,
    size_title,
    subplots,
    ticker,
    yerr,
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


@dataclass(frozen=True)
class FrameLossParams:
    duration_s: float = defaults.TRIAL_DURATION_S
    step_pct: float = 10.0
    start_pct: float = 100.0
    min_pct: float = 0.0  # stop here even if loss never stopped
    stop_after_lossfree: int = 2
    repetitions: int | None = None

    def __post_init__(self) -> None:
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        check("step_pct", self.step_pct, lo=0, lo_open=True, hi=100)
        check("start_pct", self.start_pct, lo=0, lo_open=True, hi=1000)
        check("min_pct", self.min_pct, lo=0, hi=self.start_pct)
        check("stop_after_lossfree", self.stop_after_lossfree, lo=1, integer=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class LossPoint:
    intended_pct: float
    intended_pps: float
    achieved_pps: float
    forwarded_pps: float
    loss_ratio: float
    valid: bool
    #: Invalid because the DUT slowed the sender below the load (a DUT result, not a tester limit).
    backpressure: bool = False

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class FrameLossResult:
    frame: FrameSize
    line_rate: LineRate
    curve: tuple[LossPoint, ...]

    @property
    def max_lossfree_pps(self) -> float | None:
        ok = [p.intended_pps for p in self.curve if p.valid and p.loss_ratio == 0.0]
        return max(ok) if ok else None

    @property
    def livelock(self) -> bool:
        """Forwarded rate at the highest load more than 10 % below the best forwarded rate."""
        valid = [p for p in self.curve if p.valid]
        if len(valid) < 2:
            return False
        top = max(valid, key=lambda p: p.intended_pps)
        return top.forwarded_pps < 0.9 * max(p.forwarded_pps for p in valid)

    @property
    def backpressure_trials(self) -> int:
        """Loads at which the DUT slowed the sender (a DUT result, never loss-free)."""
        return sum(1 for p in self.curve if p.backpressure)

    @property
    def backpressure_pps(self) -> float | None:
        return max((p.achieved_pps for p in self.curve if p.backpressure), default=None)

    @property
    def not_measured(self) -> str | None:
        """:data:`~netrig.methodology.tester.NOT_MEASURED` when no load was the DUT's (every trial
        invalid, the tester's): the sweep measured nothing; ``None``: measured."""
        if self.curve and not any(p.valid or p.backpressure for p in self.curve):
            return NOT_MEASURED
        return None

    @property
    def headline_pps(self) -> float | None:
        return self.max_lossfree_pps

    def stats_values(self) -> dict:
        return {"max_lossfree_pps": self.max_lossfree_pps}

    def to_dict(self) -> dict:
        return {"curve": [p.to_dict() for p in self.curve], "max_lossfree_pps": self.max_lossfree_pps,
                "max_lossfree": rate_object(self.max_lossfree_pps, self.frame, self.line_rate),
                "livelock": self.livelock, "not_measured": self.not_measured}


#: After the steps, how many times the sweep halves the load looking for a loss-free one.
MAX_HALVINGS = 12


def measure_frame_loss(measurer: Measurer, frame: FrameSize, line_rate: LineRate,
                       params: FrameLossParams = FrameLossParams(),
                       limit: ProvenLimit = NO_LIMIT) -> FrameLossResult:
    line_fps = line_rate.fps(frame)
    start = params.start_pct
    if limit.caps(start / 100 * line_fps):
        assert limit.limit_pps is not None
        start = 100 * limit.limit_pps / line_fps
    points: list[LossPoint] = []
    lossfree = 0

    def trial(pct: float) -> bool:
        rate = pct / 100 * line_fps
        c = measurer.measure(Load(rate, frame), params.duration_s)
        verdict = limit.verdict(c, rate)
        fwd = c.frames_received / params.duration_s
        points.append(LossPoint(pct, rate, c.achieved_pps, fwd, c.loss_ratio, c.valid,
                                verdict is Verdict.BACKPRESSURE))
        return c.valid and c.frames_lost == 0

    k = 0
    while True:
        pct = round(start - k * params.step_pct, 9)
        if pct <= 0 or pct < params.min_pct - 1e-9:
            break
        if trial(pct):
            lossfree += 1
            if lossfree >= params.stop_after_lossfree:
                break
        else:
            lossfree = 0
        k += 1
    if params.min_pct == 0 and points and not any(p.valid and p.loss_ratio == 0.0 for p in points):
        pct = points[-1].intended_pct
        for _ in range(MAX_HALVINGS):
            pct /= 2
            if trial(pct):
                break
    return FrameLossResult(frame, line_rate, tuple(points))


# --------------------------------------------------------------------------------------------- #
# Reading it back from results

NONE = "No RFC 2544 frame loss sweep in this result."


@dataclass(frozen=True)
class Point:
    """One load of the sweep over the repetitions: intended rate (frames/s, % line rate), forwarded, loss %."""

    intended_pps: float
    intended_pct: float | None
    forwarded: Stat
    loss_pct: Stat


@dataclass(frozen=True)
class Entry:
    """One frame size: its points by increasing load, the maximum loss-free rate, whether forwarding
    collapsed (receive livelock) and the point it collapsed after."""

    frame_size: Any
    points: list[Point]
    max_lossfree: Stat | None
    livelock: bool
    collapse: Point | None
    #: The invalid trials (the tester's problem, not the DUT's backpressure): (intended, forwarded) frames/s.
    invalid: tuple[tuple[float, float], ...] = ()


def _points(run: RunView, size: Any, reps: Sequence[FrameLossResult]) -> list[Point]:
    by_load: dict[float, list[LossPoint]] = {}
    for rep in reps:
        for p in rep.curve or ():
            if p.valid is False:
                continue
            pct, intended = finite(p.intended_pct), finite(p.intended_pps)
            if pct is None and intended is not None:
                pct = run.pct_of_line_rate(size, intended)
            key = round(pct, 3) if pct is not None else round(intended or 0.0, 1)
            by_load.setdefault(key, []).append(p)
    pts: list[Point] = []
    for _, ps in sorted(by_load.items()):
        off = Stat.over(finite(p.intended_pps) for p in ps)
        fwd = Stat.over(finite(p.forwarded_pps) for p in ps)
        if off is None or fwd is None:
            continue
        loss = Stat.over(
            100 * v if (v := finite(p.loss_ratio)) is not None else None for p in ps
        ) or Stat.of(max(0.0, 100 * (1 - fwd.value / off.value)) if off.value else 0.0)
        pct = run.pct_of_line_rate(size, off.value) if finite(ps[0].intended_pct) is None \
            else statistics.median(finite(p.intended_pct) or 0 for p in ps)
        pts.append(Point(off.value, pct, fwd, loss))
    return pts


def entries(run: RunView) -> list[Entry]:
    """Per frame size, from the typed repetitions; points by increasing load."""
    out = []
    for r in run.frame_results(METHOD_NAME, FrameLossResult):
        reps = r.repetitions
        pts = _points(run, r.frame_size, reps)
        if not pts:
            continue
        mlf = Stat.from_spread(r.spread("max_lossfree_pps")) or Stat.over(
            finite(x.max_lossfree_pps) for x in reps if x.curve is not None)
        if mlf is None:
            free = [p.intended_pps for p in pts if p.loss_pct.value == 0]
            mlf = Stat.of(max(free)) if free else None
        livelock = any(x.curve is not None and x.livelock for x in reps)
        out.append(Entry(r.frame_size, pts, mlf, livelock, collapse_point(pts), _invalid(reps)))
    return out


def _invalid(reps: Sequence[FrameLossResult]) -> tuple[tuple[float, float], ...]:
    """(intended, forwarded) of every invalid trial of ``reps`` the DUT did not cause."""
    return tuple((x, y) for rep in reps for p in rep.curve or () if p.valid is False and p.backpressure is not True
                 and (x := finite(p.intended_pps)) is not None and (y := finite(p.forwarded_pps)) is not None)


def collapse_point(pts: list[Point]) -> Point | None:
    """The point of highest forwarded rate when forwarding falls by more than 10 % at a higher
    intended load (receive livelock), else ``None``."""
    if len(pts) < 2:
        return None
    best = max(pts, key=lambda p: p.forwarded.value)
    after = [p for p in pts if p.intended_pps > best.intended_pps]
    if after and min(p.forwarded.value for p in after) < 0.9 * best.forwarded.value:
        return best
    return None


def table(run: RunView) -> Table:
    t = Table(["frame size", "max loss-free rate", "% line rate", "peak forwarded", "forwarding collapses",
               "at 100 % intended: forwarded", "loss"])
    for f in entries(run):
        size = f.frame_size
        mlf = f.max_lossfree
        peak = max(f.points, key=lambda p: p.forwarded.value)
        topp = f.points[-1]
        col = f.collapse
        t.add([fmt.size(size), fmt.fps_stat(mlf), fmt.pct(run.pct_of_line_rate(size, mlf.value) if mlf else None),
               fmt.fps(peak.forwarded.value),
               f"above {fmt.fps(col.intended_pps)} intended" if col else ("livelock" if f.livelock else "no"),
               fmt.fps(topp.forwarded.value), fmt.pct(topp.loss_pct.value, 2)])
    measured = {frame_size_label(e.frame_size) for e in entries(run)}
    for r in run.frame_results(METHOD_NAME, FrameLossResult):
        why = not_measured(r)
        if why and frame_size_label(r.frame_size) not in measured:
            t.add([fmt.size(r.frame_size), fmt.not_measured(why), *[fmt.DASH] * 5])
    return t


def points_table(run: RunView) -> Table:
    t = Table(["frame size", "intended", "% line rate", "forwarded (median, min–max)", "loss"])
    for f in entries(run):
        for p in reversed(f.points):
            t.add([fmt.size(f.frame_size), fmt.fps(p.intended_pps), fmt.pct(p.intended_pct),
                   fmt.fps_stat(p.forwarded), fmt.pct(p.loss_pct.value, 3)],
                  "lossy" if p.loss_pct.value > 0 else "")
    return t


@plot("forwarded_vs_intended")
def forwarded_vs_intended_plot(runs: Sequence[RunView]) -> Figure | None:
    """RFC 2544 frame loss sweep as forwarded rate against the intended load, one panel per frame size;
    marks the maximum loss-free rate and where forwarding collapses (receive livelock)."""
    sizes: dict[str, Any] = {}
    for r in runs:
        for entry in entries(r):
            sizes.setdefault(frame_size_label(entry.frame_size), entry.frame_size)
    if not sizes:
        return None
    ordered = sorted(sizes.values(), key=frame_size_sort_key)
    fig, axes = facets(len(ordered))
    for ax, size in zip(axes, ordered):
        shown: list[float] = []
        for i, r in enumerate(runs):
            f: Entry | None = next((x for x in entries(r)
                                   if frame_size_label(x.frame_size) == frame_size_label(size)), None)
            if f is None:
                continue
            c = run_colour(i)
            pts = f.points
            xs = [p.intended_pps for p in pts]
            fw = [p.forwarded for p in pts]
            ax.errorbar(xs, [s.value for s in fw], yerr=yerr(fw), color=c, marker="o", label=r.name)
            mark_invalid(ax, [x for x, _ in f.invalid], [y for _, y in f.invalid], c)
            shown += xs + [s.hi for s in fw] + [s.lo for s in fw] + [v for p in f.invalid for v in p]
            mlf = f.max_lossfree
            if mlf is not None:
                who = f"{r.name}: " if len(runs) > 1 else ""
                ax.plot([mlf.value], [mlf.value], marker="*", ms=13, color=c, mec="black", mew=0.6, ls="none",
                        zorder=6, label=f"{who}max loss-free rate")
                ax.annotate(f"{si(mlf.value)}fps", (mlf.value, mlf.value), xytext=(-6, 8 + 10 * i),
                            textcoords="offset points",
                            ha="right", fontsize=7.5, color=c)
            col = f.collapse
            if col is not None:
                who = f"{r.name}: " if len(runs) > 1 else ""
                ax.axvline(col.intended_pps, color=c, ls=":", lw=1.2,
                           label=f"{who}forwarding collapses above {si(col.intended_pps)}fps intended")
        diagonal_axes(ax, shown)
        ax.set_xlabel("intended load (frames/s)")
        ax.set_ylabel("forwarded (frames/s)")
        ax.set_title(f"Forwarded vs intended load — {size_title(size)}")
        _pct_top_axis(ax, runs, size)
    fig_legend(fig, axes)
    return fig


def _pct_top_axis(ax: Any, runs: Sequence[RunView], size: Any) -> None:
    """A secondary top x axis in % of line rate when every run has the same line rate."""
    lrs = {round(v, 3) for r in runs if (v := r.line_rate_pps(size))}
    if len(lrs) != 1:
        return
    lr = lrs.pop()
    sec = ax.secondary_xaxis("top", functions=(lambda x: x * 100 / lr, lambda p: p * lr / 100))
    sec.set_xlabel("intended load (% of line rate)", fontsize=8)
    sec.xaxis.set_major_formatter(ticker().FuncFormatter(lambda v, _: f"{v:g}"))


@plot("frame_loss")
def frame_loss_plot(runs: Sequence[RunView]) -> Figure | None:
    """RFC 2544 §26.3 frame loss rate: loss (% of the frames sent) against intended load (% of line
    rate), one line per configuration and frame size."""
    series = [(i, r, f) for i, r in enumerate(runs) for f in entries(r)]
    if not series:
        return None
    fig, axes = subplots(h=3.4)
    ax = axes[0][0]
    styles = ("-", "--", "-.", ":")
    markers = ("o", "s", "^", "D", "v", "P")
    sizes = sorted({frame_size_label(f.frame_size) for _, _, f in series},
                   key=lambda s: frame_size_sort_key(size_from_label(s)))
    use_pct = all(p.intended_pct is not None for _, _, f in series for p in f.points)
    for i, r, f in series:
        k = sizes.index(frame_size_label(f.frame_size))
        xs = [p.intended_pct if use_pct else p.intended_pps for p in f.points]
        ls = [p.loss_pct for p in f.points]
        label = size_title(f.frame_size) if len(runs) == 1 else f"{r.name}, {size_title(f.frame_size)}"
        ax.errorbar(xs, [s.value for s in ls], yerr=yerr(ls), color=run_colour(i if len(runs) > 1 else k),
                    ls=styles[k % len(styles)] if len(runs) > 1 else "-", marker=markers[k % len(markers)], label=label)
    ax.set_xlabel("intended load (% of line rate)" if use_pct else "intended load (frames/s)")
    log_x = not use_pct and rate_axis(ax, [p.intended_pps for _, _, f in series for p in f.points], "x")
    ax.set_ylabel("frame loss (% of the frames sent)")
    ax.set_ylim(bottom=-2, top=max(5.0, ax.get_ylim()[1]))
    if not log_x:
        ax.set_xlim(left=0)
    ax.set_title("Frame loss rate vs intended load")
    legend(ax, loc="upper left")
    return fig


# --------------------------------------------------------------------------------------------- #
# The method

METHOD_NAME = "rfc2544_frame_loss"
SECTION = Section("frame-loss", "Forwarded vs intended load (frame loss rate)", shown_when_empty=True)


class FrameLoss(Method):
    name = METHOD_NAME
    event_trials = "rate"
    label = "RFC 2544 §26.3 frame loss rate"
    short_name = "frame_loss"
    answer_label = "RFC 2544 §26.3 highest loss-free load"
    params_type = FrameLossParams
    rfc_duration_s = 60.0
    sections = (SECTION,)
    plots = (forwarded_vs_intended_plot, frame_loss_plot)
    console_columns = (f"max loss-free {rates.INTENDED} fps", "% line rate", "points", "livelock")
    shortcut = Shortcut(RFC2544, "frame-loss")
    cli_fields = {"step_pct": "--step"}

    def run(self, params: FrameLossParams, ctx: Context) -> FrameLossResult:
        return measure_frame_loss(ctx.measurer, ctx.frame, ctx.line_rate, params, ctx.tester_limit)

    def estimate_trials(self, params: FrameLossParams, frame: FrameSize, line_fps: float) -> int:
        return max(2, int((params.start_pct - params.min_pct) / params.step_pct / 2) + 2)

    def top_rate_pct(self, params: FrameLossParams) -> float:
        return params.start_pct

    def zero_loss_bounds(self, repetition: dict, params: dict) -> tuple[float, float | None, str] | None:
        """The highest loss-free load, and the lowest load above it the DUT failed (lost frames or
        slowed the sender)."""
        pts = from_dict(FrameLossResult, repetition, partial=True).curve or ()
        lossfree = [x for p in pts if p.valid is True and finite(p.loss_ratio) == 0.0
                    and (x := finite(p.intended_pps)) is not None]
        if not lossfree:
            return None
        lower = max(lossfree)
        failed = [x for p in pts if (x := finite(p.intended_pps)) is not None and x > lower
                  and (p.backpressure is True or (p.valid is True and (finite(p.loss_ratio) or 0) > 0))]
        p: FrameLossParams | None = self.read_params(params)
        d = finite(p.duration_s) if p is not None else None
        basis = f"RFC 2544 frame loss: a load is loss-free when its one {d or 0:g} s trial loses no frames"
        return lower, min(failed) if failed else None, basis

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        r = read_frame_results(result, FrameLossResult)
        h, v = r.headline, r.spread("max_lossfree_pps").median
        curve = (r.repetitions[0].curve or ()) if r.repetitions else ()
        why = not_measured(r)
        none = fmt.not_measured(why) if why else "none"
        return [[fmt.size(r.frame_size), format_pps(v) if v is not None else none,
                 f"{h.pct_line_rate or 0:.2f}" if h else "-", str(len(curve)),
                 "yes" if any(x.curve is not None and x.livelock for x in r.repetitions) else "no", flags]]

    def html(self, run: RunView) -> dict[str, str]:
        fl = figure(forwarded_vs_intended_plot, [run])
        if fl:
            fl += figure(frame_loss_plot, [run]) + table_html(table(run))
            fl += details("Every load point", table_html(points_table(run)))
        return {SECTION.id: fl or empty(NONE)}

    def compare_html(self, runs: Sequence[RunView]) -> dict[str, str]:
        fl = figure(forwarded_vs_intended_plot, runs)
        return {SECTION.id: fl + figure(frame_loss_plot, runs) if fl
                else empty("No RFC 2544 frame loss sweep in these results.")}

    def markdown(self, run: RunView) -> str:
        return section_md("Frame loss rate (forwarded vs intended load)", table_md(table(run)), NONE)

    def ratio_table(self, runs: Sequence[RunView]) -> tuple[str, Table] | None:
        t = Table(ratio_header([r.name for r in runs]))
        data = [by_size(entries(r)) for r in runs]
        for lab in sizes_of(data):
            vals = [(m.value if lab in d and (m := d[lab].max_lossfree) else None) for d in data]
            row = [fmt.size(size_of_label(lab)), fmt.fps(vals[0])]
            for v in vals[1:]:
                row += [fmt.fps(v), fmt.ratio_pct(v, vals[0])]
            t.add(row)
        return ("Maximum loss-free rate (frame loss sweep)", t) if t else None

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        option(parser, "--step", "frame loss rate step, %% of line rate [10]", default="10")

    def cli_params(self, args: argparse.Namespace) -> dict:
        return {"step_pct": args.step}


METHOD = FrameLoss()
