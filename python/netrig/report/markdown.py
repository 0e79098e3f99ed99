"""The Markdown summary written beside the HTML report (tables only, no plots)."""
from __future__ import annotations

from typing import Sequence

from netrig.report import fmt, tables
from netrig.report.run_view import RunView
from netrig.report.tables import Table


def md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def table_md(t: Table) -> str:
    if not t:
        return ""
    lines = ["| " + " | ".join(md_escape(h) for h in t.header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(t.header))) + "|"]
    lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in t.rows]
    if t.caption:
        lines.append(f"\n*{t.caption}*")
    return "\n".join(lines) + "\n"


def _sec(title: str, body: str, none: str) -> str:
    return f"## {title}\n\n{body or none}\n"


def _warnings(r: RunView, prefix: str = "") -> list[str]:
    out = []
    if r.complete is False:
        out.append(f"- **incomplete**: {prefix}{r.doc.get('interrupted_reason') or 'the run did not finish'}")
    st = r.selftest()
    if not st:
        out.append(f"- **no self-test**: {prefix}nothing proves the tester was not the bottleneck")
    elif st.get("passed") is False:
        out.append(f"- **self-test failed**: {prefix}results above the tester's proven ceiling are flagged")
    for f in r.flags():
        where = f" ({f['where']})" if f["where"] != "run" else ""
        out.append(f"- `{f['code']}`: {prefix}{f['message']}{where}")
    return out


def report_markdown(r: RunView, html_name: str = "") -> str:
    doc = r.doc
    parts = [f"# netrig report — {r.name}\n",
             f"{r.line_rate_label} · {len(r.trials())} trials · started {fmt.when(doc.get('started_at'))} · "
             f"netrig {doc.get('tool_version', '?')}" + (f" · plots: `{html_name}`" if html_name else "") + "\n"]
    w = _warnings(r)
    if w:
        parts.append("**Read these before the numbers:**\n\n" + "\n".join(w) + "\n")
    parts.append(_sec("Summary", table_md(tables.summary_per_configuration([r])), ""))
    parts.append(_sec("Throughput per frame size", table_md(tables.throughput_table(r)), "No RFC 2544 throughput in this result."))
    parts.append(_sec("Frame loss rate (forwarded vs offered)", table_md(tables.frame_loss_table(r)),
                      "No RFC 2544 frame loss sweep in this result."))
    parts.append(_sec("Latency at the throughput rate", table_md(tables.latency_table(r)),
                      "No RFC 2544 latency measurement in this result."))
    parts.append(_sec("NDR / PDR (MLRsearch)", table_md(tables.ndr_pdr_table(r)), "No MLRsearch in this result."))
    for title, t in (("Back-to-back", tables.back_to_back_table(r)), ("System recovery", tables.recovery_table(r)),
                     ("Reset", tables.reset_table(r)), ("Fixed rate (iperf-like)", tables.iperf_table(r))):
        if t:
            parts.append(_sec(title, table_md(t), ""))
    st = r.selftest()
    parts.append(_sec("Tester self-test",
                      (f"{'Passed' if st.get('passed') else 'NOT passed'} on `{st.get('testbed', 'loopback')}`, "
                       f"factor {st.get('factor', 1.1)}.\n\n" + table_md(tables.selftest_table(r))) if st else "",
                      "No tester self-test in this result."))
    vt = tables.verdicts_table(r)
    if vt:
        parts.append(_sec("Pass / fail checks", table_md(vt), ""))
    facts = tables.run_facts(r)
    parts.append(_sec("Run", table_md(Table(["", ""], facts.rows, facts.row_class)), ""))
    env = tables.key_value_table(r.environment)
    parts.append(_sec("Environment", table_md(env), "No environment recorded."))
    return "\n".join(parts)


def compare_markdown(runs: Sequence[RunView], html_name: str = "") -> str:
    parts = [f"# netrig comparison — {' vs '.join(r.name for r in runs)}\n",
             f"Baseline: **{runs[0].name}** (`{runs[0].path}`)" + (f" · plots: `{html_name}`" if html_name else "") + "\n"]
    w = [x for r in runs for x in _warnings(r, prefix=f"{r.name}: ")]
    if w:
        parts.append("**Read these before the numbers:**\n\n" + "\n".join(w) + "\n")
    parts.append(_sec("Summary per configuration", table_md(tables.summary_per_configuration(runs)), ""))
    for title, t in tables.ratio_tables(runs):
        parts.append(_sec(f"{title}: % of baseline", table_md(t), ""))
    diff = tables.environment_differences(runs)
    parts.append(_sec("What differs between the runs", table_md(diff), "Nothing: environment and configuration are identical."))
    return "\n".join(parts)
