"""Recording and replaying trials: the measurer the run loop hands to methods.

:class:`RecordingMeasurer` wraps the session's measurer. Every trial request gets a replay key
(``method_index/frame_size/repetition/trial_index``); a request whose key and load match a trial
recorded by an interrupted run is answered from the record (methods are deterministic given their
trials' results, so a resumed run asks for the same trials in the same order); every other one is
measured, and its record appended to ``trials.ndjson`` and fsync'd before the method sees it.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from netrig.errors import ResultError
from netrig.measure import FlowTrial, Interval, IntervalSink, Load, Measurer, Phase, StackRequest, TrialCounts
from netrig.measure.events import Event, EventRun
from netrig.model import FrameSize, LineRate
from netrig.results import TrialLog, utc_now

#: ``progress(event, info)``; events: run_start, run_end (``info["complete"]``), trial_start,
#: trial_end, method_start, notice (``info["message"]``: something the user should know, e.g. a
#: repaired test bed); trial_progress (the engine's live snapshot of the trial in progress);
#: interval (a soak interval as it settles: ``info["interval"]``, ``info["sample"]``, the DUT
#: monitor's); method_result (``info["result"]``: a method's result, live or at a repetition's
#: end). A consumer ignores the events it does not know.
ProgressFn = Callable[[str, dict], None]


class RecordingMeasurer:
    """Wraps a measurer: assigns replay keys, replays recorded trials, records new ones."""

    def __init__(self, log: TrialLog, replay: dict[str, dict], line_rate: LineRate,
                 progress: ProgressFn | None = None, intervals: Sequence[dict] = ()):
        self.inner: Measurer | None = None
        #: Called before every measured trial (the session's test-bed check); returns what it restored.
        self.before: Callable[[], list[str]] | None = None
        #: Called after every measured trial (the session's DUT check); a problem invalidates it.
        self.after: Callable[[], list[str]] | None = None
        self.log, self.replay, self.line_rate = log, replay, line_rate
        self.progress = progress or (lambda e, i: None)
        self.records: list[dict] = []
        self.ctx: dict = {}
        self.trial_index = 0
        self.measured = 0
        self.trial_wall_s: list[float] = []
        #: Interval records of soak trials on disk (an interrupted run's), by trial key, in order.
        self.interval_replay: dict[str, list[dict]] = {}
        for r in intervals:
            self.interval_replay.setdefault(r["key"], []).append(r)
        #: User events (``trial.events``) and the kind of trial they run in (``Method.event_trials``)
        #: while a method that takes them runs (:meth:`events_for`); the commands run by ``run_event``.
        self.events: tuple[Event, ...] = ()
        self.event_trials: str | None = None
        self.run_event: Callable[[Event], EventRun] | None = None

    @contextlib.contextmanager
    def events_for(self, events: Sequence[Event], trials: str | None,
                   run_event: Callable[[Event], EventRun]) -> Iterator[None]:
        """While the block runs, every trial of kind ``trials`` (``"rate"``: every rate trial but
        bursts, ``"phases"``, ``"soak"``) runs ``events`` (nothing when either is empty)."""
        self.events, self.event_trials, self.run_event = (tuple(events), trials, run_event) if trials else ((), None,
                                                                                                          None)
        try:
            yield
        finally:
            self.events, self.event_trials, self.run_event = (), None, None

    def _events(self, kind: str) -> tuple[tuple[Event, ...], Callable[[Event], EventRun] | None]:
        return (self.events, self.run_event) if self.events and self.event_trials == kind else ((), None)

    def _target(self) -> Measurer:
        if self.inner is None:
            raise RuntimeError("RecordingMeasurer.inner is not set: the run loop sets it to the session's measurer")
        return self.inner

    def begin(self, method: str, method_index: int, frame: FrameSize, repetition: int, label: str) -> None:
        self.ctx = {"method": method, "method_index": method_index, "frame": frame, "repetition": repetition,
                    "label": label}
        self.trial_index = 0

    def _key(self) -> str:
        c = self.ctx
        return f"{c['method_index']}/{c['frame'].label}/{c['repetition']}/{self.trial_index}"

    def _start(self, key: str, info: dict) -> list[str]:
        """Before a measured trial: check (and repair) the test bed, say so, announce the trial;
        returns what was repaired."""
        repaired = self.before() if self.before is not None else []
        if repaired:
            self.progress("notice", {"message": f"test bed repaired before trial {key}: restored "
                                                f"{'; '.join(repaired)}"})
        self.progress("trial_start", {**info, "replayed": False})
        return repaired

    def _checked(self, counts: TrialCounts) -> TrialCounts:
        """``counts``, invalid if the DUT failed during the trial (``Session.after_trial``): a DUT
        process that died drops everything, which is not the DUT's loss at this load."""
        problems = self.after() if self.after is not None else []
        if not problems:
            return counts
        reasons = [*problems, *filter(None, [counts.invalid_reason])]
        return replace(counts, valid=False, invalid_reason="; ".join(reasons))

    def _do(self, kind: str, frame: FrameSize, load_d: dict, phases: list | None,
            fn: Callable[[str], TrialCounts]) -> TrialCounts:
        key = self._key()
        self.trial_index += 1
        info = {"key": key, "kind": kind, "method": self.ctx["method"], "label": self.ctx["label"],
                "frame_size": frame.label, "repetition": self.ctx["repetition"], "trial_index": self.trial_index - 1,
                "load": load_d}
        rec = self.replay.get(key)
        if rec is not None:
            try:
                same = _same_load(rec, kind, load_d, phases)
                counts = TrialCounts.from_dict(rec["counts"])
            except (TypeError, ValueError, KeyError, AttributeError) as e:
                raise ResultError(f"resume: the recorded trial {key} is damaged ({type(e).__name__}: {e}); "
                                  "remove its line from trials.ndjson to measure it again, or start a new run") \
                    from None
            if not same:
                raise ResultError(
                    f"resume: trial {key} asks for {load_d} but the recorded one was {rec.get('load')}; "
                    "the configuration or netrig version changed. Start a new run (--out) instead."
                )
            self.records.append({**rec, "counts": counts.to_dict(), "seq": len(self.records), "replayed": True})
            self.progress("trial_end", {**info, "replayed": True, "counts": counts})
            return counts
        repaired = self._start(key, info)
        started = utc_now()
        t0 = time.monotonic()
        counts = self._checked(fn(key))
        self.trial_wall_s.append(time.monotonic() - t0)
        rec = {"seq": len(self.records), "key": key, "method": self.ctx["method"],
               "method_index": self.ctx["method_index"], "frame_size": frame.label,
               "repetition": self.ctx["repetition"], "trial_index": self.trial_index - 1, "kind": kind,
               "load": load_d, "phases": phases, "started_at": started, "finished_at": utc_now(),
               "counts": counts.to_dict()}
        if repaired:
            rec["testbed_repaired"] = repaired
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
        events, run_event = self._events(kind)
        if events and run_event is not None:
            return self.measure_events(load, duration_s, events, run_event)
        return self._do(kind, load.frame_size, self._load_d(load, duration_s), None,
                        lambda key: self._target().measure(replace(load, tag=key), duration_s))

    def measure_phases(self, frame_size: FrameSize, phases: Sequence[Phase], interval_s: float,
                       tag: str = "", events: Sequence[Event] = (),
                       run_event: Callable[[Event], EventRun] | None = None) -> TrialCounts:
        """A multi-phase trial; ``events`` (else the user's, :meth:`events_for`) run during it."""
        first = phases[0]
        load_d = self._load_d(Load(first.rate_pps, frame_size), sum(p.duration_s for p in phases))
        load_d["interval_s"] = interval_s
        ph = [{"rate_pps": p.rate_pps, "duration_s": p.duration_s} for p in phases]
        if not events:
            events, run_event = self._events("phases")
        if events:
            load_d["events"] = [e.to_dict() for e in events]
        return self._do("phases", frame_size, load_d, ph,
                        lambda key: self._target().measure_phases(frame_size, phases, interval_s, tag=key,
                                                                  events=events, run_event=run_event))

    def measure_stack(self, request: StackRequest) -> dict:
        """A stack trial: recorded with its request (``load.request``) and the tool's document
        (``result``; no ``counts``), replayed from the record on resume."""
        key = self._key()
        self.trial_index += 1
        frame = self.ctx["frame"]
        load_d = {"frame_size": frame.label, "duration_s": request.duration_s, "request": request.to_dict()}
        info = {"key": key, "kind": request.kind, "method": self.ctx["method"], "label": self.ctx["label"],
                "frame_size": frame.label, "repetition": self.ctx["repetition"], "trial_index": self.trial_index - 1,
                "load": load_d}
        rec = self.replay.get(key)
        if rec is not None:
            if rec.get("kind") != request.kind or (rec.get("load") or {}).get("request") != load_d["request"] \
                    or not isinstance(rec.get("result"), dict):
                raise ResultError(f"resume: trial {key} asks for {load_d['request']} but the recorded one was "
                                  f"{(rec.get('load') or {}).get('request')}; the configuration or netrig version "
                                  "changed. Start a new run (--out) instead.")
            self.records.append({**rec, "seq": len(self.records), "replayed": True})
            self.progress("trial_end", {**info, "replayed": True, "result": rec["result"]})
            return dict(rec["result"])
        repaired = self._start(key, info)
        started = utc_now()
        t0 = time.monotonic()
        doc = self._target().measure_stack(request)
        self.trial_wall_s.append(time.monotonic() - t0)
        new = {"seq": len(self.records), "key": key, "method": self.ctx["method"],
               "method_index": self.ctx["method_index"], "frame_size": frame.label,
               "repetition": self.ctx["repetition"], "trial_index": self.trial_index - 1, "kind": request.kind,
               "load": load_d, "phases": None, "started_at": started, "finished_at": utc_now(), "result": doc}
        if repaired:
            new["testbed_repaired"] = repaired
        self.log.append(new)
        self.records.append({**new, "replayed": False})
        self.measured += 1
        self.progress("trial_end", {**info, "replayed": False, "result": doc})
        return doc

    def measure_flows(self, request: FlowTrial) -> TrialCounts:
        """A stateful trial: recorded with its request (``load.request``); its rate is per direction,
        its duration that of one frame per connection when it has none."""
        duration = request.duration_s if request.duration_s is not None else request.connections / request.rate_pps
        load_d = self._load_d(Load(request.rate_pps, request.frame_size), duration)
        load_d["request"] = request.to_dict()
        return self._do("flows", request.frame_size, load_d, None,
                        lambda key: self._target().measure_flows(replace(request, tag=key)))

    def measure_soak(self, load: Load, duration_s: float, interval_s: float, on_interval: IntervalSink,
                     events: Sequence[Event] = (), run_event: Callable[[Event], EventRun] | None = None) -> TrialCounts:
        """A soak trial, resumable mid-way; ``events`` (else the user's, :meth:`events_for`) run at
        their soak times (a resumed segment runs those still ahead). Every interval is appended to ``trials.ndjson`` (an
        ``interval`` record with the trial's key) and fsync'd as it settles, before ``on_interval``
        sees it; the trial record follows when the trial ends. On resume the intervals on disk are
        handed to ``on_interval`` first; a soak that was cut short continues as a new *segment* for
        the rest of its duration (another continuous trial: ``Interval.phase`` is the segment,
        ``Interval.t_s`` the soak time, segments back to back without the gap between them). At most
        the intervals that had not settled when the run stopped are lost (the last interval and the
        late threshold after it)."""
        key = self._key()
        self.trial_index += 1
        frame = load.frame_size
        load_d = {**self._load_d(load, duration_s), "interval_s": interval_s}
        if not events:
            events, run_event = self._events("soak")
        if events:
            load_d["events"] = [e.to_dict() for e in events]
        info = {"key": key, "kind": "soak", "method": self.ctx["method"], "label": self.ctx["label"],
                "frame_size": frame.label, "repetition": self.ctx["repetition"], "trial_index": self.trial_index - 1,
                "load": load_d}
        prior = self.interval_replay.get(key, [])
        rec = self.replay.get(key)
        covered, replayed = self._replay_soak(key, info, load_d, prior, rec, on_interval)
        if replayed is not None:
            return replayed
        segment = int(prior[-1]["segment"]) + 1 if prior else 0
        index = int(prior[-1]["index"]) + 1 if prior else 0
        remaining = duration_s - covered
        started = utc_now()
        if remaining < min(1.0, interval_s / 2):  # everything but the last instant is on disk
            sent = sum(int(r["frames_sent"]) for r in prior)
            got = sum(int(r["frames_received"]) for r in prior)
            counts = TrialCounts(achieved_pps=sent / covered if covered else 0.0, intended_pps=load.rate_pps,
                                 frames_sent=sent,
                                 frames_received=got, raw={"method": "soak: counts of the interval records"})
        else:
            repaired = self._start(key, {**info, "segment": segment, "remaining_s": remaining})
            base = covered
            t0 = time.monotonic()

            def record(iv: Interval, sample: dict | None) -> None:
                nonlocal index
                r = {"key": key, "segment": segment, "index": index, "t_s": base + iv.t_s,
                     "duration_s": iv.duration_s, "frames_sent": iv.frames_sent,
                     "frames_received": iv.frames_received, "at": utc_now(), "load": load_d, "monitor": sample}
                self.log.append_interval(r)
                index += 1
                soak_iv = Interval(base + iv.t_s, iv.duration_s, segment, iv.frames_sent, iv.frames_received)
                self.progress("interval", {**info, "interval": soak_iv, "sample": sample, "replayed": False})
                on_interval(soak_iv, sample)

            # Events at soak time: those still ahead, at their time in this segment.
            ahead = tuple(Event(e.command, e.at_s - covered) for e in events if e.at_s >= covered)
            counts = self._checked(self._target().measure_soak(replace(load, tag=key), remaining, interval_s, record,
                                                               events=ahead, run_event=run_event if ahead else None))
            if counts.events and covered:
                counts = replace(counts, events=tuple(replace(r, run=replace(r.run, at_s=r.run.at_s + covered))
                                                      for r in counts.events))
            self.trial_wall_s.append(time.monotonic() - t0)
            self.measured += 1
            if repaired:
                info["testbed_repaired"] = repaired
        new = {"seq": len(self.records), "key": key, "method": self.ctx["method"],
               "method_index": self.ctx["method_index"], "frame_size": frame.label,
               "repetition": self.ctx["repetition"], "trial_index": self.trial_index - 1, "kind": "soak",
               "load": load_d, "phases": None, "started_at": started, "finished_at": utc_now(),
               "segments": segment + 1, "counts": counts.to_dict()}
        self.log.append(new)
        self.records.append({**new, "replayed": False})
        self.progress("trial_end", {**info, "replayed": False, "counts": counts})
        return counts

    def _replay_soak(self, key: str, info: dict, load_d: dict, prior: list[dict], rec: dict | None,
                     on_interval: IntervalSink) -> tuple[float, TrialCounts | None]:
        """A resumed soak's intervals on disk, handed on again: the soak time they cover, and the
        trial's counts if it had finished (``None``: it continues)."""
        for r in prior + ([rec] if rec is not None else []):
            if not _same_soak(r, load_d):
                raise ResultError(f"resume: soak trial {key} asks for {load_d} but the recorded one was "
                                  f"{r.get('load')}; the configuration or netrig version changed. Start a new run "
                                  "(--out) instead.")
        covered = 0.0
        for r in prior:
            iv = Interval(float(r["t_s"]), float(r["duration_s"]), int(r["segment"]), int(r["frames_sent"]),
                          int(r["frames_received"]))
            self.progress("interval", {**info, "interval": iv, "sample": r.get("monitor"), "replayed": True})
            on_interval(iv, r.get("monitor"))
            covered = max(covered, float(r["t_s"]) + float(r["duration_s"]))
        if rec is None:
            return covered, None
        counts = TrialCounts.from_dict(rec["counts"])
        self.records.append({**rec, "counts": counts.to_dict(), "seq": len(self.records), "replayed": True})
        self.progress("trial_end", {**info, "replayed": True, "counts": counts})
        return covered, counts

    def measure_events(self, load: Load, duration_s: float, events: Sequence[Event],
                       run_event: Callable[[Event], EventRun]) -> TrialCounts:
        load_d = self._load_d(load, duration_s)
        load_d["events"] = [e.to_dict() for e in events]
        return self._do("events", load.frame_size, load_d, None,
                        lambda key: self._target().measure_events(replace(load, tag=key), duration_s, events,
                                                                  run_event))

