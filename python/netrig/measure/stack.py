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


def cpu_per(doc: dict) -> dict:
    """Busy CPU-seconds of every core (``busy_s``: whoever spent them — on a shared host that
    includes unrelated processes) per unit of what the trial moved: per Gbit of goodput and per
    million transactions. (The tools' own CPU is not added to the cores' irq and softirq time: the
    kernel charges a softirq that interrupts a task to that task's system time as well.)"""
    busy = float((doc.get("cpu") or {}).get("busy_s") or 0.0)
    out: dict[str, float | None] = {"busy_s": busy}
    d = float(doc.get("duration_s") or 0.0)
    if doc.get("goodput_bps") is not None and d > 0:
        gbit = float(doc["goodput_bps"]) * d / 1e9
        out["busy_s_per_gbit"] = busy / gbit if gbit > 0 else None
    if doc.get("transactions_total") is not None:
        m = float(doc["transactions_total"]) / 1e6
        out["busy_s_per_mtrans"] = busy / m if m > 0 else None
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
