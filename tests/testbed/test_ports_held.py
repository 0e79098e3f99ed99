"""Ports held by one netrig process (``testbed.state.ports_held``), without root: the lock files in a
temporary directory, a second process holding one of them, refused at once naming its pid and
command; a port named twice (by name and by namespace) is held once; shared holders coexist."""
from __future__ import annotations

import subprocess
import sys
import textwrap

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
