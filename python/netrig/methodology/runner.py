"""Running a configured test: self-test, then every method × frame size × repetition, recording
every trial as it finishes, and building the result document (``docs/result-format.md``).

Resume: methods are deterministic given the sequence of trial results, so a resumed run asks for
the same trials in the same order; :class:`RecordingMeasurer` answers a request whose key and load
match a recorded trial from the record, and measures everything else.
"""
from __future__ import annotations

import contextlib
import math
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Sequence

from netrig.config import METHOD_LABELS, MethodConfig, TestConfig, config_from_dict
from netrig.errors import InterruptedTrial, NetrigError, ResultError
from netrig.methodology.back_to_back import measure_back_to_back
from netrig.methodology.frame_loss import measure_frame_loss
from netrig.methodology.frames import FrameSize, LineRate, rate_object
from netrig.methodology.iperf import measure_iperf
from netrig.methodology.latency import measure_latency
from netrig.methodology.measurer import Load, Measurer, Phase, TrialCounts
from netrig.methodology.mlrsearch import measure_mlrsearch
from netrig.methodology.recovery import measure_recovery
from netrig.methodology.reset import measure_reset
from netrig.methodology.selftest import SelftestParams, SelftestResult, prove_rate
from netrig.methodology.simulator import DutModel, SimulatedMeasurer
from netrig.methodology.stats import median, summarize
from netrig.methodology.throughput import ThroughputParams, measure_throughput
from netrig.results.reader import read_trial_log
from netrig.results.store import SCHEMA_VERSION, TrialLog, utc_now, write_result
from netrig.results.store import dumps as _json_dumps

#: ``progress(event, info)``; events: run_start, trial_start, trial_end, method_start, message.
ProgressFn = Callable[[str, dict], None]


@dataclass
class Session:
    """What a measurer provider yields: the measurer, the line rate and the test bed description."""

    measurer: Any
    line_rate: LineRate
    testbed: dict = field(default_factory=dict)
    environment: dict = field(default_factory=dict)


#: ``provider(config, role)`` with role ``"dut"`` or ``"selftest"`` -> context manager of Session.
Provider = Callable[[TestConfig, str], ContextManager[Session]]


def _line_rate(config: TestConfig, interface: str | None, speed_bps: float | None) -> LineRate:
    if config.line_rate.speed_bps is not None:
        return LineRate(config.line_rate.speed_bps, "config", interface)
    if speed_bps:
        return LineRate(speed_bps, "interface", interface)
    return LineRate(config.line_rate.nominal_bps, "nominal", interface)


@contextlib.contextmanager
def simulated_session(config: TestConfig, role: str) -> Iterator[Session]:
    model = config.testbed.simulator or DutModel()
    if role == "selftest":  # a looped-back tester: no DUT, only the tester's own ceiling
        model = DutModel(capacity_pps=1e15, tester_ceiling_pps=model.tester_ceiling_pps,
                         trial_delay_s=model.trial_delay_s, seed=model.seed + 1)
    lr = _line_rate(config, "simulated", None)
    yield Session(SimulatedMeasurer(model), lr, {"name": "simulated", "role": role, "model": model.to_dict()}, {})


def default_provider(config: TestConfig, role: str) -> ContextManager[Session]:
    if config.testbed.name == "simulated":
        return simulated_session(config, role)
    from netrig.methodology.engine_measurer import engine_session

    return engine_session(config, role)


