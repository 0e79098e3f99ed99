"""Shortcut commands: a test on a test bed without writing a config file (``netrig rfc2544``,
``netrig ndr-pdr`` … every command the registry's methods declare, and ``netrig selftest``).

A shortcut command is a group of registered methods (``Method.shortcut.command``): each adds its
own options (``Method.add_cli_options``) and turns them into its parameters (``Method.cli_params``).
A command with several methods takes ``--tests`` (default: the methods marked default). The shared
options below are the config file's keys in kebab-case; errors name the option, not the config path.
"""
from __future__ import annotations

import argparse
import re
from typing import Any

from netrig.cli.common import (
    add_metrics_listen,
    command_line,
    event_pairs,
    metrics_endpoint,
    rename_field,
    require_privileges,
    testbed_options,
)
from netrig.cli.console import run_with_console
from netrig.errors import ConfigError, TestbedError
from netrig.methodology.method import Command
from netrig.methodology.vocabulary import deprecated, option
from netrig.methods import REGISTRY
from netrig.run.config import config_from_dict
from netrig.run.runner import resume_config
from netrig.testbed.knobs import Knobs, sysfs_kind
from netrig.testbed.state import ID_RE as TESTBED_ID_RE
from netrig.testbed.state import read_state

#: Config fields set by the shared options, for error messages.
COMMON_FIELDS = {"duration_s": "--duration", "drain_s": "--drain", "late_s": "--late", "sizes": "--frame-sizes",
                 "repetitions": "--repetitions", "io": "--io", "nominal_bps": "--nominal-speed",
                 "speed_bps": "--line-rate", "options": "--testbed-option", "capacity_pps": "--sim-capacity",
                 "i_know_this_is_live": "--i-know-this-is-live", "monitor_remote": "--monitor-remote",
                 "events": "--at", "event_timeout_s": "--event-timeout", "shared": "--share-testbed"}


def add_common(p: argparse.ArgumentParser, sizes_default: str = "rfc", events: bool = True) -> None:
    """Options shared by the shortcut commands (same words as the config file keys); ``events``:
    with the events-under-load options (the self-test runs none)."""
    option(p, "--testbed", "router, policer, … (`netrig testbed list`), simulated, or an id [router]", default="router")
    option(p, "--share-testbed", "with the id of a test bed; each counts the other's frames as stray; the result is "
                                 "flagged")
    option(p, "--testbed-option", "typed as in a config file (e.g. cap=1Mpps, rules=100, log=false, mtu=9000); a "
                                  "topology refuses options it does not use", action="append", default=[])
    option(p, "--knob", "as in a config's testbed.knobs (docs/methodology.md): e.g. dut.features.gro=off, "
                        "dut.sysfs.threaded=1, tester.coalesce.rx-usecs=0, host.sysctl.net.core.busy_poll=50",
           action="append", default=[])
    option(p, "--frame-sizes", f"'rfc', a list like 64,512,1518, imix, simple-imix [{sizes_default}]",
           default=sizes_default)
    deprecated(p, "--sizes", "--frame-sizes")
    option(p, "--duration", "each trial: 2s, 60s [60s]")
    option(p, "--drain", "[2s]")
    option(p, "--late", "[the drain time]")
    option(p, "--repetitions", "[1]", default="1")
    option(p, "--io", "auto, af_xdp, af_packet, socket [auto]", default="auto")
    option(p, "--line-rate", "overrides the interface's [the interface's; one without a speed, like veth: a nominal "
                             "10G]")
    deprecated(p, "--speed", "--line-rate")
    deprecated(p, "--nominal-speed", "--line-rate", dest="nominal_speed",
               note="it applies whatever the interface reports; --nominal-speed X still applies only when the "
                    "interface reports no speed")
    option(p, "--monitor", "per-CPU load, memory, conntrack, interface counters, into the trial records and the "
                           "report's timelines [off; every trial's CPU-seconds per core and per packet kernel thread "
                           "are recorded either way]")
    option(p, "--monitor-remote", "instead of this host (an alias of your ~/.ssh/config or user@host; keys from your "
                                  "config and agent, never a password; the DUT needs only /bin/sh and /proc) [off]")
    if events:
        option(p, "--event", "in the DUT's namespace (on the host when the test bed has none), into every timed "
                             "trial of the methods that take events (throughput, frame loss, latency, livelock, "
                             "iperf, soak); each trial records per flow the outage, the frames lost and the time to "
                             "loss-free forwarding [none]", action="append")
        option(p, "--at", "2s, 500ms (repeatable)", action="append")
        option(p, "--event-timeout", "[30s]")
    option(p, "--no-selftest")
    option(p, "--sim-capacity", "[1Mpps]")
    deprecated(p, "--sim-capacity-pps", "--sim-capacity")
    option(p, "--i-know-this-is-live", "(lo, a default route, addresses outside 198.18.0.0/15 and 2001:2::/48); test "
                                       "beds never need it")
    option(p, "--out", "[netrig-results]", default="netrig-results")
    option(p, "--json", "the run's result document (result.json); progress still on stderr")
    option(p, "--quiet")
    add_metrics_listen(p, "the run (every trial's counts, the trial in progress, the DUT monitor's samples)")



