"""``netrig ndr-pdr``: MLRsearch for NDR (0 % loss) and PDR (0.5 % loss) at once."""
from __future__ import annotations

import argparse

from netrig.cli.rfc2544 import add_common, base_config, execute


def register(subparsers) -> None:
    p = subparsers.add_parser("ndr-pdr", help="MLRsearch: NDR and PDR (conditional throughput) on a test bed",
                              description="Find NDR and PDR at once with MLRsearch (draft-ietf-bmwg-mlrsearch).")
    add_common(p, sizes_default="64")
    p.add_argument("--size", dest="sizes", help="alias of --sizes")
    p.add_argument("--pdr-loss", type=float, default=0.005, help="PDR goal loss ratio [0.005]")
    p.add_argument("--width", type=float, default=0.005, help="goal relative width [0.005]")
    p.add_argument("--exceed-ratio", type=float, default=0.5, help="goal exceed ratio [0.5]")
    p.add_argument("--initial-duration", default="1s", help="initial trial duration [1s]")
    p.add_argument("--final-duration", default=None, help="final trial duration [--duration or 1s]")
    p.add_argument("--duration-sum", default=None, help="goal duration sum [3 × final duration]")
    p.add_argument("--implementation", default="netrig", help="netrig or reference (the MLRsearch package) [netrig]")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from netrig.config import parse_duration

    final = parse_duration(args.final_duration or args.duration or "1s", "--final-duration")
    initial = min(parse_duration(args.initial_duration, "--initial-duration"), final)
    dsum = parse_duration(args.duration_sum, "--duration-sum") if args.duration_sum else 3 * final
    common = {"exceed_ratio": args.exceed_ratio, "relative_width": args.width, "initial_trial_duration_s": initial,
              "final_trial_duration_s": final, "duration_sum_s": dsum}
    cfg = base_config(args)
    cfg["methods"] = [{"mlrsearch": {"goals": [{"name": "NDR", "loss_ratio": 0.0, **common},
                                              {"name": "PDR", "loss_ratio": args.pdr_loss, **common}],
                                    "implementation": args.implementation}}]
    return execute(cfg, args)
