"""The report's tables as plain data (header + rows of strings), shared by HTML and Markdown."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from netrig.report import fmt
from netrig.report.run_view import (
    METHOD_LABELS,
    RunView,
    Stat,
    frame_size_label,
    frame_size_sort_key,
    num,
    obj,
    objs,
    trial_latency,
)


@dataclass
class Table:
    """A table: ``header`` (column titles), ``rows`` (cells as text), optional per-row CSS class."""

    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    row_class: list[str] = field(default_factory=list)
    caption: str = ""

    def add(self, row: Sequence[Any], cls: str = "") -> None:
        self.rows.append([str(c) for c in row])
        self.row_class.append(cls)

    def __bool__(self) -> bool:
        return bool(self.rows)


def _ends(d: list[dict]) -> tuple[dict | None, dict | None]:
    """The entries of the smallest and the largest fixed frame size (mixes if nothing else)."""
    fixed = [x for x in d if frame_size_sort_key(x["frame_size"])[0] == 0] or d
    if not fixed:
        return None, None
    return fixed[0], fixed[-1]


def summary_per_configuration(runs: Sequence[RunView]) -> Table:
    t = Table(["configuration", "DUT cores", "queues", "line rate",
               "smallest frame", "fps", "% line rate", "bit/s (L1)",
               "largest frame", "fps", "% line rate", "bit/s (L1)"],
              caption="RFC 2544 throughput (median of repetitions) at the smallest and largest frame size")
    for r in runs:
        lo, hi = _ends(r.throughput())
        row = [r.name, r.cores(), r.queues(), r.line_rate_label]
        for e in (lo, hi):
            if e is None:
                row += [fmt.DASH] * 4
            else:
                row += [fmt.size(e["frame_size"]), fmt.fps(e["rate"].value),
                        fmt.pct(e["pct"].value if e["pct"] else None), fmt.bps(e["l1_bps"])]
        t.add(row)
    return t


def throughput_table(r: RunView) -> Table:
    t = Table(["frame size", "throughput (median, min–max)", "% line rate", "bit/s (L1)", "bit/s (L2)",
               "line rate", "tester proven", "repetitions", "flags"])
    for e in r.throughput():
        flags = ", ".join(sorted({str(f.get("code", "")) for f in e["flags"]} - {"nominal_line_rate", "short_trials"}))
        t.add([fmt.size(e["frame_size"]), fmt.fps_stat(e["rate"]), fmt.pct(e["pct"].value if e["pct"] else None),
               fmt.bps(e["l1_bps"]), fmt.bps(e["l2_bps"]), fmt.fps(r.line_rate_pps(e["frame_size"])),
               fmt.fps(e["ceiling_pps"]), str(e["repetitions"] or fmt.DASH), flags or ""],
              "flagged" if e["above_ceiling"] else "")
    return t


def frame_loss_table(r: RunView) -> Table:
    t = Table(["frame size", "max loss-free rate", "% line rate", "peak forwarded", "forwarding collapses",
               "at 100 % offered: forwarded", "loss"])
    for f in r.frame_loss():
        size = f["frame_size"]
        mlf = f["max_lossfree"]
        peak = max(f["points"], key=lambda p: p["forwarded"].value)
        topp = f["points"][-1]
        col = f["collapse"]
        t.add([fmt.size(size), fmt.fps_stat(mlf), fmt.pct(r.pct_of_line_rate(size, mlf.value) if mlf else None),
               fmt.fps(peak["forwarded"].value),
               f"above {fmt.fps(col['offered_pps'])} offered" if col else ("livelock" if f["livelock"] else "no"),
               fmt.fps(topp["forwarded"].value), fmt.pct(topp["loss_pct"].value, 2)])
    return t


def frame_loss_points(r: RunView) -> Table:
    t = Table(["frame size", "offered", "% line rate", "forwarded (median, min–max)", "loss"])
    for f in r.frame_loss():
        for p in reversed(f["points"]):
            t.add([fmt.size(f["frame_size"]), fmt.fps(p["offered_pps"]), fmt.pct(p["offered_pct"]),
                   fmt.fps_stat(p["forwarded"]), fmt.pct(p["loss_pct"].value, 3)],
                  "lossy" if p["loss_pct"].value > 0 else "")
    return t


LAT_COLS = (("min", "min"), ("p50", "median (typical)"), ("p90", "p90"), ("p99", "p99"),
            ("p99.9", "p99.9 (worst case)"), ("max", "max"), ("PDV", "PDV"), ("IPDV", "IPDV"))


def latency_table(r: RunView) -> Table:
    t = Table(["frame size", "at rate"] + [c for _, c in LAT_COLS],
              caption="median of repetitions (min–max of repetitions)")
    for e in r.latency():
        t.add([fmt.size(e["frame_size"]), fmt.fps(e["rate_pps"])] + [fmt.ns_stat(e["pcts"].get(k)) for k, _ in LAT_COLS])
    return t


def ndr_pdr_table(r: RunView) -> Table:
    t = Table(["frame size", "goal", "loss ratio", "conditional throughput", "% line rate", "bit/s (L1)",
               "lower bound", "upper bound", "relative width"])
    for e in r.ndr_pdr():
        for g in e["goals"]:
            ct: Stat | None = g["conditional"]
            v = ct.value if ct else g["lower_pps"]
            t.add([fmt.size(e["frame_size"]), g["name"], fmt.DASH if g["loss_ratio"] is None else f"{g['loss_ratio']:g}",
                   fmt.fps_stat(ct) if ct else fmt.fps(v), fmt.pct(r.pct_of_line_rate(e["frame_size"], v)),
                   fmt.bps(r.bps(e["frame_size"], v)), fmt.fps(g["lower_pps"]),
                   fmt.fps(g["upper_pps"]) if g["upper_pps"] is not None else "none (max rate loss-free)",
                   fmt.pct(100 * g["relative_width"], 2) if g["relative_width"] is not None else fmt.DASH])
    return t


def back_to_back_table(r: RunView) -> Table:
    t = Table(["frame size", "mean burst (frames)", "bursts (min–max)", "stdev", "implied buffer time",
               "corrected buffer time (RFC 9004)", "max burst reached"])
    for e in r.method_results("rfc2544_back_to_back"):
        reps = objs(e, "repetitions")
        bursts = [b for x in reps for b in (x.get("bursts_frames") or []) if isinstance(b, (int, float))]
        mb = Stat.from_stats(obj(e, "stats").get("mean_burst_frames")) or Stat.over(num(x, "mean_burst_frames") for x in reps)
        t.add([fmt.size(e.get("frame_size")), fmt.count(mb.value if mb else None),
               f"{min(bursts):,.0f}–{max(bursts):,.0f}" if bursts else fmt.DASH,
               fmt.count(Stat.over(num(x, "stdev_burst_frames") for x in reps).value
                         if Stat.over(num(x, "stdev_burst_frames") for x in reps) else None),
               fmt.seconds(_med(reps, "implied_buffer_time_s")), fmt.seconds(_med(reps, "corrected_buffer_time_s")),
               "yes" if any(x.get("max_burst_reached") for x in reps) else "no"])
    return t


def recovery_table(r: RunView) -> Table:
    t = Table(["frame size", "throughput", "overload", "recovery load", "recovery time", "recovered"])
    for e in r.method_results("rfc2544_system_recovery"):
        reps = objs(e, "repetitions")
        rt = Stat.from_stats(obj(e, "stats").get("recovery_time_s")) or Stat.over(num(x, "recovery_time_s") for x in reps)
        t.add([fmt.size(e.get("frame_size")), fmt.fps(_med(reps, "throughput_pps")), fmt.fps(_med(reps, "overload_pps")),
               fmt.fps(_med(reps, "recovery_pps")),
               (fmt.seconds(rt.value) + (f" ({fmt.seconds(rt.lo)}–{fmt.seconds(rt.hi)})" if rt.spread else "")) if rt else "never",
               "yes" if reps and all(x.get("recovered") for x in reps) else "no"])
    return t


def reset_table(r: RunView) -> Table:
    t = Table(["frame size", "reset time", "frames lost", "rate"])
    for e in r.method_results("rfc2544_reset"):
        reps = objs(e, "repetitions")
        t.add([fmt.size(e.get("frame_size")), fmt.seconds(_med(reps, "reset_time_s")), fmt.count(_med(reps, "frames_lost")),
               fmt.fps(_med(reps, "rate_pps"))])
    return t


def iperf_table(r: RunView) -> Table:
    t = Table(["frame size", "offered", "received (median, min–max)", "% line rate", "bit/s (L1)", "loss"])
    for e in r.iperf():
        rec = e["received"]
        t.add([fmt.size(e["frame_size"]), fmt.fps(e["offered_pps"].value if e["offered_pps"] else None), fmt.fps_stat(rec),
               fmt.pct(r.pct_of_line_rate(e["frame_size"], rec.value) if rec else None),
               fmt.bps(r.bps(e["frame_size"], rec.value) if rec else None),
               fmt.pct(100 * e["loss_ratio"].value, 3) if e["loss_ratio"] else fmt.DASH])
    return t


def selftest_table(r: RunView) -> Table:
    t = Table(["frame size", "required (1.1 × highest rate used)", "proven loss-free", "% line rate", "passed",
               "tester latency floor p50 / p99", "RX timestamps"])
    for c in r.selftest_ceilings():
        size = c.get("frame_size")
        proven = num(c, "proven_rate_pps")
        floor = obj(c, "latency_floor")
        t.add([fmt.size(size), fmt.fps(num(c, "required_rate_pps")), fmt.fps(proven),
               fmt.pct(r.pct_of_line_rate(size, proven)), "yes" if c.get("passed") else "NO",
               f"{fmt.ns(num(floor, 'p50_ns'))} / {fmt.ns(num(floor, 'p99_ns'))}" if floor else fmt.DASH,
               str(c.get("timestamp_source") or fmt.DASH)],
              "" if c.get("passed") else "flagged")
    return t


def verdicts_table(r: RunView) -> Table:
    t = Table(["check", "method", "frame size", "threshold", "value", "result"])
    methods = r.methods()
    for v in r.verdicts():
        mi = v.get("method_index")
        m = methods[mi] if isinstance(mi, int) and 0 <= mi < len(methods) else ""
        t.add([str(v.get("check", "")), METHOD_LABELS.get(m, m), fmt.size(v.get("frame_size")),
               _plain(v.get("threshold")), _plain(v.get("value")), "pass" if v.get("passed") else "FAIL"],
              "" if v.get("passed") else "flagged")
    return t


def trials_table(r: RunView) -> Table:
    t = Table(["#", "method", "frame size", "rep", "trial", "kind", "intended", "% line rate", "achieved",
               "duration", "sent", "received", "lost", "loss", "p50", "p99.9", "max", "valid"])
    for i, tr in enumerate(r.trials()):
        c = obj(tr, "counts")
        load = obj(tr, "load")
        lat = trial_latency(tr)
        valid = c.get("valid", True) is not False
        lost = num(c, "frames_lost")
        loss = num(c, "loss_ratio")
        cls = "invalid" if not valid else ("lossy" if (lost or 0) > 0 else "")
        if tr.get("replayed"):
            cls += " replayed"
        t.add([str(tr.get("seq", i)), str(tr.get("method", "")).replace("rfc2544_", ""), fmt.size(tr.get("frame_size")),
               _plain(tr.get("repetition")), _plain(tr.get("trial_index")), str(tr.get("kind", "")),
               fmt.fps(num(load, "rate_pps")), fmt.pct(num(load, "pct_line_rate"), 2), fmt.fps(num(c, "offered_pps")),
               fmt.seconds(num(load, "duration_s")), fmt.count(num(c, "frames_sent")), fmt.count(num(c, "frames_received")),
               fmt.count(lost), fmt.pct(100 * loss if loss is not None else None, 4),
               fmt.ns(num(lat, "p50_ns")), fmt.ns(num(lat, "p999_ns")), fmt.ns(num(lat, "max_ns")),
               "yes" if valid else f"no: {c.get('invalid_reason') or 'tester problem'}"], cls.strip())
    return t


def flatten(d: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested objects as ``("a.b.c", value)`` rows; lists of scalars joined, other lists as JSON."""
    out: list[tuple[str, str]] = []
    if isinstance(d, dict):
        for k, v in d.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict) and v:
                out += flatten(v, key)
            else:
                out.append((key, _plain(v)))
    else:
        out.append((prefix, _plain(d)))
    return out


