"""Plots of netrig results: one function per plot type, all drawn from ``RunView``s.

Every plot function takes a list of runs (one for a report, several overlaid for a comparison)
and returns a matplotlib ``Figure``, or ``None`` when the runs hold no data for it. ``PLOTS`` maps
each plot type's name to its function; ``render_svg(name, runs)`` draws one as inline SVG text.

Style rules: units on every axis; log scale where the range spans decades (latency, frames/s
across sizes); error bars are the min / max of repetitions around the median; legends name the
configuration. Output is reproducible: fixed ``svg.hashsalt``, no dates in the SVG, text kept as
text (``svg.fonttype: none``).
"""
from __future__ import annotations

import io
import re
from typing import Any, Callable, Sequence

import matplotlib

matplotlib.use("Agg", force=False)

from matplotlib import rc_context  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import EngFormatter, FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from netrig.report.run_view import (  # noqa: E402
    RunView,
    frame_size_label,
    frame_size_sort_key,
    monitor_samples,
    num,
    obj,
    sample_cpus,
    sample_mem_used_bytes,
    sample_time_s,
)

#: Okabe–Ito colour-blind-safe palette: one colour per configuration.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
#: Colours of latency statistics in single-run plots.
PCT_COLOURS = {"min": "#56B4E9", "p50": "#0072B2", "p90": "#009E73", "p99": "#E69F00", "p99.9": "#D55E00", "max": "#CC79A7"}
#: CPU time categories (stacked in this order) and their colours.
CPU_PARTS = (("softirq", "#D55E00"), ("irq", "#E69F00"), ("system", "#0072B2"), ("user", "#009E73"))
REF_GREY = "#7f7f7f"

STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "netrig-report",
    "svg.image_inline": True,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Helvetica", "Arial"],
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.labelsize": 9,
    "axes.grid": True,
    "axes.grid.which": "major",
    "grid.color": "#d0d0d0",
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#444444",
    "legend.frameon": False,
    "legend.fontsize": 8,
    "lines.linewidth": 1.6,
    "lines.markersize": 5,
    "errorbar.capsize": 3,
    "figure.dpi": 100,
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "path.simplify": True,
}

PlotFn = Callable[..., "Figure | None"]
PLOTS: dict[str, PlotFn] = {}
#: Plot types that make sense overlaid for several runs (``netrig compare``).
OVERLAY: set[str] = set()


def plot(name: str, overlay: bool = True) -> Callable[[PlotFn], PlotFn]:
    """Register a plot function under ``name``."""

    def deco(fn: PlotFn) -> PlotFn:
        PLOTS[name] = fn
        if overlay:
            OVERLAY.add(name)
        return fn

    return deco


# -- helpers --------------------------------------------------------------------------------------
fps_fmt = EngFormatter(unit="", places=None, sep="")
ns_to_us = 1e-3


def _fig(rows: int = 1, cols: int = 1, w: float = 7.6, h: float = 3.6, **kw: Any) -> tuple[Figure, Any]:
    fig = Figure(figsize=(w, h), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, **kw)
    return fig, axes


def _colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _yerr(stats: Sequence[Any], k: float = 1.0) -> list[list[float]]:
    return [[max(0.0, s.value - s.lo) * k for s in stats], [max(0.0, s.hi - s.value) * k for s in stats]]


def _errorbar_sizes(ax: Any, xs: Sequence[float], sizes: Sequence[Any], stats: Sequence[Any], k: float = 1.0,
                    **kw: Any) -> None:
    """Error-bar line over numeric frame sizes; named mixes (IMIX) as unconnected points."""
    num_i = [j for j, sz in enumerate(sizes) if frame_size_sort_key(sz)[0] == 0]
    mix_i = [j for j in range(len(sizes)) if j not in num_i]
    label = kw.pop("label", None)
    for idx, lab in ((num_i, label), (mix_i, None if num_i else label)):
        if not idx:
            continue
        ss = [stats[j] for j in idx]
        extra = {"ls": "none"} if idx is mix_i else {}
        ax.errorbar([xs[j] for j in idx], [st.value * k for st in ss], yerr=_yerr(ss, k), label=lab, **{**kw, **extra})


