"""The frames a served port dropped itself on receive since the last start, and those it received
that were none of the flows' (foreign, stray) or that their sender cannot have sent (forged):
``GET /netrig/agents``' ``ports`` (:class:`netrig.otgclient.report.PortDrops`; docs/otg.md).

Two places lose a frame that reached the tester's port before the tester counted it, and both are
the tester's, never the DUT's: its receive ring (the engine's ``rx_ring_drops``: the receiver fell
behind and its ring filled) and the port's kernel (``IFLA_STATS64``: the receiving CPU's backlog
full, a veth's XDP queue full, the NIC out of descriptors). A client that reads counts after a
start reads these after them: a lost frame counted here was the tester's (`netrig run` with
``[otg]`` makes such a trial invalid, ``netrig.measure.otg``). The same read gives what the port's
kernel dropped on transmit after the tester handed a frame over (``tx_dropped``; on veth, its
other end's receive ring full), which the flows counted as sent, with the served port at the
veth's other end when it is one (``tx_peer``): the tester's loss then, the peer's ingress else.

Both are cumulative counters; a start notes them (:meth:`RxDrops.start`), the report is the
difference. Reading the kernel's counters takes a netlink request per port (~5 ms).

The engine's count is its receive queue's, since the queue opened, and a generator that replaces
another on the same ports keeps their queues (``reuse``): its count then starts with its
predecessor's, and only once its receiver first refreshed it (every 16 receives, ≤ 80 ms idle)
— a start right after a config would note 0 and report the earlier configs' drops. So the count
a port's last generator ended with is carried (:meth:`RxDrops.handover`) and taken off a count
that reached it (a kept queue); a count below it is a queue opened afresh.
"""
from __future__ import annotations

from netrig import _native
from netrig.errors import NetrigError
from netrig.otg.mapping import Plan, ServePort
from netrig.otgclient.report import KERNEL_RX_DROPS, KERNEL_TX_DROPS, PortDrops


def kernel_drops(port: ServePort) -> tuple[int, int] | None:
    """The port's kernel receive and transmit drops now (cumulative, :data:`KERNEL_RX_DROPS` and
    :data:`KERNEL_TX_DROPS`), ``None`` when they cannot be read."""
    from netrig.testbed.probe import link_stats

    try:
        stats = link_stats(port.port.netns, port.ifname)
    except (NetrigError, OSError):
        return None
    return sum(stats.get(k, 0) for k in KERNEL_RX_DROPS), sum(stats.get(k, 0) for k in KERNEL_TX_DROPS)


def veth_peer(plan: Plan, i: int) -> str | None:
    """The served port at the other end of served port ``i``'s veth, by its ``--port`` name, if
    one is (what port ``i``'s kernel drops on transmit, it drops at that port's receive ring)."""
    me = plan.serve_ports[i]
    for j, other in enumerate(plan.serve_ports):
        if j != i and _native.is_veth_peer(me.ifname, other.ifname, me.port.netns, other.port.netns):
            return other.name
    return None


def _since(now: tuple[int, int] | None, then: tuple[int, int] | None, k: int) -> int | None:
    return None if now is None or then is None else max(0, now[k] - then[k])


class RxDrops:
    """Each port's drop counters at the last start (or config), and the drops since."""

    def __init__(self) -> None:
        #: Per served port (its ``--port`` name): its engine count when its last generator ended.
        self.carried: dict[str, int] = {}
        self.base: list[tuple[int, tuple[int, int] | None, _native.GenPortStats]] = []
        #: The drops since the last start were said in the server's log (a stop, or every flow ended).
        self.logged = False

    def handover(self, plan: Plan, old: _native.Generator) -> None:
        """``old`` (of ``plan``) was replaced, its receivers stopped: its final counts are carried."""
        for s, st in zip(plan.serve_ports, old.port_stats()):
            self.carried[s.name] = st.rx_ring_drops

    def _ring(self, plan: Plan, g: _native.Generator) -> list[int]:
        """Each port's ring drops counted by this generator's queues since their last owner ended."""
        out = []
        for s, st in zip(plan.serve_ports, g.port_stats()):
            carried = self.carried.get(s.name, 0)
            out.append(st.rx_ring_drops - carried if st.rx_ring_drops >= carried else st.rx_ring_drops)
        return out

    def start(self, plan: Plan, g: _native.Generator) -> None:
        """Note every port's counters: what a report says is counted from here."""
        self.logged = False
        self.base = [(ring, kernel_drops(s), st)
                     for ring, s, st in zip(self._ring(plan, g), plan.serve_ports, g.port_stats())]

    def report(self, plan: Plan, g: _native.Generator) -> list[PortDrops]:
        """Every port's drops, and the frames of no flow it received or forged, since :meth:`start`
        (forged unsaid once it saw a flow sent elsewhere: those frames are not judged)."""
        out = []
        for i, (s, ring, st, (ring0, kernel0, st0)) in enumerate(
                zip(plan.serve_ports, self._ring(plan, g), g.port_stats(), self.base)):
            now = kernel_drops(s)
            tx = _since(now, kernel0, 1)
            judged = st.rx_unjudged == st0.rx_unjudged
            out.append(PortDrops(name=plan.port_names[i], location=s.name, rx_ring_drops=max(0, ring - ring0),
                                 rx_kernel_drops=_since(now, kernel0, 0),
                                 rx_foreign=max(0, st.rx_foreign - st0.rx_foreign),
                                 rx_stray=max(0, st.rx_stale - st0.rx_stale),
                                 rx_forged=max(0, st.rx_forged - st0.rx_forged) if judged else None,
                                 tx_kernel_drops=tx, tx_peer=veth_peer(plan, i) if tx else None))
        return out
