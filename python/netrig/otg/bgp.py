"""OTG BGP on netrig serve's devices, served by BIRD 2 (the Debian package, chosen by measurement:
docs/routing-daemons.md): one BIRD per port namespace that holds a BGP peer, speaking from the
devices' addresses. No protocol code here.

::

    config.devices[].bgp ──plan()──▶ BgpPlan: checked whole (names, each interface a device
        address, AS, hold times, route ranges: their prefixes, communities, AS paths, next hops);
        each route range also a flow endpoint (its first prefix's first address, on its peer's
        Ethernet)
    BgpPlan ──Speakers.start()──▶ per namespace: ``bird -f -c <dir>/<k>.conf -s <dir>/<k>.ctl``:
        ``protocol device`` and ``direct``; per route range a ``static`` protocol (blackhole routes: advertised,
        never installed) named ``r<j>``; per peer a ``bgp`` protocol ``p<j>`` from its device's
        address (``local``, ``strict bind``) to ``neighbor <peer> external|internal``, exporting
        its own ranges (communities, AS path and next hop set in its export filter) and importing
        what it hears into its own table only (no ``kernel`` protocol: the port's namespace routes
        nothing it learns)
    Speakers.metrics(family, names) ──▶ ``birdc show protocols all`` → Bgpv4Metric / Bgpv6Metric
    Speakers.prefixes(request) ──▶ ``birdc show route protocol p<j> all`` → BgpPrefixesState
    Speakers.set_peers / set_routes ──▶ ``birdc enable|disable``: sessions up and down, ranges
        advertised and withdrawn (``control/state protocol``)
    Speakers.close() ──▶ every BIRD stopped (SIGTERM, then SIGKILL), its directory removed

The sessions are TCP between the devices' macvlans, which the devices' nftables table lets in on
the BGP ports (:class:`netrig.otg.devices.Devices`): the kernel carries them, the tester's steering
program and receive sockets leave them to it, and no test frame is ever one of them.
"""
from __future__ import annotations

import ipaddress
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from netrig.errors import ConfigError, NetrigError
from netrig.otg import refusal
from netrig.otg.daemons import netns_argv, signal_group
from netrig.otg.devices import Address, DevicePlan, Ip, parse_ip
from netrig.otg.objects import (
    BgpAdvanced,
    BgpAsPath,
    BgpCommunity,
    BgpV4Peer,
    BgpV4RouteRange,
    BgpV6Peer,
    BgpV6RouteRange,
    Device,
    V4RouteAddress,
    V6RouteAddress,
)
from netrig.testbed.bgp import BIRD_LOG
from netrig.testbed.state import pid_alive

#: How long BIRD may take to open its control socket, s.
START_S = 10.0
#: Well-known communities by the model's type (RFC 1997, RFC 9494's LLGR).
_WELL_KNOWN = {"no_export": (65535, 65281), "no_advertised": (65535, 65282),
               "no_export_subconfed": (65535, 65283), "llgr_stale": (65535, 6), "no_llgr": (65535, 7)}
#: A session's first connect 1 s after its start, not BIRD's default 5 s.
_FAST = "connect delay time 1; connect retry time 5;"
#: A route range of more prefixes than this is refused (one BIRD config line each).
MAX_PREFIXES = 2_000_000


@dataclass(frozen=True)
class RouteRange:
    """A BGP route range (``BgpV4RouteRange`` / ``BgpV6RouteRange``): its prefixes and what its
    export sets."""

    name: str
    family: int
    prefixes: tuple[tuple[Ip, int, int, int], ...]  # (first address, prefix, count, step)
    communities: tuple[tuple[int, int], ...]
    as_path: tuple[int, ...]
    next_hop: Ip | None  # None: the peer's own address (local_ip)

    def networks(self) -> Iterator[str]:
        for first, plen, count, step in self.prefixes:
            size = 1 << ((32 if self.family == 4 else 128) - plen)
            for k in range(count):
                yield f"{first + k * step * size}/{plen}"

    @property
    def count(self) -> int:
        return sum(c for _, _, c, _ in self.prefixes)


@dataclass(frozen=True)
class Peer:
    """A BGP peer of a device: where it speaks from and to, and its route ranges."""

    name: str
    device: str
    router_id: str
    local: Address
    peer_address: Ip
    internal: bool
    as_number: int
    advanced: BgpAdvanced | None
    ranges: tuple[RouteRange, ...]


