"""Environment capture: everything needed to reproduce a result, as one JSON-able dict.

``capture(testbed=None, interfaces=None)`` never raises because a tool or file is missing: such
entries read ``"unavailable: <reason>"``. Interfaces are given as names (host namespace) or
``(netns, ifname)`` pairs; with a test bed, all its interfaces are captured in their namespaces.
"""
from __future__ import annotations

import glob
import os
import platform
import re
import subprocess
from collections.abc import Iterable
from typing import Any

from netrig import _native
from netrig.testbed.nsthread import run_in_netns

SYSCTLS = (
    "net.core.rmem_default", "net.core.rmem_max", "net.core.wmem_default", "net.core.wmem_max",
    "net.core.netdev_max_backlog", "net.core.netdev_budget", "net.core.netdev_budget_usecs",
    "net.core.busy_poll", "net.core.busy_read", "net.core.rps_sock_flow_entries", "net.core.default_qdisc",
    "net.core.dev_weight", "net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding",
    "net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_buckets",
    "net.netfilter.nf_log_all_netns", "kernel.sched_rt_runtime_us",
)
NS_SYSCTLS = ("net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding", "net.netfilter.nf_conntrack_count",
              "net.core.netdev_max_backlog")
ETHTOOL_FLAGS = {"driver": "-i", "offloads": "-k", "rings": "-g", "channels": "-l", "coalesce": "-c"}


def _unavailable(e: BaseException | str) -> str:
    return f"unavailable: {e}"


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        return _unavailable(e.strerror or e)


def _run(cmd: list[str], timeout: float = 5.0) -> tuple[int, str]:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return 127, _unavailable(f"{cmd[0]} not installed")
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, _unavailable(e)
    return r.returncode, r.stdout if r.returncode == 0 else _unavailable((r.stderr or r.stdout).strip())


def _netrig() -> dict[str, Any]:
    out: dict[str, Any] = {"version": _native.__version__, "build_profile": _native.BUILD_PROFILE}
    here = os.path.dirname(os.path.abspath(__file__))
    code, head = _run(["git", "-C", here, "rev-parse", "HEAD"])
    out["git_commit"] = head.strip() if code == 0 else "unavailable: not a git checkout"
    if code == 0:
        c2, dirty = _run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"])
        out["git_dirty"] = bool(dirty.strip()) if c2 == 0 else None
    return out


