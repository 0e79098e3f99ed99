"""The topology registry: one class per topology, each with a one-line description and ``build(tb)``.

Addressing plan (RFC 2544 / RFC 5180 benchmarking ranges only):

=================  ===================  =========================  ==========================
link               DUT side             tester side                 routed behind the tester
=================  ===================  =========================  ==========================
tx ↔ DUT (left)    198.18.0.1/24        198.18.0.2 (tx)             198.18.0.0/16
                   2001:2::1/64         2001:2::2                   2001:2:0:200::/56
DUT ↔ rx (right)   198.19.0.1/24        198.19.0.2 (rx)             198.19.0.0/16
                   2001:2:0:1::1/64     2001:2:0:1::2               2001:2:0:100::/56
=================  ===================  =========================  ==========================

Every other address of a link subnet is routed to the tester port too (``_behind_the_port``), so
traffic spread over destinations (``dst_ips``) reaches the tester from the first address on.

L2 topologies (loopback, bridge) put both tester ports in 198.18.0.0/24 (.2 and .3) and
2001:2::/64 (::2 and ::3); fourport's second pair uses 198.18.1.0/24 and 2001:2:0:1::/64.
"""
from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from netrig.errors import ConfigError, InterfaceError, TestbedError
from netrig.testbed import bgp, nft, placement, testpmd
from netrig.testbed import state as st
from netrig.testbed.knobs import features_set_in
from netrig.testbed.links import BULK_PROTO, read_neighbours
from netrig.testbed.nsthread import read_sysctl, run_in_netns, sysctl_in, sysctls_in
from netrig.testbed.options import MAX_V4_ROUTES, TestbedOptions
from netrig.testbed.state import (
    CaptureRecord,
    DutProcess,
    FlowtableRecord,
    Interface,
    Placement,
    PolicerRecord,
    TestbedState,
    TesterPort,
)

TESTER_SYSCTLS = {
    # tester ports carry no stack traffic: no IPv6 (no RS/MLD/DAD noise), no forwarding, no addresses
    "net.ipv6.conf.all.disable_ipv6": 1,
    "net.ipv6.conf.default.disable_ipv6": 1,
    "net.ipv4.ip_forward": 0,
}
TESTER_STACK_SYSCTLS = {
    "net.ipv6.conf.all.accept_dad": 0,
    "net.ipv6.conf.default.accept_dad": 0,
    "net.ipv6.conf.default.accept_ra": 0,
    "net.ipv6.conf.default.router_solicitations": 0,
    "net.ipv4.ip_forward": 0,
}
ROUTER_SYSCTLS = {
    "net.ipv4.ip_forward": 1,
    "net.ipv6.conf.all.forwarding": 1,
    "net.ipv6.conf.default.forwarding": 1,
    "net.ipv6.conf.all.accept_dad": 0,
    "net.ipv6.conf.default.accept_dad": 0,
    "net.ipv6.conf.default.accept_ra": 0,
    "net.ipv4.conf.all.rp_filter": 0,
    "net.ipv4.conf.default.rp_filter": 0,
    "net.ipv4.conf.all.send_redirects": 0,
    "net.ipv4.conf.default.send_redirects": 0,
}
BRIDGE_SYSCTLS = {
    "net.ipv6.conf.all.disable_ipv6": 1,
    "net.ipv6.conf.default.disable_ipv6": 1,
    # A snooping bridge joins the all-snoopers group (224.0.0.106) and reported it (IGMPv3, from
    # 0.0.0.0) onto the tester's ports up to ~1 s after it came up: one foreign frame in a trial
    # started at once. Link-local groups are not reported; the bridge still snoops.
    "net.ipv4.igmp_link_local_mcast_reports": 0,
}

LEFT4, LEFT6 = ("198.18.0.1", "198.18.0.2"), ("2001:2::1", "2001:2::2")
RIGHT4, RIGHT6 = ("198.19.0.1", "198.19.0.2"), ("2001:2:0:1::1", "2001:2:0:1::2")
STATIC_NAT4, STATIC_NAT6 = "198.19.0.100", "2001:2:0:1::100"


#: Options every topology built of namespaces and veth pairs reads.
LINK_OPTIONS = ("tester_stack", "mtu")
#: Options of a topology with a Linux DUT to place on CPUs.
DUT_OPTIONS = (*LINK_OPTIONS, "dut_cpus", "dut_placement", "dut_ring")
#: Options of a DUT that tracks connections (the conntrack table's size, hash size and timeouts).
CONNTRACK_OPTIONS = ("conntrack_max", "conntrack_buckets", "conntrack_timeout_s")
#: Options of a routing DUT: its placement and nftables' software fast path.
ROUTED_OPTIONS = (*DUT_OPTIONS, "flowtable", "dut_neighbours", "routes", "routing", "bgp_paths", "hosts")


class Topology:
    name: ClassVar[str]
    description: ClassVar[str]
    uses: ClassVar[tuple[str, ...]] = LINK_OPTIONS  # options this topology reads
    has_dut: ClassVar[bool] = False  # a Linux DUT in a namespace (interfaces of role "dut")

    def validate(self, o: TestbedOptions) -> None:
        """Refuse every option this topology would ignore: it would build another test bed than
        the one asked for (``router`` with ``cap`` is no policer)."""
        if o.dut_cpus is not None and "dut_cpus" not in self.uses:
            raise ConfigError("dut_cpus", f"topology {self.name} has no DUT to place")
        if o.ifaces and "ifaces" not in self.uses:
            raise ConfigError("ifaces", f"only the external topology takes interfaces, not {self.name}")
        for name in o.changed():
            if name not in self.uses:
                users = [t.name for t in TOPOLOGIES.values() if name in t.uses]
                raise ConfigError(name, f"topology {self.name} does not use this option (it is one of "
                                        f"{', '.join(users)}); leave it out or pick that topology")

    def build(self, tb: Any) -> None:
        raise NotImplementedError

    @staticmethod
    def tester_ns(tb: Any, role: str) -> str:
        """A tester namespace: no IPv6 noise, unless its stack has addresses (``tester_stack``, or
        answering a DUT's ARP and ND: ``dut_neighbours`` resolved, or the rx side's ``hosts``, or its
        BGP speaker: ``routing`` bgp)."""
        rx_stack = role == "rx" and (tb.options.hosts > 0 or tb.options.routing == "bgp")
        stack = tb.options.tester_stack or tb.options.dut_neighbours == "resolved" or rx_stack
        return tb.add_netns(role, TESTER_STACK_SYSCTLS if stack else TESTER_SYSCTLS)


def _port(tb: Any, name: str, ifname: str, ns: str, ipv4: str, ipv6: str, peer_mac: str,
          gw4: str | None = None, gw6: str | None = None) -> None:
    tb.state.ports.append(TesterPort(name, ifname, ns, tb.mac(ns, ifname), ipv4, ipv6, peer_mac, gw4, gw6))


def _tester_stack(tb: Any, ns: str, ifname: str, v4: str, v6: str, plen4: int, plen6: int,
                  gw4: str | None, gw6: str | None, answer: bool = False) -> None:
    """Give a tester port its addresses in its own kernel stack: with ``tester_stack`` (and a
    default route), or to ``answer`` the DUT's ARP and ND (``dut_neighbours`` resolved)."""
    if not tb.options.tester_stack and not answer:
        return
    tb.add_addr(ns, ifname, f"{v4}/{plen4}")
    tb.add_addr(ns, ifname, f"{v6}/{plen6}")
    if gw4 and tb.options.tester_stack:
        tb.add_route(ns, "0.0.0.0/0", gw4)
    if gw6 and tb.options.tester_stack:
        tb.add_route(ns, "::/0", gw6)
    _nft(tb, ns, nft.tester_quiet_ruleset(tb.id))


