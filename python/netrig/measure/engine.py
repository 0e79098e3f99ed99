"""The real measurer: runs ``netrig.run_trial`` between two tester ports.

* Learning frames (RFC 2544 §23): before the first trial of each frame size (and after a DUT
  reset), a short low-rate trial primes ARP/neighbour and switch tables; its counts are discarded.
* Validity: a trial whose achieved tx rate (over its actual sending window) is more than
  ``tx_tolerance_pct`` below the intended rate, or that the engine marks invalid (the tester's own
  receiver dropped frames, a tester link went down, another trial's frames arrived, a flow received
  sequence numbers it never sent…), is invalid — a tester limit, not DUT loss. Frames that are not
  the trial's own are counted apart (``foreign``, ``stray``, ``forged``), never as received.
* Pacing (``pacing``): ``"smooth"`` (default) never offers more than the intended rate. A VM or host
  can deschedule the sender for milliseconds; the engine then does not catch up, it sends every
  intended frame later and stretches the trial (by at most ``tx_tolerance_pct`` of its duration,
  beyond which the trial is invalid). ``"catch-up"`` keeps the duration and sends the backlog at up
  to twice the rate; since that burst, not the DUT, may cause loss, a catch-up trial that lost
  frames while the tester lagged more than ``stall_threshold_ms`` is repeated, up to
  ``stall_retries`` times (the attempts are kept in ``raw.stalled_attempts``). A smooth trial that
  tester stalls stretched beyond the tolerance is invalid; since a stall is transient, it is repeated
  up to ``stall_retries`` times too (``raw.stretched_attempts``) — an invalid trial is never a DUT
  result, so repeating it biases nothing, while a tester that cannot reach the rate fails every time.
* Smoothness: every trial records how it sent its load (``TrialCounts.pacing``: the stretch,
  the peak frame count in any 1 ms window against the intended count, inter-departure gaps); a
  peak more than ``smoothness_tolerance_pct`` above the intended count marks the load *bunched*.
* Bursts (back-to-back): one engine trial in burst mode (a single burst of ``burst_frames`` at the
  burst rate: frames evenly spaced at that rate, or as fast as the tester can when it cannot reach
  it). The achieved burst rate is the trial's ``achieved_pps`` (its ``intended_pps`` the burst
  rate asked for); a burst is invalid only when the
  tester failed to send it, dropped frames itself, or paused mid-burst for ``BURST_PAUSE_NS`` or
  more in a burst the DUT passed whole (the DUT drained meanwhile: a policer refilled, a queue
  emptied). A burst that lost frames in spite of such a pause is the DUT's: sent without it (smooth
  pacing sends no backlog after a pause, only the frames due), the DUT would have lost them too.
* Multi-phase trials (system recovery, iperf): one continuous engine trial through the phases,
  with per-interval counts from the engine: a frame is counted in the interval it was sent in,
  whenever it arrives, so per-interval loss is exact.

The engine's result is typed (``netrig._native.TrialResult``); it is converted here, field by
field, into the seam's :class:`~netrig.measure.seam.TrialCounts`, and kept whole in ``raw.engine``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from netrig import _native
from netrig.errors import ConfigError
from netrig.measure.events import INTERVAL_S, MAX_EVENT_FLOWS, Event, EventClock, EventRun, check_events, event_results
from netrig.measure.platform import THRESHOLD_MS, PlatformWatch, timeline_of
from netrig.measure.seam import (
    DutRing,
    FlowTrial,
    Interval,
    IntervalSink,
    LatencySummary,
    Load,
    Pacing,
    Phase,
    StackRequest,
    TrialCounts,
    TrialMonitor,
    transient_stretch,
)
from netrig.measure.stack import StackEndpoints, run_stack
from netrig.model import FrameSize, defaults
from netrig.monitor.cpu import CpuAccount, CpuUsage
from netrig.monitor.monitor import Sampler, compact_sample, latest_sample
from netrig.testbed import conntrack
from netrig.trial import PACING_MODES, KeptPorts, Port, Stream, run_trial

#: Learning trial: frames/s and seconds, then this much drain (RFC 2544 §23).
LEARNING_RATE_PPS = 1000.0
LEARNING_DURATION_S = 0.1
LEARNING_DRAIN_S = 0.2
#: A trial's raw record keeps its per-flow results up to this many flows (a trial with events reports
#: more, in its events' outages: 10 000 prefixes' flows made a 25-MB result).
RAW_FLOWS = 1024


def latency_summary(lat: _native.LatencySummary) -> LatencySummary | None:
    """The seam's latency summary of an engine latency summary (``None`` when nothing was received).
    Without two frames of one flow there is no IPDV: its fields are ``None``, not 0 (a million flows
    each sent once in a 2-s latency trial read "IPDV 0 ns")."""
    if lat.samples == 0:
        return None
    ipdv = lat.ipdv_samples > 0
    return LatencySummary(min_ns=lat.min_ns, mean_ns=lat.mean_ns, p50_ns=lat.p50_ns, p90_ns=lat.p90_ns,
                          p99_ns=lat.p99_ns, p999_ns=lat.p999_ns, max_ns=lat.max_ns, pdv_ns=lat.pdv_ns,
                          ipdv_ns=lat.ipdv_mean_ns if ipdv else None, ipdv_p99_ns=lat.ipdv_p99_ns if ipdv else None,
                          ipdv_max_ns=lat.ipdv_max_ns if ipdv else None)


def pacing_summary(res: _native.TrialResult, tolerance_pct: float) -> Pacing:
    """The seam's pacing summary of an engine result."""
    sm = res.smoothness
    return Pacing(mode=res.pacing, stretch_s=res.tx_stretch_ns / 1e9, max_lag_s=res.tx_max_lag_ns / 1e9,
                  peak_frames=sm.peak_frames, intended_frames=sm.intended_frames, gap_p50_ns=sm.gap_p50_ns,
                  gap_p99_ns=sm.gap_p99_ns, gap_max_ns=sm.gap_max_ns, tolerance_pct=tolerance_pct)


