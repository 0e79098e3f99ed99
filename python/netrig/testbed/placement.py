"""DUT placement: on which CPU the DUT's packet processing runs, and whether the DUT can hold
the sender back.

On veth, the receiving side's processing runs in softirq on the CPU that *transmitted* (the tester's
sender CPU), and a frame keeps the sender's socket (its TX completion, its send-buffer charge) until
the receiving stack frees it (docs/testbed.md, "The physics of the embedded test bed"). The modes:

* ``wire`` (the default): the wire program on each DUT interface copies every arriving frame into
  a CPUMAP ring of ``dut_ring`` frames on the DUT's CPUs (``netrig_engine::sys::wire``). The tester's
  frame is freed as it arrives, the DUT's stack runs in the ring's kernel thread on the DUT's CPU,
  and a DUT that cannot keep up drops at its full ring, counted (``Testbed.wire_counts``): a DUT
  on a wire, which never slows the sender.
* ``inline``: nothing moved; the DUT works in softirq on the sender's CPU (the kernel's default).

* ``rps``: an RPS mask on the DUT's ingress interfaces (``/sys/class/net/X/queues/rx-0/rps_cpus``).
  ``veth_xmit`` then queues the packet to the backlog of a CPU in the mask; the DUT's forwarding runs in
  that CPU's NET_RX softirq (visible as *softirq* in ``/proc/stat``).
* ``threaded-napi``: GRO is switched on for the DUT's ingress veth ends (which gives veth a NAPI
  instance), ``/sys/class/net/X/threaded`` is set to 1, and the ``napi/X-*`` kernel threads are pinned to
  the CPUs. The DUT's forwarding then runs in those threads (visible as *system* time of that CPU).
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from netrig import _native
from netrig.errors import CapabilityError, NetrigError, TestbedError
from netrig.testbed.nsthread import run_in_netns
from netrig.testbed.options import MACHINE_CPUS
from netrig.testbed.state import NapiThread, Placement

#: Placements under which a slow DUT may still slow the sender (it holds the sender's frames, or
#: works on its CPU): there a sender that fell short can be the DUT's backpressure.
HOLDS_SENDER = ("rps", "threaded-napi", "inline")


def default_dut_cpus() -> tuple[int, ...]:
    """The DUT's CPUs when none are given: the last CPU this process may use when there are two
    or more (the tester keeps the others), else the only one (shared with the tester)."""
    return (MACHINE_CPUS[-1],)


def shares_cpu_with_tester(cpus: tuple[int, ...] | list[int] | None) -> bool:
    """The DUT's CPUs leave the tester none of its own (a one-CPU machine)."""
    return not cpus or not (set(MACHINE_CPUS) - set(cpus))


def bookkeeping_on(tester_cpus: Sequence[int]) -> None:
    """Run this thread, and every thread it starts from now on, on ``tester_cpus`` only and under
    ``SCHED_IDLE``: the tester's bookkeeping (Python, a monitor, a result's JSON, the garbage
    collector, the engine's trial and link-watcher threads) then runs only when the tester's
    workers leave the CPU idle, and never on the DUT's. The workers make themselves ordinary
    threads again (``sys::cpu::normal_priority``). Measured on the 2-vCPU VM, TX worker and run
    loop on one CPU: at nice 0 the run loop's Python work delayed the worker ~5 ms at a time and
    stretched 0.5-s trials by 10–80 %; at nice 19 still by ~3 ms at a time (a picked task runs a
    whole 3-ms slice whatever its weight); under SCHED_IDLE an ordinary thread that wakes takes the
    CPU at once."""
    os.sched_setaffinity(0, set(tester_cpus))
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def observer(tid: int = 0) -> None:
    """Make thread ``tid`` (0: the calling one) an observer of the run — the DUT monitor, the
    telemetry endpoint: ``SCHED_IDLE``, on the CPUs the calling thread may use (the tester's, when
    it is tester bookkeeping: :func:`bookkeeping_on`), never the DUT's. A waking ordinary thread
    does not always take the CPU from a running ``SCHED_IDLE`` one at once on this kernel
    (preempt=none): at times it waits for the next tick, up to 4 ms. Until 2026-12-04 the observer ran on every CPU, the
    DUT's included, to use the idle time there, and the DUT's ring thread waited behind it ~2 times a
    second for 1-4 ms (bpftrace, the demo at 220 kfps: 59 waits over 1 ms in 30 s, 43 of them ending
    at a timer tick): the tester's sampler reported as DUT stalls "by python", and at times the DUT's
    loss (its 1024-frame ring lasts 4.6 ms there). On the tester's CPUs the same waits delay the
    tester's own workers, where the trial's stretch and the stall watch's tester stalls catch them.
    Silently kept as it is where the kernel refuses."""
    with contextlib.suppress(OSError):
        os.sched_setaffinity(tid, os.sched_getaffinity(0))
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))


