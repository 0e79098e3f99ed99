"""The self-contained HTML report: inline CSS, inline SVG plots, no external URL of any kind.

``report_html(run)`` for one result, ``compare_html(runs)`` for several overlaid. The page is the
report's own sections (summary, monitoring, self-test, environment, trials) around every method's
sections, in registry order; each method draws its own (``Method.html`` / ``compare_html``).
Collapsibles are ``<details>`` elements, so the page needs no script. A Content-Security-Policy
forbids the page from loading anything at all.
"""
from __future__ import annotations

import json
from collections.abc import Sequence

from netrig.methods import REGISTRY
from netrig.report import plots, tables
from netrig.report.study_record import StudyRecord
from netrig.run import consistency
from netrig.view import fmt
from netrig.view.html import details, empty, esc, figure, kv_html, table_html
from netrig.view.run_view import RunView, frame_size_label
from netrig.view.stalls import StallStory
from netrig.view.table import Table
from netrig.view.trial_record import TrialRecord

#: At most this many per-trial monitoring timelines are drawn (the heaviest trial per method and
#: frame size first); the run-wide timeline always covers every trial.
MAX_TRIAL_TIMELINES = 8

CSS = """
:root{--fg:#1d1d1f;--muted:#666;--line:#d8d8d8;--accent:#0072B2;--bad:#b00020;--warn:#8a5a00;--bg2:#f6f7f9}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);\
background:#fff}
header{padding:22px 32px 12px;border-bottom:1px solid var(--line);background:var(--bg2)}
header h1{margin:0 0 4px;font-size:22px}
header p{margin:2px 0;color:var(--muted)}
nav{position:sticky;top:0;z-index:2;background:#fff;border-bottom:1px solid var(--line);padding:6px 32px;font-size:13px}
nav a{color:var(--accent);text-decoration:none;margin-right:14px;white-space:nowrap}
main{max-width:1180px;padding:8px 32px 40px}
section{margin-top:26px}
h2{font-size:18px;border-bottom:2px solid var(--accent);padding-bottom:3px;margin:0 0 10px}
h3{font-size:15px;margin:18px 0 6px}
p.note,p.empty{color:var(--muted)}
p.empty{font-style:italic}
figure{margin:10px 0 16px}
figure svg{max-width:100%;height:auto;display:block}
figcaption{color:var(--muted);font-size:12.5px;max-width:880px}
table{border-collapse:collapse;margin:6px 0 14px;font-size:12.5px;font-variant-numeric:tabular-nums}
caption{caption-side:bottom;text-align:left;color:var(--muted);font-size:12px;padding-top:3px}
th,td{border-bottom:1px solid var(--line);padding:3px 9px;text-align:right;vertical-align:top}
th{background:var(--bg2);font-weight:600;position:sticky;top:34px}
td:first-child,th:first-child{text-align:left}
td.l,th.l{text-align:left}
tr.flagged td{background:#fff1f1}
tr.lossy td{color:#7a4b00}
tr.invalid td{color:var(--bad);text-decoration:line-through}
tr.replayed td:first-child::after{content:" ↺";color:var(--muted)}
.kv td{text-align:left}.kv td:first-child{color:var(--muted);white-space:nowrap}
.warn{border-left:4px solid var(--bad);background:#fff4f4;padding:8px 12px;margin:10px 0}
.warn ul{margin:4px 0;padding-left:18px}
.badge{display:inline-block;font-size:11px;padding:0 6px;border-radius:9px;background:#eee;color:#333;margin-right:6px;\
font-family:ui-monospace,monospace}
.badge.bad{background:var(--bad);color:#fff}
.ok{color:#0a7d32;font-weight:600}.notok{color:var(--bad);font-weight:600}
details{margin:8px 0}
summary{cursor:pointer;color:var(--accent);font-weight:600}
pre{background:var(--bg2);padding:10px;overflow:auto;font-size:12px;max-height:480px}
.scroll{overflow:auto;max-height:640px}
footer{color:var(--muted);font-size:12px;padding:12px 32px;border-top:1px solid var(--line)}
@media print{nav{display:none}th{position:static}}
"""

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'unsafe-inline'"

