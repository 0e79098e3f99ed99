#!/usr/bin/env python3
"""``make bench-forward``: ``netrig forward --mode io --backend af_xdp`` against DPDK testpmd io forwarding
with ``net_af_xdp``, side by side on one veth test bed, in one run.

Test bed: tester namespace T (ports ta, tb) and DUT namespace D (da, db), ta↔da and tb↔db. The DUT
forwards da↔db. The tester (netrig's engine, AF_XDP ports) offers 64-B frames at the highest rate it
can from ta and counts what arrives on tb. Pinning (2 vCPUs): the tester's TX and RX workers on CPU
0; the DUT's forwarding on CPU 1 (netrig forward: both workers ``--cpus 1``; testpmd: ``-l 0,1
--main-lcore 0``, forwarding lcore 1). DUTs alternate within each repetition; the result is the
median of REPS repetitions of DUR seconds per DUT and the ratio netrig/testpmd of the medians.

Environment: DUR (default 5), REPS (3), OUT (JSON file, default /tmp/netrig-bench-forward.json).
Run it alone (it takes /tmp/netrig-timing.lock).
"""
from __future__ import annotations

import fcntl
import json
import os
import statistics
import subprocess
import sys
import time
import uuid

import netrig

DUR = float(os.environ.get("DUR", "5"))
REPS = int(os.environ.get("REPS", "3"))
OUT = os.environ.get("OUT", "/tmp/netrig-bench-forward.json")
TESTER_LIMITED = " TESTER-LIMITED: both DUTs forwarded all offered"
UID = uuid.uuid4().hex[:4]
T, D = f"nrbf{UID}t", f"nrbf{UID}d"
IF = {k: f"nrbf{UID}{k}" for k in ("ta", "tb", "da", "db")}


def sh(*cmd: str, ns: str | None = None, check: bool = True) -> str:
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    return subprocess.run(full, check=check, capture_output=True, text=True).stdout


def setup() -> None:
    sh("ip", "netns", "add", T)
    sh("ip", "netns", "add", D)
    for a, b in (("ta", "da"), ("tb", "db")):
        sh("ip", "link", "add", IF[a], "netns", T, "type", "veth", "peer", "name", IF[b], "netns", D)
    for k, ifname in IF.items():
        ns = T if k.startswith("t") else D
        sh("sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1", ns=ns)
        sh("ip", "link", "set", ifname, "up", ns=ns)


def cleanup() -> None:
    for ns in (T, D):
        sh("ip", "netns", "del", ns, check=False)


def start_dut(which: str) -> subprocess.Popen:
    if which == "netrig":
        argv = [sys.executable, "-m", "netrig.cli.main", "forward", "--port", IF["da"], "--port", IF["db"],
                "--mode", "io", "--backend", "af_xdp", "--cpus", "1", "--interval", "0"]
        ready = "Ctrl-C stops"
    else:
        argv = ["stdbuf", "-oL", "dpdk-testpmd", "-l", "0,1", "--main-lcore", "0", "--no-pci", "--no-huge",
                "-m", "1024", "--file-prefix", f"nrbf{UID}",
                "--vdev", f"net_af_xdp0,iface={IF['da']},start_queue=0,queue_count=1",
                "--vdev", f"net_af_xdp1,iface={IF['db']},start_queue=0,queue_count=1",
                "--", "--forward-mode=io", "--nb-cores=1", "--total-num-mbufs=32768", "--auto-start"]
        ready = "Press enter to exit"
    log = open(f"/tmp/nrbf{UID}-{which}.log", "w+")  # noqa: SIM115 (the DUT's output, read while it runs)
    p = subprocess.Popen(["ip", "netns", "exec", D, *argv], stdout=log, stderr=subprocess.STDOUT,
                         stdin=subprocess.PIPE)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 45:
        log.seek(0)
        if ready in log.read():
            time.sleep(0.5)
            return p
        if p.poll() is not None:
            break
        time.sleep(0.1)
    log.seek(0)
    p.kill()
    raise SystemExit(f"{which} did not start: {log.read()[-2000:]}")


def stop_dut(p: subprocess.Popen) -> None:
    p.terminate()
    try:
        p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
    time.sleep(2.5)  # the kernel releases the XSK queue bindings asynchronously


def measure() -> dict:
    tx = netrig.Port(IF["ta"], netns=T, io="af_xdp")
    rx = netrig.Port(IF["tb"], netns=T, io="af_xdp")
    s = netrig.Stream(frame_size=64, rate="max", src_mac=tx.info().mac, dst_mac=rx.info().mac)
    r = netrig.run_trial(tx, rx, [s], duration_s=DUR, drain_s=0.5, learning=False, tx_cpus=[0], rx_cpus=[0],
                         max_stretch_pct=100)
    return {"sent_pps": r.frames_sent / DUR, "forwarded_pps": r.frames_received / DUR,
            "loss_pct": 100.0 * r.frames_lost / max(r.frames_sent, 1)}


def main() -> int:
    if os.geteuid() != 0:
        print("bench/forward.py needs root (namespaces, AF_XDP)", file=sys.stderr)
        return 2
    lock = open("/tmp/netrig-timing.lock", "w")  # noqa: SIM115 (held until the process exits)
    fcntl.flock(lock, fcntl.LOCK_EX)
    rows: list[dict] = []
    try:
        setup()
        for rep in range(REPS):
            order = ("netrig", "testpmd") if rep % 2 == 0 else ("testpmd", "netrig")
            for dut in order:
                p = start_dut(dut)
                try:
                    m = measure()
                finally:
                    stop_dut(p)
                rows.append({"dut": dut, "rep": rep, **m})
                print(f"rep {rep} {dut:8s} forwarded {m['forwarded_pps'] / 1e6:.3f} Mpps "
                      f"(offered {m['sent_pps'] / 1e6:.3f} Mpps, loss {m['loss_pct']:.1f} %)", flush=True)
    finally:
        cleanup()
    med = {d: statistics.median(r["forwarded_pps"] for r in rows if r["dut"] == d) for d in ("netrig", "testpmd")}
    ratio = med["netrig"] / med["testpmd"] if med["testpmd"] else None
    # Both DUTs forwarding everything offered means the tester, not a DUT, set the rate: the ratio
    # then says only that neither DUT was slower than the tester.
    tester_limited = all(r["loss_pct"] < 0.1 for r in rows)
    doc = {"case": "forward io af_xdp vs testpmd io net_af_xdp, 64 B, veth", "duration_s": DUR, "reps": REPS,
           "pinning": {"tester_tx": 0, "tester_rx": 0, "dut_forwarding": 1}, "rows": rows,
           "median_forwarded_pps": med, "ratio": ratio, "tester_limited": tester_limited}
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"median forwarded: netrig {med['netrig'] / 1e6:.3f} Mpps, testpmd {med['testpmd'] / 1e6:.3f} Mpps; "
          f"ratio {ratio:.2f}x (goal >= 1.0){TESTER_LIMITED if tester_limited else ''}; {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
