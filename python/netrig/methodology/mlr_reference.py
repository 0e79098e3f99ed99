"""Adapter running the reference MLRsearch implementation (PyPI ``MLRsearch==1.2.1``, FD.io CSIT)
on a netrig :class:`~netrig.measure.Measurer`, with the same goals and result as netrig's own
(:func:`netrig.methodology.mlr.search`)."""
from __future__ import annotations

import time
from collections.abc import Sequence

from netrig.errors import CapabilityError
from netrig.measure import Load, Measurer
from netrig.methodology.mlr import GoalResult, MlrResult, SearchGoal
from netrig.model import FrameSize, LineRate


def search_reference(measurer: Measurer, frame: FrameSize, line_rate: LineRate, goals: Sequence[SearchGoal],
                     min_rate_pct: float, max_rate_pct: float, search_duration_max_s: float,
                     warmup_s: float = 0.0) -> MlrResult:
    try:
        import MLRsearch as ref
    except ImportError:
        raise CapabilityError(
            "mlrsearch.implementation = reference needs the MLRsearch package: pip install MLRsearch==1.2.1"
        ) from None

    trials = 0

    class _Adapter(ref.AbstractMeasurer):
        def measure(self, intended_duration: float, intended_load: float):
            nonlocal trials
            trials += 1
            c = measurer.measure(Load(intended_load, frame), intended_duration)
            return ref.MeasurementResult(
                intended_duration=intended_duration, intended_load=intended_load,
                offered_count=c.frames_sent, loss_count=c.frames_lost,
                intended_count=int(round(intended_load * intended_duration)),
            )

    rgoals = [ref.SearchGoal(loss_ratio=g.loss_ratio, exceed_ratio=g.exceed_ratio,
                            relative_width=g.relative_width,
                            initial_trial_duration=g.initial_trial_duration_s,
                            final_trial_duration=g.final_trial_duration_s,
                            duration_sum=g.duration_sum_s, fail_fast=False) for g in goals]
    fps = line_rate.fps(frame)
    config = ref.Config()
    config.goals = rgoals
    config.max_load = fps * max_rate_pct / 100
    config.min_load = fps * min_rate_pct / 100
    config.search_duration_max = search_duration_max_s
    config.warmup_duration = warmup_s
    t0 = time.monotonic()
    out = ref.MultipleLossRatioSearch(config=config).search(measurer=_Adapter(), debug=lambda _msg: None)
    results = []
    for goal, rgoal in zip(goals, rgoals):
        gr = out[rgoal]
        ct = gr.conditional_throughput
        results.append(GoalResult(
            goal,
            float(ct) if ct is not None else None,
            float(gr.relevant_lower_bound) if gr.relevant_lower_bound is not None else None,
            float(gr.relevant_upper_bound) if gr.relevant_upper_bound is not None else None,
        ))
    return MlrResult(frame, line_rate, tuple(results), trials, time.monotonic() - t0, "reference")
