"""The Python API validates its inputs with errors that name the field (no root needed)."""
import pytest

import netrig
from netrig import _native
from netrig.errors import ConfigError
from netrig.model import FrameSize, parse_rate
from netrig.trial import rate_spec


def test_stream_defaults_are_valid_and_in_benchmark_ranges():
    s = netrig.Stream(rate_pps=1000)
    assert s.src_ip.startswith("198.18.") and s.dst_ip.startswith("198.19.")
    assert s.mean_frame_size == 64
    spec = s.spec(3)
    assert spec.name == "stream3" and spec.intended_rate_pps == 1000 and spec.frame_size == _native.FrameSizeSpec.fixed(64)
    assert netrig.Stream(rate_pps=1000, name="up").spec(3).name == "up"


def test_stream_parses_user_friendly_values():
    s = netrig.Stream(frame_size="imix", rate="1Gbps", flows={"src_ips": 4, "dst_ports": 3},
                      flow_order="pseudorandom", seed=7)
    spec = s.spec(0)
    assert spec.frame_size.kind == "weighted" and spec.frame_size.mean_size == pytest.approx(s.mean_frame_size)
    assert spec.rate == _native.RateSpec.l1_bps(1e9)
    assert (spec.flows.count, spec.flows.order, spec.flows.seed) == (12, "pseudorandom", 7)
    assert netrig.Stream(frame_size=FrameSize(random=(64, 128)), rate="max").spec(0).intended_rate_pps is None
    assert netrig.Stream(rate="50%", line_rate_bps=1e9).spec(0).intended_rate_pps == pytest.approx(744_047.6, rel=1e-6)


def test_model_values_convert_to_specs():
    assert FrameSize.parse("inc:64-128:32").spec() == _native.FrameSizeSpec.increment(64, 128, 32)
    assert FrameSize.parse("random:64-1518").spec().max_size == 1518
    assert rate_spec(parse_rate("10Gbps-l2")) == _native.RateSpec.l2_bps(10e9)
    assert rate_spec(parse_rate("max")).kind == "max" and rate_spec(parse_rate("max")).value is None


@pytest.mark.parametrize("kw,field", [
    ({"rate_pps": 1000, "rate": "1kpps"}, "rate"),
    ({}, "rate"),
    ({"rate_pps": -1}, "rate_pps"),
    ({"rate_pps": "fast"}, "rate_pps"),
    ({"rate": "lots"}, "rate"),
    ({"rate_pps": 1000, "src_mac": "zz"}, "src_mac"),
    ({"rate_pps": 1000, "dst_mac": 42}, "dst_mac"),
    ({"rate_pps": 1000, "dst_ip": "198.19.0.300"}, "dst_ip"),
    ({"rate_pps": 1000, "dst_ip": "2001:2::1"}, "dst_ip"),
    ({"rate_pps": 1000, "src_port": 70000}, "src_port"),
    ({"rate_pps": 1000, "ttl": "x"}, "ttl"),
    ({"rate_pps": 1000, "vlan": 4095}, "vlan"),
    ({"rate_pps": 1000, "vlan": 1.5}, "vlan"),
    ({"rate_pps": 1000, "flows": 0}, "flows"),
    ({"rate_pps": 1000, "flows": True}, "flows"),
    ({"rate_pps": 1000, "flows": {"src_ipz": 3}}, "flows"),
    ({"rate_pps": 1000, "flows": {"src_ips": 0}}, "flows.src_ips"),
    ({"rate_pps": 1000, "flows": 1 << 25}, "flows"),
    ({"rate_pps": 1000, "frame_size": 40}, "frame_size"),
    ({"rate_pps": 1000, "frame_size": "jumbo"}, "frame_size"),
    ({"rate_pps": 1000, "vlan": 10, "dst_ip": "2001:2::1", "src_ip": "2001:1::1", "frame_size": 64}, "frame_size"),
    ({"rate": "50%"}, "rate"),
    ({"rate": "2Mpps", "line_rate_bps": 1e9}, "rate"),
    ({"rate_pps": 1000, "line_rate_bps": -1}, "line_rate_bps"),
    ({"rate_pps": 1000, "flow_order": "random"}, "flow_order"),
    ({"rate_pps": 1000, "seed": -1}, "seed"),
    ({"rate_pps": 1000, "udp_checksum": "yes"}, "udp_checksum"),
    ({"rate_pps": 1000, "tx_port": -1}, "tx_port"),
    ({"rate_pps": 1000, "name": 5}, "name"),
])
def test_stream_errors_name_the_field(kw, field):
    with pytest.raises(ConfigError) as e:
        netrig.Stream(**kw)
    assert e.value.field == field, str(e.value)


