"""Validated test-bed options (one frozen dataclass; every message names the field)."""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from netrig.errors import ConfigError

NAT_MODES = ("masquerade", "static")
PLACEMENTS = ("threaded-napi", "rps")

_RATE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmMgG]?)\s*(pps|bps|bit/s|b/s)\s*$")
_MULT = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}


def parse_cap(text: str | int | float) -> tuple[float | None, float | None]:
    """``"100kpps"`` → (100000.0, None); ``"10Mbps"`` / ``"10Mbit/s"`` → (None, 1e7). Plain numbers are pps."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text <= 0:
            raise ConfigError("cap", f"{text!r}: must be > 0 (e.g. 100kpps or 10Mbps)")
        return float(text), None
    m = _RATE_RE.match(str(text))
    if not m:
        raise ConfigError("cap", f"{text!r}: not a rate; use e.g. 5000pps, 100kpps, 10Mbps or 1Gbit/s")
    value = float(m.group(1)) * _MULT[m.group(2).lower()]
    if value <= 0:
        raise ConfigError("cap", f"{text!r}: must be > 0")
    return (value, None) if m.group(3) == "pps" else (None, value)


def parse_cpus(text: str | int | list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """``"1"``, ``"0-1"``, ``"0,1"`` or a list → sorted CPU numbers, each one this process may use."""
    if isinstance(text, int) and not isinstance(text, bool):
        cpus = {text}
    elif isinstance(text, (list, tuple)):
        cpus = set(text)
    else:
        cpus = set()
        for part in str(text).split(","):
            part = part.strip()
            m = re.match(r"^(\d+)(?:-(\d+))?$", part)
            if not m:
                raise ConfigError("dut_cpus", f"{text!r}: not a CPU list; use e.g. 1, 0-1 or 0,1")
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            if hi < lo:
                raise ConfigError("dut_cpus", f"{text!r}: range {part} is backwards")
            cpus.update(range(lo, hi + 1))
    allowed = os.sched_getaffinity(0)
    bad = sorted(c for c in cpus if not isinstance(c, int) or c not in allowed)
    if bad or not cpus:
        raise ConfigError("dut_cpus", f"{text!r}: CPU(s) {bad or 'none'} not available; "
                                      f"this machine has {sorted(allowed)}")
    return tuple(sorted(cpus))


@dataclass(frozen=True)
class TestbedOptions:
    """Options of every topology; a topology ignores what it does not use (``describe()`` shows which).

    rules:          firewall/acl: number of rules in the forward chain (≥ 2 for firewall, ≥ 1 for acl).
    cap:            policer: rate cap, ``"100kpps"`` or ``"10Mbps"`` (bit/s, L2 bytes incl. headers).
    cap_burst:      policer: token-bucket burst (packets for a pps cap, bytes for a bit/s cap;
                    None = about 10 ms of the cap, at least 10 packets / 2 full frames).
    nat:            nat: ``masquerade`` or ``static`` (SNAT to a fixed pool address).
    conntrack_max:  nat/firewall: ``net.netfilter.nf_conntrack_max`` (global! restored on teardown).
    log:            firewall/acl: ``log`` on the accept rule (sets the global ``nf_log_all_netns``).
    dut_cpus:       CPUs the DUT's packet processing runs on ("1", "0-1"); None = where the sender runs.
    dut_placement:  ``threaded-napi`` (GRO on, threaded NAPI kthreads pinned) or ``rps`` (RPS masks).
    ifaces:         external: the interfaces the user cabled (e.g. ``("eth1", "eth2")``).
    tester_stack:   configure the tester ports' addresses and routes in their kernel stacks too (for
                    socket-based tools); off by default so tester ports never answer test traffic.
    """

    __test__ = False

    rules: int = 10
    cap: str | float | None = None
    cap_burst: int | None = None
    nat: str = "masquerade"
    conntrack_max: int | None = None
    log: bool = False
    dut_cpus: str | tuple[int, ...] | None = None
    dut_placement: str = "threaded-napi"
    ifaces: tuple[str, ...] = field(default_factory=tuple)
    tester_stack: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.rules, bool) or not isinstance(self.rules, int) or not 1 <= self.rules <= 1_000_000:
            raise ConfigError("rules", f"{self.rules!r}: must be an integer from 1 to 1000000")
        if self.cap is not None:
            parse_cap(self.cap)
        if self.cap_burst is not None and (not isinstance(self.cap_burst, int) or self.cap_burst < 1):
            raise ConfigError("cap_burst", f"{self.cap_burst!r}: must be a positive integer")
        if self.nat not in NAT_MODES:
            raise ConfigError("nat", f"{self.nat!r}: must be one of {', '.join(NAT_MODES)}")
        if self.conntrack_max is not None and (isinstance(self.conntrack_max, bool)
                                               or not isinstance(self.conntrack_max, int)
                                               or self.conntrack_max < 1):
            raise ConfigError("conntrack_max", f"{self.conntrack_max!r}: must be a positive integer")
        if self.dut_cpus is not None:
            object.__setattr__(self, "dut_cpus", parse_cpus(self.dut_cpus))
        if self.dut_placement not in PLACEMENTS:
            raise ConfigError("dut_placement", f"{self.dut_placement!r}: must be one of {', '.join(PLACEMENTS)}")
        ifaces = self.ifaces
        if isinstance(ifaces, str):
            ifaces = tuple(i for i in ifaces.split(",") if i)
        object.__setattr__(self, "ifaces", tuple(ifaces))
        for i in self.ifaces:
            if not re.match(r"^[A-Za-z0-9_.:@-]{1,15}$", i):
                raise ConfigError("ifaces", f"{i!r}: not an interface name")

    @property
    def cap_pps(self) -> float | None:
        return parse_cap(self.cap)[0] if self.cap is not None else None

    @property
    def cap_bps(self) -> float | None:
        return parse_cap(self.cap)[1] if self.cap is not None else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["dut_cpus"] = list(self.dut_cpus) if self.dut_cpus else None
        d["ifaces"] = list(self.ifaces)
        return d
