"""Helpers shared by subcommands: root check, option-name mapping for errors, rich console."""
from __future__ import annotations

import os
import re
import sys

from rich.console import Console

from netrig.errors import CapabilityError, ConfigError


def require_root(what: str) -> None:
    """Raise a one-line error when not root (raw sockets, XDP and namespaces need it)."""
    if os.geteuid() != 0:
        raise CapabilityError(f"{what} needs root (CAP_NET_RAW and CAP_NET_ADMIN): run it with sudo or as root")


def console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def rename_field(err: ConfigError, mapping: dict[str, str]) -> ConfigError:
    """Re-issue a ConfigError with the engine's field path replaced by the CLI option name."""
    field = err.field
    if field.startswith("--"):
        return err  # already named after the option
    last = re.sub(r"\[\d+\]$", "", field.rsplit(".", 1)[-1])
    option = mapping.get(field) or mapping.get(last)
    return ConfigError(option, err.message) if option else err


def isatty() -> bool:
    return sys.stdout.isatty()