def check_record(rec: dict) -> None:
    """Raise ``ResultError`` naming the trial when a recorded trial cannot be replayed (a value of the
    wrong type: a damaged or hand-edited log), before anything runs."""
    key = rec.get("key")
    if "result" in rec and "counts" not in rec:  # a stack trial: its document is replayed as it is
        if not isinstance(rec["result"], dict) or not isinstance((rec.get("load") or {}).get("request"), dict):
            raise ResultError(f"resume: the recorded trial {key} is damaged (no result or request); remove its "
                              "line from trials.ndjson to measure it again, or start a new run")
        return
    try:
        TrialCounts.from_dict(rec["counts"])
        ld = rec["load"]
        for name in ("rate_pps", "duration_s"):
            _close(ld.get(name), ld.get(name))
        for ph in rec.get("phases") or []:
            _close(ph["rate_pps"], ph["rate_pps"])
            _close(ph["duration_s"], ph["duration_s"])
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise ResultError(f"resume: the recorded trial {key} is damaged ({type(e).__name__}: {e}); remove its line "
                          "from trials.ndjson to measure it again, or start a new run") from None


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)):
        raise TypeError(f"{a!r} is not a number")
    return abs(float(a) - float(b)) <= 1e-9 * max(abs(float(a)), abs(float(b)), 1e-12)


def _same_soak(rec: dict, load_d: dict) -> bool:
    """A soak trial's record (or interval record) was made for the load ``load_d``."""
    ld = rec.get("load") or {}
    if rec.get("kind", "soak") != "soak" or str(ld.get("frame_size")) != str(load_d["frame_size"]):
        return False
    try:
        return all(_close(ld.get(k), load_d[k]) for k in ("rate_pps", "duration_s", "interval_s"))
    except TypeError:
        return False


def _same_load(rec: dict, kind: str, load_d: dict, phases: list | None) -> bool:
    ld = rec.get("load") or {}
    if rec.get("kind") != kind or str(ld.get("frame_size")) != str(load_d["frame_size"]):
        return False
    if ld.get("burst_frames") != load_d["burst_frames"] or ld.get("request") != load_d.get("request"):
        return False
    if not (_close(ld.get("rate_pps"), load_d["rate_pps"]) and _close(ld.get("duration_s"), load_d["duration_s"])):
        return False
    if phases is not None:
        rp = rec.get("phases") or []
        return len(rp) == len(phases) and all(
            _close(a["rate_pps"], b["rate_pps"]) and _close(a["duration_s"], b["duration_s"])
            for a, b in zip(rp, phases))
    return True
