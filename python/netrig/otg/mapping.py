"""An OTG ``Config`` (read by :mod:`netrig.otg.objects`) → what the generator runs: a :class:`Plan`.

Ports are `netrig serve`'s own (:class:`ServePort`); the config's ports name them by location.
Every flow becomes one ``_native.GenFlowSpec`` (its headers from :mod:`netrig.otg.headers`), every
capture a ``_native.CaptureSpec``. Everything the mapping does not carry out is refused, naming
its path (:mod:`netrig.otg.refusal`); what it carries out differently is a warning in the plan.
Errors of the engine's own checks come back with the OTG path (``flows[2].size.fixed``).
"""
from __future__ import annotations

import copy
import dataclasses
import re
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from netrig import _native
from netrig.errors import ConfigError
from netrig.model import MIN_FRAME_SIZE, largest_frame
from netrig.otg import bgp, capfilter, devices, headers, lldp, refusal, schema, tags
from netrig.otg.objects import (
    Config,
    Flow,
    FlowBurst,
    FlowContinuous,
    FlowDuration,
    FlowFixedPackets,
    FlowFixedSeconds,
    FlowMetrics,
    FlowPayload,
    FlowRate,
    FlowSize,
    FlowSizeIncrement,
    FlowSizeRandom,
    FlowSizeWeightPairs,
    FlowTxRx,
    Time,
    default,
)
from netrig.trial import Port

#: OTG's predefined frame-size distributions (the model's description of ``weight_pairs``):
#: ``imix`` is netrig's simple IMIX.
PRESETS: dict[str, tuple[tuple[int, float], ...]] = {
    "imix": tuple((s, float(w)) for s, w in _native.FRAME_SIZE_MIXES["simple-imix"]),
    "ipsec_imix": ((90, 58.67), (92, 2.0), (594, 23.66), (1418, 15.67)),
    "ipv6_imix": ((60, 58.67), (496, 2.0), (594, 23.66), (1518, 15.67)),
    "standard_imix": ((58, 58.67), (62, 2.0), (594, 23.66), (1518, 15.67)),
    "tcp_imix": ((90, 58.67), (92, 2.0), (594, 23.66), (1518, 15.67)),
}
#: OTG's layer-1 speeds, bit/s.
SPEEDS: dict[str, float] = {
    "speed_10_fd_mbps": 1e7, "speed_10_hd_mbps": 1e7, "speed_100_fd_mbps": 1e8, "speed_100_hd_mbps": 1e8,
    "speed_1_gbps": 1e9, "speed_10_gbps": 1e10, "speed_25_gbps": 2.5e10, "speed_40_gbps": 4e10,
    "speed_50_gbps": 5e10, "speed_100_gbps": 1e11, "speed_200_gbps": 2e11, "speed_400_gbps": 4e11,
    "speed_800_gbps": 8e11,
}
#: Rate units of the model: bit/s multipliers (layer 1).
RATE_BITS = {"bps": 1.0, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9}
#: The Ethernet minimum gap, bytes (the model's default gap).
MIN_GAP_BYTES = 12


@dataclass(frozen=True)
class ServePort:
    """One ``netrig serve --port IF[@NS]``: its name as given, and the engine's port spec."""

    name: str
    port: Port
    #: The interface's link speed, bit/s (None: it reports none, as veth).
    speed_bps: float | None

    @property
    def ifname(self) -> str:
        return self.port.ifname


@dataclass(frozen=True)
class FlowPlan:
    """What the metrics need to know of a flow besides its counts."""

    name: str
    tx: str
    rx: tuple[str, ...]
    #: Frames expected across the receiving ports per frame sent.
    rx_tx_ratio: float
    loss: bool
    timestamps: bool
    latency: bool
    #: The OTG path of its largest frame size (``size.fixed``, ``size.increment.end`` …), the size
    #: (incl. FCS) and the 802.1Q tags its frames carry: what the sending port's MTU is checked against.
    size_path: str = "size"
    max_size: int = 0
    vlan_tags: int = 0
    #: A flow over devices whose ``ethernet.dst`` is resolved: its next hop and the MAC its frames
    #: carry now (``None``: none known yet, all zeros).
    next_hop: devices.NextHop | None = None
    dst_mac: str | None = None
    #: Its metric tags (None: none): the engine counts its frames per index modulo their period.
    tags: tags.FlowTags | None = None


