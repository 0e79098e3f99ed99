"""``netrig ports`` marks an interface the transmit guard would refuse (the loopback, a live network
with a default route or a routable address), so a port listed as working is one a trial may send on."""
from __future__ import annotations

import json
import os
import time

import pytest
from tests.conftest import sh, veth_pair

from netrig import _native
from netrig.cli.main import main
from netrig.errors import NetrigError
from netrig.testbed import Testbed

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: probes I/O backends, builds a test bed")]


def test_ports_marks_what_the_transmit_guard_refuses(capsys):
    assert main(["ports", "lo", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["transmit_guard"]["ok"] is False
    assert "loopback interface" in row["transmit_guard"]["detail"]
    assert main(["ports", "lo"]) == 0
    out = capsys.readouterr().out
    assert "refused" in out and "lo transmit guard: refused — " in out and "--i-know-this-is-live" in out


def test_ports_passes_a_test_bed_port(capsys):
    with Testbed.create("loopback") as tb:
        port = tb.port("tx")
        assert main(["ports", "--netns", port.netns, port.ifname, "--json"]) == 0
        row = json.loads(capsys.readouterr().out)[0]
    assert row["transmit_guard"] == {"ok": True, "detail": "passes: a trial may send here"}


def test_an_interface_nobody_brought_up_is_down_at_once_one_without_carrier_gets_its_wait(capsys):
    """An administratively down interface (no ``IFF_UP``) will not come up by itself: every backend
    probe says so without the up-to-3-s wait a link just brought up gets for its carrier (``netrig
    ports`` took 6 s per such interface, 9 with the guard's probe). A veth whose peer is down is
    administratively up: it still gets the wait, then the same remedy."""
    with veth_pair("pd") as (ns_a, if_a, ns_b, if_b):
        sh("ip", "link", "set", if_a, "down", ns=ns_a)
        t0 = time.monotonic()
        assert main(["ports", "--netns", ns_a, if_a, "--json"]) == 0
        took = time.monotonic() - t0
        row = json.loads(capsys.readouterr().out)[0]
        for backend in ("af_packet", "socket"):
            assert not row["io"][backend]["ok"] and "interface is down" in row["io"][backend]["detail"]
        assert took < 2.5, f"{took:.1f} s: it waited for a carrier that nobody will bring"
        sh("ip", "link", "set", if_a, "up", ns=ns_a)
        sh("ip", "link", "set", if_b, "down", ns=ns_b)
        t0 = time.monotonic()
        with pytest.raises(NetrigError, match=r"interface is down .*bring up both ends"):
            _native.Generator([_native.Port(if_a, ns_a, io="socket")], [])
        assert time.monotonic() - t0 >= 2.9, "a link without its carrier yet gets its wait"
