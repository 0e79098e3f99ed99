"""Stack trials on a real test bed: a tool between the tester ports' kernel stacks, through the DUT,
with every party's CPU over the trial.

Data flow::

    StackRequest ── StackEndpoints (client = port tx's namespace, server = port rx's namespace and
    address of the family) ── CpuAccount.start() ── the tool (``measure.tcp.run_iperf3``, or
    ``measure.rr.run_sockperf``) ── CpuAccount.stop() ── the tool's result document + ``cpu``
    (per core user/system/irq/softirq CPU-seconds, the packet kernel threads and named processes)
    + ``cpu_per`` (busy CPU-seconds per Gbit/s of goodput or per million transactions)
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from netrig.errors import ConfigError
from netrig.measure.rr import run_sockperf
from netrig.measure.seam import StackRequest
from netrig.measure.tcp import run_iperf3
from netrig.monitor.cpu import CpuAccount
from netrig.results.typed import from_dict


@dataclass(frozen=True)
class StackEndpoints:
    """Where a stack trial's tool runs: the client in ``client_netns``, the server in
    ``server_netns`` listening on ``server_ipv4`` / ``server_ipv6``."""

    client_netns: str | None
    server_netns: str | None
    server_ipv4: str | None
    server_ipv6: str | None

    @classmethod
    def between(cls, tx: Any, rx: Any) -> StackEndpoints:
        """The client on tester port ``tx``, the server on port ``rx`` (each with ``netns``,
        ``ipv4``, ``ipv6``: a test bed's ``TesterPort``)."""
        return cls(tx.netns, rx.netns, rx.ipv4, rx.ipv6)

    def server(self, family: int) -> str:
        addr = self.server_ipv4 if family == 4 else self.server_ipv6
        if not addr:
            raise ConfigError("family", f"the receiving tester port has no IPv{family} address")
        return addr


def _tcp(ep: StackEndpoints, req: StackRequest) -> dict:
    return run_iperf3(ep.client_netns, ep.server_netns, ep.server(req.family), req.params).to_dict()


def _rr(ep: StackEndpoints, req: StackRequest) -> dict:
    return run_sockperf(ep.client_netns, ep.server_netns, ep.server(req.family), req.params).to_dict()


#: kind → the tool run that returns its result document.
RUNNERS: dict[str, Callable[[StackEndpoints, StackRequest], dict]] = {"tcp": _tcp, "rr": _rr}


@dataclass(frozen=True)
class _Busy:
    busy_s: float = 0.0


@dataclass(frozen=True)
class _Moved:
    """What a stack trial's document says it moved, and the cores' busy time over it."""

    duration_s: float = 0.0
    goodput_bps: float | None = None
    transactions_total: float | None = None
    cpu: _Busy = _Busy()


def cpu_per(doc: dict) -> dict:
    """Busy CPU-seconds of every core (``busy_s``: whoever spent them — on a shared host that
    includes unrelated processes) per unit of what the trial moved: per Gbit of goodput and per
    million transactions. (The tools' own CPU is not added to the cores' irq and softirq time: the
    kernel charges a softirq that interrupts a task to that task's system time as well.)"""
    m = from_dict(_Moved, doc)
    busy = m.cpu.busy_s
    out: dict[str, float | None] = {"busy_s": busy}
    if m.goodput_bps is not None and m.duration_s > 0:
        gbit = m.goodput_bps * m.duration_s / 1e9
        out["busy_s_per_gbit"] = busy / gbit if gbit > 0 else None
    if m.transactions_total is not None:
        mtrans = m.transactions_total / 1e6
        out["busy_s_per_mtrans"] = busy / mtrans if mtrans > 0 else None
    return out


def run_stack(ep: StackEndpoints, req: StackRequest, procs: Sequence[str] = ()) -> dict:
    """Run ``req`` between ``ep``'s endpoints; the tool's document with ``cpu`` and ``cpu_per``."""
    run = RUNNERS.get(req.kind)
    if run is None:
        raise ConfigError("kind", f"{req.kind}: no stack trial of this kind in this netrig")
    account = CpuAccount(procs).start()
    doc = run(ep, req)
    usage = account.stop()
    doc["cpu"] = usage.to_dict()
    doc["cpu_per"] = cpu_per(doc)
    return doc
