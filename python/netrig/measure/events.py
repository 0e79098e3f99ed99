"""Events under load: commands run in the DUT's namespace mid-trial, and what they cost each flow.

An :class:`Event` is a shell command line and when it runs (``at_s`` after the measured run
begins): an nftables reload, a link flap, a route change, a daemon restart. A :class:`CommandRunner`
runs it (``sh -c`` inside ``ip netns exec <netns>`` when a namespace is given, with a timeout,
the whole process group killed when it expires) and records an :class:`EventRun`: when it really
started and ended (``CLOCK_MONOTONIC``), its exit status and the tail of its output. A command that
fails is recorded, never raised.

What an event cost is measured from the receiver's own data, per flow (:func:`event_results`): the
engine keeps every flow's longest sequence gaps with the transmit times of the last frame received
before each and the first after it (``FlowResult.gaps``, one slot per event and one more). For an
event, a flow's outage is made of its gaps that end after the command started and begin before
forwarding was loss-free again (the recovery below, when the intervals saw loss; else before the
next event started): outage = first frame after − last frame before, frames lost = the sequence
numbers missing in them. A gap after the recovery is not the event's (it was: the longest gap in the
window, so a DUT's ring drop seconds later stood in for a withdraw's outage). A flow that never
received again after the event has an unbounded outage (``recovered`` false). The recovery time
comes from per-interval counts of the whole trial (:data:`INTERVAL_S` long, both sent and received
attributed by transmit time): from the command's start to the beginning of the first run of
loss-free intervals at least :data:`RECOVERY_HOLD_S` long that follows the first lossy interval of the
event's window (0 when nothing was lost).
"""
from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from netrig.errors import ConfigError
from netrig.results.typed import from_dict
from netrig.testbed.placement import on_time, ordinary_while

if TYPE_CHECKING:
    from netrig import _native

#: Per-interval counting of a trial with events, seconds (the recovery time's resolution).
INTERVAL_S = 0.01
#: Forwarding counts as loss-free again after this long without a lost frame, seconds.
RECOVERY_HOLD_S = 0.1
#: Default time a command may take before it is killed, seconds.
DEFAULT_TIMEOUT_S = 30.0
#: Most events in one trial (the engine keeps one sequence gap per event and one more, per flow).
MAX_EVENTS = 63
#: Flows whose outages a trial with events reports (the engine's per-flow results; its default of
#: 1 024 per stream left a reset's or a withdraw's outages of every later flow unseen: 10 000
#: prefixes read as 1 024).
MAX_EVENT_FLOWS = 65_536
#: A flow whose last frame left this long before an event's command started (or later) and that
#: never received again stopped in that event, ns.
TAIL_SLACK_NS = 100_000_000
#: Characters of a command's output kept in the result.
OUTPUT_TAIL_CHARS = 400


@dataclass(frozen=True)
class Event:
    """``command`` (a shell command line) runs ``at_s`` seconds after the measured run begins."""

    command: str
    at_s: float

    def __post_init__(self) -> None:
        if not isinstance(self.command, str) or not self.command.strip():
            raise ConfigError("command", "must be a non-empty command line (e.g. 'ip link set dev eth0 down')")
        try:
            shlex.split(self.command)
        except ValueError as e:
            raise ConfigError("command", f"{self.command!r}: {e} (a shell command line: balance its "
                                               "quotes)") from None
        if isinstance(self.at_s, bool) or not isinstance(self.at_s, (int, float)) or not self.at_s >= 0:
            raise ConfigError("at_s", f"must be a number of seconds >= 0 (got {self.at_s!r})")

    def to_dict(self) -> dict:
        return {"command": self.command, "at_s": self.at_s}

    @classmethod
    def from_dict(cls, d: Mapping) -> Event:
        """An event as configured or stored; a missing command or time is the error naming it."""
        return from_dict(cls, {"command": "", "at_s": -1, **d})