def _resolve(tb: Any, dut: str, addresses: Sequence[str]) -> None:
    """``dut_neighbours`` resolved: the DUT pings each tester address once, so it resolves them by
    ARP and ND before any trial (its entries then age and are re-confirmed as any host's are); the
    entries are read back, and one that stays unresolved fails the build naming it."""
    for a in addresses:
        subprocess.run(["ip", "netns", "exec", dut, "ping", "-n", "-q", "-c", "1", "-W", "1", a],
                       capture_output=True, check=False, timeout=10)
    learnt = {n.ip for n in read_neighbours(tb.ipr(dut)) if n.mac and not n.permanent}
    missing = [a for a in addresses if a not in learnt]
    if missing:
        raise TestbedError(f"dut_neighbours resolved: the DUT did not resolve {', '.join(missing)} by ARP/ND: "
                           f"check the tester ports' links (ip -n {dut} neigh)")
    tb.state.notes.append(f"the DUT resolved the tester's addresses by ARP/ND ({', '.join(addresses)}): no "
                          "permanent neighbours")


class Loopback(Topology):
    name = "loopback"
    description = "tester port tx wired straight to tester port rx (the tester's self-test, no DUT)"

    def build(self, tb: Any) -> None:
        tx_ns, rx_ns = self.tester_ns(tb, "tx"), self.tester_ns(tb, "rx")
        tx_if, rx_if = tb.name("tx"), tb.name("rx")
        tb.add_veth(tx_ns, tx_if, rx_ns, rx_if, "tester", "tester")
        tb.link_up(tx_ns, tx_if)
        tb.link_up(rx_ns, rx_if)
        tx_mac, rx_mac = tb.mac(tx_ns, tx_if), tb.mac(rx_ns, rx_if)
        _pair_ports(tb, ("tx", tx_if, tx_ns, tx_mac), ("rx", rx_if, rx_ns, rx_mac), 0)


def _pair_ports(tb: Any, a: tuple, b: tuple, net: int) -> None:
    """Two tester ports on one L2 segment: 198.18.<net>.2/.3, 2001:2:0:<net>::2/::3."""
    ips = [(f"198.18.{net}.2", f"2001:2:0:{net:x}::2"), (f"198.18.{net}.3", f"2001:2:0:{net:x}::3")]
    for (name, ifname, ns, _mac), other, (v4, v6) in ((a, b, ips[0]), (b, a, ips[1])):
        _tester_stack(tb, ns, ifname, v4, v6, 24, 64, None, None)
        ov4 = ips[1][0] if v4 == ips[0][0] else ips[0][0]
        tb.add_neigh(ns, ifname, ov4, other[3])
        _port(tb, name, ifname, ns, v4, v6, other[3])


class Fourport(Topology):
    name = "fourport"
    description = "two independent loopback pairs on four tester ports (p0↔p1, p2↔p3)"

    def build(self, tb: Any) -> None:
        spaces = [self.tester_ns(tb, f"p{i}") for i in range(4)]
        ifs = [tb.name(f"p{i}") for i in range(4)]
        for a, b in ((0, 1), (2, 3)):
            tb.add_veth(spaces[a], ifs[a], spaces[b], ifs[b], "tester", "tester")
        for i in range(4):
            tb.link_up(spaces[i], ifs[i])
        macs = [tb.mac(spaces[i], ifs[i]) for i in range(4)]
        for a, b, net in ((0, 1, 0), (2, 3, 1)):
            _pair_ports(tb, (f"p{a}", ifs[a], spaces[a], macs[a]), (f"p{b}", ifs[b], spaces[b], macs[b]), net)


class Bridge(Topology):
    name = "bridge"
    description = "a Linux bridge DUT (L2 switching, MAC learning primed by learning frames)"
    uses = DUT_OPTIONS
    has_dut = True

    def build(self, tb: Any) -> None:
        tx_ns = self.tester_ns(tb, "tx")
        dut = tb.add_netns("dut", BRIDGE_SYSCTLS)
        rx_ns = self.tester_ns(tb, "rx")
        tb.state.dut_netns = dut
        tx_if, dtx, drx, rx_if = (tb.name(s) for s in ("tx", "dtx", "drx", "rx"))
        tb.add_veth(tx_ns, tx_if, dut, dtx, "tester", "dut")
        tb.add_veth(dut, drx, rx_ns, rx_if, "dut", "tester")
        _bridge_dut(tb, dut, [dtx, drx])
        for ns, i in ((dut, dtx), (dut, drx), (tx_ns, tx_if), (rx_ns, rx_if)):
            tb.link_up(ns, i)
        tx_mac, rx_mac = tb.mac(tx_ns, tx_if), tb.mac(rx_ns, rx_if)
        _pair_ports(tb, ("tx", tx_if, tx_ns, tx_mac), ("rx", rx_if, rx_ns, rx_mac), 0)
        _place(tb, dut, [dtx, drx])
        _learn(tb)


def _bridge_dut(tb: Any, dut: str, ifaces: list[str], role: str = "dut") -> None:
    """A Linux bridge in ``dut`` over ``ifaces`` (no STP, no forwarding delay, ageing 300 s), up."""
    br = tb.name("br")
    ipr = tb.ipr(dut)
    ipr.link("add", ifname=br, kind="bridge", br_stp_state=0, br_forward_delay=0, br_ageing_time=30000)
    tb.state.interfaces.append(Interface(dut, br, role))
    brx = tb.index(dut, br)
    for i in ifaces:
        ipr.link("set", index=tb.index(dut, i), master=brx)
    tb.link_up(dut, br)


def _learn(tb: Any) -> None:
    tb.send_learning_frames()
    tb.state.notes.append("bridge learned the tester MACs from one learning frame per port; ageing time 300 s")


def _forward_dut_options(o: TestbedOptions, topology: str) -> None:
    b = o.forward_backend
    if b == "bridge" and topology == "oneport":
        raise ConfigError("forward_backend", "bridge: a bridge never sends a frame back out of the port it came in "
                                             "on; compare it on topology forwarder")
    if b == "bridge" and o.forward_mode not in (None, "io"):
        raise ConfigError("forward_mode", f"{o.forward_mode!r}: the bridge forwards frames unchanged: io is its only "
                                          "mode (leave forward_mode out)")
    if b in testpmd.PMDS and o.dut_cpus and len(o.dut_cpus) > 1:
        raise ConfigError("dut_cpus", f"{','.join(map(str, o.dut_cpus))}: testpmd forwards on one lcore here (one "
                                      "queue per port): give one CPU")


def _xdp_peer_rule(tb: Any, ports: list[tuple[str, str]]) -> None:
    """The kernel's veth XDP rule: a frame XDP_REDIRECTed into a veth reaches its peer only if the
    peer has NAPI (an XDP program, or GRO on); otherwise the kernel drops it without a counter. A
    tester port with AF_XDP has its XDP program; for every other backend GRO on the tester port
    gives the NAPI. (UDP test frames are not merged: no UDP GRO socket, no GRO forwarding.)"""
    for ns, ifname in ports:
        note = features_set_in(ns, ifname, {"rx-gro": True})
        if note:
            tb.state.notes.append(f"{ifname}: {note}")
    tb.state.notes.append("forward_backend xdp: GRO on on the tester ports (the veth XDP_REDIRECT rule: "
                             "the egress veth's peer needs NAPI)")


