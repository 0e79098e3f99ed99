"""OTG LLDP on netrig serve's ports, served by lldpd (the Debian package): one lldpd per LLDP object,
in its port's namespace, on the port's interface. No protocol code here.

::

    config.lldp ──plan()──▶ LldpPlan: checked whole (names, ports, one per port, intervals)
    LldpPlan ──Agents.start()──▶ per object: ``lldpd -d -u <socket> -I <interface>`` in the port's
        namespace (its own control socket, no CDP/EDP/FDP/SONMP), configured through ``lldpcli``
        on that socket before it sends: system name, chassis and port id, ``tx-interval`` (the
        advertisement interval) and ``tx-hold`` (hold time ÷ interval: the TTL it advertises)
    Agents.neighbours() ──▶ ``lldpcli show neighbors details`` (JSON) → LldpNeighborsState rows
    Agents.metrics() ──▶ ``lldpcli show statistics`` (JSON) → LldpMetric rows
    Agents.close() ──▶ every lldpd stopped (SIGTERM, then SIGKILL), its socket directory removed

A port carrying LLDP passes LLDP frames (0x88CC) to the kernel, where lldpd reads them
(``PortSpec.control_to_kernel``), as a port carrying devices passes ARP and ND.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from netrig import _native
from netrig.errors import ConfigError, NetrigError
from netrig.otg import refusal
from netrig.otg.daemons import netns_argv, signal_group
from netrig.otg.objects import Lldp

#: How long lldpd may take to open its control socket, s.
START_S = 10.0


@dataclass(frozen=True)
class Agent:
    """One OTG ``Lldp`` object on a config port."""

    name: str
    port: int
    #: lldpcli ``configure`` lines, in order.
    settings: tuple[str, ...]


def plan(objects: Sequence[Lldp], port_names: Sequence[str]) -> tuple[Agent, ...]:
    """The LLDP objects of a config, checked whole; errors name the config's paths."""
    out: list[Agent] = []
    seen: dict[str, int] = {}
    for i, o in enumerate(objects):
        at = f"lldp[{i}]"
        if o.name in seen:
            raise ConfigError(f"{at}.name", f"{o.name!r} is already the name of lldp[{seen[o.name]}]")
        seen[o.name] = i
        port = o.connection.port_name if o.connection is not None else None
        if port not in port_names:
            raise ConfigError(f"{at}.connection.port_name", f"{port!r} is not a port of the config: use one of "
                                                            f"{', '.join(port_names)}")
        k = port_names.index(port)
        if any(a.port == k for a in out):
            raise ConfigError(f"{at}.connection.port_name", f"port {port!r} has an LLDP object already: one each")
        if o.org_infos:
            raise refusal.refuse("lldp[].org_infos", f"{at}.org_infos")
        out.append(Agent(o.name, k, _settings(o, at)))
    return tuple(out)


def _settings(o: Lldp, at: str) -> tuple[str, ...]:
    if o.advertisement_interval < 1 or o.hold_time < o.advertisement_interval:
        raise ConfigError(f"{at}.hold_time", f"{o.hold_time} s is below the advertisement interval "
                                             f"({o.advertisement_interval} s): give a hold time of at least one "
                                             "interval")
    hold, rest = divmod(o.hold_time, o.advertisement_interval)
    if rest:
        raise ConfigError(f"{at}.hold_time", f"{o.hold_time} s is not a multiple of the advertisement interval "
                                             f"({o.advertisement_interval} s): LLDP's TTL is the interval × a "
                                             "whole hold multiplier")
    out = [f"configure lldp tx-interval {o.advertisement_interval}", f"configure lldp tx-hold {hold}"]
    c, p, s = o.chassis_id, o.port_id, o.system_name
    if c is not None and c.get("choice", "mac_address_subtype") != "mac_address_subtype":
        if c.get("choice") != "local_subtype":
            raise refusal.refuse("lldp[].chassis_id", f"{at}.chassis_id.{c.get('choice')}")
        out.append(f"configure system chassisid {c.get('local_subtype', '')}")
    elif c is not None and (c.get("mac_address_subtype") or {}).get("choice") == "value":
        raise refusal.refuse("lldp[].chassis_id", f"{at}.chassis_id.mac_address_subtype.value")
    choice = (p or {}).get("choice", "interface_name_subtype")
    if choice == "local_subtype":
        out.append(f"configure lldp portidsubtype local {p.get('local_subtype', '') if p else ''}")
    elif choice == "mac_address_subtype":
        out.append("configure lldp portidsubtype macaddress")
    elif (p or {}).get("interface_name_subtype", {}).get("choice") == "value":
        raise refusal.refuse("lldp[].port_id", f"{at}.port_id.interface_name_subtype.value")
    else:
        out.append("configure lldp portidsubtype ifname")
    if s is not None and s.get("choice") == "value":
        out.append(f"configure system hostname {s.get('value', '')}")
    return tuple(out)


