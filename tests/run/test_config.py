"""Config files validate into dataclasses; every error names the field path."""
import pytest

from netrig.errors import ConfigError
from netrig.run.config import config_from_dict, load_config


def _cfg(**kw):
    base = {"testbed": {"name": "simulated"}, "methods": [{"rfc2544_throughput": {}}]}
    base.update(kw)
    return base


def test_toml_and_yaml(tmp_path):
    (tmp_path / "a.toml").write_text('''
[testbed]
name = "router"
[trial]
duration_s = "2s"
late_s = "50ms"
[frames]
sizes = [64, 1518, "imix"]
[[methods]]
rfc2544_throughput = { resolution_pct = 0.5 }
[[methods]]
[methods.mlrsearch]
goals = [{ name = "NDR" }, { name = "PDR", loss_ratio = 0.005 }]
''')
    c = load_config(tmp_path / "a.toml")
    assert (c.trial.duration_s, c.trial.late_s) == (2.0, 0.05)
    assert [f.label for f in c.frames.sizes] == [64, 1518, "imix"]
    assert c.methods[0].params.resolution_pct == 0.5 and c.methods[0].params.duration_s == 2.0
    assert [g.name for g in c.methods[1].params.goals] == ["NDR", "PDR"]
    (tmp_path / "b.yaml").write_text("testbed: {name: simulated}\nmethods:\n  - iperf: {rate_pct: 50}\n")
    assert load_config(tmp_path / "b.yaml").methods[0].params.rate_pct == 50
    # the normalised dict round-trips
    assert config_from_dict(c.to_dict()).to_dict() == c.to_dict()


@pytest.mark.parametrize("data, message", [
    (_cfg(methods=[{"rfc2544_throughput": {}}, {"rfc2544_throughput": {"resolution_pct": -1}}]),
     "methods[1].rfc2544_throughput.resolution_pct: must be > 0 (got -1"),
    (_cfg(methods=[{"rfc2544_throughput": {"resolutoin_pct": 1}}]),
     "methods[0].rfc2544_throughput.resolutoin_pct: unknown key; did you mean 'resolution_pct'?"),
    (_cfg(ports={"io": "xdp"}), "ports.io: must be one of auto, af_xdp, af_packet, socket (got 'xdp')"),
    (_cfg(ports={"family": 5}), "ports.family: must be one of 4, 6"),
    (_cfg(trail={}), "trail: unknown key; did you mean 'trial'?"),
    (_cfg(methods=[{"rfc2544_thruput": {}}]), "methods[0].rfc2544_thruput: unknown method; did you mean 'rfc2544_throughput'?"),
    (_cfg(methods=[{"mlrsearch": {"goals": [{"loss_ratio": 2}]}}]), "methods[0].mlrsearch.goals[0].loss_ratio: must be < 1"),
    (_cfg(frames={"sizes": [64, 12]}), "frames.sizes[1]: 12 B is out of range: frame sizes are 64..16384 bytes"),
    (_cfg(frames={"sizes": ["jumbo"]}), "frames.sizes[0]: 'jumbo' is not a frame size"),
    (_cfg(trial={"duration_s": "fast"}), "trial.duration_s: must be a duration like 2s"),
    (_cfg(trial={"late_s": 0}), "trial.late_s: must be > 0 (got 0.0): every frame would be late"),
    (_cfg(repetitions=0), "repetitions: must be an integer 1..10000"),
    (_cfg(methods=[{"rfc2544_latency": {"throughput_from": 0}}]), "methods[0].rfc2544_latency.throughput_from"),
    (_cfg(methods=[{"mlrsearch": {"implementation": "csit"}}]), "methods[0].mlrsearch.implementation: must be one of netrig, reference"),
    (_cfg(testbed={"name": "simulated", "simulator": {"capacity_pps": -5}}), "testbed.simulator.capacity_pps: must be > 0"),
    (_cfg(selftest={"factor": 0.5}), "selftest.factor: must be between 1 and 10"),
    (_cfg(thresholds={"max_loss_ratio": 2}), "thresholds.max_loss_ratio: must be a ratio from 0 to 1"),
    (_cfg(thresholds={"max_loss_ratio": -0.1}), "thresholds.max_loss_ratio: must be a ratio from 0 to 1"),
])
def test_errors_name_the_field(data, message):
    with pytest.raises(ConfigError) as e:
        config_from_dict(data)
    assert str(e.value).startswith(message), str(e.value)


