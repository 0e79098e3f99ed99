"""Receive livelock (Mogul & Ramakrishnan): the maximum loss-free forwarding rate (MLFRR), the
collapse above it, and what a forwarded frame costs in CPU.

The sweep's loads are placed around the DUT's capacity, found first: the run's throughput at the
frame size when an earlier method measured one, else a throughput search of the sweep's own (its
trials are points of the curve too). ``points`` loads then show the forwarded rate rising (evenly
up to the capacity) and flattening and, if it does, falling (geometrically from the capacity up to
``max_pct`` of line rate, or the tester's limit): no grid lies wholly above the DUT's capacity,
where it would show neither the knee nor the rise (on the acl test bed with 3 000 rules every load
of an even grid from 5 % of line rate was above it). A DUT that passes the top load has no knee in
reach: its loads are then evenly spaced from ``min_pct`` to the top, all loss-free. The loads
around the first lossy one are then bisected to ``resolution_pct``, so the measured maximum
loss-free load is known to that resolution. The livelock model is fitted to the lossy loads:

    fwd(r) = r                   for r ≤ C    (C: the MLFRR)
    fwd(r) = C − s · (r − C)     for r > C    (s: the collapse slope, forwarded frames lost per
                                               extra frame intended; 0 for a DUT that just caps)

by least squares of the line ``fwd = a + b·r`` over the lossy loads before the forwarded rate
levels off at a floor (the longest run of them the line fits within ``fit_tolerance``); its
intersection with ``fwd = r`` is the fitted MLFRR ``C = a / (1 − b)`` and ``s = −b``. Invalid trials
(the tester could not send the load) are left out of the fit and flagged, never read as collapse.

Backpressure (:class:`netrig.methodology.tester.Verdict`): a trial in which the DUT slowed the
sender below a load the self-test proved is the DUT failing that load, as in every search: the
knee bisection counts it as a failed load, so the measured maximum loss-free load is below it. Its
point is drawn in the curve, flagged, at what the DUT forwarded per second while it held the
sender back (frames received over the trial's real sending time). It is not fitted: the model
describes a receiver that drops what it cannot take, and a DUT that throttles its sender (on veth
its forwarding runs in softirq on the sender's CPU) cannot collapse — the report says so instead of
fitting a slope to the tester's slowed sending.

CPU: the DUT's CPU-seconds during each trial divided by the frames forwarded, at loads below the
knee, is the per-packet cost (ns per forwarded frame). Behind a test bed's wire that is the DUT's
CPUs' busy time less the tester's receive path there (their softirq time, ``DutRing``), exact per
trial (``netrig.monitor.cpu``); without the wire (older results, other placements) the host's
softirq CPU-seconds, which on veth include the tester's own kernel receive path: compare those
between configurations rather than reading them as the DUT's alone.

Two configurations (coalescing or GRO on and off, say) overlay in ``netrig compare``.
"""
from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from netrig.measure import Load, Measurer, TrialCounts
from netrig.methodology.method import Command, Context, Method, Section, Shortcut
from netrig.methodology.stats import check
from netrig.methodology.tester import NO_LIMIT, ProvenLimit, Verdict
from netrig.methodology.vocabulary import option
from netrig.methods.throughput import ThroughputParams, measure_throughput
from netrig.model import FrameSize, LineRate, defaults, format_ns, format_pps, rate_object, rates
from netrig.view import fmt
from netrig.view.frame_results import read_frame_results
from netrig.view.html import esc, figure, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.plotkit import (
    diagonal_axes,
    facets,
    fig_legend,
    mark_invalid,
    mark_lower_bounds,
    plot,
    run_colour,
    si,
    size_title,
)
from netrig.view.run_view import RunView, Stat, frame_size_label, frame_size_sort_key
from netrig.view.table import Table, by_size, ratio_header, size_of_label, sizes_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class LivelockParams:
    """``points`` loads from ``min_pct`` to ``max_pct`` (% of line rate), each held ``duration_s``;
    the knee bisected to ``resolution_pct`` (% of line rate); the model fitted where it stays within
    ``fit_tolerance`` (relative) of every fitted load."""

    duration_s: float = defaults.TRIAL_DURATION_S
    points: int = 12
    min_pct: float = 5.0
    max_pct: float = 100.0
    resolution_pct: float = 0.5
    fit_tolerance: float = 0.02
    repetitions: int | None = None

    def __post_init__(self) -> None:
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        check("points", self.points, lo=3, hi=200, integer=True)
        check("max_pct", self.max_pct, lo=0, lo_open=True, hi=1000)
        check("min_pct", self.min_pct, lo=0, lo_open=True, hi=self.max_pct, hi_open=True)
        check("resolution_pct", self.resolution_pct, lo=0, lo_open=True, hi=100)
        check("fit_tolerance", self.fit_tolerance, lo=0, lo_open=True, hi=0.5)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class LoadPoint:
    """One trial of the sweep: the load asked for (intended), what the tester sent (achieved) and the DUT
    forwarded."""

    intended_pps: float
    achieved_pps: float
    forwarded_pps: float
    loss_ratio: float
    valid: bool
    #: The DUT's CPU-seconds during the trial (behind the wire: its CPUs' busy time less the tester's
    #: share; otherwise the host's softirq time; ``None`` without accounting). Stored as ``softirq_s``.
    softirq_s: float | None = None
    #: Invalid because the DUT slowed the sender below a load the self-test proved (a DUT result:
    #: the load failed; ``forwarded_pps`` is per second of the real, slowed sending).
    backpressure: bool = False

    @property
    def lossy(self) -> bool:
        return self.loss_ratio > 0

    @property
    def failed(self) -> bool:
        """The DUT did not take this load: it lost frames, or it held the sender back."""
        return self.backpressure or (self.valid and self.lossy)

    def to_dict(self) -> dict:
        return {"intended_pps": self.intended_pps, "achieved_pps": self.achieved_pps,
                "forwarded_pps": self.forwarded_pps, "loss_ratio": self.loss_ratio, "valid": self.valid,
                "softirq_s": self.softirq_s, "backpressure": self.backpressure}


