"""OTG BGP on `netrig serve`, driven by snappi as Ixia-c users write it: two devices on a veth pair,
each a BGP speaker (served by BIRD in its port's namespace; eBGP over IPv4, iBGP and eBGP over IPv6)
advertising IPv4 and IPv6 route ranges to the other; the sessions come up, the metrics count the routes advertised and received,
the prefix states list them with their attributes, flows to the advertised ranges arrive exact;
a range withdrawn and advertised again, a session set down and up (a flap counted); nothing left
running."""
from __future__ import annotations

import ipaddress
import os
import subprocess
import tempfile
import time
from contextlib import contextmanager

import pytest
from tests.conftest import needs_root
from tests.otg.conftest import api, control, serve, wait_stopped
from tests.otg.test_serve_devices import MAC1, MAC2, device, routed, two_devices, wait_resolved

from netrig import _native

pytestmark = [needs_root, pytest.mark.root]

#: Prefixes per IPv4 and IPv6 range.
N4, N6 = 100, 50


def speaker(c, dev: str, asn: int, peer4: str, peer6: str, net4: str, net6: str, community: int,
            kind6: str = "ibgp") -> None:
    """Device ``dev`` speaks eBGP to ``peer4`` as AS ``asn`` and iBGP to ``peer6`` in AS 65000
    (``kind6`` "ebgp": eBGP as AS ``asn``), advertising N4 IPv4 /24s from ``net4`` and N6 IPv6 /64s
    from ``net6``, with a community and one more AS in their path."""
    d = next(x for x in c.devices if x.name == dev)
    d.bgp.router_id = f"198.18.{asn - 65000}.{asn - 65000}"
    for fam, peer, net, plen, n, kind, own in (("4", peer4, net4, 24, N4, "ebgp", asn),
                                               ("6", peer6, net6, 64, N6, kind6, asn if kind6 == "ebgp" else 65000)):
        itf = getattr(d.bgp, f"ipv{fam}_interfaces").add(**{f"ipv{fam}_name": f"{dev}.ipv{fam}"})
        p = getattr(itf.peers, f"v{fam}peer")(name=f"{dev}.bgp{fam}", peer_address=peer, as_type=kind,
                                              as_number=own)[-1]
        r = getattr(p, f"v{fam}_routes").add(name=f"{dev}.routes{fam}")
        r.addresses.add(address=net, prefix=plen, count=n, step=1)
        r.communities.add(type="manual_as_number", as_number=asn, as_custom=community)
        r.as_path.segments.add(type="as_seq", as_numbers=[asn + 100])


def two_speakers(a, ports: list[str], kind6: str = "ibgp"):
    """A config of ports p1, p2 with device d1 (198.18.1.1, 2001:2::1; AS 65001, advertising from
    198.18.100.0 and 2001:2:100::) on p1 and d2 (.2, ::2; AS 65002, from 198.19.0.0 and
    2001:2:200::) on p2, each the other's BGP peer (:func:`speaker`)."""
    c = a.config()
    c.ports.port(name="p1", location=ports[0]).port(name="p2", location=ports[1])
    device(c, "d1", "p1", MAC1, ("198.18.1.1", "198.18.1.2", 24), ("2001:2::1", "2001:2::2", 64))
    device(c, "d2", "p2", MAC2, ("198.18.1.2", "198.18.1.1", 24), ("2001:2::2", "2001:2::1", 64))
    speaker(c, "d1", 65001, "198.18.1.2", "2001:2::2", "198.18.100.0", "2001:2:100::", 7, kind6)
    speaker(c, "d2", 65002, "198.18.1.1", "2001:2::1", "198.19.0.0", "2001:2:200::", 9, kind6)
    return c


def bgp_metrics(a, family: int) -> dict:
    req = a.metrics_request()
    getattr(req, f"bgpv{family}").peer_names = []
    return {m.name: m for m in getattr(a.get_metrics(req), f"bgpv{family}_metrics")}


