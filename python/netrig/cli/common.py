"""Helpers shared by subcommands: root check, option-name mapping for errors, rich console."""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console

from netrig.errors import CapabilityError, ConfigError
from netrig.methodology.vocabulary import option
from netrig.testbed.nsthread import NETNS_DIR
from netrig.testbed.options import parse_option

if TYPE_CHECKING:  # imported where used: a command that needs none of them starts without them
    from netrig.measure.events import Event
    from netrig.run.config import TestConfig
    from netrig.telemetry.telemetry import Telemetry

#: Capability bits (linux/capability.h) netrig's network work needs.
CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_ADMIN = 12, 13, 21
NEEDS = "root or CAP_NET_ADMIN/CAP_NET_RAW/CAP_BPF"


def effective_caps() -> int:
    """The process's effective capability set (``CapEff`` of ``/proc/self/status``)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def privileged() -> bool:
    """Root, or the capabilities to open raw sockets and configure interfaces."""
    caps = effective_caps()
    need = (1 << CAP_NET_ADMIN) | (1 << CAP_NET_RAW) | (1 << CAP_SYS_ADMIN)
    return os.geteuid() == 0 or caps & need == need


def require_root(what: str) -> None:
    """Raise a one-line error when netrig may not do ``what`` (raw sockets, XDP, namespaces)."""
    if not privileged():
        raise CapabilityError(f"{what} needs {NEEDS}: run it with sudo or as root")


def require_privileges(config: TestConfig) -> None:
    """A run on a real test bed (its own, or the self-test's loopback) needs the privileges; a
    simulated one, or an OTG server's (``[otg]``: the server opens the ports), does not. Checked
    before anything starts."""
    if config.testbed.name != "simulated" and config.otg is None:
        require_root(f"a run on the {config.testbed.name} test bed")


#: Without a terminal (a pipe, a file, CI logs) output is as wide as it needs: lines and tables are
#: never wrapped at 80 columns or cut mid-word.
PLAIN_WIDTH = 10_000


def console(stderr: bool = False) -> Console:
    """The console of a command's output (``stderr``: of its notes): a terminal's width, or
    :data:`PLAIN_WIDTH` when the stream is not a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else PLAIN_WIDTH
    return Console(stderr=stderr, highlight=False, soft_wrap=False, width=width)


def rename_field(err: ConfigError, mapping: dict[str, str]) -> ConfigError:
    """Re-issue a ConfigError with the engine's field path replaced by the CLI option name."""
    field = err.field
    if field.startswith("--"):
        return err  # already named after the option
    last = re.sub(r"\[\d+\]$", "", field.rsplit(".", 1)[-1])
    option = mapping.get(field) or mapping.get(last)
    return ConfigError(option, err.message) if option else err


def check_range(value: float, option: str, *, low: float = 0.0, high: float = math.inf, allow_low: bool = False,
                unit: str = "") -> float:
    """``value`` (already parsed: a number, seconds) in (low, high] — [low, high] with ``allow_low`` —
    else a ConfigError for ``option`` that says the range (in ``unit``: "s")."""
    if not math.isfinite(value) or value > high or value < low or (value == low and not allow_low):
        rng = f"{'at least ' if allow_low else 'above '}{low:g}{unit}"
        if high != math.inf:
            rng += f" and at most {high:g}{unit}"
        raise ConfigError(option, f"must be {rng} (got {value:g}{unit})")
    return value


def port_ref(text: str, default_ns: str | None, option: str, ns_option: str) -> tuple[str, str | None]:
    """``IF`` or ``IF@NS`` → ``(ifname, netns)``; ``ns_option`` (``--netns``, ``--tx-netns``) fills in
    a missing NS and may not name another."""
    name, sep, ns = text.partition("@")
    if not sep:
        return text, default_ns
    if not name or not ns:
        raise ConfigError(option, f"{text!r}: give IF or IF@NS (an interface, optionally in a network namespace)")
    if default_ns:
        raise ConfigError(option, f"{text!r} names its namespace and {ns_option} gives another: use one of them")
    return name, ns


def check_choice(value: str, choices: Sequence[str], option: str, what: str) -> None:
    """``value`` is one of ``choices``, else a ConfigError for ``option`` that lists them (``what`` a
    value is: "a capture method")."""
    if value not in choices:
        raise ConfigError(option, f"{value!r} is not {what}: use one of {', '.join(choices)}")


def check_netns(name: str | None, option: str) -> None:
    """``name`` (when given) is a named network namespace (``ip netns``), else a ConfigError for ``option``."""
    if name is not None and ("/" in name or not name.strip() or not os.path.exists(os.path.join(NETNS_DIR, name))):
        raise ConfigError(option, f"{name!r}: no such network namespace (see `ip netns list`)")


def check_writable(path: str | None, option: str, what: str) -> None:
    """``path`` (when given) can be written: found out now, not after the run (``what`` it is for)."""
    if not path:
        return
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        raise ConfigError(option, f"{path}: cannot write {what} there ({e.strerror})") from None


def check_file_name(path: str | None, option: str, example: str) -> None:
    """``path`` (when given) names a file to write, not nothing or a directory; else a ConfigError for
    ``option`` with an ``example`` file name."""
    if path is not None and (not path.strip() or path.endswith("/") or os.path.isdir(path)):
        what = "a directory" if path.strip() else "empty"
        raise ConfigError(option, f"{path!r} is {what}, not a file name: give the file to write, e.g. "
                                  f"{option} {os.path.join(path.strip(), example)}")


def event_pairs(cmds: list[str] | None, ats: list[float] | None) -> list[Event]:
    """The ``--event CMD`` / ``--at T`` pairs (paired in order); errors name the option to fix."""
    from netrig.measure.events import MAX_EVENTS, Event
    cmds, ats = cmds or [], ats or []
    if ats and not cmds:
        raise ConfigError("--at", "needs an --event: give the command to run at that time (--event CMD --at T)")
    if len(ats) != len(cmds):
        raise ConfigError("--at", f"{len(cmds)} --event but {len(ats)} --at: give every --event its own --at T "
                                  "(paired in order)")
    if len(cmds) > MAX_EVENTS:
        raise ConfigError("--event", f"{len(cmds)} events: at most {MAX_EVENTS} in one trial (run several trials)")
    events = []
    for cmd, at in zip(cmds, ats):
        try:
            events.append(Event(cmd, at))
        except ConfigError as e:
            raise ConfigError("--event" if e.field == "command" else "--at", e.message) from None
    return events


def isatty() -> bool:
    return sys.stdout.isatty()


def add_metrics_listen(p: argparse.ArgumentParser, what: str) -> None:
    """``--metrics-listen ADDR:PORT``: ``what`` is exported live (docs/telemetry.md)."""
    from netrig.telemetry.endpoint import OPTION as METRICS_OPTION
    option(p, METRICS_OPTION, f"{what}, at http://ADDR:PORT/metrics while it runs (PORT alone: on loopback; 0: any "
                              "free port; another address only when given); checked and bound before anything "
                              "starts, closed when the command ends (docs/telemetry.md) [off]")


def command_line() -> str:
    """The command as it was typed (``netrig rfc2544 --testbed router``), for the records of a run."""
    return " ".join(("netrig", *sys.argv[1:]))


@contextlib.contextmanager
def metrics_endpoint(listen: str | None) -> Iterator[Telemetry | None]:
    """The ``--metrics-listen`` endpoint for the block (``None`` without the option); its URL is said
    on stderr. Bound now: a bad value is one error naming the option, before anything else starts.
    When the block ends, a scraper that was watching gets one more scrape (``Telemetry.linger``),
    then the socket is closed; nothing stays listening."""
    if listen is None:
        yield None
        return
    from netrig.telemetry.telemetry import Telemetry
    with Telemetry(listen) as tel:
        where = "" if tel.endpoint.loopback else " (beyond loopback: anyone who reaches this host can read it)"
        print(f"netrig: metrics at {tel.url}{where}", file=sys.stderr, flush=True)
        yield tel
        tel.linger()  # a scraper that was watching reads the final values (not after an error)

def testbed_options(pairs: list[str]) -> dict[str, Any]:
    """``--testbed-option KEY=VALUE`` items, typed as a config file types them."""
    opts: dict[str, Any] = {}
    for kv in pairs:
        if "=" not in kv:
            raise ConfigError("--testbed-option", f"must be KEY=VALUE (got {kv!r})")
        k, v = kv.split("=", 1)
        name = k.strip().replace("-", "_")
        try:
            opts[name] = parse_option(name, v)
        except ConfigError as e:
            raise ConfigError(f"--testbed-option {e.field}", e.message) from None
    return opts
