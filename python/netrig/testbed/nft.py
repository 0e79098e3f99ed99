"""nftables rule sets for the DUT topologies (text fed to ``nft -f -`` inside the DUT namespace).

All tables are called ``netrig_<id>`` and live in the DUT's namespace, so deleting the namespace
deletes them.  Filler rules match only ``FILLER_DST`` (198.19.254.0/24) with UDP destination ports
1, 2, 3 …: test traffic to any other address passes every filler rule (each is still evaluated, which is
the cost being measured) and reaches the final accept.  Traffic to 198.19.254.1 port *k* is dropped by
filler rule *k* — that is how tests check that the firewall really drops.

With a flowtable (the ``flowtable`` option: nftables' software fast path, the Linux analogue of CEF
vs process switching) the table also holds ``flowtable ft`` on the DUT's two interfaces, and the
forward chain starts with ``meta l4proto { tcp, udp } counter flow add @ft``. Its counter counts the
TCP/UDP packets that took the slow path (the forward chain); an offloaded flow's packets are
forwarded from the flowtable's ingress hook and no longer reach any chain. The kernel offloads a
flow only once its conntrack entry is confirmed, i.e. once a packet of it was accepted: a flow the
rules drop is never offloaded; a UDP flow from its second packet on (no reply needed), a TCP
connection once it is established (the handshake's last ACK), until a FIN or RST sends it back to
the slow path.
"""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from typing import Any

from netrig.errors import CapabilityError, TestbedError
from netrig.results.typed import from_dict
from netrig.testbed.nsthread import dies_with_parent, run_in_netns

FILLER_DST = "198.19.254.0/24"
FILLER_DST_IP = "198.19.254.1"
TEST_NET4 = "198.18.0.0/15"
TEST_NET6 = "2001:2::/48"
#: The flowtable's name in every table, and the forward-chain rule that offloads TCP/UDP flows into it.
FLOWTABLE = "ft"
FLOW_ADD = f"meta l4proto {{ tcp, udp }} counter flow add @{FLOWTABLE}"


def table_name(tb_id: str) -> str:
    return f"netrig_{tb_id}"


def _fillers(n: int) -> list[str]:
    return [f"ip daddr {FILLER_DST} udp dport {(i % 65535) + 1} counter drop" for i in range(n)]


def _accept(log: bool, tb_id: str, stateful: bool) -> list[str]:
    logpart = f' log prefix "{table_name(tb_id)} accept: "' if log else ""
    ct = "ct state new " if stateful else ""
    return [
        f"ip saddr {TEST_NET4} ip daddr {TEST_NET4} {ct}counter{logpart} accept",
        f"ip6 saddr {TEST_NET6} ip6 daddr {TEST_NET6} {ct}counter{logpart} accept",
    ]


def firewall_ruleset(tb_id: str, rules: int, log: bool, flowtable: tuple[str, ...] = (),
                     snat: list[str] | None = None) -> str:
    """Stateful: ``ct state established,related accept``, filler drops, then the test accept.

    ``rules`` counts every rule in the forward chain (the IPv4 and IPv6 accept count as one; a
    flowtable's ``flow add`` rule is not counted). ``snat``: source NAT rules for a postrouting
    chain (:func:`snat_rules`; the ``fwnat`` topology).
    """
    if rules < 2:
        raise TestbedError("rules: a firewall needs at least 2 rules (conntrack accept + test accept)")
    body = ["ct state established,related counter accept", *_fillers(rules - 2), *_accept(log, tb_id, True)]
    return _table(tb_id, forward=body, policy="drop", flowtable=flowtable, postrouting=snat)


def acl_ruleset(tb_id: str, rules: int, log: bool, flowtable: tuple[str, ...] = ()) -> str:
    """Stateless: conntrack disabled (``notrack``), N-1 filler drops, then the test accept.

    With a flowtable conntrack stays on (a flow is offloaded through its conntrack entry); the rules
    still match no conntrack state, but they see only a flow's packets before it is offloaded.
    """
    if rules < 1:
        raise TestbedError("rules: an ACL needs at least 1 rule")
    body = [*_fillers(rules - 1), *_accept(log, tb_id, False)]
    return _table(tb_id, forward=body, policy="drop", notrack=not flowtable, flowtable=flowtable)


def snat_rules(oifname: str, mode: str, snat4: str | None, snat6: str | None) -> list[str]:
    """Postrouting rules: source NAT of everything leaving ``oifname``, masquerade or static."""
    if mode == "masquerade":
        return [f'oifname "{oifname}" meta nfproto ipv4 counter masquerade',
                f'oifname "{oifname}" meta nfproto ipv6 counter masquerade']
    return [f'oifname "{oifname}" meta nfproto ipv4 counter snat ip to {snat4}',
            f'oifname "{oifname}" meta nfproto ipv6 counter snat ip6 to {snat6}']