def knob_options(items: list[str]) -> dict[str, Any]:
    """``--knob TARGET.KIND.NAME=VALUE`` items as a config's ``testbed.knobs`` table (integers where
    the knob takes one)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        n = 3 if parts[0] == "interfaces" else 2
        if not sep or len(parts) <= n or not all(parts[:n]):
            raise ConfigError("--knob", f"must be TARGET.KIND.NAME=VALUE, e.g. dut.features.gro=off or "
                                        f"interfaces.dtx.sysfs.threaded=1 (got {item!r})")
        node = out
        for part in parts[:n]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError("--knob", f"{key}: conflicts with another --knob")
        kind, name, value = parts[n - 1], ".".join(parts[n:]), text.strip()
        integer = re.fullmatch(r"\d+", value) is not None
        if kind == "sysfs" and sysfs_kind(name) == "mask":
            integer = False
        node[name] = int(value) if integer and kind != "features" else value
    return out


def knob_error(e: ConfigError) -> ConfigError:
    """A ``testbed.knobs`` error named after ``--knob`` (and the knob), others unchanged."""
    if e.field == "testbed.knobs" or e.field.startswith("testbed.knobs."):
        rest = e.field.removeprefix("testbed.knobs").lstrip(".")
        return ConfigError(f"--knob {rest}" if rest else "--knob", e.message)
    return e


def knobs_of(items: list[str]) -> Knobs:
    """``--knob`` items validated as a config's ``testbed.knobs`` (errors name ``--knob``)."""
    try:
        return Knobs.from_dict(knob_options(items), "testbed.knobs")
    except ConfigError as e:
        raise knob_error(e) from None


def testbed_config(name_or_id: str, options: dict[str, Any]) -> dict[str, Any]:
    """``testbed`` of a config for ``--testbed``: a topology or ``simulated``, or the id of a test
    bed that is up (``netrig testbed up``)."""
    if TESTBED_ID_RE.match(name_or_id):
        try:
            topology = read_state(name_or_id).topology
        except TestbedError as e:
            raise ConfigError("--testbed", str(e)) from None
        return {"name": topology, "id": name_or_id, "options": options}
    return {"name": name_or_id, "options": options}


def simulated_capacity(args: argparse.Namespace) -> float | None:
    """``--sim-capacity`` in frames/s (``None``: not given)."""
    return None if args.sim_capacity is None else args.sim_capacity.frames_per_second("--sim-capacity")


