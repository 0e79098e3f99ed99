"""RFC 8219 §9.2 tester self-test: before a DUT run, the tester, looped back with no DUT, must send
and receive ``factor × r`` (1.1 × by default) loss-free for the whole trial duration, for every
rate ``r`` the run will use. The highest rate proven is the tester's *ceiling* for that frame
size; DUT results above ``ceiling / factor`` are flagged.

The loss-free trial at the ceiling also measures the tester's own latency with nothing in between
(its *latency floor*: timestamp source, stamping and I/O path): each ceiling records it with the
receive timestamp source, so every DUT latency in the same result can be read against it."""
from __future__ import annotations

import math
from dataclasses import dataclass

from netrig.errors import ConfigError
from netrig.measure import LatencySummary, Load, Measurer, TrialCounts
from netrig.methodology.stats import check
from netrig.methodology.tester import NO_LIMIT, NOT_MEASURED, PlatformStopped, measure_judged
from netrig.model import FrameSize, LineRate, rate_object
from netrig.results.typed import from_dict
from netrig.view.frame_results import line_rate_of
from netrig.view.run_view import RunView


@dataclass(frozen=True)
class SelftestParams:
    factor: float = 1.1
    duration_s: float = 10.0
    resolution_pct: float = 1.0  # of the proven rate, for the ceiling search when the required one fails

    def __post_init__(self) -> None:
        check("factor", self.factor, lo=1.0, hi=10)
        check("duration_s", self.duration_s, lo=0, lo_open=True)
        check("resolution_pct", self.resolution_pct, lo=0, lo_open=True, hi=50)


@dataclass(frozen=True)
class Ceiling:
    frame: FrameSize
    line_rate: LineRate
    required_rate_pps: float  # factor × the highest rate the run will use
    proven_rate_pps: float  # highest loss-free rate proven (0 if none)
    trial_keys: tuple[str, ...] = ()
    latency_floor: LatencySummary | None = None  # latency of the loss-free trial at proven_rate_pps
    timestamp_source: str | None = None  # receive timestamp source of that trial's receiving port
    #: Self-tested behind the wire (through a bridge on the DUT's CPU): the tester's receive path's
    #: CPU time on the DUT's CPU per frame in that trial (``DutRing.tester_share_ns``), else None.
    tester_share_ns: float | None = None
    #: Trials repeated because the tester fell short at a load it had already sent in full in this
    #: proof (a stall, not its limit); they are among the self-test's trials.
    repeated_trials: int = 0
    #: Why nothing was proven at all (:data:`~netrig.methodology.tester.NOT_MEASURED`: the tester sent
    #: no load in full); ``None``: measured (``proven_rate_pps`` 0 then means no load was loss-free).
    not_measured: str | None = None
    #: Why the proof stopped short of the tester's ceiling: the host took the tester's CPU in every
    #: attempt at a load (``host_take_s``). The proven rate is then a lower bound, never a ceiling:
    #: it vouches for nothing above it and caps nothing.
    platform: str | None = None

    @property
    def passed(self) -> bool:
        return self.proven_rate_pps >= self.required_rate_pps * (1 - 1e-9)

    def to_dict(self) -> dict:
        return {"frame_size": self.frame.label, "required_rate_pps": self.required_rate_pps,
                "proven_rate_pps": self.proven_rate_pps,
                "proven": rate_object(self.proven_rate_pps, self.frame, self.line_rate),
                "passed": self.passed, "trial_keys": list(self.trial_keys),
                "latency_floor": self.latency_floor.to_dict() if self.latency_floor else None,
                "timestamp_source": self.timestamp_source, "tester_share_ns": self.tester_share_ns,
                "repeated_trials": self.repeated_trials, "not_measured": self.not_measured,
                "platform": self.platform}


@dataclass(frozen=True)
class SelftestResult:
    params: SelftestParams
    testbed: str
    ceilings: tuple[Ceiling, ...]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.ceilings)

    def ceiling_for(self, frame: FrameSize) -> Ceiling | None:
        return next((c for c in self.ceilings if c.frame.label == frame.label), None)

    def limit_pps(self, frame: FrameSize) -> float | None:
        """The highest DUT rate this self-test vouches for: proven ceiling / factor (None: none, or
        a proof the platform stopped, which found no ceiling)."""
        c = self.ceiling_for(frame)
        return None if c is None or c.platform else c.proven_rate_pps / self.params.factor

    def is_above(self, frame: FrameSize, rate_pps: float | None) -> bool:
        if rate_pps is None:
            return False
        lim = self.limit_pps(frame)
        return lim is None or rate_pps > lim * (1 + 1e-9)

    def to_dict(self) -> dict:
        return {"testbed": self.testbed, "factor": self.params.factor, "duration_s": self.params.duration_s,
                "passed": self.passed, "ceilings": [c.to_dict() for c in self.ceilings]}


