"""The routed test beds' ``routes`` learned over eBGP (``routing = "bgp"``), as a router in a network
learns them: BIRD 2 (the Debian package) in the DUT's namespace installs what it learns into the DUT's
FIB, and a second BIRD in the rx port's namespace speaks for the tester, advertising the routes. No
protocol code here; BIRD was chosen by measurement (docs/routing-daemons.md).

::

    rx port's namespace, AS 65002                           DUT's namespace, AS 65001
    bird "bgp-speaker":                                     bird "bgp-dut":
      protocol static: N host routes per family   ──eBGP──▶   import all ──kernel protocol──▶ FIB
      (blackhole: advertised, never installed)    198.19.0.2 → 198.19.0.1, 2001:2:0:1::2 → ::1
      next hop: the rx port's own address                   routes ``proto bird``, via the rx port

The build (``topologies._learn_routes``) writes both configurations, starts both daemons and waits
until the DUT's FIB holds every route (read back from the kernel, not from BIRD), noting how long
learning took.

With ``bgp_paths = 2`` a second BIRD ("bgp-backup") speaks for a second tester peer on the same link
(a macvlan on the rx port, its own MAC, 198.19.254.2/30, 2001:2:0:1fe::2/64): it advertises the
same routes with its AS path prepended, so the DUT holds them via the first peer and has the second as its backup.
The receiving link then runs through a Linux bridge in a namespace of its own (the peers'), so that
:func:`withdraw_commands`' withdraw can make the first peer stop forwarding what it withdrew, as a
router without the routes would, before the frames reach the tester's receiver: the convergence
method's event (``netrig.methods.convergence``). Both daemons are test-bed processes (``start_dut_process``): recorded
before they start, stopped and their directory removed at teardown, their death a broken test bed.
Their sessions are TCP on the receiving link, which the tester's steering program and receive
sockets leave to the kernel: no test frame, never counted.
"""
from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator

from netrig.errors import CapabilityError, TestbedError
from netrig.testbed import state as st

#: The tester's and the DUT's autonomous systems (private, RFC 6996).
TESTER_AS, DUT_AS = 65002, 65001
#: The kernel's protocol number of the routes BIRD installs (``proto bird``).
BIRD_PROTO = 12
#: How long the DUT may take to learn and install every route, s (1 M IPv6 routes: measured ~40 s).
LEARN_S = 600.0
#: What BIRD logs (no route traces: 1 M routes would fill the log).
BIRD_LOG = "log stderr { info, remote, warning, error, auth, fatal, bug };"
#: A session's first connect 1 s after its start, not BIRD's default 5 s: a build waits for it.
_FAST = "connect delay time 1; "
#: The tester's sessions listen on their own address only: two tester peers' BIRDs share the rx
#: port's namespace (``bgp_paths = 2``), and the second found port 179 taken ("No listening socket").
_OWN = "strict bind yes; "


#: The backup path of ``bgp_paths = 2``: a /30 on the DUT's receiving link, the DUT's end and the
#: second tester peer's (clear of the routes, which stop below 198.19.250.0:
#: ``testbed.options.MAX_PATHS_ROUTES``).
BACKUP4 = ("198.19.254.1", "198.19.254.2")
#: The same in IPv6: a /64 of its own on the link (inside the receiving /56, clear of the routes'
#: /64, 2001:2:0:1::/64).
BACKUP6 = ("2001:2:0:1fe::1", "2001:2:0:1fe::2")
#: The DUT's BIRD protocols of the backup sessions (per family).
BACKUP_SESSIONS = ("tester4b", "tester6b")
#: The static protocols the first tester peer advertises its routes from, per family (their
#: ``disable`` is the withdraw).
PRIMARY_ROUTES = ("r4", "r6")
#: The peers' bridge's nftables table (bridge family) and the chain the withdraw adds its drop to.
NFT_TABLE = "netrig_peers"
PEERS_RULESET = (f"table bridge {NFT_TABLE} {{\n"
                 "  chain forward { type filter hook forward priority 0; policy accept; }\n}\n")
#: How long a restore may wait for the DUT to hold every route via the first peer again, s.
RESTORE_S = 120.0
#: How many times the backup peer prepends its AS: a longer path, so the DUT prefers the first.
BACKUP_PREPEND = 2


