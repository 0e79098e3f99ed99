"""RFC 2544 §26.4 back-to-back frames, with the RFC 9004 buffer-time estimates.

One *trial* is a search over burst length (bursts at line rate) for the longest burst forwarded
with no loss; it is repeated ``trials`` times (50 by default) and the mean burst reported. Each
probe is one engine trial in burst mode: exactly the burst's frames, at the burst rate or at the
rate the tester holds (below). The search gallops from a starting burst (1 ms of frames, then the
previous trial's answer), doubling or halving until it brackets the answer, then bisects. An
*invalid* probe (the tester failed to send the burst, dropped frames itself, or paused in one the
DUT passed) is not a failed burst: it is repeated up to ``INVALID_RETRIES`` times, and a search that
still cannot probe is abandoned and counted (``abandoned_trials``), never averaged in. A probe that
passed although the tester sent it slower than its burst rate is not a passed burst either, nor is
any probe the DUT's CPU stalled in; both are repeated the same way (:class:`_Prober`; all counted
in ``repeated_probes``, and the last reason of each abandoned search kept in
``abandoned_reasons``). When the tester's achieved burst rate is more than ``TX_TOLERANCE_PCT``
below the burst rate, the result is ``tester_limited``: the DUT saw bursts at the achieved rate
(``achieved_burst_rate_fps``), not at line rate.

A tester that cannot send at the burst rate does not send "as fast as it can" either: that rate
is not one rate (on veth, unpaced bursts of 1000-15 000 frames left at 296-669 kfps, with no
pause to show it), and bursts at changing rates through a policer pass changing numbers of frames.
Before the search, ``CALIBRATION_BURSTS`` unpaced bursts measure what it reaches; every probe is then
paced at ``HELD_RATE_SHARE`` of the slowest (``held_burst_rate_fps``), a rate it holds in each burst.
When a passing probe still leaves slowly in every attempt, the tester no longer holds that rate:
every search starts again at ``HELD_RATE_SHARE`` of the slowest attempt (up to ``MAX_REPACES`` times).

RFC 9004 §5.4 calculations (R = max theoretical frame rate, X = measured throughput, N = mean burst):
  Implied DUT Buffer Time   = N / R
  Corrected DUT Buffer Time = (N − (N / R) × X) / R
i.e. the frames the DUT forwarded during the burst (at its throughput X) are removed from the
burst before converting it to time at line rate.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from netrig.measure import Load, Measurer, TrialCounts
from netrig.measure.platform import StallEpisode
from netrig.methodology.method import Context, Method, Shortcut
from netrig.methodology.stats import check, median
from netrig.methodology.vocabulary import option
from netrig.methods.sections import OTHER_METHODS, RFC2544
from netrig.model import FrameSize, LineRate, defaults, format_pps, rates
from netrig.view import fmt
from netrig.view.frame_results import read_frame_results
from netrig.view.html import empty, esc, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.run_view import RunView, Stat
from netrig.view.table import Table


@dataclass(frozen=True)
class BackToBackParams:
    trials: int = 50
    rate_pct: float = 100.0  # of line rate
    min_burst_frames: int = 1
    max_burst_frames: int | None = None  # default: 2 s at the burst rate (RFC 9004 §5.1)
    resolution_frames: int | None = None  # default: 0.1 % of the burst found, at least 1 frame
    throughput_from: int | None = None
    repetitions: int | None = None

    def __post_init__(self) -> None:
        check("trials", self.trials, lo=1, integer=True)
        check("rate_pct", self.rate_pct, lo=0, lo_open=True, hi=1000)
        check("min_burst_frames", self.min_burst_frames, lo=1, integer=True)
        if self.max_burst_frames is not None:
            check("max_burst_frames", self.max_burst_frames, lo=self.min_burst_frames, integer=True)
        if self.resolution_frames is not None:
            check("resolution_frames", self.resolution_frames, lo=1, integer=True)
        if self.throughput_from is not None:
            check("throughput_from", self.throughput_from, lo=0, integer=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class BackToBackResult:
    frame: FrameSize
    line_rate: LineRate
    burst_rate_fps: float
    bursts_frames: tuple[int, ...]
    throughput_fps: float | None
    max_burst_reached: bool
    resolution_frames: int
    #: Median burst rate the tester achieved in probes of at least ``RATE_PROBE_MIN_FRAMES``.
    achieved_burst_rate_fps: float | None = None
    #: Searches abandoned because a probe stayed invalid (tester-side).
    abandoned_trials: int = 0
    #: Probes run again: invalid ones, and passes the tester sent slower than its burst rate.
    repeated_probes: int = 0
    #: The rate every probe was paced at when the tester could not send at the burst rate
    #: (:meth:`_Prober.calibrate`); ``None``: at the burst rate.
    held_burst_rate_fps: float | None = None
    #: Why each abandoned search was: its last probe's reason (the tester's, or the platform's).
    abandoned_reasons: tuple[str, ...] = ()

    @property
    def tester_limited(self) -> bool:
        """The tester could not offer the bursts at the burst rate (within ``TX_TOLERANCE_PCT``)."""
        a, r = self.achieved_burst_rate_fps, self.burst_rate_fps
        return a is not None and r is not None and a < r * (1 - defaults.TX_TOLERANCE_PCT / 100)

    @property
    def tester_limit_pps(self) -> float | None:
        return self.achieved_burst_rate_fps if self.tester_limited else None

    @property
    def mean_burst_frames(self) -> float | None:
        """``None`` when no burst was measured (every search abandoned): not a burst of 0."""
        return statistics.fmean(self.bursts_frames) if self.bursts_frames else None

    @property
    def stdev_burst_frames(self) -> float | None:
        if not self.bursts_frames:
            return None
        return statistics.stdev(self.bursts_frames) if len(self.bursts_frames) > 1 else 0.0

    @property
    def implied_buffer_time_s(self) -> float | None:
        n = self.mean_burst_frames
        return None if n is None or not self.burst_rate_fps else n / self.burst_rate_fps

    @property
    def corrected_buffer_time_s(self) -> float | None:
        n, r = self.mean_burst_frames, self.burst_rate_fps
        if self.throughput_fps is None or n is None or not r:
            return None
        return (n - (n / r) * self.throughput_fps) / r

    @property
    def headline_pps(self) -> float | None:
        return None

    def stats_values(self) -> dict:
        return {"mean_burst_frames": self.mean_burst_frames,
                "corrected_buffer_time_s": self.corrected_buffer_time_s}

    def to_dict(self) -> dict:
        return {
            "bursts_frames": list(self.bursts_frames), "mean_burst_frames": self.mean_burst_frames,
            "stdev_burst_frames": self.stdev_burst_frames, "burst_rate_fps": self.burst_rate_fps,
            "throughput_fps": self.throughput_fps, "implied_buffer_time_s": self.implied_buffer_time_s,
            "corrected_buffer_time_s": self.corrected_buffer_time_s,
            "max_burst_reached": self.max_burst_reached, "resolution_frames": self.resolution_frames,
            "achieved_burst_rate_fps": self.achieved_burst_rate_fps, "tester_limited": self.tester_limited,
            "abandoned_trials": self.abandoned_trials, "repeated_probes": self.repeated_probes,
            "held_burst_rate_fps": self.held_burst_rate_fps, "abandoned_reasons": list(self.abandoned_reasons),
        }


#: An invalid probe is repeated this many times before its search is abandoned.
INVALID_RETRIES = 2
#: The achieved burst rate is taken from probes at least this long (shorter bursts leave in one or
#: two batches, and their rate says nothing).
RATE_PROBE_MIN_FRAMES = 1000
#: Unpaced bursts sent before the search to learn the rate a tester below the burst rate holds.
CALIBRATION_BURSTS = 5
#: Probes are paced at this share of the slowest calibration burst: on veth, paced at 298 kfps,
#: 75 bursts of 298-2 300 frames left at 275-316 kfps, and none was repeated.
HELD_RATE_SHARE = 0.9


class _Repace(Exception):
    """A passing probe the tester sent slowly in every attempt: it no longer holds the rate it paces
    its bursts at (on veth its top rate falls by half for seconds at a time)."""

    def __init__(self, slowest_pps: float) -> None:
        super().__init__(slowest_pps)
        self.slowest_pps = slowest_pps


#: How :func:`stall_cause` names a stall of netrig's own threads (a test tells the platform's from it).
BY_TESTER = "netrig's own thread"


def stall_cause(e: StallEpisode) -> str:
    """Who stopped the CPU in stall ``e``: the host, a task of the guest, or one of netrig's."""
    if not e.seen_by_guest:
        return "the host stopped it"
    return f"{BY_TESTER} {e.by} held it" if e.by_tester else f"{e.by or 'another task'} held it"