class Agents:
    """A config's LLDP objects served by lldpd on its ports (see the module doc)."""

    def __init__(self, agents: Sequence[Agent], ports: Sequence[_native.Port], cpus: Sequence[int] = ()):
        """``cpus``: where each lldpd runs (the senders' CPUs: netrig.otg.daemons)."""
        self.agents = tuple(agents)
        self.ports = tuple(ports)
        self.cpus = tuple(cpus)
        self.dir = tempfile.mkdtemp(prefix="netrig-lldp-")
        os.chmod(self.dir, 0o755)  # lldpd makes its socket here after dropping to its own user
        self.procs: list[subprocess.Popen[bytes]] = []

    def socket(self, k: int) -> str:
        return f"{self.dir}/{k}.sock"

    def start(self) -> None:
        """Start and configure every lldpd; on a failure stop them all and raise (one line)."""
        try:
            for k, a in enumerate(self.agents):
                self._start(k, a)
            for k, a in enumerate(self.agents):  # each sends now that every one listens
                self._cli(k, ["update"], f"lldp {a.name}")
        except BaseException:
            self.close()
            raise

    def _start(self, k: int, a: Agent) -> None:
        port = self.ports[a.port]
        at = f"lldp {a.name} on {port.ifname}"
        if shutil.which("lldpd") is None:
            raise NetrigError(f"{at}: lldpd is not installed: apt install lldpd (scripts/setup.sh installs it)")
        # -L /bin/true: no configuration files read; lldpd stays paused until `resume` below.
        argv = netns_argv(port.netns, ["lldpd", "-d", "-u", self.socket(k), "-I", port.ifname, "-L", "/bin/true"],
                           self.cpus)
        self.procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.PIPE, start_new_session=True))
        end = time.monotonic() + START_S
        while self._cli(k, ["show", "configuration"], at, check=False) is None:
            if self.procs[-1].poll() is not None or time.monotonic() > end:
                err = (self.procs[-1].stderr.read() if self.procs[-1].poll() is not None and self.procs[-1].stderr
                       else b"").decode(errors="replace").strip().splitlines()
                raise NetrigError(f"{at}: lldpd did not start: {err[-1] if err else 'no control socket'}")
            time.sleep(0.02)
        for line in a.settings:
            self._cli(k, line.split(" "), at)
        self._cli(k, ["resume"], at)  # lldpd waits, silent, until told its configuration is done

    def _cli(self, k: int, args: list[str], at: str, check: bool = True) -> Any:
        """``lldpcli`` on agent ``k``'s socket, its JSON answer (``None``: it failed and not ``check``)."""
        port = self.ports[self.agents[k].port]
        argv = netns_argv(port.netns, ["lldpcli", "-u", self.socket(k), "-f", "json0", *args])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
        if done.returncode != 0 or "error" in done.stderr.lower():
            if not check:
                return None
            lines = done.stderr.strip().splitlines()
            raise NetrigError(f"{at}: lldpcli {' '.join(args)}: {lines[-1] if lines else done.returncode}")
        try:
            return json.loads(done.stdout) if done.stdout.strip() else {}
        except ValueError:
            return {}

    def close(self) -> None:
        """Stop every lldpd with its privilege-separated child (each runs in a session of its own:
        the whole group is signalled, and waited for until none is left)."""
        for p in self.procs:
            signal_group(p.pid, signal.SIGTERM)
        end = time.monotonic() + 5
        for p in self.procs:
            while _group_runs(p.pid) and time.monotonic() < end:
                p.poll()
                time.sleep(0.01)
            if _group_runs(p.pid):
                signal_group(p.pid, signal.SIGKILL)
            p.wait()
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------------------------------- reading

    def _named(self, names: Sequence[str], at: str) -> list[int]:
        known = [a.name for a in self.agents]
        for j, n in enumerate(names):
            if n not in known:
                raise ConfigError(f"{at}[{j}]", f"{n!r} is not an LLDP object of the config")
        return [k for k, a in enumerate(self.agents) if not names or a.name in names]

    def neighbours(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """``monitor/states`` ``lldp_neighbors``: every neighbour each object heard."""
        rows: list[dict[str, Any]] = []
        for k in self._named(names, "lldp_neighbors.lldp_names"):
            a = self.agents[k]
            answer = self._cli(k, ["show", "neighbors", "details"], f"lldp {a.name}")
            for lldp in answer.get("lldp", []):
                for itf in lldp.get("interface", []):
                    rows.append(_neighbour(a.name, itf))
        return rows

    def metrics(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """``monitor/metrics`` ``lldp``: PDUs sent and received, discarded, unknown TLVs."""
        rows: list[dict[str, Any]] = []
        for k in self._named(names, "lldp.lldp_names"):
            a = self.agents[k]
            answer = self._cli(k, ["show", "statistics"], f"lldp {a.name}")
            counts: dict[str, int] = {}
            for lldp in answer.get("lldp", []):
                for itf in lldp.get("interface", []):
                    for key in ("tx", "rx", "rx_discarded_cnt", "rx_unrecognized_cnt"):
                        counts[key] = counts.get(key, 0) + _first_int(itf.get(key), key)
            rows.append({"name": a.name, "frames_tx": counts.get("tx", 0), "frames_rx": counts.get("rx", 0),
                         "frames_error_rx": 0, "frames_discard": counts.get("rx_discarded_cnt", 0),
                         "tlvs_discard": 0, "tlvs_unknown": counts.get("rx_unrecognized_cnt", 0)})
        return rows


def _group_runs(pgid: int) -> bool:
    """A process of group ``pgid`` still runs: one that has not exited (a zombie has: lldpd's
    privilege-separated child, once lldpd is gone, waits as one until PID 1 reaps it, and on this
    kind of VM PID 1 took 1-2 s, which a config replacing one with LLDP waited for)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False




def _first(value: Any, key: str = "value") -> Any:
    """lldpcli's json0 wraps every value in a list of objects: the first one's ``key``."""
    if isinstance(value, list) and value:
        value = value[0]
    return value.get(key) if isinstance(value, dict) else value


def _first_int(value: Any, key: str) -> int:
    v = _first(value, key)
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def _neighbour(lldp_name: str, itf: dict[str, Any]) -> dict[str, Any]:
    chassis = (itf.get("chassis") or [{}])[0]
    port = (itf.get("port") or [{}])[0]
    cid = (chassis.get("id") or [{}])[0]
    pid = (port.get("id") or [{}])[0]
    row: dict[str, Any] = {"lldp_name": lldp_name, "chassis_id": cid.get("value"), "chassis_id_type":
                           _ID_TYPES.get(cid.get("type", ""), "local"), "port_id": pid.get("value"),
                           "port_id_type": _ID_TYPES.get(pid.get("type", ""), "local"),
                           "system_name": _first(chassis.get("name")),
                           "system_description": _first(chassis.get("descr")),
                           "port_description": _first(port.get("descr")),
                           "neighbor_id": f"{cid.get('value')}/{pid.get('value')}"}
    ttl = _first(port.get("ttl")) or _first(itf.get("ttl"))
    if ttl is not None:
        row["ttl"] = int(ttl)
    return {k: v for k, v in row.items() if v is not None}


#: lldpcli's ID types → the model's.
_ID_TYPES = {"mac": "mac_address", "ifname": "interface_name", "local": "local", "ip": "network_address",
             "ifalias": "interface_alias", "unhandled": "local"}