@dataclass(frozen=True)
class LivelockResult:
    frame: FrameSize
    line_rate: LineRate
    points: tuple[LoadPoint, ...]
    #: The highest load forwarded without loss (measured, to ``resolution_pps``).
    max_lossfree_pps: float | None
    resolution_pps: float
    #: The fitted knee (MLFRR) and collapse slope; ``None`` when no load was lossy.
    mlfrr_pps: float | None
    collapse_slope: float | None
    #: Loads the model was fitted to.
    fit_points: int
    #: Softirq CPU per forwarded frame below the knee, ns (``None`` without monitoring).
    cpu_ns_per_frame: float | None
    #: The DUT's capacity the loads were placed around (``None``: evenly from ``min_pct`` to the top,
    #: which the DUT passed — or a result older than 2026-11-28), and where it came from.
    capacity_pps: float | None = None
    capacity_from: str | None = None
    #: The highest load of the sweep, and whether the DUT passed it (then no knee was in reach).
    top_pps: float | None = None

    @property
    def knee_in_reach(self) -> bool:
        """Some valid load failed: the sweep crossed the DUT's capacity."""
        return any(p.failed for p in self.points)

    @property
    def backpressure_trials(self) -> int:
        return sum(1 for p in self.points if p.backpressure)

    @property
    def backpressure_from_pps(self) -> float | None:
        """The lowest load at which the DUT slowed the sender."""
        return min((p.intended_pps for p in self.points if p.backpressure), default=None)

    @property
    def floor_pps(self) -> float | None:
        """The lowest forwarded rate above the knee (where the collapse levels off)."""
        lossy = [p.forwarded_pps for p in self.points if p.valid and p.lossy]
        return min(lossy) if lossy else None

    @property
    def headline_pps(self) -> float | None:
        return self.mlfrr_pps if self.mlfrr_pps is not None else self.max_lossfree_pps

    def stats_values(self) -> dict[str, float | None]:
        return {"mlfrr_pps": self.mlfrr_pps, "max_lossfree_pps": self.max_lossfree_pps,
                "collapse_slope": self.collapse_slope, "cpu_ns_per_frame": self.cpu_ns_per_frame}

    def to_dict(self) -> dict:
        return {"points": [p.to_dict() for p in sorted(self.points, key=lambda p: p.intended_pps)],
                "mlfrr_pps": self.mlfrr_pps, "mlfrr": rate_object(self.mlfrr_pps, self.frame, self.line_rate),
                "max_lossfree_pps": self.max_lossfree_pps, "resolution_pps": self.resolution_pps,
                "collapse_slope": self.collapse_slope, "floor_pps": self.floor_pps, "fit_points": self.fit_points,
                "cpu_ns_per_frame": self.cpu_ns_per_frame, "backpressure_trials": self.backpressure_trials,
                "backpressure_from_pps": self.backpressure_from_pps, "capacity_pps": self.capacity_pps,
                "capacity_from": self.capacity_from, "top_pps": self.top_pps, "knee_in_reach": self.knee_in_reach}