class Forwarder(Topology):
    name = "forwarder"
    description = ("the host's forwarding as the DUT between two ports: netrig forward (testpmd-like; mode and "
                   "backend as options), in-kernel XDP_REDIRECT, the Linux bridge or DPDK testpmd")
    uses = (*LINK_OPTIONS, "forward_mode", "forward_backend", "dut_cpus")
    has_dut = True

    def validate(self, o: TestbedOptions) -> None:
        super().validate(o)
        if o.forward_mode == "macswap":
            raise ConfigError("forward_mode", "macswap sends frames back out of the port they came in on, so nothing "
                                              "reaches rx: use topology oneport for it")
        _forward_dut_options(o, self.name)

    def build(self, tb: Any) -> None:
        o = tb.options
        mode = o.forward_mode or "io"
        tx_ns = self.tester_ns(tb, "tx")
        dut = tb.add_netns("dut", BRIDGE_SYSCTLS)
        rx_ns = self.tester_ns(tb, "rx")
        tb.state.dut_netns = dut
        tx_if, dtx, drx, rx_if = (tb.name(s) for s in ("tx", "dtx", "drx", "rx"))
        tb.add_veth(tx_ns, tx_if, dut, dtx, "tester", "dut")
        tb.add_veth(dut, drx, rx_ns, rx_if, "dut", "tester")
        if o.forward_backend == "bridge":
            _bridge_dut(tb, dut, [dtx, drx])
        for ns, i in ((dut, dtx), (dut, drx), (tx_ns, tx_if), (rx_ns, rx_if)):
            tb.link_up(ns, i)
        tx_mac, rx_mac = tb.mac(tx_ns, tx_if), tb.mac(rx_ns, rx_if)
        _pair_ports(tb, ("tx", tx_if, tx_ns, tx_mac), ("rx", rx_if, rx_ns, rx_mac), 0)
        if o.forward_backend == "bridge":
            _place(tb, dut, [dtx, drx])
            _learn(tb)
            tb.state.notes.append(f"DUT: the Linux bridge in {dut} (forward_backend bridge)")
            return
        # frames leaving dtx go to tx, frames leaving drx to rx (modes that write the destination MAC)
        _start_forwarder(tb, dut, [dtx, drx], mode, [tx_mac, rx_mac], [(tx_ns, tx_if), (rx_ns, rx_if)])


def _start_forwarder(tb: Any, dut: str, ifaces: list[str], mode: str, peer_macs: list[str],
                     tester_ports: list[tuple[str, str]]) -> None:
    """The DUT process forwarding between ``ifaces`` in ``dut``: ``netrig forward`` (its CPUs from
    ``dut_cpus``; backend ``xdp``: in-kernel programs) or DPDK testpmd (``testpmd*`` backends)."""
    o = tb.options
    backend = o.forward_backend
    if backend in testpmd.PMDS:
        main, fwd = testpmd.lcores(o.dut_cpus)
        prefix = f"nr{tb.id}"
        cmd = testpmd.argv(ifaces, backend, mode, peer_macs, main, fwd, prefix)
        start_dut_process(tb, dut, "forwarder", cmd, ready=testpmd.READY,
                          runtime_dir=os.path.join(testpmd.RUNTIME_ROOT, prefix))
        _hold_cpus(tb, [fwd], f"testpmd forwarding lcore {fwd} (polling), main lcore {main}")
        what = f"DPDK testpmd --forward-mode={testpmd.MODES[mode]} ({testpmd.PMDS[backend]} ports)"
    else:
        if backend == "xdp":
            _xdp_peer_rule(tb, tester_ports)
        argv = ["forward", *(a for i in ifaces for a in ("--port", i)), "--forward-mode", mode, "--io", backend,
                "--interval", "0"]
        if mode not in ("io", "rxonly", "macswap"):
            argv += [a for m in peer_macs for a in ("--peer-mac", m)]
        cpus = list(o.dut_cpus or placement.default_dut_cpus())
        if backend != "xdp":
            argv += ["--dut-cpus", ",".join(str(c) for c in cpus)]
        start_dut_process(tb, dut, "forwarder", [sys.executable, "-m", "netrig.cli.main", *argv],
                          ready="Ctrl-C stops")
        if backend == "xdp":
            # The programs run in the receive path of the CPU that runs the port's NAPI: threaded
            # NAPI pinned to the DUT's CPUs keeps them off the sender's.
            tb.state.placement = replace(placement.apply(dut, ifaces, tuple(cpus), "threaded-napi"),
                                         note=f"in-kernel XDP programs in threaded NAPI on CPU "
                                              f"{','.join(map(str, cpus))}")
        else:
            _hold_cpus(tb, cpus, f"netrig forward workers on CPU {','.join(map(str, cpus))}")
        what = f"netrig forward --forward-mode {mode} --io {backend}"
    tb.state.notes.append(f"DUT: {what} in {dut} (log {tb.state.processes[-1].log})")


def _hold_cpus(tb: Any, cpus: list[int], note: str) -> None:
    """The DUT runs its own threads pinned to ``cpus`` on this host (pollers: a CPU each). The
    measuring session keeps the tester's workers off them (``Testbed.tester_cpus``), so the DUT
    never competes with the tester for a CPU and its polling never shows as the tester's limit."""
    tb.state.placement = Placement("forwarder", tuple(cpus), note=note)
    tb.state.dut_threads_cpus = sorted(set(cpus))


class OnePort(Topology):
    name = "oneport"
    description = ("one-port loopback: one tester port, a macswap DUT (netrig forward, XDP or testpmd) returns "
                   "every frame on the port it came in on (tx and rx are that port)")
    uses = (*LINK_OPTIONS, "forward_mode", "forward_backend", "dut_cpus")
    has_dut = True

    def validate(self, o: TestbedOptions) -> None:
        super().validate(o)
        if o.forward_mode not in (None, "macswap"):
            raise ConfigError("forward_mode", f"{o.forward_mode!r}: the one-port loopback's DUT returns frames on "
                                              "the port they came in on: macswap is its only mode")
        _forward_dut_options(o, self.name)

    def build(self, tb: Any) -> None:
        tx_ns = self.tester_ns(tb, "tx")
        dut = tb.add_netns("dut", BRIDGE_SYSCTLS)
        tb.state.dut_netns = dut
        tx_if, d0 = tb.name("tx"), tb.name("d0")
        tb.add_veth(tx_ns, tx_if, dut, d0, "tester", "dut")
        tb.link_up(dut, d0)
        tb.link_up(tx_ns, tx_if)
        d_mac = tb.mac(dut, d0)
        # The tester sends to the DUT's MAC; macswap returns the frame to the tester's. The port is
        # its own peer at L3 (tx and rx: one address).
        _tester_stack(tb, tx_ns, tx_if, LEFT4[1], LEFT6[1], 24, 64, None, None)
        _port(tb, "tx", tx_if, tx_ns, LEFT4[1], LEFT6[1], d_mac)
        tb.state.one_port = True
        _start_forwarder(tb, dut, [d0], "macswap", [], [(tx_ns, tx_if)])
        tb.state.notes.append("tx and rx are port tx: the tester counts only frames arriving on it (AF_XDP sees "
                                 "ingress only; AF_PACKET and sockets set PACKET_IGNORE_OUTGOING)")


class CaptureTopology(Topology):
    name = "capture"
    description = ("a packet-capture application as the DUT (netrig capture on the receiving end; method as an "
                   "option): the capture-method benchmark")
    uses = (*LINK_OPTIONS, "capture_method", "capture_batch", "dut_cpus")
    has_dut = True

    def build(self, tb: Any) -> None:
        o = tb.options
        tx_ns = self.tester_ns(tb, "tx")
        dut = tb.add_netns("dut", TESTER_SYSCTLS)  # no IPv6, no addresses: the capture host hears only the tester
        tb.state.dut_netns = dut
        tx_if, cap_if = tb.name("tx"), tb.name("cap")
        tb.add_veth(tx_ns, tx_if, dut, cap_if, "tester", "dut")
        tb.link_up(tx_ns, tx_if)
        tb.link_up(dut, cap_if)
        cap_mac = tb.mac(dut, cap_if)
        _port(tb, "tx", tx_if, tx_ns, LEFT4[1], LEFT6[1], cap_mac)
        cpu = o.dut_cpus[0] if o.dut_cpus else placement.default_dut_cpus()[0]
        _place_capture(tb, dut, cap_if, cpu, o.capture_method)
        stats = os.path.join(st.STATE_DIR, f"{tb.id}-capture.stats")
        argv = ["capture", "--port", cap_if, "--capture-method", o.capture_method, "--batch", str(o.capture_batch),
                "--dut-cpus", str(cpu), "--stats", stats]
        start_dut_process(tb, dut, "capture", [sys.executable, "-m", "netrig.cli.main", *argv],
                          ready="capture: ready")
        proc = tb.state.processes[-1] = replace(tb.state.processes[-1], stats=stats)
        tb.state.capture = CaptureRecord(o.capture_method, o.capture_batch, cpu, cap_if, dut, stats, proc.pid)
        st.write_state(tb.state)
        tb.state.notes.append(f"DUT: netrig capture --capture-method {o.capture_method} on {cap_if} in {dut}, "
                              f"CPU {cpu} (log {proc.log})")