def base_config(args: argparse.Namespace, duration: bool = True) -> dict:
    """The config (as a file would give it) of the shared options (``duration``: with ``--duration``;
    a method that owns its duration takes it itself)."""
    tb = testbed_config(args.testbed, testbed_options(args.testbed_option))
    if args.share_testbed:
        if "id" not in tb:
            raise ConfigError("--share-testbed", "needs --testbed ID (a test bed built by `netrig testbed up`): a "
                                                 "test bed built for the run is its own")
        tb["shared"] = True
    if args.knob:
        tb["knobs"] = knob_options(args.knob)
    if (capacity := simulated_capacity(args)) is not None:
        if args.testbed != "simulated":
            raise ConfigError("--sim-capacity", "applies to --testbed simulated only")
        tb["simulator"] = {"capacity_pps": capacity}
    cfg: dict[str, Any] = {"testbed": tb, "ports": {"io": args.io, "i_know_this_is_live": args.i_know_this_is_live},
                           "frames": {"sizes": args.frame_sizes}, "trial": {},
                           "repetitions": args.repetitions, "selftest": {"enabled": not args.no_selftest},
                           "output": {"dir": args.out}, "line_rate": {}}
    if args.monitor:
        cfg["trial"]["monitor"] = True
    if args.monitor_remote is not None:
        cfg["trial"]["monitor_remote"] = args.monitor_remote
    if args.duration is not None and duration:
        cfg["trial"]["duration_s"] = args.duration
    events = event_pairs(getattr(args, "event", None), getattr(args, "at", None))
    if events:
        cfg["trial"]["events"] = [e.to_dict() for e in events]
    if getattr(args, "event_timeout", None) is not None:
        if not events:
            raise ConfigError("--event-timeout", "needs an --event: it limits how long --event commands may run")
        cfg["trial"]["event_timeout_s"] = args.event_timeout
    if args.drain is not None:
        cfg["trial"]["drain_s"] = args.drain
    if args.late is not None:
        cfg["trial"]["late_s"] = args.late
    if getattr(args, "nominal_speed", None) is not None:  # the old spelling's: only when the interface has none
        cfg["line_rate"]["nominal_bps"] = args.nominal_speed
    if args.line_rate is not None:
        cfg["line_rate"]["speed_bps"] = args.line_rate
    return cfg


def execute(cfg: dict, args: argparse.Namespace, fields: dict[str, str] | None = None) -> int:
    """Validate ``cfg`` (errors name the option that set the field) and run it with the console."""
    try:
        config = config_from_dict(cfg)
        require_privileges(config)
    except ConfigError as e:
        if e.field.startswith("testbed.options."):
            raise ConfigError(f"--testbed-option {e.field.removeprefix('testbed.options.')}", e.message) from None
        if knob_error(e) is not e:
            raise knob_error(e) from None
        if e.field == "testbed.name":
            raise ConfigError("--testbed", e.message) from None
        raise rename_field(e, {**COMMON_FIELDS, **(fields or {})}) from None
    with metrics_endpoint(args.metrics_listen) as tel:
        return run_with_console(config, args.out, command=command_line(), quiet=args.quiet, telemetry=tel,
                                as_json=args.json)


def register(subparsers: Any) -> None:
    """Add every shortcut command of the registry: its methods, their options, ``--tests`` if several."""
    for command in REGISTRY.commands():
        register_command(subparsers, command)


def register_command(subparsers: Any, command: Command) -> None:
    methods = REGISTRY.shortcuts(command.name)
    p = subparsers.add_parser(command.name, help=command.summary, description=command.description)
    add_common(p, sizes_default=command.sizes_default)
    if len(methods) > 1:
        tests = [m.shortcut.test for m in methods if m.shortcut is not None]
        default = ",".join(m.shortcut.test for m in methods if m.shortcut is not None and m.shortcut.default)
        option(p, "--tests", f"of: {', '.join(tests)} [{default}]", default=default)
    for m in methods:
        m.add_cli_options(p)
    p.set_defaults(func=lambda args: run(args, command.name))


def run(args: argparse.Namespace, command: str) -> int:
    if getattr(args, "resume", None):  # a command whose method continues a stopped run (the soak)
        config = resume_config(args.resume)
        require_privileges(config)
        with metrics_endpoint(args.metrics_listen) as tel:
            return run_with_console(config, args.resume, resume=True, command=command_line(), quiet=args.quiet,
                                    telemetry=tel, as_json=args.json)
    methods = REGISTRY.shortcuts(command)
    by_test = {m.shortcut.test: m for m in methods if m.shortcut is not None}
    if len(methods) > 1:
        names = list(args.tests)
        for t in names:
            if t not in by_test:
                raise ConfigError("--tests", f"unknown test {t!r}; allowed: {', '.join(by_test)}")
        if not names:
            raise ConfigError("--tests", f"needs at least one of {', '.join(by_test)}")
        chosen = [by_test[t] for t in names]
    else:
        chosen = methods
    cfg = base_config(args, duration=not all(m.owns_duration for m in chosen))
    cfg["methods"] = [{m.name: m.cli_params(args)} for m in chosen]
    return execute(cfg, args, {k: v for m in chosen for k, v in m.cli_fields.items()})
