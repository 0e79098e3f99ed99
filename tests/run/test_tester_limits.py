"""A run's numbers are the DUT's: searches start from what the self-test proved, a DUT that slows the
tester is measured (not reported as 0 fps), and methods that measure the same thing agree or say why."""
import contextlib
import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from netrig.cli.console import print_summary
from netrig.errors import ResultError
from netrig.measure import TrialCounts
from netrig.measure.simulator import DutModel, SimulatedMeasurer
from netrig.methodology.mlr import GoalResult, MlrResult, SearchGoal
from netrig.methodology.selftest import SelftestParams, prove_rate
from netrig.methodology.tester import NOT_MEASURED
from netrig.methods import REGISTRY
from netrig.methods.throughput import ThroughputResult
from netrig.model import FrameSize, LineRate, format_pps
from netrig.report import write_report
from netrig.report.tables import answers_table
from netrig.results import load_result
from netrig.run import consistency
from netrig.run.config import config_from_dict
from netrig.run.runner import Runner
from netrig.run.session import simulated_session
from netrig.view import fmt

GOAL = {"initial_trial_duration_s": 0.5, "final_trial_duration_s": 0.5, "duration_sum_s": 1.0, "relative_width": 0.01}


def config(simulator: dict, methods: list | None = None, **kw) -> dict:
    return {
        "testbed": {"name": "simulated", "simulator": simulator},
        "trial": {"duration_s": "0.5s"},
        "line_rate": {"speed_bps": 1e9},
        "frames": {"sizes": [64]},
        "selftest": {"enabled": True, "duration_s": 0.5, "resolution_pct": 3.0},
        "methods": methods or [
            {"rfc2544_throughput": {"resolution_pct": 0.5}},
            {"rfc2544_frame_loss": {}},
            {"mlrsearch": {"goals": [{"name": "NDR", "loss_ratio": 0.0, **GOAL},
                                     {"name": "PDR", "loss_ratio": 0.005, **GOAL}], "min_rate_pct": 0.1}},
        ],
        **kw,
    }


def run(tmp_path, cfg: dict, provider=None) -> dict:
    Runner(config_from_dict(cfg), tmp_path, provider=provider).run()
    return load_result(tmp_path)


def results(doc: dict) -> dict:
    return {s["method"]: s["results"][0] for s in doc["summary"]}


def codes(result: dict) -> set:
    return {f["code"] for f in result["flags"]}


def test_a_dut_that_slows_the_tester_is_measured_not_reported_as_zero(tmp_path):
    """The firewall with 3000 rules on veth: the tester reaches 4.5 kfps through it although the
    self-test proved 600 kfps. Today's main: "0 fps", every trial invalid."""
    doc = run(tmp_path, config({"capacity_pps": 1e6, "backpressure_pps": 4500, "tester_ceiling_pps": 600e3,
                                "tester_tolerance_ratio": 0.0}))
    ceiling = doc["selftest"]["ceilings"][0]["proven_rate_pps"]
    assert 0.97 * 600e3 <= ceiling <= 600e3
    r = results(doc)
    tp, fl, mlr = r["rfc2544_throughput"], r["rfc2544_frame_loss"], r["mlrsearch"]
    assert 4400 <= tp["headline"]["fps"] <= 4500
    assert 4400 * 0.98 <= mlr["headline"]["fps"] <= 4500
    assert fl["headline"] and 0 < fl["headline"]["fps"] <= 4500
    for x in (tp, mlr):
        assert "dut_backpressure" in codes(x) and "tester_limited" not in codes(x), x["flags"]
        assert "throughput_disagreement" not in codes(x)
    # nothing asked for more than the self-test vouches for
    limit = ceiling / 1.1
    assert max(t["load"]["rate_pps"] for t in doc["trials"] if t["method"] != "selftest") <= limit * (1 + 1e-9)


