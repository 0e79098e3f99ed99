"""``netrig testbed up|down|status|list|clean``: build, inspect and remove test beds."""
from __future__ import annotations

import argparse
import json

from netrig import _native
from netrig.cli.common import require_root, testbed_options
from netrig.errors import ConfigError, TestbedError
from netrig.methodology.vocabulary import deprecated, option
from netrig.testbed import Testbed, clean, down, list_topologies, status, topology_options
from netrig.testbed import state as st
from netrig.testbed.options import CAPTURE_METHODS, FORWARD_MODES, FORWARDER_BACKENDS, PLACEMENTS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "testbed",
        help="build, inspect and remove test beds (namespaces + veth + a real Linux DUT)",
        description="Test beds are network namespaces and veth pairs with a Linux DUT in the middle. "
        "`up` builds one and keeps it after the command exits (remove it with `down ID`); `clean` removes "
        "what crashed runs left behind. See docs/testbed.md.",
    )
    sub = p.add_subparsers(dest="testbed_command", metavar="ACTION")

    up = sub.add_parser("up", help="build a test bed and keep it (prints its id and ports)")
    up.add_argument("topology", metavar="TOPOLOGY", help="one of the topologies `netrig testbed list` shows")
    option(up, "--testbed-option", "as the methods take it: rules=3000 is --rules 3000", action="append", default=[])
    option(up, "--rules", "firewall/acl/fwnat: rules in the forward chain (default: 10)")
    option(up, "--cap", "policer: rate cap, e.g. 100kpps or 10Mbps (bit/s)")
    option(up, "--cap-burst", "policer: burst in packets (pps cap) or bytes (bit/s cap); default about 10 ms of the "
                              "cap")
    option(up, "--nat", "nat/fwnat: masquerade (to the DUT address) or static SNAT (default: masquerade)",
           choices=("masquerade", "static"))
    option(up, "--conntrack-max", "nat/firewall/fwnat: net.netfilter.nf_conntrack_max (global; restored on down)")
    option(up, "--conntrack-buckets", "nat/firewall/fwnat: net.netfilter.nf_conntrack_buckets, the conntrack hash "
                                      "size (global; restored on down)")
    option(up, "--conntrack-timeout", "nat/firewall/fwnat: the DUT's UDP and established-TCP conntrack timeouts, in "
                                      "its namespace; whole seconds: 30s, 2m")
    deprecated(up, "--conntrack-timeout-s", "--conntrack-timeout", note="a duration with a unit: 30s, 2m")
    option(up, "--dut-cpus", "e.g. 1 or 0-1 (default: the last CPU; the tester keeps the others)")
    option(up, "--dut-placement", "how the DUT gets its CPUs: wire (default: a receive ring on them that drops when "
                                  "full; the DUT never slows the sender), rps, threaded-napi, or inline (none: the DUT "
                                  "works on the sender's CPU)", choices=PLACEMENTS)
    option(up, "--dut-ring", f"wire: the DUT's receive ring per CPU, {_native.WIRE_MIN_RING}..{_native.WIRE_MAX_RING} "
                             f"frames (default {_native.WIRE_DEFAULT_RING})")
    option(up, "--log", "firewall/acl/fwnat: log every accepted test packet that reaches the accept rule (kernel "
                        "log; sets the host-wide nf_log_all_netns)", default=None)
    option(up, "--flowtable", "router/acl/firewall/nat/fwnat: an nftables flowtable on the DUT's two interfaces "
                              "(software fast path: a TCP/UDP flow skips the forward chain once offloaded)",
           default=None)
    option(up, "--ifaces", "external: comma-separated interface names, e.g. eth1,eth2")
    option(up, "--tester-stack", "also configure tester-port addresses in their kernel stacks (socket tools)",
           default=None)
    option(up, "--mtu", "MTU of every test-bed link, 1280..65535, e.g. 9000 for jumbo frames (default: 1500)")
    option(up, "--forward-mode", "forwarder: the DUT's (default io); oneport: macswap (its only mode)",
           choices=FORWARD_MODES)
    option(up, "--forward-backend", "forwarder, oneport: the DUT's port I/O (default af_xdp; xdp: in-kernel "
                                    "XDP_REDIRECT)", choices=FORWARDER_BACKENDS)
    option(up, "--capture-method", f"capture: {', '.join(CAPTURE_METHODS)} (default recvfrom)",
           choices=CAPTURE_METHODS)
    option(up, "--capture-batch", "capture: frames per recvmmsg call, 1..1024 (default 10)")
    option(up, "--json", "the full description")
    up.set_defaults(func=run_up)

    _register_others(sub)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _register_others(sub: argparse._SubParsersAction) -> None:
    """``testbed down|status|repair|list|clean``."""
    down = sub.add_parser("down", help="tear down a test bed by id")
    down.add_argument("id", metavar="ID")
    down.set_defaults(func=run_down)

    status = sub.add_parser("status", help="show one or all test beds")
    status.add_argument("id", metavar="ID", nargs="?")
    option(status, "--json", "the full description")
    status.set_defaults(func=run_status)

    repair = sub.add_parser("repair", help="restore what a link flap removed (addresses, neighbours, routes)",
                            description="A link that goes down and up loses its routes, neighbours and IPv6 "
                            "addresses; this restores them (runs on a test bed do it before every trial). Fails "
                            "naming what cannot be restored (a link still down, a namespace gone).")
    repair.add_argument("id", metavar="ID")
    repair.set_defaults(func=run_repair)

    lst = sub.add_parser("list", help="list the available topologies and the options each takes")
    lst.set_defaults(func=run_list)

    clean = sub.add_parser("clean", help="remove what crashed netrig runs left behind")
    option(clean, "--force", "also remove test beds whose owner is alive and ones made by `testbed up`")
    clean.set_defaults(func=run_clean)


