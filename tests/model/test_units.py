"""Units on the command line and in configs: rates, durations, speeds, counts, and how they print."""
import math

import pytest

from netrig.errors import ConfigError
from netrig.model import Rate, format_bps, format_ns, format_pps, parse_count, parse_duration, parse_rate, parse_speed


@pytest.mark.parametrize("text,want", [
    ("100kpps", Rate("pps", 100_000)), ("1.5Mpps", Rate("pps", 1_500_000)), ("2500", Rate("pps", 2500)),
    (1e6, Rate("pps", 1e6)), ("10Gbps", Rate("l1_bps", 1e10)), ("10Gbit/s", Rate("l1_bps", 1e10)),
    ("100Mbps-l2", Rate("l2_bps", 1e8)), ("50%", Rate("percent_line", 50)), ("20 kfps", Rate("pps", 20_000)),
    ("max", Rate("max")), ("80%NDR", Rate("percent_ndr", 80)), ("12.5 % ndr", Rate("percent_ndr", 12.5)),
])
def test_rates(text, want):
    assert parse_rate(text) == want


@pytest.mark.parametrize("text", ["fast", "-5kpps", "0", "150%", "5k%", "10pps-l2", True, math.nan, math.inf, None,
                                  "0%NDR", "150%NDR", "5k%NDR", "80%NDR-l2"])
def test_bad_rates_name_the_field(text):
    with pytest.raises(ConfigError) as e:
        parse_rate(text, "--rate")
    assert e.value.field == "--rate"


def test_rate_in_frames_per_second():
    assert Rate("l1_bps", 1e9).pps(64) == pytest.approx(1_488_095.2, rel=1e-6)
    assert Rate("l2_bps", 512e6).pps(64) == pytest.approx(1e6)
    assert Rate("percent_line", 50).pps(64, 1e9) == pytest.approx(744_047.6, rel=1e-6)
    assert Rate("percent_line", 50).pps(64) is None and Rate("max").pps(64) is None
    assert Rate("percent_ndr", 80).pps(64, 1e9) is None  # only the method that knows the NDR converts it


def test_a_rate_says_how_it_was_written():
    """The text it was given (a soak records "1Mpps" as asked), else its value in its unit; a rate
    that must be in frames/s (a capacity, an NDR) refuses another kind naming the option."""
    assert str(parse_rate("1Mpps")) == "1Mpps" and str(parse_rate(" 80%NDR ")) == "80%NDR"
    assert str(Rate("pps", 1e6)) == "1e+06pps" and str(Rate("l2_bps", 1e9)) == "1e+09bps-l2"
    assert parse_rate(str(Rate("percent_ndr", 80))) == Rate("percent_ndr", 80) and str(Rate("max")) == "max"
    assert parse_rate("250k").frames_per_second("--ndr") == 250_000
    with pytest.raises(ConfigError, match="--ndr: 50%: give it in frames/s"):
        parse_rate("50%").frames_per_second("--ndr")


@pytest.mark.parametrize("text,want", [("10s", 10), ("500ms", 0.5), ("2m", 120), ("2min", 120), ("1h", 3600),
                                       (3, 3), ("250us", 250e-6), ("3sec", 3), ("20ns", 20e-9)])
def test_durations(text, want):
    assert parse_duration(text) == pytest.approx(want)


@pytest.mark.parametrize("text", ["10x", "", "-1s", "0", math.nan, math.inf, [1], False])
def test_bad_durations(text):
    with pytest.raises(ConfigError) as e:
        parse_duration(text, "duration")
    assert e.value.field == "duration"


def test_zero_duration_where_allowed():
    assert parse_duration("0", "drain_s", allow_zero=True) == 0.0
    with pytest.raises(ConfigError, match=">= 0"):
        parse_duration(-1, "drain_s", allow_zero=True)


@pytest.mark.parametrize("text,want", [("10G", 1e10), ("10Gbit/s", 1e10), ("100M", 1e8), (1e9, 1e9), ("2.5Gbps", 2.5e9)])
def test_speeds(text, want):
    assert parse_speed(text, "speed_bps") == want


def test_counts():
    assert parse_count("1M", "frames") == 1_000_000
    assert parse_count("10k", "frames") == 10_000
    with pytest.raises(ConfigError, match="frames"):
        parse_count("many", "frames")


def test_formatting_rounds_before_choosing_the_unit():
    assert format_bps(999.6e6) == "1 Gbit/s"
    assert format_bps(1.23456e9) == "1.23 Gbit/s"
    assert format_pps(1_234_000) == "1.23 Mfps"
    assert format_ns(68_230) == "68.2 µs" and format_ns(850) == "850 ns"
