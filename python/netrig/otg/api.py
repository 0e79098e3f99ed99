"""What `netrig serve`'s HTTP server serves: :class:`OtgService`, one interface for a stand-alone
server or an agent (:class:`netrig.otg.service.Service`, on this host's ports) and a controller of
agents (``netrig.controller``, on many hosts). The server (:mod:`netrig.otg.server`) knows neither
class: ``netrig.cli.serve`` hands it one.

Requests arrive parsed and checked against the OTG model (:mod:`netrig.otg.objects`); answers are
OTG JSON. What only some implementations do is here too, with the answer of those that do not:
``GET /netrig/agents`` (:meth:`OtgService.agents_report`, a controller's) and the tags of a controller's
start (:class:`~netrig.otg.objects.StartTags`, an agent's).
"""
from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from typing import Any

from netrig import _native
from netrig.errors import NetrigError
from netrig.otg import refusal, schema
from netrig.otg.objects import (
    CaptureRequest,
    Config,
    ControlAction,
    ControlState,
    MetricsRequest,
    StartTags,
    StatesRequest,
    read,
)
from netrig.telemetry.sources import FlowGroupCounts

#: A traffic stop of every flow.
STOP_ALL = {"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "stop"}}}


class StateError(NetrigError):
    """A request that does not fit the current state (no config yet, a capture still running, an
    agent down): HTTP 409."""


def log(line: str) -> None:
    """A line of `netrig serve`'s log (its standard error)."""
    print(f"netrig serve: {line}", file=sys.stderr, flush=True)


class OtgService(ABC):
    """The OTG API's operations, as `netrig serve` serves them (see the module doc). Thread-safe:
    the server calls them from a thread per request."""

    #: Added to ``app_version`` (a controller says so).
    role = ""

    def version(self) -> dict[str, Any]:
        """``GET /capabilities/version``."""
        return {"api_spec_version": schema.API_SPEC_RANGE, "sdk_version": schema.MODEL_VERSION,
                "app_version": f"netrig {_native.__version__}{self.role}"}

    @abstractmethod
    def set_config(self, config: Config, document: dict[str, Any]) -> list[str]:
        """``POST /config``: ``config`` read from ``document`` (the request's JSON, checked); checked
        whole before anything changes. Its warnings."""

    def update_config(self, update: dict[str, Any]) -> list[str]:
        """``PATCH /config``: ``update_flows`` (a ``ConfigUpdate`` document). Its warnings."""
        raise refusal.refuse("config update on a controller", "choice")

    @abstractmethod
    def get_config(self) -> dict[str, Any]:
        """``GET /config``: the document of the config set (``{}``: none)."""

    @abstractmethod
    def control_state(self, req: ControlState, start: StartTags | None = None) -> list[str]:
        """``POST /control/state``: traffic and capture states; ``start``: a controller's tags on a
        start (``X-Netrig-Tags``, ``X-Netrig-Receive``), else ``None``. Its warnings."""

    def control_action(self, req: ControlAction) -> dict[str, Any]:
        """``POST /control/action``: pings from devices (where the service has them); no protocols."""
        raise refusal.refuse("control/action on a controller" if req.pings() is not None else "control/action",
                             "choice")

    @abstractmethod
    def metrics(self, req: MetricsRequest) -> dict[str, Any]:
        """``POST /monitor/metrics``: port or flow metrics."""

    def states(self, req: StatesRequest) -> dict[str, Any]:
        """``POST /monitor/states``: device states (neighbours, prefixes …): empty where the service
        has no devices (a controller) and for every protocol."""
        return {"choice": req.choice, req.choice: []}

    @abstractmethod
    def capture(self, req: CaptureRequest) -> bytes:
        """``POST /monitor/capture``: a port's capture file."""

    def flow_groups(self) -> list[FlowGroupCounts]:
        """Every flow's counts for ``--metrics-listen`` (none where no flow runs here)."""
        return []

    def agents_report(self) -> dict[str, Any]:
        """``GET /netrig/agents``: a controller's agents, their clocks, stale flows (none here: the
        server adds its supervision's state)."""
        return {}

    def stop_traffic(self) -> None:
        """Stop every flow (a supervision that lapsed); nothing to do without a config."""
        try:
            self.control_state(read(ControlState, STOP_ALL))
        except StateError:
            pass

    @abstractmethod
    def close(self) -> None:
        """Stop every flow this service started and release what it holds."""
