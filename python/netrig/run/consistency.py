"""Methods that measure the same thing must agree, or say why not.

A method whose results bracket the DUT's zero-loss throughput (``Method.zero_loss_bounds``: RFC 2544
throughput; MLRsearch's NDR; the frame-loss sweep's highest loss-free load) gives, per repetition,
a load it saw pass, the lowest load above it it saw the DUT fail (``None``: none, or only the tester
limited it) and how it decides. Two brackets at one frame size that do not overlap (nor touch)
contradict each other: one method saw the DUT fail at a load below one the other saw it pass. Both
results are then flagged ``throughput_disagreement`` with the evidence — each method's trials
between the two brackets (loss-free, lossy, DUT backpressure, invalid) and how each decides.
Repetitions are pooled (the union of their brackets), so only a contradiction that survives every
repetition is flagged.

The run loop checks one run (:func:`annotate`); the report checks results drawn as one (the demo's
RFC 2544 and NDR/PDR parts, :func:`annotate_parts`).
"""
from __future__ import annotations

import statistics
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from netrig.methods import REGISTRY
from netrig.model import format_pps
from netrig.view import fmt
from netrig.view.frame_results import read_summary
from netrig.view.run_view import frame_size_label, objs
from netrig.view.stalls import StallStory
from netrig.view.trial_record import TrialRecord, read_trials

CODE = "throughput_disagreement"


@dataclass(frozen=True)
class Bracket:
    key: tuple[int, int]  # (part, method index)
    frame_label: str
    label: str
    lower_pps: float
    upper_pps: float | None
    basis: str
    trials: Sequence[TrialRecord] = field(default=(), compare=False)


def brackets(summary: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any]],
             part: int = 0) -> list[Bracket]:
    """The pooled bracket of every complete method result of one run's summary that has one."""
    out, typed = [], read_trials(list(records))
    for s in read_summary(list(summary)):
        if s.method not in REGISTRY:
            continue
        method = REGISTRY.get(s.method)
        for r in s.results:
            if not r.complete:
                continue
            got = [method.zero_loss_bounds(dict(rep), dict(s.params)) for rep in r.repetitions]
            if not got or any(b is None for b in got):
                continue
            bs = [b for b in got if b is not None]
            uppers = [b[1] for b in bs]
            trials = [t for t in typed if t.method_index == s.method_index and t.frame_size == r.frame_size]
            out.append(Bracket((part, s.method_index), frame_size_label(r.frame_size), s.label,
                               min(b[0] for b in bs),
                               None if any(u is None for u in uppers) else max(u for u in uppers if u is not None),
                               bs[0][2], trials))
    return out


def _evidence(b: Bracket, lo: float, hi: float) -> str:
    """What the bracket's trials at loads in ``[lo, hi]`` showed."""
    n = free = lossy = invalid = pressed = 0
    worst = 0.0
    for t in b.trials:
        rate, c = t.load.rate_pps, t.counts
        if t.kind != "rate" or rate is None or c is None or not lo * (1 - 1e-9) <= rate <= hi * (1 + 1e-9):
            continue
        n += 1
        if t.verdict == "backpressure":
            pressed += 1
        elif not c.valid:
            invalid += 1
        elif c.frames_lost > 0:
            lossy += 1
            worst = max(worst, c.loss_ratio)
        else:
            free += 1
    if not n:
        return "no trials"
    parts = [f"{free} loss-free"] if free else []
    if lossy:
        parts.append(f"{lossy} lost frames (up to {100 * worst:.3g} %)")
    if pressed:
        parts.append(f"{pressed} slowed the sender (DUT backpressure)")
    if invalid:
        parts.append(f"{invalid} invalid (the tester fell short)")
    return f"{n} trial(s): " + ", ".join(parts)


#: The DUT's CPU time per frame moving more than this between trials at nearly one load is named.
COST_SPREAD = 1.10


def _cost_spread(trials: Sequence[TrialRecord], lo: float, hi: float) -> str:
    """The DUT's CPU time per frame it took, over the trials at loads in ``[lo, hi]`` (the test bed's
    wire measures it), when it moved by more than :data:`COST_SPREAD`: the same work costing more is
    the DUT's CPU running slower (its host's contention), not more work per frame."""
    costs = []
    for t in trials:
        rate, ring = t.load.rate_pps, t.counts.dut_ring if t.counts is not None else None
        if rate is not None and lo * (1 - 1e-9) <= rate <= hi * (1 + 1e-9) and ring and ring.dut_cpu_s and ring.taken:
            costs.append(ring.dut_cpu_s / ring.taken)
    if len(costs) < 2 or max(costs) <= min(costs) * COST_SPREAD:
        return ""
    return (f" Over those trials the DUT's CPU time per frame it took ranged {fmt.ns(min(costs) * 1e9)}–"
            f"{fmt.ns(max(costs) * 1e9)}: the same frames, forwarded by a CPU that ran slower in some trials.")


