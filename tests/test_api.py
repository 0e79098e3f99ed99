"""The Python API validates its inputs with errors that name the field (no root needed)."""
import pytest

import netrig
from netrig.errors import ConfigError


def test_stream_defaults_are_valid_and_in_benchmark_ranges():
    s = netrig.Stream(rate_pps=1000)
    assert s.src_ip.startswith("198.18.") and s.dst_ip.startswith("198.19.")
    assert s.mean_frame_size == 64


@pytest.mark.parametrize("kw,field", [
    ({"rate_pps": 1000, "rate": "1kpps"}, "rate"),
    ({}, "rate"),
    ({"rate_pps": -1}, "rate_pps"),
    ({"rate_pps": 1000, "src_mac": "zz"}, "src_mac"),
    ({"rate_pps": 1000, "dst_ip": "198.19.0.300"}, "dst_ip"),
    ({"rate_pps": 1000, "dst_ip": "2001:2::1"}, "dst_ip"),
    ({"rate_pps": 1000, "vlan": 4095}, "vlan"),
    ({"rate_pps": 1000, "flows": 0}, "flows"),
    ({"rate_pps": 1000, "flows": {"src_ipz": 3}}, "flows"),
    ({"rate_pps": 1000, "frame_size": 40}, "frame_size"),
    ({"rate": "50%"}, "rate"),
    ({"rate_pps": 1000, "flow_order": "random"}, "flow_order"),
])
def test_stream_errors_name_the_field(kw, field):
    with pytest.raises(ConfigError) as e:
        netrig.Stream(**kw)
    assert e.value.field == field, str(e.value)


def test_port_validation():
    with pytest.raises(ConfigError, match="io"):
        netrig.Port("eth0", io="dpdk")
    with pytest.raises(ConfigError, match="queues"):
        netrig.Port("eth0", queues=0)
    with pytest.raises(ConfigError, match="ifname"):
        netrig.Port("x" * 16)
    with pytest.raises(ConfigError, match="af_xdp option") as e:
        netrig.Port("eth0", io="af_packet", busy_poll_us=50)
    assert e.value.field == "busy_poll_us"
    with pytest.raises(ConfigError, match="busy_poll_us"):
        netrig.Port("eth0", io="af_xdp", busy_poll_us=-1)
    assert netrig.Port("eth0", busy_poll_us=50)._native()["busy_poll_us"] == 50


def test_run_trial_needs_one_stop_condition():
    p = netrig.Port("lo")
    with pytest.raises(ConfigError, match="exactly one of duration_s, frames or bursts"):
        netrig.run_trial(p, p, [netrig.Stream(rate_pps=10)], duration_s=1, frames=10)
    with pytest.raises(ConfigError, match="streams"):
        netrig.run_trial(p, p, [], duration_s=1)


def test_unknown_interface_is_an_interface_error():
    with pytest.raises(netrig.InterfaceError, match="nr-no-such0"):
        netrig.Port("nr-no-such0").info()


def test_result_derives_totals():
    lat = netrig.Latency()
    s = netrig.StreamResult(0, "s", 0, 1, 64.0, 1, 100.0, 100, 100, 6400, 100.0, 97, 6208, 3, 0, 0, 0, lat, ())
    r = netrig.TrialResult((s, s), (), 1.0, 1.0, 0.5, True, None, False, lat, (1,), (0,), 0)
    assert (r.frames_sent, r.frames_received, r.frames_lost) == (200, 194, 6)
    assert r.loss_ratio == pytest.approx(0.03)
    d = r.to_dict(flows=False)
    assert d["frames_lost"] == 6 and d["loss_ratio"] == pytest.approx(0.03)