def _place_capture(tb: Any, dut: str, cap_if: str, cpu: int, method: str) -> None:
    """The capture host on one CPU, apart from the tester's: its process, and its kernel receive
    path behind the wire (a ring on that CPU; a capture that falls behind drops there). The af_xdp
    method's own XDP program takes the interface's XDP hook instead: it copies each frame into the
    capture's socket as it arrives (in the sender's receive path, the frame freed at once) and the
    capture's thread on its CPU reads that socket's ring, which drops when full."""
    if method == "af_xdp":
        tb.state.placement = Placement("capture-xdp", (cpu,), dut,
                                       note=f"capture process on CPU {cpu}; its XDP program fills its socket's ring")
    else:
        tb.state.placement = replace(placement.apply(dut, [cap_if], (cpu,), "wire"),
                                     note=f"capture process and its kernel receive path (the wire's ring) on CPU {cpu}")
    tb.state.dut_threads_cpus = [cpu]


#: How long a DUT process may take to say it is ready.
PROCESS_READY_S = 20.0
#: DUT processes this process started, by pid (kept to reap them; teardown by another process
#: finds them by pid and start time in the state file).
_CHILDREN: dict[int, subprocess.Popen] = {}


def start_dut_process(tb: Any, ns: str, role: str, argv: list[str], ready: str, runtime_dir: str | None = None) -> None:
    """Run ``argv`` in namespace ``ns`` as part of the test bed (recorded before it starts, so
    teardown stops it even after a crash) and wait until its log shows ``ready``; ``runtime_dir``:
    a directory the process makes that teardown removes once it has stopped."""
    os.makedirs(st.STATE_DIR, exist_ok=True)
    log = os.path.join(st.STATE_DIR, f"{tb.id}-{role}.log")
    with open(log, "w") as out:
        proc = subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    _CHILDREN[proc.pid] = proc
    tb.state.processes.append(DutProcess(role, proc.pid, _start_time(proc.pid), tuple(argv), log, runtime_dir))
    st.write_state(tb.state)
    deadline = time.monotonic() + PROCESS_READY_S
    while True:
        with open(log, errors="replace") as f:
            text = f.read()
        if ready in text:
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            last = [ln for ln in text.splitlines() if ln.strip()][-1:] or ["(no output)"]
            what = f"exited with status {proc.returncode}" if proc.returncode is not None else \
                f"not ready after {PROCESS_READY_S:g} s"
            raise TestbedError(f"{role} in {ns}: {what}: {last[0]} (log {log})")
        time.sleep(0.05)


