"""What netrig serve does with each part of the OTG model: supports it, accepts it with a warning
saying what netrig does instead, or refuses it (HTTP 400 naming the path and the remedy). One
table, read by the mapping (every refusal and warning message comes from here) and rendered into
``docs/otg.md`` (a test holds the two equal). Anything the mapping does not know is refused too:
nothing is ever silently ignored.

Paths use ``[]`` for any index and ``*`` for any header or field.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from netrig.errors import ConfigError


class Status(Enum):
    SUPPORTED = "supported"
    WARNED = "warned"
    REFUSED = "refused"


@dataclass(frozen=True)
class Feature:
    path: str
    status: Status
    #: What netrig does (supported, warned) or the remedy (refused).
    note: str


S, W, R = Status.SUPPORTED, Status.WARNED, Status.REFUSED

#: The OTG model as netrig serve sees it.
FEATURES: tuple[Feature, ...] = (
    Feature("ports[]", S, "`location` names one of `netrig serve --port IF[@NS]` (the whole argument or the "
            "interface); without locations the ports are taken in `--port` order (warned)"),
    Feature("flows[].tx_rx.port", S, "`tx_name`, `rx_names`; a flow's frames count wherever they arrive"),
    Feature("flows[].tx_rx.port.rx_name", W, "deprecated in OTG: read as `rx_names`"),
    Feature("flows[].packet[]", S, "ethernet, vlan (stacked), ipv4, ipv6, udp, tcp, icmp (echo), icmpv6 (echo), "
            "vxlan, gre, mpls, arp, custom; any order"),
    Feature("flows[].packet[].*.*", S, "every field: value, values, increment, decrement, random; auto and unset "
            "length, type, next-header and checksum fields derived from the stack and the frame size; checksums "
            "generated good or bad, or custom"),
    Feature("flows[].packet[].ethernet.dst.auto", W, "a flow over ports has no address resolution (a flow over "
            "devices has): the model's default (00:00:00:00:00:00)"),
    Feature("flows[].size", S, "fixed, increment, random, weight_pairs (imix, ipsec_imix, tcp_imix, custom); sizes "
            "include the FCS, at least 64 B and room for the headers; a size without room for the 18-byte "
            "signature after them is sent untracked (warned): counted per port, not per flow"),
    Feature("flows[].rate", S, "pps; bps, kbps, mbps, gbps (layer 1, as the model's 672 bit/s minimum says); "
            "percentage of the port's line rate (its link speed, or its layer1 speed)"),
    Feature("flows[].duration", S, "fixed_packets, fixed_seconds (rate × seconds frames), burst (packets, bursts or "
            "endless, inter_burst_gap), continuous; delay; gap (with a line rate it bounds the rate)"),
    Feature("flows[].metrics", S, "always measured (every frame with room carries the signature); loss, timestamps and "
            "latency (store_forward, cut_through) reported when enabled; rx_tx_ratio"),
    Feature("flows[].payload", S, "fixed pattern (repeated or not), increment/decrement byte or word; the last 18 "
            "bytes of every frame with room for it are the signature"),
    Feature("captures[]", S, "every frame received, in order, with the FCS the wire carried; pcap or pcapng; "
            "overwrite; packet_size"),
    Feature("captures[].filters", S, "custom, ethernet, vlan, ipv4, ipv6, applied by the receiver before a frame takes "
            "room; the model leaves value, mask and negate open: read as IxNetwork does (each field's value in place "
            "in its bytes, mask bit 1 = not compared, terms and-ed, custom offset in bytes from the frame's start); "
            "ethernet.pfc_queue refused"),
    Feature("layer1[].speed", W, "the link is not configured: the speed is the port's nominal line rate (rates in "
            "%, gaps in bytes, latency modes)"),
    Feature("layer1[].*", W, "not applied: netrig does not configure links (MTU, media, autonegotiation, flow "
            "control); set them with ip/ethtool"),
    Feature("options.port_options.location_preemption", W, "the ports are this server's own: nothing to preempt"),
    Feature("devices", S, "Ethernet (MAC, MTU, one VLAN), IPv4 and IPv6 addresses with prefix and gateway, each "
            "a macvlan on its port's interface in the port's namespace: the kernel answers ARP and ND for the "
            "addresses and keeps the gateways resolved (managed neighbour entries, re-probed as a host's are); "
            "gateway_mac value: a permanent entry; only ICMP and ICMPv6 reach the devices' stack"),
    Feature("devices[].*", R, "loopbacks and protocols other than BGP (IS-IS, OSPF, RSVP, VXLAN, DHCP server, "
            "MACsec, RoCEv2, BMP) are not emulated yet; IS-IS: BIRD, the daemon chosen for BGP "
            "(docs/routing-daemons.md), has none"),
    Feature("devices[].bgp", S, "eBGP and iBGP peers over IPv4 and IPv6 from a device's address, served by BIRD 2 "
            "(one per port namespace, started and stopped with the config; no protocol code in netrig): "
            "router_id, as_number (two or four bytes), the neighbour's AS learned (external or internal), "
            "advanced hold and keepalive times, passive mode, MD5 key, listen and neighbour ports; route ranges "
            "of the session's family (addresses with prefix, count and step; communities; AS path segments "
            "as_seq; next hop local_ip or manual), advertised as blackhole routes that the port's namespace never "
            "installs; a route range is a flow endpoint (its first prefix's first address, reached through the "
            "sender's gateway)"),
    Feature("devices[].bgp.*.peers[].*", R, "capabilities, graceful restart, learned-information filters, EVPN, "
            "SR-TE, segment routing and replayed updates are not configured: BIRD's defaults apply"),
    Feature("devices[].bgp.*.peers[].advanced", R, "update_interval and time_to_live are not set (BIRD sends "
            "updates as they come, eBGP's TTL is 1 hop): leave them at the model's defaults"),
    Feature("devices[].bgp.*.peers[].v*_routes", R, "a peer advertises routes of its session's family: give "
            "IPv6 routes to an IPv6 peer (multiprotocol sessions are not configured)"),
    Feature("devices[].bgp.*.peers[].v*_routes[].*", R, "add-path, extended communities, MPLS labels and "
            "advanced attributes (MED, local preference, origin) are not set"),
    Feature("devices[].bgp.*.peers[].v*_routes[].as_path", R, "AS path segments are as_seq, prepended in order; "
            "as_set_mode do_not_include_local_as or include_as_seq (on eBGP the local AS comes first either way, "
            "as RFC 4271 has it); AS sets and confederations are not built"),
    Feature("devices[].bgp.*.peers[].v*_routes[].next_hop_address_type", R, "a manual next hop is of the "
            "session's family"),
    Feature("devices[].ethernets[].dhcp", R, "DHCP clients are not emulated: give the addresses"),
    Feature("devices[].ethernets[].connection", R, "a device Ethernet sits on a port (port_name): LAGs, VXLAN "
            "tunnels and simulated links are not emulated"),
    Feature("devices[].ethernets[].vlans", R, "one VLAN per device Ethernet: stacked VLANs (QinQ) are not made"),
    Feature("devices on a controller", R, "a controller does not place devices on its agents yet: serve them "
            "from the agent that holds the port"),
    Feature("flows[].tx_rx.device", S, "one tx_name (an Ethernet, IPv4 or IPv6 of a device) and rx_names: the "
            "ports are the devices'; unset ethernet.src is the device's MAC, unset ipv4/ipv6 src and dst the "
            "endpoints' addresses; ethernet.dst (unset or auto) is the next hop's MAC (the gateway's, or the "
            "receiver's on the same subnet) from the neighbour table at each start: a flow whose next hop is "
            "unresolved is refused at start, naming it"),
    Feature("flows[].tx_rx.device.tx_names", R, "one transmitter per flow: give each sender its own flow"),
    Feature("flows[].tx_rx.device.bidirectional", R, "one direction per flow: give the return its own flow"),
    Feature("flows[].packet[].ipv4.src.auto", R, "DHCP addresses need emulated devices: give the address"),
    Feature("flows[].packet[].ipv4.dst.auto", R, "DHCP addresses need emulated devices: give the address"),
    Feature("flows[].packet[].ipv6.src.auto", R, "DHCPv6 addresses need emulated devices: give the address"),
    Feature("flows[].packet[].ipv6.dst.auto", R, "DHCPv6 addresses need emulated devices: give the address"),
    Feature("flows[].packet[].pfcpause", R, "PFC, Ethernet pause, GTP, PPP, IGMP, SNMP, RSVP, MACsec, LACP, CFM "
            "and IPv6 extension headers have no field layout here: send them as a custom header"),
    Feature("flows[].packet[].ethernet.pfc_queue", R, "a PFC queue is not a header field: leave it out"),
    Feature("flows[].packet[].ipv4.options", R, "IPv4 options are not built: put them in a custom header after a "
            "fixed header_length"),
    Feature("flows[].packet[].ipv6.dst_usids", R, "SRv6 uSIDs are not built: give the destination address"),
    Feature("flows[].packet[].*.*.metric_tags", S, "frames sent and received (and loss) per combination of the "
            "tagged bits' values in `tagged_metrics` (`include`, `include_empty_metrics`, `metric_names`, "
            "`filters`); the tagged fields may repeat every 65 536 frames at most together, and every frame must "
            "have room for the signature; no bytes, rates or latency per tag"),
    Feature("flows[].packet[].custom.metric_tags", R, "a custom header's bytes are fixed: tag a field of a "
            "header with a pattern"),
    Feature("flows[].metrics.predefined_metric_tags", R, "tagged metrics are not kept: flow metrics count every "
            "receiving port together"),
    Feature("flows[].egress_packet", R, "egress tracking is not kept"),
    Feature("flows[].size.weight_pairs.predefined", R, "ipv6_imix and standard_imix have frames below Ethernet's "
            "64 B (netrig sends no runts): use imix, ipsec_imix, tcp_imix or custom pairs"),
    Feature("lags", R, "LAGs are not emulated"),
    Feature("lldp", S, "one lldpd (the Debian package) per LLDP object, in its port's namespace on the port's "
            "interface: system name (auto: the host's), chassis id (auto: the port's MAC; local), port id "
            "(interface name; MAC; local), hold_time as advertisement_interval × a whole multiplier; "
            "monitor/states lldp_neighbors and monitor/metrics lldp from lldpcli"),
    Feature("lldp[].org_infos", R, "organisation-specific TLVs are not advertised"),
    Feature("lldp[].chassis_id", R, "a chassis id that is an interface name or a given MAC is not set: use auto "
            "(the port's MAC) or local_subtype"),
    Feature("lldp[].port_id", R, "a given interface name is not set: use auto (the interface's), "
            "mac_address_subtype or local_subtype"),
    Feature("metric tags on a controller", S, "the agents' tagged metrics merged per combination of tag values: "
            "frames sent as the sending agent counted them, received summed over the receiving agents, loss "
            "recomputed; the request's filters, empty rows and metric names applied after the merge"),
    Feature("lldp on a controller", R, "a controller does not place LLDP on its agents yet: serve it from the "
            "agent that holds the port"),
    Feature("events", R, "events are not reported"),
    Feature("stateful_flows", R, "stateful flows (RoCEv2) are not emulated: see `netrig stateful` for RFC 9693"),
    Feature("egress_only_tracking", R, "egress tracking is not kept"),
    Feature("options", R, "protocol, per-port and flow options (data integrity, frame ordering, packet loss "
            "duration) are not applied"),
    Feature("control/state port.link", S, "ip link set up/down in the port's namespace; its flows keep running, "
            "their frames waiting in the ring until the link is up (none lost or counted twice); the time down in "
            "/netrig/agents' links"),
    Feature("control/state port.link on a controller", R, "a controller does not forward link changes yet: set "
            "them on the agent that serves the port"),
    Feature("control/state protocol.all, route, bgp", S, "BGP through its BIRD: all start/stop every session "
            "(with no BGP in the config, nothing to do: accepted); "
            "bgp.peers up/down by name (down closes the session: the routes it carried are withdrawn at the "
            "neighbour); route advertise/withdraw route ranges by name"),
    Feature("control/state protocol", R, "only BGP runs: LACP, IS-IS, OSPF and RoCEv2 have nothing to start or "
            "stop"),
    Feature("control/action protocol ping", S, "ipv4 and ipv6 ping: one echo request from a device's address "
            "(iputils ping in the port's namespace, 1 s to answer): succeeded or failed per request"),
    Feature("control/action", R, "only ping is served: no BGP or IS-IS actions (notifications, graceful "
            "restart), no port reboot"),
    Feature("control/action on a controller", R, "a controller has no devices to ping from (they are refused "
            "on it): ping from the agent that serves the device's port"),
    Feature("config update", S, "update_flows: flows' rate and size, in place (running or not: counters, "
            "sequence and tag go on; a fixed_seconds flow keeps its rate, its frame count is its rate's)"),
    Feature("config update on a controller", R, "a controller does not forward updates to its agents yet: set the "
            "whole configuration"),
    Feature("config append, delete", R, "send the whole configuration with set_config"),
    Feature("monitor/states ipv4_neighbors, ipv6_neighbors", S, "each device Ethernet's gateways (with "
            "link_layer_address once resolved) and every other neighbour it resolved, from the kernel's table"),
    Feature("monitor/metrics lldp", S, "per LLDP object: frames_tx, frames_rx, frames_discard, tlvs_unknown "
            "(lldpd's counters); frames_error_rx and tlvs_discard are 0 (lldpd counts neither apart)"),
    Feature("monitor/metrics bgpv4, bgpv6", S, "per peer, from BIRD: session_state, fsm_state, "
            "session_flap_count (times the established session went down, from BIRD's log of its states), "
            "routes_advertised and routes_received (held now), route_withdraws_sent and _received; BIRD counts no "
            "BGP messages, so updates, opens, keepalives and notifications are left out"),
    Feature("monitor/states bgp_prefixes", S, "per peer, the prefixes received from it as BIRD holds them: "
            "address, prefix length, origin, next hop, AS path, communities, local preference, MED; "
            "prefix_filters and ipv4/ipv6_unicast_filters (addresses, prefix_length)"),
    Feature("monitor/metrics (not port, flow or lldp)", R, "protocol metrics need emulated protocols: only BGP's "
            "and LLDP's are kept"),
    Feature("monitor/capture packets.slice", R, "the whole capture is returned: slice the file"),
)

_BY_PATH = {f.path: f for f in FEATURES}


def feature(path: str) -> Feature:
    """The table's entry for ``path`` (a pattern as in :data:`FEATURES`)."""
    return _BY_PATH[path]


def refuse(pattern: str, path: str, detail: str = "") -> ConfigError:
    """The error for a refused part: ``path`` is where it is in the request."""
    f = _BY_PATH.get(pattern)
    note = f.note if f is not None else "not supported by netrig serve"
    what = f"{detail}: " if detail else ""
    return ConfigError(path, f"{what}not supported: {note}")


def warning(pattern: str, path: str) -> str:
    """The warning for a warned part at ``path``."""
    return f"{path}: {_BY_PATH[pattern].note}"


def markdown() -> str:
    """The table as Markdown, for docs/otg.md."""
    rows = ["| OTG | netrig serve | what netrig does |", "|---|---|---|"]
    for f in FEATURES:
        rows.append(f"| `{f.path}` | {f.status.value} | {f.note} |")
    return "\n".join(rows) + "\n"