@dataclass(frozen=True)
class BgpPlan:
    """The BGP peers of a config, checked, and the TCP ports their sessions use."""

    peers: tuple[Peer, ...] = ()
    tcp_ports: frozenset[int] = frozenset()
    #: Every route range as a flow endpoint: an address on its peer's Ethernet.
    endpoints: dict[str, tuple[int, Address]] = field(default_factory=dict)


def _refuse_set(others: dict[str, Any], pattern: str, at: str) -> None:
    for key, value in others.items():
        if value not in (None, [], {}):
            raise refusal.refuse(pattern, f"{at}.{key}")


def plan(devices: Sequence[Device], dplan: DevicePlan) -> BgpPlan:
    """The BGP of a config's devices, checked whole against their addresses (``dplan``)."""
    peers: list[Peer] = []
    names = set(dplan.names)
    for i, d in enumerate(devices):
        if d.bgp is None:
            continue
        at = f"devices[{i}].bgp"
        try:
            ipaddress.IPv4Address(d.bgp.router_id)
        except ValueError:
            raise ConfigError(f"{at}.router_id", f"{d.bgp.router_id!r} is not an IPv4 address (a BGP identifier "
                                                 "is written as one)") from None
        interfaces: list[tuple[int, str, Sequence[BgpV4Peer | BgpV6Peer], str]] = [
            *((4, i4.ipv4_name, i4.peers, f"{at}.ipv4_interfaces[{k}]") for k, i4 in enumerate(d.bgp.ipv4_interfaces)),
            *((6, i6.ipv6_name, i6.peers, f"{at}.ipv6_interfaces[{k}]") for k, i6 in enumerate(d.bgp.ipv6_interfaces))]
        for family, address_name, group, iat in interfaces:
            local = _local(dplan, d.name, address_name, family, f"{iat}.ipv{family}_name")
            for j, p in enumerate(group):
                peers.append(_peer(p, d.name, d.bgp.router_id, local, names, f"{iat}.peers[{j}]"))
    ports = frozenset(port for p in peers for port in _ports(p.advanced))
    endpoints = {r.name: (p.local.ethernet, _endpoint(r, p)) for p in peers for r in p.ranges}
    return BgpPlan(tuple(peers), ports, endpoints)


def _local(dplan: DevicePlan, device: str, name: str, family: int, at: str) -> Address:
    hit = dplan.names.get(name)
    if hit is None or hit[1] is None or hit[1].family != family:
        raise ConfigError(at, f"{name!r} is not an IPv{family} address of the config's devices")
    if dplan.ethernets[hit[0]].device != device:
        raise ConfigError(at, f"{name!r} is an address of device {dplan.ethernets[hit[0]].device!r}: a BGP "
                              "interface is one of its own device's addresses")
    return hit[1]


def _peer(p: BgpV4Peer | BgpV6Peer, device: str, router_id: str, local: Address, names: set[str],
          at: str) -> Peer:
    _refuse_set(p.others, "devices[].bgp.*.peers[].*", at)
    named = [(p.name, at), *((r.name, f"{at}.v4_routes[{k}]") for k, r in enumerate(p.v4_routes)),
             *((r6.name, f"{at}.v6_routes[{k}]") for k, r6 in enumerate(p.v6_routes))]
    for n, where in named:
        if n in names:
            raise ConfigError(f"{where}.name", f"{n!r} is already a name in the config's devices")
        names.add(n)
    if isinstance(p, BgpV4Peer) and not p.traditional_nlri_for_ipv4_routes:
        raise refusal.refuse("devices[].bgp.*.peers[].*", f"{at}.traditional_nlri_for_ipv4_routes")
    peer = parse_ip(p.peer_address, local.family, f"{at}.peer_address")
    if peer == local.address:
        raise ConfigError(f"{at}.peer_address", "is the device's own address: give the neighbour's")
    if not 1 <= p.as_number <= 0xFFFFFFFF or (p.as_number_width == "two" and p.as_number > 0xFFFF):
        raise ConfigError(f"{at}.as_number", f"{p.as_number} is not a {p.as_number_width}-byte AS number")
    if p.advanced is not None:
        _advanced(p.advanced, f"{at}.advanced")
    other = p.v6_routes if local.family == 4 else p.v4_routes
    if other:
        key = "v6_routes" if local.family == 4 else "v4_routes"
        raise refusal.refuse("devices[].bgp.*.peers[].v*_routes", f"{at}.{key}",
                             f"IPv{10 - local.family} routes over an IPv{local.family} session")
    ranges = (*(_range(r, 4, local, f"{at}.v4_routes[{k}]") for k, r in enumerate(p.v4_routes)),
              *(_range(r, 6, local, f"{at}.v6_routes[{k}]") for k, r in enumerate(p.v6_routes)))
    return Peer(p.name, device, router_id, local, peer, p.as_type == "ibgp", p.as_number, p.advanced, ranges)