def softirq_seconds(c: TrialCounts) -> float | None:
    """Softirq CPU-seconds of all CPUs during a trial: exact from the trial's CPU accounting (every
    engine trial), else from its DUT monitor's samples between the trial's marks."""
    if (cpu := c.cpu_usage) is not None:
        return cpu.total("softirq")
    return m.cpu_seconds("softirq") if (m := c.dut_monitor) is not None else None


def fit(points: Sequence[LoadPoint], tolerance: float) -> tuple[float, float, int] | None:
    """``(knee C, slope s, loads used)`` of the livelock model over the lossy loads, or ``None``."""
    lossy = sorted((p for p in points if p.valid and p.lossy), key=lambda p: p.intended_pps)
    for k in range(len(lossy), 0, -1):  # the longest run of lossy loads from the knee the line fits
        pts = lossy[:k]
        if k == 1:  # one lossy load: the line through it and the knee on the diagonal
            clean = [p.intended_pps for p in points if p.valid and not p.lossy and p.intended_pps < pts[0].intended_pps]
            if not clean:
                return None
            r, f = pts[0].intended_pps, pts[0].forwarded_pps
            if f >= max(clean):  # it forwarded more than the last loss-free load: a cap at f, as far as one load tells
                return f, 0.0, 1
            knee = max(clean)
            return knee, (knee - f) / (r - knee), 1
        xs, ys = [p.intended_pps for p in pts], [p.forwarded_pps for p in pts]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
        a = my - b * mx
        if b >= 1 or any(abs(a + b * x - y) > tolerance * y for x, y in zip(xs, ys)):
            continue
        return a / (1 - b), -b, k
    return None


#: The share of the sweep's loads at or below the DUT's capacity (the forwarded rate rising).
BELOW_SHARE = 1 / 3


def sweep_loads(capacity_pps: float | None, bottom_pps: float, top_pps: float, points: int) -> list[float]:
    """``points`` loads around ``capacity_pps``: evenly up to it (its last share, ``BELOW_SHARE``, at
    and below it), then geometrically from it to ``top_pps``; evenly from ``bottom_pps`` to
    ``top_pps`` without a capacity below the top."""
    if capacity_pps is None or capacity_pps <= 0 or capacity_pps >= top_pps * (1 - 1e-9):
        step = (top_pps - bottom_pps) / (points - 1)
        return [bottom_pps + i * step for i in range(points)]
    below = max(2, round(points * BELOW_SHARE))
    above = points - below
    ratio = (top_pps / capacity_pps) ** (1 / above)
    return [capacity_pps * k / below for k in range(1, below + 1)] + [capacity_pps * ratio ** k
                                                                      for k in range(1, above + 1)]


