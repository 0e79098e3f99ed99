"""The plot kit: what every plot of a netrig result shares (style, palette, axes helpers, SVG).

A plot type is a :class:`Plot`: a name and a function that takes a list of runs (one for a
report, several overlaid for a comparison) and returns a matplotlib ``Figure``, or ``None`` when
the runs hold no data for it. Methods declare their plot types in their own modules
(``netrig.methods``); the report's own (self-test, monitoring timelines) are in
``netrig.report.plots``. ``render_svg(plot, runs)`` draws one as inline SVG text.

Style rules: units on every axis; log scale where the range spans decades (latency; frames/s by
one rule, :func:`rate_axis`); a value that is not a measurement is never drawn as one — a lower
bound is an arrow (:func:`mark_lower_bounds`), an invalid or unverified point an open marker
(:func:`mark_invalid`), each with its legend entry; error bars are the min / max of repetitions
around the median; legends name the configuration. Output is reproducible: fixed ``svg.hashsalt``,
no dates in the SVG, text kept as text (``svg.fonttype: none``).
"""
from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from netrig.view.run_view import RunView, frame_size_label, frame_size_sort_key

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _matplotlib() -> ModuleType:
    """matplotlib, imported on the first plot drawn: it takes ~0.4 s, which every command would
    otherwise pay at start-up (the CLI builds its parser from the method registry)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.axis
    import matplotlib.backends.backend_svg
    import matplotlib.collections
    import matplotlib.figure
    import matplotlib.text
    import matplotlib.ticker

    return matplotlib


def ticker() -> ModuleType:
    """``matplotlib.ticker`` (formatters and locators for axes)."""
    return _matplotlib().ticker


def new_figure(w: float, h: float) -> Figure:
    """An empty figure ``w`` × ``h`` inches with constrained layout."""
    return _matplotlib().figure.Figure(figsize=(w, h), layout="constrained")

#: Okabe–Ito colour-blind-safe palette: one colour per configuration.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
#: Colours of latency statistics in single-run plots.
PCT_COLOURS = {"min": "#56B4E9", "p50": "#0072B2", "p90": "#009E73", "p99": "#E69F00", "p99.9": "#D55E00",
               "max": "#CC79A7"}
#: CPU time categories (stacked in this order) and their colours.
CPU_PARTS = (("softirq", "#D55E00"), ("irq", "#E69F00"), ("system", "#0072B2"), ("user", "#009E73"))
REF_GREY = "#7f7f7f"

STYLE: dict[Any, Any] = {
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


@dataclass(frozen=True)
class Plot:
    """A plot type: ``name`` (stable: reports mark figures with it), the drawing function, and
    whether it makes sense overlaid for several runs (``netrig compare``). The function's first
    docstring paragraph is the figure's caption."""

    name: str
    fn: PlotFn
    overlay: bool = True

    @property
    def caption(self) -> str:
        doc = (self.fn.__doc__ or "").strip().split("\n\n")[0]
        return " ".join(doc.split())

    def __call__(self, runs: Sequence[RunView], **opts: Any) -> Figure | None:
        return self.fn(runs, **opts)


def plot(name: str, overlay: bool = True) -> Callable[[PlotFn], Plot]:
    """Declare a plot type: ``@plot("throughput")`` over its drawing function."""

    def deco(fn: PlotFn) -> Plot:
        return Plot(name, fn, overlay)

    return deco


# -- helpers --------------------------------------------------------------------------------------
ns_to_us = 1e-3


def fps_fmt() -> Any:
    """Axis formatter for frame rates: ``1.5M``, ``300k``."""
    return ticker().EngFormatter(unit="", places=None, sep="")


def subplots(rows: int = 1, cols: int = 1, w: float = 7.6, h: float = 3.6, **kw: Any) -> tuple[Figure, Any]:
    fig = new_figure(w, h)
    axes = fig.subplots(rows, cols, squeeze=False, **kw)
    return fig, axes


def run_colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def yerr(stats: Sequence[Any], k: float = 1.0) -> list[list[float]]:
    return [[max(0.0, s.value - s.lo) * k for s in stats], [max(0.0, s.hi - s.value) * k for s in stats]]


