"""Remote monitoring over SSH, against a real sshd started inside a test namespace: the samples
are the DUT namespace's (its interfaces count the frames netrig sent into it), chosen processes
are found, a host that cannot be reached is one clear error within the timeout, and nothing is
left running."""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from tests.conftest import needs_root, sh

from netrig import Stream, run_trial
from netrig.errors import ConfigError
from netrig.monitor.remote import RecordParser, RemoteMonitor, RemoteMonitorError
from netrig.trial import Port

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
needs_sshd = pytest.mark.skipif(not os.path.exists(SSHD), reason="needs sshd (Debian package openssh-server; "
                                                                  "make test installs it)")


@contextlib.contextmanager
def sshd_in_a_namespace(tmp: Path):
    """A DUT namespace with an sshd on 198.18.251.2:2222, reached from the host over a veth pair,
    and a second veth pair into it for test traffic. Yields (ssh config path, alias, dut netns,
    traffic netns, traffic ifname on the tester side, its peer in the DUT)."""
    uid = uuid.uuid4().hex[:5]
    dut, tester = f"nrt{uid}sd", f"nrt{uid}st"
    h, d = f"nrt{uid}h", f"nrt{uid}d"
    t, dt = f"nrt{uid}t", f"nrt{uid}u"
    proc = None
    try:
        sh("ip", "netns", "add", dut)
        sh("ip", "netns", "add", tester)
        sh("ip", "link", "add", h, "type", "veth", "peer", "name", d, "netns", dut)
        sh("ip", "addr", "add", "198.18.251.1/30", "dev", h)
        sh("ip", "link", "set", h, "up")
        sh("ip", "addr", "add", "198.18.251.2/30", "dev", d, ns=dut)
        sh("ip", "link", "set", d, "up", ns=dut)
        sh("ip", "link", "set", "lo", "up", ns=dut)
        sh("ip", "link", "add", t, "netns", tester, "type", "veth", "peer", "name", dt, "netns", dut)
        for ns, ifn in ((tester, t), (dut, dt)):
            sh("sysctl", "-qw", f"net.ipv6.conf.{ifn}.disable_ipv6=1", ns=ns)
            sh("ip", "link", "set", ifn, "up", ns=ns)
        for name in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / name)], check=True)
        (tmp / "authorized_keys").write_text((tmp / "client_key.pub").read_text())
        (tmp / "sshd_config").write_text(
            f"Port 2222\nListenAddress 198.18.251.2\nHostKey {tmp / 'host_key'}\nPidFile {tmp / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {tmp / 'authorized_keys'}\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n")
        (tmp / "ssh_config").write_text(
            f"Host nrdut\n  HostName 198.18.251.2\n  Port 2222\n  User root\n  IdentityFile {tmp / 'client_key'}\n"
            "  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n")
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory
        proc = subprocess.Popen(["ip", "netns", "exec", dut, SSHD, "-D", "-e", "-f", str(tmp / "sshd_config")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while subprocess.run(["ip", "netns", "exec", dut, "ss", "-Hltn", "sport = :2222"], capture_output=True,
                             text=True).stdout.strip() == "":
            assert proc.poll() is None, f"sshd did not start: {proc.stderr.read() if proc.stderr else ''}"
            assert time.monotonic() < deadline, "sshd did not listen within 10 s"
            time.sleep(0.05)
        yield tmp / "ssh_config", "nrdut", dut, tester, t, dt
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stderr is not None:
                proc.stderr.close()
        sh("ip", "link", "del", h, check=False)
        sh("ip", "netns", "del", dut, check=False)
        sh("ip", "netns", "del", tester, check=False)


def ssh_processes(config: Path) -> list[str]:
    r = subprocess.run(["pgrep", "-af", f"ssh .*-F {config}"], capture_output=True, text=True)
    return [ln for ln in r.stdout.splitlines() if ln.strip()]


@needs_root
@needs_sshd
def test_samples_the_dut_namespace_over_ssh(tmp_path):
    with sshd_in_a_namespace(tmp_path) as (cfg, alias, dut, tester, t_if, dut_if):
        mon = RemoteMonitor(alias, interval_s=0.25, procs=["sshd*"], ssh_config=cfg)
        with mon:
            mon.mark("trial-start")
            s = Stream(frame_size=64, rate_pps=20_000, src_mac="02:00:00:00:00:01", dst_mac="ff:ff:ff:ff:ff:ff")
            res = run_trial(Port(t_if, netns=tester), Port(t_if, netns=tester), [s], frames=5000, drain_s=0.1,
                            max_stretch_pct=50)
            time.sleep(0.6)  # a sample after the last frame
            mon.mark("trial-stop")
        assert res.frames_sent == 5000
        r = mon.result
        assert not r.errors, r.errors
        data = r.data
        assert len(data) >= 3, data
        first, last = data[0], data[-1]
        # the DUT namespace's own interfaces, not the host's
        assert f"remote/{dut_if}" in last.ifaces and "remote/lo" in last.ifaces
        assert not any(k.endswith(f"/{t_if}") for k in last.ifaces)
        got = last.ifaces[f"remote/{dut_if}"]["rx_packets"] - first.ifaces[f"remote/{dut_if}"]["rx_packets"]
        assert got >= 5000 * 0.99, (got, "frames sent into the DUT namespace must show on its interface")
        assert max(x.ifaces[f"remote/{dut_if}"].get("rx_pps", 0) for x in data) > 5_000
        # CPU, memory and the chosen processes, in Monitor's shapes
        assert {"all", "cpu0"} <= set(last.cpu) and 0 <= last.cpu["all"]["busy"] <= 100
        assert last.mem.total_bytes > last.mem.available_bytes > 0
        assert any(p.name.startswith("sshd") and p.rss_bytes > 0 for p in last.procs.values())
        assert all(abs(x.dt_s - 0.25) < 0.25 for x in data)
        assert [m.mark for m in r.marks] == ["trial-start", "trial-stop"]
        assert r.window("trial-start", "trial-stop") and r.cpu_mean("trial-start", "trial-stop", "busy")
        # no credentials in what is recorded, and nothing left running
        assert "client_key" not in repr(r.to_dict())
        assert ssh_processes(cfg) == []


@needs_root
@needs_sshd
def test_an_unreachable_or_refusing_host_is_one_clear_error_without_a_hang(tmp_path):
    with sshd_in_a_namespace(tmp_path) as (cfg, alias, *_):
        # no key for this login: BatchMode makes it an error, never a password prompt
        bad = tmp_path / "nokey_config"
        bad.write_text(cfg.read_text().replace("IdentityFile", "# IdentityFile").replace("Host nrdut", "Host nrdut")
                       + "  IdentityAgent none\n  PubkeyAuthentication no\n")
        t0 = time.monotonic()
        with pytest.raises(RemoteMonitorError, match=r"monitor\.remote nrdut: no sample within .*Permission denied"):
            RemoteMonitor(alias, ssh_config=bad, connect_timeout_s=8).start()
        assert time.monotonic() - t0 < 8.5
        assert ssh_processes(bad) == []
    # nothing listens there any more: the connection is refused or times out, within the timeout
    t0 = time.monotonic()
    with pytest.raises(RemoteMonitorError, match="ssh -o BatchMode=yes nrdut true"):
        RemoteMonitor(alias, ssh_config=cfg, connect_timeout_s=3).start()
    assert time.monotonic() - t0 < 4.0


@pytest.mark.parametrize("kw,field", [
    ({"host": "-oProxyCommand=x"}, "monitor.remote"),
    ({"host": "a host"}, "monitor.remote"),
    ({"host": ""}, "monitor.remote"),
    ({"host": "dut", "interval_s": 0}, "interval_s"),
    ({"host": "dut", "procs": ["bird; reboot"]}, "monitor.procs"),
    ({"host": "dut", "ssh_config": "/nonexistent/ssh_config"}, "monitor.ssh_config"),
])
def test_bad_arguments_name_the_field(kw, field):
    with pytest.raises(ConfigError) as e:
        RemoteMonitor(**kw)
    assert e.value.field == field


def test_records_parse_into_monitor_samples():
    lines = ["@@hz 100 4096 2",
             "@@ 100.00", "cpu  10 0 10 80 0 0 0 0", "cpu0 5 0 5 40 0 0 0 0", "MemTotal: 1000 kB",
             "MemAvailable: 600 kB", "if eth1 1000 10 0 0 2000 20 0 0", "ct 5", "p 42 100 10 bird", "@@end",
             "@@ 101.00", "cpu  20 0 20 160 0 0 0 0", "cpu0 10 0 10 80 0 0 0 0", "MemTotal: 1000 kB",
             "MemAvailable: 500 kB", "if eth1 2000 110 0 3 2500 25 0 0", "ct 7", "p 42 150 12 bird", "@@end"]
    p = RecordParser()
    out = [s for s in (p.feed(ln) for ln in lines) if s is not None]
    assert len(out) == 1, "the first record primes the deltas"
    s = out[0]
    assert s.dt_s == 1.0 and s.cpu["all"]["busy"] == 20.0
    assert s.mem.to_dict() == {"total_bytes": 1_024_000, "available_bytes": 512_000, "used_bytes": 512_000}
    assert s.ifaces["remote/eth1"]["rx_pps"] == 100.0 and s.ifaces["remote/eth1"]["rx_dropped"] == 3
    assert s.conntrack == {"remote": 7}
    assert s.procs["42"].to_dict() == {"name": "bird", "cpu_percent": 50.0, "rss_bytes": 12 * 4096}


@needs_root
@needs_sshd
def test_a_run_monitors_its_dut_over_ssh_when_told_to(tmp_path):
    """``trial.monitor_remote``: every trial's monitor samples come from the SSH host, not this one."""
    from netrig.results import read_trial_log
    from netrig.run.config import config_from_dict
    from netrig.run.runner import Runner

    with sshd_in_a_namespace(tmp_path) as (cfg, alias, dut, *_):
        config = config_from_dict({
            "testbed": {"name": "router"}, "selftest": {"enabled": False}, "frames": {"sizes": [64]},
            "trial": {"duration_s": 1, "drain_s": 0.2, "monitor_remote": alias, "monitor_ssh_config": str(cfg)},
            "methods": [{"iperf": {"rate_pct": 0.1}}]})
        out = tmp_path / "run"
        Runner(config, out).run()
        trials = [t for t in read_trial_log(out)[1] if t.get("counts")]
        assert trials
        mon = trials[-1]["counts"]["raw"]["monitor"]
        data = [s for s in mon["samples"] if "mark" not in s]
        assert data and not mon["errors"], mon["errors"]
        assert all(k.startswith("remote/") for s in data for k in s["ifaces"])
        assert {m["mark"] for m in mon["samples"] if "mark" in m} >= {"trial-start", "trial-stop"}
        assert ssh_processes(cfg) == []
