"""``netrig sweep --over DIMENSION=V1,V2,…``: a scalability sweep (methodology §6) — the same test at
every value of one dimension (flows, queues, ACL rules, DUT CPUs, frame size, or any config key
path), run as one resumable study and reported as a curve and a table with the scale-up ratio of
each step (``DIR/compare.html``): ``netrig sweep --over flows=1,256,64k,1M --testbed router``.

A sweep with a config file of its own: a study file with a ``[sweep]`` table (``netrig study``)."""
from __future__ import annotations

import argparse
import re
from typing import Any

from netrig.cli.shortcuts import COMMON_FIELDS, add_common, base_config
from netrig.cli.study import execute_study
from netrig.errors import ConfigError
from netrig.methodology.vocabulary import option
from netrig.run.study import SWEEP_DIMENSIONS, study_from_dict

#: ``4k`` = 4000, ``1M`` = 1 000 000, ``2G`` (decimal, as rates are).
_SI = {"k": 1_000, "M": 1_000_000, "G": 1_000_000_000}
_DEFAULT_OUT = "netrig-results"


def register(sub: Any) -> None:
    dims = "; ".join(f"{k}: {v[1]}" for k, v in SWEEP_DIMENSIONS.items())
    p = sub.add_parser("sweep", help="one dimension swept (flows, rules, queues, …), any method per point: a curve "
                                     "and the scale-up per step", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    option(p, "--over", f"what to sweep and its values (2 to 32; 4k = 4000, 1M = 1000000). Dimensions: {dims}; or "
                        "any config key path, e.g. testbed.options.cap=100kpps,200kpps", required=True)
    option(p, "--method", "method run at every point, by its config name (repeatable) [rfc2544_throughput]",
           action="append")
    option(p, "--name", "the sweep's name: its output directory results/<name> [sweep-<dimension>]")
    add_common(p, sizes_default="64")
    p.set_defaults(func=run)


def parse_value(text: str) -> int | float | str:
    """``16`` → 16, ``64k`` → 64000, ``-2`` → -2, ``0.5`` → 0.5, anything else stays a string
    (``100kpps``)."""
    m = re.fullmatch(r"(-?\d+)([kMG]?)", text)
    if m:
        return int(m.group(1)) * _SI.get(m.group(2), 1)
    try:
        return float(text)
    except ValueError:
        return text


def parse_over(text: str) -> tuple[str, list[Any]]:
    dim, sep, values = text.partition("=")
    items = [v.strip() for v in values.split(",")]
    if not sep or not dim.strip() or not all(items):
        raise ConfigError("--over", f"{text!r}: give DIMENSION=V1,V2,... e.g. flows=1,16,256")
    return dim.strip(), [parse_value(v) for v in items]


def run(args: argparse.Namespace) -> int:
    over, values = parse_over(args.over)
    base = base_config(args)
    base.pop("output", None)
    base["methods"] = [{m: {}} for m in (args.method or ["rfc2544_throughput"])]
    name = args.name or "sweep-" + re.sub(r"[^A-Za-z0-9.-]", "-", over.rsplit(".", 1)[-1].replace("_", "-"))
    doc = {"study": {"name": name, "title": f"{over} swept over {len(values)} values"}, "base": base,
           "sweep": {"over": over, "values": values}}
    try:
        study = study_from_dict(doc)
    except ConfigError as e:
        raise _option_error(e) from None
    out = args.out if args.out != _DEFAULT_OUT else None
    return execute_study(study, out, args.quiet, f"netrig sweep --over {args.over} ...", args.metrics_listen)


def _option_error(e: ConfigError) -> ConfigError:
    """A study error in the words of the command line."""
    field = e.field
    if field.startswith("sweep.values[") and "): " in field:
        # A point's config failed: the swept key itself, or something every point shares.
        where, field = field.split("): ", 1)
        key = where.split("(", 1)[1].split(" = ", 1)[0]
        if field == key or field.startswith(key + ".") or key.startswith(field):
            return ConfigError("--over", f"{where.split(' (', 1)[1]}: {field}: {e.message}")
    if field.startswith("sweep."):
        return ConfigError("--over" if not field.startswith("sweep.label") else "--name", e.message)
    if field.startswith("study."):
        return ConfigError("--name", e.message)
    if field.startswith("methods"):
        return ConfigError("--method", e.message)
    if field.startswith("testbed.options."):
        return ConfigError(f"--testbed-option {field.removeprefix('testbed.options.')}", e.message)
    last = re.sub(r"\[\d+\]$", "", field.rsplit(".", 1)[-1])
    return ConfigError(COMMON_FIELDS.get(last, field), e.message)
