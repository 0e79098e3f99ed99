"""The platform under every trial: its stalls measured, the DUT's loss placed in time, the latency's
pattern shown (lab report 001: "non-repeatable results", "hypervisor entries/exits: hard to track").

A session keeps one :class:`PlatformWatch` (``_native.StallWatch``: BPF programs on the CPUs' clocks,
the scheduler's and the wire's tracepoints; ``netrig_engine::stalls``). After each trial the measurer
asks it for the trial's window:

* **stalls** — episodes in which a CPU did not run (its 1-ms tick came late: the host stopped the vCPU,
  unseen by the guest) or in which a DUT task was ready and did not run (the guest ran another task
  on its CPU, named). Episodes on the DUT's CPUs and its tasks are the DUT's; those on the other CPUs
  the tester's. A stall shorter than the threshold (1 ms) is not reported.
* **loss in stalls** — of the frames the DUT's receive ring dropped during the trial (the wire's
  counts per 0.52-ms slot), those dropped while a stall of what takes the ring's frames (the DUT's
  CPU, or its ring threads kept waiting) longer than the ring's time at that load (ring frames /
  intended rate) was under way: the ring filled because the DUT's CPU stopped, not because the
  DUT was too slow. Nothing is taken off the DUT's loss; the cause is said beside it.
* **latency timeline** — the engine's per-window p50 / p99 / max (8.4-ms windows) and the dominant
  period of its spikes, if any.
"""
from __future__ import annotations

import cmath
import contextlib
import dataclasses
import math
import os
import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from netrig import _native
from netrig.errors import CapabilityError
from netrig.testbed.placement import processes_named

if TYPE_CHECKING:
    from netrig.testbed import Testbed

#: A stall is reported when it lasted longer than this, ms (the tick program's period is 1 ms too:
#: a CPU stall's length is known to ±0.5 ms, a task's wait exactly).
THRESHOLD_MS = 1.0
TICK_MS = 1.0


@dataclass(frozen=True)
class StallEpisode:
    """One stall in a trial. ``start_s``: since the trial's run began (negative: before it);
    ``seen_by_guest``: a task was kept from its CPU by another task (``by``) the guest ran; else the
    CPU itself did not run (the host stopped it). ``by_tester``: that task was a thread of netrig's
    own process (the tester's work on the DUT's CPU: the first rule's concern, never the DUT's).
    ``bound_ms``: how far its start and end may be off (a gap between the watch's ticks: half a
    tick; a task's wait and a late timer are exact, 0)."""

    start_s: float
    length_ms: float
    cpu: int
    seen_by_guest: bool
    by: str | None = None
    by_tester: bool = False
    bound_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"start_s": round(self.start_s, 6), "length_ms": round(self.length_ms, 3), "cpu": self.cpu,
                "seen_by_guest": self.seen_by_guest, "by": self.by, **({"by_tester": True} if self.by_tester else {}),
                **({"bound_ms": round(self.bound_ms, 3)} if self.bound_ms else {})}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StallEpisode:
        return cls(float(d["start_s"]), float(d["length_ms"]), int(d["cpu"]), bool(d["seen_by_guest"]), d.get("by"),
                   bool(d.get("by_tester", False)), float(d.get("bound_ms", 0.0)))

    @property
    def end_s(self) -> float:
        return self.start_s + self.length_ms / 1e3


@dataclass(frozen=True)
class StallSide:
    """One party's stalls in a trial (the DUT's or the tester's)."""

    episodes: tuple[StallEpisode, ...] = ()

    @property
    def count(self) -> int:
        return len(self.episodes)

    @property
    def max_ms(self) -> float:
        return max((e.length_ms for e in self.episodes), default=0.0)

    @property
    def total_ms(self) -> float:
        return sum(e.length_ms for e in self.episodes)

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "max_ms": round(self.max_ms, 3), "total_ms": round(self.total_ms, 3),
                "episodes": [e.to_dict() for e in self.episodes]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StallSide:
        return cls(tuple(StallEpisode.from_dict(e) for e in d.get("episodes") or ()))