def key_value_table(d: dict) -> Table:
    t = Table(["key", "value"])
    for k, v in flatten(d):
        t.add([k, v])
    return t


def run_facts(r: RunView) -> Table:
    doc = r.doc
    t = Table(["", ""])
    rows = [
        ("configuration", r.name),
        ("result file", str(r.path)),
        ("tool", f"{doc.get('tool', 'netrig')} {doc.get('tool_version', '?')}"),
        ("command", _plain(doc.get("command"))),
        ("run id", _plain(doc.get("run_id"))),
        ("started", fmt.when(doc.get("started_at"))),
        ("finished", fmt.when(doc.get("finished_at"))),
        ("complete", "yes" if r.complete else f"NO — {doc.get('interrupted_reason') or 'unfinished run'}"),
        ("line rate", r.line_rate_label),
        ("test bed", _plain(r.testbed.get("name"))),
        ("methods", ", ".join(METHOD_LABELS.get(m, m) for m in r.methods()) or fmt.DASH),
        ("frame sizes", ", ".join(fmt.size(e.get("frame_size")) for e in objs(doc, "frame_sizes")) or fmt.DASH),
        ("trials", f"{len(r.trials())}"),
    ]
    if doc.get("resumed"):
        rows.append(("resumed at", ", ".join(map(str, doc["resumed"]))))
    for k, v in rows:
        t.add([k, v])
    return t