def dut_config(own4: str, own6: str, peer4: str, peer6: str, backup: bool = False) -> str:
    """The DUT's BIRD: two eBGP sessions to the tester (one per family), everything learned
    exported to the kernel's main tables; ``backup``: two more to the backup peer (:data:`BACKUP4`,
    :data:`BACKUP6`)."""
    third = [f"protocol bgp {name} {{ local {ends[0]} as {DUT_AS}; neighbor {ends[1]} as {TESTER_AS}; {_FAST}"
             f"{fam} {{ import all; export none;{extra} }}; }}"
             for name, ends, fam, extra in zip(BACKUP_SESSIONS, (BACKUP4, BACKUP6), ("ipv4", "ipv6"),
                                               ("", " next hop prefer global;"), strict=True)] if backup else []
    return "\n".join([
        BIRD_LOG, f"router id {own4};", "protocol device { scan time 10; }",
        "protocol kernel k4 { ipv4 { import none; export all; }; scan time 60; }",
        "protocol kernel k6 { ipv6 { import none; export all; }; scan time 60; }",
        f"protocol bgp tester4 {{ local {own4} as {DUT_AS}; neighbor {peer4} as {TESTER_AS}; {_FAST}"
        "ipv4 { import all; export none; }; }",
        f"protocol bgp tester6 {{ local {own6} as {DUT_AS}; neighbor {peer6} as {TESTER_AS}; {_FAST}"
        "ipv6 { import all; export none; next hop prefer global; }; }", *third, ""])


def backup_lines(first: tuple[str, str], n4: int, n6: int) -> Iterator[str]:
    """The backup peer's BIRD (:data:`BACKUP4`, :data:`BACKUP6`): the first peer's ``n4`` IPv4 and
    ``n6`` IPv6 host routes from ``first`` (its addresses) up but the first of each (the first
    peer's own address: the DUT's route to its neighbour must never lead through the other peer, or
    its session to it broke in 1 of ~10 withdraws and never came back, "connection collision
    resolution"), advertised with its AS prepended :data:`BACKUP_PREPEND` more times."""
    yield from (BIRD_LOG, f"router id {BACKUP4[1]};", "protocol device { scan time 10; }")
    prepend = " ".join([f"bgp_path.prepend({TESTER_AS});"] * BACKUP_PREPEND)
    for fam, plen, base, n, (peer, own) in (("ipv4", 32, first[0], n4, BACKUP4), ("ipv6", 128, first[1], n6, BACKUP6)):
        yield f"protocol static {fam}b {{ {fam};"
        yield from (f"  route {ipaddress.ip_address(base) + k}/{plen} blackhole;" for k in range(1, n))
        yield "}"
        yield (f"protocol bgp dut{fam[-1]} {{ local {own} as {TESTER_AS}; neighbor {peer} as {DUT_AS}; {_FAST}{_OWN}"
               f"{fam} {{ import none; export filter {{ {prepend} accept; }}; }}; }}")


def withdraw_commands(ctl: str, peers_ns: str, primary: tuple[str, str, str], dut_ns: str,
                      counts: tuple[int, int]) -> tuple[str, str]:
    """The withdraw and restore of the first peer's routes, as shell command lines (``primary``: its
    IPv4 and IPv6 address and its MAC; ``counts``: its routes per family). Withdraw: the peers'
    bridge drops frames to its MAC for the receiving range of each family but its own address
    (which it still answers for: its BGP sessions, and the route it had for itself now the DUT's
    connected one), then its static protocols are disabled: BIRD withdraws every route, the sessions
    stay up. Restore: the drops go, the routes are advertised again, and it returns once the DUT's
    FIB holds them all via the first peer again."""
    ip4, ip6, mac = primary
    rules = "; ".join(f"add rule bridge {NFT_TABLE} forward ether daddr {mac} {fam} daddr {net} "
                      f"{fam} daddr != {own} drop"
                      for fam, net, own in (("ip", "198.19.0.0/16", ip4), ("ip6", "2001:2:0:1::/64", ip6)))
    held = " && ".join(f"[ \"$(ip -n {dut_ns} -{v} route show proto {BIRD_PROTO} via {hop} | wc -l)\" -ge {n} ]"
                       for v, hop, n in (("4", ip4, counts[0]), ("6", ip6, counts[1])))
    back = f"timeout {RESTORE_S:g} sh -c 'until {held}; do sleep 0.05; done'"
    birdc = f"birdc -s {ctl}"
    return (f"ip netns exec {peers_ns} nft '{rules}' && "
            + " && ".join(f"{birdc} disable {r} >/dev/null" for r in PRIMARY_ROUTES),
            f"ip netns exec {peers_ns} nft flush chain bridge {NFT_TABLE} forward && "
            + " && ".join(f"{birdc} enable {r} >/dev/null" for r in PRIMARY_ROUTES) + f" && {back}")


