"""Monitor: /proc/stat arithmetic, marked windows, and (root) the DUT CPU's softirq rising under load."""
from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import threading
import time

import pytest

from netrig.errors import ConfigError
from netrig.monitor import Monitor, MonitorResult
from netrig.monitor.monitor import (
    Mark,
    MonitorSample,
    ProcSample,
    compact_sample,
    cpu_percent,
    latest_sample,
    read_meminfo,
)
from netrig.testbed.links import NLM_F_DUMP, NLM_F_REQUEST, RTM_GETLINK, STATS64, link_counters, route_socket
from netrig.testbed.placement import keep_off_dut

ROOT = os.geteuid() == 0


def test_cpu_percent_from_deltas():
    prev = {"cpu0": [100, 0, 50, 800, 0, 0, 50, 0]}
    cur = {"cpu0": [110, 0, 60, 860, 0, 0, 70, 0]}  # +10 user, +10 system, +60 idle, +20 softirq
    pc = cpu_percent(prev, cur)["cpu0"]
    assert pc["user"] == 10.0 and pc["softirq"] == 20.0 and pc["idle"] == 60.0 and pc["busy"] == 40.0


def test_result_windows_and_summary():
    r = MonitorResult(1.0)
    for t, soft in [(1.0, 1.0), (2.0, 50.0), (3.0, 70.0), (4.0, 2.0)]:
        r.samples.append(MonitorSample(t, 1.0, {"cpu1": {"softirq": soft, "busy": soft + 10, "system": 0.0}}))
    r.samples.insert(1, Mark(1.0, "trial-start"))
    r.samples.insert(4, Mark(3.0, "trial-stop"))
    assert [m.mark for m in r.marks] == ["trial-start", "trial-stop"]
    assert r.cpu_mean("trial-start", "trial-stop") == {"cpu1": 60.0}
    assert r.cpu_softirq_max(1) == 70.0
    assert r.summary("trial-start", "trial-stop")["busiest_cpu"] == "cpu1"
    assert MonitorResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r, "a stored record reads back the same"


def test_link_counters_count_the_datagrams_sent_over_a_link():
    """The monitor's raw netlink reader of a namespace's links: loopback's counters grow by at least
    the 50 datagrams this test sends over it, in both directions, and in bytes. The monitor keeps
    its socket for every sample: a dump a failure left unread there is passed over, not read as
    the next sample's (which would then read each dump one sample late)."""
    with route_socket() as nl, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        rx.bind(("127.0.0.1", 0))
        before = link_counters(nl)["lo"]
        nl.send(struct.pack("=IHHII", 32, RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, 0, 0) + bytes(16))  # left unread
        with contextlib.suppress(OSError):  # refused while that dump runs (EBUSY): the sample is lost, logged
            link_counters(nl)
        for _ in range(50):
            tx.sendto(b"x" * 100, rx.getsockname())
        after = link_counters(nl)["lo"]
    assert set(after) <= set(STATS64) and {"rx_packets", "tx_dropped"} <= set(after)
    assert after["rx_packets"] - before["rx_packets"] >= 50 and after["tx_packets"] - before["tx_packets"] >= 50
    assert after["rx_bytes"] - before["rx_bytes"] >= 50 * 128, "100 bytes of data and 28 of headers each"


def test_bad_interval_names_the_field():
    with pytest.raises(ConfigError, match="^interval_s:"):
        Monitor(interval_s=0)