def test_a_search_whose_resolution_is_wider_than_a_tenth_of_its_answer_says_so(tmp_path):
    """1 % of a nominal 10 Gbit/s line is 149 kfps at 64 B: against a 120-kfps DUT the search stops
    with the DUT failing 44 % above what passed (the table-scale study read "≥ 104 kfps" so, the tester
    short at 208 kfps); at 0.05 % (7.4 kfps) it is not flagged."""
    dut = {"capacity_pps": 120e3, "tester_ceiling_pps": 600e3, "tester_tolerance_ratio": 0.0}
    coarse = config(dut, [{"rfc2544_throughput": {"resolution_pct": 1.0}}], line_rate={"speed_bps": 1e10})
    tp = results(run(tmp_path / "coarse", coarse))["rfc2544_throughput"]
    flag = {f["code"]: f["message"] for f in tp["flags"]}["coarse_resolution"]
    assert flag.startswith("the search stopped with the throughput between 120 kfps and ") and \
        "as its resolution (149 kfps) allows; resolution_pct = 0.0081 makes that 1 % of the answer" in flag, flag
    fine = config(dut, [{"rfc2544_throughput": {"resolution_pct": 0.05}}], line_rate={"speed_bps": 1e10})
    tp = results(run(tmp_path / "fine", fine))["rfc2544_throughput"]
    assert "coarse_resolution" not in codes(tp) and 112e3 <= tp["headline"]["fps"] <= 120e3


def test_a_dut_faster_than_the_tester_is_a_lower_bound(tmp_path):
    doc = run(tmp_path, config({"capacity_pps": 5e6, "tester_ceiling_pps": 600e3, "tester_tolerance_ratio": 0.0}))
    limit = doc["selftest"]["ceilings"][0]["proven_rate_pps"] / 1.1
    r = results(doc)
    tp, mlr = r["rfc2544_throughput"], r["mlrsearch"]
    assert tp["headline"]["fps"] == pytest.approx(limit) and "tester_limited" in codes(tp)
    assert tp["repetitions"][0]["trials"] == 1  # one trial at the limit: the DUT passed it
    assert all(g["tester_limited"] for g in mlr["repetitions"][0]["goals"]) and "tester_limited" in codes(mlr)
    assert "above_selftest_ceiling" not in codes(tp)
    assert "throughput_disagreement" not in codes(tp)
    rows = [row for s in doc["summary"] for res in s["results"]
            for row in REGISTRY.get(s["method"]).console_rows(res, "")]
    assert rows[0][1].startswith("≥ ") and rows[0][1].endswith("(tester-limited)")
    assert all(row[2].startswith("≥ ") for row in rows if row[1].startswith(("NDR", "PDR")))
    html = (tmp_path / "r.html")
    write_report([tmp_path / "result.json"], html)
    assert "≥" in html.read_text()


def test_throughput_and_ndr_agree_on_the_same_dut(tmp_path):
    for sim in ({"capacity_pps": 400e3}, {"capacity_pps": 400e3, "livelock_slope": 0.5, "livelock_floor": 0.2}):
        doc = run(tmp_path / str(len(sim)), config(sim))
        r = results(doc)
        tp, ndr = r["rfc2544_throughput"]["headline"]["fps"], r["mlrsearch"]["headline"]["fps"]
        assert abs(tp - ndr) <= 0.01 * 400e3 + 0.005 * LineRate(1e9).fps(FrameSize(64)), (tp, ndr)
        assert "throughput_disagreement" not in codes(r["rfc2544_throughput"])


def test_methods_that_disagree_say_why(tmp_path):
    """Loss that comes and goes: RFC 2544's single trial per load fails where MLRsearch's exceed
    ratio passes. The run keeps both numbers and flags both with the trials in between."""
    sim = {"capacity_pps": 400e3, "hiccup_probability": 0.3, "hiccup_s": 0.05, "seed": 5}
    doc = run(tmp_path, config(sim, [{"rfc2544_throughput": {"resolution_pct": 0.5}},
                                     {"mlrsearch": {"goals": [{"name": "NDR", "initial_trial_duration_s": 0.5,
                                                               "final_trial_duration_s": 0.5, "duration_sum_s": 5.0,
                                                               "relative_width": 0.01}], "min_rate_pct": 0.1}}]))
    r = results(doc)
    flags = [f for f in r["rfc2544_throughput"]["flags"] if f["code"] == "throughput_disagreement"]
    assert flags and flags == [f for f in r["mlrsearch"]["flags"] if f["code"] == "throughput_disagreement"]
    msg = flags[0]["message"]
    assert "disagree beyond their resolutions" in msg and "lost frames" in msg and "comes and goes" in msg
    assert "RFC 2544 throughput: a load passes when one 0.5 s trial loses no frames" in msg
    assert "MLRsearch NDR: a load passes when at most 50 % of 5 s of 0.5 s trials lose frames" in msg


