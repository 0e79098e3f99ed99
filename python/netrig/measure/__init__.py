"""The measurer seam and its implementations: every method runs its trials through a
:class:`Measurer` (``seam``): the engine on real ports (``engine``), a simulated DUT with known
behaviour (``simulator``), or an OTG server on one host or many (``otg``). What a method needs from
the infrastructure (CPU accounting, the DUT monitor's samples, the DUT's conntrack table) comes
through here, as types."""
from netrig.measure.seam import (
    CompactSample,
    CpuUsage,
    DutRing,
    FlowTrial,
    Interval,
    IntervalSink,
    LatencySummary,
    Load,
    Mark,
    Measured,
    Measurer,
    MemInfo,
    MonitorResult,
    MonitorSample,
    Pacing,
    Phase,
    ProcSample,
    ProcUsage,
    StackRequest,
    TableCounts,
    TrialCounts,
    TrialMonitor,
    TupleCheck,
)
from netrig.measure.simulator import DutModel, SimulatedMeasurer

__all__ = ["DutRing", "FlowTrial", "Interval", "IntervalSink", "LatencySummary", "Load", "Measurer", "Pacing", "Phase",
           "StackRequest", "TrialCounts", "TrialMonitor", "DutModel", "SimulatedMeasurer", "Measured", "CpuUsage",
           "ProcUsage", "CompactSample", "Mark", "MemInfo", "MonitorResult", "MonitorSample", "ProcSample",
           "TableCounts", "TupleCheck"]