def on_time() -> None:
    """Make the calling thread an ordinary one again (``SCHED_OTHER``), though it was started by
    tester bookkeeping (``SCHED_IDLE``): for threads whose timing is part of the measurement (the
    events under load fire at their times). Needs root, as the tester does; silently kept otherwise."""
    with contextlib.suppress(OSError):
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


@contextlib.contextmanager
def ordinary_while() -> Iterator[None]:
    """This thread an ordinary one (:func:`on_time`) while the block runs, its placement restored
    after: a thread that holds the GIL while another thread's timing is measured (events)."""
    with thread_placement_restored():
        on_time()
        yield


@contextlib.contextmanager
def keep_off_dut(tester_cpus: Sequence[int]) -> Iterator[None]:
    """While the block runs, this thread is tester bookkeeping (:func:`bookkeeping_on`); its old
    affinity and scheduling policy are restored afterwards. Empty: nothing changes."""
    if not tester_cpus:
        yield
        return
    with thread_placement_restored():
        bookkeeping_on(tester_cpus)
        yield


@contextlib.contextmanager
def thread_placement_restored() -> Iterator[None]:
    """This thread's CPU affinity and scheduling policy as they were before the block, afterwards
    (a command that made itself tester bookkeeping, run in-process by an API user or a test)."""
    old = os.sched_getaffinity(0)
    old_policy, old_param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)
        with contextlib.suppress(OSError):  # leaving SCHED_IDLE needs root; the tester runs as root
            os.sched_setscheduler(0, old_policy, old_param)


def cpu_mask(cpus: tuple[int, ...]) -> str:
    m = 0
    for c in cpus:
        m |= 1 << c
    return f"{m:x}"


