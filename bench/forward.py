#!/usr/bin/env python3
"""``make bench`` (forwarder case) and ``make bench-forward``: the host as the DUT, four forwarders side
by side on one veth test bed, in one run, at the same offered load:

- ``netrig`` — ``netrig forward --forward-mode io --io af_xdp`` (the performance goal: ≥ 1.0 × testpmd);
- ``xdp`` — ``netrig forward --forward-mode io --io xdp`` (in-kernel XDP_REDIRECT through a DEVMAP);
- ``bridge`` — the Linux bridge (da and db enslaved to a bridge in D);
- ``testpmd`` — DPDK ``dpdk-testpmd --forward-mode=io`` with two ``net_af_xdp`` ports.

Test bed: the ``forwarder`` test bed (tester ports tx, rx; DUT namespace with dtx, drx), one per
DUT and repetition, its ``forward_backend`` choosing the DUT (af_xdp, xdp, bridge, testpmd) — the
same test bed ``netrig rfc2544 --testbed forwarder`` measures. The tester (netrig's engine, AF_XDP
ports) offers 64-B frames at the highest rate it can from tx and counts what arrives on rx. Pinning
(2 vCPUs): the tester's TX and RX workers on CPU 0 for every DUT; the DUT's own threads on CPU 1
(the test bed's default: netrig forward's workers ``--dut-cpus 1``; testpmd's forwarding lcore 1, main
lcore 0). The XDP program and the bridge run in the kernel's receive path of dtx — on veth, in
softirq on the CPU that sent the frame (CPU 0, the tester's) — so they cannot be pinned. The order of
the DUTs rotates every repetition; the result is the median of REPS repetitions of DUR seconds per
DUT and the ratios of the medians to testpmd's.

Environment: DUR (default 5), REPS (3), DUTS (comma list, default all four), OUT (JSON file; default
bench/results/<date>-forward.json with a .md beside it). Run it alone (it takes
/tmp/netrig-timing.lock).
"""
from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import statistics
import sys

import netrig
from netrig.testbed import Testbed

DUR = float(os.environ.get("DUR", "5"))
REPS = int(os.environ.get("REPS", "3"))
STAMP = dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.environ.get("OUT", os.path.join(HERE, "results", f"{STAMP}-forward.json"))
ALL_DUTS = ("netrig", "xdp", "bridge", "testpmd")
DUTS = tuple(d for d in os.environ.get("DUTS", ",".join(ALL_DUTS)).split(",") if d)
TESTER_LIMITED = " TESTER-LIMITED: every DUT forwarded all offered"
#: The DUTs by their forwarder test bed's forward_backend.
BACKENDS = {"netrig": "af_xdp", "xdp": "xdp", "bridge": "bridge", "testpmd": "testpmd"}


def measure(dut: str) -> dict:
    with Testbed.create("forwarder", forward_backend=BACKENDS[dut]) as tb:
        tp, rp = tb.port("tx"), tb.port("rx")
        tx = netrig.Port(tp.ifname, netns=tp.netns, io="af_xdp")
        rx = netrig.Port(rp.ifname, netns=rp.netns, io="af_xdp")
        s = netrig.Stream(frame_size=64, rate="max", src_mac=tp.mac, dst_mac=tp.peer_mac)
        r = netrig.run_trial(tx, rx, [s], duration_s=DUR, drain_s=0.5, learning=dut == "bridge", tx_cpus=[0],
                             rx_cpus=[0], max_stretch_pct=100)
    return {"sent_pps": r.frames_sent / DUR, "forwarded_pps": r.frames_received / DUR,
            "loss_pct": 100.0 * r.frames_lost / max(r.frames_sent, 1)}


def main() -> int:
    if os.geteuid() != 0:
        print("bench/forward.py needs root (namespaces, AF_XDP)", file=sys.stderr)
        return 2
    if not DUTS or any(d not in ALL_DUTS for d in DUTS):
        print(f"DUTS: {','.join(DUTS)!r} is not a comma list of {', '.join(ALL_DUTS)}", file=sys.stderr)
        return 2
    lock = open("/tmp/netrig-timing.lock", "w")  # noqa: SIM115 (held until the process exits)
    fcntl.flock(lock, fcntl.LOCK_EX)
    rows: list[dict] = []
    for rep in range(REPS):
        order = DUTS[rep % len(DUTS):] + DUTS[:rep % len(DUTS)]  # rotate: each DUT early and late
        for dut in order:
            m = measure(dut)
            rows.append({"dut": dut, "rep": rep, **m})
            print(f"rep {rep} {dut:8s} forwarded {m['forwarded_pps'] / 1e6:.3f} Mpps "
                  f"(offered {m['sent_pps'] / 1e6:.3f} Mpps, loss {m['loss_pct']:.1f} %)", flush=True)
    med = {d: statistics.median(r["forwarded_pps"] for r in rows if r["dut"] == d) for d in DUTS}
    offered = {d: statistics.median(r["sent_pps"] for r in rows if r["dut"] == d) for d in DUTS}
    base = med.get("testpmd")
    ratios = {d: (med[d] / base if base else None) for d in DUTS}
    ratio = ratios.get("netrig")
    # Every DUT forwarding everything offered means the tester, not a DUT, set the rate: the ratios
    # then say only that no DUT was slower than the tester.
    tester_limited = all(r["loss_pct"] < 0.1 for r in rows)
    doc = {"case": "forward io, 64 B, veth: netrig forward af_xdp, netrig forward xdp (XDP_REDIRECT), Linux bridge, "
                   "testpmd net_af_xdp", "duration_s": DUR, "reps": REPS, "duts": list(DUTS),
           "pinning": {"tester_tx": 0, "tester_rx": 0, "dut_forwarding": 1,
                       "xdp_and_bridge": "kernel receive path of dtx (softirq on the sending CPU, 0)"},
           "rows": rows, "median_forwarded_pps": med, "median_offered_pps": offered,
           "ratio_to_testpmd": ratios, "ratio": ratio, "goal": "netrig forward io af_xdp >= 1.0 x testpmd",
           "goal_met": None if ratio is None else ratio >= 1.0, "tester_limited": tester_limited}
    os.makedirs(os.path.dirname(OUT) or ".", exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
    md = [f"# netrig forward bench {STAMP}", "", f"64 B, veth, io forwarding, median of {REPS} × {DUR:g} s per DUT, "
          "DUT order rotating; tester on CPU 0, DUT threads on CPU 1 (XDP and bridge: kernel path, CPU 0)", "",
          "| DUT | forwarded | offered | × testpmd |", "|---|---|---|---|"]
    for d in DUTS:
        r = f"{ratios[d]:.2f}" if ratios[d] else "—"
        md.append(f"| {d} | {med[d] / 1e6:.3f} Mpps | {offered[d] / 1e6:.3f} Mpps | {r} |")
    if tester_limited:
        md += ["", TESTER_LIMITED.strip()]
    with open(os.path.splitext(OUT)[0] + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md[4:]))
    print(f"goal: netrig forward io af_xdp / testpmd = {ratio:.2f}x (>= 1.0)" if ratio is not None else "",
          f"{TESTER_LIMITED if tester_limited else ''}; {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
