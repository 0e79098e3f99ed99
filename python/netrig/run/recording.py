"""Recording and replaying trials: the measurer the run loop hands to methods.

:class:`RecordingMeasurer` wraps the session's measurer. Every trial request gets a replay key
(``method_index/frame_size/repetition/trial_index``); a request whose key and load match a trial
recorded by an interrupted run is answered from the record (methods are deterministic given their
trials' results, so a resumed run asks for the same trials in the same order); every other one is
measured, and its record appended to ``trials.ndjson`` and fsync'd before the method sees it. Each
trial is announced to ``progress`` (:mod:`netrig.run.progress`) as it starts and ends.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from netrig.errors import ResultError
from netrig.measure import (
    CompactSample,
    FlowTrial,
    Interval,
    IntervalSink,
    Load,
    Measurer,
    Phase,
    StackRequest,
    TrialCounts,
)
from netrig.measure.events import Event, EventRun
from netrig.model import FrameSize, LineRate
from netrig.results import TrialLog, utc_now
from netrig.results.typed import from_dict
from netrig.run.progress import (
    IntervalSettled,
    Notice,
    ProgressFn,
    StackOutcome,
    TrialEnd,
    TrialInfo,
    TrialStart,
    ignore,
)
from netrig.run.records import LoadRecord, RecordedInterval, RecordedTrial
from netrig.testbed.placement import ordinary_while

_CHANGED = "the configuration or netrig version changed. Start a new run (--out) instead."


@dataclass(frozen=True)
class Place:
    """Where the trials being requested belong: a method (its place in the run), a frame size, a
    repetition (:meth:`RecordingMeasurer.begin`)."""

    method: str
    method_index: int
    frame: FrameSize
    repetition: int
    label: str


class RecordingMeasurer:
    """Wraps a measurer: assigns replay keys, replays recorded trials, records new ones."""

    def __init__(self, log: TrialLog, replay: Mapping[str, RecordedTrial], line_rate: LineRate,
                 progress: ProgressFn | None = None, intervals: Sequence[RecordedInterval] = ()):
        self.inner: Measurer | None = None
        #: Called before every measured trial (the session's test-bed check); returns what it restored.
        self.before: Callable[[], list[str]] | None = None
        #: Called after every measured trial (the session's DUT check); a problem invalidates it.
        self.after: Callable[[], list[str]] | None = None
        self.log, self.replay, self.line_rate = log, replay, line_rate
        self.progress: ProgressFn = progress or ignore
        #: The run's trial records (``result.json``'s ``trials``), and their keys, in order.
        self.records: list[dict] = []
        self.keys: list[str] = []
        self.place: Place | None = None
        self.trial_index = 0
        self.measured = 0
        self.trial_wall_s: list[float] = []
        #: Interval records of soak trials on disk (an interrupted run's), by trial key, in order.
        self.interval_replay: dict[str, list[RecordedInterval]] = {}
        for r in intervals:
            self.interval_replay.setdefault(r.key, []).append(r)
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
        self.place = Place(method, method_index, frame, repetition, label)
        self.trial_index = 0

    def _next(self, kind: str, load: LoadRecord, stack: StackRequest | None = None,
              flows: FlowTrial | None = None) -> TrialInfo:
        """The next trial of the current place: its key, and what it asks."""
        p = self.place
        if p is None:
            raise RuntimeError("RecordingMeasurer.begin was not called: the run loop places every trial")
        info = TrialInfo(f"{p.method_index}/{p.frame.label}/{p.repetition}/{self.trial_index}", kind, p.method,
                         p.label, load.frame_size if load.frame_size is not None else p.frame.label, p.repetition,
                         self.trial_index, load, stack, flows)
        self.trial_index += 1
        return info

    def _record(self, info: TrialInfo, started: str, phases: Sequence[Phase] | None = None) -> dict[str, Any]:
        """A new trial record's fields up to its outcome (docs/result-format.md, *Trial records*)."""
        p = self.place
        assert p is not None, "_next placed the trial"
        return {"seq": len(self.records), "key": info.key, "method": info.method, "method_index": p.method_index,
                "frame_size": info.frame_size, "repetition": info.repetition, "trial_index": info.trial_index,
                "kind": info.kind, "load": info.load.to_dict(),
                "phases": [{"rate_pps": ph.rate_pps, "duration_s": ph.duration_s} for ph in phases]
                if phases is not None else None, "started_at": started, "finished_at": utc_now()}

    def _keep(self, rec: dict[str, Any], key: str, replayed: bool) -> None:
        self.records.append({**rec, "seq": len(self.records), "replayed": replayed})
        self.keys.append(key)

    def _measured(self, rec: dict[str, Any], key: str, repaired: list[str], measured: bool = True) -> None:
        """A new trial record: on disk (fsync'd), then in the run's records (``measured``: a trial
        measured now, not one whose intervals were all on disk)."""
        if repaired:
            rec["testbed_repaired"] = repaired
        self.log.append(rec)
        self._keep(rec, key, False)
        self.measured += measured

    def _start(self, info: TrialInfo, segment: int | None = None, remaining_s: float | None = None) -> list[str]:
        """Before a measured trial: check (and repair) the test bed, say so, announce the trial;
        returns what was repaired."""
        repaired = self.before() if self.before is not None else []
        if repaired:
            self.progress(Notice(f"test bed repaired before trial {info.key}: restored {'; '.join(repaired)}"))
        self.progress(TrialStart(info, segment, remaining_s))
        return repaired

    def _checked(self, counts: TrialCounts) -> TrialCounts:
        """``counts``, invalid if the DUT failed during the trial (``Session.after_trial``): a DUT
        process that died drops everything, which is not the DUT's loss at this load."""
        problems = self.after() if self.after is not None else []
        if not problems:
            return counts
        reasons = [*problems, *filter(None, [counts.invalid_reason])]
        return replace(counts, valid=False, invalid_reason="; ".join(reasons))

    def _replayed(self, info: TrialInfo, phases: Sequence[Phase] | None) -> TrialCounts | None:
        """The recorded counts of the trial ``info`` (``None``: not recorded); refused when the record
        was made for another request."""
        rec = self.replay.get(info.key)
        if rec is None:
            return None
        if not rec.same_request(info.kind, info.load, tuple(phases) if phases is not None else None):
            raise ResultError(f"resume: trial {info.key} asks for {info.load.to_dict()} but the recorded one was "
                              f"{rec.load.to_dict()}; {_CHANGED}")
        if rec.counts is None:
            raise ResultError(f"resume: the recorded trial {info.key} has no counts; remove its line from "
                              "trials.ndjson to measure it again, or start a new run")
        self._keep({**rec.stored, "counts": rec.counts.to_dict()}, info.key, True)
        self.progress(TrialEnd(info, True, rec.counts))
        return rec.counts

    def _do(self, info: TrialInfo, phases: Sequence[Phase] | None, fn: Callable[[str], TrialCounts]) -> TrialCounts:
        replayed = self._replayed(info, phases)
        if replayed is not None:
            return replayed
        # The bookkeeping before and after a trial (the test bed's check, the record on disk) runs as
        # an ordinary thread: no traffic of the tester's runs then, and under SCHED_IDLE, beside
        # other work busy on every CPU (two busy loops), it took 8-14 s between 2-s trials.
        with ordinary_while():
            repaired = self._start(info)
        started = utc_now()
        t0 = time.monotonic()
        measured = fn(info.key)
        self.trial_wall_s.append(time.monotonic() - t0)
        with ordinary_while():
            counts = self._checked(measured)
            self._measured({**self._record(info, started, phases), "counts": counts.to_dict()}, info.key, repaired)
        self.progress(TrialEnd(info, False, counts))
        return counts

    def _load(self, load: Load, duration_s: float) -> LoadRecord:
        return LoadRecord(load.frame_size.label, duration_s, load.rate_pps, load.burst_frames,
                          100 * load.rate_pps / self.line_rate.fps(load.frame_size))

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        kind = "burst" if load.burst_frames is not None else "rate"
        events, run_event = self._events(kind)
        if events and run_event is not None:
            return self.measure_events(load, duration_s, events, run_event)
        return self._do(self._next(kind, self._load(load, duration_s)), None,
                        lambda key: self._target().measure(replace(load, tag=key), duration_s))

    def measure_phases(self, frame_size: FrameSize, phases: Sequence[Phase], interval_s: float,
                       tag: str = "", events: Sequence[Event] = (),
                       run_event: Callable[[Event], EventRun] | None = None) -> TrialCounts:
        """A multi-phase trial; ``events`` (else the user's, :meth:`events_for`) run during it."""
        if not events:
            events, run_event = self._events("phases")
        load = replace(self._load(Load(phases[0].rate_pps, frame_size), sum(p.duration_s for p in phases)),
                       interval_s=interval_s, events=tuple(events) or None)
        return self._do(self._next("phases", load), phases,
                        lambda key: self._target().measure_phases(frame_size, phases, interval_s, tag=key,
                                                                  events=events, run_event=run_event))

    def measure_stack(self, request: StackRequest) -> dict:
        """A stack trial: recorded with its request (``load.request``) and the tool's document
        (``result``; no ``counts``), replayed from the record on resume."""
        p = self.place
        frame = p.frame.label if p is not None else None
        info = self._next(request.kind, LoadRecord(frame, request.duration_s, request=request.to_dict()), stack=request)
        rec = self.replay.get(info.key)
        if rec is not None:
            if rec.kind != request.kind or rec.load.request != info.load.request or rec.result is None:
                raise ResultError(f"resume: trial {info.key} asks for {info.load.request} but the recorded one was "
                                  f"{rec.load.request}; {_CHANGED}")
            self._keep(rec.stored, info.key, True)
            self.progress(TrialEnd(info, True, outcome=stack_outcome(rec.result)))
            return dict(rec.result)
        repaired = self._start(info)
        started = utc_now()
        t0 = time.monotonic()
        doc = self._target().measure_stack(request)
        self.trial_wall_s.append(time.monotonic() - t0)
        self._measured({**self._record(info, started), "result": doc}, info.key, repaired)
        self.progress(TrialEnd(info, False, outcome=stack_outcome(doc)))
        return doc

    def measure_flows(self, request: FlowTrial) -> TrialCounts:
        """A stateful trial: recorded with its request (``load.request``); its rate is per direction,
        its duration that of one frame per connection when it has none."""
        duration = request.duration_s if request.duration_s is not None else request.connections / request.rate_pps
        load = replace(self._load(Load(request.rate_pps, request.frame_size), duration), request=request.to_dict())
        return self._do(self._next("flows", load, flows=request), None,
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
        if not events:
            events, run_event = self._events("soak")
        info = self._next("soak", replace(self._load(load, duration_s), interval_s=interval_s,
                                          events=tuple(events) or None))
        prior = self.interval_replay.get(info.key, [])
        covered, replayed = self._replay_soak(info, prior, on_interval)
        if replayed is not None:
            return replayed
        segment = prior[-1].segment + 1 if prior else 0
        started = utc_now()
        repaired: list[str] = []
        on_disk = duration_s - covered < min(1.0, interval_s / 2)  # everything but the last instant
        if on_disk:
            sent = sum(r.frames_sent for r in prior)
            counts = TrialCounts(achieved_pps=sent / covered if covered else 0.0, intended_pps=load.rate_pps,
                                 frames_sent=sent, frames_received=sum(r.frames_received for r in prior),
                                 raw={"method": "soak: counts of the interval records"})
        else:
            repaired = self._start(info, segment, duration_s - covered)
            t0 = time.monotonic()
            counts = self._soak_segment(info, load, prior, covered, on_interval, events, run_event)
            self.trial_wall_s.append(time.monotonic() - t0)
        rec = {**self._record(info, started), "segments": segment + 1, "counts": counts.to_dict()}
        self._measured(rec, info.key, repaired, measured=not on_disk)
        self.progress(TrialEnd(info, False, counts))
        return counts

    def _soak_segment(self, info: TrialInfo, load: Load, prior: Sequence[RecordedInterval], covered: float,
                      on_interval: IntervalSink, events: Sequence[Event],
                      run_event: Callable[[Event], EventRun] | None) -> TrialCounts:
        """The rest of a soak from soak time ``covered``, as one continuous trial (a segment): each
        interval recorded as it settles, then handed on."""
        segment = prior[-1].segment + 1 if prior else 0
        index = prior[-1].index + 1 if prior else 0
        load_d = info.load.to_dict()
        assert info.load.duration_s is not None and info.load.interval_s is not None, "a soak's load has both"

        def record(iv: Interval, sample: CompactSample | None) -> None:
            nonlocal index
            self.log.append_interval({"key": info.key, "segment": segment, "index": index, "t_s": covered + iv.t_s,
                                      "duration_s": iv.duration_s, "frames_sent": iv.frames_sent,
                                      "frames_received": iv.frames_received, "at": utc_now(), "load": load_d,
                                      "monitor": sample.to_dict() if sample is not None else None})
            index += 1
            soak_iv = Interval(covered + iv.t_s, iv.duration_s, segment, iv.frames_sent, iv.frames_received)
            self.progress(IntervalSettled(info, soak_iv, sample, False))
            on_interval(soak_iv, sample)

        # Events at soak time: those still ahead, at their time in this segment.
        ahead = tuple(Event(e.command, e.at_s - covered) for e in events if e.at_s >= covered)
        counts = self._checked(self._target().measure_soak(
            replace(load, tag=info.key), info.load.duration_s - covered, info.load.interval_s, record,
            events=ahead, run_event=run_event if ahead else None))
        if counts.events and covered:
            counts = replace(counts, events=tuple(replace(r, run=replace(r.run, at_s=r.run.at_s + covered))
                                                  for r in counts.events))
        return counts

    def _replay_soak(self, info: TrialInfo, prior: Sequence[RecordedInterval],
                     on_interval: IntervalSink) -> tuple[float, TrialCounts | None]:
        """A resumed soak's intervals on disk, handed on again: the soak time they cover, and the
        trial's counts if it had finished (``None``: it continues)."""
        rec = self.replay.get(info.key)
        made_for = [(r.kind, r.load) for r in prior] + ([(rec.kind, rec.load)] if rec is not None else [])
        for kind, load in made_for:
            if kind != "soak" or not load.same_soak(info.load):
                raise ResultError(f"resume: soak trial {info.key} asks for {info.load.to_dict()} but the recorded "
                                  f"one was {load.to_dict()}; {_CHANGED}")
        covered = 0.0
        for r in prior:
            iv = Interval(r.t_s, r.duration_s, r.segment, r.frames_sent, r.frames_received)
            sample = r.sample
            self.progress(IntervalSettled(info, iv, sample, True))
            on_interval(iv, sample)
            covered = max(covered, r.end_s)
        if rec is None:
            return covered, None
        if rec.counts is None:
            raise ResultError(f"resume: the recorded soak trial {info.key} has no counts; remove its line from "
                              "trials.ndjson to measure it again, or start a new run")
        self._keep({**rec.stored, "counts": rec.counts.to_dict()}, info.key, True)
        self.progress(TrialEnd(info, True, rec.counts))
        return covered, rec.counts

    def measure_events(self, load: Load, duration_s: float, events: Sequence[Event],
                       run_event: Callable[[Event], EventRun]) -> TrialCounts:
        return self._do(self._next("events", replace(self._load(load, duration_s), events=tuple(events))), None,
                        lambda key: self._target().measure_events(replace(load, tag=key), duration_s, events,
                                                                  run_event))


def stack_outcome(doc: Mapping[str, Any]) -> StackOutcome:
    """What the progress events say of a stack trial's document."""
    return from_dict(StackOutcome, doc)
