"""Units on the command line and in configs: rates, durations, counts, frame sizes."""
import pytest

from netrig.errors import ConfigError
from netrig.units import (
    format_rate,
    line_rate_fps,
    mean_frame_size,
    parse_count,
    parse_duration,
    parse_frame_size,
    parse_rate,
)


@pytest.mark.parametrize("text,want", [
    ("100kpps", {"pps": 100_000}), ("1.5Mpps", {"pps": 1_500_000}), ("2500", {"pps": 2500}), (1e6, {"pps": 1e6}),
    ("10Gbps", {"l1_bps": 1e10}), ("10Gbit/s", {"l1_bps": 1e10}), ("100Mbps-l2", {"l2_bps": 1e8}),
    ("50%", {"percent_line": 50}), ("20 kfps", {"pps": 20_000}),
])
def test_rates(text, want):
    assert parse_rate(text) == want


@pytest.mark.parametrize("text", ["fast", "-5kpps", "0", "150%", "5k%", "10pps-l2", True])
def test_bad_rates_name_the_field(text):
    with pytest.raises(ConfigError) as e:
        parse_rate(text, "--rate")
    assert e.value.field == "--rate"


@pytest.mark.parametrize("text,want", [("10s", 10), ("500ms", 0.5), ("2m", 120), ("1h", 3600), (3, 3), ("250us", 250e-6)])
def test_durations(text, want):
    assert parse_duration(text) == pytest.approx(want)


@pytest.mark.parametrize("text", ["10x", "", "-1s", "0"])
def test_bad_durations(text):
    with pytest.raises(ConfigError, match="duration"):
        parse_duration(text, "duration")


def test_counts():
    assert parse_count("1M", "frames") == 1_000_000
    assert parse_count("10k", "frames") == 10_000
    with pytest.raises(ConfigError, match="frames"):
        parse_count("many", "frames")


def test_frame_sizes():
    assert parse_frame_size(64) == {"fixed": 64}
    assert parse_frame_size("imix")["weighted"][0] == (64, 57)
    assert parse_frame_size("random:64-1518") == {"random": (64, 1518)}
    assert parse_frame_size("inc:64-1518:64") == {"increment": (64, 1518, 64)}
    assert parse_frame_size([(64, 7), (570, 4), (1518, 1)]) == {"weighted": [(64, 7), (570, 4), (1518, 1)]}
    assert mean_frame_size(parse_frame_size("simple-imix")) == pytest.approx((7 * 64 + 4 * 570 + 1518) / 12)
    with pytest.raises(ConfigError, match="below the Ethernet minimum"):
        parse_frame_size(63)
    with pytest.raises(ConfigError, match="not a frame size"):
        parse_frame_size("jumbo")


def test_line_rate_and_format():
    assert round(line_rate_fps(1e9, 64)) == 1_488_095
    assert round(line_rate_fps(1e10, 1518)) == 812_744
    assert format_rate(1_234_000) == "1.23 Mpps"
