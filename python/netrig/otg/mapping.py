"""An OTG ``Config`` (checked by :mod:`netrig.otg.schema`) → what the generator runs: a :class:`Plan`.

Ports are `netrig serve`'s own (:class:`ServePort`); the config's ports name them by location.
Every flow becomes one ``_native.GenFlowSpec`` (its headers from :mod:`netrig.otg.headers`), every
capture a ``_native.CaptureSpec``. Everything the mapping does not carry out is refused, naming
its path (:mod:`netrig.otg.refusal`); what it carries out differently is a warning in the plan.
Errors of the engine's own checks come back with the OTG path (``flows[2].size.fixed``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from netrig import _native
from netrig.errors import ConfigError
from netrig.model import MIN_FRAME_SIZE
from netrig.otg import headers, refusal
from netrig.otg.schema import schema
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
#: Top-level parts that are refused when present and not empty.
REFUSED_TOP = ("devices", "lags", "lldp", "events", "stateful_flows", "egress_only_tracking")


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


def _d(obj: dict, key: str, class_name: str) -> Any:
    """``obj[key]``, or the model's default."""
    v = obj.get(key)
    return v if v is not None else schema(class_name).default(key)


def _ports(cfg: dict, serve: Sequence[ServePort], warnings: list[str]) -> tuple[list[str], list[ServePort]]:
    by_name: dict[str, ServePort] = {}
    for s in serve:
        by_name.setdefault(s.name, s)
        by_name.setdefault(s.ifname, s)
    names: list[str] = []
    chosen: list[ServePort] = []
    for i, p in enumerate(cfg.get("ports", [])):
        if p["name"] in names:
            first = names.index(p["name"])
            raise ConfigError(f"ports[{i}].name", f"{p['name']!r} is already the name of ports[{first}]")
        loc = p.get("location")
        if loc is None:
            if i >= len(serve):
                raise ConfigError(f"ports[{i}].location", f"give a location: this server has {len(serve)} ports")
            s = serve[i]
            warnings.append(f"ports[{i}].location: none given: {s.name}, this server's port {i + 1}")
        elif loc in by_name:
            s = by_name[loc]
        else:
            raise ConfigError(f"ports[{i}].location", f"{loc!r} is not a port of this server: use one of "
                                                      f"{', '.join(x.name for x in serve)}")
        if s in chosen:
            raise ConfigError(f"ports[{i}].location", f"{s.name} is already ports[{chosen.index(s)}]: one port each")
        names.append(p["name"])
        chosen.append(s)
    return names, chosen


def _line_rates(cfg: dict, names: list[str], chosen: list[ServePort], warnings: list[str]) -> list[float | None]:
    rates: list[float | None] = [s.speed_bps for s in chosen]
    for i, l1 in enumerate(cfg.get("layer1", [])):
        for k, n in enumerate(l1["port_names"]):
            if n not in names:
                raise ConfigError(f"layer1[{i}].port_names[{k}]", f"{n!r} is not a port of the config")
            if "speed" in l1:
                rates[names.index(n)] = SPEEDS[l1["speed"]]
        if "speed" in l1:
            warnings.append(refusal.warning("layer1[].speed", f"layer1[{i}].speed"))
        for key in sorted(set(l1) - {"name", "port_names", "speed"}):
            warnings.append(refusal.warning("layer1[].*", f"layer1[{i}].{key}"))
    return rates


def _captures(cfg: dict, names: list[str], buffer_bytes: int) -> tuple[list[CapturePlan], list[_native.CaptureSpec]]:
    plans: list[CapturePlan] = []
    specs: list[_native.CaptureSpec] = []
    for i, c in enumerate(cfg.get("captures", [])):
        if c.get("filters"):
            raise refusal.refuse("captures[].filters", f"captures[{i}].filters")
        for k, n in enumerate(c["port_names"]):
            if n not in names:
                raise ConfigError(f"captures[{i}].port_names[{k}]", f"{n!r} is not a port of the config")
            if any(p.port == n for p in plans):
                raise ConfigError(f"captures[{i}].port_names[{k}]", f"port {n!r} has a capture already: one each")
            plans.append(CapturePlan(c["name"], n, _d(c, "format", "Capture")))
            specs.append(_native.CaptureSpec(names.index(n), c.get("packet_size") or 65535,
                                             _d(c, "overwrite", "Capture"), buffer_bytes))
    return plans, specs


