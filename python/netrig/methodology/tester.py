"""What the tester can vouch for, and what a trial that fell short means.

The self-test (:mod:`netrig.methodology.selftest`) proves a ceiling per frame size: the tester,
looped back with nothing in between, sent and received it loss-free. A DUT result is only the
DUT's up to ``ceiling / factor`` (RFC 8219's 10 % reserve), so every search asks for at most that:
:meth:`ProvenLimit.cap`. A search whose DUT passes at the cap reports "≥ cap (tester-limited)".

A trial whose tester sent less than it was asked for is invalid. Why it fell short decides what
it means (:meth:`ProvenLimit.verdict`):

* the tester could not keep up (no self-test proved the rate, or the rate is above what it proved,
  or the tester's own receiver dropped frames): a *tester limit*, never DUT loss — the DUT may be
  faster;
* the self-test proved 1.1 × the rate, yet through the DUT the tester fell short: the DUT slowed
  the sender (*backpressure*: a real DUT's Ethernet PAUSE; on a test bed without the wire, a Linux
  DUT that works on the sender's CPU or holds its frames). That is the DUT failing the load: a
  search counts it as a failed trial and keeps going down.

Behind a test bed's wire (``dut_placement`` wire, the default) the DUT cannot slow the sender: it
drops at its full receive ring. There every shortfall is the tester's (:class:`CapOnly`).

A shortfall the host caused is neither (:class:`PlatformStopped`): a trial whose stretch beyond the
tolerance is covered by the CPU the host measurably took from the tester (``host_take_s``: steal,
or CPU stops the guest did not see) is repeated, and when every attempt is spoilt the search stops
there. What it found so far is a lower bound; a stall is never a ceiling, nor a DUT result.
"""
from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from netrig.measure import Load, Measurer, TrialCounts

#: A trial sent "less than asked" when its achieved rate is below this share of the intended rate
#: (the engine's own validity line: 99.9 % of the intended frames).
SHORTFALL_RATIO = 0.999


#: Why a search (a throughput, an NDR/PDR) has no answer at all: every trial was invalid, the
#: tester's, so the DUT neither passed nor failed a load (its ``not_measured``; never a rate of 0).
NOT_MEASURED = "the tester could not send any load"


class Verdict(enum.Enum):
    VALID = "valid"
    #: Invalid because the DUT slowed the sender: a DUT result (the load failed).
    BACKPRESSURE = "backpressure"
    #: Invalid because of the tester: not a DUT result.
    TESTER = "tester"


def fell_short(counts: TrialCounts, intended_pps: float) -> bool:
    """The tester sent less than asked (whatever the reason)."""
    return counts.achieved_pps < intended_pps * SHORTFALL_RATIO


def tester_rx_drops(counts: TrialCounts) -> int:
    """Frames the tester's own receiver dropped (from the engine's result, 0 when not known)."""
    eng = counts.measured.engine
    return int(eng.tester_rx_drops or 0) if eng is not None else 0


@dataclass(frozen=True)
class ProvenLimit:
    """The highest rate the tester vouches for at one frame size: the self-test's proven ceiling
    divided by its factor (``None``: no self-test, nothing is known)."""

    limit_pps: float | None = None

    def __post_init__(self) -> None:
        if self.limit_pps is not None and not self.limit_pps > 0:
            object.__setattr__(self, "limit_pps", None)  # a self-test that proved nothing caps nothing

    def cap(self, rate_pps: float) -> float:
        """``rate_pps``, or the limit when that is lower."""
        return rate_pps if self.limit_pps is None else min(rate_pps, self.limit_pps)

    def caps(self, rate_pps: float) -> bool:
        """The limit is below ``rate_pps``: a search up to ``rate_pps`` stops at the limit instead."""
        return self.limit_pps is not None and self.limit_pps < rate_pps * (1 - 1e-9)

    def verdict(self, counts: TrialCounts, intended_pps: float) -> Verdict:
        if counts.valid:
            return Verdict.VALID
        if (self.limit_pps is not None and intended_pps <= self.limit_pps * (1 + 1e-9)
                and fell_short(counts, intended_pps) and not tester_rx_drops(counts)):
            return Verdict.BACKPRESSURE
        return Verdict.TESTER