def test_bad_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml")
    (tmp_path / "x.toml").write_text("[testbed\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_config(tmp_path / "x.toml")
    (tmp_path / "x.ini").write_text("")
    with pytest.raises(ConfigError, match="unknown file type"):
        load_config(tmp_path / "x.ini")


@pytest.mark.parametrize("name, text, message", [
    ("c.yaml", "testbed: {name: simulated}\ntestbed: {name: router}\nmethods: [iperf]\n",
     "c.yaml: testbed is given twice (lines 1 and 2): keep one"),
    ("c.yaml", "methods: [iperf]\ntrial:\n  duration_s: 1s\n  drain_s: 0s\n  duration_s: 2s\n",
     "c.yaml: trial.duration_s is given twice (lines 3 and 5): keep one"),
    ("c.yml", "methods:\n  - mlrsearch: {goals: [{name: NDR, loss_ratio: 0, loss_ratio: 0.1}]}\n",
     "c.yml: methods[0].mlrsearch.goals[0].loss_ratio is given twice (line 2): keep one"),
    ("c.json", '{"testbed": {"name": "simulated"}, "testbed": {"name": "router"}, "methods": ["iperf"]}',
     "c.json: testbed is given twice: keep one"),
    ("c.json", '{"methods": [{"iperf": {"rate_pct": 5, "rate_pct": 50}}]}',
     "c.json: methods[0].iperf.rate_pct is given twice: keep one"),
])
def test_a_key_given_twice_is_refused_naming_its_path(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / name)
    assert str(e.value).startswith(str(tmp_path / message)), str(e.value)


def test_yaml_aliases_and_merge_keys_are_not_keys_given_twice(tmp_path):
    (tmp_path / "c.yaml").write_text("testbed: &tb {name: simulated}\nselftest: {enabled: false}\n"
                                     "methods: [{iperf: &p {rate_pct: 5}}, {iperf: {<<: *p, rate_pct: 50}}]\n")
    assert [m.params.rate_pct for m in load_config(tmp_path / "c.yaml").methods] == [5, 50]


def test_stream_table_reaches_every_stream_and_only_then_the_result():
    c = config_from_dict(_cfg(stream={"protocol": "icmp", "vlan": 5, "flows": {"vlans": 2}}, ports={"flows": 4},
                              frames={"sizes": [128]}))
    assert c.stream.stream_fields()["protocol"] == "icmp"
    assert c.stream.flows_with(c.ports.flows) == {"vlans": 2, "src_ports": 4}
    assert c.to_dict()["stream"]["flows"] == {"vlans": 2}
    assert "stream" not in config_from_dict(_cfg()).to_dict(), "UDP defaults: results as before"
    with pytest.raises(ConfigError, match="stream.flows.src_ports"):
        config_from_dict(_cfg(stream={"flows": {"src_ports": 2}}, ports={"flows": 4}))
    with pytest.raises(ConfigError, match="frames.sizes"):
        config_from_dict(_cfg(stream={"protocol": "tcp", "vlan": 5, "outer_vlan": 6}, frames={"sizes": [76]}))


def _otg(**kw):
    base = {"otg": {"url": "http://127.0.0.1:8443", "pairs": [{"tx": "a/a1", "rx": "b/b1"}]},
            "selftest": {"enabled": False}, "methods": [{"rfc2544_throughput": {}}]}
    base.update(kw)
    return base


def test_an_otg_tester_replaces_the_test_bed_and_round_trips():
    c = config_from_dict(_otg())
    assert c.otg is not None and c.otg.pairs[0].rx == "b/b1" and c.otg.pairs[0].src_ip == "198.18.0.1"
    d = c.to_dict()
    assert "testbed" not in d and "ports" not in d and d["otg"]["url"] == "http://127.0.0.1:8443"
    assert config_from_dict(d).to_dict() == d
    assert "otg" not in config_from_dict(_cfg()).to_dict()  # results without it as before


@pytest.mark.parametrize("data, message", [
    (_otg(testbed={"name": "router"}), "testbed: an OTG tester ([otg]) has no testbed of this host"),
    (_otg(ports={"io": "af_packet"}), "ports: an OTG tester ([otg]) has no ports of this host"),
    (_otg(selftest={}), "selftest.enabled: an OTG tester cannot prove itself on this host's loopback"),
    (_otg(otg={"url": "ftp://x", "pairs": [{"tx": "a/a1", "rx": "b/b1"}]}), "otg.url: 'ftp://x': give the OTG"),
    (_otg(otg={"url": "http://h:1", "pairs": []}), "otg.pairs: give at least one pair"),
    (_otg(otg={"url": "http://h:1"}), "otg.pairs: is required"),
    (_otg(otg={"url": "http://h:1", "pairs": [{"tx": "a/a1", "rx": "a/a1"}]}), "otg.pairs[0].rx: 'a/a1' is also tx"),
    (_otg(otg={"url": "http://h:1", "pairs": [{"tx": "a/a1", "rx": "b/b1", "src_mac": "x"}]}),
     "otg.pairs[0].src_mac:"),
    (_otg(otg={"url": "http://h:1", "pairs": [{"tx": "a/a1", "rx": "b/b1"}], "token_file": "/nonexistent"}),
     "otg.token_file: '/nonexistent': no such file"),
    (_otg(otg={"url": "http://h:1", "pairs": [{"tx": "a/a1", "rx": "b/b1"}], "cert": "/etc/passwd"}),
     "otg.cert: give cert and key together"),
    (_otg(otg={"url": "http://h:1", "pairs": [{"tx": "a/a1", "rx": "b/b1", "src_ip": "2001:2::1",
                                               "dst_ip": "2001:2::2"}]}, frames={"sizes": [64]}),
     "frames.sizes: 64 B is below the minimum of 84 B"),
    (_otg(methods=[{"tcp": {}}]), "methods[0].tcp: runs on a test bed of this host"),
    (_otg(trial={"monitor": True}), "trial.monitor: not with an OTG tester"),
])
def test_otg_errors_name_the_field(data, message):
    with pytest.raises(ConfigError) as e:
        config_from_dict(data)
    assert str(e.value).startswith(message), str(e.value)
    assert "\n" not in str(e.value)