def _ports_table(tb) -> str:
    rows = [("port", "netns", "ifname", "mac", "ipv4", "ipv6", "send to (dst mac)")]
    for pt in tb.ports:
        rows.append((pt.name, pt.netns or "(host)", pt.ifname, pt.mac, pt.ipv4 or "-", pt.ipv6 or "-",
                     pt.peer_mac or "?"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


#: The options of ``testbed up``: test-bed option name → the option (its words; a duration's
#: option has no unit in its name).
UP_OPTIONS = {name: "--" + name.removesuffix("_s").replace("_", "-") for name in (
    "rules", "cap", "cap_burst", "nat", "conntrack_max", "conntrack_buckets", "conntrack_timeout_s", "dut_cpus",
    "dut_placement", "dut_ring", "log", "flowtable", "ifaces", "tester_stack", "mtu", "forward_mode",
    "forward_backend", "capture_method", "capture_batch")}


def _given(args: argparse.Namespace) -> dict:
    """The test-bed options ``testbed up`` was given (a topology refuses options it does not use),
    as the test bed takes them."""
    opts = {k: getattr(args, o.lstrip("-").replace("-", "_")) for k, o in UP_OPTIONS.items()}
    opts = {k: v for k, v in opts.items() if v is not None}
    if isinstance(timeout := opts.pop("conntrack_timeout_s", None), float):
        if not timeout.is_integer():
            raise ConfigError("--conntrack-timeout", f"{timeout:g}s: the kernel takes whole seconds")
        opts["conntrack_timeout_s"] = int(timeout)
    return opts


def run_up(args: argparse.Namespace) -> int:
    require_root("building a test bed")
    opts = _given(args)
    given = testbed_options(args.testbed_option)
    for k, v in given.items():
        if k in opts and opts[k] != v:
            raise ConfigError(f"--testbed-option {k}", f"and {UP_OPTIONS[k]} give two values: give one")
    opts.update(given)
    if isinstance(ifaces := opts.pop("ifaces", None), str):
        opts["ifaces"] = tuple(i for i in ifaces.split(",") if i)
    try:
        tb = Testbed.create(args.topology, **opts)
    except ConfigError as e:
        if e.field == "topology":
            raise
        name = f"--testbed-option {e.field}" if e.field in given else UP_OPTIONS.get(e.field, e.field)
        raise ConfigError(name, e.message) from None
    tb.up()
    tb.detach()
    if args.json:
        print(json.dumps(tb.describe(), indent=1))
        return 0
    print(f"testbed {tb.id} ({tb.topology}) is up; remove it with: netrig testbed down {tb.id}")
    print(_ports_table(tb))
    if tb.placement and tb.placement.cpus:
        print(f"DUT placement: {tb.placement.mode} on CPU(s) {list(tb.placement.cpus)}")
    if tb.translates_source:  # nat, fwnat
        print(f"receiver sees source address {tb.expected_rx_src_ip} / {tb.expected_rx_src_ipv6}")
    return 0


def run_down(args: argparse.Namespace) -> int:
    require_root("removing a test bed")
    down(args.id)
    print(f"testbed {args.id} removed")
    return 0


def _describe(tb_id: str) -> dict:
    """A test bed's full description, or why this netrig cannot read it."""
    try:
        return Testbed.attach(tb_id).describe()
    except TestbedError as e:
        return {"id": tb_id, "error": str(e)}


def run_status(args: argparse.Namespace) -> int:
    if args.json:
        if args.id is None:
            print(json.dumps([_describe(s.id) for s in st.all_states()], indent=1))
        else:
            print(json.dumps(Testbed.attach(args.id).describe(), indent=1))
        return 0
    rows = status(args.id)
    if not rows:
        print("no test beds")
        return 0
    for s in rows:
        owner = "detached" if s["detached"] else f"pid {s['owner_pid']} ({'alive' if s['owner_alive'] else 'dead'})"
        missing = sorted(set(s["namespaces"]) - set(s["namespaces_present"]))
        print(f"{s['id']}  {s['topology']:<9} {s['status']:<8} {owner}"
              + (f"  MISSING: {', '.join(missing)}" if missing else "")
              + ("  (health not checked: needs root)" if s["problems"] is None else ""))
        for problem in s["problems"] or []:
            print(f"  broken: {problem}")
        if s["problems"] and not s.get("foreign"):
            print(f"  trials would lose everything: `netrig testbed repair {s['id']}` restores what it can (runs "
                  f"on it do before every trial), or `netrig testbed down {s['id']}`")
        if args.id is not None:
            print(_ports_table(Testbed.attach(s["id"])))
    return 0


def run_repair(args: argparse.Namespace) -> int:
    require_root("repairing a test bed")
    restored = Testbed.attach(args.id).repair()
    for r in restored:
        print(f"restored {r}")
    print(f"testbed {args.id} is up" + ("" if restored else " (nothing was missing)"))
    return 0


def run_list(args: argparse.Namespace) -> int:
    for name, desc in list_topologies():
        print(f"{name:<9} {desc}")
        if opts := topology_options(name):
            print(f"{'':<9} options: {', '.join(o.replace('_', '-') for o in opts)}")
    return 0


def run_clean(args: argparse.Namespace) -> int:
    require_root("cleaning up test beds")
    rep = clean(force=args.force)
    for t in rep.removed_testbeds:
        print(f"removed testbed {t}")
    for n in rep.removed_namespaces:
        print(f"removed netns {n}")
    for n in rep.removed_links:
        print(f"removed link {n}")
    for k in rep.kept:
        print(f"kept {k} (use --force to remove)")
    for e in rep.errors:
        print(f"error: {e}")
    if not (rep.removed_testbeds or rep.removed_namespaces or rep.removed_links or rep.kept or rep.errors):
        print("nothing to clean")
    return 1 if rep.errors else 0