class RecordingMeasurer:
    """Wraps a measurer: assigns replay keys, replays recorded trials, records new ones."""

    def __init__(self, log: TrialLog, replay: dict[str, dict], line_rate: LineRate,
                 progress: ProgressFn | None = None):
        self.inner: Any = None
        self.log, self.replay, self.line_rate = log, replay, line_rate
        self.progress = progress or (lambda e, i: None)
        self.records: list[dict] = []
        self.ctx: dict = {}
        self.trial_index = 0
        self.measured = 0
        self.trial_wall_s: list[float] = []

    def begin(self, method: str, method_index: int, frame: FrameSize, repetition: int, label: str) -> None:
        self.ctx = {"method": method, "method_index": method_index, "frame": frame, "repetition": repetition,
                    "label": label}
        self.trial_index = 0

    def _key(self) -> str:
        c = self.ctx
        return f"{c['method_index']}/{c['frame'].label}/{c['repetition']}/{self.trial_index}"

    def _do(self, kind: str, frame: FrameSize, load_d: dict, phases: list | None,
            fn: Callable[[str], TrialCounts]) -> TrialCounts:
        key = self._key()
        self.trial_index += 1
        info = {"key": key, "kind": kind, "method": self.ctx["method"], "label": self.ctx["label"],
                "frame_size": frame.label, "repetition": self.ctx["repetition"], "trial_index": self.trial_index - 1,
                "load": load_d}
        rec = self.replay.get(key)
        if rec is not None:
            if not _same_load(rec, kind, load_d, phases):
                raise ResultError(
                    f"resume: trial {key} asks for {load_d} but the recorded one was {rec.get('load')}; "
                    "the configuration or netrig version changed. Start a new run (--out) instead."
                )
            counts = TrialCounts.from_dict(rec["counts"])
            self.records.append({**rec, "seq": len(self.records), "replayed": True})
            self.progress("trial_end", {**info, "replayed": True, "counts": counts})
            return counts
        self.progress("trial_start", {**info, "replayed": False})
        started = utc_now()
        t0 = time.monotonic()
        counts = fn(key)
        self.trial_wall_s.append(time.monotonic() - t0)
        rec = {"seq": len(self.records), "key": key, "method": self.ctx["method"],
               "method_index": self.ctx["method_index"], "frame_size": frame.label,
               "repetition": self.ctx["repetition"], "trial_index": self.trial_index - 1, "kind": kind,
               "load": load_d, "phases": phases, "started_at": started, "finished_at": utc_now(),
               "counts": counts.to_dict()}
        self.log.append(rec)
        self.records.append({**rec, "replayed": False})
        self.measured += 1
        self.progress("trial_end", {**info, "replayed": False, "counts": counts})
        return counts

    def _load_d(self, load: Load, duration_s: float) -> dict:
        return {"rate_pps": load.rate_pps, "frame_size": load.frame_size.label, "burst_frames": load.burst_frames,
                "duration_s": duration_s, "pct_line_rate": 100 * load.rate_pps / self.line_rate.fps(load.frame_size)}

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        kind = "burst" if load.burst_frames is not None else "rate"
        return self._do(kind, load.frame_size, self._load_d(load, duration_s), None,
                        lambda key: self.inner.measure(replace(load, tag=key), duration_s))

    def measure_phases(self, frame_size: FrameSize, phases: Sequence[Phase], interval_s: float,
                       tag: str = "") -> TrialCounts:
        first = phases[0]
        load_d = self._load_d(Load(first.rate_pps, frame_size), sum(p.duration_s for p in phases))
        load_d["interval_s"] = interval_s
        ph = [{"rate_pps": p.rate_pps, "duration_s": p.duration_s} for p in phases]
        return self._do("phases", frame_size, load_d, ph,
                        lambda key: self.inner.measure_phases(frame_size, phases, interval_s, tag=key))

    def measure_reset(self, load: Load, duration_s: float, reset: Callable[[], None],
                      reset_after_s: float) -> TrialCounts:
        load_d = self._load_d(load, duration_s)
        load_d["reset_after_s"] = reset_after_s
        return self._do("reset", load.frame_size, load_d, None,
                        lambda key: self.inner.measure_reset(replace(load, tag=key), duration_s, reset, reset_after_s))


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return abs(float(a) - float(b)) <= 1e-9 * max(abs(float(a)), abs(float(b)), 1e-12)


def _same_load(rec: dict, kind: str, load_d: dict, phases) -> bool:
    ld = rec.get("load") or {}
    if rec.get("kind") != kind or str(ld.get("frame_size")) != str(load_d["frame_size"]):
        return False
    if ld.get("burst_frames") != load_d["burst_frames"]:
        return False
    if not (_close(ld.get("rate_pps"), load_d["rate_pps"]) and _close(ld.get("duration_s"), load_d["duration_s"])):
        return False
    if phases is not None:
        rp = rec.get("phases") or []
        return len(rp) == len(phases) and all(
            _close(a["rate_pps"], b["rate_pps"]) and _close(a["duration_s"], b["duration_s"]) for a, b in zip(rp, phases))
    return True


