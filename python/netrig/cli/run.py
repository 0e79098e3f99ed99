"""``netrig run FILE [--out DIR]``: run a test described by a config file;
``netrig run --resume DIR``: continue any interrupted run in DIR (Ctrl-C, SIGTERM, ``kill -9``,
power loss, a full disk, an error), including the shortcut commands' and the demo's: its
configuration is DIR/config.json, or the header of DIR/trials.ndjson."""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from netrig.cli.common import add_metrics_listen, command_line, metrics_endpoint, require_privileges
from netrig.cli.console import run_with_console
from netrig.errors import ConfigError
from netrig.methodology.vocabulary import option
from netrig.run.config import load_config
from netrig.run.runner import resume_config


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("run", help="run a test described by a TOML/YAML/JSON config file",
                              description="Run a test described by a config file (see docs/methodology.md).")
    p.add_argument("file", nargs="?", help="config file (.toml, .yaml, .yml, .json); with --resume, "
                                           "defaults to the run's own configuration (DIR/config.json, else "
                                           "the header of DIR/trials.ndjson)")
    option(p, "--resume", "however it ended: Ctrl-C, SIGTERM, kill -9, a full disk, an error; also runs of rfc2544, "
                          "ndr-pdr, selftest and demo) without redoing finished trials")
    option(p, "--out", "default: output.dir from the config")
    option(p, "--monitor", "trial.monitor = true, whatever the file says")
    option(p, "--json", "the run's result document (result.json); progress still on stderr")
    option(p, "--quiet")
    add_metrics_listen(p, "the run (every trial's counts, the trial in progress, the DUT monitor's samples)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.resume and args.out and Path(args.out) != Path(args.resume):
        raise ConfigError("--out", "cannot differ from --resume: a resumed run continues in its own directory")
    if args.file is None and not args.resume:
        raise ConfigError("FILE", "is required: the config file to run (or --resume DIR)")
    config = load_config(args.file) if args.file else resume_config(args.resume)
    if args.monitor and not config.trial.monitor:
        if args.resume:
            raise ConfigError("--monitor", "a resumed run keeps its configuration (monitoring was off); start a new "
                                           "run with --monitor")
        config = replace(config, trial=replace(config.trial, monitor=True))
    require_privileges(config)
    out = args.resume or args.out or config.output.dir
    with metrics_endpoint(args.metrics_listen) as tel:
        return run_with_console(config, out, resume=bool(args.resume), command=command_line(), quiet=args.quiet,
                                telemetry=tel, as_json=args.json)
