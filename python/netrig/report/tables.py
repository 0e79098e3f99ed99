"""The report's tables that are not any one method's: the summary per configuration, the
self-test, pass/fail checks, every trial, the run's facts and what differs between runs."""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from netrig.measure import Pacing, TrialCounts
from netrig.methodology.method import Capacity
from netrig.methodology.selftest import Ceiling, stored_ceilings
from netrig.methods import REGISTRY
from netrig.report.study_record import StudyRecord
from netrig.run import consistency
from netrig.view import fmt
from netrig.view.run_view import (
    RunView,
    frame_size_sort_key,
    obj,
)
from netrig.view.stalls import stall_note
from netrig.view.table import Table, flatten, key_value_table, plain
from netrig.view.trial_record import TrialRecord

__all__ = ["summary_per_configuration", "selftest_table", "verdicts_table", "trials_table", "smoothness_table",
           "not_counted", "run_facts", "environment_differences", "line_rate_warning", "key_value_table", "Table"]


def _ends(d: list[Capacity]) -> tuple[Capacity | None, Capacity | None]:
    """The entries of the smallest and the largest fixed frame size (mixes if nothing else)."""
    fixed = [x for x in d if frame_size_sort_key(x.frame_size)[0] == 0] or d
    if not fixed:
        return None, None
    return fixed[0], fixed[-1]


def summary_per_configuration(runs: Sequence[RunView]) -> Table:
    t = Table(["configuration", "DUT cores", "queues", "line rate",
               "smallest frame", "fps", "% line rate", "bit/s (L1)",
               "largest frame", "fps", "% line rate", "bit/s (L1)"],
              caption="RFC 2544 throughput (median of repetitions) at the smallest and largest frame size")
    for r in runs:
        lo, hi = _ends(REGISTRY.primary.capacity(r))
        row = [r.name, r.cores(), r.queues(), r.line_rate_label]
        for e in (lo, hi):
            if e is None:
                row += [fmt.DASH] * 4
            else:
                row += [fmt.size(e.frame_size), fmt.fps(e.rate.value),
                        fmt.pct(e.pct.value if e.pct else None), fmt.bps(e.l1_bps)]
        t.add(row)
    return t


def selftest_table(r: RunView) -> Table:
    ceilings = stored_ceilings(r)
    share = any(c.tester_share_ns is not None for c in ceilings)
    t = Table(["frame size", "required (1.1 × highest rate used)", "proven loss-free", "% line rate", "passed",
               "tester latency floor p50 / p99", "RX timestamps",
               *(["tester's receive path on the DUT's CPU, per frame"] if share else [])])
    for c in ceilings:
        floor, passed = c.latency_floor, _passed(c)
        t.add([fmt.size(c.frame.label), fmt.fps(c.required_rate_pps),
               fmt.not_measured(c.not_measured) if c.not_measured else
               f"≥ {fmt.fps(c.proven_rate_pps)}: {c.platform}" if c.platform else fmt.fps(c.proven_rate_pps),
               fmt.pct(r.pct_of_line_rate(c.frame.label, c.proven_rate_pps)), "yes" if passed else "NO",
               f"{fmt.ns(floor.p50_ns)} / {fmt.ns(floor.p99_ns)}" if floor else fmt.DASH,
               str(c.timestamp_source or fmt.DASH), *([fmt.ns(c.tester_share_ns)] if share else [])],
              "" if passed else "flagged")
    return t


def _passed(c: Ceiling) -> bool | None:
    """A stored ceiling passed (``None``: a partial one without both rates)."""
    if c.proven_rate_pps is None or c.required_rate_pps is None:
        return None
    return c.passed


def verdicts_table(r: RunView) -> Table:
    t = Table(["check", "method", "frame size", "threshold", "value", "result"])
    methods = r.methods()
    for v in r.verdicts():
        mi = v.method_index
        m = methods[mi] if isinstance(mi, int) and 0 <= mi < len(methods) else ""
        t.add([str(v.check if v.check is not None else ""), REGISTRY.label(m), fmt.size(v.frame_size),
               plain(v.threshold), plain(v.value), "pass" if v.passed else "FAIL"], "" if v.passed else "flagged")
    return t


