"""``netrig compare``'s "what differs" lists what differs in the runs' set-ups, not what every build of
a test bed gets anew (its id and the names made from it, MACs, link-local addresses), and the
comparison warns when the runs' line rates differ (a percentage of line rate is then a different
rate in each)."""
from __future__ import annotations

import json

from report_golden import DATA, NAT, ROUTER

from netrig.cli.main import main
from netrig.report import load_run, tables

A = DATA / "report-router-demo-rfc2544.json"
B = DATA / "report-router-demo-ndr-pdr.json"


def test_test_bed_ids_and_macs_are_not_differences():
    runs = [load_run(A), load_run(B)]
    keys = [row[0] for row in tables.environment_differences(runs).rows]
    assert keys, "the two runs' configs differ"
    for k in keys:
        assert "namespaces" not in k and "testbed_sysctls" not in k and not k.endswith(".id"), k
        assert k not in ("testbed.ports", "testbed.dut_netns", "line_rate.interface", "environment.interfaces"), k
    assert "config.methods" in keys and "config.frames.sizes" in keys


def test_a_real_test_bed_difference_is_still_listed(tmp_path):
    doc = json.loads(B.read_text())
    doc["testbed"]["namespaces"]["nr97f2-dut"]["sysctls"]["net.ipv4.ip_forward"] = "0"
    p = tmp_path / "b.json"
    p.write_text(json.dumps(doc))
    rows = {row[0]: row[1:] for row in tables.environment_differences([load_run(A), load_run(p)]).rows}
    assert rows["testbed.namespaces.nr<id>-dut.sysctls.net.ipv4.ip_forward"] == ["1", "0"]


def test_compare_warns_when_line_rates_differ(tmp_path, capsys):
    doc = json.loads(NAT.read_text())
    doc["line_rate"] = {"bps": 10e9, "source": "config", "label": "10 Gbit/s (configured)"}
    nat10 = tmp_path / "nat10.json"
    nat10.write_text(json.dumps(doc))
    assert tables.line_rate_warning([load_run(ROUTER), load_run(NAT)]) is None
    out = tmp_path / "c.html"
    assert main(["compare", str(ROUTER), str(nat10), "-o", str(out)]) == 0  # write_compare, then the warning
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "warning: line rates differ" in err
    md, html = out.with_suffix(".md").read_text(), out.read_text()
    for text in (md, html):
        assert "line rates differ" in text and "10 Gbit/s" in text and "1 Gbit/s" in text