class _Sweep:
    """The sweep's trials, every one a point of the curve (a throughput search's too)."""

    def __init__(self, measurer: Measurer, frame: FrameSize, duration_s: float, limit: ProvenLimit):
        self.measurer, self.frame, self.duration_s, self.limit = measurer, frame, duration_s, limit
        self.points: list[LoadPoint] = []

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        """The measurer seam's one trial (for a search run on this sweep): measured, and kept as a point."""
        c = self.measurer.measure(load, duration_s)
        held_back = self.limit.verdict(c, load.rate_pps) is Verdict.BACKPRESSURE
        # Held back: per second of the real (slowed) sending, not of the planned duration.
        fwd = c.achieved_pps * c.frames_received / c.frames_sent if held_back and c.frames_sent else \
            c.frames_received / duration_s
        cpu_s = c.dut_ring.dut_cpu_s if c.dut_ring is not None and c.dut_ring.dut_cpu_s is not None else \
            softirq_seconds(c)
        self.points.append(LoadPoint(load.rate_pps, c.achieved_pps, fwd, c.loss_ratio, c.valid, cpu_s, held_back))
        return c

    def trial(self, rate: float) -> LoadPoint:
        self.measure(Load(rate, self.frame), self.duration_s)
        return self.points[-1]

    def capacity(self, line_rate: LineRate, params: LivelockParams, top_pps: float) -> float | None:
        """The highest load the DUT passes, by a throughput search up to ``top_pps`` to the sweep's
        resolution; ``None`` when it passes the top (no knee in reach) or nothing."""
        line_fps = line_rate.fps(self.frame)
        top_pct = 100 * top_pps / line_fps
        r = measure_throughput(cast(Measurer, self), self.frame, line_rate, ThroughputParams(
            duration_s=self.duration_s, resolution_pct=params.resolution_pct, initial_rate_pct=top_pct,
            max_rate_pct=top_pct), self.limit)
        return r.rate_pps if r.found and r.upper_pps is not None else None


def _knee(sweep: _Sweep, res: float) -> float | None:
    """The highest loss-free load below every failed one, bisected to ``res`` against the lowest failed."""
    ok = [p.intended_pps for p in sweep.points if p.valid and not p.lossy]
    bad = [p.intended_pps for p in sweep.points if p.failed]
    lo = max((r for r in ok if not bad or r < min(bad)), default=None)
    hi = min(bad) if bad else None
    if lo is None or hi is None:
        return lo
    while hi - lo > res * (1 + 1e-9):
        mid = (lo + hi) / 2
        p = sweep.trial(mid)
        if not (p.valid or p.backpressure):
            break
        lo, hi = (mid, hi) if not p.failed else (lo, mid)
    return lo


def measure_livelock(measurer: Measurer, frame: FrameSize, line_rate: LineRate,
                     params: LivelockParams = LivelockParams(), limit: ProvenLimit = NO_LIMIT,
                     throughput_pps: float | None = None) -> LivelockResult:
    """Find the capacity (``throughput_pps``, the run's, or a search), sweep around it, bisect the
    knee, fit the model; the sweep ends at the highest load the tester vouches for (the self-test's
    proven ceiling / factor) when that is below ``max_pct``."""
    line_fps = line_rate.fps(frame)
    res = params.resolution_pct / 100 * line_fps
    top = limit.cap(params.max_pct / 100 * line_fps)
    bottom = min(params.min_pct / 100 * line_fps, top * params.min_pct / params.max_pct)
    sweep = _Sweep(measurer, frame, params.duration_s, limit)
    if throughput_pps:  # the run's: the DUT passed the top already when it is no lower
        capacity, source = (throughput_pps if throughput_pps < top * (1 - 1e-9) else None), "the run's throughput"
    else:
        capacity, source = sweep.capacity(line_rate, params, top), "the sweep's throughput search"
    measured = {round(p.intended_pps, 3) for p in sweep.points}
    for rate in sweep_loads(capacity, bottom, top, params.points):
        if round(rate, 3) not in measured:
            sweep.trial(rate)
    lo = _knee(sweep, res)
    points = sweep.points
    hi = min((p.intended_pps for p in points if p.failed), default=None)
    fitted = fit(points, params.fit_tolerance) if hi is not None else None
    cpu = [p.softirq_s / (p.forwarded_pps * params.duration_s) for p in points
           if p.valid and not p.lossy and p.softirq_s is not None and p.forwarded_pps > 0]
    return LivelockResult(
        frame, line_rate, tuple(points), lo, res,
        fitted[0] if fitted else None, fitted[1] if fitted else None, fitted[2] if fitted else 0,
        statistics.median(cpu) * 1e9 if cpu else None, capacity, source if capacity is not None else None, top)


