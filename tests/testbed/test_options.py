"""Option validation, rule-set generation and the CLI's error lines: no root needed."""
from __future__ import annotations

import pytest

from netrig.cli.main import main
from netrig.errors import ConfigError
from netrig.testbed import TOPOLOGIES, Testbed, TestbedOptions, list_topologies, nft, parse_cap, parse_cpus


def test_parse_cap_units():
    assert parse_cap("100kpps") == (100_000.0, None)
    assert parse_cap("5000pps") == (5000.0, None)
    assert parse_cap("10Mbps") == (None, 10e6)
    assert parse_cap("1Gbit/s") == (None, 1e9)
    assert parse_cap(2500) == (2500.0, None)
    with pytest.raises(ConfigError, match="^cap: '10zpps'"):
        parse_cap("10zpps")
    with pytest.raises(ConfigError, match="^cap:"):
        parse_cap(0)


def test_parse_cpus():
    assert parse_cpus("0") == (0,)
    with pytest.raises(ConfigError, match="^dut_cpus: '999'"):
        parse_cpus("999")
    with pytest.raises(ConfigError, match="^dut_cpus: 'x'"):
        parse_cpus("x")


@pytest.mark.parametrize("kw, field", [
    (dict(rules=0), "rules"), (dict(rules=True), "rules"), (dict(nat="full"), "nat"),
    (dict(conntrack_max=-1), "conntrack_max"), (dict(dut_placement="magic"), "dut_placement"),
    (dict(ifaces=("bad name!",)), "ifaces"), (dict(cap_burst=0), "cap_burst"),
    (dict(dut_neighbours="dynamic"), "dut_neighbours"),
    (dict(addresses="198.18.0.2/33"), "addresses"), (dict(addresses=("198.18.0.2/24", 7)), "addresses"),
    (dict(addresses="198.18.0.2/24", gateways="198.18.1.1"), "gateways"),
    (dict(addresses="198.18.0.2/24", gateways="2001:2::1"), "gateways"),
    (dict(addresses="198.18.0.2/24,198.19.0.2/24", gateways="198.18.0.1"), "gateways"),
])
def test_options_name_the_field(kw, field):
    with pytest.raises(ConfigError) as e:
        TestbedOptions(**kw)
    assert e.value.field == field


def test_external_addresses_per_port_by_family():
    o = TestbedOptions(addresses="198.18.0.2/24+2001:2::2/64, 198.19.0.2/24",
                       gateways=["198.18.0.1+2001:2::1", "198.19.0.1"])
    a, b = o.port_addresses()
    assert (str(a.v4), str(a.v6), str(a.gw4), str(a.gw6)) == ("198.18.0.2/24", "2001:2::2/64", "198.18.0.1", "2001:2::1")
    assert (str(b.v4), b.v6, str(b.gw4), b.gw6) == ("198.19.0.2/24", None, "198.19.0.1", None)
    assert o.to_dict()["addresses"] == list(o.addresses)


def test_create_validates_without_building():
    with pytest.raises(ConfigError, match="^topology: 'mesh': unknown; choose one of loopback"):
        Testbed.create("mesh")
    with pytest.raises(ConfigError, match="^colour: unknown test-bed option"):
        Testbed.create("router", colour="red")
    with pytest.raises(ConfigError, match="^cap:"):
        Testbed.create("policer")
    with pytest.raises(ConfigError, match="^rules:"):
        Testbed.create("firewall", rules=1)
    with pytest.raises(ConfigError, match="^dut_cpus: topology loopback has no DUT"):
        Testbed.create("loopback", dut_cpus="0")
    with pytest.raises(ConfigError, match="^ifaces:"):
        Testbed.create("external")
    tb = Testbed.create("router", dut_cpus="0")
    assert tb.options.dut_cpus == (0,) and tb.ports == []


def test_topology_registry_has_every_topology():
    names = [n for n, _ in list_topologies()]
    assert names == ["loopback", "bridge", "router", "nat", "firewall", "fwnat", "acl", "policer", "fourport", "forwarder",
                     "oneport", "capture", "external"]
    assert all(TOPOLOGIES[n].description for n in names)


def test_firewall_ruleset_has_n_rules_and_ends_in_accept():
    text = nft.firewall_ruleset("abcd", 100, log=True)
    body = text.split("policy drop;")[1]
    rules = [line for line in body.splitlines() if line.strip() and line.strip() != "}"]
    # ct rule + 98 fillers + accept (IPv4 and IPv6 lines count as one rule)
    assert len(rules) == 101
    assert "ct state established,related" in rules[0]
    assert rules[-1].strip().endswith("accept") and 'log prefix "netrig_abcd accept: "' in rules[-1]
    assert "table inet netrig_abcd" in text


def test_acl_ruleset_is_stateless():
    text = nft.acl_ruleset("abcd", 10, log=False)
    assert "notrack" in text and "ct state" not in text and "log" not in text


