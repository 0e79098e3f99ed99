"""Rate ramps in linear steps on a veth pair: one continuous trial whose load steps from one share of
the stream's rate to another, every step counted apart (frames sent at the step's rate, all received)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import needs_root, veth_pair

import netrig
from netrig.trial import linear_ramp

pytestmark = [needs_root, pytest.mark.root]


def test_a_ramp_sends_each_step_at_its_rate_and_counts_it_apart():
    with veth_pair("r") as (ns_a, if_a, ns_b, if_b):
        tx, rx = netrig.Port(if_a, netns=ns_a, io="af_packet"), netrig.Port(if_b, netns=ns_b, io="af_packet")
        s = netrig.Stream(frame_size=128, rate_pps=20_000, src_mac=tx.info().mac, dst_mac=rx.info().mac,
                          protocol="tcp", flows=4)
        phases = linear_ramp(0.2, 1.0, 5, 0.5)
        assert [round(p[1], 6) for p in phases] == [0.2, 0.4, 0.6, 0.8, 1.0]
        r = netrig.run_trial(tx, rx, [s], phases=phases, interval_s=0.5, drain_s=0.3, max_stretch_pct=50)
        assert r.frames_received == r.frames_sent, r.to_dict(flows=False)
        steps = {}
        for iv in r.intervals:
            steps.setdefault(iv.phase, []).append(iv)
        assert sorted(steps) == [0, 1, 2, 3, 4]
        for k, ivs in steps.items():
            sent = sum(iv.frames_sent for iv in ivs)
            want = 20_000 * phases[k][1] * 0.5
            assert abs(sent - want) <= 0.05 * want, (k, sent, want)
            assert sum(iv.frames_received for iv in ivs) == sent
        assert sum(iv.frames_sent for iv in r.intervals) == r.frames_sent == 20_000 * 0.5 * 3.0


def test_netrig_trial_ramp_from_the_command_line():
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "python"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    with veth_pair("c") as (ns_a, if_a, ns_b, if_b):
        r = subprocess.run([sys.executable, "-m", "netrig.cli.main", "trial", "--tx", if_a, "--tx-netns", ns_a,
                            "--rx", if_b, "--rx-netns", ns_b, "--rate", "10kpps", "--ramp", "100:25:4",
                            "--duration", "2s", "--drain", "0.3s", "--max-stretch", "50", "--json"],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)["result"]
        assert res["frames_sent"] == res["frames_received"] == 10_000 * 0.5 * (1 + 0.75 + 0.5 + 0.25)
        assert sorted({iv["phase"] for iv in res["intervals"]}) == [0, 1, 2, 3]