def disagreements(bs: Sequence[Bracket]) -> dict[tuple[tuple[int, int], str], list[dict]]:
    """Flags per (bracket key, frame size) for every pair of brackets at one frame size that contradict."""
    out: dict[tuple[tuple[int, int], str], list[dict]] = {}
    for i, a in enumerate(bs):
        for b in bs[i + 1:]:
            if a.frame_label != b.frame_label:
                continue
            low, high = (a, b) if a.lower_pps <= b.lower_pps else (b, a)
            if low.upper_pps is None or high.lower_pps <= low.upper_pps * (1 + 1e-6):
                continue  # the brackets overlap or touch: they agree within their resolutions
            lo, hi = low.upper_pps, high.lower_pps
            ev_low, ev_high = _evidence(low, lo, hi), _evidence(high, lo, hi)
            msg = (f"{low.label} ({format_pps(low.lower_pps)}, failed at {format_pps(lo)}) and {high.label} "
                   f"({format_pps(high.lower_pps)} passed) disagree beyond their resolutions. "
                   f"Between {format_pps(lo)} and {format_pps(hi)}: {low.label} ran {ev_low}; {high.label} ran "
                   f"{ev_high}. {low.basis}; {high.basis}.")
            if "invalid" in ev_low or "invalid" in ev_high:
                msg += (" Invalid trials in this range are the tester's, not the DUT's: check the self-test "
                        "ceiling and the tester's CPU.")
            else:
                what = "capacity" if "backpressure" in ev_low + ev_high else "loss"
                msg += (f" The DUT's {what} in this range comes and goes (on a shared host, with the CPU time "
                        "it gets): the methods' different trial counts and durations decide it differently; "
                        "longer or repeated trials settle it." + _cost_spread([*low.trials, *high.trials], lo, hi))
            flag = {"code": CODE, "message": msg}
            for x in (a, b):
                out.setdefault((x.key, x.frame_label), []).append(flag)
    return out


def _apply(summary: Sequence[Mapping[str, Any]], part: int, found: Mapping[tuple[tuple[int, int], str], list[dict]]):
    for s in read_summary(list(summary)):
        for r in s.results:
            for flag in found.get(((part, s.method_index), frame_size_label(r.frame_size)), []):
                flags = typing.cast(dict, r.stored).setdefault("flags", [])
                if flag not in flags:
                    flags.append(flag)


def annotate(summary: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any]]) -> None:
    """Add ``throughput_disagreement`` flags to the results of one run's summary (in place)."""
    _apply(summary, 0, disagreements(brackets(summary, records)))


def annotate_parts(docs: Sequence[Mapping[str, Any]]) -> None:
    """The same across results drawn as one (each with its own summary and trials; in place)."""
    bs = [b for i, d in enumerate(docs) for b in brackets(objs(d, "summary"), objs(d, "trials"), i)]
    found = disagreements(bs)
    for i, d in enumerate(docs):
        _apply(objs(d, "summary"), i, found)


@dataclass(frozen=True)
class AnswerRow:
    """One method's answer at one frame size over its repetitions: the rates it gave (``values``: one
    per repetition the DUT bounded; ``at_least``: the repetitions the tester stopped, whose rate is
    only a lower bound), the pooled bracket, how it decides, and the trials it ran there."""

    name: str
    values: tuple[float, ...]
    lower_pps: float
    upper_pps: float | None
    basis: str
    zero_loss: bool = True
    trials: Sequence[TrialRecord] = field(default=(), compare=False)
    at_least: tuple[float, ...] = ()

    @property
    def bounded(self) -> bool:
        """Some repetition bracketed the rate; else the answer is only ``≥`` :attr:`median`."""
        return bool(self.values)

    @property
    def median(self) -> float:
        """The median of the bracketed repetitions; without any, the highest lower bound."""
        return statistics.median(self.values) if self.values else max(self.at_least)


@dataclass(frozen=True)
class AnswerSet:
    """Every method's answer to "how much does the DUT forward?" at one frame size, side by side,
    and where they differ, the measured cause in one sentence."""

    frame_label: str
    rows: tuple[AnswerRow, ...]
    cause: str

    @property
    def agree(self) -> bool:
        """The zero-loss answers' medians lie within :data:`AGREE` of each other (an answer that is only
        a lower bound disagrees only by lying above the others)."""
        ms = [r.median for r in self.rows if r.zero_loss and r.bounded]
        floor = max((r.median for r in self.rows if r.zero_loss and not r.bounded), default=0.0)
        return not ms or (max(ms) <= min(ms) * AGREE and floor <= max(ms) * AGREE)


#: Answers whose medians lie within this ratio agree.
AGREE = 1.02


