"""A served flow's OTG ``transmit`` state: ``stopped`` only once its counts are final."""
from __future__ import annotations

from types import SimpleNamespace

from netrig.otg import metrics

DRAIN_NS = 2_000_000_000


def done(rx: int, duplicated: int = 0, tx: int = 100, last_ns: int = 0) -> SimpleNamespace:
    return SimpleNamespace(state="done", tx_frames=tx, tx_untracked=0, rx_frames=rx, rx_duplicated=duplicated,
                           tx_last_ns=last_ns)


def test_a_done_flow_is_stopped_once_every_frame_arrived_or_the_drain_passed():
    assert metrics.transmit(done(100), 1.0, DRAIN_NS, 1) == "stopped"
    assert metrics.transmit(done(99), 1.0, DRAIN_NS, 1) == "started", "a frame may be in flight"
    assert metrics.transmit(done(99), 1.0, DRAIN_NS, DRAIN_NS) == "stopped", "the drain passed"


def test_duplicates_never_stand_in_for_frames_still_in_flight():
    """A DUT that duplicates 3 frames and has 2 still on their way: 101 arrivals of 100 frames
    sent, but only 98 of them arrived. Read as stopped, the 2 would be false loss."""
    assert metrics.transmit(done(101, duplicated=3), 1.0, DRAIN_NS, 1) == "started"
    assert metrics.transmit(done(103, duplicated=3), 1.0, DRAIN_NS, 1) == "stopped"
