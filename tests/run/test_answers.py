"""One story: every method's answer to "how much does the DUT forward?" side by side, each with its
range over repetitions and how it decides, and where the zero-loss answers differ, the measured
cause (the trials between them, and how many lost frames only while the DUT was stalled)."""
from __future__ import annotations

import copy
import io
from pathlib import Path

from rich.console import Console

from netrig.cli.console import print_answers
from netrig.results import load_result
from netrig.run import consistency
from netrig.run.consistency import AnswerRow
from netrig.view.trial_record import read_trials

ROUTER = Path(__file__).resolve().parents[1] / "data" / "report-router-handmade.json"


def router() -> dict:
    return load_result(ROUTER)  # migrated, as every reader sees it


def at_64(sets: list[consistency.AnswerSet]) -> consistency.AnswerSet:
    return next(a for a in sets if a.frame_label == "64")


def test_each_method_answers_with_its_repetitions_and_its_basis():
    a = at_64(consistency.answers([router()]))
    rows = {r.name: r for r in a.rows}
    assert set(rows) == {"RFC 2544 §26.1 throughput", "RFC 2544 §26.3 highest loss-free load", "NDR", "PDR"}
    assert len(rows["RFC 2544 §26.1 throughput"].values) == 3, "the hand-made run repeats it three times"
    assert "one 2 s trial loses no frames" in rows["RFC 2544 §26.1 throughput"].basis
    assert "more than 0.5 % of frames" in rows["PDR"].basis and not rows["PDR"].zero_loss
    assert not a.agree, "the frame-loss sweep's 10 % steps put its answer 22 % below the others"
    assert a.cause.startswith("they do not contradict each other"), "every bracket holds 568-581 kfps"
    assert "highest loss-free load is lower because its loads stepped past the others'" in a.cause
    assert "593" not in a.cause, "PDR allows loss: the others are not held to it"


def test_results_drawn_as_one_pool_a_methods_repetitions():
    a = at_64(consistency.answers([router(), router()]))
    thr = next(r for r in a.rows if r.name.startswith("RFC 2544"))
    assert len(thr.values) == 6


def _trial(doc: dict, i: int, rate: float, lost: int, in_stalls: int) -> dict:
    t = copy.deepcopy(doc["trials"][i])
    t["kind"], t["load"]["rate_pps"] = "rate", rate
    c = t["counts"]
    c.update(valid=True, frames_received=c["frames_sent"] - lost, frames_lost=lost, loss_in_stalls=in_stalls,
             loss_ratio=lost / c["frames_sent"])
    c["stalls"] = {"dut": {"episodes": [{"start_s": 0.2, "length_ms": 7.5, "cpu": 1, "seen_by_guest": False}]},
                   "tester": {"episodes": []}}
    return t


def test_where_zero_loss_answers_differ_the_cause_is_the_dut_stalls_measured_in_its_trials():
    doc = router()
    trials = read_trials([_trial(doc, 0, 350e3, 569, 569), _trial(doc, 1, 380e3, 1200, 1200),
                          _trial(doc, 2, 400e3, 0, 0), _trial(doc, 3, 900e3, 5000, 0)])
    rows = [AnswerRow("RFC 2544", (300e3,), 300e3, 350e3, "one trial", trials=trials),
            AnswerRow("NDR", (430e3,), 430e3, 440e3, "five trials")]
    cause = consistency._cause(rows)
    assert cause.startswith("between 300 kfps and 430 kfps the methods ran 3 valid trials: 2 of 3 trials lost frames; "
                            "2 of them only while the DUT was stalled"), cause
    assert "the DUT's loss in this range is its CPU's stalls" in cause
    rows[0] = AnswerRow("RFC 2544", (300e3,), 300e3, 350e3, "one trial",
                        trials=read_trials([_trial(doc, 0, 350e3, 569, 10)]))
    assert "comes and goes" in consistency._cause(rows), "loss outside stalls: the capacity itself moved"
    # The DUT's CPU time per frame moved between them: a sentence of its own, and the cause stays a
    # clause the console and the report end with one full stop (it read "differently Over … trials..").
    ring = [_trial(doc, 0, 350e3, 569, 10), _trial(doc, 1, 380e3, 1200, 0)]
    for t, cpu_s in zip(ring, (0.8, 1.2)):
        t["counts"]["dut_ring"] = {"arrived": 200_000, "taken": 200_000, "dropped": 0, "dut_cpu_s": cpu_s}
    rows[0] = AnswerRow("RFC 2544", (300e3,), 300e3, 350e3, "one trial", trials=read_trials(ring))
    cause = consistency._cause(rows)
    assert "decide it differently. Over those trials the DUT's CPU time per frame it took ranged 4" in cause, cause
    assert not cause.endswith(".") and ".." not in cause, cause


def test_the_console_prints_the_answers_with_how_each_decides_and_the_cause():
    buf = io.StringIO()
    print_answers([router()], Console(file=buf, width=100))
    out = buf.getvalue()
    assert "4 answers at 64 B: how much does the DUT forward?" in out
    assert "MLRsearch NDR: a load passes when at most 50 % of 5 s of 5 s trials lose more than 0 % of frames" in out
    assert "They agree within 2 %" in out
    assert out.count("how much does the DUT forward?") == 2, "64 B and 1518 B: four answers each"


def test_an_answer_the_tester_bounded_is_a_lower_bound_that_agrees_unless_above_the_others():
    ndr = AnswerRow("NDR", (430e3, 436e3), 430e3, 440e3, "five trials")
    low = AnswerRow("RFC 2544", (), 66e3, None, "one trial", at_least=(66e3,))
    a = consistency.AnswerSet("64", (ndr, low), consistency._cause([ndr, low]))
    assert not low.bounded and low.median == 66e3 and a.agree, "≥ 66 kfps does not contradict 433 kfps"
    assert a.cause.startswith("the tester bounded the other zero-loss answers from below only"), a.cause
    high = AnswerRow("RFC 2544", (), 500e3, None, "one trial", at_least=(500e3,))
    assert not consistency.AnswerSet("64", (ndr, high), "").agree, "≥ 500 kfps lies above NDR's 440 kfps failure"