def _answer_rows(summary: Sequence[Mapping[str, Any]],
                 records: Sequence[Mapping[str, Any]]) -> list[tuple[str, AnswerRow]]:
    out, typed = [], read_trials(list(records))
    for s in read_summary(list(summary)):
        if s.method not in REGISTRY:
            continue
        method = REGISTRY.get(s.method)
        for r in s.results:
            per: dict[str, list[Any]] = {}
            for rep in r.repetitions if r.complete else ():
                for a in method.answers(dict(rep), dict(s.params)):
                    per.setdefault(a.name, []).append(a)
            trials = [t for t in typed if t.method_index == s.method_index and t.frame_size == r.frame_size]
            for name, got in per.items():
                uppers = [a.upper_pps for a in got if not a.at_least] or [None]  # the DUT's failures only
                out.append((frame_size_label(r.frame_size), AnswerRow(
                    name, tuple(a.value_pps for a in got if not a.at_least), min(a.lower_pps for a in got),
                    None if None in uppers else max(u for u in uppers if u is not None), got[0].basis,
                    got[0].zero_loss, trials, tuple(a.value_pps for a in got if a.at_least))))
    return out


def _cause(all_rows: Sequence[AnswerRow]) -> str:
    """Why the zero-loss answers differ, measured: the trials between the lowest and the highest,
    the ones that lost frames, how many of those lost them only while the DUT was stalled."""
    rows = [r for r in all_rows if r.zero_loss and r.bounded]
    if len(rows) < 2:
        if any(r.zero_loss and not r.bounded for r in all_rows):
            return ("the tester bounded the other zero-loss answers from below only (≥): they say the DUT forwards "
                    "at least that much, not how much")
        return "one zero-loss answer; the others allow some loss by definition"
    lo, hi = min(r.median for r in rows), max(r.median for r in rows)
    if hi <= lo * AGREE:
        return f"they agree within {100 * (AGREE - 1):.0f} % ({format_pps(lo)}–{format_pps(hi)})"
    top = max(r.lower_pps for r in rows)
    ceiling = min((r.upper_pps for r in rows if r.upper_pps is not None), default=None)
    if ceiling is None or top <= ceiling * (1 + 1e-6):
        coarse = min(rows, key=lambda r: r.median)
        return (f"they do not contradict each other: every method passed a load up to {format_pps(top)} and none "
                f"saw the DUT fail below {format_pps(ceiling) if ceiling else 'that'}; {coarse.name} is lower "
                "because its loads stepped past the others' (its resolution), not because the DUT did worse")
    seen = {id(t): t for r in rows for t in r.trials}.values()
    between = [t for t in seen if t.counts is not None and t.kind == "rate" and t.load.rate_pps is not None
               and lo * (1 - 1e-9) <= t.load.rate_pps <= hi * (1 + 1e-9)]
    inside = [t for t in between if t.valid]
    story = StallStory.of([t.counts for t in inside if t.counts is not None])
    short = len(between) - len(inside)
    head = (f"between {format_pps(lo)} and {format_pps(hi)} the methods ran {len(inside)} valid trials"
            + (f" and {short} the tester fell short on (invalid: its limit there, not the DUT's)" if short else "")
            + ": ")
    if not story.lossy:
        return head + ("no valid trial lost frames; the answers differ by where each search stopped (its "
                       "resolution, and the loads the tester could not send), not by the DUT")
    words = story.sentence()
    if story.measured and story.lossy_all_in_stalls == story.lossy:
        return head + words + ": the DUT's loss in this range is its CPU's stalls, which one trial per load " \
                              "and an exceed ratio over several decide differently"
    spread = _cost_spread(list(inside), lo, hi).removesuffix(".")  # the cause is a clause: no full stop
    return head + words + (". The loss comes and goes at these loads (the DUT's capacity with the CPU time "
                           "it gets): the methods' trial counts and durations decide it differently"
                           + (f".{spread}" if spread else ""))


def answers(docs: Sequence[Mapping[str, Any]]) -> list[AnswerSet]:
    """Every frame size at which two or more answers were measured (over the results drawn as one:
    the demo's parts), each method's answer with its interval and basis, and the cause of their
    difference."""
    by: dict[str, dict[str, AnswerRow]] = {}
    for d in docs:
        for label, row in _answer_rows(objs(d, "summary"), objs(d, "trials")):
            same = by.setdefault(label, {}).get(row.name)
            by[label][row.name] = row if same is None else _pooled(same, row)
    return [AnswerSet(label, tuple(rows.values()), _cause(list(rows.values())))
            for label, rows in by.items() if len(rows) >= 2]


def _pooled(a: AnswerRow, b: AnswerRow) -> AnswerRow:
    """One method's answers from two results drawn as one (the demo's 64-B throughput in both parts)."""
    upper = None if a.upper_pps is None or b.upper_pps is None else max(a.upper_pps, b.upper_pps)
    return AnswerRow(a.name, a.values + b.values, min(a.lower_pps, b.lower_pps), upper, a.basis, a.zero_loss,
                     [*a.trials, *b.trials], a.at_least + b.at_least)
