"""One OTG tester over many agents: the controller of ``netrig serve --agent NAME=URL`` (docs/distributed.md).

::

    client (snappi …) ──OTG──▶ Controller ──OTG + token──▶ agent a (netrig serve on host a)
                                  │  heartbeat ─────────▶ agent b …  (clock exchange every 0.25 s)
                                  ▼
    set_config: check the whole config, split it (netrig.otg.split), set each agent's part
    start:      fresh tags; receivers first (X-Netrig-Receive), then every sender together
    stop/pause/resume: the senders of the named flows, in parallel
    metrics:    every agent's rows merged (netrig.otg.merge): one tester

An agent that refuses a connection or misses heartbeats for :data:`DOWN_AFTER_S` is down: it is
reported (log, ``/netrig/agents``, the next control answer's warnings), the flows it had a part in
are stale (last counts kept, no loss), its ports' links down, and every other agent's flows are
stopped. Every method has the signature of :class:`netrig.otg.service.Service`'s, so the same HTTP
server serves both. A controller that starts finds its agents maybe running an earlier
controller's flows: it stops them.
"""
from __future__ import annotations

import secrets
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from netrig.errors import ConfigError
from netrig.otg import clock, merge, refusal, schema
from netrig.otg.agents import AgentClient, AgentDown, AgentRefused
from netrig.otg.service import Endpoints, StateError
from netrig.otg.split import Split, split
from netrig.otg.split import parse_location as parse_location  # re-exported for the CLI's checks

#: Time between two heartbeats of an agent, s.
HEARTBEAT_S = 0.25
#: An agent that has not answered for this long is down, s (a refused connection: at once).
DOWN_AFTER_S = 1.0
#: Trial tags are below 2^23 (the signature's field).
TAG_LIMIT = 1 << 23

T = TypeVar("T")