def _advanced(a: BgpAdvanced, at: str) -> None:
    if a.hold_time_interval and not 3 <= a.hold_time_interval <= 65535:
        raise ConfigError(f"{at}.hold_time_interval", f"{a.hold_time_interval} s: a hold time is 0 or 3–65535 s")
    if a.hold_time_interval and not 1 <= a.keep_alive_interval <= a.hold_time_interval:
        raise ConfigError(f"{at}.keep_alive_interval", f"{a.keep_alive_interval} s is not within the hold time "
                                                       f"({a.hold_time_interval} s)")
    if a.update_interval or a.time_to_live != 64:
        what = "update_interval" if a.update_interval else "time_to_live"
        raise refusal.refuse("devices[].bgp.*.peers[].advanced", f"{at}.{what}")


def _ports(a: BgpAdvanced | None) -> tuple[int, ...]:
    return (179,) if a is None else (a.listen_port, a.neighbor_port)


def _range(r: BgpV4RouteRange | BgpV6RouteRange, family: int, local: Address, at: str) -> RouteRange:
    _refuse_set(r.others, "devices[].bgp.*.peers[].v*_routes[].*", at)
    if not r.addresses:
        raise ConfigError(f"{at}.addresses", "give at least one address (its prefix, count and step)")
    bits = 32 if family == 4 else 128
    prefixes = []
    addresses: Sequence[V4RouteAddress | V6RouteAddress] = r.addresses
    for k, a in enumerate(addresses):
        aat = f"{at}.addresses[{k}]"
        try:
            net = ipaddress.ip_network(f"{a.address}/{a.prefix}", strict=False)
        except ValueError:
            raise ConfigError(f"{aat}.address", f"{a.address!r}/{a.prefix} is not an IPv{family} prefix") from None
        if net.version != family:
            raise ConfigError(f"{aat}.address", f"{a.address!r} is not an IPv{family} address")
        last = int(net.network_address) + ((a.count - 1) * a.step + 1) * (1 << (bits - a.prefix)) - 1
        if a.count < 1 or a.step < 1 or last >= 1 << bits:
            raise ConfigError(f"{aat}.count", f"{a.count} prefixes {a.step} apart from {net} run past the "
                                              f"IPv{family} space: give fewer, or a smaller step")
        prefixes.append((net.network_address, a.prefix, a.count, a.step))
    if sum(p[2] for p in prefixes) > MAX_PREFIXES:
        raise ConfigError(f"{at}.addresses", f"more than {MAX_PREFIXES:,} prefixes in one range: split it")
    return RouteRange(r.name, family, tuple(prefixes), tuple(_communities(r.communities, f"{at}.communities")),
                      _as_path(r.as_path, f"{at}.as_path"), _next_hop(r, local, at))


def _communities(cs: Sequence[BgpCommunity], at: str) -> Iterator[tuple[int, int]]:
    for k, c in enumerate(cs):
        if c.type in _WELL_KNOWN:
            yield _WELL_KNOWN[c.type]
        elif c.type == "manual_as_number":
            if not (0 <= c.as_number <= 0xFFFF and 0 <= c.as_custom <= 0xFFFF):
                raise ConfigError(f"{at}[{k}]", f"({c.as_number}, {c.as_custom}): a community's halves are "
                                                "0–65535 each")
            yield c.as_number, c.as_custom
        else:
            raise ConfigError(f"{at}[{k}].type", "give the community's type (manual_as_number, no_export, …)")


