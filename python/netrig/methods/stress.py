"""Stress and spikes (methodology §6, lab report 001): a load profile that overloads the DUT — a
step, short spikes, or a ramp beyond its throughput — in one continuous trial, counted per interval
by the frames' transmit time; measured per overload episode: the frames lost during it, the time
until forwarding is loss-free again after it, and the latency during that recovery against the
latency before the first overload.

Profiles (rates relative to the DUT's throughput ``T``, from an earlier method or measured first)::

    step:   base_pct·T for before_s │ peak_pct·T for overload_s │ base_pct·T for after_s
    spike:  base_pct·T for before_s │ (peak_pct·T for spike_s, base_pct·T for gap_s) × spikes
    ramp:   base_pct·T for before_s │ ramp_steps linear steps base → peak over overload_s │
            base_pct·T for after_s

An episode is a run of consecutive phases above ``T``; its recovery window is the base phase after
it. Recovery time: from the end of the episode to the start of the first interval after which no
interval of the window loses a frame (resolution: ``interval_s``); ``None`` when the window ends
still losing. The DUT must not crash: a DUT that forwards nothing at all after the last overload is
flagged ``never recovered``."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from netrig.errors import ConfigError
from netrig.measure import Interval, Phase
from netrig.methodology.method import Command, Context, Method, Section, Shortcut
from netrig.methodology.stats import check
from netrig.methodology.vocabulary import option
from netrig.model import FrameSize, LineRate
from netrig.view import fmt
from netrig.view.frame_results import read_frame_results
from netrig.view.html import figure, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.plotkit import legend, plot, rate_axis, run_colour, size_title, subplots
from netrig.view.run_view import RunView
from netrig.view.table import Table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PROFILES = ("step", "spike", "ramp")


@dataclass(frozen=True)
class StressParams:
    profile: str = "step"
    base_pct: float = 50.0  # of throughput
    peak_pct: float | None = None  # default: 150 (step, ramp), 300 (spike)
    before_s: float = 2.0
    overload_s: float = 2.0
    after_s: float = 4.0
    spikes: int = 3
    spike_s: float = 0.2
    gap_s: float = 2.0
    ramp_steps: int = 5
    interval_s: float = 0.1
    throughput_from: int | None = None
    repetitions: int | None = None

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ConfigError("profile", f"{self.profile!r}: one of {', '.join(PROFILES)}")
        if self.peak_pct is None:
            object.__setattr__(self, "peak_pct", 300.0 if self.profile == "spike" else 150.0)
        check("base_pct", self.base_pct, lo=0, lo_open=True, hi=100, hi_open=True)
        check("peak_pct", self.peak_pct, lo=100, lo_open=True, hi=1000)
        for name in ("before_s", "overload_s", "after_s", "spike_s", "gap_s"):
            check(name, getattr(self, name), lo=0, lo_open=True, hi=3600)
        check("spikes", self.spikes, lo=1, hi=100, integer=True)
        check("ramp_steps", self.ramp_steps, lo=2, hi=100, integer=True)
        shortest = min(self.spike_s, self.gap_s) if self.profile == "spike" else min(self.before_s, self.after_s)
        check("interval_s", self.interval_s, lo=0.01, hi=shortest)
        if self.throughput_from is not None:
            check("throughput_from", self.throughput_from, lo=0, integer=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)

    def phases(self, throughput_pps: float, line_fps: float) -> list[Phase]:
        """The profile's phases at ``throughput_pps`` (peaks capped at the line rate)."""
        assert self.peak_pct is not None
        base = max(1.0, throughput_pps * self.base_pct / 100)
        peak = min(throughput_pps * self.peak_pct / 100, line_fps)
        out = [Phase(base, self.before_s)]
        if self.profile == "step":
            out += [Phase(peak, self.overload_s), Phase(base, self.after_s)]
        elif self.profile == "spike":
            for _ in range(self.spikes):
                out += [Phase(peak, self.spike_s), Phase(base, self.gap_s)]
        else:
            n = self.ramp_steps
            out += [Phase(base + (peak - base) * (k + 1) / n, self.overload_s / n) for k in range(n)]
            out.append(Phase(base, self.after_s))
        return out