def _options(cfg: dict, warnings: list[str]) -> None:
    opts = cfg.get("options") or {}
    po = opts.get("port_options") or {}
    for key, value in opts.items():
        if key != "port_options" and value:
            raise refusal.refuse("options", f"options.{key}")
    for key, value in po.items():
        if key == "location_preemption":
            warnings.append(refusal.warning("options.port_options.location_preemption", "options.port_options"))
        elif value not in (False, None, {}):
            raise refusal.refuse("options", f"options.port_options.{key}")


def plan(cfg: dict, serve: Sequence[ServePort], capture_bytes: int = 64 << 20) -> Plan:
    """The plan of a checked OTG config on ``serve``'s ports (errors name the config's paths)."""
    for key in REFUSED_TOP:
        if cfg.get(key):
            raise refusal.refuse(key, key)
    warnings: list[str] = []
    _options(cfg, warnings)
    names, chosen = _ports(cfg, serve, warnings)
    rates = _line_rates(cfg, names, chosen, warnings)
    cap_plans, cap_specs = _captures(cfg, names, capture_bytes)
    flows: list[FlowPlan] = []
    specs: list[_native.GenFlowSpec] = []
    seen: dict[str, int] = {}
    ctx = _FlowContext(names, chosen, rates, warnings)
    for i, f in enumerate(cfg.get("flows", [])):
        if f["name"] in seen:
            raise ConfigError(f"flows[{i}].name", f"{f['name']!r} is already the name of flows[{seen[f['name']]}]")
        seen[f["name"]] = i
        fp, spec = ctx.flow(i, f)
        flows.append(fp)
        specs.append(spec)
    return Plan(tuple(names), tuple(chosen), tuple(rates), tuple(flows), tuple(specs), tuple(cap_plans),
                tuple(cap_specs), tuple(warnings))