class _Prober:
    """Runs one probe (a burst of ``n`` frames) until it is evidence, and keeps the tester's burst rate.

    A burst the tester sent slower than its burst rate gave the DUT time to drain (a policer's
    bucket refills while the frames trickle): a probe that *passed* that way says nothing about a
    burst at the rate, so it is run again when its sending took ``BURST_PAUSE_NS`` or more beyond
    what the rate it was paced at would take (after :meth:`calibrate`: the burst rate or the held
    rate; without one, the median burst rate so far). Here, through a 40-kfps policer with a
    1000-frame bucket, bursts sent at 183-241 kfps passed 1 117-1 121 frames where the median
    370 kfps passes 1 115, none paused 1 ms; CI read 1 210 against 1 068. A slow probe that *lost*
    frames is kept: sent faster, it would have lost too. One slow in every attempt raises
    :class:`_Repace`: the tester no longer holds its rate.

    A burst during which the DUT's CPU stalled (the platform watch's episode on the DUT's side) is
    no evidence either way, passed or lost: the frames it queued meanwhile reach the DUT at once. A
    2.7-ms stop mid-burst let 1 156 frames through where the rate passes 1 141; one at a burst's
    start cost 32 frames of a 1 093-frame burst the rate passes whole. It is run again, as an
    invalid probe is (a stall is never the DUT's ceiling).
    """

    def __init__(self, measurer: Measurer, load: Load) -> None:
        self.measurer, self.load = measurer, load
        self.rates: list[float] = []
        self.repeated = 0
        self.held_pps: float | None = None
        #: The calibration showed the tester sends at ``load.rate_pps`` (the burst rate, or the held rate).
        self.calibrated = False
        #: Why the last probe that was no evidence was not (``None``: none so far).
        self.reason: str | None = None
        #: Times the measurement restarted at a lower rate (:class:`_Repace`).
        self.repaces = 0

    def calibrate(self, n: int) -> None:
        """Send up to ``CALIBRATION_BURSTS`` bursts of ``n`` frames at the burst rate (their loss is
        not judged); when the tester falls more than ``TX_TOLERANCE_PCT`` short of it, pace every probe
        from now on at ``HELD_RATE_SHARE`` of the slowest valid one. One burst that reaches the rate
        ends it. Bursts shorter than ``RATE_PROBE_MIN_FRAMES`` say nothing of a rate: none is sent."""
        if n < RATE_PROBE_MIN_FRAMES:
            return
        burst, reached = dataclasses.replace(self.load, burst_frames=n), []
        for _ in range(CALIBRATION_BURSTS):
            c = self.measurer.measure(burst, n / burst.rate_pps)
            if not c.valid or c.achieved_pps <= 0:
                continue
            if c.achieved_pps >= burst.rate_pps * (1 - defaults.TX_TOLERANCE_PCT / 100):
                self.calibrated = True
                return
            reached.append(c.achieved_pps)
        if reached:
            self.hold(min(reached))

    def hold(self, reached_pps: float) -> None:
        """Pace every probe from now on at ``HELD_RATE_SHARE`` of ``reached_pps``, the tester's slowest
        burst; the achieved rates so far were at another rate."""
        self.held_pps = HELD_RATE_SHARE * reached_pps
        self.load = dataclasses.replace(self.load, rate_pps=self.held_pps)
        self.calibrated, self.rates = True, []

    def burst_rate(self) -> float | None:
        return statistics.median(self.rates) if self.rates else None

    def _pace(self) -> float | None:
        """The rate a probe is judged slow against: the one it was paced at once calibrated, else the
        median burst rate so far."""
        return self.load.rate_pps if self.calibrated else self.burst_rate()

    def _slow(self, n: int, achieved_pps: float) -> bool:
        r = self._pace()
        return r is not None and 0 < achieved_pps < r and n / achieved_pps - n / r >= defaults.BURST_PAUSE_NS / 1e9

    def _not_evidence(self, n: int, c: TrialCounts) -> str | None:
        """Why probe ``c`` (a burst of ``n``) says nothing of the DUT (``None``: it does)."""
        if not c.valid:
            return c.invalid_reason or "the tester flagged it invalid"
        dut = c.stalls.dut if c.stalls is not None else None
        if dut is not None and dut.count:
            worst = max(dut.episodes, key=lambda e: e.length_ms)
            return (f"the DUT's CPU stalled {dut.max_ms:.1f} ms during the burst ({stall_cause(worst)}): the "
                    "frames it queued meanwhile reached it at once")
        r = self._pace()
        if c.frames_lost == 0 and r is not None and self._slow(n, c.achieved_pps):
            late_ms = 1e3 * (n / c.achieved_pps - n / r)
            return (f"it passed, sent at {format_pps(c.achieved_pps)}, {late_ms:.1f} ms slower than at "
                    f"{format_pps(r)}: the DUT drained meanwhile")
        return None

    def __call__(self, n: int) -> bool | None:
        """Whether a burst of ``n`` passed; ``None`` when the tester could not run it."""
        slow: list[float] = []
        for attempt in range(1 + INVALID_RETRIES):
            self.repeated += attempt > 0
            c = self.measurer.measure(dataclasses.replace(self.load, burst_frames=n), n / self.load.rate_pps)
            self.reason = self._not_evidence(n, c)
            if self.reason is None:
                if n >= RATE_PROBE_MIN_FRAMES and c.achieved_pps > 0 and not self._slow(n, c.achieved_pps):
                    self.rates.append(c.achieved_pps)
                return c.frames_lost == 0
            if c.valid and c.frames_lost == 0 and self._slow(n, c.achieved_pps):
                slow.append(c.achieved_pps)
        if len(slow) == 1 + INVALID_RETRIES and self.repaces < MAX_REPACES:
            raise _Repace(min(slow))
        return None