def check_events(events: Sequence[Event], duration_s: float, field_name: str = "events") -> None:
    """Every event falls inside a trial of ``duration_s``; at most :data:`MAX_EVENTS`."""
    if len(events) > MAX_EVENTS:
        raise ConfigError(field_name, f"{len(events)} events: at most {MAX_EVENTS} in one trial")
    for e in events:
        if e.at_s >= duration_s:
            raise ConfigError(field_name, f"an event at {e.at_s:g} s is not inside the {duration_s:g} s trial: "
                                          "give a time before its end (or a longer duration)")


@dataclass(frozen=True)
class EventRun:
    """What running an event's command did. Times are ``CLOCK_MONOTONIC`` ns (``started_ns`` 0: it
    never ran, e.g. the trial ended first). ``exit_status`` is ``None`` when it did not exit by itself
    (timed out, or could not start: ``error``)."""

    command: str
    at_s: float
    netns: str | None = None
    started_ns: int = 0
    ended_ns: int = 0
    exit_status: int | None = None
    timed_out: bool = False
    output_tail: str = ""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out and self.error is None

    @property
    def took_s(self) -> float:
        return max(0, self.ended_ns - self.started_ns) / 1e9

    def problem(self) -> str | None:
        """What went wrong, in words (``None``: it ran and exited 0)."""
        if self.error:
            return self.error
        if self.timed_out:
            return f"timed out after {self.took_s:.1f} s and was killed"
        if self.exit_status is None:
            return "did not run"
        if self.exit_status != 0:
            tail = " ".join(self.output_tail.split())[-160:]
            return f"exited {self.exit_status}" + (f": {tail}" if tail else "")
        return None

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok, "took_s": self.took_s}

    @classmethod
    def from_dict(cls, d: Mapping) -> EventRun:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


class EventRunnerFn(Protocol):
    def __call__(self, event: Event) -> EventRun: ...


class CommandRunner:
    """Runs events' commands with ``sh -c``, in ``netns`` (``ip netns exec``) when given, with the
    test bed's parts in the environment (``env``: ``NETRIG_DUT_NETNS`` …), killing the command's
    whole process group after ``timeout_s``."""

    def __init__(self, netns: str | None = None, env: Mapping[str, str] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S):
        if not timeout_s > 0:
            raise ConfigError("event_timeout_s", f"must be > 0 seconds (got {timeout_s!r})")
        self.netns, self.env, self.timeout_s = netns, dict(env or {}), timeout_s

    def argv(self, command: str) -> list[str]:
        sh = ["sh", "-c", command]
        return ["ip", "netns", "exec", self.netns, *sh] if self.netns else sh

    def __call__(self, event: Event) -> EventRun:
        start = time.monotonic_ns()
        try:
            p = subprocess.Popen(self.argv(event.command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env={**os.environ, **self.env}, start_new_session=True)
        except OSError as e:
            return EventRun(event.command, event.at_s, self.netns, started_ns=start, ended_ns=time.monotonic_ns(),
                            error=f"could not start: {e}")
        timed_out = False
        try:
            out, _ = p.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, _ = p.communicate()
        end = time.monotonic_ns()
        text = out.decode(errors="replace") if out else ""
        return EventRun(event.command, event.at_s, self.netns, started_ns=start, ended_ns=end,
                        exit_status=None if timed_out else p.returncode, timed_out=timed_out,
                        output_tail=text[-OUTPUT_TAIL_CHARS:])


class EventClock:
    """Fires events at their times after the measured run begins, on a thread of their own.

    The run start comes from the engine's trial itself (:meth:`follow`, read on the clock's own
    thread, an ordinary one) or else from the live snapshots (:meth:`progress`: the first one in the
    ``running`` phase). The clock's thread needs the GIL to fire, so the thread that runs the trial
    must not hold it at the tester bookkeeping's lowest priority (``SCHED_IDLE``): preempted there by
    the TX worker spinning on its CPU, it kept the GIL, and the event ran 0.25–1.2 s late in 3 of 6
    3-s trials at 8 kfps on the router test bed (after the traffic, once). The trial runs under
    :meth:`on_time` (0 of 6 late). :meth:`finish` (after the trial) waits for commands still running
    and returns every :class:`EventRun`, in the events' order; an event whose time the trial never
    reached did not run."""

    def __init__(self, events: Sequence[Event], runner: Callable[[Event], EventRun]):
        self.events = sorted(events, key=lambda e: e.at_s)
        self.runner = runner
        self.runs: dict[int, EventRun] = {}
        self._start_ns: int | None = None
        self._trial: _native.Trial | None = None
        self._started = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._fire, name="netrig-events", daemon=True)
        self._thread.start()

    def progress(self, phase: str, elapsed_s: float) -> None:
        if self._start_ns is None and phase == "running":
            self._start_ns = time.monotonic_ns() - int(elapsed_s * 1e9)
            self._started.set()

    def on_time(self) -> contextlib.AbstractContextManager[None]:
        """The calling thread (it runs the trial and holds the GIL between its waits, which the
        clock needs to fire) at ordinary priority while the block runs, restored after."""
        return ordinary_while()

    def follow(self, trial: _native.Trial) -> None:
        """Take the run start from ``trial`` (``run_trial(follow=…)``)."""
        self._trial = trial

    def _wait_start(self) -> int | None:
        """The run start, once known; ``None`` when the clock is finished first."""
        while not self._done.is_set():
            trial = self._trial
            start = trial.run_start_ns(0.05) if trial is not None else None
            if start is not None:
                return start
            if self._started.wait(0.0 if trial is not None else 0.05):
                return self._start_ns
        return None

    def _fire(self) -> None:
        on_time()  # events run at their times, even next to a busy tester worker
        start = self._wait_start()
        if start is None:
            return
        self._start_ns = start
        for i, e in enumerate(self.events):
            while True:
                wait = (start + e.at_s * 1e9 - time.monotonic_ns()) / 1e9
                if wait <= 0:
                    break
                if self._done.wait(min(wait, 0.05)):
                    return
            self.runs[i] = self.runner(e)

    def finish(self, timeout_s: float) -> list[EventRun]:
        self._done.set()
        self._thread.join(timeout_s)
        return [self.runs.get(i) or EventRun(e.command, e.at_s, error="did not run: the trial ended first")
                for i, e in enumerate(self.events)]


