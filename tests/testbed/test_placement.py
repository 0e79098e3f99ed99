"""DUT placement: the wire (the default), threaded NAPI kthreads pinned, or RPS masks; frames still cross."""
from __future__ import annotations

import os
import time

import pytest
from testbed_helpers import N, cross, needs_root

from netrig.testbed import Testbed
from netrig.testbed.nsthread import run_in_netns

pytestmark = [pytest.mark.root, needs_root,
              pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")]


def _ring_threads() -> dict[int, str]:
    """The kernel's CPUMAP ring threads (``cpumap/<cpu>/map:<id>``) by pid."""
    out = {}
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm.startswith("cpumap/"):
            out[int(pid)] = comm
    return out


def test_wire_by_default_on_the_last_cpu(tb_ids):
    last = max(os.sched_getaffinity(0))
    before = set(_ring_threads())
    with Testbed.create("router") as tb:
        tb_ids.append(tb.id)
        pl = tb.placement
        assert pl.mode == "wire" and pl.cpus == (last,) and pl.ring == 1024
        assert set(pl.interfaces) == {tb.name("dtx"), tb.name("drx")}
        assert tb.tester_cpus() == tuple(c for c in sorted(os.sched_getaffinity(0)) if c != last)
        assert not tb.dut_can_hold_sender
        # one ring thread per DUT interface, bound to the DUT's CPU
        rings = {p: c for p, c in _ring_threads().items() if p not in before}
        assert len(rings) == 2 and all(c.startswith(f"cpumap/{last}/") for c in rings.values())
        for pid in rings:
            assert os.sched_getaffinity(pid) == {last}
        w0 = tb.wire_counts()[tb.name("dtx")]
        assert cross(tb).count == N and cross(tb, family=6).count == N
        w = tb.wire_counts()[tb.name("dtx")]
        assert w.arrived - w0.arrived == 2 * N and w.taken - w0.taken == 2 * N and w.dropped == 0
        assert tb.describe()["placement"] == pl.to_dict()
    deadline = time.monotonic() + 10  # the kernel frees the maps (and stops their threads) asynchronously
    while set(_ring_threads()) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not set(_ring_threads()) - before, "the rings' threads outlived the test bed"


def test_wire_ring_option_and_refusals():
    from netrig.errors import ConfigError

    with pytest.raises(ConfigError, match="dut_ring"):
        Testbed.create("router", dut_ring=4)
    with pytest.raises(ConfigError, match="dut_ring.*wire"):
        Testbed.create("router", dut_ring=256, dut_placement="rps")
    with pytest.raises(ConfigError, match="dut_cpus.*inline"):
        Testbed.create("router", dut_cpus="1", dut_placement="inline")
    with pytest.raises(ConfigError, match="dut_ring"):
        Testbed.create("loopback", dut_ring=256)


def test_inline_leaves_the_dut_on_the_sender(tb_ids):
    with Testbed.create("router", dut_placement="inline") as tb:
        tb_ids.append(tb.id)
        assert tb.placement.mode == "inline" and tb.placement.cpus is None
        assert tb.tester_cpus() == () and tb.dut_can_hold_sender and tb.wire_counts() == {}
        assert cross(tb).count == N


def test_threaded_napi_pinned(tb_ids):
    with Testbed.create("router", dut_cpus="1", dut_placement="threaded-napi") as tb:
        tb_ids.append(tb.id)
        pl = tb.placement
        assert pl.mode == "threaded-napi" and pl.cpus == (1,)
        assert {t.interface for t in pl.threads} == {tb.name("dtx"), tb.name("drx")}
        for t in pl.threads:
            assert os.sched_getaffinity(t.pid) == {1}
        assert all(v["threaded"] == "1" for v in pl.interfaces.values())
        assert cross(tb).count == N and cross(tb, family=6).count == N
        assert tb.describe()["placement"] == pl.to_dict()


def test_rps_mask(tb_ids):
    with Testbed.create("bridge", dut_cpus="1", dut_placement="rps") as tb:
        tb_ids.append(tb.id)
        def read() -> str:
            with open(f"/sys/class/net/{tb.name('dtx')}/queues/rx-0/rps_cpus") as f:
                return f.read().strip()

        mask = run_in_netns(tb.dut_netns, read, sysfs=True)
        assert int(mask, 16) == 2
        assert cross(tb).count == N
