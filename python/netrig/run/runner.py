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
import json
import uuid
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from netrig._native import __version__
from netrig.errors import INTERRUPTS, ConfigError, InterruptedTrial, NetrigError, ResultError, interrupt_reason
from netrig.measure import TrialCounts
from netrig.measure.events import CommandRunner
from netrig.methodology.method import STACK_FRAME, THRESHOLDS, Context, MethodResult, partial_result
from netrig.methodology.selftest import SelftestParams, SelftestResult, prove_rate
from netrig.methodology.stats import median, summarize
from netrig.methodology.tester import Verdict, proven_limit
from netrig.methods import REGISTRY
from netrig.model import FrameSize, LineRate, format_pps, rate_object
from netrig.results import (
    CONFIG_FILE,
    RESULT_FILE,
    SCHEMA_VERSION,
    TRIAL_LOG,
    TrialLog,
    dumps,
    read_text,
    read_trial_log,
    utc_now,
    write_result,
    write_text_atomic,
)
from netrig.run import consistency
from netrig.run.config import MethodConfig, TestConfig, config_from_dict
from netrig.run.progress import (
    MethodResultUpdate,
    MethodStart,
    Notice,
    ProgressFn,
    RunEnd,
    RunStart,
    TrialProgress,
    ignore,
)
from netrig.run.recording import RecordingMeasurer
from netrig.run.records import LogHeader, RecordedInterval, RecordedTrial, read_log
from netrig.run.session import Provider, Session, open_session
from netrig.trial import Snapshot
from netrig.view.frame_results import read_summary
from netrig.view.trial_record import read_trials

#: How the self-test's trials are labelled.
SELFTEST_LABEL = "RFC 8219 self-test"
#: Codes of flags the console summary leaves out (they are in every veth result).
QUIET_FLAGS = ("nominal_line_rate", "short_trials")
#: The flag of a method that needs a throughput where the run's throughput method found none.
NO_THROUGHPUT = "no_throughput"


