"""This host's linuxptp state from pmc's answer."""
from __future__ import annotations

from netrig.otg.ptp import parse_pmc
from netrig.otgclient.headers import Ptp


def test_ptp_from_pmc():
    out = "\tmaster_offset              -37\n\tgmPresent                  true\n\tgmIdentity   001122.fffe.334455\n"
    assert parse_pmc(out) == Ptp("001122.fffe.334455", -37.0)
    assert parse_pmc("gmPresent false") is None
    assert parse_pmc(out.replace("-37", "x")) is None
    assert parse_pmc(out.replace("true", "false")) is None
