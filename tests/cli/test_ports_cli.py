"""``netrig ports`` marks an interface the transmit guard would refuse (the loopback, a live network
with a default route or a routable address), so a port listed as working is one a trial may send on."""
from __future__ import annotations

import json
import os

import pytest

from netrig.cli.main import main
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
