"""The ``rr`` method: sockperf ping-pong as a stack trial per repetition, in reports and studies; on a
real router test bed sockperf really runs through the DUT and every party's CPU is accounted."""
from __future__ import annotations

import shutil

import pytest
from tests.conftest import needs_root

from netrig.errors import ConfigError
from netrig.report import write_compare
from netrig.run.config import config_from_dict
from netrig.run.runner import Runner

needs_sockperf = pytest.mark.skipif(shutil.which("sockperf") is None, reason="sockperf is not installed (make setup)")


def _cfg(latency_ns: float = 10_000, **rr) -> dict:
    return {"testbed": {"name": "simulated", "simulator": {"latency_base_ns": latency_ns}},
            "trial": {"duration_s": 0.4}, "methods": [{"rr": rr}, {"rr": {**rr, "protocol": "udp"}}]}


def test_duration_defaults_to_whole_seconds_and_bad_params_name_the_field():
    cfg = config_from_dict(_cfg())
    assert cfg.methods[0].params.duration_s == 1.0
    with pytest.raises(ConfigError, match=r"methods\[0\]\.rr\.protocol"):
        config_from_dict(_cfg(protocol="sctp"))
    with pytest.raises(ConfigError, match=r"methods\[0\]\.rr\.duration_s"):
        config_from_dict(_cfg(duration_s=1.5))


def test_simulated_round_trips_and_comparison(tmp_path):
    Runner(config_from_dict(_cfg(10_000)), tmp_path / "a").run()
    doc = Runner(config_from_dict(_cfg(20_000)), tmp_path / "b").run()
    r = doc["summary"][0]["results"][0]
    assert r["frame_size"] == "stack"
    st = r["stats"]
    assert st["tps"]["median"] == pytest.approx(25_000, rel=0.01)  # one round trip of 2 × 20 µs at a time
    assert st["rtt_p50_us"]["median"] <= st["rtt_p99_us"]["median"] <= st["rtt_max_us"]["median"]
    html = write_compare([tmp_path / "a" / "result.json", tmp_path / "b" / "result.json"], tmp_path / "c.html")
    text = html.read_text()
    assert 'data-plot="rr"' in text and "Request/response through the DUT" in text and "50.0 %" in text


@needs_root
@needs_sockperf
def test_real_router_request_response(tmp_path):
    cfg = config_from_dict({"testbed": {"name": "router"}, "selftest": {"enabled": False},
                            "methods": [{"rr": {"protocol": "udp", "duration_s": 1}}]})
    doc = Runner(cfg, tmp_path / "r").run()
    assert doc["complete"], doc.get("interrupted_reason")
    rep = doc["summary"][0]["results"][0]["repetitions"][0]
    assert rep["tps"] > 1000, rep  # a veth router answers tens of thousands of round trips per second
    assert 0 < rep["rtt_us"]["p50"] <= rep["rtt_us"]["p99"]
    assert len(rep["processes"]) == 2 and all(p["total_s"] > 0 for p in rep["processes"])  # client and server
    assert rep["cpu_per"]["busy_s_per_mtrans"] > 0
