"""OTG BGP devices checked whole before any BIRD starts: a peer on its own device's address and
family, names unique, route ranges inside their address space; the configuration written for BIRD
is one BIRD accepts (``bird -p``) and exports each range only to its peer."""
from __future__ import annotations

import shutil
import subprocess

import pytest
import snappi

from netrig.errors import ConfigError
from netrig.otg import bgp, devices
from netrig.otg.objects import Config, read


def config(**peer_kw):
    """Two devices, d1 speaking eBGP to d2 over IPv4 with one route range (``peer_kw`` edits it)."""
    c = snappi.Api().config()
    c.ports.port(name="p1", location="a").port(name="p2", location="b")
    for name, port, own, gw in (("d1", "p1", "198.18.1.1", "198.18.1.2"), ("d2", "p2", "198.18.1.2", "198.18.1.1")):
        e = c.devices.device(name=name)[-1].ethernets.ethernet(name=f"{name}.eth")[-1]
        e.connection.port_name = port
        e.ipv4_addresses.ipv4(name=f"{name}.ipv4", address=own, gateway=gw, prefix=24)
        e.ipv6_addresses.ipv6(name=f"{name}.ipv6", address=own.replace("198.18.1.", "2001:2::"),
                              gateway=gw.replace("198.18.1.", "2001:2::"), prefix=64)
    d1 = c.devices[0]
    d1.bgp.router_id = "198.18.1.1"
    p = d1.bgp.ipv4_interfaces.add(ipv4_name="d1.ipv4").peers.v4peer(
        name="d1.bgp", peer_address="198.18.1.2", as_type="ebgp", as_number=65001)[-1]
    r = p.v4_routes.add(name="d1.routes")
    r.addresses.add(address="198.19.0.0", prefix=24, count=3, step=2)
    r.communities.add(type="no_export")
    r.as_path.segments.add(type="as_seq", as_numbers=[65100, 65200])
    for key, value in peer_kw.items():
        setattr(p, key, value)
    return c


def planned(c) -> bgp.BgpPlan:
    cfg = read(Config, c.serialize(c.DICT), defer_headers=True)
    return bgp.plan(cfg.devices, devices.plan(cfg.devices, ["p1", "p2"]))


def test_a_route_range_expands_to_its_prefixes_and_is_a_flow_endpoint():
    p = planned(config())
    (peer,) = p.peers
    (r,) = peer.ranges
    assert list(r.networks()) == ["198.19.0.0/24", "198.19.2.0/24", "198.19.4.0/24"]
    assert (r.communities, r.as_path, peer.internal, p.tcp_ports) == (((65535, 65281),), (65100, 65200), False,
                                                                       frozenset({179}))
    k, endpoint = p.endpoints["d1.routes"]
    assert (k, str(endpoint.address), str(endpoint.gateway)) == (0, "198.19.0.0", "198.18.1.2")


@pytest.mark.skipif(shutil.which("bird") is None, reason="needs BIRD 2 (apt install bird2: scripts/setup.sh)")
def test_bird_accepts_the_configuration_and_exports_each_range_only_to_its_peer(tmp_path):
    p = planned(config())
    conf = tmp_path / "b.conf"
    conf.write_text("\n".join(bgp.config_lines(list(enumerate(p.peers)))) + "\n")
    done = subprocess.run(["bird", "-p", "-c", str(conf)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    text = conf.read_text()
    assert "route 198.19.4.0/24 blackhole;" in text and "neighbor 198.18.1.2 external;" in text
    assert 'if proto = "p0r0" then { bgp_community.add((65535, 65281)); bgp_path.prepend(65200); ' \
           'bgp_path.prepend(65100); accept; } reject;' in text


@pytest.mark.parametrize(("edit", "field", "words"), [
    ({"peer_address": "198.18.1.1"}, "devices[0].bgp.ipv4_interfaces[0].peers[0].peer_address",
     "is the device's own address"),
    ({"name": "d2.ipv4"}, "devices[0].bgp.ipv4_interfaces[0].peers[0].name", "is already a name"),
    ({"as_number": 70000, "as_number_width": "two"}, "devices[0].bgp.ipv4_interfaces[0].peers[0].as_number",
     "is not a two-byte AS number"),
])
def test_a_bad_peer_is_refused_naming_its_field(edit, field, words):
    with pytest.raises(ConfigError) as e:
        planned(config(**edit))
    assert e.value.field == field and words in e.value.message, (e.value.field, e.value.message)


def test_ipv6_routes_over_an_ipv4_session_are_refused_saying_why():
    c = config()
    c.devices[0].bgp.ipv4_interfaces[0].peers[0].v6_routes.add(name="v6").addresses.add(address="2001:2:9::")
    with pytest.raises(ConfigError) as e:
        planned(c)
    assert e.value.field == "devices[0].bgp.ipv4_interfaces[0].peers[0].v6_routes"
    assert "IPv6 routes over an IPv4 session: not supported" in e.value.message


def test_a_range_past_the_address_space_is_refused():
    c = config()
    c.devices[0].bgp.ipv4_interfaces[0].peers[0].v4_routes[0].addresses[0].address = "255.255.255.0"
    with pytest.raises(ConfigError) as e:
        planned(c)
    assert e.value.field.endswith("v4_routes[0].addresses[0].count") and "run past the IPv4 space" in e.value.message