def _summary(tp_rep: dict, ndr_goal: dict) -> list[dict]:
    f, lr = FrameSize(64), LineRate(1e9)
    goal = SearchGoal("NDR", duration_sum_s=3)
    return [
        {"method": "rfc2544_throughput", "method_index": 0, "label": "RFC 2544 throughput",
         "params": {"duration_s": 1.0, "acceptable_loss_ratio": 0.0},
         "results": [{"frame_size": 64, "complete": True, "flags": [], "repetitions": [
             ThroughputResult(f, lr, 238e3, 238e3, 240e3, 10, False, None, 7e3, True).to_dict() | tp_rep]}]},
        {"method": "mlrsearch", "method_index": 1, "label": "MLRsearch", "params": {},
         "results": [{"frame_size": 64, "complete": True, "flags": [], "repetitions": [
             MlrResult(f, lr, (GoalResult(goal, *ndr_goal.values()),), 20, 1.0).to_dict()]}]},
    ]


RECORDS = [{"method_index": 0, "frame_size": 64, "kind": "rate", "load": {"rate_pps": 250e3},
            "counts": TrialCounts(achieved_pps=250e3, frames_sent=300_000, frames_received=299_997).to_dict()},
           {"method_index": 1, "frame_size": 64, "kind": "rate", "load": {"rate_pps": 300e3},
            "counts": TrialCounts(achieved_pps=300e3, frames_sent=300_000, frames_received=300_000).to_dict()}]


def test_brackets_that_do_not_overlap_are_flagged_with_the_evidence():
    summary = _summary({}, {"ct": 321e3, "lo": 321e3, "hi": 324e3})
    consistency.annotate(summary, RECORDS)
    (f0,), (f1,) = (x["results"][0]["flags"] for x in summary)
    assert f0 == f1 and f0["code"] == "throughput_disagreement"
    msg = f0["message"]
    assert "RFC 2544 throughput ran 1 trial(s): 1 lost frames (up to 0.001 %)" in msg
    assert "MLRsearch ran 1 trial(s): 1 loss-free" in msg and "loss in this range comes and goes" in msg
    assert "a load passes when one 1 s trial loses no frames" in msg
    assert "a load passes when at most 50 % of 3 s of 1 s trials lose frames" in msg


def test_a_dut_whose_cpu_slowed_between_trials_is_named_with_its_cost_per_frame():
    """The demo on a shared host: at 130 kfps the DUT took a frame in 7.2 µs of CPU in one trial and
    10.1 µs in another; the disagreement's note says so, with the two numbers."""
    ring = [{"arrived": 130_000, "taken": 130_000, "dropped": 0, "dut_cpu_s": 0.936},
            {"arrived": 100_000, "taken": 100_000, "dropped": 0, "dut_cpu_s": 1.01}]
    records = [{**r, "counts": {**r["counts"], "dut_ring": d}} for r, d in zip(RECORDS, ring)]
    summary = _summary({}, {"ct": 321e3, "lo": 321e3, "hi": 324e3})
    consistency.annotate(summary, records)
    msg = summary[0]["results"][0]["flags"][0]["message"]
    assert "the DUT's CPU time per frame it took ranged 7.2 µs–10.1 µs" in msg, msg
    consistency.annotate(even := _summary({}, {"ct": 321e3, "lo": 321e3, "hi": 324e3}),
                         [{**r, "counts": {**r["counts"], "dut_ring": ring[0]}} for r in RECORDS])
    assert "CPU time per frame" not in even[0]["results"][0]["flags"][0]["message"], "one cost: nothing to say"


@pytest.mark.parametrize("tp_rep,ndr", [
    ({}, {"ct": 239e3, "lo": 239e3, "hi": 241e3}),  # overlapping brackets agree
    ({"upper_pps": None, "tester_limited": True, "bounded_by_tester": True},  # "≥ 238 k": no upper end
     {"ct": 321e3, "lo": 321e3, "hi": 324e3}),
    ({"tester_limited": True}, {"ct": 321e3, "lo": 321e3, "hi": 324e3}),  # an older result: no upper end claimed
])
def test_brackets_that_overlap_or_are_open_agree(tp_rep, ndr):
    summary = _summary(tp_rep, ndr)
    if "bounded_by_tester" not in tp_rep and tp_rep:
        del summary[0]["results"][0]["repetitions"][0]["bounded_by_tester"]
    consistency.annotate(summary, RECORDS)
    assert all(not x["results"][0]["flags"] for x in summary)