def nat_ruleset(tb_id: str, snat: list[str], flowtable: tuple[str, ...] = ()) -> str:
    """Source NAT only (:func:`snat_rules`); no forward chain unless a flowtable needs its ``flow add``
    rule."""
    return _table(tb_id, forward=[] if flowtable else None, policy="accept", flowtable=flowtable,
                  postrouting=snat)


def router_ruleset(tb_id: str, flowtable: tuple[str, ...]) -> str:
    """The plain router's table: only the fast path (a router without a flowtable has no table)."""
    return _table(tb_id, forward=[], policy="accept", flowtable=flowtable)


def policer_ruleset(tb_id: str, cap_pps: float | None, cap_bps: float | None, burst: int) -> str:
    if cap_pps is not None:
        rule = f"limit rate over {int(round(cap_pps))}/second burst {burst} packets counter drop"
    else:
        assert cap_bps is not None, "a policer needs a packet or a bit rate cap"
        rule = (f"limit rate over {int(round(cap_bps / 8))} bytes/second burst {burst} bytes "
                "counter drop")
    return _table(tb_id, forward=[rule, "counter accept"], policy="accept", notrack=True)


def _table(tb_id: str, forward: list[str] | None, policy: str, notrack: bool = False,
           flowtable: tuple[str, ...] = (), postrouting: list[str] | None = None) -> str:
    """One ``inet`` table: [flowtable], [raw prerouting notrack], [forward chain], [srcnat postrouting].

    ``flowtable``: the devices of ``flowtable ft``; when given, the forward chain's first rule adds
    TCP/UDP flows to it."""
    lines = [f"table inet {table_name(tb_id)} {{"]
    if flowtable:
        devices = ", ".join(f'"{d}"' for d in flowtable)
        lines += [f"  flowtable {FLOWTABLE} {{",
                  "    hook ingress priority filter;",
                  f"    devices = {{ {devices} }};",
                  "  }"]
    if notrack:
        lines += ["  chain prerouting {",
                  "    type filter hook prerouting priority raw; policy accept;",
                  "    notrack",
                  "  }"]
    if forward is not None:
        rules = [FLOW_ADD, *forward] if flowtable else forward
        lines += ["  chain forward {",
                  f"    type filter hook forward priority filter; policy {policy};",
                  *(f"    {r}" for r in rules),
                  "  }"]
    if postrouting is not None:
        lines += ["  chain postrouting {",
                  "    type nat hook postrouting priority srcnat; policy accept;",
                  *(f"    {r}" for r in postrouting),
                  "  }"]
    lines.append("}")
    return "\n".join(lines) + "\n"


def tester_quiet_table(tb_id: str) -> str:
    """The name of :func:`tester_quiet_ruleset`'s table."""
    return f"{table_name(tb_id)}_tester"


def tester_quiet_ruleset(tb_id: str, oifnames: tuple[str, ...] = ()) -> str:
    """For a tester port with a kernel stack: its stack never answers the engine's test frames.
    Those are UDP to the port's own address with no socket behind it, so the kernel would send
    ICMP port-unreachable back through the DUT (up to its rate limit): traffic the DUT would carry
    and count as its own. Dropped on output; TCP, and ICMP for the stack's own sockets, pass.
    ``oifnames``: only out of those interfaces (the host's namespace: an external test bed's ports)."""
    on = f"oifname {{ {', '.join(f'{chr(34)}{i}{chr(34)}' for i in oifnames)} }} " if oifnames else ""
    return "\n".join([
        f"table inet {tester_quiet_table(tb_id)} {{",
        "  chain output {",
        "    type filter hook output priority filter; policy accept;",
        f"    {on}icmp type destination-unreachable icmp code port-unreachable counter drop",
        f"    {on}icmpv6 type destination-unreachable icmpv6 code port-unreachable counter drop",
        "  }",
        "}"]) + "\n"


def _nft_f(netns: str, ruleset: str, check: bool = False) -> str | None:
    """``nft [-c] -f -`` inside ``netns``: None, or nft's first error line."""

    def body() -> subprocess.CompletedProcess:
        return subprocess.run(["nft", *(["-c"] if check else []), "-f", "-"], input=ruleset,
                              preexec_fn=dies_with_parent, capture_output=True, text=True, timeout=60)

    try:
        r = run_in_netns(netns, body)
    except FileNotFoundError:
        raise CapabilityError("nft: the nftables command is not installed (apt install nftables)") from None
    if r.returncode == 0:
        return None
    msg = (r.stderr or r.stdout).strip().splitlines()
    # "/dev/stdin:2:13-14: Error: ..." → "Error: ..." (the line numbers are of text nobody sees)
    return re.sub(r"^/dev/stdin:[0-9:-]+:\s*", "", msg[0]) if msg else f"exit status {r.returncode}"