class Runner:
    """Runs a :class:`TestConfig` into ``out_dir``; ``resume=True`` continues an earlier run there."""

    def __init__(self, config: TestConfig, out_dir: str | Path | None = None, *, resume: bool = False,
                 provider: Provider | None = None, progress: ProgressFn | None = None, command: str = ""):
        self.config = config
        self.out_dir = Path(out_dir or config.output.dir)
        self.resume = resume
        self.provider: Provider = provider or open_session
        self.progress: ProgressFn = progress or ignore
        self.command = command
        self.results: dict[int, dict[Any, list[MethodResult]]] = {}
        self.complete_keys: set[tuple[int, Any]] = set()
        #: Results of repetitions an error or Ctrl-C stopped mid-way (kept, never summarised).
        self.partials: dict[int, dict[Any, list[MethodResult]]] = {}
        #: Why a method that needs a throughput did not run at a frame size (:class:`NoThroughput`).
        self.no_throughput: dict[tuple[int, Any], str] = {}
        self.selftest: SelftestResult | None = None
        self.line_rate: LineRate | None = None
        self.testbed: dict = {}
        self.environment: dict = {}
        self.simulated = False
        self.dut_can_hold_sender = True
        self.document: dict = {}
        self.run_id = uuid.uuid4().hex
        self.started_at = utc_now()
        self.resumed: list[str] = []
        self.rec: RecordingMeasurer | None = None
        #: Run-wide flags found while running (a repaired trial log).
        self.notices: list[dict] = []
        #: Environment for user commands (the reset command): the DUT session's test bed parts, and
        #: its DUT namespace (where they run).
        self.command_env: dict[str, str] = {}
        self.dut_netns: str | None = None
        #: Why the DUT shares the tester's CPUs (``Session.dut_shares_cpu``).
        self.dut_shares_cpu: str | None = None
        #: The run finished every planned trial (set when it ends).
        self.complete = False
        #: The result document could not be written (disk full): why.
        self.write_error: ResultError | None = None
        #: Trials measured (not replayed) by this run.
        self.measured = 0

    # ---------------------------------------------------------------- main entry
    def run(self) -> dict:
        """Run (or resume) the test; returns the result document.

        Nothing finished is lost however the run ends: ``config.json`` and the trial log's header
        are written before the first trial, every trial is fsync'd as it finishes, a torn last
        line (``kill -9``) is removed on resume, and Ctrl-C, SIGTERM, errors and a full disk all
        leave a partial ``result.json`` (when it can be written) and a run that ``netrig run
        --resume DIR`` continues. A run that fails before its first trial leaves nothing behind
        (the next run may use the directory)."""
        cfg = self.config
        cfg_dict = cfg.to_dict()
        replay: dict[str, RecordedTrial] = {}
        intervals: list[RecordedInterval] = []
        fresh = False
        if self.resume:
            header, recs, intervals = read_log(self.out_dir)
            if header is None:
                raise ResultError(f"{self.out_dir}: the trial log has no header; cannot resume")
            if _comparable(header.config) != _comparable(cfg_dict):
                raise ResultError(f"{self.out_dir}: the run there used a different configuration; "
                                  "resume with the same config file, or start a new run with --out")
            self.run_id = header.run_id or self.run_id
            self.started_at = header.started_at or self.started_at
            self.resumed = [*header.resumed, utc_now()]
            replay = {r.key: r for r in recs}
        elif (self.out_dir / TRIAL_LOG).exists():
            if _holds_trials(self.out_dir):
                raise ResultError(f"{self.out_dir}: already holds a run; continue it with "
                                  f"`netrig run --resume {self.out_dir}` or choose another --out directory")
            fresh = True  # a run that stopped before its first trial: nothing to keep
        created = not self.out_dir.exists()
        log = TrialLog(self.out_dir)
        self.rec = RecordingMeasurer(log, replay, LineRate(1.0), self.progress, intervals)
        try:
            log.open({"schema_version": SCHEMA_VERSION, "run_id": self.run_id, "config": cfg_dict,
                      "started_at": self.started_at, "tool_version": __version__}, fresh=fresh)
        except ResultError as e:  # e.g. a full disk: nothing of this run may stay behind
            self._finish(False, str(e), e, created)
            raise
        complete, reason = False, None
        failure: BaseException | None = None
        try:
            if not self.resume or not (self.out_dir / CONFIG_FILE).exists():
                write_text_atomic(self.out_dir / CONFIG_FILE, dumps(cfg_dict, indent=1) + "\n")
            if log.repaired:
                self.notices.append({"code": "trial_log_repaired", "message": log.repaired})
                self.progress(Notice(log.repaired))
            if not cfg.methods:  # self-test only
                with self.provider(cfg, "selftest") as st:
                    self._setup(st)
                    self._use(st)
                    self._run_selftest(st.testbed_name or cfg.selftest.testbed)
            else:
                self._run_dut(cfg)
            complete = True
        except (*INTERRUPTS, InterruptedTrial) as e:
            reason, failure = interrupt_reason(e), e
            raise
        except NetrigError as e:
            reason, failure = str(e), e
            raise
        except OSError as e:  # outside the engine and the stores: still one line, still resumable
            reason = f"{e.strerror or e}" + (f": {e.filename}" if e.filename else "")
            failure = ResultError(reason)
            raise failure from None
        except BaseException as e:
            reason, failure = f"internal error: {type(e).__name__}: {e}", e
            raise
        finally:
            log.close()
            self._finish(complete, reason, failure, created)
            self.progress(RunEnd(complete, reason))
        return self.document

    def _finish(self, complete: bool, reason: str | None, failure: BaseException | None, created: bool) -> None:
        """Write the result document, or, for a new run that ended before its first trial, remove
        what it created (an interrupted one keeps its header: it resumes). Never raises over
        ``failure`` (the reason the run ended): a result that cannot be written (disk full) is said
        in ``self.write_error``; with no failure, it raises."""
        rec = self._recorder()
        self.measured, self.complete = rec.measured, complete
        interrupted = isinstance(failure, (*INTERRUPTS, InterruptedTrial))
        if failure is not None and self.resume and not rec.records:
            self.document = {}  # nothing replayed yet: the earlier result.json stays as it was
            return
        if failure is not None and not interrupted and not self.resume and not rec.records:
            for name in (TRIAL_LOG, CONFIG_FILE, RESULT_FILE):
                with contextlib.suppress(OSError):
                    (self.out_dir / name).unlink()
            if created:
                with contextlib.suppress(OSError):
                    self.out_dir.rmdir()
            self.document = {}
            return
        self.document = self._document(complete, reason)
        try:
            write_result(self.out_dir, self.document)
        except ResultError as e:
            self.write_error = e
            if failure is None:
                raise

    @property
    def finished_trials(self) -> int:
        """Trials finished (measured or replayed) so far: the records the run keeps."""
        return len(self.rec.records) if self.rec is not None else 0

    @property
    def resumable(self) -> bool:
        """The run stopped early and left a trial log that ``--resume`` continues."""
        if self.rec is None:  # refused before it started (its input was checked first)
            return False
        return self.resume or (bool(self.document) and not self.complete)

    def _use(self, session: Session) -> None:
        """Measure with ``session`` from now on (its measurer, test-bed check and command environment)."""
        rec = self._recorder()
        rec.inner = session.measurer
        rec.before = session.before_trial
        rec.after = session.after_trial
        self.command_env, self.dut_netns = dict(session.command_env), session.dut_netns
        session.watch(self._snapshot)

    def _snapshot(self, snap: Snapshot) -> None:
        """The trial in progress, live (the engine's snapshot): a ``trial_progress`` event."""
        self.progress(TrialProgress(snap.phase, snap.elapsed_s, snap.tx_frames, snap.rx_frames))

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
        self.dut_shares_cpu = session.dut_shares_cpu
        self.simulated = session.simulated
        self.dut_can_hold_sender = session.dut_can_hold_sender
        if session.shared_testbed:
            other = "another run held it" if session.shared_with else "no other run held it yet"
            self.notices.append({"code": "shared_testbed",
                                 "message": f"measured on a test bed shared on purpose (testbed.shared; {other} when "
                                            "this one started): a trial that saw another run's frames counts them as "
                                            "stray and is invalid"})
        self.progress(RunStart(self.config.name or self.run_id, self.run_id, str(self.out_dir), self._estimate_total(),
                               len(self.resumed), session.line_rate))

    def _run_dut(self, cfg: TestConfig) -> None:
        with self.provider(cfg, "dut") as dut:
            self._setup(dut)
            if cfg.selftest.enabled and any(m.method.stack_kind is None for m in cfg.methods):
                # The self-test proves the tester as it measures the DUT: on the same CPUs.
                cpus = dut.tester_cpus
                st_cfg = replace(cfg, ports=replace(cfg.ports, tx_cpus=cpus.tx, rx_cpus=cpus.rx)) if cpus else cfg
                with self.provider(st_cfg, "selftest") as st:
                    self._use(st)
                    self._run_selftest(st.testbed_name or st_cfg.selftest.testbed)
            self._use(dut)
            for mi, m in enumerate(cfg.methods):
                self._run_method(mi, m)

    # ---------------------------------------------------------------- self-test
    def _required_rates(self) -> dict[Any, float]:
        """Per frame size: the highest rate the run will use (the self-test proves factor × it); the
        line rate when nothing names one (``netrig selftest`` without ``--rates``: the search then
        finds the highest proven rate)."""
        cfg, lr = self.config, self._line_rate()
        out = {}
        for f in cfg.frames.sizes:
            if cfg.selftest.rates_pps:
                out[f.label] = max(cfg.selftest.rates_pps)
                continue
            out[f.label] = max((m.method.top_rate_pps(m.params, f, lr) for m in cfg.methods
                                if m.method.stack_kind is None), default=lr.fps(f))
        return out

    def _selftest_trial_s(self) -> float:
        """How long each self-test trial lasts: ``selftest.duration_s`` when given, else the longest
        trial at a rate of the run's methods (``Method.selftest_trial_s``; the trial duration for a
        method that names none) — never longer than the run's own trials (a soak's one trial lasts
        hours: its interval counts)."""
        cfg = self.config
        if cfg.selftest.duration_s:
            return cfg.selftest.duration_s
        return max((m.method.selftest_trial_s(m.params) or cfg.trial.duration_s for m in cfg.methods
                    if m.method.stack_kind is None), default=cfg.trial.duration_s)

    def _run_selftest(self, testbed: str) -> None:
        rec, st = self._recorder(), self.config.selftest
        params = SelftestParams(st.factor, self._selftest_trial_s(), st.resolution_pct)
        req = self._required_rates()
        ceilings = []
        for f in self.config.frames.sizes:
            rec.begin("selftest", -1, f, 0, SELFTEST_LABEL)
            first = len(rec.records)
            c = prove_rate(rec, f, self._line_rate(), req[f.label], params)
            keys = tuple(rec.keys[first:])
            ceilings.append(replace(c, trial_keys=keys))
        self.selftest = SelftestResult(params, testbed, tuple(ceilings))

    # ---------------------------------------------------------------- methods
    def _throughput_for(self, mi: int, frame: FrameSize, src: int | None) -> tuple[float | None, str | None]:
        """The throughput an earlier method found at ``frame`` (method ``src``, else the latest),
        and, when that method ran there and found none, why (``(None, None)``: none ran)."""
        idxs = [src] if src is not None else list(range(mi - 1, -1, -1))
        for j in idxs:
            m = self.config.methods[j]
            if not m.method.provides_throughput:
                continue
            reps = self.results.get(j, {}).get(frame.label)
            if reps:
                tp = median(r.headline_pps for r in bracketed(reps))
                reasons = sorted({getattr(r, "not_measured", None) or "no rate" for r in reps})
                return tp, f"no throughput to measure at: {m.label} (method {j}) found none ({'; '.join(reasons)})"
        return None, None

    def _run_method(self, mi: int, m: MethodConfig) -> None:
        cfg, rec = self.config, self._recorder()
        reps = cfg.repetitions_for(m)
        self.progress(MethodStart(m.name, m.label, mi))
        self.results.setdefault(mi, {})
        for frame in frames_of(cfg, m):
            self.results[mi].setdefault(frame.label, [])
            for rep in range(reps):
                rec.begin(m.name, mi, frame, rep, m.label)
                try:
                    result = self._one(mi, m, frame)
                    self.results[mi][frame.label].append(result)
                    self._publish(m, frame, result)
                except NoThroughput as e:
                    self.no_throughput[(mi, frame.label)] = str(e)
                    self.progress(Notice(f"{m.label} at {frame}: not measured: {e}"))
                    break
                except BaseException as e:
                    if (partial := partial_result(e)) is not None:
                        self.partials.setdefault(mi, {}).setdefault(frame.label, []).append(partial)
                    raise
            self.complete_keys.add((mi, frame.label))

    def _publish(self, m: MethodConfig, frame: FrameSize, result: MethodResult) -> None:
        """A method's result (live, or a repetition's end): a ``method_result`` event."""
        self.progress(MethodResultUpdate(m.name, frame.label, result))

    def _one(self, mi: int, m: MethodConfig, frame: FrameSize) -> MethodResult:
        limit = self.selftest.limit_pps(frame) if self.selftest is not None and m.method.stack_kind is None else None
        ctx = Context(self._recorder(), frame, self._line_rate(), self.config.trial.duration_s,
                      simulated_dut=self.simulated, command_env=self.command_env,
                      tester_limit_pps=limit, notify=lambda msg: self.progress(Notice(msg)),
                      dut_can_hold_sender=self.dut_can_hold_sender,
                      publish=lambda result: self._publish(m, frame, result))
        if m.method.needs_throughput or m.method.uses_throughput:
            tp, why = self._throughput_for(mi, frame, getattr(m.params, "throughput_from", None))
            if (tp is None or tp <= 0) and m.method.needs_throughput:
                if why is not None:  # never a search of its own beside the user's, with other bounds
                    raise NoThroughput(why)
                tp = REGISTRY.primary.default_throughput(ctx)
            ctx = replace(ctx, throughput_pps=tp)
        events = self.config.trial.events
        if not events or m.method.event_trials is None:
            return m.method.run(m.params, ctx)
        env = self.command_env
        runner = CommandRunner(self.dut_netns, env, self.config.trial.event_timeout_s)
        with self._recorder().events_for(events, m.method.event_trials, runner):
            return m.method.run(m.params, ctx)

    # ---------------------------------------------------------------- document
    def _estimate_total(self) -> int:
        n = 0
        lr = self._line_rate()
        for m in self.config.methods:
            for f in frames_of(self.config, m):
                n += m.method.estimate_trials(m.params, f, lr.fps(f)) * self.config.repetitions_for(m)
        if self.config.selftest.enabled and any(m.method.stack_kind is None for m in self.config.methods):
            n += len(self.config.frames.sizes)
        return n

    def _flags(self, mi: int, m: MethodConfig, frame: FrameSize, reps: list[MethodResult],
               complete: bool) -> list[dict]:
        flags = []
        if (why := self.no_throughput.get((mi, frame.label))) is not None:
            flags.append({"code": NO_THROUGHPUT, "message": f"not measured: {why}"})
        lr = self._line_rate()
        head = median(r.headline_pps for r in bracketed(reps))
        if self.selftest is not None and head is not None and self.selftest.is_above(frame, head):
            lim = self.selftest.limit_pps(frame)
            proved = "nothing" if lim is None else f"{lim:.0f} fps = ceiling / {self.selftest.params.factor}"
            flags.append({"code": "above_selftest_ceiling",
                          "message": f"{head:.0f} fps is above what the self-test proved for {frame} ({proved})"})
        limited = [r for r in reps if getattr(r, "tester_limited", False)]
        flags.extend(_limited_flags(reps, head))
        flags.extend(_coarse_flag(reps, m.params, head))
        pressed = [r for r in reps if getattr(r, "backpressure_trials", 0)]
        if pressed:
            bp = max(getattr(r, "backpressure_pps", None) or 0.0 for r in pressed)
            n = sum(getattr(r, "backpressure_trials", 0) for r in pressed)
            ceiling = self.selftest.ceiling_for(frame) if self.selftest is not None else None
            proven = format_pps(ceiling.proven_rate_pps if ceiling else 0.0)
            flags.append({"code": "dut_backpressure",
                          "message": f"the DUT slowed the sender in {n} trial(s): the tester reached only "
                                     f"{format_pps(bp)} through it although the self-test proved {proven} "
                                     "(on veth the DUT's forwarding runs on the sender's CPU); those loads count "
                                     "as the DUT's failure, and the result is what it forwarded without loss "
                                     "below them"})
        mine = [r for r in read_trials(self._recorder().records)
                if r.method_index == mi and r.frame_size == frame.label]
        bad = sum(1 for r in mine if r.counts is not None and not r.counts.valid
                  and r.verdict != Verdict.BACKPRESSURE.value)
        if bad and not limited:
            flags.append({"code": "invalid_trials",
                          "message": f"{bad} trial(s) were invalid (tester-side) and not used"})
        flags.extend(unpinned_flag(r.counts for r in mine if r.counts is not None))
        bunched = [p for r in mine if (p := r.pacing) is not None and p.bunched]
        if bunched:
            worst = max(p.peak_ratio or 0.0 for p in bunched)
            tol = max(p.tolerance_pct for p in bunched)
            flags.append({"code": "bursty_offered_load",
                          "message": f"{len(bunched)} trial(s) offered up to {worst:.2f}x the intended frames in "
                                     f"1 ms (tolerance {tol:g} %): the DUT saw bursts from the tester, and its loss "
                                     "in them may be the tester's doing (see the trials' pacing)"})
        events = self.config.trial.events
        if events and m.method.event_trials is not None:
            cmds = "; ".join(f"{e.command!r} at {e.at_s:g} s" for e in events)
            flags.append({"code": "events_under_load",
                          "message": f"every {m.method.event_trials} trial ran {len(events)} event(s) ({cmds}): "
                                     "its counts include what they cost (see Events under load)"})
        if lr.source == "nominal" and m.method.stack_kind is None:
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
        for mi, m in enumerate(self.config.methods):
            results = []
            for frame in frames_of(self.config, m):
                reps = self.results.get(mi, {}).get(frame.label)
                if reps is None:
                    continue
                complete = (mi, frame.label) in self.complete_keys
                keys = sorted({k for r in reps for k in r.stats_values()})
                head = median(r.headline_pps for r in bracketed(reps))
                partial = [{**r.to_dict(), "complete": False} for r in self.partials.get(mi, {}).get(frame.label, [])]
                results.append({
                    "frame_size": frame.label, "complete": complete,
                    "repetitions": [r.to_dict() for r in reps] + partial,
                    "stats": {k: summarize(r.stats_values().get(k) for r in bracketed(reps)) for k in keys},
                    "headline": rate_object(head, frame, self._line_rate()) if head is not None else None,
                    "flags": self._flags(mi, m, frame, reps, complete),
                })
            out.append({"method": m.name, "method_index": mi, "label": m.label, "params": m.params_dict(),
                        "results": results})
        consistency.annotate(out, self._recorder().records if self.rec is not None else [])
        return out

    def _verdicts(self, summary: list[dict]) -> list[dict]:
        th = self.config.thresholds
        out = []
        for s in read_summary(summary):
            method = REGISTRY.get(s.method)
            for r in s.results:
                values = method.verdict_values(dict(r.stored))
                for check, (metric, kind) in THRESHOLDS.items():
                    threshold = getattr(th, check)
                    if threshold is None or metric not in values:
                        continue
                    v = values[metric]
                    passed = v is not None and (v >= threshold if kind == "min" else v <= threshold)
                    out.append({"check": check, "method_index": s.method_index, "frame_size": r.frame_size,
                                "threshold": threshold, "value": v, "passed": passed})
        return out

    def _mark_backpressure(self) -> None:
        """Mark the invalid DUT trials that are the DUT's backpressure (``verdict``), by the same
        rule the methods applied (``ProvenLimit.verdict`` with the self-test's limit)."""
        if self.rec is None or self.selftest is None:
            return
        for r, t in zip(self.rec.records, read_trials(self.rec.records)):
            if (t.method_index if t.method_index is not None else -1) < 0 or t.kind != "rate" or t.counts is None \
                    or t.counts.valid or t.load.rate_pps is None:
                continue
            limit = proven_limit(self.selftest.limit_pps(FrameSize.parse(t.frame_size)), self.dut_can_hold_sender)
            if limit.verdict(t.counts, t.load.rate_pps) is Verdict.BACKPRESSURE:
                r["verdict"] = Verdict.BACKPRESSURE.value

    def _document(self, complete: bool, reason: str | None) -> dict:
        lr = self.line_rate
        self._mark_backpressure()
        summary = self._summary() if lr is not None else []
        flags = list(self.notices)
        if lr is not None and lr.source == "nominal" and any(m.method.stack_kind is None for m in self.config.methods):
            flags.append({"code": "nominal_line_rate", "message": f"line rate is {lr.label}"})
        shared = self.dut_shares_cpu
        if shared:  # a one-CPU machine: the DUT's numbers include the tester's share of the CPU
            flags.append({"code": "dut_shares_cpu", "message": f"{shared}: the DUT's capacity is what the tester "
                                                               "left it"})
        above = any("above_selftest_ceiling" in r.flag_codes for e in read_summary(summary) for r in e.results)
        if self.selftest is not None and not self.selftest.passed and above:
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


