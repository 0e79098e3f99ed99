"""The RFC 2544 throughput search's criteria (``search``): bisection, or linear steps up from the
lowest load or down from the top, each bisected to the resolution; on simulated DUTs whose answer is
known, and from the command line and a config file."""
from __future__ import annotations

import json

import pytest

from netrig.cli.main import main
from netrig.errors import ConfigError
from netrig.measure import DutModel, Load, SimulatedMeasurer, TrialCounts
from netrig.methodology.tester import ProvenLimit
from netrig.methods.throughput import SEARCHES, ThroughputParams, measure_throughput, scan_loads
from netrig.model import FrameSize, LineRate
from netrig.run.config import config_from_dict

LR = LineRate(10e9, "nominal", "veth0")
F64 = FrameSize(64)
LINE = LR.fps(F64)


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("cap", [123_456.0, 1_000_000.0, 7_000_000.0, 14_000_000.0])
def test_every_search_finds_a_capacity_within_the_resolution(search, cap):
    m = SimulatedMeasurer(DutModel(capacity_pps=cap))
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1, resolution_pct=0.1, search=search))
    assert cap - 0.001 * LINE <= r.rate_pps <= cap and r.upper_pps is not None and r.upper_pps > cap
    assert not r.tester_limited and r.search == search and r.to_dict()["search"] == search


class ComesAndGoes:
    """A DUT that loses frames between 3 and 5 Mfps (and above 7 Mfps) but not between 5 and 7 Mfps."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        self.asked.append(load.rate_pps)
        sent = int(load.rate_pps * duration_s)
        lossy = 3e6 < load.rate_pps <= 5e6 or load.rate_pps > 7e6
        return TrialCounts(achieved_pps=load.rate_pps, frames_sent=sent, frames_received=sent - 100 * lossy)


def test_downward_finds_the_highest_passing_load_and_upward_the_lowest_failing_one():
    """Loss that comes and goes with the load: a scan from the top stops at the first load that
    passes (just under 7 Mfps), one from below at the first that fails (3 Mfps is the last pass)."""
    down, up = ComesAndGoes(), ComesAndGoes()
    p = ThroughputParams(duration_s=1, resolution_pct=0.1, step_pct=10)  # 10 % of the line rate: the top
    d = measure_throughput(down, F64, LR, ThroughputParams(**{**p.__dict__, "search": "linear-down"}))
    u = measure_throughput(up, F64, LR, ThroughputParams(**{**p.__dict__, "search": "linear-up"}))
    assert 7e6 - 0.001 * LINE <= d.rate_pps <= 7e6 and 7e6 < d.upper_pps <= 7e6 + 0.001 * LINE
    assert 3e6 - 0.001 * LINE <= u.rate_pps <= 3e6 and 3e6 < u.upper_pps <= 3e6 + 0.001 * LINE
    # the scans: down from the line rate in 10 % steps to the first pass, up from 10 % to the first failure
    assert down.asked[:7] == pytest.approx([LINE * k / 10 for k in range(10, 3, -1)])
    assert up.asked[:3] == pytest.approx([LINE * k / 10 for k in (1, 2, 3)])
    assert d.trials == len(down.asked) and u.trials == len(up.asked)


def test_a_linear_search_stops_at_the_testers_limit_and_says_so():
    """Above 2 Mfps the tester falls short: the upward scan stops there (the DUT may be faster)."""
    m = SimulatedMeasurer(DutModel(capacity_pps=5e6, tester_ceiling_pps=2e6))
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1, resolution_pct=0.1, search="linear-up"))
    assert r.tester_limited and r.tester_limit_pps == 2e6 and 2e6 - 0.001 * LINE <= r.rate_pps <= 2e6 * 1.02


def test_scan_loads_are_multiples_of_the_step_and_the_top():
    assert scan_loads(0.0, 10.0, 3.0, up=True) == [3.0, 6.0, 9.0, 10.0]
    assert scan_loads(4.0, 9.0, 3.0, up=False) == [9.0, 6.0]
    assert scan_loads(0.0, 2.0, 3.0, up=True) == [2.0]


@pytest.mark.parametrize(("kw", "field"), [({"search": "linear"}, "search"), ({"step_pct": 0}, "step_pct"),
                                          ({"step_pct": 101}, "step_pct")])
def test_bad_search_parameters_name_the_field(kw, field):
    with pytest.raises(ConfigError) as e:
        ThroughputParams(**kw)
    assert e.value.field == field


def test_the_step_is_a_share_of_the_top_load_the_testers_limit_when_lower():
    """On veth a software tester proves a few % of the nominal line rate: steps of the line rate
    would leave one load to scan; a share of the tester's limit scans ten."""
    m = ComesAndGoes()
    limit = ProvenLimit(1e6)
    r = measure_throughput(m, F64, LR, ThroughputParams(duration_s=1, resolution_pct=0.01, search="linear-up"), limit)
    assert m.asked[:4] == pytest.approx([1e5, 2e5, 3e5, 4e5]) and m.asked[9] == pytest.approx(1e6)
    assert r.rate_pps == pytest.approx(1e6) and r.tester_limited


