"""Cross-agent latency under a real linuxptp (issue 45): two agents in their namespaces, each with a
``ptp4l`` on its management veth (software timestamps, layer 2, through the management bridge),
agent a's the grandmaster. Both agents follow it, so the controller corrects their flow by PTP,
not by its own exchanges: the flow says so (``latency_clock``), and its bound is the largest
offset ptp4l measured (< 50 µs here: ~1–12 µs with software stamps on veth, against ±0.3–0.5 ms
for the exchanges), so a latency of tens of µs is a value where the exchanges left it out.

Both namespaces share this machine's one clock, so no ptp4l may steer it: both run
``free_running`` (they measure their offset and adjust nothing). On separate hosts ptp4l steers
each host's clock; the offsets it reports are then its residuals, and the bound means the same."""
from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tests.conftest import needs_root
from tests.controller.test_distributed import Bed, agents_report, bed, reported_statistics, run_flow
from tests.otg.conftest import api, flow_metrics

from netrig.otg.ptp import parse_pmc

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(subprocess.run(["sh", "-c", "command -v ptp4l pmc"], capture_output=True).returncode,
                                 reason="linuxptp (ptp4l, pmc) is not installed: scripts/setup.sh apt installs it")]

#: ptp4l's settings in both namespaces: fast messages (8 syncs a second, announces every 0.25 s) so
#: the slave follows within a second or two; nothing adjusted (one clock, shared with the host).
PTP4L = """[global]
free_running 1
logSyncInterval -3
logAnnounceInterval -2
logMinDelayReqInterval -3
network_transport L2
time_stamping software
use_syslog 0
uds_address {socket}
{role}
"""


def pmc(socket: Path) -> str:
    return subprocess.run(["pmc", "-u", "-b", "0", "-s", str(socket), "GET TIME_STATUS_NP", "GET DEFAULT_DATA_SET"],
                          capture_output=True, text=True, timeout=5, check=False).stdout


def settled(socket: Path) -> bool:
    """The slave has measured its path delay: its offsets no longer hold the one-way delay (the
    first syncs, before a delay response, do)."""
    out = subprocess.run(["pmc", "-u", "-b", "0", "-s", str(socket), "GET CURRENT_DATA_SET"], capture_output=True,
                         text=True, timeout=5, check=False).stdout
    delay = next((line.split()[1] for line in out.splitlines() if "meanPathDelay" in line), "0")
    return float(delay) != 0.0


@contextmanager
def ptp4l(b: Bed) -> Iterator[dict[str, Path]]:
    """ptp4l on each agent's management veth, a's the grandmaster (priority1 1), b's slave only;
    yields each one's management socket once b follows a with its path delay measured; stops both
    however the test ends."""
    sockets = {n: b.tmp / f"ptp-{n}.sock" for n in "ab"}
    procs = []
    try:
        for n, role in (("a", "priority1 1"), ("b", "slaveOnly 1")):
            cfg = b.tmp / f"ptp4l-{n}.cfg"
            cfg.write_text(PTP4L.format(socket=sockets[n], role=role))
            with (b.tmp / f"ptp4l-{n}.log").open("w") as log:
                procs.append(subprocess.Popen(["ip", "netns", "exec", b.ns[n], "ptp4l", "-f", str(cfg), "-i", "mgmt",
                                               "-m"], stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 20
        while True:
            gm, follower = parse_pmc(pmc(sockets["a"])), parse_pmc(pmc(sockets["b"]))
            if gm is not None and follower is not None and follower.grandmaster == gm.grandmaster \
                    and settled(sockets["b"]):
                break
            assert time.monotonic() < deadline, (b.tmp / "ptp4l-b.log").read_text()
            time.sleep(0.2)
        yield sockets
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)


@pytest.mark.timing  # ptp4l's servo on software timestamps: b's offsets reached 60 µs while the host took 7 % of the CPU
def test_cross_agent_latency_under_ptp4l_is_corrected_by_ptp_within_its_bound(tmp_path):
    with bed(tmp_path, bare=True) as b, ptp4l(b) as sockets:
        b.agents(io="auto", extra={n: ("--ptp-socket", str(sockets[n])) for n in "ab"})
        _, url = b.controller()
        gm = parse_pmc(pmc(sockets["a"]))
        assert gm is not None and gm.offset_ns == 0.0  # a is the grandmaster: 0 from itself
        deadline = time.monotonic() + 10
        while not all("ptp" in ag for ag in agents_report(url)["agents"]):
            assert time.monotonic() < deadline, agents_report(url)
            time.sleep(0.25)
        time.sleep(1)  # more of b's offsets in the controller's window (pmc is asked once a second)
        a = api(url)
        m = run_flow(a, ("a/a1", "b/b1"))
        report = agents_report(url)
        note, agents = report["flows"][0], {ag["name"]: ag for ag in report["agents"]}
        exchange = sum(agents[n]["clock_uncertainty_ns"] for n in "ab")
        print(f"PTP: average {note['latency_average_ns']:.0f} ns ± {note['latency_uncertainty_ns']:.0f} "
              f"(b's offsets from the grandmaster up to {agents['b']['ptp']['bound_ns']:.0f} ns); the "
              f"exchanges' bound would be ± {exchange:.0f} ns")
        assert (m.port_tx, m.port_rx, m.frames_rx) == ("a1", "b1", 10_000)
        assert [agents[n]["ptp"]["grandmaster"] for n in "ab"] == [gm.grandmaster] * 2
        assert agents["a"]["ptp"]["offset_ns"] == 0.0
        assert note["latency_clock"] == "ptp" and note["latency_offset_ns"] == 0.0
        # the bound PTP achieved, below 50 µs: b's largest offset from a's clock over its window (a's
        # is 0) when the flow stopped, fixed since (b's window moves on: compared with b's bound read
        # later, the metric and the note once disagreed), so read again, the flow is the same
        assert 0 < note["latency_uncertainty_ns"] < min(50_000, exchange), (note, agents)
        assert reported_statistics(flow_metrics(a, ["f"])["f"]) == reported_statistics(m)
        assert agents_report(url)["flows"][0] == note
        # one clock here: the true offset is 0, so the corrected statistics are the agents' own
        # stamps of these frames (the same-host values), and the bound holds the truth (0)
        assert (m.latency.average_ns is None) == ("average_ns" not in note["latency_reported"]), (m, note)
        if m.latency.average_ns is not None:
            assert m.latency.average_ns == pytest.approx(note["latency_average_ns"])
        assert all(v > note["latency_uncertainty_ns"] for v in reported_statistics(m).values()), (m, note)
