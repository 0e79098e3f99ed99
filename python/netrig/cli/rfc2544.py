"""``netrig rfc2544``: RFC 2544 tests on a test bed without writing a config file."""
from __future__ import annotations

import argparse
import sys

from netrig.errors import ConfigError

TESTS = {
    "throughput": "rfc2544_throughput",
    "latency": "rfc2544_latency",
    "frame-loss": "rfc2544_frame_loss",
    "back-to-back": "rfc2544_back_to_back",
    "system-recovery": "rfc2544_system_recovery",
    "reset": "rfc2544_reset",
}


def add_common(p: argparse.ArgumentParser, sizes_default: str = "rfc") -> None:
    """Options shared by the shortcut subcommands (same words as the config file keys)."""
    p.add_argument("--testbed", default="router", help="test bed (router, policer, …, or simulated) [router]")
    p.add_argument("--testbed-option", action="append", default=[], metavar="KEY=VALUE",
                   help="test bed option, repeatable (e.g. cap=1Mpps for policer)")
    p.add_argument("--sizes", default=sizes_default,
                   help=f"frame sizes incl. FCS: 'rfc', a list like 64,512,1518, imix, simple-imix [{sizes_default}]")
    p.add_argument("--duration", default=None, help="trial duration, e.g. 2s, 60s [60s]")
    p.add_argument("--drain", default=None, help="drain time after each trial [2s]")
    p.add_argument("--repetitions", type=int, default=1, help="repeat every method N times [1]")
    p.add_argument("--io", default="auto", help="port I/O: auto, af_xdp, af_packet, socket [auto]")
    p.add_argument("--nominal-speed", default=None, help="line rate to assume when the interface has none [10G]")
    p.add_argument("--speed", default=None, help="line rate to use, overriding the interface [from interface]")
    p.add_argument("--no-selftest", action="store_true", help="skip the RFC 8219 self-test on the loopback test bed")
    p.add_argument("--sim-capacity-pps", type=float, default=None,
                   help="with --testbed simulated: the simulated DUT's capacity [1e6]")
    p.add_argument("--out", default="netrig-results", help="output directory [netrig-results]")
    p.add_argument("--quiet", action="store_true", help="no live progress display")


def base_config(args: argparse.Namespace) -> dict:
    opts = {}
    for kv in args.testbed_option:
        if "=" not in kv:
            raise ConfigError("--testbed-option", f"must be KEY=VALUE (got {kv!r})")
        k, v = kv.split("=", 1)
        opts[k.strip().replace("-", "_")] = v.strip()
    tb: dict = {"name": args.testbed, "options": opts}
    if args.testbed == "simulated" and args.sim_capacity_pps:
        tb["simulator"] = {"capacity_pps": args.sim_capacity_pps}
    cfg: dict = {"testbed": tb, "ports": {"io": args.io}, "frames": {"sizes": args.sizes},
                 "trial": {}, "repetitions": args.repetitions, "selftest": {"enabled": not args.no_selftest},
                 "output": {"dir": args.out}, "line_rate": {}}
    if args.duration:
        cfg["trial"]["duration_s"] = args.duration
    if args.drain:
        cfg["trial"]["drain_s"] = args.drain
    if args.nominal_speed:
        cfg["line_rate"]["nominal_bps"] = args.nominal_speed
    if args.speed:
        cfg["line_rate"]["speed_bps"] = args.speed
    return cfg


def execute(cfg: dict, args: argparse.Namespace) -> int:
    from netrig.config import config_from_dict
    from netrig.results.console import run_with_console

    config = config_from_dict(cfg)
    return run_with_console(config, args.out, command=" ".join(["netrig"] + sys.argv[1:]), quiet=args.quiet)


def register(subparsers) -> None:
    p = subparsers.add_parser("rfc2544", help="RFC 2544 throughput/latency/frame loss/back-to-back on a test bed",
                              description="RFC 2544 tests (sections 26.1–26.6) on a test bed.")
    add_common(p)
    p.add_argument("--tests", default="throughput,latency,frame-loss",
                   help=f"comma list of: {', '.join(TESTS)} [throughput,latency,frame-loss]")
    p.add_argument("--resolution", type=float, default=0.1, help="throughput search resolution, %% of line rate [0.1]")
    p.add_argument("--latency-trials", type=int, default=20, help="latency trials per frame size [20]")
    p.add_argument("--b2b-trials", type=int, default=50, help="back-to-back trials per frame size [50]")
    p.add_argument("--step", type=float, default=10.0, help="frame loss rate step, %% of line rate [10]")
    p.add_argument("--reset-command", default="", help="command that resets the DUT (for --tests reset)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    names = [t.strip() for t in args.tests.split(",") if t.strip()]
    methods = []
    for t in names:
        if t not in TESTS:
            raise ConfigError("--tests", f"unknown test {t!r}; allowed: {', '.join(TESTS)}")
        params: dict = {}
        if t == "throughput":
            params = {"resolution_pct": args.resolution}
        elif t == "latency":
            params = {"trials": args.latency_trials}
        elif t == "frame-loss":
            params = {"step_pct": args.step}
        elif t == "back-to-back":
            params = {"trials": args.b2b_trials}
        elif t == "reset":
            if not args.reset_command and args.testbed != "simulated":
                raise ConfigError("--reset-command", "is required for --tests reset: the command that resets the DUT")
            params = {"command": args.reset_command}
        methods.append({TESTS[t]: params})
    if not methods:
        raise ConfigError("--tests", f"needs at least one of {', '.join(TESTS)}")
    cfg = base_config(args)
    cfg["methods"] = methods
    return execute(cfg, args)