@dataclass(frozen=True)
class CapturePlan:
    name: str
    port: str
    format: str


@dataclass(frozen=True)
class Plan:
    """A config ready for the generator: ports in the config's order, flows, captures."""

    port_names: tuple[str, ...]
    serve_ports: tuple[ServePort, ...]
    line_rates: tuple[float | None, ...]
    flows: tuple[FlowPlan, ...]
    specs: tuple[_native.GenFlowSpec, ...]
    captures: tuple[CapturePlan, ...]
    capture_specs: tuple[_native.CaptureSpec, ...]
    warnings: tuple[str, ...]
    devices: devices.DevicePlan = devices.DevicePlan()
    lldp: tuple[lldp.Agent, ...] = ()
    bgp: bgp.BgpPlan = bgp.BgpPlan()


def refuse_unsupported(cfg: Config) -> None:
    """Refuse what no part of netrig serve carries out: devices, LAGs, LLDP, events, stateful flows,
    egress-only tracking (a controller's check too, before it splits a config)."""
    for key, value in cfg.others.items():
        if value:
            raise refusal.refuse(key, key)


def _ports(cfg: Config, serve: Sequence[ServePort], warnings: list[str]) -> tuple[list[str], list[ServePort]]:
    by_name: dict[str, ServePort] = {}
    for s in serve:
        by_name.setdefault(s.name, s)
        by_name.setdefault(s.ifname, s)
    names: list[str] = []
    chosen: list[ServePort] = []
    for i, p in enumerate(cfg.ports):
        if p.name in names:
            raise ConfigError(f"ports[{i}].name", f"{p.name!r} is already the name of ports[{names.index(p.name)}]")
        if p.location is None:
            if i >= len(serve):
                raise ConfigError(f"ports[{i}].location", f"give a location: this server has {len(serve)} ports")
            s = serve[i]
            warnings.append(f"ports[{i}].location: none given: {s.name}, this server's port {i + 1}")
        elif p.location in by_name:
            s = by_name[p.location]
        else:
            raise ConfigError(f"ports[{i}].location", f"{p.location!r} is not a port of this server: use one of "
                                                      f"{', '.join(x.name for x in serve)}")
        if s in chosen:
            raise ConfigError(f"ports[{i}].location", f"{s.name} is already ports[{chosen.index(s)}]: one port each")
        names.append(p.name)
        chosen.append(s)
    return names, chosen


def _line_rates(cfg: Config, names: list[str], chosen: list[ServePort], warnings: list[str]) -> list[float | None]:
    rates: list[float | None] = [s.speed_bps for s in chosen]
    for i, l1 in enumerate(cfg.layer1):
        for k, n in enumerate(l1.port_names):
            if n not in names:
                raise ConfigError(f"layer1[{i}].port_names[{k}]", f"{n!r} is not a port of the config")
            if l1.speed is not None:
                rates[names.index(n)] = SPEEDS[l1.speed]
        if l1.speed is not None:
            warnings.append(refusal.warning("layer1[].speed", f"layer1[{i}].speed"))
        for key in sorted(l1.others):
            warnings.append(refusal.warning("layer1[].*", f"layer1[{i}].{key}"))
    return rates


