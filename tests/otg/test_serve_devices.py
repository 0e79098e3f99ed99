"""OTG devices on `netrig serve`, driven by snappi as Ixia-c users write it: two devices on a veth
pair, each the other's gateway (neighbours resolved by the kernel's ARP and ND, a flow over the
devices exact, its destination MAC the resolved one, pings); two devices through a router in a
namespace without a single permanent neighbour, in IPv4 and IPv6; an unresolvable gateway refused
at start naming the flow; nothing left behind."""
from __future__ import annotations

import json
import os
import re
import uuid
from contextlib import contextmanager

import pytest
from tests.conftest import needs_root, sh
from tests.otg.conftest import api, capture_state, control, flow_metrics, serve, wait_stopped
from tests.otg.test_serve_veth import pcapng_frames

from netrig import _native
from netrig.otg.devices import kernel_makes_vlans

pytestmark = [needs_root, pytest.mark.root]

MAC1, MAC2 = "02:00:00:00:01:01", "02:00:00:00:02:02"
#: :func:`two_devices`' d1 and d2 with IPv4 only, each the other's gateway.
V4_ONLY = (("198.18.1.1", "198.18.1.2", 24), None), (("198.18.1.2", "198.18.1.1", 24), None)


def device(c, name: str, port: str, mac: str, v4: tuple[str, str, int] | None, v6: tuple[str, str, int] | None):
    e = c.devices.device(name=name)[-1].ethernets.ethernet(name=f"{name}.eth")[-1]
    e.connection.port_name, e.mac = port, mac
    if v4:
        e.ipv4_addresses.ipv4(name=f"{name}.ipv4", address=v4[0], gateway=v4[1], prefix=v4[2])
    if v6:
        e.ipv6_addresses.ipv6(name=f"{name}.ipv6", address=v6[0], gateway=v6[1], prefix=v6[2])


def two_devices(a, ports: list[str], d1: tuple, d2: tuple):
    """A config of ports p1, p2 and a device on each (d1, d2: its IPv4 and IPv6 (address, gateway,
    prefix), or None)."""
    c = a.config()
    c.ports.port(name="p1", location=ports[0]).port(name="p2", location=ports[1])
    device(c, "d1", "p1", MAC1, *d1)
    device(c, "d2", "p2", MAC2, *d2)
    return c


def device_flow(c, name: str, tx: str, rx: str, frames: int):
    f = c.flows.flow(name=name)[-1]
    f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = [tx], [rx]
    ip = f.packet.ethernet().ipv4()[-1] if tx.endswith("ipv4") else f.packet.ethernet().ipv6()[-1]
    f.packet.udp()
    f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 5000, frames
    f.metrics.enable, f.metrics.loss = True, True
    return ip


def neighbours(a, family: int, names: list[str]) -> list[tuple[str, str, str]]:
    req = a.states_request()
    getattr(req, f"ipv{family}_neighbors").ethernet_names = names
    rows = getattr(a.get_states(req), f"ipv{family}_neighbors")
    return [(r.ethernet_name, getattr(r, f"ipv{family}_address"), r.link_layer_address) for r in rows]


def wait_resolved(a, family: int, names: list[str]) -> list[tuple[str, str, str]]:
    """Poll the neighbours until every gateway has a MAC (the kernel resolves them at set_config);
    fails after 10 s (a bound for a broken resolver, not a timing)."""
    for _ in range(500):
        rows = neighbours(a, family, names)
        if rows and all(mac for _, _, mac in rows):
            return rows
        sh("sleep", "0.02")
    raise AssertionError(f"unresolved: {rows}")


def ping(a, family: int, src: str, dst: str) -> str:
    req = a.control_action()
    getattr(req.protocol, f"ipv{family}").ping.requests.add(src_name=src, dst_ip=dst)
    res = a.set_control_action(req)
    return getattr(res.response.protocol, f"ipv{family}").ping.responses[0].result


def links(ns: str) -> list[str]:
    return [link["ifname"] for link in json.loads(sh("ip", "-j", "link", "show", ns=ns))]


