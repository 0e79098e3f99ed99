"""Soak (stability) test with verdicts: one long continuous trial at a fixed load, counted per
interval, with the DUT monitored, judged for memory leaks, CPU spikes and loss episodes
(the spec's methodology §6 "Stability / soak"; netrig's notes: docs/methodology.md, *Soak*).

Data flow. The soak asks the measurer for one soak trial (``Measurer.measure_soak``): a single
engine trial for the whole duration, counted per interval of ``interval_s`` by transmit time
(the engine's ``IntervalGrid``). While it runs, the engine says which intervals are final
(``_native.Trial.settled_intervals``: an interval whose end is more than the late threshold — the
drain time, 2 s by default — in the past has all its frames counted; the live counts are exactly
the result's). Each settled interval comes with the newest sample of a DUT monitor sampling every
interval (``netrig.monitor``: CPU per core, CPU and RSS per DUT process — ``trial.cpu_procs`` —
``MemAvailable``, slab, conntrack entries, interface drop counters; or a DUT on another host over
SSH with ``--monitor-remote``), compacted (``compact_sample``). The run's recording measurer appends
every interval to ``trials.ndjson`` as an ``interval`` record (fsync'd) before the soak sees it;
the soak prints its live verdicts (a console note per interval). When the trial ends, its last
intervals follow and then its trial record.

Resume. A soak stopped by anything (Ctrl-C, SIGTERM, ``kill -9``, power loss) has its intervals on
disk up to the last settled one: it loses at most the last interval and the late threshold after
it. ``netrig soak --resume DIR`` (the same as ``netrig run --resume DIR``) replays the finished trials (the
NDR search, if one ran) and the soak's interval records, then continues with a new *segment* — a
new continuous trial for the rest of the duration. Interval times are soak time: segments are
back to back, without the gap between them; each interval says its segment, and the report marks
where one began.

Verdicts (each interval live, and at the end; thresholds are parameters, printed with the
verdicts):

* **memory leak**, per memory series (RSS of each DUT process; conntrack entries; with
  ``host_memory_verdict`` also the host's used memory, total − ``MemAvailable``, and slab): the
  least-squares slope over time with its confidence interval (``confidence_pct``; Student t, its
  standard error widened for the residuals' lag-1 autocorrelation, since memory noise is not
  independent from one sample to the next), and the mean ± sd of the first and the last
  ``stage_pct`` % of the samples. A series leaks when the interval's lower bound is above zero
  (growth, not no growth), the last stage's mean is more than ``leak_min_growth_pct`` % above the
  first's (small growth is noise), and the stages' mean ± sd do not overlap. On a single-host test
  bed the host's memory is shared with the tester and everything else on it, so it is shown but
  not judged unless asked.
* **CPU spikes**: episodes of consecutive samples at or above ``cpu_spike_pct`` busy, per core and
  per DUT process: when, how long, the peak. A series whose median is at or above the threshold is
  saturated (busy throughout), not spiking, and is said so instead.
* **loss episodes**: runs of consecutive intervals that each lost at least ``loss_min_frames``
  frames: when, how long, how many frames.
"""
from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from netrig.errors import ConfigError
from netrig.measure import CompactSample, Interval, Load, MemInfo, TrialCounts
from netrig.methodology.method import Command, Context, Method, Section, Shortcut, with_partial
from netrig.methodology.stats import check
from netrig.methodology.vocabulary import option
from netrig.methods.throughput import ThroughputParams, measure_throughput
from netrig.model import FrameSize, LineRate, format_pps, parse_rate, rates
from netrig.view import fmt
from netrig.view.frame_results import read_frame_results
from netrig.view.html import esc, figure, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.plotkit import REF_GREY, plot, rate_axis, run_colour, subplots
from netrig.view.run_view import RunView, frame_size_sort_key
from netrig.view.table import Table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

METHOD_NAME = "soak"


# --------------------------------------------------------------------------------------------- #
# Parameters

