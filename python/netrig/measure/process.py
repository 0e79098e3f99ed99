"""External tools as processes in network namespaces: start one with ``ip netns exec``, wait for it
with a deadline, and learn the CPU it used (``wait4`` rusage: exact, not sampled).

``ip netns exec`` execs the tool in place, so the process netrig starts *is* the tool: its pid,
its exit status and its rusage are the tool's own. Every caller stops what it started with
:func:`stop` in a ``finally`` (success, error, Ctrl-C), which kills and reaps it if it still runs.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass

__all__ = ["ProcessCpu", "in_netns", "listening", "reap", "running", "stop"]


@dataclass(frozen=True)
class ProcessCpu:
    """CPU-seconds one process used over its whole life (``wait4`` rusage)."""
    name: str
    netns: str | None
    user_s: float
    sys_s: float

    @property
    def total_s(self) -> float:
        return self.user_s + self.sys_s


def in_netns(netns: str | None, argv: list[str]) -> list[str]:
    """``argv`` run in ``netns`` (as is for the host's namespace)."""
    return ["ip", "netns", "exec", netns, *argv] if netns else argv


def listening(netns: str | None, port: int, protocol: str = "tcp") -> bool:
    """A socket listens on (TCP) or is bound to (UDP) ``port`` in ``netns`` (``ss``, in the namespace)."""
    flags = {"tcp": "-Hltn", "udp": "-Hlun"}[protocol]
    r = subprocess.run(in_netns(netns, ["ss", flags, f"sport = :{port}"]), capture_output=True, text=True,
                       timeout=10)
    return bool(r.stdout.strip())


def reap(proc: subprocess.Popen, timeout_s: float,
         signum: signal.Signals = signal.SIGKILL) -> tuple[int | None, ProcessCpu]:
    """Wait for ``proc`` up to ``timeout_s`` and return its exit status and the CPU it used (from
    ``wait4``). A process still running then gets ``signum``, and SIGKILL if that did not end it
    within 2 s; the status is None then (it did not end by itself)."""
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, ProcessCpu("", None, ru.ru_utime, ru.ru_stime)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    # os.kill, not proc.send_signal: that polls first, and a poll that reaps the process (it ended
    # just now) would lose its rusage; unreaped, the pid cannot belong to anyone else yet.
    os.kill(proc.pid, signum)
    if signum != signal.SIGKILL:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                return None, ProcessCpu("", None, ru.ru_utime, ru.ru_stime)
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    pid, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return None, ProcessCpu("", None, ru.ru_utime, ru.ru_stime)


def stop(proc: subprocess.Popen | None) -> None:
    """Kill and reap ``proc`` if it still runs, and close its pipes (every exit path)."""
    if proc is None:
        return
    if proc.returncode is None:
        try:
            proc.send_signal(signal.SIGKILL)
            os.waitpid(proc.pid, 0)
            proc.returncode = -signal.SIGKILL
        except (ProcessLookupError, ChildProcessError):
            pass
    for f in (proc.stdout, proc.stderr):
        if f is not None:
            f.close()


def running(proc: subprocess.Popen) -> bool:
    """``proc`` has not ended yet. Never reaps it (``WNOWAIT``), so :func:`reap` still gets its
    rusage — unlike ``Popen.poll``."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:  # reaped already
        return False
