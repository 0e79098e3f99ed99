"""A run's telemetry: the run loop's progress events (``netrig.run.recording.ProgressFn``) into the
store.

Events and what they move::

    run_start       the run's info, estimated trials, resumes; the endpoint's thread is placed as the
                    run loop is (bookkeeping: an observer of the run, SCHED_IDLE on any CPU)
    run_end         complete or not; nothing in progress any more
    trial_start     the trial in progress (method, size, kind, intended rate, index)
    trial_progress  its live counts and rate (the engine's snapshot, ~every 0.2 s)
    trial_end       the counters, from the very TrialCounts the trial record is written from; the
                    last trial's rates, loss and latency; the engine's breakdown; the DUT sample
    interval        a settled soak interval: its counters, the DUT sample that came with it
    method_result   a method's result values (the soak's live verdicts; every repetition's end)

Counters are kept per run and only grow; a resumed run's replayed trials are counted under
``replayed="true"`` (the new process starts its counters again: a reset Prometheus sees, with
``netrig_run_resumes`` saying why).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from netrig.measure import TrialCounts
from netrig.monitor.monitor import compact_sample
from netrig.telemetry import families as F
from netrig.telemetry.breakdown import Breakdown
from netrig.telemetry.store import Labels, Store

#: Latency quantiles exported, and the field of the trial's latency summary each comes from.
QUANTILES = {0.5: "p50_ns", 0.9: "p90_ns", 0.99: "p99_ns", 0.999: "p999_ns"}


@dataclass
class TrialNow:
    """The trial in progress."""

    labels: Labels
    kind: str
    started: float
    last: tuple[float, int] | None = None


class RunTelemetry:
    """``progress(event, info)`` for :class:`netrig.run.runner.Runner` (tee it with the console's).
    ``on_run_start`` is called in the run loop's thread when a run starts (the endpoint follows
    that thread's placement)."""

    def __init__(self, store: Store, on_run_start: Callable[[], None] | None = None):
        self.store = store
        self.on_run_start = on_run_start
        self.run = "run"
        self.done = 0
        self.now: TrialNow | None = None
        self._handlers: dict[str, Callable[[Mapping[str, Any]], None]] = {
            "run_start": self._run_start, "trial_start": self._trial_start, "trial_progress": self._progress,
            "trial_end": self._trial_end, "interval": self._interval, "method_result": self._result,
            "run_end": self._run_end}

    def __call__(self, event: str, info: Mapping[str, Any]) -> None:
        handler = self._handlers.get(event)
        if handler is not None:
            handler(info)

    def _labels(self, info: Mapping[str, Any]) -> Labels:
        return self.run, str(info["method"]), str(info["frame_size"])

    def _run_start(self, info: Mapping[str, Any]) -> None:
        self.run = str(info.get("run") or "run")
        self.done = 0
        s = self.store
        s.set(F.RUN_INFO, (self.run, str(info.get("run_id", "")), str(info.get("out_dir", ""))), 1)
        s.set(F.LIVE["trials_estimated"], (self.run,), float(info.get("total_trials") or 0))
        s.set(F.RESUMES, (self.run,), float(info.get("resumes") or 0))
        s.set(F.LIVE["trial_index"], (self.run,), 0)
        if self.on_run_start is not None:
            self.on_run_start()

    def _run_end(self, info: Mapping[str, Any]) -> None:
        self.now = None
        self._clear_live()
        self.store.set(F.RUN_COMPLETE, (self.run,), 1.0 if info.get("complete") else 0.0)

    def _clear_live(self, values: Mapping[F.Family, Mapping[Labels, float]] | None = None) -> None:
        run = self.run
        self.store.replace([F.LIVE[k] for k in F.LIVE if k not in ("trials_estimated", "trial_index")],
                           lambda labels: labels[0] != run, values or {})

    def _trial_start(self, info: Mapping[str, Any]) -> None:
        labels = self._labels(info)
        kind = str(info.get("kind", ""))
        self.now = TrialNow(labels, kind, time.monotonic())
        rate = (info.get("load") or {}).get("rate_pps")
        values: dict[F.Family, dict[Labels, float]] = {F.LIVE["trial_running"]: {(*labels, kind): 1.0}}
        if rate is not None:
            values[F.LIVE["trial_intended_rate_pps"]] = {labels: float(rate)}
        self._clear_live(values)
        self.store.set(F.LIVE["trial_index"], (self.run,), self.done + 1)

    def _progress(self, info: Mapping[str, Any]) -> None:
        now = self.now
        if now is None:
            return
        t, sent = time.monotonic(), int(info["tx_frames"])
        s, labels = self.store, now.labels
        s.set(F.LIVE["trial_elapsed_seconds"], labels, float(info["elapsed_s"]))
        s.set(F.LIVE["trial_frames_sent"], labels, sent)
        s.set(F.LIVE["trial_frames_received"], labels, int(info["rx_frames"]))
        if now.last is not None and t > now.last[0] and sent >= now.last[1]:
            s.set(F.LIVE["trial_achieved_rate_pps"], labels, (sent - now.last[1]) / (t - now.last[0]))
        now.last = (t, sent)

    def _trial_end(self, info: Mapping[str, Any]) -> None:
        labels = self._labels(info)
        replayed = "true" if info.get("replayed") else "false"
        counts = info.get("counts")
        self.done += 1
        self.now = None
        self._clear_live()
        self.store.set(F.LIVE["trial_index"], (self.run,), self.done)
        if not isinstance(counts, TrialCounts):  # a stack trial: a tool's document, no frame counts
            self.store.add(F.TRIALS, (*labels, replayed, "true"), 1)
            self._monitored((info.get("result") or {}).get("monitor"))
            return
        self.store.add(F.TRIALS, (*labels, replayed, "true" if counts.valid else "false"), 1)
        self._counts(labels, replayed, counts, (info.get("load") or {}).get("rate_pps"))
        bd = Breakdown.of(counts)
        if bd is not None:
            self._breakdown(labels, bd)
        self._monitored(counts.raw.get("monitor") if isinstance(counts.raw, Mapping) else None)

    def _monitored(self, monitor: Any) -> None:
        """The last sample of a trial's monitor record (``MonitorResult.to_dict()``), if any."""
        samples = [x for x in (monitor or {}).get("samples") or () if "mark" not in x] \
            if isinstance(monitor, Mapping) else []
        if samples:
            self._dut(compact_sample(samples[-1]))

    def _counts(self, labels: Labels, replayed: str, c: TrialCounts, intended: float | None) -> None:
        s, key = self.store, (*labels, replayed)
        for name, fam in F.TRIAL_COUNTS.items():
            s.add(fam, key, getattr(c, name))
        s.set(F.LAST["achieved_rate_pps"], labels, c.achieved_pps)
        s.set(F.LAST["loss_ratio"], labels, c.loss_ratio)
        if intended is not None:
            s.set(F.LAST["intended_rate_pps"], labels, float(intended))
        lat = c.latency
        if lat is not None and c.frames_received and lat.mean_ns is not None:
            qs = {q: getattr(lat, f) / 1e9 for q, f in QUANTILES.items() if getattr(lat, f) is not None}
            s.observe(F.LATENCY, labels, qs, lat.mean_ns * c.frames_received / 1e9, c.frames_received)
            if lat.max_ns is not None:
                s.set(F.LATENCY_MAX, labels, lat.max_ns / 1e9)

    def _breakdown(self, labels: Labels, bd: Breakdown) -> None:
        s, B = self.store, F.BREAKDOWN
        for st in bd.streams:
            key = (*labels, st.name)
            s.add(B["stream_frames_sent"], key, st.frames_sent)
            s.add(B["stream_frames_received"], key, st.frames_received)
            s.add(B["stream_bytes_sent"], key, st.bytes_sent)
            s.add(B["stream_bytes_received"], key, st.bytes_received)
            for g in st.groups:
                gk = (*key, g.name)
                s.add(B["group_frames_sent"], gk, g.frames_sent)
                s.add(B["group_frames_received"], gk, g.frames_received)
                s.add(B["group_frames_lost"], gk, g.frames_lost)
        for p in bd.ports:
            pk = (self.run, p.name)
            for name in ("tx_frames", "rx_frames", "tx_bytes", "rx_bytes", "rx_ring_drops"):
                s.add(B[f"port_{name}"], pk, getattr(p, name))

    def _interval(self, info: Mapping[str, Any]) -> None:
        iv = info["interval"]
        key = (*self._labels(info), "true" if info.get("replayed") else "false")
        s, I_ = self.store, F.INTERVALS
        s.add(I_["frames_sent"], key, iv.frames_sent)
        s.add(I_["frames_received"], key, iv.frames_received)
        s.add(I_["frames_lost"], key, iv.frames_lost)
        s.add(I_["intervals"], key, 1)
        if info.get("sample"):
            self._dut(info["sample"])

    def _result(self, info: Mapping[str, Any]) -> None:
        labels = self._labels(info)
        values = {(*labels, k): float(v) for k, v in info["result"].stats_values().items() if v is not None}
        self.store.replace([F.RESULT], lambda k: k[:3] != labels, {F.RESULT: values})

    def _dut(self, sample: Mapping[str, Any] | None) -> None:
        """The newest DUT monitor sample (``compact_sample``) replaces the previous one."""
        if not sample:
            return
        run = self.run
        values = dut_values(run, sample)
        self.store.replace(F.DUT.values(), lambda k: k[0] != run, values)


def dut_values(run: str, sample: Mapping[str, Any]) -> dict[F.Family, dict[Labels, float]]:
    """The DUT families' series of one compact monitor sample."""
    D = F.DUT
    out: dict[F.Family, dict[Labels, float]] = {fam: {} for fam in D.values()}
    for cpu, v in (sample.get("cpu") or {}).items():
        if v is not None:
            out[D["cpu_busy"]][(run, cpu)] = float(v)
    for cpu, v in (sample.get("softirq") or {}).items():
        if v is not None:
            out[D["cpu_softirq"]][(run, cpu)] = float(v)
    for proc, v in (sample.get("procs") or {}).items():
        if v.get("cpu_percent") is not None:
            out[D["proc_cpu"]][(run, proc)] = float(v["cpu_percent"])
        if v.get("rss_bytes") is not None:
            out[D["proc_rss"]][(run, proc)] = float(v["rss_bytes"])
    for kind, v in (sample.get("mem") or {}).items():
        out[D["mem"]][(run, kind.removesuffix("_bytes"))] = float(v)
    for ns, v in (sample.get("conntrack") or {}).items():
        if v is not None:
            out[D["conntrack"]][(run, ns)] = float(v)
    for iface, counters in (sample.get("drops") or {}).items():
        for counter, v in counters.items():
            out[D["drops"]][(run, iface, counter)] = float(v)
    return out