def _start_time(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:
        return None


def stop_processes(state: TestbedState) -> list[str]:
    """Stop the test bed's DUT processes (SIGTERM, then SIGKILL after 5 s); what would not stop."""
    left = []
    for rec in reversed(state.processes):
        pid = rec.pid
        child = _CHILDREN.pop(pid, None) if pid else None
        if child is not None:
            child.terminate()
            try:
                child.wait(5.0)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            continue
        if not st.pid_alive(pid, rec.start_time):
            continue
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    break
            except ChildProcessError:  # not our child (another process built the test bed)
                if not st.pid_alive(pid):
                    break
            time.sleep(0.02)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
                time.sleep(0.1)
            except ProcessLookupError:
                pass
            if st.pid_alive(pid, rec.start_time):
                left.append(f"{rec.role} process {pid}")
    for rec in state.processes:
        d = rec.runtime_dir
        if d and not st.pid_alive(rec.pid, rec.start_time):
            shutil.rmtree(d, ignore_errors=True)
            with contextlib.suppress(OSError):  # the parent too, when nothing else uses it
                os.rmdir(os.path.dirname(d))
    return left


@dataclass(frozen=True)
class RouterDut:
    """The routing DUT a router-based topology builds on: its namespace and its two interfaces
    (``dtx`` towards the tester's tx port, ``drx`` towards rx)."""

    dut: str
    dtx: str
    drx: str


class Router(Topology):
    name = "router"
    description = "an IPv4+IPv6 forwarding Linux DUT with static routes and neighbours"
    uses: ClassVar[tuple[str, ...]] = ROUTED_OPTIONS
    has_dut = True

    def build(self, tb: Any) -> None:
        r = self.build_router(tb)
        if tb.options.flowtable:
            _nft(tb, r.dut, nft.router_ruleset(tb.id, _flowtable(tb, r)))

    def build_router(self, tb: Any) -> RouterDut:
        tx_ns = self.tester_ns(tb, "tx")
        dut = tb.add_netns("dut", ROUTER_SYSCTLS)
        rx_ns = self.tester_ns(tb, "rx")
        tb.state.dut_netns = dut
        tx_if, dtx, drx, rx_if = (tb.name(s) for s in ("tx", "dtx", "drx", "rx"))
        tb.add_veth(tx_ns, tx_if, dut, dtx, "tester", "dut")
        peers = _peers_bridge(tb, dut, drx, rx_ns, rx_if) if tb.options.bgp_paths > 1 else None
        if peers is None:
            tb.add_veth(dut, drx, rx_ns, rx_if, "dut", "tester")
        for ns, i in ((dut, dtx), (dut, drx), (tx_ns, tx_if), (rx_ns, rx_if)):
            tb.link_up(ns, i)
        # discovered, not assumed: read every MAC back from the kernel
        tx_mac, dtx_mac = tb.mac(tx_ns, tx_if), tb.mac(dut, dtx)
        drx_mac, rx_mac = tb.mac(dut, drx), tb.mac(rx_ns, rx_if)
        tb.add_addr(dut, dtx, f"{LEFT4[0]}/24")
        tb.add_addr(dut, dtx, f"{LEFT6[0]}/64")
        hosts = tb.options.hosts  # the receiving link a /16 of tester hosts the DUT resolves
        tb.add_addr(dut, drx, f"{RIGHT4[0]}/{16 if hosts else 24}")
        tb.add_addr(dut, drx, f"{RIGHT6[0]}/64")
        resolved = tb.options.dut_neighbours == "resolved"
        if not resolved:
            tb.add_neigh(dut, dtx, LEFT4[1], tx_mac)
            tb.add_neigh(dut, dtx, LEFT6[1], tx_mac)
            tb.add_neigh(dut, drx, RIGHT4[1], rx_mac)
            tb.add_neigh(dut, drx, RIGHT6[1], rx_mac)
        if not hosts:
            tb.add_route(dut, "198.19.0.0/16", RIGHT4[1])
        tb.add_route(dut, "2001:2:0:100::/56", RIGHT6[1])
        tb.add_route(dut, "198.18.0.0/16", LEFT4[1])
        tb.add_route(dut, "2001:2:0:200::/56", LEFT6[1])
        _behind_the_port(tb, dut, dtx, LEFT4, LEFT6)
        _behind_the_port(tb, dut, drx, None if hosts else RIGHT4, None if hosts else RIGHT6)
        tb.add_neigh(tx_ns, tx_if, LEFT4[0], dtx_mac)
        tb.add_neigh(rx_ns, rx_if, RIGHT4[0], drx_mac)
        _tester_stack(tb, tx_ns, tx_if, LEFT4[1], LEFT6[1], 24, 64, LEFT4[0], LEFT6[0], resolved)
        _tester_stack(tb, rx_ns, rx_if, RIGHT4[1], RIGHT6[1], 24, 64, RIGHT4[0], RIGHT6[0],
                      resolved or tb.options.routing == "bgp")
        _port(tb, "tx", tx_if, tx_ns, LEFT4[1], LEFT6[1], dtx_mac, LEFT4[0], LEFT6[0])
        _port(tb, "rx", rx_if, rx_ns, RIGHT4[1], RIGHT6[1], drx_mac, RIGHT4[0], RIGHT6[0])
        if tb.options.routes and tb.options.routing == "bgp":
            _learn_routes(tb, dut, drx, rx_ns, tb.options.routes,
                          None if peers is None else _backup_peer(tb, dut, drx, rx_ns, rx_if, peers))
        elif tb.options.routes:
            _load_routes(tb, dut, drx, tb.options.routes)
        _place(tb, dut, [dtx, drx])
        if resolved:
            _resolve(tb, dut, (LEFT4[1], LEFT6[1], RIGHT4[1], RIGHT6[1]))
        if hosts:
            _load_hosts(tb, dut, drx, rx_ns, rx_if, hosts, answering=resolved or tb.options.tester_stack)
        return RouterDut(dut, dtx, drx)


def _behind_the_port(tb: Any, dut: str, dif: str, v4: tuple[str, str] | None, v6: tuple[str, str] | None) -> None:
    """The DUT's link subnets' other addresses are the tester's, behind its port, as the /16 and
    /56 beyond them are: a trial that spreads its destinations over them (``--vary dst_ips=4``)
    had them resolved on the link, where nothing answers, and reported 3 in 4 frames as the DUT's
    loss. IPv4: the two halves of the /24 via the port (longer than the connected route); IPv6: the
    /64 via the port at metric 1 (ahead of the connected route's 256); the subnet's broadcast
    address is a destination like any other. ``v4``, ``v6`` None: the link's addresses are hosts of
    their own (``hosts``)."""
    if v6 is not None:
        tb.add_route(dut, str(ipaddress.IPv6Network(f"{v6[0]}/64", strict=False)), v6[1], metric=1)
    if v4 is None:
        return
    net = ipaddress.IPv4Network(f"{v4[0]}/24", strict=False)
    for half in net.subnets(new_prefix=25):
        tb.add_route(dut, str(half), v4[1])
    tb.del_broadcast(dut, dif, str(net.broadcast_address))


def _load_routes(tb: Any, dut: str, drx: str, n: int) -> None:
    """``routes``: ``n`` host routes per family for the receiving side's first ``n`` addresses (from
    the rx port's), via the rx port (the port's own one straight out of ``drx``: a gateway must be
    reachable without one), in one ``ip -batch`` (netlink, one process); read back. IPv4 stops at
    :data:`MAX_V4_ROUTES`, the test range's addresses."""
    v4, v6 = ipaddress.IPv4Address(RIGHT4[1]), ipaddress.IPv6Address(RIGHT6[1])
    n4 = min(n, MAX_V4_ROUTES)
    lines = []
    for first, gw, plen, count in ((v4, RIGHT4[1], 32, n4), (v6, RIGHT6[1], 128, n)):
        lines.append(f"route add {first}/{plen} dev {drx} proto {BULK_PROTO}")
        lines += [f"route add {first + k}/{plen} via {gw} proto {BULK_PROTO}" for k in range(1, count)]
    t0 = time.monotonic()
    r = subprocess.run(["ip", "-n", dut, "-batch", "-"], input="\n".join(lines) + "\n", text=True,
                       capture_output=True, check=False, timeout=600)
    took = time.monotonic() - t0
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise TestbedError(f"routes: loading {n} routes into the DUT failed: ip -batch: {last}")
    held = _host_routes(dut)
    if held < n4 + n:
        raise TestbedError(f"routes: the DUT holds {held} of the {n4 + n} host routes loaded")
    capped = f" (IPv4: at most {MAX_V4_ROUTES}, the test range's addresses)" if n4 < n else ""
    tb.state.notes.append(f"routes: {n4} IPv4 /32 and {n} IPv6 /128 host routes in the DUT ({RIGHT4[1]} …, "
                          f"{RIGHT6[1]} …, via the rx port), loaded in {took:.1f} s{capped}")


def _imported(ctl: str, session: str, _dut: str) -> int:
    return bgp.imported(ctl, session)


@dataclass(frozen=True)
class BackupPeer:
    """``bgp_paths = 2``: the peers' namespace (its bridge carries the receiving link) and the first
    tester peer's MAC (the rx port's), whose frames the withdraw drops there."""

    peers_ns: str
    primary_mac: str


def _peers_bridge(tb: Any, dut: str, drx: str, rx_ns: str, rx_if: str) -> str:
    """The DUT's receiving link through a Linux bridge in a namespace of its own (the tester peers'
    side of the link, ``testbed.bgp``): ``drx`` ─ p0 ═bridge═ p1 ─ the rx port. Its namespace."""
    peers = tb.add_netns("peers", {})
    p0, p1 = tb.name("p0"), tb.name("p1")
    tb.add_veth(dut, drx, peers, p0, "dut", "peer")
    tb.add_veth(peers, p1, rx_ns, rx_if, "peer", "tester")
    _bridge_dut(tb, peers, [p0, p1], role="peer")
    for i in (p0, p1):
        tb.link_up(peers, i)
    _nft(tb, peers, bgp.PEERS_RULESET)
    return peers


def _backup_peer(tb: Any, dut: str, drx: str, rx_ns: str, rx_if: str, peers: str) -> BackupPeer:
    """The second tester peer on the receiving link: a macvlan on the rx port (a MAC of its own) with
    :data:`bgp.BACKUP4`'s tester end, the DUT holding the other end and, unless it resolves them, a
    permanent neighbour for it."""
    b_if = tb.name("rxb")
    ipr = tb.ipr(rx_ns)
    ipr.link("add", ifname=b_if, kind="macvlan", link=tb.index(rx_ns, rx_if), macvlan_mode="bridge")
    tb.state.interfaces.append(Interface(rx_ns, b_if, "peer"))
    tb.link_up(rx_ns, b_if)
    for (own, peer), plen in ((bgp.BACKUP4, 30), (bgp.BACKUP6, 64)):
        tb.add_addr(dut, drx, f"{own}/{plen}")
        tb.add_addr(rx_ns, b_if, f"{peer}/{plen}")
        if tb.options.dut_neighbours != "resolved":
            tb.add_neigh(dut, drx, peer, tb.mac(rx_ns, b_if))
            tb.add_neigh(rx_ns, b_if, own, tb.mac(dut, drx))
    return BackupPeer(peers, tb.mac(rx_ns, rx_if))


def _learn_routes(tb: Any, dut: str, drx: str, rx_ns: str, n: int, backup: BackupPeer | None = None) -> None:
    """``routes`` with ``routing`` bgp: the DUT learns them over eBGP from the tester's BIRD in the
    rx port's namespace (:mod:`netrig.testbed.bgp`), its own BIRD installing them; read back. The
    IPv6 next hop gets a host route out of ``drx`` first: the kernel refuses a gateway it reaches
    only through another gateway (the link's /64 goes via the rx port, :func:`_behind_the_port`).
    With ``backup`` (``bgp_paths = 2``) a second BIRD advertises the routes as the backup path;
    the build also waits until the DUT's BIRD has them all from it, and records the withdraw and
    restore commands (``NETRIG_BGP_WITHDRAW``, ``NETRIG_BGP_RESTORE``)."""
    n4 = min(n, MAX_V4_ROUTES)
    tb.add_route(dut, f"{RIGHT6[1]}/128", None, metric=1, ifname=drx)  # ahead of BIRD's (32); kept by repair
    run_dir = os.path.join(st.STATE_DIR, f"{tb.id}-bgp")
    confs = bgp.write_configs(run_dir, (RIGHT4[0], RIGHT6[0]), (RIGHT4[1], RIGHT6[1]), n4, n, backup is not None)
    t0 = time.monotonic()
    for role, conf in confs.items():
        start_dut_process(tb, dut if role == "bgp-dut" else rx_ns, role, bgp.argv(conf), bgp.READY,
                          runtime_dir=run_dir if role == "bgp-dut" else None)
    dut_ctl = bgp.ctl(confs["bgp-dut"])
    held = bgp.wait_learned(tb.state, dut, n4 + n, lambda ns: _host_routes(ns, bgp.BIRD_PROTO), dut_ctl)
    paths = ""
    if backup is not None:
        for session, want in zip(bgp.BACKUP_SESSIONS, (n4 - 1, n - 1), strict=True):
            bgp.wait_learned(tb.state, dut, want, functools.partial(_imported, dut_ctl, session), dut_ctl)
        withdraw, restore = bgp.withdraw_commands(bgp.ctl(confs["bgp-speaker"]), backup.peers_ns,
                                                  (RIGHT4[1], RIGHT6[1], backup.primary_mac), dut, (n4, n))
        tb.state.commands.update({"BGP_WITHDRAW": withdraw, "BGP_RESTORE": restore})
        paths = (f"; {n4 - 1} IPv4 and {n - 1} IPv6 of them also from a backup peer ({bgp.BACKUP4[1]}, "
                 f"{bgp.BACKUP6[1]}; AS path longer)")
    tb.state.notes.append(f"routes: {n4} IPv4 /32 and {n} IPv6 /128 host routes learned by the DUT over eBGP (BIRD "
                          f"{bgp.version()} at both ends, AS {bgp.TESTER_AS} → {bgp.DUT_AS}) and installed in its "
                          f"FIB in {time.monotonic() - t0:.1f} s ({held} read back, proto bird){paths}")


#: The host's neighbour-table limits (one table per family for every namespace) the ``hosts``
#: option raises.
GC_THRESHOLDS = tuple(f"net.ipv{v}.neigh.default.gc_thresh{k}" for v in (4, 6) for k in (1, 2, 3))
#: Room in the neighbour table beside the test bed's hosts (the machine's own neighbours).
GC_SLACK = 4096
#: Most IPv6 hosts: the kernel keeps proxy NDP entries in a 16-bucket hash, so adding N of them and
#: answering each solicitation cost O(N) apiece (measured: 65 532 entries took 99 s of kernel time
#: to add, and the DUT's 65 530 solicitations 190 s to answer, 35 k of them in time).
MAX_V6_HOSTS = 4096


def _load_hosts(tb: Any, dut: str, drx: str, rx_ns: str, rx_if: str, n: int, answering: bool) -> None:
    """``hosts``: the rx port's namespace answers for ``n`` addresses per family on the receiving
    link (:func:`_answer_arp`, :func:`_answer_nd`), and the DUT resolves each, from 198.19.0.2 and
    2001:2:0:1::2, by its own ARP and neighbour discovery, as it would ``n`` hosts on that link: one
    datagram to each (the kernel queues it and asks), in chunks its queue keeps up with, until all
    are resolved (read back) or 3 rounds passed. The neighbour tables are one per family for all
    namespaces: their limits are raised for the test bed's life (restored at teardown), never
    lowered."""
    for name in GC_THRESHOLDS:
        if int(read_sysctl(name)) < n + GC_SLACK:
            tb.set_global_sysctl(name, n + GC_SLACK)
    n6 = min(n, MAX_V6_HOSTS)
    _answer_arp(tb, rx_ns, rx_if)
    _answer_nd(rx_ns, rx_if, n6)
    if not answering:  # its stack would answer test frames to those addresses with ICMP
        _nft(tb, rx_ns, nft.tester_quiet_ruleset(tb.id))
    t0 = time.monotonic()
    for first, how, count in ((ipaddress.ip_address(RIGHT4[1]), "ARP", n), (ipaddress.ip_address(RIGHT6[1]), "ND", n6)):
        want = {str(first + k) for k in range(count)}
        missing = sorted(want)
        for _ in range(3):
            run_in_netns(dut, _ask, missing)
            missing = _unresolved(tb, dut, drx, want, deadline=time.monotonic() + 5.0)
            if not missing:
                break
        if missing:
            table = GC_THRESHOLDS[2 if first.version == 4 else 5]
            raise TestbedError(f"hosts: the DUT resolved {count - len(missing)} of {count} hosts by {how} "
                               f"({missing[0]} … not): is the host's neighbour table full? (sysctl {table})")
    capped = f" (IPv6: at most {MAX_V6_HOSTS}, the kernel's proxy NDP table)" if n6 < n else ""
    tb.state.notes.append(f"hosts: the DUT resolved {n} tester hosts on {drx} by ARP ({RIGHT4[1]} …) and {n6} by "
                          f"neighbour discovery ({RIGHT6[1]} …){capped} in {time.monotonic() - t0:.1f} s: its "
                          f"neighbour tables hold them")


def _answer_arp(tb: Any, rx_ns: str, rx_if: str) -> None:
    """The rx port's namespace answers ARP for the whole receiving /16: a local route of it on
    ``lo`` makes its kernel take every address for its own, but the DUT's, the source of its ARP
    requests (a local source is a martian, and nothing would be answered)."""
    tb.link_up(rx_ns, "lo")
    _local_but_the_dut(rx_ns, rx_if, "198.19.0.0/16", RIGHT4[0])


def _local_but_the_dut(rx_ns: str, rx_if: str, link: str, dut: str) -> None:
    """In the rx port's namespace, every address of ``link`` its own (a local route on ``lo``) but
    the DUT's ``dut``, reached on ``rx_if``: both in the ``local`` table."""
    host = f"{dut}/{ipaddress.ip_address(dut).max_prefixlen}"
    for route in (["local", link, "dev", "lo"], [host, "dev", rx_if]):
        r = subprocess.run(["ip", "-n", rx_ns, "route", "add", *route, "table", "local"], capture_output=True,
                           text=True, check=False)
        if r.returncode != 0:
            raise TestbedError(f"hosts: the rx port cannot answer for them: ip route add {' '.join(route)}: "
                               f"{r.stderr.strip()}")


def _answer_nd(rx_ns: str, rx_if: str, n: int) -> None:
    """The rx port's namespace answers neighbour solicitation for ``n`` addresses from its own
    (2001:2:0:1::2; ``n`` at most :data:`MAX_V6_HOSTS`) by proxy NDP: an entry per address (one
    ``ip -batch``). The kernel proxies only on an interface with forwarding on; the namespace's own
    (``all``) stays off, so it forwards nothing. A local route of the link's /64 on ``lo`` (but the
    DUT's address) makes the addresses its own for input, as :func:`_answer_arp` does for IPv4:
    without it the DUT's unicast solicitations (its NUD probes of a stale entry) went to the
    forwarding path, which drops them, and every host the DUT had resolved turned FAILED at its
    first probe (here 19 of 19, with the DUT's reachable time shortened), to be solicited again."""
    # answered at once: by default a proxied solicitation waits up to 0.8 s in a queue of 64
    sysctls_in(rx_ns, {f"net.ipv6.conf.{rx_if}.forwarding": 1, f"net.ipv6.conf.{rx_if}.proxy_ndp": 1,
                       f"net.ipv6.neigh.{rx_if}.proxy_delay": 0})
    if sysctl_in(rx_ns, "net.ipv6.conf.all.forwarding") != "0":
        raise TestbedError(f"hosts: {rx_ns} forwards IPv6 (net.ipv6.conf.all.forwarding): a tester port must not")
    _local_but_the_dut(rx_ns, rx_if, str(ipaddress.ip_network(RIGHT6[0] + "/64", strict=False)), RIGHT6[0])
    first = ipaddress.IPv6Address(RIGHT6[1])
    lines = [f"neigh add proxy {first + k} dev {rx_if}" for k in range(1, n)]
    r = subprocess.run(["ip", "-n", rx_ns, "-6", "-batch", "-"], input="\n".join(lines) + "\n", text=True,
                       capture_output=True, check=False, timeout=300)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise TestbedError(f"hosts: the rx port cannot answer neighbour solicitation for them: ip -batch: {last}")


def _ask(addresses: Sequence[str], chunk: int = 256) -> None:
    """One datagram to each address from this namespace (the discard port), ``chunk`` at a time with
    a pause: the DUT asks for each (ARP, ND), and the answers arrive before its queue overflows."""
    family = socket.AF_INET6 if addresses and ":" in addresses[0] else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        for i, a in enumerate(addresses):
            with contextlib.suppress(OSError):
                s.sendto(b"", (a, 9))
            if i % chunk == chunk - 1:
                time.sleep(0.002)


def _unresolved(tb: Any, dut: str, drx: str, want: set[str], deadline: float) -> list[str]:
    """The addresses of ``want`` the DUT holds no neighbour for on ``drx`` by ``deadline`` (read back;
    the rx port's own is a permanent entry unless ``dut_neighbours`` is resolved)."""
    idx = tb.index(dut, drx)
    while True:
        # the rx port's own: static; addresses compared in one spelling
        learnt = {str(ipaddress.ip_address(nb.ip)) for nb in read_neighbours(tb.ipr(dut)) if nb.index == idx and nb.mac}
        missing = sorted(want - learnt)
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.2)


