"""nftables rule sets for the DUT topologies (text fed to ``nft -f -`` inside the DUT namespace).

All tables are called ``netrig_<id>`` and live in the DUT's namespace, so deleting the namespace
deletes them.  Filler rules match only ``FILLER_DST`` (198.19.254.0/24) with UDP destination ports
1, 2, 3 …: test traffic to any other address passes every filler rule (each is still evaluated, which is
the cost being measured) and reaches the final accept.  Traffic to 198.19.254.1 port *k* is dropped by
filler rule *k* — that is how tests check that the firewall really drops.
"""
from __future__ import annotations

import json
import subprocess

from netrig.errors import CapabilityError, TestbedError
from netrig.testbed.nsthread import run_in_netns

FILLER_DST = "198.19.254.0/24"
FILLER_DST_IP = "198.19.254.1"
TEST_NET4 = "198.18.0.0/15"
TEST_NET6 = "2001:2::/48"


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


def firewall_ruleset(tb_id: str, rules: int, log: bool) -> str:
    """Stateful: ``ct state established,related accept``, filler drops, then the test accept.

    ``rules`` counts every rule in the forward chain (the IPv4 and IPv6 accept count as one).
    """
    if rules < 2:
        raise TestbedError("rules: a firewall needs at least 2 rules (conntrack accept + test accept)")
    body = ["ct state established,related counter accept", *_fillers(rules - 2), *_accept(log, tb_id, True)]
    return _table(tb_id, forward=body, policy="drop")


def acl_ruleset(tb_id: str, rules: int, log: bool) -> str:
    """Stateless: conntrack disabled (``notrack``), N-1 filler drops, then the test accept."""
    if rules < 1:
        raise TestbedError("rules: an ACL needs at least 1 rule")
    body = [*_fillers(rules - 1), *_accept(log, tb_id, False)]
    return _table(tb_id, forward=body, policy="drop", notrack=True)


def nat_ruleset(tb_id: str, oifname: str, mode: str, snat4: str | None, snat6: str | None) -> str:
    if mode == "masquerade":
        post = [f'oifname "{oifname}" meta nfproto ipv4 counter masquerade',
                f'oifname "{oifname}" meta nfproto ipv6 counter masquerade']
    else:
        post = [f'oifname "{oifname}" meta nfproto ipv4 counter snat ip to {snat4}',
                f'oifname "{oifname}" meta nfproto ipv6 counter snat ip6 to {snat6}']
    lines = [f"table inet {table_name(tb_id)} {{",
             "  chain postrouting {",
             "    type nat hook postrouting priority srcnat; policy accept;",
             *(f"    {r}" for r in post),
             "  }",
             "}"]
    return "\n".join(lines) + "\n"


def policer_ruleset(tb_id: str, cap_pps: float | None, cap_bps: float | None, burst: int) -> str:
    if cap_pps is not None:
        rule = f"limit rate over {int(round(cap_pps))}/second burst {burst} packets counter drop"
    else:
        assert cap_bps is not None, "a policer needs a packet or a bit rate cap"
        rule = (f"limit rate over {int(round(cap_bps / 8))} bytes/second burst {burst} bytes "
                "counter drop")
    return _table(tb_id, forward=[rule, "counter accept"], policy="accept", notrack=True)


def _table(tb_id: str, forward: list[str], policy: str, notrack: bool = False) -> str:
    lines = [f"table inet {table_name(tb_id)} {{"]
    if notrack:
        lines += ["  chain prerouting {",
                  "    type filter hook prerouting priority raw; policy accept;",
                  "    notrack",
                  "  }"]
    lines += ["  chain forward {",
              f"    type filter hook forward priority filter; policy {policy};",
              *(f"    {r}" for r in forward),
              "  }",
              "}"]
    return "\n".join(lines) + "\n"


def tester_quiet_ruleset(tb_id: str) -> str:
    """For a tester port with a kernel stack: its stack never answers the engine's test frames.
    Those are UDP to the port's own address with no socket behind it, so the kernel would send
    ICMP port-unreachable back through the DUT (up to its rate limit): traffic the DUT would carry
    and count as its own. Dropped on output; TCP, and ICMP for the stack's own sockets, pass."""
    return "\n".join([
        f"table inet {table_name(tb_id)}_tester {{",
        "  chain output {",
        "    type filter hook output priority filter; policy accept;",
        "    icmp type destination-unreachable icmp code port-unreachable counter drop",
        "    icmpv6 type destination-unreachable icmpv6 code port-unreachable counter drop",
        "  }",
        "}"]) + "\n"


def apply(netns: str, ruleset: str) -> None:
    """Load ``ruleset`` with ``nft -f -`` inside ``netns``."""

    def body() -> subprocess.CompletedProcess:
        return subprocess.run(["nft", "-f", "-"], input=ruleset, capture_output=True, text=True,
                              timeout=60)

    try:
        r = run_in_netns(netns, body)
    except FileNotFoundError:
        raise CapabilityError("nft: the nftables command is not installed (apt install nftables)") from None
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).strip().splitlines()
        raise TestbedError(f"nftables in {netns}: nft -f failed: {msg[0] if msg else r.returncode}")


def list_ruleset(netns: str | None) -> str:
    def body() -> str:
        r = subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True, timeout=30)
        return r.stdout if r.returncode == 0 else f"unavailable: {r.stderr.strip()}"

    try:
        return run_in_netns(netns, body)
    except FileNotFoundError:
        return "unavailable: nft not installed"


def counters(netns: str, tb_id: str) -> list[dict]:
    """Per-rule packet/byte counters of table ``netrig_<id>`` (via ``nft -j``)."""
    def body() -> subprocess.CompletedProcess:
        return subprocess.run(["nft", "-j", "list", "table", "inet", table_name(tb_id)],
                              capture_output=True, text=True, timeout=30)

    r = run_in_netns(netns, body)
    if r.returncode != 0:
        raise TestbedError(f"nftables in {netns}: cannot list table {table_name(tb_id)}: {r.stderr.strip()}")
    out = []
    for item in json.loads(r.stdout).get("nftables", []):
        rule = item.get("rule")
        if not rule:
            continue
        pk = by = None
        for e in rule.get("expr", []):
            if isinstance(e, dict) and "counter" in e:
                pk, by = e["counter"].get("packets"), e["counter"].get("bytes")
        out.append({"chain": rule.get("chain"), "handle": rule.get("handle"), "packets": pk, "bytes": by,
                    "expr": rule.get("expr")})
    return out
