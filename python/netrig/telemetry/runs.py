"""A run's telemetry: the run loop's progress events (:mod:`netrig.run.progress`) into the store.

Events and what they move::

    RunStart           the run's info, estimated trials, resumes; the endpoint's thread is placed as
                       the run loop is (bookkeeping: an observer of the run, SCHED_IDLE on any CPU)
    RunEnd             complete or not; nothing in progress any more
    TrialStart         the trial in progress (method, size, kind, intended rate, index)
    TrialProgress      its live counts and rates (the engine's snapshot, ~every 0.2 s)
    TrialEnd           the counters, from the very TrialCounts the trial record is written from; the
                       last trial's rates, loss and latency; the engine's breakdown; the DUT sample
    IntervalSettled    a settled soak interval: its counters, the DUT sample that came with it
    MethodResultUpdate a method's result values (the soak's live verdicts; every repetition's end)

Counters are kept per run and only grow; a resumed run's replayed trials are counted under
``replayed="true"`` (the new process starts its counters again: a reset Prometheus sees, with
``netrig_run_resumes`` saying why).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from netrig.measure import LatencySummary, TrialCounts
from netrig.monitor.monitor import CompactSample, MonitorResult, compact_sample
from netrig.run.progress import (
    IntervalSettled,
    MethodResultUpdate,
    ProgressEvent,
    RunEnd,
    RunStart,
    TrialEnd,
    TrialInfo,
    TrialProgress,
    TrialStart,
)
from netrig.telemetry import families as F
from netrig.telemetry.breakdown import Breakdown
from netrig.telemetry.store import Labels, Store


@dataclass
class TrialNow:
    """The trial in progress, and its last snapshot (time, frames sent, frames received)."""

    labels: Labels
    kind: str
    started: float
    last: tuple[float, int, int] | None = None


class RunTelemetry:
    """A progress function (``netrig.run.progress.ProgressFn``) for :class:`netrig.run.runner.Runner`
    (tee it with the console's). ``on_run_start`` is called in the run loop's thread when a run
    starts (the endpoint follows that thread's placement)."""

    def __init__(self, store: Store, on_run_start: Callable[[], None] | None = None):
        self.store = store
        self.on_run_start = on_run_start
        self.run = "run"
        self.done = 0
        self.now: TrialNow | None = None

    def __call__(self, event: ProgressEvent) -> None:
        match event:
            case RunStart():
                self._run_start(event)
            case TrialStart():
                self._trial_start(event.trial)
            case TrialProgress():
                self._progress(event)
            case TrialEnd():
                self._trial_end(event)
            case IntervalSettled():
                self._interval(event)
            case MethodResultUpdate():
                self._result(event)
            case RunEnd():
                self._run_end(event)

    def _labels(self, method: str, frame_size: int | str) -> Labels:
        return self.run, method, str(frame_size)

    def _run_start(self, e: RunStart) -> None:
        self.run = e.run or "run"
        self.done = 0
        s = self.store
        s.set(F.RUN_INFO, (self.run, e.run_id, e.out_dir), 1)
        s.set(F.LIVE.trials_estimated, (self.run,), float(e.total_trials))
        s.set(F.RESUMES, (self.run,), float(e.resumes))
        s.set(F.LIVE.trial_index, (self.run,), 0)
        if self.on_run_start is not None:
            self.on_run_start()

    def _run_end(self, e: RunEnd) -> None:
        self.now = None
        self._clear_live()
        self.store.set(F.RUN_COMPLETE, (self.run,), 1.0 if e.complete else 0.0)

    def _clear_live(self, values: dict[F.Family, dict[Labels, float]] | None = None) -> None:
        run = self.run
        self.store.replace(F.LIVE.of_trial(), lambda labels: labels[0] != run, values or {})

    def _trial_start(self, t: TrialInfo) -> None:
        labels = self._labels(t.method, t.frame_size)
        self.now = TrialNow(labels, t.kind, time.monotonic())
        values: dict[F.Family, dict[Labels, float]] = {F.LIVE.trial_running: {(*labels, t.kind): 1.0}}
        if t.load.rate_pps is not None:
            values[F.LIVE.trial_intended_rate_pps] = {labels: float(t.load.rate_pps)}
        self._clear_live(values)
        self.store.set(F.LIVE.trial_index, (self.run,), self.done + 1)

    def _progress(self, e: TrialProgress) -> None:
        now = self.now
        if now is None:
            return
        t = time.monotonic()
        s, labels, L = self.store, now.labels, F.LIVE
        s.set(L.trial_elapsed_seconds, labels, e.elapsed_s)
        s.set(L.trial_frames_sent, labels, e.tx_frames)
        s.set(L.trial_frames_received, labels, e.rx_frames)
        if now.last is not None and t > now.last[0] and e.tx_frames >= now.last[1] and e.rx_frames >= now.last[2]:
            dt = t - now.last[0]
            s.set(L.trial_achieved_rate_pps, labels, (e.tx_frames - now.last[1]) / dt)
            s.set(L.trial_received_rate_pps, labels, (e.rx_frames - now.last[2]) / dt)
        now.last = (t, e.tx_frames, e.rx_frames)

    def _trial_end(self, e: TrialEnd) -> None:
        labels = self._labels(e.trial.method, e.trial.frame_size)
        replayed = "true" if e.replayed else "false"
        counts = e.counts
        self.done += 1
        self.now = None
        self._clear_live()
        self.store.set(F.LIVE.trial_index, (self.run,), self.done)
        if counts is None:  # a stack trial: a tool's document, no frame counts
            self.store.add(F.TRIALS, (*labels, replayed, "true"), 1)
            self._monitored(e.outcome.monitor if e.outcome is not None else None)
            return
        self.store.add(F.TRIALS, (*labels, replayed, "true" if counts.valid else "false"), 1)
        self._counts(labels, replayed, counts, e.trial.load.rate_pps)
        bd = Breakdown.of(counts)
        if bd is not None:
            self._breakdown(labels, bd)
        self._monitored(counts.dut_monitor)

    def _monitored(self, monitor: MonitorResult | None) -> None:
        """The last sample of a trial's DUT monitor, if any."""
        last = compact_sample(monitor.data[-1]) if monitor is not None and monitor.data else None
        if last is not None:
            self._dut(last)

    def _counts(self, labels: Labels, replayed: str, c: TrialCounts, intended: float | None) -> None:
        s, key, T = self.store, (*labels, replayed), F.TRIAL_COUNTS
        for fam, v in ((T.frames_sent, c.frames_sent), (T.frames_received, c.frames_received),
                       (T.frames_lost, c.frames_lost), (T.reordered, c.reordered), (T.duplicated, c.duplicated),
                       (T.late, c.late), (T.foreign, c.foreign), (T.stray, c.stray), (T.forged, c.forged)):
            s.add(fam, key, v)
        s.set(F.LAST.achieved_rate_pps, labels, c.achieved_pps)
        s.set(F.LAST.received_rate_pps, labels,
              c.achieved_pps * c.frames_received / c.frames_sent if c.frames_sent else 0.0)
        s.set(F.LAST.loss_ratio, labels, c.loss_ratio)
        if intended is not None:
            s.set(F.LAST.intended_rate_pps, labels, float(intended))
        if c.latency is not None and c.frames_received and c.latency.mean_ns is not None:
            self._latency(labels, c.latency, c.frames_received)

    def _latency(self, labels: Labels, lat: LatencySummary, received: int) -> None:
        assert lat.mean_ns is not None
        qs = {q: v / 1e9 for q, v in ((0.5, lat.p50_ns), (0.9, lat.p90_ns), (0.99, lat.p99_ns),
                                      (0.999, lat.p999_ns)) if v is not None}
        self.store.observe(F.LATENCY, labels, qs, lat.mean_ns * received / 1e9, received)
        if lat.max_ns is not None:
            self.store.set(F.LATENCY_MAX, labels, lat.max_ns / 1e9)

    def _breakdown(self, labels: Labels, bd: Breakdown) -> None:
        s, B = self.store, F.BREAKDOWN
        for st in bd.streams:
            key = (*labels, st.name)
            s.add(B.stream_frames_sent, key, st.frames_sent)
            s.add(B.stream_frames_received, key, st.frames_received)
            s.add(B.stream_bytes_sent, key, st.bytes_sent)
            s.add(B.stream_bytes_received, key, st.bytes_received)
            for g in st.groups:
                gk = (*key, g.name)
                s.add(B.group_frames_sent, gk, g.frames_sent)
                s.add(B.group_frames_received, gk, g.frames_received)
                s.add(B.group_frames_lost, gk, g.frames_lost)
        for p in bd.ports:
            pk = (self.run, p.name)
            for fam, v in ((B.port_tx_frames, p.tx_frames), (B.port_rx_frames, p.rx_frames),
                           (B.port_tx_bytes, p.tx_bytes), (B.port_rx_bytes, p.rx_bytes),
                           (B.port_rx_ring_drops, p.rx_ring_drops)):
                s.add(fam, pk, v)

    def _interval(self, e: IntervalSettled) -> None:
        iv = e.interval
        key = (*self._labels(e.trial.method, e.trial.frame_size), "true" if e.replayed else "false")
        s, I_ = self.store, F.INTERVALS
        s.add(I_.frames_sent, key, iv.frames_sent)
        s.add(I_.frames_received, key, iv.frames_received)
        s.add(I_.frames_lost, key, iv.frames_lost)
        s.add(I_.intervals, key, 1)
        if e.sample is not None:
            self._dut(e.sample)

    def _result(self, e: MethodResultUpdate) -> None:
        labels = self._labels(e.method, e.frame_size)
        values = {(*labels, k): float(v) for k, v in e.result.stats_values().items() if v is not None}
        self.store.replace([F.RESULT], lambda k: k[:3] != labels, {F.RESULT: values})

    def _dut(self, sample: CompactSample) -> None:
        """The newest DUT monitor sample replaces the previous one."""
        run = self.run
        self.store.replace(F.members(F.DUT), lambda k: k[0] != run, dut_values(run, sample))


def dut_values(run: str, sample: CompactSample) -> dict[F.Family, dict[Labels, float]]:
    """The DUT families' series of one compact monitor sample."""
    D = F.DUT
    out: dict[F.Family, dict[Labels, float]] = {fam: {} for fam in F.members(D)}
    for cpu, v in (sample.cpu or {}).items():
        if v is not None:
            out[D.cpu_busy][(run, cpu)] = float(v)
    for cpu, v in (sample.softirq or {}).items():
        if v is not None:
            out[D.cpu_softirq][(run, cpu)] = float(v)
    for proc, p in (sample.procs or {}).items():
        if p.cpu_percent is not None:
            out[D.proc_cpu][(run, proc)] = float(p.cpu_percent)
        if p.rss_bytes is not None:
            out[D.proc_rss][(run, proc)] = float(p.rss_bytes)
    mem = sample.mem
    if mem is not None:
        for kind, b in (("available", mem.available_bytes), ("used", mem.used_bytes), ("slab", mem.slab_bytes)):
            if b is not None:
                out[D.mem][(run, kind)] = float(b)
    for ns, n in (sample.conntrack or {}).items():
        if n is not None:
            out[D.conntrack][(run, ns)] = float(n)
    for iface, counters in (sample.drops or {}).items():
        for counter, v in counters.items():
            out[D.drops][(run, iface, counter)] = float(v)
    return out
