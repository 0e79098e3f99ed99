"""The endpoint (``netrig.telemetry.endpoint``): ``--metrics-listen`` is checked and bound before
anything starts (one error line naming it), serves OpenMetrics, follows the run loop's placement,
costs a bounded scrape at 4096 flows, and leaves nothing listening however the command ends
(normally, Ctrl-C, SIGTERM) — on the simulated DUT, no root needed."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.telemetry.helpers import scrape, total

from netrig.cli.main import main
from netrig.errors import ConfigError
from netrig.measure import TrialCounts
from netrig.run.progress import RunStart, TrialEnd, TrialInfo, TrialStart
from netrig.run.records import LoadRecord
from netrig.telemetry.endpoint import parse_listen
from netrig.telemetry.families import FLOW_GROUPS, MAX_SERVED_GROUPS
from netrig.telemetry.sources import FlowGroupCounts
from netrig.telemetry.telemetry import Telemetry

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
SIM = ["rfc2544", "--testbed", "simulated", "--frame-sizes", "64", "--duration", "1s", "--no-selftest", "--quiet"]


@pytest.mark.parametrize("text, want", [("9464", ("127.0.0.1", 9464)), (":0", ("127.0.0.1", 0)),
                                        ("127.0.0.2:80", ("127.0.0.2", 80)), ("[::1]:9464", ("::1", 9464)),
                                        ("0.0.0.0:9464", ("0.0.0.0", 9464))])
def test_listen_values(text, want):
    assert parse_listen(text) == want


@pytest.mark.parametrize("text", ["", "abc", "localhost:9464", "127.0.0.1:", "127.0.0.1:65536", "::1:9464",
                                  "1.2.3.4.5:80", "127.0.0.1:-1", "[::1]9464"])
def test_malformed_values_name_the_option(text):
    with pytest.raises(ConfigError, match="--metrics-listen"):
        parse_listen(text)


def busy_port() -> tuple[socket.socket, int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s, s.getsockname()[1]


def refused(port: int, host: str = "127.0.0.1") -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_port_in_use_and_a_foreign_address_fail_before_the_run(tmp_path, capsys):
    s, port = busy_port()
    with s:
        for value, why in ((f"127.0.0.1:{port}", "in use"), ("192.0.2.1:9464", "not an address of this host")):
            out = tmp_path / "out"
            assert main([*SIM, "--out", str(out), "--metrics-listen", value]) == 2
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and "--metrics-listen" in err and why in err, err
            assert not out.exists(), "nothing ran"


def test_serves_openmetrics_and_closes():
    with Telemetry("0") as tel:
        tel.runs()(RunStart("r", "x", "o", 3))
        port = tel.endpoint.port
        assert total(scrape(tel.url), "netrig_trials_estimated", run="r") == 3
    assert refused(port)


def test_the_server_thread_of_a_run_is_an_observer():
    if os.geteuid() != 0:
        pytest.skip("leaving SCHED_IDLE again needs root")
    cpu = min(os.sched_getaffinity(0))
    done = threading.Event()

    def loop(tel: Telemetry) -> None:  # a run loop that is tester bookkeeping
        os.sched_setaffinity(0, {cpu})
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        tel.runs()(RunStart("r", "x", "o", 0))
        done.set()

    with Telemetry("0") as tel:
        th = threading.Thread(target=loop, args=(tel,))
        th.start()
        th.join()
        assert done.is_set()
        tid = tel.endpoint._thread.native_id
        # an observer of the run (placement.observer): SCHED_IDLE on the loop's CPUs (the tester's), not the others
        assert os.sched_getaffinity(tid) == {cpu} and os.sched_getscheduler(tid) == os.SCHED_IDLE
        assert total(scrape(tel.url), "netrig_trial_index", run="r") == 0, "it still serves"


def engine_counts(flows: int) -> TrialCounts:
    """Counts of a trial with one stream of ``flows`` flows, as the engine measurer keeps them."""
    per = [{"flow_id": i, "frames_sent": 100, "frames_received": 99, "frames_lost": 1} for i in range(flows)]
    stream = {"name": "s0", "frames_sent": 100 * flows, "frames_received": 99 * flows, "bytes_sent": 6400 * flows,
              "bytes_received": 6336 * flows, "flows": flows, "flow_results": per}
    ports = [{"name": n, "tx_frames": 100 * flows, "rx_frames": 99 * flows, "tx_bytes": 1, "rx_bytes": 1,
              "rx_ring_drops": 0} for n in ("tx", "rx")]
    return TrialCounts(1e6, 100 * flows, 99 * flows, raw={"engine": {"streams": [stream], "ports": ports}})


def cpu_ms(fn) -> float:
    """The least CPU time (this thread's, not wall time: other load does not count) of 5 calls, ms."""
    best = float("inf")
    for _ in range(5):
        t = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t)
    return best * 1e3


