"""Every capture method of ``netrig capture`` really captures what netrig sends over veth: the
frames of the trial's tag equal the frames the engine sent (exactly: a low rate, the capture on its
own CPU, nothing else on the link), another trial's frames are never counted as this one's, libpcap
is really the library, and nothing (XDP program, namespace) is left behind."""
from __future__ import annotations

import subprocess

import pytest
from tests.conftest import needs_root, sh, veth_pair

from netrig import _native
from netrig.trial import Port, Stream, run_trial

pytestmark = needs_root
MASK = (1 << 23) - 1


def _send(ia: str, na: str, mac: str, frames_pps: float = 4000, duration_s: float = 0.25) -> _native.TrialResult:
    st = Stream(frame_size=64, rate_pps=frames_pps, dst_mac=mac, src_ip="198.18.0.2", dst_ip="198.18.0.3")
    return run_trial(Port(ia, netns=na, io="af_packet"), None, [st], duration_s=duration_s, drain_s=0.05)


def _mine(stats: _native.CaptureStats, tag: int) -> int:
    return sum(t.frames for t in stats.tags if t.tag == tag & MASK)


@pytest.mark.parametrize("method", _native.CAPTURE_METHODS)
def test_method_captures_every_frame_sent(method):
    with veth_pair("c") as (na, ia, nb, ib):
        mac = _native.interface_info(ib, nb).mac
        cap = _native.Capture(method, ib, netns=nb, cpu=0, batch=10)
        try:
            first = _send(ia, na, mac)
            second = _send(ia, na, mac)
            s = cap.stats(2.0)
            assert s.settled
            assert first.frames_sent > 0 and second.frames_sent > 0
            assert _mine(s, first.trial_tag) == first.frames_sent, (method, cap.notes)
            assert _mine(s, second.trial_tag) == second.frames_sent, "another trial's frames stay apart"
            assert s.frames == first.frames_sent + second.frames_sent + s.foreign + s.warmup
            assert s.drops == 0 and s.queue_drops == 0
            if method == "libpcap":
                with open("/proc/self/maps") as f:
                    assert "libpcap.so" in f.read(), "libpcap is really loaded"
                assert "libpcap version" in cap.notes
            if method == "af_xdp":
                assert "xdp" in sh("ip", "-d", "link", "show", ib, ns=nb)
        finally:
            final = cap.stop()
        assert final is not None and final.frames >= s.frames
        assert cap.stop() is None
        if method == "af_xdp":
            assert "prog/xdp" not in sh("ip", "-d", "link", "show", ib, ns=nb), "the XDP program goes with the capture"


def test_bad_arguments_name_the_field():
    from netrig.errors import ConfigError

    for kw, field in (({"method": "pf_ring"}, "method"), ({"batch": 0}, "batch"), ({"cpu": 100_000}, "cpu")):
        args = {"method": "recvfrom", "ifname": "lo", **kw}
        with pytest.raises(ConfigError) as e:
            _native.Capture(**args)
        assert field in str(e.value)


def test_capture_cli_stops_on_sigterm_with_a_summary(tmp_path):
    import json
    import os
    import signal
    import sys
    import time

    with veth_pair("d") as (na, ia, nb, ib):
        stats = tmp_path / "s.json"
        env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(_native.__file__))}
        p = subprocess.Popen(["ip", "netns", "exec", nb, sys.executable, "-m", "netrig.cli.main", "capture", "--port",
                              ib, "--method", "recvmmsg", "--cpu", "0", "--stats", str(stats)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            for _ in range(5):  # the capture is open once it says it is ready
                if "capture: ready" in (p.stderr.readline() if p.stderr else ""):
                    break
            res = _send(ia, na, _native.interface_info(ib, nb).mac)
            p.send_signal(signal.SIGUSR1)
            time.sleep(0.5)
            mid = json.loads(stats.read_text())
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=20)
        finally:
            if p.poll() is None:
                p.kill()
        assert p.returncode == 0, err
        assert mid["seq"] == 1 and sum(t["frames"] for t in mid["tags"] if t["tag"] == res.trial_tag & MASK) \
            == res.frames_sent
        doc = json.loads(out)
        assert doc["final"] and doc["stopped_by"] == "signal" and doc["cpu_user_s"] >= 0
