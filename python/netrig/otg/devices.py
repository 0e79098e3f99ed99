"""OTG devices on netrig serve's ports: Ethernet with a MAC, an MTU and a VLAN, IPv4 and IPv6
addresses with gateways. Their address resolution is the kernel's own (ARP, ND, the neighbour
table), as a host's is; no protocol code here.

::

    config.devices ──plan()──▶ DevicePlan: checked whole (names, ports, addresses); nothing made yet
    DevicePlan ──Devices.apply()──▶ per device Ethernet, in its port's namespace:
        a macvlan ``nr<pid>d<k>`` on the port's interface (the device's MAC and MTU)
          [→ a VLAN ``nr<pid>d<k>v`` on it, when the Ethernet has one]
        its addresses (no DAD, no router solicitation, no SLAAC)
        a *managed* neighbour entry per gateway (the kernel resolves it at once and keeps it
          resolved, re-probing as a host does; ``gateway_mac`` value: a permanent entry instead)
        per address a routing rule and table (from the address: default via its gateway), so a
          ping from a device leaves through that device
      and per namespace one nftables table ``netrig_devices_<pid>``: on these interfaces only ICMP
      and ICMPv6 come in (echo, ND), so the kernel never answers a test frame (port unreachable,
      TCP reset) on the tester's behalf
    Devices.resolve(next hops) ──▶ their MACs from the neighbour table (a missing entry is added
        managed, then waited for): a flow's ``ethernet.dst`` auto, at each start
    Devices.close() ──▶ links (their addresses, neighbours, routes with them), rules, tables deleted

Test frames never reach these interfaces' stack: AF_XDP's steering program takes signed frames
before it (and passes the rest: ARP, ND, echo), AF_PACKET sockets read frames beside it, and the
nftables table drops what else arrives. The links carry the owner's pid: a netrig serve that died
without cleaning up leaves links that the next one on the port deletes (:func:`_sweep`).
"""
from __future__ import annotations

import functools
import gzip
import ipaddress
import json
import os
import re
import subprocess
import time
import typing
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from netrig import _native
from netrig.errors import ConfigError, NetrigError
from netrig.otg import refusal
from netrig.otg.daemons import netns_argv
from netrig.otg.objects import Device, DeviceEthernet, DeviceIpv4, DeviceIpv6
from netrig.testbed.state import pid_alive

#: Interface names of devices: ``nr<owner pid>d<ethernet>`` and its VLAN ``…v``.
_LINK = re.compile(r"^nr(\d+)d(\d+)v?$")
#: VLAN protocols by the model's TPID.
_TPIDS = {"x8100": "802.1Q", "x88A8": "802.1ad", "x88a8": "802.1ad"}
#: Neighbour states whose link-layer address is usable.
_KNOWN = {"REACHABLE", "STALE", "DELAY", "PROBE", "PERMANENT", "NOARP"}
#: How long a start waits for a next hop the kernel is still resolving, s.
RESOLVE_S = 3.0

Ip = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Address:
    """A device's IPv4 or IPv6 address (``DeviceIpv4``, ``DeviceIpv6``)."""

    name: str
    family: int
    address: Ip
    prefix: int
    gateway: Ip
    #: The gateway's MAC as given (``gateway_mac`` value), else ``None``: resolved.
    gateway_mac: str | None
    #: Its Ethernet's index in :attr:`DevicePlan.ethernets`.
    ethernet: int

    def next_hop(self, dst: Ip) -> Ip:
        """Where a frame to ``dst`` goes first: ``dst`` itself on the address's own subnet, else
        the gateway."""
        net = ipaddress.ip_network(f"{self.address}/{self.prefix}", strict=False)
        return dst if dst in net else self.gateway


@dataclass(frozen=True)
class Ethernet:
    """A device Ethernet (``DeviceEthernet``) on a port of the config."""

    name: str
    device: str
    port: int
    mac: str
    mtu: int
    vlan: int | None
    vlan_protocol: str
    addresses: tuple[Address, ...]


#: A next hop: an Ethernet's index and the address to resolve on it.
NextHop = tuple[int, Ip]


@dataclass(frozen=True)
class DevicePlan:
    """The devices of a config, checked; ``names``: every Ethernet and address by name."""

    ethernets: tuple[Ethernet, ...] = ()
    names: dict[str, tuple[int, Address | None]] = field(default_factory=dict)
    #: TCP ports the devices' protocols speak on (BGP's): let in on their links.
    tcp_ports: frozenset[int] = frozenset()