def not_counted(counts: TrialCounts | None) -> str:
    """The frames a trial's receiver saw but did not count as the trial's, where there were any:
    ``"foreign 3 · stray 300 · forged 2"`` (empty when none)."""
    if counts is None:
        return ""
    parts = [f"{k} {fmt.count(n)}" for k, n in (("foreign", counts.foreign), ("stray", counts.stray),
                                                ("forged", counts.forged)) if n]
    return " · ".join(parts)


def _ratio(v: float | None) -> str:
    return fmt.DASH if v is None else f"{v:.2f}×"


def _lat(t: TrialRecord, key: str) -> float | None:
    return getattr(t.latency, key) if t.latency is not None else None


def trials_table(r: RunView) -> Table:
    """Every trial; the pacing columns: how much later than planned its last frame left (the
    stretch), its peak frame count in any 1 ms over the intended count, and the inter-departure
    gaps (p99 / longest). A bunched trial (peak above ``trial.smoothness_tolerance_pct``) is flagged.
    A stalls column (the platform's stalls and the loss in them) and a "not counted" column
    (foreign, stray, forged frames) when any trial had some."""
    header = ["#", "method", "frame size", "rep", "trial", "kind", "intended", "% line rate", "achieved",
              "duration", "sent", "received", "lost", "loss", "p50", "p99.9", "max", "stretch", "peak 1 ms",
              "gap p99 / max", "valid"]
    records = r.trial_records()
    stalls = [stall_note(tr.counts) if tr.counts is not None else "" for tr in records]
    extra = [not_counted(tr.counts) for tr in records]
    optional = [(name, col) for name, col in (("stalls (DUT, tester) and loss in them", stalls),
                                              ("not counted", extra)) if any(col)]
    header[-1:-1] = [name for name, _ in optional]
    t = Table(header)
    for i, tr in enumerate(records):
        c, pc = tr.counts, tr.pacing
        cls = "invalid" if not tr.valid else ("lossy" if c is not None and c.frames_lost > 0 else "")
        if pc is not None and pc.bunched:
            cls += " flagged"
        if tr.replayed:
            cls += " replayed"
        gaps = fmt.DASH if pc is None or pc.gap_max_ns is None else \
            f"{fmt.ns(pc.gap_p99_ns)} / {fmt.ns(pc.gap_max_ns)}"
        row = [str(tr.seq), REGISTRY.short_name(tr.method), fmt.size(tr.frame_size), plain(tr.repetition),
               plain(tr.trial_index), tr.kind, fmt.fps(tr.load.rate_pps), fmt.pct(tr.load.pct_line_rate, 2),
               fmt.fps(c.achieved_pps) if c else fmt.DASH, fmt.seconds(tr.load.duration_s), *_counted(c),
               fmt.ns(_lat(tr, "p50_ns")), fmt.ns(_lat(tr, "p999_ns")), fmt.ns(_lat(tr, "max_ns")),
               fmt.ns(1e9 * pc.stretch_s) if pc is not None else fmt.DASH,
               _ratio(pc.peak_ratio if pc is not None else None), gaps,
               "yes" if tr.valid else f"no: {(c.invalid_reason if c else None) or 'tester problem'}"]
        row[-1:-1] = [col[i] or fmt.DASH for _, col in optional]
        t.add(row, cls.strip())
    return t


def _counted(c: TrialCounts | None) -> list[str]:
    """The frames sent, received, lost, and the loss of a trial's counts."""
    if c is None:
        return [fmt.DASH] * 4
    return [fmt.count(c.frames_sent), fmt.count(c.frames_received), fmt.count(c.frames_lost),
            fmt.pct(100 * c.loss_ratio, 4)]


#: Rows of the events table at most (the first ones, in trial order; the trial log has them all).
MAX_EVENT_ROWS = 500


