"""An agent's clock against the controller's: the tightest exchange kept, widened with age; two
agents' offset, from their estimates or from PTP."""
from __future__ import annotations

import pytest

from netrig.controller import clock
from netrig.otgclient.headers import Ptp


def test_clock_keeps_the_tightest_exchange_and_widens_it_with_age():
    t = clock.ClockTracker()
    # round trip 1 µs of which the agent took 200 ns: ± 400; the agent 5 µs ahead
    t.add(clock.Sample(1_000_000, 1_005_400, 1_005_600, 1_001_000), None)
    t.add(clock.Sample(2_000_000, 2_050_000, 2_050_000, 2_100_000), None)  # round trip 100 µs
    est = t.estimate(now_ns=1_001_000)
    assert est is not None and (est.offset_ns, est.uncertainty_ns) == (5000.0, 400.0)
    later = t.estimate(now_ns=1_001_000 + 1_000_000_000)
    assert later is not None and later.uncertainty_ns == pytest.approx(400 + 50_000)


def test_between_agents_with_and_without_ptp():
    p = Ptp("001122.fffe.334455", -37.0)
    tx, rx = clock.ClockEstimate(100, 20, p, 37.0), clock.ClockEstimate(-50, 30, Ptp(p.grandmaster, 12), 12.0)
    assert clock.between(tx, rx) == clock.Correction(0.0, 49.0, "ptp")  # same grandmaster: PTP's bound
    other = clock.ClockEstimate(-50, 30, Ptp("aabbcc.fffe.ddeeff", 12), 12.0)
    assert clock.between(tx, other) == clock.Correction(-150, 50, "exchange")  # two grandmasters
    assert clock.between(clock.ClockEstimate(100, 20), clock.ClockEstimate(-50, 30)) == \
        clock.Correction(-150, 50, "exchange")


def test_the_ptp_bound_is_the_largest_offset_from_one_grandmaster_over_the_window():
    """ptp4l's offset moves from one sync to the next (±1 µs with software stamps on veth): the bound
    is the worst of the recent ones, not the latest, and a new grandmaster starts it again."""
    t = clock.ClockTracker()
    s = clock.Sample(0, 0, 0, 1000)
    for off in (-900.0, 300.0, 50.0):
        t.add(s, Ptp("gm1", off))
    est = t.estimate(now_ns=1000)
    assert est is not None and est.ptp == Ptp("gm1", 50.0) and est.ptp_bound_ns == 900.0
    t.add(s, Ptp("gm2", -20.0))
    est = t.estimate(now_ns=1000)
    assert est is not None and est.ptp_bound_ns == 20.0
    t.add(s, None)  # ptp4l gone: no PTP state
    est = t.estimate(now_ns=1000)
    assert est is not None and est.ptp is None and est.ptp_bound_ns == 0.0
    for k in range(clock.WINDOW + 1):  # the oldest falls out of the window
        t.add(s, Ptp("gm1", 5000.0 if k == 0 else 10.0))
    est = t.estimate(now_ns=1000)
    assert est is not None and est.ptp_bound_ns == 10.0
