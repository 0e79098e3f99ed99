"""One tester per test bed at a time (``state.in_use``): real processes holding real ``flock``s,
named from ``/proc/locks`` when a second run is refused; a deliberate shared-DUT experiment takes
the lock shared and receives with a backend that sees every frame."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from netrig.errors import ConfigError, TestbedError
from netrig.run.config import TestbedConfig, TestConfig, config_from_dict
from netrig.testbed import state as st

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(st, "STATE_DIR", str(tmp_path))
    return tmp_path


def holder(state_dir: Path, tb_id: str, shared: bool) -> subprocess.Popen:
    """Another process holding test bed ``tb_id`` until it is killed."""
    script = state_dir / "holder.py"
    script.write_text(f"import sys, time\nfrom netrig.testbed import state as st\nst.STATE_DIR = {str(state_dir)!r}\n"
                      f"with st.in_use({tb_id!r}, {shared}):\n    print('held', flush=True)\n    time.sleep(600)\n")
    p = subprocess.Popen([sys.executable, str(script), "rfc2544", "--testbed", tb_id], stdout=subprocess.PIPE,
                         text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    assert p.stdout is not None and p.stdout.readline() == "held\n"
    return p


def stop(p: subprocess.Popen) -> None:
    p.kill()
    p.wait()
    if p.stdout is not None:
        p.stdout.close()


def test_a_second_run_is_refused_naming_the_holders_pid_and_command(state_dir):
    p = holder(state_dir, "ab12", shared=False)
    try:
        for shared in (False, True):
            with pytest.raises(TestbedError) as e, st.in_use("ab12", shared):
                pass
            msg = str(e.value)
            assert f"test bed ab12 is in use by pid {p.pid} (python" in msg and "holder.py rfc2544 --testbed ab12)" in msg
            assert "\n" not in msg
            assert ("holds the test bed alone" in msg) == shared and ("--share-testbed" in msg)
    finally:
        stop(p)


def test_the_kernel_releases_the_lock_of_a_killed_run(state_dir):
    p = holder(state_dir, "ab13", shared=False)
    p.send_signal(signal.SIGKILL)
    stop(p)
    with st.in_use("ab13") as others:
        assert others is False
        assert [h.pid for h in st.lock_holders(st.lock_path("ab13"))] == [os.getpid()]


def test_shared_runs_hold_it_together_and_never_beside_one_that_holds_it_alone(state_dir):
    p = holder(state_dir, "ab14", shared=True)
    try:
        with st.in_use("ab14", shared=True) as others:
            assert others is True
            assert {h.pid: h.shared for h in st.lock_holders(st.lock_path("ab14"))} == {p.pid: True,
                                                                                         os.getpid(): True}
        with pytest.raises(TestbedError, match=rf"in use by pid {p.pid} \(.*, shared\)"), st.in_use("ab14"):
            pass
    finally:
        stop(p)
    with st.in_use("ab14", shared=True) as others:
        assert others is False


def test_teardown_removes_the_lock_file(state_dir):
    with st.in_use("ab15"):
        pass
    assert os.path.exists(st.lock_path("ab15"))
    st.remove_state("ab15")
    assert not os.path.exists(st.lock_path("ab15"))


def test_a_shared_run_receives_with_a_backend_that_sees_every_frame():
    assert st.shared_io("auto", "--io") == "af_packet"
    assert st.shared_io("socket", "--io") == "socket"
    with pytest.raises(ConfigError, match="af_xdp cannot share a test bed: AF_XDP hands each frame to one socket"):
        st.shared_io("af_xdp", "--io")
    cfg = TestConfig(testbed=TestbedConfig(name="router", id="ab16", shared=True))
    assert cfg.ports.io == "af_packet"
    with pytest.raises(ConfigError) as e:
        config_from_dict({"testbed": {"id": "ab16", "shared": True}, "ports": {"io": "af_xdp"},
                          "methods": [{"rfc2544_throughput": {}}]})
    assert e.value.field == "ports.io"
    with pytest.raises(ConfigError, match="needs id"):
        TestbedConfig(name="router", shared=True)


def test_lock_holders_ignore_other_files_and_waiters(state_dir):
    path = st.lock_path("ab17")
    with st.in_use("ab17"):
        other = state_dir / "other"
        other.write_text("")
        assert st.lock_holders(str(other)) == []
        assert len(st.lock_holders(path)) == 1
