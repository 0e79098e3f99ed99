"""OTG requests as frozen dataclasses: a config, and the control, metrics, capture and states
requests — each class the model's class of the same name, with the properties netrig reads
(``others``: the rest, as given: what netrig refuses or warns about by name).

:func:`read` checks a request's JSON against the model (:mod:`netrig.otg.schema`: an error names
the path) and reads it into its class, once, at the edge: the HTTP server parses every request
here and hands the service (or a controller) these objects. A field without a default takes the
model's default when the request leaves it out (from snappi's tables, never restated; a left-out
object is the class with every default); a field with one keeps it (``None``: not given). A flow's
header stack (``Flow.packet``) stays JSON: the engine's converters read it
(:mod:`netrig.otg.headers`). ``tests/otg/test_objects.py`` holds every class equal to the model's.
"""
from __future__ import annotations

import typing
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeVar

from netrig.errors import ConfigError
from netrig.otg import schema
from netrig.otgclient.typed import Reader

T = TypeVar("T")

#: Reads what :func:`read` checked against the model first.
_READ = Reader(defaults=lambda name: schema.schema(name).defaults, checked=True)


def read(cls: type[T], body: Any, defer_headers: bool = False) -> T:
    """``body`` checked against the model class of ``cls``'s name and read into ``cls``; with
    ``defer_headers`` a flow's headers are left to their mapping (:func:`netrig.otg.schema.check`)."""
    schema.check(cls.__name__, body, "", defer_headers)
    return _READ(cls, body)


@cache
def default(cls: type[T]) -> T:
    """``cls`` with every default of the model: what an object left out means."""
    return _READ(cls, {})


# ------------------------------------------------------------------------------------------ config