def ratio_tables(runs: Sequence[RunView]) -> list[tuple[str, Table]]:
    """Each run against the first (the baseline), per frame size, as % of the baseline."""
    base = runs[0]
    out = []
    names = [r.name for r in runs]

    def by_size(r: RunView, rows: list[dict]) -> dict[str, dict]:
        return {frame_size_label(e["frame_size"]): e for e in rows}

    # throughput
    t = Table(["frame size", f"{names[0]} (baseline)"] + [x for n in names[1:] for x in (n, "% of baseline")])
    data = [by_size(r, r.throughput()) for r in runs]
    for lab in _sizes(data):
        b = data[0].get(lab)
        bv = b["rate"].value if b else None
        row = [fmt.size(_size(lab)), fmt.fps(bv)]
        for d in data[1:]:
            e = d.get(lab)
            v = e["rate"].value if e else None
            row += [fmt.fps(v), fmt.ratio_pct(v, bv)]
        t.add(row)
    if t:
        out.append(("RFC 2544 throughput", t))
    # max loss-free rate
    t = Table(t.header)
    data = [by_size(r, r.frame_loss()) for r in runs]
    for lab in _sizes(data):
        vals = [(d[lab]["max_lossfree"].value if lab in d and d[lab]["max_lossfree"] else None) for d in data]
        row = [fmt.size(_size(lab)), fmt.fps(vals[0])]
        for v in vals[1:]:
            row += [fmt.fps(v), fmt.ratio_pct(v, vals[0])]
        t.add(row)
    if t:
        out.append(("Maximum loss-free rate (frame loss sweep)", t))
    # NDR / PDR
    t = Table(["frame size", "goal", f"{names[0]} (baseline)"] + [x for n in names[1:] for x in (n, "% of baseline")])
    data = [by_size(r, r.ndr_pdr()) for r in runs]
    for lab in _sizes(data):
        goals: list[str] = []
        for d in data:
            for g in d.get(lab, {}).get("goals", []):
                if g["name"] not in goals:
                    goals.append(g["name"])
        for gname in goals:
            vals = []
            for d in data:
                g = next((g for g in d.get(lab, {}).get("goals", []) if g["name"] == gname), None)
                vals.append((g["conditional"].value if g["conditional"] else g["lower_pps"]) if g else None)
            row = [fmt.size(_size(lab)), gname, fmt.fps(vals[0])]
            for v in vals[1:]:
                row += [fmt.fps(v), fmt.ratio_pct(v, vals[0])]
            t.add(row)
    if t:
        out.append(("NDR / PDR (MLRsearch conditional throughput)", t))
    # latency
    t = Table(["frame size", "statistic", f"{names[0]} (baseline)"] + [x for n in names[1:] for x in (n, "% of baseline")])
    data = [by_size(r, r.latency()) for r in runs]
    for lab in _sizes(data):
        for stat in ("p50", "p99.9"):
            vals = [(d[lab]["pcts"][stat].value if lab in d and stat in d[lab]["pcts"] else None) for d in data]
            if vals[0] is None and all(v is None for v in vals):
                continue
            row = [fmt.size(_size(lab)), "median (typical)" if stat == "p50" else "p99.9 (worst case)", fmt.ns(vals[0])]
            for v in vals[1:]:
                row += [fmt.ns(v), fmt.ratio_pct(v, vals[0])]
            t.add(row)
    if t:
        out.append(("Latency at the throughput rate", t))
    return out