def newer_sample(mon: Monitor, than: MonitorSample | None = None, timeout_s: float = 60.0) -> MonitorSample:
    """The monitor's newest sample once there is one newer than ``than``. The sampler runs only on
    idle CPU time (``placement.observer``): on a machine kept busy (the suite's other worker) its
    first sample can come seconds late, so this waits for it rather than for a fixed time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        s = latest_sample(mon)
        if s is not None and (than is None or s.t_s > than.t_s):
            return s
        time.sleep(0.05)
    raise AssertionError(f"no monitor sample newer than {than and than.t_s} within {timeout_s} s")


def test_monitor_samples_host_without_testbed():
    with Monitor(interval_s=0.05, pids=[os.getpid()]) as mon:
        mon.mark("a")
        deadline = time.monotonic() + 60
        while len(mon.result.data) < 3 and time.monotonic() < deadline:  # idle CPU time only: see newer_sample
            time.sleep(0.05)
        mon.mark("b")
    res = mon.result
    assert len(res.data) >= 3, res.samples
    assert not res.errors, res.errors
    s = res.data[-1]
    assert s.cpu and s.mem and s.procs and s.t_s > 0
    assert s.mem.total_bytes > 0 and s.mem.slab_bytes is not None and read_meminfo().total_bytes > 0
    assert "cpu0" in s.cpu and str(os.getpid()) in s.procs
    assert [x.t_s for x in res.samples] == sorted(x.t_s for x in res.samples)
    assert not any(t.name == "netrig-monitor" for t in threading.enumerate())


def test_a_long_run_takes_the_newest_sample_compact_and_the_monitor_keeps_no_history():
    with Monitor(interval_s=0.05, pids=[os.getpid()]) as mon:
        mon.mark("m")
        first = newer_sample(mon)
        second = newer_sample(mon, than=first)
        assert second.t_s > first.t_s
        assert len(mon.result.data) <= 5, "older samples are dropped as the newest is taken"
    c = compact_sample(second)
    assert c is not None and c.t_s == second.t_s
    assert c.cpu["cpu0"] == second.cpu["cpu0"]["busy"] and "all" not in c.softirq
    (name,) = c.procs
    assert name.endswith(f"[{os.getpid()}]") and c.procs[name].rss_bytes > 1e6
    assert c.mem.available_bytes > 0 and c.mem.slab_bytes > 0
    assert len(json.dumps(c.to_dict())) < 2000, "small enough for hours of intervals"
    assert compact_sample(None) is None
    remote = MonitorSample(1.0, 1.0, conntrack={"remote": 7}, procs={"42": ProcSample(3.0, 5, "bird")},
                           ifaces={"remote/eth0": {"rx_packets": 9, "rx_dropped": 2, "tx_dropped": 0}})
    assert compact_sample(remote).to_dict() == {"t_s": 1.0, "dt_s": 1.0, "procs": {"bird[42]": {"cpu_percent": 3.0,
                                                                                             "rss_bytes": 5}},
                                                "conntrack": {"remote": 7}, "drops": {"remote/eth0": {"rx_dropped": 2}}}


@pytest.mark.root
@pytest.mark.skipif(not ROOT, reason="needs root: the test's thread leaves SCHED_IDLE again afterwards")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs: one the tester's, one the DUT's")
def test_a_monitor_started_by_tester_bookkeeping_samples_on_the_testers_cpus_only():
    """On the DUT's CPU a running idle-class sampler held the DUT's ring thread up to a 4-ms tick
    (``placement.observer``): the sampler keeps to the CPUs of the bookkeeping that starts it."""
    cpu = min(os.sched_getaffinity(0))
    with keep_off_dut([cpu]), Monitor(interval_s=0.05, pids=[os.getpid()]) as mon:
        assert mon._thread is not None and mon._thread.native_id is not None
        tid = mon._thread.native_id
        assert os.sched_getaffinity(tid) == {cpu} and os.sched_getscheduler(tid) == os.SCHED_IDLE
        newer_sample(mon)
    assert os.sched_getscheduler(0) != os.SCHED_IDLE, "the test's thread placed as it was"


@pytest.mark.root
@pytest.mark.skipif(not ROOT, reason="needs root: builds network namespaces and veth pairs")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_dut_softirq_rises_under_traffic():
    from netrig.testbed import Testbed
    from netrig.testbed.probe import send_frames, udp_frame

    # RPS puts the DUT's forwarding on CPU 1; the sender is pinned to CPU 0. Other work on this shared
    # machine also raises softirq, so up to three attempts; one clear rise passes.
    with Testbed.create("router", dut_cpus="1", dut_placement="rps") as tb:
        tx = tb.port("tx")
        frame = udp_frame(**tb.stream_defaults())
        seen = []
        for _attempt in range(3):
            with Monitor(interval_s=0.2, testbed=tb, pids=[os.getpid()]) as mon:
                time.sleep(0.6)
                mon.mark("trial-start")

                def sender() -> None:
                    os.sched_setaffinity(0, {0})
                    deadline = time.monotonic() + 1.2
                    while time.monotonic() < deadline:
                        send_frames(tx.netns, tx.ifname, frame, 5000)

                th = threading.Thread(target=sender)
                th.start()
                th.join()
                mon.mark("trial-stop")
            res = mon.result
            before = res.cpu_mean(None, "trial-start")["cpu1"]
            during = res.cpu_mean("trial-start", "trial-stop")["cpu1"]
            seen.append((before, during))
            if during >= before + 5.0:
                break
        else:
            pytest.fail(f"cpu1 softirq did not rise under traffic (before %, during %): {seen}")
        key = f"{tb.dut_netns}/{tb.name('dtx')}"
        assert max(s.ifaces[key].get("rx_pps", 0) for s in res.window("trial-start", "trial-stop")) > 1000
        assert res.to_dict()["placement"]["mode"] == "rps"
        assert tb.dut_netns in res.data[-1].conntrack