def _mac_of(name: str) -> str:
    """A locally administered unicast MAC of an Ethernet that gives none (stable per name)."""
    h = zlib.crc32(name.encode()).to_bytes(4, "big")
    return "02:4e:" + ":".join(f"{b:02x}" for b in h)


def parse_ip(text: str, family: int, at: str) -> Ip:
    try:
        a = ipaddress.ip_address(text)
    except ValueError:
        raise ConfigError(at, f"{text!r} is not an IPv{family} address") from None
    if a.version != family:
        raise ConfigError(at, f"{text!r} is not an IPv{family} address")
    return a


class _Names:
    """Names are unique across a config's devices, Ethernets, VLANs and addresses (the model's
    rule): the first path of each."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def add(self, name: str, at: str) -> None:
        if name in self.seen:
            raise ConfigError(f"{at}.name", f"{name!r} is already the name of {self.seen[name]}")
        self.seen[name] = at


def plan(devices: Sequence[Device], port_names: Sequence[str]) -> DevicePlan:
    """The devices of a config on its ports, checked whole; errors name the config's paths."""
    names = _Names()
    ethernets: list[Ethernet] = []
    for i, d in enumerate(devices):
        at = f"devices[{i}]"
        names.add(d.name, at)
        for key, value in d.others.items():
            if value not in (None, [], {}):
                raise refusal.refuse("devices[].*", f"{at}.{key}")
        for k, e in enumerate(d.ethernets):
            ethernets.append(_ethernet(e, d.name, len(ethernets), port_names, names, f"{at}.ethernets[{k}]"))
    seen: dict[Ip, str] = {}
    table: dict[str, tuple[int, Address | None]] = {}
    for k, eth in enumerate(ethernets):
        table[eth.name] = (k, None)
        for a in eth.addresses:
            table[a.name] = (k, a)
            if a.address in seen:
                raise ConfigError(f"devices: {a.name}", f"{a.address} is already {seen[a.address]}'s address")
            seen[a.address] = a.name
    return DevicePlan(tuple(ethernets), table)


def _ethernet(e: DeviceEthernet, device: str, index: int, port_names: Sequence[str], names: _Names,
              at: str) -> Ethernet:
    names.add(e.name, at)
    for key, value in e.others.items():
        if value not in (None, [], {}):
            raise refusal.refuse("devices[].ethernets[].dhcp", f"{at}.{key}")
    c = e.connection
    if c is None or c.choice not in (None, "port_name") or c.others:
        raise refusal.refuse("devices[].ethernets[].connection", f"{at}.connection")
    if c.port_name not in port_names:
        raise ConfigError(f"{at}.connection.port_name", f"{c.port_name!r} is not a port of the config: use one of "
                                                        f"{', '.join(port_names)}")
    if len(e.vlans) > 1:
        raise refusal.refuse("devices[].ethernets[].vlans", f"{at}.vlans")
    vlan = e.vlans[0] if e.vlans else None
    if vlan is not None:
        names.add(vlan.name, f"{at}.vlans[0]")
        if vlan.tpid not in _TPIDS:
            raise ConfigError(f"{at}.vlans[0].tpid", f"{vlan.tpid} is not a VLAN protocol this kernel tags with: "
                                                     "use x8100 or x88A8")
        if not kernel_makes_vlans():
            raise ConfigError(f"{at}.vlans[0]", "this kernel cannot make VLAN interfaces (built without 802.1Q: "
                                                "CONFIG_VLAN_8021Q): give the device no vlans, or serve it on a "
                                                "kernel with 802.1Q")
    addresses: list[Address] = []
    groups: tuple[tuple[int, Sequence[DeviceIpv4 | DeviceIpv6]], ...] = ((4, e.ipv4_addresses),
                                                                          (6, e.ipv6_addresses))
    for family, group in groups:
        for k, a in enumerate(group):
            ap = f"{at}.ipv{family}_addresses[{k}]"
            names.add(a.name, ap)
            address = parse_ip(a.address, family, f"{ap}.address")
            gateway = parse_ip(a.gateway, family, f"{ap}.gateway")
            if address == gateway:
                raise ConfigError(f"{ap}.gateway", "is the address itself: give the DUT's (the next hop's) address")
            mac = a.gateway_mac.value if a.gateway_mac.choice == "value" else None
            addresses.append(Address(a.name, family, address, a.prefix, gateway, mac, index))
    return Ethernet(e.name, device, port_names.index(c.port_name), e.mac or _mac_of(e.name), e.mtu,
                    vlan.id if vlan else None, _TPIDS[vlan.tpid] if vlan else "", tuple(addresses))


