"""The Markdown summary written beside the HTML report (tables only, no plots): the run's own
parts around every method's (``Method.markdown``), in registry order."""
from __future__ import annotations

from collections.abc import Sequence

from netrig.methods import REGISTRY
from netrig.report import tables
from netrig.view import fmt
from netrig.view.markdown import section_md as _sec
from netrig.view.markdown import table_md
from netrig.view.run_view import RunView
from netrig.view.table import Table


def _warnings(r: RunView, prefix: str = "") -> list[str]:
    out = []
    for n in r.notes():
        where = f" ({n.where})" if n.where != "run" else ""
        code = f"**{n.code}**" if n.bad else f"`{n.code}`"
        out.append(f"- {code}: {prefix}{n.message}{where}")
    return out


def report_markdown(r: RunView, html_name: str = "") -> str:
    doc = r.head
    parts = [f"# netrig report — {r.name}\n",
             f"{r.line_rate_label} · {len(r.trials())} trials · started {fmt.when(doc.started_at)} · "
             f"netrig {r.tool_version}" + (f" · plots: `{html_name}`" if html_name else "") + "\n"]
    if (dut := r.dut_line()) is not None:
        parts.append(f"DUT: {dut}\n")
    w = _warnings(r)
    if w:
        parts.append("**Read these before the numbers:**\n\n" + "\n".join(w) + "\n")
    parts.append(_sec("Summary", table_md(tables.summary_per_configuration([r])), ""))
    parts += [md for m in REGISTRY if (md := m.markdown(r))]
    if tables.user_event_trials(r):
        parts.append(_sec("Events under load", table_md(tables.events_table(r)), ""))
    st = r.selftest()
    parts.append(_sec("Tester self-test",
                      (f"{'Passed' if st.passed else 'NOT passed'} on `{st.testbed_name}`, "
                       f"factor {st.factor_shown}.\n\n" + table_md(tables.selftest_table(r))) if st else "",
                      "No tester self-test in this result."))
    vt = tables.verdicts_table(r)
    if vt:
        parts.append(_sec("Pass / fail checks", table_md(vt), ""))
    sm = tables.smoothness_table(r)
    if sm:
        parts.append(_sec("Offered-load smoothness", table_md(sm), ""))
    facts = tables.run_facts(r)
    parts.append(_sec("Run", table_md(Table(["", ""], facts.rows, facts.row_class)), ""))
    env = tables.key_value_table(r.environment)
    parts.append(_sec("Environment", table_md(env), "No environment recorded."))
    return "\n".join(parts)


def compare_markdown(runs: Sequence[RunView], html_name: str = "") -> str:
    parts = [f"# netrig comparison — {' vs '.join(r.name for r in runs)}\n",
             f"Baseline: **{runs[0].name}** (`{runs[0].path}`)" + (f" · plots: `{html_name}`" if html_name else "")
             + "\n"]
    w = [x for r in runs for x in _warnings(r, prefix=f"{r.name}: ")]
    if (lw := tables.line_rate_warning(runs)) is not None:
        w.insert(0, f"- **line-rates-differ**: {lw}")
    if w:
        parts.append("**Read these before the numbers:**\n\n" + "\n".join(w) + "\n")
    parts.append(_sec("Summary per configuration", table_md(tables.summary_per_configuration(runs)), ""))
    for title, table in (rt for m in REGISTRY if (rt := m.ratio_table(runs)) is not None):
        parts.append(_sec(f"{title}: % of baseline", table_md(table), ""))
    diff = tables.environment_differences(runs)
    parts.append(_sec("What differs between the runs", table_md(diff),
                      "Nothing: environment and configuration are identical."))
    return "\n".join(parts)