def _as_path(p: BgpAsPath | None, at: str) -> tuple[int, ...]:
    if p is None:
        return ()
    if p.as_set_mode not in ("do_not_include_local_as", "include_as_seq"):
        raise refusal.refuse("devices[].bgp.*.peers[].v*_routes[].as_path", f"{at}.as_set_mode", p.as_set_mode)
    out: list[int] = []
    for k, s in enumerate(p.segments):
        if s.type != "as_seq":
            raise refusal.refuse("devices[].bgp.*.peers[].v*_routes[].as_path", f"{at}.segments[{k}].type", s.type)
        out += s.as_numbers
    return tuple(out)


def _next_hop(r: BgpV4RouteRange | BgpV6RouteRange, local: Address, at: str) -> Ip | None:
    if r.next_hop_mode != "manual":
        return None
    kind = r.next_hop_address_type
    if kind != f"ipv{local.family}":
        raise refusal.refuse("devices[].bgp.*.peers[].v*_routes[].next_hop_address_type",
                             f"{at}.next_hop_address_type", kind)
    text = r.next_hop_ipv4_address if kind == "ipv4" else r.next_hop_ipv6_address
    hop = ipaddress.ip_address(text)
    if hop.is_unspecified:
        raise ConfigError(f"{at}.next_hop_{kind}_address", "is unset: give the next hop, or next_hop_mode local_ip")
    return hop


def _endpoint(r: RouteRange, p: Peer) -> Address:
    """A route range as a flow's endpoint: its first prefix's first address, on its peer's
    Ethernet (frames to it leave a sender through its gateway, and arrive at that Ethernet's port)."""
    first, plen, _, _ = r.prefixes[0]
    return Address(r.name, r.family, first, plen, p.local.gateway, None, p.local.ethernet)


# ------------------------------------------------------------------------------------- BIRD configs

def _proto(j: int) -> str:
    return f"p{j}"


def config_lines(peers: Sequence[tuple[int, Peer]]) -> Iterator[str]:
    """One BIRD's configuration (the peers of one namespace, by their index in the plan), line by
    line: a million prefixes are a million lines."""
    # direct: the links' subnets, so an iBGP route's next hop (resolved recursively) is reachable
    yield from (BIRD_LOG, f"router id {peers[0][1].router_id};", "protocol device { scan time 10; }",
                "protocol direct { ipv4; ipv6; }")
    for j, p in peers:
        for k, r in enumerate(p.ranges):
            yield f"protocol static {_proto(j)}r{k} {{ ipv{r.family};"
            yield from (f"  route {n} blackhole;" for n in r.networks())
            yield "}"
    for j, p in peers:
        yield from _bgp_lines(j, p)


def _bgp_lines(j: int, p: Peer) -> Iterator[str]:
    a = p.advanced
    listen = f" port {a.listen_port}" if a is not None and a.listen_port != 179 else ""
    port = f" port {a.neighbor_port}" if a is not None and a.neighbor_port != 179 else ""
    yield f"protocol bgp {_proto(j)} {{"
    yield f'  description "{p.name}"; router id {p.router_id}; debug {{ states }};'
    yield (f"  local {p.local.address}{listen} as {p.as_number}; strict bind on; "
           f"neighbor {p.peer_address}{port} {'internal' if p.internal else 'external'}; {_FAST}")
    if a is not None:
        yield f"  hold time {a.hold_time_interval}; keepalive time {a.keep_alive_interval};"
        if a.passive_mode:
            yield "  passive on;"
        if a.md5_key:
            yield f'  password "{a.md5_key}";'
    exports = "".join(_export(j, k, r) for k, r in enumerate(p.ranges))
    # a range's own next hop needs BIRD's choice of ours off; without one, ours (eBGP and iBGP)
    hop = "" if any(r.next_hop is not None for r in p.ranges) else " next hop self;"
    yield f"  ipv{p.local.family} {{ import all; export filter {{{exports} reject; }};{hop} }};"
    yield "}"


def _export(j: int, k: int, r: RouteRange) -> str:
    sets = [f" bgp_community.add(({x}, {y}));" for x, y in r.communities]
    sets += [f" bgp_path.prepend({n});" for n in reversed(r.as_path)]
    if r.next_hop is not None:
        sets.append(f" bgp_next_hop = {r.next_hop};")
    return f" if proto = \"{_proto(j)}r{k}\" then {{{''.join(sets)} accept; }}"


