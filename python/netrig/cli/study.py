"""``netrig study FILE [--out DIR]``: a matrix of DUT variants × methods run as one resumable run and
reported as one comparison against the baseline (``netrig.run.study``). Running it again into the
same directory continues it."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from netrig.cli.common import add_metrics_listen, command_line, console, metrics_endpoint, require_privileges
from netrig.cli.console import run_with_console
from netrig.errors import INTERRUPTS, InterruptedTrial, ResultError, Terminated
from netrig.methodology.vocabulary import option
from netrig.report import write_study
from netrig.run.config import TestConfig
from netrig.run.study import Study, StudyRunner, load_study
from netrig.telemetry.telemetry import Telemetry


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "study", help="run a matrix of DUT variants x methods and compare every variant with the baseline",
        description="Run every variant of a study file (a [base] netrig config and [[variant]] tables that change "
                    "it: test bed, options, knobs, methods) into DIR/<variant>, then write DIR/compare.html: each "
                    "variant's throughput, goodput and CPU as a percentage of the baseline's, table and chart. "
                    "Running the same study into the same DIR continues it (finished variants are kept, an "
                    "interrupted one resumes). Examples: examples/service-cost.toml, examples/host-tuning.toml.")
    p.add_argument("file", help="the study file (.toml, .yaml, .yml, .json)")
    option(p, "--out", "[results/<study name>]")
    option(p, "--quiet")
    add_metrics_listen(p, "every variant's run (labelled run=<variant>)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return execute_study(load_study(args.file), args.out, args.quiet, f"netrig study {args.file}",
                         args.metrics_listen)


def execute_study(study: Study, out_dir: str | None, quiet: bool, again: str, metrics_listen: str | None = None) -> int:
    """Run ``study`` into ``out_dir`` (default ``results/<name>``) with the console, then write its
    comparison; ``again`` is the command that continues it (printed when it is stopped). With
    ``metrics_listen`` every variant is exported there (one endpoint for the whole study)."""
    for v in study.variants:
        require_privileges(v.config)
    with metrics_endpoint(metrics_listen) as tel:
        return _study(study, out_dir, quiet, again, tel)


def _study(study: Study, out_dir: str | None, quiet: bool, again: str, tel: Telemetry | None) -> int:
    err = console(stderr=True)
    command = command_line()
    statuses: dict[str, int] = {}

    def run_variant(config: TestConfig, out: Path, resume: bool) -> None:
        statuses[config.name] = run_with_console(config, out, resume=resume, command=command, quiet=quiet,
                                                 telemetry=tel)
        if statuses[config.name] >= 128:
            raise Terminated(statuses[config.name] - 128) if statuses[config.name] != 130 else KeyboardInterrupt()

    runner = StudyRunner(study, out_dir, run_variant=run_variant,
                         notify=lambda msg: err.print(f"[bold]study {study.name}[/bold]: {msg}", soft_wrap=True))
    try:
        outcomes = runner.run()
    except (*INTERRUPTS, InterruptedTrial):
        err.print(f"study {study.name}: stopped; what finished is kept in {runner.out}. Continue with: "
                  f"{again} --out {runner.out}", markup=False, soft_wrap=True)
        return 130
    try:
        out = write_study(runner.out)
    except ResultError as e:
        err.print(f"netrig: error: {e}", markup=False, soft_wrap=True)
        return 2
    console().print(f"comparison: {out}")
    failed = [o for o in outcomes if not o.complete and o.state != "skipped"]
    for o in outcomes:
        if not o.complete:
            err.print(f"variant {o.name}: {o.state}: {o.error}", markup=False, soft_wrap=True)
    return 2 if failed else (1 if any(s == 1 for s in statuses.values()) else 0)
