"""The measurer seam and its implementations: every method runs its trials through a
:class:`Measurer` (``seam``): the engine on real ports (``engine``), or a simulated DUT with known
behaviour (``simulator``)."""
from netrig.measure.seam import (
                                DutRing,
                                FlowTrial,
                                Interval,
                                IntervalSink,
                                LatencySummary,
                                Load,
                                Measurer,
                                Pacing,
                                Phase,
                                StackRequest,
                                TrialCounts,
                                TrialMonitor,
)
from netrig.measure.simulator import DutModel, SimulatedMeasurer

__all__ = ["DutRing", "FlowTrial", "Interval", "IntervalSink", "LatencySummary", "Load", "Measurer", "Pacing", "Phase",
           "StackRequest", "TrialCounts", "TrialMonitor", "DutModel", "SimulatedMeasurer"]
