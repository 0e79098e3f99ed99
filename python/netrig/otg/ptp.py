"""This host's linuxptp state, as `netrig serve` tells its clients (``X-Netrig-Ptp``,
docs/distributed.md): ``pmc``'s ``TIME_STATUS_NP`` — the clock's offset from the grandmaster and
the grandmaster's identity — asked at most once a second."""
from __future__ import annotations

import re
import shutil
import subprocess
import time

from netrig.otgclient import headers
from netrig.otgclient.headers import Ptp

_PMC_FIELD = re.compile(r"^\s*(master_offset|gmIdentity|gmPresent)\s+(\S+)", re.M)


def parse_pmc(out: str) -> Ptp | None:
    """``pmc -u -b 0 'GET TIME_STATUS_NP'``'s answer → :class:`Ptp` (None without a grandmaster)."""
    present, grandmaster, offset = False, None, None
    for key, value in _PMC_FIELD.findall(out):
        if key == "gmPresent":
            present = value == "true"
        elif key == "gmIdentity":
            grandmaster = value
        else:
            offset = value
    if not present or grandmaster is None or offset is None:
        return None
    try:
        return Ptp(grandmaster, float(offset))
    except ValueError:
        return None


class PtpProbe:
    """This host's linuxptp state through ``pmc``, asked at most once a second (None: no ptp4l)."""

    def __init__(self) -> None:
        self.pmc = shutil.which("pmc")
        self.at = 0.0
        self.last: Ptp | None = None

    def header(self) -> str | None:
        """``X-Netrig-Ptp``'s value (None: no linuxptp here, or no grandmaster)."""
        if self.pmc is None:
            return None
        if time.monotonic() - self.at >= 1.0:
            self.at = time.monotonic()
            try:
                out = subprocess.run([self.pmc, "-u", "-b", "0", "GET TIME_STATUS_NP"], capture_output=True,
                                     text=True, timeout=0.5, check=False).stdout
            except (OSError, subprocess.TimeoutExpired):
                out = ""
            self.last = parse_pmc(out)
        return headers.ptp(self.last) if self.last else None
