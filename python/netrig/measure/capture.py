"""The measurer of the capture-method benchmark: netrig sends, a capture application counts.

```
 tester port tx ──TX-only engine trial (tag T)──▶ veth ──▶ capture namespace: netrig capture (pid, CPU c)
                                                            counts per trial tag, own drop counter
 CaptureMeasurer.measure(load):
   SIGUSR1 → capture writes {seq, tags, drops, cpu} to its stats file   (before)
   run_trial(tx, None, [stream])  → sent, achieved rate, validity (the tester's side)
   SIGUSR1 → stats file again                                          (after the drain)
   received = frames of tag T the capture counted (never another trial's, never ND/foreign)
   cpu = the capture process's user+sys seconds between the two reads
```

The first rule of a tester holds: a trial whose sender fell short of the rate (beyond
``tx_tolerance_pct``), that the engine marks invalid, or after which the capture could not confirm
its counters (it never found its source empty) is invalid — a tester or measurement problem,
never the capture's loss. ``tx_only=True`` measures the tester alone (received := sent): the
tester's own ceiling, found with :func:`netrig.methodology.selftest.prove_rate`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from netrig.errors import ResultError, TestbedError
from netrig.measure.seam import Load, TrialCounts, transient_stretch
from netrig.model import defaults
from netrig.results.typed import from_dict
from netrig.trial import Port, Stream, run_trial

#: The signature carries a trial tag's low 23 bits.
TAG_MASK = (1 << 23) - 1
#: How long the capture may take to write its counters.
STATS_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class TagFrames:
    tag: int
    frames: int


@dataclass(frozen=True)
class CapturePin:
    worker: str
    cpu: int
    error: str


@dataclass(frozen=True)
class CaptureStats:
    """The capture's counters as its stats file has them (``netrig capture --stats``; the engine's
    ``CaptureStats``): signed frames per sender's trial tag, frames without a signature, drops, its
    CPU; ``seq`` counts the writes, ``settled``: its source ran empty before it wrote."""

    seq: int = 0
    tags: tuple[TagFrames, ...] = ()
    foreign: int = 0
    warmup: int = 0
    drops: int = 0
    drops_source: str | None = None
    queue_drops: int = 0
    cpu_user_s: float = 0.0
    cpu_sys_s: float = 0.0
    elapsed_s: float = 0.0
    settled: bool = False
    pin_failures: tuple[CapturePin, ...] = ()
    #: What the capture method says about itself (its source, its fallbacks).
    notes: str = ""

    def frames_of(self, tag: int) -> int:
        return sum(t.frames for t in self.tags if t.tag == tag & TAG_MASK)

    @property
    def signed(self) -> int:
        return sum(t.frames for t in self.tags)

    @property
    def unpinned(self) -> tuple[str, ...]:
        """The capture's workers that did not get its CPU."""
        return tuple(f"capture {p.worker} not pinned to CPU {p.cpu}: {p.error}" for p in self.pin_failures)


@dataclass(frozen=True)
class CaptureDelta:
    """What the capture counted over one trial (``raw.capture``): the trial's frames, other trials'
    (``stray``), unsigned ones, drops and its CPU-seconds."""

    frames: int
    stray: int
    foreign: int
    warmup: int
    drops: int
    drops_source: str | None
    queue_drops: int
    cpu_user_s: float
    cpu_sys_s: float
    cpu_s: float
    wall_s: float

    @classmethod
    def between(cls, before: CaptureStats, after: CaptureStats, tag: int) -> CaptureDelta:
        mine = after.frames_of(tag) - before.frames_of(tag)
        user, sys_ = after.cpu_user_s - before.cpu_user_s, after.cpu_sys_s - before.cpu_sys_s
        return cls(mine, after.signed - before.signed - mine, after.foreign - before.foreign,
                   after.warmup - before.warmup, after.drops - before.drops, after.drops_source,
                   after.queue_drops - before.queue_drops, round(user, 4), round(sys_, 4), round(user + sys_, 4),
                   round(after.elapsed_s - before.elapsed_s, 4))


