"""``netrig forward`` really forwards: netrig's engine sends signed frames from a tester namespace
into a DUT namespace where the forwarder runs, netrig's receiver counts them per flow, and a raw
capture on the tester side checks the MAC addresses each mode writes. Every backend is used; the
CLI stops cleanly on SIGINT and SIGTERM with no XDP program left attached; the ``forwarder`` test
bed runs it as its DUT and takes it down with it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager

import pytest
from tests.conftest import needs_root, sh

import netrig
from netrig import _native

pytestmark = [needs_root, pytest.mark.root]

NETRIG = [sys.executable, "-m", "netrig.cli.main"]
FRAMES, RATE = 20_000, 50_000

#: Prints "ready", then every IPv4 frame's (dst, src) MAC pair and count as JSON once no frame has
#: come for 1 s (after the first) or after 15 s. It reads one frame per call and may miss some
#: (netrig's receiver counts them exactly): it checks which addresses frames carry, not how many.
CAPTURE = r"""
import json, socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
s.bind((sys.argv[1], 0)); s.settimeout(0.2)
print("ready", flush=True)
seen, last, t0 = {}, None, time.monotonic()
while time.monotonic() - t0 < 15 and (last is None or time.monotonic() - last < 1.0):
    try:
        f, addr = s.recvfrom(2048)
    except TimeoutError:
        continue
    if addr[2] == socket.PACKET_OUTGOING or f[12:14] != b"\x08\x00":
        continue
    k = f[:6].hex(":") + " " + f[6:12].hex(":")
    seen[k] = seen.get(k, 0) + 1
    last = time.monotonic()