def errorbar_sizes(ax: Any, xs: Sequence[float], sizes: Sequence[Any], stats: Sequence[Any], k: float = 1.0,
                    measured: Sequence[bool] | None = None, **kw: Any) -> None:
    """Error-bar line over numeric frame sizes; named mixes (IMIX) as unconnected points. A point
    with ``measured[j]`` false gets no marker here: the caller marks it as what it is (a lower
    bound, an unverified value)."""
    num_i = [j for j, sz in enumerate(sizes) if frame_size_sort_key(sz)[0] == 0]
    mix_i = [j for j in range(len(sizes)) if j not in num_i]
    label = kw.pop("label", None)
    for idx, lab in ((num_i, label), (mix_i, None if num_i else label)):
        if not idx:
            continue
        ss = [stats[j] for j in idx]
        extra: dict[str, Any] = {"ls": "none"} if idx is mix_i else {}
        if measured is not None:
            extra["markevery"] = [n for n, j in enumerate(idx) if measured[j]]
        ax.errorbar([xs[j] for j in idx], [st.value * k for st in ss], yerr=yerr(ss, k), label=lab, **{**kw, **extra})


def size_positions(runs: Sequence[RunView], sizes: list[Any]) -> tuple[dict[str, int], list[str]]:
    """Categorical x positions for frame sizes (numeric sizes ascending, then mixes)."""
    uniq: dict[str, Any] = {}
    for s in sizes:
        uniq.setdefault(frame_size_label(s), s)
    ordered = sorted(uniq.values(), key=frame_size_sort_key)
    labels = [frame_size_label(s) for s in ordered]
    return {lab: i for i, lab in enumerate(labels)}, labels


def size_axis(ax: Any, labels: list[str]) -> None:
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlim(-0.5, len(labels) - 0.5)
    ax.set_xlabel("frame size (bytes, incl. FCS)")
    ax.grid(axis="x", visible=False)


#: A frames/s axis turns logarithmic when the largest positive value it plots is more than this many
#: times the smallest: on a linear 0–16 M axis, bars of 7 k and 3 k are invisible.
RATE_LOG_SPAN = 30.0


def rate_axis(ax: Any, values: Sequence[float | None], axis: str = "y") -> bool:
    """``axis`` of ``ax`` as a frames/s axis (SI tick labels: ``300k``, ``1.5M``), logarithmic when
    the positive ``values`` it plots span more than :data:`RATE_LOG_SPAN` ×; ``True`` when it is."""
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    log = bool(vals) and max(vals) / min(vals) > RATE_LOG_SPAN
    which = ax.yaxis if axis == "y" else ax.xaxis
    if log:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
        which.set_minor_formatter(ticker().NullFormatter())
    which.set_major_formatter(fps_fmt())
    return log


def rate_limits(ax: Any, values: Sequence[float], axis: str = "y", log: bool = False) -> None:
    """The range of a frames/s axis that shows every value: from 0 on a linear axis, from a little
    below the smallest positive value on a log one (0 has no place there)."""
    vals = [v for v in values if v > 0 and math.isfinite(v)]
    if not vals:
        return
    lo, hi = (min(vals) / 1.5, max(vals) * 1.5) if log else (0.0, max(vals) * 1.05)
    (ax.set_ylim if axis == "y" else ax.set_xlim)(lo, hi)


def diagonal_axes(ax: Any, values: Sequence[float], label: str = "no loss (forwarded = intended)") -> bool:
    """Forwarded against intended frames/s: both axes by :func:`rate_axis` on every value shown (one
    scale for both), each showing every value, and the dashed diagonal where nothing is lost;
    ``True`` when the axes are logarithmic."""
    log = rate_axis(ax, values, "x")
    rate_axis(ax, values, "y")
    rate_limits(ax, values, "x", log)
    rate_limits(ax, values, "y", log)
    ends = ax.get_xlim()
    ax.plot(ends, ends, ls=":", color=REF_GREY, lw=1.0, label=label, scalex=False, scaley=False)
    return log