def _captures(cfg: Config, names: list[str], buffer_bytes: int) -> tuple[list[CapturePlan], list[_native.CaptureSpec]]:
    plans: list[CapturePlan] = []
    specs: list[_native.CaptureSpec] = []
    for i, c in enumerate(cfg.captures):
        filt = [(t.at, t.value, t.care, t.negate) for t in capfilter.terms(c.filters, f"captures[{i}].filters")]
        for k, n in enumerate(c.port_names):
            if n not in names:
                raise ConfigError(f"captures[{i}].port_names[{k}]", f"{n!r} is not a port of the config")
            if any(p.port == n for p in plans):
                raise ConfigError(f"captures[{i}].port_names[{k}]", f"port {n!r} has a capture already: one each")
            plans.append(CapturePlan(c.name, n, c.format))
            specs.append(_native.CaptureSpec(names.index(n), c.packet_size or 65535, c.overwrite, buffer_bytes, filt))
    return plans, specs


def _options(cfg: Config, warnings: list[str]) -> None:
    if cfg.options is None:
        return
    for key, value in cfg.options.others.items():
        if value:
            raise refusal.refuse("options", f"options.{key}")
    po = cfg.options.port_options
    if po is None:
        return
    if po.location_preemption is not None:
        warnings.append(refusal.warning("options.port_options.location_preemption", "options.port_options"))
    for key, value in po.others.items():
        if value not in (False, None, {}):
            raise refusal.refuse("options", f"options.port_options.{key}")


def plan(cfg: Config, serve: Sequence[ServePort], capture_bytes: int = 64 << 20,
         macs: typing.Mapping[devices.NextHop, str] | None = None) -> Plan:
    """The plan of a config on ``serve``'s ports (errors name the config's paths); ``macs``: the
    next hops of flows over devices known resolved."""
    refuse_unsupported(cfg)
    warnings: list[str] = []
    _options(cfg, warnings)
    names, chosen = _ports(cfg, serve, warnings)
    rates = _line_rates(cfg, names, chosen, warnings)
    cap_plans, cap_specs = _captures(cfg, names, capture_bytes)
    dplan = devices.plan(cfg.devices, names)
    bplan = bgp.plan(cfg.devices, dplan)
    dplan = dataclasses.replace(dplan, names={**dplan.names, **bplan.endpoints}, tcp_ports=bplan.tcp_ports)
    lplan = lldp.plan(cfg.lldp, names)
    flows: list[FlowPlan] = []
    specs: list[_native.GenFlowSpec] = []
    seen: dict[str, int] = {}
    ctx = _FlowContext(names, chosen, rates, warnings, dplan, macs or {})
    for i, f in enumerate(cfg.flows):
        if f.name in seen:
            raise ConfigError(f"flows[{i}].name", f"{f.name!r} is already the name of flows[{seen[f.name]}]")
        seen[f.name] = i
        fp, spec = ctx.flow(i, f)
        flows.append(fp)
        specs.append(spec)
    return Plan(tuple(names), tuple(chosen), tuple(rates), tuple(flows), tuple(specs), tuple(cap_plans),
                tuple(cap_specs), tuple(warnings), dplan, lplan, bplan)


#: A flow's header stack when it gives none.
_NO_PACKET = ({"choice": "ethernet"},)