@dataclass(frozen=True)
class CaptureProcess:
    """A running ``netrig capture`` (the capture test bed's DUT process)."""

    pid: int
    stats_path: str

    def snapshot(self) -> CaptureStats:
        """Ask for the counters (SIGUSR1) and return them once written."""
        before = self._read()
        want = (before.seq if before is not None else 0) + 1
        try:
            os.kill(self.pid, signal.SIGUSR1)
        except ProcessLookupError:
            raise TestbedError(f"the capture process {self.pid} is gone (see its log)") from None
        deadline = time.monotonic() + STATS_TIMEOUT_S
        while time.monotonic() < deadline:
            doc = self._read()
            if doc is not None and doc.seq >= want:
                return doc
            time.sleep(0.005)
        raise TestbedError(f"the capture process {self.pid} did not write its counters to {self.stats_path} "
                           f"within {STATS_TIMEOUT_S:g} s")

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The capture application stopped (SIGSTOP) for the block, resumed after it however it
        ends: its host's kernel still receives (and drops what the full socket or ring cannot
        take), the application takes no CPU. What the tester proves there is its own ceiling."""
        try:
            os.kill(self.pid, signal.SIGSTOP)
        except ProcessLookupError:
            raise TestbedError(f"the capture process {self.pid} is gone (see its log)") from None
        try:
            yield
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)

    def _read(self) -> CaptureStats | None:
        """The stats file; ``None`` while it is missing, empty or half written."""
        try:
            with open(self.stats_path) as f:
                text = f.read()
        except OSError:
            return None
        try:
            return from_dict(CaptureStats, json.loads(text)) if text.strip() else None
        except (json.JSONDecodeError, ResultError, TypeError):
            return None


class CaptureMeasurer:
    """A :class:`~netrig.measure.seam.Measurer` (``measure`` only) whose receiver is the capture."""

    def __init__(self, tx: Port, template: dict, capture: CaptureProcess, *, drain_s: float = 0.3,
                 tx_tolerance_pct: float = defaults.TX_TOLERANCE_PCT, tx_only: bool = False,
                 stall_retries: int = 2):
        self.tx, self.template, self.capture = tx, dict(template), capture
        self.drain_s = drain_s
        self.tolerance = tx_tolerance_pct / 100
        self.tx_only = tx_only
        self.stall_retries = stall_retries

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        """One trial; one the tester's stalls stretched beyond the tolerance (a transient, never the
        capture's doing: the capture runs on another CPU) is repeated up to ``stall_retries`` times."""
        attempts: list[dict[str, Any]] = []
        while True:
            c, stretch_s, lag_s = self._measure_once(load, duration_s)
            # A transient stall, not a tester that cannot keep the rate (engine.EngineMeasurer._stretched).
            stretched = not c.valid and "stretched" in (c.invalid_reason or "") and \
                transient_stretch(stretch_s, lag_s, duration_s, self.tolerance)
            if not stretched or len(attempts) >= self.stall_retries:
                break
            attempts.append({"frames_sent": c.frames_sent, "achieved_pps": c.achieved_pps,
                             "invalid_reason": c.invalid_reason})
        if attempts:
            c = dataclasses.replace(c, raw={**c.raw, "stretched_attempts": attempts})
        return c

    def _measure_once(self, load: Load, duration_s: float) -> tuple[TrialCounts, float, float]:
        """The trial's counts, how much later than planned its last frame left and the longest the
        tester fell behind its schedule (s)."""
        stream = Stream(frame_size=load.frame_size, rate_pps=load.rate_pps, **self.template)
        before = None if self.tx_only else self.capture.snapshot()
        res = run_trial(self.tx, None, [stream], duration_s=duration_s, drain_s=self.drain_s,
                        max_stretch_pct=100 * self.tolerance)
        after = None if self.tx_only else self.capture.snapshot()
        achieved = res.tx_rate_pps
        valid, reason = res.valid, res.invalid_reason
        if valid and achieved < load.rate_pps * (1 - self.tolerance):
            valid, reason = False, (f"tester sent {achieved:.0f} fps, {100 * achieved / load.rate_pps:.1f}% of the "
                                    f"intended {load.rate_pps:.0f} fps")
        raw: dict[str, Any] = {"engine": res.to_dict(flows=False), "trial_tag": res.trial_tag}
        stretch_s, lag_s = res.tx_stretch_ns / 1e9, res.tx_max_lag_ns / 1e9
        unpinned = tuple(str(f) for f in res.pin_failures) + (after.unpinned if after is not None else ())
        if before is None or after is None:
            return TrialCounts(achieved_pps=achieved, intended_pps=load.rate_pps, frames_sent=res.frames_sent,
                               frames_received=res.frames_sent,
                               valid=valid, invalid_reason=reason, pin_failures=unpinned, raw=raw), stretch_s, lag_s
        if valid and not after.settled:
            valid, reason = False, "the capture could not confirm its counters (its source never ran empty)"
        got = CaptureDelta.between(before, after, res.trial_tag)
        raw["capture"] = asdict(got)
        return TrialCounts(achieved_pps=achieved, intended_pps=load.rate_pps, frames_sent=res.frames_sent,
                           frames_received=got.frames, valid=valid, invalid_reason=reason, foreign=got.foreign,
                           stray=got.stray, pin_failures=unpinned, raw=raw), stretch_s, lag_s