print(json.dumps(seen), flush=True)
"""


@contextmanager
def dut_bed():
    """Tester namespace T (ports ta, tb) wired to DUT namespace D (da, db): ta↔da, tb↔db."""
    uid = uuid.uuid4().hex[:5]
    t, d = f"nrfw{uid}t", f"nrfw{uid}d"
    names = {"ta": f"nrfw{uid}ta", "tb": f"nrfw{uid}tb", "da": f"nrfw{uid}da", "db": f"nrfw{uid}db"}
    try:
        sh("ip", "netns", "add", t)
        sh("ip", "netns", "add", d)
        for k, (a, b) in enumerate((("ta", "da"), ("tb", "db"))):  # ifindexes apart: tests/conftest.py veth_pair
            sh("ip", "link", "add", names[a], "netns", t, "index", str(10 + k), "type", "veth", "peer", "name", names[b],
               "netns", d, "index", str(20 + k))
        for key, ifname in names.items():
            ns = t if key.startswith("t") else d
            sh("sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1", ns=ns)
            sh("ip", "link", "set", ifname, "up", ns=ns)
        yield t, d, names
    finally:
        sh("ip", "netns", "del", t, check=False)
        sh("ip", "netns", "del", d, check=False)


@contextmanager
def capture(ns: str, ifname: str):
    p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", CAPTURE, ifname],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        out: dict[str, dict[str, int]] = {}
        yield out
        line = p.stdout.readline()
        out.update({"pairs": json.loads(line)})
    finally:
        p.kill()
        p.communicate()


def _xdp_attached(ns: str) -> str:
    return "\n".join(ln for ln in sh("ip", "-d", "link", "show", ns=ns).splitlines() if "xdp" in ln)


def _trial(t: str, names: dict, rx_name: str, backend: str):
    tx = netrig.Port(names["ta"], netns=t, io="af_packet")
    rx = tx if rx_name == "ta" else netrig.Port(names[rx_name], netns=t, io="af_packet")
    tb_mac = netrig.Port(names["tb"], netns=t).info().mac
    s = netrig.Stream(frame_size=64, rate_pps=RATE, src_mac=tx.info().mac, dst_mac=tb_mac, flows=4,
                      rx_port=0 if rx is tx else 1)
    ports = [tx] if rx is tx else [tx, rx]
    r = netrig.run_trial(ports=ports, streams=[s], frames=FRAMES, drain_s=0.3, learning=False,
                         max_stretch_pct=50)
    return r, tx.info().mac, tb_mac


def _forwarder(d: str, names: dict, backend: str, mode: str, **kw) -> _native.Forwarder:
    ports = [_native.Port(names["da"], netns=d, io=backend), _native.Port(names["db"], netns=d, io=backend)]
    return _native.Forwarder(ports, mode, **kw)


@pytest.mark.parametrize("backend", ["af_xdp", "af_packet", "socket"])
def test_io_forwards_every_frame_unchanged(backend):
    with dut_bed() as (t, d, names):
        fwd = _forwarder(d, names, backend, "io")
        assert [p.backend for p in fwd.ports] == [backend, backend]
        try:
            with capture(t, names["tb"]) as cap:
                r, ta_mac, tb_mac = _trial(t, names, "tb", backend)
        finally:
            stats = fwd.stop()
        assert r.frames_sent == FRAMES and r.frames_received == FRAMES, r.to_dict(flows=False)
        assert r.frames_lost == 0 and all(f.frames_received == FRAMES // 4 for f in r.flows)
        assert set(cap["pairs"]) == {f"{tb_mac} {ta_mac}"} and sum(cap["pairs"].values()) > 0, "io leaves the frames as they were"
        by_port = {s.port: s for s in stats}
        assert by_port[0].rx_frames == FRAMES and by_port[1].tx_frames == FRAMES
        assert by_port[1].tx_drops == 0 and by_port[0].rx_ring_drops == 0
        if backend == "af_xdp":
            assert "netrig_fwd" not in _xdp_attached(d), "the XDP programs go with the forwarder"


@pytest.mark.parametrize("backend,mode,peer", [("af_xdp", "mac", "02:00:00:00:4e:99"), ("af_packet", "l2fwd", None)])
def test_mac_modes_rewrite_both_addresses(backend, mode, peer):
    with dut_bed() as (t, d, names):
        fwd = _forwarder(d, names, backend, mode, peer_macs=[None, peer] if peer else None)
        db_mac = fwd.ports[1].mac
        try:
            with capture(t, names["tb"]) as cap:
                r, _, _ = _trial(t, names, "tb", backend)
        finally:
            fwd.stop()
        assert r.frames_received == FRAMES and r.frames_lost == 0, r.to_dict(flows=False)
        want_dst = peer or "02:00:00:00:00:01"  # the default peer of port 1
        assert set(cap["pairs"]) == {f"{want_dst} {db_mac}"} and sum(cap["pairs"].values()) > 0


def test_macswap_returns_frames_on_the_ingress_port():
    with dut_bed() as (t, d, names):
        fwd = _forwarder(d, names, "socket", "macswap")
        try:
            with capture(t, names["ta"]) as cap:
                r, ta_mac, tb_mac = _trial(t, names, "ta", "socket")
        finally:
            stats = fwd.stop()
        assert r.frames_received == FRAMES and r.frames_lost == 0, r.to_dict(flows=False)
        assert set(cap["pairs"]) == {f"{ta_mac} {tb_mac}"} and sum(cap["pairs"].values()) > 0, "source and destination swapped"
        assert stats[0].rx_frames == stats[0].tx_frames == FRAMES
        assert stats[1].tx_frames == 0


def test_rxonly_counts_and_sends_nothing():
    with dut_bed() as (t, d, names):
        fwd = _forwarder(d, names, "af_xdp", "rxonly")
        try:
            r, _, _ = _trial(t, names, "tb", "af_xdp")
            time.sleep(0.2)
            live = fwd.stats()
        finally:
            stats = fwd.stop()
        assert r.frames_sent == FRAMES and r.frames_received == 0
        assert live[0].rx_frames == FRAMES, "counters are readable while it runs"
        assert sum(s.tx_frames for s in stats) == 0


def _start_cli(d: str, names: dict, *extra: str) -> subprocess.Popen:
    p = subprocess.Popen([*NETRIG, "forward", "--port", names["da"], "--port", names["db"], "--netns", d,
                          "--backend", "af_xdp", "--interval", "0.2", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    for line in p.stderr:
        if "Ctrl-C stops" in line:
            return p
    raise AssertionError(f"netrig forward did not start: {p.communicate()}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_cli_stops_cleanly_on_a_signal_and_detaches_xdp(sig):
    with dut_bed() as (t, d, names):
        p = _start_cli(d, names)
        try:
            assert _xdp_attached(d).count("netrig_fwd") == 2
            r, _, _ = _trial(t, names, "tb", "af_xdp")
            time.sleep(0.5)
            p.send_signal(sig)
            out, err = p.communicate(timeout=20)
        finally:
            p.kill()
            p.communicate()
        assert p.returncode == 0, err
        doc = json.loads(out)
        assert doc["stopped_by"] == ("interrupt" if sig == signal.SIGINT else "signal")
        assert r.frames_received == FRAMES
        assert doc["ports"][0]["rx_frames"] == doc["ports"][1]["tx_frames"] == FRAMES
        assert doc["totals"]["tx_drops"] == 0 and doc["ports"][0]["backend"] == "af_xdp"
        assert doc["intervals"], "per-interval rates are in the summary"
        assert "rx " in err and " q0: " in err, "per-interval statistics on the console"
        assert "netrig_fwd" not in _xdp_attached(d) and "xdp" not in _xdp_attached(d)


def test_cli_duration_and_json_file(tmp_path):
    with dut_bed() as (t, d, names):
        out = tmp_path / "fwd.json"
        r = subprocess.run([*NETRIG, "forward", "--port", names["da"], "--port", names["db"], "--netns", d,
                            "--backend", "socket", "--mode", "macswap", "--queues", "1", "--duration", "0.5",
                            "--json", str(out)], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        doc = json.loads(out.read_text())
        assert doc["stopped_by"] == "duration" and doc["mode"] == "macswap"
        assert 0.45 <= doc["duration_s"] < 3
        assert [w["cpu"] for w in doc["workers"]] == [0, 1 % _cpus()], "pinned workers are stated"


def _cpus() -> int:
    import os

    return os.cpu_count() or 1


def test_cli_errors_are_one_line():
    with dut_bed() as (_t, d, names):
        r = subprocess.run([*NETRIG, "forward", "--port", names["da"], "--port", "nosuch0", "--netns", d,
                            "--duration", "1"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2
        assert r.stderr.count("\n") == 1 and "nosuch0" in r.stderr, r.stderr
        assert "xdp" not in _xdp_attached(d), "a failed start leaves nothing attached"


def test_forwarder_testbed_is_a_dut_and_goes_with_the_testbed():
    from netrig.testbed import Testbed

    tb = Testbed.create("forwarder", forward_backend="af_packet", forward_mode="mac")
    with tb:
        procs = tb.state.processes
        assert procs and subprocess.run(["kill", "-0", str(procs[0].pid)]).returncode == 0
        tx, rx = tb.port("tx"), tb.port("rx")
        ptx = netrig.Port(tx.ifname, netns=tx.netns, io="af_packet")
        prx = netrig.Port(rx.ifname, netns=rx.netns, io="af_packet")
        s = netrig.Stream(frame_size=128, rate_pps=RATE, src_mac=tx.mac, dst_mac=tx.peer_mac, flows=2)
        r = netrig.run_trial(ptx, prx, [s], frames=FRAMES, drain_s=0.3, learning=False, max_stretch_pct=50)
        assert r.frames_received == FRAMES and r.frames_lost == 0, r.to_dict(flows=False)
        namespaces = tb.namespaces
    pid = procs[0].pid
    assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0, "forwarder stopped"
    listed = sh("ip", "netns", "list")
    assert not any(ns in listed for ns in namespaces)


@pytest.mark.parametrize("backend,mode", [("bridge", None), ("testpmd", "io"), ("testpmd", "mac"),
                                          ("testpmd_af_packet", "io")])
def test_forwarder_testbed_compares_the_bridge_and_testpmd_as_duts(backend, mode):
    """The same test bed with the Linux bridge or DPDK testpmd as its DUT (the seed's DPDK-vs-Linux
    comparison): every frame forwarded; testpmd is a process of the test bed, pinned to the CPU
    the tester is kept off, and goes with it."""
    from netrig.testbed import Testbed, testpmd

    if backend.startswith("testpmd"):
        testpmd.binary()  # installed by make setup (dpdk-dev): a missing one fails here, named
    tb = Testbed.create("forwarder", forward_backend=backend, **({"forward_mode": mode} if mode else {}))
    with tb:
        procs = tb.state.processes
        tx, rx = tb.port("tx"), tb.port("rx")
        free = tb.tester_cpus()
        ptx = netrig.Port(tx.ifname, netns=tx.netns, io="af_packet")
        prx = netrig.Port(rx.ifname, netns=rx.netns, io="af_packet")
        s = netrig.Stream(frame_size=128, rate_pps=RATE, src_mac=tx.mac, dst_mac=tx.peer_mac, flows=2)
        r = netrig.run_trial(ptx, prx, [s], frames=FRAMES, drain_s=0.3, learning=False, max_stretch_pct=50,
                             tx_cpus=free or None, rx_cpus=free or None)
        assert r.frames_received == FRAMES and r.frames_lost == 0, r.to_dict(flows=False)
        namespaces = tb.namespaces
        if backend == "bridge":
            assert not procs and "bridge" in sh("ip", "-d", "link", "show", ns=tb.dut_netns)
            # the kernel bridges behind the wire, on the DUT's CPU: the tester keeps off it
            assert tb.placement.mode == "wire" and not set(free) & set(tb.placement.cpus)
        else:
            assert len(procs) == 1 and procs[0].argv[0].endswith("dpdk-testpmd")
            held = tb.state.dut_threads_cpus
            assert held == [tb.state.placement.cpus[0]] and not set(held) & set(free)
            assert list(r.tx_cpus) == list(r.rx_cpus) == list(free)[:1]
    listed = sh("ip", "netns", "list")
    assert not any(ns in listed for ns in namespaces)
    for p in procs:
        assert subprocess.run(["kill", "-0", str(p.pid)], capture_output=True).returncode != 0
        if p.runtime_dir:  # testpmd's, under /var/run/dpdk: gone with the test bed
            assert not os.path.exists(p.runtime_dir)


@pytest.mark.parametrize("options,field", [
    ({"forward_backend": "bridge", "forward_mode": "mac"}, "forward_mode"),
    ({"forward_backend": "testpmd", "dut_cpus": "0,1"}, "dut_cpus"),
])
def test_forwarder_refuses_what_its_dut_cannot_do(options, field):
    from netrig.errors import ConfigError
    from netrig.testbed import Testbed

    with pytest.raises(ConfigError, match=field):
        Testbed.create("forwarder", **options)
    with pytest.raises(ConfigError, match="forward_backend"):
        Testbed.create("oneport", forward_backend="bridge")


#: A DUT that drops, duplicates, reorders and delays (its injector seeded: the same frames, the
#: same faults): 2 % of the frames 10 ms late, 0.5 % 100 ms late.
FAULTS = {"seed": 7, "drop": 0.01, "duplicate": 0.01, "reorder": 0.01, "distance": 20,
          "delay": [(0.02, 0.010), (0.005, 0.100)]}
#: The late threshold of both trials: between the two delays, and well inside the drain (0.3 s), so
#: every frame of the 100-ms class arrives, late, and none of the 10-ms class is late.
LATE_S = 0.05


def _faulty_trials(t: str, d: str, names: dict) -> tuple[list, list]:
    """One trial of FRAMES 64-byte frames from ta to tb through the faulty forwarder by each
    measurer `netrig run` has: this host's engine, and a `netrig serve` on the same ports. The
    forwarder is started afresh for each (the same seeded faults for the same frames). Returns the
    counts and the injector's logs."""
    from tests.otg.conftest import serve

    from netrig.measure import Load
    from netrig.measure.engine import EngineMeasurer
    from netrig.measure.otg import OtgMeasurer, OtgPair
    from netrig.model import FrameSize
    from netrig.otgclient.client import OtgClient

    load, duration_s = Load(float(RATE), FrameSize(size=64)), FRAMES / RATE
    kw = {"learning_frames": False, "drain_s": 0.3, "late_s": LATE_S, "tx_tolerance_pct": 50}
    locations = [f"{names['ta']}@{t}", f"{names['tb']}@{t}"]

    def engine():
        tx, rx = (netrig.Port(names[n], netns=t, io="af_packet") for n in ("ta", "tb"))
        return EngineMeasurer(tx, rx, {}, **kw).measure(load, duration_s)

    def otg():
        with serve(locations, "--io", "af_packet") as url:
            return OtgMeasurer(OtgClient("serve", url, None, None), [OtgPair(*locations)], **kw).measure(
                load, duration_s)

    counts, logs = [], []
    for measure in (engine, otg):
        fwd = _forwarder(d, names, "af_xdp", "io", faults=FAULTS)
        try:
            counts.append(measure())
        finally:
            fwd.stop()
        logs.append(fwd.fault_counts())
    return counts, logs


