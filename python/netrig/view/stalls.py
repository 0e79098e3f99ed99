"""The platform's stalls and the loss they explain, in words: one trial's (the console's line, the
report's trial table) and a run's (the story the demo tells when its answers differ)."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from netrig.measure import TrialCounts
from netrig.measure.platform import StallSide, TrialStalls, WireLoss


def side_words(name: str, side: StallSide | None) -> str:
    """``DUT 3 stalls (max 5.2 ms, 2 by other tasks)``; empty without stalls."""
    if side is None or not side.count:
        return ""
    guest = sum(1 for e in side.episodes if e.seen_by_guest)
    by = f", {guest} by other tasks" if guest else ""
    return f"{name} {side.count} stall{'s' if side.count > 1 else ''} (max {side.max_ms:.1f} ms{by})"


def holder_words(side: StallSide | None) -> str:
    """Who held one side's CPUs and for how long, longest first: ``41.2 ms: the host 12.3 ms (3
    stops), kdamond.0 20.1 ms (5 waits), python (netrig) 8.8 ms (1 wait)``; empty without stalls."""
    if side is None or not side.count:
        return ""
    held: dict[str, list[float]] = {}
    for e in side.episodes:
        who = "the host" if not e.seen_by_guest else f"{e.by or 'another task'}{' (netrig)' if e.by_tester else ''}"
        held.setdefault(who, []).append(e.length_ms)
    parts = [f"{who} {sum(ms):.1f} ms ({len(ms)} {'stop' if who == 'the host' else 'wait'}{'s' if len(ms) > 1 else ''})"
             for who, ms in sorted(held.items(), key=lambda kv: -sum(kv[1]))]
    return f"{side.total_ms:.1f} ms: " + ", ".join(parts)


def stall_words(stalls: TrialStalls) -> str:
    """Both sides' holders (:func:`holder_words`): ``tester 8.1 ms: the host 8.1 ms (2 stops); DUT
    none``."""
    sides = [("tester", stalls.tester), *([("DUT", stalls.dut)] if stalls.dut is not None else [])]
    return "; ".join(f"{name} {holder_words(side) or 'none'}" for name, side in sides)


def ring_loss_words(w: WireLoss) -> str:
    """The DUT ring's drops over one trial and how many fell in DUT stalls longer than its time:
    ``1,022 frames dropped, all in DUT stalls longer than its 51.2 ms``; ``none dropped``."""
    part = "" if w.complete else " (counted over part of the trial: it outran the watch's history)"
    if not w.dropped:
        return "none dropped" + part
    share = "all" if w.in_stalls >= w.dropped else f"{w.in_stalls:,}"
    ours = f" ({w.by_tester:,} while netrig's own threads held its CPU)" if w.by_tester else ""
    return f"{w.dropped:,} frames dropped, {share} in DUT stalls longer than its {w.ring_ms:.1f} ms{ours}{part}"


def loss_words(c: TrialCounts) -> str:
    """How much of a lossy trial's loss the DUT's ring dropped during DUT stalls: ``all 569 lost
    frames in DUT stalls``, ``120 of 2,484 lost frames in DUT stalls``; empty when it lost nothing
    or it was not measured."""
    if not c.frames_lost or c.loss_in_stalls is None:
        return ""
    if c.loss_all_in_stalls:
        return f"all {c.frames_lost:,} lost frames in DUT stalls"
    return f"{min(c.loss_in_stalls, c.frames_lost):,} of {c.frames_lost:,} lost frames in DUT stalls"


def stall_note(c: TrialCounts) -> str:
    """A trial's stalls and loss in stalls in one clause; empty when there is nothing to say."""
    if c.stalls is None:
        return ""
    missed = c.stalls.missed_events
    unsure = f"the stall watch missed {missed:,} kernel event{'s' if missed > 1 else ''}" if missed else ""
    parts = [w for w in (side_words("DUT", c.stalls.dut), side_words("tester", c.stalls.tester), loss_words(c),
                         unsure) if w]
    return "; ".join(parts)


@dataclass(frozen=True)
class StallStory:
    """What stalls did over a set of trials (a search, a run): the lossy trials, how many of them
    lost frames only in DUT stalls, and the DUT's stalls' count, longest and total."""

    trials: int
    lossy: int
    lossy_all_in_stalls: int
    lost: int
    lost_in_stalls: int
    dut_stalls: int
    dut_max_ms: float
    dut_total_ms: float
    measured: bool

    @classmethod
    def of(cls, counts: Iterable[TrialCounts]) -> StallStory:
        cs = list(counts)
        seen = [c for c in cs if c.stalls is not None]
        lossy = [c for c in cs if c.frames_lost > 0]
        duts = [c.stalls.dut for c in seen if c.stalls is not None and c.stalls.dut is not None]
        return cls(len(cs), len(lossy), sum(1 for c in lossy if c.loss_all_in_stalls),
                   sum(c.frames_lost for c in lossy), sum(min(c.loss_in_stalls or 0, c.frames_lost) for c in lossy),
                   sum(d.count for d in duts), max((d.max_ms for d in duts), default=0.0),
                   sum(d.total_ms for d in duts), bool(seen))

    def sentence(self) -> str:
        """``3 of 14 trials lost frames; 2 of them only while the DUT's CPU was stopped (41 DUT
        stalls, longest 12.0 ms): 1,234 of 1,300 lost frames.``"""
        if not self.measured:
            return ("stalls were not measured in this run (a simulated DUT, a result from before netrig measured "
                    "them, or a kernel that refused the stall watch; the run's notes say which)")
        if not self.lossy:
            return (f"none of {self.trials} trials lost frames; the DUT's CPUs stalled {self.dut_stalls} times "
                    f"(longest {self.dut_max_ms:.1f} ms)")
        only = self.lossy_all_in_stalls or "none"
        return (f"{self.lossy} of {self.trials} trials lost frames; {only} of them only while "
                f"the DUT was stalled ({self.dut_stalls} DUT stalls, longest {self.dut_max_ms:.1f} ms): "
                f"{self.lost_in_stalls:,} of {self.lost:,} lost frames fell in DUT stalls")
