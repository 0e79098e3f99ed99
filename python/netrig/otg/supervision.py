"""Supervised traffic: a server whose client asked for it stops every flow when that client falls
silent (docs/distributed.md, docs/otg.md).

A client asks with ``X-Netrig-Supervise: SECONDS`` on its requests (:mod:`netrig.otgclient.headers`);
a controller sends it on every request to its agents, heartbeats included, with
:data:`~netrig.otgclient.headers.SUPERVISION_S`. From the first such request on, the server is
*supervised*: when no request carrying the header arrived for the last period it asked for, the
watch stops every flow (a controller killed with ``kill -9`` leaves no agent sending), says so in
the log and in ``GET /netrig/agents`` (``supervision``), and is *lapsed* until a supervised request
comes again. Requests without the header (another client reading metrics) neither arm nor feed it.

::

    off ──supervised request──▶ supervised ──no such request for the period──▶ lapsed (flows stopped)
                                    ▲                                              │
                                    └──────────── supervised request ◀─────────────┘
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

#: How often the watch looks at the time of the last supervised request, s.
WATCH_S = 0.05


class Supervision:
    """The watch of one server (see the module doc); ``stop`` stops every flow, ``log`` says a line."""

    def __init__(self, stop: Callable[[], None], log: Callable[[str], None]):
        self._stop, self._log = stop, log
        self._lock = threading.Lock()
        self.period_s: float | None = None  # None: off (nobody asked)
        self.last = 0.0  # time.monotonic() of the last supervised request
        self.lapsed_at: float | None = None  # time.time() the flows were stopped
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()

    def fed(self, period_s: float) -> None:
        """A request asking for supervision within ``period_s`` arrived."""
        with self._lock:
            if self.lapsed_at is not None:
                self._log(f"supervised again (X-Netrig-Supervise: {period_s:g} s)")
            self.period_s, self.last, self.lapsed_at = period_s, time.monotonic(), None
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="netrig-supervision", daemon=True)
                self._thread.start()

    def _watch(self) -> None:
        while not self._closed.wait(WATCH_S):
            with self._lock:
                period, silent = self.period_s, time.monotonic() - self.last
                lapsed = period is not None and self.lapsed_at is None and silent > period
                if lapsed:
                    self.lapsed_at = time.time()
            if lapsed:
                self._log(f"supervision lapsed: no request from the client that asked for it (X-Netrig-Supervise) "
                          f"for {silent:.1f} s (its period: {period:g} s): every flow stopped")
                self._stop()

    def state(self) -> dict[str, Any]:
        """``GET /netrig/agents``' ``supervision``: ``off``, ``supervised`` or ``lapsed`` (with when)."""
        with self._lock:
            if self.period_s is None:
                return {"state": "off"}
            out: dict[str, Any] = {"state": "lapsed" if self.lapsed_at is not None else "supervised",
                                   "period_s": self.period_s,
                                   "silent_s": round(time.monotonic() - self.last, 3)}
            if self.lapsed_at is not None:
                out["lapsed_at"] = self.lapsed_at
                out["reason"] = "no request from the supervising client within its period: every flow stopped"
            return out

    def close(self) -> None:
        self._closed.set()