@dataclass(frozen=True)
class SoakThresholds:
    """The verdicts' thresholds (the parameters of the same names), written with the result."""

    confidence_pct: float = 95.0
    stage_pct: float = 20.0
    leak_min_growth_pct: float = 5.0
    host_memory_verdict: bool = False
    cpu_spike_pct: float = 90.0
    loss_min_frames: int = 1

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class SoakParams:
    """``rate`` (frames/s, bit/s, % of line rate, or ``80%NDR``: a share of the DUT's NDR — of
    ``ndr_pps`` when given, else measured first with the throughput search of ``ndr_trial_s``
    trials) held for ``duration_s``, counted every ``interval_s``; the verdicts' thresholds."""

    rate: str = "80%NDR"
    duration_s: float = 7200.0
    interval_s: float = 10.0
    ndr_pps: float | None = None
    ndr_trial_s: float = 10.0
    confidence_pct: float = SoakThresholds.confidence_pct
    stage_pct: float = SoakThresholds.stage_pct
    leak_min_growth_pct: float = SoakThresholds.leak_min_growth_pct
    host_memory_verdict: bool = SoakThresholds.host_memory_verdict
    cpu_spike_pct: float = SoakThresholds.cpu_spike_pct
    loss_min_frames: int = SoakThresholds.loss_min_frames
    repetitions: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.rate, str):
            raise ConfigError("rate", f"must be a rate like 80%NDR, 50%, 100kpps or 1Gbps (got {self.rate!r})")
        if parse_rate(self.rate, "rate").kind == "max":
            raise ConfigError("rate", "a soak holds a fixed rate: give frames/s, bit/s, % of line rate or "
                                      "% of the NDR (e.g. 80%NDR), not max")
        check("interval_s", self.interval_s, lo=0.1, hi=3600)
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        if self.duration_s < 3 * self.interval_s:
            raise ConfigError("duration_s", f"{self.duration_s:g} s holds fewer than 3 intervals of "
                                            f"{self.interval_s:g} s: a soak needs a trend; lengthen it or shorten "
                                            "the interval")
        if self.ndr_pps is not None:
            check("ndr_pps", self.ndr_pps, lo=0, lo_open=True)
        check("ndr_trial_s", self.ndr_trial_s, lo=0, lo_open=True, hi=3600)
        check("confidence_pct", self.confidence_pct, lo=50, hi=100, hi_open=True)
        check("stage_pct", self.stage_pct, lo=0, lo_open=True, hi=50)
        check("leak_min_growth_pct", self.leak_min_growth_pct, lo=0, hi=10_000)
        if not isinstance(self.host_memory_verdict, bool):
            raise ConfigError("host_memory_verdict", f"must be true or false (got {self.host_memory_verdict!r})")
        check("cpu_spike_pct", self.cpu_spike_pct, lo=0, lo_open=True, hi=100)
        check("loss_min_frames", self.loss_min_frames, lo=1, integer=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)

    @property
    def ndr_share(self) -> float | None:
        """The rate as a share of the NDR (0.8 for ``80%NDR``), ``None`` for an absolute rate."""
        r = parse_rate(self.rate, "rate")
        return r.value / 100 if r.kind == "percent_ndr" and r.value is not None else None

    def thresholds(self) -> SoakThresholds:
        return SoakThresholds(self.confidence_pct, self.stage_pct, self.leak_min_growth_pct,
                              self.host_memory_verdict, self.cpu_spike_pct, self.loss_min_frames)


@dataclass(frozen=True)
class SoakInterval:
    """One interval of the soak as written (``intervals[]``): soak time, segment, counts (by transmit
    time), and the DUT monitor's sample that came with it."""

    t_s: float
    duration_s: float
    segment: int
    frames_sent: int
    frames_received: int
    frames_lost: int
    monitor: CompactSample | None = None

    @property
    def end_s(self) -> float:
        return self.t_s + self.duration_s

    @property
    def loss_ratio(self) -> float:
        return self.frames_lost / self.frames_sent if self.frames_sent else 0.0

    @property
    def rx_pps(self) -> float:
        return self.frames_received / self.duration_s if self.duration_s else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"t_s": self.t_s, "duration_s": self.duration_s, "segment": self.segment,
                "frames_sent": self.frames_sent, "frames_received": self.frames_received,
                "frames_lost": self.frames_lost, "monitor": self.monitor.to_dict() if self.monitor else None}


# --------------------------------------------------------------------------------------------- #
# Statistics of the verdicts (pure functions of series)