def test_a_faulty_dut_is_counted_alike_by_a_trial_and_a_served_otg_flow():
    """The forwarder's fault injector drops, duplicates, reorders and delays the frames of one
    flow. `netrig run`'s two measurers, a trial on this host and a flow served over OTG, each send
    the same frames through it (so the seeded injector does the same to both) and count exactly
    what its log says it did: loss, duplicates, reordering, the late frames of the 100-ms class.
    The 99th percentile of the on-time frames lies in the 10-ms class (2 % of them, above the
    rest): at least its delay, and below the late threshold, in both (measured on a quiet machine:
    10.01 and 10.04 ms; how late the forwarder lets a frame go depends on when it runs). With
    `learning_frames = false` neither sends a learning frame: the two logs are equal."""
    with dut_bed() as (t, d, names):
        counts, logs = _faulty_trials(t, d, names)
    print(f"injector: {logs}; trial / OTG: {[c.to_dict() for c in counts]}")
    assert logs[1] == logs[0], "the same frames, the same seed: the same faults"
    assert min(v for k, v in logs[0].items() if k != "passed") > 50, logs[0]
    for c, log, what in zip(counts, logs, ("trial", "OTG"), strict=True):
        assert c.frames_sent == FRAMES, what
        assert (c.duplicated, c.reordered, c.late) == (log["duplicated"], log["reordered"], log["delayed1"]), what
        assert c.frames_lost == log["dropped"] + log["delayed1"], f"{what}: late frames are lost (RFC 2544)"
        assert c.latency is not None and 9.95e6 <= c.latency.p99_ns < LATE_S * 1e9, (what, c.latency)
    assert not {"reordered", "late", "latency percentiles"} & set(counts[1].raw["otg"]["not_measured"])


def test_faults_are_refused_where_they_cannot_be_injected_or_make_no_sense():
    with dut_bed() as (_, d, names):
        for faults, why in (({"drop": 1.5}, "drop=1.5 is not a probability"),
                            ({"drop": 0.6, "duplicate": 0.6}, "at most 1"),
                            ({"jitter": 1.0}, "is not a fault setting")):
            with pytest.raises(netrig.ConfigError, match=why):
                _forwarder(d, names, "af_packet", "io", faults=faults)
