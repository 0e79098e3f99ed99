"""Events under load without a network: each event's per-flow outage, frames lost and recovery from
an engine result's sequence gaps and intervals (a stand-in result with known gaps), the command
runner's exit status, output tail and timeout, and the checks on events."""
from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from netrig.errors import ConfigError
from netrig.measure.events import CommandRunner, Event, EventResult, EventRun, check_events, event_results

MS = 1_000_000
EPOCH = 1_000 * MS  # the trial epoch on the monotonic clock
RUN_START = EPOCH + 100 * MS


def gap(missing: int, before_ms: float, after_ms: float) -> NS:
    """A sequence gap between transmit times (ms after the run start)."""
    b, a = int(RUN_START - EPOCH + before_ms * MS), int(RUN_START - EPOCH + after_ms * MS)
    return NS(missing=missing, before_ns=b, after_ns=a, duration_ns=a - b)


def flow(fid: int, gaps: list, tail: int = 0, last_ms: float = 3000.0) -> NS:
    return NS(flow_id=fid, gaps=tuple(gaps), tail_missing=tail, frames_received=1000,
              last_rx_tx_ns=int(RUN_START - EPOCH + last_ms * MS))


def result(flows: list, lossy_ms: tuple[float, float] | None = None, length_ms: int = 3000) -> NS:
    """Intervals of 10 ms over ``length_ms``, lossy in [lossy_ms)."""
    ivs = []
    for k in range(length_ms // 10):
        lossy = lossy_ms is not None and lossy_ms[0] <= k * 10 < lossy_ms[1]
        ivs.append(NS(start_s=k / 100, duration_s=0.01, frames_sent=20, frames_received=10 if lossy else 20))
    return NS(epoch_ns=EPOCH, run_start_ns=RUN_START, flows=flows, intervals=ivs)


def ran(at_ms: float, cmd: str = "x") -> EventRun:
    t = RUN_START + int(at_ms * MS)
    return EventRun(cmd, at_ms / 1000, started_ns=t, ended_ns=t + 5 * MS, exit_status=0)


def test_each_event_gets_the_gaps_in_its_window():
    flows = [flow(0, [gap(1, 200, 201), gap(600, 1000.5, 1300.5), gap(100, 2000.2, 2050.2)]),
             flow(1, [gap(590, 1000.7, 1296.7)])]
    first, second = event_results(result(flows, (1000, 1300)), [ran(1000), ran(2000)])
    assert [f.flow_id for f in first.flows] == [0, 1]
    assert first.flows[0].outage_s == pytest.approx(0.300) and first.flows[0].frames_lost == 600
    assert first.flows[0].before_s == pytest.approx(0.0005)
    assert first.outage_s == pytest.approx(0.300) and first.frames_lost == 1190
    assert first.recovery_s == pytest.approx(0.300)  # the first loss-free interval began at 1300 ms
    # The second event: only flow 0's 50 ms gap; the intervals show no loss then: recovery 0.
    assert [(f.flow_id, f.frames_lost) for f in second.flows] == [(0, 100)]
    assert second.outage_s == pytest.approx(0.050) and second.recovery_s == 0.0


def test_loss_after_the_recovery_is_not_the_events():
    """A withdraw costs each flow one frame; 2.3 s later the DUT's ring drops one frame of each flow
    over a longer gap (a stall of its own): the event keeps the withdraw's gaps, not the longer ones."""
    flows = [flow(k, [gap(1, 1000 + k, 1050 + k), gap(1, 3280 + k, 3380 + k)]) for k in range(3)]
    r = result(flows, (1000, 1060), length_ms=4000)
    for iv in r.intervals:
        if 3.28 <= iv.start_s < 3.38:
            iv.frames_received = 10
    (ev,) = event_results(r, [ran(1000)])
    assert ev.recovery_s == pytest.approx(0.060)
    assert [(f.flow_id, f.frames_lost, round(f.before_s, 3)) for f in ev.flows] == [(0, 1, 0.0), (1, 1, 0.001),
                                                                                      (2, 1, 0.002)]
    assert ev.outage_s == pytest.approx(0.050) and ev.frames_lost == 3


def test_an_event_that_did_nothing_has_no_outage():
    (ev,) = event_results(result([flow(0, [gap(1, 200, 201)])]), [ran(1500)])
    assert ev.flows == () and ev.outage_s == 0.0 and ev.frames_lost == 0 and ev.recovery_s == 0.0
    d = ev.to_dict()
    assert EventResult.from_dict(d).to_dict() == d


def test_a_flow_that_never_received_again_has_no_end():
    (ev,) = event_results(result([flow(0, [], tail=4000, last_ms=1000.1)], (1000, 3000)), [ran(1000)])
    (f,) = ev.flows
    assert not f.recovered and f.outage_s is None and f.frames_lost == 4000
    assert ev.outage_s is None and ev.recovery_s is None and not ev.recovered


def test_recovery_waits_for_a_loss_free_run_of_100_ms():
    # Lossy 1000–1200 ms, clean 1200–1250, lossy 1250–1300, clean after: recovered at 1300 ms.
    r = result([flow(0, [gap(400, 1000, 1200)])], (1000, 1200))
    for iv in r.intervals:
        if 1.25 <= iv.start_s < 1.3:
            iv.frames_received = 0
    (ev,) = event_results(r, [ran(1000)])
    assert ev.recovery_s == pytest.approx(0.300)


def test_an_event_that_never_ran_is_reported():
    (ev,) = event_results(result([flow(0, [])]), [EventRun("x", 5.0, error="did not run: the trial ended first")])
    assert ev.recovery_s is None and not ev.run.ok and "did not run" in (ev.run.problem() or "")


def test_command_runner_records_exit_output_and_timeout():
    run = CommandRunner(timeout_s=5)
    ok = run(Event("echo hello; echo world >&2", 1.0))
    assert ok.ok and ok.exit_status == 0 and "hello" in ok.output_tail and "world" in ok.output_tail
    bad = run(Event("echo broken >&2; exit 4", 1.0))
    assert not bad.ok and bad.exit_status == 4 and bad.problem() == "exited 4: broken"
    slow = CommandRunner(timeout_s=0.2)(Event("sleep 10; echo never", 0.0))
    assert slow.timed_out and slow.exit_status is None and 0.15 < slow.took_s < 2
    assert "timed out" in (slow.problem() or "") and "never" not in slow.output_tail
    assert CommandRunner("nrsomens").argv("true") == ["ip", "netns", "exec", "nrsomens", "sh", "-c", "true"]


@pytest.mark.parametrize("kw,field", [
    ({"command": "", "at_s": 1.0}, "command"),
    ({"command": "echo 'x", "at_s": 1.0}, "command"),
    ({"command": "true", "at_s": -1.0}, "at_s"),
    ({"command": "true", "at_s": float("nan")}, "at_s"),
    ({"command": "true", "at_s": True}, "at_s"),
])
def test_bad_events_name_the_field(kw, field):
    with pytest.raises(ConfigError) as e:
        Event(**kw)
    assert e.value.field == field


def test_events_must_fall_inside_the_trial():
    check_events([Event("true", 1.9)], 2.0)
    with pytest.raises(ConfigError, match="not inside the 2 s trial"):
        check_events([Event("true", 2.0)], 2.0)
    with pytest.raises(ConfigError, match="at most 63"):
        check_events([Event("true", 0.1)] * 64, 2.0)
    with pytest.raises(ConfigError, match="event_timeout_s"):
        CommandRunner(timeout_s=0)