def test_results_drawn_as_one_are_checked_across_parts(tmp_path):
    """The demo writes RFC 2544 and NDR/PDR as two results and draws them as one report."""
    full = _summary({}, {"ct": 321e3, "lo": 321e3, "hi": 324e3})
    parts = []
    for i, s in enumerate(full):
        d = tmp_path / str(i)
        doc = run(d, config({"capacity_pps": 400e3}, [{"rfc2544_throughput": {}}], selftest={"enabled": False}))
        doc["summary"] = [{**s, "method_index": 0}]
        doc["trials"] = [{**t, "method_index": 0} for t in RECORDS if t["method_index"] == i]
        (d / "result.json").write_text(json.dumps(doc))
        parts.append(d / "result.json")
    html = write_report(parts, tmp_path / "report.html").read_text()
    assert "throughput_disagreement" in html and "disagree beyond their resolutions" in html


class DutProvider:
    """A provider of simulated sessions whose DUT measurer's ``measure`` goes through :meth:`measure`
    (``inner``: the simulated DUT's)."""

    def measure(self, inner, load, duration_s):
        return inner.measure(load, duration_s)

    def __call__(self, cfg, role):
        @contextlib.contextmanager
        def cm():
            with simulated_session(cfg, role) as s:
                if role == "dut":
                    inner, outer = s.measurer, self

                    class M:
                        def measure(self, load, duration_s):
                            return outer.measure(inner, load, duration_s)

                    s.measurer = M()
                yield s

        return cm()


class BreaksAfter(DutProvider):
    """The DUT measurer raises after ``k`` trials."""

    def __init__(self, k):
        self.k = k

    def measure(self, inner, load, duration_s):
        if self.k <= 0:
            raise OSError("the tester's port vanished")
        self.k -= 1
        return inner.measure(load, duration_s)


def test_an_error_mid_search_keeps_the_partial_result(tmp_path):
    cfg = config({"capacity_pps": 400e3}, [{"mlrsearch": {"goals": [{"name": "NDR", **GOAL}]}}],
                 selftest={"enabled": False})
    with pytest.raises(ResultError, match="port vanished"):
        Runner(config_from_dict(cfg), tmp_path, provider=BreaksAfter(2)).run()
    doc = load_result(tmp_path)
    assert doc["complete"] is False
    res = doc["summary"][0]["results"][0]
    assert not res["complete"] and res["headline"] is None
    (rep,) = res["repetitions"]
    assert rep["complete"] is False and rep["trials"] == 2 and rep["goals"][0]["lower_bound_pps"] is not None


def test_frame_loss_is_checked_too():
    """The demo on a busy host: the throughput search saw the DUT slow the sender at 70 kfps, the
    frame-loss sweep's first load (123 kfps, the tester's limit) went through loss-free."""
    summary = _summary({"rate_pps": 70.3e3, "lower_pps": 70.3e3, "upper_pps": 70.4e3},
                       {"ct": 69e3, "lo": 69e3, "hi": 70e3})
    summary[1] = {"method": "rfc2544_frame_loss", "method_index": 1, "label": "RFC 2544 frame loss",
                  "params": {"duration_s": 0.5}, "results": [{"frame_size": 64, "complete": True, "flags": [],
                  "repetitions": [{"curve": [{"intended_pct": 8.3, "intended_pps": 123e3, "achieved_pps": 123e3,
                                              "forwarded_pps": 123e3, "loss_ratio": 0.0, "valid": True,
                                              "backpressure": False}]}]}]}
    held = TrialCounts(achieved_pps=70.4e3, frames_sent=35_200, frames_received=35_200, valid=False,
                       invalid_reason="the tester sent 57.2 % of the intended 123000 fps")
    records = [{"method_index": 0, "frame_size": 64, "kind": "rate", "load": {"rate_pps": 123e3},
                "verdict": "backpressure", "counts": held.to_dict()},
               {"method_index": 1, "frame_size": 64, "kind": "rate", "load": {"rate_pps": 123e3},
                "counts": TrialCounts(achieved_pps=123e3, frames_sent=61_500, frames_received=61_500).to_dict()}]
    consistency.annotate(summary, records)
    (f,) = summary[0]["results"][0]["flags"]
    assert "1 slowed the sender (DUT backpressure)" in f["message"] and "capacity in this range comes and goes" in f[
        "message"]
    assert "a load is loss-free when its one 0.5 s trial loses no frames" in f["message"]


