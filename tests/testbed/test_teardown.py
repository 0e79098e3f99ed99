"""Teardown leaves the host as it was: on success, exception, failed build, SIGINT, SIGTERM, crash."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from testbed_helpers import assert_gone, host_links, host_nft, needs_root, netns_names

from netrig.errors import TestbedError
from netrig.testbed import Testbed, clean, nft
from netrig.testbed import state as st
from netrig.testbed.nsthread import sysctl_in

pytestmark = [pytest.mark.root, needs_root]

CHILD = r"""
import sys, time
from netrig.testbed import Testbed
with Testbed.create(sys.argv[1], conntrack_max=int(sys.argv[2])) as tb:
    print(tb.id, flush=True)
    print("READY", flush=True)
    if sys.argv[3] == "crash":
        import os; os._exit(9)
    while True:
        time.sleep(0.05)
"""


def _child(topology: str, mode: str, conntrack_max: int = 54321):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.Popen([sys.executable, "-c", CHILD, topology, str(conntrack_max), mode],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    tb_id = p.stdout.readline().strip()
    assert p.stdout.readline().strip() == "READY", p.stderr.read()
    assert len(tb_id) == 4 and any(n.startswith(f"nr{tb_id}-") for n in netns_names())
    return p, tb_id


def test_exception_inside_with_tears_down(tb_ids):
    links, rules = host_links(), host_nft()
    with pytest.raises(ZeroDivisionError), Testbed.create("firewall", rules=10) as tb:
        tb_ids.append(tb.id)
        raise ZeroDivisionError("a failure inside the block")
    assert_gone(tb.id)
    assert host_links() == links and host_nft() == rules


def test_failed_build_removes_what_was_created(tb_ids, monkeypatch):
    def broken(ns, text):
        raise TestbedError("injected failure")

    monkeypatch.setattr(nft, "apply", broken)
    tb = Testbed.create("nat")
    with pytest.raises(TestbedError, match="injected failure"), tb:
        pass
    tb_ids.append(tb.id)
    assert tb.id


@pytest.mark.parametrize("sig, rc", [(signal.SIGINT, (-signal.SIGINT, 1, 130)), (signal.SIGTERM, (143,))])
def test_signal_tears_down_and_restores_sysctl(tb_ids, sig, rc):
    old = sysctl_in(None, "net.netfilter.nf_conntrack_max")
    links, rules = host_links(), host_nft()
    p, tb_id = _child("nat", "wait")
    tb_ids.append(tb_id)
    assert sysctl_in(None, "net.netfilter.nf_conntrack_max") == "54321"
    p.send_signal(sig)
    _, err = p.communicate(timeout=20)
    assert p.returncode in rc, err
    assert_gone(tb_id)
    assert sysctl_in(None, "net.netfilter.nf_conntrack_max") == old
    assert host_links() == links and host_nft() == rules


def test_clean_removes_crash_leftovers_but_not_live_testbeds(tb_ids):
    old = sysctl_in(None, "net.netfilter.nf_conntrack_max")
    p, dead_id = _child("nat", "crash", 23456)
    p.communicate(timeout=20)
    assert p.returncode == 9
    tb_ids.append(dead_id)
    assert any(n.startswith(f"nr{dead_id}-") for n in netns_names())  # the crash left it
    with Testbed.create("loopback") as live:
        tb_ids.append(live.id)
        rep = clean()
        assert dead_id in rep.removed_testbeds and not rep.errors
        assert any(live.id in k for k in rep.kept)
        assert all(n in netns_names() for n in live.namespaces)
        assert os.path.exists(st.state_path(live.id))
    assert sysctl_in(None, "net.netfilter.nf_conntrack_max") == old


def test_down_from_another_handle_and_cli(tb_ids):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    cli = [sys.executable, "-m", "netrig.cli.main", "testbed"]
    out = subprocess.run(cli + ["up", "router"], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    tb_id = out.stdout.split()[1]
    tb_ids.append(tb_id)
    assert "tx" in out.stdout and "198.19.0.2" in out.stdout
    st_out = subprocess.run(cli + ["status"], capture_output=True, text=True, env=env).stdout
    assert tb_id in st_out and "detached" in st_out
    assert any(tb_id in k for k in clean().kept)  # detached test beds survive a plain clean
    down = subprocess.run(cli + ["down", tb_id], capture_output=True, text=True, env=env, timeout=30)
    assert down.returncode == 0, down.stderr
    assert_gone(tb_id)