#: What a mark that is not a measurement means, in the legend of every plot that draws one.
LOWER_BOUND_LABEL = "arrow: lower bound (tester-limited; the DUT may be faster: ≥)"
INVALID_LABEL = "open marker: invalid or unverified trial (not a DUT result)"


def _arrow(direction: str) -> Any:
    """An arrow marker from the data point: a stem and a head, up or to the right."""
    from matplotlib.path import Path

    pts = [(0.0, 0.0), (0.0, 1.0), (-0.3, 0.62), (0.0, 1.0), (0.3, 0.62)]
    if direction == "right":
        pts = [(y, x) for x, y in pts]
    return Path(pts, [Path.MOVETO, Path.LINETO, Path.MOVETO, Path.LINETO, Path.LINETO])


def _once(ax: Any, label: str) -> str | None:
    """``label``, unless ``ax`` already has a legend entry of that text."""
    return None if label in ax.get_legend_handles_labels()[1] else label


def mark_lower_bounds(ax: Any, xs: Sequence[float], ys: Sequence[float], colour: str,
                      direction: str = "up") -> None:
    """Lower bounds ("≥ X, tester-limited") at (``xs``, ``ys``): an arrow from the value, up (or
    ``right`` for horizontal bars), never the filled marker of a measurement; one legend entry
    (:data:`LOWER_BOUND_LABEL`) per axes."""
    if len(xs):
        ax.plot(xs, ys, ls="none", marker=_arrow(direction), ms=16, mew=1.8, mfc="none", mec=colour, zorder=6,
                label=_once(ax, LOWER_BOUND_LABEL))


def mark_invalid(ax: Any, xs: Sequence[float], ys: Sequence[float], colour: str, marker: str = "o") -> None:
    """Invalid or unverified points (a trial the tester could not vouch for, a rate above the tester's
    proven ceiling) at (``xs``, ``ys``): open markers; one legend entry (:data:`INVALID_LABEL`) per axes."""
    if len(xs):
        ax.plot(xs, ys, ls="none", marker=marker, mfc="white", mec=colour, mew=1.4, zorder=5,
                label=_once(ax, INVALID_LABEL))


def shade_spans(ax: Any, spans: Sequence[tuple[float, float]], colours: Sequence[str], alpha: float) -> None:
    """Each x range of ``spans`` shaded over the full height of ``ax`` in its colour, as ``axvspan``
    shades one, but all in one collection: a long run's timeline shades hundreds of trials on every
    panel, and a patch each took longer to make and to draw than the rest of the plot."""
    ax.add_collection(_matplotlib().collections.PolyCollection(
        [[(a, 0.0), (a, 1.0), (b, 1.0), (b, 0.0)] for a, b in spans], facecolors=colours, alpha=alpha, lw=0,
        transform=ax.get_xaxis_transform()), autolim=False)
    ax.update_datalim([(x, 0.0) for span in spans for x in span], updatey=False)
    ax.autoscale(enable=ax.get_autoscalex_on(), axis="x")  # the x range takes the spans in, as axvspan's does


def log_if_wide(ax: Any, values: list[float], axis: str = "y", decades: float = 1.3) -> None:
    vals = [v for v in values if v and v > 0]
    if vals and max(vals) / min(vals) > 10**decades:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")