def test_a_lower_bound_is_one_number_in_the_console_the_report_and_the_flag(tmp_path):
    """A tester-limited search shows the same "≥ N" in its flag, its console row and its report table
    (it was "≥ 116 kfps (tester-limited)" in a table beside "≥ 90.9 kfps" in its flag)."""
    doc = run(tmp_path, config({"capacity_pps": 5e6, "tester_ceiling_pps": 600e3, "tester_tolerance_ratio": 0.0},
                               methods=[{"rfc2544_throughput": {"resolution_pct": 0.5}}]))
    res = results(doc)["rfc2544_throughput"]
    flag = next(f["message"] for f in res["flags"] if f["code"] == "tester_limited")
    bound = flag.split(":")[0]
    assert bound.startswith("≥ ") and bound != "≥ 0 fps", flag
    row = REGISTRY.get("rfc2544_throughput").console_rows(res, "")[0]
    assert row[1].startswith(bound.replace(" fps", "")), (row, flag)
    write_report([tmp_path / "result.json"], tmp_path / "r.html")
    assert f"≥ {res['headline']['fps']:,.0f} fps (tester-limited)" in (tmp_path / "r.md").read_text()


def test_a_tester_limited_back_to_back_is_no_lower_bound_of_zero(tmp_path):
    """Back-to-back's result is a burst, not a rate: a tester that sent its bursts below the burst rate
    is said (the rate it sent them at, beside the burst: 90 % of the 600 kfps it reached, the rate
    it holds), never as "≥ 0 fps"."""
    doc = run(tmp_path, config({"capacity_pps": 5e6, "tester_ceiling_pps": 600e3, "tester_tolerance_ratio": 0.0},
                               methods=[{"rfc2544_back_to_back": {"trials": 2}}]))
    res = results(doc)["rfc2544_back_to_back"]
    flag = next(f["message"] for f in res["flags"] if f["code"] == "tester_limited")
    assert "≥" not in flag and "reached only 540 kfps" in flag, flag
    row = REGISTRY.get("rfc2544_back_to_back").console_rows(res, "")[0]
    assert row[1].endswith("(bursts at achieved TX 540 kfps: tester-limited)"), row
    write_report([tmp_path / "result.json"], tmp_path / "r.html")
    assert "(bursts at achieved TX 540 kfps: tester-limited)" in (tmp_path / "r.md").read_text()


def test_an_invalid_fixed_rate_trial_gives_no_headline(tmp_path):
    """The iperf-like run's headline came from a trial flagged invalid and "not used": a tester that
    cannot offer the rate leaves the result without a number, and the console says why."""
    cfg = config({"capacity_pps": 5e6, "tester_ceiling_pps": 100e3, "tester_tolerance_ratio": 0.0},
                 methods=[{"iperf": {"rate_pct": 50, "duration_s": 1, "interval_s": 0.5}}])
    cfg["selftest"] = {"enabled": False}
    doc = run(tmp_path, cfg)
    res = results(doc)["iperf"]
    assert res["repetitions"][0]["valid"] is False and res["headline"] is None, res
    [row] = REGISTRY.get("iperf").console_rows(res, "")
    asked = res["repetitions"][0]["intended_pps"]
    assert row[1] == format_pps(asked) and row[2] == "—: every trial invalid (not used)", row
    write_report([tmp_path / "result.json"], tmp_path / "r.html")
    md = (tmp_path / "r.md").read_text()
    assert f"{res['repetitions'][0]['received_pps']:,.0f} fps" not in md


class StallsBelow(DutProvider):
    """The tester falls short (invalid, as a stall leaves a trial) at every load between ``low`` and
    ``high`` frames/s; elsewhere the simulated DUT's counts."""

    def __init__(self, low: float, high: float):
        self.low, self.high, self.stalled = low, high, 0

    def measure(self, inner, load, duration_s):
        c = inner.measure(load, duration_s)
        if not self.low <= load.rate_pps <= self.high:
            return c
        self.stalled += 1
        return replace(c, achieved_pps=0.8 * load.rate_pps, valid=False,
                       invalid_reason="the tester's sending was stretched by a stall")


def test_a_search_the_tester_stalled_below_a_failed_load_is_a_lower_bound_said_so(tmp_path):
    """The DUT (a 30 kfps capacity) lost most of 1.49 Mfps; every trial near its throughput stalled
    (repeated twice, then taken as the tester's limit). The answer below it is "≥", and the flag says the
    throughput lies between that and the load the DUT failed — not that the DUT lost nothing."""
    cfg = config({"capacity_pps": 30e3}, [{"rfc2544_throughput": {"resolution_pct": 0.5}}],
                 selftest={"enabled": False})
    stalls = StallsBelow(25e3, 40e3)
    doc = run(tmp_path, cfg, provider=stalls)
    res = results(doc)["rfc2544_throughput"]
    (rep,) = res["repetitions"]
    # two stalled loads (29.97 and 26.2 kfps), each tried three times: the trial and its two repeats
    assert stalls.stalled == 6 and rep["repeated_trials"] == 4 and rep["trials"] == 9, rep
    assert rep["tester_limited"] and rep["upper_pps"] == pytest.approx(1488095.24) and rep["rate_pps"] < 25e3, rep
    flag = next(f["message"] for f in res["flags"] if f["code"] == "tester_limited")
    assert flag.startswith("≥ 22.5 kfps: ") and "below the lowest load the DUT failed (1.49 Mfps)" in flag, flag
    assert "lost nothing" not in flag, flag