def test_flowtable_rulesets_put_the_offload_rule_first():
    devs = ("nrabcd-dtx", "nrabcd-drx")
    text = nft.router_ruleset("abcd", devs)
    assert 'flowtable ft {' in text and 'devices = { "nrabcd-dtx", "nrabcd-drx" };' in text
    assert "hook ingress priority filter;" in text and "offload" not in text  # software fast path only
    fw = nft.firewall_ruleset("abcd", 10, log=False, flowtable=devs)
    forward = fw.split("policy drop;")[1].splitlines()
    assert forward[1].strip() == nft.FLOW_ADD == "meta l4proto { tcp, udp } counter flow add @ft"
    assert "ct state established,related" in forward[2]
    # a flowtable needs conntrack: the ACL keeps its stateless rules but loses notrack
    assert "notrack" not in nft.acl_ruleset("abcd", 10, log=False, flowtable=devs)
    assert "notrack" in nft.acl_ruleset("abcd", 10, log=False)
    snat = nft.snat_rules("nrabcd-drx", "masquerade", None, None)
    assert "chain forward" not in nft.nat_ruleset("abcd", snat)
    assert nft.FLOW_ADD in nft.nat_ruleset("abcd", snat, devs)
    fwnat = nft.firewall_ruleset("abcd", 10, log=True, snat=snat)
    assert "type nat hook postrouting priority srcnat" in fwnat and "masquerade" in fwnat
    assert "flowtable" not in fwnat and "policy drop;" in fwnat


def test_flowtable_and_fwnat_options_are_validated():
    assert TestbedOptions(flowtable=True).changed() == ["flowtable"]
    with pytest.raises(ConfigError, match="^flowtable: 'yes': must be true or false"):
        TestbedOptions(flowtable="yes")
    for topo in ("router", "acl", "firewall", "nat", "fwnat"):
        Testbed.create(topo, flowtable=True)
    for topo in ("policer", "bridge", "loopback"):
        with pytest.raises(ConfigError, match=f"^flowtable: topology {topo} does not use this option .*fwnat"):
            Testbed.create(topo, flowtable=True, **({"cap": "1kpps"} if topo == "policer" else {}))
    Testbed.create("fwnat", nat="static", rules=100, log=True, conntrack_max=5000)
    with pytest.raises(ConfigError, match="^rules: 1: a firewall needs at least 2 rules"):
        Testbed.create("fwnat", rules=1)
    with pytest.raises(ConfigError, match="^nat:"):
        Testbed.create("fwnat", nat="full")
    with pytest.raises(ConfigError, match="^nat: topology firewall does not use this option"):
        Testbed.create("firewall", nat="static")


def test_cli_list_and_errors(capsys):
    assert main(["testbed", "list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("loopback")
    fwnat = out.split("\nfwnat ")[1].splitlines()
    assert fwnat[1].split() == ["options:", "rules,", "log,", "nat,", "conntrack-max,", "conntrack-buckets,",
                                "conntrack-timeout-s,", "flowtable,", "dut-neighbours,", "tester-stack,", "mtu,", "dut-cpus,",
                                "dut-placement,", "dut-ring"]
    assert main(["testbed", "up", "mesh"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "topology: 'mesh': unknown; choose one of" in err
    assert main(["testbed", "down", "zz"]) == 2
    assert "id 'zz': not a test-bed id" in capsys.readouterr().err


def test_testbed_option_text_is_typed_like_a_config_file():
    from netrig.cli.common import testbed_options
    from netrig.run.config import config_from_dict

    opts = testbed_options(["rules=100", "log=false", "conntrack_max=5000", "mtu=9000", "tester-stack=yes",
                            "flowtable=on"])
    assert opts == {"rules": 100, "log": False, "conntrack_max": 5000, "mtu": 9000, "tester_stack": True,
                    "flowtable": True}
    cfg = config_from_dict({"testbed": {"name": "firewall", "options": opts}, "methods": ["rfc2544_throughput"]})
    assert cfg.testbed.options["rules"] == 100 and cfg.testbed.options["log"] is False
    pol = testbed_options(["cap=100kpps", "cap_burst=100"])
    assert pol == {"cap": "100kpps", "cap_burst": 100}
    Testbed.create("policer", **pol)
    with pytest.raises(ConfigError, match=r"^--testbed-option log: 'maybe': must be true or false"):
        testbed_options(["log=maybe"])


def test_a_topology_refuses_options_it_does_not_use():
    for topo, opts in [("router", {"cap": "100kpps"}), ("router", {"rules": 100}), ("loopback", {"nat": "static"}),
                       ("policer", {"cap": "1kpps", "log": True}), ("external", {"ifaces": ("eth1",), "mtu": 9000})]:
        name = next(k for k in opts if k != "ifaces" and (topo != "policer" or k != "cap"))
        with pytest.raises(ConfigError, match=f"^{name}: topology {topo} does not use this option"):
            Testbed.create(topo, **opts)
    Testbed.create("router", mtu=9000, tester_stack=True, dut_cpus="0", dut_placement="rps")