@dataclass(frozen=True)
class FlowOutage:
    """One flow's outage in an event: the gap between the last frame received before and the first
    after (their transmit times, seconds from the command's start; ``after_s`` ``None`` when the flow
    never received again), and the sequence numbers missing in it."""

    flow_id: int
    frames_lost: int
    before_s: float
    after_s: float | None

    @property
    def outage_s(self) -> float | None:
        return None if self.after_s is None else self.after_s - self.before_s

    @property
    def recovered(self) -> bool:
        return self.after_s is not None

    def to_dict(self) -> dict:
        return {**asdict(self), "outage_s": self.outage_s, "recovered": self.recovered}

    @classmethod
    def from_dict(cls, d: Mapping) -> FlowOutage:
        return from_dict(cls, {"after_s": None, **d})  # ``outage_s``, ``recovered``: derived, not read


@dataclass(frozen=True)
class EventResult:
    """An event, what running it did, and what it cost: per flow the outage (flows without a gap in
    the event's window are left out: no outage), and the time from the command's start until
    forwarding was loss-free again (``recovery_s``; ``None`` when it never was, or unknown)."""

    run: EventRun
    flows: tuple[FlowOutage, ...] = ()
    recovery_s: float | None = 0.0
    flows_total: int = 0
    raw: dict = field(default_factory=dict, compare=False)

    @property
    def outage_s(self) -> float | None:
        """The longest outage over flows (0 with none; ``None`` when a flow never recovered)."""
        if any(not f.recovered for f in self.flows):
            return None
        return max((f.outage_s or 0.0 for f in self.flows), default=0.0)

    @property
    def frames_lost(self) -> int:
        return sum(f.frames_lost for f in self.flows)

    @property
    def recovered(self) -> bool:
        return all(f.recovered for f in self.flows)

    def to_dict(self) -> dict:
        return {"event": self.run.to_dict(), "outage_s": self.outage_s, "frames_lost": self.frames_lost,
                "recovery_s": self.recovery_s, "recovered": self.recovered, "flows_total": self.flows_total,
                "flows": [f.to_dict() for f in self.flows], "raw": self.raw}

    @classmethod
    def from_dict(cls, d: Mapping) -> EventResult:
        e = from_dict(_StoredEvent, d)
        return cls(e.event, e.flows or (), e.recovery_s, e.flows_total or 0, dict(e.raw or {}))


