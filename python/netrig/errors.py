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
``PortError::*`` (I/O etc.) ``PortError``
``EngineError::Worker``     ``EngineError``
``EngineError::Interrupted``  ``InterruptedTrial``
==========================  =====================
"""
from __future__ import annotations


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


class EngineError(NetrigError):
    """The traffic engine failed while running."""


class InterruptedTrial(EngineError):
    """A trial was stopped by the user (Ctrl-C); partial results are attached where possible."""


class TestbedError(NetrigError):
    """Building, inspecting or tearing down a test bed failed."""

    __test__ = False  # not a pytest test class


class ResultError(NetrigError):
    """A result file is unreadable, of an unknown schema version, or inconsistent."""


class MethodologyError(NetrigError):
    """A methodology cannot produce an answer (e.g. the search did not converge)."""


__all__ = [
    "NetrigError",
    "ConfigError",
    "CapabilityError",
    "PortError",
    "InterfaceError",
    "PermissionError_",
    "EngineError",
    "InterruptedTrial",
    "TestbedError",
    "ResultError",
    "MethodologyError",
]
