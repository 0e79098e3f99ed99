"""The demo's configs are valid and run end to end on the simulator."""
from netrig.cli.demo import demo_config, run_demo
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
    goals = nd["summary"][0]["results"][0]["repetitions"][0]["goals"]
    assert [g["name"] for g in goals] == ["NDR", "PDR"]
    out = capsys.readouterr().out
    assert "RFC 2544 §26.1 throughput" in out and "% line rate" in out
    # a second run replaces the complete results
    assert run_demo(tmp_path, testbed="simulated", quiet=True) == 0
