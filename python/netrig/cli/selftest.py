"""``netrig selftest``: RFC 8219 §9.2 — prove the tester can send and receive 1.1 × a rate loss-free."""
from __future__ import annotations

import argparse
import re

from netrig.errors import ConfigError

_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmg]?)(?:pps|fps)?\s*$", re.I)


def parse_rate(text: str) -> float:
    m = _RATE.match(text)
    if not m:
        raise ConfigError("--rate", f"must be a rate in frames/s like 1M, 500k, 250000 (got {text!r})")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2).lower()]


def register(subparsers) -> None:
    from netrig.cli.rfc2544 import add_common

    p = subparsers.add_parser("selftest", help="RFC 8219 self-test of the tester on the loopback test bed",
                              description="Prove factor × RATE loss-free for the whole trial on the loopback "
                                          "test bed; without --rate, find the highest proven rate per size.")
    add_common(p, sizes_default="64,1518")
    p.set_defaults(testbed="loopback")
    p.add_argument("--rate", default=None, help="rate(s) to prove, comma list, e.g. 1M,500k [line rate]")
    p.add_argument("--factor", type=float, default=1.1, help="performance reserve factor [1.1]")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from netrig.cli.rfc2544 import base_config, execute

    cfg = base_config(args)
    rates = [parse_rate(r) for r in args.rate.split(",")] if args.rate else []
    cfg["selftest"] = {"enabled": True, "factor": args.factor, "testbed": args.testbed, "rates_pps": rates}
    if not rates:
        cfg["selftest"]["rates_pps"] = []
    cfg["methods"] = []
    return execute(cfg, args)