# --------------------------------------------------------------------------------------------- #
# Reading it back from results

METHOD_NAME = "livelock"


@dataclass(frozen=True)
class LoadStat:
    """One load of a frame size in a report: what was forwarded there over the repetitions."""

    intended_pps: float
    forwarded: Stat


@dataclass(frozen=True)
class Entry:
    """One frame size of a run as the report draws it: its loads (held-back ones apart), the
    fitted model's stats over repetitions, the loads fitted and where backpressure began."""

    frame_size: Any
    points: list[LoadStat]
    held_back: list[LoadStat]
    backpressure_from: float | None
    mlfrr: Stat | None
    max_lossfree: Stat | None
    slope: Stat | None
    cpu_ns: Stat | None
    fit_points: int
    #: Some repetition's sweep crossed the DUT's capacity (a load failed).
    knee_in_reach: bool = True
    #: The invalid loads (the tester's problem): (intended, forwarded) frames/s of each.
    invalid: tuple[tuple[float, float], ...] = ()


def _loads(reps: Sequence[LivelockResult]) -> tuple[dict[float, list[float]], dict[float, list[float]]]:
    """Forwarded rates by load over the repetitions: the valid loads, and those held back."""
    by_load: dict[float, list[float]] = {}
    held: dict[float, list[float]] = {}
    for rep in reps:
        for p in rep.points or ():
            if p.intended_pps is None or p.forwarded_pps is None:
                continue
            if p.backpressure is True:
                held.setdefault(round(p.intended_pps, 1), []).append(p.forwarded_pps)
            elif p.valid is not False:
                by_load.setdefault(round(p.intended_pps, 1), []).append(p.forwarded_pps)
    return by_load, held


def entries(run: RunView) -> list[Entry]:
    """Per frame size of ``run`` that has loads, its :class:`Entry`, in frame-size order."""
    out = []
    for r in run.frame_results(METHOD_NAME, LivelockResult):
        by_load, held = _loads(r.repetitions)
        pts = [LoadStat(off, s) for off, v in sorted(by_load.items()) if (s := Stat.over(v))]
        held_back = [LoadStat(off, s) for off, v in sorted(held.items()) if (s := Stat.over(v))]
        if not pts and not held_back:
            continue
        out.append(Entry(r.frame_size, pts, held_back, min(held) if held else None,
                         Stat.from_spread(r.spread("mlfrr_pps")), Stat.from_spread(r.spread("max_lossfree_pps")),
                         Stat.from_spread(r.spread("collapse_slope")), Stat.from_spread(r.spread("cpu_ns_per_frame")),
                         max((int(x.fit_points or 0) for x in r.repetitions), default=0),
                         any(x.knee_in_reach for x in r.repetitions),
                         tuple((p.intended_pps, p.forwarded_pps) for x in r.repetitions for p in x.points or ()
                               if p.valid is False and p.backpressure is not True
                               and p.intended_pps is not None and p.forwarded_pps is not None)))
    out.sort(key=lambda e: frame_size_sort_key(e.frame_size))
    return out


def table(run: RunView) -> Table:
    t = Table(["frame size", "MLFRR (fitted knee)", "% line rate", "max loss-free (measured)", "collapse slope",
               "forwarded at the top load", "DUT CPU per frame", "loads fitted", "DUT slowed the sender from"],
              caption="median of repetitions (min–max of repetitions); \"DUT slowed the sender\": loads at which "
                      "the DUT held the tester back (backpressure) instead of dropping — failed loads, not fitted")
    for e in entries(run):
        size, mlfrr, slope = e.frame_size, e.mlfrr, e.slope
        top = max(e.points + e.held_back, key=lambda p: p.intended_pps)
        t.add([fmt.size(size), fmt.fps_stat(mlfrr), fmt.pct(run.pct_of_line_rate(size, mlfrr.value) if mlfrr else None),
               fmt.fps_stat(e.max_lossfree), f"{slope.value:.3f}" if slope else fmt.DASH,
               fmt.fps(top.forwarded.value), fmt.ns(e.cpu_ns.value if e.cpu_ns else None),
               str(e.fit_points or fmt.DASH), fmt.fps(e.backpressure_from)])
    return t