class _FlowContext:
    """What every flow's mapping needs: the ports and their line rates; collects warnings."""

    def __init__(self, names: list[str], chosen: list[ServePort], rates: list[float | None], warnings: list[str]):
        self.names, self.chosen, self.rates, self.warnings = names, chosen, rates, warnings
        self.index = {n: k for k, n in enumerate(names)}

    def port(self, name: str, path: str) -> int:
        k = self.index.get(name)
        if k is None:
            raise ConfigError(path, f"{name!r} is not a port of the config: use one of {', '.join(self.names)}")
        return k

    def flow(self, i: int, f: dict) -> tuple[FlowPlan, _native.GenFlowSpec]:
        at = f"flows[{i}]"
        if f.get("egress_packet"):
            raise refusal.refuse("flows[].egress_packet", f"{at}.egress_packet")
        tx, rx = self.endpoints(f["tx_rx"], f"{at}.tx_rx")
        packet = f.get("packet") or [{"choice": "ethernet"}]
        hs = [headers.header(h, f"{at}.packet[{k}]", self.warnings) for k, h in enumerate(packet)]
        size = _size(f.get("size") or {}, f"{at}.size")
        rate = self.rate(f.get("rate") or {}, tx, f"{at}.rate")
        duration, delay_s, gap = self.duration(f.get("duration") or {}, tx, f"{at}.duration")
        metrics = f.get("metrics") or {}
        fp = self.metrics(metrics, f["name"], tx, rx, f"{at}.metrics")
        latency = (metrics.get("latency") or {}).get("mode", "store_forward")
        payload = _payload(f.get("payload"))
        try:
            spec = _native.GenFlowSpec(f["name"], tx, rx, hs, size, rate, duration, payload=payload, delay_s=delay_s,
                                       gap_bytes=gap, latency=latency)
        except ConfigError as e:
            raise ConfigError(headers.otg_path(_ENGINE_FIELDS.get(e.field, e.field), at), e.message) from None
        return fp, spec

    def endpoints(self, txrx: dict, at: str) -> tuple[int, list[int]]:
        if txrx.get("choice", "port") != "port":
            raise refusal.refuse("flows[].tx_rx.device", f"{at}.device")
        p = txrx.get("port") or {}
        tx = self.port(p["tx_name"], f"{at}.port.tx_name")
        rx_names = list(p.get("rx_names") or [])
        if p.get("rx_name"):
            self.warnings.append(refusal.warning("flows[].tx_rx.port.rx_name", f"{at}.port.rx_name"))
            rx_names.append(p["rx_name"])
        return tx, [self.port(n, f"{at}.port.rx_names[{k}]") for k, n in enumerate(rx_names)]

    def rate(self, r: dict, tx: int, at: str) -> _native.RateSpec:
        choice = _d(r, "choice", "FlowRate")
        value = _d(r, choice, "FlowRate")
        if choice == "pps":
            return _native.RateSpec.pps(value)
        if choice in RATE_BITS:
            return _native.RateSpec.l1_bps(value * RATE_BITS[choice])
        if self.rates[tx] is None:
            raise ConfigError(f"{at}.percentage", f"port {self.names[tx]} ({self.chosen[tx].name}) has no link speed: "
                                                  "give it a layer1 speed, or the rate in pps or bps")
        if value <= 0:
            raise ConfigError(f"{at}.percentage", "0 % sends nothing: give a rate above 0")
        return _native.RateSpec.percent_line(value)

    def seconds_of(self, gap: dict, tx: int, at: str, cls: str) -> float:
        """A delay or an inter-burst gap (bytes, nanoseconds or microseconds) in seconds."""
        choice = _d(gap, "choice", cls)
        value = float(_d(gap, choice, cls))
        if choice == "nanoseconds":
            return value / 1e9
        if choice == "microseconds":
            return value / 1e6
        line = self.rates[tx]
        if line is None:
            if value <= MIN_GAP_BYTES:
                return 0.0  # at most the Ethernet gap: back to back
            raise ConfigError(f"{at}.bytes", f"a time in bytes needs the port's link speed ({self.chosen[tx].name} has "
                                             "none): give nanoseconds or microseconds, or the port a layer1 speed")
        return value * 8 / line

    def duration(self, d: dict, tx: int, at: str) -> tuple[_native.GenDurationSpec, float, int]:
        choice = _d(d, "choice", "FlowDuration")
        body = d.get(choice) or {}
        cls = {"fixed_packets": "FlowFixedPackets", "fixed_seconds": "FlowFixedSeconds", "burst": "FlowBurst",
               "continuous": "FlowContinuous"}[choice]
        gap = _d(body, "gap", cls)
        if gap != MIN_GAP_BYTES and self.rates[tx] is None:
            raise ConfigError(f"{at}.{choice}.gap", f"a gap of {gap} B needs the port's link speed "
                                                    f"({self.chosen[tx].name} has none): give the port a layer1 speed")
        delay_s = self.seconds_of(body.get("delay") or {}, tx, f"{at}.{choice}.delay", "FlowDelay")
        if choice == "fixed_packets":
            return _native.GenDurationSpec.frames(_d(body, "packets", cls)), delay_s, gap
        if choice == "fixed_seconds":
            seconds = float(_d(body, "seconds", cls))
            if seconds <= 0:
                raise ConfigError(f"{at}.fixed_seconds.seconds", "0 s sends nothing: give a time above 0")
            return _native.GenDurationSpec.seconds(seconds), delay_s, gap
        if choice == "burst":
            ibg = self.seconds_of(body.get("inter_burst_gap") or {}, tx, f"{at}.burst.inter_burst_gap",
                                  "FlowDurationInterBurstGap")
            return _native.GenDurationSpec.bursts(_d(body, "packets", cls), _d(body, "bursts", cls), ibg), 0.0, gap
        return _native.GenDurationSpec.continuous(), delay_s, gap

    def metrics(self, m: dict, name: str, tx: int, rx: list[int], at: str) -> FlowPlan:
        if (m.get("predefined_metric_tags") or {}).get("rx_name"):
            raise refusal.refuse("flows[].metrics.predefined_metric_tags", f"{at}.predefined_metric_tags")
        ratio_obj = m.get("rx_tx_ratio") or {}
        if _d(ratio_obj, "choice", "FlowRxTxRatio") == "rx_count":
            ratio = float(max(len(rx), 1))
        else:
            ratio = float(_d(ratio_obj, "value", "FlowRxTxRatio"))
            if ratio <= 0:
                raise ConfigError(f"{at}.rx_tx_ratio.value", "must be above 0: the frames expected per frame sent")
        lat = m.get("latency") or {}
        return FlowPlan(name, self.names[tx], tuple(self.names[k] for k in rx), ratio, bool(m.get("loss")),
                        bool(m.get("timestamps")), bool(lat.get("enable")))