# ------------------------------------------------------------------------------------------ runtime

class Speakers:
    """A config's BGP peers served by BIRD in their ports' namespaces (see the module doc)."""

    def __init__(self, plan_: BgpPlan, netns_of: Sequence[str | None], cpus: Sequence[int] = ()):
        """``netns_of``: each device Ethernet's namespace (its port's); ``cpus``: where each BIRD
        runs (the senders' CPUs: netrig.otg.daemons)."""
        self.plan = plan_
        self.cpus = tuple(cpus)
        groups: dict[str | None, list[int]] = {}
        for j, p in enumerate(plan_.peers):
            groups.setdefault(netns_of[p.local.ethernet], []).append(j)
        #: Per BIRD: its namespace and the plan's peers it serves.
        self.birds = tuple(groups.items())
        self.dir = tempfile.mkdtemp(prefix=f"netrig-bgp-{os.getpid()}-")
        self.procs: list[subprocess.Popen[bytes]] = []

    def ctl(self, k: int) -> str:
        return f"{self.dir}/{k}.ctl"

    def log(self, k: int) -> str:
        return f"{self.dir}/{k}.log"

    def start(self) -> None:
        """Start every BIRD; on a failure stop them all and raise (one line)."""
        _sweep()
        try:
            for k, (ns, peers) in enumerate(self.birds):
                self._start(k, ns, peers)
        except BaseException:
            self.close()
            raise

    def _start(self, k: int, ns: str | None, peers: list[int]) -> None:
        at = f"bgp on {', '.join(self.plan.peers[j].name for j in peers)}"
        bird = shutil.which("bird")
        if bird is None:
            raise NetrigError(f"{at}: BIRD is not installed: apt install bird2 (scripts/setup.sh installs it)")
        conf = f"{self.dir}/{k}.conf"
        with open(conf, "w") as f:
            f.write(f'log "{self.log(k)}" all;\n')
            f.writelines(line + "\n" for line in config_lines([(j, self.plan.peers[j]) for j in peers]))
        done = subprocess.run([bird, "-p", "-c", conf], capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise ConfigError(f"devices: {at}", f"BIRD refused its configuration: {done.stderr.strip()}")
        self.procs.append(subprocess.Popen(netns_argv(ns, [bird, "-f", "-c", conf, "-s", self.ctl(k)], self.cpus),
                                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.PIPE, start_new_session=True))
        end = time.monotonic() + START_S
        while self._cli(k, ["show", "status"], check=False) is None:
            proc = self.procs[-1]
            if proc.poll() is not None or time.monotonic() > end:
                err = (proc.stderr.read() if proc.poll() is not None and proc.stderr else b"").decode(
                    errors="replace").strip().splitlines()
                raise NetrigError(f"{at}: BIRD did not start: {err[-1] if err else 'no control socket'}")
            time.sleep(0.02)

    def _cli(self, k: int, args: list[str], check: bool = True) -> str | None:
        """``birdc`` on BIRD ``k``'s socket: its answer (``None``: it failed and not ``check``)."""
        done = subprocess.run(["birdc", "-s", self.ctl(k), *args], capture_output=True, text=True, timeout=60,
                              check=False)
        bad = done.returncode != 0 or "Unable to connect" in done.stdout
        if bad and check:
            raise NetrigError(f"bgp: birdc {' '.join(args)}: {(done.stderr or done.stdout).strip() or done.returncode}")
        return None if bad else done.stdout

    def close(self) -> None:
        """Stop every BIRD (each in a session of its own) and remove their directory."""
        for p in self.procs:
            signal_group(p.pid, signal.SIGTERM)
        end = time.monotonic() + 5
        for p in self.procs:
            while p.poll() is None and time.monotonic() < end:
                time.sleep(0.01)
            if p.poll() is None:
                signal_group(p.pid, signal.SIGKILL)
                p.wait()
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)

    # -------------------------------------------------------------------------------- control

    def _bird_of(self, j: int) -> int:
        return next(k for k, (_, peers) in enumerate(self.birds) if j in peers)

    def peers_named(self, names: Sequence[str], at: str) -> list[int]:
        known = [p.name for p in self.plan.peers]
        for i, n in enumerate(names):
            if n not in known:
                raise ConfigError(f"{at}[{i}]", f"{n!r} is not a BGP peer of the config")
        return [j for j, p in enumerate(self.plan.peers) if not names or p.name in names]

    def ranges_named(self, names: Sequence[str], at: str) -> list[tuple[int, int]]:
        """(peer, range) of each route range named (none: every one)."""
        every = [(j, k) for j, p in enumerate(self.plan.peers) for k in range(len(p.ranges))]
        known = {self.plan.peers[j].ranges[k].name: (j, k) for j, k in every}
        for i, n in enumerate(names):
            if n not in known:
                raise ConfigError(f"{at}[{i}]", f"{n!r} is not a BGP route range of the config")
        return [known[n] for n in names] if names else every

    def set_peers(self, peers: Sequence[int], up: bool) -> None:
        """Sessions up (enabled: BIRD connects) or down (disabled: it closes them, its routes withdrawn)."""
        for j in peers:
            self._cli(self._bird_of(j), ["enable" if up else "disable", _proto(j)])

    def set_routes(self, ranges: Sequence[tuple[int, int]], advertise: bool) -> None:
        """Route ranges advertised (their static protocol enabled) or withdrawn (disabled)."""
        for j, k in ranges:
            self._cli(self._bird_of(j), ["enable" if advertise else "disable", f"{_proto(j)}r{k}"])

    # -------------------------------------------------------------------------------- reading

    def metrics(self, family: int, names: Sequence[str], at: str) -> list[dict[str, Any]]:
        """``monitor/metrics`` bgpv4 / bgpv6: per peer of that family, its session and its routes."""
        rows = []
        for j in self.peers_named(names, at):
            p = self.plan.peers[j]
            if p.local.family != family:
                continue
            k = self._bird_of(j)
            text = self._cli(k, ["show", "protocols", "all", _proto(j)]) or ""
            rows.append(metric_row(p.name, text, _flaps(self.log(k), _proto(j))))
        return rows

    def prefixes(self, names: Sequence[str], families: Sequence[str], at: str,
                 filters: dict[int, list[tuple[Ip | None, int | None]]]) -> list[dict[str, Any]]:
        """``monitor/states`` bgp_prefixes: per peer, the prefixes it received (``families``:
        ``ipv4_unicast``, ``ipv6_unicast``; none: both), as its BIRD holds them."""
        out = []
        for j in self.peers_named(names, at):
            p = self.plan.peers[j]
            text = self._cli(self._bird_of(j), ["show", "route", "protocol", _proto(j), "all"]) or ""
            row: dict[str, Any] = {"bgp_peer_name": p.name}
            for family, routes in ((4, []), (6, [])):
                if families and f"ipv{family}_unicast" not in families:
                    continue
                routes += [r for r in read_routes(text, family) if _wanted(r, filters.get(family, []))]
                row[f"ipv{family}_unicast_prefixes"] = routes
            out.append(row)
        return out