def no_fit_notes(run: RunView) -> list[str]:
    """Why a frame size has no fitted model: its loads failed by backpressure only, or none failed."""
    out = []
    for e in entries(run):
        if e.mlfrr is None and e.held_back:
            out.append(f"{fmt.size(e.frame_size)}: no collapse to fit — from {fmt.fps(e.backpressure_from)} intended "
                       "the DUT slowed the sender instead of dropping frames (backpressure; on veth its forwarding "
                       "runs in softirq on the sender's CPU), so it cannot livelock on this test bed. The knee is the "
                       "measured maximum loss-free load; the held-back loads are drawn as open triangles, not fitted.")
        elif not e.knee_in_reach:
            top = max(p.intended_pps for p in e.points) if e.points else None
            out.append(f"{fmt.size(e.frame_size)}: no knee in reach — the DUT forwarded every load up to "
                       f"{fmt.fps(top)} intended without loss (the sweep's top: max_pct, or what the tester "
                       "proved); its capacity is above it.")
    return out


@plot("livelock")
def livelock_plot(runs: Sequence[RunView]) -> Figure | None:
    """Receive livelock: forwarded rate against intended load per frame size, with the fitted model
    (dashed: forwarded = intended up to the MLFRR, then the collapse line) and its knee (star); loads
    at which the DUT held the sender back are open triangles (the star then marks the measured
    maximum loss-free load)."""
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
            e = next((x for x in entries(r) if frame_size_label(x.frame_size) == frame_size_label(size)), None)
            if e is not None:
                shown += _draw_entry(ax, e, run_colour(i), f"{r.name}: " if len(runs) > 1 else "", i)
        diagonal_axes(ax, shown)
        ax.set_xlabel("intended load (frames/s)")
        ax.set_ylabel("forwarded (frames/s)")
        ax.set_title(f"Receive livelock — {size_title(size)}")
    fig_legend(fig, axes)
    return fig


def _draw_entry(ax: Any, e: Entry, c: str, who: str, i: int) -> list[float]:
    """One run's frame size on its panel: the measured loads, the held-back and invalid ones (open),
    the knee (a star; an arrow when no load failed: the DUT's capacity is above it) and the fitted
    model; the frames/s drawn."""
    xs = [p.intended_pps for p in e.points]
    ax.plot(xs, [p.forwarded.value for p in e.points], color=c, marker="o", ls="none", label=f"{who}measured")
    if e.held_back:
        hx = [p.intended_pps for p in e.held_back]
        ax.plot(hx, [p.forwarded.value for p in e.held_back], color=c, marker="^", mfc="none", ls="none",
                label=f"{who}DUT slowed the sender (backpressure), per second of real sending")
        xs = xs + hx
    mark_invalid(ax, [x for x, _ in e.invalid], [y for _, y in e.invalid], c)
    shown = xs + [p.forwarded.value for p in e.points + e.held_back] + [v for p in e.invalid for v in p]
    if e.max_lossfree is not None and e.mlfrr is None:
        k = e.max_lossfree.value
        if e.knee_in_reach:
            ax.plot([k], [k], marker="*", ms=13, color=c, mec="black", mew=0.6, ls="none", zorder=6)
        else:
            mark_lower_bounds(ax, [k], [k], c)
        ax.annotate(f"max loss-free {'≥ ' if not e.knee_in_reach else ''}{si(k)}fps (no collapse to fit)", (k, k),
                    xytext=(6, -14 - 10 * i), textcoords="offset points", fontsize=7.5, color=c)
    if e.mlfrr is not None and e.slope is not None:
        k, s = e.mlfrr.value, e.slope.value
        mx = max(xs)
        ax.plot([0, k, mx], [0, k, k - s * (mx - k)], color=c, ls="--", lw=1.3, label=f"{who}model")
        ax.plot([k], [k], marker="*", ms=13, color=c, mec="black", mew=0.6, ls="none", zorder=6)
        ax.annotate(f"MLFRR {si(k)}fps, slope {s:.2f}", (k, k), xytext=(6, -14 - 10 * i),
                    textcoords="offset points", fontsize=7.5, color=c)
    return shown


