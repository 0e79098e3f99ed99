#!/usr/bin/env python3
"""netrig against peer traffic generators, in one run, on the same veth topology.

Method (the same as ../shared/peers/peer-bench.sh, so the numbers compare):
- netns ``nrbtx`` holds ``nrbt0`` (02:00:00:00:00:01, 198.18.0.1/30), netns ``nrbrx`` holds its veth peer
  ``nrbr0`` (02:00:00:00:00:02, 198.18.0.2/30); MTU 1500, qdisc noqueue.
- Sender pinned to CPU 1; netrig's receiver (TX+RX cases) pinned to CPU 0.
- TX-only cases: the receiver is a native XDP_DROP program on ``nrbr0`` (runs in softirq on the
  sender's CPU, as for the peers). TX+RX cases: netrig's own receiver analyses every frame.
- Window: WARM s of warm-up, then DUR s of counter deltas: tx = ``nrbt0`` tx_packets, rx = XDP packets
  on ``nrbr0`` (``ethtool -S`` rx_queue_0_xdp_packets) and, for TX+RX, the frames netrig analysed.
- REPS repetitions; the table reports medians and the ratio netrig / peer measured in the same run.

The peers run through ``../shared/peers/peer-bench.sh`` (installs Debian packages once) in the same
invocation, interleaved with netrig: repetition 1 of every netrig case, then repetition 1 of every
peer case, then repetition 2, and so on, so the VM's slow and fast phases fall on both sides.
Results: ``bench/results/<date>.json`` and ``<date>.md``.

Environment: DUR (default 10), WARM (2), REPS (3), CASES (comma list of netrig cases), PEERS (comma
list of peer cases, or "none").
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "python"))

import netrig  # noqa: E402

PEER_SCRIPT = (ROOT.parent / "shared" / "peers" / "peer-bench.sh").resolve()
NTX, NRX, ITX, IRX = "nrbtx", "nrbrx", "nrbt0", "nrbr0"
MTX, MRX, ATX, ARX = "02:00:00:00:00:01", "02:00:00:00:00:02", "198.18.0.1", "198.18.0.2"
TXCPU, RXCPU = 1, 0
DUR = float(os.environ.get("DUR", 10))
WARM = float(os.environ.get("WARM", 2))
REPS = int(os.environ.get("REPS", 3))

#: netrig cases: name → (io, frame size, mode)
CASES = {
    "netrig-afxdp-64": ("af_xdp", 64, "tx"),
    "netrig-afxdp-1518": ("af_xdp", 1518, "tx"),
    "netrig-afpacket-64": ("af_packet", 64, "tx"),
    "netrig-afpacket-1518": ("af_packet", 1518, "tx"),
    "netrig-afxdp-txrx-64": ("af_xdp", 64, "txrx"),
    "netrig-afpacket-txrx-64": ("af_packet", 64, "txrx"),
}
#: peer cases run by the peer script, and which netrig case each is compared with.
PEERS = {
    "xsk-ceiling-64": "netrig-afxdp-64",
    "xsk-ceiling-txrx-64": "netrig-afxdp-txrx-64",
    "trafgen-bypass-64": "netrig-afpacket-64",
    "trafgen-bypass-1518": "netrig-afpacket-1518",
    "testpmd-afpacket-64": "netrig-afpacket-64",
    "testpmd-afpacket-1518": "netrig-afpacket-1518",
    "testpmd-afxdp-64": "netrig-afxdp-64",
    "testpmd-afxdp-1518": "netrig-afxdp-1518",
    "testpmd-afxdp-pair-64": "netrig-afxdp-txrx-64",
}
#: Extra comparisons asked by the issues (netrig case, peer case).
ALSO = [("netrig-afpacket-64", "trafgen-bypass-64"), ("netrig-afxdp-64", "trafgen-bypass-64"),
        ("netrig-afxdp-txrx-64", "trafgen-bypass-64")]


def sh(*cmd, ns=None, check=True, **kw):
    full = (["ip", "netns", "exec", ns] if ns else []) + [str(c) for c in cmd]
    return subprocess.run(full, check=check, capture_output=True, text=True, **kw).stdout


def setup(workdir: Path) -> Path:
    cleanup()
    sh("ip", "netns", "add", NTX)
    sh("ip", "netns", "add", NRX)
    sh("ip", "link", "add", ITX, "netns", NTX, "type", "veth", "peer", "name", IRX, "netns", NRX)
    for ns, ifn, mac, addr in ((NTX, ITX, MTX, ATX), (NRX, IRX, MRX, ARX)):
        sh("ip", "link", "set", ifn, "address", mac, ns=ns)
        sh("sysctl", "-qw", f"net.ipv6.conf.{ifn}.disable_ipv6=1", ns=ns)
        sh("ip", "addr", "add", f"{addr}/30", "dev", ifn, ns=ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)
        sh("ip", "link", "set", ifn, "up", ns=ns)
    ll = workdir / "xdpdrop.ll"
    ll.write_text('target triple = "bpf"\n@_license = global [4 x i8] c"GPL\\00", section "license", align 1\n'
                  'define i32 @xdp_drop(i8* %ctx) section "xdp" {\n  ret i32 1\n}\n')
    obj = workdir / "xdpdrop.o"
    sh("llc", "-march=bpf", "-filetype=obj", "-o", obj, ll)
    return obj


def cleanup():
    for ns in (NTX, NRX):
        sh("ip", "netns", "del", ns, check=False)


def xdp_drop(obj: Path | None):
    sh("ip", "link", "set", "dev", IRX, "xdpdrv", "off", ns=NRX, check=False)
    if obj is not None:
        sh("ip", "link", "set", "dev", IRX, "xdpdrv", "obj", obj, "sec", "xdp", ns=NRX)
        time.sleep(0.3)


def snap() -> dict:
    tx = int(sh("cat", f"/sys/class/net/{ITX}/statistics/tx_packets", ns=NTX))
    txd = int(sh("cat", f"/sys/class/net/{ITX}/statistics/tx_dropped", ns=NTX))
    xdp = 0
    for line in sh("ethtool", "-S", IRX, ns=NRX, check=False).splitlines():
        if "rx_queue_0_xdp_packets" in line:
            xdp = int(line.split(":")[1])
    cpu = {}
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(("cpu0 ", "cpu1 ")):
            f = [int(x) for x in line.split()[1:]]
            cpu[line.split()[0]] = (sum(f) - f[3] - f[4], sum(f))
    return {"t": time.monotonic(), "tx": tx, "txdrop": txd, "xdp": xdp, "cpu": cpu}


def run_netrig(case: str, rep: int) -> dict:
    io, size, mode = CASES[case]
    xdp_drop(DROP_OBJ if mode == "tx" else None)
    tx = netrig.Port(ITX, netns=NTX, io=io)
    rx = netrig.Port(IRX, netns=NRX, io=io) if mode == "txrx" else None
    stream = netrig.Stream(frame_size=size, rate="max", src_mac=MTX, dst_mac=MRX, src_ip=ATX, dst_ip=ARX,
                           src_port=9, dst_port=9)
    box: dict = {}

    def go():
        try:
            box["res"] = netrig.run_trial(tx, rx, [stream], duration_s=WARM + DUR + 1.0, drain_s=0.5,
                                          tx_cpus=[TXCPU], rx_cpus=[RXCPU], learning=False)
        except Exception as e:  # reported in the row
            box["err"] = e

    th = threading.Thread(target=go)
    th.start()
    time.sleep(WARM + 1.0)  # +1 s: port set-up before traffic starts
    a = snap()
    rx_a = None
    time.sleep(DUR)
    b = snap()
    th.join()
    if "err" in box:
        return {"case": case, "rep": rep, "error": str(box["err"])}
    res = box["res"]
    dt_s = b["t"] - a["t"]
    row = {
        "case": case, "rep": rep, "io": io, "frame": size, "mode": mode,
        "tx_pps": (b["tx"] - a["tx"]) / dt_s, "txdrop_pps": (b["txdrop"] - a["txdrop"]) / dt_s,
        "rx_xdp_pps": (b["xdp"] - a["xdp"]) / dt_s,
        "cpu_busy_pct": {c: 100 * (b["cpu"][c][0] - a["cpu"][c][0]) / max(1, b["cpu"][c][1] - a["cpu"][c][1])
                         for c in a["cpu"]},
        "netrig_tx_pps": res.tx_rate_pps,
        "netrig_frames_sent": res.frames_sent,
        "port_notes": [p.notes for p in res.ports],
        "rss_kib_after": rss_kib(),
    }
    del rx_a
    if mode == "txrx":
        row["netrig_rx_frames"] = res.frames_received
        row["netrig_rx_pps"] = res.frames_received / res.duration_s
        row["netrig_lost"] = res.frames_lost
        row["tester_rx_drops"] = res.tester_rx_drops
        row["latency_p50_ns"] = res.latency.p50_ns
        row["latency_p99_ns"] = res.latency.p99_ns
    row["rx_pps"] = row["netrig_rx_pps"] if mode == "txrx" else row["rx_xdp_pps"]
    return row


def run_peers(cases: list[str], out: Path, reps: int = REPS) -> list[dict]:
    if not cases:
        return []
    if not PEER_SCRIPT.exists():
        print(f"bench: peer script {PEER_SCRIPT} not found; peers skipped", file=sys.stderr)
        return []
    tools = ("trafgen", "dpdk-testpmd", "llc")
    if any(subprocess.run(["which", t], capture_output=True).returncode != 0 for t in tools):
        subprocess.run(["bash", str(PEER_SCRIPT), "install"], check=False, capture_output=True)
    env = {**os.environ, "DUR": str(int(DUR)), "REPS": str(reps), "WARM": str(int(WARM)), "OUT": str(out)}
    (out / "results.tsv").unlink(missing_ok=True)
    subprocess.run(["bash", str(PEER_SCRIPT), "run", *cases], env=env, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=3600)
    rows = []
    tsv = out / "results.tsv"
    if tsv.exists():
        for line in tsv.read_text().splitlines():
            f = line.split("\t")
            if f[0] == "case" or len(f) < 9:
                continue
            rows.append({"case": f[0], "frame": int(f[1]), "rxmode": f[2], "rep": int(f[3]), "tx_pps": float(f[4]),
                         "txdrop_pps": float(f[5]), "rx_pps": float(f[6]),
                         "cpu_busy_pct": {"cpu0": float(f[7]), "cpu1": float(f[8])}})
    return rows


def med(rows, case, key):
    v = [r[key] for r in rows if r.get("case") == case and key in r]
    return statistics.median(v) if v else None


def main() -> int:
    if os.geteuid() != 0:
        print("bench: needs root (namespaces, XDP, raw sockets)", file=sys.stderr)
        return 2
    cases = [c for c in os.environ.get("CASES", ",".join(CASES)).split(",") if c]
    peers_env = os.environ.get("PEERS", ",".join(PEERS))
    peers = [] if peers_env == "none" else [c for c in peers_env.split(",") if c]
    stamp = dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    work = Path("/tmp/netrig-bench") / stamp
    work.mkdir(parents=True, exist_ok=True)
    global DROP_OBJ
    rows: list[dict] = []
    peer_rows: list[dict] = []
    # Repetitions are interleaved (netrig cases, then peer cases, per repetition) so that a slow
    # phase of the VM weighs on netrig and on its peers alike instead of on whichever ran then.
    for rep in range(1, REPS + 1):
        try:
            DROP_OBJ = setup(work)
            for case in cases:
                r = run_netrig(case, rep)
                print(json.dumps(r), flush=True)
                rows.append(r)
                time.sleep(2.5)  # an XSK queue can be re-bound ~2 s after the previous socket closed
        finally:
            cleanup()
        rep_dir = work / f"peers-rep{rep}"
        rep_dir.mkdir(exist_ok=True)
        for r in run_peers(peers, rep_dir, reps=1):
            r["rep"] = rep
            print(json.dumps(r), flush=True)
            peer_rows.append(r)
    doc = {
        "schema_version": 1, "date": stamp, "tool_version": netrig.__version__,
        "machine": {"kernel": platform.release(), "cpus": os.cpu_count(), "cpu_model": _cpu_model()},
        "method": {"dur_s": DUR, "warm_s": WARM, "reps": REPS, "tx_cpu": TXCPU, "rx_cpu": RXCPU,
                   "topology": f"{NTX}/{ITX} -> {NRX}/{IRX} veth", "counting": "interface counter deltas",
                   "order": "interleaved: per repetition, every netrig case then every peer case"},
        "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "netrig_runs": rows, "peer_runs": peer_rows,
    }
    return report(doc, cases, peers, work)


def report(doc: dict, cases: list[str], peers: list[str], work: Path) -> int:
    """Medians, ratios and the markdown table, from the raw runs in ``doc``; writes both files."""
    stamp, rows, peer_rows = doc["date"], doc["netrig_runs"], doc["peer_runs"]
    m = doc["method"]
    # A peer whose window counted nothing did not run (e.g. xsk_ceiling's completion-count bug on some
    # kernels, "completed=4294967360"): leave it out of medians and ratios rather than report 0.
    failed = sorted({r["case"] for r in peer_rows if r["tx_pps"] == 0} | set(doc.get("peer_cases_failed", [])))
    peer_rows = [r for r in peer_rows if r["tx_pps"] > 0]
    summary = []
    for c in cases:
        summary.append({"case": c, "tx_pps": med(rows, c, "tx_pps"), "rx_pps": med(rows, c, "rx_pps"),
                        "txdrop_pps": med(rows, c, "txdrop_pps")})
    for p in peers:
        summary.append({"case": p, "tx_pps": med(peer_rows, p, "tx_pps"), "rx_pps": med(peer_rows, p, "rx_pps"),
                        "txdrop_pps": med(peer_rows, p, "txdrop_pps")})
    ratios = []
    pairs = [(n, p) for p, n in PEERS.items() if p in peers and n in cases]
    pairs += [x for x in ALSO if x[0] in cases and x[1] in peers]
    for n, p in pairs:
        key = "rx_pps" if CASES[n][2] == "txrx" else "tx_pps"
        a, b = med(rows, n, key), med(peer_rows, p, "rx_pps" if "txrx" in p or "pair" in p else "tx_pps")
        pkey = "rx_pps" if "txrx" in p or "pair" in p else "tx_pps"
        # Paired: repetition k of netrig against repetition k of the peer, which ran right after it.
        per_rep = [ra[key] / rb[pkey] for ra in rows if ra.get("case") == n and key in ra
                   for rb in peer_rows if rb["case"] == p and rb["rep"] == ra["rep"] and rb[pkey] > 0]
        cpu = [r["cpu_busy_pct"][f"cpu{m['tx_cpu']}"] for r in peer_rows if r["case"] == p]
        ratios.append({"netrig": n, "peer": p, "metric": key, "netrig_pps": a, "peer_pps": b,
                       "ratio": (a / b) if a and b else None,
                       "paired_ratio": statistics.median(per_rep) if per_rep else None,
                       "peer_sender_cpu_busy_pct": statistics.median(cpu) if cpu else None})
    doc.update({"peer_runs": peer_rows, "peer_cases_failed": failed, "summary": summary, "ratios": ratios})
    outdir = HERE / "results"
    outdir.mkdir(exist_ok=True)
    (outdir / f"{stamp}.json").write_text(json.dumps(doc, indent=2))
    md = [f"# netrig bench {stamp}", "", f"veth pair, sender CPU {m['tx_cpu']}, netrig receiver CPU {m['rx_cpu']}; "
          f"median of {m['reps']} × {m['dur_s']:.0f} s (after {m['warm_s']:.0f} s warm-up), repetitions of netrig "
          f"and peers {'interleaved' if 'order' in m else 'in two blocks'}; peak RSS {doc['peak_rss_kib']} KiB", "",
          "| case | tx pps | rx pps | txdrop pps |", "|---|---|---|---|"]
    for s in summary:
        f = lambda v: f"{v / 1e6:.3f} M" if v is not None else "—"
        md.append(f"| {s['case']} | {f(s['tx_pps'])} | {f(s['rx_pps'])} | {f(s['txdrop_pps'])} |")
    md += ["", "ratio = median netrig / median peer; paired = median over repetitions of netrig / the peer run "
           "right after it; peer CPU = the peer's sender core busy % (below 90 % the peer did not drive its "
           "core, and the ratio says little).", "",
           "| netrig | peer | metric | netrig | peer | ratio | paired | peer CPU |",
           "|---|---|---|---|---|---|---|---|"]
    for r in ratios:
        f = lambda v: f"{v / 1e6:.3f} M" if v else "—"
        g = lambda v: f"{v:.2f}" if v else "—"
        cpu = r["peer_sender_cpu_busy_pct"]
        flag = "" if cpu is None or cpu >= 90 else " ⚠"
        md.append(f"| {r['netrig']} | {r['peer']} | {r['metric']} | {f(r['netrig_pps'])} | {f(r['peer_pps'])} | "
                  f"{g(r['ratio'])} | {g(r['paired_ratio'])} | {'—' if cpu is None else f'{cpu:.0f} %'}{flag} |")
    if failed:
        md += ["", f"Peer repetitions that counted no frames (left out of medians): {', '.join(failed)}; "
                   f"see their logs in {work}."]
    (outdir / f"{stamp}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


def rss_kib() -> int:
    """This process's resident set size in KiB (``VmRSS``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


DROP_OBJ: Path | None = None

def rerender(path: Path) -> int:
    """Recompute the summary, ratios and markdown of a saved run (``bench/run.py --render FILE``)."""
    doc = json.loads(path.read_text())
    cases = list(dict.fromkeys(r["case"] for r in doc["netrig_runs"]))
    peers = [s["case"] for s in doc["summary"] if s["case"] not in cases]
    return report(doc, cases, peers, Path("/tmp/netrig-bench") / doc["date"])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--render":
        sys.exit(rerender(Path(sys.argv[2])))
    sys.exit(main())