def unpinned_flag(counts: Iterable[TrialCounts]) -> list[dict]:
    """The ``unpinned_workers`` flag when trials of ``counts`` ran tester workers the kernel would
    not pin to their CPU (each failure said once, however many trials it recurred in)."""
    trials = list(counts)
    failures = sorted({f for c in trials for f in c.pin_failures})
    if not failures:
        return []
    n = sum(1 for c in trials if c.pin_failures)
    return [{"code": "unpinned_workers",
             "message": f"{n} trial(s) ran tester workers where the scheduler put them, not on the CPU they "
                        f"were placed on ({'; '.join(failures)}): their timing may share a CPU with other "
                        "work"}]


def frames_of(cfg: TestConfig, m: MethodConfig) -> list[FrameSize]:
    """The frame sizes method ``m`` runs at: the configured ones, or the stack's for a stack method."""
    return [STACK_FRAME] if m.method.stack_kind is not None else list(cfg.frames.sizes)


def _comparable(cfg: dict | None) -> dict | None:
    if cfg is None:
        return None
    c = dict(cfg)
    c.pop("output", None)
    try:  # normalise through the validator so older/newer spellings compare equal
        return config_from_dict({**c}).to_dict() | {"output": None}
    except NetrigError:
        return c


def _holds_trials(out_dir: Path) -> bool:
    """The trial log in ``out_dir`` holds at least one finished trial (or cannot be read)."""
    try:
        return bool(read_trial_log(out_dir)[1])
    except ResultError:
        return True


