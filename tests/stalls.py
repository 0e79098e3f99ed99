"""A tester that stalls, for the searches' tests: a measurer that logs every trial, and the rule
every search keeps (``netrig.methodology.tester.measure_judged``) checked on the log."""
from __future__ import annotations

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