@dataclass(frozen=True)
class TrialStalls:
    """The platform's stalls over one trial, the DUT's and the tester's. ``dut`` is None when the
    trial had no DUT CPU (a loopback). ``lost_episodes``: episodes the kernel's ring overwrote
    before they were read (0 normally). ``missed_events``: wake-ups, switches and ticks the kernel
    did not run the watch's programs for, since the previous trial (their CPU was already in a BPF
    program or a BPF system call): the episodes may be incomplete (0 normally)."""

    tester: StallSide
    dut: StallSide | None
    threshold_ms: float = THRESHOLD_MS
    lost_episodes: int = 0
    missed_events: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"dut": self.dut.to_dict() if self.dut else None, "tester": self.tester.to_dict(),
                "threshold_ms": self.threshold_ms, "lost_episodes": self.lost_episodes,
                "missed_events": self.missed_events}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrialStalls:
        dut = d.get("dut")
        return cls(StallSide.from_dict(d["tester"]), StallSide.from_dict(dut) if dut else None,
                   float(d.get("threshold_ms", THRESHOLD_MS)), int(d.get("lost_episodes", 0)),
                   int(d.get("missed_events", 0)))


@dataclass(frozen=True)
class Periodicity:
    """The dominant period of a trial's latency spikes: ``share`` of the spikes lie one period from
    another spike."""

    period_ms: float
    share: float
    spikes: int

    def to_dict(self) -> dict[str, Any]:
        return {"period_ms": round(self.period_ms, 2), "share": round(self.share, 3), "spikes": self.spikes}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Periodicity:
        return cls(float(d["period_ms"]), float(d["share"]), int(d["spikes"]))


@dataclass(frozen=True)
class LatencyTimeline:
    """A trial's latency over time: per window of ``window_ms`` (from ``start_s`` after the run
    began), the frames counted and their p50 / p99 (within 12 %) and max, µs; ``spikes``: the
    windows whose max stood out (index into the lists); ``periodicity`` of those spikes, or None."""

    window_ms: float
    start_s: float
    frames: tuple[int, ...]
    p50_us: tuple[float, ...]
    p99_us: tuple[float, ...]
    max_us: tuple[float, ...]
    spikes: tuple[int, ...] = ()
    periodicity: Periodicity | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"window_ms": self.window_ms, "start_s": round(self.start_s, 6), "frames": list(self.frames),
                "p50_us": list(self.p50_us), "p99_us": list(self.p99_us), "max_us": list(self.max_us),
                "spikes": list(self.spikes),
                "periodicity": self.periodicity.to_dict() if self.periodicity else None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LatencyTimeline:
        p = d.get("periodicity")
        return cls(float(d["window_ms"]), float(d["start_s"]), tuple(d["frames"]), tuple(d["p50_us"]),
                   tuple(d["p99_us"]), tuple(d["max_us"]), tuple(d.get("spikes") or ()),
                   Periodicity.from_dict(p) if p else None)


def spikes(max_us: Sequence[float], p50_us: Sequence[float], frames: Sequence[int]) -> tuple[int, ...]:
    """The windows whose max stands out: above 4× the trial's typical window max and 100 µs above
    it (windows without frames never are)."""
    seen = [m for m, n in zip(max_us, frames) if n]
    if len(seen) < 8:
        return ()
    typical = statistics.median(seen)
    floor = max(4 * typical, typical + 100.0)
    return tuple(i for i, (m, n) in enumerate(zip(max_us, frames)) if n and m > floor)


