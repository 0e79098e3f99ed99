"""One OTG tester over many agents: the controller of ``netrig serve --agent NAME=URL`` (docs/distributed.md).

::

    client (snappi …) ──OTG──▶ Controller ──OTG + token──▶ agent a (netrig serve on host a)
                                  │  heartbeat ─────────▶ agent b …  (clock exchange every 0.25 s)
                                  ▼
    set_config: the whole config checked, split (netrig.controller.split), each agent's part set
    start:      fresh tags; receivers first (X-Netrig-Receive), then every sender together
    stop/pause/resume: the senders of the named flows, in parallel
    metrics:    every agent's rows merged (netrig.controller.merge): one tester

An agent that refuses a connection or misses heartbeats for :data:`DOWN_AFTER_S` is down: it is
reported (log, ``/netrig/agents``, the next control answer's warnings), the flows it had a part in
are stale (last counts kept, no loss), its ports' links down, and every other agent's flows are
stopped. A down agent is asked every :data:`READMIT_S` whether it is back; one that answers is taken
back as at the start (its flows stopped, its part of the config set again). The controller is an
:class:`netrig.otg.api.OtgService`: `netrig serve`'s HTTP server serves it as it serves a
stand-alone server. Every config set is also left with every agent (``/netrig/controller``: the
whole config and the agents it was split over): a controller that starts after another takes its
run over when the agents agree on it (each holds that record and its part of the config), its
flows running on under the new controller's supervision; otherwise it stops every agent's flows.
"""
from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import orjson

from netrig.controller import clock, merge
from netrig.controller.agents import AgentClient
from netrig.controller.split import FlowRoute, Split, split
from netrig.errors import ConfigError, NetrigError
from netrig.otg import api, mapping, metrics, refusal
from netrig.otg.api import OtgService, StateError
from netrig.otg.objects import (
    CaptureRequest,
    Config,
    ControlState,
    FlowMetricsRequest,
    MetricsRequest,
    PortMetricsRequest,
    StartTags,
    StatePortCapture,
)
from netrig.otg.objects import read as read_config
from netrig.otgclient import headers, report
from netrig.otgclient.client import OtgDown, OtgRefused
from netrig.otgclient.messages import FlowMetric, MetricsResponse, PortMetric, Warnings, read
from netrig.otgclient.typed import to_json

#: Time between two heartbeats of an agent, s.
HEARTBEAT_S = 0.25
#: An agent that has not answered for this long is down, s (a refused connection: at once); an
#: agent stops its flows when this controller has been silent as long (X-Netrig-Supervise).
DOWN_AFTER_S = headers.SUPERVISION_S
#: How often an agent that is down is asked whether it is back, s.
READMIT_S = 1.0
#: Trial tags are below 2^23 (the signature's field).
TAG_LIMIT = 1 << 23

T = TypeVar("T")


