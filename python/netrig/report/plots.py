"""The report's own plot types (the self-test, DUT monitoring timelines), and every plot type
netrig draws: these and each method's (``netrig.methods``)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from netrig.methodology.method import Capacity
from netrig.methodology.selftest import Ceiling, stored_ceilings
from netrig.methods import REGISTRY
from netrig.report.study_record import StudyRecord
from netrig.view.plotkit import (
    CPU_PARTS,
    PALETTE,
    REF_GREY,
    Plot,
    facets,
    legend,
    log_if_wide,
    mark_lower_bounds,
    new_figure,
    plot,
    rate_axis,
    run_colour,
    shade_spans,
    si,
    size_axis,
    size_positions,
    size_title,
    subplots,
    ticker,
)
from netrig.view.run_view import (
    RunView,
    frame_size_label,
    sample_cpus,
    sample_mem_used_bytes,
    sample_time_s,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@plot("selftest")
def selftest_plot(runs: Sequence[RunView]) -> Figure | None:
    """The tester's self-test: the rate it proved loss-free on the loopback test bed per frame
    size, the rate it had to prove (1.1 × the highest rate used), and the DUT throughput (an open
    bar with an arrow where it is a lower bound: the tester's limit, not the DUT's); a log axis
    when the rates span decades."""
    data = [(r, stored_ceilings(r)) for r in runs]
    if not any(d for _, d in data):
        return None
    pos, labels = size_positions(runs, [c.frame.label for _, d in data for c in d] +
                                 [t.frame_size for r in runs for t in REGISTRY.primary.capacity(r)])
    fig, axes = subplots(h=3.4)
    ax = axes[0][0]
    n = len(runs)
    w = 0.8 / (2 * n)
    vals: list[float] = []
    for i, (r, d) in enumerate(data):
        base = (i - (n - 1) / 2) * 2 * w
        sfx = f" — {r.name}" if n > 1 else ""
        vals += _selftest_bars(ax, [(pos[frame_size_label(c.frame.label)] + base - w / 2, c) for c in d], w, i, sfx)
        vals += _dut_bars(ax, [(pos[frame_size_label(t.frame_size)] + base + w / 2, t)
                               for t in REGISTRY.primary.capacity(r)], w, i, sfx)
    rate_axis(ax, vals)
    ax.set_ylabel("rate (frames/s)")
    size_axis(ax, labels)
    ax.set_title("Tester self-test (RFC 8219 §9.2): proven ceiling vs DUT result")
    legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


#: The colour of a self-test that did not prove the rate it had to.
NOT_PROVEN = "#C00000"


def _selftest_bars(ax: Any, at: list[tuple[float, Ceiling]], w: float, i: int, sfx: str) -> list[float]:
    """Run ``i``'s proven ceilings as bars at the x of ``at`` (red where the required rate was not
    proven) and the required rates as black ticks; the values drawn."""
    proven = [(x, v, c.passed if c.required_rate_pps is not None else None)
              for x, c in at if (v := c.proven_rate_pps) is not None]
    if proven:
        ax.bar([x for x, _, _ in proven], [v for _, v, _ in proven], width=w * 0.95,
               color=[run_colour(i) if ok is not False else NOT_PROVEN for _, _, ok in proven], alpha=0.55,
               label=f"tester proven (self-test){sfx}")
        if any(ok is False for _, _, ok in proven) and "red" not in " ".join(ax.get_legend_handles_labels()[1]):
            ax.bar([0], [0], width=0, color=NOT_PROVEN, alpha=0.55, label="red: required rate NOT proven")
    req = [(x, c.required_rate_pps) for x, c in at if c.required_rate_pps is not None]
    if req:
        ax.scatter([x for x, _ in req], [v for _, v in req], marker="_", s=220, color="black", linewidths=1.6,
                   zorder=5, label="required (1.1 × highest rate used)" if i == 0 else None)
    return [v for _, v, _ in proven] + [v for _, v in req]


def _dut_bars(ax: Any, at: list[tuple[float, Capacity]], w: float, i: int, sfx: str) -> list[float]:
    """Run ``i``'s DUT throughput as bars at the x of ``at``: filled where measured, open with an
    arrow where a lower bound; the values drawn."""
    c = run_colour(i)
    for bound in (False, True):
        bars = [(x, t.rate.value) for x, t in at if t.at_least is bound]
        if not bars:
            continue
        xs, ys = [x for x, _ in bars], [v for _, v in bars]
        if bound:
            ax.bar(xs, ys, width=w * 0.95, fill=False, edgecolor=c, hatch="//", lw=1.2)
            mark_lower_bounds(ax, xs, ys, c)
        else:
            ax.bar(xs, ys, width=w * 0.95, color=c, label=f"DUT throughput{sfx}")
    return [t.rate.value for _, t in at]


def _cpu_mem_axes(fig_h: float, cpus: list[str]) -> tuple[Figure, list[Any], Any]:
    n = len(cpus)
    fig = new_figure(7.6, fig_h)
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
def timeline_plot(runs: Sequence[RunView]) -> Figure | None:
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
    for t in mon:
        samples = t.monitor_samples
        t0 = starts[t.index]
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
        spans.append((t0, last, t.method))
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
    methods = list(dict.fromkeys(m for _, _, m in spans))
    colours = [PALETTE[(methods.index(m) + 4) % len(PALETTE)] for _, _, m in spans]
    shade_spans(ax, [(a, b) for a, b, _ in spans], colours, alpha=0.07)
    if label:
        prev = None
        for a, _, m in spans:
            if m != prev:
                ax.annotate(REGISTRY.short_name(m), (a, 100), xytext=(1, 2), textcoords="offset points",
                            fontsize=6.5, color="#333333", annotation_clip=False)
                prev = m


def _draw_mem(ax: Any, mem: list[tuple[float, float]]) -> None:
    if mem:
        xs, ys = zip(*mem)
        ax.plot(xs, [y / 2**20 for y in ys], color="#444444", lw=1.2, marker=".", ms=2)
    else:
        ax.text(0.5, 0.5, "no memory samples", transform=ax.transAxes, ha="center", va="center", color=REF_GREY)
    ax.set_ylabel("used memory (MiB)")
    ax.yaxis.set_major_formatter(ticker().FuncFormatter(lambda v, _: f"{v:,.0f}"))


@plot("trial_timeline", overlay=False)
def trial_timeline_plot(runs: Sequence[RunView], trial: int | None = None) -> Figure | None:
    """One trial's DUT monitoring (``trial`` = index in ``trials``; default the first monitored
    trial): per-CPU softirq / irq / system / user and used memory against time into the trial."""
    r = runs[0]
    mon = {t.index: t for t in r.monitored_trials()}
    if not mon:
        return None
    idx = trial if trial is not None else next(iter(mon))
    t = mon.get(idx)
    if t is None:
        return None
    samples = t.monitor_samples
    ts = [sample_time_s(s) or 0.0 for s in samples]
    rows = [sample_cpus(s) for s in samples]
    mem = [(x, m) for x, s in zip(ts, samples) if (m := sample_mem_used_bytes(s)) is not None]
    cpus = _cpu_names(rows)
    fig, cpu_axes, mem_ax = _cpu_mem_axes(1.0 * len(cpus) + 1.8, cpus)
    for ax, cpu in zip(cpu_axes, cpus):
        _draw_cpu(ax, cpu, ts, rows)
    if cpu_axes:
        handles, labels = cpu_axes[0].get_legend_handles_labels()
        cpu_axes[0].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
        rate = t.load.rate_pps
        cpu_axes[0].set_title(
            f"Trial {t.seq} — {t.method or '?'}, {size_title(t.frame_size)}"
            + (f", intended {si(rate)}fps" if rate else ""), fontsize=9)
    _draw_mem(mem_ax, mem)
    mem_ax.set_xlabel("time into the trial (s)")
    return fig


#: Colours of the stall episodes in the latency timeline: the DUT's (the host's, the guest's), the tester's.
STALL_DUT_HOST, STALL_DUT_GUEST, STALL_TESTER = "#d62728", "#ff9896", "#7f7f7f"


@plot("latency_timeline", overlay=False)
def latency_timeline_plot(runs: Sequence[RunView], trial: int | None = None) -> Figure | None:
    """One trial's latency over time (p50, p99, max per 8.4-ms window, log axis) with the platform's
    stalls shaded: the DUT's where its CPU did not run (dark red) or another task held it (light
    red), the tester's (grey); the spikes' period in the title when there is one."""
    r = runs[0]
    recs = {t.index: t for t in r.trial_records() if t.counts is not None and t.counts.latency_timeline}
    if not recs:
        return None
    t = recs.get(trial if trial is not None else next(iter(recs)))
    if t is None or t.counts is None or t.counts.latency_timeline is None:
        return None
    tl, st = t.counts.latency_timeline, t.counts.stalls
    xs = [tl.start_s + i * tl.window_ms / 1e3 for i in range(len(tl.frames))]
    fig, axes = subplots(w=7.6, h=2.8)
    ax = axes[0][0]
    for ys, name, colour, lw in ((tl.max_us, "max", PALETTE[3], 0.8), (tl.p99_us, "p99", PALETTE[1], 1.0),
                                 (tl.p50_us, "p50", PALETTE[0], 1.2)):
        pts = [(x, y) for x, y, n in zip(xs, ys, tl.frames) if n and y > 0]
        if pts:
            ax.plot(*zip(*pts), color=colour, lw=lw, label=name)
    for side, colours in ((st.dut if st else None, (STALL_DUT_HOST, STALL_DUT_GUEST)),
                          (st.tester if st else None, (STALL_TESTER, STALL_TESTER))):
        for e in side.episodes if side is not None else ():
            ax.axvspan(e.start_s, e.end_s, color=colours[1] if e.seen_by_guest else colours[0], alpha=0.35, lw=0)
    ax.set_yscale("log")
    ax.set_xlabel("time since the trial's first frame (s)")
    ax.set_ylabel("latency (µs)")
    per = tl.periodicity
    title = (f"Trial {t.seq}, {size_title(t.frame_size)} at {si(t.load.rate_pps or 0)}fps"
             + (f": spikes every {per.period_ms:.1f} ms ({100 * per.share:.0f} % of {per.spikes})" if per else ""))
    ax.set_title(title, fontsize=9)
    legend(ax, fontsize=7, loc="upper right")
    return fig


@plot("study")
def study_plot(runs: Sequence[RunView]) -> Figure | None:
    """Every variant against the baseline: each headline number (RFC 2544 throughput, TCP goodput,
    transactions per second, CPU-seconds per unit of work) as % of the baseline's; 100 % is the
    baseline. Higher is better for rates, lower for CPU (marked ↓)."""
    from netrig.report.tables import study_values

    order, better, values = study_values(runs)
    metrics = [m for m in order if values[0].get(m)]
    if len(runs) < 2 or not metrics:
        return None
    others = runs[1:]
    n = len(others)
    fig, axes = subplots(1, 1, w=7.6, h=max(2.6, 0.32 * len(metrics) * n + 1.4))
    ax = axes[0][0]
    height = 0.8 / n
    shown: list[float] = []
    for j, r in enumerate(others):
        ys, xs = [], []
        for i, m in enumerate(metrics):
            v = values[j + 1].get(m)
            base = values[0][m]
            if v is None or not base:
                continue
            ys.append(i + (j - (n - 1) / 2) * height)
            xs.append(100 * v / base)
        ax.barh(ys, xs, height=height * 0.92, color=run_colour(j + 1), label=r.name)
        shown.extend(xs)
    log_if_wide(ax, shown, axis="x")  # a variant at 10 % beside one at 600 %: both readable
    ax.axvline(100, color=REF_GREY, lw=1.2, ls="--", label=f"{runs[0].name} (baseline) = 100 %")
    ax.set_yticks(range(len(metrics)))
    ax.set_yticklabels([f"{m} {'↑' if better[m] else '↓'}" for m in metrics])
    ax.invert_yaxis()
    ax.set_xlabel("% of the baseline")
    legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


@plot("sweep")
def sweep_plot(runs: Sequence[RunView], study: StudyRecord | None = None) -> Figure | None:
    """A scalability sweep: every headline number against the swept value, one panel each (a
    logarithmic axis where the values span decades)."""
    from netrig.report.tables import study_values, sweep_points

    points = sweep_points(runs, study) if study is not None else []
    if study is None or study.sweep is None or len(points) < 2:
        return None
    sweep = study.sweep
    order, better, values = study_values([r for _, r in points])
    metrics = [m for m in order if sum(1 for v in values if v.get(m) is not None) >= 2][:6]
    if not metrics:
        return None
    numeric = all(isinstance(v, (int, float)) for v, _ in points)
    fig, axes = facets(len(metrics))
    for ax, m in zip(axes, metrics):
        xs = [v if numeric else i for i, (v, _) in enumerate(points)]
        pairs = [(x, vals.get(m)) for x, vals in zip(xs, values) if vals.get(m) is not None]
        ax.plot([x for x, _ in pairs], [y for _, y in pairs], marker="o", color=run_colour(0))
        if numeric:
            log_if_wide(ax, [float(x) for x, _ in pairs if x > 0], axis="x")
        else:
            ax.set_xticks(xs)
            ax.set_xticklabels([str(v) for v, _ in points], rotation=30, fontsize=7)
        ax.set_title(f"{m} {'↑' if better[m] else '↓'}", fontsize=9)
        ax.set_xlabel(sweep.label)
        if not (("throughput" in m or "fps" in m) and rate_axis(ax, [y for _, y in pairs])):
            ax.set_ylim(bottom=0)
    return fig


#: The report's own plot types.
REPORT_PLOTS: tuple[Plot, ...] = (selftest_plot, timeline_plot, trial_timeline_plot, latency_timeline_plot, study_plot,
                                  sweep_plot)


def all_plots() -> dict[str, Plot]:
    """Every plot type by name: each method's, then the report's own."""
    return {p.name: p for p in (*REGISTRY.plots(), *REPORT_PLOTS)}