def user_event_trials(r: RunView) -> list[TrialRecord]:
    """The trials that ran user events (``trial.events``): those of methods that take events
    (``Method.event_trials``), with events in their counts. The reset method shows its own."""
    return [tr for tr in r.trial_records() if tr.method in REGISTRY
            and REGISTRY.get(tr.method).event_trials is not None and tr.events]


def events_table(r: RunView) -> Table:
    """Every user event of every trial: the command's exit, the flows it cut (of all), the longest
    outage of a flow (last frame received before to first after, by transmit time), the frames lost
    and the time from the command's start until forwarding was loss-free again."""
    t = Table(["#", "method", "frame size", "load", "% line rate", "command", "at", "ran", "flows cut", "outage",
               "frames lost", "recovery"])
    ms = lambda v: fmt.DASH if v is None else f"{v * 1000:.1f} ms"
    n = 0
    for tr in user_event_trials(r):
        for ev in tr.events:
            n += 1
            if n > MAX_EVENT_ROWS:
                continue
            run = ev.run
            ran = "ok" if run.ok else (run.error or ("timed out" if run.timed_out else f"exit {run.exit_status}"))
            outage = "never recovered" if not ev.recovered else ms(ev.outage_s)
            t.add([str(tr.seq), REGISTRY.short_name(tr.method), fmt.size(tr.frame_size), fmt.fps(tr.load.rate_pps),
                   fmt.pct(tr.load.pct_line_rate, 2), run.command, fmt.seconds(run.at_s), ran,
                   f"{len(ev.flows)} / {ev.flows_total}", outage, fmt.count(ev.frames_lost),
                   "never" if not ev.recovered else ms(ev.recovery_s)], "lossy" if ev.frames_lost > 0 else "")
    t.caption = ("times from the command's start; outage: the longest of any flow, from its sequence numbers and "
                 "transmit timestamps; recovery: until forwarding was loss-free for 0.1 s (resolution: the trial's "
                 "counting interval)")
    if n > MAX_EVENT_ROWS:
        t.caption += f"; the first {MAX_EVENT_ROWS} of {n} events (trials.ndjson has them all)"
    return t


def smoothness_table(r: RunView) -> Table:
    """Per method, how the tester sent its load: pacing mode, the largest stretch (and as a
    share of its trial), the worst 1 ms peak over the intended count, the worst gaps, and how many
    trials were bunched (empty when no trial recorded pacing, e.g. a simulated DUT)."""
    t = Table(["method", "trials", "pacing", "largest stretch", "worst peak 1 ms", "gap p99 (worst)",
               "longest gap", "bunched trials"])
    per: dict[str, list[tuple[TrialRecord, Pacing]]] = {}
    for tr in r.trial_records():
        if tr.pacing is not None:
            per.setdefault(tr.method, []).append((tr, tr.pacing))
    for method, rows in per.items():
        pcs = [pc for _, pc in rows]

        def worst(values: Sequence[float | None]) -> float | None:
            return max((v for v in values if v is not None), default=None)

        shares = [100 * pc.stretch_s / d for tr, pc in rows if (d := tr.load.duration_s)]
        stretch = worst([p.stretch_s for p in pcs])
        bunched = sum(1 for p in pcs if p.bunched)
        t.add([REGISTRY.label(method), fmt.count(len(rows)), ", ".join(sorted({p.mode for p in pcs})),
               fmt.DASH if stretch is None else f"{fmt.ns(1e9 * stretch)} ({max(shares, default=0.0):.2f} %)",
               _ratio(worst([p.peak_ratio for p in pcs])), fmt.ns(worst([p.gap_p99_ns for p in pcs])),
               fmt.ns(worst([p.gap_max_ns for p in pcs])), fmt.count(bunched)], "flagged" if bunched else "")
    return t