def test_two_devices_back_to_back_resolve_each_other_and_their_flow_arrives_exact(veth):
    ns_a, if_a, ns_b, if_b = veth
    ports = [f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"]
    with serve(ports) as url:
        a = api(url)
        c = two_devices(a, ports, (("198.18.1.1", "198.18.1.2", 24), ("2001:2::1", "2001:2::2", 64)),
                        (("198.18.1.2", "198.18.1.1", 24), ("2001:2::2", "2001:2::1", 64)))
        device_flow(c, "v4", "d1.ipv4", "d2.ipv4", 1000)
        device_flow(c, "v6", "d2.ipv6", "d1.ipv6", 1000)
        c.captures.capture(name="c", port_names=["p2"], format="pcapng")
        a.set_config(c)
        cs = a.control_state()  # as scripts do before traffic, with protocols or without: nothing to start
        cs.protocol.all.state = "start"
        a.set_control_state(cs)
        cs.protocol.route.state, cs.protocol.route.names = "withdraw", []
        with pytest.raises(Exception) as e:
            a.set_control_state(cs)
        assert "protocol.route: the config has no BGP peers" in str(e.value)
        assert sorted(wait_resolved(a, 4, [])) == [("d1.eth", "198.18.1.2", MAC2), ("d2.eth", "198.18.1.1", MAC1)]
        assert ("d2.eth", "2001:2::1", MAC1) in wait_resolved(a, 6, ["d2.eth"])
        assert (ping(a, 4, "d1.ipv4", "198.18.1.2"), ping(a, 6, "d2.ipv6", "2001:2::1")) == ("succeeded", "succeeded")
        assert ping(a, 4, "d1.ipv4", "198.18.1.99") == "failed"
        capture_state(a, "start", ["p2"])
        control(a, "start")
        m = wait_stopped(a, ["v4", "v6"])
        capture_state(a, "stop", ["p2"])
        req = a.capture_request()
        req.port_name = "p2"
        frames = [f for f in pcapng_frames(a.get_capture(req).read()) if f[12:14] == b"\x08\x00" and f[23] == 17]
        for n in ("v4", "v6"):
            assert (m[n].frames_tx, m[n].frames_rx, m[n].loss) == (1000, 1000, 0), n
        assert len(frames) == 1000
        assert {(f[0:6].hex(":"), f[6:12].hex(":"), f[26:34]) for f in frames} == \
            {(MAC2, MAC1, bytes([198, 18, 1, 1, 198, 18, 1, 2]))}
        made = [n for n in links(ns_a) + links(ns_b) if re.match(r"^nr\d+d\d+$", n)]
        assert len(made) == 2, made
    assert [n for n in links(ns_a) + links(ns_b) if n in made] == [], "the devices' links outlive the server"
    assert "netrig_devices" not in sh("nft", "list", "tables", ns=ns_a)


def test_devices_with_an_mtu_and_a_given_gateway_mac(veth):
    """Each device has an MTU of 1400 (its link's, read back); d1's gateway MAC is given (a
    permanent neighbour, never resolved), d2 resolves d1 by ARP. A flow over them arrives exact."""
    ns_a, if_a, ns_b, if_b = veth
    ports = [f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"]
    with serve(ports) as url:
        a = api(url)
        c = two_devices(a, ports, *V4_ONLY)
        c.devices[0].ethernets[0].mtu = c.devices[1].ethernets[0].mtu = 1400
        gw = c.devices[0].ethernets[0].ipv4_addresses[0].gateway_mac
        gw.choice, gw.value = "value", MAC2
        device_flow(c, "v4", "d1.ipv4", "d2.ipv4", 500)
        a.set_config(c)
        assert sorted(wait_resolved(a, 4, [])) == [("d1.eth", "198.18.1.2", MAC2), ("d2.eth", "198.18.1.1", MAC1)]
        for ns in (ns_a, ns_b):
            (dev,) = [x for x in json.loads(sh("ip", "-j", "link", "show", ns=ns)) if re.match(r"^nr\d+d\d+$", x["ifname"])]
            assert dev["mtu"] == 1400, dev
        neigh = json.loads(sh("ip", "-j", "neigh", "show", "198.18.1.2", ns=ns_a))
        assert [(n["lladdr"], n["state"]) for n in neigh] == [(MAC2, ["PERMANENT"])], neigh
        control(a, "start")
        m = wait_stopped(a, ["v4"])["v4"]
    assert (m.frames_tx, m.frames_rx, m.loss) == (500, 500, 0)


def test_device_vlans_tag_its_frames_or_are_refused_by_a_kernel_without_them(veth):
    """Both devices on VLAN 100: d2 resolves d1 by ARP through the tagged links, and a flow over them,
    tagged as they are, arrives exact and is captured tagged. A kernel built without 802.1Q (as
    this machine's) refuses the config in one line naming the VLAN, before any link is made."""
    ns_a, if_a, ns_b, if_b = veth
    ports = [f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"]
    with serve(ports) as url:
        a = api(url)
        c = two_devices(a, ports, *V4_ONLY)
        for d in c.devices:
            d.ethernets[0].vlans.vlan(name=f"{d.name}.vlan", id=100)
        f = c.flows.flow(name="tagged")[-1]
        f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = ["d1.ipv4"], ["d2.ipv4"]
        f.packet.ethernet().vlan()[-1].id.value = 100
        f.packet.ipv4().udp()
        f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 5000, 500
        f.metrics.enable, f.metrics.loss = True, True
        c.captures.capture(name="c", port_names=["p2"], format="pcapng")
        before = links(ns_a) + links(ns_b)
        if not kernel_makes_vlans():
            with pytest.raises(Exception) as e:
                a.set_config(c)
            assert e.value.args[0].code == 400, e.value
            (err,) = e.value.args[0].errors
            assert err.startswith("devices[0].ethernets[0].vlans[0]: this kernel cannot make VLAN interfaces"), err
            assert links(ns_a) + links(ns_b) == before
            return
        a.set_config(c)
        assert sorted(wait_resolved(a, 4, [])) == [("d1.eth", "198.18.1.2", MAC2), ("d2.eth", "198.18.1.1", MAC1)]
        capture_state(a, "start", ["p2"])
        control(a, "start")
        m = wait_stopped(a, ["tagged"])["tagged"]
        capture_state(a, "stop", ["p2"])
        req = a.capture_request()
        req.port_name = "p2"
        frames = [fr for fr in pcapng_frames(a.get_capture(req).read()) if fr[12:14] == b"\x81\x00" and fr[16:18] == b"\x08\x00"]
    assert (m.frames_tx, m.frames_rx, m.loss) == (500, 500, 0)
    assert {(fr[0:6].hex(":"), int.from_bytes(fr[14:16], "big") & 0xFFF) for fr in frames} == {(MAC2, 100)}


@contextmanager
def routed():
    """Tester namespace A ── router namespace R ── tester namespace B: R forwards IPv4 and IPv6
    between 198.18.1.0/24, 2001:2:0:1::/64 (its .1 / ::1 on the A side) and 198.18.2.0/24,
    2001:2:0:2::/64, and has no permanent neighbour: it resolves the devices by ARP and ND."""
    uid = uuid.uuid4().hex[:5]
    ns_a, ns_r, ns_b = f"nrt{uid}da", f"nrt{uid}dr", f"nrt{uid}db"
    if_a, if_b = f"nrt{uid}a", f"nrt{uid}b"
    try:
        for ns in (ns_a, ns_r, ns_b):
            sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", if_a, "netns", ns_a, "index", "10", "type", "veth", "peer", "name", "r1", "netns", ns_r)
        sh("ip", "link", "add", if_b, "netns", ns_b, "index", "11", "type", "veth", "peer", "name", "r2", "netns", ns_r)
        sh("sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1", ns=ns_r)
        for k, r in ((1, "r1"), (2, "r2")):
            sh("ip", "addr", "add", f"198.18.{k}.1/24", "dev", r, ns=ns_r)
            sh("ip", "addr", "add", f"2001:2:0:{k}::1/64", "dev", r, "nodad", ns=ns_r)
            sh("ip", "link", "set", r, "up", ns=ns_r)
        for ns, ifn in ((ns_a, if_a), (ns_b, if_b)):
            sh("sysctl", "-qw", f"net.ipv6.conf.{ifn}.disable_ipv6=1", ns=ns)
            sh("ip", "link", "set", ifn, "up", ns=ns)
        yield ns_a, if_a, ns_r, ns_b, if_b
    finally:
        for ns in (ns_a, ns_r, ns_b):
            sh("ip", "netns", "del", ns, check=False)


def test_two_devices_through_a_router_that_resolves_them_by_arp_and_nd():
    with routed() as (ns_a, if_a, ns_r, ns_b, if_b):
        ports = [f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"]
        with serve(ports) as url:
            a = api(url)
            c = two_devices(a, ports, (("198.18.1.2", "198.18.1.1", 24), ("2001:2:0:1::2", "2001:2:0:1::1", 64)),
                            (("198.18.2.2", "198.18.2.1", 24), ("2001:2:0:2::2", "2001:2:0:2::1", 64)))
            device_flow(c, "v4", "d1.ipv4", "d2.ipv4", 2000)
            device_flow(c, "v6", "d1.ipv6", "d2.ipv6", 2000)
            device_flow(c, "back", "d2.ipv4", "d1.ipv4", 2000)
            a.set_config(c)
            r1, r2 = (sh("cat", f"/sys/class/net/{r}/address", ns=ns_r).strip() for r in ("r1", "r2"))
            assert sorted(wait_resolved(a, 4, [])) == [("d1.eth", "198.18.1.1", r1), ("d2.eth", "198.18.2.1", r2)]
            assert sorted(wait_resolved(a, 6, [])) == [("d1.eth", "2001:2:0:1::1", r1), ("d2.eth", "2001:2:0:2::1", r2)]
            control(a, "start")
            m = wait_stopped(a, ["v4", "v6", "back"])
            for n in ("v4", "v6", "back"):
                assert (m[n].frames_tx, m[n].frames_rx, m[n].loss) == (2000, 2000, 0), n
            table = json.loads(sh("ip", "-j", "neigh", "show", ns=ns_r))
            learnt = {(n["dst"], n.get("lladdr")) for n in table}
            assert {("198.18.1.2", MAC1), ("198.18.2.2", MAC2), ("2001:2:0:2::2", MAC2)} <= learnt
            assert not [n for n in table if "PERMANENT" in n.get("state", ())], table


def test_a_flow_whose_gateway_never_answers_is_refused_at_start_naming_it(veth):
    ns_a, if_a, ns_b, if_b = veth
    ports = [f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"]
    with serve(ports) as url:
        a = api(url)
        c = two_devices(a, ports, (("198.18.1.1", "198.18.1.99", 24), None), (("198.18.2.2", "198.18.2.1", 24), None))
        device_flow(c, "lost", "d1.ipv4", "d2.ipv4", 10)
        a.set_config(c)
        assert neighbours(a, 4, ["d1.eth"]) == [("d1.eth", "198.18.1.99", None)]
        with pytest.raises(Exception) as e:
            control(a, "start")
        assert "flows[0] lost: its next hop 198.18.1.99 is unresolved on d1.eth (port p1)" in str(e.value)
        assert flow_metrics(a)["lost"].frames_tx == 0


def test_lldp_on_both_ports_hears_the_other_and_counts_its_pdus(veth):
    """LLDP as snappi scripts for Ixia-c write it: each port's lldpd hears the other's chassis (the
    port's MAC) with the hold time given, and counts the PDUs it sent and received."""
    ns_a, if_a, ns_b, if_b = veth
    ports = [f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"]
    macs = [sh("cat", f"/sys/class/net/{i}/address", ns=n).strip() for n, i in ((ns_a, if_a), (ns_b, if_b))]
    with serve(ports) as url:
        a = api(url)
        c = a.config()
        c.ports.port(name="p1", location=ports[0]).port(name="p2", location=ports[1])
        for k, p in enumerate(("p1", "p2")):
            ll = c.lldp.lldp(name=f"lldp{k + 1}")[-1]
            ll.connection.port_name, ll.hold_time, ll.advertisement_interval = p, 20, 5
            ll.system_name.value = f"netrig-{p}"
        a.set_config(c)
        heard: dict[str, tuple] = {}
        for _ in range(500):
            req = a.states_request()
            req.lldp_neighbors.lldp_names = []
            heard = {n.lldp_name: (n.chassis_id, n.ttl, n.system_name, n.port_id) for n in a.get_states(req).lldp_neighbors}
            if len(heard) == 2:
                break
            sh("sleep", "0.02")
        assert heard == {"lldp1": (macs[1], 20, "netrig-p2", if_b), "lldp2": (macs[0], 20, "netrig-p1", if_a)}
        req = a.metrics_request()
        req.lldp.lldp_names = ["lldp1", "lldp2"]
        rows = {m.name: m for m in a.get_metrics(req).lldp_metrics}
        assert rows["lldp1"].frames_tx >= 1 and rows["lldp2"].frames_rx >= 1, rows
        assert rows["lldp1"].frames_rx >= 1 and rows["lldp2"].frames_tx >= 1, rows
        lldpd = [int(p) for p in sh("pgrep", "-x", "lldpd").split()]
        assert lldpd and {frozenset(os.sched_getaffinity(p)) for p in lldpd} == {frozenset(_native.sender_cpus())}, \
            "on the senders' CPUs: a PDU sent from a receiver's moves the traffic's receive work there"
    # none left running (an exited one may wait a moment as a zombie for PID 1 to reap it)
    assert [ln for ln in sh("ps", "-eo", "stat=,comm=").splitlines() if ln.split()[1] == "lldpd" and
            not ln.startswith("Z")] == []
