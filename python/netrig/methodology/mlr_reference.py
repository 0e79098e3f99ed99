"""Adapter running the reference MLRsearch implementation (PyPI ``MLRsearch==1.2.1``, FD.io CSIT)
on a netrig :class:`~netrig.measure.Measurer`, with the same goals and result as netrig's own
(:func:`netrig.methodology.mlr.search`).

The reference reads a trial's loss from the counts it is given: a valid trial is given its sent
frames as the intended count (what the tester offered is what it was asked for, within the
measurer's tolerance), an invalid one the frames it was asked to send, so the unsent ones count as
lost. The maximum load is capped at the tester's limit, and a stall at a load the tester sent in full
is repeated, as netrig's own search does. A trial the host spoilt in every attempt stops the search
(:class:`~netrig.methodology.tester.PlatformStopped`); the reference gives no bounds before its end,
so the result is then ``not_measured`` with the host's reason."""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from netrig.errors import CapabilityError
from netrig.measure import Load, Measurer
from netrig.methodology.method import with_partial
from netrig.methodology.mlr import GoalResult, MlrResult, SearchGoal, offered_in_time, trial_loss_ratio
from netrig.methodology.tester import NO_LIMIT, PlatformStopped, ProvenLimit, Verdict, measure_judged
from netrig.model import FrameSize, LineRate


def search_reference(measurer: Measurer, frame: FrameSize, line_rate: LineRate, goals: Sequence[SearchGoal],
                     min_rate_pct: float, max_rate_pct: float, search_duration_max_s: float,
                     warmup_s: float = 0.0, limit: ProvenLimit = NO_LIMIT) -> MlrResult:
    try:
        import MLRsearch as ref
    except ImportError:
        raise CapabilityError(
            "mlrsearch.implementation = reference needs the MLRsearch package: pip install MLRsearch==1.2.1"
        ) from None

    tally = _Tally()
    kept: float | None = None  # the highest load the tester sent in full (a shortfall at or below it: a stall)
    verdicts: dict[float, list[Verdict]] = {}
    backpressure: list[float] = []

    class _Adapter(ref.AbstractMeasurer):
        def measure(self, intended_duration: float, intended_load: float):
            nonlocal kept
            try:
                c, v, repeats = measure_judged(measurer, Load(intended_load, frame), intended_duration, limit, kept)
            except PlatformStopped as stop:
                tally.add(stop.attempts, intended_duration)
                raise
            tally.add(1 + repeats, intended_duration)
            if v is Verdict.VALID:
                kept = max(kept or 0.0, intended_load)
            trial_loss_ratio(c, intended_load, intended_duration, v)  # raises when nothing was sent
            verdicts.setdefault(intended_load, []).append(v)
            if v is Verdict.BACKPRESSURE:
                backpressure.append(c.achieved_pps)
            intended = c.frames_sent if v is Verdict.VALID else int(round(intended_load * intended_duration))
            return ref.MeasurementResult(
                intended_duration=intended_duration, intended_load=intended_load,
                offered_count=(offered := offered_in_time(c, intended_duration, v)),
                loss_count=min(c.frames_lost, offered), intended_count=intended,
            )

    rgoals = [_goal(ref, g) for g in goals]
    fps = line_rate.fps(frame)
    max_load = fps * max_rate_pct / 100
    capped = limit.caps(max_load)
    max_load = limit.cap(max_load)
    config = ref.Config()
    config.goals = rgoals
    config.max_load = max_load
    config.min_load = min(fps * min_rate_pct / 100, max_load / 2)
    config.search_duration_max = search_duration_max_s
    config.warmup_duration = warmup_s
    t0 = time.monotonic()

    def result(out: dict | None, complete: bool) -> MlrResult:
        results = []
        for goal, rgoal in zip(goals, rgoals):
            gr = out[rgoal] if out is not None else None
            ct = gr.conditional_throughput if gr is not None else None
            lb = float(gr.relevant_lower_bound) if gr is not None and gr.relevant_lower_bound is not None else None
            ub = float(gr.relevant_upper_bound) if gr is not None and gr.relevant_upper_bound is not None else None
            limited = (capped and lb is not None and lb >= max_load * (1 - 1e-9)) or (
                ub is not None and any(v is Verdict.TESTER for load, vs in verdicts.items()
                                       if abs(load - ub) <= 1e-9 * ub for v in vs))
            results.append(GoalResult(goal, float(ct) if ct is not None else None, lb, ub, limited))
        tester = sum(1 for vs in verdicts.values() for v in vs if v is Verdict.TESTER)
        return MlrResult(frame, line_rate, tuple(results), tally.trials, time.monotonic() - t0, "reference",
                         trial_duration_sum_s=tally.spent_s, max_load_pps=max_load,
                         tester_cap_pps=limit.limit_pps if capped else None, tester_trials=tester,
                         backpressure_trials=len(backpressure), backpressure_pps=max(backpressure, default=None),
                         complete=complete, repeated_trials=tally.repeated)

    try:
        out = ref.MultipleLossRatioSearch(config=config).search(measurer=_Adapter(), debug=lambda _msg: None)
    except PlatformStopped as stop:
        return replace(result(None, complete=True), not_measured=str(stop), platform=str(stop))
    except BaseException as e:
        with_partial(e, lambda: result(None, complete=False))
        raise
    return result(out, complete=True)


class _Tally:
    """The trials a search ran: each attempt, the repeats among them, and their time."""

    def __init__(self) -> None:
        self.trials = self.repeated = 0
        self.spent_s = 0.0

    def add(self, attempts: int, duration_s: float) -> None:
        self.trials += attempts
        self.repeated += attempts - 1
        self.spent_s += attempts * duration_s


def _goal(ref: Any, g: SearchGoal) -> Any:
    """``g`` as the reference's goal."""
    return ref.SearchGoal(loss_ratio=g.loss_ratio, exceed_ratio=g.exceed_ratio, relative_width=g.relative_width,
                          initial_trial_duration=g.initial_trial_duration_s,
                          final_trial_duration=g.final_trial_duration_s, duration_sum=g.duration_sum_s,
                          fail_fast=False)