def test_a_scrape_at_4096_flows_is_cheap():
    """A run of six (method, size) pairs whose trials had 4096 flows each; then 4096 served flows."""
    from prometheus_client.openmetrics.exposition import generate_latest

    with Telemetry("0") as tel:
        runs = tel.runs()
        runs(RunStart("r", "x", "o", 100))
        for size in (64, 512, 1518):
            for method in ("rfc2544_throughput", "rfc2544_frame_loss"):
                trial = TrialInfo(f"0/{size}/0/0", "rate", method, method, size, 0, 0,
                                  LoadRecord(size, 1.0, rate_pps=1e6))
                runs(TrialStart(trial))
                runs(TrialEnd(trial, False, engine_counts(4096)))
        text = generate_latest(tel.registry).decode()
        # every counter series twice: its value and its _created time
        assert text.count('flow_group="') == 2 * 6 * FLOW_GROUPS * 3 and 'flow_group="0-511"' in text
        ms = cpu_ms(lambda: generate_latest(tel.registry))
        assert ms < 50, f"a scrape took {ms:.1f} ms of CPU"
    with Telemetry("0") as tel:
        groups = [FlowGroupCounts(f"f{i}", "p1", "p2", i, i, i, i) for i in range(4096)]
        tel.watch_flow_groups(lambda: groups)
        text = generate_latest(tel.registry).decode()
        assert text.count('flow_group="') == MAX_SERVED_GROUPS * 4 and 'flow_group="f0..f31"' in text
        ms = cpu_ms(lambda: generate_latest(tel.registry))
        assert ms < 50, f"a scrape of served flows took {ms:.1f} ms of CPU"


def netrig_bg(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    """``netrig run`` of a slow simulated DUT in the background, with its metrics URL."""
    cfg = tmp_path / "slow.toml"
    cfg.write_text('[testbed]\nname = "simulated"\n[testbed.simulator]\ntrial_delay_s = 0.3\n'
                   '[selftest]\nenabled = false\n[trial]\nduration_s = "1s"\n[frames]\nsizes = [64]\n'
                   '[[methods]]\n[methods.rfc2544_throughput]\n')
    p = subprocess.Popen([sys.executable, "-m", "netrig.cli.main", "run", str(cfg), "--out", str(tmp_path / "o"),
                          "--quiet", "--metrics-listen", "127.0.0.1:0", *extra], stderr=subprocess.PIPE, text=True,
                         env=ENV, start_new_session=True)
    assert p.stderr is not None
    line = p.stderr.readline()
    m = re.search(r"metrics at (http://\S+)", line)
    assert m, line
    return p, m.group(1)


def stop(p: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    if p.stderr is not None:
        p.stderr.close()


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_nothing_listens_after_an_interrupted_run(tmp_path, sig, status):
    p, url = netrig_bg(tmp_path)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    try:
        deadline = time.monotonic() + 60
        while total(scrape(url), "netrig_trials_total") < 1:  # a trial finished: the run is under way
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.2)
        os.kill(p.pid, sig)
        assert p.wait(timeout=60) == status
    finally:
        stop(p)
    assert refused(port)


def test_nothing_listens_after_a_run_ends_and_the_watcher_got_the_end(tmp_path):
    p, url = netrig_bg(tmp_path)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    last: list = []
    try:
        with contextlib.suppress(OSError):
            while p.poll() is None:  # a watcher that scrapes every 0.3 s until the endpoint is gone
                last = scrape(url)
                time.sleep(0.3)
        assert p.wait(timeout=120) == 0
    finally:
        stop(p)
    assert refused(port)
    assert total(last, "netrig_run_complete") == 1, "the last scrape came after the run's end"


@pytest.mark.parametrize("path", ["/", "/debug/pprof", "/../../etc/passwd", "/metrics/x", "/favicon.ico"])
def test_only_metrics_is_served(path):
    """``/metrics`` (and ``/metrics?…``) answers; every other path is a 404 with no metric in it."""
    import urllib.error
    import urllib.request

    with Telemetry("127.0.0.1:0") as tel:
        base = tel.url.removesuffix("/metrics")
        assert scrape(tel.url) is not None and scrape(tel.url + "?name[]=x") is not None
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + path, timeout=10).read()
        assert e.value.code == 404 and b"# TYPE" not in e.value.read()


def test_the_last_scrape_awaited_reads_its_values_after_the_wait_began():
    """A scrape that copied the store before a run ended and is served after it does not carry the
    end, so it does not end ``linger``'s wait (it once did: Prometheus never saw the run complete)."""
    from netrig.telemetry.store import Store

    store = Store()
    reading = store.snapshot()  # a scrape reading while the run ends
    store.served(reading)
    assert not store.await_fresh_scrape(0.05), "a copy taken before the wait does not count"
    waited: list[bool] = []
    waiter = threading.Thread(target=lambda: waited.append(store.await_fresh_scrape(10.0)))
    waiter.start()
    deadline = time.monotonic() + 10
    while waiter.is_alive():  # scrapes go on; the first whose copy follows the wait's start ends it
        assert time.monotonic() < deadline
        store.served(store.snapshot())
        time.sleep(0.01)
    assert waited == [True]