def resume_config(out_dir: str | Path) -> TestConfig:
    """The configuration of the run in ``out_dir``: its ``config.json``, else the header of its
    trial log (a run killed before ``config.json`` existed, or one whose ``config.json`` is gone)."""
    d = Path(out_dir)
    if not d.is_dir():
        raise ResultError(f"{d}: no such run directory (give the --out directory of the run to resume)")
    cfg_file = d / CONFIG_FILE
    if cfg_file.is_file():
        try:
            data = json.loads(read_text(cfg_file))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ResultError(f"{cfg_file}: cannot read: {getattr(e, 'strerror', None) or e}; remove it to "
                              "resume from the trial log's header") from None
        return _config_of(data, str(cfg_file))
    header, _ = read_trial_log(d)
    config = LogHeader.read(header).config if header is not None else None
    if config is None:
        raise ResultError(f"{d}: the trial log has no header with the run's configuration; cannot resume")
    return _config_of(config, f"{d / TRIAL_LOG} (header)")


def _config_of(data: object, source: str) -> TestConfig:
    if not isinstance(data, dict):
        raise ResultError(f"{source}: not a netrig configuration (not an object)")
    try:
        return config_from_dict(data)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e.field}", e.message) from None


def run_config(config: TestConfig, out_dir: str | Path | None = None, **kw: Any) -> dict:
    """Convenience: ``Runner(config, out_dir, **kw).run()``."""
    return Runner(config, out_dir, **kw).run()