@dataclass(frozen=True, slots=True, kw_only=True)
class Port:
    name: str
    location: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowPort:
    tx_name: str
    #: Deprecated in OTG: read as ``rx_names``.
    rx_name: str | None = None
    rx_names: tuple[str, ...] = ()

    @property
    def receivers(self) -> tuple[str, ...]:
        """Every receiving port named (``rx_names``, then the deprecated ``rx_name``)."""
        return self.rx_names + ((self.rx_name,) if self.rx_name else ())


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowRouter:
    """A flow over devices: its endpoints are devices' Ethernet, IPv4 or IPv6 objects, by name."""

    mode: str
    tx_names: tuple[str, ...]
    rx_names: tuple[str, ...]
    bidirectional: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowTxRx:
    choice: str
    port: FlowPort | None = None
    device: FlowRouter | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowSizeIncrement:
    start: int
    end: int
    step: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowSizeRandom:
    min: int
    max: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowSizeWeightPairsCustom:
    size: int
    weight: float


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowSizeWeightPairs:
    choice: str
    predefined: str
    custom: tuple[FlowSizeWeightPairsCustom, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowSize:
    choice: str
    fixed: int
    increment: FlowSizeIncrement | None = None
    random: FlowSizeRandom | None = None
    weight_pairs: FlowSizeWeightPairs | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowRate:
    choice: str
    pps: int
    bps: int
    kbps: int
    mbps: int
    gbps: int
    percentage: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Time:
    """A time: ``bytes`` (at the port's line rate), ``nanoseconds`` or ``microseconds`` (what a
    delay and a gap between bursts are; not a class of the model)."""

    choice: str
    bytes: float
    nanoseconds: float
    microseconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowDelay(Time):
    """A flow's delay before its first frame."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowDurationInterBurstGap(Time):
    """The gap between bursts (its defaults are not a delay's)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowFixedPackets:
    packets: int
    gap: int
    delay: FlowDelay


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowFixedSeconds:
    seconds: float
    gap: int
    delay: FlowDelay


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowBurst:
    bursts: int
    packets: int
    gap: int
    inter_burst_gap: FlowDurationInterBurstGap


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowContinuous:
    gap: int
    delay: FlowDelay


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowDuration:
    choice: str
    fixed_packets: FlowFixedPackets | None = None
    fixed_seconds: FlowFixedSeconds | None = None
    burst: FlowBurst | None = None
    continuous: FlowContinuous | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowRxTxRatio:
    choice: str
    rx_count: dict[str, Any] | None = None
    value: float


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowLatencyMetrics:
    enable: bool
    mode: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowPredefinedTags:
    rx_name: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowMetrics:
    enable: bool
    loss: bool
    rx_tx_ratio: FlowRxTxRatio
    timestamps: bool
    latency: FlowLatencyMetrics
    predefined_metric_tags: FlowPredefinedTags | None = None

    def ratio(self, receivers: int) -> float:
        """Frames expected across the receiving ports per frame sent (``rx_count``: one per port)."""
        if self.rx_tx_ratio.choice == "rx_count":
            return float(max(receivers, 1))
        return float(self.rx_tx_ratio.value)


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowPayloadFixed:
    pattern: str
    repeat: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowPayload:
    choice: str
    fixed: FlowPayloadFixed


@dataclass(frozen=True, slots=True, kw_only=True)
class Flow:
    name: str
    tx_rx: FlowTxRx
    #: The header stack, as JSON (``Flow.Header`` objects; :mod:`netrig.otg.headers` maps them).
    packet: tuple[dict[str, Any], ...] = ()
    egress_packet: tuple[dict[str, Any], ...] = ()
    size: FlowSize
    rate: FlowRate
    duration: FlowDuration
    metrics: FlowMetrics
    payload: FlowPayload | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Capture:
    name: str
    port_names: tuple[str, ...]
    filters: tuple[dict[str, Any], ...] = ()
    overwrite: bool
    packet_size: int | None = None
    format: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Layer1:
    name: str
    port_names: tuple[str, ...]
    speed: str | None = None
    #: Everything else set (MTU, media, autonegotiation …): not applied, warned.
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class PortOptions:
    location_preemption: bool | None = None
    #: ``data_integrity``, ``frame_ordering_mode``: refused when set.
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigOptions:
    port_options: PortOptions | None = None
    #: Protocol, per-port and flow options: refused when set.
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class EthernetConnection:
    choice: str | None = None
    port_name: str | None = None
    #: A LAG, a VXLAN tunnel or a simulated link: refused when set.
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceVlan:
    tpid: str
    priority: int
    id: int
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceIpv4GatewayMAC:
    choice: str
    auto: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceIpv4:
    name: str
    address: str
    prefix: int
    gateway: str
    gateway_mac: DeviceIpv4GatewayMAC


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceIpv6GatewayMAC:
    choice: str
    auto: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceIpv6:
    name: str
    address: str
    prefix: int
    gateway: str
    gateway_mac: DeviceIpv6GatewayMAC


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceEthernet:
    name: str
    mac: str | None = None
    mtu: int
    connection: EthernetConnection | None = None
    vlans: tuple[DeviceVlan, ...] = ()
    ipv4_addresses: tuple[DeviceIpv4, ...] = ()
    ipv6_addresses: tuple[DeviceIpv6, ...] = ()
    #: DHCP clients: refused when set.
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class V4RouteAddress:
    address: str
    prefix: int
    count: int
    step: int


@dataclass(frozen=True, slots=True, kw_only=True)
class V6RouteAddress:
    address: str
    prefix: int
    count: int
    step: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BgpCommunity:
    type: str | None = None
    as_number: int
    as_custom: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BgpAsPathSegment:
    type: str
    as_numbers: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class BgpAsPath:
    as_set_mode: str
    segments: tuple[BgpAsPathSegment, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class BgpV4RouteRange:
    name: str
    addresses: tuple[V4RouteAddress, ...] = ()
    next_hop_mode: str
    next_hop_address_type: str
    next_hop_ipv4_address: str
    next_hop_ipv6_address: str
    communities: tuple[BgpCommunity, ...] = ()
    as_path: BgpAsPath | None = None
    #: Add-path, extended communities, MPLS labels, advanced attributes: refused when set.
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class BgpV6RouteRange:
    name: str
    addresses: tuple[V6RouteAddress, ...] = ()
    next_hop_mode: str
    next_hop_address_type: str
    next_hop_ipv4_address: str
    next_hop_ipv6_address: str
    communities: tuple[BgpCommunity, ...] = ()
    as_path: BgpAsPath | None = None
    #: Add-path, extended communities, MPLS labels, advanced attributes: refused when set.
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class BgpAdvanced:
    hold_time_interval: int
    keep_alive_interval: int
    update_interval: int
    time_to_live: int
    md5_key: str | None = None
    passive_mode: bool
    listen_port: int
    neighbor_port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BgpV4Peer:
    name: str
    peer_address: str
    as_type: str
    as_number: int
    as_number_width: str
    advanced: BgpAdvanced | None = None
    traditional_nlri_for_ipv4_routes: bool
    v4_routes: tuple[BgpV4RouteRange, ...] = ()
    v6_routes: tuple[BgpV6RouteRange, ...] = ()
    #: Capabilities, graceful restart, EVPN, SR-TE, replayed updates …: refused when set.
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class BgpV6Peer:
    name: str
    peer_address: str
    as_type: str
    as_number: int
    as_number_width: str
    advanced: BgpAdvanced | None = None
    v4_routes: tuple[BgpV4RouteRange, ...] = ()
    v6_routes: tuple[BgpV6RouteRange, ...] = ()
    #: Capabilities, graceful restart, EVPN, SR-TE, segment routing, replayed updates …: refused when set.
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class BgpV4Interface:
    ipv4_name: str
    peers: tuple[BgpV4Peer, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class BgpV6Interface:
    ipv6_name: str
    peers: tuple[BgpV6Peer, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceBgpRouter:
    router_id: str
    ipv4_interfaces: tuple[BgpV4Interface, ...] = ()
    ipv6_interfaces: tuple[BgpV6Interface, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Device:
    name: str
    ethernets: tuple[DeviceEthernet, ...] = ()
    #: BGP, served by BIRD (:mod:`netrig.otg.bgp`).
    bgp: DeviceBgpRouter | None = None
    #: Loopbacks and the other protocols (IS-IS, OSPF, RSVP, VXLAN, DHCP server …): refused when set.
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class LldpConnection:
    choice: str | None = None
    port_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Lldp:
    name: str
    connection: LldpConnection
    #: ``LldpChassisId``, ``LldpPortId``, ``LldpSystemName`` as given (:mod:`netrig.otg.lldp` reads them).
    chassis_id: dict[str, Any] | None = None
    port_id: dict[str, Any] | None = None
    system_name: dict[str, Any] | None = None
    hold_time: int
    advertisement_interval: int
    org_infos: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    ports: tuple[Port, ...] = ()
    devices: tuple[Device, ...] = ()
    lldp: tuple[Lldp, ...] = ()
    layer1: tuple[Layer1, ...] = ()
    captures: tuple[Capture, ...] = ()
    flows: tuple[Flow, ...] = ()
    options: ConfigOptions | None = None
    #: LAGs, events, stateful flows, egress-only tracking: refused when not empty.
    others: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------- requests

@dataclass(frozen=True, slots=True, kw_only=True)
class StateTrafficFlowTransmit:
    state: str
    flow_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StateTraffic:
    choice: str
    flow_transmit: StateTrafficFlowTransmit | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StatePortCapture:
    state: str
    port_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StatePortLink:
    state: str
    port_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StatePort:
    choice: str
    link: StatePortLink | None = None
    capture: StatePortCapture | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StateProtocolAll:
    state: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StateProtocolRoute:
    state: str
    names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StateProtocolBgpPeers:
    state: str
    peer_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StateProtocolBgp:
    choice: str
    peers: StateProtocolBgpPeers | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StateProtocol:
    choice: str
    all: StateProtocolAll | None = None
    route: StateProtocolRoute | None = None
    bgp: StateProtocolBgp | None = None
    #: LACP and IS-IS states: refused.
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlState:
    choice: str
    port: StatePort | None = None
    protocol: StateProtocol | None = None
    traffic: StateTraffic | None = None

    def flow_transmit(self) -> StateTrafficFlowTransmit:
        """The traffic request (``choice`` traffic)."""
        if self.traffic is None or self.traffic.flow_transmit is None:
            raise ConfigError("traffic.flow_transmit", "is required: give its state (start, stop, pause, resume) "
                                                       "and the flow_names (none: every flow)")
        return self.traffic.flow_transmit

    def link(self) -> StatePortLink | None:
        """The link request (``choice`` port, ``port.choice`` link), else ``None``."""
        return typing.cast("StatePortLink | None", self._port_request("link", "up, down", "port"))

    def capture(self) -> StatePortCapture | None:
        """The capture request (``choice`` port, ``port.choice`` capture), else ``None``."""
        return typing.cast("StatePortCapture | None", self._port_request("capture", "start, stop", "capture"))

    def _port_request(self, choice: str, states: str, every: str) -> Any:
        """``port.<choice>`` when the request is one (required then), else ``None``."""
        if self.port is None or self.port.choice != choice:
            return None
        got = getattr(self.port, choice)
        if got is None:
            raise ConfigError(f"port.{choice}", f"is required: give its state ({states}) and the port_names (none: "
                                                f"every {every})")
        return got


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionProtocolIpv4PingRequest:
    src_name: str | None = None
    dst_ip: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionProtocolIpv4Ping:
    requests: tuple[ActionProtocolIpv4PingRequest, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionProtocolIpv4:
    choice: str
    ping: ActionProtocolIpv4Ping | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionProtocolIpv6PingRequest:
    src_name: str | None = None
    dst_ip: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionProtocolIpv6Ping:
    requests: tuple[ActionProtocolIpv6PingRequest, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionProtocolIpv6:
    choice: str
    ping: ActionProtocolIpv6Ping | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionProtocol:
    choice: str
    ipv4: ActionProtocolIpv4 | None = None
    ipv6: ActionProtocolIpv6 | None = None
    #: BGP and IS-IS actions: refused.
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlAction:
    choice: str
    protocol: ActionProtocol | None = None
    #: Port actions: refused.
    others: dict[str, Any] = field(default_factory=dict)

    def pings(self) -> tuple[str, tuple[ActionProtocolIpv4PingRequest | ActionProtocolIpv6PingRequest, ...]] | None:
        """The ping request (``protocol.ipv4.ping`` or ``protocol.ipv6.ping``): its family and
        requests, else ``None``."""
        p = self.protocol
        if self.choice != "protocol" or p is None or p.choice not in ("ipv4", "ipv6"):
            return None
        fam = p.ipv4 if p.choice == "ipv4" else p.ipv6
        if fam is None or fam.choice != "ping" or fam.ping is None:
            return None
        return p.choice, fam.ping.requests


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowMetricsRequest:
    flow_names: tuple[str, ...] = ()
    metric_names: tuple[str, ...] = ()
    tagged_metrics: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PortMetricsRequest:
    port_names: tuple[str, ...] = ()
    column_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class LldpMetricsRequest:
    lldp_names: tuple[str, ...] = ()
    column_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Bgpv4MetricsRequest:
    peer_names: tuple[str, ...] = ()
    column_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Bgpv6MetricsRequest:
    peer_names: tuple[str, ...] = ()
    column_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsRequest:
    choice: str
    port: PortMetricsRequest | None = None
    flow: FlowMetricsRequest | None = None
    lldp: LldpMetricsRequest | None = None
    bgpv4: Bgpv4MetricsRequest | None = None
    bgpv6: Bgpv6MetricsRequest | None = None
    #: Protocol metrics' requests (BGP, ISIS, LAG …): refused.
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureRequestPackets:
    choice: str
    slice: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureRequest:
    port_name: str
    packets: CaptureRequestPackets | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Neighborsv4StatesRequest:
    ethernet_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Neighborsv6StatesRequest:
    ethernet_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class LldpNeighborsStateRequest:
    lldp_names: tuple[str, ...] = ()
    neighbor_id_filters: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class BgpPrefixIpv4UnicastFilter:
    addresses: tuple[str, ...] = ()
    prefix_length: int | None = None
    origin: str | None = None
    path_id: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BgpPrefixIpv6UnicastFilter:
    addresses: tuple[str, ...] = ()
    prefix_length: int | None = None
    origin: str | None = None
    path_id: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BgpPrefixStateRequest:
    bgp_peer_names: tuple[str, ...] = ()
    prefix_filters: tuple[str, ...] = ()
    ipv4_unicast_filters: tuple[BgpPrefixIpv4UnicastFilter, ...] = ()
    ipv6_unicast_filters: tuple[BgpPrefixIpv6UnicastFilter, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StatesRequest:
    choice: str
    ipv4_neighbors: Neighborsv4StatesRequest | None = None
    ipv6_neighbors: Neighborsv6StatesRequest | None = None
    lldp_neighbors: LldpNeighborsStateRequest | None = None
    bgp_prefixes: BgpPrefixStateRequest | None = None
    #: The protocols' states (prefixes, LSPs …): no protocols, so every answer is empty.
    others: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StartTags:
    """A controller's start at an agent (``X-Netrig-Tags``, ``X-Netrig-Receive``): the tags to send
    under, one per flow named; ``receive``: only count those flows' frames sent under them."""

    tags: tuple[int, ...] | None
    receive: bool = False
