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
learning took. Both daemons are test-bed processes (``start_dut_process``): recorded
before they start, stopped and their directory removed at teardown, their death a broken test bed.
Their sessions are TCP on the receiving link, which the tester's steering program and receive
sockets leave to the kernel: no test frame, never counted.
"""
from __future__ import annotations

import ipaddress
import os
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


def dut_config(own4: str, own6: str, peer4: str, peer6: str) -> str:
    """The DUT's BIRD: two eBGP sessions to the tester (one per family), everything learned
    exported to the kernel's main tables."""
    return "\n".join([
        BIRD_LOG, f"router id {own4};", "protocol device { scan time 10; }",
        "protocol kernel k4 { ipv4 { import none; export all; }; scan time 60; }",
        "protocol kernel k6 { ipv6 { import none; export all; }; scan time 60; }",
        f"protocol bgp tester4 {{ local {own4} as {DUT_AS}; neighbor {peer4} as {TESTER_AS}; {_FAST}"
        "ipv4 { import all; export none; }; }",
        f"protocol bgp tester6 {{ local {own6} as {DUT_AS}; neighbor {peer6} as {TESTER_AS}; {_FAST}"
        "ipv6 { import all; export none; next hop prefer global; }; }", ""])


def speaker_lines(own4: str, own6: str, peer4: str, peer6: str, n4: int, n6: int) -> Iterator[str]:
    """The tester's BIRD, line by line (a million routes are a 40-MB file): ``n4`` IPv4 /32 and
    ``n6`` IPv6 /128 host routes from its own addresses up, advertised to the DUT with its own
    address as their next hop (eBGP's next hop self)."""
    yield from (BIRD_LOG, f"router id {own4};", "protocol device { scan time 10; }")
    for name, fam, first, plen, n in (("r4", "ipv4", own4, 32, n4), ("r6", "ipv6", own6, 128, n6)):
        yield f"protocol static {name} {{ {fam};"
        base = ipaddress.ip_address(first)
        yield from (f"  route {base + k}/{plen} blackhole;" for k in range(n))
        yield "}"
    yield (f"protocol bgp dut4 {{ local {own4} as {TESTER_AS}; neighbor {peer4} as {DUT_AS}; {_FAST}"
           "ipv4 { import none; export all; }; }")
    yield (f"protocol bgp dut6 {{ local {own6} as {TESTER_AS}; neighbor {peer6} as {DUT_AS}; {_FAST}"
           "ipv6 { import none; export all; }; }")


def write_configs(run_dir: str, dut: tuple[str, str], tester: tuple[str, str], n4: int, n6: int) -> dict[str, str]:
    """Both daemons' configurations in ``run_dir`` (``dut``, ``tester``: each side's IPv4 and IPv6
    address on the receiving link); their paths by role (``bgp-dut``, ``bgp-speaker``)."""
    os.makedirs(run_dir, exist_ok=True)
    paths = {"bgp-dut": f"{run_dir}/dut.conf", "bgp-speaker": f"{run_dir}/speaker.conf"}
    with open(paths["bgp-dut"], "w") as f:
        f.write(dut_config(*dut, *tester))
    with open(paths["bgp-speaker"], "w") as f:
        f.writelines(line + "\n" for line in speaker_lines(*tester, *dut, n4, n6))
    return paths


def _bird() -> str:
    bird = shutil.which("bird")
    if bird is None:
        raise CapabilityError("routing bgp needs BIRD 2 (apt install bird2)")
    return bird


def argv(conf: str) -> list[str]:
    """BIRD in the foreground on ``conf``, its control socket beside it."""
    return [_bird(), "-f", "-c", conf, "-s", conf.removesuffix(".conf") + ".ctl"]


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
