"""DUT placement: threaded NAPI kthreads pinned, or RPS masks; frames still cross."""
from __future__ import annotations

import os

import pytest
from testbed_helpers import N, cross, needs_root

from netrig.testbed import Testbed
from netrig.testbed.nsthread import run_in_netns

pytestmark = [pytest.mark.root, needs_root,
              pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")]


def test_threaded_napi_pinned(tb_ids):
    with Testbed.create("router", dut_cpus="1") as tb:
        tb_ids.append(tb.id)
        pl = tb.placement
        assert pl["mode"] == "threaded-napi" and pl["cpus"] == [1]
        assert {t["interface"] for t in pl["threads"]} == {tb.name("dtx"), tb.name("drx")}
        for t in pl["threads"]:
            assert os.sched_getaffinity(t["pid"]) == {1}
        assert all(v["threaded"] == "1" for v in pl["interfaces"].values())
        assert cross(tb).count == N and cross(tb, family=6).count == N
        assert tb.describe()["placement"] == pl


def test_rps_mask(tb_ids):
    with Testbed.create("bridge", dut_cpus="1", dut_placement="rps") as tb:
        tb_ids.append(tb.id)
        def read() -> str:
            with open(f"/sys/class/net/{tb.name('dtx')}/queues/rx-0/rps_cpus") as f:
                return f.read().strip()

        mask = run_in_netns(tb.dut_netns, read, sysfs=True)
        assert int(mask, 16) == 2
        assert cross(tb).count == N