def run_facts(r: RunView) -> Table:
    doc = r.head
    t = Table(["", ""])
    rows = [
        ("configuration", r.name),
        ("result file", str(r.path)),
        ("tool", f"{doc.tool if doc.tool is not None else 'netrig'} "
                 f"{doc.tool_version if doc.tool_version is not None else '?'}"),
        ("command", plain(doc.command)),
        ("run id", plain(doc.run_id)),
        ("started", fmt.when(doc.started_at)),
        ("finished", fmt.when(doc.finished_at)),
        ("complete", "yes" if r.complete else f"NO — {doc.interrupted_reason or 'unfinished run'}"),
        ("line rate", r.line_rate_label),
        ("test bed", plain(r.bed.name)),
        ("methods", ", ".join(REGISTRY.label(m) for m in r.methods()) or fmt.DASH),
        ("frame sizes", ", ".join(fmt.size(e.frame_size) for e in doc.sizes) or fmt.DASH),
        ("trials", f"{len(r.trials())}"),
    ]
    if doc.resumed:
        rows.append(("resumed at", ", ".join(map(str, doc.resumed))))
    for k, v in rows:
        t.add([k, v])
    return t


#: What a test bed gets anew at every build (its id, MACs, its build time) and a moment's free memory:
#: not differences between the runs' set-ups.
_PER_BUILD_KEYS = frozenset({"id", "mac", "peer_mac", "address", "build_s", "MemAvailable", "MemFree"})
#: Lists in the kernel's order, which may change from build to build.
_UNORDERED_KEYS = frozenset({"neighbours", "routes", "addresses"})


def _set_up(v: Any, tb_id: str, key: str = "") -> Any:
    """``v`` without what every build of a test bed gets anew: the names made from its id read
    ``nr<id>-…``, per-build keys and IPv6 link-local addresses (made from the MACs) left out, the
    kernel's lists in one order."""
    if isinstance(v, dict):
        return {_set_up(k, tb_id): _set_up(x, tb_id, k) for k, x in v.items() if k not in _PER_BUILD_KEYS}
    if isinstance(v, list):
        out = [_set_up(x, tb_id) for x in v if not (isinstance(x, str) and x.startswith("fe80:"))]
        return sorted(out, key=lambda x: json.dumps(x, sort_keys=True)) if key in _UNORDERED_KEYS else out
    if isinstance(v, str) and tb_id:
        return re.sub(rf"\bnr{re.escape(tb_id)}-", "nr<id>-", v)
    return v


def environment_differences(runs: Sequence[RunView]) -> Table:
    """Environment, test bed, line rate and config keys whose set-up values differ between the runs
    (not the test bed's id, the names made from it or its MACs: every build differs in those)."""
    flat = []
    for r in runs:
        tb_id = str(r.bed.id or "")
        d = {f"environment.{k}": v for k, v in flatten(_set_up(r.environment, tb_id))}
        d.update({f"testbed.{k}": v for k, v in flatten(_set_up(r.testbed, tb_id))})
        d.update({f"line_rate.{k}": v for k, v in flatten(_set_up(obj(r.doc, "line_rate"), tb_id))})
        d.update({f"config.{k}": v for k, v in flatten(_set_up(r.config, tb_id))})
        flat.append(d)
    keys: list[str] = []
    for d in flat:
        for k in d:
            if k not in keys:
                keys.append(k)
    t = Table(["key"] + [r.name for r in runs])
    for k in keys:
        vals = [d.get(k, fmt.DASH) for d in flat]
        if len(set(vals)) > 1:
            t.add([k] + vals)
    return t


def line_rate_warning(runs: Sequence[RunView]) -> str | None:
    """A warning when the runs' line rates differ (None when they agree): every percentage of line rate
    is then a different rate in each run."""
    if len({r.speed_bps for r in runs}) < 2:
        return None
    rates = "; ".join(f"{r.name}: {r.line_rate_label}" for r in runs)
    return (f"line rates differ ({rates}): a percentage of line rate is a different rate in each run; "
            "compare frames/s")


def study_values(runs: Sequence[RunView]) -> tuple[list[str], dict[str, bool], list[dict[str, float | None]]]:
    """``(metrics in order, metric → higher is better, per run metric → value)`` from every method's
    ``compare_values``."""
    order: list[str] = []
    better: dict[str, bool] = {}
    values: list[dict[str, float | None]] = []
    for r in runs:
        vals: dict[str, float | None] = {}
        for m in REGISTRY:
            for label, (v, hib) in m.compare_values(r).items():
                if label not in better:
                    order.append(label)
                    better[label] = hib
                vals[label] = v
        values.append(vals)
    return order, better, values