def apply(netns: str, ruleset: str) -> None:
    """Load ``ruleset`` with ``nft -f -`` inside ``netns``."""
    err = _nft_f(netns, ruleset)
    if err is not None:
        raise TestbedError(f"nftables in {netns}: nft -f failed: {err}")


def check_flowtable(netns: str, tb_id: str, devices: tuple[str, ...]) -> None:
    """Raise ``CapabilityError`` if this kernel cannot create a flowtable on ``devices`` with its
    ``flow add`` rule (checked with ``nft -c``: nothing is loaded)."""
    err = _nft_f(netns, router_ruleset(tb_id, devices), check=True)
    if err is not None:
        raise CapabilityError(f"flowtable: this kernel cannot create an nftables flowtable (nft: {err}); it "
                              "needs CONFIG_NF_FLOW_TABLE, CONFIG_NF_FLOW_TABLE_INET and CONFIG_NFT_FLOW_OFFLOAD "
                              "(modules nf_flow_table, nf_flow_table_inet, nft_flow_offload); leave flowtable out "
                              "on this machine")


def list_ruleset(netns: str | None) -> str:
    def body() -> str:
        r = subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True, timeout=30)
        return r.stdout if r.returncode == 0 else f"unavailable: {r.stderr.strip()}"

    try:
        return run_in_netns(netns, body)
    except FileNotFoundError:
        return "unavailable: nft not installed"


@dataclass(frozen=True)
class NftCounter:
    packets: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class _Expression:
    """The parts of one of a rule's expressions (``nft -j``) netrig reads: its counter, a ``flow
    add`` (the flowtable's slow-path rule)."""

    counter: NftCounter | None = None
    flow: dict[str, Any] | None = None


@dataclass(frozen=True)
class NftRule:
    """One rule of ``nft -j list table``: its chain, handle and expressions (nft's own JSON)."""

    chain: str
    handle: int
    expr: tuple[dict[str, Any], ...] = ()

    def _parts(self) -> list[_Expression]:
        return [from_dict(_Expression, e) for e in self.expr if isinstance(e, dict)]

    @property
    def counter(self) -> NftCounter | None:
        return next((p.counter for p in self._parts() if p.counter is not None), None)

    @property
    def packets(self) -> int | None:
        return self.counter.packets if self.counter is not None else None

    @property
    def adds_flows(self) -> bool:
        """The flowtable's ``flow add`` rule."""
        return any(p.flow is not None for p in self._parts())

    @property
    def text(self) -> str:
        """The expressions as JSON text (to look for a verb or an address)."""
        return json.dumps(self.expr)


@dataclass(frozen=True)
class _Item:
    rule: NftRule | None = None


@dataclass(frozen=True)
class _Listing:
    nftables: tuple[_Item, ...] = ()


def counters(netns: str, tb_id: str) -> list[NftRule]:
    """Every rule of table ``netrig_<id>`` with its packet/byte counter (via ``nft -j``)."""
    def body() -> subprocess.CompletedProcess:
        return subprocess.run(["nft", "-j", "list", "table", "inet", table_name(tb_id)],
                              capture_output=True, text=True, timeout=30)

    r = run_in_netns(netns, body)
    if r.returncode != 0:
        raise TestbedError(f"nftables in {netns}: cannot list table {table_name(tb_id)}: {r.stderr.strip()}")
    return [i.rule for i in from_dict(_Listing, json.loads(r.stdout)).nftables if i.rule is not None]


def slow_path_packets(netns: str, tb_id: str) -> int | None:
    """The counter of the flowtable's ``flow add`` rule: TCP/UDP packets that took the slow path (the
    forward chain) since the build; None if the table has no flowtable."""
    for r in counters(netns, tb_id):
        if r.chain == "forward" and r.adds_flows:
            return r.packets or 0
    return None


def conntrack_entries(netns: str) -> list[str]:
    """The lines of ``/proc/net/nf_conntrack`` in ``netns`` (an offloaded flow's line has ``[OFFLOAD]``);
    raises ``CapabilityError`` where the kernel lacks ``CONFIG_NF_CONNTRACK_PROCFS``."""
    def body() -> list[str]:
        with open("/proc/thread-self/net/nf_conntrack") as f:  # thread-self: this thread's namespace
            return f.read().splitlines()

    try:
        return run_in_netns(netns, body)
    except FileNotFoundError:
        raise CapabilityError("conntrack: /proc/net/nf_conntrack is missing (kernel without "
                              "CONFIG_NF_CONNTRACK_PROCFS)") from None
