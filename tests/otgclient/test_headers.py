"""netrig's own headers: each value as one end writes it is what the other end reads."""
from __future__ import annotations

import pytest

from netrig.errors import ConfigError
from netrig.otgclient import headers
from netrig.otgclient.headers import Ptp


def test_each_header_reads_back_what_was_written():
    assert headers.parse_stamps(headers.stamps(12, 34)) == (12, 34)
    assert headers.parse_ptp(headers.ptp(Ptp("001122.fffe.334455", -37.4))) == Ptp("001122.fffe.334455", -37.0)
    written = headers.tags([7, 8388607], receive=True)
    assert headers.parse_tags(written[headers.TAGS]) == [7, 8388607]
    assert headers.is_receive(written[headers.RECEIVE]) and headers.RECEIVE not in headers.tags([1])


@pytest.mark.parametrize("text", [None, "", "12", "x y", "1 2 3"])
def test_a_malformed_clock_or_ptp_value_is_none(text):
    assert headers.parse_stamps(text) is None
    assert headers.parse_ptp(text if text != "x y" else "gm notanumber") is None


def test_bad_tags_name_the_header():
    with pytest.raises(ConfigError) as e:
        headers.parse_tags("1,two")
    assert e.value.field == headers.TAGS and "integers separated by commas" in e.value.message
