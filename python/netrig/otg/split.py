"""A controller's OTG config → one part per agent (docs/distributed.md).

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

from netrig.errors import ConfigError

#: An agent's name: what ``--agent NAME=URL`` and a location's part before ``/`` say.
AGENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


@dataclass(frozen=True)
class FlowRoute:
    """Where a flow is sent from and received: agent names."""

    name: str
    tx_agent: str
    rx_agents: tuple[str, ...]

    @property
    def agents(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.tx_agent, *self.rx_agents)))

    @property
    def crosses(self) -> bool:
        """Sent and received on different agents: its latency holds their clocks' offset."""
        return any(a != self.tx_agent for a in self.rx_agents)


@dataclass(frozen=True)
class Split:
    """Per agent its part of the config; per port its agent and location there; per flow its route."""

    parts: dict[str, dict]
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


def split(cfg: dict, agents: Sequence[str]) -> Split:
    """The parts of a checked OTG config for ``agents`` (names)."""
    port_agent: dict[str, str] = {}
    port_location: dict[str, str] = {}
    ports: dict[str, list[dict]] = {}
    for i, p in enumerate(cfg.get("ports", [])):
        agent, rest = parse_location(p.get("location"), f"ports[{i}].location", agents)
        port_agent[p["name"]], port_location[p["name"]] = agent, rest
        ports.setdefault(agent, []).append({**p, "location": rest})
    routes = tuple(_route(i, f, port_agent) for i, f in enumerate(cfg.get("flows", [])))
    parts = {a: _part(cfg, a, own, port_agent) for a, own in ports.items()}
    return Split(parts, port_agent, port_location, routes)


def _route(i: int, f: dict, port_agent: dict[str, str]) -> FlowRoute:
    at = f"flows[{i}].tx_rx"
    if (f.get("tx_rx") or {}).get("choice", "port") != "port":
        raise ConfigError(f"{at}.choice", "a controller routes port endpoints only: use tx_rx.port")
    p = f["tx_rx"].get("port") or {}
    rx = list(p.get("rx_names") or ([p["rx_name"]] if p.get("rx_name") else []))
    for k, n in enumerate([p.get("tx_name"), *rx]):
        if n not in port_agent:
            where = f"{at}.port.tx_name" if k == 0 else f"{at}.port.rx_names[{k - 1}]"
            raise ConfigError(where, f"{n!r} is not a port of the config: name one of {', '.join(port_agent)}")
    return FlowRoute(f["name"], port_agent[p["tx_name"]], tuple(dict.fromkeys(port_agent[n] for n in rx)))


def _part(cfg: dict, agent: str, own: list[dict], port_agent: dict[str, str]) -> dict:
    mine = {p["name"] for p in own}
    part: dict = {"ports": own, "flows": [_flow(f, agent, own[0]["name"], mine, port_agent) for f in
                                          cfg.get("flows", [])]}
    layer1 = [{**l1, "port_names": [n for n in l1.get("port_names", []) if n in mine]} for l1 in cfg.get("layer1", [])]
    if any(l1["port_names"] for l1 in layer1):
        part["layer1"] = [l1 for l1 in layer1 if l1["port_names"]]
    captures = [c for c in cfg.get("captures", []) if all(n in mine for n in c.get("port_names", []))]
    if captures:
        part["captures"] = captures
    for key in cfg:
        if key not in ("ports", "flows", "layer1", "captures"):
            part[key] = copy.deepcopy(cfg[key])
    return part


def _flow(f: dict, agent: str, first: str, mine: set[str], port_agent: dict[str, str]) -> dict:
    f = copy.deepcopy(f)
    p = f["tx_rx"]["port"]
    rx = list(p.pop("rx_names", None) or ([p["rx_name"]] if p.get("rx_name") else []))
    p.pop("rx_name", None)
    if p["tx_name"] not in mine:
        p["tx_name"] = first  # never started here: its frames come from another agent
    p["rx_names"] = [n for n in rx if n in mine] or [p["tx_name"]]
    return f
