"""DPDK testpmd as a test bed's DUT (``forward_backend`` ``testpmd`` / ``testpmd_af_packet``).

The seed's comparison (lab report 000) is DPDK forwarding against Linux forwarding on one host;
here testpmd runs in the DUT namespace of the ``forwarder`` or ``oneport`` test bed, on the same veth
ports netrig forward, the bridge and XDP_REDIRECT use, so one RFC 2544 run per backend compares them.

How it is run (DPDK 22.11, Debian's ``dpdk-dev`` package; the same command as ``bench/forward.py``):
``dpdk-testpmd -l MAIN,FWD --main-lcore MAIN --no-pci --no-huge --no-shconf -m 1024
--vdev net_af_xdp0,iface=IF,start_queue=0,queue_count=1 … -- --forward-mode=M --nb-cores=1
--auto-start --stats-period 60``:

- no hugepages and no shared files (``--no-huge --no-shconf``): nothing to set up on the host; its
  runtime directory (``/var/run/dpdk/<--file-prefix>``, empty) goes with the test bed;
- ``--stats-period``: testpmd runs until SIGTERM (the test bed's teardown) instead of reading a line
  from its standard input, and writes its own port counters to the DUT log once a minute;
- one forwarding lcore (``FWD``: ``dut_cpus``' first CPU, else the last online CPU), the main lcore
  on another CPU (it sleeps between the stats prints);
- modes: ``io``, ``mac`` (``l2fwd`` is testpmd's ``mac`` too: source := egress port, destination :=
  ``--eth-peer``), ``macswap``, ``rxonly``.
"""
from __future__ import annotations

import os
import shutil

from netrig.errors import TestbedError

BINARY = "dpdk-testpmd"
#: ``forward_backend`` → the DPDK poll-mode driver of its ports.
PMDS = {"testpmd": "net_af_xdp", "testpmd_af_packet": "net_af_packet"}
#: netrig forward's modes → testpmd's ``--forward-mode``.
MODES = {"io": "io", "mac": "mac", "l2fwd": "mac", "macswap": "macswap", "rxonly": "rxonly"}
#: testpmd prints this once forwarding has started (its ports are open and polled).
READY = "forwards packets on"
#: Where DPDK makes its runtime directory (``--file-prefix`` names it).
RUNTIME_ROOT = "/var/run/dpdk"
STATS_PERIOD_S = 60


def binary() -> str:
    """The testpmd executable, or a TestbedError naming the package."""
    path = shutil.which(BINARY)
    if path is None:
        raise TestbedError(f"forward_backend testpmd needs {BINARY}, which is not installed: apt install dpdk-dev "
                           "(make setup installs it; so does bash ../shared/peers/peer-bench.sh install)")
    return path


def lcores(dut_cpus: tuple[int, ...] | None, online: int | None = None) -> tuple[int, int]:
    """(main lcore, forwarding lcore): forwarding on ``dut_cpus[0]`` (else the last online CPU), main
    on the lowest other CPU (the same one on a one-CPU host)."""
    n = online or os.cpu_count() or 1
    fwd = dut_cpus[0] if dut_cpus else n - 1
    others = [c for c in range(n) if c != fwd]
    return (others[0] if others else fwd), fwd


def argv(ifaces: list[str], backend: str, mode: str, peer_macs: list[str], main: int, fwd: int,
         prefix: str) -> list[str]:
    """The testpmd command forwarding between ``ifaces`` (pairs 0↔1, as netrig forward; one port:
    back out of itself) in ``mode``; ``peer_macs``: one per port, the destination ``mac`` mode writes;
    ``prefix``: its ``--file-prefix`` (runtime directory ``RUNTIME_ROOT/prefix``)."""
    pmd = PMDS[backend]
    cmd = [binary(), "-l", f"{main},{fwd}" if main != fwd else str(fwd), "--main-lcore", str(main), "--no-pci",
           "--no-huge", "--no-shconf", "--file-prefix", prefix, "-m", "1024", "--log-level", "lib.eal:warning"]
    for i, ifname in enumerate(ifaces):
        opts = "start_queue=0,queue_count=1" if pmd == "net_af_xdp" else "qpairs=1"
        cmd += ["--vdev", f"{pmd}{i},iface={ifname},{opts}"]
    cmd += ["--", f"--forward-mode={MODES[mode]}", "--nb-cores=1", "--total-num-mbufs=32768", "--auto-start",
            f"--stats-period={STATS_PERIOD_S}"]
    if MODES[mode] == "mac":
        cmd += [f"--eth-peer={i},{mac}" for i, mac in enumerate(peer_macs)]
    return cmd