def _estimate_trials(m: MethodConfig, frame: FrameSize, line_fps: float) -> int:
    p = m.params
    if m.name == "rfc2544_throughput":
        return int(math.ceil(math.log2(max(2.0, (p.max_rate_pct - p.min_rate_pct) / p.resolution_pct)))) + 1
    if m.name == "rfc2544_latency":
        return p.trials
    if m.name == "rfc2544_frame_loss":
        return max(2, int((p.start_pct - p.min_pct) / p.step_pct / 2) + 2)
    if m.name == "rfc2544_back_to_back":
        mb = p.max_burst_frames or 2 * line_fps
        return p.trials * (int(math.log2(max(2.0, 1000))) + 1) if not p.resolution_frames else \
            p.trials * (int(math.log2(max(2.0, mb / p.resolution_frames))) + 1)
    if m.name == "mlrsearch":
        return sum(8 + int(g.duration_sum_s / g.final_trial_duration_s) * 3 for g in p.goals)
    return 1


def _trial_seconds(m: MethodConfig, drain_s: float) -> float:
    p = m.params
    if m.name == "rfc2544_system_recovery":
        return p.overload_duration_s + p.recovery_duration_s + drain_s
    if m.name == "mlrsearch":
        return p.goals[0].final_trial_duration_s + drain_s
    if m.name == "rfc2544_back_to_back":
        return 0.1 + drain_s
    return getattr(p, "duration_s", 1.0) + drain_s


