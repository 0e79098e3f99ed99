"""A read-only view of one result document (``docs/result-format.md``), shaped for plots and tables.

``RunView.load(path)`` reads a result file (``result.json``, its directory, or an unfinished run's
``trials.ndjson``), refuses unreadable files and newer schema versions with a one-line
``ResultError`` naming the file, and then offers what the report needs. Every optional section may
be missing: accessors return empty lists or ``None`` instead of raising.
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Sequence

from netrig.errors import ResultError

#: The newest result schema this reader understands.
SUPPORTED_SCHEMA_VERSION = 1

#: Ethernet per-frame wire overhead in bytes: preamble 7 + SFD 1 + inter-frame gap 12.
WIRE_OVERHEAD_BYTES = 20

#: Weighted frame-size mixes (bytes incl. FCS, weight), for files that lack ``frame_sizes``.
MIXES = {
    "imix": ((64, 57), (570, 7), (594, 16), (1518, 20)),
    "simple-imix": ((64, 7), (570, 4), (1518, 1)),
}

#: Method ids (``summary[].method``) and how reports call them.
METHOD_LABELS = {
    "rfc2544_throughput": "RFC 2544 §26.1 throughput",
    "rfc2544_latency": "RFC 2544 §26.2 latency",
    "rfc2544_frame_loss": "RFC 2544 §26.3 frame loss rate",
    "rfc2544_back_to_back": "RFC 2544 §26.4 back-to-back",
    "rfc2544_system_recovery": "RFC 2544 §26.5 system recovery",
    "rfc2544_reset": "RFC 2544 §26.6 reset",
    "mlrsearch": "MLRsearch (NDR/PDR)",
    "iperf": "iperf-like fixed rate",
    "selftest": "RFC 8219 self-test",
}


def num(d: Any, *keys: str) -> float | None:
    """The first of ``keys`` in mapping ``d`` whose value is a finite number, else ``None``."""
    if not isinstance(d, dict):
        return None
    for k in keys:
        v = d.get(k)
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)) and math.isfinite(v):
            return float(v)
    return None


def obj(d: Any, key: str) -> dict:
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, dict) else {}


def objs(d: Any, key: str) -> list[dict]:
    v = d.get(key) if isinstance(d, dict) else None
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def frame_size_label(size: Any) -> str:
    """``64`` → ``"64"``; mixes keep their name."""
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        return str(int(size)) if float(size).is_integer() else f"{size:g}"
    if isinstance(size, str):
        return size
    return "mix" if size is not None else "?"


def _size_text(size: Any) -> str:
    lab = frame_size_label(size)
    return f"{lab} B" if lab.isdigit() else lab


def frame_size_sort_key(size: Any) -> tuple:
    """Numeric sizes first in increasing order, then named mixes alphabetically."""
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        return (0, float(size), "")
    return (1, 0.0, frame_size_label(size))


@dataclass(frozen=True)
class Stat:
    """A value (median of repetitions) with the min / max of the repetitions."""

    value: float
    lo: float
    hi: float

    @classmethod
    def of(cls, value: float, lo: float | None = None, hi: float | None = None) -> "Stat":
        return cls(value, value if lo is None else lo, value if hi is None else hi)

    @classmethod
    def over(cls, values: Iterable[float | None]) -> "Stat | None":
        vals = [v for v in values if v is not None]
        if not vals:
            return None
        return cls(statistics.median(vals), min(vals), max(vals))

    @classmethod
    def from_stats(cls, s: Any) -> "Stat | None":
        """From a ``{"min", "median", "max"}`` stats entry."""
        med = num(s, "median", "value")
        return None if med is None else cls.of(med, num(s, "min"), num(s, "max"))

    def scaled(self, k: float) -> "Stat":
        return Stat(self.value * k, self.lo * k, self.hi * k)

    @property
    def spread(self) -> bool:
        return self.hi > self.lo


def parse_time(s: Any) -> datetime | None:
    if not isinstance(s, str):
        return None
    try:
        return datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None


class RunView:
    """One result document, with tolerant accessors for the report."""

    def __init__(self, doc: dict, path: str | Path = "<result>"):
        self.path = Path(path)
        self.doc = doc
        self.name = self.config_name()
        #: the files this view was drawn from (several after ``merge``)
        self.parts: list[Path] = [self.path]

    # -- loading ------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> "RunView":
        """Read and check a result file; every problem is one ``ResultError`` naming the file."""
        p = Path(path)
        if p.is_dir():
            if (p / "result.json").is_file():
                p = p / "result.json"
            elif (p / "trials.ndjson").is_file():
                p = p / "trials.ndjson"
            else:
                raise ResultError(f"{p}: directory holds no result.json (nor trials.ndjson)")
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ResultError(f"{p}: no such result file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise ResultError(f"{p}: cannot read: {getattr(e, 'strerror', None) or e}") from None
        if not text.strip():
            raise ResultError(f"{p}: empty file, not a netrig result")
        return cls.from_doc(_parse(p, text), p)

    @classmethod
    def from_doc(cls, doc: Any, path: str | Path = "<result>") -> "RunView":
        p = Path(path)
        if not isinstance(doc, dict):
            raise ResultError(f"{p}: not a netrig result (the top level is not a JSON object)")
        if "schema_version" not in doc:
            raise ResultError(f"{p}: not a netrig result (no schema_version field)")
        ver = doc["schema_version"]
        if isinstance(ver, bool) or not isinstance(ver, int) or ver < 1:
            raise ResultError(f"{p}: schema_version must be a positive integer, got {ver!r}")
        if ver > SUPPORTED_SCHEMA_VERSION:
            raise ResultError(
                f"{p}: written by a newer netrig (schema_version {ver}); this netrig reads "
                f"≤ {SUPPORTED_SCHEMA_VERSION}: upgrade netrig to report it"
            )
        try:  # the results package owns migrations between schema versions
            from netrig.results.reader import migrate
        except ImportError:  # pragma: no cover - results package not present
            migrate = None
        if migrate is not None and ver < SUPPORTED_SCHEMA_VERSION:
            doc = migrate(doc, str(p))
        for key in ("environment", "config", "selftest", "line_rate", "testbed"):
            if doc.get(key) is not None and not isinstance(doc[key], dict):
                raise ResultError(f"{p}: field {key!r} must be an object, got {type(doc[key]).__name__}")
        for key in ("trials", "summary", "frame_sizes", "flags", "verdicts"):
            if doc.get(key) is not None and not isinstance(doc[key], list):
                raise ResultError(f"{p}: field {key!r} must be a list, got {type(doc[key]).__name__}")
        return cls(doc, p)

    @classmethod
    def merge(cls, views: "Sequence[RunView]") -> "RunView":
        """Several results of one configuration (e.g. the demo's RFC 2544 part and its NDR/PDR
        part) as one: summaries, trials, flags and verdicts concatenated; the first result's
        identity, environment and configuration; the first self-test found."""
        views = list(views)
        if len(views) == 1:
            return views[0]
        first = views[0]
        doc = dict(first.doc)
        for key in ("summary", "trials", "flags", "verdicts"):
            doc[key] = [x for v in views for x in (v.doc.get(key) or [])]
        sizes: dict[str, Any] = {}
        for v in views:
            for e in objs(v.doc, "frame_sizes"):
                sizes.setdefault(frame_size_label(e.get("frame_size")), e)
        doc["frame_sizes"] = sorted(sizes.values(), key=lambda e: frame_size_sort_key(e.get("frame_size")))
        doc["selftest"] = next((v.doc["selftest"] for v in views if isinstance(v.doc.get("selftest"), dict)), None)
        for key in ("environment", "testbed", "line_rate"):
            doc[key] = next((v.doc[key] for v in views if v.doc.get(key)), doc.get(key))
        completes = [v.complete for v in views]
        doc["complete"] = all(c is not False for c in completes)
        doc["finished_at"] = views[-1].doc.get("finished_at", doc.get("finished_at"))
        out = cls(doc, first.path)
        out.parts = [v.path for v in views]
        out.name = first.name
        return out

    # -- identity -----------------------------------------------------------------------------
    @property
    def config(self) -> dict:
        return obj(self.doc, "config")

    @property
    def environment(self) -> dict:
        return obj(self.doc, "environment")

    @property
    def testbed(self) -> dict:
        tb = obj(self.doc, "testbed")
        return tb or obj(self.config, "testbed")

    @property
    def complete(self) -> bool | None:
        v = self.doc.get("complete")
        return v if isinstance(v, bool) else None

    def config_name(self) -> str:
        """A short configuration name for legends: ``config.name``, the test bed's name, or the
        file (its directory's name for ``result.json``)."""
        for v in (self.config.get("name"), self.config.get("label"), self.testbed.get("name")):
            if isinstance(v, str) and v.strip():
                return v.strip()
        if self.path.name in ("result.json", "trials.ndjson") and self.path.parent.name:
            return self.path.parent.name
        return self.path.stem

    # -- line rate ----------------------------------------------------------------------------
    @property
    def speed_bps(self) -> float | None:
        v = num(obj(self.doc, "line_rate"), "bps", "speed_bps")
        return v if v and v > 0 else None

    @property
    def line_rate_label(self) -> str:
        lr = obj(self.doc, "line_rate")
        if isinstance(lr.get("label"), str):
            return lr["label"]
        if self.speed_bps is None:
            return "unknown (no line rate in the result)"
        return f"{self.speed_bps / 1e9:g} Gbit/s ({lr.get('source', 'unknown source')})"

    def _frame_size_entry(self, size: Any) -> dict:
        label = frame_size_label(size)
        for e in objs(self.doc, "frame_sizes"):
            if frame_size_label(e.get("frame_size")) == label:
                return e
        return {}

    def mean_frame_size(self, size: Any) -> float | None:
        m = num(self._frame_size_entry(size), "mean_frame_size")
        if m is not None:
            return m
        if isinstance(size, (int, float)) and not isinstance(size, bool):
            return float(size)
        mix = MIXES.get(str(size).lower())
        if mix:
            return sum(s * w for s, w in mix) / sum(w for _, w in mix)
        return None

    def line_rate_pps(self, size: Any) -> float | None:
        """Frames/s at line rate for ``size``: ``L / ((size + 20) * 8)``."""
        v = num(self._frame_size_entry(size), "line_rate_fps")
        if v:
            return v
        m = self.mean_frame_size(size)
        if m is None or not self.speed_bps:
            return None
        return self.speed_bps / ((m + WIRE_OVERHEAD_BYTES) * 8)

    def pct_of_line_rate(self, size: Any, rate_pps: float | None) -> float | None:
        lr = self.line_rate_pps(size)
        return None if lr is None or rate_pps is None else 100.0 * rate_pps / lr

    def bps(self, size: Any, rate_pps: float | None, layer: int = 1) -> float | None:
        m = self.mean_frame_size(size)
        if m is None or rate_pps is None:
            return None
        return rate_pps * (m + (WIRE_OVERHEAD_BYTES if layer == 1 else 0)) * 8

    # -- cores / queues -----------------------------------------------------------------------
    def _find(self, keys: tuple[str, ...]) -> Any:
        srcs = [self.testbed, obj(self.testbed, "options"), obj(self.testbed, "dut"), self.config,
                obj(self.config, "ports"), obj(obj(self.config, "testbed"), "options"), obj(self.config, "engine")]
        for src in srcs:
            for k in keys:
                v = src.get(k)
                if isinstance(v, (int, str)) and not isinstance(v, bool):
                    return v
                if isinstance(v, list) and v and all(isinstance(x, (int, str)) for x in v):
                    return ",".join(str(x) for x in v)
        return None

    def cores(self) -> str:
        v = self._find(("dut_cores", "cores", "dut_cpus"))
        if v is not None:
            return str(v)
        env = self.environment
        n = num(env, "cpus", "cpu_count") or num(obj(env, "cpu"), "count", "logical")
        return f"{int(n)} (host)" if n else "—"

    def queues(self) -> str:
        v = self._find(("queues", "dut_queues", "rx_queues"))
        return "—" if v is None else str(v)

    # -- summaries ----------------------------------------------------------------------------
    def method_results(self, method: str) -> list[dict]:
        """Every frame-size result of every summary entry of ``method``, sorted by frame size."""
        out = []
        for entry in objs(self.doc, "summary"):
            if entry.get("method") == method:
                out.extend(objs(entry, "results"))
        out.sort(key=lambda r: frame_size_sort_key(r.get("frame_size")))
        return out

    def methods(self) -> list[str]:
        return [e.get("method") for e in objs(self.doc, "summary") if isinstance(e.get("method"), str)]

    def method_params(self, method: str) -> dict:
        for entry in objs(self.doc, "summary"):
            if entry.get("method") == method:
                return obj(entry, "params")
        return {}

    def throughput(self) -> list[dict]:
        """Per frame size: ``{frame_size, rate: Stat (fps), pct: Stat|None, l1_bps, l2_bps,
        ceiling_pps, above_ceiling, flags}``."""
        out = []
        for r in self.method_results("rfc2544_throughput"):
            size = r.get("frame_size")
            reps = objs(r, "repetitions")
            rate = Stat.from_stats(obj(r, "stats").get("rate_pps")) or Stat.over(num(x, "rate_pps") for x in reps)
            head = obj(r, "headline")
            if rate is None and num(head, "fps") is not None:
                rate = Stat.of(num(head, "fps"))
            if rate is None:
                continue
            lr = self.line_rate_pps(size)
            pct = rate.scaled(100 / lr) if lr else None
            if pct is None and num(head, "pct_line_rate") is not None and rate.value > 0:
                pct = rate.scaled(num(head, "pct_line_rate") / rate.value)
            flags = flag_codes(r)
            ceiling = self.proven_ceiling_pps(size)
            out.append(
                {
                    "frame_size": size,
                    "rate": rate,
                    "pct": pct,
                    "l1_bps": num(head, "l1_bps") or self.bps(size, rate.value, 1),
                    "l2_bps": num(head, "l2_bps") or self.bps(size, rate.value, 2),
                    "ceiling_pps": ceiling,
                    "above_ceiling": "above_selftest_ceiling" in flags,
                    "tester_limited": "tester_limited" in flags or any(x.get("tester_limited") for x in reps),
                    "repetitions": len(reps),
                    "flags": objs(r, "flags"),
                }
            )
        return out

    def frame_loss(self) -> list[dict]:
        """Per frame size: ``{frame_size, points: [{offered_pps, offered_pct, forwarded: Stat,
        loss_pct: Stat}], max_lossfree: Stat|None, livelock: bool}``; points by increasing load."""
        out = []
        for r in self.method_results("rfc2544_frame_loss"):
            size = r.get("frame_size")
            by_load: dict[float, list[dict]] = {}
            reps = objs(r, "repetitions")
            for rep in reps:
                for p in objs(rep, "curve"):
                    if p.get("valid") is False:
                        continue
                    pct = num(p, "offered_pct")
                    off = num(p, "offered_pps")
                    if pct is None and off is not None:
                        pct = self.pct_of_line_rate(size, off)
                    key = round(pct, 3) if pct is not None else round(off or 0.0, 1)
                    by_load.setdefault(key, []).append(p)
            pts = []
            for _, ps in sorted(by_load.items()):
                off = Stat.over(num(p, "offered_pps") for p in ps)
                fwd = Stat.over(num(p, "forwarded_pps") for p in ps)
                if off is None or fwd is None:
                    continue
                loss = Stat.over(
                    100 * v if (v := num(p, "loss_ratio")) is not None else None for p in ps
                ) or Stat.of(max(0.0, 100 * (1 - fwd.value / off.value)) if off.value else 0.0)
                pts.append(
                    {"offered_pps": off.value, "offered_pct": self.pct_of_line_rate(size, off.value)
                     if num(ps[0], "offered_pct") is None else statistics.median(num(p, "offered_pct") or 0 for p in ps),
                     "forwarded": fwd, "loss_pct": loss}
                )
            if not pts:
                continue
            mlf = Stat.from_stats(obj(r, "stats").get("max_lossfree_pps")) or Stat.over(
                num(x, "max_lossfree_pps") for x in reps
            )
            if mlf is None:
                free = [p["offered_pps"] for p in pts if p["loss_pct"].value == 0]
                mlf = Stat.of(max(free)) if free else None
            livelock = any(x.get("livelock") is True for x in reps)
            out.append({"frame_size": size, "points": pts, "max_lossfree": mlf, "livelock": livelock,
                        "collapse": collapse_point(pts)})
        return out

    def latency(self) -> list[dict]:
        """Per frame size: ``{frame_size, rate_pps, pcts: {name: Stat (ns)}}`` with names from
        ``LATENCY_NAMES``: min, p50 (typical), p90, p99, p99.9 (worst case), max, PDV, IPDV."""
        out = []
        for r in self.method_results("rfc2544_latency"):
            size = r.get("frame_size")
            reps = objs(r, "repetitions")
            stats = obj(r, "stats")
            pcts: dict[str, Stat] = {}
            for name, stat_key, rep_key in (("p50", "typical_ns", "typical_ns"), ("p99.9", "worst_case_ns", "worst_case_ns")):
                s = Stat.from_stats(stats.get(stat_key)) or Stat.over(num(x, rep_key) for x in reps)
                if s:
                    pcts[name] = s
            for name, key in (("min", "min_ns"), ("mean", "mean_ns"), ("max", "max_ns"), ("PDV", "pdv_ns"), ("IPDV", "ipdv_ns")):
                s = Stat.over(num(x, key) for x in reps)
                if s:
                    pcts[name] = s
            # p90 / p99 are only in the trial records
            mi = r.get("method_index") if isinstance(r.get("method_index"), int) else None
            trials = [t for t in self.trials() if t.get("method") == "rfc2544_latency"
                      and frame_size_label(t.get("frame_size")) == frame_size_label(size)
                      and (mi is None or t.get("method_index") == mi) and trial_valid(t)]
            for name, key in (("p90", "p90_ns"), ("p99", "p99_ns"), ("min", "min_ns"), ("max", "max_ns"),
                              ("p50", "p50_ns"), ("p99.9", "p999_ns")):
                if name not in pcts:
                    s = Stat.over(num(trial_latency(t), key) for t in trials)
                    if s:
                        pcts[name] = s
            if not pcts:
                continue
            rate = Stat.over(num(x, "rate_pps") for x in reps)
            if rate is None:
                rate = Stat.over(num(obj(t, "load"), "rate_pps") for t in trials)
            out.append({"frame_size": size, "rate_pps": rate.value if rate else None,
                        "pcts": {k: pcts[k] for k in LATENCY_NAMES if k in pcts}})
        return out

    def latency_vs_load(self) -> list[dict]:
        """Latency against offered load from every valid DUT trial with latency data, per frame
        size: ``{frame_size, points: [{offered_pps, offered_pct, loss_pct, pcts}]}`` (≥ 2 loads)."""
        groups: dict[str, dict] = {}
        for t in self.trials():
            if t.get("method") == "selftest" or not trial_valid(t) or t.get("kind", "rate") != "rate":
                continue
            lat = trial_latency(t)
            off = num(obj(t, "load"), "rate_pps")
            if off is None or num(lat, "p50_ns") is None:
                continue
            g = groups.setdefault(frame_size_label(t.get("frame_size")), {"frame_size": t.get("frame_size"), "loads": {}})
            g["loads"].setdefault(round(off, 1), []).append(t)
        out = []
        for g in groups.values():
            pts = []
            for off, ts in sorted(g["loads"].items()):
                pcts = {}
                for name, key in (("min", "min_ns"), ("p50", "p50_ns"), ("p90", "p90_ns"), ("p99", "p99_ns"),
                                  ("p99.9", "p999_ns"), ("max", "max_ns")):
                    s = Stat.over(num(trial_latency(t), key) for t in ts)
                    if s:
                        pcts[name] = s
                loss = statistics.median(100 * (num(obj(t, "counts"), "loss_ratio") or 0.0) for t in ts)
                pts.append({"offered_pps": off, "offered_pct": self.pct_of_line_rate(g["frame_size"], off),
                            "loss_pct": loss, "pcts": pcts})
            if len(pts) >= 2:
                out.append({"frame_size": g["frame_size"], "points": pts})
        out.sort(key=lambda r: frame_size_sort_key(r["frame_size"]))
        return out

    def ndr_pdr(self) -> list[dict]:
        """Per frame size: ``{frame_size, goals: [{name, loss_ratio, conditional: Stat|None,
        lower_pps, upper_pps}]}`` (bounds are medians over repetitions)."""
        out = []
        for r in self.method_results("mlrsearch"):
            by_name: dict[str, list[dict]] = {}
            order: list[str] = []
            for rep in objs(r, "repetitions"):
                for g in objs(rep, "goals"):
                    name = str(g.get("name") or f"loss ≤ {num(obj(g, 'goal'), 'loss_ratio')}")
                    if name not in by_name:
                        order.append(name)
                    by_name.setdefault(name, []).append(g)
            goals = []
            for name in order:
                gs = by_name[name]
                lo = Stat.over(num(g, "lower_bound_pps") for g in gs)
                hi = Stat.over(num(g, "upper_bound_pps") for g in gs)
                ct = Stat.over(num(g, "conditional_throughput_pps") for g in gs)
                if lo is None and hi is None and ct is None:
                    continue
                goal = obj(gs[0], "goal")
                goals.append({"name": name, "loss_ratio": num(goal, "loss_ratio", "target_loss_ratio"),
                              "relative_width": num(goal, "relative_width"),
                              "conditional": ct, "lower_pps": lo.value if lo else None,
                              "upper_pps": hi.value if hi else None})
            if goals:
                out.append({"frame_size": r.get("frame_size"), "goals": goals})
        return out

    def iperf(self) -> list[dict]:
        """Per frame size: ``{frame_size, offered_pps, received: Stat, series: [[(t_s, rx_pps)]]}``."""
        out = []
        for r in self.method_results("iperf"):
            reps = objs(r, "repetitions")
            series = []
            for rep in reps:
                pts = [(num(p, "t_s"), num(p, "rx_pps")) for p in objs(rep, "per_interval")]
                pts = [(t, v) for t, v in pts if t is not None and v is not None]
                if pts:
                    series.append(pts)
            received = Stat.from_stats(obj(r, "stats").get("received_pps")) or Stat.over(num(x, "received_pps") for x in reps)
            if received is None and not series:
                continue
            out.append({"frame_size": r.get("frame_size"), "offered_pps": Stat.over(num(x, "offered_pps") for x in reps),
                        "received": received, "loss_ratio": Stat.over(num(x, "loss_ratio") for x in reps),
                        "series": series})
        return out

    # -- self-test, flags ---------------------------------------------------------------------
    def selftest(self) -> dict:
        return obj(self.doc, "selftest")

    def selftest_ceilings(self) -> list[dict]:
        out = objs(self.selftest(), "ceilings")
        return sorted(out, key=lambda c: frame_size_sort_key(c.get("frame_size")))

    @property
    def selftest_factor(self) -> float:
        return num(self.selftest(), "factor") or 1.1

    def proven_ceiling_pps(self, size: Any) -> float | None:
        """The tester's proven rate at ``size`` (self-test), or ``None`` when not proven."""
        for c in self.selftest_ceilings():
            if frame_size_label(c.get("frame_size")) == frame_size_label(size):
                return num(c, "proven_rate_pps") or num(obj(c, "proven"), "fps")
        return None

    def flags(self) -> list[dict]:
        """Run-wide flags, then every per-result flag (deduplicated), as ``{code, message, where}``."""
        out, seen = [], set()
        for f in objs(self.doc, "flags"):
            key = (str(f.get("code")), str(f.get("message")))
            if key not in seen:
                seen.add(key)
                out.append({"code": str(f.get("code", "")), "message": str(f.get("message", "")), "where": "run"})
        for entry in objs(self.doc, "summary"):
            label = entry.get("label") or METHOD_LABELS.get(entry.get("method"), entry.get("method"))
            for r in objs(entry, "results"):
                for f in objs(r, "flags"):
                    key = (str(f.get("code")), str(f.get("message")))
                    if key in seen:
                        continue
                    seen.add(key)
                    out.append({"code": str(f.get("code", "")), "message": str(f.get("message", "")),
                                "where": f"{label}, {_size_text(r.get('frame_size'))}"})
        return out

    def verdicts(self) -> list[dict]:
        return objs(self.doc, "verdicts")

    # -- trials and monitoring ----------------------------------------------------------------
    def trials(self) -> list[dict]:
        return objs(self.doc, "trials")

    def trial_start_s(self) -> dict[int, float]:
        """Each trial's start (index in ``trials``) in seconds since the run's first trial."""
        times = [parse_time(t.get("started_at")) for t in self.trials()]
        base = next((t for t in times if t is not None), None)
        out, clock = {}, 0.0
        for i, t in enumerate(self.trials()):
            if base is not None and times[i] is not None:
                clock = (times[i] - base).total_seconds()
            out[i] = clock
            clock += (num(obj(t, "load"), "duration_s") or 0.0) + 1.0
        return out

    def monitored_trials(self) -> list[tuple[int, dict]]:
        """``(index, trial)`` for every trial with DUT monitoring samples."""
        return [(i, t) for i, t in enumerate(self.trials()) if monitor_samples(t)]


#: Latency statistics in display order.
LATENCY_NAMES = ("min", "mean", "p50", "p90", "p99", "p99.9", "max", "PDV", "IPDV")


def trial_valid(t: dict) -> bool:
    c = obj(t, "counts")
    v = c.get("valid", t.get("valid", True))
    return v is not False


def trial_latency(t: dict) -> dict:
    return obj(obj(t, "counts"), "latency") or obj(t, "latency")


def flag_codes(r: dict) -> set[str]:
    return {str(f.get("code")) for f in objs(r, "flags")}


def monitor_samples(t: dict) -> list[dict]:
    """DUT monitoring samples of a trial: wherever the measurer put them (``counts.raw.monitor``,
    ``raw.monitor`` or ``monitor``), as a list or as ``{"samples": [...]}``."""
    raw = obj(obj(t, "counts"), "raw")
    for holder in (raw, obj(t, "raw"), t):
        m = holder.get("monitor") if isinstance(holder, dict) else None
        if isinstance(m, list):
            return [s for s in m if isinstance(s, dict)]
        if isinstance(m, dict):
            s = objs(m, "samples")
            if s:
                return s
    return []


def sample_time_s(s: dict) -> float | None:
    return num(s, "t_s", "elapsed_s", "time_s", "t")


def sample_cpus(s: dict) -> dict[str, dict]:
    """``{"cpu0": {"user": %, "system": %, "irq": %, "softirq": %, "idle": %}, …}`` in percent."""
    c = s.get("cpu") if isinstance(s.get("cpu"), (dict, list)) else s.get("cpus", s.get("per_cpu"))
    items: list[tuple[str, dict]] = []
    if isinstance(c, dict):
        items = [(str(k), v) for k, v in c.items() if isinstance(v, dict)]
    elif isinstance(c, list):
        items = [(str(v.get("cpu", v.get("name", f"cpu{i}"))), v) for i, v in enumerate(c) if isinstance(v, dict)]
    out = {}
    for name, v in items:
        vals = {k: num(v, k, f"{k}_pct") for k in ("user", "system", "irq", "softirq", "idle")}
        total = sum(x for x in vals.values() if x is not None)
        if 0 < total <= 1.5:  # fractions, not percent
            vals = {k: (x * 100 if x is not None else None) for k, x in vals.items()}
        if not name.startswith("cpu") and name.isdigit():
            name = f"cpu{name}"
        out[name] = vals
    return out


def sample_mem_used_bytes(s: dict) -> float | None:
    m = s.get("mem") if isinstance(s.get("mem"), dict) else obj(s, "memory")
    v = num(m, "used_bytes", "used")
    if v is None:
        total, avail = num(m, "total_bytes", "total"), num(m, "available_bytes", "available")
        if total is not None and avail is not None:
            v = total - avail
    return v if v is not None else num(s, "mem_used_bytes")


def collapse_point(pts: list[dict]) -> dict | None:
    """The point of highest forwarded rate when forwarding falls by more than 10 % at a higher
    offered load (receive livelock), else ``None``."""
    if len(pts) < 2:
        return None
    best = max(pts, key=lambda p: p["forwarded"].value)
    after = [p for p in pts if p["offered_pps"] > best["offered_pps"]]
    if after and min(p["forwarded"].value for p in after) < 0.9 * best["forwarded"].value:
        return best
    return None


def _parse(p: Path, text: str) -> dict:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) > 1:  # an unfinished run's trials.ndjson: a header line, then trial lines
            try:
                recs = [json.loads(ln) for ln in lines]
            except json.JSONDecodeError:
                recs = None
            if recs and all(isinstance(r, dict) for r in recs) and recs[0].get("type") == "header":
                doc = {k: v for k, v in recs[0].items() if k != "type"}
                doc["trials"] = [{k: v for k, v in r.items() if k != "type"} for r in recs[1:]
                                 if r.get("type") == "trial"]
                doc["complete"] = False
                return doc
        raise ResultError(f"{p}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None


def unique_names(runs: Iterable[RunView]) -> None:
    """Make legend names unique: append the file name (then a number) where names repeat."""
    runs = list(runs)
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.name] = counts.get(r.name, 0) + 1
    for r in runs:
        if counts[r.name] > 1:
            r.name = f"{r.name} ({r.path.parent.name + '/' if r.path.name == 'result.json' else ''}{r.path.name})"
    seen: dict[str, int] = {}
    for r in runs:
        if r.name in seen:
            seen[r.name] += 1
            r.name = f"{r.name} #{seen[r.name]}"
        else:
            seen[r.name] = 1
