"""netrig's MLRsearch against the reference package (``MLRsearch==1.2.1``) on simulated DUTs.

Runs both implementations on the same simulated DUTs and goals and prints a Markdown table: per
DUT and goal set, the conditional throughput of each goal and the trial time each spent, then
the totals. ``docs/methodology.md`` holds its output; ``tests/methodology/test_mlr.py`` checks the
same set (agreement within the goal width on the DUTs whose answer is defined, total trial time
not above the reference's).

    .venv/bin/python bench/mlr_compare.py
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from netrig.measure import DutModel, Load, SimulatedMeasurer, TrialCounts
from netrig.methodology.mlr import MlrResult, SearchGoal
from netrig.methods.mlrsearch import MlrParams, measure_mlrsearch
from netrig.model import FrameSize, LineRate

LINE_RATE = LineRate(10e9)
FRAME = FrameSize(64)

#: name → (model, whether the answer is defined well enough for two searches to agree on it)
DUTS: dict[str, tuple[DutModel, bool]] = {
    "cliff 1 Mfps": (DutModel(capacity_pps=1e6), True),
    "cliff 50 kfps": (DutModel(capacity_pps=5e4), True),
    "policer 500 Mbit/s": (DutModel(capacity_pps=1e9, capacity_bps=5e8), True),
    "livelock 2 Mfps": (DutModel(capacity_pps=2e6, livelock_slope=0.5, livelock_floor=0.1), True),
    "steep livelock 500 kfps": (DutModel(capacity_pps=5e5, livelock_slope=3, livelock_floor=0.02), True),
    "lossless (line rate)": (DutModel(capacity_pps=1e9), True),
    "always lossy (5 %)": (DutModel(capacity_pps=1e6, background_loss_ratio=0.05), True),
    "tester ceiling 3 Mfps": (DutModel(capacity_pps=5e6, tester_ceiling_pps=3e6, tester_tolerance_ratio=0.0), True),
    "background loss 0.2 %": (DutModel(capacity_pps=1e6, background_loss_ratio=0.002), False),
    **{f"hiccups, seed {s}": (DutModel(capacity_pps=1e6, hiccup_probability=0.1, hiccup_s=0.3, seed=s), False)
       for s in (1, 2, 3)},
    **{f"hiccups on a livelock, seed {s}": (DutModel(capacity_pps=2e6, livelock_slope=0.5, livelock_floor=0.1,
                                                     hiccup_probability=0.1, hiccup_s=0.3, seed=s), False)
       for s in (1, 2)},
    **{f"noisy capacity σ 1 %, seed {s}": (DutModel(capacity_pps=1e6, capacity_jitter_ratio=0.01, seed=s), False)
       for s in (1, 2, 3)},
}

GOALS: dict[str, tuple[SearchGoal, ...]] = {
    "default (1 s trials, 21 s sum)": (SearchGoal("NDR", 0.0), SearchGoal("PDR", 0.005)),
    "3 s sum, PDR from 0.5 s": (SearchGoal("NDR", 0.0, 0.5, 0.005, 1, 1, 3),
                                SearchGoal("PDR", 0.005, 0.5, 0.01, 0.5, 1, 3)),
    "single 1 s trial": (SearchGoal("NDR", 0.0, 0.5, 0.005, 1, 1, 1), SearchGoal("PDR", 0.005, 0.5, 0.005, 1, 1, 1)),
    "demo (0.5 s, 1 s sum, 1 %)": (SearchGoal("NDR", 0.0, 0.5, 0.01, 0.5, 0.5, 1.0),
                                   SearchGoal("PDR", 0.005, 0.5, 0.01, 0.5, 0.5, 1.0)),
}


@dataclass(frozen=True)
class Row:
    dut: str
    goals: str
    defined: bool
    netrig: MlrResult
    reference: MlrResult

    def agrees(self) -> bool:
        """Every goal's conditional throughput within the goal width (of the larger upper bound)."""
        for a, b in zip(self.netrig.goals, self.reference.goals):
            if (a.conditional_throughput_pps is None) != (b.conditional_throughput_pps is None):
                return False
            if a.conditional_throughput_pps is None or b.conditional_throughput_pps is None:
                continue
            top = max(a.upper_bound_pps or a.lower_bound_pps or 0.0, b.upper_bound_pps or b.lower_bound_pps or 0.0)
            if abs(a.conditional_throughput_pps - b.conditional_throughput_pps) > a.goal.relative_width * top + 1:
                return False
        return True


def run(dut: str, goals: str) -> Row:
    model, defined = DUTS[dut]
    params = MlrParams(goals=GOALS[goals], min_rate_pct=0.1)
    ours = measure_mlrsearch(SimulatedMeasurer(model), FRAME, LINE_RATE, params)
    ref = measure_mlrsearch(SimulatedMeasurer(model), FRAME, LINE_RATE, replace(params, implementation="reference"))
    return Row(dut, goals, defined, ours, ref)


def rows() -> list[Row]:
    return [run(d, g) for g in GOALS for d in DUTS]


def _ct(r: MlrResult) -> str:
    return " / ".join("none" if g.conditional_throughput_pps is None else f"{g.conditional_throughput_pps / 1e3:,.1f}k"
                      for g in r.goals)


def table(rs: list[Row]) -> str:
    out = ["| DUT | goals | NDR / PDR netrig (fps) | NDR / PDR reference (fps) | trial-s netrig | trial-s reference |",
           "|---|---|---|---|---:|---:|"]
    for r in rs:
        mark = "" if r.agrees() else (" ²" if not r.defined else " ‼")
        out.append(f"| {r.dut} | {r.goals} | {_ct(r.netrig)}{mark} | {_ct(r.reference)} | "
                   f"{r.netrig.trial_duration_sum_s:g} | {r.reference.trial_duration_sum_s:g} |")
    a = sum(r.netrig.trial_duration_sum_s for r in rs)
    b = sum(r.reference.trial_duration_sum_s for r in rs)
    out.append(f"| **total** | | | | **{a:g}** | **{b:g}** |")
    return "\n".join(out)


class TruncatingMeasurer(SimulatedMeasurer):
    """Counts ``int(duration × load)`` frames as sent, as some measurers do."""

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        c = super().measure(load, duration_s)
        sent = int(load.rate_pps * duration_s)
        return replace(c, frames_sent=sent, frames_received=max(0, sent - c.frames_lost))



if __name__ == "__main__":
    print(table(rows()))