class EngineMeasurer:
    """A :class:`~netrig.measure.seam.Measurer` on real ports.

    ``stream_template`` holds the addressing every stream uses (``src_mac``, ``dst_mac``,
    ``src_ip``, ``dst_ip``: a test bed's ``stream_defaults()``)."""

    def __init__(self, tx_port: Port, rx_port: Port, stream_template: dict, *, drain_s: float = defaults.DRAIN_S,
                 late_s: float | None = None, warmup_s: float = 0.0, learning_frames: bool = True,
                 tx_tolerance_pct: float = defaults.TX_TOLERANCE_PCT, flows: int | dict[str, int] = 1,
                 monitor_factory: Callable[[], TrialMonitor] | None = None,
                 stall_threshold_ms: float = 5.0, stall_retries: int = 2, pacing: str = PACING_MODES[0],
                 smoothness_tolerance_pct: float = defaults.SMOOTHNESS_TOLERANCE_PCT,
                 stack: StackEndpoints | None = None, cpu_procs: Sequence[str] = (),
                 reverse_template: dict | None = None, dut_netns: str | None = None,
                 interval_monitor: Callable[[float], Sampler] | None = None,
                 tx_cpus: Sequence[int] = (), rx_cpus: Sequence[int] = (),
                 dut_ring: Callable[[], DutRing] | None = None, dut_cpus: Sequence[int] = (),
                 platform: PlatformWatch | None = None):
        if pacing not in PACING_MODES:
            raise ConfigError("pacing", f"{pacing!r}: use one of {', '.join(PACING_MODES)}")
        self.tx, self.rx = tx_port, rx_port
        self.template = dict(stream_template)
        self.drain_s, self.warmup_s = drain_s, warmup_s
        #: Latency above which a frame is late (``None``: the drain time).
        self.late_s = late_s
        self.learning_frames = learning_frames
        self.tolerance = tx_tolerance_pct / 100
        self.flows = flows
        self.monitor_factory = monitor_factory
        self.stall_ns = int(stall_threshold_ms * 1e6)
        self.stall_retries = stall_retries
        self.pacing = pacing
        self.smoothness_tolerance_pct = smoothness_tolerance_pct
        #: Where stack trials run (a test bed whose tester ports have kernel stacks), else None.
        self.stack = stack
        #: Process-name patterns whose CPU every trial accounts (besides the packet kernel threads).
        self.cpu_procs = tuple(cpu_procs)
        #: The responder's addressing (rx → tx, to the address the DUT translates the initiator to)
        #: and the DUT's namespace: stateful trials (:meth:`measure_flows`) need both.
        self.reverse_template = dict(reverse_template) if reverse_template is not None else None
        self.dut_netns = dut_netns
        #: A DUT monitor sampling every given number of seconds, for soak trials (always monitored).
        self.interval_monitor = interval_monitor
        #: The tester's worker CPUs (empty: the engine's default split), passed to every trial.
        self.tx_cpus, self.rx_cpus = tuple(tx_cpus) or None, tuple(rx_cpus) or None
        #: The DUT's receive-ring counters now (cumulative; a test bed with the wire), read around
        #: every trial: the trial's counts carry the difference (``TrialCounts.dut_ring``).
        self.dut_ring = dut_ring
        #: The DUT's CPUs on this host (the wire's rings): where the tester's receive path costs
        #: it CPU time, measured per trial (``DutRing.tester_share_ns``).
        self.dut_cpus = tuple(dut_cpus)
        #: The platform's stalls, the wire's drops in time and latency patterns over every trial
        #: (``measure.platform``); ``None``: not measured.
        self.platform = platform
        #: Live snapshots of every measured trial (not the learning frames), ~every 0.2 s, in the
        #: thread that runs the trial: the run's telemetry (``netrig.telemetry``); ``None``: none.
        self.on_snapshot: Callable[[_native.Snapshot], None] | None = None
        self._learned: set = set()
        #: The tester ports, open from one engine trial to the next (:meth:`close` closes them).
        self._kept = KeptPorts()

    def close(self) -> None:
        """Close the tester ports kept open between trials (the next trial opens them again)."""
        self._kept.close()

    # ---------------------------------------------------------------- the engine seam
    def _live(self, progress: Callable[[_native.Snapshot], None] | None
              ) -> Callable[[_native.Snapshot], None] | None:
        """``progress`` (the events' clock) and the live snapshots (:attr:`on_snapshot`), as one."""
        live = self.on_snapshot
        if live is None or progress is None:
            return progress or live

        def both(snap: _native.Snapshot) -> None:
            progress(snap)
            live(snap)
        return both

    def _run(self, frame: FrameSize, rate_pps: float, duration_s: float | None, drain_s: float,
             progress: Callable[[_native.Snapshot], None] | None = None, *,
             phases: Sequence[tuple[float, float]] | None = None, interval_s: float | None = None,
             burst_frames: int | None = None, gap_slots: int = 1, live: bool = True,
             follow: Callable[[_native.Trial], None] | None = None) -> _native.TrialResult:
        stream = Stream(frame_size=frame, rate_pps=rate_pps, flows=self.flows, **self.template)
        stop: dict = {"bursts": (burst_frames, 1, 0.0)} if burst_frames is not None else {"duration_s": duration_s}
        progress = self._live(progress) if live else progress
        return run_trial(self.tx, self.rx, [stream], drain_s=drain_s, late_s=self.late_s,
                         warmup_s=self.warmup_s, learning=self.learning_frames, progress=progress,
                         follow=follow, pacing=self.pacing, watch=self._stall_watch,
                         max_stretch_pct=100 * self.tolerance, phases=phases, interval_s=interval_s,
                         gap_slots=gap_slots, tx_cpus=self.tx_cpus, rx_cpus=self.rx_cpus, keep=self._kept, **stop)

    @property
    def _stall_watch(self) -> _native.StallWatch | None:
        """The platform's watch, told of each trial's workers (None: no watch)."""
        return self.platform.watch if self.platform is not None else None

    def _learn(self, frame: FrameSize) -> None:
        if not self.learning_frames or frame.label in self._learned:
            return
        self._run(frame, LEARNING_RATE_PPS, LEARNING_DURATION_S, LEARNING_DRAIN_S, live=False)
        self._learned.add(frame.label)

    def _counts(self, res: _native.TrialResult, intended_pps: float | None, extra_raw: dict | None = None,
                intervals: tuple[Interval, ...] | None = None, flows: bool = True,
                checked: bool = True) -> TrialCounts:
        """``intended_pps``: the rate the trial was asked for (recorded); ``checked`` ``False``: no
        achieved-rate check against it (a burst's rate is what the tester could); ``flows`` keeps
        every flow's counts in ``raw.engine``."""
        achieved = res.tx_rate_pps
        valid, reason = res.valid, res.invalid_reason
        if valid and checked and intended_pps is not None and achieved < intended_pps * (1 - self.tolerance):
            valid = False
            reason = (f"tester sent {achieved:.0f} fps, {100 * achieved / intended_pps:.1f}% of the intended "
                      f"{intended_pps:.0f} fps")
        if valid and res.tester_rx_drops:
            valid, reason = False, f"the tester's receiver dropped {res.tester_rx_drops} frames"
        extra = dict(extra_raw or {})
        ring = DutRing.from_dict(extra.pop("dut_ring", None))
        seen = self.platform.trial(res, intended_pps) if self.platform is not None else None
        took = seen.wire.tester_reason() if seen and seen.wire else None
        if valid and took:
            valid, reason = False, took
        return TrialCounts(
            achieved_pps=achieved, intended_pps=intended_pps, frames_sent=res.frames_sent,
            frames_received=res.frames_received,
            duplicated=res.duplicated, reordered=res.reordered, late=res.late, latency=latency_summary(res.latency),
            valid=valid, invalid_reason=reason, foreign=res.frames_foreign, stray=res.frames_stray,
            forged=res.frames_forged, intervals=intervals, pacing=pacing_summary(res, self.smoothness_tolerance_pct),
            dut_ring=ring, flow_memory_bytes=res.flow_memory_bytes,
            pin_failures=tuple(str(f) for f in res.pin_failures),
            stalls=seen.stalls if seen else None,
            loss_in_stalls=seen.wire.in_stalls if seen and seen.wire else None,
            latency_timeline=seen.timeline if seen else timeline_of(res),
            raw={"engine": res.to_dict() if flows else res.to_dict(flows=False), **extra},
        )

    # ---------------------------------------------------------------- the measurer seam
    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        self._learn(load.frame_size)
        if load.burst_frames is not None:
            return self._measure_burst(load)
        return self._repeated(lambda: self._measure_once(load, duration_s), duration_s, catch_up_loss=True)

    def _repeated(self, once: Callable[[], tuple[TrialCounts, int]], duration_s: float,
                  catch_up_loss: bool = False) -> TrialCounts:
        """``once`` (one trial: its counts and the tester's longest lag behind its schedule) run
        again, up to ``stall_retries`` times, while a transient stall spoilt it: a smooth trial
        stretched beyond the tolerance by it, or (``catch_up_loss``: a trial whose loss is the
        answer) a catch-up trial that lost frames after one, or a smooth one that lost no more than
        the frames it gave back after one (:meth:`_given_back`). The spoilt attempts are kept in
        ``raw.stalled_attempts`` / ``raw.stretched_attempts``; the last attempt is the result."""
        stalled: list[dict] = []
        stretched: list[dict] = []
        while True:
            counts, lag_ns = once()
            if len(stalled) + len(stretched) >= self.stall_retries:
                break
            attempt = {"tx_max_lag_ns": lag_ns, "frames_sent": counts.frames_sent,
                       "frames_received": counts.frames_received, "achieved_pps": counts.achieved_pps}
            if catch_up_loss and self._stall_loss(counts, lag_ns):
                stalled.append(attempt)
            # A smooth trial stretched beyond the tolerance by a (transient) stall: try again.
            elif self.pacing == "smooth" and not counts.valid and self._stretched(counts, duration_s):
                stretched.append({**attempt, "stretch_s": counts.pacing.stretch_s if counts.pacing else None,
                                  "invalid_reason": counts.invalid_reason})
            else:
                break
        host_s = self._host_covered(counts, duration_s) if self.pacing == "smooth" and not counts.valid else None
        if host_s is not None:
            counts = dataclasses.replace(counts, host_take_s=host_s)
        extra = {k: v for k, v in (("stalled_attempts", stalled), ("stretched_attempts", stretched)) if v}
        if not extra:
            return counts
        return dataclasses.replace(counts, raw={**counts.raw, **extra})

    def _stall_loss(self, counts: TrialCounts, lag_ns: int) -> bool:
        """A valid trial lost frames a stall of its sender may have caused, not the DUT at the rate:
        a catch-up burst after a stall (a lag beyond ``stall_threshold_ms``), or smooth pacing's
        give-back, more gently (:meth:`_given_back`)."""
        if not counts.valid or counts.frames_lost == 0:
            return False
        if self.pacing == "catch-up":
            return lag_ns > self.stall_ns
        return self._given_back(counts, lag_ns)

    @staticmethod
    def _given_back(counts: TrialCounts, lag_ns: int) -> bool:
        """A smooth trial's loss is no more than the frames its sender gave back above the rate after
        a stall (its longest lag, a stall's length or more, less what it had not given back by the
        end: its stretch; at the rate): a 120-kfps policer with a 3-ms bucket lost 44 frames of a
        trial at its cap after a 3.1-ms lag, and the search ended 1 % low where others found the cap.
        What a stall held back leaves 2 % faster than the rate until it is sent, and a DUT with a
        small buffer may lose all of it."""
        stretch_ns = counts.pacing.stretch_s * 1e9 if counts.pacing is not None else 0.0
        given = (counts.intended_pps or 0.0) * max(0.0, lag_ns - stretch_ns) / 1e9
        return lag_ns >= THRESHOLD_MS * 1e6 and 0 < counts.frames_lost <= given

    def _host_s(self, counts: TrialCounts) -> float:
        """What the host measurably took from the tester over a trial: its CPU stops the stall
        watch saw and the guest did not, or the guest's steal (:meth:`_stolen_s`), whichever is more."""
        tester = counts.stalls.tester if counts.stalls is not None else None
        return max(sum(e.length_ms for e in tester.episodes if not e.seen_by_guest) / 1e3 if tester else 0.0,
                   self._stolen_s(counts))

    def _host_covered(self, counts: TrialCounts, duration_s: float) -> float | None:
        """The host's take over a trial stretched beyond the tolerance when it covers the excess (the
        platform's, however long), else None."""
        p = counts.pacing
        if p is None:
            return None
        host_s = self._host_s(counts)
        return host_s if 0 < p.stretch_s - self.tolerance * duration_s <= host_s else None

    def _stretched(self, counts: TrialCounts, duration_s: float) -> bool:
        """Invalid because smooth pacing stretched it beyond the tolerance (not for another reason),
        by a transient stall (:func:`~netrig.measure.seam.transient_stretch`) or by the host's stops
        of the tester's CPUs (those the stall watch saw and the guest did not, or the guest's steal
        time: :meth:`_stolen_s`); otherwise the tester cannot keep the rate, and repeating it would
        fail again."""
        p = counts.pacing
        if p is None:
            return False
        # the host stopping the tester's CPUs (measured: the stall watch's tester episodes the guest
        # never saw, or steal) is the platform, not the tester's capacity: a trial within the
        # tolerance but for them is repeated, never taken as the tester's ceiling (the demo's 1024-B
        # search: 11 stops of 1.5-2.5 ms, 18 ms of a 35-ms stretch, read "≥ 57.6 kfps, tester-limited");
        # otherwise one transient stall may explain it
        return (self._host_covered(counts, duration_s) is not None
                or transient_stretch(p.stretch_s, max(p.max_lag_s, self._host_s(counts)), duration_s, self.tolerance))

    def _stolen_s(self, counts: TrialCounts) -> float:
        """The CPU time the host took from the tester over the trial where the guest counts it
        (``steal`` in ``/proc/stat``: a vCPU that wanted to run and was not run), on the most
        robbed of the tester's TX CPUs (every CPU when they are not pinned). A clean clone's
        suite: a 2-s trial at 30 kfps stretched 68 ms while the host took 77-81 s of a 14-min run."""
        usage = counts.cpu_usage
        if usage is None:
            return 0.0
        cores = [f"cpu{c}" for c in self.tx_cpus] if self.tx_cpus else list(usage.cores)
        return max((usage.seconds(c, "steal") or 0.0 for c in cores), default=0.0)

    def _monitored(self, run: Callable[[], _native.TrialResult]) -> tuple[_native.TrialResult, dict]:
        monitor = self.monitor_factory() if self.monitor_factory else None
        extra: dict = {}
        if monitor is not None:
            monitor.start()
        try:
            if monitor is not None:
                monitor.mark("trial-start")
            account = CpuAccount(self.cpu_procs).start()
            ring0 = self.dut_ring() if self.dut_ring is not None else None
            res = run()
            usage = account.stop()
            if ring0 is not None and self.dut_ring is not None:
                extra["dut_ring"] = self._ring_delta(ring0, self.dut_ring(), usage, res.frames_received).to_dict()
            extra["cpu"] = usage.to_dict()
            if monitor is not None:
                monitor.mark("trial-stop")
        finally:
            if monitor is not None:
                extra["monitor"] = monitor.stop().to_dict()
        return res, extra

    def _ring_delta(self, r0: DutRing, r1: DutRing, usage: CpuUsage, received: int) -> DutRing:
        """The DUT's ring counters over one trial, with the tester's share of the DUT's CPUs."""
        cores = [f"cpu{c}" for c in self.dut_cpus]
        soft_s = sum(usage.seconds(c, "softirq") or 0.0 for c in cores)
        share = soft_s * 1e9 / received if received and self.dut_cpus else None
        own = sum(usage.seconds(c, "busy") or 0.0 for c in cores) - soft_s if self.dut_cpus else None
        return DutRing(r1.arrived - r0.arrived, r1.taken - r0.taken, r1.dropped - r0.dropped, share, own)

    def _measure_once(self, load: Load, duration_s: float) -> tuple[TrialCounts, int]:
        res, extra = self._monitored(lambda: self._run(load.frame_size, load.rate_pps, duration_s, self.drain_s))
        return self._counts(res, load.rate_pps, extra), res.tx_max_lag_ns

    def _measure_burst(self, load: Load) -> TrialCounts:
        res, extra = self._monitored(lambda: self._run(load.frame_size, load.rate_pps, None, self.drain_s,
                                                       burst_frames=load.burst_frames))
        counts = self._counts(res, load.rate_pps, extra, checked=False)
        pause_ns = res.smoothness.gap_max_ns
        if counts.valid and counts.frames_lost == 0 and pause_ns >= defaults.BURST_PAUSE_NS:
            return dataclasses.replace(counts, valid=False, invalid_reason=(
                f"the tester's sending paused {pause_ns / 1e6:.1f} ms mid-burst (its CPU was held): the DUT "
                "drained meanwhile, so it never saw these frames back to back"))
        return counts

    def measure_phases(self, frame_size: FrameSize, phases: Sequence[Phase], interval_s: float,
                       tag: str = "", events: Sequence[Event] = (),
                       run_event: Callable[[Event], EventRun] | None = None) -> TrialCounts:
        """One continuous engine trial through ``phases`` (each a rate scale of the first phase's
        rate), counted per interval of ``interval_s`` (every phase cut into intervals, its last one
        possibly shorter). With ``events``, their commands run during it (see :meth:`measure_events`;
        the recovery time's resolution is then ``interval_s``). A trial a transient stall stretched
        beyond the tolerance is run again, events and all (:meth:`_repeated`)."""
        base = phases[0].rate_pps
        total_s = sum(ph.duration_s for ph in phases)
        spec = [(ph.duration_s, ph.rate_pps / base) for ph in phases]
        intended = sum(ph.rate_pps * ph.duration_s for ph in phases) / total_s

        def once() -> tuple[TrialCounts, int]:
            timer = _EventTimer(events, run_event, total_s)  # checks the events before any traffic
            self._learn(frame_size)
            res, extra = self._monitored(timer.wrap(lambda progress, gaps, follow: self._run(
                frame_size, base, total_s, self.drain_s, progress, phases=spec, interval_s=interval_s,
                gap_slots=gaps, follow=follow)))
            if events:
                self._learned.discard(frame_size.label)
            c = self._counts(res, intended, {**extra, "method": "one continuous trial, per-interval counts"},
                             intervals=engine_intervals(res))
            return timer.counts(c, res), res.tx_max_lag_ns
        return self._repeated(once, total_s)

    def measure_soak(self, load: Load, duration_s: float, interval_s: float, on_interval: IntervalSink,
                     events: Sequence[Event] = (), run_event: Callable[[Event], EventRun] | None = None) -> TrialCounts:
        """One continuous engine trial counted per interval; every interval goes to ``on_interval``
        as soon as the engine says its counts are final (``_native.Trial.settled_intervals``: its end
        is more than the late threshold in the past, so the counts are those of the result), with the
        newest sample of a DUT monitor sampling every ``interval_s``; the run's last intervals when
        the trial ends. The monitor's samples are not kept in memory or in the trial's record: they
        are in the intervals. Ctrl-C stops the trial (``InterruptedTrial``) after the intervals so
        far were handed on. With ``events``, their commands run during it (see :meth:`measure_events`;
        the recovery time's resolution is then ``interval_s``)."""
        self._learn(load.frame_size)
        monitor = self.interval_monitor(interval_s) if self.interval_monitor is not None else None
        delivered = 0
        timer = _EventTimer(events, run_event, duration_s)

        def deliver(ivs: Sequence[_native.IntervalResult]) -> None:
            nonlocal delivered
            sample = compact_sample(latest_sample(monitor)) if monitor is not None else None
            for iv in ivs:
                on_interval(Interval(iv.start_s, iv.duration_s, iv.phase, iv.frames_sent, iv.frames_received), sample)
                delivered += 1

        if monitor is not None:
            monitor.start()
        try:
            account = CpuAccount(self.cpu_procs).start()
            res = timer.wrap(lambda progress, gaps, follow: run_trial(
                self.tx, self.rx, [Stream(frame_size=load.frame_size, rate_pps=load.rate_pps, flows=self.flows,
                                          **self.template)],
                duration_s=duration_s, drain_s=self.drain_s, late_s=self.late_s, warmup_s=self.warmup_s,
                learning=self.learning_frames, watch=self._stall_watch,
                progress=self._live(progress),
                progress_interval_s=min(0.25, interval_s / 4), pacing=self.pacing,
                max_stretch_pct=100 * self.tolerance, interval_s=interval_s, on_intervals=deliver,
                gap_slots=gaps, tx_cpus=self.tx_cpus, rx_cpus=self.rx_cpus, follow=follow, keep=self._kept))()
            cpu = account.stop().to_dict()
            # The last ones; not those planned after a run stopped early (tester-limited): no frame
            # was sent in them, they are not soak time.
            sent_in = [k for k, iv in enumerate(res.intervals) if iv.frames_sent > 0]
            deliver(res.intervals[delivered:sent_in[-1] + 1] if sent_in else [])
        finally:
            if monitor is not None:
                monitor.stop()
        if events:
            self._learned.discard(load.frame_size.label)
        engine = res.to_dict()
        engine.pop("intervals", None)  # handed to on_interval, one by one
        c = self._counts(res, load.rate_pps, {"cpu": cpu, "method": "soak: one continuous trial, per-interval "
                                                                     "counts and DUT samples as they settle"})
        return timer.counts(dataclasses.replace(c, raw={**c.raw, "engine": engine}), res)

    def measure_stack(self, request: StackRequest) -> dict:
        """A stack trial between the tester ports' kernel stacks (the test bed needs ``tester_stack``),
        DUT monitoring around it when monitoring is on."""
        if self.stack is None:
            raise ConfigError("testbed.options.tester_stack",
                              f"a {request.kind} trial runs between the tester ports' kernel stacks: this test bed "
                              "has none (build it with tester_stack = true)")
        stack = self.stack
        # the kernel stacks' traffic crosses no attached XDP program of the tester's
        self.close()
        monitor = self.monitor_factory() if self.monitor_factory else None
        if monitor is not None:
            monitor.start()
        try:
            if monitor is not None:
                monitor.mark("trial-start")
            doc = run_stack(stack, request, self.cpu_procs)
            if monitor is not None:
                monitor.mark("trial-stop")
        finally:
            if monitor is not None:
                mon = monitor.stop().to_dict()
        if monitor is not None:
            doc["monitor"] = mon
        return doc

    def measure_flows(self, request: FlowTrial) -> TrialCounts:
        """A stateful trial (:class:`~netrig.measure.seam.FlowTrial`): the initiator's stream (tx → rx,
        the connections' 4-tuples), the responder's mirror of it (rx → tx, to the translated
        address) or both, one engine trial; the DUT's conntrack table read before and after in its
        namespace. No learning trial: its frames would create connections of their own."""
        if self.reverse_template is None or self.dut_netns is None:
            raise ConfigError("testbed", "stateful trials need a test bed with a Linux DUT that tracks connections "
                                         "(nat, firewall or fwnat)")
        req = request
        if self.template.get("protocol", "udp") not in ("udp", "tcp"):
            raise ConfigError("stream.protocol", f"{self.template.get('protocol')!r}: stateful trials carry "
                                                 "connections, use udp or tcp")
        sp, dp = int(self.template.get("src_port", 1024)), int(self.template.get("dst_port", 1024))
        common = {k: v for k, v in self.template.items() if k not in ("src_mac", "dst_mac", "src_ip", "dst_ip",
                                                                         "src_port", "dst_port", "flow_order",
                                                                         "seed", "tx_port", "rx_port")}
        fwd = Stream(**{**common, **{k: self.template[k] for k in ("src_mac", "dst_mac", "src_ip", "dst_ip")}},
                     frame_size=req.frame_size, rate_pps=req.rate_pps, src_port=sp, dst_port=dp,
                     flows={"src_ports": req.src_ports, "dst_ports": req.dst_ports}, flow_order=req.flow_order,
                     seed=req.seed, name="forward", tx_port=0, rx_port=1)
        back = {k: self.reverse_template[k] for k in ("src_mac", "dst_mac", "src_ip", "dst_ip")}
        rev = Stream(**{**common, **back},
                     frame_size=req.frame_size, rate_pps=req.rate_pps, src_port=dp, dst_port=sp,
                     flows={"src_ports": req.dst_ports, "dst_ports": req.src_ports}, flow_order=req.flow_order,
                     seed=req.seed, name="reverse", tx_port=1, rx_port=0)
        streams = {"forward": [fwd], "reverse": [rev], "both": [fwd, rev]}[req.direction]
        netns = self.dut_netns
        ctr = conntrack.TableCounts()
        if req.flush_before:
            ctr.flush_before_s = conntrack.flush(netns)
        ctr.before = conntrack.count(netns)
        ctr.slab_bytes_before = conntrack.slab_bytes()
        ctr.mem_available_before = conntrack.mem_available_bytes()
        stop: dict = {"duration_s": req.duration_s} if req.duration_s is not None else {"frames": req.connections}

        def run() -> _native.TrialResult:
            return run_trial(ports=[self.tx, self.rx], streams=streams, drain_s=self.drain_s, late_s=self.late_s,
                             pacing=self.pacing, watch=self._stall_watch,
                             progress=self.on_snapshot,
                             max_stretch_pct=100 * self.tolerance, tx_cpus=self.tx_cpus, rx_cpus=self.rx_cpus,
                             keep=self._kept, **stop)

        res, extra = self._monitored(run)
        ctr.after = conntrack.count(netns)
        ctr.slab_bytes_after = conntrack.slab_bytes()
        ctr.mem_available_after = conntrack.mem_available_bytes()
        if req.check_tuples:
            proto = self.template.get("protocol", "udp")
            ctr.tuples = conntrack.tuple_check(netns, proto, str(self.template["src_ip"]))
        if req.teardown:
            ctr.teardown_entries = conntrack.count(netns)
            ctr.teardown_s = conntrack.flush(netns)
            ctr.after_teardown = conntrack.count(netns)
            ctr.empty_flush_s = conntrack.flush(netns)
        dirs = {s.name: {"frames_sent": s.frames_sent, "frames_received": s.frames_received,
                         "duplicated": s.duplicated, "tx_rate_pps": s.tx_rate_pps} for s in res.streams}
        c = self._counts(res, req.rate_pps * req.directions, {**extra, "conntrack": ctr.to_dict(), "directions": dirs,
                                                              "request": req.to_dict()},
                         flows=req.connections <= RAW_FLOWS)
        return c

    def measure_events(self, load: Load, duration_s: float, events: Sequence[Event],
                       run_event: Callable[[Event], EventRun]) -> TrialCounts:
        """One trial at ``load`` during which the events' commands run; each event's cost per flow
        from the sequence gaps the engine kept (one per event and one more, per flow) and the
        trial's per-interval counts (``netrig.measure.events``). Learning frames are sent again
        before the next trial (an event may have flushed the DUT's tables). A trial a transient stall
        stretched beyond the tolerance is run again, events and all (:meth:`_repeated`)."""
        def once() -> tuple[TrialCounts, int]:
            timer = _EventTimer(events, run_event, duration_s)  # checks the events before any traffic
            self._learn(load.frame_size)
            res, extra = self._monitored(timer.wrap(lambda progress, gaps, follow: run_trial(
                self.tx, self.rx, [Stream(frame_size=load.frame_size, rate_pps=load.rate_pps, flows=self.flows,
                                          **self.template)],
                duration_s=duration_s, drain_s=self.drain_s, late_s=self.late_s, warmup_s=self.warmup_s,
                learning=self.learning_frames, watch=self._stall_watch,
                progress=self._live(progress),
                pacing=self.pacing, max_stretch_pct=100 * self.tolerance,
                interval_s=INTERVAL_S, gap_slots=gaps, max_flow_results=MAX_EVENT_FLOWS, tx_cpus=self.tx_cpus,
                rx_cpus=self.rx_cpus, follow=follow, keep=self._kept)))
            self._learned.discard(load.frame_size.label)
            c = self._counts(res, load.rate_pps, {**extra, "method": "one trial with events, per-flow sequence gaps"},
                             intervals=engine_intervals(res), flows=len(res.flows) <= RAW_FLOWS)
            return timer.counts(c, res), res.tx_max_lag_ns
        return self._repeated(once, duration_s)