def speaker_lines(own4: str, own6: str, peer4: str, peer6: str, n4: int, n6: int) -> Iterator[str]:
    """The tester's BIRD, line by line (a million routes are a 40-MB file): ``n4`` IPv4 /32 and
    ``n6`` IPv6 /128 host routes from its own addresses up, advertised to the DUT with its own
    address as their next hop (eBGP's next hop self)."""
    yield from (BIRD_LOG, f"router id {own4};", "protocol device { scan time 10; }")
    for name, fam, first, plen, n in zip(PRIMARY_ROUTES, ("ipv4", "ipv6"), (own4, own6), (32, 128), (n4, n6),
                                         strict=True):
        yield f"protocol static {name} {{ {fam};"
        base = ipaddress.ip_address(first)
        yield from (f"  route {base + k}/{plen} blackhole;" for k in range(n))
        yield "}"
    yield (f"protocol bgp dut4 {{ local {own4} as {TESTER_AS}; neighbor {peer4} as {DUT_AS}; {_FAST}{_OWN}"
           "ipv4 { import none; export all; }; }")
    yield (f"protocol bgp dut6 {{ local {own6} as {TESTER_AS}; neighbor {peer6} as {DUT_AS}; {_FAST}{_OWN}"
           "ipv6 { import none; export all; }; }")


def write_configs(run_dir: str, dut: tuple[str, str], tester: tuple[str, str], n4: int, n6: int,
                  backup: bool = False) -> dict[str, str]:
    """The daemons' configurations in ``run_dir`` (``dut``, ``tester``: each side's IPv4 and IPv6
    address on the receiving link); their paths by role (``bgp-dut``, ``bgp-speaker``, and with
    ``backup`` ``bgp-backup``). The directory is gone again when writing fails: no daemon records
    it yet for teardown to remove."""
    os.makedirs(run_dir, exist_ok=True)
    paths = {"bgp-dut": f"{run_dir}/dut.conf", "bgp-speaker": f"{run_dir}/speaker.conf"}
    if backup:
        paths["bgp-backup"] = f"{run_dir}/backup.conf"
    try:
        lines = {"bgp-dut": iter([dut_config(*dut, *tester, backup=backup)]),
                 "bgp-speaker": (line + "\n" for line in speaker_lines(*tester, *dut, n4, n6)),
                 "bgp-backup": (line + "\n" for line in backup_lines(tester, n4, n6))}
        for role, path in paths.items():
            with open(path, "w") as f:
                f.writelines(lines[role])
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return paths


def ctl(conf: str) -> str:
    """The control socket of the BIRD that runs on ``conf``."""
    return conf.removesuffix(".conf") + ".ctl"


def imported(ctl_path: str, protocol: str) -> int:
    """How many routes BIRD's ``protocol`` has imported (``birdc show protocols all``); 0 when it
    cannot say (not up yet)."""
    r = subprocess.run(["birdc", "-s", ctl_path, "show", "protocols", "all", protocol], capture_output=True,
                       text=True, check=False, timeout=30)
    m = re.search(r"Routes:\s+(\d+) imported", r.stdout)
    return int(m.group(1)) if m else 0


def _bird() -> str:
    bird = shutil.which("bird")
    if bird is None:
        raise CapabilityError("routing bgp needs BIRD 2 (apt install bird2)")
    return bird


def argv(conf: str) -> list[str]:
    """BIRD in the foreground on ``conf``, its control socket beside it."""
    return [_bird(), "-f", "-c", conf, "-s", ctl(conf)]


#: What BIRD logs when it runs.
READY = "Started"


def wait_learned(state: st.TestbedState, dut: str, want: int, count: Callable[[str], int], ctl: str) -> int:
    """Until ``count(dut)`` (the DUT's FIB routes BIRD installed) reaches ``want``; a daemon that
    died, or a table that stops short of it for :data:`LEARN_S`, fails the build naming what it
    reached. What it holds."""
    deadline = time.monotonic() + LEARN_S
    while True:
        held = count(dut)
        if held >= want:
            return held
        dead = [f"{p.role} (pid {p.pid}) exited: its log {p.log}" for p in state.processes
                if p.role.startswith("bgp-") and not st.pid_alive(p.pid, p.start_time)]
        if dead or time.monotonic() > deadline:
            why = "; ".join(dead) if dead else f"not all learned after {LEARN_S:g} s"
            raise TestbedError(f"routing bgp: the DUT's FIB holds {held} of the {want} routes the tester advertised: "
                               f"{why} (its sessions: birdc -s {ctl} show protocols)")
        time.sleep(0.2)


def version() -> str:
    """BIRD's version, as it says."""
    r = subprocess.run([_bird(), "--version"], capture_output=True, text=True, check=False, timeout=10)
    return (r.stdout + r.stderr).strip().rsplit(" ", 1)[-1] or "?"
