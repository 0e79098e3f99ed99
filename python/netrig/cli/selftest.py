"""``netrig selftest``: RFC 8219 §9.2 — prove the tester can send and receive 1.1 × a rate loss-free."""
from __future__ import annotations

import argparse
from typing import Any

from netrig.cli.shortcuts import add_common, base_config, execute
from netrig.methodology.vocabulary import deprecated, option
from netrig.model import defaults


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("selftest", help="RFC 8219 self-test of the tester on the loopback test bed",
                              description="Prove factor × each of --rates loss-free for the whole trial on the "
                                          "loopback test bed; without --rates, find the highest proven rate per size.")
    add_common(p, sizes_default="64,1518", events=False)
    p.set_defaults(testbed="loopback")
    option(p, "--rates", "a comma list, e.g. 1M,500k [line rate]")
    deprecated(p, "--rate", "--rates")
    option(p, "--factor", f"performance reserve factor [{defaults.SELFTEST_FACTOR}]",
           default=str(defaults.SELFTEST_FACTOR))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = base_config(args)
    rates = [r.frames_per_second("--rates") for r in args.rates or ()]
    cfg["selftest"] = {"enabled": True, "factor": args.factor, "testbed": args.testbed, "rates_pps": rates}
    cfg["methods"] = []
    return execute(cfg, args, {"factor": "--factor", "rates_pps": "--rates"})
