"""RFC 2544 §26.1 throughput: the highest intended rate with zero loss, by binary search, or by
linear steps up (from the lowest load to the first the DUT fails) or down (from the top to the first
it passes), each then bisected to the resolution (``ThroughputParams.search``).

The primary method: its headline is the run's throughput (the summary per configuration, the
self-test comparison), and methods that run relative to a throughput measure it with this search
when no earlier method gave one.

The search (:func:`measure_throughput`):

* The search never asks for more than the tester's ``limit`` (the self-test's proven ceiling /
  factor); a DUT that passes there is reported "≥ limit (tester-limited)".
* A trial the tester could not send (verdict ``TESTER``) is not DUT loss. At a load no higher
  than one the tester sent in full earlier in the search, or than the self-test's limit, it was a
  stall: the trial is repeated
  (:func:`~netrig.methodology.tester.measure_judged`). Otherwise, or when the repeats fall short
  too, it lowers the search's upper end (nothing at or above it can be tested) and, if that end
  is below every load the DUT failed, marks the result ``tester_limited``. Before the search
  ends, the shortfall bounding it is measured once more when the tester sent any load in full
  (:meth:`_Search.recheck`): a stall does not repeat the way a limit does. Sent in full now, it
  no longer bounds the search, which goes on above it.
* A trial the host spoilt in every attempt (:class:`~netrig.methodology.tester.PlatformStopped`)
  stops the search: what passed so far is a lower bound ("≥ rate", ``platform`` says why), and with
  nothing passed the result is ``not_measured``. Going on below it would report the host's stall as
  the tester's limit, or as the DUT's.
* A trial that fell short while the self-test proved far more (``BACKPRESSURE``: the DUT slowed
  the sender) is the DUT failing the load, like loss.
* A failed trial's forwarded rate (what the DUT passed, or what the tester reached through it) is
  tried next when it lies inside the bracket: for a DUT with a capacity, usually just below the
  throughput. A later failure's forwarded rate is followed again only while the shortfall
  (1 − forwarded / load) at least halves from one followed trial to the next — the DUT is
  converging on its capacity, as a policer whose bucket lets a little more through per trial
  does; otherwise the search bisects. A DUT that loses the same small share at every load (a
  capture application dropping now and then) forwards just below every load it fails:
  following it stepped down by its loss ratio, one trial per step (a 3 %-resolution search took
  40 trials), where bisection takes a few.
* When a followed forwarded rate passes, the load one resolution above it is tried next: a DUT
  forwarding at its capacity fails it, and the bracket is closed in two trials where bisection
  from the first failure took log2(bracket / resolution) (a 120-kpps policer searched from
  149 kfps at a 744-fps resolution: 9 trials, now 3). One that passes it costs one trial; the
  search bisects from there.
* When the bracket is narrower than the resolution but nothing passed yet, the search keeps
  going down (halving) until a load passes: a DUT that forwards anything loss-free never gets a
  headline of 0.
* A search in which the tester sent no load at all (every trial invalid, the DUT neither passed
  nor failed one) measured nothing: its result is ``not_measured`` (:data:`NOT_MEASURED`), never
  a rate of 0.
"""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from netrig.errors import ConfigError
from netrig.measure import Load, Measurer, TrialCounts
from netrig.methodology.method import Capacity, Context, Method, Section, Shortcut
from netrig.methodology.selftest import stored_ceilings
from netrig.methodology.stats import check
from netrig.methodology.tester import NO_LIMIT, NOT_MEASURED, PlatformStopped, ProvenLimit, Verdict, measure_judged
from netrig.methodology.vocabulary import option
from netrig.methods.sections import RFC2544
from netrig.model import (
    FrameSize,
    LineRate,
    defaults,
    format_bps,
    format_pps,
    format_pps_range,
    rate_object,
    rates,
)
from netrig.results.typed import from_dict
from netrig.view import fmt
from netrig.view.frame_results import Flag, FrameResults, Headline, finite, not_measured, read_frame_results
from netrig.view.html import empty, figure, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.plotkit import (
    REF_GREY,
    errorbar_sizes,
    legend,
    mark_invalid,
    mark_lower_bounds,
    plot,
    rate_axis,
    run_colour,
    size_axis,
    size_from_label,
    size_positions,
    subplots,
    ticker,
)
from netrig.view.run_view import (
    RunView,
    Stat,
    frame_size_label,
)
from netrig.view.table import Table, by_size, ratio_header, size_of_label, sizes_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure


#: How the search places its loads: bisection, or linear steps up or down (then bisection).
SEARCHES = ("binary", "linear-up", "linear-down")
#: A linear search's step by default, % of its top load: ten loads.
STEP_PCT = 10.0


@dataclass(frozen=True)
class ThroughputParams:
    """``resolution_pct``: the search stops when the bracket is at most this % of line rate wide;
    ``search``: one of ``SEARCHES``; ``step_pct``: a linear search's step, % of its top load
    (``max_rate_pct`` of line rate, or the tester's limit when lower)."""

    duration_s: float = defaults.TRIAL_DURATION_S
    resolution_pct: float = 0.1
    initial_rate_pct: float = 100.0
    min_rate_pct: float = 0.0
    max_rate_pct: float = 100.0
    acceptable_loss_ratio: float = 0.0
    repetitions: int | None = None
    search: str = "binary"
    step_pct: float = STEP_PCT

    def __post_init__(self) -> None:
        if self.search not in SEARCHES:
            raise ConfigError("search", f"{self.search!r}: use one of {', '.join(SEARCHES)}")
        check("step_pct", self.step_pct, lo=0, lo_open=True, hi=100)
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        check("resolution_pct", self.resolution_pct, lo=0, lo_open=True, hi=100)
        check("max_rate_pct", self.max_rate_pct, lo=0, lo_open=True, hi=1000)
        check("min_rate_pct", self.min_rate_pct, lo=0, hi=self.max_rate_pct, hi_open=True)
        check("initial_rate_pct", self.initial_rate_pct, lo=0, lo_open=True, hi=self.max_rate_pct)
        check("acceptable_loss_ratio", self.acceptable_loss_ratio, lo=0, hi=1, hi_open=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class ThroughputResult:
    frame: FrameSize
    line_rate: LineRate
    rate_pps: float
    lower_pps: float
    #: The lowest load the DUT failed (lost frames, or slowed the sender): the truth is in
    #: ``[lower_pps, upper_pps)``; ``None`` when the DUT failed no load.
    upper_pps: float | None
    trials: int
    #: The answer is bounded by the tester, not the DUT: the search stopped at the tester's limit
    #: (the self-test's ceiling / factor) or at a load the tester could not send, below every load
    #: the DUT failed. ``rate_pps`` is then a lower bound: "≥ rate (tester-limited)".
    tester_limited: bool
    tester_limit_pps: float | None
    resolution_pps: float
    found: bool
    #: The self-test's limit when it capped the search (``None``: the configured maximum was used).
    tester_cap_pps: float | None = None
    #: Trials in which the DUT slowed the sender below the load (a DUT failure), and the highest
    #: rate the tester reached through the DUT in them.
    backpressure_trials: int = 0
    backpressure_pps: float | None = None
    #: Trials repeated because the tester fell short at a load it had already sent in full in this
    #: search (a stall, not a limit); they are in ``trials``.
    repeated_trials: int = 0
    #: How it placed its loads (``ThroughputParams.search``).
    search: str = "binary"
    #: Why there is no answer at all (:data:`NOT_MEASURED`: the tester sent no load in full, so the
    #: DUT neither passed nor failed one); ``None``: measured.
    not_measured: str | None = None
    #: Why the search stopped before it converged: the host spoilt a trial in every attempt
    #: (:class:`~netrig.methodology.tester.PlatformStopped`). The rate found is then a lower bound
    #: (``tester_limited``); ``None``: the search ran to its end.
    platform: str | None = None
    #: What the trial that passed at ``rate_pps`` really offered (its achieved rate, never above
    #: ``rate_pps``): within the stretch tolerance that keeps a trial valid the tester may send it up
    #: to that much slower than intended, and the DUT then met fewer frames per second than
    #: ``rate_pps`` says. ``None`` when no load passed.
    offered_pps: float | None = None

    @property
    def rate(self) -> dict | None:
        return rate_object(self.rate_pps, self.frame, self.line_rate)

    @property
    def headline_pps(self) -> float | None:
        return self.rate_pps if self.found else None

    def stats_values(self) -> dict:
        return {"rate_pps": self.headline_pps}

    def to_dict(self) -> dict:
        return {
            "rate_pps": self.rate_pps, "rate": self.rate, "lower_pps": self.lower_pps,
            "upper_pps": self.upper_pps, "trials": self.trials, "tester_limited": self.tester_limited,
            "tester_limit_pps": self.tester_limit_pps, "resolution_pps": self.resolution_pps,
            "found": self.found, "bounded_by_tester": self.tester_limited, "tester_cap_pps": self.tester_cap_pps,
            "backpressure_trials": self.backpressure_trials, "backpressure_pps": self.backpressure_pps,
            "repeated_trials": self.repeated_trials, "search": self.search, "not_measured": self.not_measured,
            "platform": self.platform, "offered_pps": self.offered_pps,
        }


def passes(counts: TrialCounts, acceptable_loss_ratio: float) -> bool:
    """A valid trial passes when its loss is acceptable (zero loss by default)."""
    if acceptable_loss_ratio == 0.0:
        return counts.frames_lost == 0
    return counts.loss_ratio <= acceptable_loss_ratio


#: Below the resolution, how far the search goes down (halving) looking for a passing load before
#: it reports that none passed: the resolution divided by this.
DESCENT_LIMIT = 1024


def scan_loads(lo: float, top: float, step: float, up: bool) -> list[float]:
    """The loads of a linear scan: every multiple of ``step`` above ``lo`` and below ``top``, then
    ``top``; from the lowest up (``up``) or from ``top`` down."""
    n = math.ceil(top / step * (1 - 1e-12))
    loads = [k * step for k in range(1, n) if k * step > lo * (1 + 1e-12)] + [top]
    return loads if up else loads[::-1]


class _Search:
    """One throughput search: its bracket ``[lo, hi)``, what it saw, and the rules of the module's
    docstring for each trial (:meth:`trial`) and for the next load of the bisection (:meth:`next_rate`)."""

    def __init__(self, measurer: Measurer, frame: FrameSize, line_rate: LineRate, params: ThroughputParams,
                 limit: ProvenLimit):
        self.measurer, self.frame, self.line_rate, self.params, self.limit = measurer, frame, line_rate, params, limit
        self.line_fps = line_rate.fps(frame)
        self.lo = params.min_rate_pct / 100 * self.line_fps
        top = params.max_rate_pct / 100 * self.line_fps
        self.capped = limit.caps(top)
        self.hi = self.top = limit.cap(top)
        self.res = params.resolution_pct / 100 * self.line_fps
        self.floor = max(self.lo, self.res / DESCENT_LIMIT)
        self.best: float | None = None
        self.offered: float | None = None  # what the trial that passed at ``best`` really offered
        self.upper: float | None = None  # the lowest load the DUT failed
        self.backpressure: list[float] = []
        self.hint: float | None = None  # what the last failing trial forwarded loss-free
        self.followed: float | None = None  # the shortfall of the last failed trial whose hint was followed
        self.probe: float | None = None  # the hint just followed: passed, the load above it is tried
        self.kept: float | None = None  # the highest load the tester sent in full
        self.short: dict[float, float] = {}  # each load the tester could not send: what it reached
        self.rechecked: set[float] = set()  # the loads of those measured again (:meth:`recheck`)
        self.trials = self.repeated = 0
        self.platform: str | None = None  # why the host stopped the search (PlatformStopped)

    def trial(self, rate: float) -> Verdict | None:
        """One trial at ``rate`` (repeated while it stalls) and what it does to the bracket: ``None``
        when the DUT passed it, else the verdict of the failure (``VALID``: the DUT lost frames)."""
        p = self.params
        counts, verdict, repeats = measure_judged(self.measurer, Load(rate, self.frame), p.duration_s, self.limit,
                                                  self.kept)
        self.trials += 1 + repeats
        self.repeated += repeats
        if verdict is Verdict.VALID:
            self.kept = max(self.kept or 0.0, rate)
        if verdict is Verdict.TESTER:
            self.short[rate] = counts.achieved_pps
            if repeats:  # measured again already
                self.rechecked.add(rate)
            self.hi = min(self.hi, rate)
            return verdict
        if verdict is Verdict.VALID and passes(counts, p.acceptable_loss_ratio):
            if self.best is None or rate > self.best:
                self.best, self.offered = rate, min(rate, counts.achieved_pps)
            self.lo = max(self.lo, rate)
            return None
        if verdict is Verdict.BACKPRESSURE:  # the DUT failed the load: it lost frames, or slowed the sender
            self.backpressure.append(counts.achieved_pps)
        self.hi = min(self.hi, rate)
        self.upper = rate if self.upper is None else min(self.upper, rate)
        self.hint = min(counts.achieved_pps, counts.frames_received / p.duration_s) * (1 - 1e-3)
        return verdict

    def done(self) -> bool:
        if self.best is not None and self.best >= self.hi * (1 - 1e-12):
            return True
        return self.hi - self.lo <= self.res * (1 + 1e-9) and (self.best is not None or self.hi <= self.floor)

    def next_rate(self, rate: float) -> float:
        """After a trial at ``rate``: the last failure's forwarded rate when it is worth following,
        else below the resolution (nothing passed yet) halving, else the middle of the bracket."""
        hint, self.hint = self.hint, None
        probe, self.probe = self.probe, None
        if probe == rate and self.best == rate and self.lo + self.res < self.hi:
            return self.lo + self.res  # the DUT's capacity is usually right above what it forwarded
        shortfall = 1 - hint / rate if hint is not None else 0.0
        if hint is not None and max(self.lo, self.floor) < hint < self.hi and \
                (self.followed is None or shortfall <= self.followed / 2):
            self.followed, self.probe = shortfall, hint
            return hint  # what the DUT just forwarded: usually right below its throughput
        if self.hi - self.lo <= self.res * (1 + 1e-9):
            return self.hi / 2  # nothing passed yet: keep going down
        return (self.lo + self.hi) / 2

    @property
    def tester_top(self) -> float:
        """The lowest load the tester could not send (inf: none)."""
        return min(self.short, default=math.inf)

    @property
    def tester_limit(self) -> float | None:
        """The least the tester reached where it fell short."""
        return min(self.short.values(), default=None)

    def recheck(self) -> float | None:
        """The load to measure again before the search ends (``None``: none): the tester's
        shortfall that bounds the bracket, when the tester sent a load in full in the search and
        the shortfall was measured once. Its capacity does not change between trials; a stall does
        (a clean clone's search fell short at 149, 74 and 37 kfps while the host stopped the sender
        for up to 113 ms of a trial, then sent 36.6 kfps in full and read "≥ 36.6 kfps,
        tester-limited" under a 120-kpps policer). Withdrawn, the shortfall no longer bounds the
        bracket; measured short again, it does."""
        top = self.tester_top
        if top == math.inf or top in self.rechecked or self.kept is None or (self.upper or math.inf) <= top:
            return None
        self.rechecked.add(top)
        del self.short[top]
        self.hi = min(self.top, self.upper or math.inf, self.tester_top)
        self.repeated += 1
        return top

    def bisect(self, rate: float | None) -> None:
        """Trials from ``rate`` (``None``: the bracket is done) until the bracket is within the
        resolution and no shortfall bounding it is left to measure again (:meth:`recheck`)."""
        while True:
            if rate is not None:
                self.trial(rate)
                if not self.done():
                    rate = self.next_rate(rate)
                    continue
            if (rate := self.recheck()) is None:
                return

    def scan(self, up: bool) -> float | None:
        """Linear steps of ``step_pct`` of the top load from the lowest load up to the first load the
        DUT (or the tester) fails, or from the top down to the first load the DUT passes; then the
        rate to refine the bracket from (``None``: done)."""
        loads = scan_loads(self.lo, self.top, self.params.step_pct / 100 * self.top, up)
        for rate in loads:
            failed = self.trial(rate) is not None
            if failed == up:
                break
        return None if self.done() else self.next_rate(rate)

    def stopped(self, stop: PlatformStopped) -> None:
        """The host spoilt every attempt at a load: the search ends there, its trials counted."""
        self.trials += stop.attempts
        self.repeated += stop.attempts - 1
        self.platform = str(stop)

    def result(self) -> ThroughputResult:
        best, upper = self.best, self.upper
        limited = best is not None and ((self.capped and upper is None) or self.tester_top < (upper or math.inf)
                                        or self.platform is not None)
        unmeasured = None if best is not None else self.platform or (NOT_MEASURED if upper is None else None)
        where = self.tester_limit if self.tester_limit is not None else (self.top if limited else None)
        return ThroughputResult(
            frame=self.frame, line_rate=self.line_rate,
            rate_pps=best if best is not None else 0.0, lower_pps=best if best is not None else 0.0,
            upper_pps=upper, trials=self.trials, tester_limited=limited,
            tester_limit_pps=None if self.platform else where,
            resolution_pps=self.res, found=best is not None, tester_cap_pps=self.top if self.capped else None,
            backpressure_trials=len(self.backpressure), backpressure_pps=max(self.backpressure, default=None),
            repeated_trials=self.repeated, search=self.params.search, not_measured=unmeasured, platform=self.platform,
            offered_pps=self.offered)


def measure_throughput(measurer: Measurer, frame: FrameSize, line_rate: LineRate,
                       params: ThroughputParams = ThroughputParams(),
                       limit: ProvenLimit = NO_LIMIT) -> ThroughputResult:
    """The highest load in ``[min_rate, max_rate]`` (percent of line rate) the DUT passes, to
    ``resolution_pct``, by the search ``params.search`` names and the rules in the module's docstring."""
    s = _Search(measurer, frame, line_rate, params, limit)
    try:
        if params.search == "binary":
            s.bisect(min(params.initial_rate_pct / 100 * s.line_fps, s.hi))
        else:
            s.bisect(s.scan(up=params.search == "linear-up"))
    except PlatformStopped as stop:
        s.stopped(stop)
    return s.result()


# --------------------------------------------------------------------------------------------- #
# Reading it back from results

NONE = "No RFC 2544 throughput in this result."


@dataclass(frozen=True)
class Entry:
    """One frame size of the throughput, as its tables and plots show it."""

    frame_size: Any
    rate: Stat  # frames/s
    pct: Stat | None
    l1_bps: float | None
    l2_bps: float | None
    ceiling_pps: float | None
    above_ceiling: bool
    #: "≥ rate": the answer is a lower bound (the search ended at the tester's limit).
    at_least: bool
    repetitions: int
    flags: tuple[Flag, ...]
    cpu_s_per_mframe: float | None


def results(run: RunView) -> list[FrameResults[ThroughputResult]]:
    """Per frame size, the run's throughput results, those under the same parameters pooled (one
    row, one median: the demo's 64-B headline of nine repetitions over its two parts)."""
    return run.pooled_frame_results(METHOD_NAME, ThroughputResult)


def entries(run: RunView) -> list[Entry]:
    """Per frame size: the median rate of the repetitions (min–max), % of line rate, bit/s."""
    out = []
    for r in results(run):
        size, head = r.frame_size, r.headline or Headline()
        reps = [x for x in r.repetitions if not x.not_measured]  # no rate, not even 0
        rate = Stat.from_spread(r.spread("rate_pps")) or Stat.over(finite(x.rate_pps) for x in reps)
        if rate is None and head.fps is not None:
            rate = Stat.of(head.fps)
        if rate is None:
            continue
        lr = run.line_rate_pps(size)
        pct = rate.scaled(100 / lr) if lr else None
        if pct is None and head.pct_line_rate is not None and rate.value > 0:
            pct = rate.scaled(head.pct_line_rate / rate.value)
        out.append(Entry(size, rate, pct, head.l1_bps or run.bps(size, rate.value, 1),
                         head.l2_bps or run.bps(size, rate.value, 2), run.proven_ceiling_pps(size),
                         "above_selftest_ceiling" in r.flag_codes, all_bounded(reps),
                         len(reps), r.flags, cpu_s_per_mframe(run, size)))
    return out


def all_bounded(reps: Sequence[ThroughputResult]) -> bool:
    """Every repetition is a lower bound the tester set (a mix: the headline is the others' median)."""
    return bool(reps) and all(x.tester_limited is True for x in reps)


def cpu_s_per_mframe(run: RunView, size: object) -> float | None:
    """Busy CPU-seconds of every core per million frames forwarded, in the loss-free trial at the
    highest load of this method and frame size (every engine trial accounts its CPU: ``raw.cpu``);
    ``None`` without such a trial."""
    best: tuple[float, float] | None = None
    for t in run.trial_records():
        c, cpu, rate = t.counts, t.cpu, t.load.rate_pps
        if t.method != METHOD_NAME or frame_size_label(t.frame_size) != frame_size_label(size) or c is None \
                or not c.valid or c.frames_lost > 0 or cpu is None or not c.frames_received or rate is None:
            continue
        if best is None or rate > best[0]:
            best = (rate, cpu.busy_s / c.frames_received * 1e6)
    return best[1] if best else None


def table(run: RunView) -> Table:
    t = Table(["frame size", "throughput (median, min–max)", "% line rate", "bit/s (L1)", "bit/s (L2)",
               "line rate", "tester proven", "CPU-s per M frames", "repetitions", "flags"],
              caption="CPU-s per M frames: busy CPU-seconds of every core per million frames forwarded in the "
                      "loss-free trial at the highest load (on one host: the tester's and the DUT's together)")
    for e in entries(run):
        flags = ", ".join(sorted({f.code for f in e.flags} - {"nominal_line_rate", "short_trials"}))
        t.add([fmt.size(e.frame_size), fmt.at_least(fmt.fps_stat(e.rate), e.at_least),
               fmt.pct(e.pct.value if e.pct else None),
               fmt.bps(e.l1_bps), fmt.bps(e.l2_bps), fmt.fps(run.line_rate_pps(e.frame_size)),
               fmt.fps(e.ceiling_pps),
               fmt.DASH if e.cpu_s_per_mframe is None else f"{e.cpu_s_per_mframe:.3g}",
               str(e.repetitions or fmt.DASH), flags or ""],
              "flagged" if e.above_ceiling else "")
    measured = {frame_size_label(e.frame_size) for e in entries(run)}
    for r in results(run):
        why = not_measured(r)
        if why and frame_size_label(r.frame_size) not in measured:
            t.add([fmt.size(r.frame_size), fmt.not_measured(why), *[fmt.DASH] * 6, str(len(r.repetitions)), ""])
    return t


@plot("throughput")
def throughput_plot(runs: Sequence[RunView]) -> Figure | None:
    """RFC 2544 throughput against frame size: frames/s (with the line-rate curve and the tester's
    proven ceiling) and % of line rate; error bars are min/max of repetitions."""
    data = [(r, entries(r)) for r in runs]
    if not any(d for _, d in data):
        return None
    pos, labels = size_positions(runs, [t.frame_size for _, d in data for t in d])
    fig, axes = subplots(2, 1, h=5.4, sharex=True)
    ax_fps, ax_pct = axes[0][0], axes[1][0]
    all_vals: list[float] = []
    # reference curves: line rate of each distinct speed, tester ceiling of the first run with one
    seen_speeds: set[float] = set()
    for r in runs:
        if r.speed_bps and r.speed_bps not in seen_speeds:
            seen_speeds.add(r.speed_bps)
            pts = [(pos[lab], v) for lab in labels
                   if lab.isdigit() and (v := r.line_rate_pps(size_from_label(lab))) is not None]
            if pts:
                lx, ly = zip(*pts)
                ax_fps.plot(lx, ly, ls="--", color=REF_GREY, lw=1.2, label=f"line rate ({r.line_rate_label})")
                all_vals += ly
    for r in runs:
        proven = [(pos[lab], ceiling.proven_rate_pps) for ceiling in stored_ceilings(r)
                  if (lab := frame_size_label(ceiling.frame.label)) in pos and lab.isdigit()
                  and ceiling.proven_rate_pps is not None]
        if proven:
            cx, cy = zip(*sorted(proven))
            suffix = f" — {r.name}" if len(runs) > 1 else ""
            ax_fps.plot(cx, cy, ls=":", color="#555555", lw=1.2, marker="_",
                        label=f"tester proven ceiling (self-test){suffix}")
            all_vals += cy
            break
    flagged_label = True
    for i, (r, d) in enumerate(data):
        if not d:
            continue
        c = run_colour(i)
        off = (i - (len(runs) - 1) / 2) * 0.08 if len(runs) > 1 else 0.0
        xs = [pos[frame_size_label(t.frame_size)] + off for t in d]
        rates = [t.rate for t in d]
        sizes_ = [t.frame_size for t in d]
        measured = [not (t.at_least or t.above_ceiling) for t in d]
        errorbar_sizes(ax_fps, xs, sizes_, rates, measured=measured, color=c, marker="o", label=r.name)
        _mark_unmeasured(ax_fps, xs, d, c, lambda t: t.rate.value)
        all_vals += [s.value for s in rates]
        pcts = [(x, t.frame_size, t.pct, ok) for x, t, ok in zip(xs, d, measured) if t.pct is not None]
        if pcts:
            errorbar_sizes(ax_pct, [p[0] for p in pcts], [p[1] for p in pcts], [p[2] for p in pcts],
                           measured=[p[3] for p in pcts], color=c, marker="o", label=r.name)
            _mark_unmeasured(ax_pct, xs, d, c, lambda t: t.pct.value if t.pct else None)
        bad = [(x, t) for x, t in zip(xs, d) if t.above_ceiling]
        if bad:
            ax_fps.scatter([x for x, _ in bad], [t.rate.value for _, t in bad], s=140, facecolors="none",
                           edgecolors="#C00000", linewidths=1.6, zorder=5,
                           label="above tester ceiling (not a proven DUT result)" if flagged_label else None)
            flagged_label = False
    rate_axis(ax_fps, all_vals)
    ax_fps.set_ylabel("throughput (frames/s)")
    ax_fps.set_title("Throughput (zero loss) vs frame size")
    legend(ax_fps, loc="best")
    ax_pct.axhline(100, color=REF_GREY, ls="--", lw=1.2, label="line rate")
    ax_pct.set_ylim(0, max(105, ax_pct.get_ylim()[1]))
    ax_pct.set_ylabel("throughput (% of line rate)")
    ax_pct.yaxis.set_major_formatter(ticker().FuncFormatter(lambda v, _: f"{v:g} %"))
    size_axis(ax_pct, labels)
    if len(runs) > 1:
        legend(ax_pct, loc="lower right")
    return fig


def _mark_unmeasured(ax: Any, xs: Sequence[float], d: Sequence[Entry], colour: str,
                     value: Callable[[Entry], float | None]) -> None:
    """The entries that are no measurement at their x: lower bounds as arrows, rates above the
    tester's proven ceiling as open markers."""
    for pick, mark in ((lambda t: t.at_least, mark_lower_bounds),
                       (lambda t: t.above_ceiling and not t.at_least, mark_invalid)):
        pts = [(x, v) for x, t in zip(xs, d) if pick(t) and (v := value(t)) is not None]
        mark(ax, [x for x, _ in pts], [v for _, v in pts], colour)


# --------------------------------------------------------------------------------------------- #
# The method

METHOD_NAME = "rfc2544_throughput"
SECTION = Section("throughput", "Throughput vs frame size", shown_when_empty=True)


class Throughput(Method):
    name = METHOD_NAME
    event_trials = "rate"
    label = "RFC 2544 §26.1 throughput"
    short_name = "throughput"
    params_type = ThroughputParams
    provides_throughput = True
    primary = True
    rfc_duration_s = 60.0
    sections = (SECTION,)
    plots = (throughput_plot,)
    console_columns = (f"{rates.INTENDED} fps (median)", "% line rate", "L1 bit/s", "L2 bit/s", "min–max")
    shortcut = Shortcut(RFC2544, "throughput")
    cli_fields = {"resolution_pct": "--resolution", "search": "--search", "step_pct": "--search-step"}

    def run(self, params: ThroughputParams, ctx: Context) -> ThroughputResult:
        return measure_throughput(ctx.measurer, ctx.frame, ctx.line_rate, params, ctx.tester_limit)

    def estimate_trials(self, params: ThroughputParams, frame: FrameSize, line_fps: float) -> int:
        span = params.max_rate_pct - params.min_rate_pct
        if params.search == "binary":
            return int(math.ceil(math.log2(max(2.0, span / params.resolution_pct)))) + 1
        step = params.step_pct / 100 * params.max_rate_pct  # % of line rate, at the configured top
        steps = int(math.ceil(span / step / 2))  # half the scan, on average
        return steps + int(math.ceil(math.log2(max(1.0, step / params.resolution_pct)))) + 1

    def top_rate_pct(self, params: ThroughputParams) -> float:
        return params.max_rate_pct

    def default_throughput(self, ctx: Context) -> float | None:
        return measure_throughput(ctx.measurer, ctx.frame, ctx.line_rate,
                                  ThroughputParams(duration_s=ctx.trial_duration_s), ctx.tester_limit).headline_pps

    def verdict_values(self, result: dict) -> dict[str, float | None]:
        head = read_frame_results(result, ThroughputResult).headline
        return {"throughput_pct": head.pct_line_rate} if head else {}

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        r = read_frame_results(result, ThroughputResult)
        h, mm = r.headline, r.spread("rate_pps")
        why = not_measured(r)
        if h is None and why:
            return [[fmt.size(r.frame_size), fmt.not_measured(why), *[fmt.DASH] * 4, flags]]
        bounded = all_bounded(r.repetitions)
        fps = fmt.at_least(format_pps(h.fps or 0), bounded) if h else "none"
        return [[fmt.size(r.frame_size), fps, f"{(h.pct_line_rate if h else 0) or 0:.2f}",
                 format_bps((h.l1_bps if h else 0) or 0), format_bps((h.l2_bps if h else 0) or 0),
                 format_pps_range(mm.min or 0, mm.max or 0), flags]]

    def zero_loss_bounds(self, repetition: dict, params: dict) -> tuple[float, float | None, str] | None:
        rep = from_dict(ThroughputResult, repetition, partial=True)
        p: ThroughputParams | None = self.read_params(params)
        if rep.found is False or p is None or p.acceptable_loss_ratio > 0:
            return None
        lower = finite(rep.lower_pps)
        if lower is None or lower <= 0:
            return None
        # bounded by the tester (in results older than ``bounded_by_tester``: some trial was invalid,
        # which netrig.results migrates to "no upper end"): no upper bound claimed
        d = finite(p.duration_s)
        basis = (f"RFC 2544 throughput: a load passes when one {d:g} s trial loses no frames" if d
                 else "RFC 2544 throughput: a load passes when its trial loses no frames")
        return lower, None if rep.tester_limited is True else finite(rep.upper_pps), basis

    def tester_bounded(self, repetition: dict) -> bool:
        return from_dict(ThroughputResult, repetition, partial=True).tester_limited is True

    def capacity(self, run: RunView) -> list[Capacity]:
        return [Capacity(e.frame_size, e.rate, e.pct, e.l1_bps, e.l2_bps, e.at_least) for e in entries(run)]

    def html(self, run: RunView) -> dict[str, str]:
        return {"summary": "<h3>Throughput per frame size</h3>" + (table_html(table(run)) or empty(NONE)),
                SECTION.id: figure(throughput_plot, [run]) or empty(NONE)}

    def compare_html(self, runs: Sequence[RunView]) -> dict[str, str]:
        return {SECTION.id: figure(throughput_plot, runs) or empty("No RFC 2544 throughput in these results.")}

    def markdown(self, run: RunView) -> str:
        return section_md("Throughput per frame size", table_md(table(run)), NONE)

    def ratio_table(self, runs: Sequence[RunView]) -> tuple[str, Table] | None:
        t = Table(ratio_header([r.name for r in runs]))
        data = [by_size(entries(r)) for r in runs]
        for lab in sizes_of(data):
            b = data[0].get(lab)
            bv = b.rate.value if b else None
            row = [fmt.size(size_of_label(lab)), fmt.fps(bv)]
            for d in data[1:]:
                e = d.get(lab)
                v = e.rate.value if e else None
                row += [fmt.fps(v), fmt.ratio_pct(v, bv)]
            t.add(row)
        return ("RFC 2544 throughput", t) if t else None

    def compare_values(self, run: RunView) -> dict[str, tuple[float | None, bool]]:
        out: dict[str, tuple[float | None, bool]] = {}
        for e in entries(run):
            out[f"RFC 2544 throughput {fmt.size(e.frame_size)}"] = (e.rate.value if e.rate else None, True)
        for e in entries(run):  # the CPU rows after the rates
            if e.cpu_s_per_mframe is not None:
                out[f"CPU-s per M frames at throughput ({fmt.size(e.frame_size)})"] = (e.cpu_s_per_mframe, False)
        return out

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        option(parser, "--resolution", "of the throughput search [0.1]", default="0.1")
        option(parser, "--search", f"how the throughput search places its loads: {', '.join(SEARCHES)} [binary]",
               default="binary", choices=SEARCHES)
        option(parser, "--search-step", f"a linear throughput search's step, %% of its top load (the line rate, "
                                        f"or the tester's proven limit when lower) [{STEP_PCT:g}]",
               default=f"{STEP_PCT:g}")

    def cli_params(self, args: argparse.Namespace) -> dict:
        return {"resolution_pct": args.resolution, "search": args.search, "step_pct": args.search_step}


METHOD = Throughput()