class HostSpoilsBelow(StallsBelow):
    """:class:`StallsBelow`, each stall covered by the CPU the host took from the tester (``host_take_s``)."""

    def measure(self, inner, load, duration_s):
        c = super().measure(inner, load, duration_s)
        return replace(c, host_take_s=0.28) if not c.valid else c


def test_searches_the_host_stopped_say_so_and_report_no_rate(tmp_path):
    """Every load near the DUT's 30 kfps spoilt by the host: each search tries it three times, then
    stops, and neither reads the host's stall as the tester's limit or the DUT's: nothing passed, so
    nothing is reported, the host named in its result and its flag."""
    cfg = config({"capacity_pps": 30e3}, [{"rfc2544_throughput": {"resolution_pct": 0.5}},
                                          {"mlrsearch": {"goals": [{"name": "NDR", "loss_ratio": 0.0, **GOAL}]}}],
                 selftest={"enabled": False})
    host = HostSpoilsBelow(25e3, 40e3)
    doc = run(tmp_path, cfg, provider=host)
    assert host.stalled == 6, "three attempts per search"
    r = results(doc)
    for name in ("rfc2544_throughput", "mlrsearch"):
        (rep,) = r[name]["repetitions"]
        assert rep["platform"] and "the host took 280 ms" in rep["platform"], rep
        assert r[name]["headline"] is None or r[name]["headline"].get("fps") is None, r[name]
        flag = next(f["message"] for f in r[name]["flags"] if f["code"] == "platform_stopped")
        assert flag.startswith("the host stopped the search of 1 of 1 repetition(s): the host took 280 ms"), flag
        assert "tester_limited" not in codes(r[name]), r[name]["flags"]
    assert r["rfc2544_throughput"]["repetitions"][0]["not_measured"] == r["rfc2544_throughput"]["repetitions"][0][
        "platform"]


def test_a_method_at_a_share_of_a_throughput_the_host_stopped_is_not_measured_no_search_of_its_own(tmp_path, capsys,
                                                                                                 monkeypatch):
    """The host spoilt every attempt of the user's throughput search, bounded at 10 % of the line
    rate: latency, which runs at a share of that throughput, is not measured, naming why. It ran a
    hidden default search of its own up to the line rate instead (17 trials in a clean clone's run),
    past the bound the user set, and measured at what a stalled host let that search find."""
    cfg = config({"capacity_pps": 30e3}, [{"rfc2544_throughput": {"max_rate_pct": 10, "initial_rate_pct": 5,
                                                                 "resolution_pct": 2}},
                                          {"rfc2544_latency": {"trials": 2, "duration_s": 0.5}}],
                 selftest={"enabled": False})
    host = HostSpoilsBelow(0, 1e12)
    doc = run(tmp_path, cfg, provider=host)
    assert host.stalled == 3, "the throughput search's three attempts, and nothing else"
    assert {t["method"] for t in doc["trials"]} == {"rfc2544_throughput"}, "no trial of latency's own"
    lat = results(doc)["rfc2544_latency"]
    assert lat["repetitions"] == [] and lat["headline"] is None, lat
    flag = next(f["message"] for f in lat["flags"] if f["code"] == "no_throughput")
    assert flag.startswith("not measured: no throughput to measure at: RFC 2544") and "the host took 280 ms" in flag, flag
    html = write_report(tmp_path / "result.json").read_text()
    assert "no throughput to measure at" in html
    monkeypatch.setenv("COLUMNS", "400")  # one console line per table row
    print_summary(load_result(tmp_path))
    assert "no throughput to measure at" in capsys.readouterr().out