def size_positions(runs: Sequence[RunView], sizes: list[Any]) -> tuple[dict[str, int], list[str]]:
    """Categorical x positions for frame sizes (numeric sizes ascending, then mixes)."""
    uniq: dict[str, Any] = {}
    for s in sizes:
        uniq.setdefault(frame_size_label(s), s)
    ordered = sorted(uniq.values(), key=frame_size_sort_key)
    labels = [frame_size_label(s) for s in ordered]
    return {lab: i for i, lab in enumerate(labels)}, labels


def _size_axis(ax: Any, labels: list[str]) -> None:
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlim(-0.5, len(labels) - 0.5)
    ax.set_xlabel("frame size (bytes, incl. FCS)")
    ax.grid(axis="x", visible=False)


def _log_if_wide(ax: Any, values: list[float], axis: str = "y", decades: float = 1.3) -> None:
    vals = [v for v in values if v and v > 0]
    if vals and max(vals) / min(vals) > 10**decades:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")


def _legend(ax: Any, **kw: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(**kw)


def _fig_legend(fig: Figure, axes: Sequence[Any]) -> None:
    """One legend for all panels, below them (labels deduplicated)."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if seen:
        fig.legend(list(seen.values()), list(seen.keys()), loc="outside lower center", ncols=2 if len(seen) > 3 else len(seen),
                   fontsize=7.5)


def _facets(n: int, w: float = 7.6, h_row: float = 2.8, max_cols: int = 2) -> tuple[Figure, list[Any]]:
    cols = 1 if n == 1 else max_cols
    rows = (n + cols - 1) // cols
    fig, axes = _fig(rows, cols, w=w, h=max(3.2, h_row * rows))
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def size_title(size: Any) -> str:
    lab = frame_size_label(size)
    return f"{lab} B frames" if lab.isdigit() else f"{lab} frames"


# -- plot types -----------------------------------------------------------------------------------
@plot("throughput")
def throughput(runs: Sequence[RunView]) -> Figure | None:
    """RFC 2544 throughput against frame size: frames/s (with the line-rate curve and the tester's
    proven ceiling) and % of line rate; error bars are min/max of repetitions."""
    data = [(r, r.throughput()) for r in runs]
    if not any(d for _, d in data):
        return None
    pos, labels = size_positions(runs, [t["frame_size"] for _, d in data for t in d])
    fig, axes = _fig(2, 1, h=5.4, sharex=True)
    ax_fps, ax_pct = axes[0][0], axes[1][0]
    all_vals: list[float] = []
    # reference curves: line rate of each distinct speed, tester ceiling of the first run with one
    seen_speeds: set[float] = set()
    for r in runs:
        if r.speed_bps and r.speed_bps not in seen_speeds:
            seen_speeds.add(r.speed_bps)
            pts = [(pos[lab], v) for lab in labels
                   if lab.isdigit() and (v := r.line_rate_pps(_size_from_label(lab))) is not None]
            if pts:
                xs, ys = zip(*pts)
                ax_fps.plot(xs, ys, ls="--", color=REF_GREY, lw=1.2, label=f"line rate ({r.line_rate_label})")
                all_vals += ys
    for r in runs:
        pts = [(pos[frame_size_label(c.get("frame_size"))], v) for c in r.selftest_ceilings()
               if frame_size_label(c.get("frame_size")) in pos and frame_size_label(c.get("frame_size")).isdigit()
               and (v := num(c, "proven_rate_pps")) is not None]
        if pts:
            xs, ys = zip(*sorted(pts))
            suffix = f" — {r.name}" if len(runs) > 1 else ""
            ax_fps.plot(xs, ys, ls=":", color="#555555", lw=1.2, marker="_", label=f"tester proven ceiling (self-test){suffix}")
            all_vals += ys
            break
    flagged_label = True
    for i, (r, d) in enumerate(data):
        if not d:
            continue
        c = _colour(i)
        off = (i - (len(runs) - 1) / 2) * 0.08 if len(runs) > 1 else 0.0
        xs = [pos[frame_size_label(t["frame_size"])] + off for t in d]
        rates = [t["rate"] for t in d]
        sizes_ = [t["frame_size"] for t in d]
        _errorbar_sizes(ax_fps, xs, sizes_, rates, color=c, marker="o", label=r.name)
        all_vals += [s.value for s in rates]
        pcts = [(x, t["frame_size"], t["pct"]) for x, t in zip(xs, d) if t["pct"] is not None]
        if pcts:
            px, psz, ps = zip(*pcts)
            _errorbar_sizes(ax_pct, px, psz, ps, color=c, marker="o", label=r.name)
        bad = [(x, t) for x, t in zip(xs, d) if t["above_ceiling"]]
        if bad:
            ax_fps.scatter([x for x, _ in bad], [t["rate"].value for _, t in bad], s=140, facecolors="none",
                           edgecolors="#C00000", linewidths=1.6, zorder=5,
                           label="above tester ceiling (not a proven DUT result)" if flagged_label else None)
            flagged_label = False
    _log_if_wide(ax_fps, all_vals, decades=0.9)
    ax_fps.yaxis.set_major_formatter(fps_fmt)
    if ax_fps.get_yscale() == "log":
        ax_fps.yaxis.set_minor_formatter(NullFormatter())
    ax_fps.set_ylabel("throughput (frames/s)")
    ax_fps.set_title("Throughput (zero loss) vs frame size")
    _legend(ax_fps, loc="best")
    ax_pct.axhline(100, color=REF_GREY, ls="--", lw=1.2, label="line rate")
    ax_pct.set_ylim(0, max(105, ax_pct.get_ylim()[1]))
    ax_pct.set_ylabel("throughput (% of line rate)")
    ax_pct.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g} %"))
    _size_axis(ax_pct, labels)
    if len(runs) > 1:
        _legend(ax_pct, loc="lower right")
    return fig


def _size_from_label(lab: str) -> Any:
    return int(lab) if lab.isdigit() else lab


@plot("forwarded_vs_offered")
def forwarded_vs_offered(runs: Sequence[RunView]) -> Figure | None:
    """RFC 2544 frame loss sweep as forwarded rate against offered load, one panel per frame size;
    marks the maximum loss-free rate and where forwarding collapses (receive livelock)."""
    sizes: dict[str, Any] = {}
    for r in runs:
        for f in r.frame_loss():
            sizes.setdefault(frame_size_label(f["frame_size"]), f["frame_size"])
    if not sizes:
        return None
    ordered = sorted(sizes.values(), key=frame_size_sort_key)
    fig, axes = _facets(len(ordered))
    for ax, size in zip(axes, ordered):
        top = 0.0
        for i, r in enumerate(runs):
            f = next((x for x in r.frame_loss() if frame_size_label(x["frame_size"]) == frame_size_label(size)), None)
            if f is None:
                continue
            c = _colour(i)
            pts = f["points"]
            xs = [p["offered_pps"] for p in pts]
            fw = [p["forwarded"] for p in pts]
            ax.errorbar(xs, [s.value for s in fw], yerr=_yerr(fw), color=c, marker="o", label=r.name)
            top = max(top, max(xs), max(s.hi for s in fw))
            mlf = f["max_lossfree"]
            if mlf is not None:
                who = f"{r.name}: " if len(runs) > 1 else ""
                ax.plot([mlf.value], [mlf.value], marker="*", ms=13, color=c, mec="black", mew=0.6, ls="none",
                        zorder=6, label=f"{who}max loss-free rate")
                ax.annotate(f"{si(mlf.value)}fps", (mlf.value, mlf.value), xytext=(-6, 8 + 10 * i), textcoords="offset points",
                            ha="right", fontsize=7.5, color=c)
            col = f["collapse"]
            if col is not None:
                who = f"{r.name}: " if len(runs) > 1 else ""
                ax.axvline(col["offered_pps"], color=c, ls=":", lw=1.2,
                           label=f"{who}forwarding collapses above {si(col['offered_pps'])}fps offered")
        ax.plot([0, top * 1.02], [0, top * 1.02], ls="--", color=REF_GREY, lw=1.0, label="no loss (forwarded = offered)")
        ax.set_xlim(0, top * 1.05)
        ax.set_ylim(0, top * 1.05)
        ax.xaxis.set_major_formatter(fps_fmt)
        ax.yaxis.set_major_formatter(fps_fmt)
        ax.set_xlabel("offered load (frames/s)")
        ax.set_ylabel("forwarded (frames/s)")
        ax.set_title(f"Forwarded vs offered — {size_title(size)}")
        _pct_top_axis(ax, runs, size)
    _fig_legend(fig, axes)
    return fig


def _pct_top_axis(ax: Any, runs: Sequence[RunView], size: Any) -> None:
    """A secondary top x axis in % of line rate when every run has the same line rate."""
    lrs = {round(v, 3) for r in runs if (v := r.line_rate_pps(size))}
    if len(lrs) != 1:
        return
    lr = lrs.pop()
    sec = ax.secondary_xaxis("top", functions=(lambda x: x * 100 / lr, lambda p: p * lr / 100))
    sec.set_xlabel("offered load (% of line rate)", fontsize=8)
    sec.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def si(v: float) -> str:
    """``446428.6`` → ``"446 k"`` (three significant digits, SI prefix, trailing space)."""
    for f, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= f:
            return f"{v / f:.3g} {p}"
    return f"{v:.3g} "


@plot("frame_loss")
def frame_loss(runs: Sequence[RunView]) -> Figure | None:
    """RFC 2544 §26.3 frame loss rate: loss (% of offered frames) against offered load (% of line
    rate), one line per configuration and frame size."""
    series = [(i, r, f) for i, r in enumerate(runs) for f in r.frame_loss()]
    if not series:
        return None
    fig, axes = _fig(h=3.4)
    ax = axes[0][0]
    styles = ("-", "--", "-.", ":")
    markers = ("o", "s", "^", "D", "v", "P")
    sizes = sorted({frame_size_label(f["frame_size"]) for _, _, f in series}, key=lambda s: frame_size_sort_key(_size_from_label(s)))
    use_pct = all(p["offered_pct"] is not None for _, _, f in series for p in f["points"])
    for i, r, f in series:
        k = sizes.index(frame_size_label(f["frame_size"]))
        xs = [p["offered_pct"] if use_pct else p["offered_pps"] for p in f["points"]]
        ls = [p["loss_pct"] for p in f["points"]]
        label = size_title(f["frame_size"]) if len(runs) == 1 else f"{r.name}, {size_title(f['frame_size'])}"
        ax.errorbar(xs, [s.value for s in ls], yerr=_yerr(ls), color=_colour(i if len(runs) > 1 else k),
                    ls=styles[k % len(styles)] if len(runs) > 1 else "-", marker=markers[k % len(markers)], label=label)
    ax.set_xlabel("offered load (% of line rate)" if use_pct else "offered load (frames/s)")
    if not use_pct:
        ax.xaxis.set_major_formatter(fps_fmt)
    ax.set_ylabel("frame loss (% of offered frames)")
    ax.set_ylim(bottom=-2, top=max(5.0, ax.get_ylim()[1]))
    ax.set_xlim(left=0)
    ax.set_title("Frame loss rate vs offered load")
    _legend(ax, loc="upper left")
    return fig


@plot("latency_vs_frame_size")
def latency_vs_frame_size(runs: Sequence[RunView]) -> Figure | None:
    """RFC 2544 §26.2 latency at the throughput rate against frame size: min, median (typical),
    p90, p99, p99.9 (worst case) and max; log scale when they span decades; error bars = min/max of
    repetitions."""
    data = [(r, r.latency()) for r in runs]
    if not any(d for _, d in data):
        return None
    pos, labels = size_positions(runs, [e["frame_size"] for _, d in data for e in d])
    fig, axes = _fig(h=3.8)
    ax = axes[0][0]
    names = ("min", "p50", "p90", "p99", "p99.9", "max") if len(runs) == 1 else ("p50", "p99.9")
    vals: list[float] = []
    for i, (r, d) in enumerate(data):
        off = (i - (len(runs) - 1) / 2) * 0.08 if len(runs) > 1 else 0.0
        for name in names:
            pts = [(pos[frame_size_label(e["frame_size"])] + off, e["pcts"][name]) for e in d if name in e["pcts"]]
            if not pts:
                continue
            xs, ss = zip(*pts)
            if len(runs) == 1:
                colour, ls, label = PCT_COLOURS[name], "-", _pct_label(name)
            else:
                colour, ls, label = _colour(i), "-" if name == "p50" else "--", f"{r.name} {_pct_label(name)}"
            szs = [d[j]["frame_size"] for j, e in enumerate(d) if name in e["pcts"]]
            _errorbar_sizes(ax, xs, szs, ss, ns_to_us, color=colour, ls=ls,
                            marker="o" if name in ("p50", "p99.9") else ".", label=label)
            vals += [s.lo * ns_to_us for s in ss] + [s.hi * ns_to_us for s in ss]
    _latency_axis(ax, vals)
    _size_axis(ax, labels)
    ax.set_title("Latency at the throughput rate vs frame size")
    _legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))
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
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0,) if span > 1e3 else (1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel("latency (µs, log scale)")
    else:
        ax.set_ylim(bottom=0, top=max(vals) * 1.08 if vals else None)
        ax.set_ylabel("latency (µs)")


@plot("latency_vs_load")
def latency_vs_load(runs: Sequence[RunView]) -> Figure | None:
    """Latency percentiles against offered load from every valid trial with latency data, one
    panel per frame size; log scale when they span decades. Hollow markers: trials that lost frames."""
    sizes: dict[str, Any] = {}
    for r in runs:
        for g in r.latency_vs_load():
            sizes.setdefault(frame_size_label(g["frame_size"]), g["frame_size"])
    if not sizes:
        return None
    ordered = sorted(sizes.values(), key=frame_size_sort_key)[:8]
    fig, axes = _facets(len(ordered))
    names = ("p50", "p99", "p99.9") if len(runs) == 1 else ("p50", "p99.9")
    for ax, size in zip(axes, ordered):
        use_pct = True
        vals: list[float] = []
        for i, r in enumerate(runs):
            g = next((x for x in r.latency_vs_load() if frame_size_label(x["frame_size"]) == frame_size_label(size)), None)
            if g is None:
                continue
            use_pct = use_pct and all(p["offered_pct"] is not None for p in g["points"])
        for i, r in enumerate(runs):
            g = next((x for x in r.latency_vs_load() if frame_size_label(x["frame_size"]) == frame_size_label(size)), None)
            if g is None:
                continue
            for name in names:
                pts = [p for p in g["points"] if name in p["pcts"]]
                if not pts:
                    continue
                xs = [p["offered_pct"] if use_pct else p["offered_pps"] for p in pts]
                ss = [p["pcts"][name] for p in pts]
                if len(runs) == 1:
                    colour, ls, label = PCT_COLOURS[name], "-", _pct_label(name)
                else:
                    colour, ls, label = _colour(i), "-" if name == "p50" else "--", f"{r.name} {_pct_label(name)}"
                ax.errorbar(xs, [s.value * ns_to_us for s in ss], yerr=_yerr(ss, ns_to_us), color=colour, ls=ls,
                            marker=None, label=label)
                vals += [s.lo * ns_to_us for s in ss] + [s.hi * ns_to_us for s in ss]
                lossy = [(x, s) for x, s, p in zip(xs, ss, pts) if p["loss_pct"] > 0]
                clean = [(x, s) for x, s, p in zip(xs, ss, pts) if p["loss_pct"] <= 0]
                if clean:
                    ax.plot([x for x, _ in clean], [s.value * ns_to_us for _, s in clean], ls="none", marker="o",
                            color=colour, ms=4)
                if lossy:
                    ax.plot([x for x, _ in lossy], [s.value * ns_to_us for _, s in lossy], ls="none", marker="o",
                            mfc="white", color=colour, ms=4)
        _latency_axis(ax, vals)
        ax.set_xlabel("offered load (% of line rate)" if use_pct else "offered load (frames/s)")
        if not use_pct:
            ax.xaxis.set_major_formatter(fps_fmt)
        ax.set_title(f"Latency vs offered load — {size_title(size)}")
    _fig_legend(fig, axes)
    return fig


@plot("ndr_pdr")
def ndr_pdr(runs: Sequence[RunView]) -> Figure | None:
    """MLRsearch conditional throughput per goal (NDR, PDR…) and frame size: the bar is the
    median conditional throughput, the whisker the [lower, upper] bound interval."""
    rows = []  # (label, run index, goal)
    for i, r in enumerate(runs):
        for e in r.ndr_pdr():
            for g in e["goals"]:
                rows.append((e["frame_size"], g["name"], i, g))
    if not rows:
        return None
    rows.sort(key=lambda x: (frame_size_sort_key(x[0]), x[1], x[2]))
    groups: list[tuple[Any, str]] = []
    for size, name, _, _ in rows:
        if (frame_size_label(size), name) not in [(frame_size_label(s), n) for s, n in groups]:
            groups.append((size, name))
    fig, axes = _fig(h=max(2.4, 0.42 * len(rows) + 1.2))
    ax = axes[0][0]
    n = len(runs)
    h = 0.8 / n
    vals = []
    for size, name, i, g in rows:
        k = [(frame_size_label(s), nm) for s, nm in groups].index((frame_size_label(size), name))
        y = k + (i - (n - 1) / 2) * h
        ct = g["conditional"]
        lo = g["lower_pps"] if g["lower_pps"] is not None else (ct.value if ct else None)
        hi = g["upper_pps"]
        v = ct.value if ct else lo
        if v is None:
            continue
        ax.barh(y, v, height=h * 0.85, color=_colour(i), alpha=0.85, label=runs[i].name if k == 0 else None)
        if lo is not None and hi is not None:
            ax.errorbar([(lo + hi) / 2], [y], xerr=[[(hi - lo) / 2], [(hi - lo) / 2]], color="black", lw=1.2, capsize=4)
        txt = f"{si(v)}fps"
        pct = runs[i].pct_of_line_rate(size, v)
        if pct is not None:
            txt += f" ({pct:.1f} %)"
        if hi is None:
            txt += ", no upper bound (max rate loss-free)"
        ax.annotate(txt, (v, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=7.5)
        vals.append(hi or v)
    ax.set_yticks(range(len(groups)), [f"{size_title(s)}\n{nm}" for s, nm in groups])
    ax.invert_yaxis()
    ax.set_xlim(0, max(vals) * 1.45)
    ax.xaxis.set_major_formatter(fps_fmt)
    ax.set_xlabel("conditional throughput (frames/s); whisker = [lower, upper] bound")
    ax.grid(axis="y", visible=False)
    ax.set_title("NDR / PDR (MLRsearch)")
    if n > 1:
        _legend(ax, loc="lower right")
    return fig


@plot("selftest")
def selftest(runs: Sequence[RunView]) -> Figure | None:
    """The tester's self-test: the rate it proved loss-free on the loopback test bed per frame
    size, the rate it had to prove (1.1 × the highest rate used), and the DUT throughput."""
    data = [(r, r.selftest_ceilings()) for r in runs]
    if not any(d for _, d in data):
        return None
    pos, labels = size_positions(runs, [c.get("frame_size") for _, d in data for c in d] +
                                 [t["frame_size"] for r in runs for t in r.throughput()])
    fig, axes = _fig(h=3.4)
    ax = axes[0][0]
    n = len(runs)
    w = 0.8 / (2 * n)
    vals: list[float] = []
    failed_labelled = False
    for i, (r, d) in enumerate(data):
        base = (i - (n - 1) / 2) * 2 * w
        proven = [(pos[frame_size_label(c.get("frame_size"))], num(c, "proven_rate_pps"), c.get("passed")) for c in d]
        proven = [p for p in proven if p[1] is not None]
        sfx = f" — {r.name}" if n > 1 else ""
        if proven:
            ax.bar([x + base - w / 2 for x, _, _ in proven], [v for _, v, _ in proven], width=w * 0.95,
                   color=[_colour(i) if ok is not False else "#C00000" for _, _, ok in proven], alpha=0.55,
                   label=f"tester proven (self-test){sfx}")
            vals += [v for _, v, _ in proven]
            if any(ok is False for _, _, ok in proven) and not failed_labelled:
                ax.bar([0], [0], width=0, color="#C00000", alpha=0.55, label="red: required rate NOT proven")
                failed_labelled = True
        req = [(pos[frame_size_label(c.get("frame_size"))], num(c, "required_rate_pps")) for c in d]
        req = [p for p in req if p[1] is not None]
        if req:
            ax.scatter([x + base - w / 2 for x, _ in req], [v for _, v in req], marker="_", s=220, color="black",
                       linewidths=1.6, zorder=5, label="required (1.1 × highest rate used)" if i == 0 else None)
        tp = [(pos[frame_size_label(t["frame_size"])], t["rate"].value) for t in r.throughput()]
        if tp:
            ax.bar([x + base + w / 2 for x, _ in tp], [v for _, v in tp], width=w * 0.95, color=_colour(i),
                   label=f"DUT throughput{sfx}")
            vals += [v for _, v in tp]
    _log_if_wide(ax, vals, decades=1.0)
    ax.yaxis.set_major_formatter(fps_fmt)
    if ax.get_yscale() == "log":
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel("rate (frames/s)")
    _size_axis(ax, labels)
    ax.set_title("Tester self-test (RFC 8219 §9.2): proven ceiling vs DUT result")
    _legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


@plot("iperf")
def iperf(runs: Sequence[RunView]) -> Figure | None:
    """iperf-like fixed-rate runs: received frames/s per interval, with the offered rate."""
    series = [(i, r, e) for i, r in enumerate(runs) for e in r.iperf() if e["series"]]
    if not series:
        return None
    fig, axes = _fig(h=3.2)
    ax = axes[0][0]
    for i, r, e in series:
        c = _colour(i)
        for k, s in enumerate(e["series"]):
            xs, ys = zip(*s)
            label = f"{r.name + ', ' if len(runs) > 1 else ''}{size_title(e['frame_size'])}" if k == 0 else None
            ax.plot(xs, ys, color=c, marker=".", alpha=1.0 if k == 0 else 0.5, label=label)
        if e["offered_pps"] is not None:
            ax.axhline(e["offered_pps"].value, color=c, ls="--", lw=1.0, label=f"offered ({si(e['offered_pps'].value)}fps)")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(fps_fmt)
    ax.set_ylabel("received (frames/s)")
    ax.set_xlabel("time since start (s)")
    ax.set_title("Fixed-rate (iperf-like) run: received rate per interval")
    _legend(ax, loc="lower right")
    return fig


def _cpu_mem_axes(fig_h: float, cpus: list[str]) -> tuple[Figure, list[Any], Any]:
    n = len(cpus)
    fig = Figure(figsize=(7.6, fig_h), layout="constrained")
    axes = fig.subplots(n + 1, 1, sharex=True, squeeze=False, height_ratios=[1.0] * n + [0.8])
    flat = list(axes.flat)
    return fig, flat[:n], flat[n]


def _draw_cpu(ax: Any, cpu: str, ts: list[float], rows: list[dict]) -> None:
    bottom = [0.0] * len(ts)
    for part, colour in CPU_PARTS:
        ys = [(row.get(cpu, {}).get(part) or 0.0) for row in rows]
        top = [b + y for b, y in zip(bottom, ys)]
        ax.fill_between(ts, bottom, top, color=colour, alpha=0.85, lw=0, label=part)
        bottom = top
    ax.set_ylim(0, 100)
    ax.set_yticks([0, 50, 100])
    ax.set_ylabel(f"{cpu} (%)")
    ax.grid(axis="x", visible=False)


def _cpu_names(rows: list[dict]) -> list[str]:
    names: dict[str, None] = {}
    for row in rows:
        for k in row:
            names.setdefault(k, None)
    return sorted(names, key=lambda s: (len(s), s))[:8]


@plot("timeline", overlay=False)
def timeline(runs: Sequence[RunView]) -> Figure | None:
    """The whole run's DUT monitoring: per-CPU busy time split into softirq / irq / system / user,
    and used memory, over time; shaded bands are trials, labelled with their method."""
    r = runs[0]
    mon = r.monitored_trials()
    if not mon:
        return None
    starts = r.trial_start_s()
    ts: list[float] = []
    rows: list[dict] = []
    mem: list[tuple[float, float]] = []
    spans = []
    for i, t in mon:
        samples = monitor_samples(t)
        t0 = starts[i]
        last = t0
        for s in samples:
            x = t0 + (sample_time_s(s) or 0.0)
            ts.append(x)
            rows.append(sample_cpus(s))
            m = sample_mem_used_bytes(s)
            if m is not None:
                mem.append((x, m))
            last = x
        # a gap of idle between trials so the stacked areas do not bridge them
        ts.append(last + 1e-6)
        rows.append({})
        spans.append((t0, last, t.get("method", "")))
    cpus = _cpu_names(rows)
    if not cpus and not mem:
        return None
    fig, cpu_axes, mem_ax = _cpu_mem_axes(1.25 * len(cpus) + 2.2, cpus)
    for ax, cpu in zip(cpu_axes, cpus):
        _draw_cpu(ax, cpu, ts, rows)
        _shade(ax, spans, label=ax is cpu_axes[0])
    if cpu_axes:
        handles, labels = cpu_axes[0].get_legend_handles_labels()
        cpu_axes[0].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
        cpu_axes[0].set_title(f"DUT CPU and memory over the run — {r.name}")
    _draw_mem(mem_ax, mem)
    mem_ax.set_xlabel("time since the first trial (s)")
    _shade(mem_ax, spans, label=False)
    return fig


def _shade(ax: Any, spans: list[tuple[float, float, str]], label: bool) -> None:
    methods = []
    for a, b, m in spans:
        if m not in methods:
            methods.append(m)
    for a, b, m in spans:
        ax.axvspan(a, b, color=PALETTE[(methods.index(m) + 4) % len(PALETTE)], alpha=0.07, lw=0)
    if label:
        prev = None
        for a, b, m in spans:
            if m != prev:
                ax.annotate(m.replace("rfc2544_", ""), (a, 100), xytext=(1, 2), textcoords="offset points",
                            fontsize=6.5, color="#333333", annotation_clip=False)
                prev = m


def _draw_mem(ax: Any, mem: list[tuple[float, float]]) -> None:
    if mem:
        xs, ys = zip(*mem)
        ax.plot(xs, [y / 2**20 for y in ys], color="#444444", lw=1.2, marker=".", ms=2)
    else:
        ax.text(0.5, 0.5, "no memory samples", transform=ax.transAxes, ha="center", va="center", color=REF_GREY)
    ax.set_ylabel("used memory (MiB)")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))


@plot("trial_timeline", overlay=False)
def trial_timeline(runs: Sequence[RunView], trial: int | None = None) -> Figure | None:
    """One trial's DUT monitoring (``trial`` = index in ``trials``; default the first monitored
    trial): per-CPU softirq / irq / system / user and used memory against time into the trial."""
    r = runs[0]
    mon = dict(r.monitored_trials())
    if not mon:
        return None
    idx = trial if trial is not None else next(iter(mon))
    t = mon.get(idx)
    if t is None:
        return None
    samples = monitor_samples(t)
    ts = [sample_time_s(s) or 0.0 for s in samples]
    rows = [sample_cpus(s) for s in samples]
    mem = [(x, m) for x, s in zip(ts, samples) if (m := sample_mem_used_bytes(s)) is not None]
    cpus = _cpu_names(rows)
    fig, cpu_axes, mem_ax = _cpu_mem_axes(1.0 * len(cpus) + 1.8, cpus)
    load = obj(t, "load")
    for ax, cpu in zip(cpu_axes, cpus):
        _draw_cpu(ax, cpu, ts, rows)
    if cpu_axes:
        handles, labels = cpu_axes[0].get_legend_handles_labels()
        cpu_axes[0].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
        rate = num(load, "rate_pps")
        cpu_axes[0].set_title(
            f"Trial {t.get('seq', idx)} — {t.get('method', '?')}, {size_title(t.get('frame_size'))}"
            + (f", offered {si(rate)}fps" if rate else ""), fontsize=9)
    _draw_mem(mem_ax, mem)
    mem_ax.set_xlabel("time into the trial (s)")
    return fig


# -- rendering ------------------------------------------------------------------------------------
_ID_RE = re.compile(r'\bid="([^"]+)"')


def figure_svg(fig: Figure, prefix: str = "") -> str:
    """``fig`` as inline SVG text: no XML prolog, no metadata, no namespace URLs, ids prefixed with
    ``prefix`` so several plots can share one HTML page, sized to scale with the page."""
    buf = io.StringIO()
    with rc_context(STYLE):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None},
                    )
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    svg = re.sub(r'(<svg[^>]*?)\s+version="1\.1"', r"\1", svg, count=1)
    svg = re.sub(r'(<svg[^>]*?)\s+width="([\d.]+)pt"\s+height="([\d.]+)pt"',
                 lambda m: f'{m.group(1)} width="{float(m.group(2)) * 4 / 3:.0f}" height="{float(m.group(3)) * 4 / 3:.0f}"',
                 svg, count=1)
    if prefix:
        svg = _ID_RE.sub(lambda m: f'id="{prefix}{m.group(1)}"', svg)
        svg = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', svg)
        svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", svg)
    return svg.strip()


def draw(name: str, runs: Sequence[RunView], **opts: Any) -> Figure | None:
    """Draw plot type ``name`` for ``runs`` (in the report style)."""
    if name not in PLOTS:
        raise KeyError(f"unknown plot type {name!r}; known: {', '.join(PLOTS)}")
    with rc_context(STYLE):
        return PLOTS[name](list(runs), **opts)


def render_svg(name: str, runs: Sequence[RunView], prefix: str | None = None, **opts: Any) -> str | None:
    """Plot type ``name`` as inline SVG text, or ``None`` when the runs have no data for it."""
    fig = draw(name, runs, **opts)
    if fig is None:
        return None
    return figure_svg(fig, prefix if prefix is not None else f"{name}-")
