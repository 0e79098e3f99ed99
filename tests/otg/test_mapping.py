"""An OTG config → the generator's specs: ports by location, refusals and warnings naming the
path (nothing silently ignored), the engine's own errors translated back to OTG paths. No root:
nothing is opened."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from netrig.errors import ConfigError
from netrig.otg import headers, refusal
from netrig.otg.mapping import PRESETS, ServePort, plan
from netrig.otg.objects import Config, read
from netrig.trial import Port

ROOT = Path(__file__).resolve().parents[2]
SERVE = [ServePort("va@na", Port("va", "na"), None), ServePort("vb@nb", Port("vb", "nb"), None)]


def base(**flow) -> dict:
    f = {"name": "f", "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}},
         "packet": [{"choice": "ethernet"}, {"choice": "ipv4"}, {"choice": "udp"}]}
    f.update(flow)
    return {"ports": [{"name": "p1", "location": "va@na"}, {"name": "p2", "location": "vb"}], "flows": [f]}


def _dev(name: str, port: str, vlans: list | None = None,
         v4: tuple[str, str] | None = None, eth: str | None = None) -> dict:
    """A device with one Ethernet (``<name>.eth``, or ``eth``) on ``port``."""
    e: dict = {"name": eth or f"{name}.eth", "connection": {"choice": "port_name", "port_name": port},
               "vlans": vlans or []}
    if v4:
        e["ipv4_addresses"] = [{"name": f"{name}.ipv4", "address": v4[0], "gateway": v4[1]}]
    return {"name": name, "ethernets": [e]}


def _lldp(name: str, port: str, **more) -> dict:
    return {"name": name, "connection": {"choice": "port_name", "port_name": port}, **more}


def planned(cfg: dict):
    return plan(read(Config, copy.deepcopy(cfg)), SERVE)


def test_ports_flows_and_captures_map():
    cfg = base(size={"choice": "weight_pairs", "weight_pairs": {"choice": "predefined", "predefined": "tcp_imix"}},
               metrics={"loss": True, "rx_tx_ratio": {"choice": "rx_count"}})
    cfg["captures"] = [{"name": "c", "port_names": ["p2"], "format": "pcapng", "packet_size": 128}]
    p = planned(cfg)
    assert p.port_names == ("p1", "p2") and [s.name for s in p.serve_ports] == ["va@na", "vb@nb"]
    assert p.flows[0].tx == "p1" and p.flows[0].rx == ("p2",) and p.flows[0].loss and p.flows[0].rx_tx_ratio == 1
    assert p.captures[0].format == "pcapng" and len(p.capture_specs) == 1
    assert p.warnings == ()


def test_every_header_kind_and_pattern_maps():
    pat = {"ipv4": {"src": {"choice": "increment", "increment": {"start": "198.18.0.1", "step": "0.0.0.2",
                                                                  "count": 5}},
                    "dst": {"choice": "random", "random": {"min": "198.19.0.1", "max": "198.19.0.9", "count": 3}},
                    "priority": {"choice": "tos", "tos": {"precedence": {"choice": "values", "values": [1, 7]}}},
                    "header_checksum": {"choice": "generated", "generated": "bad"}},
           "ipv6": {"flow_label": {"choice": "random", "random": {"min": 1, "max": 99, "count": 4, "seed": 0}},
                    "dst": {"choice": "decrement", "decrement": {"start": "2001:2::ff", "step": "::1", "count": 3}}},
           "udp": {"checksum": {"choice": "custom", "custom": 4660}, "length": {"choice": "value", "value": 9}},
           "icmp": {"echo": {"identifier": {"choice": "values", "values": [1, 2]}}},
           "custom": {"bytes": "0x de:ad be"}}
    for kind, body in pat.items():
        heads = [{"choice": "ethernet"}, {"choice": kind, kind: body}]
        p = planned(base(packet=heads, size={"fixed": 200}))
        assert len(p.specs) == 1, kind
    # Nested OTG fields are the engine's flat ones, and back for errors.
    assert headers.NESTED[("ipv4", ("priority", "dscp", "phb"))] == "dscp"
    assert headers.otg_path("packet[1].ipv4.dscp", "flows[3]") == "flows[3].packet[1].ipv4.priority.dscp.phb"


def test_metric_tags_map_to_a_tag_period_and_their_values():
    """ipv4.src (4 values, its last 2 bits tagged) and udp.dst_port (3 values, all 16 bits): every
    index of the period (12) is one combination; the engine counts per index, the rows sum them."""
    heads = [{"choice": "ethernet"},
             {"choice": "ipv4", "ipv4": {"src": {"choice": "increment", "increment": {
                 "start": "198.18.0.1", "step": "0.0.0.1", "count": 4},
                 "metric_tags": [{"name": "src_low", "offset": 30, "length": 2}]}}},
             {"choice": "udp", "udp": {"dst_port": {"choice": "values", "values": [5000, 5001, 5002],
                                                    "metric_tags": [{"name": "dport"}]}}}]
    p = planned(base(packet=heads, size={"fixed": 128}))
    t = p.flows[0].tags
    assert t is not None and t.period == 12 and [x.name for x in t.tags] == ["src_low", "dport"]
    rows = t.rows(list(range(12)), [1] * 12)
    assert len(rows) == 12 and rows[0] == ((1, 5000), 0, 1) and rows[5] == ((2, 5002), 5, 1)
    assert t.tags[0].hex(1) == "0x1" and t.tags[1].hex(5000) == "0x1388"
    src_only = planned(base(packet=[{"choice": "ethernet"}, {"choice": "ipv4", "ipv4": heads[1]["ipv4"]}],
                            size={"fixed": 128}))
    assert src_only.flows[0].tags is not None and src_only.flows[0].tags.period == 4


@pytest.mark.parametrize("change, path, words", [
    (lambda c: c.update(devices=[{"name": "d1", "ipv4_loopbacks": [{"name": "lo", "eth_name": "x"}]}]),
     "devices[0].ipv4_loopbacks", "not emulated yet"),
    (lambda c: c.update(devices=[{"name": "d1", "bgp": {"router_id": "198.18.0.1", "ipv4_interfaces": [
        {"ipv4_name": "nowhere"}]}}]), "devices[0].bgp.ipv4_interfaces[0].ipv4_name",
     "'nowhere' is not an IPv4 address of the config's devices"),
    (lambda c: c.update(devices=[_dev("d1", "px")]), "devices[0].ethernets[0].connection.port_name", "not a port"),
    (lambda c: c.update(devices=[_dev("d1", "p1", vlans=[{"name": "v1"}, {"name": "v2"}])]),
     "devices[0].ethernets[0].vlans", "QinQ"),
    (lambda c: c.update(devices=[_dev("d1", "p1"), _dev("d2", "p2", eth="d1.eth")]),
     "devices[1].ethernets[0].name", "already the name of devices[0].ethernets[0]"),
    (lambda c: c.update(devices=[_dev("d1", "p1", v4=("198.18.0.1", "198.18.0.1"))]),
     "devices[0].ethernets[0].ipv4_addresses[0].gateway", "the address itself"),
    (lambda c: c.update(devices=[_dev("d1", "p1", v4=("198.18.0.1", "2001:2::1"))]),
     "devices[0].ethernets[0].ipv4_addresses[0].gateway", "not an IPv4 address"),
    (lambda c: c.update(lags=[{"name": "l"}]), "lags", "LAGs"),
    (lambda c: c.update(lldp=[_lldp("l1", "p9")]), "lldp[0].connection.port_name", "not a port"),
    (lambda c: c.update(lldp=[_lldp("l1", "p1"), _lldp("l2", "p1")]), "lldp[1].connection.port_name", "one each"),
    (lambda c: c.update(lldp=[_lldp("l1", "p1", hold_time=100)]), "lldp[0].hold_time", "multiple"),
    (lambda c: c.update(lldp=[_lldp("l1", "p1", org_infos=[{"oui": "0080C2"}])]), "lldp[0].org_infos",
     "not advertised"),
    (lambda c: c.update(lldp=[_lldp("l1", "p1", chassis_id={"choice": "mac_address_subtype", "mac_address_subtype": {
        "choice": "value", "value": "02:00:00:00:00:01"}})]), "lldp[0].chassis_id.mac_address_subtype.value",
     "local_subtype"),
    (lambda c: c["flows"][0].update(tx_rx={"choice": "device", "device": {"tx_names": ["d"], "rx_names": ["e"]}}),
     "flows[0].tx_rx.device.tx_names[0]", "not a device Ethernet, IPv4, IPv6 or BGP route range"),
    (lambda c: (c.update(devices=[_dev("d1", "p1", v4=("198.18.0.1", "198.18.0.2")), _dev("d2", "p2")]),
                c["flows"][0].update(tx_rx={"choice": "device", "device": {"tx_names": ["d1.ipv4"],
                                                                           "rx_names": ["d2.eth"]}})),
     "flows[0].tx_rx.device.rx_names[0]", "kind of the transmitter"),
    (lambda c: (c.update(devices=[_dev("d1", "p1"), _dev("d2", "p2")]),
                c["flows"][0].update(tx_rx={"choice": "device", "device": {"tx_names": ["d1.eth", "d2.eth"],
                                                                           "rx_names": ["d2.eth"]}})),
     "flows[0].tx_rx.device.tx_names", "one transmitter per flow"),
    (lambda c: c["flows"][0]["packet"].append({"choice": "pfcpause"}), "flows[0].packet[3].choice", "custom header"),
    (lambda c: c["flows"][0]["packet"][1].update(ipv4={"src": {"choice": "auto", "auto": {"choice": "dhcp"}}}),
     "flows[0].packet[1].ipv4.src.auto", "give the address"),
    (lambda c: c["flows"][0]["packet"].append({"choice": "custom", "custom": {"bytes": "00",
                                                                                "metric_tags": [{"name": "t"}]}}),
     "flows[0].packet[3].custom.metric_tags", "tag a field of a header with a pattern"),
    (lambda c: c["flows"][0]["packet"][2].update(udp={"src_port": {"metric_tags": [{"name": "t", "length": 17}]}}),
     "flows[0].packet[2].udp.src_port.metric_tags[0].length", "give 1..16"),
    (lambda c: c["flows"][0]["packet"][2].update(udp={"src_port": {"increment": {"count": 65_536},
                                                                   "metric_tags": [{"name": "s", "offset": 8, "length": 8}]},
                                                      "dst_port": {"values": [1, 2, 3], "metric_tags": [{"name": "d"}]}}),
     "flows[0].packet[2].udp.src_port.metric_tags", "repeat every 196608 frames"),
    (lambda c: c["flows"][0].update(packet=[{"choice": "ethernet"}, {"choice": "vlan"}, {"choice": "ipv4"},
                                            {"choice": "tcp", "tcp": {"src_port": {"metric_tags": [{"name": "t"}]}}}],
                                    size={"fixed": 68}),
     "flows[0].size", "no room for the signature"),
    (lambda c: c["flows"][0]["packet"][1].update(ipv4={"options": [{"choice": "router_alert"}]}),
     "flows[0].packet[1].ipv4.options", "custom header"),
    (lambda c: c["flows"][0].update(size={"weight_pairs": {"predefined": "standard_imix"}}),
     "flows[0].size.weight_pairs.predefined", "runts"),
    (lambda c: c["flows"][0].update(metrics={"predefined_metric_tags": {"rx_name": True}}),
     "flows[0].metrics.predefined_metric_tags", "tagged metrics"),
    (lambda c: c.update(captures=[{"name": "c", "port_names": ["p2"], "filters": [
        {"choice": "ethernet", "ethernet": {"pfc_queue": {"value": "01"}}}]}]),
     "captures[0].filters[0].ethernet.pfc_queue", "pause frame"),
    (lambda c: c.update(captures=[{"name": "c", "port_names": ["p2"], "filters": [
        {"choice": "ipv4", "ipv4": {"version": {"value": "4"}}}]}]),
     "captures[0].filters[0].ipv4.version.value", "in place"),
    (lambda c: c.update(captures=[{"name": "c", "port_names": ["p2"], "filters": [
        {"choice": "vlan", "vlan": {"id": {"value": "10006"}}}]}]),
     "captures[0].filters[0].vlan.id.value", "wider than the field's 2 byte(s)"),
    (lambda c: c.update(captures=[{"name": "c", "port_names": ["p2"], "filters": [
        {"choice": "custom", "custom": {"offset": 14, "value": "4g"}}]}]),
     "captures[0].filters[0].custom.value", "not hex"),
    (lambda c: c.update(captures=[{"name": "c", "port_names": ["p2"], "filters": [
        {"choice": "custom", "custom": {"offset": 14, "bit_length": 4, "value": "4"}}]}]),
     "captures[0].filters[0].custom.bit_length", "multiple of 8"),
    (lambda c: c.update(options={"protocol_options": {"auto_start_all": True}}), "options.protocol_options",
     "not applied"),
    (lambda c: c["flows"][0].update(rate={"percentage": 50}), "flows[0].rate.percentage", "layer1 speed"),
    (lambda c: c["flows"][0].update(duration={"fixed_packets": {"packets": 5, "gap": 20}}),
     "flows[0].duration.fixed_packets.gap", "layer1 speed"),
    (lambda c: c["flows"][0].update(duration={"burst": {"inter_burst_gap": {"bytes": 1000}}}),
     "flows[0].duration.burst.inter_burst_gap.bytes", "nanoseconds"),
    (lambda c: c["flows"][0].update(size={"fixed": 60}), "flows[0].size.fixed", "64"),
    (lambda c: c["flows"][0]["packet"].insert(2, {"choice": "tcp"}), "flows[0].size", "at least"),
    (lambda c: c["flows"][0]["packet"][1].update(ipv4={"priority": {"choice": "raw", "raw": {"value": 300}}}),
     "flows[0].packet[1].ipv4.priority.raw.value", "range"),
    (lambda c: c["ports"][1].update(location="nope"), "ports[1].location", "va@na, vb@nb"),
    (lambda c: c["ports"][1].update(location="va"), "ports[1].location", "one port each"),
    (lambda c: c["flows"][0]["tx_rx"]["port"].update(rx_names=["p9"]), "flows[0].tx_rx.port.rx_names[0]",
     "not a port"),
    (lambda c: c["flows"].append(copy.deepcopy(c["flows"][0])), "flows[1].name", "already the name"),
])
def test_refusals_and_errors_name_the_path(change, path, words):
    cfg = base()
    change(cfg)
    with pytest.raises(ConfigError) as e:
        planned(cfg)
    assert e.value.field == path and words in e.value.message, str(e.value)


def _ip(**src) -> dict:
    return base(packet=[{"choice": "ethernet"}, {"choice": "ipv4", "ipv4": {"src": src}}])


@pytest.mark.parametrize("cfg, path, words", [
    (_ip(choice="value", value="198.18.0.300"), "flows[0].packet[1].ipv4.src.value", "not an IPv4 address"),
    (_ip(value=7), "flows[0].packet[1].ipv4.src.value", "not a string"),
    (_ip(choice="value", value="198.18.0.1", bogus=1), "flows[0].packet[1].ipv4.src.bogus", "not a property"),
    (_ip(value="198.18.0.1", values=["198.18.0.2"]), "flows[0].packet[1].ipv4.src", "one choice"),
    (_ip(choice="increment", increment={"start": "198.18.0.1", "count": -1}),
     "flows[0].packet[1].ipv4.src.increment.count", "out of range"),
    (_ip(choice="increment", increment={"start": "198.18.0.1", "stop": 3}),
     "flows[0].packet[1].ipv4.src.increment.stop", "not a property"),
    (_ip(choice="increment", increment={"start": "198.18.0.1", "count": 0}), "flows[0].packet[1].ipv4.src",
     "count must be at least 1"),
    (_ip(choice="random", random={"min": "198.18.0.9", "max": "198.18.0.1"}), "flows[0].packet[1].ipv4.src",
     "min 198.18.0.9 is above max 198.18.0.1"),
    (base(packet=[{"choice": "udp", "udp": {"src_port": {"value": True}}}]), "flows[0].packet[0].udp.src_port.value",
     "not an integer"),
    (base(packet=[{"choice": "udp", "udp": {"src_port": {"values": [1, 2.5]}}}]),
     "flows[0].packet[0].udp.src_port.values[1]", "not an integer"),
    (base(packet=[{"choice": "udp", "udp": {"dst_port": {"value": 65536}}}]), "flows[0].packet[0].udp.dst_port.value",
     "out of range"),
    (base(packet=[{"choice": "udp", "udp": {"checksum": {"choice": "custom", "custom": 70000}}}]),
     "flows[0].packet[0].udp.checksum.custom", "out of range"),
])
def test_field_patterns_are_checked_as_they_are_mapped(cfg, path, words):
    with pytest.raises(ConfigError) as e:
        plan(read(Config, copy.deepcopy(cfg), defer_headers=True), SERVE)
    assert e.value.field == path and words in e.value.message, str(e.value)


def test_warnings_say_what_netrig_does_instead():
    cfg = base(packet=[{"choice": "ethernet", "ethernet": {"dst": {"choice": "auto"}}}, {"choice": "ipv4"}])
    cfg["flows"][0]["tx_rx"]["port"] = {"tx_name": "p1", "rx_name": "p2"}
    cfg["layer1"] = [{"name": "l1", "port_names": ["p1", "p2"], "speed": "speed_1_gbps", "mtu": 9000}]
    cfg["flows"][0]["rate"] = {"percentage": 10}
    for p in cfg["ports"]:
        del p["location"]
    p = planned(cfg)
    text = "\n".join(p.warnings)
    for words in ("ports[0].location: none given", "rx_name: deprecated", "ethernet.dst.auto", "layer1[0].speed",
                  "layer1[0].mtu"):
        assert words in text
    assert p.line_rates == (1e9, 1e9)


def test_frames_without_room_for_the_signature_are_sent_untracked_and_warned():
    tcp = [{"choice": "ethernet"}, {"choice": "vlan"}, {"choice": "ipv4"}, {"choice": "tcp"}]
    some = planned(base(packet=tcp, size={"choice": "increment", "increment": {"start": 64, "end": 80, "step": 4}}))
    assert some.specs[0].untracked_sizes == [64, 68, 72, 76]
    assert any(w.startswith("flows[0].size: its frames of 64–76 B have no room") for w in some.warnings)
    none = planned(base(packet=tcp, size={"choice": "fixed", "fixed": 64}))
    assert none.specs[0].untracked_sizes == [64]
    assert any(w.startswith("flows[0].size: no frame of this flow (64 B)") for w in none.warnings)
    assert not [w for w in planned(base(size={"choice": "fixed", "fixed": 64})).warnings if "signature" in w]
    v6 = [{"choice": "ethernet"}, {"choice": "ipv6"}, {"choice": "tcp"}]
    with pytest.raises(ConfigError, match=r"cannot hold these headers \(74 B\): use frames of at least 78 B"):
        planned(base(packet=v6, size={"choice": "fixed", "fixed": 64}))


def test_presets_follow_the_model():
    assert PRESETS["imix"] == ((64, 7.0), (570, 4.0), (1518, 1.0))
    assert all(w > 0 for ps in PRESETS.values() for _, w in ps)


def test_the_docs_table_is_the_refusal_table():
    text = (ROOT / "docs" / "otg.md").read_text()
    start = text.index("<!-- refusal table -->")
    end = text.index("<!-- end refusal table -->")
    assert text[start:end].split("\n", 1)[1] == refusal.markdown(), "docs/otg.md: regenerate the table " \
        "(python -c 'from netrig.otg import refusal; print(refusal.markdown())')"


def _plain_value(pattern_class: str, k: int):
    """A valid plain value of a pattern class (its model format), different for different ``k``."""
    info = headers._info(pattern_class)
    if info.conv is headers._mac:
        return f"02:00:00:00:00:{k % 200 + 1:02x}"
    if info.conv is headers._ipv4:
        return f"198.18.0.{k % 200 + 1}"
    if info.conv is headers._ipv6:
        return f"2001:2::{k % 200 + 1:x}"
    return min(info.lo + k % 3 + 1, info.hi)


def _plain_bodies(kind: str):
    """Bodies of a ``kind`` header with every field pattern set (nested ones too), each body in one
    of the plain choices, taken in turn."""
    choices = ("value", "values", "increment", "decrement", "random")
    for c in range(len(choices)):
        body: dict = {}

        def fill(obj: dict, class_name: str, at: tuple[str, ...], c: int = c) -> None:
            for k, (prop, (what, arg, _, _)) in enumerate(headers._actions(kind, class_name, at).items()):
                if what == "nest":
                    fill(obj.setdefault(prop, {}), arg, (*at, prop), c)
                elif what == "pattern" and headers._info(arg).form is not None:
                    mine = [x for x in choices if x in headers._info(arg).members]  # the class's choices
                    v, ch = _plain_value(arg, k), mine[(c + k) % len(mine)]
                    obj[prop] = {"choice": "value", "value": v} if ch == "value" else \
                        {"choice": "values", "values": [v, _plain_value(arg, k + 1)]} if ch == "values" else \
                        {"choice": ch, ch: {"start": v, "step": _plain_value(arg, 0), "count": 3}} \
                        if ch in ("increment", "decrement") else \
                        {"choice": "random", "random": {"min": v, "max": v, "count": 4, "seed": 7}}
        fill(body, headers._BODY_CLASS[kind], ())
        yield body


@pytest.mark.parametrize("kind", [k for k in headers.KINDS if k != "custom"])
def test_the_engines_header_walk_maps_every_plain_field_as_the_python_walk_does(kind):
    """``_native.HeaderForm`` (the one pass the scale of a 4096-flow config needs) gives, for a body
    with every field pattern in every plain choice, the header the field-by-field walk gives; what is
    not plain (a checksum, ``auto``, a refused property) it leaves to that walk."""
    form = headers._header_form(kind)
    for body in _plain_bodies(kind):
        fast = form.convert(copy.deepcopy(body))
        assert fast is not None, body
        assert repr(fast) == repr(headers.walked(kind, body, "p", [])), body
    assert form.convert({"no_such_field": {"value": 1}}) is None
    if kind == "udp":
        assert form.convert({"checksum": {"choice": "generated", "generated": "bad"}}) is None
        assert form.convert({"src_port": {"choice": "value", "value": 70000}}) is None


@pytest.mark.parametrize("head, path, words", [
    ({"choice": "ipv4", "ipv44": {}}, "flows[0].packet[1].ipv44", "not a property of FlowHeader"),
    ({"choice": "ipv4", "ipv4": {"ttl": {"value": 1}}}, "flows[0].packet[1].ipv4.ttl", "not a property of FlowIpv4"),
    ({"choice": "ipv4", "ipv4": 5}, "flows[0].packet[1].ipv4", "not an object"),
    ({"choice": "udp", "ipv4": {}}, "flows[0].packet[1].ipv4", "choice is 'udp'"),
    ({"choice": "custom", "custom": {}}, "flows[0].packet[1].custom.bytes", "is required"),
    ("udp", "flows[0].packet[1]", "is not an object"),
])
def test_a_header_left_to_the_mapping_is_checked_against_the_model(head, path, words):
    """The config's check leaves the headers to the mapping (the server's ``defer_headers``): what
    the engine's converter does not take whole is checked against the model there, naming the path."""
    with pytest.raises(ConfigError) as e:
        plan(read(Config, base(packet=[{"choice": "ethernet"}, head]), defer_headers=True), SERVE)
    assert e.value.field == path and words in e.value.message, str(e.value)


def test_a_header_given_by_its_member_alone_is_that_header():
    given = {"udp": {"src_port": {"value": 7}}}
    assert headers.header(given, "flows[0]", 1, []).kind == "udp" and given["choice"] == "udp"
    assert headers.header({}, "flows[0]", 0, []).kind == "ethernet"  # the model's default