def test_the_selftest_proves_what_the_run_needs_with_trials_no_longer_than_its_own(tmp_path):
    """A soak at 20 kpps needs the tester proven at 22 kpps (its rate × 1.1), not at the line rate;
    its one trial lasts the whole soak, so the self-test's trials last one of its intervals, not the
    default 60-s trial (on a quiet VM six such trials from 16.4 Mfps down took 17 minutes)."""
    cfg = config({}, [{"soak": {"rate": "20kpps", "duration_s": 30, "interval_s": 10}}], selftest={"enabled": True})
    del cfg["trial"]  # the default trial duration, 60 s
    doc = run(tmp_path, cfg)
    st = doc["selftest"]
    assert st["passed"] and st["duration_s"] == 10
    assert [c["required_rate_pps"] for c in st["ceilings"]] == [pytest.approx(22e3)]
    trials = [t for t in doc["trials"] if t["method"] == "selftest"]
    assert len(trials) == 1 and trials[0]["load"]["rate_pps"] == pytest.approx(22e3)
    assert trials[0]["load"]["duration_s"] == 10


@pytest.mark.parametrize(("methods", "trial_s"), [
    ([{"rfc2544_throughput": {"duration_s": 2.0}}, {"rfc2544_frame_loss": {"duration_s": 0.5}}], 2.0),
    ([{"mlrsearch": {"goals": [{"name": "NDR", "loss_ratio": 0.0, **GOAL, "final_trial_duration_s": 1.0}]}}], 1.0),
    ([{"soak": {"rate": "80%NDR", "duration_s": 60, "interval_s": 5, "ndr_trial_s": 2}}], 5.0),
    ([{"soak": {"rate": "80%NDR", "duration_s": 60, "interval_s": 5, "ndr_trial_s": 8}}], 8.0),
])
def test_the_selftest_trials_last_the_runs_longest_trial(tmp_path, methods, trial_s):
    cfg = config({"capacity_pps": 1e6}, methods, selftest={"enabled": True, "resolution_pct": 3.0})
    doc = run(tmp_path, cfg)
    assert doc["selftest"]["duration_s"] == trial_s
    assert {t["load"]["duration_s"] for t in doc["trials"] if t["method"] == "selftest"} == {trial_s}


def test_a_search_whose_every_trial_was_invalid_is_not_measured_never_0_fps(tmp_path):
    """A loaded machine where the tester could not keep any load: every trial of the throughput
    search was invalid. It printed "64 B: 0 fps" (found: false, tester_limited: false) with only the
    invalid_trials flag; it is "not measured" in the JSON (a typed field), the console and the report."""
    cfg = config({"capacity_pps": 30e3}, [{"rfc2544_throughput": {"resolution_pct": 0.5}}],
                 selftest={"enabled": False})
    doc = run(tmp_path, cfg, provider=StallsBelow(0, 1e12))
    res = results(doc)["rfc2544_throughput"]
    [row] = REGISTRY.get("rfc2544_throughput").console_rows(res, "")
    print(f"console: {row}")
    assert row[1] == f"not measured: {NOT_MEASURED}" and "0 fps" not in " ".join(row) and "0.00" not in row, row
    (rep,) = res["repetitions"]
    assert rep["found"] is False and rep["not_measured"] == NOT_MEASURED, rep
    assert res["headline"] is None and res["stats"]["rate_pps"]["median"] is None, res
    write_report([tmp_path / "result.json"], tmp_path / "r.html")
    md = (tmp_path / "r.md").read_text()
    assert f"| 64 B | not measured: {NOT_MEASURED} |" in md, md
    assert "| 0 fps |" not in md, md


class NothingSent(DutProvider):
    """A tester that stalls in every trial: it sends 80 % of the load's frames, all received, and the
    trial is invalid (the tester's)."""

    def measure(self, inner, load, duration_s):
        c = inner.measure(load, duration_s)
        sent = int(0.8 * load.rate_pps * duration_s)
        return replace(c, achieved_pps=0.8 * load.rate_pps, frames_sent=sent, frames_received=sent, valid=False,
                       invalid_reason="the tester's sending was stretched by a stall")