class _FlowContext:
    """What every flow's mapping needs: the ports and their line rates; collects warnings."""

    def __init__(self, names: list[str], chosen: list[ServePort], rates: list[float | None], warnings: list[str],
                 dplan: devices.DevicePlan, macs: typing.Mapping[devices.NextHop, str]):
        self.names, self.chosen, self.rates, self.warnings = names, chosen, rates, warnings
        self.index = {n: k for k, n in enumerate(names)}
        self.devices, self.macs = dplan, macs

    def _no_port(self, name: str, path: str) -> ConfigError:
        return ConfigError(path, f"{name!r} is not a port of the config: use one of {', '.join(self.names)}")

    def flow(self, i: int, f: Flow) -> tuple[FlowPlan, _native.GenFlowSpec]:
        """Flow ``i``'s plan and spec (each path of an error built only when one is raised: a
        4096-flow config maps in a few hundred milliseconds)."""
        at = f"flows[{i}]"
        if f.egress_packet:
            raise refusal.refuse("flows[].egress_packet", f"{at}.egress_packet")
        packet: Sequence[dict[str, Any]] = f.packet or _NO_PACKET
        hop, mac = None, None
        if f.tx_rx.choice == "device":
            tx, rx, packet, hop, mac = self.over_devices(f.tx_rx, packet, at)
        else:
            tx, rx = self.endpoints(f.tx_rx, at)
        packet, ftags = tags.split(packet, at, self.warnings)
        hs = [headers.header(h, at, k, self.warnings) for k, h in enumerate(packet)]
        size = _size(f.size, at)
        rate = self.rate(f.rate, tx, at)
        duration, delay_s, gap = self.duration(f.duration, tx, at)
        fp = self.metrics(f.metrics, f.name, tx, rx, at, size_path=_LARGEST[f.size.choice], max_size=size.max_size,
                          vlan_tags=sum(h.get("choice") == "vlan" for h in f.packet), next_hop=hop, dst_mac=mac,
                          tags=ftags)
        payload = _payload(f.payload)
        try:
            spec = _native.GenFlowSpec(f.name, tx, rx, hs, size, rate, duration, payload=payload, delay_s=delay_s,
                                       gap_bytes=gap, latency=f.metrics.latency.mode,
                                       tag_period=ftags.period if ftags else 0)
        except ConfigError as e:
            raise ConfigError(headers.otg_path(_ENGINE_FIELDS.get(e.field, e.field), at), e.message) from None
        if spec.untracked_sizes and ftags:
            lo, hi = min(spec.untracked_sizes), max(spec.untracked_sizes)
            raise ConfigError(f"{at}.size", f"{lo}–{hi} B frames have no room for the signature after the headers, "
                                            "and a tagged flow's receiver tells a frame's tags by it: make the frames "
                                            "larger or leave the metric tags out")
        if spec.untracked_sizes:
            self.warnings.append(_untracked(spec.untracked_sizes, size.max_size, at))
        return fp, spec

    def over_devices(self, txrx: FlowTxRx, packet: Sequence[dict[str, Any]], at: str
                     ) -> tuple[int, list[int], list[dict[str, Any]], devices.NextHop | None, str | None]:
        """A flow over devices: its ports, its headers as the devices fill them in, and the next hop
        to resolve (with the MAC known for it now, if any)."""
        r = txrx.device
        if r is None:
            raise ConfigError(f"{at}.tx_rx.device", "is required: give its tx_names and rx_names")
        if r.bidirectional:
            raise refusal.refuse("flows[].tx_rx.device.bidirectional", f"{at}.tx_rx.device.bidirectional")
        e = devices.ends(self.devices, r.tx_names, r.rx_names, f"{at}.tx_rx.device")
        eths = self.devices.ethernets
        fixed = devices.fixed_mac(self.devices, e)
        mac = fixed or (self.macs.get(e.next_hop) if e.next_hop is not None else None)
        out, filled = devices.packet_of(self.devices, packet, e, mac)
        hop = e.next_hop if filled and fixed is None else None
        return eths[e.tx].port, list(dict.fromkeys(eths[k].port for k in e.rx)), out, hop, mac

    def endpoints(self, txrx: FlowTxRx, at: str) -> tuple[int, list[int]]:
        p = txrx.port
        if p is None:
            raise ConfigError(f"{at}.tx_rx.port", "is required: give its tx_name and rx_names")
        tx = self.index.get(p.tx_name)
        if tx is None:
            raise self._no_port(p.tx_name, f"{at}.tx_rx.port.tx_name")
        if p.rx_name:
            self.warnings.append(refusal.warning("flows[].tx_rx.port.rx_name", f"{at}.tx_rx.port.rx_name"))
        rx = [self.index.get(n) for n in p.receivers]
        if None in rx:
            k = rx.index(None)
            raise self._no_port(p.receivers[k], f"{at}.tx_rx.port.rx_names[{k}]")
        return tx, typing.cast(list[int], rx)

    def rate(self, r: FlowRate, tx: int, at: str) -> _native.RateSpec:
        try:
            return self._rate(r, tx, at)
        except ConfigError as e:
            if e.field.startswith(at):
                raise
            raise ConfigError(f"{at}.rate.{r.choice}", e.message) from None

    def _rate(self, r: FlowRate, tx: int, at: str) -> _native.RateSpec:
        if r.choice == "pps":
            return _native.RateSpec.pps(r.pps)
        bits = {"bps": r.bps, "kbps": r.kbps, "mbps": r.mbps, "gbps": r.gbps}
        if r.choice in bits:
            return _native.RateSpec.l1_bps(bits[r.choice] * RATE_BITS[r.choice])
        if self.rates[tx] is None:
            raise ConfigError(f"{at}.rate.percentage", f"port {self.names[tx]} ({self.chosen[tx].name}) has no link "
                                                       "speed: give it a layer1 speed, or the rate in pps or bps")
        if r.percentage <= 0:
            raise ConfigError(f"{at}.rate.percentage", "0 % sends nothing: give a rate above 0")
        return _native.RateSpec.percent_line(r.percentage)

    def seconds_of(self, gap: Time, tx: int, at: str, choice: str, what: str) -> float:
        """A delay or an inter-burst gap (bytes, nanoseconds or microseconds: ``what`` of the flow
        ``at``'s duration ``choice``) in seconds."""
        if gap.choice == "nanoseconds":
            return float(gap.nanoseconds) / 1e9
        if gap.choice == "microseconds":
            return float(gap.microseconds) / 1e6
        value = float(gap.bytes)
        line = self.rates[tx]
        if line is None:
            if value <= MIN_GAP_BYTES:
                return 0.0  # at most the Ethernet gap: back to back
            raise ConfigError(f"{at}.duration.{choice}.{what}.bytes", f"a time in bytes needs the port's link speed "
                              f"({self.chosen[tx].name} has none): give nanoseconds or microseconds, or the port a "
                              "layer1 speed")
        return value * 8 / line

    def duration(self, d: FlowDuration, tx: int, at: str) -> tuple[_native.GenDurationSpec, float, int]:
        c = d.choice
        if c == "fixed_packets":
            fp = d.fixed_packets or default(FlowFixedPackets)
            gap, delay_s = self._gap(fp.gap, tx, at, c), self.seconds_of(fp.delay, tx, at, c, "delay")
            return _native.GenDurationSpec.frames(fp.packets), delay_s, gap
        if c == "fixed_seconds":
            fs = d.fixed_seconds or default(FlowFixedSeconds)
            gap, delay_s = self._gap(fs.gap, tx, at, c), self.seconds_of(fs.delay, tx, at, c, "delay")
            if fs.seconds <= 0:
                raise ConfigError(f"{at}.duration.{c}.seconds", "0 s sends nothing: give a time above 0")
            return _native.GenDurationSpec.seconds(float(fs.seconds)), delay_s, gap
        if c == "burst":
            b = d.burst or default(FlowBurst)
            gap = self._gap(b.gap, tx, at, c)
            ibg = self.seconds_of(b.inter_burst_gap, tx, at, c, "inter_burst_gap")
            return _native.GenDurationSpec.bursts(b.packets, b.bursts, ibg), 0.0, gap
        cont = d.continuous or default(FlowContinuous)
        gap, delay_s = self._gap(cont.gap, tx, at, c), self.seconds_of(cont.delay, tx, at, c, "delay")
        return _native.GenDurationSpec.continuous(), delay_s, gap

    def _gap(self, gap: int, tx: int, at: str, choice: str) -> int:
        if gap != MIN_GAP_BYTES and self.rates[tx] is None:
            raise ConfigError(f"{at}.duration.{choice}.gap", f"a gap of {gap} B needs the port's link speed "
                              f"({self.chosen[tx].name} has none): give the port a layer1 speed")
        return gap

    def metrics(self, m: FlowMetrics, name: str, tx: int, rx: list[int], at: str, **more: Any) -> FlowPlan:
        """The flow's plan: its metrics, its ports, and ``more`` of its fields."""
        if m.predefined_metric_tags is not None and m.predefined_metric_tags.rx_name:
            raise refusal.refuse("flows[].metrics.predefined_metric_tags", f"{at}.metrics.predefined_metric_tags")
        ratio = m.ratio(len(rx))
        if ratio <= 0:
            raise ConfigError(f"{at}.metrics.rx_tx_ratio.value", "must be above 0: the frames expected per frame sent")
        return FlowPlan(name, self.names[tx], tuple(self.names[k] for k in rx), ratio, m.loss, m.timestamps,
                        m.latency.enable, **more)