class Controller(OtgService):
    """The OTG state machine of a controller (see the module doc)."""

    role = " (controller)"

    def __init__(self, agents: Sequence[AgentClient], log: Callable[[str], None] | None = None):
        self.agents = {a.name: a for a in agents}
        self.clocks = {a.name: clock.ClockTracker() for a in agents}
        self.down: dict[str, tuple[float, str]] = {}  # agent → (when, why), time.time()
        # Marking an agent down takes only this lock, never ``lock``: a request that holds ``lock``
        # while it waits for a hung agent (_answer) must see the heartbeat mark it down.
        self.down_lock = threading.Lock()
        self.last_ok = {a.name: time.monotonic() for a in agents}
        self.lock = threading.RLock()
        self.config: Config | None = None
        self.document: dict[str, Any] | None = None
        self.split: Split | None = None
        self.cache: dict[str, dict[str, FlowMetric]] = {}  # agent → flow name → its last row
        self.frozen: dict[str, merge.Clocks] = {}  # flow name → the clocks that correct it once stopped
        self.port_cache: dict[str, PortMetric] = {}  # port name → its last row
        self.notes: list[str] = []
        self.log = log or api.log
        self.pool = ThreadPoolExecutor(max_workers=max(4, 2 * len(agents)), thread_name_prefix="netrig-ctl")
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="netrig-ctl-heartbeat", daemon=True)
        self._readmit = threading.Thread(target=self._readmit_down, name="netrig-ctl-readmit", daemon=True)

    # ------------------------------------------------------------------------------------- agents

    def start(self) -> None:
        """Reach every agent once (its clock), take over the run an earlier controller left on
        them or stop it (:meth:`_take_over`), then keep a heartbeat: an agent unreachable now is an
        error naming it."""
        try:
            for name, a in self.agents.items():
                self.clocks[name] = _clock(a)
            self._take_over()
        except (OtgDown, OtgRefused) as e:
            raise ConfigError("--agent", f"{e}: start it (netrig serve --token-file …) or fix the URL") from None
        self._beat.start()
        self._readmit.start()

    def _take_over(self) -> None:
        """An earlier controller's run, found on the agents, is taken over when they agree on it:
        each holds the record that controller left (``/netrig/controller``: the whole config, split
        over these agents) and, the agents it split to, their part of it. Its flows then run on,
        supervised by this controller; otherwise every agent's flows are stopped. Said either way
        (log, ``/netrig/agents``' events, the next control answer)."""
        names = list(self.agents)
        configs = self._each(names, lambda a: a.call("GET", "/config"))
        held = [n for n in names if configs[n]]
        if not held:
            return
        found = _agreed(names, configs, self._each(names, _record))
        if isinstance(found, str):
            self._each(held, _stop_flows)
            msg = (f"agent {', '.join(held)} held an earlier controller's config, not taken over ({found}): their "
                   "flows stopped; send the config again")
        else:
            config, document, sp = found
            self._each([n for n in held if n not in sp.parts], _stop_flows)
            running = self._running(sp)
            self.config, self.document, self.split = config, document, sp
            msg = (f"took over the earlier controller's config ({len(sp.routes)} flows over agent "
                   f"{', '.join(sp.parts)}): " + (f"flow {', '.join(running)} run on under this controller" if running
                                                  else "no flow was running (an agent stops its flows 1 s after its "
                                                       "controller fell silent): start them again"))
        self.notes.append(msg)
        self.log(msg)

    def _running(self, sp: Split) -> list[str]:
        """The flows of ``sp`` whose senders say they are sending."""
        every = [r.name for r in sp.routes]
        senders = [a for a in sp.parts if sp.tx_flows(a, every)]
        got = self._each(senders, lambda a: a.call("POST", "/monitor/metrics", {"choice": "flow", "flow": {
            "flow_names": sp.tx_flows(a.name, every)}}))
        started = {m.name for ans in got.values() for m in read(MetricsResponse, ans).flow_metrics
                   if m.transmit == "started"}
        return [n for n in every if n in started]

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            for name in [n for n in self.agents if n not in self.down]:
                self._beat_one(name)

    def _beat_one(self, name: str) -> None:
        try:
            self.clocks[name].add(*self.agents[name].clock_sample())
            self.last_ok[name] = time.monotonic()
        except OtgDown as e:
            if e.refused or time.monotonic() - self.last_ok[name] >= DOWN_AFTER_S:
                self._lost(name, str(e))

    def _lost(self, name: str, why: str) -> None:
        """An agent is down: say so, and stop every other agent's flows."""
        with self.down_lock:
            if name in self.down:
                return
            self.down[name] = (time.time(), why)
            msg = f"agent {name} is down ({why}): its flows' metrics are stale; every other agent's flows stopped"
            self.notes.append(msg)
        self.log(msg)
        self._each([n for n in self.agents if n not in self.down], _stop_flows, quiet=True)

    def _readmit_down(self) -> None:
        while not self._stop.wait(READMIT_S):
            for name in [n for n in self.agents if n in self.down]:
                self._readmit_one(name)

    def _readmit_one(self, name: str) -> None:
        """A down agent that answers again is taken back, as at the controller's start: its clock
        estimated afresh, whatever it runs stopped, and its part of the current config set again
        (a restarted agent has none). The config cannot change meanwhile (refused while an agent
        is down)."""
        a = self.agents[name]
        with self.lock:
            sp = self.split
        try:
            tracker = _greet(a)
            if sp is not None and name in sp.parts:
                a.call("POST", "/config", sp.parts[name])
        except (OtgDown, OtgRefused):
            return  # still down: asked again in READMIT_S
        with self.lock, self.down_lock:
            since, _ = self.down.pop(name)
            self.clocks[name], self.last_ok[name] = tracker, time.monotonic()
            self.cache.pop(name, None)
            msg = (f"agent {name} is back after {time.time() - since:.1f} s down: its flows stopped, its part of the "
                   "config set")
            self.notes.append(msg)
        self.log(msg)

    def _each(self, names: Sequence[str], fn: Callable[[AgentClient], T], quiet: bool = False) -> dict[str, T]:
        """``fn`` on these agents in parallel; an agent down is marked so (and skipped if ``quiet``)."""
        futures = {n: self.pool.submit(fn, self.agents[n]) for n in names}
        out: dict[str, T] = {}
        for n, fut in futures.items():
            try:
                out[n] = self._answer(n, fut)
            except OtgDown as e:
                threading.Thread(target=self._lost, args=(n, str(e)), daemon=True).start()
                if not quiet:
                    raise StateError(f"{e}: the run is stopped") from None
            except OtgRefused as e:
                if not quiet:
                    raise ConfigError("agents", str(e)) from None
        return out

    def _answer(self, name: str, fut: Future[T]) -> T:
        """The agent's answer; :class:`OtgDown` as soon as the heartbeat finds it down. A hung agent
        (a stopped host) accepts the connection and never answers: the request alone would wait
        for its timeout (30 s) where the heartbeat knows in 1 s. The request is left to time out
        in its pool thread."""
        while True:
            try:
                return fut.result(timeout=HEARTBEAT_S)
            except TimeoutError:
                with self.down_lock:
                    down = self.down.get(name)
                if down is not None:
                    raise OtgDown(f"{down[1]} (marked down)") from None

    # ------------------------------------------------------------------------------------- config

    def set_config(self, config: Config, document: dict[str, Any]) -> list[str]:
        mapping.refuse_unsupported(config)
        with self.lock:
            self._live()
            parts = split(config, document, list(self.agents))
            answers = self._each(list(parts.parts), lambda a: a.call("POST", "/config", parts.parts[a.name]))
            self.config, self.document, self.split, self.cache, self.frozen = config, document, parts, {}, {}
            # left with every agent: a controller started after this one takes the run over from it
            record = to_json(report.ControllerRecord(config=document, agents=tuple(self.agents)))
            self._each(list(self.agents), lambda a: a.call("POST", "/netrig/controller", record))
        return [f"agent {n}: {w}" for n, ans in answers.items() for w in read(Warnings, ans).warnings]

    def get_config(self) -> dict[str, Any]:
        with self.lock:
            return dict(self.document or {})

    def _live(self) -> None:
        if self.down:
            raise StateError(f"agent {', '.join(self.down)} is down: restart it (this controller takes it back within "
                             f"{READMIT_S:g} s of its answer: GET /netrig/agents)")

    def _ready(self) -> Split:
        if self.split is None:
            raise StateError("no configuration: send one with set_config first")
        return self.split

    # -------------------------------------------------------------------------------------- control

    def control_state(self, req: ControlState, start: StartTags | None = None) -> list[str]:
        if start is not None:
            raise ConfigError(headers.TAGS, "this is a controller: send its agents' headers to an agent")
        if req.choice == "traffic":
            ft = req.flow_transmit()
            return self._traffic(ft.state, list(ft.flow_names))
        capture = req.capture()
        if capture is not None:
            return self._capture_state(capture)
        raise refusal.refuse("control/state port.link on a controller" if req.choice == "port"
                             else "control/state protocol", req.choice)

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
                if state == "stop":  # the senders drained: what the ports dropped themselves since the start
                    lossy = [r for r in self._flow_metrics(sp, FlowMetricsRequest()) if (r.get("loss") or 0) > 0]
                    told = report.drop_warnings(_located_drops(self._answers(sp)), {r["port_rx"] for r in lossy},
                                                {r["port_tx"] for r in lossy})
                    for w in told:
                        self.log(f"warning: {w}")
                    return list(self.notes) + told
            return list(self.notes)

    def _start(self, sp: Split, names: list[str]) -> None:
        """Fresh tags; the receivers count first, then every sender starts."""
        tags = {n: secrets.randbelow(TAG_LIMIT) for n in names}
        self._forget(names)

        def receive(a: AgentClient) -> None:
            flows = sp.rx_only_flows(a.name, names)
            if flows:
                a.call("POST", "/control/state", _traffic("start", flows),
                       headers.tags([tags[f] for f in flows], receive=True))

        def send(a: AgentClient) -> None:
            flows = sp.tx_flows(a.name, names)
            if flows:
                a.call("POST", "/control/state", _traffic("start", flows), headers.tags([tags[f] for f in flows]))

        self._each(list(sp.parts), receive)
        self._each(list(sp.parts), send)

    def _forget(self, names: Sequence[str]) -> None:
        """Flows ``names`` start again: their last rows and their fixed clocks go."""
        for n in names:
            self.frozen.pop(n, None)
            for a in self.cache:
                self.cache[a].pop(n, None)

    def _capture_state(self, c: StatePortCapture) -> list[str]:
        with self.lock:
            sp = self._ready()
            names = list(c.port_names)
            for k, n in enumerate(names):
                if n not in sp.port_agent:
                    raise ConfigError(f"port.capture.port_names[{k}]", f"{n!r} is not a port of the config")
            by_agent = {a: [n for n in names if sp.port_agent[n] == a] for a in sp.parts} if names else {
                a: [] for a in sp.parts if "captures" in sp.parts[a]}
            body = lambda ports: {"choice": "port", "port": {"choice": "capture", "capture": {
                "state": c.state, "port_names": ports}}}
            self._each([a for a, p in by_agent.items() if p or not names],
                       lambda a: a.call("POST", "/control/state", body(by_agent[a.name])))
        return []

    # -------------------------------------------------------------------------------------- monitor

    def metrics(self, req: MetricsRequest) -> dict[str, Any]:
        with self.lock:
            sp = self._ready()
        if req.choice == "flow":
            return {"choice": "flow_metrics", "flow_metrics": self._flow_metrics(sp, req.flow or FlowMetricsRequest())}
        if req.choice == "port":
            return {"choice": "port_metrics", "port_metrics": self._port_metrics(sp, req.port or PortMetricsRequest())}
        raise refusal.refuse("monitor/metrics (not port, flow or lldp)", "choice", f"{req.choice} metrics")

    def _flow_metrics(self, sp: Split, f: FlowMetricsRequest) -> list[dict[str, Any]]:
        for k, n in enumerate(f.flow_names):
            if not any(r.name == n for r in sp.routes):
                raise ConfigError(f"flow.flow_names[{k}]", f"{n!r} is not a flow of the config")
        routes = [r for r in sp.routes if not f.flow_names or r.name in f.flow_names]
        agents = sorted({a for r in routes for a in r.agents if a not in self.down})
        tagged = metrics.tagged_request(f.tagged_metrics, lambda _: None)
        # every combination of every tagged flow, as counted: merged here, then filtered as asked
        req = {"choice": "flow", "flow": {"flow_names": [r.name for r in routes], "tagged_metrics": {
            "include": tagged.include, "include_empty_metrics": True, "metric_names": ["frames_tx", "frames_rx"]}}}
        got = self._each(agents, lambda a: a.call("POST", "/monitor/metrics", req), quiet=True)
        with self.lock:
            for a, ans in got.items():
                self.cache.setdefault(a, {}).update({m.name or "": m for m in read(MetricsResponse, ans).flow_metrics})
            clocks = {a: self.clocks[a].estimate() for a in self.agents}
            flows = {fl.name: fl for fl in (self.config.flows if self.config else ())}
            rows = []
            for r in routes:
                per = self._rows(r)
                row, _ = merge.flow_row(r, per, flows[r.name], self._flow_clocks(r, per, clocks), set(self.down))
                out = _only(to_json(dataclasses.replace(row, tagged_metrics=None)), f.metric_names)
                tags = merge.tagged_rows(r, per, tagged, loss=row.loss is not None)  # stale: no loss
                rows.append(out if tags is None else {**out, "tagged_metrics": tags})
        return rows

    def _port_metrics(self, sp: Split, p: PortMetricsRequest) -> list[dict[str, Any]]:
        for k, n in enumerate(p.port_names):
            if n not in sp.port_agent:
                raise ConfigError(f"port.port_names[{k}]", f"{n!r} is not a port of the config")
        names = list(p.port_names or sp.port_agent)
        live = [a for a in sp.parts if a not in self.down]
        got = self._each(live, lambda a: a.call("POST", "/monitor/metrics", {"choice": "port", "port": {
            "port_names": [n for n in names if sp.port_agent[n] == a.name]}}), quiet=True)
        with self.lock:
            for ans in got.values():
                self.port_cache.update({m.name or "": m for m in read(MetricsResponse, ans).port_metrics})
            out = []
            for n in names:
                a = sp.port_agent[n]
                row = merge.port_row(self.port_cache.get(n) or PortMetric(name=n), f"{a}/{sp.port_location[n]}",
                                     a in self.down)
                out.append(_only(to_json(row), p.column_names))
        return out

    def capture(self, req: CaptureRequest) -> bytes:
        with self.lock:
            sp = self._ready()
        agent = sp.port_agent.get(req.port_name)
        if agent is None:
            raise ConfigError("port_name", f"{req.port_name!r} is not a port of the config")
        try:
            return self.agents[agent].call("POST", "/monitor/capture", to_json(req))
        except OtgRefused as e:
            raise ConfigError("port_name", str(e)) from None

    # ------------------------------------------------------------------------------ report, end

    def _rows(self, r: FlowRoute) -> dict[str, FlowMetric]:
        """Flow ``r``'s last row from each of its agents that has one."""
        return {a: m for a in r.agents if (m := self.cache.get(a, {}).get(r.name))}

    def _flow_clocks(self, r: FlowRoute, rows: dict[str, FlowMetric], clocks: merge.Clocks) -> merge.Clocks:
        """The clock estimates that correct flow ``r``'s latency: the current ones while it sends,
        then those of when it was first read stopped. A finished flow's metrics and notes stay as
        they were: the estimates move on (PTP's bound is the largest offset over a sliding window),
        and a statistic read above its bound once read within it a moment later, or the reverse
        (a clean clone: the metric carried an average the note, read after it, left out)."""
        if r.name in self.frozen:
            return self.frozen[r.name]
        tx = rows.get(r.tx_agent)
        if r.crosses and tx is not None and tx.transmit == "stopped":
            self.frozen[r.name] = clocks
        return clocks

    def agents_report(self) -> dict[str, Any]:
        """``GET /netrig/agents``: every agent's state and clock, the cross-agent latencies' bounds,
        and every live agent's ports with their own receive drops since the last start (``ports``)."""
        ports, per_flow = self._agent_ports()
        with self.lock:
            sp, flows = self.split, {fl.name: fl for fl in (self.config.flows if self.config else ())}
            clocks = {a: self.clocks[a].estimate() for a in self.agents}
            agents = [_agent_report(n, a.spec.url, clocks[n], self.down.get(n)) for n, a in self.agents.items()]
            notes = []
            for r in (sp.routes if sp else ()):
                rows = self._rows(r)
                _, note = merge.flow_row(r, rows, flows[r.name], self._flow_clocks(r, rows, clocks), set(self.down))
                stale = bool(set(r.agents) & set(self.down))
                if note is not None or stale:
                    notes.append({"name": r.name, "stale": stale, "crosses_agents": r.crosses, **_note(note)})
        return {"agents": agents, "flows": notes, "events": list(self.notes),
                **({"ports": ports} if ports is not None else {}), **per_flow}

    def _agent_ports(self) -> tuple[list[dict[str, Any]] | None, dict[str, list[dict[str, Any]]]]:
        """The config's ports on live agents, each with its own receive drops as its agent reports
        them (netrig.otg.rxdrops), located ``AGENT/LOCATION``; and what the agents say of each flow
        beyond OTG's metrics, merged over them: ``sequence``, ``latency``, ``ipdv``, ``sending``
        (each left out when an agent did not say), and how each sending port kept its schedule
        (``pacing``). ``(None, {})`` before a config."""
        with self.lock:
            sp = self.split
            clocks = {a: self.clocks[a].estimate() for a in self.agents}
            by_flow = {r.name: self._flow_clocks(r, self._rows(r), clocks) for r in (sp.routes if sp else ())}
        if sp is None:
            return None, {}
        answers = self._answers(sp)
        ports = [dataclasses.asdict(p) for p in _located_drops(answers)]
        pacing = [{**dataclasses.asdict(p), "location": f"{a}/{p.location}"}
                  for a, r in answers.items() for p in (r.pacing or ())]
        per_flow = {"sequence": merge.sequence([r.sequence for r in answers.values()]),
                    "latency": merge.latency(sp.routes, {a: r.latency for a, r in answers.items()}, by_flow),
                    "ipdv": merge.ipdv([r.ipdv for r in answers.values()]),
                    "sending": merge.sending([r.sending for r in answers.values()]),
                    "pacing": pacing if all(r.pacing is not None for r in answers.values()) else None}
        return ports, {k: v for k, v in per_flow.items() if v is not None}

    def _answers(self, sp: Split) -> dict[str, report.AgentsReport]:
        """Each live agent of ``sp``'s ``GET /netrig/agents``, by agent."""
        got = self._each([a for a in sp.parts if a not in self.down], lambda a: a.call("GET", "/netrig/agents"),
                         quiet=True)
        return {a: report.read(report.AgentsReport, answer) for a, answer in got.items()}

    def close(self) -> None:
        """Stop the heartbeat and every live agent's flows (the agents keep running)."""
        self._stop.set()
        for t in (self._beat, self._readmit):
            if t.is_alive():
                t.join(timeout=2)
        if self.split is not None:
            self._each([a for a in self.split.parts if a not in self.down], _stop_flows, quiet=True)
        self.pool.shutdown(wait=True)
        for a in self.agents.values():
            a.close()


