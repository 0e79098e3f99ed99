"""``netrig forward --backend xdp`` really forwards in the kernel: netrig's engine sends signed
frames from a tester namespace into a DUT namespace where one XDP program per port redirects them
(DEVMAP, XDP_REDIRECT), netrig's receiver counts them per flow, a raw capture checks the MACs each
mode writes, and the programs' per-CPU counters match what netrig sent. Also: the kernel's veth
rule (a frame redirected into a veth reaches the peer only if the peer has NAPI), the CLI stopping
on SIGTERM with no program left, and the one-port loopback test bed (``oneport``: a macswap DUT,
tx and rx on one tester port) counting every frame once."""
from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time

import pytest
from tests.conftest import needs_root, sh
from tests.integration.test_forward_veth import NETRIG, _start_cli, _xdp_attached, capture, dut_bed

import netrig
from netrig import _native

pytestmark = [needs_root, pytest.mark.root]

FRAMES, RATE = 8_000, 40_000


def _gro_on(t: str, *ifnames: str) -> None:
    for i in ifnames:
        sh("ethtool", "-K", i, "gro", "on", ns=t)


def _send(t: str, names: dict, rx_name: str, frames: int = FRAMES):
    """af_packet tester: ta sends 4 flows addressed to tb's MAC; ``rx_name`` counts."""
    tx = netrig.Port(names["ta"], netns=t, io="af_packet")
    rx = tx if rx_name == "ta" else netrig.Port(names[rx_name], netns=t, io="af_packet")
    tb_mac = netrig.Port(names["tb"], netns=t).info().mac
    s = netrig.Stream(frame_size=64, rate_pps=RATE, src_mac=tx.info().mac, dst_mac=tb_mac, flows=4)
    r = netrig.run_trial(tx, rx, [s], frames=frames, drain_s=0.3, learning=False, max_stretch_pct=50)
    return r, tx.info().mac, tb_mac


def _forwarder(d: str, names: dict, mode: str, **kw) -> _native.Forwarder:
    ports = [_native.Port(names["da"], netns=d), _native.Port(names["db"], netns=d)]
    return _native.Forwarder(ports, mode, xdp_redirect=True, **kw)


@pytest.mark.parametrize("mode", ["io", "mac", "macswap", "rxonly"])
def test_xdp_backend_forwards_in_the_kernel(mode):
    with dut_bed() as (t, d, names):
        _gro_on(t, names["ta"], names["tb"])  # the veth rule: the egress veth's peer needs NAPI
        peer = "02:00:00:00:4e:99"
        fwd = _forwarder(d, names, mode, peer_macs=[None, peer] if mode == "mac" else None)
        assert [p.backend for p in fwd.ports] == ["xdp", "xdp"]
        assert "every receive queue" in fwd.ports[0].notes
        assert _xdp_attached(d).count("netrig_xdpfwd") == 2
        back = mode == "macswap"
        try:
            watch = contextlib.nullcontext({}) if mode == "rxonly" else capture(t, names["ta" if back else "tb"])
            with watch as cap:
                r, ta_mac, tb_mac = _send(t, names, "ta" if back else "tb")
            live = fwd.stats()
        finally:
            stats = fwd.stop()
        assert "xdp" not in _xdp_attached(d), "the programs go with the forwarder"
        assert r.frames_sent == FRAMES
        assert live[0].rx_frames == FRAMES, "the per-CPU counters are readable while it runs"
        assert stats[0].rx_frames == FRAMES and stats[0].rx_bytes == FRAMES * 60
        if mode == "rxonly":
            assert r.frames_received == 0 and sum(s.tx_frames for s in stats) == 0
            return
        assert r.frames_received == FRAMES and r.frames_lost == 0 and r.duplicated == 0, r.to_dict(flows=False)
        assert all(f.frames_received == FRAMES // 4 for f in r.flows)
        out = 0 if back else 1
        assert stats[out].tx_frames == FRAMES and stats[out].tx_drops == 0
        assert stats[1 - out].tx_frames == 0
        want = {"io": f"{tb_mac} {ta_mac}", "mac": f"{peer} {fwd.ports[1].mac}",
                "macswap": f"{ta_mac} {tb_mac}"}[mode]
        assert set(cap["pairs"]) == {want} and sum(cap["pairs"].values()) > 0, cap


def test_veth_rule_redirected_frames_need_napi_on_the_peer():
    """Linux 6.x: XDP_REDIRECT into a veth whose peer has neither an XDP program nor GRO is dropped
    (silently: the program counts a successful redirect). GRO on the peer delivers them."""
    with dut_bed() as (t, d, names):
        fwd = _forwarder(d, names, "io")
        try:
            r_off, _, _ = _send(t, names, "tb", frames=1000)
            _gro_on(t, names["tb"])
            r_on, _, _ = _send(t, names, "tb", frames=1000)
        finally:
            fwd.stop()
        assert r_off.frames_sent == 1000 and r_off.frames_received == 0, "the kernel's veth rule changed"
        assert r_on.frames_received == 1000


def test_xdp_cli_stops_on_sigterm_and_reports_kernel_counters():
    with dut_bed() as (t, d, names):
        _gro_on(t, names["tb"])
        p = _start_cli(d, names, "--backend", "xdp")  # the last --backend counts
        try:
            assert _xdp_attached(d).count("netrig_xdpfwd") == 2
            r, _, _ = _send(t, names, "tb")
            time.sleep(0.3)
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=20)
        finally:
            p.kill()
            p.communicate()
        assert p.returncode == 0, err
        doc = json.loads(out)
        assert doc["stopped_by"] == "signal" and doc["ports"][0]["backend"] == "xdp"
        assert r.frames_received == FRAMES
        assert doc["ports"][0]["rx_frames"] == doc["ports"][1]["tx_frames"] == FRAMES
        assert doc["totals"]["tx_drops"] == 0 and doc["intervals"]
        assert "xdp" not in _xdp_attached(d), "no XDP program left"