def _cpu() -> dict[str, Any]:
    info: dict[str, Any] = {"count": os.cpu_count(), "affinity": sorted(os.sched_getaffinity(0))}
    text = _read("/proc/cpuinfo")
    m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    info["model"] = m.group(1).strip() if m else _unavailable("no model name in /proc/cpuinfo")
    m = re.search(r"^cpu MHz\s*:\s*(.+)$", text, re.M)
    info["mhz"] = float(m.group(1)) if m else None
    govs = {}
    for path in sorted(glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor")):
        govs[path.split("/")[5]] = _read(path)
    info["governor"] = govs or _unavailable("no cpufreq in /sys (virtual machine or driver absent)")
    info["isolated"] = _read("/sys/devices/system/cpu/isolated")
    info["smt"] = _read("/sys/devices/system/cpu/smt/control")
    return info


def _memory() -> dict[str, Any]:
    out: dict[str, Any] = {}
    text = _read("/proc/meminfo")
    for key in ("MemTotal", "MemAvailable", "HugePages_Total", "Hugepagesize"):
        m = re.search(rf"^{key}:\s*(\d+)", text, re.M)
        if m:
            out[key] = int(m.group(1))
    return out or {"error": text}


def parse_ethtool(flag: str, text: str) -> dict[str, Any] | str:
    """Parse ``ethtool <flag>`` output into a dict (``-g``/``-l`` split into max and current)."""
    if text.startswith("unavailable"):
        return text
    try:
        if flag in ("-g", "-l"):
            out: dict[str, Any] = {"max": {}, "current": {}}
            section = None
            for line in text.splitlines():
                low = line.lower()
                if "maximums" in low or "maximum" in low and low.endswith(":"):
                    section = "max"
                    continue
                if "current hardware settings" in low:
                    section = "current"
                    continue
                k, sep, v = line.partition(":")
                if sep and section and v.strip():
                    v = v.strip()
                    out[section][k.strip()] = int(v) if v.isdigit() else v
            return out
        out2: dict[str, Any] = {}
        for line in text.splitlines()[1 if flag in ("-k", "-c") else 0:]:
            k, sep, v = line.partition(":")
            if sep:
                v = v.strip()
                out2[k.strip()] = int(v) if v.isdigit() else v
        return out2
    except Exception:
        return text


def _ethtool_all(ifname: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, flag in ETHTOOL_FLAGS.items():
        code, text = _run(["ethtool", flag, ifname])
        out[name] = parse_ethtool(flag, text) if code == 0 else text
    return out


def _iface_sysfs(ifname: str) -> dict[str, Any]:
    base = f"/sys/class/net/{ifname}"
    out: dict[str, Any] = {}
    for k in ("address", "mtu", "operstate", "speed", "tx_queue_len", "threaded", "gro_flush_timeout",
              "napi_defer_hard_irqs"):
        out[k] = _read(f"{base}/{k}")
    out["rps_cpus"] = {os.path.basename(os.path.dirname(p)): _read(p)
                       for p in sorted(glob.glob(f"{base}/queues/rx-*/rps_cpus"))}
    out["xps_cpus"] = {os.path.basename(os.path.dirname(p)): _read(p)
                       for p in sorted(glob.glob(f"{base}/queues/tx-*/xps_cpus"))}
    return out


def _irqs(ifname: str, driver_bus: str | None) -> dict[str, Any]:
    """IRQs whose /proc/interrupts line names the interface (or its PCI bus id) and their affinity."""
    out: dict[str, Any] = {}
    text = _read("/proc/interrupts")
    for line in text.splitlines()[1:]:
        parts = line.split()
        if not parts or not parts[0].rstrip(":").isdigit():
            continue
        if ifname in line or (driver_bus and driver_bus in line):
            irq = parts[0].rstrip(":")
            out[irq] = {"name": parts[-1], "smp_affinity_list": _read(f"/proc/irq/{irq}/smp_affinity_list"),
                        "effective_affinity_list": _read(f"/proc/irq/{irq}/effective_affinity_list")}
    return out


def _interface(ns: str | None, ifname: str) -> dict[str, Any]:
    def body() -> dict[str, Any]:
        d: dict[str, Any] = {"netns": ns, "ifname": ifname}
        d.update(_ethtool_all(ifname))
        d["sysfs"] = _iface_sysfs(ifname)
        drv = d.get("driver")
        bus = drv.get("bus-info") if isinstance(drv, dict) else None
        d["irqs"] = _irqs(ifname, bus or None)
        return d

    try:
        return run_in_netns(ns, body, sysfs=ns is not None)
    except Exception as e:
        return {"netns": ns, "ifname": ifname, "error": _unavailable(e)}


def _sysctls(names: Iterable[str], ns: str | None = None) -> dict[str, str]:
    def body() -> dict[str, str]:
        return {n: _read("/proc/sys/" + n.replace(".", "/")) for n in names}

    if ns is None:
        return body()
    try:
        return run_in_netns(ns, body)
    except Exception as e:
        return {"error": _unavailable(e)}


def capture(testbed: Any = None, interfaces: Iterable[str | tuple[str | None, str]] | None = None
            ) -> dict[str, Any]:
    """Record the environment. ``interfaces``: names (host) or ``(netns, ifname)`` pairs."""
    env: dict[str, Any] = {"netrig": _safe(_netrig)}
    env["kernel"] = {"release": platform.release(), "version": platform.version(),
                     "machine": platform.machine(), "cmdline": _read("/proc/cmdline")}
    env["os"] = _safe(lambda: platform.freedesktop_os_release().get("PRETTY_NAME"))
    env["python"] = platform.python_version()
    env["cpu"] = _safe(_cpu)
    env["memory"] = _safe(_memory)
    env["sysctls"] = _safe(lambda: _sysctls(SYSCTLS))
    ifs: list[tuple[str | None, str]] = []
    for i in interfaces or ():
        ifs.append((None, i) if isinstance(i, str) else (i[0], i[1]))
    if testbed is not None:
        try:
            for ns, names in testbed.monitor_targets().items():
                ifs += [(ns, n) for n in names]
        except Exception as e:
            env["testbed_error"] = _unavailable(e)
    env["interfaces"] = [_interface(ns, n) for ns, n in dict.fromkeys(ifs)]
    if testbed is not None:
        env["testbed"] = _safe(testbed.describe)
        try:
            env["testbed_sysctls"] = {ns: _sysctls(NS_SYSCTLS, ns) for ns in testbed.namespaces}
        except Exception as e:
            env["testbed_sysctls"] = _unavailable(e)
    return env


def _safe(fn: Any) -> Any:
    try:
        return fn()
    except Exception as e:
        return _unavailable(e)


__all__ = ["capture", "parse_ethtool"]
