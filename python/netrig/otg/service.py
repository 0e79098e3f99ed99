"""The state behind netrig serve's endpoints: one OTG config, the generator running it, captures.

::

    (no config) ──set_config ok──▶ configured: ports open, workers idle, every flow stopped
    configured ──set_config──▶ checked whole (nothing changes on error) → generator closed → new one
    flow:    stopped ──start──▶ started ──pause──▶ paused ──resume──▶ started ──stop, or done──▶ stopped
    capture: stopped ──start──▶ started (buffer cleared) ──stop──▶ stopped (readable)

A config's devices (:mod:`netrig.otg.devices`) are made on the ports as it is set (the kernel
answers their ARP and ND; the ports carrying them pass those frames to it) and undone with it; a
start resolves the next hops of the flows over them and gives a flow whose MAC changed the new one
(``Generator.update``) before any frame leaves.

Every request is checked whole before anything changes (names, states, ports), so a bad request
never leaves a flow sending or a port half-open. A stop returns once the stopped flows' frames in
flight have arrived or the drain time passed, so metrics read after it are final. Thread-safe: one
lock serialises the requests.
"""
from __future__ import annotations

import copy
import dataclasses
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from netrig import _native
from netrig.errors import ConfigError, NetrigError
from netrig.model.defaults import SERVE_DRAIN_S
from netrig.otg import api, bgp, devices, lldp, mapping, metrics, refusal
from netrig.otg.api import OtgService, StateError
from netrig.otg.mapping import Plan, ServePort
from netrig.otg.objects import (
    BgpPrefixIpv4UnicastFilter,
    BgpPrefixIpv6UnicastFilter,
    BgpPrefixStateRequest,
    CaptureRequest,
    Config,
    ControlAction,
    ControlState,
    FlowMetricsRequest,
    MetricsRequest,
    PortMetricsRequest,
    StartTags,
    StatePortCapture,
    StatePortLink,
    StateProtocol,
    StatesRequest,
    StateTrafficFlowTransmit,
    read,
)
from netrig.otg.rxdrops import RxDrops
from netrig.otgclient import headers
from netrig.otgclient.report import FlowIpdv, FlowLatency, FlowSending, FlowSequence, PortPacing, drop_warnings
from netrig.telemetry.sources import FlowGroupCounts

#: How long a flow's frames may still be on their way after its last one left, by default, s.
DEFAULT_DRAIN_S = SERVE_DRAIN_S


def _mtu(port: ServePort) -> int | None:
    """The port's MTU now (``None``: it cannot be read; opening the port says why)."""
    try:
        return _native.interface_info(port.ifname, port.port.netns).mtu
    except NetrigError:
        return None


class LinkClock:
    """The ports a client set down (``control/state port.link``) and their time down: since when,
    and in all, seconds."""

    def __init__(self) -> None:
        self.down_since: dict[str, float] = {}
        self.down_s: dict[str, float] = {}

    def set(self, port: str, up: bool) -> None:
        now = time.monotonic()
        if up and port in self.down_since:
            self.down_s[port] = self.down_s.get(port, 0.0) + now - self.down_since.pop(port)
        elif not up:
            self.down_since.setdefault(port, now)

    def report(self) -> dict[str, dict[str, Any]]:
        now = time.monotonic()
        names = dict.fromkeys([*self.down_s, *self.down_since])
        return {n: {"state": "down" if n in self.down_since else "up",
                    "down_s": self.down_s.get(n, 0.0) + (now - self.down_since[n] if n in self.down_since else 0.0)}
                for n in names}


def _ports_of(plan: Plan) -> list[_native.Port]:
    """The plan's ports; those carrying devices or LLDP give the kernel their ARP, ND, ICMP and
    LLDP frames."""
    carrying = {e.port for e in plan.devices.ethernets} | {a.port for a in plan.lldp}
    out = []
    for k, s in enumerate(plan.serve_ports):
        p = s.port
        out.append(_native.Port(p.ifname, p.netns, p.io, p.queues, p.ring_frames, p.busy_poll_us,
                                i_know_this_is_live=p.i_know_this_is_live, control_to_kernel=True)
                   if k in carrying else p)
    return out


def _known(plan: Plan) -> dict[devices.NextHop, str]:
    """The next hops whose MACs the plan's flows carry now."""
    return {f.next_hop: f.dst_mac for f in plan.flows if f.next_hop is not None and f.dst_mac is not None}