#: A search that stopped with its bracket wider than this share of its answer is flagged ``coarse_resolution``.
COARSE_SHARE = 0.1


def _coarse_flag(reps: list[MethodResult], params: object, head: float | None) -> list[dict]:
    """``coarse_resolution`` when a search stopped with its bracket (from what passed to the lowest
    load the DUT failed, or to what the tester reached where it fell short) wider than
    :data:`COARSE_SHARE` of its answer: its resolution let it stop there (a percentage of a nominal
    10 Gbit/s line is 149 kfps at 64 B for each 1 %), and the throughput is known to no better."""
    widths = [(b - r.headline_pps, r) for r in reps if r.headline_pps and getattr(r, "resolution_pps", None)
              and (b := getattr(r, "upper_pps", None) or getattr(r, "tester_limit_pps", None)) is not None]
    width, r = max(widths, key=lambda w: w[0] / (w[1].headline_pps or 1), default=(0.0, None))
    if r is None or not head or width <= COARSE_SHARE * (r.headline_pps or 0.0):
        return []
    res, pct = getattr(r, "resolution_pps", None) or 0.0, getattr(params, "resolution_pct", None)
    fix = f"; resolution_pct = {pct * 0.01 * head / res:.2g} makes that 1 % of the answer" if pct else ""
    return [{"code": "coarse_resolution",
             "message": f"the search stopped with the throughput between {format_pps(r.headline_pps or 0.0)} and "
                        f"{format_pps((r.headline_pps or 0.0) + width)}, as its resolution ({format_pps(res)}) "
                        f"allows{fix}"}]


