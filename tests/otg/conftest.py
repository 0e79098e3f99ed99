"""Fixtures of the OTG tests: `netrig serve` as a subprocess on ports made for the test, a snappi
client, and helpers that wait for flows without timing assumptions."""
from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import snappi

ROOT = Path(__file__).resolve().parents[2]
logging.getLogger("snappi").setLevel(logging.ERROR)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(ports: list[str], *extra: str) -> Iterator[str]:
    """`netrig serve` on ``ports`` (plain HTTP on loopback); yields its URL. At the end it is sent
    SIGTERM and must exit as netrig does after one (143), its socket closed."""
    number = free_port()
    url = f"http://127.0.0.1:{number}"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    argv = [sys.executable, "-m", "netrig.cli.main", "serve", "--http", "--listen", f"127.0.0.1:{number}"]
    for p in ports:
        argv += ["--port", p]
    proc = subprocess.Popen([*argv, *extra], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/capabilities/version", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"netrig serve did not start: {proc.stderr.read() if proc.stderr else ''}") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        err = proc.stderr.read() if proc.stderr else ""
        if proc.stderr:
            proc.stderr.close()
        assert rc == 143, err
        assert "stopped: every flow stopped" in err, err
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", number)) != 0, "still listening"


def api(url: str):
    return snappi.api(location=url, verify=False, version_check=True)


def control(a, state: str, flows: list[str] | None = None) -> list[str]:
    """Set the traffic of ``flows`` (default: every flow) to ``state``; the server's warnings."""
    cs = a.control_state()
    cs.traffic.flow_transmit.state = state
    cs.traffic.flow_transmit.flow_names = flows or []
    return list(a.set_control_state(cs).warnings or [])


def capture_state(a, state: str, ports: list[str]) -> None:
    cs = a.control_state()
    cs.port.capture.port_names = ports
    cs.port.capture.state = state
    a.set_control_state(cs)


def flow_metrics(a, names: list[str] | None = None) -> dict:
    req = a.metrics_request()
    req.flow.flow_names = names or []
    return {m.name: m for m in a.get_metrics(req).flow_metrics}


def wait_stopped(a, names: list[str], limit_s: float = 30.0) -> dict:
    """Poll until every flow of ``names`` reports transmit stopped (the server reports it once its
    frames had time to arrive); fails after ``limit_s`` (a bound for a broken server, not a timing)."""
    end = time.monotonic() + limit_s
    while True:
        m = flow_metrics(a, names)
        if all(m[n].transmit == "stopped" for n in names):
            return m
        assert time.monotonic() < end, {n: (m[n].transmit, m[n].frames_tx, m[n].frames_rx) for n in names}
        time.sleep(0.05)


@pytest.fixture
def veth():
    """A veth pair between two namespaces: (ns_a, if_a, ns_b, if_b)."""
    from tests.conftest import veth_pair

    with veth_pair("o") as v:
        yield v