def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile (``p`` ≥ 0.5) of Student's t with ``df`` degrees of freedom: exact for 1 and
    2; below 30 the root of its CDF (the density integrated by Simpson's rule); above, the
    Cornish–Fisher expansion around the normal quantile (within 0.01 %)."""
    if df <= 1:
        return math.tan(math.pi * (p - 0.5))
    if df <= 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = statistics.NormalDist().inv_cdf(p)
    if df >= 30:
        return (z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
                + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3))
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def cdf(x: float, n: int = 200) -> float:
        h = x / n
        f = [c * (1 + (k * h) ** 2 / df) ** (-(df + 1) / 2) for k in range(n + 1)]
        return 0.5 + h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))

    lo, hi = z, 15.0 * z + 20
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


@dataclass(frozen=True)
class Slope:
    """A least-squares slope (per unit of x) and its two-sided confidence interval."""

    slope: float
    low: float
    high: float
    n: int
    #: Lag-1 autocorrelation of the residuals (the interval is widened for it when > 0).
    r1: float


def slope_ci(xs: Sequence[float], ys: Sequence[float], confidence: float = 0.95) -> Slope | None:
    """The slope of ``ys`` over ``xs`` with its ``confidence`` interval (``None`` below 4 points or
    without spread in ``xs``). With positively autocorrelated residuals (r1 > 0) the effective
    sample size is ``n (1 − r1) / (1 + r1)``: the standard error grows by ``sqrt((1 + r1) / (1 −
    r1))`` and the t quantile takes the effective degrees of freedom."""
    n = len(xs)
    if n < 4 or n != len(ys):
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    res = [y - (a + b * x) for x, y in zip(xs, ys)]
    sse = sum(r * r for r in res)
    se = math.sqrt(sse / (n - 2) / sxx)
    den = sum(r * r for r in res)
    r1 = sum(res[i] * res[i - 1] for i in range(1, n)) / den if den > 0 else 0.0
    r1 = min(max(r1, 0.0), 0.99)
    n_eff = max(3.0, n * (1 - r1) / (1 + r1))
    se *= math.sqrt((1 + r1) / (1 - r1))
    t = t_quantile(0.5 + confidence / 2, n_eff - 2)
    return Slope(b, b - t * se, b + t * se, n, r1)


def mean_sd(v: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)


@dataclass(frozen=True)
class Trend:
    """The leak verdict of one memory series."""

    series: str
    unit: str
    #: Counted in the verdict (host-wide memory on a shared host is shown only).
    judged: bool
    n: int
    #: Slope and its confidence interval, units per hour.
    slope_per_h: float
    low_per_h: float
    high_per_h: float
    first_mean: float
    first_sd: float
    last_mean: float
    last_sd: float
    growth_pct: float | None
    leak: bool
    why: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def trend(series: str, unit: str, ts: Sequence[float], ys: Sequence[float], th: SoakThresholds,
          judged: bool = True) -> Trend | None:
    """The leak verdict of ``ys`` over soak time ``ts`` (seconds); ``None`` below 4 samples."""
    s = slope_ci(ts, ys, th.confidence_pct / 100)
    if s is None:
        return None
    k = max(2, int(math.ceil(len(ys) * th.stage_pct / 100)))
    fm, fsd = mean_sd(ys[:k])
    lm, lsd = mean_sd(ys[-k:])
    growth = 100 * (lm - fm) / fm if fm > 0 else (math.inf if lm > fm else 0.0)
    grows = s.low > 0
    big = growth > th.leak_min_growth_pct
    apart = lm - lsd > fm + fsd
    leak = grows and big and apart
    if leak:
        why = (f"grows: {th.confidence_pct:g} % CI of the slope above 0, last stage {_pct(growth)} above the "
               "first, stages apart")
    elif not grows:
        why = f"no growth: the {th.confidence_pct:g} % CI of the slope includes 0 or is below it"
    elif not big:
        why = f"growth {_pct(growth)} ≤ {th.leak_min_growth_pct:g} %: noise, not a leak"
    else:
        why = "the first and last stages' mean ± sd overlap"
    return Trend(series, unit, judged, s.n, s.slope * 3600, s.low * 3600, s.high * 3600, fm, fsd, lm, lsd,
                 None if math.isinf(growth) else growth, leak and judged, why if judged else why + " (not judged: "
                 "host-wide, shared with the tester)")


def _pct(v: float) -> str:
    return "∞ %" if math.isinf(v) else f"{v:+.1f} %"


@dataclass(frozen=True)
class Episode:
    """A run of consecutive intervals (or samples) of one series beyond its threshold."""

    series: str
    start_s: float
    duration_s: float
    #: CPU: the highest busy %; loss: the interval loss ratio at its worst.
    peak: float
    frames_lost: int = 0
    frames_sent: int = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def episodes(series: str, points: Sequence[tuple[float, float, float, int]], above: Callable[[float], bool],
             lost: Sequence[tuple[int, int]] | None = None) -> list[Episode]:
    """Runs of ``points`` (``(t_s, duration_s, value, segment)``) with ``above(value)``; a run ends at
    a point that is not, and at a new segment. ``lost`` (per point: frames lost, sent) adds up."""
    out: list[Episode] = []
    cur: list[int] = []

    def close() -> None:
        if cur:
            a, b = points[cur[0]], points[cur[-1]]
            fl = sum(lost[i][0] for i in cur) if lost else 0
            fs = sum(lost[i][1] for i in cur) if lost else 0
            out.append(Episode(series, a[0], b[0] + b[1] - a[0], max(points[i][2] for i in cur), fl, fs))
            cur.clear()

    for i, (_, _, v, seg) in enumerate(points):
        if cur and points[cur[-1]][3] != seg:
            close()
        if above(v):
            cur.append(i)
        else:
            close()
    close()
    return out


def loss_episodes(rows: Sequence[SoakInterval], min_frames: int) -> list[Episode]:
    pts = [(r.t_s, r.duration_s, r.loss_ratio if r.frames_lost >= min_frames else -1.0, r.segment) for r in rows]
    return episodes("frames", pts, lambda v: v >= 0, [(r.frames_lost, r.frames_sent) for r in rows])


def _samples(rows: Sequence[SoakInterval]) -> Iterator[tuple[SoakInterval, CompactSample]]:
    return ((r, r.monitor) for r in rows if r.monitor is not None)


def cpu_episodes(rows: Sequence[SoakInterval], threshold: float) -> tuple[list[Episode], list[str]]:
    """CPU spike episodes per core and per DUT process, and the series saturated throughout."""
    series: dict[str, list[tuple[float, float, float, int]]] = {}
    for r, mon in _samples(rows):
        busy = {core: b for core, b in (mon.cpu or {}).items() if core != "all"}
        busy.update((name, p.cpu_percent) for name, p in (mon.procs or {}).items())
        for name, v in busy.items():
            if isinstance(v, (int, float)):
                series.setdefault(name, []).append((r.t_s, r.duration_s, float(v), r.segment))
    eps: list[Episode] = []
    saturated = []
    for name, pts in series.items():
        if statistics.median(p[2] for p in pts) >= threshold:
            saturated.append(name)
            continue
        eps.extend(episodes(name, pts, lambda v: v >= threshold))
    eps.sort(key=lambda e: (e.start_s, e.series))
    return eps, sorted(saturated)


def memory_series(rows: Sequence[SoakInterval]) -> dict[str, tuple[str, bool, list[tuple[float, float]]]]:
    """``{series: (unit, DUT-own, [(t_s, value)])}`` of the memory the monitor sampled: RSS per DUT
    process, conntrack entries per namespace (the DUT's own), the host's used memory (total −
    MemAvailable) and slab (host-wide)."""
    out: dict[str, tuple[str, bool, list[tuple[float, float]]]] = {}

    def add(name: str, unit: str, own: bool, t: float, v: Any) -> None:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.setdefault(name, (unit, own, []))[2].append((t, float(v)))

    for r, mon in _samples(rows):
        for name, p in (mon.procs or {}).items():
            add(f"RSS {name}", "B", True, r.end_s, p.rss_bytes)
        for ns, n in (mon.conntrack or {}).items():
            add(f"conntrack entries {ns}", "entries", True, r.end_s, n)
        mem = mon.mem or MemInfo()
        add("host memory used (total − MemAvailable)", "B", False, r.end_s, mem.used_bytes)
        add("host slab", "B", False, r.end_s, mem.slab_bytes)
    return out


def leak_verdicts(rows: Sequence[SoakInterval], th: SoakThresholds) -> list[Trend]:
    out = []
    for name, (unit, own, pts) in memory_series(rows).items():
        tr = trend(name, unit, [p[0] for p in pts], [p[1] for p in pts], th, judged=own or th.host_memory_verdict)
        if tr is not None:
            out.append(tr)
    return out


def interface_drops(rows: Sequence[SoakInterval]) -> dict[str, int]:
    """Per interface: drop and error counter increments over the soak (within segments)."""
    out: dict[str, int] = {}
    prev: dict[str, dict[str, int]] = {}
    seg = None
    for r, mon in _samples(rows):
        if mon.drops is None:
            continue
        if r.segment != seg:
            prev, seg = {}, r.segment
        for name, c in mon.drops.items():
            p = prev.get(name)
            if p is not None:
                out[name] = out.get(name, 0) + sum(max(0, int(v) - int(p.get(k, 0))) for k, v in c.items())
            else:
                out.setdefault(name, 0)
            prev[name] = dict(c)
    return out


# --------------------------------------------------------------------------------------------- #
# Result

@dataclass(frozen=True)
class SoakResult:
    """The soak as written (``to_dict``) and read back: what it held, every interval, the verdicts."""

    frame: FrameSize
    line_rate: LineRate
    #: The rate as asked (``80%NDR``, ``50%``, ``100kpps``) and in frames/s.
    rate: str
    rate_pps: float
    #: The NDR the rate is a share of (``None``: an absolute rate).
    ndr_pps: float | None
    interval_s: float
    duration_s: float
    thresholds: SoakThresholds
    intervals: tuple[SoakInterval, ...]
    #: The trial's validity (``None``: not ended, a live or interrupted soak).
    valid: bool | None = None
    invalid_reason: str | None = None
    complete: bool = True
    leaks: tuple[Trend, ...] = field(default=())
    cpu_spikes: tuple[Episode, ...] = field(default=())
    #: Series busy at or above the spike threshold throughout (median), not spiking.
    cpu_saturated: tuple[str, ...] = field(default=())
    loss_episodes: tuple[Episode, ...] = field(default=())

    @classmethod
    def build(cls, frame: FrameSize, line_rate: LineRate, params: SoakParams, rate_pps: float,
              ndr_pps: float | None, rows: Sequence[SoakInterval], counts: TrialCounts | None,
              complete: bool = True) -> SoakResult:
        th = params.thresholds()
        cpu, sat = cpu_episodes(rows, th.cpu_spike_pct)
        return cls(frame, line_rate, params.rate, rate_pps, ndr_pps, params.interval_s, params.duration_s, th,
                   tuple(rows), counts.valid if counts is not None else None,
                   counts.invalid_reason if counts is not None else None, complete,
                   tuple(leak_verdicts(rows, th)), tuple(cpu), tuple(sat),
                   tuple(loss_episodes(rows, th.loss_min_frames)))

    @property
    def covered_s(self) -> float:
        return sum(r.duration_s for r in self.intervals or ())

    @property
    def frames_sent(self) -> int:
        return sum(r.frames_sent for r in self.intervals or ())

    @property
    def frames_received(self) -> int:
        return sum(r.frames_received for r in self.intervals or ())

    @property
    def frames_lost(self) -> int:
        return max(0, self.frames_sent - self.frames_received)

    @property
    def leak(self) -> bool:
        return any(t.leak for t in self.leaks)

    @property
    def monitored(self) -> bool:
        return any(r.monitor for r in self.intervals or ())

    @property
    def headline_pps(self) -> float | None:
        return self.frames_received / self.covered_s if self.covered_s > 0 else None

    @property
    def loss_ratio(self) -> float | None:
        return self.frames_lost / self.frames_sent if self.frames_sent else None

    def stats_values(self) -> dict[str, float | None]:
        return {"rx_pps": self.headline_pps, "loss_ratio": self.loss_ratio,
                "loss_episodes": float(len(self.loss_episodes)), "cpu_spikes": float(len(self.cpu_spikes)),
                "leaks": float(sum(1 for t in self.leaks if t.leak))}

    def to_dict(self) -> dict:
        return {"rate": self.rate, "rate_pps": self.rate_pps, "ndr_pps": self.ndr_pps,
                "interval_s": self.interval_s, "duration_s": self.duration_s,
                "covered_s": self.covered_s, "segments": len({r.segment for r in self.intervals}),
                "complete": self.complete, "frames_sent": self.frames_sent, "frames_received": self.frames_received,
                "frames_lost": self.frames_lost, "loss_ratio": self.loss_ratio,
                "rx_pps": self.headline_pps, "valid": self.valid, "invalid_reason": self.invalid_reason,
                "thresholds": self.thresholds.to_dict(), "leak": self.leak,
                "leaks": [t.to_dict() for t in self.leaks], "cpu_spikes": [e.to_dict() for e in self.cpu_spikes],
                "cpu_saturated": list(self.cpu_saturated),
                "loss_episodes": [e.to_dict() for e in self.loss_episodes],
                "interface_drops": interface_drops(self.intervals), "intervals": [r.to_dict() for r in self.intervals]}


# --------------------------------------------------------------------------------------------- #
# Running it

def _size(v: float, unit: str) -> str:
    if unit != "B":
        return f"{v:+.1f}"
    a = abs(v)
    for div, u in ((2 ** 30, "GiB"), (2 ** 20, "MiB"), (2 ** 10, "KiB")):
        if a >= div:
            return f"{v / div:+.2f} {u}"
    return f"{v:+.0f} B"


def trend_text(t: Trend) -> str:
    u = "" if t.unit == "B" else " entries"
    return (f"{t.series} {_size(t.slope_per_h, t.unit)}{u}/h, {t.n} samples, CI [{_size(t.low_per_h, t.unit)}, "
            f"{_size(t.high_per_h, t.unit)}]/h")


def live_line(res: SoakResult, row: SoakInterval | None = None) -> str:
    """The latest interval (``row``, default the last of ``res``) and the verdicts of ``res``."""
    r = row if row is not None else res.intervals[-1]
    last = res.intervals[-1]
    as_of = "" if last is r else f" (verdicts as of {fmt_time(last.end_s)})"
    leaks = [t for t in res.leaks if t.leak]
    worst = max((t for t in res.leaks if t.judged), key=lambda t: t.low_per_h, default=None)
    mem = ("LEAK " + "; ".join(trend_text(t) for t in leaks)) if leaks else \
        ("no leak" + (f" ({trend_text(worst)})" if worst else "" if res.leaks else " (too few samples)"
                      if res.monitored else " (not monitored)"))
    saturated = f"; saturated throughout: {', '.join(res.cpu_saturated)}" if res.cpu_saturated else ""
    invalid = f" | INVALID: {res.invalid_reason or 'tester problem'}" if res.valid is False else ""
    return (f"soak {fmt_time(r.end_s)}/{fmt_time(res.duration_s)}: {rates.RECEIVED} {format_pps(r.rx_pps)}, "
            f"lost {r.frames_lost} | memory: {mem} | CPU spikes: {len(res.cpu_spikes)}{saturated} | "
            f"loss episodes: {len(res.loss_episodes)}{as_of}{invalid}")


def fmt_time(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def known_rate_pps(params: SoakParams, frame: FrameSize, line_rate: LineRate) -> float | None:
    """The soak's rate when it is known before the soak runs — an absolute rate, or its share of a
    given NDR (``ndr_pps``) —, else ``None`` (a share of an NDR still to be found)."""
    share = params.ndr_share
    if share is None:
        pps = parse_rate(params.rate, "rate").pps(frame.mean_size, line_rate.bps)
        assert pps is not None  # "max" was refused, and a line rate is known
        return pps
    return share * params.ndr_pps if params.ndr_pps else None


def resolve_rate(params: SoakParams, ctx: Context) -> tuple[float, float | None]:
    """``(rate_pps, ndr_pps)``: the NDR only for a rate relative to it (given, known, or measured)."""
    share = params.ndr_share
    if share is None:
        pps = known_rate_pps(params, ctx.frame, ctx.line_rate)
        assert pps is not None
        return pps, None
    ndr = params.ndr_pps or ctx.throughput_pps
    if ndr is None or ndr <= 0:
        ndr = measure_throughput(ctx.measurer, ctx.frame, ctx.line_rate,
                                 ThroughputParams(duration_s=params.ndr_trial_s), ctx.tester_limit).headline_pps
    if ndr is None or ndr <= 0:
        raise ConfigError("rate", f"{params.rate}: the DUT forwarded no load without loss (no NDR); give an absolute "
                                  "rate or ndr_pps (--ndr)")
    return ndr * share, ndr


#: Live verdicts are worked out again once this many times their last cost has passed.
LIVE_COST_FACTOR = 50


@dataclass
class _Live:
    """The live verdicts: the last worked out (``res``), when (``at``, monotonic s) and at what cost
    (s); when the last console note was."""

    res: SoakResult | None = None
    at: float = -math.inf
    cost: float = 0.0
    noted: float = -math.inf


def run_soak(params: SoakParams, ctx: Context) -> SoakResult:
    rate_pps, ndr = resolve_rate(params, ctx)
    rows: list[SoakInterval] = []
    # The live verdicts cost O(intervals so far) (~0.9 s at 72 h of 10-s intervals): they are worked
    # out again when at least LIVE_COST_FACTOR times their last cost has passed, so they take at most
    # ~2 % of a CPU; intervals replayed on resume come at once and make one line.
    live = _Live()

    def on_interval(iv: Interval, sample: CompactSample | None) -> None:
        rows.append(SoakInterval(iv.t_s, iv.duration_s, iv.phase, iv.frames_sent, iv.frames_received, iv.frames_lost,
                                 sample))
        now = time.monotonic()
        if now - live.noted < params.interval_s / 2:
            return
        live.noted = now
        if live.res is None or now - live.at >= LIVE_COST_FACTOR * live.cost:
            live.res = SoakResult.build(ctx.frame, ctx.line_rate, params, rate_pps, ndr, rows, None, False)
            live.at, live.cost = now, time.monotonic() - now
            ctx.publish(live.res)
        ctx.notify(live_line(live.res, rows[-1]))

    try:
        counts = ctx.measurer.measure_soak(Load(rate_pps, ctx.frame), params.duration_s, params.interval_s,
                                           on_interval)
    except BaseException as e:
        raise with_partial(e, lambda: SoakResult.build(ctx.frame, ctx.line_rate, params, rate_pps, ndr, rows, None,
                                                       False)) from None
    res = SoakResult.build(ctx.frame, ctx.line_rate, params, rate_pps, ndr, rows, counts)
    if res.intervals:
        ctx.notify("final " + live_line(res))
    return res


# --------------------------------------------------------------------------------------------- #
# Reading it back

@dataclass(frozen=True)
class Entry:
    """One frame size's soak in a run: its first repetition."""

    frame_size: Any
    soak: SoakResult


def entries(run: RunView) -> list[Entry]:
    """Per frame size: the first repetition's soak, in frame-size order."""
    out = [Entry(r.frame_size, r.repetitions[0]) for r in run.frame_results(METHOD_NAME, SoakResult) if r.repetitions]
    out.sort(key=lambda e: frame_size_sort_key(e.frame_size))
    return out


def _thresholds(s: SoakResult) -> SoakThresholds:
    return s.thresholds or SoakThresholds()


def verdict_table(s: SoakResult) -> Table:
    th = _thresholds(s)
    t = Table(["memory series", "slope / h", f"{th.confidence_pct:g} % CI / h", "first stage mean ± sd",
               "last stage mean ± sd", "growth", "verdict"],
              caption=f"leak: the CI above 0, growth above {th.leak_min_growth_pct:g} % and the stages' "
                      f"mean ± sd apart (stages: first and last {th.stage_pct:g} % of the samples)")
    for tr in s.leaks or ():
        u = tr.unit
        t.add([tr.series, _size(tr.slope_per_h, u), f"[{_size(tr.low_per_h, u)}, {_size(tr.high_per_h, u)}]",
               _stage(tr.first_mean, tr.first_sd, u), _stage(tr.last_mean, tr.last_sd, u),
               fmt.DASH if tr.growth_pct is None else f"{tr.growth_pct:+.1f} %",
               ("LEAK" if tr.leak else "no leak") + f": {tr.why}"])
    return t


def _stage(mean: float, sd: float, unit: str) -> str:
    return f"{_size(mean, unit).lstrip('+')} ± {_size(sd, unit).lstrip('+')}"


def episode_table(s: SoakResult) -> Table:
    th = _thresholds(s)
    t = Table(["kind", "series", "from", "for", "peak", "frames lost"],
              caption=f"CPU spikes: samples ≥ {th.cpu_spike_pct:g} % busy; loss episodes: intervals "
                      f"that lost ≥ {th.loss_min_frames} frame(s); times are soak time")
    for x in s.cpu_spikes or ():
        t.add(["CPU spike", x.series, fmt_time(x.start_s), f"{x.duration_s:.1f} s", f"{x.peak:.0f} %", fmt.DASH])
    for x in s.loss_episodes or ():
        t.add(["loss", "frames", fmt_time(x.start_s), f"{x.duration_s:.1f} s",
               f"{100 * x.peak:.3g} % of an interval", str(x.frames_lost)])
    return t


def summary_lines(e: Entry) -> list[str]:
    s, th = e.soak, _thresholds(e.soak)
    ndr = f" ({s.rate} of NDR {format_pps(s.ndr_pps)})" if s.ndr_pps else ""
    segments = len({r.segment for r in s.intervals or ()})
    lines = [f"{fmt.size(e.frame_size)}: {format_pps(s.rate_pps or 0)}{ndr} for {fmt_time(s.covered_s)} "
             f"in {segments} segment(s), {s.interval_s or 0:g}-s intervals"
             + ("" if s.complete is not False else " (stopped early)") + ".",
             "Memory: " + ("LEAK" if s.leak else "no leak")
             + f" (thresholds: CI {th.confidence_pct:g} %, growth > {th.leak_min_growth_pct:g} %, host memory judged: "
             f"{'yes' if th.host_memory_verdict else 'no'}).",
             f"CPU spikes (≥ {th.cpu_spike_pct:g} %): {len(s.cpu_spikes or ())}"
             + (f"; saturated throughout: {', '.join(s.cpu_saturated)}" if s.cpu_saturated else "") + ".",
             f"Loss episodes: {len(s.loss_episodes or ())}, {s.frames_lost} frames lost in all."]
    if s.valid is False:
        lines.append(f"The tester did not hold the load throughout ({s.invalid_reason}): the trial is invalid, "
                     "and loss in its timeline may be the tester's, not the DUT's.")
    drops = {k: v for k, v in interface_drops(s.intervals or ()).items() if v}
    if drops:
        lines.append("Interface drops/errors: " + ", ".join(f"{k} {v}" for k, v in drops.items()) + ".")
    return lines


@plot("soak")
def soak_plot(runs: Sequence[RunView]) -> Figure | None:
    """Soak timeline: sent and received rate, frames lost per interval (loss episodes shaded),
    CPU busy per core and per DUT process (spike threshold dashed), and memory of the DUT's processes
    and the host (a leaking series with its fitted slope); dotted vertical lines mark where a resumed
    soak's next segment began."""
    es = [(i, r, e.soak) for i, r in enumerate(runs) for e in entries(r)]
    if not es:
        return None
    fig, axes = subplots(4, 1, w=8.0, h=9.0, sharex=True)
    ax_rate, ax_loss, ax_cpu, ax_mem = (a[0] for a in axes)
    rates: list[float] = []
    for i, run, s in es:
        rows = list(s.intervals or ())
        if not rows:
            continue
        c = run_colour(i)
        pre = f"{run.name}: " if len(runs) > 1 else ""
        ts = [r.t_s + r.duration_s / 2 for r in rows]
        sent = [r.frames_sent / (r.duration_s or 1.0) for r in rows]
        received = [r.frames_received / (r.duration_s or 1.0) for r in rows]
        ax_rate.plot(ts, sent, color=c, ls="--", lw=1, label=pre + "sent")
        ax_rate.plot(ts, received, color=c, lw=1.4, label=pre + "received")
        rates += sent + received
        ax_loss.step(ts, [r.frames_lost for r in rows], where="mid", color=c, label=pre + "lost")
        for x in s.loss_episodes or ():
            ax_loss.axvspan(x.start_s, x.start_s + x.duration_s, color=c, alpha=0.15)
        _soak_cpu(ax_cpu, s, rows, ts, i, pre)
        _soak_memory(ax_mem, s, rows, i, pre)
        for seg_start in sorted({r.t_s for r, p in zip(rows[1:], rows) if r.segment != p.segment}):
            for ax in (ax_rate, ax_loss, ax_cpu, ax_mem):
                ax.axvline(seg_start, ls=":", color=REF_GREY, lw=1)
    rate_axis(ax_rate, rates)
    ax_rate.set_ylabel("frames/s")
    ax_loss.set_ylabel("frames lost / interval")
    ax_cpu.set_ylabel("CPU busy %")
    ax_cpu.set_ylim(0, 105)
    ax_mem.set_ylabel("DUT memory change (MiB)")
    ax_mem.set_xlabel("soak time (s)")
    verdict = "; ".join(("LEAK" if s.leak else "no leak") + f", {len(s.cpu_spikes or ())} CPU spike(s), "
                        f"{len(s.loss_episodes or ())} loss episode(s)" for _, _, s in es)
    ax_rate.set_title(f"Soak — {verdict}")
    for ax in (ax_rate, ax_loss, ax_cpu, ax_mem):
        if ax.get_legend_handles_labels()[0] and ax.get_legend() is None:
            ax.legend(fontsize=7, loc="upper left", ncols=2)
    return fig


def _soak_cpu(ax_cpu: Any, s: SoakResult, rows: list[SoakInterval], ts: list[float], i: int, pre: str) -> None:
    """The soak's CPU panel: busy per core and per DUT process, the spike threshold dashed."""
    cores: dict[str, list[float]] = {}
    procs: dict[str, list[tuple[float, float]]] = {}
    for t, r in zip(ts, rows):
        mon = r.monitor or CompactSample()
        for core, b in (mon.cpu or {}).items():
            if core != "all" and isinstance(b, (int, float)):
                cores.setdefault(core, []).append(b)
        for name, p in (mon.procs or {}).items():
            if isinstance(p.cpu_percent, (int, float)):
                procs.setdefault(name, []).append((t, p.cpu_percent))
    for k, (core, vals) in enumerate(sorted(cores.items())):
        if len(vals) == len(ts):
            ax_cpu.plot(ts, vals, lw=0.9, color=run_colour(i + k + 1), label=f"{pre}{core} busy")
    for name, pts in procs.items():
        ax_cpu.plot([p[0] for p in pts], [p[1] for p in pts], lw=1.2, ls="-.", label=f"{pre}{name}")
    if s.thresholds is not None:
        ax_cpu.axhline(s.thresholds.cpu_spike_pct, ls="--", color=REF_GREY, lw=0.8, label="spike threshold")


def _soak_memory(ax_mem: Any, s: SoakResult, rows: list[SoakInterval], i: int, pre: str) -> None:
    """The soak's memory panel: the DUT's processes (the host's on a right axis), a leak's fitted slope."""
    leaks = {tr.series: tr for tr in s.leaks or ()}
    host_ax = None
    for k, (name, (unit, own, pts)) in enumerate(memory_series(rows).items()):
        if unit != "B":
            continue
        tr = leaks.get(name)
        judged = own or bool(tr and tr.judged)
        ax: Any = ax_mem
        if not judged:  # host-wide, shared with the tester: on its own axis, not drowning the DUT's
            host_ax = host_ax or ax_mem.twinx()
            ax = host_ax
        xs, ys = [p[0] for p in pts], [p[1] / 2 ** 20 for p in pts]
        base = ys[0] if ys else 0.0
        tag = " LEAK" if tr and tr.leak else "" if judged else " (host-wide, right axis)"
        ax.plot(xs, [y - base for y in ys], lw=1.1 if judged else 0.8, ls="-" if judged else "--",
                color=run_colour(i + k), label=f"{pre}{name}{tag}")
        if tr and tr.leak:
            sl = tr.slope_per_h / 3600 / 2 ** 20
            mx = statistics.fmean(xs)
            my = statistics.fmean(ys) - base
            ax.plot([xs[0], xs[-1]], [my + sl * (xs[0] - mx), my + sl * (xs[-1] - mx)], ls=":",
                    color=run_colour(i + k), lw=1.6)
    if host_ax is not None:
        host_ax.set_ylabel("host memory change (MiB)", fontsize=8)
        h1, l1 = ax_mem.get_legend_handles_labels()
        h2, l2 = host_ax.get_legend_handles_labels()
        ax_mem.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper left", ncols=2)


# --------------------------------------------------------------------------------------------- #
# The method

SECTION = Section("soak", "Soak: stability over time")


class Soak(Method):
    name = METHOD_NAME
    event_trials = "soak"
    label = "Soak (stability, leak verdicts)"
    params_type = SoakParams
    sections = (SECTION,)
    plots = (soak_plot,)
    console_columns = (f"{rates.INTENDED} fps", "covered", f"{rates.RECEIVED} fps", "lost", "loss episodes",
                       "CPU spikes", "memory")
    shortcut = Shortcut(Command("soak", "one long trial at a fixed load with DUT monitoring: leak, CPU-spike and "
                                        "loss-episode verdicts",
                                "Hold a load (e.g. 80%NDR: the NDR measured first, or --ndr) for --duration as one "
                                "continuous trial counted every --interval, with the DUT monitored (CPU per core "
                                "and per DUT process, RSS, MemAvailable, slab, conntrack, interface drops); every "
                                "interval is on disk as it ends (continue a stopped soak with `netrig run --resume "
                                "DIR`); verdicts live and at the end: memory leak (slope with its confidence "
                                "interval, first vs last stage), CPU spikes, loss episodes.",
                                sizes_default="64"),
                        "soak")
    cli_fields = {"rate": "--rate", "ndr_pps": "--ndr", "interval_s": "--interval", "duration_s": "--duration",
                  "leak_min_growth_pct": "--leak-growth", "cpu_spike_pct": "--cpu-spike",
                  "loss_min_frames": "--loss-min-frames", "confidence_pct": "--confidence",
                  "ndr_trial_s": "--ndr-trial"}

    owns_duration = True

    def config_defaults(self, params: dict, trial_duration_s: float) -> dict:
        """The soak's duration is its own (``duration_s``, default 2 h), never the trial duration."""
        return params

    def run(self, params: SoakParams, ctx: Context) -> SoakResult:
        return run_soak(params, ctx)

    def estimate_trials(self, params: SoakParams, frame: FrameSize, line_fps: float) -> int:
        return 1 if params.ndr_share is None or params.ndr_pps else 12

    def top_rate_pps(self, params: SoakParams, frame: FrameSize, line_rate: LineRate) -> float:
        """Its rate when known before it runs; else the top of the NDR search that finds it."""
        known = known_rate_pps(params, frame, line_rate)
        return known if known is not None else line_rate.fps(frame)

    def selftest_trial_s(self, params: SoakParams) -> float | None:
        """Not its one trial (hours long): the unit its verdicts count in, an interval, or the NDR
        search's trial when it measures the NDR first."""
        measures_ndr = params.ndr_share is not None and not params.ndr_pps
        return min(params.duration_s, max(params.interval_s, params.ndr_trial_s if measures_ndr else 0.0))

    def verdict_values(self, result: dict) -> dict[str, float | None]:
        worst = read_frame_results(result, SoakResult).spread("loss_ratio").max
        return {"loss_ratio": worst} if worst is not None else {}

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        rows = []
        res = read_frame_results(result, SoakResult)
        for s in res.repetitions:
            leaks = [t for t in s.leaks or () if t.leak]
            mem = ("LEAK: " + ", ".join(f"{t.series} {_size(t.slope_per_h, t.unit)}/h" for t in leaks)) \
                if leaks else "no leak"
            spikes = str(len(s.cpu_spikes or ()))
            if s.cpu_saturated:
                spikes += f"; saturated throughout: {', '.join(s.cpu_saturated)}"
            invalid = f"INVALID: {s.invalid_reason or 'tester problem'}" if s.valid is False else ""
            rows.append([fmt.size(res.frame_size), format_pps(s.rate_pps or 0), fmt_time(s.covered_s),
                         format_pps(s.headline_pps or 0), str(s.frames_lost), str(len(s.loss_episodes or ())),
                         spikes, mem, ", ".join(x for x in (invalid, flags) if x)])
        return rows

    def html(self, run: RunView) -> dict[str, str]:
        es = entries(run)
        if not es:
            return {}
        body = figure(soak_plot, [run])
        for e in es:
            body += "".join(f"<p>{esc(x)}</p>" for x in summary_lines(e))
            body += table_html(verdict_table(e.soak)) + table_html(episode_table(e.soak))
        return {SECTION.id: body}

    def markdown(self, run: RunView) -> str:
        es = entries(run)
        if not es:
            return ""
        body = ""
        for e in es:
            body += "\n".join(summary_lines(e)) + "\n\n" + table_md(verdict_table(e.soak)) + "\n" \
                + table_md(episode_table(e.soak))
        return section_md(SECTION.title, body, "")

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        option(parser, "--rate", "frames/s (100kpps), bit/s (1Gbps), %% of line rate (50%%) or %% of the DUT's NDR "
                                 "(80%%NDR: measured first unless --ndr) [80%%NDR]", default="80%NDR")
        option(parser, "--ndr", "the DUT's NDR for a %%NDR rate, in frames/s (skips measuring it) [measured]")
        option(parser, "--ndr-trial", "trial duration of the NDR search [10s]", default="10s")
        option(parser, "--interval", "counting and monitoring [10s]", default="10s")
        option(parser, "--confidence", "confidence of the leak slope's interval, %% [95]", default="95")
        option(parser, "--leak-growth", "a leak grows by more than this, %% (last stage's mean over the first's) [5]",
               default="5")
        option(parser, "--host-memory-verdict", "judge the host's used memory and slab too (a DUT on its own host, "
                                                "--monitor-remote); on one host they are shared with the tester [off]")
        option(parser, "--cpu-spike", "a CPU spike is a sample at or above this busy %% [90]", default="90")
        option(parser, "--resume", "a soak, as a new segment (the same as `netrig run --resume DIR`; every other "
                                   "option is the run's own) [off]")
        option(parser, "--loss-min-frames", "an interval is in a loss episode when it lost at least this many frames "
                                            "[1]", default="1")

    def cli_params(self, args: argparse.Namespace) -> dict:
        out: dict[str, Any] = {"rate": str(args.rate), "interval_s": args.interval, "ndr_trial_s": args.ndr_trial,
                               "confidence_pct": args.confidence, "leak_min_growth_pct": args.leak_growth,
                               "host_memory_verdict": args.host_memory_verdict, "cpu_spike_pct": args.cpu_spike,
                               "loss_min_frames": args.loss_min_frames}
        if args.ndr is not None:
            out["ndr_pps"] = args.ndr.frames_per_second("--ndr")
        if args.duration is not None:
            out["duration_s"] = args.duration
        return out


METHOD = Soak()