def _wanted(route: dict[str, Any], filters: list[tuple[Ip | None, int | None]]) -> bool:
    if not filters:
        return True
    key = "ipv4_address" if "ipv4_address" in route else "ipv6_address"
    return any((a is None or str(a) == route[key]) and (n is None or n == route["prefix_length"])
               for a, n in filters)


def _sweep() -> None:
    """Stop the BIRDs a netrig serve that is gone left running (their directory names its pid)."""
    tmp = tempfile.gettempdir()
    for entry in os.listdir(tmp):
        m = re.match(r"^netrig-bgp-(\d+)-", entry)
        if m is None or pid_alive(int(m.group(1))):
            continue
        subprocess.run(["pkill", "-f", f"{tmp}/{entry}/"], capture_output=True, check=False, timeout=10)
        shutil.rmtree(f"{tmp}/{entry}", ignore_errors=True)


# ------------------------------------------------------------------------------ reading BIRD's text

#: BIRD's BGP states → the model's FSM states.
_FSM = {"Idle": "idle", "Connect": "connect", "Active": "active", "OpenSent": "opensent",
        "OpenConfirm": "openconfirm", "Established": "established"}
_ROUTES = re.compile(r"Routes:\s+(\d+) imported, (?:(\d+) filtered, )?(\d+) exported")
_STATS = re.compile(r"^\s*(Import|Export) (updates|withdraws):\s+(.*)$")