def _clock(a: AgentClient) -> clock.ClockTracker:
    """An agent's clock, estimated afresh: the tightest of 8 exchanges."""
    tracker = clock.ClockTracker()
    for _ in range(8):
        tracker.add(*a.clock_sample())
    return tracker


def _greet(a: AgentClient) -> clock.ClockTracker:
    """An agent that was down, reached again: its clock estimated afresh, and whatever it runs
    stopped."""
    tracker = _clock(a)
    if a.call("GET", "/config"):
        _stop_flows(a)
    return tracker


def _stop_flows(a: AgentClient) -> None:
    """Every flow of ``a`` stopped."""
    a.call("POST", "/control/state", _traffic("stop", []))


def _record(a: AgentClient) -> report.ControllerRecord:
    """What the controller that set ``a``'s config left with it (empty: none, or an agent too old
    to keep one)."""
    try:
        return report.read(report.ControllerRecord, a.call("GET", "/netrig/controller"))
    except OtgRefused:
        return report.ControllerRecord()


def _agreed(names: Sequence[str], configs: dict[str, Any],
            records: dict[str, report.ControllerRecord]) -> tuple[Config, dict[str, Any], Split] | str:
    """The run the agents ``names`` agree on (see :meth:`Controller._take_over`): its config, document
    and split; else why not, in words."""
    none = next((n for n in names if not records[n].config), None)
    if none is not None:
        return f"agent {none} holds no controller's record of it (restarted, or set by another client)"
    first = records[names[0]]
    other = next((n for n in names if records[n] != first), None)
    if other is not None:
        return f"agents {names[0]} and {other} hold different controllers' records"
    if sorted(first.agents) != sorted(names):
        return f"it was split over agent {', '.join(first.agents)}, this controller has {', '.join(names)}"
    try:
        config = read_config(Config, first.config, defer_headers=True)
        mapping.refuse_unsupported(config)
        sp = split(config, first.config, names)
    except NetrigError as e:
        return f"its config is refused here: {e}"
    changed = next((n for n in sp.parts if orjson.loads(orjson.dumps(sp.parts[n])) != configs[n]), None)
    if changed is not None:
        return f"agent {changed}'s config is no longer its part of it"
    return config, first.config, sp


