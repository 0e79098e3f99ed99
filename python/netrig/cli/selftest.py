"""``netrig selftest``: RFC 8219 §9.2 — prove the tester can send and receive 1.1 × a rate loss-free."""
from __future__ import annotations

import argparse
from typing import Any

from netrig.cli.shortcuts import add_common, base_config, execute
from netrig.errors import ConfigError
from netrig.methodology.vocabulary import deprecated
from netrig.model import defaults, parse_rate


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("selftest", help="RFC 8219 self-test of the tester on the loopback test bed",
                              description="Prove factor × each of --rates loss-free for the whole trial on the "
                                          "loopback test bed; without --rates, find the highest proven rate per size.")
    add_common(p, sizes_default="64,1518", events=False)
    p.set_defaults(testbed="loopback")
    p.add_argument("--rates", default=None, metavar="LIST",
                   help="the rates to prove, frames/s, a comma list, e.g. 1M,500k [line rate]")
    deprecated(p, "--rate", "--rates")
    p.add_argument("--factor", type=float, default=defaults.SELFTEST_FACTOR,
                   help=f"performance reserve factor [{defaults.SELFTEST_FACTOR}]")
    p.set_defaults(func=run)


def frames_per_second(text: str) -> float:
    rate = parse_rate(text, "--rates")
    if rate.kind != "pps" or rate.value is None:
        raise ConfigError("--rates", f"must be a rate in frames/s like 1M, 500k, 250000 (got {text!r})")
    return rate.value


def run(args: argparse.Namespace) -> int:
    cfg = base_config(args)
    rates = [frames_per_second(r) for r in args.rates.split(",")] if args.rates else []
    cfg["selftest"] = {"enabled": True, "factor": args.factor, "testbed": args.testbed, "rates_pps": rates}
    cfg["methods"] = []
    return execute(cfg, args, {"factor": "--factor", "rates_pps": "--rates"})
