"""A controller's OTG config (:class:`netrig.otg.objects.Config`) → one part per agent (docs/distributed.md).

A port's ``location`` names an agent and that agent's port: ``AGENT/LOCATION`` (``agent-a/eth1``,
``agent-b/veth0@ns1``), the agent's ``--agent NAME`` before the first ``/``, the rest a location
that agent's ``netrig serve --port`` serves. Every agent with ports gets:

- its ports (the same names, its own locations) and their ``layer1`` and ``captures``;
- every flow of the config, in the config's order (a flow is the same generator index on every
  agent, which the signature in its frames names): a flow sent from one of its ports as it is, the
  others re-pointed at its first port and never started there — their ``rx_names`` are the agent's
  receiving ports, so it counts their frames (``Generator.expect``) under the tag the sender uses.

Pure: no I/O, testable without agents.
"""
from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from netrig.errors import ConfigError
from netrig.otg import mapping, refusal
from netrig.otg.objects import Config, Flow

#: An agent's name: what ``--agent NAME=URL`` and a location's part before ``/`` say.
AGENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


@dataclass(frozen=True)
class FlowRoute:
    """Where a flow is sent from and received: its ports, and their agents."""

    name: str
    tx_agent: str
    rx_agents: tuple[str, ...]
    tx_port: str
    rx_ports: tuple[str, ...]
    #: Some of its frames have no room for the signature (``mapping.untracked_sizes``): the sender
    #: counts them, no receiver can, so the controller reports no loss for it.
    untracked: bool = False

    @property
    def agents(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.tx_agent, *self.rx_agents)))

    @property
    def crosses(self) -> bool:
        """Sent and received on different agents: its latency holds their clocks' offset."""
        return any(a != self.tx_agent for a in self.rx_agents)


@dataclass(frozen=True)
class Split:
    """Per agent its part of the config (JSON, as the agent is sent it); per port its agent and
    location there; per flow its route."""

    parts: dict[str, dict[str, Any]]
    port_agent: dict[str, str]
    port_location: dict[str, str]
    routes: tuple[FlowRoute, ...]

    def tx_flows(self, agent: str, names: Sequence[str]) -> list[str]:
        return [r.name for r in self.routes if r.tx_agent == agent and r.name in names]

    def rx_only_flows(self, agent: str, names: Sequence[str]) -> list[str]:
        return [r.name for r in self.routes if r.tx_agent != agent and agent in r.rx_agents and r.name in names]


def parse_location(loc: str | None, at: str, agents: Sequence[str]) -> tuple[str, str]:
    """``AGENT/LOCATION`` → (agent, location); errors name ``at`` and the agents there are."""
    agent, sep, rest = (loc or "").partition("/")
    if not sep or not rest or not AGENT_NAME.match(agent):
        raise ConfigError(at, f"{loc!r}: give AGENT/INTERFACE, e.g. {(agents or ['agent-a'])[0]}/eth1 (the "
                              "controller's agents: " + ", ".join(agents) + ")")
    if agent not in agents:
        raise ConfigError(at, f"{loc!r}: no agent {agent!r}: use one of {', '.join(agents)} (--agent NAME=URL)")
    return agent, rest


def split(cfg: Config, document: dict[str, Any], agents: Sequence[str]) -> Split:
    """The parts of a config for ``agents`` (names): ``cfg`` read from ``document``, whose flows,
    layer-1 settings and captures the parts copy."""
    if cfg.devices:
        raise refusal.refuse("devices on a controller", "devices")
    if cfg.lldp:
        raise refusal.refuse("lldp on a controller", "lldp")
    port_agent: dict[str, str] = {}
    port_location: dict[str, str] = {}
    ports: dict[str, list[str]] = {}
    physical: dict[tuple[str, str], str] = {}  # (agent, location) → the port that names it first
    for i, p in enumerate(cfg.ports):
        agent, rest = parse_location(p.location, f"ports[{i}].location", agents)
        first = physical.setdefault((agent, rest), p.name)
        if first != p.name:
            raise ConfigError(f"ports[{i}].location", f"{p.location!r}: ports {first!r} and {p.name!r} are one "
                                                       "port of one agent: name each port once (each receives "
                                                       "what the other is sent)")
        port_agent[p.name], port_location[p.name] = agent, rest
        ports.setdefault(agent, []).append(p.name)
    routes = tuple(_route(i, f, port_agent) for i, f in enumerate(cfg.flows))
    parts = {a: _part(cfg, document, routes, own, port_location) for a, own in ports.items()}
    return Split(parts, port_agent, port_location, routes)


def _route(i: int, f: Flow, port_agent: dict[str, str]) -> FlowRoute:
    at = f"flows[{i}].tx_rx"
    p = f.tx_rx.port
    if f.tx_rx.choice != "port" or p is None:
        raise ConfigError(f"{at}.choice", "a controller routes port endpoints only: use tx_rx.port")
    for k, n in enumerate((p.tx_name, *p.receivers)):
        if n not in port_agent:
            where = f"{at}.port.tx_name" if k == 0 else f"{at}.port.rx_names[{k - 1}]"
            raise ConfigError(where, f"{n!r} is not a port of the config: name one of {', '.join(port_agent)}")
    return FlowRoute(f.name, port_agent[p.tx_name], tuple(dict.fromkeys(port_agent[n] for n in p.receivers)),
                     p.tx_name, p.receivers, bool(mapping.untracked_sizes(f, f"flows[{i}]")))


def _part(cfg: Config, document: dict[str, Any], routes: Sequence[FlowRoute], own: list[str],
          port_location: dict[str, str]) -> dict[str, Any]:
    mine = set(own)
    part: dict[str, Any] = {"ports": [{"name": n, "location": port_location[n]} for n in own],
                            "flows": [_flow(f, r, own[0], mine) for f, r in zip(document.get("flows", ()), routes)]}
    layer1 = [{**raw, "port_names": [n for n in l1.port_names if n in mine]}
              for raw, l1 in zip(document.get("layer1", ()), cfg.layer1) if any(n in mine for n in l1.port_names)]
    if layer1:
        part["layer1"] = layer1
    captures = [raw for raw, c in zip(document.get("captures", ()), cfg.captures)
                if all(n in mine for n in c.port_names)]
    if captures:
        part["captures"] = captures
    for key, value in document.items():
        if key not in ("ports", "flows", "layer1", "captures"):
            part[key] = copy.deepcopy(value)
    return part


def _flow(f: dict[str, Any], route: FlowRoute, first: str, mine: set[str]) -> dict[str, Any]:
    """A flow as one agent is given it: sent from its port as it is, else re-pointed at the agent's
    first port (never started there: its frames come from another agent)."""
    tx = route.tx_port if route.tx_port in mine else first
    rx = [n for n in route.rx_ports if n in mine] or [tx]
    return {**f, "tx_rx": {"choice": "port", "port": {"tx_name": tx, "rx_names": rx}}}