#: The engine's fields of a flow → the OTG path inside the flow.
_ENGINE_FIELDS = {"frame_size": "size", "delay": "duration"}
#: A flow's size choice → the OTG path of its largest size.
_LARGEST = {"fixed": "size.fixed", "increment": "size.increment.end", "random": "size.random.max",
            "weight_pairs": "size.weight_pairs"}
_FLOW_FIELD = re.compile(r"^(flows\[\d+\])\.(\w+)(.*)$")


def updated(document: dict[str, Any], update: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
    """``PATCH /config`` (OTG ``update_flows``): the config ``document`` with the flows of ``update``
    (a ``ConfigUpdate``, checked against the model) given their new ``property_names`` (rate, size),
    and the indices of those flows. Errors name the update's paths."""
    upd = schema.check("ConfigUpdate", update, "", defer_headers=True)
    if upd.get("choice") != "flows":
        raise ConfigError("choice", "netrig serve updates flows only (it has no protocols): choice flows")
    fu = upd["flows"]
    index = {f["name"]: i for i, f in enumerate(document.get("flows", ()))}
    new = copy.deepcopy(document)
    which: list[int] = []
    for k, f in enumerate(fu["flows"]):
        at = f"flows.flows[{k}]"
        i = index.get(f.get("name"))
        if i is None:
            raise ConfigError(f"{at}.name", f"{f.get('name')!r} is not a flow of the config: update its flows by name")
        if i in which:
            raise ConfigError(f"{at}.name", f"{f['name']!r} is updated twice: name each flow once")
        for prop in fu["property_names"]:
            if prop not in f:
                raise ConfigError(f"{at}.{prop}", "is missing: property_names names it, so give its new value")
            new["flows"][i][prop] = copy.deepcopy(f[prop])
        which.append(i)
    return new, which


def check_frames(plan: Plan, mtus: Sequence[int | None]) -> None:
    """Every flow's largest frame against the MTU of the port that sends it (``mtus``: the plan's
    ports', ``None`` where it could not be read: the port's opening says why), before anything
    changes: the engine checks it too, but only as the ports open, when the old config is gone."""
    for i, f in enumerate(plan.flows):
        mtu = mtus[plan.port_names.index(f.tx)]
        if mtu is not None and f.max_size > largest_frame(mtu, f.vlan_tags):
            raise ConfigError(f"flows[{i}].{f.size_path}", f"{f.max_size} B is above the largest frame port {f.tx} "
                              f"sends, {largest_frame(mtu, f.vlan_tags)} B (its MTU {mtu} + 18, + 4 per VLAN tag): "
                              "raise the MTU or use smaller frames")


def otg_error(e: ConfigError) -> ConfigError:
    """An engine error naming a flow's field (``flows[0].frame_size``) as the config's OTG path."""
    m = _FLOW_FIELD.match(e.field)
    if m is None or m.group(2) not in _ENGINE_FIELDS:
        return e
    return ConfigError(f"{m.group(1)}.{_ENGINE_FIELDS[m.group(2)]}{m.group(3)}", e.message)


def untracked_sizes(f: Flow, at: str) -> list[int]:
    """The sizes (with FCS) of flow ``f`` (the config's ``at``) without room for the signature after
    its headers; none for a flow the agents will refuse (they name the error)."""
    try:
        packet, _ = tags.split(f.packet or _NO_PACKET, at, [])
        hs = [headers.header(h, at, k, []) for k, h in enumerate(packet)]
        spec = _native.GenFlowSpec(f.name, 0, [0], hs, _size(f.size, at), _native.RateSpec.pps(1.0),
                                   _native.GenDurationSpec.continuous(), payload=_payload(f.payload))
    except ConfigError:
        return []
    return spec.untracked_sizes


def _untracked(sizes: Sequence[int], max_size: int, at: str) -> str:
    """The warning of a flow some of whose frames (``sizes``, with FCS) have no room for the
    signature: they are sent and counted per port, never per flow."""
    lo, hi = min(sizes), max(sizes)
    which = f"{lo} B" if lo == hi else f"{lo}–{hi} B"
    if hi >= max_size:
        return (f"{at}.size: no frame of this flow ({which}) has room for netrig's 18-byte signature after its "
                "headers: they are sent and counted in the ports' metrics, but the flow's frames_rx, loss and "
                "latency are not measured")
    return (f"{at}.size: its frames of {which} have no room for netrig's 18-byte signature after their headers: "
            "they are sent and counted in the ports' metrics, not the flow's; its frames_rx, loss and latency are "
            "over its larger frames")


def _size(s: FlowSize, flow_path: str) -> _native.FrameSizeSpec:
    try:
        if s.choice == "fixed":
            return _native.FrameSizeSpec.fixed(s.fixed)
        if s.choice == "increment":
            inc = s.increment or default(FlowSizeIncrement)
            return _native.FrameSizeSpec.increment(inc.start, inc.end, inc.step)
        if s.choice == "random":
            r = s.random or default(FlowSizeRandom)
            return _native.FrameSizeSpec.random(r.min, r.max)
        return _weight_pairs(s.weight_pairs or default(FlowSizeWeightPairs), f"{flow_path}.size")
    except ConfigError as e:
        at = f"{flow_path}.size"
        if e.field.startswith(at):
            raise
        raise ConfigError(f"{at}.{s.choice}", e.message) from None


def _weight_pairs(w: FlowSizeWeightPairs, at: str) -> _native.FrameSizeSpec:
    if w.choice == "custom":
        pairs = [(p.size, float(p.weight)) for p in w.custom]
    else:
        pairs = list(PRESETS[w.predefined])
        if min(s for s, _ in pairs) < MIN_FRAME_SIZE:
            raise refusal.refuse("flows[].size.weight_pairs.predefined", f"{at}.weight_pairs.predefined", w.predefined)
    if not pairs or min(x for _, x in pairs) < 0 or sum(x for _, x in pairs) <= 0:
        raise ConfigError(f"{at}.weight_pairs", "give sizes with weights >= 0, at least one above 0")
    scale = 100.0 if sum(x for _, x in pairs) * 100 <= 65536 else 65536 / sum(x for _, x in pairs)
    return _native.FrameSizeSpec.weighted([(s, round(x * scale)) for s, x in pairs])


def _payload(p: FlowPayload | None) -> _native.PayloadSpec | None:
    if p is None:
        return None
    if p.choice != "fixed":
        return _native.PayloadSpec(p.choice)
    text = p.fixed.pattern
    text = text[2:] if text[:2] in ("0x", "0X") else text
    return _native.PayloadSpec("fixed", bytes.fromhex(text if len(text) % 2 == 0 else "0" + text), p.fixed.repeat)
