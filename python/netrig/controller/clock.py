"""An agent's clock against the controller's: offset and uncertainty (docs/distributed.md).

NTP's exchange over the OTG API: the controller notes its realtime clock ``t0``, sends a request
(``GET /capabilities/version``, on a connection kept open), the agent stamps its answer with its
realtime clock as the request arrived and as the answer left, ``t1 t2`` (the ``X-Netrig-Clock-Ns``
header), the controller notes ``t3`` when the answer arrives. The agent's clock is
``((t1 − t0) + (t2 − t3))/2`` ahead, give or take half the round trip less the agent's own time,
``((t3 − t0) − (t2 − t1))/2``: whatever the path's asymmetry, the true offset lies within that
bound. Of the last :data:`WINDOW` exchanges the
one whose bound is the tightest is kept: its half round trip (the least queueing) widened by the
drift since it was taken (:data:`DRIFT_PPM`: two free-running crystals' ±25 ppm).

PTP: an agent whose host runs linuxptp reports ``pmc``'s ``TIME_STATUS_NP`` (its clock's offset
from the grandmaster and the grandmaster's identity; 0 for the grandmaster itself) in
``X-Netrig-Ptp`` (:mod:`netrig.otg.ptp`; both headers: :mod:`netrig.otgclient.headers`). When both
ends of a flow follow the same grandmaster, their clocks' offset is taken as 0 and its bound is the
sum of the largest offsets from the grandmaster each reported over the window (the offsets ptp4l
measured: a path's asymmetry is invisible to PTP, and phc2sys's residual between a PHC and the
system clock is not seen here: documented). A change of grandmaster starts the window again.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Literal

from netrig.otgclient.headers import Ptp

#: Exchanges kept per agent.
WINDOW = 16
#: Drift assumed between two unsynchronised clocks, parts per million (widens an old sample).
DRIFT_PPM = 50.0


@dataclass(frozen=True)
class Sample:
    """One exchange: the controller's send and receive times, the agent's receive and send times,
    realtime ns."""

    t0_ns: int
    t1_ns: int
    t2_ns: int
    t3_ns: int

    @property
    def offset_ns(self) -> float:
        return ((self.t1_ns - self.t0_ns) + (self.t2_ns - self.t3_ns)) / 2

    @property
    def uncertainty_ns(self) -> float:
        return max(0, (self.t3_ns - self.t0_ns) - (self.t2_ns - self.t1_ns)) / 2


@dataclass(frozen=True)
class ClockEstimate:
    """An agent clock's offset from the controller's (agent − controller) and its bound, ns; under
    PTP, its latest state and the largest offset from the grandmaster over the window (``ptp_bound_ns``)."""

    offset_ns: float
    uncertainty_ns: float
    ptp: Ptp | None = None
    ptp_bound_ns: float = 0.0


#: Where a cross-agent correction came from: both ends under one PTP grandmaster, or the
#: controller's exchanges with each agent.
Source = Literal["ptp", "exchange"]


@dataclass(frozen=True)
class Correction:
    """What a one-way latency between two agents holds in excess of the truth (``offset_ns``), its
    bound, and where they came from."""

    offset_ns: float
    uncertainty_ns: float
    source: Source


class ClockTracker:
    """The recent exchanges with one agent and the best estimate they give; its recent PTP states
    under one grandmaster."""

    def __init__(self) -> None:
        self.samples: deque[Sample] = deque(maxlen=WINDOW)
        self.ptps: deque[Ptp] = deque(maxlen=WINDOW)

    def add(self, s: Sample, ptp: Ptp | None) -> None:
        self.samples.append(s)
        if ptp is None or (self.ptps and self.ptps[-1].grandmaster != ptp.grandmaster):
            self.ptps.clear()
        if ptp is not None:
            self.ptps.append(ptp)

    def estimate(self, now_ns: int | None = None) -> ClockEstimate | None:
        samples = list(self.samples)  # the heartbeat thread appends meanwhile
        if not samples:
            return None
        now_ns = time.time_ns() if now_ns is None else now_ns
        bounds = [(s.uncertainty_ns + max(0, now_ns - s.t3_ns) * DRIFT_PPM * 1e-6, s) for s in samples]
        bound, best = min(bounds, key=lambda b: b[0])
        ptps = list(self.ptps)
        return ClockEstimate(best.offset_ns, bound, ptps[-1] if ptps else None,
                             max((abs(p.offset_ns) for p in ptps), default=0.0))


def between(tx: ClockEstimate, rx: ClockEstimate) -> Correction:
    """The receiving agent's clock against the sending one's: under one PTP grandmaster, 0 within
    the sum of their largest offsets from it; otherwise the difference of the controller's
    estimates, within the sum of their bounds."""
    if tx.ptp and rx.ptp and tx.ptp.grandmaster == rx.ptp.grandmaster:
        return Correction(0.0, tx.ptp_bound_ns + rx.ptp_bound_ns, "ptp")
    return Correction(rx.offset_ns - tx.offset_ns, tx.uncertainty_ns + rx.uncertainty_ns, "exchange")