#: Section ids every single-run report has, in page order: the summary, the methods' sections that
#: are shown even without data, then the run's. A method section not shown when empty appears
#: (in registry order) only when the run holds its data.
REPORT_SECTIONS = ("summary", *(s.id for s in REGISTRY.sections() if s.shown_when_empty), "monitoring", "platform",
                   "selftest",
                   "environment", "trials")
#: Section ids every comparison has, in page order.
COMPARE_SECTIONS = ("runs", "summary", "ratios", *(s.id for s in REGISTRY.sections() if s.shown_when_empty),
                    "selftest", "environment")

def section(sid: str, title: str, body: str) -> str:
    return f'<section id="{esc(sid)}"><h2>{esc(title)}</h2>{body}</section>'


def page(title: str, subtitle: list[str], sections: list[tuple[str, str, str]], footer: str) -> str:
    nav = "".join(f'<a href="#{esc(sid)}">{esc(t)}</a>' for sid, t, _ in sections)
    body = "".join(section(sid, t, b) for sid, t, b in sections)
    sub = "".join(f"<p>{s}</p>" for s in subtitle)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>\n"
        f"<body><header><h1>{esc(title)}</h1>{sub}</header>\n<nav>{nav}</nav>\n<main>\n{body}\n</main>\n"
        f"<footer>{footer}</footer></body></html>\n"
    )


# -- warnings -------------------------------------------------------------------------------------
def warnings_html(r: RunView, prefix: str = "") -> str:
    items = []
    for n in r.notes():
        bad = " bad" if n.bad else ""
        where = f" ({esc(n.where)})" if n.where != "run" else ""
        items.append(f'<span class="badge{bad}">{esc(n.code)}</span>{esc(prefix)}{esc(n.message)}{where}')
    if not items:
        return ""
    return '<div class="warn"><strong>Read these before the numbers</strong><ul>' + "".join(
        f"<li>{i}</li>" for i in items) + "</ul></div>"


# -- single report --------------------------------------------------------------------------------
def report_html(r: RunView, version: str = "") -> str:
    """The full HTML report of one result."""
    runs = [r]
    parts = [m.html(r) for m in REGISTRY]
    S: list[tuple[str, str, str]] = []

    dut = r.dut_line()
    body = (f"<p><b>DUT:</b> {esc(dut)}</p>" if dut is not None else "") + warnings_html(r)
    body += table_html(tables.summary_per_configuration(runs), left=4)
    body += "".join(p.get("summary", "") for p in parts)
    for a in consistency.answers(r.part_docs):
        if len(a.rows) < 3 and a.agree:
            continue
        body += (f"<h3>{len(a.rows)} answers at {esc(fmt.size(a.frame_label))}: how much does the DUT forward?</h3>"
                 + table_html(tables.answers_table(a), left=1) + f"<p>{esc(a.cause[:1].upper() + a.cause[1:])}.</p>")
    vt = tables.verdicts_table(r)
    if vt:
        body += "<h3>Pass / fail checks</h3>" + table_html(vt, left=3)
    S.append(("summary", "Summary", body))
    for sec in REGISTRY.sections():
        body = "".join(p.get(sec.id, "") for p in parts)
        if body or sec.shown_when_empty:
            S.append((sec.id, sec.title, body))
    if tables.user_event_trials(r):
        S.append(("events", "Events under load", table_html(tables.events_table(r), left=8)))
    S.append(("monitoring", "DUT monitoring timeline", _monitoring(r)))
    S.append(("platform", "The platform's stalls and latency over time", _platform(r)))
    S.append(("selftest", "Tester self-test and ceiling", _selftest(r, runs)))
    S.append(("environment", "Environment and configuration", _environment(r)))

    tt, sm = tables.trials_table(r), tables.smoothness_table(r)
    smooth = ("<h3>Offered-load smoothness per method</h3>" + table_html(sm, left=3)
              + '<p class="note">Measured in the tester\'s TX workers: the stretch is how much later than planned '
              "the last frame left (smooth pacing sends every frame, later, after a tester stall); the peak is "
              "the most frames in any 1 ms over the intended count; bunched trials (red) exceeded "
              "<code>trial.smoothness_tolerance_pct</code>.</p>") if sm else ""
    S.append(("trials", "Every trial",
              smooth + details(f"All {len(tt.rows)} trials (struck through: invalid; brown: lost frames; "
                               "red: bunched offered load)", f'<div class="scroll">{table_html(tt, left=3)}</div>')
              if tt else empty("No trials in this result.")))

    sub = [f"{esc(r.line_rate_label)} · {len(r.trials())} trials · started {esc(fmt.when(r.head.started_at))}"
           f" · netrig {esc(r.tool_version)}"]
    if r.complete is False:
        sub.append('<span class="notok">incomplete run</span>')
    return page(f"netrig report — {r.name}", sub, S, _footer([r], version))


