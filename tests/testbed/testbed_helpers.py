"""Helpers shared by the test-bed tests: root check, host snapshots, leak checks, a probe crossing."""
from __future__ import annotations

import os
import subprocess

import pytest

from netrig.testbed import state as st

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="needs root: builds network namespaces and veth pairs")


def netns_names() -> set[str]:
    try:
        return set(os.listdir("/run/netns"))
    except FileNotFoundError:
        return set()


def host_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


def host_nft() -> str:
    r = subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True)
    return r.stdout


def assert_gone(tb_id: str) -> None:
    left = [n for n in netns_names() if n.startswith(f"nr{tb_id}-")]
    assert not left, f"test bed {tb_id} left namespaces {left}"
    assert not [n for n in host_links() if n.startswith(f"nr{tb_id}-")]
    assert not os.path.exists(st.state_path(tb_id)), f"test bed {tb_id} left its state file"


N = 500


def cross(tb, tx="tx", rx="rx", family=4, n=N, **frame_kw):
    """Send n probe frames tx→rx with the test bed's stream defaults; return the Receiver."""
    from netrig.testbed.probe import Receiver, send_frames, udp_frame

    d = tb.stream_defaults(tx=tx, rx=rx, family=family)
    d.update(frame_kw)
    t, r = tb.port(tx), tb.port(rx)
    with Receiver(r.netns, r.ifname) as rcv:
        sent = send_frames(t.netns, t.ifname, udp_frame(**d), n)
    assert sent == n
    return rcv