@functools.cache
def kernel_makes_vlans() -> bool:
    """Whether this kernel makes 802.1Q/802.1ad interfaces: 802.1Q built in or loaded (``/proc/net/vlan``),
    or not ruled out by the kernel's build configuration (``/proc/config.gz``; a module loads at first
    use)."""
    if os.path.isdir("/proc/net/vlan"):
        return True
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            return "# CONFIG_VLAN_8021Q is not set" not in f.read()
    except OSError:
        return True


# ------------------------------------------------------------------------------------------ runtime

def _run(argv: list[str], at: str, stdin: str | None = None) -> str:
    """Run a command (``ip``, ``nft``, ``sysctl``); a failure is one line naming ``at``."""
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NetrigError(f"{at}: {argv[0]}: {e}") from None
    if done.returncode != 0:
        lines = [x for x in done.stderr.strip().splitlines() if not x.startswith("Command failed")]
        detail = (lines or [str(done.returncode)])[-1]
        raise NetrigError(f"{at}: {' '.join(argv[:6])} …: {detail}")
    return done.stdout


def _ipcmd(netns: str | None) -> list[str]:
    return ["ip", *(["-n", netns] if netns else [])]


class Devices:
    """A config's devices made on the ports (see the module doc); :meth:`close` undoes it all."""

    def __init__(self, plan_: DevicePlan, ports: Sequence[_native.Port], port_names: Sequence[str],
                 cpus: Sequence[int] = ()):
        """``cpus``: where a ping during traffic runs (the senders' CPUs: netrig.otg.daemons)."""
        self.plan = plan_
        self.cpus = tuple(cpus)
        self.ports = tuple(ports)
        self.port_names = tuple(port_names)
        self.pid = os.getpid()
        #: Namespaces holding our links, rules and table (``None``: this process's).
        self.made: dict[str | None, list[str]] = {}
        #: The ports' own ``arp_ignore`` before :meth:`apply` (restored by :meth:`close`).
        self.arp_ignore: dict[tuple[str | None, str], str] = {}

    def ifname(self, k: int) -> str:
        """The interface holding Ethernet ``k``'s addresses (its VLAN's, when it has one)."""
        e = self.plan.ethernets[k]
        return f"nr{self.pid}d{k}" + ("v" if e.vlan is not None else "")

    def netns(self, k: int) -> str | None:
        return self.ports[self.plan.ethernets[k].port].netns

    def table(self, k: int, a: int) -> int:
        """The routing table of Ethernet ``k``'s address ``a`` (the owner's pid in its high bits)."""
        return (self.pid << 10 | k << 4 | a) & 0xFFFFFFFF

    def apply(self) -> None:
        """Make every device; on a failure, undo what was made and raise (one line)."""
        try:
            for ns in dict.fromkeys(self.ports[e.port].netns for e in self.plan.ethernets):
                _sweep(ns)
                self.made[ns] = []
            for ns, lower in dict.fromkeys((self.ports[e.port].netns, self.ports[e.port].ifname)
                                           for e in self.plan.ethernets):
                self._quiet_port(ns, lower)
            for k in range(len(self.plan.ethernets)):
                self._ethernet(k)
            for ns in self.made:
                self._filter(ns)
            self._announce()
        except BaseException:
            self.close()
            raise

    def _ethernet(self, k: int) -> None:
        e = self.plan.ethernets[k]
        ns, lower = self.netns(k), self.ports[e.port].ifname
        mac_if, top = f"nr{self.pid}d{k}", self.ifname(k)
        at = f"devices: {e.name} on port {self.port_names[e.port]} ({lower})"
        ip = _ipcmd(ns)
        _run([*ip, "link", "add", mac_if, "link", lower, "address", e.mac, "mtu", str(e.mtu), "type", "macvlan",
              "mode", "private"], at)
        self.made[ns].append(mac_if)
        if e.vlan is not None:
            _run([*ip, "link", "add", top, "link", mac_if, "type", "vlan", "protocol", e.vlan_protocol, "id",
                  str(e.vlan)], at)
        quiet = [f"net.ipv6.conf.{top}.{key}=0" for key in ("accept_ra", "router_solicitations", "accept_dad",
                                                              "dad_transmits", "autoconf")]
        _run(netns_argv(ns, ["sysctl", "-q", "-w", *quiet]), at)
        _run([*ip, "-batch", "-"], at, f"link set {mac_if} allmulticast on up\nlink set {top} up\n")
        for family in (4, 6):  # a batch's lines take its family (a rule's is not read from its address)
            batch: list[str] = []
            for j, a in enumerate(e.addresses):
                if a.family != family:
                    continue
                t = self.table(k, j)
                batch += [f"address add {a.address}/{a.prefix} dev {top}" + (" nodad" if family == 6 else ""),
                          f"route add default via {a.gateway} dev {top} onlink table {t}",
                          f"rule add from {a.address} table {t} priority 1000"]
                if a.gateway_mac is None:
                    batch.append(f"neigh replace {a.gateway} dev {top} managed")
                else:
                    batch.append(f"neigh replace {a.gateway} dev {top} lladdr {a.gateway_mac} nud permanent")
            if batch:
                _run([*ip, f"-{family}", "-batch", "-"], at, "\n".join(batch) + "\n")

    def _announce(self) -> None:
        """Each address pings its gateway once (in parallel, 1 s at most): the DUT answers, and to
        answer it resolves the address, so its neighbour table holds every device before traffic
        starts, as a tester's protocol start does (a router learns an IPv6 device's link-local
        address from its solicitation, not the address its traffic comes from)."""
        pings = [subprocess.Popen(netns_argv(self.netns(k), ["ping", f"-{a.family}", "-n", "-q", "-c", "1", "-W", "1",
                                                             "-I", str(a.address), str(a.gateway)]),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for k, e in enumerate(self.plan.ethernets) for a in e.addresses]
        for p in pings:
            p.wait(timeout=10)

    def _quiet_port(self, ns: str | None, lower: str) -> None:
        """The port's own interface answers no ARP for the devices' addresses (``arp_ignore`` 8:
        by default a host answers for any of its addresses on any of its interfaces, with that
        interface's MAC); its setting is restored by :meth:`close`."""
        key = f"net/ipv4/conf/{lower}/arp_ignore"
        at = f"devices: port {lower}"
        self.arp_ignore[(ns, lower)] = _run(netns_argv(ns, ["sysctl", "-n", key]), at).strip()
        _run(netns_argv(ns, ["sysctl", "-q", "-w", f"{key}=8"]), at)

    def _filter(self, ns: str | None) -> None:
        """The namespace's nftables table: only ICMP and ICMPv6 come in on the devices' links, and
        TCP to or from the ports of their protocols (BGP's sessions)."""
        name = f"nr{self.pid}d*"
        ports = ", ".join(str(p) for p in sorted(self.plan.tcp_ports))
        tcp = (f'  iifname "{name}" tcp dport {{ {ports} }} accept\n'
               f'  iifname "{name}" tcp sport {{ {ports} }} accept\n') if ports else ""
        script = (f"table inet netrig_devices_{self.pid} {{\n chain input {{\n"
                  "  type filter hook input priority -10; policy accept;\n"
                  f'  iifname "{name}" meta l4proto {{ icmp, ipv6-icmp }} accept\n'
                  f'{tcp}  iifname "{name}" drop\n }}\n}}\n')
        _run(netns_argv(ns, ["nft", "-f", "-"]), f"devices: nftables in {ns or 'the host namespace'}", script)

    def close(self) -> None:
        """Delete every link, rule and table this made (each step tried; errors ignored: the
        namespace may be gone)."""
        for ns, links in self.made.items():
            ip = _ipcmd(ns)
            for link in links:
                subprocess.run([*ip, "link", "del", link], capture_output=True, check=False, timeout=30)
            for k, e in enumerate(self.plan.ethernets):
                if self.netns(k) == ns:
                    for j, a in enumerate(e.addresses):
                        subprocess.run([*ip, f"-{a.family}", "rule", "del", "table", str(self.table(k, j))],
                                       capture_output=True, check=False, timeout=30)
            subprocess.run(netns_argv(ns, ["nft", "delete", "table", "inet", f"netrig_devices_{self.pid}"]),
                           capture_output=True, check=False, timeout=30)
        for (ns, lower), value in self.arp_ignore.items():
            subprocess.run(netns_argv(ns, ["sysctl", "-q", "-w", f"net/ipv4/conf/{lower}/arp_ignore={value}"]),
                           capture_output=True, check=False, timeout=30)
        self.made, self.arp_ignore = {}, {}

    # -------------------------------------------------------------------------------- neighbours

    def _table(self, k: int, family: int) -> list[dict[str, Any]]:
        out = _run([*_ipcmd(self.netns(k)), "-j", f"-{family}", "neigh", "show", "dev", self.ifname(k)],
                   f"devices: {self.plan.ethernets[k].name}")
        return json.loads(out or "[]")

    def neighbours(self, family: int, ethernet_names: Sequence[str]) -> list[dict[str, str]]:
        """``monitor/states`` ``ipv4_neighbors`` / ``ipv6_neighbors``: each Ethernet's gateways
        (resolved or not: no ``link_layer_address`` then) and every other neighbour it resolved."""
        key = f"ipv{family}_address"
        rows: list[dict[str, str]] = []
        for k, e in enumerate(self.plan.ethernets):
            if ethernet_names and e.name not in ethernet_names:
                continue
            known = {ipaddress.ip_address(n["dst"]): n.get("lladdr") for n in self._table(k, family)
                     if set(n.get("state", ())) & _KNOWN and n.get("lladdr")}
            gateways = dict.fromkeys(a.gateway for a in e.addresses if a.family == family)
            for ip in [*gateways, *(n for n in known if n not in gateways)]:
                row = {"ethernet_name": e.name, key: str(ip)}
                if known.get(ip):
                    row["link_layer_address"] = str(known[ip])
                rows.append(row)
        return rows

    def resolve(self, hops: Sequence[NextHop], wait_s: float = RESOLVE_S) -> dict[NextHop, str]:
        """The MACs of ``hops`` from the neighbour tables; a hop without an entry gets a managed
        one; waits up to ``wait_s`` for those the kernel is still resolving. Unresolved hops are
        left out of the answer."""
        want = set(hops)
        got: dict[NextHop, str] = {}
        added: set[NextHop] = set()
        deadline = time.monotonic() + wait_s
        while True:
            for k in sorted({k for k, _ in want - got.keys()}):
                for family in sorted({ip.version for kk, ip in want if kk == k}):
                    table = self._table(k, family)
                    present = {ipaddress.ip_address(n["dst"]): n for n in table}
                    for hop in [h for h in want - got.keys() if h[0] == k and h[1].version == family]:
                        n = present.get(hop[1])
                        if n is not None and n.get("lladdr") and set(n.get("state", ())) & _KNOWN:
                            got[hop] = str(n["lladdr"])
                        elif n is None and hop not in added:
                            added.add(hop)
                            _run([*_ipcmd(self.netns(k)), f"-{family}", "neigh", "replace", str(hop[1]), "dev",
                                  self.ifname(k), "managed"], f"devices: {self.plan.ethernets[k].name}")
            if want <= got.keys() or time.monotonic() >= deadline:
                return got
            time.sleep(0.02)

    def ping(self, family: int, src_name: str | None, dst_ip: str | None, at: str) -> str:
        """One echo request from a device's address: ``succeeded`` or ``failed``."""
        k, a = self.plan.names.get(src_name or "", (0, None))
        if a is None or a.family != family:
            raise ConfigError(f"{at}.src_name", f"{src_name!r} is not an IPv{family} address of the config's "
                                                "devices")
        dst = parse_ip(dst_ip or "", family, f"{at}.dst_ip")
        argv = netns_argv(self.netns(k), ["ping", f"-{family}", "-n", "-q", "-c", "1", "-W", "1", "-I",
                                           str(a.address), str(dst)], self.cpus)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
        return "succeeded" if done.returncode == 0 else "failed"


def _sweep(ns: str | None) -> None:
    """Delete devices' links (and tables) left in ``ns`` by a netrig serve that is gone."""
    out = subprocess.run([*_ipcmd(ns), "-j", "link", "show"], capture_output=True, text=True, check=False, timeout=30)
    try:
        links = json.loads(out.stdout or "[]")
    except ValueError:
        return
    dead: set[int] = set()
    for link in links:
        m = _LINK.match(link.get("ifname", ""))
        if m and not m.group(0).endswith("v") and not pid_alive(int(m.group(1))):
            dead.add(int(m.group(1)))
            subprocess.run([*_ipcmd(ns), "link", "del", m.group(0)], capture_output=True, check=False, timeout=30)
    for pid in dead:
        subprocess.run(netns_argv(ns, ["nft", "delete", "table", "inet", f"netrig_devices_{pid}"]),
                       capture_output=True, check=False, timeout=30)


# ------------------------------------------------------------------------------- flows over devices

@dataclass(frozen=True)
class Ends:
    """A flow's device endpoints (``tx_rx.device``): the sending Ethernet and address (``None``: an
    Ethernet endpoint), the receiving Ethernets, the first receiver's address, and the next hop
    whose MAC is the frames' destination (``None``: the receiver's own MAC, an Ethernet flow)."""

    tx: int
    tx_address: Address | None
    rx: tuple[int, ...]
    rx_address: Address | None
    next_hop: NextHop | None


def ends(plan_: DevicePlan, tx_names: Sequence[str], rx_names: Sequence[str], at: str) -> Ends:
    """The endpoints of a flow over devices (errors name ``at``'s paths)."""
    if len(tx_names) != 1:
        raise refusal.refuse("flows[].tx_rx.device.tx_names", f"{at}.tx_names", f"{len(tx_names)} transmitters")
    if not rx_names:
        raise ConfigError(f"{at}.rx_names", "give at least one receiver (a device Ethernet, IPv4 or IPv6 name)")
    got = [plan_.names.get(n) for n in (*tx_names, *rx_names)]
    for k, hit in enumerate(got):
        if hit is None:
            path = f"{at}.tx_names[0]" if k == 0 else f"{at}.rx_names[{k - 1}]"
            raise ConfigError(path, f"{(*tx_names, *rx_names)[k]!r} is not a device Ethernet, IPv4, IPv6 or BGP "
                                    "route range of the config")
    (tx, txa), *rxs = typing.cast(list[tuple[int, Address | None]], got)
    rxa = rxs[0][1]
    for k, (_, a) in enumerate(rxs):
        if (a is None) != (txa is None) or (a is not None and txa is not None and a.family != txa.family):
            raise ConfigError(f"{at}.rx_names[{k}]", "is not the kind of the transmitter (Ethernet, IPv4 or IPv6): "
                                                     "give endpoints of one kind")
    hop = (tx, txa.next_hop(rxa.address)) if txa is not None and rxa is not None else None
    return Ends(tx, txa, tuple(dict.fromkeys(k for k, _ in rxs)), rxa, hop)


def fixed_mac(plan_: DevicePlan, e: Ends) -> str | None:
    """The destination MAC a flow has without resolution: an Ethernet flow's receiver's, or a
    gateway's given as ``gateway_mac``; ``None``: resolve the next hop."""
    if e.next_hop is None:
        return plan_.ethernets[e.rx[0]].mac
    a = e.tx_address
    return a.gateway_mac if a is not None and e.next_hop[1] == a.gateway else None


def packet_of(plan_: DevicePlan, packet: Sequence[dict[str, Any]], e: Ends, dst_mac: str | None
              ) -> tuple[list[dict[str, Any]], bool]:
    """A flow's headers with what its devices fill in: an unset ``ethernet.src`` is the sender's
    MAC, an unset or auto ``ethernet.dst`` is ``dst_mac`` (all zeros until it is known), unset IP
    addresses are the endpoints'. Also whether the destination MAC came from here (to be resolved)."""
    out = [dict(h) for h in packet]
    eth = next((h for h in out if h.get("choice") == "ethernet"), None)
    filled = False
    if eth is not None:
        body = eth["ethernet"] = dict(eth.get("ethernet") or {})
        body.setdefault("src", {"choice": "value", "value": plan_.ethernets[e.tx].mac})
        dst = body.get("dst") or {}
        given = next((k for k in ("value", "values", "increment", "decrement", "random") if k in dst), "auto")
        if dst.get("choice", given) == "auto":
            body["dst"] = {"choice": "value", "value": dst_mac or "00:00:00:00:00:00"}
            filled = True
    if e.tx_address is not None and e.rx_address is not None:
        kind = f"ipv{e.tx_address.family}"
        ip = next((h for h in out if h.get("choice") == kind), None)
        if ip is not None:
            body = ip[kind] = dict(ip.get(kind) or {})
            body.setdefault("src", {"choice": "value", "value": str(e.tx_address.address)})
            body.setdefault("dst", {"choice": "value", "value": str(e.rx_address.address)})
    return out, filled
