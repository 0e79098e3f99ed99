"""Test-bed state files and leftover cleaning.

Every test bed writes ``/run/netrig/testbeds/<id>.json`` *before* it creates anything and updates it
as it goes, so another process (``netrig testbed down/status/clean``) always knows what to remove.

Names netrig creates (``<id>`` is 4 lowercase hex digits):

* network namespaces ``nr<id>-<role>`` (``tx``, ``rx``, ``dut``, ``p0`` … ``p3``);
* interfaces ``nr<id>-<suffix>`` (all inside those namespaces, never in the host namespace);
* nftables tables ``netrig_<id>`` (inside the DUT namespace, so they go with it).
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from typing import Any

from netrig.errors import TestbedError

STATE_DIR = "/run/netrig/testbeds"

#: A namespace or interface name netrig created: ``nr`` + 4 hex digits + ``-`` + role.
NAME_RE = re.compile(r"^nr([0-9a-f]{4})-[a-z0-9]{1,8}$")
ID_RE = re.compile(r"^[0-9a-f]{4}$")


def state_path(tb_id: str) -> str:
    return os.path.join(STATE_DIR, f"{tb_id}.json")


def write_state(state: dict[str, Any]) -> None:
    os.makedirs(STATE_DIR, exist_ok=True)
    path = state_path(state["id"])
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def read_state(tb_id: str) -> dict[str, Any]:
    if not ID_RE.match(tb_id):
        raise TestbedError(f"id {tb_id!r}: not a test-bed id (4 hex digits, see `netrig testbed status`)")
    try:
        with open(state_path(tb_id)) as f:
            return json.load(f)
    except FileNotFoundError:
        raise TestbedError(f"id {tb_id}: no such test bed (no {state_path(tb_id)}; "
                           "see `netrig testbed status`)") from None
    except (OSError, ValueError) as e:
        raise TestbedError(f"id {tb_id}: state file {state_path(tb_id)} unreadable: {e}") from None


def remove_state(tb_id: str) -> None:
    try:
        os.unlink(state_path(tb_id))
    except FileNotFoundError:
        pass


def all_states() -> list[dict[str, Any]]:
    out = []
    try:
        names = sorted(os.listdir(STATE_DIR))
    except FileNotFoundError:
        return []
    for n in names:
        if n.endswith(".json") and ID_RE.match(n[:-5]):
            try:
                out.append(read_state(n[:-5]))
            except TestbedError:
                continue
    return out


def pid_alive(pid: int | None, start_time: float | None = None) -> bool:
    """True when process ``pid`` exists (and, if given, started at ``start_time`` ± 1 s)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if start_time is not None:
        try:
            import psutil

            if abs(psutil.Process(pid).create_time() - start_time) > 1.0:
                return False  # pid reused by another process
        except Exception:
            pass
    return True


def proc_start_time() -> float | None:
    """This process's start time (recorded with its pid, so a reused pid is not taken for it)."""
    try:
        import psutil

        return psutil.Process().create_time()
    except Exception:
        return None


def owner_alive(state: dict[str, Any]) -> bool:
    return pid_alive(state.get("owner_pid"), state.get("owner_start_time"))


def new_id() -> str:
    existing = {s["id"] for s in all_states()}
    try:
        existing |= {m.group(1) for n in os.listdir("/run/netns") if (m := NAME_RE.match(n))}
    except FileNotFoundError:
        pass
    for _ in range(1000):
        tb_id = os.urandom(2).hex()
        if tb_id not in existing:
            return tb_id
    raise TestbedError("id: could not find a free test-bed id (run `netrig testbed clean`)")


@dataclass
class CleanReport:
    removed_testbeds: list[str]
    removed_namespaces: list[str]
    removed_links: list[str]
    kept: list[str]
    errors: list[str]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def now() -> float:
    return time.time()