def wait_for(what: str, check, timeout_s: float = 30.0):
    """Poll ``check()`` until it returns something true; fails after ``timeout_s`` (a bound for a
    session that never comes up, not a timing)."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout_s:g} s")
        time.sleep(0.2)


def established(a, family: int, received: int) -> dict | None:
    m = bgp_metrics(a, family)
    ok = len(m) == 2 and all(x.session_state == "up" and x.routes_received == received for x in m.values())
    return m if ok else None


def prefixes(a, peer: str) -> list:
    req = a.states_request()
    req.bgp_prefixes.bgp_peer_names = [peer]
    (state,) = a.get_states(req).bgp_prefixes
    return state


def set_state(a, **kw) -> None:
    cs = a.control_state()
    if "route" in kw:
        cs.protocol.route.state, cs.protocol.route.names = kw["route"]
    else:
        cs.protocol.bgp.peers.state, cs.protocol.bgp.peers.peer_names = kw["peers"]
    a.set_control_state(cs)


def bird_processes() -> list[str]:
    out = subprocess.run(["pgrep", "-af", "netrig-bgp-"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "bird" in line and "pgrep" not in line]


def test_two_bgp_speakers_exchange_routes_and_traffic_to_them_arrives_exact(veth):
    ns_a, if_a, ns_b, if_b = veth
    ports = [f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"]
    before = bird_processes()
    with serve(ports) as url:
        a = api(url)
        c = two_speakers(a, ports)
        # d1's IPv4 routes name another next hop on the link (a router beside the tester)
        r4 = c.devices[0].bgp.ipv4_interfaces[0].peers[0].v4_routes[0]
        r4.next_hop_mode, r4.next_hop_address_type, r4.next_hop_ipv4_address = "manual", "ipv4", "198.18.1.9"
        for name, tx, rx, fam in (("to-d2-routes4", "d1.ipv4", "d2.routes4", 4),
                                  ("to-d1-routes6", "d2.ipv6", "d1.routes6", 6)):
            f = c.flows.flow(name=name)[-1]
            f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = [tx], [rx]
            ip = f.packet.ethernet().ipv4()[-1] if fam == 4 else f.packet.ethernet().ipv6()[-1]
            start, step = ("198.19.0.1", "0.0.1.0") if fam == 4 else ("2001:2:100::1", "0:0:0:1::")
            ip.dst.increment.start, ip.dst.increment.step, ip.dst.increment.count = start, step, N4 if fam == 4 else N6
            f.packet.udp()
            f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 5000, 1000
            f.metrics.enable, f.metrics.loss = True, True
        a.set_config(c)
        cs = a.control_state()
        cs.protocol.all.state = "start"  # as scripts do: the sessions are up from set_config anyway
        a.set_control_state(cs)
        birds = [int(line.split()[0]) for line in bird_processes() if line not in before]
        assert len(birds) == 2, "one BIRD per port namespace"
        assert {frozenset(os.sched_getaffinity(p)) for p in birds} == {frozenset(_native.sender_cpus())}, \
            "on the senders' CPUs: a keepalive sent from a receiver's moves the traffic's receive work there"
        m4 = wait_for("IPv4 sessions up, every route received", lambda: established(a, 4, N4))
        m6 = wait_for("IPv6 sessions up, every route received", lambda: established(a, 6, N6))
        for m in (*m4.values(), *m6.values()):
            assert (m.fsm_state, m.routes_advertised, m.session_flap_count) == \
                ("established", N4 if m.name.endswith("4") else N6, 0), m

        got = prefixes(a, "d1.bgp4").ipv4_unicast_prefixes
        assert sorted((p.ipv4_address, p.prefix_length) for p in got) == \
            sorted((f"198.19.{k}.0", 24) for k in range(N4))
        first = got[0]
        assert (first.ipv4_next_hop, first.origin) == ("198.18.1.2", "igp")
        assert [s.as_numbers for s in first.as_path.segments] == [[65002, 65102]]
        assert [(x.type, x.as_number, x.as_custom) for x in first.communities] == [("manual_as_number", 65002, 9)]
        assert {p.ipv4_next_hop for p in prefixes(a, "d2.bgp4").ipv4_unicast_prefixes} == {"198.18.1.9"}
        got6 = prefixes(a, "d2.bgp6").ipv6_unicast_prefixes  # over iBGP: no AS of the sender's prepended
        assert len(got6) == N6 and all(p.ipv6_next_hop == "2001:2::1" for p in got6)
        assert {(p.local_preference, tuple(tuple(s.as_numbers) for s in p.as_path.segments)) for p in got6} == \
            {(100, ((65101,),))}

        wait_resolved(a, 4, [])
        control(a, "start")
        fm = wait_stopped(a, ["to-d2-routes4", "to-d1-routes6"])
        for n in ("to-d2-routes4", "to-d1-routes6"):
            assert (fm[n].frames_tx, fm[n].frames_rx, fm[n].loss) == (1000, 1000, 0), n

        set_state(a, route=("withdraw", ["d2.routes4"]))
        wait_for("d2's IPv4 routes withdrawn at d1", lambda: bgp_metrics(a, 4)["d1.bgp4"].routes_received == 0)
        assert bgp_metrics(a, 4)["d2.bgp4"].route_withdraws_sent == N4
        set_state(a, route=("advertise", ["d2.routes4"]))
        wait_for("advertised again", lambda: bgp_metrics(a, 4)["d1.bgp4"].routes_received == N4)

        set_state(a, peers=("down", ["d1.bgp4"]))
        wait_for("d2's session down", lambda: bgp_metrics(a, 4)["d2.bgp4"].session_state == "down")
        set_state(a, peers=("up", ["d1.bgp4"]))
        m4 = wait_for("up again", lambda: established(a, 4, N4))
        assert m4["d2.bgp4"].session_flap_count == 1, m4["d2.bgp4"]
    assert bird_processes() == before, "BIRD outlives the server"


def test_ebgp_over_ipv6_prepends_the_senders_as_and_carries_the_traffic(veth):
    """The IPv6 sessions as eBGP (the test above runs them as iBGP): every /64 received with the
    sender's AS in front of its path and the sender as next hop, and a flow to them exact."""
    ns_a, if_a, ns_b, if_b = veth
    ports = [f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"]
    with serve(ports) as url:
        a = api(url)
        c = two_speakers(a, ports, kind6="ebgp")
        f = c.flows.flow(name="to-d1-routes6")[-1]
        f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = ["d2.ipv6"], ["d1.routes6"]
        ip = f.packet.ethernet().ipv6()[-1]
        ip.dst.increment.start, ip.dst.increment.step, ip.dst.increment.count = "2001:2:100::1", "0:0:0:1::", N6
        f.packet.udp()
        f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 5000, 1000
        f.metrics.enable, f.metrics.loss = True, True
        a.set_config(c)
        m6 = wait_for("IPv6 eBGP sessions up, every route received", lambda: established(a, 6, N6))
        assert {(m.fsm_state, m.routes_advertised) for m in m6.values()} == {("established", N6)}
        got6 = prefixes(a, "d2.bgp6").ipv6_unicast_prefixes
        assert {(ipaddress.ip_address(p.ipv6_address), p.prefix_length) for p in got6} == \
            {(ipaddress.ip_address(f"2001:2:100:{k:x}::"), 64) for k in range(N6)}
        assert {(p.ipv6_next_hop, tuple(tuple(s.as_numbers) for s in p.as_path.segments)) for p in got6} == \
            {("2001:2::1", ((65001, 65101),))}
        wait_resolved(a, 6, [])
        control(a, "start")
        fm = wait_stopped(a, ["to-d1-routes6"])["to-d1-routes6"]
        assert (fm.frames_tx, fm.frames_rx, fm.loss) == (1000, 1000, 0)


def test_a_bgp_interface_on_another_devices_address_is_refused_naming_it(veth):
    ns_a, if_a, ns_b, if_b = veth
    ports = [f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"]
    with serve(ports) as url:
        a = api(url)
        c = a.config()
        c.ports.port(name="p1", location=ports[0]).port(name="p2", location=ports[1])
        device(c, "d1", "p1", MAC1, ("198.18.1.1", "198.18.1.2", 24), None)
        device(c, "d2", "p2", MAC2, ("198.18.1.2", "198.18.1.1", 24), None)
        d1 = c.devices[0]
        d1.bgp.router_id = "1.1.1.1"
        d1.bgp.ipv4_interfaces.add(ipv4_name="d2.ipv4").peers.v4peer(name="x", peer_address="198.18.1.2",
                                                                      as_type="ebgp", as_number=65001)
        with pytest.raises(Exception) as e:
            a.set_config(c)
        (err,) = e.value.args[0].errors
        assert err.startswith("devices[0].bgp.ipv4_interfaces[0].ipv4_name: 'd2.ipv4' is an address of device 'd2'")


#: Routes the router learns from the tester's device.
LEARNT = 10_000


@contextmanager
def router_bird(ns_r: str):
    """BIRD in the router's namespace (AS 65000): an eBGP session to device d2 (198.18.2.2) whose
    routes it installs in the router's FIB (``proto bird``); stopped at the end."""
    with tempfile.TemporaryDirectory(prefix="nrt-bird-") as d:
        conf = f"{d}/r.conf"
        with open(conf, "w") as f:
            f.write("router id 198.18.2.1;\nprotocol device {}\n"
                    "protocol kernel { ipv4 { import none; export all; }; }\n"
                    "protocol bgp tester { local 198.18.2.1 as 65000; neighbor 198.18.2.2 external; "
                    "connect delay time 1; ipv4 { import all; export none; }; }\n")
        proc = subprocess.Popen(["ip", "netns", "exec", ns_r, "bird", "-f", "-c", conf, "-s", f"{d}/r.ctl"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            yield
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def fib(ns: str) -> int:
    out = subprocess.run(["ip", "-n", ns, "-4", "route", "show", "proto", "bird"], capture_output=True, text=True)
    return len(out.stdout.splitlines())


def test_a_router_learns_the_testers_routes_over_ebgp_and_forwards_to_every_one():
    """The DUT, a Linux router in a namespace with BIRD, learns 10 000 prefixes from the tester's
    device d2 over eBGP and installs them; a flow from d1 to every one of them (the route range as
    its receiver) arrives exact at d2's port, forwarded by the DUT's FIB."""
    with routed() as (ns_a, if_a, ns_r, ns_b, if_b), router_bird(ns_r):
        ports = [f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"]
        with serve(ports) as url:
            a = api(url)
            c = two_devices(a, ports, (("198.18.1.2", "198.18.1.1", 24), None), (("198.18.2.2", "198.18.2.1", 24), None))
            d2 = c.devices[1]
            d2.bgp.router_id = "198.18.2.2"
            p = d2.bgp.ipv4_interfaces.add(ipv4_name="d2.ipv4").peers.v4peer(
                name="d2.bgp", peer_address="198.18.2.1", as_type="ebgp", as_number=65002)[-1]
            p.v4_routes.add(name="d2.routes").addresses.add(address="198.19.0.0", prefix=32, count=LEARNT, step=1)
            f = c.flows.flow(name="to-every-route")[-1]
            f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = ["d1.ipv4"], ["d2.routes"]
            ip = f.packet.ethernet().ipv4()[-1]
            ip.dst.increment.start, ip.dst.increment.step, ip.dst.increment.count = "198.19.0.0", "0.0.0.1", LEARNT
            f.packet.udp()
            f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 10_000, LEARNT
            f.metrics.enable, f.metrics.loss = True, True
            a.set_config(c)
            wait_for("the session up, every route advertised",
                     lambda: bgp_metrics(a, 4).get("d2.bgp") and bgp_metrics(a, 4)["d2.bgp"].routes_advertised == LEARNT)
            wait_for("every route in the DUT's FIB", lambda: fib(ns_r) == LEARNT)
            wait_resolved(a, 4, [])
            control(a, "start")
            m = wait_stopped(a, ["to-every-route"])["to-every-route"]
            assert (m.frames_tx, m.frames_rx, m.loss) == (LEARNT, LEARNT, 0)
