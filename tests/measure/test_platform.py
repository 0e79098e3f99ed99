"""The latency timeline's spikes and their period (``measure.platform``), on made-up windows."""
from __future__ import annotations

import random

from netrig.measure.platform import periodicity, spikes

WINDOW_MS = 8.388608


def test_a_window_stands_out_above_four_times_the_typical_max_and_100_us_more():
    maxes = [50.0] * 20
    maxes[3], maxes[9], maxes[12] = 250.0, 151.0, 400.0
    frames = [10] * 20
    frames[12] = 0  # a window without frames is never a spike
    assert spikes(maxes, [20.0] * 20, frames) == (3,)
    assert spikes(maxes[:6], [20.0] * 6, frames[:6]) == (), "too few windows to say what is typical"


def test_a_timer_every_50_ms_is_found_even_when_each_spike_spans_two_windows():
    starts = [round(i * 50 / WINDOW_MS) + 2 for i in range(39)]
    windows = sorted({w for s in starts for w in (s, s + 1)})  # each take's queue drains into the next window
    p = periodicity(windows, WINDOW_MS, 240)
    assert p is not None and abs(p.period_ms - 50.0) < 1.0, p
    assert p.share >= 0.9 and p.spikes == 39


def test_spikes_at_random_have_no_period_and_a_few_have_none_to_tell():
    for seed in range(10):
        scattered = sorted(random.Random(seed).sample(range(0, 240, 2), 12))
        assert periodicity(scattered, WINDOW_MS, 240) is None, scattered
    assert periodicity([10, 16, 22], WINDOW_MS, 240) is None, "three spikes are too few"


def test_a_period_with_missing_and_jittered_spikes_is_the_fundamental_not_a_multiple():
    rng = random.Random(3)
    period_windows = 50.5 / WINDOW_MS
    events = [round(i * period_windows) + rng.choice((0, 0, 1)) for i in range(40) if i % 5 != 2]
    p = periodicity(events, WINDOW_MS, 240)
    assert p is not None and abs(p.period_ms - 50.5) < 5.0, p


def test_a_host_stop_inside_a_take_is_one_stall_with_it():
    """A 5-ms take of the DUT's CPU with a 1.5-ms host stop inside: the watch placed the host part
    47 µs before the guest's (its bounds are known to half a tick); one stall, the guest's view.
    Two guest episodes as close stay two, and a host stop a tick away is its own."""
    from netrig.measure.platform import StallEpisode, merged

    host, take = StallEpisode(0.659236, 1.508, 1, False), StallEpisode(0.660792, 3.113, 1, True, "netrig-hog")
    (one,) = merged([take, host], 0.0005)
    assert one.start_s == host.start_s and one.seen_by_guest and one.by == "netrig-hog"
    assert abs(one.length_ms - 4.669) < 1e-3
    assert len(merged([StallEpisode(0.1, 1.0, 1, True, "a"), StallEpisode(0.10105, 1.0, 1, True, "b")], 0.0005)) == 2
    assert len(merged([host, StallEpisode(0.6618, 2.0, 1, True, "x")], 0.0005)) == 2