def _pick_trials(r: RunView) -> list[int]:
    """The monitored trials to draw one by one: per (method, frame size) the highest load."""
    best: dict[tuple[str, str], tuple[float, int]] = {}
    for t in r.monitored_trials():
        k = (t.method, frame_size_label(t.frame_size))
        rate = t.load.rate_pps or 0.0
        if k not in best or rate > best[k][0]:
            best[k] = (rate, t.index)
    return sorted(i for _, i in best.values())[:MAX_TRIAL_TIMELINES]


def _monitoring(r: RunView) -> str:
    mon = r.monitored_trials()
    if not mon:
        return empty("No DUT monitoring samples in this result (monitoring off, or a simulated DUT).")
    out = figure(plots.timeline_plot, [r])
    picks = _pick_trials(r)
    figs = "".join(figure(plots.trial_timeline_plot, [r], prefix=f"tt{i}-", trial=i) for i in picks)
    note = f"{len(picks)} of {len(mon)} monitored trials: the highest load of each method and frame size."
    out += details(f"Per-trial timelines ({len(picks)})", f'<p class="note">{esc(note)}</p>{figs}')
    n_samples = sum(len(t.monitor_samples) for t in mon)
    out += f'<p class="note">{len(mon)} monitored trials, {n_samples} samples.</p>'
    return out


#: Latency timelines drawn at most: the trials that lost most, then those with a spike period.
MAX_LATENCY_TIMELINES = 4


def _pick_latency_trials(r: RunView) -> list[int]:
    """The trials whose latency over time to draw: the lossiest valid ones, then those whose
    spikes had a period, then the highest load; at most :data:`MAX_LATENCY_TIMELINES`."""
    recs = [t for t in r.trial_records() if t.counts is not None and t.counts.latency_timeline is not None]

    def rank(t: TrialRecord) -> tuple:
        c = t.counts
        assert c is not None and c.latency_timeline is not None
        return (-(c.frames_lost if t.valid else 0), c.latency_timeline.periodicity is None, -(t.load.rate_pps or 0))
    return sorted(t.index for t in sorted(recs, key=rank)[:MAX_LATENCY_TIMELINES])


def _platform(r: RunView) -> str:
    recs = [t.counts for t in r.trial_records() if t.counts is not None]
    story = StallStory.of(recs)
    if not story.measured:
        return empty(story.sentence()[0].upper() + story.sentence()[1:] + ".")
    picks = _pick_latency_trials(r)
    figs = "".join(figure(plots.latency_timeline_plot, [r], prefix=f"lt{i}-", trial=i) for i in picks)
    note = ("A stall is an episode in which a CPU did not run (its 1-ms tick came late: the host stopped the "
            "virtual CPU, which the guest's scheduler never sees) or a DUT task ready to run did not (the guest ran "
            "another task on its CPU). Lost frames in DUT stalls: those the DUT's receive ring dropped while a DUT "
            "stall longer than the ring's time at the trial's load was under way. Per trial in the trial table.")
    return (f"<p>{esc(story.sentence())}.</p>" + f'<p class="note">{esc(note)}</p>' + figs)


def _selftest(r: RunView, runs: Sequence[RunView]) -> str:
    st = r.selftest()
    if not st:
        return empty("No tester self-test in this result: nothing proves the tester was not the bottleneck.")
    head = (f'<p>Self-test on the <b>{esc(st.testbed_name)}</b> test bed, '
            f'{esc(st.factor_shown)} × the highest rate used, '
            f'{esc(st.duration_s if st.duration_s is not None else "?")} s per trial: '
            + ('<span class="ok">passed</span>' if st.passed else '<span class="notok">not passed</span>') + ". "
            "DUT results above the proven ceiling ÷ factor are flagged as tester-limited, not DUT results.</p>")
    return head + figure(plots.selftest_plot, runs) + (table_html(tables.selftest_table(r))
                                                       or empty("No per-size ceilings recorded."))