def test_port_validation():
    with pytest.raises(ConfigError, match="io") as e:
        netrig.Port("eth0", io="dpdk")
    assert "auto, af_xdp, af_packet, socket" in str(e.value)
    with pytest.raises(ConfigError, match="queues"):
        netrig.Port("eth0", queues=0)
    with pytest.raises(ConfigError, match="ifname"):
        netrig.Port("x" * 16)
    with pytest.raises(ConfigError, match="af_xdp option") as e:
        netrig.Port("eth0", io="af_packet", busy_poll_us=50)
    assert e.value.field == "busy_poll_us"
    with pytest.raises(ConfigError, match="busy_poll_us"):
        netrig.Port("eth0", io="af_xdp", busy_poll_us=-1)
    p = netrig.Port("eth0", busy_poll_us=50)
    assert (p.ifname, p.netns, p.io, p.queues, p.ring_frames, p.busy_poll_us) == ("eth0", None, "auto", 1, 0, 50)
    assert p == netrig.Port("eth0", busy_poll_us=50) and len({p, netrig.Port("eth0", busy_poll_us=50)}) == 1
    assert netrig.trial.IO_MODES == ("auto", "af_xdp", "af_packet", "socket")


def _spec(**kw):
    args = {"frame_size": _native.FrameSizeSpec.fixed(64), "rate": _native.RateSpec.pps(1000), **kw}
    return _native.StreamSpec(**args)


@pytest.mark.parametrize("make,field", [
    (lambda: _native.FrameSizeSpec.fixed(63), "frame_size"),
    (lambda: _native.FrameSizeSpec.fixed("64"), "frame_size"),
    (lambda: _native.FrameSizeSpec.weighted([(64, 0)]), "frame_size"),
    (lambda: _native.FrameSizeSpec.weighted([]), "frame_size"),
    (lambda: _native.FrameSizeSpec.weighted([64, 128]), "frame_size"),
    (lambda: _native.FrameSizeSpec.random(128, 64), "frame_size"),
    (lambda: _native.FrameSizeSpec.increment(64, 128, 0), "frame_size"),
    (lambda: _native.RateSpec.pps(0), "rate"),
    (lambda: _native.RateSpec.l1_bps(float("nan")), "rate"),
    (lambda: _native.RateSpec.percent_line(150), "rate"),
    (lambda: _native.RateSpec.l2_bps("1G"), "rate"),
    (lambda: _native.FlowSpec(src_ips=0), "flows.src_ips"),
    (lambda: _native.FlowSpec(dst_ports=65536), "flows.dst_ports"),
    (lambda: _native.FlowSpec(src_ips=1 << 12, dst_ips=1 << 13), "flows"),
    (lambda: _native.FlowSpec(order="shuffled"), "flows.order"),
    (lambda: _native.FlowSpec(seed=1.5), "flows.seed"),
    (lambda: _native.StopSpec.duration(0), "duration_s"),
    (lambda: _native.StopSpec.duration(float("inf")), "duration_s"),
    (lambda: _native.StopSpec.frames(0), "frames"),
    (lambda: _native.StopSpec.frames(1.5), "frames"),
    (lambda: _native.StopSpec.bursts(10, 0, 0.1), "bursts"),
    (lambda: _native.StopSpec.bursts(10, 2, -1), "bursts"),
    (lambda: _spec(frame_size=64), "frame_size"),
    (lambda: _spec(rate="1kpps"), "rate"),
    (lambda: _spec(flows={"src_ips": 2}), "flows"),
    (lambda: _spec(vlan=0), "vlan"),
    (lambda: _spec(dst_ip="2001:db8::1"), "dst_ip"),
    (lambda: _spec(src_mac="02:00:00:00:00"), "src_mac"),
    (lambda: _spec(frame_size=_native.FrameSizeSpec.fixed(1518), rate=_native.RateSpec.pps(1e6),
                   line_rate_bps=1e9), "rate"),
    (lambda: _spec(rate=_native.RateSpec.percent_line(10)), "rate"),
    (lambda: _native.Port(5), "ifname"),
    (lambda: _native.Port("eth0", netns=3), "netns"),
    (lambda: _native.Port("eth0", queues=65), "queues"),
    (lambda: _native.Port("eth0", ring_frames=-1), "ring_frames"),
    (lambda: _native.Port("eth0", io="af_xdp", busy_poll_us=2_000_000), "busy_poll_us"),
])
def test_every_spec_error_names_its_field(make, field):
    with pytest.raises(ConfigError) as e:
        make()
    assert e.value.field == field, str(e.value)


@pytest.mark.parametrize("kw,field", [
    ({"ports": [_native.Port("a")]}, "streams[0].rx_port"),
    ({"ports": ["a", "b"]}, "ports[0]"),
    ({"ports": _native.Port("a")}, "ports"),
    ({"streams": []}, "streams"),
    ({"streams": [_spec(), "s"]}, "streams[1]"),
    ({"streams": [_spec(), _spec(tx_port=2)]}, "streams[1].tx_port"),
    ({"stop": 10}, "stop"),
    ({"drain_s": -1}, "drain_s"),
    ({"warmup_s": float("nan")}, "warmup_s"),
    ({"late_s": "1s"}, "late_s"),
    ({"tx_cpus": [0, "1"]}, "tx_cpus[1]"),
    ({"learning": 1}, "learning"),
    ({"max_flow_results": -5}, "max_flow_results"),
])
def test_trial_spec_errors_name_the_field(kw, field):
    args = {"ports": [_native.Port("a"), _native.Port("b")], "streams": [_spec()],
            "stop": _native.StopSpec.duration(1), **kw}
    ports, streams, stop = args.pop("ports"), args.pop("streams"), args.pop("stop")
    with pytest.raises(ConfigError) as e:
        _native.TrialSpec(ports, streams, stop, **args)
    assert e.value.field == field, str(e.value)


