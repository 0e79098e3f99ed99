"""Validated test-bed options (one frozen dataclass; every message names the field)."""
from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from netrig import _native
from netrig.errors import ConfigError
from netrig.model import cpu_list

NAT_MODES = ("masquerade", "static")
#: Where the DUT's packet work runs. ``wire`` (the default): each DUT interface's frames go to a
#: receive ring of ``dut_ring`` frames on the DUT's CPUs (a CPUMAP; ``testbed/placement.py``);
#: ``rps`` and ``threaded-napi`` move the work with the kernel's own knobs but the DUT still holds
#: the sender's frames (and slows it) while it works; ``inline``: nothing moved, the DUT runs in
#: softirq on the CPU that sends into it.
PLACEMENTS = ("wire", "rps", "threaded-napi", "inline")
#: Modes of the forwarder test bed's DUT (``netrig forward``) that deliver tx's frames to rx.
FORWARDER_MODES = ("io", "mac", "l2fwd")
#: Every mode a test bed's ``netrig forward`` DUT takes: macswap only in the one-port topology.
FORWARD_MODES = (*FORWARDER_MODES, "macswap")
#: The forwarder test beds' DUTs: netrig forward's backends, then the Linux bridge and DPDK testpmd.
FORWARDER_BACKENDS = ("af_xdp", "af_packet", "socket", "xdp", "bridge", "testpmd", "testpmd_af_packet")
#: Capture methods of the capture test bed's DUT (``netrig capture``), the engine's list.
CAPTURE_METHODS: tuple[str, ...] = tuple(_native.CAPTURE_METHODS)

_RATE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmMgG]?)\s*(pps|bps|bit/s|b/s)\s*$")
_MULT = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}


def parse_cap(text: str | int | float) -> tuple[float | None, float | None]:
    """``"100kpps"`` → (100000.0, None); ``"10Mbps"`` / ``"10Mbit/s"`` → (None, 1e7). Plain numbers are pps."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text <= 0:
            raise ConfigError("cap", f"{text!r}: must be > 0 (e.g. 100kpps or 10Mbps)")
        return float(text), None
    m = _RATE_RE.match(str(text))
    if not m:
        raise ConfigError("cap", f"{text!r}: not a rate; use e.g. 5000pps, 100kpps, 10Mbps or 1Gbit/s")
    value = float(m.group(1)) * _MULT[m.group(2).lower()]
    if value <= 0:
        raise ConfigError("cap", f"{text!r}: must be > 0")
    return (value, None) if m.group(3) == "pps" else (None, value)


#: The CPUs this process may use, as it started: read once, at import, because the tester's
#: bookkeeping threads are narrowed to the tester's CPUs later (``placement.keep_off_dut``) and
#: a thread's own affinity would then hide the DUT's CPUs from every later choice.
MACHINE_CPUS: tuple[int, ...] = tuple(sorted(os.sched_getaffinity(0)))


def parse_cpus(text: str | int | list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """``"1"``, ``"0-1"``, ``"0,1"`` or a list → sorted CPU numbers, each one this process may use."""
    if isinstance(text, int) and not isinstance(text, bool):
        cpus = {text}
    elif isinstance(text, (list, tuple)):
        cpus = set(text)
    else:
        cpus = set(cpu_list(str(text)))
    allowed = set(MACHINE_CPUS)
    bad = sorted(c for c in cpus if not isinstance(c, int) or c not in allowed)
    if bad or not cpus:
        raise ConfigError("dut_cpus", f"{text!r}: CPU(s) {bad or 'none'} not available; "
                                      f"this machine has {sorted(allowed)}")
    return tuple(sorted(cpus))


#: Smallest and largest MTU a test bed sets (IPv6 needs 1280; veth allows 65535).
MIN_MTU, MAX_MTU = 1280, 65535
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def parse_option(name: str, text: str) -> Any:
    """The typed value of test-bed option ``name`` given as text (``--testbed-option rules=100``,
    ``log=false``), typed as a config file would give it; unknown names and bad values raise a
    ``ConfigError`` naming the option."""
    fields = TestbedOptions.__dataclass_fields__
    if name not in fields:
        raise ConfigError(name, f"unknown test-bed option; known: {', '.join(sorted(fields))}")
    kind = _KINDS[name]
    t = text.strip()
    if kind is bool:
        if t.lower() in _TRUE:
            return True
        if t.lower() in _FALSE:
            return False
        raise ConfigError(name, f"{text!r}: must be true or false")
    if kind is int:
        if not re.fullmatch(r"[+-]?\d+", t):
            raise ConfigError(name, f"{text!r}: must be an integer")
        return int(t)
    return t


#: How each option is typed when given as text (others stay strings).
_KINDS: dict[str, type] = {"rules": int, "cap": str, "cap_burst": int, "nat": str, "conntrack_max": int,
                           "conntrack_buckets": int, "conntrack_timeout_s": int,
                           "log": bool, "flowtable": bool, "dut_cpus": str, "dut_placement": str, "dut_ring": int,
                           "ifaces": str,
                           "tester_stack": bool, "mtu": int, "forward_mode": str, "forward_backend": str,
                           "capture_method": str, "capture_batch": int, "dut_neighbours": str,
                           "addresses": str, "gateways": str, "routes": int, "hosts": int, "routing": str,
                           "bgp_paths": int}
#: Most host routes per family the ``routes`` option loads, each for an address that can carry test
#: traffic (it stays inside the benchmarking ranges, RFC 2544 §C.2.2, RFC 5180): IPv4 from 198.19.0.2
#: to 198.19.255.255; IPv6 from 2001:2:0:1::2 in its /64 (1 M, the sweep's largest table).
MAX_V4_ROUTES = 65_534
#: Most routes with ``bgp_paths = 2``: from 198.19.0.2 they stay below the backup peer's /30
#: (``testbed.bgp.BACKUP4``).
MAX_PATHS_ROUTES = 64_000
MAX_ROUTES = 1_048_576
#: Most tester hosts the ``hosts`` option puts on the DUT's receiving link: 198.19.0.2 to
#: 198.19.255.254 (a /16 on the link, less the DUT's own address and the broadcast).
MAX_HOSTS = 65_533
#: How a routing DUT knows the tester's MACs: ``static`` (permanent entries the build sets) or
#: ``resolved`` (its own ARP and ND, answered by the tester ports' kernel stacks).
DUT_NEIGHBOURS = ("static", "resolved")
#: How a routing DUT gets the ``routes``: ``static`` (loaded through netlink) or ``bgp`` (learned
#: over eBGP from the tester: ``testbed.bgp``).
ROUTING = ("static", "bgp")


def _int(name: str, value: Any, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(name, f"{value!r}: must be an integer from {lo} to {hi}")


@dataclass(frozen=True)
class PortAddresses:
    """One external port's addresses (prefix included) and next hops, by family; None: not given."""

    v4: ipaddress.IPv4Interface | None
    v6: ipaddress.IPv6Interface | None
    gw4: ipaddress.IPv4Address | None
    gw6: ipaddress.IPv6Address | None


