"""`netrig serve --metrics-listen`: the served flows' counters as OpenMetrics, scraped while snappi
drives two flows on a veth pair; at the end they equal the flows' own OTG metrics exactly."""
from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.conftest import needs_root
from tests.otg.conftest import api, control, free_port, serve, wait_stopped
from tests.otg.test_serve_veth import add_flow, eth, new_config

pytestmark = [needs_root, pytest.mark.root]


def served(url: str) -> dict[tuple[str, str], float]:
    """``{(family, flow_group): value}`` of the served-flow counters at one scrape."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith("netrig_served_") and s.name.endswith("_total"):
                out[(s.name, s.labels["flow_group"])] = s.value
    return out


def test_served_flows_are_exported_and_match_the_otg_metrics(veth):
    ns_a, if_a, ns_b, if_b = veth
    mport = free_port()
    metrics_url = f"http://127.0.0.1:{mport}/metrics"
    with serve([f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"], "--metrics-listen", f"127.0.0.1:{mport}") as url:
        assert served(metrics_url) == {}, "no config: no flow groups"
        a = api(url)
        c = new_config(a, [f"{if_a}@{ns_a}", f"{if_b}@{ns_b}"])
        for name, frames in (("one", 3000), ("two", 1200)):
            f = add_flow(c, name, frames)
            eth(f)
            f.packet.ipv4().udp()
            f.rate.pps = 2000
        a.set_config(c)
        control(a, "start")
        m = wait_stopped(a, ["one", "two"])
        got = served(metrics_url)
        for name, frames in (("one", 3000), ("two", 1200)):
            assert m[name].frames_tx == m[name].frames_rx == frames
            assert got[("netrig_served_frames_sent_total", name)] == frames
            assert got[("netrig_served_frames_received_total", name)] == frames
            assert got[("netrig_served_sent_bytes_total", name)] == m[name].bytes_tx
            assert got[("netrig_served_received_bytes_total", name)] == m[name].bytes_rx
