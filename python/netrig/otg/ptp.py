"""This host's linuxptp state, as `netrig serve` tells its clients (``X-Netrig-Ptp``,
docs/distributed.md): ``pmc``'s ``TIME_STATUS_NP`` — the clock's offset from the grandmaster and
the grandmaster's identity — and ``DEFAULT_DATA_SET`` (the clock's own identity: a host that is the
grandmaster is 0 from it), asked at most once a second of the ptp4l at ``--ptp-socket`` (pmc's
``-s``; default: ptp4l's own, /var/run/ptp4l). netrig never runs ptp4l itself: the host does."""
from __future__ import annotations

import re
import shutil
import subprocess
import time

from netrig.otgclient import headers
from netrig.otgclient.headers import Ptp

_PMC_FIELD = re.compile(r"^\s*(master_offset|gmIdentity|gmPresent|clockIdentity)\s+(\S+)", re.M)
#: What pmc is asked.
QUERIES = ("GET TIME_STATUS_NP", "GET DEFAULT_DATA_SET")


def parse_pmc(out: str) -> Ptp | None:
    """``pmc -u -b 0 'GET TIME_STATUS_NP' 'GET DEFAULT_DATA_SET'``'s answer → :class:`Ptp`: the
    grandmaster and this clock's offset from it; a clock that is the grandmaster (no other present,
    the grandmaster its own identity) is 0 from it. None: no answer, or a clock following nobody."""
    fields = dict(_PMC_FIELD.findall(out))
    grandmaster, offset = fields.get("gmIdentity"), fields.get("master_offset")
    if grandmaster is None or offset is None:
        return None
    if fields.get("gmPresent") != "true":
        return Ptp(grandmaster, 0.0) if grandmaster == fields.get("clockIdentity") else None
    try:
        return Ptp(grandmaster, float(offset))
    except ValueError:
        return None


class PtpProbe:
    """This host's linuxptp state through ``pmc``, asked at most once a second (None: no ptp4l);
    ``socket``: the ptp4l's management socket (its ``uds_address``; None: pmc's default)."""

    def __init__(self, socket: str | None = None) -> None:
        self.pmc = shutil.which("pmc")
        self.argv = [self.pmc or "pmc", "-u", "-b", "0", *(["-s", socket] if socket else []), *QUERIES]
        self.at = 0.0
        self.last: Ptp | None = None

    def header(self) -> str | None:
        """``X-Netrig-Ptp``'s value (None: no linuxptp here, or no grandmaster)."""
        if self.pmc is None:
            return None
        if time.monotonic() - self.at >= 1.0:
            self.at = time.monotonic()
            try:
                out = subprocess.run(self.argv, capture_output=True, text=True, timeout=0.5, check=False).stdout
            except (OSError, subprocess.TimeoutExpired):
                out = ""
            self.last = parse_pmc(out)
        return headers.ptp(self.last) if self.last else None
