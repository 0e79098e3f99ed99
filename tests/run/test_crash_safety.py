"""Results survive every way a run can end, injected for real: ``kill -9`` (of ``netrig run``, a
shortcut command and the demo), a torn last line, a full disk (a small tmpfs), SIGTERM and SIGHUP,
a failure before the first trial, a missing config.json. Every interrupted run resumes with one
command, ``netrig run --resume DIR``, which the interruption message names."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import IS_ROOT
from tests.run.test_resume import Boom

from netrig.errors import ResultError, TestbedError
from netrig.results import load_result, read_trial_log
from netrig.run.config import config_from_dict
from netrig.run.progress import Notice
from netrig.run.runner import Runner

PY = str(Path(__file__).resolve().parents[2] / "python")
ENV = dict(os.environ, PYTHONPATH=PY)
NETRIG = [sys.executable, "-m", "netrig.cli.main"]

CONFIG = {
    "testbed": {"name": "simulated", "simulator": {"capacity_pps": 400000, "background_loss_ratio": 0.00001,
                                                   "tester_ceiling_pps": 5e6, "trial_delay_s": 0.0}},
    "trial": {"duration_s": "1s"},
    "frames": {"sizes": [64, 512, 1518]},
    "repetitions": 2,
    "methods": [{"rfc2544_throughput": {"resolution_pct": 0.5}}, {"rfc2544_latency": {"trials": 3}},
                {"rfc2544_frame_loss": {}}],
}


def _strip(summary):
    return json.loads(json.dumps(summary).replace("search_time_s", "x"),
                      object_hook=lambda d: {k: v for k, v in d.items() if k != "x"})


def _cfg(tmp_path: Path, delay: float = 0.01, **over) -> Path:
    cfg = json.loads(json.dumps(CONFIG))
    cfg["testbed"]["simulator"]["trial_delay_s"] = delay
    cfg.update(over)
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cfg))
    return p


def _full(tmp_path: Path) -> dict:
    return Runner(config_from_dict(CONFIG), tmp_path / "full").run()


def _wait_lines(log: Path, n: int, p: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and p.poll() is None:
        if log.exists() and log.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.01)
    raise AssertionError(f"{log}: fewer than {n} lines before the run ended ({p.poll()})")


def _every_line_parses(log: Path) -> int:
    lines = log.read_text().splitlines()
    for ln in lines:
        json.loads(ln)
    return len(lines) - 1


def _resume(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*NETRIG, "run", "--resume", str(out), "--quiet", *extra], env=ENV, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.timeout(300)
def test_kill_9_of_a_run_resumes_with_one_command(tmp_path):
    out = tmp_path / "out"
    p = subprocess.Popen([*NETRIG, "run", str(_cfg(tmp_path)), "--out", str(out), "--quiet"], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_lines(out / "trials.ndjson", 25, p)
    p.kill()  # SIGKILL: no handler runs, no result.json
    p.wait()
    assert (out / "config.json").is_file(), "config.json is written before the first trial"
    assert not (out / "result.json").exists()
    kept = len(read_trial_log(out)[1])
    r = _resume(out)
    assert r.returncode == 0, r.stderr
    doc = load_result(out)
    assert doc["complete"] is True and sum(t["replayed"] for t in doc["trials"]) >= kept - 1
    assert _strip(doc["summary"]) == _strip(_full(tmp_path)["summary"])


@pytest.mark.timeout(300)
def test_kill_9_of_a_shortcut_command_resumes_from_its_directory(tmp_path):
    out = tmp_path / "sc"
    p = subprocess.Popen([*NETRIG, "rfc2544", "--testbed", "simulated", "--sizes", "rfc", "--duration", "0.1s",
                          "--repetitions", "5", "--tests", "throughput,latency", "--out", str(out), "--quiet"],
                         env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_lines(out / "trials.ndjson", 40, p)
    p.kill()
    p.wait()
    kept = len(read_trial_log(out)[1])
    assert kept >= 39
    r = _resume(out)
    assert r.returncode == 0, r.stderr
    doc = load_result(out)
    assert doc["complete"] is True and sum(t["replayed"] for t in doc["trials"]) == kept


@pytest.mark.timeout(300)
def test_kill_9_of_the_demo_keeps_its_trials(tmp_path):
    out = tmp_path / "demo"
    p = subprocess.Popen([*NETRIG, "demo", "--testbed", "simulated", "--out", str(out)], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_lines(out / "rfc2544" / "trials.ndjson", 30, p)
    p.kill()
    p.wait()
    kept = len(read_trial_log(out / "rfc2544")[1])
    r = subprocess.run([*NETRIG, "demo", "--testbed", "simulated", "--out", str(out)], env=ENV, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = load_result(out / "rfc2544")
    assert doc["complete"] is True
    assert sum(t["replayed"] for t in doc["trials"]) >= kept - 1, "the crashed demo's trials were kept, not deleted"


def test_torn_last_line_is_cut_said_and_the_log_stays_sound(tmp_path):
    out = tmp_path / "t"
    with pytest.raises(KeyboardInterrupt):
        Runner(config_from_dict(CONFIG), out, provider=_interrupt_after(12)).run()
    log = out / "trials.ndjson"
    with open(log, "ab") as f:  # a record cut off by kill -9 / power loss
        f.write(b'{"type": "trial", "key": "0/64/0/12", "counts": {"frames_se')
    notes = []
    runner = Runner(config_from_dict(CONFIG), out, resume=True, progress=notes.append)
    doc = runner.run()
    assert doc["complete"] is True
    assert any(isinstance(e, Notice) and "torn" in e.message for e in notes)
    assert any(f["code"] == "trial_log_repaired" for f in doc["flags"])
    assert _every_line_parses(log) == len(doc["trials"])
    assert _strip(doc["summary"]) == _strip(_full(tmp_path)["summary"])


def test_torn_header_means_start_again(tmp_path):
    out = tmp_path / "h"
    out.mkdir()
    (out / "trials.ndjson").write_text('{"type": "header", "schema_ver')
    with pytest.raises(ResultError, match="no header"):
        Runner(config_from_dict(CONFIG), out, resume=True).run()
    doc = Runner(config_from_dict(CONFIG), out).run()  # nothing was kept: a new run may use the directory
    assert doc["complete"] is True and _every_line_parses(out / "trials.ndjson") == len(doc["trials"])


def _interrupt_after(k: int) -> Boom:
    return Boom(k)


def test_failure_before_the_first_trial_leaves_nothing(tmp_path):
    @contextlib.contextmanager
    def broken(config, role):
        raise TestbedError("testbed: cannot build (injected)")
        yield

    out = tmp_path / "new"
    with pytest.raises(TestbedError, match="injected"):
        Runner(config_from_dict(CONFIG), out, provider=broken).run()
    assert not out.exists(), "a run that never started leaves no directory behind"
    mine = tmp_path / "mine"
    mine.mkdir()
    with pytest.raises(TestbedError):
        Runner(config_from_dict(CONFIG), mine, provider=broken).run()
    assert mine.is_dir() and not any(mine.iterdir()), "a directory the user made stays, empty"
    assert Runner(config_from_dict(CONFIG), out).run()["complete"] is True


def test_cli_failure_before_the_first_trial_leaves_no_directory(tmp_path):
    out = tmp_path / "x"
    r = subprocess.run([*NETRIG, "rfc2544", "--testbed", "router", "--testbed-option", "rules=5", "--out", str(out)],
                       env=ENV, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--testbed-option rules" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert not out.exists()


def test_interrupted_before_the_first_trial_does_not_refuse_the_next_run(tmp_path):
    out = tmp_path / "z"
    with pytest.raises(KeyboardInterrupt):
        Runner(config_from_dict(CONFIG), out, provider=_interrupt_after(0)).run()
    assert Runner(config_from_dict(CONFIG), out).run()["complete"] is True


def test_resume_without_config_json_uses_the_log_header(tmp_path):
    out = tmp_path / "r"
    with pytest.raises(KeyboardInterrupt):
        Runner(config_from_dict(CONFIG), out, provider=_interrupt_after(5)).run()
    (out / "config.json").unlink()
    r = _resume(out)
    assert r.returncode == 0, r.stderr
    assert load_result(out)["complete"] is True


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_is_handled_like_ctrl_c(tmp_path, sig):
    out = tmp_path / "s"
    p = subprocess.Popen([*NETRIG, "rfc2544", "--testbed", "simulated", "--sizes", "rfc", "--duration", "0.1s",
                          "--repetitions", "30", "--tests", "throughput", "--out", str(out)], env=ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_lines(out / "trials.ndjson", 20, p)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, err
    name = signal.Signals(sig).name
    assert f"stopped by {name}" in err and f"continue with: netrig run --resume {out}" in err, err
    assert "Traceback" not in err
    part = load_result(out)
    assert part["complete"] is False and part["interrupted_reason"] == f"stopped by {name}"
    r = _resume(out)
    assert r.returncode == 0, r.stderr
    assert load_result(out)["complete"] is True


def test_progress_without_a_terminal_is_timestamped_lines(tmp_path):
    r = subprocess.run([*NETRIG, "rfc2544", "--testbed", "simulated", "--sizes", "64", "--duration", "0.1s",
                        "--tests", "throughput", "--out", str(tmp_path / "p")], env=ENV, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    trials = [ln for ln in r.stderr.splitlines() if " trial " in ln]
    n = len(load_result(tmp_path / "p")["trials"])
    assert len(trials) == n, r.stderr
    assert all(ln[:4].isdigit() and ln[10] == "T" for ln in trials)
    assert "sent" in trials[0] and "loss" in trials[0]


# ------------------------------------------------------------------------------ a full disk

@contextlib.contextmanager
def small_tmpfs(path: Path, size_kib: int):
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "netrig-test", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(mnt: Path, leave_kib: int) -> Path:
    filler = mnt / "filler"
    st = os.statvfs(mnt)
    free = st.f_bavail * st.f_frsize
    filler.write_bytes(b"\0" * max(0, free - leave_kib * 1024))
    return filler


needs_mount = pytest.mark.skipif(not IS_ROOT, reason="needs root: mounts a small tmpfs")


@needs_mount
@pytest.mark.timeout(300)
def test_disk_full_mid_run_is_one_line_keeps_every_trial_and_resumes(tmp_path):
    # 4 MiB: once the filler is gone, the resumed run's result.json (every trial again) must fit
    with small_tmpfs(tmp_path / "mnt", 4096) as mnt:
        filler = _fill(mnt, 48)
        out = mnt / "out"
        r = subprocess.run([*NETRIG, "run", str(_cfg(tmp_path, delay=0.0)), "--out", str(out), "--quiet"], env=ENV,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 2, r.stderr
        errors = [ln for ln in r.stderr.splitlines() if "error" in ln]
        assert len(errors) == 1 and "No space left on device" in errors[0], r.stderr
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr
        assert f"continue with: netrig run --resume {out}" in r.stderr
        kept = _every_line_parses(out / "trials.ndjson")  # no half record left behind
        assert kept > 5
        filler.unlink()
        r = _resume(out)
        assert r.returncode == 0, r.stderr
        doc = load_result(out)
        assert doc["complete"] is True and sum(t["replayed"] for t in doc["trials"]) == kept
        assert _strip(doc["summary"]) == _strip(_full(tmp_path)["summary"])


@needs_mount
def test_disk_full_before_the_first_trial_is_one_line_and_leaves_nothing(tmp_path):
    with small_tmpfs(tmp_path / "mnt", 256) as mnt:
        _fill(mnt, 0)
        out = mnt / "out"
        r = subprocess.run([*NETRIG, "run", str(_cfg(tmp_path)), "--out", str(out), "--quiet"], env=ENV,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "No space left on device" in r.stderr and "internal error" not in r.stderr
        assert not out.exists() or not any(out.iterdir())


@needs_mount
def test_read_only_output_directory_is_one_line(tmp_path):
    with small_tmpfs(tmp_path / "mnt", 256) as mnt:
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        r = subprocess.run([*NETRIG, "run", str(_cfg(tmp_path)), "--out", str(mnt / "out"), "--quiet"], env=ENV,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "Read-only file system" in r.stderr and "Traceback" not in r.stderr
        golden = Path(__file__).resolve().parents[1] / "data" / "report-router-handmade.json"
        r = subprocess.run([*NETRIG, "report", str(golden), "-o", str(mnt / "r.html")], env=ENV,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "cannot write the report: Read-only file system" in r.stderr
