"""The soak on real namespaces: the engine's live intervals are the result's; a DUT whose daemon
leaks (``leaky_dut.py``: bytes kept per packet forwarded) is flagged with the slope it was built
with, the same DUT with a clean daemon is not; a soak killed with SIGKILL mid-way keeps its
intervals on disk and ``netrig soak --resume DIR`` finishes it as a second segment."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import needs_root, veth_pair

from netrig import Port, Stream, run_trial
from netrig.methods.soak import slope_ci
from netrig.results import load_result, read_trial_log

pytestmark = [needs_root, pytest.mark.root]
HERE = Path(__file__).resolve().parent
ENV = dict(os.environ, PYTHONPATH=str(HERE.parents[1] / "python"))
NETRIG = [sys.executable, "-m", "netrig.cli.main"]
#: Bytes the leaky DUT daemon keeps per packet it forwards.
LEAK_B = 256
#: The soaks' interval, s: the RSS is sampled once in each.
INTERVAL_S = 0.5
#: The clean soak's length, s.
CLEAN_S = 5


def netrig_cmd(*args: str) -> list[str]:
    # Not under the timing lock: these soaks judge memory and count frames, not rates (a stretched
    # run only lengthens the soak, and the leak built is taken from the frames the DUT received).
    return [*NETRIG, *args]


def netrig(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(netrig_cmd(*args), capture_output=True, text=True, timeout=timeout, env=ENV)


def test_live_intervals_are_the_results_intervals():
    with veth_pair("v") as (ns_a, if_a, ns_b, if_b):
        tx, rx = Port(if_a, netns=ns_a), Port(if_b, netns=ns_b)
        s = Stream(frame_size=64, rate_pps=5_000, src_mac=tx.info().mac, dst_mac=rx.info().mac)
        live: list = []
        seen_while_running = []

        def on(ivs):
            live.extend(ivs)
            seen_while_running.append(len(live))

        r = run_trial(tx, rx, [s], duration_s=2.0, interval_s=0.25, drain_s=0.3, on_intervals=on,
                             progress_interval_s=0.05, max_stretch_pct=50)
        assert len(r.intervals) == 8
        assert seen_while_running and seen_while_running[0] < 8, "intervals came while the trial ran"
        assert 5 <= len(live) <= 7, "every interval but the last (and those not yet settled at the end)"
        for a, b in zip(live, r.intervals):
            assert (a.start_s, a.duration_s, a.frames_sent, a.frames_received) == \
                (b.start_s, b.duration_s, b.frames_sent, b.frames_received)
        assert sum(i.frames_sent for i in r.intervals) == r.frames_sent


@contextlib.contextmanager
def router():
    r = subprocess.run([*NETRIG, "testbed", "up", "router"], capture_output=True, text=True, env=ENV, timeout=60)
    assert r.returncode == 0, r.stderr
    tb_id = r.stdout.split()[1]
    try:
        yield tb_id
    finally:
        subprocess.run([*NETRIG, "testbed", "down", tb_id], capture_output=True, env=ENV, timeout=60)


@contextlib.contextmanager
def dut_daemon(tb_id: str, bytes_per_packet: int, status: Path):
    p = subprocess.Popen(["ip", "netns", "exec", f"nr{tb_id}-dut", sys.executable, str(HERE / "leaky_dut.py"),
                          "--bytes-per-packet", str(bytes_per_packet), "--name", "nrsoak-dut", "--status",
                          str(status)])
    try:
        deadline = time.monotonic() + 10
        while not status.exists():
            assert time.monotonic() < deadline and p.poll() is None, "the DUT daemon did not start"
            time.sleep(0.05)
        yield p
    finally:
        p.terminate()
        p.wait(10)


def soak_config(tb_id: str, duration: str) -> dict:
    return {"testbed": {"id": tb_id}, "selftest": {"enabled": False}, "frames": {"sizes": [64]},
            "trial": {"cpu_procs": ["nrsoak-dut"], "drain_s": "0.5s"},
            "methods": [{"soak": {"rate": "5kpps", "duration_s": duration, "interval_s": f"{INTERVAL_S:g}s"}}]}


def soak_of(out: Path) -> dict:
    doc = load_result(out)
    return doc["summary"][0]["results"][0]["repetitions"][0]


def rss_verdict(e: dict) -> dict:
    (t,) = [t for t in e["leaks"] if t["series"].startswith("RSS nrsoak-dut")]
    return t


def test_the_leaky_dut_is_flagged_the_clean_one_is_not_and_a_killed_soak_resumes(tmp_path):
    with router() as tb_id:
        # The leaky daemon keeps 256 bytes per packet: at 5 kfps, 256 × 5000 × 3600 B/h ≈ 4.4 GiB/h,
        # 7.7 MB in the 6-s soak, sampled 12 times (32 B/packet needed 25 s for the same margin over
        # the RSS's steps; 128 B, 12 s).
        (tmp_path / "leak.json").write_text(json.dumps(soak_config(tb_id, "6s")))
        with dut_daemon(tb_id, LEAK_B, tmp_path / "leak.status"):
            r = netrig("run", str(tmp_path / "leak.json"), "--out", str(tmp_path / "leak"))
        assert r.returncode == 0, r.stderr
        assert "note: soak 0:00:" in r.stderr and "LEAK RSS nrsoak-dut" in r.stderr, "live verdicts"
        e = soak_of(tmp_path / "leak")
        assert e["leak"] is True and e["segments"] == 1
        t = rss_verdict(e)
        assert t["leak"] and t["low_per_h"] > 0
        # The leak built: LEAK_B per frame the DUT received, over the same times as the RSS samples.
        ivs = e["intervals"]
        ts = [iv["t_s"] + iv["duration_s"] for iv in ivs]
        cum, c = [], 0
        for iv in ivs:
            c += iv["frames_received"]
            cum.append(LEAK_B * c)
        built = slope_ci(ts, cum).slope * 3600
        assert 0.75 * built <= t["slope_per_h"] <= 1.25 * built, (t, built)
        assert t["low_per_h"] <= built * 1.1 and t["high_per_h"] >= built * 0.9, (t, built)

        # The clean daemon, and a soak killed mid-way and resumed.
        (tmp_path / "clean.json").write_text(json.dumps(soak_config(tb_id, f"{CLEAN_S}s")))
        out = tmp_path / "clean"
        with dut_daemon(tb_id, 0, tmp_path / "clean.status"):
            p = subprocess.Popen(netrig_cmd("run", str(tmp_path / "clean.json"), "--out", str(out), "--quiet"),
                                 env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)
            before: list[dict] = []
            deadline = time.monotonic() + 60
            while len(before) < 4:
                assert time.monotonic() < deadline and p.poll() is None, "no intervals written"
                time.sleep(0.2)
                with contextlib.suppress(Exception):
                    before = []
                    read_trial_log(out, before)
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate(timeout=10)
            kept: list[dict] = []
            _, trials = read_trial_log(out, kept)
            assert len(kept) >= 4 and not any(t["kind"] == "soak" for t in trials), "killed mid-soak"
            r = netrig("soak", "--resume", str(out), "--quiet")
        assert r.returncode == 0, r.stderr
        e = soak_of(out)
        assert e["segments"] == 2 and e["complete"] is True
        ivs = e["intervals"]
        for a, b in zip(kept, ivs):  # the intervals on disk are the soak's first ones, unchanged
            assert (a["t_s"], a["frames_sent"], a["frames_received"], a["segment"]) == \
                (b["t_s"], b["frames_sent"], b["frames_received"], b["segment"])
        assert all(iv["segment"] == 1 for iv in ivs[len(kept):])
        assert 0.9 * CLEAN_S <= e["covered_s"] <= CLEAN_S * 1.5, e["covered_s"]  # smooth pacing may stretch a segment
        for a, b in zip(ivs, ivs[1:]):
            assert abs(a["t_s"] + a["duration_s"] - b["t_s"]) < 0.05, "soak time runs on across segments"
        assert e["leak"] is False, [x for x in e["leaks"] if x["leak"]]
        assert rss_verdict(e)["leak"] is False