def test_a_config_file_and_the_command_line_choose_the_search(tmp_path, capsys):
    cfg = config_from_dict({"testbed": {"name": "simulated"}, "methods": [
        {"rfc2544_throughput": {"search": "linear-up", "step_pct": 5}}]})
    assert cfg.methods[0].params.search == "linear-up" and cfg.methods[0].params.step_pct == 5
    with pytest.raises(ConfigError, match="methods\\[0\\].rfc2544_throughput.search"):
        config_from_dict({"testbed": {"name": "simulated"}, "methods": [{"rfc2544_throughput": {"search": "up"}}]})
    out = tmp_path / "r"
    assert main(["rfc2544", "--testbed", "simulated", "--frame-sizes", "64", "--duration", "0.1s", "--no-selftest",
                 "--tests", "throughput,frame-loss", "--search", "linear-down", "--search-step", "5", "--quiet",
                 "--out", str(out)]) == 0
    doc = json.loads((out / "result.json").read_text())
    methods = {m: p for entry in doc["config"]["methods"] for m, p in entry.items()}
    assert methods["rfc2544_throughput"]["search"] == "linear-down" and methods["rfc2544_throughput"]["step_pct"] == 5
    assert methods["rfc2544_frame_loss"]["step_pct"] == 10  # the frame-loss sweep's own --step
    rep = next(s for s in doc["summary"] if s["method"] == "rfc2544_throughput")["results"][0]["repetitions"][0]
    assert rep["search"] == "linear-down"
    capsys.readouterr()


class Stretched:
    """A DUT that forwards 2 Mfps loss-free, and a tester that sends every load 1.5 % slower than
    intended (within the 2 % stretch tolerance: every trial is valid)."""

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        sent = int(load.rate_pps * duration_s)
        offered = load.rate_pps / 1.015
        return TrialCounts(achieved_pps=offered, frames_sent=sent,
                           frames_received=sent if offered <= 2e6 else sent - 100)


class LosesAll:
    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        sent = int(load.rate_pps * duration_s)
        return TrialCounts(achieved_pps=load.rate_pps, frames_sent=sent, frames_received=sent - 1)


def test_the_result_says_what_the_passing_trial_really_offered():
    """The headline is the intended load, like every search result; ``offered_pps`` is what the
    trial that passed there sent, and the DUT was shown loss-free at that rate."""
    r = measure_throughput(Stretched(), F64, LR, ThroughputParams(duration_s=1, resolution_pct=0.1))
    assert 2e6 < r.rate_pps <= 2e6 * 1.015
    assert r.offered_pps == pytest.approx(r.rate_pps / 1.015) and r.offered_pps <= 2e6
    assert r.to_dict()["offered_pps"] == r.offered_pps
    nothing = measure_throughput(LosesAll(), F64, LR, ThroughputParams(duration_s=1, resolution_pct=1))
    assert not nothing.found and nothing.offered_pps is None


class Forwards:
    """A DUT that loses nothing up to ``cap`` and above it forwards ``forwarded(load)``."""

    def __init__(self, cap: float, forwarded) -> None:
        self.cap, self.forwarded, self.asked = cap, forwarded, []

    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        self.asked.append(load.rate_pps)
        sent = int(load.rate_pps * duration_s)
        got = sent if load.rate_pps <= self.cap else int(self.forwarded(load.rate_pps) * duration_s)
        return TrialCounts(achieved_pps=load.rate_pps, frames_sent=sent, frames_received=got)


def test_a_dut_at_its_capacity_is_bracketed_by_its_forwarded_rate_and_one_resolution_above():
    """A policer forwards its cap whatever it is offered: the first failure's forwarded rate
    passes, one resolution above it fails, and the search ends in 3 trials (bisection from the
    first failure took 9 at this resolution)."""
    res = 0.005 / 100 * LINE
    dut = Forwards(120_000.0, lambda load: 120_000.0)
    r = measure_throughput(dut, F64, LR, ThroughputParams(duration_s=1, resolution_pct=0.005, initial_rate_pct=1.0,
                                                           max_rate_pct=1.0))
    assert dut.asked == pytest.approx([0.01 * LINE, 120_000 * 0.999, 120_000 * 0.999 + res])
    assert r.trials == 3 and 120_000 - res <= r.rate_pps <= 120_000 < r.upper_pps


def test_a_dut_that_forwards_far_less_than_its_capacity_in_overload_is_bisected_after_one_more_trial():
    """A DUT whose forwarding collapses in overload (a livelock: a tenth of its capacity): its
    forwarded rate passes, so does one resolution above it, and bisection finds the capacity."""
    dut = Forwards(1_000_000.0, lambda load: 100_000.0)
    r = measure_throughput(dut, F64, LR, ThroughputParams(duration_s=1, resolution_pct=0.1))
    assert dut.asked[1:3] == pytest.approx([100_000 * 0.999, 100_000 * 0.999 + 0.001 * LINE])
    assert 1e6 - 0.001 * LINE <= r.rate_pps <= 1e6 < r.upper_pps and r.trials == len(dut.asked)
