"""`netrig run` across hosts (issue 30's done-when): two agents in their own namespaces (each a
management address on the veth management network and two test ports), a controller, a 4-port
set-up through a bridge DUT; `netrig run` with RFC 2544 throughput uses the controller as its
measurer. Every pair crosses agents: frames really forwarded (the DUT's own counters) and counted
exactly, a throughput found. The namespaces and processes are those of ``test_distributed``'s
``bed``, torn down however the test ends."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from tests.conftest import needs_root, sh
from tests.controller.test_distributed import agents_report, bed, mac
from tests.host_steal import HostTake, Steal, lost_s, valid_or_host
from tests.otg.conftest import ROOT

from netrig.results import read_trial_log

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]

#: (tx, rx) port of each pair: a1 → b1 and b2 → a2, both across the agents.
PAIRS = (("a1", "b1"), ("b2", "a2"))

CONFIG = """
name = "{name}"
[otg]
url = "{url}"
{pairs}
[selftest]
enabled = false
[line_rate]
speed_bps = "{speed}"
[frames]
sizes = [{size}]
[trial]
duration_s = "{duration}"
learning_frames = false
tx_tolerance_pct = 20
[[methods]]
{method}
"""
#: The throughput search of the bridge DUT's test.
THROUGHPUT = "[methods.rfc2544_throughput]\ninitial_rate_pct = 50\nresolution_pct = 25"


def pair_toml(tx: str, rx: str) -> str:
    return (f'[[otg.pairs]]\ntx = "{tx[0]}/{tx}"\nrx = "{rx[0]}/{rx}"\nsrc_mac = "{mac(tx)}"\ndst_mac = "{mac(rx)}"\n'
            'src_ip = "198.18.0.1"\ndst_ip = "198.19.0.1"\n')


def dut_counts(ns: str) -> dict[str, tuple[int, int]]:
    """Frames each DUT port took in and sent out: (rx_packets, tx_packets)."""
    out = {}
    for port in ("a1", "a2", "b1", "b2"):
        stat = [int(sh("cat", f"/sys/class/net/d{port}/statistics/{k}_packets", ns=ns)) for k in ("rx", "tx")]
        out[port] = (stat[0], stat[1])
    return out


def test_netrig_run_rfc2544_throughput_across_two_agents(tmp_path):
    with bed(tmp_path) as b:
        b.agents()
        _, url = b.controller()
        sh("sysctl", "-qw", "net.ipv6.conf.dut0.disable_ipv6=1", ns=b.ns["d"])  # the DUT sends nothing itself
        cfg = tmp_path / "run.toml"
        cfg.write_text(CONFIG.format(name="across two agents", url=url, pairs="".join(pair_toml(tx, rx) for tx, rx in PAIRS),
                                     speed="10M", size=128, duration="0.5s", method=THROUGHPUT))
        out = tmp_path / "out"
        before = dut_counts(b.ns["d"])
        env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
        steal = Steal()
        r = subprocess.run([sys.executable, "-m", "netrig.cli.main", "run", str(cfg), "--out", str(out), "--quiet"],
                           env=env, capture_output=True, text=True, timeout=300)
        after = dut_counts(b.ns["d"])
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "result.json").read_text())
    assert doc["complete"] and doc["testbed"]["name"] == "otg"
    assert [a["state"] for a in doc["testbed"]["agents"]] == ["up", "up"]
    (method,) = doc["summary"]
    (res,) = method["results"]
    trials = [t for t in doc["trials"] if t.get("method") == "rfc2544_throughput"]
    assert res["headline"] is not None and res["headline"]["fps"] > 0, res  # a throughput found
    assert len(trials) >= 2  # the search took steps through the controller
    sent = received = 0
    for t in trials:
        c = t["counts"]
        flows = c["raw"]["otg"]["flows"]
        planned = round(t["load"]["rate_pps"] * 0.5)
        assert sum(f["frames_tx"] for f in flows) == c["frames_sent"] == planned, t  # every frame sent, counted
        # the senders' pacing, from each agent: a port's share of the rate in its 1-ms window
        assert "pacing" not in c["raw"]["otg"]["not_measured"] and c["pacing"]["peak_frames"] > 0, c
        assert c["pacing"]["intended_frames"] == pytest.approx(t["load"]["rate_pps"] / len(PAIRS) / 1000, rel=1e-3)
        # the achieved rate from each flow's sending agent's window, not from its arrivals
        assert "sending window" not in c["raw"]["otg"]["not_measured"], c["raw"]["otg"]["not_measured"]
        assert c["raw"]["otg"]["achieved_from"].startswith("each flow's frames over its first to last frame sent")
        sent, received = sent + c["frames_sent"], received + c["frames_received"]
    # What the tester counted is what the DUT's ports took in from the senders and forwarded.
    into = {tx: after[tx][0] - before[tx][0] for tx, _ in PAIRS}
    outof = {rx: after[rx][1] - before[rx][1] for _, rx in PAIRS}
    assert sum(into.values()) == sent, (into, sent)
    assert sum(outof.values()) == received, (outof, received)
    assert received == sent  # a bridge with room to spare loses nothing at these rates
    # Every trial valid, unless the host took the CPU: the tester then flags its own (a 0.5-s trial
    # arrived 26 % late on a CI machine), which must stay the only invalid kind.
    spoilt = [t["counts"] for t in trials if not t["counts"]["valid"]]
    for c in spoilt:
        assert "the tester" in c["invalid_reason"], c["invalid_reason"]
    late = sum(lost_s(0.5, c["intended_pps"], c["achieved_pps"]) for c in spoilt)
    valid_or_host(not spoilt, "; ".join(c["invalid_reason"] for c in spoilt), late, HostTake.of(steal, spoilt))
    print(f"throughput {res['headline']['fps']:.0f} fps over {len(trials)} trials; {sent} frames across the agents")


#: Frame loss from 100 %: one lossy trial, then one at half the load.
FRAME_LOSS = "[methods.rfc2544_frame_loss]\nstart_pct = 100\nstep_pct = 50\nstop_after_lossfree = 1"


def frames_received(url: str, flow: str) -> int:
    """The controller's count of ``flow``'s frames received (0 before a config names it)."""
    req = urllib.request.Request(url + "/monitor/metrics", data=json.dumps(
        {"choice": "flow", "flow": {"flow_names": [flow]}}).encode(), headers={"Content-Type": "application/json"})
    try:
        return json.loads(urllib.request.urlopen(req, timeout=5).read())["flow_metrics"][0].get("frames_rx", 0)
    except urllib.error.HTTPError:
        return 0


def test_netrig_run_on_a_bare_veth_pair_reports_no_dut_loss(tmp_path):
    """Issue 45: no DUT, so no frame is the DUT's to lose. The receiving agent is stopped for 0.6 s in
    the first trial (as a loaded host stops it): its ring overflows. That trial is the tester's —
    invalid, naming the port and what it dropped — and every valid trial counts every frame (it was:
    a valid trial with the receiver's drops as the DUT's loss)."""
    with bed(tmp_path, bare=True) as b:
        b.agents(io="auto")
        _, url = b.controller()
        cfg = tmp_path / "run.toml"
        # 20 kfps of 1280-B frames at 100 %
        cfg.write_text(CONFIG.format(name="a bare veth pair", url=url, pairs=pair_toml("a1", "b1"), speed="208M",
                                     size=1280, duration="2s", method=FRAME_LOSS))
        out = tmp_path / "out"
        env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
        run = subprocess.Popen([sys.executable, "-m", "netrig.cli.main", "run", str(cfg), "--out", str(out), "--quiet"],
                               env=env, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while frames_received(url, "pair0") < 2000:  # the first trial sends
                assert run.poll() is None and time.monotonic() < deadline, run.stderr.read() if run.stderr else ""
                time.sleep(0.02)
            b.procs[1].send_signal(signal.SIGSTOP)
            time.sleep(0.6)
            b.procs[1].send_signal(signal.SIGCONT)
            assert run.wait(timeout=300) == 0, run.stderr.read() if run.stderr else ""
        finally:
            b.procs[1].send_signal(signal.SIGCONT)
            if run.poll() is None:
                run.kill()
                run.wait()
            if run.stderr:
                run.stderr.close()
    trials = [t["counts"] for t in json.loads((out / "result.json").read_text())["trials"]
              if t.get("method") == "rfc2544_frame_loss"]
    for c in trials:
        assert not c["valid"] or c["frames_received"] == c["frames_sent"], c  # no DUT loss without a DUT
    assert any(c["valid"] for c in trials)
    first = trials[0]
    lost = first["frames_sent"] - first["frames_received"]
    drops = first["raw"]["otg"]["tester_rx_drops"]["b/b1"]
    print(f"first trial: {first['frames_sent']} sent, {lost} lost; agent b's port b1 dropped {drops}; "
          f"{first['invalid_reason']}")
    assert lost > 0 and not first["valid"], first
    assert first["invalid_reason"].startswith("the receiving tester port b/b1 dropped frames itself ("), first
    assert lost == drops["rx_ring_drops"], drops  # every lost frame one its own ring dropped
    assert all("tester receive drops" not in c["raw"]["otg"]["not_measured"] for c in trials)
    assert all(not {"stray", "foreign"} & set(c["raw"]["otg"]["not_measured"]) for c in trials)
    # each pair is sent by one agent and received by the other, whose port has not the sender's counts
    assert all("forged" in c["raw"]["otg"]["not_measured"] for c in trials)
    assert all("reordered" not in c["raw"]["otg"]["not_measured"] and c["duplicated"] == 0 for c in trials)
    for c in trials:  # percentiles from the agents' buckets, unless all within the clocks' bound
        p99 = (c.get("latency") or {}).get("p99_ns")
        assert ("latency percentiles" in c["raw"]["otg"]["not_measured"]) == (p99 is None), c


#: Frame loss from 100 %, then 50 %: two trials on a bare pair (each loss-free).
TWO_TRIALS = "[methods.rfc2544_frame_loss]\nstart_pct = 100\nstep_pct = 50\nstop_after_lossfree = 2"


def trials_on_disk(out) -> list[dict]:
    with contextlib.suppress(Exception):  # not yet written, or a line being written
        return read_trial_log(out)[1]
    return []


def counted_and_judged(c: dict) -> None:
    """A trial of the fault test: every frame counted, and valid or flagged as the sending agent's
    own shortfall, never anything else. Whether an agent keeps its rate here is not what the test
    asks (the throughput test above does): with two agents, a controller, the DUT and the run on 2
    vCPUs, a clean clone's 0.5-s trial at 8.4 kfps was sent at 79.5 % of it (129 ms behind, gaps
    p99 1.18 ms), flagged by the product, with 50 ms of steal."""
    assert c["frames_received"] == c["frames_sent"] > 0, c
    reasons = (c["invalid_reason"] or "").split("; ") if not c["valid"] else []
    assert all(r.endswith("the tester fell short") for r in reasons), c["invalid_reason"]


#: How agent b is lost: what starts it, what ends it, and when it ends (seconds after the start).
FAULTS = {
    "SIGKILL": (lambda b: b.procs[1].kill(), lambda b: None, 0.0),
    "SIGSTOP for 3 s": (lambda b: b.procs[1].send_signal(signal.SIGSTOP),
                        lambda b: b.procs[1].send_signal(signal.SIGCONT), 3.0),
    "management link down for 2 s": (lambda b: sh("ip", "link", "set", f"{b.tag}mb", "down"),
                                     lambda b: sh("ip", "link", "set", f"{b.tag}mb", "up"), 2.0),
}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.timing
def test_an_agent_lost_mid_run_over_https_stops_it_resumably_and_resume_finishes_it(tmp_path, fault):
    """Issue 45, with real agents over HTTPS (certificates made here, --client-ca, --agent-ca, tokens):
    agent b dies (SIGKILL), hangs (SIGSTOP: a stopped host, its heartbeat unanswered) or loses its
    management link once the first trial is on disk — in the second trial's set-up or traffic. The
    run stops with one line naming the agent and the remedy, keeps the first trial and counts none of
    the second. With the agent back (restarted, continued, its link up) the same controller takes it
    back, and `netrig run --resume` finishes the run: every frame of both trials counted, each valid or
    flagged as the sending agent's shortfall (:func:`counted_and_judged`)."""
    begin, end, lasts_s = FAULTS[fault]
    with bed(tmp_path, bare=True, tls=True) as b:
        b.agents(io="auto")
        pc, url = b.controller()
        cfg = tmp_path / "run.toml"
        cfg.write_text(CONFIG.format(name=f"agent b lost: {fault}", url=url, pairs=pair_toml("a1", "b1"), speed="10M",
                                     size=128, duration="0.5s", method=TWO_TRIALS))
        out = tmp_path / "out"
        env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
        argv = [sys.executable, "-m", "netrig.cli.main", "run"]
        run = subprocess.Popen([*argv, str(cfg), "--out", str(out), "--quiet"], env=env, stderr=subprocess.PIPE,
                               text=True)
        try:
            deadline = time.monotonic() + 60
            while not trials_on_disk(out):
                assert run.poll() is None, run.communicate()[1]
                assert time.monotonic() < deadline, "no trial on disk within 60 s"
                time.sleep(0.05)
            begin(b)
            lost = time.monotonic()
            _, err = run.communicate(timeout=60)
            print(f"agent b {fault}: netrig run exited {run.returncode} after {time.monotonic() - lost:.2f} s: "
                  f"{err.strip()}")
            time.sleep(max(0.0, lost + lasts_s - time.monotonic()))
        finally:
            end(b)
            if run.poll() is None:
                run.kill()
                run.communicate()
        assert run.returncode != 0 and "Traceback" not in err
        line = err.splitlines()[0]  # the error; then where the finished trials are, and how to resume
        assert line.startswith("netrig: error: ") and "agent b" in line and "--resume" in line, err
        (first,) = trials_on_disk(out)
        counted_and_judged(first["counts"])
        if fault == "SIGKILL":
            b.procs[1].wait()
            b.agent("b", io="auto")
        back = time.monotonic()
        while agents_report(url)["agents"][1]["state"] != "up":  # the controller takes it back
            assert time.monotonic() - back < 10, agents_report(url)
            time.sleep(0.1)
        print(f"agent b taken back {time.monotonic() - back:.2f} s after it was back: {agents_report(url)['events']}")
        assert pc.poll() is None  # the same controller all along
        resumed = subprocess.run([*argv, "--resume", str(out), "--quiet"], env=env, capture_output=True, text=True,
                                 timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    doc = json.loads((out / "result.json").read_text())
    assert doc["complete"] and doc["resumed"], doc["interrupted_reason"]
    trials = [t["counts"] for t in doc["trials"] if t.get("method") == "rfc2544_frame_loss"]
    assert len(trials) == 2 and trials[0]["frames_sent"] == first["counts"]["frames_sent"], trials
    for c in trials:
        counted_and_judged(c)
