"""This host's linuxptp state from pmc's answer (TIME_STATUS_NP and DEFAULT_DATA_SET)."""
from __future__ import annotations

from netrig.otg.ptp import parse_pmc
from netrig.otgclient.headers import Ptp

#: pmc 3.1.1's answer on a slave (the fields netrig reads; the others as pmc prints them).
SLAVE = """sending: GET TIME_STATUS_NP
	2afd99.fffe.c11b43-1 seq 0 RESPONSE MANAGEMENT TIME_STATUS_NP
		master_offset              -37
		ingress_time               1796189974095052728
		gmPresent                  true
		gmIdentity                 001122.fffe.334455
sending: GET DEFAULT_DATA_SET
	2afd99.fffe.c11b43-1 seq 1 RESPONSE MANAGEMENT DEFAULT_DATA_SET
		twoStepFlag             1
		clockIdentity           2afd99.fffe.c11b43
"""


def test_ptp_from_pmc():
    assert parse_pmc(SLAVE) == Ptp("001122.fffe.334455", -37.0)
    assert parse_pmc("gmPresent false") is None
    assert parse_pmc(SLAVE.replace("-37", "x")) is None
    # no grandmaster present, and not its own: following nobody
    assert parse_pmc(SLAVE.replace("true", "false")) is None


def test_the_grandmaster_itself_is_0_from_itself():
    gm = SLAVE.replace("true", "false").replace("-37", "0").replace("2afd99.fffe.c11b43", "001122.fffe.334455")
    assert parse_pmc(gm) == Ptp("001122.fffe.334455", 0.0)