def _environment(r: RunView) -> str:
    out = kv_html(tables.run_facts(r))
    out += "<h3>Environment</h3>" + (kv_html(tables.key_value_table(r.environment))
                                     or empty("No environment recorded."))
    out += "<h3>Test bed</h3>" + (kv_html(tables.key_value_table(r.testbed))
                                  or empty("No test bed description recorded."))
    out += "<h3>Configuration</h3>" + (
        details("Normalised configuration (JSON)",
                f"<pre>{esc(json.dumps(r.config, indent=2, ensure_ascii=False))}</pre>",
                 open_=False) if r.config else empty("No configuration recorded."))
    return out


def _footer(runs: Sequence[RunView], version: str) -> str:
    files = ", ".join(esc(p) for r in runs for p in r.parts)
    return (f"Drawn by netrig {esc(version)} from {files} alone (nothing re-run). Self-contained: "
            "this page loads nothing from the network.")


# -- comparison -----------------------------------------------------------------------------------
def _study(runs: Sequence[RunView], study: StudyRecord) -> str:
    t = Table(["variant", "description", "state", "result"])
    descs = {v.name: v.description for v in study.source.variants}
    for v in study.variants:
        t.add([v.name, descs.get(v.name) or "", v.state,
               f"{v.dir}/result.json" if v.complete else (v.error or "not finished")])
    body = table_html(t, left=4)
    if study.sweep is not None:
        body += (figure(plots.sweep_plot, runs, study=study)
                 + table_html(tables.sweep_table(runs, study), left=1))
    body += figure(plots.study_plot, runs) + table_html(tables.study_table(runs), left=1)
    return body


def compare_html(runs: Sequence[RunView], version: str = "", study: StudyRecord | None = None) -> str:
    """Several results overlaid; the first is the baseline of every ratio. ``study`` (a study's
    ``study.json``) adds its section first: every variant against the baseline, table and chart."""
    S: list[tuple[str, str, str]] = []
    if study is not None:
        S.append(("study", f"Study: {study.heading}", _study(runs, study)))
    t = Table(["configuration", "file", "tool", "started", "line rate", "trials", "complete"])
    for i, r in enumerate(runs):
        t.add([r.name + (" (baseline)" if i == 0 else ""), str(r.path), f"netrig {r.tool_version}",
               fmt.when(r.head.started_at), r.line_rate_label, str(len(r.trials())),
               "yes" if r.complete else "NO"])
    warn = "".join(warnings_html(r, prefix=f"{r.name}: ") for r in runs)
    if (lw := tables.line_rate_warning(runs)) is not None:
        warn = (f'<div class="warn"><span class="badge bad">line-rates-differ</span>{esc(lw)}</div>') + warn
    S.append(("runs", "Results compared", table_html(t, left=2) + warn))
    S.append(("summary", "Summary per configuration", table_html(tables.summary_per_configuration(runs), left=4)))
    ratios = [rt for m in REGISTRY if (rt := m.ratio_table(runs)) is not None]
    body = (f'<p class="note">Each configuration as a percentage of the baseline, <b>{esc(runs[0].name)}</b>, '
            "per frame size (e.g. the cost of NAT or a firewall against plain routing).</p>")
    body += "".join(f"<h3>{esc(title)}</h3>{table_html(tb, left=2 if tb.header[1] in ('goal', 'statistic') else 1)}"
                    for title, tb in ratios) if ratios else empty("No result shared with the baseline to compare.")
    S.append(("ratios", "Ratios to the baseline", body))
    parts = [m.compare_html(runs) for m in REGISTRY]
    for sec in REGISTRY.sections():
        body = "".join(p.get(sec.id, "") for p in parts)
        if body or sec.shown_when_empty:
            S.append((sec.id, sec.compare_title or sec.title, body))
    S.append(("selftest", "Tester self-tests", figure(plots.selftest_plot, runs)
              or empty("No tester self-test in these results.")))
    diff = tables.environment_differences(runs)
    S.append(("environment", "What differs between the runs",
              table_html(diff) if diff else empty("Environment, test bed and configuration are identical.")))
    names = " vs ".join(r.name for r in runs)
    sub = [f"Baseline: <b>{esc(runs[0].name)}</b> ({esc(runs[0].path)}) · {len(runs)} results"]
    return page(f"netrig comparison — {names}", sub, S, _footer(runs, version))
