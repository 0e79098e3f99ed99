"""A DUT daemon for the soak tests: run inside the DUT's namespace, it watches the packets the DUT's
interfaces receive (``/sys/class/net/*/statistics/rx_packets``, every 0.1 s) and keeps
``--bytes-per-packet`` bytes for each one — a flow-accounting daemon that never frees its records.
With 0 it keeps nothing (the clean DUT). Its name (comm) is ``--name`` (for ``trial.cpu_procs``);
it writes the bytes it holds to ``--status`` every tick, so a test knows the leak it built.

    ip netns exec DUTNS python leaky_dut.py --bytes-per-packet 16 --name nrsoak-leaky --status FILE
"""
from __future__ import annotations

import argparse
import ctypes
import os
import signal
import time


def rx_packets() -> int:
    total = 0
    for ifname in os.listdir("/sys/class/net"):
        if ifname == "lo":
            continue
        try:
            with open(f"/sys/class/net/{ifname}/statistics/rx_packets") as f:
                total += int(f.read())
        except OSError:
            pass
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes-per-packet", type=int, default=0)
    ap.add_argument("--name", default="nrsoak-dut")
    ap.add_argument("--status", required=True)
    a = ap.parse_args()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(15, a.name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    held: list[bytes] = []
    total = 0
    last = rx_packets()
    while True:
        time.sleep(0.1)
        now = rx_packets()
        n = max(0, now - last) * a.bytes_per_packet
        last = now
        if n:
            held.append(b"\xa5" * n)  # written, so its pages are resident
            total += n
        with open(a.status + ".tmp", "w") as f:
            f.write(f"{time.monotonic()} {total}\n")
        os.replace(a.status + ".tmp", a.status)


if __name__ == "__main__":
    main()
