"""netrig's own HTTP headers on the OTG API (docs/distributed.md): their names and their values'
formats, written and read here only.

======================  ========  =================================================================
header                  on        what
======================  ========  =================================================================
``X-Netrig-Tags``       request   a start's trial tags, one per flow named (a controller's, to an agent)
``X-Netrig-Receive``    request   ``1``: only count the named flows' frames (with the tags), send none
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
