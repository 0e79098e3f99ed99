"""Capture filters read as IxNetwork reads them: the terms scripts written against it expect."""
from __future__ import annotations

from netrig.otg.capfilter import Term, terms


def test_ixnetworks_combined_filter_example_reads_as_it_captures():
    """snappi-ixnetwork's combined-filter test (on hardware it captures the one frame with that
    source, that destination, VLAN id 6 and priority not 0): the MACs compared whole, the id's 12
    bits (``F000`` leaves out priority and CFI), the priority's 3 bits of the TCI's first byte."""
    got = terms(({"choice": "ethernet", "ethernet": {
                     "src": {"value": "0000ff000000", "mask": "000000000000", "negate": False},
                     "dst": {"value": "000806020000", "mask": "000000000000", "negate": False}}},
                 {"choice": "vlan", "vlan": {"id": {"value": "0006", "mask": "F000", "negate": False},
                                             "priority": {"value": "07", "mask": "07", "negate": True}}}),
                "captures[0].filters")
    assert got == [Term(0, bytes.fromhex("000806020000"), b"\xff" * 6, False),
                   Term(6, bytes.fromhex("0000ff000000"), b"\xff" * 6, False),
                   Term(14, bytes.fromhex("0006"), bytes.fromhex("0fff"), False),
                   Term(14, b"\x07", b"\xe0", True)]


def test_sonic_mgmts_ip_packets_only_filter_is_the_version_nibble():
    got = terms(({"choice": "custom", "custom": {"offset": 14, "value": "40", "mask": "0f"}},), "f")
    assert got == [Term(14, b"\x40", b"\xf0", False)]


def test_header_filters_follow_one_another_and_defaults_are_not_terms():
    """A chain without ethernet starts after one; a field at the model's defaults (what a client
    library writes for a field it was only asked about) is no term; a sub-byte field compares its
    own bits only, its value written in place."""
    got = terms(({"choice": "vlan", "vlan": {"protocol": {"value": "0800"}, "cfi": {"value": "00", "mask": "00"}}},
                 {"choice": "ipv4", "ipv4": {"version": {"value": "40"}, "dst": {"value": "c6130001", "mask": "ff"}}},
                 {"choice": "custom", "custom": {"offset": 40, "bit_length": 16, "value": "1388"}}), "f")
    assert got == [Term(16, b"\x08\x00", b"\xff\xff", False),
                   Term(18 + 16, bytes.fromhex("c6130001"), bytes.fromhex("ffffff00"), False),
                   Term(18, b"\x40", b"\xf0", False),
                   Term(40, b"\x13\x88", b"\xff\xff", False)]