def test_run_trial_needs_one_stop_condition():
    p = netrig.Port("lo")
    with pytest.raises(ConfigError, match="exactly one of duration_s, frames or bursts"):
        netrig.run_trial(p, p, [netrig.Stream(rate_pps=10)], duration_s=1, frames=10)
    with pytest.raises(ConfigError, match="streams"):
        netrig.run_trial(p, p, [], duration_s=1)
    with pytest.raises(ConfigError) as e:
        netrig.run_trial(p, p, [netrig.Stream(rate_pps=10)], duration_s=1, drain_s=-1)
    assert e.value.field == "drain_s"
    with pytest.raises(ConfigError) as e:
        netrig.run_trial(p, p, [netrig.Stream(rate_pps=10)], bursts=(10, 0, 0.1))
    assert e.value.field == "bursts"


def test_unknown_interface_is_an_interface_error():
    with pytest.raises(netrig.InterfaceError, match="nr-no-such0"):
        netrig.Port("nr-no-such0").info()


def test_line_rate_fps_is_the_engines():
    assert _native.line_rate_fps(1e9, 64) == pytest.approx(1_488_095.2, rel=1e-7)
    with pytest.raises(ConfigError) as e:
        _native.line_rate_fps("10G", 64)
    assert e.value.field == "bps"


def test_stream_protocols_tags_and_flow_ranges_reach_the_engine_spec():
    s = netrig.Stream(rate_pps=1000, frame_size=128, protocol="tcp", tcp_flags="sa", tcp_seq=7, vlan=10,
                      outer_vlan=20, flows={"vlans": 4, "dst_macs": 2, "src_ips": 3}, flow_order="pseudorandom")
    spec = s.spec(0)
    assert (spec.protocol, spec.tcp_flags, spec.ethertype, spec.vlan, spec.outer_vlan) == ("tcp", "SA", None, 10, 20)
    f = spec.flows
    assert (f.vlans, f.dst_macs, f.src_macs, f.src_ips, f.count, f.order) == (4, 2, 1, 3, 24, "pseudorandom")
    raw = netrig.Stream(rate_pps=1000, protocol="raw", ethertype="0x88b6", flows=5).spec(0)
    assert (raw.protocol, raw.ethertype, raw.flows.src_macs, raw.flows.src_ports) == ("raw", 0x88B6, 5, 1)
    plain = netrig.Stream(rate_pps=1000).spec(0)
    assert (plain.protocol, plain.tcp_flags, plain.vlan, plain.outer_vlan, plain.flows.count) == ("udp", None, None,
                                                                                                 None, 1)


@pytest.mark.parametrize("kw,field", [
    ({"protocol": "tcp", "frame_size": 64}, "frame_size"),
    ({"protocol": "icmp", "src_ip": "2001:2::1", "dst_ip": "2001:2::2", "frame_size": 80}, "frame_size"),
    ({"protocol": "raw", "ethertype": 0x86DD}, "ethertype"),
    ({"protocol": "raw", "flows": {"src_ips": 2}}, "flows.src_ips"),
    ({"outer_vlan": 3, "frame_size": 128}, "outer_vlan"),
    ({"vlan": 4094, "flows": {"vlans": 2}, "frame_size": 128}, "flows.vlans"),
])
def test_stream_protocol_errors_name_the_field(kw, field):
    with pytest.raises(ConfigError) as e:
        netrig.Stream(rate_pps=1000, **kw)
    assert e.value.field == field, e.value


def test_interrupt_status_is_the_signal_also_through_an_interrupted_trial():
    from netrig.errors import InterruptedTrial, Terminated, interrupt_status

    assert interrupt_status(KeyboardInterrupt()) == 130
    assert interrupt_status(Terminated(15)) == 143
    try:
        try:
            raise Terminated(15)
        except Terminated:
            raise InterruptedTrial("trial stopped by SIGTERM", "stopped by SIGTERM") from None
    except InterruptedTrial as e:
        assert interrupt_status(e) == 143
    assert interrupt_status(InterruptedTrial("trial interrupted")) == 130


@pytest.mark.parametrize("steps, step_s", [(0, 0.0), (-3, 0.0), (1, 1.0), (_native.MAX_RAMP_STEPS + 1, 1.0)])
def test_a_ramp_with_a_bad_step_count_says_so_not_that_its_steps_are_too_short(steps, step_s):
    from netrig.trial import linear_ramp

    with pytest.raises(ConfigError) as e:
        linear_ramp(0.1, 1.0, steps, step_s)
    assert str(e.value) == f"ramp: {steps} steps: a ramp has 2..{_native.MAX_RAMP_STEPS} steps (one phase per step)"