#: The engine's fields of a flow → the OTG path inside the flow.
_ENGINE_FIELDS = {"frame_size": "size", "delay": "duration"}


def _size(s: dict, at: str) -> _native.FrameSizeSpec:
    choice = _d(s, "choice", "FlowSize")
    try:
        if choice == "fixed":
            return _native.FrameSizeSpec.fixed(_d(s, "fixed", "FlowSize"))
        body = s.get(choice) or {}
        if choice == "increment":
            c = "FlowSizeIncrement"
            return _native.FrameSizeSpec.increment(_d(body, "start", c), _d(body, "end", c), _d(body, "step", c))
        if choice == "random":
            return _native.FrameSizeSpec.random(_d(body, "min", "FlowSizeRandom"), _d(body, "max", "FlowSizeRandom"))
        return _weight_pairs(body, at)
    except ConfigError as e:
        if e.field.startswith(at):
            raise
        raise ConfigError(f"{at}.{choice}", e.message) from None


def _weight_pairs(w: dict, at: str) -> _native.FrameSizeSpec:
    if _d(w, "choice", "FlowSizeWeightPairs") == "custom":
        pairs = [(p.get("size", 64), float(p.get("weight", 1.0))) for p in w.get("custom", [])]
    else:
        name = _d(w, "predefined", "FlowSizeWeightPairs")
        pairs = list(PRESETS[name])
        if min(s for s, _ in pairs) < MIN_FRAME_SIZE:
            raise refusal.refuse("flows[].size.weight_pairs.predefined", f"{at}.weight_pairs.predefined", name)
    if not pairs or min(x for _, x in pairs) < 0 or sum(x for _, x in pairs) <= 0:
        raise ConfigError(f"{at}.weight_pairs", "give sizes with weights >= 0, at least one above 0")
    scale = 100.0 if sum(x for _, x in pairs) * 100 <= 65536 else 65536 / sum(x for _, x in pairs)
    return _native.FrameSizeSpec.weighted([(s, round(x * scale)) for s, x in pairs])


def _payload(p: dict | None) -> _native.PayloadSpec | None:
    if not p:
        return None
    choice = _d(p, "choice", "FlowPayload")
    if choice != "fixed":
        return _native.PayloadSpec(choice)
    f = p.get("fixed") or {}
    text = _d(f, "pattern", "FlowPayloadFixed")
    text = text[2:] if text[:2] in ("0x", "0X") else text
    return _native.PayloadSpec("fixed", bytes.fromhex(text if len(text) % 2 == 0 else "0" + text),
                               _d(f, "repeat", "FlowPayloadFixed"))
