"""Ports held by one netrig process (``testbed.state.ports_held``), without root: the lock files in a
temporary directory, a second process holding one of them, refused at once naming its pid and
command; a port named twice (by name and by namespace) is held once; shared holders coexist."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from netrig.errors import ConfigError
from netrig.testbed import state


@pytest.fixture
def ports_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(state, "PORTS_DIR", str(tmp_path))
    return tmp_path


def holder(ports_dir, shared: bool = False) -> subprocess.Popen:
    """Another process holding port ``lo`` until its stdin closes."""
    code = textwrap.dedent(f"""
        import sys
        from netrig.testbed import state
        state.PORTS_DIR = {str(ports_dir)!r}
        with state.ports_held([("lo", None)], "--port", shared={shared}):
            print("held", flush=True)
            sys.stdin.read()
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline() == "held\n"
    return p


def test_a_port_held_by_another_process_is_refused_naming_it(ports_dir):
    p = holder(ports_dir)
    try:
        with pytest.raises(ConfigError) as e, state.ports_held([("eth9", None), ("lo", None)], "--port"):
            pass
        assert e.value.field == "--port"
        assert e.value.message.startswith(f"port lo is in use by pid {p.pid} (python -c "), e.value.message
    finally:
        p.communicate("")
    with state.ports_held([("lo", None), ("lo", None)], "--port"):  # released with its holder; one port once
        pass


def test_shared_holders_coexist_never_beside_one_alone(ports_dir):
    p = holder(ports_dir, shared=True)
    try:
        with state.ports_held([("lo", None)], "--tx", shared=True), \
                pytest.raises(ConfigError, match="is in use by pid"), state.ports_held([("lo", None)], "--tx"):
            pass
    finally:
        p.communicate("")


def test_a_missing_namespace_names_the_option(ports_dir):
    with pytest.raises(ConfigError, match="no such network namespace") as e, \
            state.ports_held([("eth0", "nrt-no-such-ns")], "--port"):
        pass
    assert e.value.field == "--port"


def test_the_last_holder_removes_the_lock_file(ports_dir):
    """Ports are named by namespace inode: a lock file left per port and namespace would pile up (the
    suite left hundreds in /run/netrig/ports). The last holder removes it; a shared holder leaves it
    while another still holds the port, and a new holder locks the file now at the path."""
    with state.ports_held([("lo", None)], "--port"):
        (path,) = ports_dir.iterdir()
    assert not path.exists(), "an exclusive holder removes its lock file"
    p = holder(ports_dir, shared=True)
    try:
        with state.ports_held([("lo", None)], "--tx", shared=True):
            pass
        assert path.exists(), "the other shared holder still holds it"
        with pytest.raises(ConfigError, match=f"is in use by pid {p.pid}"), state.ports_held([("lo", None)], "--tx"):
            pass
    finally:
        p.communicate("")
    assert not path.exists(), "the last shared holder removed it"
    with state.ports_held([("lo", None)], "--port"):
        assert path.exists()


def test_holders_racing_a_removal_never_share_a_port_alone(ports_dir):
    """Processes that take and release port ``lo`` alone in a loop, side by side for a second: whoever
    holds it is alone (it creates a mark file exclusively while it holds the port), whether its lock
    file was removed and made again meanwhile."""
    code = textwrap.dedent(f"""
        import os, pathlib, sys, time
        from netrig.errors import ConfigError
        from netrig.testbed import state
        state.PORTS_DIR = {str(ports_dir)!r}
        mark, held, tried = pathlib.Path({str(ports_dir / "holder")!r}), 0, 0
        sys.stdout.write("ready\\n"); sys.stdout.flush()
        go = float(sys.stdin.readline())
        while time.time() < go:
            pass
        while time.time() < go + 1.0:
            tried += 1
            try:
                with state.ports_held([("lo", None)], "--port"):
                    os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
                    held += 1
                    mark.unlink()
            except ConfigError:
                pass
        print(held, tried)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    go = f"{time.time() + 0.2}\n"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(go)
        p.stdin.flush()
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    counts = [tuple(map(int, o.split())) for o, _ in outs]
    assert sum(h for h, _ in counts) > 0 and sum(t - h for h, t in counts) > 0, f"no contention: {counts}"
    assert [f.name for f in ports_dir.iterdir()] == [], "the last holder removed the lock file"


def test_lock_files_a_killed_holder_left_are_swept_and_held_ones_kept(ports_dir):
    """A holder killed with SIGKILL cannot remove its file (the suite's kill -9 tests left a dozen a
    run in /run/netrig/ports): the next ports_held removes every file nobody holds."""
    p = holder(ports_dir)
    try:
        stale = ports_dir / "gone0@4026539999.lock"
        stale.touch()
        (held,) = [x for x in ports_dir.iterdir() if x != stale]
        with state.ports_held([("eth9", None)], "--port"):
            assert not stale.exists() and held.exists()
    finally:
        p.communicate("")
    killed = holder(ports_dir)
    killed.kill()
    killed.communicate()
    assert held.exists()  # the kernel released its lock; its file stays until the next holder
    with state.ports_held([("eth9", None)], "--port"):
        assert not held.exists()
