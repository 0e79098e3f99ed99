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
from the grandmaster and the grandmaster's identity) in ``X-Netrig-Ptp`` (:mod:`netrig.otg.ptp`;
both headers: :mod:`netrig.otgclient.headers`). When both ends of a flow
follow the same grandmaster, their offset's uncertainty is the sum of their offsets from it
(phc2sys keeps the system clock on the PHC; its residual is not seen here: documented).
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

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
    """An agent clock's offset from the controller's (agent − controller) and its bound, ns."""

    offset_ns: float
    uncertainty_ns: float
    ptp: Ptp | None = None


class ClockTracker:
    """The recent exchanges with one agent and the best estimate they give."""

    def __init__(self) -> None:
        self.samples: deque[Sample] = deque(maxlen=WINDOW)
        self.ptp: Ptp | None = None

    def add(self, s: Sample, ptp: Ptp | None) -> None:
        self.samples.append(s)
        self.ptp = ptp

    def estimate(self, now_ns: int | None = None) -> ClockEstimate | None:
        samples = list(self.samples)  # the heartbeat thread appends meanwhile
        if not samples:
            return None
        now_ns = time.time_ns() if now_ns is None else now_ns
        bounds = [(s.uncertainty_ns + max(0, now_ns - s.t3_ns) * DRIFT_PPM * 1e-6, s) for s in samples]
        bound, best = min(bounds, key=lambda b: b[0])
        return ClockEstimate(best.offset_ns, bound, self.ptp)


def between(tx: ClockEstimate, rx: ClockEstimate) -> tuple[float, float]:
    """(offset, uncertainty) of the receiving agent's clock from the sending one's, ns: what a
    one-way latency measured between them holds in excess of the truth, and its bound."""
    if tx.ptp and rx.ptp and tx.ptp.grandmaster == rx.ptp.grandmaster:
        return 0.0, abs(tx.ptp.offset_ns) + abs(rx.ptp.offset_ns)
    return rx.offset_ns - tx.offset_ns, tx.uncertainty_ns + rx.uncertainty_ns