class Controller(Endpoints):
    """The OTG state machine of a controller (see the module doc)."""

    role = " (controller)"

    def __init__(self, agents: Sequence[AgentClient], log: Callable[[str], None] | None = None):
        self.agents = {a.name: a for a in agents}
        self.clocks = {a.name: clock.ClockTracker() for a in agents}
        self.down: dict[str, tuple[float, str]] = {}  # agent → (when, why), time.time()
        self.last_ok = {a.name: time.monotonic() for a in agents}
        self.lock = threading.RLock()
        self.config: dict | None = None
        self.split: Split | None = None
        self.cache: dict[str, dict[str, dict]] = {}  # agent → flow name → its last row
        self.notes: list[str] = []
        self.log = log or (lambda line: print(f"netrig serve: {line}", file=sys.stderr, flush=True))
        self.pool = ThreadPoolExecutor(max_workers=max(4, 2 * len(agents)), thread_name_prefix="netrig-ctl")
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="netrig-ctl-heartbeat", daemon=True)

    # ------------------------------------------------------------------------------------- agents

    def start(self) -> None:
        """Reach every agent once (its clock, and stop what an earlier controller left running), then
        keep a heartbeat: an agent unreachable now is an error naming it."""
        for name, a in self.agents.items():
            try:
                for _ in range(8):  # the start's estimate: the tightest of 8 exchanges
                    self.clocks[name].add(*a.clock_sample())
                if a.call("GET", "/config"):
                    a.call("POST", "/control/state", _traffic("stop", []))
            except (AgentDown, AgentRefused) as e:
                raise ConfigError("--agent", f"{e}: start it (netrig serve --token-file …) or fix the URL") from None
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            for name in [n for n in self.agents if n not in self.down]:
                self._beat_one(name)

    def _beat_one(self, name: str) -> None:
        try:
            self.clocks[name].add(*self.agents[name].clock_sample())
            self.last_ok[name] = time.monotonic()
        except AgentDown as e:
            refused = "Refused" in str(e) or "Reset" in str(e)
            if refused or time.monotonic() - self.last_ok[name] >= DOWN_AFTER_S:
                self._lost(name, str(e))

    def _lost(self, name: str, why: str) -> None:
        """An agent is down: say so, and stop every other agent's flows."""
        with self.lock:
            if name in self.down:
                return
            self.down[name] = (time.time(), why)
            msg = f"agent {name} is down ({why}): its flows' metrics are stale; every other agent's flows stopped"
            self.notes.append(msg)
        self.log(msg)
        self._each([n for n in self.agents if n not in self.down],
                   lambda a: a.call("POST", "/control/state", _traffic("stop", [])), quiet=True)

    def _each(self, names: Sequence[str], fn: Callable[[AgentClient], T], quiet: bool = False) -> dict[str, T]:
        """``fn`` on these agents in parallel; an agent down is marked so (and skipped if ``quiet``)."""
        futures = {n: self.pool.submit(fn, self.agents[n]) for n in names}
        out: dict[str, T] = {}
        for n, fut in futures.items():
            try:
                out[n] = fut.result()
            except AgentDown as e:
                threading.Thread(target=self._lost, args=(n, str(e)), daemon=True).start()
                if not quiet:
                    raise StateError(f"{e}: the run is stopped") from None
            except AgentRefused as e:
                if not quiet:
                    raise ConfigError("agents", str(e)) from None
        return out

    # ------------------------------------------------------------------------------------- config

    def set_config(self, body: Any) -> list[str]:
        cfg = schema.check("Config", body, defer_patterns=True)
        for key in ("devices", "lags", "lldp", "events", "stateful_flows", "egress_only_tracking"):
            if cfg.get(key):
                raise refusal.refuse(key, key)
        with self.lock:
            self._live()
            parts = split(cfg, list(self.agents))
            answers = self._each(list(parts.parts), lambda a: a.call("POST", "/config", parts.parts[a.name]))
            self.config, self.split, self.cache = cfg, parts, {}
        return [f"agent {n}: {w}" for n, ans in answers.items() for w in ans.get("warnings", [])]

    def get_config(self) -> dict:
        with self.lock:
            return dict(self.config or {})

    def _live(self) -> None:
        if self.down:
            raise StateError(f"agent {', '.join(self.down)} is down: restart it, then restart this controller")

    def _ready(self) -> Split:
        if self.split is None:
            raise StateError("no configuration: send one with set_config first")
        return self.split

    # -------------------------------------------------------------------------------------- control

    def control_state(self, body: Any) -> list[str]:
        req = schema.check("ControlState", body, "")
        if req["choice"] == "traffic":
            ft = (req.get("traffic") or {}).get("flow_transmit") or {}
            return self._traffic(ft.get("state", "start"), list(ft.get("flow_names") or []))
        if req["choice"] == "port" and (req.get("port") or {}).get("choice") == "capture":
            return self._capture_state(req["port"].get("capture") or {})
        raise refusal.refuse("control/state port.link" if req["choice"] == "port" else "control/state protocol",
                             req["choice"])

    def _traffic(self, state: str, names: list[str]) -> list[str]:
        with self.lock:
            sp = self._ready()
            known = [r.name for r in sp.routes]
            for k, n in enumerate(names):
                if n not in known:
                    raise ConfigError(f"traffic.flow_transmit.flow_names[{k}]", f"{n!r} is not a flow of the config")
            names = names or known
            if state == "start":
                self._live()
                self._start(sp, names)
            else:
                senders = [a for a in sp.parts if a not in self.down and sp.tx_flows(a, names)]
                body = {a: _traffic(state, sp.tx_flows(a, names)) for a in senders}
                self._each(senders, lambda a: a.call("POST", "/control/state", body[a.name]), quiet=state == "stop")
            return list(self.notes)

    def _start(self, sp: Split, names: list[str]) -> None:
        """Fresh tags; the receivers count first, then every sender starts."""
        tags = {n: secrets.randbelow(TAG_LIMIT) for n in names}
        for n in names:
            for a in self.cache:
                self.cache[a].pop(n, None)

        def receive(a: AgentClient) -> None:
            flows = sp.rx_only_flows(a.name, names)
            if flows:
                a.call("POST", "/control/state", _traffic("start", flows), _tag_headers(flows, tags, receive=True))

        def send(a: AgentClient) -> None:
            flows = sp.tx_flows(a.name, names)
            if flows:
                a.call("POST", "/control/state", _traffic("start", flows), _tag_headers(flows, tags))

        self._each(list(sp.parts), receive)
        self._each(list(sp.parts), send)

    def _capture_state(self, c: dict) -> list[str]:
        with self.lock:
            sp = self._ready()
            names = list(c.get("port_names") or [])
            for k, n in enumerate(names):
                if n not in sp.port_agent:
                    raise ConfigError(f"port.capture.port_names[{k}]", f"{n!r} is not a port of the config")
            by_agent = {a: [n for n in names if sp.port_agent[n] == a] for a in sp.parts} if names else {
                a: [] for a in sp.parts if "captures" in sp.parts[a]}
            body = lambda ports: {"choice": "port", "port": {"choice": "capture", "capture": {
                "state": c.get("state", "start"), "port_names": ports}}}
            self._each([a for a, p in by_agent.items() if p or not names],
                       lambda a: a.call("POST", "/control/state", body(by_agent[a.name])))
        return []

    # -------------------------------------------------------------------------------------- monitor

    def metrics(self, body: Any) -> dict:
        req = schema.check("MetricsRequest", body, "")
        choice = req.get("choice", "port")
        with self.lock:
            sp = self._ready()
        if choice == "flow":
            return {"choice": "flow_metrics", "flow_metrics": self._flow_metrics(sp, req.get("flow") or {})}
        if choice == "port":
            return {"choice": "port_metrics", "port_metrics": self._port_metrics(sp, req.get("port") or {})}
        raise refusal.refuse("monitor/metrics (not port or flow)", "choice", f"{choice} metrics")

    def _flow_metrics(self, sp: Split, f: dict) -> list[dict]:
        names = list(f.get("flow_names") or [])
        for k, n in enumerate(names):
            if not any(r.name == n for r in sp.routes):
                raise ConfigError(f"flow.flow_names[{k}]", f"{n!r} is not a flow of the config")
        routes = [r for r in sp.routes if not names or r.name in names]
        agents = sorted({a for r in routes for a in r.agents if a not in self.down})
        req = {"choice": "flow", "flow": {"flow_names": [r.name for r in routes]}}
        got = self._each(agents, lambda a: a.call("POST", "/monitor/metrics", req), quiet=True)
        with self.lock:
            for a, ans in got.items():
                self.cache.setdefault(a, {}).update({m["name"]: m for m in ans.get("flow_metrics", [])})
            clocks = {a: self.clocks[a].estimate() for a in self.agents}
            flows = {fl["name"]: fl for fl in (self.config or {}).get("flows", [])}
            rows = []
            for r in routes:
                per = {a: self.cache.get(a, {}).get(r.name) for a in r.agents}
                row, _ = merge.flow_row(r, {a: m for a, m in per.items() if m}, flows[r.name], clocks, set(self.down))
                rows.append(_only(row, f.get("metric_names") or ()))
        return rows

    def _port_metrics(self, sp: Split, p: dict) -> list[dict]:
        names = list(p.get("port_names") or [])
        for k, n in enumerate(names):
            if n not in sp.port_agent:
                raise ConfigError(f"port.port_names[{k}]", f"{n!r} is not a port of the config")
        names = names or list(sp.port_agent)
        live = [a for a in sp.parts if a not in self.down]
        got = self._each(live, lambda a: a.call("POST", "/monitor/metrics", {"choice": "port", "port": {
            "port_names": [n for n in names if sp.port_agent[n] == a.name]}}), quiet=True)
        by_name = {m["name"]: m for ans in got.values() for m in ans.get("port_metrics", [])}
        with self.lock:
            for n, m in by_name.items():
                self.cache.setdefault(f"port:{sp.port_agent[n]}", {})[n] = m
            out = []
            for n in names:
                a = sp.port_agent[n]
                row = by_name.get(n) or self.cache.get(f"port:{a}", {}).get(n) or {"name": n}
                row = merge.port_row(row, f"{a}/{sp.port_location[n]}", a in self.down)
                out.append(_only(row, p.get("column_names") or ()))
        return out

    def capture(self, body: Any) -> bytes:
        req = schema.check("CaptureRequest", body, "")
        with self.lock:
            sp = self._ready()
        agent = sp.port_agent.get(req["port_name"])
        if agent is None:
            raise ConfigError("port_name", f"{req['port_name']!r} is not a port of the config")
        try:
            return self.agents[agent].call("POST", "/monitor/capture", body)
        except AgentRefused as e:
            raise ConfigError("port_name", str(e)) from None

    def flow_groups(self) -> list:
        return []

    # ------------------------------------------------------------------------------ report, end

    def report(self) -> dict:
        """``GET /netrig/agents``: every agent's state and clock, the cross-agent latencies' bounds."""
        with self.lock:
            sp, flows = self.split, {fl["name"]: fl for fl in (self.config or {}).get("flows", [])}
            clocks = {a: self.clocks[a].estimate() for a in self.agents}
            agents = [_agent_report(n, a.spec.url, clocks[n], self.down.get(n)) for n, a in self.agents.items()]
            notes = []
            for r in (sp.routes if sp else ()):
                rows = {a: m for a in r.agents if (m := self.cache.get(a, {}).get(r.name))}
                _, note = merge.flow_row(r, rows, flows[r.name], clocks, set(self.down))
                stale = bool(set(r.agents) & set(self.down))
                if note is not None or stale:
                    notes.append({"name": r.name, "stale": stale, "crosses_agents": r.crosses, **_note(note)})
        return {"agents": agents, "flows": notes, "events": list(self.notes)}

    def close(self) -> None:
        """Stop the heartbeat and every live agent's flows (the agents keep running)."""
        self._stop.set()
        if self._beat.is_alive():
            self._beat.join(timeout=2)
        if self.split is not None:
            self._each([a for a in self.split.parts if a not in self.down],
                       lambda a: a.call("POST", "/control/state", _traffic("stop", [])), quiet=True)
        self.pool.shutdown(wait=True)
        for a in self.agents.values():
            a.close()