#: No self-test: nothing capped, every shortfall the tester's.
NO_LIMIT = ProvenLimit()

#: How often a search repeats a trial the tester fell short on at a load no higher than one it
#: already kept in the same search, before that load bounds the search as the tester's limit.
TRANSIENT_REPEATS = 2


def measure_judged(measurer: Measurer, load: Load, duration_s: float, limit: ProvenLimit,
                   kept_pps: float | None, most: int = TRANSIENT_REPEATS) -> tuple[TrialCounts, Verdict, int]:
    """One trial of a search and its verdict, with the trials repeated for it.

    A trial the tester fell short on (``TESTER``) at a load no higher than ``kept_pps`` (the highest
    load the tester sent in full earlier in the same search) or than ``limit`` (the self-test sent
    its ceiling in full: behind the wire a table-scale search fell short at 132 and 66 kfps in 1-s
    trials after a self-test proved 145 kfps, and reported "≥ 33 kfps"), or one the host measurably spoilt
    (``host_take_s``), was disturbed, not limited: a vCPU stall longer than the engine's own
    repeats allow. It is repeated up to ``most`` times
    (``TRANSIENT_REPEATS``); taken as the tester's limit, it would cap the search below what the DUT
    forwards and report the tester's stall as the DUT's throughput."""
    return judged(lambda: measurer.measure(load, duration_s), load.rate_pps, limit, kept_pps, most)


def judged(run: Callable[[], TrialCounts], intended_pps: float, limit: ProvenLimit, kept_pps: float | None,
           most: int = TRANSIENT_REPEATS) -> tuple[TrialCounts, Verdict, int]:
    """:func:`measure_judged` of any trial ``run`` runs at ``intended_pps`` (aggregate)."""
    repeats = 0
    while True:
        counts = run()
        verdict = limit.verdict(counts, intended_pps)
        spoilt = verdict is Verdict.TESTER and counts.host_take_s is not None  # the host took what the tester lost
        # the platform's, or below a load already sent in full (in this search, or by the self-test)
        sent_in_full = max(kept_pps or 0.0, limit.limit_pps or 0.0)
        transient = spoilt or (verdict is Verdict.TESTER and intended_pps <= sent_in_full * (1 + 1e-9))
        if not transient or repeats >= most:
            if spoilt:
                raise PlatformStopped(intended_pps, counts, repeats + 1)
            return counts, verdict, repeats
        repeats += 1


class PlatformStopped(Exception):
    """A trial the host spoilt in every one of its ``attempts``: the search stops at ``rate_pps``,
    what it found below a lower bound (a stall is never a ceiling). Each search catches it, counts the
    attempts among its trials and says why in its result's ``platform``."""

    def __init__(self, rate_pps: float, counts: TrialCounts, attempts: int):
        self.rate_pps, self.attempts = rate_pps, attempts
        stretched = f" that it stretched {counts.pacing.stretch_s * 1e3:.0f} ms" if counts.pacing else ""
        taken = 1e3 * (counts.host_take_s or 0.0)
        tries = "in every attempt" if attempts > 1 else "in its only attempt"
        super().__init__(f"the host took {taken:.0f} ms of the tester's CPU in a trial at {rate_pps:,.0f} fps"
                         f"{stretched}, {tries}: nothing measured at or above that load; run on a quieter host")


@dataclass(frozen=True)
class CapOnly(ProvenLimit):
    """A proven limit that caps the searches but never blames a shortfall on the DUT: for a DUT
    none of whose work runs on the sender's CPU (a capture application pinned with its kernel
    receive path to another CPU), a sender that fell short was disturbed, not held back."""

    def verdict(self, counts: TrialCounts, intended_pps: float) -> Verdict:
        return Verdict.VALID if counts.valid else Verdict.TESTER


def proven_limit(limit_pps: float | None, dut_can_hold_sender: bool) -> ProvenLimit:
    """The tester's proven limit, judging shortfalls as backpressure only where the DUT can
    slow the sender."""
    return ProvenLimit(limit_pps) if dut_can_hold_sender else CapOnly(limit_pps)
