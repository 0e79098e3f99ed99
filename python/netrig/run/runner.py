"""Running a configured test: self-test, then every method × frame size × repetition, recording
every trial as it finishes, and building the result document (``docs/result-format.md``).

Data flow: config → :func:`netrig.run.session.open_session` (the DUT's session, and the
self-test's) → a :class:`RecordingMeasurer` around the session's measurer → each configured
method's ``run`` (from the registry) per frame size and repetition → typed results → the summary,
flags and verdicts of the result document, written with every trial record.

Resume: methods are deterministic given the sequence of trial results, so a resumed run asks for
the same trials in the same order; :class:`RecordingMeasurer` answers a request whose key and load
match a recorded trial from the record, and measures everything else.
"""
from __future__ import annotations

import contextlib
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from netrig._native import __version__
from netrig.errors import InterruptedTrial, NetrigError, ResultError
from netrig.methodology.method import THRESHOLDS, Context, MethodResult
from netrig.methodology.selftest import SelftestParams, SelftestResult, prove_rate
from netrig.methodology.stats import median, summarize
from netrig.methods import REGISTRY
from netrig.model import FrameSize, LineRate, rate_object
from netrig.results import (
    SCHEMA_VERSION,
    TrialLog,
    dumps,
    read_trial_log,
    utc_now,
    write_result,
)
from netrig.run.config import MethodConfig, TestConfig, config_from_dict
from netrig.run.recording import ProgressFn, RecordingMeasurer
from netrig.run.session import Provider, Session, open_session

#: How the self-test's trials are labelled.
SELFTEST_LABEL = "RFC 8219 self-test"
#: Codes of flags the console summary leaves out (they are in every veth result).
QUIET_FLAGS = ("nominal_line_rate", "short_trials")


