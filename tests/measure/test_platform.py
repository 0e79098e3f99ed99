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
