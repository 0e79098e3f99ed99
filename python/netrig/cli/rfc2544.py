"""``netrig rfc2544``: RFC 2544 tests on a test bed without writing a config file (every method
whose shortcut is ``rfc2544``, chosen with ``--tests``)."""
from __future__ import annotations

from typing import Any

from netrig.cli import shortcuts


def register(subparsers: Any) -> None:
    shortcuts.register(subparsers, "rfc2544",
                       summary="RFC 2544 throughput/latency/frame loss/back-to-back on a test bed",
                       description="RFC 2544 tests (sections 26.1–26.6) on a test bed.")
