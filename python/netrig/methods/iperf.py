"""iperf-like "best effort" mode (RFC 1242 frame loss rate): a fixed rate for a duration, the
received rate every interval and in total."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from netrig.measure import Interval, Measurer, Phase
from netrig.methodology.method import Context, Method
from netrig.methodology.stats import check, median
from netrig.methods.sections import OTHER_METHODS
from netrig.model import FrameSize, LineRate, format_bps, format_pps, format_pps_range, rate_object, rates
from netrig.view import fmt
from netrig.view.frame_results import read_frame_results
from netrig.view.html import empty, figure, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.plotkit import (
    legend,
    plot,
    rate_axis,
    run_colour,
    si,
    size_title,
    subplots,
)
from netrig.view.run_view import RunView, Stat
from netrig.view.table import Table

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class IperfParams:
    rate_pct: float = 100.0  # of line rate
    duration_s: float = 10.0
    interval_s: float = 1.0
    repetitions: int | None = None

    def __post_init__(self) -> None:
        check("rate_pct", self.rate_pct, lo=0, lo_open=True, hi=1000)
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        check("interval_s", self.interval_s, lo=0, lo_open=True, hi=self.duration_s)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class IperfInterval:
    """One interval as written (``per_interval[]``): its start, the rate received, frames received."""

    t_s: float
    rx_pps: float
    frames_received: int

    def to_dict(self) -> dict:
        return {"t_s": self.t_s, "rx_pps": self.rx_pps, "frames_received": self.frames_received}


@dataclass(frozen=True)
class IperfResult:
    frame: FrameSize
    line_rate: LineRate
    intended_pps: float
    #: Every frame received over the duration, per second (of an invalid trial too: see ``headline_pps``).
    received_pps: float
    loss_ratio: float
    valid: bool
    per_interval: tuple[IperfInterval, ...]

    @classmethod
    def of(cls, frame: FrameSize, line_rate: LineRate, intended_pps: float, duration_s: float,
           intervals: Sequence[Interval], valid: bool) -> IperfResult:
        sent, got = sum(i.frames_sent for i in intervals), sum(i.frames_received for i in intervals)
        return cls(frame, line_rate, intended_pps, got / duration_s, 1 - got / sent if sent else 0.0, valid,
                   tuple(IperfInterval(i.t_s, i.rx_pps, i.frames_received) for i in intervals))

    @property
    def headline_pps(self) -> float | None:
        """The rate received, from a valid trial only (an invalid one is the tester's, not used)."""
        return self.received_pps if self.valid else None

    def stats_values(self) -> dict:
        return {"received_pps": self.headline_pps}

    def to_dict(self) -> dict:
        return {"intended_pps": self.intended_pps, "received_pps": self.received_pps,
                "received": rate_object(self.received_pps, self.frame, self.line_rate),
                "loss_ratio": self.loss_ratio, "valid": self.valid,
                "per_interval": [i.to_dict() for i in self.per_interval]}


def measure_iperf(measurer: Measurer, frame: FrameSize, line_rate: LineRate,
                  params: IperfParams = IperfParams(), tag: str = "") -> IperfResult:
    rate = line_rate.fps(frame) * params.rate_pct / 100
    c = measurer.measure_phases(frame, [Phase(rate, params.duration_s)], params.interval_s, tag=tag)
    return IperfResult.of(frame, line_rate, rate, params.duration_s, c.intervals or (), c.valid)


# --------------------------------------------------------------------------------------------- #
# Reading it back from results

@dataclass(frozen=True)
class Entry:
    """One frame size's runs: the intended and received rates, the loss, each run's received rate per
    interval."""

    frame_size: object
    intended_pps: Stat | None
    received: Stat | None
    loss_ratio: Stat | None
    series: list[list[tuple[float, float]]]


def entries(run: RunView) -> list[Entry]:
    """Per frame size, the repetitions' rates and per-interval series."""
    out = []
    for r in run.frame_results(METHOD_NAME, IperfResult):
        reps = r.repetitions
        series = [pts for rep in reps
                  if (pts := [(p.t_s, p.rx_pps) for p in rep.per_interval or () if p.t_s is not None
                              and p.rx_pps is not None])]
        received = Stat.from_spread(r.spread("received_pps")) \
            or Stat.over(x.received_pps for x in reps if x.valid is not False)
        if received is None and not series:
            continue
        out.append(Entry(r.frame_size, Stat.over(x.intended_pps for x in reps), received,
                         Stat.over(x.loss_ratio for x in reps), series))
    return out


def table(r: RunView) -> Table:
    t = Table(["frame size", "intended", "received (median, min–max)", "% line rate", "bit/s (L1)", "loss"])
    for e in entries(r):
        rec = e.received
        t.add([fmt.size(e.frame_size), fmt.fps(e.intended_pps.value if e.intended_pps else None),
               fmt.fps_stat(rec),
               fmt.pct(r.pct_of_line_rate(e.frame_size, rec.value) if rec else None),
               fmt.bps(r.bps(e.frame_size, rec.value) if rec else None),
               fmt.pct(100 * e.loss_ratio.value, 3) if e.loss_ratio else fmt.DASH])
    return t


@plot("iperf")
def iperf_plot(runs: Sequence[RunView]) -> Figure | None:
    """iperf-like fixed-rate runs: received frames/s per interval, with the intended rate."""
    series = [(i, r, e) for i, r in enumerate(runs) for e in entries(r) if e.series]
    if not series:
        return None
    fig, axes = subplots(h=3.2)
    ax = axes[0][0]
    for i, r, e in series:
        c = run_colour(i)
        for k, s in enumerate(e.series):
            xs, ys = zip(*s)
            label = f"{r.name + ', ' if len(runs) > 1 else ''}{size_title(e.frame_size)}" if k == 0 else None
            ax.plot(xs, ys, color=c, marker=".", alpha=1.0 if k == 0 else 0.5, label=label)
        if e.intended_pps is not None:
            ax.axhline(e.intended_pps.value, color=c, ls="--", lw=1.0,
                       label=f"intended ({si(e.intended_pps.value)}fps)")
    shown = [y for _, _, e in series for s in e.series for _, y in s]
    if not rate_axis(ax, shown + [e.intended_pps.value for _, _, e in series if e.intended_pps is not None]):
        ax.set_ylim(bottom=0)
    ax.set_ylabel("received (frames/s)")
    ax.set_xlabel("time since start (s)")
    ax.set_title("Fixed-rate (iperf-like) run: received rate per interval")
    legend(ax, loc="lower right")
    return fig


# --------------------------------------------------------------------------------------------- #
# The method

METHOD_NAME = "iperf"
#: In a comparison, the other methods of the section have no overlay.
COMPARE_NOTE = ('<p class="note">Back-to-back, recovery, reset and per-trial DUT monitoring timelines are in each '
                "result's own report (<code>netrig report FILE</code>).</p>")


class Iperf(Method):
    name = METHOD_NAME
    event_trials = "phases"
    label = "iperf-like fixed rate"
    params_type = IperfParams
    sections = (OTHER_METHODS,)
    plots = (iperf_plot,)
    console_columns = (f"{rates.INTENDED} fps", f"{rates.RECEIVED} fps (median)", "% line rate", "L1 bit/s",
                       "L2 bit/s", "min–max")

    def run(self, params: IperfParams, ctx: Context) -> IperfResult:
        return measure_iperf(ctx.measurer, ctx.frame, ctx.line_rate, params)

    def top_rate_pct(self, params: IperfParams) -> float:
        return params.rate_pct

    def verdict_values(self, result: dict) -> dict[str, float | None]:
        return {"loss_ratio": median(x.loss_ratio for x in read_frame_results(result, IperfResult).repetitions)}

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        r = read_frame_results(result, IperfResult)
        h, mm = r.headline, r.spread("received_pps")
        intended = median(x.intended_pps for x in r.repetitions)
        asked = format_pps(intended) if intended is not None else "—"
        if h is None or h.fps is None:  # no valid trial: no rate to show
            return [[fmt.size(r.frame_size), asked, "—: every trial invalid (not used)", "—", "—", "—", "—", flags]]
        return [[fmt.size(r.frame_size), asked, format_pps(h.fps), f"{h.pct_line_rate or 0:.2f}",
                 format_bps(h.l1_bps or 0), format_bps(h.l2_bps or 0), format_pps_range(mm.min or 0, mm.max or 0),
                 flags]]

    def html(self, run: RunView) -> dict[str, str]:
        ip, t = figure(iperf_plot, [run]), table(run)
        return {OTHER_METHODS.id: "<h3>Fixed-rate (iperf-like) runs</h3>"
                + (ip + table_html(t) if ip or t else empty("No fixed-rate run in this result."))}

    def compare_html(self, runs: Sequence[RunView]) -> dict[str, str]:
        return {OTHER_METHODS.id: figure(iperf_plot, runs)
                or empty("No fixed-rate run in these results.") + COMPARE_NOTE}

    def markdown(self, run: RunView) -> str:
        t = table(run)
        return section_md("Fixed rate (iperf-like)", table_md(t), "") if t else ""


METHOD = Iperf()
