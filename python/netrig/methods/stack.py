"""What the stack methods (``tcp``, ``rr``) share: one stack trial per repetition (frame size
``stack``), and a presentation made of a table, a plot, and ratio rows against a baseline."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from netrig.measure import StackRequest
from netrig.methodology.method import Context, Method, Section
from netrig.view import fmt
from netrig.view.html import figure, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.plotkit import Plot
from netrig.view.run_view import RunView, Stat
from netrig.view.table import Table

#: A ratio row: (entry key of a ``Stat``, label, how a value is shown).
RatioRow = tuple[str, str, Callable[[float], str]]


class StackMethod(Method):
    """Base of the stack methods: subclasses set ``stack_kind``, ``result_type``, ``section``, ``plot_type``,
    ``ratio_title`` and ``ratio_rows`` and define :meth:`entries` (one dict of ``Stat`` per configured
    method of this kind, with ``reps``: its repetitions) and :meth:`table`."""

    #: Its result class, built from ``(params.family, the trial's document)``.
    result_type: ClassVar[type]
    section: ClassVar[Section]
    plot_type: ClassVar[Plot]
    ratio_title: ClassVar[str]
    ratio_rows: ClassVar[tuple[RatioRow, ...]]

    def run(self, params: Any, ctx: Context) -> Any:
        """One stack trial of ``stack_kind`` with the tool's parameters (``params.tool_params()``)."""
        assert self.stack_kind is not None
        doc = ctx.measurer.measure_stack(StackRequest(self.stack_kind, params.family, params.tool_params()))
        return self.result_type(params.family, doc)

    def entries(self, run: RunView) -> list[dict]:
        raise NotImplementedError

    def table(self, run: RunView) -> Table:
        raise NotImplementedError

    def first(self, run: RunView) -> dict | None:
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
        for key, label, show in self.ratio_rows:
            vs = [stat_value(e, key) for e in vals]
            if all(v is None for v in vs):
                continue
            row = [label, fmt.DASH if vs[0] is None else show(vs[0])]
            for v in vs[1:]:
                row += [fmt.DASH if v is None else show(v), fmt.ratio_pct(v, vs[0])]
            t.add(row)
        return (self.ratio_title, t) if t else None


def stat_value(entry: dict | None, key: str) -> float | None:
    """The median of ``entry[key]`` (a ``Stat``), ``None`` when absent."""
    s: Stat | None = entry.get(key) if entry is not None else None
    return s.value if s is not None else None