def test_every_search_whose_every_trial_was_the_testers_is_not_measured(tmp_path):
    """RFC 2544 throughput and frame loss, MLRsearch NDR: every trial invalid, the tester's. Each says
    "not measured" (MLRsearch said "≥ 1.49 Mfps" in its flag, the configured maximum, and its report
    failed drawing no bar)."""
    cfg = config({"capacity_pps": 30e3}, [
        {"rfc2544_throughput": {"resolution_pct": 0.5}}, {"rfc2544_frame_loss": {}},
        {"mlrsearch": {"goals": [{"name": "NDR", "loss_ratio": 0.0, **GOAL}], "min_rate_pct": 1}}],
                 selftest={"enabled": False})  # nothing proven: every shortfall is the tester's
    res = results(run(tmp_path, cfg, provider=NothingSent()))
    for method, r in res.items():
        rows = REGISTRY.get(method).console_rows(r, "")
        print(method, rows)
        assert r["headline"] is None and r["repetitions"][0]["not_measured"] == NOT_MEASURED, (method, r)
        assert any(f"not measured: {NOT_MEASURED}" in cell for row in rows for cell in row), rows
        assert "tester_limited" not in codes(r), r["flags"]
    write_report([tmp_path / "result.json"], tmp_path / "r.html")
    md = (tmp_path / "r.md").read_text()
    assert md.count(f"not measured: {NOT_MEASURED}") >= 3 and "| 0 fps |" not in md, md


def test_a_selftest_whose_every_trial_was_invalid_proves_nothing_said_so():
    """The self-test's proof with every trial the tester's: "not measured", not "proven 0 fps"."""
    sim = SimulatedMeasurer(DutModel(capacity_pps=1e7))
    stalled = lambda load, duration_s: NothingSent().measure(sim, load, duration_s)
    c = prove_rate(SimpleNamespace(measure=stalled), FrameSize.parse(64), LineRate(1e9), 1e5,
                   SelftestParams(1.1, 0.5, 3.0))
    assert c.not_measured == NOT_MEASURED and c.to_dict()["not_measured"] == NOT_MEASURED
    assert c.proven_rate_pps == 0 and not c.passed


class StallsFirstSearch(StallsBelow):
    """:class:`StallsBelow` for the first ``n`` trials in its band only: one repetition the tester
    stalled, the next ones clean."""

    def __init__(self, low: float, high: float, n: int):
        super().__init__(low, high)
        self.left = n

    def measure(self, inner, load, duration_s):
        if self.low <= load.rate_pps <= self.high and self.left > 0:
            self.left -= 1
            return super().measure(inner, load, duration_s)
        return inner.measure(load, duration_s)


def test_a_repetition_the_tester_bounded_stays_out_of_the_median_and_the_range(tmp_path):
    """Of three repetitions, the first one's search stalled near the DUT's throughput (a lower bound,
    ≥ 22.5 kfps); the other two bracket it at ~30 kfps. The headline and its range are the two's; the
    stalled one is shown apart as "≥" in the run's flag and in the answers side by side — it said the
    DUT forwards at least that much, never that it forwards that much."""
    cfg = config({"capacity_pps": 30e3}, [{"rfc2544_throughput": {"resolution_pct": 0.5}},
                                          {"rfc2544_frame_loss": {}}], selftest={"enabled": False}, repetitions=3)
    doc = run(tmp_path, cfg, provider=StallsFirstSearch(25e3, 40e3, 6))
    res = results(doc)["rfc2544_throughput"]
    limited = [r["rate_pps"] for r in res["repetitions"] if r["tester_limited"]]
    clean = sorted(r["rate_pps"] for r in res["repetitions"] if not r["tester_limited"])
    assert len(limited) == 1 and limited[0] < 25e3 and len(clean) == 2 and clean[0] > 29e3, res["repetitions"]
    assert res["headline"]["fps"] == pytest.approx(sum(clean) / 2)
    assert res["stats"]["rate_pps"]["min"] == clean[0] and res["stats"]["rate_pps"]["n"] == 2
    flag = next(f["message"] for f in res["flags"] if f["code"] == "tester_limited")
    assert flag.startswith(f"1 of 3 repetitions the tester bounded (≥ {format_pps(limited[0])})"), flag
    row = REGISTRY.get("rfc2544_throughput").console_rows(res, "")[0]
    assert not row[1].startswith("≥"), "two repetitions bracket the throughput: a value, not a bound"
    a = next(x for x in consistency.answers([doc]) if x.frame_label == "64")
    thr = next(r for r in a.rows if r.name == "RFC 2544 §26.1 throughput")
    assert thr.values == tuple(r["rate_pps"] for r in res["repetitions"] if not r["tester_limited"])
    assert thr.at_least == (limited[0],) and thr.median == pytest.approx(sum(clean) / 2)
    cells = next(r for r in answers_table(a).rows if r[0] == thr.name)
    assert cells[2].endswith(f"(2); ≥ {fmt.fps(limited[0])} (tester-limited: a lower bound)") \
        and not cells[1].startswith("≥") and not cells[3].endswith("none"), cells
