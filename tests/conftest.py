"""Shared pytest fixtures: root detection, and small veth pairs for engine integration tests.

Two kinds of test, run apart (``make test-python``):

- ``host`` tests change what the whole host shares — network namespaces, test beds and their lock
  files, XDP programs, sysctls, traffic whose timing a busy CPU would stretch — or assert that
  nothing else did (``ip netns`` before and after). They run one at a time, alone on the machine.
  A test is ``host`` when it is marked ``root`` or ``host`` (itself or its module), or carries
  ``needs_root`` (it builds namespaces and opens raw sockets).
- every other test (parsing, results, reports, the simulated DUT, servers on loopback ports the
  kernel picks) runs on two pytest-xdist workers at once, before the host tests start.

A VM's host may take its CPU (steal): a trial the tester flags for it is excused only by the
measured steal (``tests/host_steal.py``), and a failed test marked ``timing`` is reported as
skipped when the host took at least 5 % of the machine's CPU time during it, naming the share.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from contextlib import contextmanager

import pytest

IS_ROOT = os.geteuid() == 0

# A suite started from a background job (`make test &`, nohup) inherits SIGINT ignored, and so would
# every netrig process its tests start: the Ctrl-C tests would test nothing. Python's own handler
# here; the processes it starts get the default disposition (a handler is reset on exec, an ignore is not).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root: creates network namespaces and raw sockets")


def is_host_test(item: pytest.Item) -> bool:
    """It changes or watches host-wide state (module docstring): a ``root`` or ``host`` mark, or ``needs_root``."""
    if item.get_closest_marker("root") or item.get_closest_marker("host"):
        return True
    return any(m == needs_root.mark for m in item.iter_markers("skipif"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A failed ``timing`` test is reported as skipped when the host took enough of the machine's
    CPU during it (``tests.host_steal.spoilt_by_host``); every other failure stands."""
    from tests.host_steal import Steal, spoilt_by_host

    if call.when == "setup" and item.get_closest_marker("timing"):
        item.stash[_STEAL] = Steal()
    outcome = yield
    rep = outcome.get_result()
    if call.when == "call" and rep.failed and _STEAL in item.stash:
        why = spoilt_by_host(item.stash[_STEAL].seconds(), call.duration)
        if why is not None:
            rep.outcome, rep.longrepr = "skipped", (str(item.path), item.location[1] or 0, f"Skipped: {why}")


_STEAL = pytest.StashKey()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_host_test(item) and not item.get_closest_marker("host"):
            item.add_marker(pytest.mark.host)


def sh(*cmd: str, ns: str | None = None, check: bool = True) -> str:
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    return subprocess.run(full, check=check, capture_output=True, text=True).stdout


@contextmanager
def veth_pair(tag: str = "t"):
    """Two namespaces joined by a veth pair; yields (ns_a, if_a, ns_b, if_b). Always torn down.

    IPv6 is disabled on both ends so the kernel sends nothing of its own on them. The two ends get
    different ifindexes (in fresh namespaces both would be 2): the kernel's linkwatch takes the
    carrier of a veth whose ifindex equals its peer's as not urgent, up to 1 s late, and a trial
    opening the port waits for it to run.
    """
    uid = uuid.uuid4().hex[:5]
    ns_a, ns_b = f"nrt{uid}{tag}a", f"nrt{uid}{tag}b"
    if_a, if_b = f"nrt{uid}a", f"nrt{uid}b"
    try:
        sh("ip", "netns", "add", ns_a)
        sh("ip", "netns", "add", ns_b)
        sh("ip", "link", "add", if_a, "netns", ns_a, "index", "10", "type", "veth", "peer", "name", if_b, "netns", ns_b,
           "index", "11")
        for ns, ifn in ((ns_a, if_a), (ns_b, if_b)):
            sh("sysctl", "-qw", f"net.ipv6.conf.{ifn}.disable_ipv6=1", ns=ns)
            sh("ip", "link", "set", ifn, "up", ns=ns)
        yield ns_a, if_a, ns_b, if_b
    finally:
        sh("ip", "netns", "del", ns_a, check=False)
        sh("ip", "netns", "del", ns_b, check=False)


def forwarding_namespace(ns_b: str, if_b: str, rule: str) -> str:
    """In ns_b, frames arriving on if_b pass the nftables `rule` (netdev ingress) and are forwarded
    to a second veth pair in ns_b; returns the interface netrig listens on. Torn down with ns_b."""
    inner, listen = if_b[:-1] + "i", if_b[:-1] + "r"
    sh("ip", "link", "add", inner, "type", "veth", "peer", "name", listen, ns=ns_b)
    for ifn in (inner, listen):
        sh("sysctl", "-qw", f"net.ipv6.conf.{ifn}.disable_ipv6=1", ns=ns_b)
        sh("ip", "link", "set", ifn, "up", ns=ns_b)
    table = f"""
    table netdev netrig_test {{
      chain in {{
        type filter hook ingress device "{if_b}" priority 0;
        {rule}
        fwd to "{inner}"
      }}
    }}"""
    subprocess.run(["ip", "netns", "exec", ns_b, "nft", "-f", "-"], input=table, text=True, check=True)
    return listen


def if_counter(ns: str, ifname: str, name: str) -> int:
    return int(sh("cat", f"/sys/class/net/{ifname}/statistics/{name}", ns=ns))


INJECT = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
for line in sys.stdin:
    if line.strip():
        s.send(bytes.fromhex(line.strip()))
"""


def inject(ns: str, ifname: str, frames: list[bytes]) -> None:
    """Send `frames` out of `ifname` in namespace `ns` through a raw socket of another process."""
    subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", INJECT, ifname],
                   input="\n".join(f.hex() for f in frames), text=True, check=True, timeout=60)