def _renumbered(warning: str, which: Sequence[int]) -> str:
    """A warning of an update's flow ``j`` (``flows[j]...``) as the config's flow ``which[j]``."""
    head, _, rest = warning.partition("]")
    return f"flows[{which[int(head[len('flows['):])]}]{rest}"


def port_pacing(plan: Plan, g: _native.Generator) -> list[PortPacing]:
    """How each port that sends kept its schedule since its flows last started from idle."""
    out = []
    for i, (s, p) in enumerate(zip(plan.serve_ports, g.tx_pacing())):
        if p is not None:
            sm = p.smoothness
            out.append(PortPacing(name=plan.port_names[i], location=s.name, frames=p.frames, stretch_ns=p.stretch_ns,
                                  max_lag_ns=p.max_lag_ns, peak_frames=sm.peak_frames,
                                  intended_frames=sm.intended_frames, gap_p50_ns=sm.gap_p50_ns,
                                  gap_p99_ns=sm.gap_p99_ns, gap_max_ns=sm.gap_max_ns))
    return out


class Service(OtgService):
    """The OTG state machine of `netrig serve` on this host's ports (see the module doc)."""

    def __init__(self, ports: Sequence[ServePort], *, drain_s: float = DEFAULT_DRAIN_S, capture_bytes: int = 64 << 20,
                 tx_cpus: Sequence[int] = (), rx_cpus: Sequence[int] = (),
                 on_change: Callable[[str, Service], None] | None = None):
        self.ports = tuple(ports)
        self.drain_ns = int(drain_s * 1e9)
        self.capture_bytes = capture_bytes
        self.cpus = (tuple(tx_cpus), tuple(rx_cpus))
        self.lock = threading.RLock()
        self.config: dict[str, Any] | None = None
        self.plan: Plan | None = None
        self.generator: _native.Generator | None = None
        self.rates = metrics.Rates()
        self.flow_index: dict[str, int] = {}
        #: The config's workers whose failed CPU pin a client was told of (once each).
        self.pins_told: set[str] = set()
        #: The flows a traffic start names, while the ``starting`` hook runs.
        self.starting: list[int] = []
        #: Called after a config is set and after traffic changes (the recorder's hook).
        self.on_change = on_change
        #: Each port's own receive drops since the last start (GET /netrig/agents' ``ports``).
        self.rx_drops = RxDrops()
        #: The links this server set down, and for how long (GET /netrig/agents' ``links``).
        self.links = LinkClock()
        #: The config's devices, made on the ports (``None``: it has none).
        self.devices: devices.Devices | None = None
        #: The config's LLDP objects, each an lldpd on its port (``None``: it has none).
        self.lldp: lldp.Agents | None = None
        #: The config's BGP peers, served by BIRD in their ports' namespaces (``None``: it has none).
        self.bgp: bgp.Speakers | None = None

    # --------------------------------------------------------------------------------------- config

    def set_config(self, config: Config, document: dict[str, Any]) -> list[str]:
        """Map and apply a config, checked whole first (its frames against the ports' MTUs too): a
        refused one leaves the running config, its flows and counters as they were. Only a port
        that then fails to open loses the old config (its generator is closed as the new one opens)."""
        plan = mapping.plan(config, self.ports, self.capture_bytes)
        mapping.check_frames(plan, [_mtu(s) for s in plan.serve_ports])
        with self.lock:
            self._changed("end")
            old, old_plan = self.generator, self.plan
            self.generator, self.plan, self.config = None, None, None
            ports = _ports_of(plan)
            self._close_devices()
            try:  # the old config's ports stay open for this one where they are the same
                daemon_cpus = _native.sender_cpus(self.cpus[0])  # netrig.otg.daemons
                self.devices = self._made_devices(plan, ports, daemon_cpus)
                self.generator = _native.Generator(ports, plan.specs, plan.capture_specs, plan.line_rates, *self.cpus,
                                                   reuse=old)
                if plan.lldp:  # once the ports pass LLDP frames to the kernel
                    self.lldp = lldp.Agents(plan.lldp, ports, daemon_cpus)
                    self.lldp.start()
                if plan.bgp.peers and self.devices is not None:  # once the devices have their addresses
                    netns = [self.devices.netns(k) for k in range(len(plan.devices.ethernets))]
                    self.bgp = bgp.Speakers(plan.bgp, netns, daemon_cpus)
                    self.bgp.start()
            except ConfigError as e:
                self._close_devices()
                raise mapping.otg_error(e) from None
            except BaseException:
                self._close_devices()
                raise
            finally:
                if old is not None and old_plan is not None:
                    self.rx_drops.handover(old_plan, old)
                if old is not None:
                    old.close()
            self.config, self.plan = document, plan
            self.rx_drops.start(plan, self.generator)
            self.flow_index = {f.name: i for i, f in enumerate(plan.flows)}
            self.pins_told = set()
            self.rates = metrics.Rates()
            warnings = list(plan.warnings) + self._port_notes()
        self._changed("config")
        return warnings

    @staticmethod
    def _made_devices(plan: Plan, ports: Sequence[_native.Port], cpus: Sequence[int]) -> devices.Devices | None:
        if not plan.devices.ethernets:
            return None
        made = devices.Devices(plan.devices, ports, plan.port_names, cpus)
        made.apply()
        return made

    def _close_devices(self) -> None:
        """Stop the config's BGP speakers, undo its devices and stop its LLDP agents."""
        if self.bgp is not None:
            self.bgp.close()
        if self.devices is not None:
            self.devices.close()
        if self.lldp is not None:
            self.lldp.close()
        self.devices, self.lldp, self.bgp = None, None, None

    def _replanned(self, which: Sequence[int], document: dict[str, Any], macs: dict[devices.NextHop, str]
                   ) -> Plan:
        """The flows ``which`` of ``document`` planned again (the config's ports, devices and
        captures as they are), checked against the ports' MTUs."""
        sub = read(Config, {**document, "flows": [document["flows"][i] for i in which], "captures": []},
                   defer_headers=True)
        part = mapping.plan(sub, self.ports, self.capture_bytes, macs)
        mapping.check_frames(part, [_mtu(s) for s in part.serve_ports])
        return part

    def _swap(self, plan: Plan, which: Sequence[int], part: Plan) -> None:
        """Flows ``which`` of the running plan become ``part``'s (the engine has them already)."""
        flows, specs = list(plan.flows), list(plan.specs)
        for j, i in enumerate(which):
            flows[i], specs[i] = part.flows[j], part.specs[j]
        self.plan = dataclasses.replace(plan, flows=tuple(flows), specs=tuple(specs))

    def update_config(self, update: dict[str, Any]) -> list[str]:
        """``PATCH /config`` (``update_flows``): flows' rate and size changed in place, running or
        not: their counters, sequence and tag go on. Only the flows named are mapped again (a large
        config's update is as quick as a small one's); checked whole before any changes."""
        with self.lock:
            plan, g = self._ready()
            assert self.config is not None
            document, which = mapping.updated(self.config, update)
            part = self._replanned(which, document, _known(plan))
            try:
                g.update(which, part.specs)
            except ConfigError as e:
                raise mapping.otg_error(e) from None
            self.config = document
            self._swap(plan, which, part)
            return [_renumbered(w, which) for w in part.warnings if w.startswith("flows[")]

    def _port_notes(self) -> list[str]:
        assert self.generator is not None and self.plan is not None
        return [f"ports[{i}] {self.plan.port_names[i]}: {backend} ({notes})"
                for i, (_, backend, notes, _) in enumerate(self.generator.ports()) if "passed over" in notes]

    def flow_groups(self) -> list[FlowGroupCounts]:
        """Every flow of the config as a telemetry flow group, its counts since it last started
        (``--metrics-listen``; thread-safe: called on the endpoint's thread at each scrape)."""
        with self.lock:
            if self.plan is None or self.generator is None:
                return []
            stats = self.generator.flow_stats()
            return [FlowGroupCounts(f.name, f.tx, ",".join(f.rx), s.tx_frames, s.rx_frames, s.tx_bytes, s.rx_bytes)
                    for f, s in zip(self.plan.flows, stats)]

    def get_config(self) -> dict[str, Any]:
        with self.lock:
            return copy.deepcopy(self.config) if self.config is not None else {}

    def _ready(self) -> tuple[Plan, _native.Generator]:
        if self.plan is None or self.generator is None:
            raise StateError("no configuration: send one with set_config first")
        return self.plan, self.generator

    # -------------------------------------------------------------------------------------- control

    def control_state(self, req: ControlState, start: StartTags | None = None) -> list[str]:
        """``start``: a controller's: start the flows under its tags, or only count their frames sent
        under them by another agent."""
        if req.choice == "traffic":
            return self._traffic(req.flow_transmit(), "traffic.flow_transmit", start)
        capture = req.capture()
        if capture is not None:
            return self._capture_state(capture, "port.capture")
        link = req.link()
        if link is not None:
            return self._link_state(link, "port.link")
        if req.choice == "protocol" and req.protocol is not None:
            return self._protocol_state(req.protocol)
        raise refusal.refuse("control/state protocol", "protocol")

    def _protocol_state(self, req: StateProtocol) -> list[str]:
        """``control/state protocol``: all (start, stop: every BGP session), route (advertise,
        withdraw route ranges by name) and bgp.peers (up, down by name), carried out by BIRD."""
        if req.choice not in ("all", "route", "bgp"):
            raise refusal.refuse("control/state protocol", f"protocol.{req.choice}")
        member = {"all": req.all, "route": req.route, "bgp": req.bgp and req.bgp.peers}[req.choice]
        if member is None:
            raise ConfigError(f"protocol.{req.choice}" + (".peers" if req.choice == "bgp" else ""),
                              "is required: give its state" + ("" if req.choice == "all" else " and the names"))
        with self.lock:
            self._ready()
            speakers = self.bgp
            if req.all is not None:  # scripts start "all protocols" whether or not they have any
                if speakers is not None:
                    speakers.set_peers(range(len(speakers.plan.peers)), req.all.state == "start")
                return []
            if speakers is None:
                raise ConfigError(f"protocol.{req.choice}", "the config has no BGP peers: add devices[].bgp")
            if req.route is not None:
                ranges = speakers.ranges_named(req.route.names, "protocol.route.names")
                speakers.set_routes(ranges, req.route.state == "advertise")
            elif req.bgp is not None and req.bgp.peers is not None:
                peers = req.bgp.peers
                which = speakers.peers_named(peers.peer_names, "protocol.bgp.peers.peer_names")
                speakers.set_peers(which, peers.state == "up")
        return []

    def _link_state(self, link: StatePortLink, at: str) -> list[str]:
        """Ports' links set up or down (``ip link set``, in the port's namespace): a port set down
        keeps its flows running, their frames waiting in its ring until it is up again (the
        engine's back-pressure), so none is lost or counted twice; its time down is in
        ``/netrig/agents``' ``links``."""
        with self.lock:
            plan, _ = self._ready()
            for p in self._ports(link.port_names, f"{at}.port_names"):
                port = plan.serve_ports[p].port
                argv = ["ip", *(["-n", port.netns] if port.netns else []), "link", "set", "dev", port.ifname,
                        link.state]
                done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
                if done.returncode != 0:
                    raise NetrigError(f"{at}: port {plan.port_names[p]} ({port.ifname}): {' '.join(argv)} failed: "
                                      f"{done.stderr.strip() or done.returncode}")
                self.links.set(plan.port_names[p], link.state == "up")
        return []

    def _flows(self, names: Sequence[str], at: str) -> list[int]:
        if not names:
            return list(range(len(self.flow_index)))
        missing = [k for k, n in enumerate(names) if n not in self.flow_index]
        if missing:
            k = missing[0]
            raise ConfigError(f"{at}[{k}]", f"{names[k]!r} is not a flow of the config")
        return [self.flow_index[n] for n in names]

    def _traffic(self, ft: StateTrafficFlowTransmit, at: str, start: StartTags | None) -> list[str]:
        told: list[str] = []
        tags = start.tags if start is not None else None
        with self.lock:
            plan, g = self._ready()
            which = self._flows(ft.flow_names, f"{at}.flow_names")
            state = ft.state
            if tags is not None and (state != "start" or len(tags) != len(which)):
                raise ConfigError(headers.TAGS, f"{len(tags)} tags for {len(which)} flows: one per flow of a "
                                                "start's flow_names")
            if start is not None and start.receive:
                if tags is None or state != "start":
                    raise ConfigError(headers.RECEIVE, f"only with a start and {headers.TAGS}")
                self.rx_drops.start(plan, g)
                self.rx_drops.logged = True  # its controller's stop says them, in its own log
                g.expect(which, tags)
                self.rates.reset([plan.flows[i].name for i in which])
                return []
            if state == "start":
                plan = self._resolved(plan, g, which or list(range(len(plan.flows))))
                self.starting = which or list(range(len(plan.flows)))
                self._changed("starting")
                self.rx_drops.start(plan, g)
                started = g.start(which, tags)
                self.rates.reset([plan.flows[i].name for i in started])
                told = self._unpinned(g)
            elif state == "stop":
                g.stop(which)
                self._drain(g, plan, which)
                told = self._drop_warnings(plan, g)
            elif state == "pause":
                g.pause(which)
            else:
                g.resume(which)
        self._changed(state)
        return told

    def _drop_warnings(self, plan: Plan, g: _native.Generator) -> list[str]:
        """A warning for each port that dropped frames itself since the last start (a stop's answer),
        in the server's log once per start: the operator's to see whether or not a client reads them."""
        lossy = [(f.rx, f.tx) for f, st in zip(plan.flows, g.flow_stats())
                 if st.rx_frames < metrics.expected_rx(st, f.rx_tx_ratio)]
        told = drop_warnings(self.rx_drops.report(plan, g), {p for rx, _ in lossy for p in rx}, {tx for _, tx in lossy})
        if not self.rx_drops.logged:
            self.rx_drops.logged = True
            for w in told:
                api.log(f"warning: {w}")
        return told

    def _resolved(self, plan: Plan, g: _native.Generator, which: Sequence[int]) -> Plan:
        """Before a start: the next hops of the flows over devices resolved (the kernel's neighbour
        table; a flow whose next hop stays unresolved is refused, naming it) and flows whose
        destination MAC changed given the new one."""
        hops = [plan.flows[i].next_hop for i in which]
        if self.devices is None or not any(hops):
            return plan
        got = self.devices.resolve([h for h in hops if h is not None])
        for i, h in zip(which, hops):
            if h is not None and h not in got:
                e = plan.devices.ethernets[h[0]]
                raise StateError(f"flows[{i}] {plan.flows[i].name}: its next hop {h[1]} is unresolved on {e.name} "
                                 f"(port {plan.port_names[e.port]}): no ARP/ND answer in {devices.RESOLVE_S:g} s; "
                                 "check the DUT's address and link, or give the gateway_mac")
        changed = [i for i, h in zip(which, hops) if h is not None and got[h] != plan.flows[i].dst_mac]
        if changed:
            assert self.config is not None
            part = self._replanned(changed, self.config, {**_known(plan), **got})
            g.update(changed, part.specs)
            self._swap(plan, changed, part)
            assert self.plan is not None
            return self.plan
        return plan

    def _unpinned(self, g: _native.Generator) -> list[str]:
        """A warning for each worker whose CPU pin the kernel refused, once per config (the workers
        pin themselves when they start, before any traffic does)."""
        out = []
        for f in g.pin_failures():
            if f.worker not in self.pins_told:
                self.pins_told.add(f.worker)
                out.append(f"{f}: it runs where the scheduler puts it, and its rate may be lower and noisier")
        return out

    def _drain(self, g: _native.Generator, plan: Plan, which: Sequence[int]) -> None:
        """Wait until the stopped flows' frames arrived, or the drain time passed."""
        end = time.monotonic_ns() + self.drain_ns
        while time.monotonic_ns() < end:
            stats = g.flow_stats()
            if all(stats[i].rx_frames >= stats[i].tx_frames * plan.flows[i].rx_tx_ratio for i in which):
                return
            time.sleep(0.005)

    def _capture_state(self, c: StatePortCapture, at: str) -> list[str]:
        with self.lock:
            plan, g = self._ready()
            names = c.port_names or [cp.port for cp in plan.captures]
            ports = []
            for k, n in enumerate(names):
                if not any(cp.port == n for cp in plan.captures):
                    raise ConfigError(f"{at}.port_names[{k}]", f"{n!r} has no capture: add one to the config")
                ports.append(plan.port_names.index(n))
            for p in ports:
                g.set_capture(p, c.state == "start")
        return []

    def control_action(self, req: ControlAction) -> dict[str, Any]:
        """``control/action`` protocol ipv4/ipv6 ping: one echo request per request, from a device."""
        pings = req.pings()
        if pings is None:
            raise refusal.refuse("control/action", "choice")
        family, requests = pings
        with self.lock:
            self._ready()
            if self.devices is None:
                raise ConfigError(f"protocol.{family}.ping.requests", "the config has no devices to ping from: add "
                                                                      "devices with addresses")
            at = f"protocol.{family}.ping.requests"
            answers = [{"src_name": r.src_name, "dst_ip": r.dst_ip,
                        "result": self.devices.ping(int(family[-1]), r.src_name, r.dst_ip, f"{at}[{k}]")}
                       for k, r in enumerate(requests)]
        return {"warnings": [], "response": {"choice": "protocol", "protocol": {
            "choice": family, family: {"choice": "ping", "ping": {"responses": answers}}}}}

    # -------------------------------------------------------------------------------------- monitor

    def states(self, req: StatesRequest) -> dict[str, Any]:
        """``monitor/states``: the devices' IPv4 and IPv6 neighbours, LLDP's neighbours; no other
        protocols, so every other list is empty."""
        rows: list[dict[str, Any]] = []
        with self.lock:
            if req.choice == "lldp_neighbors" and self.lldp is not None:
                lr = req.lldp_neighbors
                rows = self.lldp.neighbours(lr.lldp_names if lr is not None else ())
            elif req.choice == "bgp_prefixes" and self.bgp is not None:
                rows = self._bgp_prefixes(self.bgp, req.bgp_prefixes or BgpPrefixStateRequest())
            elif req.choice in ("ipv4_neighbors", "ipv6_neighbors") and self.devices is not None:
                nr = req.ipv4_neighbors if req.choice == "ipv4_neighbors" else req.ipv6_neighbors
                rows = self.devices.neighbours(4 if req.choice == "ipv4_neighbors" else 6,
                                               nr.ethernet_names if nr is not None else ())
        return {"choice": req.choice, req.choice: rows}

    @staticmethod
    def _bgp_prefixes(speakers: bgp.Speakers, r: BgpPrefixStateRequest) -> list[dict[str, Any]]:
        filters: dict[int, list[tuple[Any, int | None]]] = {}
        groups: list[tuple[int, Sequence[BgpPrefixIpv4UnicastFilter | BgpPrefixIpv6UnicastFilter]]] = [
            (4, r.ipv4_unicast_filters), (6, r.ipv6_unicast_filters)]
        for family, group in groups:
            for k, f in enumerate(group):
                at = f"bgp_prefixes.ipv{family}_unicast_filters[{k}]"
                addrs: list[Any] = [devices.parse_ip(a, family, f"{at}.addresses") for a in f.addresses] or [None]
                filters.setdefault(family, []).extend((a, f.prefix_length) for a in addrs)
        return speakers.prefixes(r.bgp_peer_names, r.prefix_filters, "bgp_prefixes.bgp_peer_names", filters)

    def metrics(self, req: MetricsRequest) -> dict[str, Any]:
        with self.lock:
            plan, g = self._ready()
            if req.choice == "flow":
                f = req.flow or FlowMetricsRequest()
                which = self._flows(f.flow_names, "flow.flow_names")
                tagged = metrics.tagged_request(f.tagged_metrics, g.flow_tags)
                rows = metrics.flow_metrics(plan, g.flow_stats(which), which, self.rates, self.drain_ns,
                                            g.realtime_offset_ns, f.metric_names, tagged)
                if not self.rx_drops.logged and len(which) == len(plan.flows) and \
                        all(r.get("transmit") == "stopped" for r in rows):
                    self._drop_warnings(plan, g)  # every flow ended by itself: no stop will say it
                return {"choice": "flow_metrics", "flow_metrics": rows}
            if req.choice == "port":
                p = req.port or PortMetricsRequest()
                which = self._ports(p.port_names, "port.port_names")
                sending = self._sending(plan, g)
                rows = metrics.port_metrics(plan, g.port_stats(), which, self.rates, sending, p.column_names)
                return {"choice": "port_metrics", "port_metrics": rows}
            if req.choice == "lldp":
                names = req.lldp.lldp_names if req.lldp is not None else ()
                rows = self.lldp.metrics(names) if self.lldp is not None else []
                return {"choice": "lldp_metrics", "lldp_metrics": rows}
            if req.choice in ("bgpv4", "bgpv6"):
                b = req.bgpv4 if req.choice == "bgpv4" else req.bgpv6
                peers = b.peer_names if b is not None else ()
                at = f"{req.choice}.peer_names"
                rows = self.bgp.metrics(int(req.choice[-1]), peers, at) if self.bgp is not None else []
                return {"choice": f"{req.choice}_metrics", f"{req.choice}_metrics": rows}
        raise refusal.refuse("monitor/metrics (not port, flow or lldp)", "choice", f"{req.choice} metrics")

    def _ports(self, names: Sequence[str], at: str) -> list[int]:
        assert self.plan is not None
        if not names:
            return list(range(len(self.plan.port_names)))
        for k, n in enumerate(names):
            if n not in self.plan.port_names:
                raise ConfigError(f"{at}[{k}]", f"{n!r} is not a port of the config")
        return [self.plan.port_names.index(n) for n in names]

    def _sending(self, plan: Plan, g: _native.Generator) -> set[str]:
        """Ports with a flow running or paused."""
        return {plan.flows[i].tx for i, st in enumerate(g.flow_states()) if st in ("running", "paused")}

    def agents_report(self) -> dict[str, Any]:
        """``GET /netrig/agents``: every port's own receive drops since the last start (``ports``:
        netrig.otg.rxdrops); what OTG's flow metrics have no room for, per flow since its last start:
        its duplicated and reordered frames (``sequence``), its |IPDV| (``ipdv``) and, for the first
        256 flows, its latency distribution (``latency``), its sending window (``sending``); how each
        sending port kept its schedule (``pacing``); nothing before a config."""
        with self.lock:
            if self.plan is None or self.generator is None:
                return {}
            stats, hists = self.generator.flow_stats(), self.generator.flow_latency()
            sequence = [FlowSequence(name=f.name, duplicated=s.rx_duplicated, reordered=s.rx_reordered,
                                     frames_rx=s.rx_frames) for f, s in zip(self.plan.flows, stats)]
            ipdv = [FlowIpdv(name=f.name, sum_ns=s.ipdv_sum_ns, samples=s.ipdv_samples, max_ns=s.ipdv_max_ns,
                             buckets=tuple(h[1]) if h is not None else ())
                    for f, s, h in zip(self.plan.flows, stats, hists)]
            sending = [FlowSending(name=f.name, frames=s.tx_frames, first_ns=s.tx_first_ns, last_ns=s.tx_last_ns,
                                   untracked=s.tx_untracked) for f, s in zip(self.plan.flows, stats)]
            latency = [FlowLatency(name=f.name, buckets=tuple(h[0]))
                       for f, h in zip(self.plan.flows, hists) if h is not None]
            return {"ports": [dataclasses.asdict(d) for d in self.rx_drops.report(self.plan, self.generator)],
                    "sequence": [dataclasses.asdict(q) for q in sequence],
                    "latency": [dataclasses.asdict(q) for q in latency],
                    "ipdv": [dataclasses.asdict(q) for q in ipdv], "links": self.links.report(),
                    "pacing": [dataclasses.asdict(p) for p in port_pacing(self.plan, self.generator)],
                    "sending": [dataclasses.asdict(q) for q in sending]}

    def capture(self, req: CaptureRequest) -> bytes:
        if req.packets is not None and req.packets.choice == "slice":
            raise refusal.refuse("monitor/capture packets.slice", "packets.slice")
        with self.lock:
            plan, g = self._ready()
            name = req.port_name
            cp = next((c for c in plan.captures if c.port == name), None)
            if cp is None:
                raise ConfigError("port_name", f"{name!r} has no capture: add one to the config's captures")
            p = plan.port_names.index(name)
            if g.port_stats()[p].capturing:
                raise StateError(f"port_name: the capture on {name!r} is running: stop it first (control state "
                                 "port.capture stop)")
            return g.capture_file(p, cp.format == "pcapng", plan.serve_ports[p].ifname)

    # ---------------------------------------------------------------------------------------- end

    def _changed(self, what: str) -> None:
        """Tell the hook: ``config`` (a new one is set), ``starting`` (flows ``self.starting`` are
        about to start, their counters to be reset), ``start``, ``stop``, ``pause``, ``resume``,
        ``end`` (the config's generator is about to close)."""
        if self.on_change is not None and (what != "end" or self.generator is not None):
            self.on_change(what, self)

    def _close(self) -> None:
        if self.generator is not None:
            self.generator.close()
        self.generator = None
        self._close_devices()
        self.plan = None
        self.config = None

    def close(self) -> None:
        """Stop every flow and close the ports."""
        with self.lock:
            self._changed("end")
            self._close()