def periodicity(spike_windows: Sequence[int], window_ms: float, windows: int) -> Periodicity | None:
    """The period of the spikes: the lag (in windows, 2 .. a third of the trial) at which most spikes
    have another spike (±1 window), refined to the mean spacing of the spikes that do; None with
    fewer than 4 spikes, or when fewer than 3 or under half of them keep the period. Spikes in
    adjacent windows are one spike (at the first)."""
    # a spike that spans adjacent windows (the frames queued behind it drain into the next) is one
    # event, at its first window: counted twice, its windows' one-window gap would pull the period down
    spike_windows = [w for i, w in enumerate(spike_windows) if i == 0 or w - spike_windows[i - 1] > 1]
    if len(spike_windows) < 4:
        return None
    at = set(spike_windows)

    def kept(lag: int) -> list[int]:
        return [s for s in spike_windows if any(s + lag + d in at for d in (-1, 0, 1))]
    best = max(range(2, max(3, windows // 3)), key=lambda lag: (len(kept(lag)), -lag), default=None)
    if best is None:
        return None
    # a multiple of the period keeps as many spikes when some are missing (every fifth gone: five
    # periods keep them all): take the shortest whole fraction of it that keeps nearly as many
    fractions = sorted({f for k in range(2, best // 2 + 1) if (f := round(best / k)) >= 2})
    best = next((f for f in fractions if len(kept(f)) >= 0.8 * len(kept(best))), best)
    keep = kept(best)
    share = len(keep) / len(spike_windows)
    if share < 0.5 or len(keep) < 3:
        return None
    return Periodicity(_phase_locked(spike_windows, best) * window_ms, share, len(spike_windows))


def _phase_locked(spike_windows: Sequence[int], lag: int) -> float:
    """The period (windows, to 0.01) within a window of ``lag`` at which the spikes' phases agree
    best (the mean resultant length of 2π·spike/period). Not the mean of the gaps near ``lag``:
    positions are whole windows, so a true period of 5.98 windows shows as gaps of 5, 6 and 7, and a
    lag of 5 (±1) keeps the 5s and drops the 7s (44.6 ms for a 50-ms timer in CI). The phases use
    every spike's whole position, so quantisation averages out over the trial and a spike that is
    not the timer's (at a random phase) only dilutes the agreement."""
    def agreement(period: float) -> float:
        return abs(sum(cmath.exp(2j * math.pi * s / period) for s in spike_windows))
    low = max(lag - 1.0, 1.5)  # every whole-window position agrees at a period of 1
    return max((low + i / 100 for i in range(round((lag + 1 - low) * 100) + 1)), key=agreement)


def timeline_of(res: _native.TrialResult) -> LatencyTimeline | None:
    """The trial's latency timeline, with its spikes and their period; None when the engine kept none."""
    tl = res.latency_timeline
    if not tl:
        return None
    window_ms = _native.LATENCY_WINDOW_NS / 1e6
    frames = tuple(w.frames for w in tl)
    us = lambda v: round(v / 1e3, 1)
    p50, p99, mx = (tuple(us(w.p50_ns) for w in tl), tuple(us(w.p99_ns) for w in tl), tuple(us(w.max_ns) for w in tl))
    start_s = (res.epoch_ns + tl[0].start_ns - res.run_start_ns) / 1e9 if res.run_start_ns else tl[0].start_ns / 1e9
    sp = spikes(mx, p50, frames)
    return LatencyTimeline(window_ms, start_s, frames, p50, p99, mx, sp, periodicity(sp, window_ms, len(tl)))


def merged(episodes: Iterable[StallEpisode]) -> tuple[StallEpisode, ...]:
    """Episodes of one CPU that overlap made one (a host stall during a task's wait is one stall),
    named by whose part of it was longer than the threshold (:func:`whose`). A gap between ticks is
    known only to its ``bound_ms`` (half the watch's tick), so one within that of its neighbour is
    part of it too: a 5-ms take with a 1.5-ms host stop inside was reported as two episodes 47 µs
    apart. Exact episodes apart are two, however close: a 1.4-ms late wake of the DUT's thread that
    ended 0.2 ms before a 5-ms take was merged into it once, and the 6.7 ms named by the take."""
    out: list[tuple[StallEpisode, list[StallEpisode]]] = []
    for e in sorted(episodes, key=lambda e: e.start_s):
        last = out[-1][0] if out else None
        slack = max(e.bound_ms, last.bound_ms) / 1e3 if last else 0.0
        if last and e.start_s <= last.end_s + slack and e.cpu == last.cpu:
            end = max(last.end_s, e.end_s)
            out[-1] = (StallEpisode(last.start_s, (end - last.start_s) * 1e3, last.cpu, False,
                                    bound_ms=max(last.bound_ms, e.bound_ms)), out[-1][1] + [e])
        else:
            out.append((e, [e]))
    return tuple(whose(stall, parts) for stall, parts in out)


def whose(stall: StallEpisode, parts: Sequence[StallEpisode]) -> StallEpisode:
    """A merged stall named as the guest's when the guest's episodes outside the host's stops in it
    last the threshold or more, after the task of the episode longest outside them; else the
    host's. A task's wait is counted from when it could run to when it ran, host stops in between
    included, and the task that ran last before it is its ``by``: a 2.4-ms wait inside a 2.6-ms host
    stop was named after the bench's own main thread, which only woke in it (`bench/flows.py`,
    2026-12-08), and a DUT ring thread's so would have made the DUT's drops the tester's. Named
    after its first episode, a 150-ms take of the DUT's CPU by a real-time process was named after a
    `kworker` that had held the CPU 0.14 ms before it (a clean clone, 2026-12-08)."""
    guest = [p for p in parts if p.seen_by_guest]
    host = [p for p in parts if not p.seen_by_guest]
    if not guest or (host and outside_ms(guest, host) < THRESHOLD_MS):
        return dataclasses.replace(stall, seen_by_guest=False, by=None, by_tester=False)
    longest = max(guest, key=lambda p: outside_ms([p], host))
    return dataclasses.replace(stall, seen_by_guest=True, by=longest.by, by_tester=any(p.by_tester for p in guest))


def outside_ms(spans: Sequence[StallEpisode], holes: Sequence[StallEpisode]) -> float:
    """How long the union of ``spans`` lasts outside the union of ``holes``, ms."""
    def union(eps: Sequence[StallEpisode]) -> list[tuple[float, float]]:
        out: list[tuple[float, float]] = []
        for a, b in sorted((e.start_s, e.end_s) for e in eps):
            if out and a <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], b))
            else:
                out.append((a, b))
        return out

    s, h = union(spans), union(holes)
    inside = sum(max(0.0, min(b, d) - max(a, c)) for a, b in s for c, d in h)
    return (sum(b - a for a, b in s) - inside) * 1e3


@dataclass(frozen=True)
class WireLoss:
    """Where the DUT's ring drops fell in one trial."""

    #: Frames the DUT's ring dropped over the trial window (the wire's slots).
    dropped: int
    #: Of those, dropped while a DUT stall longer than the ring's time was under way.
    in_stalls: int
    #: The ring's time at the trial's load: ring frames / intended rate, ms.
    ring_ms: float
    #: The slots covered the whole window (a trial longer than the 4.6-minute history is not).
    complete: bool = True
    #: Of ``in_stalls``, dropped while the DUT waited for a thread of netrig's own (``by_tester``):
    #: the tester's loss, never the DUT's.
    by_tester: int = 0

    def tester_reason(self) -> str | None:
        """Why a trial whose DUT ring dropped frames while netrig's own threads held the DUT's CPU
        is invalid (None: none did)."""
        if not self.by_tester:
            return None
        return (f"{self.by_tester} frames the DUT's ring dropped while netrig's own threads held its CPU: "
                "the tester's loss, not the DUT's")

    def to_dict(self) -> dict:
        return {"dropped": self.dropped, "in_stalls": self.in_stalls, "ring_ms": round(self.ring_ms, 3),
                "complete": self.complete, "by_tester": self.by_tester}


def loss_in_stalls(slots: Sequence[_native.WireSlot], run_start_ns: int, dut: StallSide, ring_ms: float) -> WireLoss:
    """Ring drops per slot against the DUT's stalls longer than ``ring_ms``: a drop counts as in a
    stall when its slot overlaps the stall (from its start to one slot after its end, the time the
    ring needs to take the first frame again)."""
    slot_s = _native.WIRE_SLOT_NS / 1e9
    long = [(e.start_s, e.end_s + slot_s, e.by_tester) for e in dut.episodes if e.length_ms > ring_ms]
    dropped = in_stalls = by_tester = 0
    for s in slots:
        if not s.dropped:
            continue
        dropped += s.dropped
        a = (s.start_ns - run_start_ns) / 1e9
        over = [tester for start, end, tester in long if a < end and a + slot_s > start]
        in_stalls += s.dropped if over else 0
        by_tester += s.dropped if any(over) else 0
    return WireLoss(dropped, in_stalls, ring_ms, by_tester=by_tester)


@dataclass(frozen=True)
class PlatformRoles:
    """Who is who on this machine: the DUT's CPUs and tasks (empty without a DUT), its wired
    interfaces ``(ifname, netns)`` and their ring size in frames, and of its tasks those that take
    frames from its rings (``ring_tids``: the wire's ring threads, threaded NAPI)."""

    dut_cpus: tuple[int, ...] = ()
    dut_tids: tuple[int, ...] = ()
    wires: tuple[tuple[str, str | None], ...] = ()
    ring_frames: int = 0
    ring_tids: tuple[int, ...] = ()


def _comm(tid: int) -> str | None:
    try:
        with open(f"/proc/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def kernel_threads(prefixes: Sequence[str]) -> tuple[int, ...]:
    """The thread ids of the kernel threads whose name starts with one of ``prefixes`` (``comm``)."""
    return tuple(sorted(pid for pid, _ in processes_named(lambda comm: comm.startswith(tuple(prefixes)))))


def threads_of(pids: Iterable[int]) -> tuple[int, ...]:
    """Every thread id of the processes ``pids`` (those that exist)."""
    out: list[int] = []
    for pid in pids:
        try:
            out += [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
    return tuple(sorted(out))


def cpumap_threads(wires: Sequence[tuple[str, str | None]]) -> tuple[int, ...]:
    """The ring threads of the wires on ``wires``: the kernel's ``cpumap/<cpu>/map:<id>`` threads of
    their ring maps."""
    ids = [i for i in (_native.wire_cpumap_id(ifname, netns) for ifname, netns in wires) if i is not None]
    return kernel_threads([f"cpumap/{cpu}/map:{i}" for i in ids for cpu in range(os.cpu_count() or 1)])


#: The length of a task's name as the scheduler's tracepoints give it (``TASK_COMM_LEN`` - 1):
#: ``/proc/<pid>/comm`` gives a kernel thread's full name, ``cpumap/1/map:18211``, the tracepoint
#: ``cpumap/1/map:18``.
COMM_LEN = 15

#: The names of a trial's TX and RX workers, before their index (``netrig-tx0``, ``netrig-rx1``).
TESTER_WORKERS = _native.TRIAL_WORKERS

#: The guest's idle task on each CPU (``comm``): a wait that ends in a switch from it was on an idle
#: CPU, whose late wake-up is the host's (the tick program does not see an idle CPU's stops).
IDLE_TASK = "swapper/"


#: The raw episodes in which a CPU did not run: a gap between its ticks ("cpu"), a timer it took late
#: ("late").
CPU_KINDS = ("cpu", "late")


def cpu_stop(e: Any, half_tick_ns: float, origin_ns: int) -> StallEpisode:
    """A CPU's raw episode (a kind of :data:`CPU_KINDS`) as a stall of the host's, its start since
    ``origin_ns``: a gap between ticks somewhere in it (its middle: the tick came up to one late), a
    late timer exactly from its due time."""
    shift = half_tick_ns if e.kind == "cpu" else 0
    return StallEpisode((e.start_ns + shift - origin_ns) / 1e9, (e.len_ns - shift) / 1e6, e.cpu, False,
                        bound_ms=shift / 1e6)


def sides(raw: Iterable[Any], roles: PlatformRoles, dut_names: frozenset[str], half_tick_ns: float,
          origin_ns: int) -> tuple[list[StallEpisode], list[StallEpisode]]:
    """The watch's raw episodes (``_native.StallWatch.episodes``) as the DUT's and the tester's, starts
    since ``origin_ns``: a CPU's stall (somewhere in the gap since its last tick: its middle) on the
    side of its CPU; a DUT task's wait on the DUT's, the guest's when another task ran (not one of the
    DUT's own, by name to :data:`COMM_LEN`: that is the DUT at work), the host's when its CPU idled;
    any other watched task is a worker of the tester's (``run_trial(watch=…)``) and its wait the
    tester's, the guest's or the host's alike (not one for another of its workers, by name: that is
    the tester at work, a receiver napping on its sender's CPU). A wait for one of netrig's own threads (``by_self``:
    the watch found the thread in this process when it read the episode) is marked ``by_tester``."""
    own = {n[:COMM_LEN] for n in dut_names}
    dut: list[StallEpisode] = []
    tester: list[StallEpisode] = []
    for e in raw:
        if e.kind in CPU_KINDS:
            ep = cpu_stop(e, half_tick_ns, origin_ns)
            (dut if e.cpu in roles.dut_cpus else tester).append(ep)
        elif e.pid in roles.dut_tids and (e.by or "")[:COMM_LEN] in own:
            continue
        elif e.pid in roles.dut_tids or not (e.by or "").startswith(TESTER_WORKERS):
            guest = bool(e.by) and not e.by.startswith(IDLE_TASK)
            (dut if e.pid in roles.dut_tids else tester).append(
                StallEpisode((e.start_ns - origin_ns) / 1e9, e.len_ns / 1e6, e.cpu, guest, e.by if guest else None,
                             guest and e.by_self))
    return dut, tester


@dataclass(frozen=True)
class TrialPlatform:
    """What the platform did during one trial."""

    stalls: TrialStalls
    wire: WireLoss | None
    timeline: LatencyTimeline | None


class PlatformWatch:
    """The session's stall watch with the roles of its CPUs and tasks (see the module docstring)."""

    def __init__(self, roles: PlatformRoles, cpus: Sequence[int] | None = None):
        self.roles = roles
        self.cpus = tuple(cpus if cpus is not None else sorted(os.sched_getaffinity(0) | set(roles.dut_cpus)))
        off_dut = [c for c in self.cpus if c not in roles.dut_cpus]
        self.watch = _native.StallWatch(list(self.cpus), TICK_MS / 1e3, THRESHOLD_MS / 1e3, off_dut)
        for tid in roles.dut_tids:
            self.watch.watch(tid)
        #: The DUT's own tasks by name: a DUT task kept waiting by another DUT task (two rings on one
        #: CPU taking turns) is the DUT at work, not a stall.
        self.dut_names = frozenset(n for n in (_comm(t) for t in roles.dut_tids) if n)
        for ifname, netns in roles.wires:
            map_id = _native.wire_cpumap_id(ifname, netns)
            if map_id is not None:
                self.watch.watch_wire(map_id)
        #: The watch's missed events when the last trial was read (``TrialStalls.missed_events``).
        self._missed = self.watch.missed()

    def close(self) -> None:
        self.watch.close()

    def stalls(self, from_ns: int, to_ns: int, origin_ns: int) -> TrialStalls:
        """The stalls in ``[from_ns, to_ns]`` (CLOCK_MONOTONIC), their starts since ``origin_ns``."""
        raw, lost = self.watch.episodes(from_ns, to_ns)
        return self._stalls(raw, lost, origin_ns, self.roles)

    def _stalls(self, raw: Sequence[Any], lost: int, origin_ns: int, roles: PlatformRoles) -> TrialStalls:
        half_tick = self.watch.period_ns / 2
        dut, tester = sides(raw, roles, self.dut_names, half_tick, origin_ns)
        return TrialStalls(StallSide(merged(tester)), StallSide(merged(dut)) if roles.dut_cpus else None,
                           THRESHOLD_MS, lost)

    def wire_loss(self, from_ns: int, to_ns: int, origin_ns: int, dut: StallSide | None,
                  rate_pps: float | None) -> WireLoss | None:
        """The DUT ring's drops in the window and those in DUT stalls; None without a wire or a rate."""
        got = self.watch.wire_slots(from_ns, to_ns)
        if got is None or dut is None or not rate_pps or not self.roles.ring_frames:
            return None
        slots, complete = got
        ring_ms = self.roles.ring_frames / rate_pps * 1e3
        return dataclasses.replace(loss_in_stalls(slots, origin_ns, dut, ring_ms), complete=complete)

    def trial(self, res: _native.TrialResult, intended_pps: float | None) -> TrialPlatform:
        """The platform over ``res``'s sending (from the run's start to its last frame, and 10 ms
        for the frames in flight), starts counted from the run's start."""
        start = res.run_start_ns or res.epoch_ns
        end = start + int((res.tx_window_s + 0.01) * 1e9)
        raw, lost = self.watch.episodes(start, end)
        now = self.watch.missed()
        missed, self._missed = now - self._missed, now
        stalls = dataclasses.replace(self._stalls(raw, lost, start, self.roles), missed_events=missed)
        # a ring fills when what takes its frames stops: the DUT's CPU, or its ring threads kept
        # waiting; another DUT task kept waiting (its routing daemon) leaves the ring running
        ring = self._stalls(raw, lost, start, dataclasses.replace(self.roles, dut_tids=self.roles.ring_tids)).dut
        wire = self.wire_loss(start, end, start, ring, intended_pps)
        return TrialPlatform(stalls, wire, timeline_of(res))


@contextlib.contextmanager
def platform_watch(tb: Testbed | None, cpus: Sequence[int] = ()) -> Iterator[tuple[PlatformWatch | None, str]]:
    """The platform's stall watch over the test bed's CPUs for the block (see the module docstring): the
    DUT's CPUs and its tasks (the wire's ring threads, NAPI threads, its processes' threads), the
    wire's rings; and what the result says of it. Without a test bed (ports by name), over the CPUs
    this process may use, all the tester's; ``cpus`` are watched too (workers pinned beyond this
    process's CPUs). Where the kernel refuses it (no BPF, no perf events),
    trials carry no stalls and the note says why."""
    pl = tb.placement if tb is not None else None
    wires = tuple((i, pl.netns) for i in pl.interfaces) if pl is not None and pl.mode == "wire" else ()
    napi = tuple(t.pid for t in (pl.threads or ())) if pl is not None else ()
    rings = cpumap_threads(wires) + napi
    tids = rings + (threads_of(p.pid for p in tb.state.processes) if tb is not None else ())
    ring = (pl.ring or 0) * len(pl.cpus or ()) if pl is not None and wires else 0
    dut_cpus = tb.dut_cpus() if tb is not None else ()
    try:
        roles = PlatformRoles(dut_cpus, tids, wires, ring, rings)
        watch = PlatformWatch(roles, sorted(os.sched_getaffinity(0) | set(dut_cpus) | set(cpus)))
    except (CapabilityError, OSError) as e:
        yield None, f"off: {e}"
        return
    note = (f"on: CPUs {','.join(map(str, watch.cpus))} (DUT {','.join(map(str, dut_cpus)) or 'none'}), "
            f"{len(tids)} DUT tasks, {len(wires)} wired interfaces; tick {watch.watch.period_ns / 1e6:g} ms, "
            f"threshold {watch.watch.threshold_ns / 1e6:g} ms")
    try:
        yield watch, note
    finally:
        watch.close()