def _names(name: str, value: Any, what: str) -> tuple[str, ...]:
    """A list option given as a list or as comma-separated text."""
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(name, f"{value!r}: must be {what}")
    return tuple(value)


def _by_family(name: str, text: str, parse: Any) -> dict[int, Any]:
    """``"A+B"``: each part parsed, by IP version; one per version."""
    out: dict[int, Any] = {}
    for part in text.split("+"):
        try:
            x = parse(part.strip())
        except ValueError:
            what = "prefix" if name == "addresses" else "address"
            raise ConfigError(name, f"{part.strip()!r}: not an IPv4 or IPv6 {what}") from None
        if x.version in out:
            raise ConfigError(name, f"{text!r}: two IPv{x.version} entries for one interface; give one per family")
        out[x.version] = x
    return out


@dataclass(frozen=True)
class TestbedOptions:
    """Options of every topology; a topology ignores what it does not use (``describe()`` shows which).

    rules:          firewall/acl/fwnat: number of rules in the forward chain (≥ 2 for firewall, ≥ 1 for acl).
    cap:            policer: rate cap, ``"100kpps"`` or ``"10Mbps"`` (bit/s, L2 bytes incl. headers).
    cap_burst:      policer: token-bucket burst (packets for a pps cap, bytes for a bit/s cap;
                    None = about 10 ms of the cap, at least 10 packets / 2 full frames).
    nat:            nat/fwnat: ``masquerade`` or ``static`` (SNAT to a fixed pool address).
    conntrack_max:  nat/firewall/fwnat: ``net.netfilter.nf_conntrack_max`` (global! restored on teardown).
    conntrack_buckets: nat/firewall/fwnat: ``net.netfilter.nf_conntrack_buckets``, the conntrack hash
                    size (global! restored on teardown; the kernel may round it).
    conntrack_timeout_s: nat/firewall/fwnat: the DUT's UDP and TCP conntrack timeouts (unreplied and
                    stream UDP, established TCP), in its namespace (gone with it), so the connections a
                    stateful test establishes outlive the test (RFC 9693).
    log:            firewall/acl/fwnat: ``log`` on the accept rule, every accepted packet that reaches
                    it (sets the global ``nf_log_all_netns``).
    flowtable:      router/acl/firewall/nat/fwnat: an nftables flowtable on the DUT's two interfaces
                    (software fast path): a TCP/UDP flow's packets skip the forward chain once its
                    conntrack entry is offloaded.
    dut_cpus:       CPUs the DUT's packet processing runs on ("1", "0-1"); None = the last CPU when the
                    machine has two or more (the tester keeps the others), else CPU 0, shared.
    dut_placement:  ``wire`` (default: a receive ring on the DUT's CPUs; a DUT that cannot keep up
                    drops), ``rps`` (RPS masks), ``threaded-napi`` (GRO on, threaded NAPI kthreads
                    pinned) or ``inline`` (no placement: the DUT works on the sender's CPU).
    dut_ring:       wire: the DUT's receive ring per CPU, frames (8..16384; None = 1024).
    ifaces:         external: the interfaces the user cabled (e.g. ``("eth1", "eth2")``).
    addresses:      external: each interface's addresses, one entry per interface in order, an IPv4
                    and/or an IPv6 prefix joined by ``+`` (``"198.18.0.2/24+2001:2::2/64"``); netrig
                    adds them (removed at teardown) so the tester's kernel answers the DUT's ARP/ND.
    gateways:       external: each interface's next hop, one entry per interface (``"198.18.0.1"``,
                    ``+`` an IPv6 one): resolved by ARP/ND at the build; its MAC is the port's
                    ``peer_mac`` (the frames' destination), and the trial's addresses are the ports'.
    tester_stack:   configure the tester ports' addresses and routes in their kernel stacks too (for
                    socket-based tools); off by default so tester ports never answer test traffic.
    mtu:            MTU of every test-bed link (1280..65535; None = the kernel's 1500), e.g. 9000 for
                    jumbo frames (the largest frame is MTU + 18 bytes).
    forward_mode:   forwarder: the DUT's mode (``io``, ``mac`` or ``l2fwd``; default io; ``macswap`` returns
                    frames on the port they came in on: topology ``oneport``, where it is the default and
                    the only mode; ``rxonly`` delivers nothing).
    forward_backend: forwarder, oneport: the DUT: netrig forward with port I/O ``af_xdp``, ``af_packet``
                    or ``socket``; ``xdp``: netrig forward's in-kernel XDP_REDIRECT; ``bridge``: the
                    Linux bridge (forwarder only, io); ``testpmd`` / ``testpmd_af_packet``: DPDK
                    testpmd with ``net_af_xdp`` / ``net_af_packet`` ports (one CPU in dut_cpus).
    capture_method: capture: the capture application's method (``recvfrom``, ``recvmmsg``, ``threads``,
                    ``tpacket_v3``, ``libpcap``, ``af_xdp``; ``netrig capture``).
    capture_batch:  capture: frames per ``recvmmsg`` call (1..1024, default 10 as in lab report 002).
    routes:         router, nat, firewall, fwnat, acl, policer: N host routes (/32 and /128) in the DUT's
                    FIB for the receiving side's first N addresses from the rx port's (198.19.0.2 …,
                    2001:2:0:1::2 …), each via the rx port, loaded in one netlink batch; a trial with
                    ``flows.dst_ips = N`` spreads over them (1..1 048 576; IPv4 stops at 65 534, the
                    test range's addresses: beyond it, ``ports.family = 6``).
    routing:        with routes: ``static`` (default: loaded through netlink) or ``bgp`` (learned over
                    eBGP: BIRD 2 in the DUT's namespace installs what BIRD in the rx port's namespace
                    advertises for the tester; the build waits until the DUT's FIB holds them all).
    bgp_paths:      router, with routing ``bgp``: 1 (default) or 2: a second tester peer on the receiving
                    link advertises the same routes with a longer AS path (the DUT's backup), and
                    the link runs through a bridge where a withdrawn path stops forwarding (the
                    convergence method's withdraw; at most 64 000 routes).
    hosts:          router: N tester hosts per family on the DUT's receiving link (198.19.0.2 …, a
                    /16 on that link; 2001:2:0:1::2 …), answering ARP and (by proxy NDP) neighbour
                    solicitation, so the DUT's neighbour tables hold N entries each that it resolved
                    itself (read back at the build); a trial with ``flows.dst_ips = N`` spreads over
                    them (1..65 533). Raises the host's neighbour-table limits (``gc_thresh1..3``
                    of both families) for the test bed's life.
    dut_neighbours: router, nat, firewall, fwnat, acl, policer: ``static`` (default: permanent
                    neighbour entries for the tester's addresses) or ``resolved`` (none: the DUT
                    resolves them by ARP and ND, which the tester ports' kernel stacks answer; they
                    get their addresses, never a test frame; the build has the DUT resolve them once).

    A topology refuses options it does not use (``Topology.uses``), so a typo'd or misplaced
    option never builds a different test bed than the one asked for.
    """

    __test__ = False

    rules: int = 10
    cap: str | float | None = None
    cap_burst: int | None = None
    nat: str = "masquerade"
    conntrack_max: int | None = None
    conntrack_buckets: int | None = None
    conntrack_timeout_s: int | None = None
    log: bool = False
    flowtable: bool = False
    dut_cpus: str | tuple[int, ...] | None = None
    dut_placement: str = "wire"
    dut_ring: int | None = None
    ifaces: tuple[str, ...] = field(default_factory=tuple)
    addresses: tuple[str, ...] = field(default_factory=tuple)
    gateways: tuple[str, ...] = field(default_factory=tuple)
    tester_stack: bool = False
    mtu: int | None = None
    forward_mode: str | None = None
    forward_backend: str = "af_xdp"
    capture_method: str = "recvfrom"
    capture_batch: int = _native.DEFAULT_CAPTURE_BATCH
    dut_neighbours: str = "static"
    routes: int = 0
    routing: str = "static"
    bgp_paths: int = 1
    hosts: int = 0

    def __post_init__(self) -> None:
        _int("rules", self.rules, 1, 1_000_000)
        if self.cap is not None:
            if isinstance(self.cap, bool) or not isinstance(self.cap, (str, int, float)):
                raise ConfigError("cap", f"{self.cap!r}: must be a rate like 100kpps or 10Mbps")
            parse_cap(self.cap)
        if self.cap_burst is not None:
            _int("cap_burst", self.cap_burst, 1, 1_000_000_000)
        if not isinstance(self.nat, str) or self.nat not in NAT_MODES:
            raise ConfigError("nat", f"{self.nat!r}: must be one of {', '.join(NAT_MODES)}")
        if self.conntrack_max is not None:
            _int("conntrack_max", self.conntrack_max, 1, 2**31 - 1)
        if self.conntrack_buckets is not None:
            _int("conntrack_buckets", self.conntrack_buckets, 1, 2**30)
        if self.conntrack_timeout_s is not None:
            _int("conntrack_timeout_s", self.conntrack_timeout_s, 1, 2**31 // 1000)
        for name in ("log", "flowtable", "tester_stack"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, f"{getattr(self, name)!r}: must be true or false")
        if self.dut_cpus is not None:
            object.__setattr__(self, "dut_cpus", parse_cpus(self.dut_cpus))
        if not isinstance(self.dut_placement, str) or self.dut_placement not in PLACEMENTS:
            raise ConfigError("dut_placement", f"{self.dut_placement!r}: must be one of {', '.join(PLACEMENTS)}")
        if self.dut_ring is not None:
            _int("dut_ring", self.dut_ring, _native.WIRE_MIN_RING, _native.WIRE_MAX_RING)
            if self.dut_placement != "wire":
                raise ConfigError("dut_ring", f"the ring is the wire's; dut_placement {self.dut_placement} has "
                                              "none (leave dut_ring out, or use dut_placement wire)")
        if self.dut_placement == "inline" and self.dut_cpus is not None:
            raise ConfigError("dut_cpus", "dut_placement inline leaves the DUT on the sender's CPU: there are no "
                                          "CPUs to give it (leave dut_cpus out, or pick another placement)")
        object.__setattr__(self, "ifaces", _names("ifaces", self.ifaces, "a list of interface names"))
        for i in self.ifaces:
            if not isinstance(i, str) or not re.match(r"^[A-Za-z0-9_.:@-]{1,15}$", i):
                raise ConfigError("ifaces", f"{i!r}: not an interface name")
        object.__setattr__(self, "addresses", _names("addresses", self.addresses, "a list of prefixes, one per "
                                                     "interface (198.18.0.2/24+2001:2::2/64)"))
        object.__setattr__(self, "gateways", _names("gateways", self.gateways, "a list of next hops, one per "
                                                    "interface (198.18.0.1+2001:2::1)"))
        self.port_addresses()
        if self.mtu is not None:
            _int("mtu", self.mtu, MIN_MTU, MAX_MTU)
        if self.forward_mode is not None and (not isinstance(self.forward_mode, str)
                                              or self.forward_mode not in FORWARD_MODES):
            raise ConfigError("forward_mode", f"{self.forward_mode!r}: must be one of {', '.join(FORWARD_MODES)} "
                                              "(rxonly delivers nothing back to the tester; macswap only with "
                                              "topology oneport)")
        if not isinstance(self.forward_backend, str) or self.forward_backend not in FORWARDER_BACKENDS:
            raise ConfigError("forward_backend", f"{self.forward_backend!r}: must be one of "
                                                 f"{', '.join(FORWARDER_BACKENDS)}")
        if not isinstance(self.dut_neighbours, str) or self.dut_neighbours not in DUT_NEIGHBOURS:
            raise ConfigError("dut_neighbours", f"{self.dut_neighbours!r}: must be one of {', '.join(DUT_NEIGHBOURS)}")
        if not isinstance(self.capture_method, str) or self.capture_method not in CAPTURE_METHODS:
            raise ConfigError("capture_method", f"{self.capture_method!r}: must be one of {', '.join(CAPTURE_METHODS)}")
        _int("capture_batch", self.capture_batch, 1, _native.MAX_CAPTURE_BATCH)
        _int("routes", self.routes, 0, MAX_ROUTES)
        _int("hosts", self.hosts, 0, MAX_HOSTS)
        if not isinstance(self.routing, str) or self.routing not in ROUTING:
            raise ConfigError("routing", f"{self.routing!r}: must be one of {', '.join(ROUTING)}")
        if self.routing == "bgp" and not self.routes:
            raise ConfigError("routing", "bgp learns the routes option's routes: give routes (1 or more)")
        _int("bgp_paths", self.bgp_paths, 1, 2)
        if self.bgp_paths > 1 and self.routing != "bgp":
            raise ConfigError("bgp_paths", "a backup path is learned over BGP: give routing = \"bgp\" too")
        if self.bgp_paths > 1 and self.routes > MAX_PATHS_ROUTES:
            raise ConfigError("bgp_paths", f"two paths for {self.routes} routes: at most {MAX_PATHS_ROUTES} (they stay "
                                           "below the backup peer's addresses, 198.19.254.0/30)")
        if self.hosts and self.routes:
            raise ConfigError("hosts", "routes and hosts together: routes send every destination to the rx port's "
                                       "one neighbour, hosts make each destination its own; pick one")

    def port_addresses(self) -> list[PortAddresses]:
        """``addresses`` and ``gateways`` per interface, checked (each family at most once per
        port, a gateway inside its port's prefix of the same family)."""
        if self.gateways and not self.addresses:
            raise ConfigError("gateways", "a next hop needs the port's own address: give addresses too")
        if self.gateways and len(self.gateways) != len(self.addresses):
            raise ConfigError("gateways", f"{len(self.gateways)} given for {len(self.addresses)} addresses: give one "
                                          "per interface, in the same order")
        out = []
        for i, text in enumerate(self.addresses):
            nets = _by_family("addresses", text, lambda t: ipaddress.ip_interface(t))
            gws = _by_family("gateways", self.gateways[i], ipaddress.ip_address) if self.gateways else {}
            for fam, gw in gws.items():
                if fam not in nets or gw not in nets[fam].network or gw == nets[fam].ip:
                    raise ConfigError("gateways", f"{gw}: not another address in {text} (the port's own prefix)")
            out.append(PortAddresses(nets.get(4), nets.get(6), gws.get(4), gws.get(6)))
        return out

    def changed(self) -> list[str]:
        """The options that differ from their defaults (what the user asked for)."""
        default = TestbedOptions()
        return [n for n in self.__dataclass_fields__ if getattr(self, n) != getattr(default, n)]

    @property
    def cap_pps(self) -> float | None:
        return parse_cap(self.cap)[0] if self.cap is not None else None

    @property
    def cap_bps(self) -> float | None:
        return parse_cap(self.cap)[1] if self.cap is not None else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["dut_cpus"] = list(self.dut_cpus) if self.dut_cpus else None
        d["ifaces"] = list(self.ifaces)
        d["addresses"], d["gateways"] = list(self.addresses), list(self.gateways)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TestbedOptions:
        """The options :meth:`to_dict` wrote (validated again)."""
        kw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
        return cls(**kw)