def study_table(runs: Sequence[RunView]) -> Table:
    """Each variant's headline numbers as % of the baseline's (``runs[0]``); CPU rows: lower is better."""
    order, better, values = study_values(runs)
    t = Table(["metric", f"{runs[0].name} (baseline)", *(r.name for r in runs[1:])],
              caption="each variant as % of the baseline (the baseline's own value in its column); "
                      "↑ higher is better, ↓ lower is better")
    for label in order:
        base = values[0].get(label)
        row = [f"{label} {'↑' if better[label] else '↓'}", _plain_value(label, base)]
        for vals in values[1:]:
            v = vals.get(label)
            row.append(fmt.ratio_pct(v, base) if base else _plain_value(label, v))
        t.add(row)
    return t


def _plain_value(label: str, v: float | None) -> str:
    if v is None:
        return fmt.DASH
    if label.startswith("CPU"):
        return f"{v:.3g}"
    if "goodput" in label:
        return f"{v / 1e9:.2f} Gbit/s"
    if "throughput" in label:
        return fmt.fps(v)
    if label.startswith("transactions"):
        return f"{v:,.0f}/s"
    if label.startswith("RTT"):
        return f"{v:.1f} µs"
    return f"{v:.3g}"


def sweep_points(runs: Sequence[RunView], study: StudyRecord) -> list[tuple[Any, RunView]]:
    """``(swept value, run)`` of every finished point of a sweep study, in sweep order."""
    values = study.sweep.values if study.sweep is not None else ()
    names = [v.name for v in study.source.variants]
    by_name = {r.name: r for r in runs}
    return [(v, by_name[n]) for n, v in zip(names, values) if n in by_name]


def sweep_table(runs: Sequence[RunView], study: StudyRecord) -> Table:
    """One row per swept value: every headline number, and its scale-up ratio against the step
    before (methodology §6: the scale-up per step)."""
    sweep = study.sweep
    points = sweep_points(runs, study)
    order, better, values = study_values([r for _, r in points])
    metrics = [m for m in order if any(v.get(m) for v in values)]
    cols = [sweep.label if sweep is not None else "value"]
    for m in metrics:
        cols += [f"{m} {'↑' if better[m] else '↓'}", "× step"]
    key = sweep.key if sweep is not None else None
    t = Table(cols, caption=f"{key} swept; × step: each value over the one of the step before")
    for i, ((v, _), vals) in enumerate(zip(points, values)):
        row = [str(v)]
        for m in metrics:
            cur, prev = vals.get(m), values[i - 1].get(m) if i else None
            row += [_plain_value(m, cur), f"{cur / prev:.2f}×" if cur is not None and prev else fmt.DASH]
        t.add(row)
    return t


def answers_table(a: consistency.AnswerSet) -> Table:
    """The answers at one frame size side by side: each rate (median over its repetitions and
    their range; a repetition the tester bounded is a lower bound, shown apart as ``≥``), the
    bracket it saw, and how it decides (``a.cause`` says why they differ)."""
    t = Table(["answer", "rate", "range over repetitions", "passed / DUT failed at", "how it decides"])
    for row in a.rows:
        n = len(row.values)
        spread = f"{fmt.fps(min(row.values))}–{fmt.fps(max(row.values))} ({n})" if n > 1 else f"{n} repetition"
        if row.at_least:  # the tester's lower bounds: out of the median and the range
            spread = (spread + "; " if n else "") + ", ".join(f"≥ {fmt.fps(v)}" for v in row.at_least) + \
                " (tester-limited: a lower bound)"
        t.add([row.name, f"{'' if row.bounded else '≥ '}{fmt.fps(row.median)}", spread,
               f"{fmt.fps(row.lower_pps)} / {fmt.fps(row.upper_pps) if row.upper_pps else 'none'}", row.basis])
    return t
