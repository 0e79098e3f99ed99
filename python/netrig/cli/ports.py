"""``netrig ports``: the interfaces netrig can use, with driver, speed, MTU, queues and I/O probe.

The probe opens each I/O backend for transmit on the interface (no traffic is sent) and reports
what works and why not. For receiving over AF_XDP it also loads netrig's XDP program and looks for
another XDP program already on the interface, but attaches nothing (on some NICs attaching XDP
resets the link); ``io auto`` is what ``--io auto`` picks for a port that receives.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
from typing import Any

from netrig import _native
from netrig.cli.common import console, require_root
from netrig.errors import LiveInterfaceError, NetrigError
from netrig.methodology.vocabulary import option
from netrig.model import format_bps


def register(sub) -> None:
    p = sub.add_parser("ports", help="list interfaces with driver, speed, MTU, queues and I/O support",
                       description=__doc__)
    p.add_argument("interfaces", nargs="*", metavar="IF", help="interfaces to show (default: all but lo)")
    option(p, "--netns", "to look in")
    option(p, "--no-probe", "skip the I/O backend probe (no root needed)")
    option(p, "--json")
    p.set_defaults(func=run)


def attached_xdp(ifname: str, netns: str | None) -> dict | None:
    """The XDP program already attached to ``ifname`` (``ip -d -j link``), or None."""
    cmd = ["ip", *(["-n", netns] if netns else []), "-d", "-j", "link", "show", "dev", ifname]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout
        link = json.loads(out)[0]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    return link.get("xdp")


def xdp_rx_probe(ifname: str, netns: str | None) -> tuple[bool, str]:
    """Can an AF_XDP port receive here? Loads the program, checks for a foreign one; attaches nothing."""
    ok, detail = _native.probe_xdp_program(ifname)
    if not ok:
        return False, detail
    other = attached_xdp(ifname, netns)
    if other:
        prog = other.get("prog") or {}
        return False, (f"another XDP program is attached (id {prog.get('id', '?')}, {prog.get('name') or 'unnamed'}); "
                       f"detach it (`ip link set dev {ifname} xdp off`) to receive over AF_XDP")
    return True, detail


@dataclasses.dataclass(frozen=True)
class Check:
    """A yes or no with why: a backend that opens (or receives), the transmit guard's verdict."""

    ok: bool
    detail: str


def transmit_guard(ifname: str, netns: str | None) -> Check:
    """Would the transmit guard let a trial send on ``ifname``? The engine's own check: the port is
    opened for transmit with no flow (nothing is sent) and closed. A port that fails to open for
    another reason (down, say) is left to the backend probe's lines."""
    try:
        _native.Generator([_native.Port(ifname, netns, io="socket")], []).close()
    except LiveInterfaceError as e:
        return Check(False, str(e))
    except NetrigError as e:
        return Check(True, f"passes (the port did not open: {e})")
    return Check(True, "passes: a trial may send here")


@dataclasses.dataclass(frozen=True)
class Probe:
    """What ``netrig ports`` found about one backend: opens for transmit; AF_XDP: receives too."""

    backend: str
    opens: Check
    receives: Check | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dataclasses.asdict(self.opens)
        if self.receives is not None:
            out.update(rx_ok=self.receives.ok, rx_detail=self.receives.detail)
        return out


@dataclasses.dataclass(frozen=True)
class PortReport:
    """One interface: what the kernel says of it and, probed, every backend and the transmit guard."""

    info: _native.InterfaceInfo
    probes: tuple[Probe, ...] = ()
    guard: Check | None = None

    @property
    def auto_tx(self) -> str | None:
        """What ``--io auto`` picks for a port that only sends."""
        return next((p.backend for p in self.probes if p.opens.ok), None)

    @property
    def auto(self) -> str | None:
        """What ``--io auto`` picks for a port that receives."""
        return next((p.backend for p in self.probes if p.opens.ok and (p.receives is None or p.receives.ok)), None)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = self.info.to_dict()
        if self.guard is not None:
            out.update(io={p.backend: p.to_dict() for p in self.probes}, io_auto_tx=self.auto_tx, io_auto=self.auto,
                       transmit_guard=dataclasses.asdict(self.guard))
        return out


def describe(ifname: str, netns: str | None, probe: bool) -> PortReport:
    info = _native.interface_info(ifname, netns)
    if not probe:
        return PortReport(info)
    probes = []
    for p in _native.probe_io(ifname, netns):
        rx = Check(*xdp_rx_probe(ifname, netns)) if p.backend == "af_xdp" and p.ok else None
        probes.append(Probe(p.backend, Check(p.ok, p.detail), rx))
    return PortReport(info, tuple(probes), transmit_guard(ifname, netns))


def _cells(r: PortReport) -> list[str]:
    i = r.info
    cells = [i.name, i.driver or "?", format_bps(i.speed_bps) if i.speed_bps else "none (nominal)", str(i.mtu),
             f"{i.rx_queues}/{i.tx_queues}", "yes" if i.oper_up else "no", i.mac]
    if r.guard is not None:
        x = next((p for p in r.probes if p.backend == "af_xdp"), None)
        xdp = "no" if x is None or not x.opens.ok else ("TX + RX" if x.receives and x.receives.ok else "TX only")
        cells += [r.auto or "none", xdp, "yes" if r.guard.ok else "refused (live)"]
    return cells


def run(args) -> int:
    probe = not args.no_probe
    if probe:
        require_root("probing I/O backends (use --no-probe to skip)")
    names = args.interfaces or [n for n in _native.list_interfaces(args.netns) if n != "lo"]
    rows = [describe(n, args.netns, probe) for n in names]
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
        return 0
    from rich.table import Table

    t = Table(title=f"interfaces{' in netns ' + args.netns if args.netns else ''}")
    for col in ("name", "driver", "speed", "MTU", "queues rx/tx", "up", "MAC"):
        t.add_column(col)
    if probe:
        t.add_column("io auto")
        t.add_column("AF_XDP")
        t.add_column("sends")
    for r in rows:
        t.add_row(*_cells(r))
    con = console()
    con.print(t)
    for r in rows:
        name = r.info.name
        if r.guard is not None and not r.guard.ok:
            con.print(f"  {name} transmit guard: refused — {r.guard.detail}")
        for p in r.probes:
            con.print(f"  {name} {p.backend}: {'ok — ' if p.opens.ok else 'no — '}{p.opens.detail}")
            if p.receives is not None:
                con.print(f"  {name} {p.backend} receive: {'ok — ' if p.receives.ok else 'no — '}{p.receives.detail}")
    return 0