def processes_named(match: Callable[[str], bool]) -> list[tuple[int, str]]:
    """``(pid, comm)`` of every process (kernel threads included) whose ``comm`` matches."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if match(comm):
            out.append((int(pid), comm))
    return out


def _napi_threads(ifname: str) -> list[tuple[int, str]]:
    """``(pid, comm)`` of the threaded-NAPI kernel threads of ``ifname``."""
    want = f"napi/{ifname}"[:15]
    # comm is truncated to 15 characters; "napi/<if>-<id>" may lose its suffix
    return processes_named(lambda comm: comm == want or comm.startswith(want + "-"))


def apply(netns: str, ifaces: list[str], cpus: tuple[int, ...], mode: str, ring: int | None = None) -> Placement:
    """Apply ``mode`` for ``ifaces`` (in ``netns``) to ``cpus``; return the record for ``describe()``."""
    if mode == "inline":
        return Placement(mode, None, netns,
                         note="the DUT's processing runs in softirq on the CPU that sends into it (the tester's)")
    shared = f"one CPU: the DUT and the tester share CPU {','.join(map(str, cpus))}" \
        if shares_cpu_with_tester(cpus) else None
    record = Placement(mode, tuple(cpus), netns, shared=shared)
    if mode == "wire":
        return _wire(record, netns, ifaces, cpus, ring or _native.WIRE_DEFAULT_RING)
    if mode == "rps":
        return replace(record, interfaces=run_in_netns(netns, _rps_here, ifaces, cpu_mask(cpus), sysfs=True))
    try:
        interfaces = run_in_netns(netns, _threaded_napi_here, ifaces, sysfs=True)
    except FileNotFoundError:
        raise CapabilityError("dut_cpus: ethtool is not installed (apt install ethtool) — "
                              "or use --dut-placement rps") from None
    return replace(record, interfaces=interfaces, threads=tuple(t for i in ifaces for t in _pin_napi(i, cpus)))


def _rps_here(ifaces: list[str], mask: str) -> dict[str, dict[str, Any]]:
    res = {}
    for ifname in ifaces:
        path = f"/sys/class/net/{ifname}/queues/rx-0/rps_cpus"
        try:
            with open(path, "w") as f:
                f.write(mask)
            with open(path) as f:
                res[ifname] = {"rps_cpus": f.read().strip()}
        except OSError as e:
            raise CapabilityError(f"dut_cpus: cannot set RPS on {ifname} ({path}): {e.strerror}; "
                                  "is the kernel built with CONFIG_RPS?") from None
    return res


def _threaded_napi_here(ifaces: list[str]) -> dict[str, dict[str, Any]]:
    res = {}
    for ifname in ifaces:
        r = subprocess.run(["ethtool", "-K", ifname, "gro", "on"], capture_output=True, text=True, timeout=10)
        if r.returncode != 0:
            raise CapabilityError(f"dut_cpus: `ethtool -K {ifname} gro on` failed ({r.stderr.strip()}); "
                                  "veth needs GRO for NAPI; try --dut-placement rps")
        path = f"/sys/class/net/{ifname}/threaded"
        try:
            with open(path, "w") as f:
                f.write("1")
            with open(path) as f:
                res[ifname] = {"gro": "on", "threaded": f.read().strip()}
        except OSError as e:
            raise CapabilityError(f"dut_cpus: cannot enable threaded NAPI on {ifname}: {e.strerror}; "
                                  "try --dut-placement rps") from None
    return res


def _pin_napi(ifname: str, cpus: tuple[int, ...]) -> list[NapiThread]:
    """Pin ``ifname``'s NAPI kernel threads to ``cpus`` (they appear asynchronously)."""
    found: list[tuple[int, str]] = []
    for _ in range(50):
        found = _napi_threads(ifname)
        if found:
            break
        time.sleep(0.01)
    if not found:
        raise TestbedError(f"dut_cpus: no napi/{ifname} kernel thread appeared after enabling threaded NAPI")
    out = []
    for pid, comm in found:
        try:
            os.sched_setaffinity(pid, set(cpus))
            out.append(NapiThread(pid, comm, tuple(sorted(os.sched_getaffinity(pid))), ifname))
        except OSError as e:
            raise TestbedError(f"dut_cpus: cannot pin {comm} (pid {pid}): {e.strerror}") from None
    return out


def _wire(record: Placement, netns: str, ifaces: list[str], cpus: tuple[int, ...], ring: int) -> Placement:
    """Attach the wire to every DUT interface (a ring of ``ring`` frames per DUT CPU)."""
    interfaces: dict[str, dict[str, Any]] = {}
    for ifname in ifaces:
        try:
            prog = _native.wire_attach(ifname, netns, list(cpus), ring)
        except NetrigError as e:
            raise CapabilityError(f"dut_placement wire: {e}; this kernel needs native XDP on veth and "
                                  "BPF CPUMAP (Linux 5.9+); or use --dut-placement rps") from None
        interfaces[ifname] = {"prog_id": prog}
    where = ",".join(map(str, cpus))
    return replace(record, ring=ring, interfaces=interfaces,
                   note=(f"the wire: each DUT interface's frames go to a {ring}-frame receive ring on CPU {where}; "
                         "the DUT's stack works there and drops what its full ring cannot take"))
