"""Frame sizes, mixes from the engine's table, the line rate and rates reported four ways."""
import pytest

from netrig import _native
from netrig.errors import ConfigError
from netrig.model import MIXES, RFC2544_FRAME_SIZES, FrameSize, LineRate, parse_frame_sizes, rate_object


def test_tables_come_from_the_engine():
    assert RFC2544_FRAME_SIZES == (64, 128, 256, 512, 1024, 1280, 1518)
    assert MIXES["imix"] == ((64, 57), (570, 7), (594, 16), (1518, 20)) == tuple(_native.FRAME_SIZE_MIXES["imix"])
    assert _native.WIRE_OVERHEAD_BYTES == 20


@pytest.mark.parametrize("value,label,mean", [
    (64, 64, 64.0), ("1518", 1518, 1518.0),
    ("imix", "imix", (64 * 57 + 570 * 7 + 594 * 16 + 1518 * 20) / 100),
    ("simple-imix", "simple-imix", (64 * 7 + 570 * 4 + 1518) / 12),
    ("random:64-1518", "random:64-1518", 791.0), ("inc:64-1518:64", "inc:64-1518:64", 768.0),
    ([(64, 7), (570, 4), (1518, 1)], "mix:64x7+570x4+1518x1", (64 * 7 + 570 * 4 + 1518) / 12),
    (("random", 64, 128), "random:64-128", 96.0), (("increment", 64, 72, 4), "inc:64-72:4", 68.0),
])
def test_frame_sizes(value, label, mean):
    f = FrameSize.parse(value)
    assert f.label == label and f.mean_size == pytest.approx(mean)
    assert FrameSize.parse(f.label) == f  # labels parse back


@pytest.mark.parametrize("value,words", [
    (63, "frame sizes are 64..16384 bytes"), (20000, "frame sizes are 64..16384 bytes"), ("jumbo", "not a frame size"),
    ("inc:1518-64", "is above max"), ("inc:64-1518:0", "step must be > 0"), ([(64, 0)], "weight > 0"),
    ([], "at least one (size, weight) pair"),
    ([(64, 1, 2)], "(size, weight) pair"), (True, "not a frame size"),
])
def test_bad_frame_sizes_name_the_field(value, words):
    with pytest.raises(ConfigError) as e:
        FrameSize.parse(value, "--size")
    assert e.value.field == "--size" and words in e.value.message


@pytest.mark.parametrize("value, size", [(-1, -1), (1 << 70, 1 << 70), (("random", -1, 1518), -1),
                                         ([(-64, 1)], -64), (("increment", -5, 128, 1), -5)])
def test_a_size_beyond_the_engines_integers_gets_the_frame_sizes_range(value, size):
    """Not the range of the engine's integer type (it said 0..18446744073709551615 for -1)."""
    with pytest.raises(ConfigError) as e:
        FrameSize.parse(value)
    assert e.value.message == (f"{size} B is out of range: frame sizes are {_native.MIN_FRAME_SIZE}.."
                               f"{_native.MAX_FRAME_SIZE} bytes including the {_native.FCS_BYTES}-byte FCS")


def test_a_negative_increment_step_says_the_step_must_be_positive():
    with pytest.raises(ConfigError, match=r"the increment step must be > 0 bytes \(got -1\)"):
        FrameSize.parse(("increment", 64, 128, -1))


def test_size_lists():
    assert [f.label for f in parse_frame_sizes("rfc")] == list(RFC2544_FRAME_SIZES)
    assert [f.label for f in parse_frame_sizes("64, 1518,imix")] == [64, 1518, "imix"]
    with pytest.raises(ConfigError, match="more than once"):
        parse_frame_sizes([64, "64"])


def test_line_rate_and_rate_object():
    lr = LineRate(10e9, "nominal", "veth0")
    f64 = FrameSize(64)
    assert lr.fps(f64) == pytest.approx(14_880_952.38, rel=1e-9)
    assert LineRate(1e9).fps(FrameSize(1518)) == pytest.approx(81_274, rel=1e-4)
    r = rate_object(lr.fps(f64) / 2, f64, lr)
    assert r["pct_line_rate"] == pytest.approx(50.0)
    assert r["l1_bps"] == pytest.approx(5e9) and r["l2_bps"] == pytest.approx(5e9 * 64 / 84)
    assert lr.label == "10 Gbit/s (nominal: veth0 has no link speed)"
    assert LineRate(1e9, "config").label == "1 Gbit/s (configured)"
    with pytest.raises(ConfigError, match="line_rate.bps"):
        LineRate(0)
