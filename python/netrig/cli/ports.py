"""``netrig ports``: the interfaces netrig can use, with driver, speed, MTU, queues and I/O probe.

The probe opens each I/O backend for transmit on the interface (no traffic is sent) and reports
what works and why not. For receiving over AF_XDP it also loads netrig's XDP program and looks for
another XDP program already on the interface, but attaches nothing (on some NICs attaching XDP
resets the link); ``io auto`` is what ``--io auto`` picks for a port that receives.
"""
from __future__ import annotations

import json
import subprocess
from typing import Any

from netrig import _native
from netrig.cli.common import console, require_root
from netrig.errors import LiveInterfaceError, NetrigError
from netrig.methodology.vocabulary import helptext
from netrig.model import format_bps


def register(sub) -> None:
    p = sub.add_parser("ports", help="list interfaces with driver, speed, MTU, queues and I/O support",
                       description=__doc__)
    p.add_argument("interfaces", nargs="*", metavar="IF", help="interfaces to show (default: all but lo)")
    p.add_argument("--netns", metavar="NS", help=helptext("--netns", "to look in"))
    p.add_argument("--no-probe", action="store_true", help="skip the I/O backend probe (no root needed)")
    p.add_argument("--json", action="store_true", help=helptext("--json"))
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


def transmit_guard(ifname: str, netns: str | None) -> dict[str, Any]:
    """Would the transmit guard let a trial send on ``ifname``? The engine's own check: the port is
    opened for transmit with no flow (nothing is sent) and closed. ``{"ok", "detail"}``; a port that
    fails to open for another reason (down, say) is left to the backend probe's lines."""
    try:
        _native.Generator([_native.Port(ifname, netns, io="socket")], []).close()
    except LiveInterfaceError as e:
        return {"ok": False, "detail": str(e)}
    except NetrigError as e:
        return {"ok": True, "detail": f"passes (the port did not open: {e})"}
    return {"ok": True, "detail": "passes: a trial may send here"}


def describe(ifname: str, netns: str | None, probe: bool) -> dict:
    info: dict[str, Any] = _native.interface_info(ifname, netns).to_dict()
    if probe:
        results = _native.probe_io(ifname, netns)
        info["io"] = {p.backend: {"ok": p.ok, "detail": p.detail} for p in results}
        x = info["io"].get("af_xdp")
        if x is not None and x["ok"]:
            rx_ok, rx_detail = xdp_rx_probe(ifname, netns)
            x["rx_ok"], x["rx_detail"] = rx_ok, rx_detail
        works = [p.backend for p in results if p.ok]
        info["io_auto_tx"] = works[0] if works else None
        rx_works = [n for n in works if info["io"][n].get("rx_ok", True)]
        info["io_auto"] = rx_works[0] if rx_works else None
        info["transmit_guard"] = transmit_guard(ifname, netns)
    return info


def run(args) -> int:
    probe = not args.no_probe
    if probe:
        require_root("probing I/O backends (use --no-probe to skip)")
    names = args.interfaces or [n for n in _native.list_interfaces(args.netns) if n != "lo"]
    rows = [describe(n, args.netns, probe) for n in names]
    if args.json:
        print(json.dumps(rows, indent=2))
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
        cells = [r["name"], r["driver"] or "?", format_bps(r["speed_bps"]) if r["speed_bps"] else "none (nominal)",
                 str(r["mtu"]), f"{r['rx_queues']}/{r['tx_queues']}", "yes" if r["oper_up"] else "no", r["mac"]]
        if probe:
            x = r["io"]["af_xdp"]
            xdp = "no" if not x["ok"] else ("TX + RX" if x.get("rx_ok") else "TX only")
            cells += [r["io_auto"] or "none", xdp, "yes" if r["transmit_guard"]["ok"] else "refused (live)"]
        t.add_row(*cells)
    con = console()
    con.print(t)
    if probe:
        for r in rows:
            if not r["transmit_guard"]["ok"]:
                con.print(f"  {r['name']} transmit guard: refused — {r['transmit_guard']['detail']}")
            for name, x in r["io"].items():
                con.print(f"  {r['name']} {name}: {'ok — ' if x['ok'] else 'no — '}{x['detail']}")
                if "rx_ok" in x:
                    con.print(f"  {r['name']} {name} receive: {'ok — ' if x['rx_ok'] else 'no — '}{x['rx_detail']}")
    return 0