def _traffic(state: str, flows: Sequence[str]) -> dict[str, Any]:
    return {"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {
        "state": state, "flow_names": list(flows)}}}


def _note(note: merge.LatencyNote | None) -> dict[str, Any]:
    if note is None:
        return {}
    return {"latency_minimum_ns": note.minimum_ns, "latency_average_ns": note.average_ns,
            "latency_maximum_ns": note.maximum_ns, "latency_offset_ns": note.offset_ns,
            "latency_uncertainty_ns": note.uncertainty_ns, "latency_clock": note.clock,
            "latency_reported": list(note.reported)}


def _only(row: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k == "name" or k in names} if names else row


def _agent_report(name: str, url: str, est: clock.ClockEstimate | None, down: tuple[float, str] | None) -> dict:
    out: dict = {"name": name, "url": url, "state": "down" if down else "up"}
    if down:
        out["down_since"], out["reason"] = down
    if est is not None:
        out["clock_offset_ns"], out["clock_uncertainty_ns"] = est.offset_ns, est.uncertainty_ns
        if est.ptp:
            out["ptp"] = {"grandmaster": est.ptp.grandmaster, "offset_ns": est.ptp.offset_ns,
                          "bound_ns": est.ptp_bound_ns}
    return out


def _located_drops(answers: dict[str, report.AgentsReport]) -> list[report.PortDrops]:
    """The agents' ports with their own drops, each located ``AGENT/LOCATION`` (its veth peer too)."""
    return [dataclasses.replace(p, location=f"{a}/{p.location}",
                                tx_peer=f"{a}/{p.tx_peer}" if p.tx_peer is not None else None)
            for a, r in answers.items() for p in (r.ports or ())]