def _host_routes(ns: str, proto: int = BULK_PROTO) -> int:
    """The ``routes`` option's host routes in a namespace's main tables (one netlink dump per
    family, filtered by the kernel on their protocol: ``proto``)."""
    out = 0
    for fam in ("-4", "-6"):
        r = subprocess.run(["ip", "-n", ns, fam, "route", "show", "proto", str(proto)], capture_output=True,
                           text=True, check=True)
        # a host route prints without its length (198.19.0.2 via …)
        out += sum(1 for line in r.stdout.splitlines() if line.split() and "/" not in line.split()[0])
    return out


def _place(tb: Any, dut: str, ifaces: list[str]) -> None:
    """Give the DUT's packet work its CPUs (``dut_placement``, default the wire; docs/testbed.md)."""
    o = tb.options
    cpus = o.dut_cpus or placement.default_dut_cpus()
    tb.state.placement = placement.apply(dut, ifaces, cpus, o.dut_placement, o.dut_ring)
    st.write_state(tb.state)
    if o.dut_placement == "wire":
        _full_checksums(tb)


def _full_checksums(tb: Any) -> None:
    """Tester ports compute their checksums before a frame leaves, as a NIC does on a wire: a
    kernel stack's TCP/UDP (iperf3, sockperf) otherwise hands veth a partial checksum that only
    the receiving stack would complete, and the wire's copy into the DUT's ring keeps the bytes,
    not that promise. Off too: TSO, which needs checksum offload (segments cross the wire)."""
    for p in tb.state.ports:
        note = features_set_in(p.netns, p.ifname, {"tx-checksum-ip-generic": False, "tx-checksum-sctp": False})
        if note:
            tb.state.notes.append(f"{p.ifname}: {note}")