class Runner:
    """Runs a :class:`TestConfig` into ``out_dir``; ``resume=True`` continues an earlier run there."""

    def __init__(self, config: TestConfig, out_dir: str | Path | None = None, *, resume: bool = False,
                 provider: Provider | None = None, progress: ProgressFn | None = None, command: str = ""):
        self.config = config
        self.out_dir = Path(out_dir or config.output.dir)
        self.resume = resume
        self.provider = provider or default_provider
        self.progress = progress or (lambda e, i: None)
        self.command = command
        self.results: dict[int, dict[Any, list]] = {}
        self.complete_keys: set[tuple[int, Any]] = set()
        self.selftest: SelftestResult | None = None
        self.line_rate: LineRate | None = None
        self.testbed: dict = {}
        self.environment: dict = {}
        self.document: dict = {}

    # ---------------------------------------------------------------- main entry
    def run(self) -> dict:
        cfg = self.config
        cfg_dict = cfg.to_dict()
        replay: dict[str, dict] = {}
        self.run_id = uuid.uuid4().hex
        self.started_at = utc_now()
        self.resumed: list[str] = []
        if self.resume:
            header, recs = read_trial_log(self.out_dir)
            if header is None:
                raise ResultError(f"{self.out_dir}: the trial log has no header; cannot resume")
            if _comparable(header.get("config")) != _comparable(cfg_dict):
                raise ResultError(f"{self.out_dir}: the run there used a different configuration; "
                                  "resume with the same config file, or start a new run with --out")
            self.run_id = header.get("run_id", self.run_id)
            self.started_at = header.get("started_at", self.started_at)
            self.resumed = list(header.get("resumed", [])) + [utc_now()]
            replay = {r["key"]: r for r in recs}
        elif (self.out_dir / "trials.ndjson").exists():
            raise ResultError(f"{self.out_dir}: already holds a run; use --resume {self.out_dir} to continue it "
                              "or choose another --out directory")
        log = TrialLog(self.out_dir)
        log.open({"schema_version": SCHEMA_VERSION, "run_id": self.run_id, "config": cfg_dict,
                  "started_at": self.started_at, "tool_version": _tool_version()})
        self.rec = RecordingMeasurer(log, replay, LineRate(1.0), self.progress)
        complete, reason = False, None
        try:
            if not cfg.methods:  # self-test only
                with self.provider(cfg, "selftest") as st:
                    self._setup(st)
                    self.rec.inner = st.measurer
                    self._run_selftest()
            else:
                self._run_dut(cfg)
            complete = True
        except KeyboardInterrupt:
            reason = "interrupted by user (Ctrl-C)"
            raise
        except InterruptedTrial:
            reason = "interrupted by user (Ctrl-C)"
            raise
        except NetrigError as e:
            reason = str(e)
            raise
        finally:
            log.close()
            self.document = self._document(complete, reason)
            write_result(self.out_dir, self.document)
            with contextlib.suppress(OSError):
                (self.out_dir / "config.json").write_text(_json_dumps(self.config.to_dict()))
        return self.document

    def _setup(self, session: Session) -> None:
        self.line_rate = session.line_rate
        self.rec.line_rate = session.line_rate
        self.testbed, self.environment = session.testbed, session.environment
        self.progress("run_start", {"total_trials": self._estimate_total(), "line_rate": session.line_rate,
                                    "out_dir": str(self.out_dir)})

    def _run_dut(self, cfg: TestConfig) -> None:
        with self.provider(cfg, "dut") as dut:
            self._setup(dut)
            if cfg.selftest.enabled:
                with self.provider(cfg, "selftest") as st:
                    self.rec.inner = st.measurer
                    self._run_selftest()
            self.rec.inner = dut.measurer
            for mi, m in enumerate(cfg.methods):
                self._run_method(mi, m)

    # ---------------------------------------------------------------- self-test
    def _required_rates(self) -> dict[Any, float]:
        cfg, lr = self.config, self.line_rate
        out = {}
        for f in cfg.frames.sizes:
            if cfg.selftest.rates_pps:
                out[f.label] = max(cfg.selftest.rates_pps)
                continue
            top = 0.0
            for m in cfg.methods:
                p = m.params
                pct = {"rfc2544_throughput": "max_rate_pct", "rfc2544_frame_loss": "start_pct",
                       "rfc2544_back_to_back": "rate_pct", "iperf": "rate_pct", "mlrsearch": "max_rate_pct"}.get(m.name)
                top = max(top, getattr(p, pct) if pct else 100.0)
            out[f.label] = lr.fps(f) * top / 100
        return out

    def _run_selftest(self) -> None:
        st = self.config.selftest
        params = SelftestParams(st.factor, st.duration_s or self.config.trial.duration_s, st.resolution_pct)
        req = self._required_rates()
        ceilings = []
        for f in self.config.frames.sizes:
            self.rec.begin("selftest", -1, f, 0, "RFC 8219 self-test")
            first = len(self.rec.records)
            c = prove_rate(self.rec, f, self.line_rate, req[f.label], params)
            keys = tuple(r["key"] for r in self.rec.records[first:])
            ceilings.append(replace(c, trial_keys=keys))
        self.selftest = SelftestResult(params, st.testbed, tuple(ceilings))

    # ---------------------------------------------------------------- methods
    def _throughput_for(self, mi: int, frame: FrameSize, src: int | None) -> float | None:
        idxs = [src] if src is not None else list(range(mi - 1, -1, -1))
        for j in idxs:
            if self.config.methods[j].name not in ("rfc2544_throughput", "mlrsearch"):
                continue
            reps = self.results.get(j, {}).get(frame.label)
            if reps:
                return median(r.headline_pps for r in reps)
        return None

    def _run_method(self, mi: int, m: MethodConfig) -> None:
        cfg = self.config
        reps = cfg.repetitions_for(m)
        self.progress("method_start", {"method": m.name, "label": m.label, "method_index": mi})
        self.results.setdefault(mi, {})
        for frame in cfg.frames.sizes:
            self.results[mi].setdefault(frame.label, [])
            for rep in range(reps):
                self.rec.begin(m.name, mi, frame, rep, m.label)
                res = self._one(mi, m, frame)
                self.results[mi][frame.label].append(res)
            self.complete_keys.add((mi, frame.label))

    def _one(self, mi: int, m: MethodConfig, frame: FrameSize):
        p, lr, rec = m.params, self.line_rate, self.rec
        needs_tp = m.name in ("rfc2544_latency", "rfc2544_back_to_back", "rfc2544_system_recovery", "rfc2544_reset")
        tp = None
        if needs_tp:
            tp = self._throughput_for(mi, frame, getattr(p, "throughput_from", None))
            if tp is None or tp <= 0:
                tp = measure_throughput(rec, frame, lr, ThroughputParams(duration_s=self.config.trial.duration_s)).rate_pps
            if (tp is None or tp <= 0) and m.name != "rfc2544_back_to_back":
                tp = lr.fps(frame) * 0.01
        if m.name == "rfc2544_throughput":
            return measure_throughput(rec, frame, lr, p)
        if m.name == "rfc2544_latency":
            return measure_latency(rec, frame, lr, tp, p)
        if m.name == "rfc2544_frame_loss":
            return measure_frame_loss(rec, frame, lr, p)
        if m.name == "rfc2544_back_to_back":
            return measure_back_to_back(rec, frame, lr, p, throughput_pps=tp or None)
        if m.name == "rfc2544_system_recovery":
            return measure_recovery(rec, frame, lr, tp, p)
        if m.name == "rfc2544_reset":
            reset = None
            if self.config.testbed.name == "simulated" and not p.command:
                reset = lambda: None  # noqa: E731 - the simulated DUT resets itself
            return measure_reset(rec, frame, lr, tp, p, reset=reset)
        if m.name == "mlrsearch":
            return measure_mlrsearch(rec, frame, lr, p)
        if m.name == "iperf":
            return measure_iperf(rec, frame, lr, p)
        raise NetrigError(f"methods[{mi}]: no runner for method {m.name!r}")

    # ---------------------------------------------------------------- document
    def _estimate_total(self) -> int:
        n = 0
        for m in self.config.methods:
            for f in self.config.frames.sizes:
                n += _estimate_trials(m, f, self.line_rate.fps(f)) * self.config.repetitions_for(m)
        if self.config.selftest.enabled:
            n += len(self.config.frames.sizes)
        return n

    def _flags(self, mi: int, m: MethodConfig, frame: FrameSize, reps: list, complete: bool) -> list[dict]:
        flags = []
        lr = self.line_rate
        head = median(r.headline_pps for r in reps)
        if self.selftest is not None and head is not None and self.selftest.is_above(frame, head):
            lim = self.selftest.limit_pps(frame)
            flags.append({"code": "above_selftest_ceiling",
                          "message": f"{head:.0f} fps is above what the self-test proved for {frame} "
                                     f"({'nothing' if lim is None else f'{lim:.0f} fps = ceiling / {self.selftest.params.factor}'})"})
        limited = [r for r in reps if getattr(r, "tester_limited", False)]
        if limited:
            lim = min(r.tester_limit_pps for r in limited)
            flags.append({"code": "tester_limited",
                          "message": f"the tester could not offer some loads (reached {lim:.0f} fps); "
                                     "those trials were invalid, not DUT loss: the DUT may be faster"})
        bad = sum(1 for r in self.rec.records if r["method_index"] == mi and r["frame_size"] == frame.label
                  and not r["counts"]["valid"])
        if bad and not limited:
            flags.append({"code": "invalid_trials", "message": f"{bad} trial(s) were invalid (tester-side) and not used"})
        if lr.source == "nominal":
            flags.append({"code": "nominal_line_rate", "message": f"line rate is {lr.label}"})
        rfc_s = {"rfc2544_throughput": 60, "rfc2544_latency": 120, "rfc2544_frame_loss": 60}.get(m.name)
        d = getattr(m.params, "duration_s", None)
        if rfc_s and d is not None and d < rfc_s:
            flags.append({"code": "short_trials", "message": f"{d:g} s trials (RFC 2544 asks for {rfc_s} s)"})
        if not complete:
            flags.append({"code": "incomplete", "message": "not all repetitions finished"})
        return flags

    def _summary(self) -> list[dict]:
        out = []
        for mi, m in enumerate(self.config.methods):
            results = []
            for frame in self.config.frames.sizes:
                reps = self.results.get(mi, {}).get(frame.label)
                if reps is None:
                    continue
                complete = (mi, frame.label) in self.complete_keys
                keys = sorted({k for r in reps for k in r.stats_values()})
                head = median(r.headline_pps for r in reps)
                results.append({
                    "frame_size": frame.label, "complete": complete,
                    "repetitions": [r.to_dict() for r in reps],
                    "stats": {k: summarize(r.stats_values().get(k) for r in reps) for k in keys},
                    "headline": rate_object(head, frame, self.line_rate) if head is not None else None,
                    "flags": self._flags(mi, m, frame, reps, complete),
                })
            out.append({"method": m.name, "method_index": mi, "label": METHOD_LABELS[m.name],
                        "params": self.config.to_dict()["methods"][mi][m.name], "results": results})
        return out

    def _verdicts(self, summary: list[dict]) -> list[dict]:
        th = self.config.thresholds
        out = []
        for s in summary:
            for r in s["results"]:
                if th.min_throughput_pct is not None and s["method"] in ("rfc2544_throughput", "mlrsearch") and r["headline"]:
                    v = r["headline"]["pct_line_rate"]
                    out.append({"check": "min_throughput_pct", "method_index": s["method_index"],
                                "frame_size": r["frame_size"], "threshold": th.min_throughput_pct, "value": v,
                                "passed": v >= th.min_throughput_pct})
                if th.max_latency_ns is not None and s["method"] == "rfc2544_latency":
                    v = r["stats"].get("worst_case_ns", {}).get("median")
                    out.append({"check": "max_latency_ns", "method_index": s["method_index"],
                                "frame_size": r["frame_size"], "threshold": th.max_latency_ns, "value": v,
                                "passed": v is not None and v <= th.max_latency_ns})
                if th.max_loss_ratio is not None and s["method"] == "iperf":
                    v = median(x["loss_ratio"] for x in r["repetitions"])
                    out.append({"check": "max_loss_ratio", "method_index": s["method_index"],
                                "frame_size": r["frame_size"], "threshold": th.max_loss_ratio, "value": v,
                                "passed": v is not None and v <= th.max_loss_ratio})
        return out

    def _document(self, complete: bool, reason: str | None) -> dict:
        lr = self.line_rate
        summary = self._summary() if lr is not None else []
        flags = []
        if lr is not None and lr.source == "nominal":
            flags.append({"code": "nominal_line_rate", "message": f"line rate is {lr.label}"})
        if self.selftest is not None and not self.selftest.passed:
            flags.append({"code": "above_selftest_ceiling",
                          "message": "the self-test could not prove every rate this run uses; results above "
                                     "the proven ceilings are flagged"})
        return {
            "schema_version": SCHEMA_VERSION, "tool": "netrig", "tool_version": _tool_version(),
            "run_id": self.run_id, "command": self.command, "complete": complete, "interrupted_reason": reason,
            "started_at": self.started_at, "finished_at": utc_now(), "resumed": self.resumed,
            "environment": self.environment, "testbed": self.testbed,
            "line_rate": lr.to_dict() if lr else None,
            "frame_sizes": [f.to_dict(lr) for f in self.config.frames.sizes] if lr else [],
            "config": self.config.to_dict(),
            "selftest": self.selftest.to_dict() if self.selftest else None,
            "trials": list(getattr(self, "rec", None).records if hasattr(self, "rec") else []),
            "summary": summary, "verdicts": self._verdicts(summary), "flags": flags,
        }


def _comparable(cfg: dict | None) -> dict | None:
    if cfg is None:
        return None
    c = dict(cfg)
    c.pop("output", None)
    try:  # normalise through the validator so older/newer spellings compare equal
        return config_from_dict({**c}).to_dict() | {"output": None}
    except NetrigError:
        return c


def _tool_version() -> str:
    try:
        from netrig import __version__

        return str(__version__)
    except ImportError:
        try:
            from importlib.metadata import version

            return version("netrig")
        except Exception:
            return "unknown"


def run_config(config: TestConfig, out_dir: str | Path | None = None, **kw) -> dict:
    """Convenience: ``Runner(config, out_dir, **kw).run()``."""
    return Runner(config, out_dir, **kw).run()