@dataclass(frozen=True)
class _StoredEvent:
    """:meth:`EventResult.to_dict` as stored (the run under ``event``; totals derived, not read)."""

    event: EventRun
    flows: tuple[FlowOutage, ...] | None = None
    recovery_s: float | None = None
    flows_total: int | None = None
    raw: dict | None = None


def _recovery_s(intervals: Sequence[Any], run_start_ns: int, start_ns: int, end_ns: int | None) -> float | None:
    """Seconds from ``start_ns`` to the first run of loss-free intervals :data:`RECOVERY_HOLD_S`
    long after the first lossy interval of [``start_ns``, ``end_ns``); 0 when none was lossy."""
    ivs = [(run_start_ns + int(iv.start_s * 1e9), int(iv.duration_s * 1e9), iv.frames_sent > iv.frames_received)
           for iv in intervals]
    # From the interval the command started in, until the next event's.
    ivs = [iv for iv in ivs if iv[0] + iv[1] > start_ns and (end_ns is None or iv[0] < end_ns)]
    first = next((k for k, iv in enumerate(ivs) if iv[2]), None)
    if first is None:
        return 0.0
    k = first
    while k < len(ivs):
        if ivs[k][2]:
            k += 1
            continue
        j, held = k, 0
        while j < len(ivs) and not ivs[j][2] and held < RECOVERY_HOLD_S * 1e9:
            held += ivs[j][1]
            j += 1
        if held >= RECOVERY_HOLD_S * 1e9 or j == len(ivs):
            return max(0, ivs[k][0] - start_ns) / 1e9
        k = j
    return None


def _outage(f: Any, epoch: int, start_ns: int, end_ns: int | None) -> FlowOutage | None:
    """Flow ``f``'s outage in the event that started at ``start_ns`` and whose disturbance ended by
    ``end_ns`` (see :func:`event_results`)."""
    last = epoch + f.last_rx_tx_ns
    if f.tail_missing and f.frames_received and last >= start_ns - TAIL_SLACK_NS and \
            (end_ns is None or last < end_ns - TAIL_SLACK_NS):
        # The flow's last frame came around this event: it never received again.
        return FlowOutage(f.flow_id, f.tail_missing, (last - start_ns) / 1e9, None)
    gaps = [g for g in f.gaps if epoch + g.after_ns > start_ns and (end_ns is None or epoch + g.before_ns < end_ns)]
    if not gaps:
        return None
    before, after = min(g.before_ns for g in gaps), max(g.after_ns for g in gaps)
    return FlowOutage(f.flow_id, sum(g.missing for g in gaps), (epoch + before - start_ns) / 1e9,
                      (epoch + after - start_ns) / 1e9)


def event_results(result: Any, runs: Sequence[EventRun]) -> tuple[EventResult, ...]:
    """Each event's cost from an engine ``TrialResult`` with gaps and intervals (see the module)."""
    epoch, run_start = result.epoch_ns, result.run_start_ns
    flows = list(result.flows)
    out = []
    starts = [r.started_ns for r in runs]
    for i, r in enumerate(runs):
        if not r.started_ns:
            out.append(EventResult(r, recovery_s=None, flows_total=len(flows)))
            continue
        later = [s for s in starts[i + 1:] if s > r.started_ns]
        end = min(later) if later else None
        rec = _recovery_s(result.intervals, run_start, r.started_ns, end) if result.intervals else None
        # Loss after forwarding was loss-free again is not this event's (a DUT's ring drop seconds later).
        settled = r.started_ns + int(rec * 1e9) + 1 if rec else end
        outages = [o for f in flows if (o := _outage(f, epoch, r.started_ns, settled)) is not None]
        if any(not o.recovered for o in outages):
            rec = None
        out.append(EventResult(r, tuple(outages), rec, len(flows)))
    return tuple(out)