@pytest.mark.parametrize("backend", ["xdp", "af_packet"])
def test_oneport_trial_counts_every_frame_once(backend):
    """``netrig trial --testbed ID`` on the one-port loopback: tx and rx are the same tester port;
    the tester's own outgoing frames are never counted as received (tester on af_packet, which
    sees outgoing frames unless told not to; the DUT returns each frame once)."""
    from netrig.testbed import Testbed

    tb = Testbed.create("oneport", forward_backend=backend)
    with tb:
        assert [p.name for p in tb.ports] == ["tx"] and tb.port("rx") == tb.port("tx")
        r = subprocess.run([*NETRIG, "trial", "--testbed", tb.id, "--io", "af_packet", "--rate", "20kpps",
                            "--frames", "6000", "--flows", "3", "--drain", "0.3s", "--json"], capture_output=True, text=True, timeout=60)
        assert r.returncode in (0, 1), r.stderr
        doc = json.loads(r.stdout)
        namespaces = tb.namespaces
    res = doc["result"]
    assert res["frames_sent"] == 6000 and res["frames_received"] == 6000, res
    assert res["duplicated"] == 0 and res["frames_lost"] == 0 and res["frames_stray"] == 0
    (stream,) = res["streams"]
    assert stream["tx_port"] == stream["rx_port"] == 0, "one port sends and receives"
    assert [f["frames_received"] for f in stream["flow_results"]] == [2000, 2000, 2000]
    listed = sh("ip", "netns", "list")
    assert not any(ns in listed for ns in namespaces)


def test_oneport_refuses_other_modes_and_forwarder_refuses_macswap_and_a_second_testpmd_lcore():
    from netrig.errors import ConfigError
    from netrig.testbed import Testbed

    with pytest.raises(ConfigError) as e:
        Testbed.create("oneport", forward_mode="io")
    assert e.value.field == "forward_mode"
    with pytest.raises(ConfigError) as e:
        Testbed.create("forwarder", forward_mode="macswap")
    assert e.value.field == "forward_mode" and "oneport" in e.value.message
    with pytest.raises(ConfigError) as e:
        Testbed.create("forwarder", forward_backend="testpmd", dut_cpus="0,1")
    assert e.value.field == "dut_cpus" and "one lcore" in e.value.message