class Runner:
    """Runs a :class:`TestConfig` into ``out_dir``; ``resume=True`` continues an earlier run there."""

    def __init__(self, config: TestConfig, out_dir: str | Path | None = None, *, resume: bool = False,
                 provider: Provider | None = None, progress: ProgressFn | None = None, command: str = ""):
        self.config = config
        self.out_dir = Path(out_dir or config.output.dir)
        self.resume = resume
        self.provider: Provider = provider or open_session
        self.progress: ProgressFn = progress or (lambda e, i: None)
        self.command = command
        self.results: dict[int, dict[Any, list[MethodResult]]] = {}
        self.complete_keys: set[tuple[int, Any]] = set()
        self.selftest: SelftestResult | None = None
        self.line_rate: LineRate | None = None
        self.testbed: dict = {}
        self.environment: dict = {}
        self.simulated = False
        self.document: dict = {}
        self.run_id = uuid.uuid4().hex
        self.started_at = utc_now()
        self.resumed: list[str] = []
        self.rec: RecordingMeasurer | None = None

    # ---------------------------------------------------------------- main entry
    def run(self) -> dict:
        cfg = self.config
        cfg_dict = cfg.to_dict()
        replay: dict[str, dict] = {}
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
                  "started_at": self.started_at, "tool_version": __version__})
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
        except (KeyboardInterrupt, InterruptedTrial):
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
                (self.out_dir / "config.json").write_text(dumps(self.config.to_dict()))
        return self.document

    def _recorder(self) -> RecordingMeasurer:
        assert self.rec is not None, "run() creates the recorder first"
        return self.rec

    def _line_rate(self) -> LineRate:
        assert self.line_rate is not None, "a session sets the line rate first"
        return self.line_rate

    def _setup(self, session: Session) -> None:
        self.line_rate = session.line_rate
        self._recorder().line_rate = session.line_rate
        self.testbed, self.environment = session.testbed, session.environment
        self.simulated = session.simulated
        self.progress("run_start", {"total_trials": self._estimate_total(), "line_rate": session.line_rate,
                                    "out_dir": str(self.out_dir)})

    def _run_dut(self, cfg: TestConfig) -> None:
        rec = self._recorder()
        with self.provider(cfg, "dut") as dut:
            self._setup(dut)
            if cfg.selftest.enabled:
                with self.provider(cfg, "selftest") as st:
                    rec.inner = st.measurer
                    self._run_selftest()
            rec.inner = dut.measurer
            for mi, m in enumerate(cfg.methods):
                self._run_method(mi, m)

    # ---------------------------------------------------------------- self-test
    def _required_rates(self) -> dict[Any, float]:
        """Per frame size: the highest rate the run will use (the self-test proves factor × it)."""
        cfg, lr = self.config, self._line_rate()
        out = {}
        for f in cfg.frames.sizes:
            if cfg.selftest.rates_pps:
                out[f.label] = max(cfg.selftest.rates_pps)
                continue
            top = max((m.method.top_rate_pct(m.params) for m in cfg.methods), default=0.0)
            out[f.label] = lr.fps(f) * top / 100
        return out

    def _run_selftest(self) -> None:
        rec, st = self._recorder(), self.config.selftest
        params = SelftestParams(st.factor, st.duration_s or self.config.trial.duration_s, st.resolution_pct)
        req = self._required_rates()
        ceilings = []
        for f in self.config.frames.sizes:
            rec.begin("selftest", -1, f, 0, SELFTEST_LABEL)
            first = len(rec.records)
            c = prove_rate(rec, f, self._line_rate(), req[f.label], params)
            keys = tuple(r["key"] for r in rec.records[first:])
            ceilings.append(replace(c, trial_keys=keys))
        self.selftest = SelftestResult(params, st.testbed, tuple(ceilings))

    # ---------------------------------------------------------------- methods
    def _throughput_for(self, mi: int, frame: FrameSize, src: int | None) -> float | None:
        """The throughput an earlier method found at ``frame`` (method ``src``, else the latest)."""
        idxs = [src] if src is not None else list(range(mi - 1, -1, -1))
        for j in idxs:
            if not self.config.methods[j].method.provides_throughput:
                continue
            reps = self.results.get(j, {}).get(frame.label)
            if reps:
                return median(r.headline_pps for r in reps)
        return None

    def _run_method(self, mi: int, m: MethodConfig) -> None:
        cfg, rec = self.config, self._recorder()
        reps = cfg.repetitions_for(m)
        self.progress("method_start", {"method": m.name, "label": m.label, "method_index": mi})
        self.results.setdefault(mi, {})
        for frame in cfg.frames.sizes:
            self.results[mi].setdefault(frame.label, [])
            for rep in range(reps):
                rec.begin(m.name, mi, frame, rep, m.label)
                self.results[mi][frame.label].append(self._one(mi, m, frame))
            self.complete_keys.add((mi, frame.label))

    def _one(self, mi: int, m: MethodConfig, frame: FrameSize) -> MethodResult:
        ctx = Context(self._recorder(), frame, self._line_rate(), self.config.trial.duration_s,
                      simulated_dut=self.simulated)
        if m.method.needs_throughput:
            tp = self._throughput_for(mi, frame, getattr(m.params, "throughput_from", None))
            if tp is None or tp <= 0:
                tp = REGISTRY.primary.default_throughput(ctx)
            ctx = replace(ctx, throughput_pps=tp)
        return m.method.run(m.params, ctx)

    # ---------------------------------------------------------------- document
    def _estimate_total(self) -> int:
        n = 0
        lr = self._line_rate()
        for m in self.config.methods:
            for f in self.config.frames.sizes:
                n += m.method.estimate_trials(m.params, f, lr.fps(f)) * self.config.repetitions_for(m)
        if self.config.selftest.enabled:
            n += len(self.config.frames.sizes)
        return n

    def _flags(self, mi: int, m: MethodConfig, frame: FrameSize, reps: list[MethodResult],
               complete: bool) -> list[dict]:
        flags = []
        lr = self._line_rate()
        head = median(r.headline_pps for r in reps)
        if self.selftest is not None and head is not None and self.selftest.is_above(frame, head):
            lim = self.selftest.limit_pps(frame)
            proved = "nothing" if lim is None else f"{lim:.0f} fps = ceiling / {self.selftest.params.factor}"
            flags.append({"code": "above_selftest_ceiling",
                          "message": f"{head:.0f} fps is above what the self-test proved for {frame} ({proved})"})
        limited = [r for r in reps if getattr(r, "tester_limited", False)]
        if limited:
            lim = min(getattr(r, "tester_limit_pps", None) or 0.0 for r in limited)
            flags.append({"code": "tester_limited",
                          "message": f"the tester could not offer some loads (reached {lim:.0f} fps); "
                                     "those trials were invalid, not DUT loss: the DUT may be faster"})
        bad = sum(1 for r in self._recorder().records if r["method_index"] == mi and r["frame_size"] == frame.label
                  and not r["counts"]["valid"])
        if bad and not limited:
            flags.append({"code": "invalid_trials",
                          "message": f"{bad} trial(s) were invalid (tester-side) and not used"})
        bunched = [p for r in self._recorder().records if r["method_index"] == mi and r["frame_size"] == frame.label
                   and (p := r["counts"].get("pacing") or {}).get("bunched")]
        if bunched:
            worst = max(p.get("peak_ratio") or 0.0 for p in bunched)
            tol = max(p.get("tolerance_pct") or 0.0 for p in bunched)
            flags.append({"code": "bursty_offered_load",
                          "message": f"{len(bunched)} trial(s) offered up to {worst:.2f}x the intended frames in "
                                     f"1 ms (tolerance {tol:g} %): the DUT saw bursts from the tester, and its loss "
                                     "in them may be the tester's doing (see the trials' pacing)"})
        if lr.source == "nominal":
            flags.append({"code": "nominal_line_rate", "message": f"line rate is {lr.label}"})
        rfc_s = m.method.rfc_duration_s
        d = getattr(m.params, "duration_s", None)
        if rfc_s and d is not None and d < rfc_s:
            flags.append({"code": "short_trials", "message": f"{d:g} s trials (RFC 2544 asks for {rfc_s:g} s)"})
        if not complete:
            flags.append({"code": "incomplete", "message": "not all repetitions finished"})
        return flags

    def _summary(self) -> list[dict]:
        out = []
        params = self.config.to_dict()["methods"]
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
                    "headline": rate_object(head, frame, self._line_rate()) if head is not None else None,
                    "flags": self._flags(mi, m, frame, reps, complete),
                })
            out.append({"method": m.name, "method_index": mi, "label": m.label, "params": params[mi][m.name],
                        "results": results})
        return out

    def _verdicts(self, summary: list[dict]) -> list[dict]:
        th = self.config.thresholds
        out = []
        for s in summary:
            method = REGISTRY.get(s["method"])
            for r in s["results"]:
                values = method.verdict_values(r)
                for check, (metric, kind) in THRESHOLDS.items():
                    threshold = getattr(th, check)
                    if threshold is None or metric not in values:
                        continue
                    v = values[metric]
                    passed = v is not None and (v >= threshold if kind == "min" else v <= threshold)
                    out.append({"check": check, "method_index": s["method_index"], "frame_size": r["frame_size"],
                                "threshold": threshold, "value": v, "passed": passed})
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
            "schema_version": SCHEMA_VERSION, "tool": "netrig", "tool_version": __version__,
            "run_id": self.run_id, "command": self.command, "complete": complete, "interrupted_reason": reason,
            "started_at": self.started_at, "finished_at": utc_now(), "resumed": self.resumed,
            "environment": self.environment, "testbed": self.testbed,
            "line_rate": lr.to_dict() if lr else None,
            "frame_sizes": [f.to_dict(lr) for f in self.config.frames.sizes] if lr else [],
            "config": self.config.to_dict(),
            "selftest": self.selftest.to_dict() if self.selftest else None,
            "trials": list(self.rec.records) if self.rec is not None else [],
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


def run_config(config: TestConfig, out_dir: str | Path | None = None, **kw: Any) -> dict:
    """Convenience: ``Runner(config, out_dir, **kw).run()``."""
    return Runner(config, out_dir, **kw).run()
