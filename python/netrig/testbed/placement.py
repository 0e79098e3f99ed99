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
from collections.abc import Iterator, Sequence
from typing import Any

from netrig import _native
from netrig.errors import CapabilityError, NetrigError, TestbedError
from netrig.testbed.nsthread import run_in_netns

#: Placements under which a slow DUT may still slow the sender (it holds the sender's frames, or
#: works on its CPU): there a sender that fell short can be the DUT's backpressure.
HOLDS_SENDER = ("rps", "threaded-napi", "inline")


def default_dut_cpus() -> tuple[int, ...]:
    """The DUT's CPUs when none are given: the last CPU this process may use when there are two
    or more (the tester keeps the others), else the only one (shared with the tester)."""
    allowed = sorted(os.sched_getaffinity(0))
    return (allowed[-1],)


def shares_cpu_with_tester(cpus: tuple[int, ...] | list[int] | None) -> bool:
    """The DUT's CPUs leave the tester none of its own (a one-CPU machine)."""
    allowed = set(os.sched_getaffinity(0))
    return not cpus or not (allowed - set(cpus))


#: Nice value of the tester's bookkeeping threads while they share the tester's CPUs with its workers.
BOOKKEEPING_NICE = 19


@contextlib.contextmanager
def keep_off_dut(tester_cpus: Sequence[int]) -> Iterator[None]:
    """While the block runs, this thread — and every thread it starts (a monitor, the engine's
    trial and link-watcher threads) — runs only on ``tester_cpus``, so nothing of the tester's own
    lands on the DUT's CPUs, and at nice 19, so that this bookkeeping (Python, a result's JSON, the
    garbage collector) never keeps the tester's workers waiting: they raise themselves back to nice
    0. Measured: at nice 0 next to the TX worker on one CPU, the run loop's Python work delayed it
    by ~5 ms at a time and stretched 0.5-s trials by 10–80 %. The old affinity and nice value are
    restored afterwards. Empty: nothing changes."""
    if not tester_cpus:
        yield
        return
    old = os.sched_getaffinity(0)
    old_nice = os.getpriority(os.PRIO_PROCESS, 0)  # this thread's, on Linux
    os.sched_setaffinity(0, set(tester_cpus))
    os.setpriority(os.PRIO_PROCESS, 0, max(old_nice, BOOKKEEPING_NICE))
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)
        with contextlib.suppress(OSError):  # raising the priority back needs root; the tester runs as root
            os.setpriority(os.PRIO_PROCESS, 0, old_nice)


def cpu_mask(cpus: tuple[int, ...]) -> str:
    m = 0
    for c in cpus:
        m |= 1 << c
    return f"{m:x}"


def _napi_threads(ifname: str) -> list[dict[str, Any]]:
    want = f"napi/{ifname}"[:15]
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        # comm is truncated to 15 characters; "napi/<if>-<id>" may lose its suffix
        if comm == want or comm.startswith(want + "-"):
            out.append({"pid": int(pid), "comm": comm})
    return out


def apply(netns: str, ifaces: list[str], cpus: tuple[int, ...], mode: str, ring: int | None = None) -> dict[str, Any]:
    """Apply ``mode`` for ``ifaces`` (in ``netns``) to ``cpus``; return the record for ``describe()``."""
    if mode == "inline":
        return {"mode": mode, "cpus": None, "netns": netns, "interfaces": {},
                "note": "the DUT's processing runs in softirq on the CPU that sends into it (the tester's)"}
    record: dict[str, Any] = {"mode": mode, "cpus": list(cpus), "netns": netns, "interfaces": {}}
    if shares_cpu_with_tester(cpus):
        record["shared"] = f"one CPU: the DUT and the tester share CPU {','.join(map(str, cpus))}"
    if mode == "wire":
        return _wire(record, netns, ifaces, cpus, ring or _native.WIRE_DEFAULT_RING)
    if mode == "rps":
        mask = cpu_mask(cpus)

        def body() -> dict[str, Any]:
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

        record["interfaces"] = run_in_netns(netns, body, sysfs=True)
        return record

    def body_napi() -> dict[str, Any]:
        res = {}
        for ifname in ifaces:
            r = subprocess.run(["ethtool", "-K", ifname, "gro", "on"], capture_output=True, text=True,
                               timeout=10)
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

    try:
        record["interfaces"] = run_in_netns(netns, body_napi, sysfs=True)
    except FileNotFoundError:
        raise CapabilityError("dut_cpus: ethtool is not installed (apt install ethtool) — "
                              "or use --dut-placement rps") from None
    threads: list[dict[str, Any]] = []
    for ifname in ifaces:
        found: list[dict[str, Any]] = []
        for _ in range(50):  # kthreads appear asynchronously
            found = _napi_threads(ifname)
            if found:
                break
            time.sleep(0.01)
        if not found:
            raise TestbedError(f"dut_cpus: no napi/{ifname} kernel thread appeared after enabling threaded NAPI")
        for t in found:
            try:
                os.sched_setaffinity(t["pid"], set(cpus))
                t["affinity"] = sorted(os.sched_getaffinity(t["pid"]))
            except OSError as e:
                raise TestbedError(f"dut_cpus: cannot pin {t['comm']} (pid {t['pid']}): {e.strerror}") from None
            t["interface"] = ifname
        threads += found
    record["threads"] = threads
    return record


def _wire(record: dict[str, Any], netns: str, ifaces: list[str], cpus: tuple[int, ...], ring: int) -> dict[str, Any]:
    """Attach the wire to every DUT interface (a ring of ``ring`` frames per DUT CPU)."""
    record["ring"] = ring
    for ifname in ifaces:
        try:
            prog = _native.wire_attach(ifname, netns, list(cpus), ring)
        except NetrigError as e:
            raise CapabilityError(f"dut_placement wire: {e}; this kernel needs native XDP on veth and "
                                  "BPF CPUMAP (Linux 5.9+); or use --dut-placement rps") from None
        record["interfaces"][ifname] = {"prog_id": prog}
    where = ",".join(map(str, cpus))
    record["note"] = (f"the wire: each DUT interface's frames go to a {ring}-frame receive ring on CPU {where}; "
                      "the DUT's stack works there and drops what its full ring cannot take")
    return record