def metric_row(name: str, text: str, flaps: int) -> dict[str, Any]:
    """A Bgpv4Metric / Bgpv6Metric row from ``birdc show protocols all <peer>``: the session's
    state, routes received (imported) and advertised (exported), withdraws sent and received;
    ``flaps``: times its session went down once established. BIRD counts no messages, so the
    model's message counters are left out."""
    m = re.search(r"BGP state:\s+(\w+)", text)
    fsm = _FSM.get(m.group(1), "idle") if m else "idle"
    row: dict[str, Any] = {"name": name, "session_state": "up" if fsm == "established" else "down",
                           "fsm_state": fsm, "session_flap_count": flaps, "routes_received": 0,
                           "routes_advertised": 0, "route_withdraws_received": 0, "route_withdraws_sent": 0}
    r = _ROUTES.search(text)
    if r:
        row["routes_received"], row["routes_advertised"] = int(r.group(1)), int(r.group(3))
    for line in text.splitlines():
        s = _STATS.match(line)
        if s is None or s.group(2) != "withdraws":
            continue
        cols = s.group(3).split()  # received rejected filtered ignored accepted
        if s.group(1) == "Import":
            row["route_withdraws_received"] = _int(cols[0])
        else:
            row["route_withdraws_sent"] = _int(cols[-1])
    return row


def _int(text: str) -> int:
    return int(text) if text.isdigit() else 0


def _flaps(log: str, proto: str) -> int:
    """Times ``proto``'s session left the established state, from BIRD's log of its states."""
    flaps, up = 0, False
    try:
        with open(log) as f:
            for line in f:
                if f" {proto}: " not in line:
                    continue
                if "State changed to up" in line:
                    up = True
                elif up and "State changed to " in line:  # start (lost, reconnecting), stop, down
                    flaps, up = flaps + 1, False
    except OSError:
        return 0
    return flaps


_ROUTE_HEAD = re.compile(r"^(\S+)\s+(?:unicast|unreachable|blackhole|prohibited)\s+\[")
_ORIGINS = {"IGP": "igp", "EGP": "egp", "Incomplete": "incomplete"}
_COMMUNITY = re.compile(r"\((\d+),\s*(\d+)\)")
_KNOWN_COMMUNITIES = {v: k for k, v in _WELL_KNOWN.items()}


def read_routes(text: str, family: int) -> list[dict[str, Any]]:
    """The routes of ``family`` in ``birdc show route … all``, as BgpPrefixIpv4UnicastState /
    BgpPrefixIpv6UnicastState rows."""
    out: list[dict[str, Any]] = []
    row: dict[str, Any] | None = None
    for line in text.splitlines():
        head = _ROUTE_HEAD.match(line)
        if head:
            net = ipaddress.ip_network(head.group(1), strict=False)
            row = None
            if net.version == family:
                row = {f"ipv{family}_address": str(net.network_address), "prefix_length": net.prefixlen}
                out.append(row)
            continue
        if row is None:
            continue
        key, _, value = line.strip().partition(": ")
        _attribute(row, key, value.strip())
    return out


def _attribute(row: dict[str, Any], key: str, value: str) -> None:
    if key == "BGP.origin":
        row["origin"] = _ORIGINS.get(value, "incomplete")
    elif key == "BGP.as_path":
        numbers = [int(n) for n in value.split() if n.isdigit()]
        row["as_path"] = {"segments": [{"type": "as_seq", "as_numbers": numbers}] if numbers else []}
    elif key == "BGP.next_hop":
        for hop in value.split():
            ip = ipaddress.ip_address(hop)
            if ip.version == 4:
                row.setdefault("ipv4_next_hop", hop)
            elif not ip.is_link_local:
                row.setdefault("ipv6_next_hop", hop)
    elif key == "BGP.local_pref":
        row["local_preference"] = int(value)
    elif key == "BGP.med":
        row["multi_exit_discriminator"] = int(value)
    elif key == "BGP.community":
        row["communities"] = [_community(int(a), int(b)) for a, b in _COMMUNITY.findall(value)]


def _community(a: int, b: int) -> dict[str, Any]:
    kind = _KNOWN_COMMUNITIES.get((a, b))
    if kind is not None:
        return {"type": kind}
    return {"type": "manual_as_number", "as_number": a, "as_custom": b}
