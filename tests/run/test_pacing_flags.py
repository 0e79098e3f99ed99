"""A trial's offered-load smoothness goes into its record, a bunched load flags the result, and the
report shows both (per trial, and per method)."""
from __future__ import annotations

import contextlib
from dataclasses import replace

from netrig.measure import Load, Pacing
from netrig.report import write_report
from netrig.results import load_result
from netrig.run.config import config_from_dict
from netrig.run.runner import Runner
from netrig.run.session import simulated_session

CONFIG = {
    "testbed": {"name": "simulated", "simulator": {"capacity_pps": 400_000}},
    "trial": {"duration_s": "1s"},
    "selftest": {"enabled": False},
    "frames": {"sizes": [64]},
    "methods": [{"rfc2544_throughput": {"resolution_pct": 1.0}}],
}


def paced(counts, rate_pps: float, bunched: bool):
    """What the engine measurer records: a smooth load, or one bunched by a catch-up after a stall."""
    intended = rate_pps / 1000
    peak = int(intended * (1.8 if bunched else 1.01)) + 1
    return replace(counts, pacing=Pacing(mode="catch-up" if bunched else "smooth", stretch_s=0.0 if bunched else 0.004,
                                         max_lag_s=0.006, peak_frames=peak, intended_frames=intended,
                                         gap_p50_ns=1e9 / rate_pps, gap_p99_ns=2e9 / rate_pps, gap_max_ns=6e6))


def wrapped(transform):
    """A session provider whose measurer passes every trial's counts through ``transform(counts, load)``
    (what the engine measurer would have recorded of the same trial)."""
    def make(config, role):
        @contextlib.contextmanager
        def cm():
            with simulated_session(config, role) as s:
                inner = s.measurer

                class M:
                    def measure(self, load: Load, duration_s: float):
                        return transform(inner.measure(load, duration_s), load)

                    def __getattr__(self, name):
                        return getattr(inner, name)

                s.measurer = M()
                yield s

        return cm()

    return make


def provider(bunch_above_pps: float):
    return wrapped(lambda c, load: paced(c, load.rate_pps, load.rate_pps > bunch_above_pps))


def test_a_bunched_trial_flags_its_result_and_the_report_shows_smoothness(tmp_path):
    doc = Runner(config_from_dict(CONFIG), tmp_path / "r", provider=provider(1e6)).run()
    trials = doc["trials"]
    assert all(t["counts"]["pacing"]["mode"] in ("smooth", "catch-up") for t in trials)
    bunched = [t for t in trials if t["counts"]["pacing"]["bunched"]]
    assert bunched and all(t["load"]["rate_pps"] > 1e6 for t in bunched)
    flags = {f["code"]: f["message"] for f in doc["summary"][0]["results"][0]["flags"]}
    assert "bursty_offered_load" in flags and f"{len(bunched)} trial(s)" in flags["bursty_offered_load"]
    loaded = load_result(tmp_path / "r")
    assert loaded["trials"][0]["counts"]["pacing"] == trials[0]["counts"]["pacing"]
    out = write_report(tmp_path / "r", tmp_path / "report.html")
    html = out.read_text()
    assert "Offered-load smoothness per method" in html and "bursty_offered_load" in html
    assert "peak 1 ms" in html and "1.80×" in html
    md = out.with_suffix(".md").read_text()
    assert "Offered-load smoothness" in md


def test_a_smooth_run_has_no_flag(tmp_path):
    doc = Runner(config_from_dict(CONFIG), tmp_path / "r", provider=provider(1e12)).run()
    assert not any(t["counts"]["pacing"]["bunched"] for t in doc["trials"])
    assert "bursty_offered_load" not in {f["code"] for f in doc["summary"][0]["results"][0]["flags"]}


def test_a_config_chooses_the_pacing_and_its_tolerance():
    cfg = config_from_dict({**CONFIG, "trial": {"duration_s": "1s", "pacing": "catch-up",
                                                "smoothness_tolerance_pct": 5}})
    assert cfg.trial.pacing == "catch-up" and cfg.trial.smoothness_tolerance_pct == 5
    assert config_from_dict(CONFIG).trial.pacing == "smooth"


def unpinned_provider(above_pps: float):
    """Trials above ``above_pps`` ran a TX worker the kernel would not pin (as the engine records it)."""
    why = ("netrig-tx0 not pinned to CPU 1: Operation not permitted (os error 1)",)
    return wrapped(lambda c, load: replace(c, pin_failures=why) if load.rate_pps > above_pps else c)


def test_trials_with_unpinned_workers_flag_the_result_once_and_a_pinned_run_has_no_flag(tmp_path):
    doc = Runner(config_from_dict(CONFIG), tmp_path / "r", provider=unpinned_provider(1e5)).run()
    unpinned = [t for t in doc["trials"] if t["counts"]["pin_failures"]]
    assert len(unpinned) > 1, "the failure recurs in several trials"
    flags = {f["code"]: f["message"] for f in doc["summary"][0]["results"][0]["flags"]}
    msg = flags["unpinned_workers"]
    assert msg.startswith(f"{len(unpinned)} trial(s) ran tester workers")
    assert msg.count("netrig-tx0 not pinned to CPU 1: Operation not permitted") == 1, msg
    doc = Runner(config_from_dict(CONFIG), tmp_path / "p", provider=unpinned_provider(1e12)).run()
    assert "unpinned_workers" not in {f["code"] for f in doc["summary"][0]["results"][0]["flags"]}