def stored_ceilings(run: RunView) -> list[Ceiling]:
    """A result's self-test ceilings (``selftest.ceilings[]``) read back as their type, in frame-size
    order; a ceiling whose frame size cannot be read is left out."""
    lr, out = line_rate_of(run.doc), []
    for c in run.selftest_ceilings():
        try:
            frame = FrameSize.parse(c.frame_size)
        except (ConfigError, TypeError, ValueError):
            continue
        out.append(from_dict(Ceiling, c.stored, partial=True, frame=frame, line_rate=lr))
    return out


class _Proof:
    """The trials of one frame size's proof: the best loss-free one, the highest load the tester sent
    in full (a stall at or below it is repeated), the trials repeated for stalls."""

    def __init__(self, measurer: Measurer, frame: FrameSize, duration_s: float):
        self.measurer, self.frame, self.duration_s = measurer, frame, duration_s
        self.best: TrialCounts | None = None  # the loss-free trial at the highest rate
        self.best_rate = 0.0
        self.kept: float | None = None  # the highest load the tester sent in full
        self.repeated = 0

    def trial(self, rate: float) -> tuple[bool, float]:
        """Loss-free at ``rate``? And what it reached (a hint for the next rate): what it sent and
        received, or, when the tester fell short, what it sent over its real sending window — never
        what a trial stopped early received over the planned duration, which says nothing of the rate.
        A shortfall at a load no higher than one the tester already sent in full is a stall: the trial
        is repeated (:func:`~netrig.methodology.tester.measure_judged`)."""
        try:
            c, _, repeats = measure_judged(self.measurer, Load(rate, self.frame), self.duration_s, NO_LIMIT, self.kept)
        except PlatformStopped as stop:
            self.repeated += stop.attempts - 1
            raise
        self.repeated += repeats
        if not c.valid:
            return False, c.achieved_pps
        self.kept = max(self.kept or 0.0, rate)
        good = c.frames_lost == 0
        if good and rate >= self.best_rate:
            self.best, self.best_rate = c, rate
        return good, min(c.achieved_pps, c.frames_received / self.duration_s)


def prove_rate(measurer: Measurer, frame: FrameSize, line_rate: LineRate, required_rate_pps: float,
               params: SelftestParams, keys: list[str] | None = None) -> Ceiling:
    """Prove ``required_rate_pps`` × factor; if that fails, find the highest loss-free rate to
    ``resolution_pct`` of it, starting from what the failed trial showed the tester can do (the rate
    it sent and received), not from zero: on veth a 10 Gbit/s nominal line rate is far above what a
    software tester reaches, and bisecting down to it would cost many trials.

    The proven rate is the highest rate of a loss-free valid trial of the search, by construction:
    never below one (a stall is repeated, and a trial it stopped early never points the search down)."""
    target = required_rate_pps * params.factor
    proof = _Proof(measurer, frame, params.duration_s)
    platform = None
    try:
        good, reached = proof.trial(target)
        if not good:
            _search_ceiling(proof, target, reached, params.resolution_pct / 100)
    except PlatformStopped as stop:
        platform = str(stop)
    c = proof.best
    share = c.dut_ring.tester_share_ns if c is not None and c.dut_ring is not None else None
    # nothing proven: not measured, with the host's reason when it stopped the proof ("≥ 0 fps" said nothing)
    unmeasured = (platform or NOT_MEASURED) if c is None and (platform or proof.kept is None) else None
    return Ceiling(frame, line_rate, target, proof.best_rate, tuple(keys or ()),
                   latency_floor=c.latency if c else None, timestamp_source=_timestamp_source(c),
                   tester_share_ns=share, repeated_trials=proof.repeated, not_measured=unmeasured, platform=platform)


def _search_ceiling(proof: _Proof, target: float, reached: float, step: float) -> None:
    """Below a failed ``target``: just under what it reached, then up from a pass by 1, 2, 4 …
    steps (the tester's limit is usually right above what it reached), never past the geometric
    middle of the bracket, then bisecting to ``step`` (relative)."""
    losses = 0  # failed trials in a row that sent (nearly) everything but lost frames

    def below(reached: float, hi: float) -> float:
        """Just under what a trial that fell short reached; after one that sent its rate but lost
        frames, 1, 4, 16 … steps under that rate."""
        if reached < hi * (1 - step):
            return reached * (1 - step)
        return hi * (1 - step) ** (4 ** losses)

    lo, hi = 0.0, target
    rate = below(reached, hi)
    gallop = 1
    while rate > target * 1e-6:
        good, reached = proof.trial(rate)
        if good:
            lo = rate
        else:
            hi = rate
        if lo == 0:
            losses = losses + 1 if reached >= hi * (1 - step) else 0
            rate = below(reached, hi)
            continue
        if hi <= lo * (1 + step) * (1 + 1e-9):
            break
        rate = min(lo * (1 + step) ** gallop, math.sqrt(lo * hi)) if good else math.sqrt(lo * hi)
        gallop = gallop * 2 if good else gallop


def _timestamp_source(c: TrialCounts | None) -> str | None:
    """The receiving port's timestamp source, from the engine result kept in the trial's raw data."""
    eng = c.measured.engine if c is not None else None
    return eng.ports[-1].timestamp_source if eng is not None and eng.ports else None