def _snat(tb: Any, r: RouterDut) -> list[str]:
    """Source NAT on ``drx`` (the ``nat`` option): the pool addresses for ``static``, what the receiver
    will see recorded, and the postrouting rules returned."""
    o = tb.options
    if o.nat == "static":
        tb.add_addr(r.dut, r.drx, f"{STATIC_NAT4}/32")
        tb.add_addr(r.dut, r.drx, f"{STATIC_NAT6}/128")
        tb.state.expected_rx_src = {"4": STATIC_NAT4, "6": STATIC_NAT6}
    else:
        tb.state.expected_rx_src = {"4": RIGHT4[0], "6": RIGHT6[0]}
    return nft.snat_rules(r.drx, o.nat, STATIC_NAT4, STATIC_NAT6)


class Nat(Router):
    name = "nat"
    description = "the router plus nftables source NAT (masquerade or static) and conntrack"
    uses = (*DUT_OPTIONS, "nat", *CONNTRACK_OPTIONS, "flowtable", "dut_neighbours")

    def build(self, tb: Any) -> None:
        r = self.build_router(tb)
        _nft(tb, r.dut, nft.nat_ruleset(tb.id, _snat(tb, r), _flowtable(tb, r)))
        _conntrack(tb, r.dut)


class Firewall(Router):
    name = "firewall"
    description = "the router plus a stateful nftables ruleset of N rules ending in an accept"
    uses: ClassVar[tuple[str, ...]] = (*DUT_OPTIONS, "rules", "log", *CONNTRACK_OPTIONS, "flowtable",
                                       "dut_neighbours")

    def validate(self, o: TestbedOptions) -> None:
        super().validate(o)
        if o.rules < 2:
            raise ConfigError("rules", f"{o.rules}: a firewall needs at least 2 rules")

    def build(self, tb: Any) -> None:
        r = self.build_router(tb)
        _log(tb)
        _nft(tb, r.dut, nft.firewall_ruleset(tb.id, tb.options.rules, tb.options.log, _flowtable(tb, r)))
        _conntrack(tb, r.dut)


class FirewallNat(Firewall):
    name = "fwnat"
    description = "the stateful firewall and source NAT (masquerade or static) on one DUT"
    uses = (*DUT_OPTIONS, "rules", "log", "nat", *CONNTRACK_OPTIONS, "flowtable", "dut_neighbours")

    def build(self, tb: Any) -> None:
        r = self.build_router(tb)
        _log(tb)
        ft = _flowtable(tb, r)
        text = nft.firewall_ruleset(tb.id, tb.options.rules, tb.options.log, ft, snat=_snat(tb, r))
        _nft(tb, r.dut, text)
        _conntrack(tb, r.dut)


class Acl(Router):
    name = "acl"
    description = "the router plus N stateless nftables rules (no conntrack) ending in an accept"
    uses = (*DUT_OPTIONS, "rules", "log", "flowtable", "dut_neighbours")

    def build(self, tb: Any) -> None:
        r = self.build_router(tb)
        _log(tb)
        ft = _flowtable(tb, r)
        if ft:
            tb.state.notes.append("acl with flowtable: conntrack is on (no notrack), since flows are "
                                     "offloaded through their conntrack entries; the rules see a flow's "
                                     "packets only until it is offloaded")
        _nft(tb, r.dut, nft.acl_ruleset(tb.id, tb.options.rules, tb.options.log, ft))


class Policer(Router):
    name = "policer"
    description = "the router with an nftables rate cap of X pps or bit/s (a DUT of known capacity)"
    uses = (*DUT_OPTIONS, "cap", "cap_burst", "dut_neighbours")

    def validate(self, o: TestbedOptions) -> None:
        super().validate(o)
        if o.cap is None:
            raise ConfigError("cap", "the policer needs a rate cap, e.g. 100kpps or 10Mbps")

    def build(self, tb: Any) -> None:
        r = self.build_router(tb)
        o = tb.options
        # burst ≈ 10 ms of the cap: a smaller bucket under-delivers for a jittery sender (measured: a
        # 5-packet burst passed only ~65 % of a 4 kpps cap from a Python sender), a bigger one lets
        # more than the cap through in short trials
        if o.cap_pps is not None:
            burst = o.cap_burst or max(10, int(o.cap_pps / 100))
        else:
            burst = o.cap_burst or max(3028, int(o.cap_bps / 8 / 100))
        tb.state.policer = PolicerRecord(o.cap_pps, o.cap_bps, burst, "packets" if o.cap_pps is not None else "bytes")
        _nft(tb, r.dut, nft.policer_ruleset(tb.id, o.cap_pps, o.cap_bps, burst))


class External(Topology):
    name = "external"
    description = "interfaces you name (real NICs cabled to a real DUT); netrig checks and records them"
    uses = ("ifaces", "addresses", "gateways")

    def validate(self, o: TestbedOptions) -> None:
        super().validate(o)
        if len(o.ifaces) < 1:
            raise ConfigError("ifaces", "the external topology needs interface names, e.g. --ifaces eth1,eth2")
        if o.addresses and len(o.addresses) != len(o.ifaces):
            raise ConfigError("addresses", f"{len(o.addresses)} given for {len(o.ifaces)} interfaces: give one per "
                                           "interface, in the same order")

    def build(self, tb: Any) -> None:
        ifaces = tb.options.ifaces
        names = ["tx", "rx"] if len(ifaces) == 2 else [f"p{i}" for i in range(len(ifaces))]
        macs = [_external_link(tb, ifname) for ifname in ifaces]
        if tb.options.addresses:
            _external_stack(tb, names, macs)
            return
        for i, (name, ifname, mac) in enumerate(zip(names, ifaces, macs)):
            other = macs[i ^ 1] if len(macs) > (i ^ 1) else None
            v4 = LEFT4[1] if i % 2 == 0 else RIGHT4[1]
            v6 = LEFT6[1] if i % 2 == 0 else RIGHT6[1]
            tb.state.ports.append(TesterPort(name, ifname, None, mac, v4, v6, other))
        tb.state.notes.append("external: peer_mac assumes the two ports see each other at L2 "
                                 "(cable or switch); for a routed DUT give addresses and gateways")


