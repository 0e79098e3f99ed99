"""``errors.wait_for``: a wait in the main thread that a raising signal handler stops cleanly
(``Event.wait`` can turn the signal into "release unlocked lock"), and that still sees the event."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from netrig.errors import wait_for

PY = Path(__file__).resolve().parents[1] / "python"

#: The signal arriving on entry to ``Condition._acquire_restore``, where ``Event.wait`` re-takes
#: its lock after the wait timed out: the moment that made ``netrig serve`` exit 3 on a SIGTERM.
AT_RESTORE = """
import signal, sys, threading
from netrig.errors import Terminated, wait_for

def handler(signum, frame):
    raise Terminated(signum)

signal.signal(signal.SIGTERM, handler)
restore = threading.Condition._acquire_restore

def late_signal(self, state):
    threading.Condition._acquire_restore = restore
    signal.raise_signal(signal.SIGTERM)
    restore(self, state)

threading.Condition._acquire_restore = late_signal
try:
    {wait}
except Terminated as e:
    print("terminated", e.signum)
except BaseException as e:
    print("other", type(e).__name__, e)
else:
    print("no signal")
"""


def in_main_thread(wait: str) -> str:
    code = textwrap.dedent(AT_RESTORE).replace("{wait}", wait)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                          env={"PYTHONPATH": str(PY)}, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_signal_stops_wait_for_as_itself_where_event_wait_turns_it_into_a_lock_error():
    assert in_main_thread("threading.Event().wait(0.01)") == "other RuntimeError release unlocked lock"
    assert in_main_thread("wait_for(threading.Event(), 0.01)") == "no signal"  # it never re-takes a lock
    assert in_main_thread("signal.raise_signal(signal.SIGTERM)") == "terminated 15"


def test_wait_for_sees_the_event_set_by_another_thread_and_times_out_without_it():
    event = threading.Event()
    t0 = time.monotonic()
    assert wait_for(event, 0.05) is False
    assert time.monotonic() - t0 >= 0.05
    threading.Timer(0.02, event.set).start()
    t0 = time.monotonic()
    assert wait_for(event, 10.0) is True
    assert time.monotonic() - t0 < 10.0
    assert wait_for(event) is True  # already set: at once, no timeout needed


def test_other_threads_wait_on_the_event_as_event_wait_does():
    event = threading.Event()
    waits: list[float | None] = []
    real = event.wait

    def counted(timeout=None):
        waits.append(timeout)
        return real(timeout)

    event.wait = counted  # type: ignore[method-assign]
    got: list[bool] = []
    worker = threading.Thread(target=lambda: got.append(wait_for(event, 10.0)))
    worker.start()
    event.set()
    worker.join()
    assert got == [True] and waits == [10.0]
