"""The command line of what `netrig serve` runs beside its ports (lldpd for LLDP, BIRD for BGP, ping):
in its port's network namespace, on the senders' CPUs.

Why the senders' CPUs: on veth the receive work of a frame runs on the CPU that transmitted it,
and once the receiving end's NAPI is scheduled on a CPU it stays there while frames keep coming.
A daemon that transmits on a tester port from a receiver's CPU (an LLDP PDU, a BGP keepalive) can
so move the receive work of the whole traffic there, onto the CPU of the receiver that must read
it. Measured (`netrig serve`, one flow at the top rate, LLDP every 5 s, `perf record` of CPU 0):
lldpd's PDU, written on CPU 0, ran the veth's poll of the traffic in its own send and then in
``ksoftirqd/0`` for ~80 ms, and the receiver on CPU 0 dropped 100 425 frames in its ring (and
the sending port's kernel 21 151 more: the veth's queue full). On the senders' CPUs the daemon's
frames schedule that work where the traffic's runs anyway. On a NIC nothing moves; the daemon is
still kept off the receivers' CPUs.
"""
from __future__ import annotations

import os
from collections.abc import Sequence


def netns_argv(netns: str | None, argv: list[str], cpus: Sequence[int] = ()) -> list[str]:
    """``argv`` run in ``netns`` (``None``: this one), on ``cpus`` when given (its children too)."""
    pinned = ["taskset", "-c", ",".join(str(c) for c in cpus), *argv] if cpus else argv
    return ["ip", "netns", "exec", netns, *pinned] if netns else pinned


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to process group ``pgid`` (a daemon started in a session of its own), if any of
    it is left."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
