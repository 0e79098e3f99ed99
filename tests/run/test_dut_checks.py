"""A DUT that fails during a run is never reported as the DUT's loss: the session's after-trial
check (a DUT process that died) makes the trial it happened in invalid, and its before-trial
check stops the run resumably before the next one."""
from __future__ import annotations

import contextlib

import pytest

from netrig.errors import TestbedError
from netrig.results import read_trial_log
from netrig.run.config import config_from_dict
from netrig.run.runner import Runner
from netrig.run.session import simulated_session

DIED = "its DUT process forward (pid 7) is not running any more (log x): rebuild the test bed"
CONFIG = {"testbed": {"name": "simulated", "simulator": {"capacity_pps": 400000}},
          "trial": {"duration_s": "1s"}, "frames": {"sizes": [64]}, "selftest": {"enabled": False},
          "methods": [{"rfc2544_throughput": {"resolution_pct": 0.5}}]}


def dies_after(k: int):
    """A provider whose DUT process dies during its k-th trial."""
    trials = {"n": 0}

    def after() -> list[str]:
        trials["n"] += 1
        return [DIED] if trials["n"] >= k else []

    def before() -> list[str]:
        if trials["n"] >= k:
            raise TestbedError(f"testbed ab12 is broken: {DIED}")
        return []

    @contextlib.contextmanager
    def provider(config, role):
        with simulated_session(config, role) as s:
            s.after_trial, s.before_trial = after, before
            yield s

    return provider


def test_the_trial_in_which_the_dut_process_died_is_invalid_and_the_run_stops_resumably(tmp_path):
    out = tmp_path / "o"
    runner = Runner(config_from_dict(CONFIG), out, provider=dies_after(3))
    with pytest.raises(TestbedError, match="is broken: its DUT process forward"):
        runner.run()
    assert runner.resumable
    trials = read_trial_log(out)[1]
    assert [t["counts"]["valid"] for t in trials] == [True, True, False]
    assert trials[-1]["counts"]["invalid_reason"] == DIED
