"""Four ports in one engine (two loopback pairs): per-port and aggregate counters (issue 6)."""
from __future__ import annotations

import pytest
from tests.conftest import needs_root

import netrig

pytestmark = [needs_root, pytest.mark.root]


@pytest.mark.parametrize("io", ["af_packet", "auto"])
@pytest.mark.timing
def test_two_pairs_in_one_trial(io):
    from netrig.testbed import Testbed

    with Testbed.create("fourport") as tb:
        names = ["p0", "p1", "p2", "p3"]
        ports = [netrig.Port(tb.port(n).ifname, netns=tb.port(n).netns, io=io) for n in names]
        streams = [
            netrig.Stream(**tb.stream_defaults(tx="p0", rx="p1"), frame_size=64, rate_pps=40_000, tx_port=0,
                          rx_port=1, flows=8, name="p0-p1"),
            netrig.Stream(**tb.stream_defaults(tx="p2", rx="p3"), frame_size=512, rate_pps=20_000, tx_port=2,
                          rx_port=3, flows=4, name="p2-p3"),
        ]
        # Counting across four ports, not pacing: on two vCPUs both TX workers share one CPU and
        # take turns (yield), which can stretch the 1-s run past the default 2 % by a few tens of ms
        # (a known tester limit, docs/architecture.md); the stretch is still measured and reported.
        r = netrig.run_trial(ports=ports, streams=streams, frames=40_000, drain_s=0.3, max_stretch_pct=50)
        a, b = r.streams
        assert (a.frames_sent, a.frames_received, a.flows) == (40_000, 40_000, 8)
        assert (b.frames_sent, b.frames_received, b.flows) == (40_000, 40_000, 4)
        assert r.frames_sent == r.frames_received == 80_000
        assert r.ports[0].tx_frames == r.ports[2].tx_frames == 40_000
        assert r.ports[1].rx_frames - r.ports[1].rx_foreign == 40_000
        assert r.ports[3].rx_frames - r.ports[3].rx_foreign == 40_000
        assert r.ports[1].tx_frames == r.ports[3].tx_frames == 0
        assert r.valid, r.invalid_reason
