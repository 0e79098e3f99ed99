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
    tx, rx = clock.ClockEstimate(100, 20, p), clock.ClockEstimate(-50, 30, Ptp(p.grandmaster, 12))
    assert clock.between(tx, rx) == (0.0, 49.0)  # same grandmaster: PTP's bound
    assert clock.between(clock.ClockEstimate(100, 20), clock.ClockEstimate(-50, 30)) == (-150, 50)
