"""netrig's exception hierarchy.

Every error a user can cause or meet is one of these, with a message that names the field or
object and says what to do. The CLI prints ``str(error)`` on one line and exits non-zero; it never
shows a traceback for a ``NetrigError``.

Each Rust error variant maps to exactly one class here (see ``crates/netrig-py``):

==========================  =====================
Rust                        Python
==========================  =====================
``ConfigError``             ``ConfigError``
``PortError::NoSuchInterface``  ``InterfaceError``
``PortError::PermissionDenied`` ``PermissionError_``
``PortError::Unsupported``  ``CapabilityError``
``PortError::Live``         ``LiveInterfaceError``
``PortError::*`` (I/O etc.) ``PortError``
``EngineError::Worker``     ``EngineError``
``EngineError::Interrupted``  ``InterruptedTrial``
==========================  =====================
"""
from __future__ import annotations

import signal
import threading
import time


class NetrigError(Exception):
    """Base of every error netrig raises on purpose."""


class ConfigError(NetrigError, ValueError):
    """A configuration value is invalid. The message starts with the field's name."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class CapabilityError(NetrigError):
    """The machine, kernel, driver or interface cannot do what was asked."""


class PortError(NetrigError):
    """Opening or driving a port failed."""


class InterfaceError(PortError):
    """An interface does not exist (in the namespace it was looked up in)."""


class PermissionError_(PortError):
    """The operation needs root (CAP_NET_RAW / CAP_NET_ADMIN)."""


class LiveInterfaceError(PortError):
    """The transmit guard refused an interface that looks like a live network (``lo``, a default
    route, an address outside the benchmarking ranges); the message names the rule and the override."""


class EngineError(NetrigError):
    """The traffic engine failed while running."""


class InterruptedTrial(EngineError):
    """A trial was stopped by the user (Ctrl-C) or a signal (SIGTERM); partial results are
    attached where possible. ``reason`` says which (``"interrupted by user (Ctrl-C)"``)."""

    def __init__(self, message: str, reason: str = "interrupted by user (Ctrl-C)"):
        super().__init__(message)
        self.reason = reason


class Terminated(SystemExit):
    """A termination signal (SIGTERM, SIGHUP) arrived: handled like Ctrl-C (traffic stopped,
    finished trials kept, the run resumable), with the signal recorded as the reason. Uncaught,
    it exits with status 128 + the signal number, as a process killed by it would report."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signum = signum
        self.message = f"stopped by {signal.Signals(signum).name}"

    def __str__(self) -> str:
        return self.message


#: What stops a run early from outside: Ctrl-C, or a termination signal.
INTERRUPTS = (KeyboardInterrupt, Terminated)

#: The longest sleep of ``wait_for`` in the main thread: how late it may see the event set.
WAIT_SLICE_S = 0.1


def wait_for(event: threading.Event, timeout_s: float | None = None) -> bool:
    """``event.wait(timeout_s)``, safe to interrupt in the main thread: True once set, False at the timeout.

    ``Event.wait`` re-takes its condition's lock in a Python-level ``finally``. A signal whose handler
    raises (Ctrl-C's ``KeyboardInterrupt``, netrig's ``Terminated``) and runs on entry to that call
    leaves the lock untaken, and the ``with`` around it then fails with "release unlocked lock",
    replacing the signal (CPython issues 78667, 89437; seen as ``netrig serve`` exiting 3, not 143,
    on one SIGTERM). So the main thread takes no lock here: it sleeps, 1 ms at first and doubling
    to ``WAIT_SLICE_S``, and reads the flag, which has none; a handler raises from the sleep.
    Other threads, which never run handlers, use ``event.wait``."""
    if threading.current_thread() is not threading.main_thread():
        return event.wait(timeout_s)
    end = None if timeout_s is None else time.monotonic() + timeout_s
    nap = 0.001
    while not event.is_set():
        left = WAIT_SLICE_S if end is None else end - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(nap, left))
        nap = min(2 * nap, WAIT_SLICE_S)
    return True


def interrupt_status(exc: BaseException) -> int:
    """The exit status of a run stopped by ``exc``: 128 + the signal for a termination signal (also
    when a trial turned it into ``InterruptedTrial``), else 130 (Ctrl-C)."""
    for e in (exc, exc.__context__):
        if isinstance(e, Terminated):
            return 128 + e.signum
    return 130


def interrupt_reason(exc: BaseException) -> str:
    """Why a run stopped early, for ``interrupted_reason``: the signal, or Ctrl-C."""
    if isinstance(exc, Terminated):
        return exc.message
    if isinstance(exc, InterruptedTrial):
        return exc.reason
    return "interrupted by user (Ctrl-C)"


class TestbedError(NetrigError):
    """Building, inspecting or tearing down a test bed failed."""

    __test__ = False  # not a pytest test class


class ResultError(NetrigError):
    """A result file is unreadable, of an unknown schema version, or inconsistent."""


class ToolError(NetrigError):
    """An external tool (iperf3, sockperf …) is missing, failed, or could not reach its peer."""


class MethodologyError(NetrigError):
    """A methodology cannot produce an answer (e.g. the search did not converge)."""


__all__ = [
    "NetrigError",
    "ToolError",
    "ConfigError",
    "CapabilityError",
    "PortError",
    "InterfaceError",
    "PermissionError_",
    "LiveInterfaceError",
    "EngineError",
    "InterruptedTrial",
    "Terminated",
    "INTERRUPTS",
    "wait_for",
    "interrupt_reason",
    "TestbedError",
    "ResultError",
    "MethodologyError",
]