def _external_link(tb: Any, ifname: str) -> str:
    """An external port's interface, checked up, recorded (never removed): its MAC."""
    idx = tb.ipr(None).link_lookup(ifname=ifname)
    if not idx:
        raise InterfaceError(f"ifaces: interface {ifname} does not exist (see `ip link`)")
    link = tb.ipr(None).get_links(idx[0])[0]
    oper = link.get_attr("IFLA_OPERSTATE")
    if oper not in ("UP", "UNKNOWN"):
        raise TestbedError(f"ifaces: interface {ifname} is {oper}, not up "
                           f"(bring it up: ip link set {ifname} up; check the cable)")
    tb.state.interfaces.append(Interface(None, ifname, "tester"))
    return link.get_attr("IFLA_ADDRESS")


def _external_stack(tb: Any, names: Sequence[str], macs: Sequence[str]) -> None:
    """An external test bed on a routed DUT: each port gets its addresses (the tester's kernel
    answers the DUT's ARP and ND; removed at teardown, and its stack never answers a test frame:
    :func:`nft.tester_quiet_ruleset` on those interfaces), and each gateway is resolved by ARP/ND
    (a ping from the port): its MAC is the port's ``peer_mac``. Without a gateway, the other
    port's MAC (the two see each other at L2)."""
    ifaces, ports = tb.options.ifaces, tb.options.port_addresses()
    table = nft.tester_quiet_table(tb.id)
    tb.state.host_nft.append(table)
    st.write_state(tb.state)
    r = subprocess.run(["nft", "-f", "-"], input=nft.tester_quiet_ruleset(tb.id, tuple(ifaces)), text=True,
                       capture_output=True, check=False)
    if r.returncode != 0:
        raise TestbedError(f"external: nft -f failed: {r.stderr.strip()}")
    for ifname, p in zip(ifaces, ports):
        for net in (p.v4, p.v6):
            if net is not None:
                tb.state.host_addrs.append(st.HostAddr(ifname, str(net)))
                st.write_state(tb.state)
                tb.add_addr(None, ifname, str(net))
    for i, (name, ifname, mac, p) in enumerate(zip(names, ifaces, macs, ports)):
        gws = [str(g) for g in (p.gw4, p.gw6) if g is not None]
        resolved = _resolve_from(tb, ifname, gws)
        peer = resolved[0] if resolved else (macs[i ^ 1] if len(macs) > (i ^ 1) else None)
        tb.state.ports.append(TesterPort(name, ifname, None, mac, str(p.v4.ip) if p.v4 else None,
                                         str(p.v6.ip) if p.v6 else None, peer,
                                         str(p.gw4) if p.gw4 else None, str(p.gw6) if p.gw6 else None))
    tb.state.notes.append("external: the ports' addresses are the tester's (its kernel answers ARP/ND); each "
                          "port sends to its gateway's MAC, resolved by ARP/ND at the build")


def _resolve_from(tb: Any, ifname: str, gateways: Sequence[str]) -> list[str]:
    """Each gateway's MAC, resolved by the kernel's ARP/ND (one ping out of ``ifname``), read back
    from the neighbour table; one that stays unresolved fails the build naming it."""
    index = tb.index(None, ifname)
    macs = []
    for gw in gateways:
        subprocess.run(["ping", "-n", "-q", "-c", "1", "-W", "1", "-I", ifname, gw], capture_output=True,
                       check=False, timeout=10)
        got = [n.mac for n in read_neighbours(tb.ipr(None)) if n.ip == gw and n.index == index and n.mac]
        if not got:
            raise TestbedError(f"gateways: {gw} did not answer ARP/ND on {ifname}: check the cable and the DUT's "
                               f"address (ip neigh show dev {ifname})")
        macs.append(got[0])
    if len(set(macs)) > 1:
        tb.state.notes.append(f"external: {ifname}'s gateways have different MACs ({', '.join(macs)}): frames go to "
                              "the IPv4 one's")
    return macs


def _nft(tb: Any, ns: str, text: str) -> None:
    nft.apply(ns, text)
    tb.state.nft[ns] = text
    st.write_state(tb.state)


def _flowtable(tb: Any, r: RouterDut) -> tuple[str, ...]:
    """The DUT interfaces for the ``flowtable`` option (none without it), after checking that this
    kernel has flowtables (``CapabilityError`` naming the option if not); recorded in the state."""
    if not tb.options.flowtable:
        return ()
    devices = (r.dtx, r.drx)
    nft.check_flowtable(r.dut, tb.id, devices)
    tb.state.flowtable = FlowtableRecord(nft.FLOWTABLE, devices, "ingress", False, nft.FLOW_ADD)
    tb.state.notes.append(f"flowtable {nft.FLOWTABLE} on {', '.join(devices)} (software fast path): "
                             "offloaded TCP/UDP flows skip the forward chain; the counter of that chain's "
                             "first rule (flow add) counts the TCP/UDP packets that took the slow path")
    return devices


#: The DUT's conntrack timeouts ``conntrack_timeout_s`` sets (per namespace).
CONNTRACK_TIMEOUTS = ("net.netfilter.nf_conntrack_udp_timeout", "net.netfilter.nf_conntrack_udp_timeout_stream",
                      "net.netfilter.nf_conntrack_tcp_timeout_established")


def _conntrack(tb: Any, dut: str) -> None:
    o = tb.options
    if o.conntrack_max is not None:
        tb.set_global_sysctl("net.netfilter.nf_conntrack_max", o.conntrack_max)
    if o.conntrack_buckets is not None:
        tb.set_global_sysctl("net.netfilter.nf_conntrack_buckets", o.conntrack_buckets)
    if o.conntrack_timeout_s is not None:
        try:
            sysctls_in(dut, dict.fromkeys(CONNTRACK_TIMEOUTS, o.conntrack_timeout_s))
        except OSError as e:
            raise TestbedError(f"conntrack_timeout_s: cannot set the DUT's conntrack timeouts: "
                               f"{e.strerror or e}") from None
        tb.state.notes.append(f"conntrack timeouts (UDP, UDP stream, TCP established) {o.conntrack_timeout_s} s "
                                 "in the DUT's namespace")


def _log(tb: Any) -> None:
    # nftables `log` from a non-initial namespace only reaches the kernel log with this set
    if tb.options.log and os.path.exists("/proc/sys/net/netfilter/nf_log_all_netns"):
        tb.set_global_sysctl("net.netfilter.nf_log_all_netns", 1)


TOPOLOGIES: dict[str, Topology] = {
    t.name: t() for t in (Loopback, Bridge, Router, Nat, Firewall, FirewallNat, Acl, Policer, Fourport, Forwarder,
                          OnePort, CaptureTopology, External)
}


#: Topologies whose Linux DUT sits behind the wire when ``dut_placement`` is ``wire`` (the default).
WIRED_TOPOLOGIES = tuple(n for n, t in TOPOLOGIES.items() if "dut_placement" in t.uses)


def list_topologies() -> list[tuple[str, str]]:
    """``[(name, one-line description), ...]``."""
    return [(n, t.description) for n, t in TOPOLOGIES.items()]


def topology_options(name: str) -> tuple[str, ...]:
    """The options topology ``name`` takes (every other one it refuses), its own ones first."""
    uses = TOPOLOGIES[name].uses
    common = [o for o in DUT_OPTIONS if o in uses]
    return (*(o for o in uses if o not in common), *common)