def legend(ax: Any, **kw: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(**kw)


def fig_legend(fig: Figure, axes: Sequence[Any]) -> None:
    """One legend for all panels, below them (labels deduplicated)."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if seen:
        fig.legend(list(seen.values()), list(seen.keys()), loc="outside lower center",
                   ncols=2 if len(seen) > 3 else len(seen),
                   fontsize=7.5)


def facets(n: int, w: float = 7.6, h_row: float = 2.8, max_cols: int = 2) -> tuple[Figure, list[Any]]:
    cols = 1 if n == 1 else max_cols
    rows = (n + cols - 1) // cols
    fig, axes = subplots(rows, cols, w=w, h=max(3.2, h_row * rows))
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def size_title(size: Any) -> str:
    lab = frame_size_label(size)
    return f"{lab} B frames" if lab.isdigit() else f"{lab} frames"


# -- rendering ------------------------------------------------------------------------------------
_ID_RE = re.compile(r'\bid="([^"]+)"')
#: The longest line a figure shows (a title, a legend entry): a longer one (a run named by a long
#: config name or directory) is cut in the middle, or the axes would lose their room to it.
MAX_TEXT_CHARS = 80


def shorten(line: str, width: int = MAX_TEXT_CHARS) -> str:
    """``line`` cut in the middle to at most ``width`` characters (``…``), its start and end kept."""
    if len(line) <= width:
        return line
    tail = (width - 1) // 3
    return line[:width - 1 - tail] + "…" + line[len(line) - tail:]


def _texts(artist: Any) -> Iterator[Any]:
    """Every text of ``artist`` and its children but tick labels: an axis draws those from its
    formatter at each draw (a label cut here would be drawn whole again), and asking an axis for its
    ticks makes them, each with its lines and texts, before the plot is laid out."""
    mpl = _matplotlib()
    if isinstance(artist, mpl.text.Text):
        yield artist
    children = [artist.label, artist.offsetText] if isinstance(artist, mpl.axis.Axis) else artist.get_children()
    for child in children:
        yield from _texts(child)


def fit_texts(fig: Figure) -> None:
    """Every line of every text of ``fig`` (titles, legends, annotations) at most
    :data:`MAX_TEXT_CHARS` long; math text (``$…$``) is left as it is."""
    for t in _texts(fig):
        lines = t.get_text().split("\n")
        if "$" not in t.get_text() and any(len(line) > MAX_TEXT_CHARS for line in lines):
            t.set_text("\n".join(shorten(line) for line in lines))


def _print_svg(fig: Figure) -> str:
    """``fig`` as an SVG document, laid out and drawn in one pass: its layout engine runs as the
    drawing starts. (``savefig`` draws a figure that has a layout engine twice: first a draw that
    renders nothing, only to run the layout, then the draw that writes the file.)"""
    buf = io.StringIO()
    mpl = _matplotlib()
    with mpl.rc_context(STYLE):
        mpl.backends.backend_svg.FigureCanvasSVG(fig).print_svg(
            buf, metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return buf.getvalue()


def figure_svg(fig: Figure, prefix: str = "") -> str:
    """``fig`` as inline SVG text: no XML prolog, no metadata, no namespace URLs, ids prefixed with
    ``prefix`` so several plots can share one HTML page, sized to scale with the page."""
    fit_texts(fig)
    svg = _print_svg(fig)
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    svg = re.sub(r'(<svg[^>]*?)\s+version="1\.1"', r"\1", svg, count=1)
    svg = re.sub(r'(<svg[^>]*?)\s+width="([\d.]+)pt"\s+height="([\d.]+)pt"',
                 lambda m: (f'{m.group(1)} width="{float(m.group(2)) * 4 / 3:.0f}" '
                            f'height="{float(m.group(3)) * 4 / 3:.0f}"'),
                 svg, count=1)
    if prefix:
        svg = _ID_RE.sub(lambda m: f'id="{prefix}{m.group(1)}"', svg)
        svg = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', svg)
        svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", svg)
    return svg.strip()


def draw(p: Plot, runs: Sequence[RunView], **opts: Any) -> Figure | None:
    """Draw plot type ``p`` for ``runs`` (in the report style)."""
    with _matplotlib().rc_context(STYLE):
        return p.fn(list(runs), **opts)


def render_svg(p: Plot, runs: Sequence[RunView], prefix: str | None = None, **opts: Any) -> str | None:
    """Plot type ``p`` as inline SVG text, or ``None`` when the runs have no data for it."""
    fig = draw(p, runs, **opts)
    if fig is None:
        return None
    return figure_svg(fig, prefix if prefix is not None else f"{p.name}-")


def size_from_label(lab: str) -> Any:
    return int(lab) if lab.isdigit() else lab


def si(v: float) -> str:
    """``446428.6`` → ``"446 k"`` (three significant digits, SI prefix, trailing space)."""
    for f, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= f:
            return f"{v / f:.3g} {p}"
    return f"{v:.3g} "
