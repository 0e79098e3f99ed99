#!/usr/bin/env python3
"""`netrig serve` against `netrig trial` on the same ports, in one run (docs/otg.md).

Method:
- netns ``nrotx`` holds ``nrot0`` (02:00:00:00:00:01), netns ``nrorx`` its veth peer ``nror0``
  (02:00:00:00:00:02); IPv6 off, no addresses.
- Top rate, one flow of 64-byte Ethernet/IPv4/UDP frames, the same bytes in both cases (the
  trial's stream computes the UDP checksum, as OTG's "generated" one is): ``trial`` is
  ``netrig.run_trial`` at ``rate="max"`` from ``nrot0`` to ``nror0``; ``otg`` is ``netrig serve`` on both ports with one
  continuous flow at 10^9 frames/s (above what the tester sends), started over HTTP. Both count
  every frame they receive; senders on CPU 1, receivers on CPU 0 (each's default). ``otg_lldp`` is
  ``otg`` with an LLDP object on each port advertising every 5 s, the shortest OTG allows (lldpd in
  each namespace): LLDP's cost to the ports is the ratio of the two, beside lldpd's CPU time over
  the window.
- Window: WARM s after traffic starts, then DUR s of ``nrot0`` tx_packets deltas. REPS repetitions,
  interleaved (trial, otg, otg_lldp, trial, …) so slow phases of the VM fall on both; the ratio is the
  median otg / median trial, and the median of the per-repetition ratios.
- Scale, SCALE_REPS times in the last server (each config replacing the one before, as a client's
  do): a config of 4096 flows, each with every field pattern (value, values, increment,
  decrement, random), set and started over HTTP (time of both requests), then metrics polls while
  it runs (one flow, every flow, the ports), and the counts once every flow stopped (exact?). The
  time reported is the median of the runs, with each run's.

Results: ``bench/results/<date>-otg.json`` and ``.md``. Environment: DUR (5), WARM (1), REPS (5),
SCALE_REPS (3).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT))

from tests.otg.conftest import serve  # noqa: E402

import netrig  # noqa: E402
from netrig.monitor.cpu import CpuAccount  # noqa: E402

NTX, NRX, ITX, IRX = "nrotx", "nrorx", "nrot0", "nror0"
MTX, MRX = "02:00:00:00:00:01", "02:00:00:00:00:02"
DUR = float(os.environ.get("DUR", 5))
WARM = float(os.environ.get("WARM", 1))
REPS = int(os.environ.get("REPS", 5))
SCALE_REPS = int(os.environ.get("SCALE_REPS", 3))
SCALE_FLOWS = 4096
PORTS = [f"{ITX}@{NTX}", f"{IRX}@{NRX}"]


def sh(*cmd, ns=None, check=True):
    full = (["ip", "netns", "exec", ns] if ns else []) + [str(c) for c in cmd]
    return subprocess.run(full, check=check, capture_output=True, text=True).stdout


def setup() -> None:
    cleanup()
    sh("ip", "netns", "add", NTX)
    sh("ip", "netns", "add", NRX)
    sh("ip", "link", "add", ITX, "netns", NTX, "type", "veth", "peer", "name", IRX, "netns", NRX)
    for ns, ifn, mac in ((NTX, ITX, MTX), (NRX, IRX, MRX)):
        sh("ip", "link", "set", ifn, "address", mac, ns=ns)
        sh("sysctl", "-qw", f"net.ipv6.conf.{ifn}.disable_ipv6=1", ns=ns)
        sh("ip", "link", "set", ifn, "up", ns=ns)


def cleanup() -> None:
    for ns in (NTX, NRX):
        sh("ip", "netns", "del", ns, check=False)


def tx_packets() -> tuple[float, int]:
    return time.monotonic(), int(sh("cat", f"/sys/class/net/{ITX}/statistics/tx_packets", ns=NTX))


def window() -> float:
    """Frames/s leaving the sender in a DUR window, after WARM."""
    time.sleep(WARM)
    t0, a = tx_packets()
    time.sleep(DUR)
    t1, b = tx_packets()
    return (b - a) / (t1 - t0)


def run_trial() -> dict:
    tx, rx = netrig.Port(ITX, netns=NTX), netrig.Port(IRX, netns=NRX)
    # The OTG flow's frame byte for byte: OTG's UDP checksum is "generated" (a netrig stream's is 0
    # unless asked), so the trial computes it per frame as the server does.
    stream = netrig.Stream(frame_size=64, rate="max", src_mac=MTX, dst_mac=MRX, src_ip="198.18.0.1",
                           dst_ip="198.19.0.1", src_port=9, dst_port=9, udp_checksum=True)
    box: dict = {}

    def go():
        box["res"] = netrig.run_trial(tx, rx, [stream], duration_s=WARM + DUR + 1.5, drain_s=0.5, learning=False)

    th = threading.Thread(target=go)
    th.start()
    time.sleep(0.5)  # the ports open before traffic starts
    pps = window()
    th.join()
    res = box["res"]
    # The receiving port's own ring drops, in the form the OTG rows give (kernel drops not read).
    return {"case": "trial", "tx_pps": pps, "frames_sent": res.frames_sent, "frames_received": res.frames_received,
            "rx_drops": {"p2": [res.tester_rx_drops, None, None]}, "port_notes": [p.notes for p in res.ports]}


def post(url: str, path: str, body: dict) -> tuple[float, dict]:
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            out = json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise SystemExit(f"bench: {path}: {e.code} {e.read().decode(errors='replace')}") from None
    return time.perf_counter() - t, out


def traffic(url: str, state: str) -> float:
    body = {"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": state}}}
    return post(url, "/control/state", body)[0]


def ports_config() -> dict:
    return {"ports": [{"name": "p1", "location": PORTS[0]}, {"name": "p2", "location": PORTS[1]}]}


def run_otg(url: str, lldp: bool = False) -> dict:
    """The top-rate flow; ``lldp``: with an LLDP object on each port advertising every 5 s (the OTG
    model's shortest interval), its lldpd's CPU time over the window and the PDUs it counted."""
    flow = {"name": "top", "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}},
            "packet": [{"choice": "ethernet", "ethernet": {"src": {"value": MTX}, "dst": {"value": MRX}}},
                       {"choice": "ipv4", "ipv4": {"src": {"value": "198.18.0.1"}, "dst": {"value": "198.19.0.1"}}},
                       {"choice": "udp", "udp": {"src_port": {"value": 9}, "dst_port": {"value": 9}}}],
            "size": {"fixed": 64}, "rate": {"pps": 1_000_000_000}, "duration": {"choice": "continuous"}}
    agents = [{"name": f"lldp{k}", "connection": {"choice": "port_name", "port_name": p}, "hold_time": 20,
               "advertisement_interval": 5} for k, p in enumerate(("p1", "p2"))] if lldp else []
    post(url, "/config", {**ports_config(), "flows": [flow], "lldp": agents})
    traffic(url, "start")
    account = CpuAccount(["lldpd"]).start()
    pps = window()
    cpu = sum(p.user_s + p.sys_s for p in account.stop().procs if p.name == "lldpd")
    traffic(url, "stop")
    m = post(url, "/monitor/metrics", {"choice": "flow"})[1]["flow_metrics"][0]
    with urllib.request.urlopen(url + "/netrig/agents", timeout=30) as r:
        drops = {p["name"]: (p["rx_ring_drops"], p["rx_kernel_drops"], p.get("tx_kernel_drops"))
                 for p in json.loads(r.read())["ports"]}
    row = {"case": "otg_lldp" if lldp else "otg", "tx_pps": pps, "frames_sent": m["frames_tx"],
           "frames_received": m["frames_rx"], "rx_drops": drops}
    if lldp:
        pdus = post(url, "/monitor/metrics", {"choice": "lldp", "lldp": {"lldp_names": []}})[1]["lldp_metrics"]
        row |= {"lldpd_cpu_pct": 100 * cpu / (WARM + DUR), "lldp_pdus": {x["name"]: (x["frames_tx"], x["frames_rx"])
                                                                         for x in pdus}}
    return row


def scale_flow(i: int) -> dict:
    """Flow ``i`` of the scale case: every field pattern, 10 frames at 10 frames/s."""
    a, b = divmod(i, 250)
    return {"name": f"f{i}", "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}},
            "packet": [
                {"choice": "ethernet", "ethernet": {"src": {"value": f"02:00:00:00:{i >> 8:02x}:{i & 255:02x}"},
                                                    "dst": {"values": [MRX, "02:00:00:00:00:03"]}}},
                {"choice": "vlan", "vlan": {"id": {"increment": {"start": 1 + i % 4000, "step": 1, "count": 5}}}},
                {"choice": "ipv4", "ipv4": {
                    "src": {"increment": {"start": f"198.18.{a}.{b}", "step": "0.0.0.1", "count": 10}},
                    "dst": {"decrement": {"start": f"198.19.{a}.{b}", "step": "0.0.0.1", "count": 10}},
                    "time_to_live": {"value": 64 + i % 8}}},
                {"choice": "udp", "udp": {
                    "src_port": {"random": {"min": 1024, "max": 65535, "seed": i + 1, "count": 100}},
                    "dst_port": {"values": [1000 + i, 2000 + i, 3000 + i]}}}],
            "size": {"fixed": 128}, "rate": {"pps": 10}, "duration": {"fixed_packets": {"packets": 10}},
            "metrics": {"enable": True, "loss": True, "latency": {"enable": True}}}


def run_scale(url: str) -> dict:
    cfg = {**ports_config(), "flows": [scale_flow(i) for i in range(SCALE_FLOWS)]}
    t_config, _ = post(url, "/config", cfg)
    t_start = traffic(url, "start")
    polls: dict[str, list[float]] = {"one_flow": [], "every_flow": [], "ports": []}
    for _ in range(10):
        polls["one_flow"].append(post(url, "/monitor/metrics", {"choice": "flow", "flow": {"flow_names": ["f7"]}})[0])
        polls["every_flow"].append(post(url, "/monitor/metrics", {"choice": "flow"})[0])
        polls["ports"].append(post(url, "/monitor/metrics", {"choice": "port"})[0])
        time.sleep(0.05)
    for _ in range(300):
        fm = post(url, "/monitor/metrics", {"choice": "flow"})[1]["flow_metrics"]
        if all(m["transmit"] == "stopped" for m in fm):
            break
        time.sleep(0.1)
    exact = all(m["frames_tx"] == m["frames_rx"] == 10 for m in fm)
    return {"flows": SCALE_FLOWS, "config_bytes": len(json.dumps(cfg)), "set_config_s": t_config, "start_s": t_start,
            "set_config_and_start_s": t_config + t_start,
            "poll_ms": {k: {"median": 1e3 * statistics.median(v), "max": 1e3 * max(v)} for k, v in polls.items()},
            "frames_sent": sum(m["frames_tx"] for m in fm), "frames_received": sum(m["frames_rx"] for m in fm),
            "every_count_exact": exact}


def scale_summary(runs: list[dict]) -> dict:
    """The scale runs as one: the first run's details, the median time, every run's time, and
    exact only if every run was."""
    times = [r["set_config_and_start_s"] for r in runs]
    return {**runs[0], "set_config_s": statistics.median(r["set_config_s"] for r in runs),
            "start_s": statistics.median(r["start_s"] for r in runs),
            "set_config_and_start_s": statistics.median(times),
            "each_set_config_and_start_s": times, "every_count_exact": all(r["every_count_exact"] for r in runs)}


def main() -> int:
    if os.geteuid() != 0:
        print("bench: needs root (namespaces, raw sockets)", file=sys.stderr)
        return 2
    stamp = dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    rows: list[dict] = []
    scale: dict = {}
    try:
        setup()
        for rep in range(1, REPS + 1):
            rows.append({**run_trial(), "rep": rep})
            print(json.dumps(rows[-1]), flush=True)
            time.sleep(2.5)  # an XSK queue is re-bound ~2 s after the previous socket closed
            with serve(PORTS) as url:
                for lldp in (False, True):
                    rows.append({**run_otg(url, lldp), "rep": rep})
                    print(json.dumps(rows[-1]), flush=True)
                if rep == REPS and SCALE_REPS:
                    scale = scale_summary([run_scale(url) for _ in range(SCALE_REPS)])
                    print(json.dumps(scale), flush=True)
            time.sleep(2.5)
    finally:
        cleanup()
    return report(stamp, rows, scale)


def report(stamp: str, rows: list[dict], scale: dict) -> int:
    med = {c: statistics.median(r["tx_pps"] for r in rows if r["case"] == c) for c in ("trial", "otg", "otg_lldp")}
    by = {(r["case"], r["rep"]): r["tx_pps"] for r in rows}
    lldp_cost = {"ratio": med["otg_lldp"] / med["otg"],
                 "paired_ratio": statistics.median(by["otg_lldp", k] / by["otg", k] for k in range(1, REPS + 1)),
                 "lldpd_cpu_pct": statistics.median(r["lldpd_cpu_pct"] for r in rows if r["case"] == "otg_lldp")}
    paired = [o["tx_pps"] / t["tx_pps"] for t in rows if t["case"] == "trial"
              for o in rows if o["case"] == "otg" and o["rep"] == t["rep"]]
    doc = {"schema_version": 1, "date": stamp, "tool_version": netrig.__version__,
           "machine": {"kernel": platform.release(), "cpus": os.cpu_count(), "load_avg": os.getloadavg()},
           "method": {"dur_s": DUR, "warm_s": WARM, "reps": REPS, "frame": 64,
                      "topology": f"{PORTS[0]} -> {PORTS[1]} veth", "counting": "sender tx_packets deltas",
                      "order": "interleaved trial, otg, otg_lldp per repetition"},
           "runs": rows, "median_tx_pps": med, "ratio": med["otg"] / med["trial"],
           "paired_ratio": statistics.median(paired), "lldp": lldp_cost, "scale": scale}
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / f"{stamp}-otg.json").write_text(json.dumps(doc, indent=2))
    p = scale.get("poll_ms", {})
    md = [f"# netrig serve vs netrig trial {stamp}", "",
          f"One flow, 64 B, top rate, veth; median of {REPS} × {DUR:.0f} s windows (after {WARM:.0f} s), interleaved; "
          f"load average {doc['machine']['load_avg'][0]:.2f} on {os.cpu_count()} CPUs.", "",
          "| case | tx frames/s |", "|---|---|",
          f"| netrig trial (rate max) | {med['trial'] / 1e6:.3f} M |",
          f"| netrig serve (one OTG flow) | {med['otg'] / 1e6:.3f} M |",
          f"| netrig serve, LLDP on both ports every 5 s | {med['otg_lldp'] / 1e6:.3f} M |",
          "", f"ratio serve / trial: **{doc['ratio']:.3f}** (paired per repetition: {doc['paired_ratio']:.3f})", "",
          "Windows whose flow lost frames (the receiving port's own ring / kernel drops, then the sending "
          "port's kernel drops on transmit): "
          + ("; ".join(f"{r['case']} #{r['rep']}: {r['frames_sent'] - r['frames_received']} "
                       f"({r.get('rx_drops', {}).get('p2', '?')}, {r.get('rx_drops', {}).get('p1', [None] * 3)[2]})"
                       for r in rows
                       if r["frames_sent"] != r["frames_received"]) or "none") + ".", "",
          f"LLDP's cost: serve with / without it {lldp_cost['ratio']:.3f} (paired per repetition: "
          f"{lldp_cost['paired_ratio']:.3f}); both lldpd {lldp_cost['lldpd_cpu_pct']:.2f} % of a CPU (median; "
          f"one clock tick is {100 / os.sysconf('SC_CLK_TCK') / (WARM + DUR):.2f} %).", ""]
    if scale:
        kinds = (("one_flow", "one flow"), ("ports", "the ports"), ("every_flow", "every flow"))
        poll = ", ".join(f"{what} {p[k]['median']:.1f} / {p[k]['max']:.1f} ms" for k, what in kinds)
        md += [f"Scale: {scale['flows']} flows with every field pattern ({scale['config_bytes'] / 1e6:.1f} MB of "
               f"JSON): set_config {scale['set_config_s']:.3f} s + start {scale['start_s']:.3f} s = "
               f"**{scale['set_config_and_start_s']:.3f} s** (median of "
               f"{', '.join(f'{t:.3f}' for t in scale['each_set_config_and_start_s'])} s); "
               f"metrics polls while it runs (median / max): {poll}; "
               f"{scale['frames_sent']} frames sent, {scale['frames_received']} received, every flow exact: "
               f"{scale['every_count_exact']}."]
    (out / f"{stamp}-otg.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