def environment_differences(runs: Sequence[RunView]) -> Table:
    """Environment, test bed, line rate and config keys whose values differ between the runs."""
    flat = []
    for r in runs:
        d = {f"environment.{k}": v for k, v in flatten(r.environment)}
        d.update({f"testbed.{k}": v for k, v in flatten(r.testbed)})
        d.update({f"line_rate.{k}": v for k, v in flatten(obj(r.doc, "line_rate"))})
        d.update({f"config.{k}": v for k, v in flatten(r.config)})
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


def _sizes(data: list[dict[str, Any]]) -> list[str]:
    labs: list[str] = []
    for d in data:
        for lab in d:
            if lab not in labs:
                labs.append(lab)
    return sorted(labs, key=lambda s: frame_size_sort_key(_size(s)))


def _size(lab: str) -> Any:
    return int(lab) if lab.isdigit() else lab


def _med(reps: list[dict], key: str) -> float | None:
    s = Stat.over(num(x, key) for x in reps)
    return s.value if s else None


def _plain(v: Any) -> str:
    if v is None:
        return fmt.DASH
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, dict)):
        if isinstance(v, list) and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in v):
            return ", ".join(str(x) for x in v) if v else "[]"
        return json.dumps(v, sort_keys=False, ensure_ascii=False)
    return str(v)
