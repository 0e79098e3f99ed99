"""``netrig ports``: the interfaces netrig can use, with driver, speed, MTU, queues and I/O probe.

The probe opens each I/O backend for transmit on the interface (no traffic is sent, no XDP
program is attached: that happens only for receive) and reports what works and why not.
"""
from __future__ import annotations

import json

from netrig import _native
from netrig.cli.common import console, require_root
from netrig.units import format_bps


def register(sub) -> None:
    p = sub.add_parser("ports", help="list interfaces with driver, speed, MTU, queues and I/O support",
                       description=__doc__)
    p.add_argument("interfaces", nargs="*", metavar="IF", help="interfaces to show (default: all but lo)")
    p.add_argument("--netns", help="network namespace to look in (a name under /run/netns)")
    p.add_argument("--no-probe", action="store_true", help="skip the I/O backend probe (no root needed)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def describe(ifname: str, netns: str | None, probe: bool) -> dict:
    info = dict(_native.interface_info(ifname, netns))
    if probe:
        results = _native.probe_io(ifname, netns)
        info["io"] = {name: {"ok": ok, "detail": detail} for name, ok, detail in results}
        works = [name for name, ok, _ in results if ok]
        info["io_auto"] = works[0] if works else None
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
    for r in rows:
        cells = [r["name"], r["driver"] or "?", format_bps(r["speed_bps"]) if r["speed_bps"] else "none (nominal)",
                 str(r["mtu"]), f"{r['rx_queues']}/{r['tx_queues']}", "yes" if r["oper_up"] else "no", r["mac"]]
        if probe:
            x = r["io"]["af_xdp"]
            cells += [r["io_auto"] or "none", "yes" if x["ok"] else "no"]
        t.add_row(*cells)
    con = console()
    con.print(t)
    if probe:
        for r in rows:
            for name, x in r["io"].items():
                con.print(f"  {r['name']} {name}: {'ok — ' if x['ok'] else 'no — '}{x['detail']}")
    return 0