def _limited_flags(reps: list[MethodResult], head: float | None) -> list[dict]:
    """``tester_limited`` for the repetitions the tester bounded, ``platform_stopped`` for those
    whose search the host stopped (``platform``: a stall is never a ceiling)."""
    flags = []
    stopped = [r for r in reps if getattr(r, "platform", None)]
    if stopped:
        flags.append({"code": "platform_stopped",
                      "message": f"the host stopped the search of {len(stopped)} of {len(reps)} repetition(s): "
                                 f"{getattr(stopped[0], 'platform', '')}; what they found is a lower bound, not "
                                 "the DUT's"})
    limited = [r for r in reps if getattr(r, "tester_limited", False) and not getattr(r, "platform", None)]
    if not limited:
        return flags
    lim = min(getattr(r, "tester_limit_pps", None) or 0.0 for r in limited)
    # The bound is what the DUT was seen to pass (the headline), the same number everywhere;
    # where the tester stopped is said apart. A result that is no rate (back-to-back's bursts)
    # has no bound to state: it was measured at the rate the tester reached.
    message = (f"the tester reached only {format_pps(lim)}, short of the rate asked for: the result was "
               "measured at that rate, not at the one asked for (a tester limit, not the DUT's)")
    failed = [u for r in limited if (u := getattr(r, "upper_pps", None)) is not None]
    if head is not None and failed:
        message = (f"≥ {format_pps(head)}: above it the tester fell short of a load (it reached only "
                   f"{format_pps(lim)}) below the lowest load the DUT failed ({format_pps(min(failed))}): the "
                   "throughput lies between them; a lower bound")
    elif head is not None:
        message = (f"≥ {format_pps(head)}: the DUT lost nothing at any load the tester could offer; above it "
                   f"the tester fell short (its self-test's ceiling / factor, or a trial that reached only "
                   f"{format_pps(lim)}): a lower bound, the DUT may be faster")
    if len(limited) < len(reps):
        message = (f"{len(limited)} of {len(reps)} repetitions the tester bounded (≥ "
                   + ", ≥ ".join(format_pps(r.headline_pps or 0.0) for r in limited)
                   + "): lower bounds only, left out of the median and range of the others")
    return flags + [{"code": "tester_limited", "message": message}]


class NoThroughput(NetrigError):
    """A method that needs a throughput, after the run's throughput method found none at a frame
    size: it is not measured there (its message says why)."""


def bracketed(reps: list[MethodResult]) -> list[MethodResult]:
    """The repetitions the DUT bounded, when some were and some the tester was (``tester_limited``:
    lower bounds only, kept out of the median and the range); all of them otherwise."""
    return [r for r in reps if not getattr(r, "tester_limited", False)] or reps