class _EventTimer:
    """The events of one engine trial: :meth:`wrap` makes the trial function (called with the
    live-progress callback, the number of per-flow gap slots to keep, and ``run_trial``'s ``follow``
    hook, by which the events' clock takes the run start from the engine) run them at their times;
    :meth:`counts` adds what each did and cost. Without events it changes nothing."""

    def __init__(self, events: Sequence[Event], run_event: Callable[[Event], EventRun] | None, duration_s: float):
        if events and run_event is None:
            raise ValueError("events need run_event, the function that runs their commands")
        if events:
            check_events(events, duration_s)
        self.events, self.run_event, self.duration_s = tuple(events), run_event, duration_s
        self.runs: list[EventRun] = []

    def wrap(self, fn: Callable[[Callable[[_native.Snapshot], None] | None, int,
                                 Callable[[_native.Trial], None] | None], _native.TrialResult]
             ) -> Callable[[], _native.TrialResult]:
        if not self.events or self.run_event is None:
            return lambda: fn(None, 1, None)
        events, run_event = self.events, self.run_event

        def run() -> _native.TrialResult:
            clock = EventClock(events, run_event)
            try:
                with clock.on_time():
                    return fn(lambda snap: clock.progress(snap.phase, snap.elapsed_s), len(events) + 1, clock.follow)
            finally:
                self.runs.extend(clock.finish(timeout_s=max(60.0, self.duration_s)))
        return run

    def counts(self, c: TrialCounts, res: _native.TrialResult) -> TrialCounts:
        if not self.events:
            return c
        return dataclasses.replace(c, events=event_results(res, self.runs))


def engine_intervals(res: _native.TrialResult) -> tuple[Interval, ...]:
    """The engine's per-interval counts (and the received frames' latency) as the seam's intervals."""
    return tuple(Interval(iv.start_s, iv.duration_s, iv.phase, iv.frames_sent, iv.frames_received,
                          iv.latency_mean_ns if iv.frames_received else None,
                          iv.latency_max_ns if iv.frames_received else None)
                 for iv in res.intervals)