#: A measurement restarts at a lower rate (:class:`_Repace`) at most this many times.
MAX_REPACES = 2


def _search(probe: _Prober, start: int, lo_burst: int, max_burst: int, resolution: int | None) -> int | None:
    """The longest passing burst (``lo_burst - 1`` if none), or ``None`` if abandoned. It gallops
    from ``start``, doubling or halving until it brackets the answer, then bisects."""
    n = min(max(start, lo_burst), max_burst)
    r = probe(n)
    if r is None:
        return None
    lo, hi = (n, None) if r else (lo_burst - 1, n)  # lo passes (or is below min), hi fails
    while hi is None:  # gallop up
        if lo >= max_burst:
            return max_burst
        n = min(2 * lo, max_burst)
        r = probe(n)
        if r is None:
            return None
        lo, hi = (n, None) if r else (lo, n)
    while lo < lo_burst and hi > lo_burst:  # gallop down
        n = max(hi // 2, lo_burst)
        r = probe(n)
        if r is None:
            return None
        lo, hi = (n, hi) if r else (lo, n)
    while hi - lo > (resolution or max(1, hi // 1000)):
        mid = (lo + hi) // 2
        r = probe(mid)
        if r is None:
            return None
        lo, hi = (mid, hi) if r else (lo, mid)
    return lo


def measure_back_to_back(measurer: Measurer, frame: FrameSize, line_rate: LineRate,
                         params: BackToBackParams = BackToBackParams(),
                         throughput_pps: float | None = None) -> BackToBackResult:
    rate = line_rate.fps(frame) * params.rate_pct / 100
    lo_burst = params.min_burst_frames
    max_burst = params.max_burst_frames or max(lo_burst, int(round(2.0 * rate)))
    probe = _Prober(measurer, Load(rate, frame))
    first = max(lo_burst, int(round(rate * 1e-3)))
    probe.calibrate(min(max_burst, max(first, RATE_PROBE_MIN_FRAMES)))
    while True:
        bursts: list[int] = []
        abandoned: list[str] = []
        start = first
        try:
            for _ in range(params.trials):
                found = _search(probe, start, lo_burst, max_burst, params.resolution_frames)
                if found is None:
                    abandoned.append(probe.reason or "")
                    continue
                bursts.append(max(found, 0))
                start = max(found, lo_burst)
            break
        except _Repace as e:  # every search so far was at a rate the tester no longer holds
            probe.repaces += 1
            probe.hold(e.slowest_pps)
    res = params.resolution_frames or max(1, int(max(bursts, default=0)) // 1000)
    return BackToBackResult(frame, line_rate, rate, tuple(bursts), throughput_pps, max(bursts, default=0) >= max_burst,
                            res, achieved_burst_rate_fps=probe.burst_rate(), abandoned_trials=len(abandoned),
                            repeated_probes=probe.repeated, held_burst_rate_fps=probe.held_pps,
                            abandoned_reasons=tuple(abandoned))


# --------------------------------------------------------------------------------------------- #
# Reading it back from results

def slow_bursts(reps: Sequence[BackToBackResult]) -> str:
    """`` (bursts at 600 kfps: tester-limited)`` beside a burst the tester sent below the burst rate
    (the DUT's buffer was filled that fast, not at line rate); empty otherwise."""
    slow = min((x.achieved_burst_rate_fps for x in reps if x.tester_limited and x.achieved_burst_rate_fps),
               default=None)
    return f" (bursts at {rates.ACHIEVED} {format_pps(slow)}: tester-limited)" if slow is not None else ""


def _no_burst(reps: Sequence[BackToBackResult]) -> str:
    """Why no burst was measured, for the place of the number."""
    why = next((w for x in reps for w in x.abandoned_reasons if w), None)
    if any(x.abandoned_trials for x in reps):
        return f"—: every trial abandoned ({why})" if why else "—: every trial abandoned"
    return "—: no trial"


def table(r: RunView) -> Table:
    t = Table(["frame size", "mean burst (frames)", "bursts (min–max)", "stdev", "implied buffer time",
               "corrected buffer time (RFC 9004)", "max burst reached"])
    for e in r.frame_results(METHOD_NAME, BackToBackResult):
        reps = e.repetitions
        bursts = [b for x in reps for b in x.bursts_frames or ()]
        reached = "yes" if any(x.max_burst_reached for x in reps) else "no"
        if not bursts:  # no burst measured: no number, the reason
            t.add([fmt.size(e.frame_size), _no_burst(reps), *[fmt.DASH] * 4, reached])
            continue
        mb = Stat.from_spread(e.spread("mean_burst_frames")) or Stat.over(x.mean_burst_frames for x in reps)
        t.add([fmt.size(e.frame_size), fmt.count(mb.value if mb else None) + (slow_bursts(reps) if mb else ""),
               f"{min(bursts):,.0f}–{max(bursts):,.0f}", fmt.count(median(x.stdev_burst_frames for x in reps)),
               fmt.seconds(median(x.implied_buffer_time_s for x in reps)),
               fmt.seconds(median(x.corrected_buffer_time_s for x in reps)), reached])
    return t


# --------------------------------------------------------------------------------------------- #
# The method

METHOD_NAME = "rfc2544_back_to_back"


class BackToBack(Method):
    name = METHOD_NAME
    label = "RFC 2544 §26.4 back-to-back"
    short_name = "back_to_back"
    params_type = BackToBackParams
    needs_throughput = True
    sections = (OTHER_METHODS,)
    console_columns = ("mean burst (frames)", "implied buffer", "corrected buffer")
    shortcut = Shortcut(RFC2544, "back-to-back", default=False)
    cli_fields = {"trials": "--b2b-trials"}

    def run(self, params: BackToBackParams, ctx: Context) -> BackToBackResult:
        return measure_back_to_back(ctx.measurer, ctx.frame, ctx.line_rate, params,
                                    throughput_pps=ctx.throughput_pps or None)

    def estimate_trials(self, params: BackToBackParams, frame: FrameSize, line_fps: float) -> int:
        if not params.resolution_frames:
            return params.trials * (int(math.log2(1000)) + 1)
        mb = params.max_burst_frames or 2 * line_fps
        return params.trials * (int(math.log2(max(2.0, mb / params.resolution_frames))) + 1)

    def top_rate_pct(self, params: BackToBackParams) -> float:
        return params.rate_pct

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        r = read_frame_results(result, BackToBackResult)
        reps = r.repetitions
        if not any(x.bursts_frames for x in reps):  # no burst measured: no number to show
            return [[fmt.size(r.frame_size), _no_burst(reps), "—", "—", flags]]
        mb, cb = r.spread("mean_burst_frames").median, r.spread("corrected_buffer_time_s").median
        ib = reps[0].implied_buffer_time_s if reps else None
        return [[fmt.size(r.frame_size), f"{mb:.0f}{slow_bursts(reps)}" if mb is not None else "-",
                 f"{ib * 1e3:.3f} ms" if ib is not None else "-",
                 f"{cb * 1e3:.3f} ms" if cb is not None else "-", flags]]

    def html(self, run: RunView) -> dict[str, str]:
        return {OTHER_METHODS.id: "<h3>" + esc("Back-to-back frames (RFC 2544 §26.4, RFC 9004 buffer time)") + "</h3>"
                + (table_html(table(run)) or empty(f"No {self.label} in this result."))}

    def markdown(self, run: RunView) -> str:
        t = table(run)
        return section_md("Back-to-back", table_md(t), "") if t else ""

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        option(parser, "--b2b-trials", "back-to-back trials per frame size [50]", default="50")

    def cli_params(self, args: argparse.Namespace) -> dict:
        return {"trials": args.b2b_trials}


METHOD = BackToBack()
