"""What the stack methods (``tcp``, ``rr``) share: one stack trial per repetition (frame size
``stack``), and a presentation made of a table, a plot, and ratio rows against a baseline."""
from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from netrig.measure import CpuUsage, StackRequest
from netrig.measure.process import ProcessCpu
from netrig.methodology.method import Context, Method, Section
from netrig.view import fmt
from netrig.view.frame_results import FrameResults
from netrig.view.html import figure, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.plotkit import Plot
from netrig.view.run_view import RunView, Stat
from netrig.view.table import Table

E = TypeVar("E")


class StackResult(Protocol):
    """A stack method's repetition type: built from the trial's document, written as a dict."""

    @classmethod
    def of(cls, family: int, doc: dict) -> Any: ...

    def to_dict(self) -> dict: ...


#: A ratio row: (the entry's ``Stat``, label, how a value is shown).
RatioRow = tuple[Callable[[Any], "Stat | None"], str, Callable[[float], str]]


@dataclass(frozen=True)
class StackCost:
    """Busy CPU-seconds of every core over the trial, and per unit moved (``measure.stack.cpu_per``)."""

    busy_s: float | None = None
    busy_s_per_gbit: float | None = None
    busy_s_per_mtrans: float | None = None


@dataclass(frozen=True)
class StackRepetition:
    """What every stack repetition holds: the address family, the trial's length, the tool's own
    processes (``wait4``) and every core's CPU over the trial, and its cost per unit moved."""

    family: int
    duration_s: float | None = None
    processes: tuple[ProcessCpu, ...] = ()
    cpu: CpuUsage | None = None
    cpu_per: StackCost = field(default_factory=StackCost)
    simulated: bool = False

    @property
    def headline_pps(self) -> float | None:
        return None  # a stack trial offers no frames

    def stack_dict(self) -> dict:
        """The shared fields as stored (the processes with their ``total_s``)."""
        return {"family": self.family, "duration_s": self.duration_s,
                "processes": [{**dataclasses.asdict(p), "total_s": p.total_s} for p in self.processes],
                "cpu": None if self.cpu is None else self.cpu.to_dict(), "cpu_per": dataclasses.asdict(self.cpu_per),
                "simulated": self.simulated}


@dataclass(frozen=True)
class StackEntries(Generic[E]):
    """One configured stack method's repetitions (typed) and its summary ``stats`` as ``Stat``s."""

    reps: tuple[E, ...]
    stats: dict[str, Stat | None]

    @property
    def first(self) -> E | None:
        return self.reps[0] if self.reps else None

    def stat(self, key: str) -> Stat | None:
        return self.stats.get(key)


class StackMethod(Method):
    """Base of the stack methods: subclasses set ``stack_kind``, ``result_type``, ``section``, ``plot_type``,
    ``ratio_title`` and ``ratio_rows`` and define :meth:`entries` (one dict of ``Stat`` per configured
    method of this kind, with ``reps``: its repetitions) and :meth:`table`."""

    #: Its result class, built from ``(params.family, the trial's document)`` by its ``of``.
    result_type: ClassVar[type[StackResult]]
    section: ClassVar[Section]
    plot_type: ClassVar[Plot]
    ratio_title: ClassVar[str]
    ratio_rows: ClassVar[tuple[RatioRow, ...]]

    def run(self, params: Any, ctx: Context) -> Any:
        """One stack trial of ``stack_kind`` with the tool's parameters (``params.tool_params()``)."""
        assert self.stack_kind is not None
        doc = ctx.measurer.measure_stack(StackRequest(self.stack_kind, params.family, params.tool_params()))
        return self.result_type.of(params.family, doc)

    def result_class(self) -> type:
        return self.result_type

    def entries(self, run: RunView) -> list[StackEntries[Any]]:
        """Per configured method of this kind: its typed repetitions and its ``stats``."""
        out = []
        frs: list[FrameResults[Any]] = run.frame_results(self.name, typing.cast(type, self.result_type))
        for fr in frs:
            stats = {k: Stat.from_spread(v) for k, v in fr.stats.items()}
            out.append(StackEntries(fr.repetitions, stats))
        return out

    def table(self, run: RunView) -> Table:
        raise NotImplementedError

    def first(self, run: RunView) -> StackEntries[Any] | None:
        """The run's first method of this kind (``None`` without one)."""
        e = self.entries(run)
        return e[0] if e else None

    def top_rate_pct(self, params: object) -> float:
        return 0.0  # offers no frames: the self-test has nothing to prove for it

    def html(self, run: RunView) -> dict[str, str]:
        t = self.table(run)
        return {self.section.id: figure(self.plot_type, [run]) + table_html(t) + self.more_html(run)} if t else {}

    def more_html(self, run: RunView) -> str:
        """More of its report section after the table (default: nothing)."""
        return ""

    def compare_html(self, runs: Sequence[RunView]) -> dict[str, str]:
        f = figure(self.plot_type, runs)
        return {self.section.id: f} if f else {}

    def markdown(self, run: RunView) -> str:
        t = self.table(run)
        return section_md(self.section.title, table_md(t), "") if t else ""

    def ratio_table(self, runs: Sequence[RunView]) -> tuple[str, Table] | None:
        t = Table(["metric", f"{runs[0].name} (baseline)"] + [x for r in runs[1:] for x in (r.name, "% of baseline")])
        vals = [self.first(r) for r in runs]
        for get, label, show in self.ratio_rows:
            vs = [stat_value(get(e)) if e is not None else None for e in vals]
            if all(v is None for v in vs):
                continue
            row = [label, fmt.DASH if vs[0] is None else show(vs[0])]
            for v in vs[1:]:
                row += [fmt.DASH if v is None else show(v), fmt.ratio_pct(v, vs[0])]
            t.add(row)
        return (self.ratio_title, t) if t else None


def stat_value(s: Stat | None) -> float | None:
    """The median of a ``Stat``, ``None`` when absent."""
    return s.value if s is not None else None
