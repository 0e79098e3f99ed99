"""RFC 2544 §26.2 latency at the throughput rate, reported the RFC 8219 way.

RFC 2544 tags one frame per 120 s trial and repeats 20 times. netrig timestamps every frame, so
each trial gives a whole distribution; over the ``trials`` repetitions of the RFC procedure we
report *typical* latency = median of the per-trial medians and *worst case* = median of the
per-trial 99.9th percentiles (RFC 8219 §7.3), plus PDV and IPDV — mean and 99th percentile of
|IPDV| between consecutive frames of a flow (RFC 5481) — as medians of the per-trial values.

The report's latency section is this module's: it also draws latency against intended load from
every trial of the run that measured latency, whatever method ran it.
"""
from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from netrig.measure import LatencySummary, Load, Measurer
from netrig.methodology.method import Context, Method, Section, Shortcut
from netrig.methodology.stats import check, median
from netrig.methodology.vocabulary import option
from netrig.methods.sections import RFC2544
from netrig.model import FrameSize, LineRate, format_ns, format_ns_range, format_pps, rate_object, rates
from netrig.view import fmt
from netrig.view.frame_results import Headline, finite, read_frame_results
from netrig.view.html import empty, figure, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.plotkit import (
    PCT_COLOURS,
    errorbar_sizes,
    facets,
    fig_legend,
    legend,
    ns_to_us,
    plot,
    rate_axis,
    run_colour,
    size_axis,
    size_positions,
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
from netrig.view.trial_record import TrialRecord

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class LatencyParams:
    duration_s: float = 120.0
    trials: int = 20
    rate_pct: float = 100.0  # percent of the throughput rate
    throughput_from: int | None = None
    repetitions: int | None = None

    def __post_init__(self) -> None:
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        check("trials", self.trials, lo=1, integer=True)
        check("rate_pct", self.rate_pct, lo=0, lo_open=True, hi=1000)
        if self.throughput_from is not None:
            check("throughput_from", self.throughput_from, lo=0, integer=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class LatencyResult:
    frame: FrameSize
    line_rate: LineRate
    rate_pps: float
    per_trial: tuple[LatencySummary, ...]
    invalid_trials: int = 0

    def _med(self, attr: str) -> float | None:
        return median(getattr(t, attr) for t in self.per_trial)

    @property
    def typical_ns(self) -> float | None:
        return self._med("p50_ns")

    @property
    def worst_case_ns(self) -> float | None:
        return self._med("p999_ns")

    @property
    def min_ns(self) -> float | None:
        return min((t.min_ns for t in self.per_trial if t.min_ns is not None), default=None)

    @property
    def max_ns(self) -> float | None:
        return max((t.max_ns for t in self.per_trial if t.max_ns is not None), default=None)

    @property
    def mean_ns(self) -> float | None:
        return self._med("mean_ns")

    @property
    def pdv_ns(self) -> float | None:
        return self._med("pdv_ns")

    @property
    def ipdv_ns(self) -> float | None:
        return self._med("ipdv_ns")

    @property
    def ipdv_p99_ns(self) -> float | None:
        return self._med("ipdv_p99_ns")

    @property
    def rate(self) -> dict | None:
        return rate_object(self.rate_pps, self.frame, self.line_rate)

    @property
    def headline_pps(self) -> float | None:
        return self.rate_pps

    def stats_values(self) -> dict:
        return {"typical_ns": self.typical_ns, "worst_case_ns": self.worst_case_ns}

    def to_dict(self) -> dict:
        return {
            "rate_pps": self.rate_pps, "rate": self.rate,
            "per_trial": [t.to_dict() for t in self.per_trial],
            "typical_ns": self.typical_ns, "worst_case_ns": self.worst_case_ns, "min_ns": self.min_ns,
            "mean_ns": self.mean_ns, "max_ns": self.max_ns, "pdv_ns": self.pdv_ns, "ipdv_ns": self.ipdv_ns,
            "ipdv_p99_ns": self.ipdv_p99_ns, "invalid_trials": self.invalid_trials,
        }


def measure_latency(measurer: Measurer, frame: FrameSize, line_rate: LineRate, throughput_pps: float,
                    params: LatencyParams = LatencyParams()) -> LatencyResult:
    rate = max(throughput_pps * params.rate_pct / 100.0, 1.0)
    per_trial: list[LatencySummary] = []
    invalid = 0
    for _ in range(params.trials):
        counts = measurer.measure(Load(rate, frame), params.duration_s)
        if not counts.valid:
            invalid += 1
            continue
        if counts.latency is not None:
            per_trial.append(counts.latency)
    return LatencyResult(frame, line_rate, rate, tuple(per_trial), invalid)


# --------------------------------------------------------------------------------------------- #
# Reading it back from results

NONE = "No RFC 2544 latency measurement in this result."
#: Latency statistics in display order.
LATENCY_NAMES = ("min", "mean", "p50", "p90", "p99", "p99.9", "max", "PDV", "IPDV", "IPDV p99")


@dataclass(frozen=True)
class Entry:
    """One frame size: the rate it was measured at and its latency statistics (``LATENCY_NAMES``:
    min, p50 (typical), p90, p99, p99.9 (worst case), max, PDV, IPDV), each a Stat in ns."""

    frame_size: Any
    rate_pps: float | None
    pcts: dict[str, Stat]


def entries(run: RunView) -> list[Entry]:
    """Per frame size, from the typed repetitions (p90 / p99 from the trial records)."""
    out = []
    for r in run.frame_results(METHOD_NAME, LatencyResult):
        size, reps = r.frame_size, r.repetitions
        pcts: dict[str, Stat] = {}
        for name, stat_key, value in (("p50", "typical_ns", lambda x: x.typical_ns),
                                      ("p99.9", "worst_case_ns", lambda x: x.worst_case_ns)):
            s = Stat.from_spread(r.spread(stat_key)) or Stat.over(finite(value(x)) for x in reps)
            if s:
                pcts[name] = s
        for name, s in (("min", Stat.over(finite(x.min_ns) for x in reps)),
                        ("mean", Stat.over(finite(x.mean_ns) for x in reps)),
                        ("max", Stat.over(finite(x.max_ns) for x in reps)),
                        ("PDV", Stat.over(finite(x.pdv_ns) for x in reps)),
                        ("IPDV", Stat.over(finite(x.ipdv_ns) for x in reps)),
                        ("IPDV p99", Stat.over(finite(x.ipdv_p99_ns) for x in reps))):
            if s:
                pcts[name] = s
        # p90 / p99 are only in the trial records
        trials = [t for t in run.trial_records() if t.method == METHOD_NAME and t.valid
                  and frame_size_label(t.frame_size) == frame_size_label(size)]
        for name, key in (("p90", "p90_ns"), ("p99", "p99_ns"), ("min", "min_ns"), ("max", "max_ns"),
                          ("p50", "p50_ns"), ("p99.9", "p999_ns")):
            if name not in pcts:
                s = Stat.over(_latency(t, key) for t in trials)
                if s:
                    pcts[name] = s
        if not pcts:
            continue
        rate = Stat.over(finite(x.rate_pps) for x in reps)
        if rate is None:
            rate = Stat.over(t.load.rate_pps for t in trials)
        out.append(Entry(size, rate.value if rate else None, {k: pcts[k] for k in LATENCY_NAMES if k in pcts}))
    return out


def _latency(t: TrialRecord, key: str) -> float | None:
    """A trial's latency statistic ``key`` (a ``LatencySummary`` field: ``p99_ns``), ``None`` unmeasured."""
    return finite(getattr(t.latency, key)) if t.latency is not None else None


#: The percentiles of latency against load, with their ``LatencySummary`` fields.
LOAD_PCTS = (("min", "min_ns"), ("p50", "p50_ns"), ("p90", "p90_ns"), ("p99", "p99_ns"), ("p99.9", "p999_ns"),
             ("max", "max_ns"))


@dataclass(frozen=True)
class LoadPoint:
    """One intended load's valid trials: the load (frames/s and % of line rate), their median loss
    (%) and latency percentiles."""

    intended_pps: float
    intended_pct: float | None
    loss_pct: float
    pcts: dict[str, Stat]


@dataclass(frozen=True)
class LoadEntry:
    frame_size: Any
    points: list[LoadPoint]


def load_entries(run: RunView) -> list[LoadEntry]:
    """Latency against intended load from every valid DUT trial with latency data, per frame size
    (at least 2 loads)."""
    groups: dict[str, tuple[Any, dict[float, list[TrialRecord]]]] = {}
    for t in run.trial_records():
        off = t.load.rate_pps
        if t.method == "selftest" or not t.valid or t.kind != "rate" or off is None or _latency(t, "p50_ns") is None:
            continue
        g = groups.setdefault(frame_size_label(t.frame_size), (t.frame_size, {}))
        g[1].setdefault(round(off, 1), []).append(t)
    out = []
    for size, loads in groups.values():
        pts = []
        for off, ts in sorted(loads.items()):
            pcts = {name: st for name, key in LOAD_PCTS if (st := Stat.over(_latency(t, key) for t in ts))}
            loss = statistics.median(100 * t.counts.loss_ratio for t in ts if t.counts is not None)
            pts.append(LoadPoint(off, run.pct_of_line_rate(size, off), loss, pcts))
        if len(pts) >= 2:
            out.append(LoadEntry(size, pts))
    out.sort(key=lambda r: frame_size_sort_key(r.frame_size))
    return out


LAT_COLS = (("min", "min"), ("p50", "median (typical)"), ("p90", "p90"), ("p99", "p99"),
            ("p99.9", "p99.9 (worst case)"), ("max", "max"), ("PDV", "PDV"), ("IPDV", "IPDV"),
            ("IPDV p99", "IPDV p99"))


def table(run: RunView) -> Table:
    t = Table(["frame size", "at rate"] + [c for _, c in LAT_COLS],
              caption="median of repetitions (min–max of repetitions)")
    for e in entries(run):
        t.add([fmt.size(e.frame_size), fmt.fps(e.rate_pps)] + [fmt.ns_stat(e.pcts.get(k)) for k, _ in LAT_COLS])
    return t


@plot("latency_vs_frame_size")
def latency_vs_frame_size_plot(runs: Sequence[RunView]) -> Figure | None:
    """RFC 2544 §26.2 latency at the throughput rate against frame size: min, median (typical),
    p90, p99, p99.9 (worst case) and max; log scale when they span decades; error bars = min/max of
    repetitions."""
    data = [(r, entries(r)) for r in runs]
    if not any(d for _, d in data):
        return None
    pos, labels = size_positions(runs, [e.frame_size for _, d in data for e in d])
    fig, axes = subplots(h=3.8)
    ax = axes[0][0]
    names = ("min", "p50", "p90", "p99", "p99.9", "max") if len(runs) == 1 else ("p50", "p99.9")
    vals: list[float] = []
    for i, (r, d) in enumerate(data):
        off = (i - (len(runs) - 1) / 2) * 0.08 if len(runs) > 1 else 0.0
        for name in names:
            pts = [(pos[frame_size_label(e.frame_size)] + off, e.pcts[name]) for e in d if name in e.pcts]
            if not pts:
                continue
            xs, ss = zip(*pts)
            if len(runs) == 1:
                colour, ls, label = PCT_COLOURS[name], "-", _pct_label(name)
            else:
                colour, ls, label = run_colour(i), "-" if name == "p50" else "--", f"{r.name} {_pct_label(name)}"
            szs = [d[j].frame_size for j, e in enumerate(d) if name in e.pcts]
            errorbar_sizes(ax, xs, szs, ss, ns_to_us, color=colour, ls=ls,
                            marker="o" if name in ("p50", "p99.9") else ".", label=label)
            vals += [s.lo * ns_to_us for s in ss] + [s.hi * ns_to_us for s in ss]
    _latency_axis(ax, vals)
    size_axis(ax, labels)
    ax.set_title("Latency at the throughput rate vs frame size")
    legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def _pct_label(name: str) -> str:
    return {"p50": "median (typical)", "p99.9": "p99.9 (worst case)"}.get(name, name)


def _latency_axis(ax: Any, values: list[float]) -> None:
    """Log scale when latencies span more than a decade (labelled 1-2-5 within decades when
    the span is small); linear from zero otherwise. Values in µs."""
    vals = [v for v in values if v and v > 0]
    if vals and max(vals) / min(vals) > 10:
        ax.set_yscale("log")
        span = max(vals) / min(vals)
        ax.yaxis.set_major_locator(ticker().LogLocator(base=10, subs=(1.0,) if span > 1e3 else (1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ticker().FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(ticker().NullFormatter())
        ax.set_ylabel("latency (µs, log scale)")
    else:
        ax.set_ylim(bottom=0, top=max(vals) * 1.08 if vals else None)
        ax.set_ylabel("latency (µs)")


@plot("latency_vs_load")
def latency_vs_load_plot(runs: Sequence[RunView]) -> Figure | None:
    """Latency percentiles against intended load from every valid trial with latency data, one
    panel per frame size; log scale when they span decades. Hollow markers: trials that lost frames."""
    sizes: dict[str, Any] = {}
    for r in runs:
        for entry in load_entries(r):
            sizes.setdefault(frame_size_label(entry.frame_size), entry.frame_size)
    if not sizes:
        return None
    ordered = sorted(sizes.values(), key=frame_size_sort_key)[:8]
    fig, axes = facets(len(ordered))
    names = ("p50", "p99", "p99.9") if len(runs) == 1 else ("p50", "p99.9")
    for ax, size in zip(axes, ordered):
        groups = [next((x for x in load_entries(r) if frame_size_label(x.frame_size) == frame_size_label(size)), None)
                  for r in runs]
        use_pct = all(p.intended_pct is not None for g in groups if g is not None for p in g.points)
        vals: list[float] = []
        for i, (r, g) in enumerate(zip(runs, groups)):
            if g is None:
                continue
            for name in names:
                pts = [p for p in g.points if name in p.pcts]
                if not pts:
                    continue
                xs = [p.intended_pct if use_pct and p.intended_pct is not None else p.intended_pps for p in pts]
                ss = [p.pcts[name] for p in pts]
                if len(runs) == 1:
                    colour, ls, label = PCT_COLOURS[name], "-", _pct_label(name)
                else:
                    colour, ls, label = run_colour(i), "-" if name == "p50" else "--", f"{r.name} {_pct_label(name)}"
                ax.errorbar(xs, [s.value * ns_to_us for s in ss], yerr=yerr(ss, ns_to_us), color=colour, ls=ls,
                            marker=None, label=label)
                vals += [s.lo * ns_to_us for s in ss] + [s.hi * ns_to_us for s in ss]
                lossy = [(x, s) for x, s, p in zip(xs, ss, pts) if p.loss_pct > 0]
                clean = [(x, s) for x, s, p in zip(xs, ss, pts) if p.loss_pct <= 0]
                if clean:
                    ax.plot([x for x, _ in clean], [s.value * ns_to_us for _, s in clean], ls="none", marker="o",
                            color=colour, ms=4)
                if lossy:
                    ax.plot([x for x, _ in lossy], [s.value * ns_to_us for _, s in lossy], ls="none", marker="o",
                            mfc="white", color=colour, ms=4)
        _latency_axis(ax, vals)
        ax.set_xlabel("intended load (% of line rate)" if use_pct else "intended load (frames/s)")
        if not use_pct:
            rate_axis(ax, [p.intended_pps for g in groups if g is not None for p in g.points], "x")
        ax.set_title(f"Latency vs intended load — {size_title(size)}")
    fig_legend(fig, axes)
    return fig


# --------------------------------------------------------------------------------------------- #
# The method

METHOD_NAME = "rfc2544_latency"
SECTION = Section("latency", "Latency", shown_when_empty=True)


class Latency(Method):
    name = METHOD_NAME
    event_trials = "rate"
    label = "RFC 2544 §26.2 latency"
    short_name = "latency"
    params_type = LatencyParams
    needs_throughput = True
    rfc_duration_s = 120.0
    sections = (SECTION,)
    plots = (latency_vs_frame_size_plot, latency_vs_load_plot)
    console_columns = (f"at {rates.INTENDED} fps", "% line rate", "typical", "worst case (p99.9)", "min–max typical",
                       "IPDV mean / p99")
    shortcut = Shortcut(RFC2544, "latency")
    cli_fields = {"trials": "--latency-trials"}

    def run(self, params: LatencyParams, ctx: Context) -> LatencyResult:
        return measure_latency(ctx.measurer, ctx.frame, ctx.line_rate, ctx.throughput_or(1.0), params)

    def estimate_trials(self, params: LatencyParams, frame: FrameSize, line_fps: float) -> int:
        return params.trials

    def verdict_values(self, result: dict) -> dict[str, float | None]:
        return {"latency_ns": read_frame_results(result, LatencyResult).spread("worst_case_ns").median}

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        r = read_frame_results(result, LatencyResult)
        h = r.headline or Headline()
        ty, wc = r.spread("typical_ns"), r.spread("worst_case_ns")
        ipdv = median(x.ipdv_ns for x in r.repetitions)
        ipdv99 = median(x.ipdv_p99_ns for x in r.repetitions)
        return [[fmt.size(r.frame_size), format_pps(h.fps or 0), f"{h.pct_line_rate or 0:.2f}",
                 _ns(ty.median), _ns(wc.median),
                 format_ns_range(ty.min, ty.max) if ty.min is not None and ty.max is not None else "-",
                 f"{_ns(ipdv)} / {_ns(ipdv99)}", flags]]

    def html(self, run: RunView) -> dict[str, str]:
        lat = figure(latency_vs_frame_size_plot, [run])
        lat = lat + table_html(table(run)) if lat else empty(NONE)
        lvl = figure(latency_vs_load_plot, [run])
        return {SECTION.id: lat + "<h3>Latency vs intended load</h3>" + (lvl or empty(LOAD_NONE))}

    def compare_html(self, runs: Sequence[RunView]) -> dict[str, str]:
        lat = figure(latency_vs_frame_size_plot, runs) or empty("No RFC 2544 latency measurement in these results.")
        lvl = figure(latency_vs_load_plot, runs)
        return {SECTION.id: lat + "<h3>Latency vs intended load</h3>" + (lvl or empty(LOAD_NONE))}

    def markdown(self, run: RunView) -> str:
        return section_md("Latency at the throughput rate", table_md(table(run)), NONE)

    def ratio_table(self, runs: Sequence[RunView]) -> tuple[str, Table] | None:
        t = Table(ratio_header([r.name for r in runs], "statistic"))
        data = [by_size(entries(r)) for r in runs]
        for lab in sizes_of(data):
            for stat in ("p50", "p99.9"):
                vals = [(d[lab].pcts[stat].value if lab in d and stat in d[lab].pcts else None) for d in data]
                if vals[0] is None and all(v is None for v in vals):
                    continue
                row = [fmt.size(size_of_label(lab)), "median (typical)" if stat == "p50" else "p99.9 (worst case)",
                       fmt.ns(vals[0])]
                for v in vals[1:]:
                    row += [fmt.ns(v), fmt.ratio_pct(v, vals[0])]
                t.add(row)
        return ("Latency at the throughput rate", t) if t else None

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        option(parser, "--latency-trials", "latency trials per frame size [20]", default="20")

    def cli_params(self, args: argparse.Namespace) -> dict:
        return {"trials": args.latency_trials}


LOAD_NONE = "Fewer than two loads with latency data per frame size."


def _ns(v: float | None) -> str:
    return "-" if v is None else format_ns(v)


METHOD = Latency()