@dataclass(frozen=True)
class Episode:
    """One overload and the recovery after it."""

    start_s: float
    end_s: float
    peak_pps: float
    frames_sent: int
    frames_lost: int
    #: From the end of the overload until forwarding was loss-free for the rest of the window.
    recovery_s: float | None
    #: Latency in the recovery (from the episode's end to loss-free forwarding), ns.
    recovery_latency_mean_ns: float | None
    recovery_latency_max_ns: float | None
    #: Frames lost in the recovery window.
    recovery_lost: int

    def to_dict(self) -> dict:
        return {"start_s": self.start_s, "end_s": self.end_s, "peak_pps": self.peak_pps,
                "frames_sent": self.frames_sent, "frames_lost": self.frames_lost,
                "loss_ratio": self.frames_lost / self.frames_sent if self.frames_sent else 0.0,
                "recovered": self.recovery_s is not None, "recovery_s": self.recovery_s,
                "recovery_latency_mean_ns": self.recovery_latency_mean_ns,
                "recovery_latency_max_ns": self.recovery_latency_max_ns, "recovery_lost": self.recovery_lost}


@dataclass(frozen=True)
class StressResult:
    profile: str
    throughput_pps: float
    base_pps: float
    intervals: tuple[Interval, ...]
    episodes: tuple[Episode, ...]
    #: Latency before the first overload (mean over the intervals of the first phase), ns.
    baseline_latency_ns: float | None
    valid: bool = True

    @property
    def recovered(self) -> bool:
        return bool(self.episodes) and all(e.recovery_s is not None for e in self.episodes)

    @property
    def worst_recovery_s(self) -> float | None:
        times = [e.recovery_s for e in self.episodes]
        return None if not times or any(t is None for t in times) else max(t for t in times if t is not None)

    @property
    def headline_pps(self) -> float | None:
        return None

    def stats_values(self) -> dict:
        lost = sum(e.frames_lost for e in self.episodes)
        sent = sum(e.frames_sent for e in self.episodes)
        return {"recovery_s": self.worst_recovery_s, "overload_loss_ratio": lost / sent if sent else None}

    def to_dict(self) -> dict:
        return {"profile": self.profile, "throughput_pps": self.throughput_pps, "base_pps": self.base_pps,
                "recovered": self.recovered, "recovery_s": self.worst_recovery_s, "valid": self.valid,
                "baseline_latency_ns": self.baseline_latency_ns, "episodes": [e.to_dict() for e in self.episodes],
                "intervals": [i.to_dict() for i in self.intervals]}


