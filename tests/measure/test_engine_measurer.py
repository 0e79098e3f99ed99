"""EngineMeasurer's trial validity and stall handling, on scripted engine results (no traffic)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from netrig.errors import ConfigError
from netrig.measure import Load
from netrig.measure.engine import EngineMeasurer
from netrig.measure.seam import Phase
from netrig.model import FrameSize
from netrig.run.config import TrialConfig


def result(sent: int, received: int, lag_ms: float, rate: float = 100_000.0, **kw):
    """What the engine's typed TrialResult offers the measurer (attributes only)."""
    fields = dict(tx_rate_pps=rate, frames_sent=sent, frames_received=received, duplicated=0, reordered=0,
                  late=0, latency=SimpleNamespace(samples=0), valid=True, invalid_reason=None,
                  tester_rx_drops=0, tx_max_lag_ns=int(lag_ms * 1e6), frames_foreign=0, frames_stray=0,
                  frames_forged=0, ports=(), to_dict=lambda: {"frames_sent": sent})
    return SimpleNamespace(**{**fields, **kw})


def scripted(results, **kw) -> tuple[EngineMeasurer, list]:
    m = EngineMeasurer(None, None, {}, learning_frames=False, **kw)
    calls: list = []

    def run(frame, rate_pps, duration_s, drain_s, progress=None):
        calls.append(rate_pps)
        return results[len(calls) - 1]

    m._run = run  # the engine seam: everything else is the real measurer
    return m, calls


LOAD = Load(frame_size=FrameSize(size=64), rate_pps=100_000.0)


def test_a_lossy_trial_during_a_tester_stall_is_repeated_and_the_attempts_are_kept():
    m, calls = scripted([result(100_000, 97_000, lag_ms=30), result(100_000, 100_000, lag_ms=1)])
    c = m.measure(LOAD, 1.0)
    assert len(calls) == 2
    assert c.frames_lost == 0 and c.valid
    assert c.raw["stalled_attempts"] == [{"tx_max_lag_ns": 30_000_000, "frames_sent": 100_000,
                                          "frames_received": 97_000, "offered_pps": 100_000.0}]


def test_loss_without_a_stall_and_a_stall_without_loss_are_taken_as_measured():
    m, calls = scripted([result(100_000, 97_000, lag_ms=1)])
    assert m.measure(LOAD, 1.0).frames_lost == 3_000 and len(calls) == 1
    m, calls = scripted([result(100_000, 100_000, lag_ms=50)])
    c = m.measure(LOAD, 1.0)
    assert c.frames_lost == 0 and len(calls) == 1 and "stalled_attempts" not in c.raw


def test_retries_are_bounded_and_the_last_attempt_counts():
    m, calls = scripted([result(100_000, 90_000 + i, lag_ms=20) for i in range(5)], stall_retries=2)
    c = m.measure(LOAD, 1.0)
    assert len(calls) == 3
    assert c.frames_received == 90_002 and len(c.raw["stalled_attempts"]) == 2
    m, calls = scripted([result(100_000, 90_000, lag_ms=20)], stall_retries=0)
    assert m.measure(LOAD, 1.0).frames_lost == 10_000 and len(calls) == 1


def test_the_threshold_is_configurable():
    m, calls = scripted([result(100_000, 97_000, lag_ms=8), result(100_000, 100_000, lag_ms=0)],
                        stall_threshold_ms=10.0)
    assert m.measure(LOAD, 1.0).frames_lost == 3_000 and len(calls) == 1


@pytest.mark.parametrize("kw, field", [({"stall_threshold_ms": 0}, "stall_threshold_ms"),
                                       ({"stall_retries": -1}, "stall_retries"),
                                       ({"stall_retries": 1.5}, "stall_retries")])
def test_bad_stall_settings_name_the_field(kw, field):
    with pytest.raises(ConfigError) as e:
        TrialConfig(**kw)
    assert field in str(e.value)


def test_frames_that_are_not_the_trials_own_are_carried_into_the_counts():
    """foreign, stray and forged frames reach the trial record, and the engine's reason for an
    invalid trial (here: another trial's frames) is kept as it is."""
    why = "port b: 300 frames of another netrig trial arrived"
    m, _ = scripted([result(100_000, 99_850, lag_ms=0, frames_foreign=4, frames_stray=300, frames_forged=2,
                            valid=False, invalid_reason=why)])
    c = m.measure(LOAD, 1.0)
    assert (c.foreign, c.stray, c.forged, c.frames_lost) == (4, 300, 2, 150)
    assert not c.valid and c.invalid_reason == why
    d = c.to_dict()
    assert (d["foreign"], d["stray"], d["forged"]) == (4, 300, 2)
    assert type(c).from_dict(d) == c
    old = {k: v for k, v in d.items() if k not in ("foreign", "stray", "forged")}
    assert (type(c).from_dict(old).stray, type(c).from_dict(old).forged) == (0, 0), "older records read as 0"


def test_frames_of_the_previous_interval_are_credited_to_the_interval_they_arrive_in():
    """measure_phases runs one trial per interval with no drain between them: frames still in
    flight at an interval's end reach the next trial, which counts them as an earlier trial's
    (never as its own). The measurer credits them to that interval, as late frames were."""
    port = lambda earlier: SimpleNamespace(rx_earlier_trial=earlier)
    m, calls = scripted([result(1000, 990, lag_ms=0, ports=(port(0), port(0))),
                         result(1000, 995, lag_ms=0, ports=(port(0), port(10)))])
    c = m.measure_phases(FrameSize(size=64), [Phase(rate_pps=1000.0, duration_s=2.0)], 1.0)
    assert len(calls) == 2
    assert [i.frames_received for i in c.intervals] == [990, 1005]
    assert c.frames_received == 1995
