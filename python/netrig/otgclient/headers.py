"""netrig's own HTTP headers on the OTG API (docs/distributed.md): their names and their values'
formats, written and read here only.

======================  ========  =================================================================
header                  on        what
======================  ========  =================================================================
``X-Netrig-Tags``       request   a start's trial tags, one per flow named (a controller's, to an agent)
``X-Netrig-Receive``    request   ``1``: only count the named flows' frames (with the tags), send none
``X-Netrig-Supervise``  request   ``SECONDS``: stop every flow when no request with this header came
                                  for that long (a controller's, on every request: :data:`SUPERVISION_S`)
``X-Netrig-Clock-Ns``   answer    the server's realtime clock as the request arrived and as the
                                  answer left, ns since the Unix epoch: ``T1 T2``
``X-Netrig-Ptp``        answer    where linuxptp runs: ``GM_IDENTITY OFFSET_NS`` (its grandmaster, its
                                  clock's offset from it)
======================  ========  =================================================================
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from netrig.errors import ConfigError

TAGS = "X-Netrig-Tags"
RECEIVE = "X-Netrig-Receive"
CLOCK = "X-Netrig-Clock-Ns"
PTP = "X-Netrig-Ptp"
SUPERVISE = "X-Netrig-Supervise"

#: The supervision period both ways, s: a controller declares an agent down that has not answered
#: for this long (4 heartbeats), and an agent stops every flow when no request of its controller
#: arrived for this long (netrig.otg.supervision).
SUPERVISION_S = 1.0
#: The periods a client may ask for, s.
SUPERVISE_RANGE_S = (0.2, 86400.0)


@dataclass(frozen=True)
class Ptp:
    """A host's linuxptp state: its grandmaster and its clock's offset from it, ns."""

    grandmaster: str
    offset_ns: float


def tags(values: Sequence[int], receive: bool = False) -> dict[str, str]:
    """The headers of a start under ``values`` (one tag per flow named); ``receive``: only count."""
    out = {TAGS: ",".join(str(t) for t in values)}
    if receive:
        out[RECEIVE] = "1"
    return out


def parse_tags(text: str) -> list[int]:
    """``X-Netrig-Tags``' value → the tags (errors name the header)."""
    try:
        return [int(t) for t in text.split(",") if t]
    except ValueError:
        raise ConfigError(TAGS, f"{text!r}: give integers separated by commas") from None


def is_receive(text: str | None) -> bool:
    """``X-Netrig-Receive``' value → whether the request only counts."""
    return text == "1"


def supervise(period_s: float = SUPERVISION_S) -> dict[str, str]:
    """The header asking a server to stop every flow when this client is silent for ``period_s``."""
    return {SUPERVISE: f"{period_s:g}"}


def parse_supervise(text: str | None) -> float | None:
    """``X-Netrig-Supervise``' value → the period, s (None: absent; errors name the header)."""
    if text is None:
        return None
    lo, hi = SUPERVISE_RANGE_S
    try:
        period = float(text)
    except ValueError:
        period = -1.0
    if not lo <= period <= hi:
        raise ConfigError(SUPERVISE, f"{text!r}: give the seconds of silence after which every flow stops, "
                                     f"{lo:g} to {hi:g}")
    return period


def stamps(t1_ns: int, t2_ns: int) -> str:
    """``X-Netrig-Clock-Ns``' value."""
    return f"{t1_ns} {t2_ns}"


def parse_stamps(text: str | None) -> tuple[int, int] | None:
    """``X-Netrig-Clock-Ns``' value → (t1, t2) (None when absent or malformed)."""
    parts = (text or "").split()
    try:
        return (int(parts[0]), int(parts[1])) if len(parts) == 2 else None
    except ValueError:
        return None


def ptp(state: Ptp) -> str:
    """``X-Netrig-Ptp``' value."""
    return f"{state.grandmaster} {state.offset_ns:.0f}"


def parse_ptp(text: str | None) -> Ptp | None:
    """``X-Netrig-Ptp``' value → :class:`Ptp` (None when absent or malformed)."""
    parts = (text or "").split()
    try:
        return Ptp(parts[0], float(parts[1])) if len(parts) == 2 else None
    except ValueError:
        return None