# --------------------------------------------------------------------------------------------- #
# The method

SECTION = Section("livelock", "Receive livelock (MLFRR model)")


class Livelock(Method):
    name = METHOD_NAME
    event_trials = "rate"
    label = "Receive livelock (MLFRR)"
    params_type = LivelockParams
    sections = (SECTION,)
    plots = (livelock_plot,)
    console_columns = (f"MLFRR ({rates.INTENDED} fps)", "% line rate", f"max loss-free {rates.INTENDED} fps",
                       "collapse slope", "DUT CPU / frame")
    shortcut = Shortcut(Command("livelock", "receive livelock: forwarded vs intended load, the MLFRR model fitted",
                                "Sweep the intended load, bisect the knee and fit the receive-livelock model: "
                                "the maximum loss-free forwarding rate (MLFRR), the collapse slope above it, and "
                                "the DUT's CPU per forwarded frame.", sizes_default="64"),
                        "livelock")
    cli_fields = {"points": "--points", "resolution_pct": "--resolution"}
    uses_throughput = True

    def run(self, params: LivelockParams, ctx: Context) -> LivelockResult:
        return measure_livelock(ctx.measurer, ctx.frame, ctx.line_rate, params, ctx.tester_limit, ctx.throughput_pps)

    def estimate_trials(self, params: LivelockParams, frame: FrameSize, line_fps: float) -> int:
        search = int(math.ceil(math.log2(max(2.0, params.max_pct / params.resolution_pct)))) + 1
        return search + params.points
    def top_rate_pct(self, params: LivelockParams) -> float:
        return params.max_pct

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        r = read_frame_results(result, LivelockResult)
        m, ml = r.spread("mlfrr_pps").median, r.spread("max_lossfree_pps").median
        s, cpu = r.spread("collapse_slope").median, r.spread("cpu_ns_per_frame").median
        pct = r.headline.pct_line_rate if r.headline else None
        return [[fmt.size(r.frame_size), format_pps(m) if m is not None else "none",
                 f"{pct:.2f}" if m is not None and pct is not None else "—",
                 format_pps(ml) if ml is not None else "none",
                 f"{s:.3f}" if s is not None else "-", format_ns(cpu) if cpu is not None else "-", flags]]

    def html(self, run: RunView) -> dict[str, str]:
        t = table(run)
        notes = "".join(f"<p class=\"note\">{esc(n)}</p>" for n in no_fit_notes(run))
        return {SECTION.id: figure(livelock_plot, [run]) + table_html(t) + notes} if t else {}

    def compare_html(self, runs: Sequence[RunView]) -> dict[str, str]:
        f = figure(livelock_plot, runs)
        return {SECTION.id: f} if f else {}

    def markdown(self, run: RunView) -> str:
        t = table(run)
        notes = "".join(f"\n{n}\n" for n in no_fit_notes(run))
        return section_md("Receive livelock (MLFRR model)", table_md(t) + notes, "") if t else ""

    def ratio_table(self, runs: Sequence[RunView]) -> tuple[str, Table] | None:
        t = Table(ratio_header([r.name for r in runs]))
        data = [by_size(entries(r)) for r in runs]
        for lab in sizes_of(data):
            vals = [(m.value if lab in d and (m := d[lab].mlfrr) else None) for d in data]
            row = [fmt.size(size_of_label(lab)), fmt.fps(vals[0])]
            for v in vals[1:]:
                row += [fmt.fps(v), fmt.ratio_pct(v, vals[0])]
            t.add(row)
        return ("Maximum loss-free forwarding rate (MLFRR, fitted)", t) if t else None

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        option(parser, "--points", "intended loads in the sweep [12]", default="12")
        option(parser, "--resolution", "of the knee bisection [0.5]", default="0.5")

    def cli_params(self, args: argparse.Namespace) -> dict:
        return {"points": args.points, "resolution_pct": args.resolution}


METHOD = Livelock()
