"""The wire into the DUT: a DUT that cannot keep up drops at its receive ring — counted by its own
counter, equal to the tester's loss — and never slows the sender, on every I/O backend."""
from __future__ import annotations

import os

import pytest
from testbed_helpers import needs_root

import netrig
from netrig.testbed import Testbed

pytestmark = [pytest.mark.root, needs_root,
              pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs (the DUT's and the tester's)")]

#: A firewall whose every rule each frame walks: a DUT of a few kfps (2000 rules passed 24 kfps
#: on one machine of this class and a few on another; 10 000 passed 5.8 kfps on the faster one).
RULES = 10_000
OFFERED_PPS = 30_000
#: The DUT's receive ring, frames. A frame waits in it ring / (the DUT's rate) before the DUT takes
#: it: with the default 1024 frames and a DUT of 1.6 kfps (this class of machine, measured) that is
#: 640 ms, longer than the trial's drain, so the DUT's last frames come late (``late``, not ring
#: drops) and the ring still holds frames when the trial ends. 64 frames wait 40 ms at 1.6 kfps and
#: 320 ms at 200 fps: the ring is empty before the drain ends, and every lost frame is a ring drop.
RING = 64


@pytest.fixture(scope="module")
def slow_dut():
    with Testbed.create("firewall", rules=RULES, dut_ring=RING) as tb:
        yield tb


@pytest.mark.parametrize("io", ["af_xdp", "af_packet", "socket"])
def test_a_slow_dut_drops_at_its_ring_and_never_slows_the_sender(slow_dut, io):
    tb = slow_dut
    tx, rx = tb.port("tx"), tb.port("rx")
    cpus = list(tb.tester_cpus())
    s = netrig.Stream(frame_size=64, rate_pps=OFFERED_PPS, **tb.stream_defaults())
    dtx = tb.name("dtx")
    before = tb.wire_counts()[dtx]
    # The counts are the point here, not the pacing: a loaded machine may stretch the sending.
    r = netrig.run_trial(netrig.Port(tx.ifname, netns=tx.netns, io=io), netrig.Port(rx.ifname, netns=rx.netns, io=io),
                         [s], duration_s=1.0, drain_s=0.5, tx_cpus=cpus, rx_cpus=cpus, max_stretch_pct=50)
    after = tb.wire_counts()[dtx]
    assert r.frames_sent == OFFERED_PPS, r.invalid_reason  # every frame offered: the DUT held nothing back
    assert r.tester_rx_drops == 0 and r.frames_stray == 0 and r.frames_forged == 0
    assert 0 < r.frames_received < r.frames_sent // 2, "the DUT forwards far less than it is offered"
    arrived, dropped = after.arrived - before.arrived, after.dropped - before.dropped
    assert arrived == r.frames_sent, "every frame reached the DUT's interface"
    assert r.late == 0, "the ring's wait is shorter than the drain: no frame comes late"
    assert r.frames_lost == dropped, "every frame lost is one the DUT's full ring dropped"
    assert after.unsteered == before.unsteered == 0
