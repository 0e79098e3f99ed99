"""The demo's configs are valid and run end to end on the simulator."""
import argparse

from netrig.cli.demo import demo_config, run, run_demo
from netrig.results import load_result


def test_demo_on_simulator(tmp_path, capsys):
    rfc, mlr = demo_config(tmp_path, "simulated")
    assert [f.label for f in rfc.frames.sizes] == [64, 128, 256, 512, 1024, 1280, 1518]
    assert run_demo(tmp_path, testbed="simulated", quiet=True) == 0
    doc = load_result(tmp_path / "rfc2544")
    assert doc["complete"] and [s["method"] for s in doc["summary"]] == [
        "rfc2544_throughput", "rfc2544_latency", "rfc2544_frame_loss"]
    tp = doc["summary"][0]["results"]
    assert all(abs(r["headline"]["fps"] - 500_000) <= 0.005 * doc["frame_sizes"][i]["line_rate_fps"]
               for i, r in enumerate(tp))
    nd = load_result(tmp_path / "ndr-pdr")
    assert nd["selftest"]["ceilings"][0]["frame_size"] == 64  # the NDR/PDR search starts from what it proved
    assert [s["method"] for s in nd["summary"]] == ["rfc2544_throughput", "mlrsearch", "rfc2544_throughput"]
    for before_and_after in (nd["summary"][0], nd["summary"][2]):  # the 64-B headline's own repetitions
        assert len(before_and_after["results"][0]["repetitions"]) == 4
    goals = nd["summary"][1]["results"][0]["repetitions"][0]["goals"]
    assert [g["name"] for g in goals] == ["NDR", "PDR"]
    out = capsys.readouterr().out
    assert "RFC 2544 §26.1 throughput" in out and "% line rate" in out
    # a second run replaces the complete results; the command prints the answers side by side
    assert run(argparse.Namespace(out=str(tmp_path), testbed="simulated")) == 0
    out = capsys.readouterr().out
    assert "4 answers at 64 B: how much does the DUT forward?" in out
    assert "RFC 2544 §26.3 highest loss-free load" in out and "MLRsearch PDR" in out
    assert "(9) " in out, "the headline's range over its nine repetitions, pooled"