def _traffic(state: str, flows: Sequence[str]) -> dict:
    return {"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {
        "state": state, "flow_names": list(flows)}}}


def _tag_headers(flows: Sequence[str], tags: dict[str, int], receive: bool = False) -> dict[str, str]:
    h = {"X-Netrig-Tags": ",".join(str(tags[f]) for f in flows)}
    if receive:
        h["X-Netrig-Receive"] = "1"
    return h


def _note(note: merge.LatencyNote | None) -> dict:
    if note is None:
        return {}
    return {"latency_average_ns": note.average_ns, "latency_offset_ns": note.offset_ns,
            "latency_uncertainty_ns": note.uncertainty_ns, "latency_reported": note.reported}


def _only(row: dict, names: Sequence[str]) -> dict:
    return {k: v for k, v in row.items() if k == "name" or k in names} if names else row


def _agent_report(name: str, url: str, est: clock.ClockEstimate | None, down: tuple[float, str] | None) -> dict:
    out: dict = {"name": name, "url": url, "state": "down" if down else "up"}
    if down:
        out["down_since"], out["reason"] = down
    if est is not None:
        out["clock_offset_ns"], out["clock_uncertainty_ns"] = est.offset_ns, est.uncertainty_ns
        if est.ptp:
            out["ptp"] = {"grandmaster": est.ptp.grandmaster, "offset_ns": est.ptp.offset_ns}
    return out