def episodes_of(intervals: tuple[Interval, ...], phases: list[Phase], throughput_pps: float) -> list[Episode]:
    """The overload episodes of a stress trial from its per-interval counts (see the module)."""
    over = [p.rate_pps > throughput_pps * (1 + 1e-9) for p in phases]
    out: list[Episode] = []
    i = 0
    while i < len(phases):
        if not over[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(phases) and over[j + 1]:
            j += 1
        ivs = [iv for iv in intervals if i <= iv.phase <= j]
        window = [iv for iv in intervals if iv.phase == j + 1]
        end = (window[0].t_s if window else (ivs[-1].t_s + ivs[-1].duration_s if ivs else 0.0))
        # The last lossy interval of the window: loss-free forwarding starts after it.
        k = len(window)
        while k > 0 and window[k - 1].frames_lost == 0:
            k -= 1
        recovered = bool(window) and k < len(window)
        recovery = (window[k].since(end) if k < len(window) else None) if recovered else None
        rec_ivs = [iv for iv in window[:max(k, 1)] if iv.frames_received and iv.latency_mean_ns is not None]
        rec_frames = sum(iv.frames_received for iv in rec_ivs)
        out.append(Episode(
            start_s=ivs[0].t_s if ivs else 0.0, end_s=end, peak_pps=max(phases[x].rate_pps for x in range(i, j + 1)),
            frames_sent=sum(iv.frames_sent for iv in ivs), frames_lost=sum(iv.frames_lost for iv in ivs),
            recovery_s=recovery,
            recovery_latency_mean_ns=(sum((iv.latency_mean_ns or 0.0) * iv.frames_received for iv in rec_ivs)
                                      / rec_frames) if rec_frames else None,
            recovery_latency_max_ns=max((iv.latency_max_ns or 0.0 for iv in rec_ivs), default=None),
            recovery_lost=sum(iv.frames_lost for iv in window)))
        i = j + 1
    return out


def measure_stress(ctx: Context, params: StressParams) -> StressResult:
    tp = ctx.throughput_or(10.0)
    phases = params.phases(tp, ctx.line_rate.fps(ctx.frame))
    c = ctx.measurer.measure_phases(ctx.frame, phases, params.interval_s, tag=f"stress-{params.profile}")
    intervals = tuple(c.intervals or ())
    first = [iv for iv in intervals if iv.phase == 0 and iv.frames_received and iv.latency_mean_ns is not None]
    n = sum(iv.frames_received for iv in first)
    base_lat = sum((iv.latency_mean_ns or 0.0) * iv.frames_received for iv in first) / n if n else None
    return StressResult(params.profile, tp, phases[0].rate_pps, intervals, tuple(episodes_of(intervals, phases, tp)),
                        base_lat, c.valid)


# --------------------------------------------------------------------------------------------- #
# Reading it back from results

def _us(v: float | None) -> str:
    return fmt.DASH if v is None else f"{v / 1000:.1f} µs"


def table(r: RunView) -> Table:
    t = Table(["frame size", "profile", "episode", "peak", "lost in overload", "recovery", "lost after",
               "latency before", "latency in recovery (mean / max)"])
    for e in r.frame_results(METHOD_NAME, StressResult):
        for rep in e.repetitions:
            for k, ep in enumerate(rep.episodes or ()):
                loss = ep.frames_lost / ep.frames_sent if ep.frames_sent else 0.0
                t.add([fmt.size(e.frame_size), str(rep.profile), str(k + 1), fmt.fps(ep.peak_pps),
                       f"{ep.frames_lost:,} ({100 * loss:.2f} %)",
                       fmt.seconds(ep.recovery_s) if ep.recovery_s is not None else "never",
                       f"{ep.recovery_lost:,}", _us(rep.baseline_latency_ns),
                       f"{_us(ep.recovery_latency_mean_ns)} / {_us(ep.recovery_latency_max_ns)}"])
    return t


@plot("stress")
def stress_plot(runs: list[RunView]) -> Figure | None:
    """Stress and spikes: sent and received rate per interval (top) and the received frames'
    mean latency per interval (bottom), per frame size; shaded: the overload episodes."""
    entries = [(r, e.frame_size, e.repetitions[0]) for r in runs for e in r.frame_results(METHOD_NAME, StressResult)
               if e.repetitions]
    if not entries:
        return None
    fig, axes = subplots(2, 1, h=5.0, sharex=True)
    rate_ax, lat_ax = axes[0][0], axes[1][0]
    for j, (r, size, rep) in enumerate(entries):
        ivs = rep.intervals or ()
        ts = [iv.t_s for iv in ivs]
        colour = run_colour(j)
        name = f"{r.name} {size_title(size)}" if len(runs) > 1 else size_title(size)
        rate_ax.step(ts, [iv.frames_sent / (iv.duration_s or 1) for iv in ivs], where="post",
                     color=colour, lw=0.8, ls="--", label=f"{name} sent")
        rate_ax.step(ts, [iv.rx_pps for iv in ivs], where="post", color=colour, lw=1.2, label=f"{name} received")
        lat = [(iv.t_s, iv.latency_mean_ns / 1000) for iv in ivs if iv.latency_mean_ns is not None]
        lat_ax.plot([t for t, _ in lat], [v for _, v in lat], color=colour, lw=1.0)
        for ep in rep.episodes or ():
            rate_ax.axvspan(ep.start_s, ep.end_s, color=colour, alpha=0.08)
    rate_axis(rate_ax, [v for _, _, rep in entries for iv in rep.intervals or ()
                        for v in (iv.frames_sent / (iv.duration_s or 1), iv.rx_pps)])
    rate_ax.set_ylabel("frames/s")
    lat_ax.set_ylabel("latency (µs, mean)")
    lat_ax.set_xlabel("time into the trial (s)")
    legend(rate_ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


# --------------------------------------------------------------------------------------------- #
# The method

METHOD_NAME = "stress"
STRESS = Section("stress", "Stress and spikes")


class Stress(Method):
    name = METHOD_NAME
    label = "Stress and spikes"
    params_type = StressParams
    needs_throughput = True
    sections = (STRESS,)
    plots = (stress_plot,)
    console_columns = ("worst recovery", "lost in overload")
    shortcut = Shortcut(Command("stress", "stress and spikes: overload the DUT (step, spike, ramp) and measure "
                                          "loss, recovery time and latency while it recovers",
                                "Measure the DUT's throughput (RFC 2544), then run one continuous trial through a load "
                                "profile that overloads it, counted per interval: frames lost in each overload, the "
                                "time until forwarding is loss-free again, and the latency during that recovery.",
                                sizes_default="64"), "stress")
    cli_fields = {"profile": "--profile", "peak_pct": "--peak", "base_pct": "--base", "interval_s": "--interval"}

    def config_defaults(self, params: dict, trial_duration_s: float) -> dict:
        return params

    def estimate_trials(self, params: StressParams, frame: FrameSize, line_fps: float) -> int:
        return 1

    def top_rate_pct(self, params: StressParams) -> float:
        return 100.0

    def run(self, params: StressParams, ctx: Context) -> StressResult:
        return measure_stress(ctx, params)

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        res = read_frame_results(result, StressResult)
        reps = [r for r in res.repetitions if r.valid is not False]
        worst = [w for w in (r.worst_recovery_s for r in reps) if w is not None]
        lost = sum(ep.frames_lost for r in reps for ep in r.episodes or ())
        if not reps:
            rec = "—: every trial invalid"
        elif not any(r.episodes for r in reps):
            rec = "—: no overload episode"
        elif len(worst) < len(reps):
            rec = "never"
        elif max(worst) == 0:  # the first interval after the overload lost nothing: below the resolution
            rec = "—: no loss after the overload" if lost == 0 else "within the first interval"
        else:
            rec = fmt.seconds(max(worst))
        return [[fmt.size(res.frame_size), rec, f"{lost:,}", flags]]

    def html(self, run: RunView) -> dict[str, str]:
        t = table(run)
        if not t:
            return {}
        return {STRESS.id: figure(stress_plot, [run]) + table_html(t, left=3)}

    def markdown(self, run: RunView) -> str:
        t = table(run)
        return section_md("Stress and spikes", table_md(t), "") if t else ""

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        option(parser, "--profile", "step: one overload; spike: short bursts; ramp: linear steps up to the peak [step]",
               default="step", choices=PROFILES)
        option(parser, "--peak", "overload, %% of throughput [150; spike 300]")
        option(parser, "--base", "load around the overloads, %% of throughput [50]", default="50")
        option(parser, "--interval", "the counting interval: 100ms, 0.2s [100ms]", default="100ms")

    def cli_params(self, args: argparse.Namespace) -> dict:
        out: dict = {"profile": args.profile, "base_pct": args.base, "interval_s": args.interval}
        if args.peak is not None:
            out["peak_pct"] = args.peak
        return out


METHOD = Stress()

__all__ = ["METHOD", "StressParams", "StressResult", "episodes_of", "measure_stress"]
