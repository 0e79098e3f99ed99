"""DUT placement: on which CPU the DUT's packet processing runs.

On veth, the receiving side's processing runs in softirq on the CPU that *transmitted* (the tester's
sender CPU), unless one of these moves it:

* ``rps``: an RPS mask on the DUT's ingress interfaces (``/sys/class/net/X/queues/rx-0/rps_cpus``).
  ``veth_xmit`` then queues the packet to the backlog of a CPU in the mask; the DUT's forwarding runs in
  that CPU's NET_RX softirq (visible as *softirq* in ``/proc/stat``).
* ``threaded-napi``: GRO is switched on for the DUT's ingress veth ends (which gives veth a NAPI
  instance), ``/sys/class/net/X/threaded`` is set to 1, and the ``napi/X-*`` kernel threads are pinned to
  the CPUs. The DUT's forwarding then runs in those threads (visible as *system* time of that CPU).
"""
from __future__ import annotations

import os
import subprocess
import time
from typing import Any

from netrig.errors import CapabilityError, TestbedError
from netrig.testbed.nsthread import run_in_netns


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


def apply(netns: str, ifaces: list[str], cpus: tuple[int, ...], mode: str) -> dict[str, Any]:
    """Apply ``mode`` for ``ifaces`` (in ``netns``) to ``cpus``; return the record for ``describe()``."""
    record: dict[str, Any] = {"mode": mode, "cpus": list(cpus), "netns": netns, "interfaces": {}}
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
