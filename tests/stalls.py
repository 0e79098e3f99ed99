"""A tester that stalls, for the searches' tests: a measurer that logs every trial, and the rule
every search keeps (``netrig.methodology.tester.measure_judged``) checked on the log."""
from __future__ import annotations

from dataclasses import replace

from netrig.measure import Load, Measurer, TrialCounts
from netrig.methodology.tester import TRANSIENT_REPEATS


class Logged:
    """A measurer that keeps every trial it ran: ``(rate asked, counts)``."""

    def __init__(self, inner: Measurer):
        self.inner = inner
        self.trials: list[tuple[float, TrialCounts]] = []

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        c = self.inner.measure(load, duration_s)
        self.trials.append((load.rate_pps, c))
        return c


def stalls_at_kept_loads(trials: list[tuple[float, TrialCounts]]) -> list[int]:
    """Indices of the trials the tester fell short on at a load no higher than one it had sent in
    full earlier: stalls, each to be repeated."""
    out, kept = [], 0.0
    for i, (rate, c) in enumerate(trials):
        if not c.valid and rate <= kept:
            out.append(i)
        if c.valid:
            kept = max(kept, rate)
    return out


def repeats(trials: list[tuple[float, TrialCounts]]) -> int:
    """How many of the stalls at kept loads were tried again right away (a search's ``repeated_trials``)."""
    return sum(1 for i in stalls_at_kept_loads(trials) if i + 1 < len(trials) and trials[i + 1][0] == trials[i][0])


def unrepeated_stalls(trials: list[tuple[float, TrialCounts]]) -> list[int]:
    """The stalls at kept loads that were not tried again right away, though fewer than
    ``TRANSIENT_REPEATS`` repeats of theirs came before."""
    out = []
    for i in stalls_at_kept_loads(trials):
        rate = trials[i][0]
        runs = 0  # the same load right before it, in a row
        while runs < i and trials[i - 1 - runs][0] == rate:
            runs += 1
        again = i + 1 < len(trials) and trials[i + 1][0] == rate
        if not again and runs < TRANSIENT_REPEATS:
            out.append(i)
    return out


class HostSpoils:
    """A measurer whose host takes the tester's CPU in every trial at a load in ``[low, high]``
    frames/s: the trial falls 10 % short, and the CPU the host measurably took (280 ms) covers its
    stretch (``host_take_s``), as a noisy host's steal did to a whole table-scale study. Elsewhere,
    ``inner``'s counts. ``asked``: every load asked for."""

    def __init__(self, inner: Measurer, low: float, high: float):
        self.inner, self.low, self.high = inner, low, high
        self.asked: list[float] = []

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        self.asked.append(load.rate_pps)
        c = self.inner.measure(load, duration_s)
        if not self.low <= load.rate_pps <= self.high:
            return c
        sent = int(0.9 * c.frames_sent)
        return replace(c, achieved_pps=0.9 * load.rate_pps, frames_sent=sent,
                       frames_received=min(sent, c.frames_received), valid=False,
                       invalid_reason="the tester's sending was stretched", host_take_s=0.28)
