"""Host tuning knobs: offloads, interrupt coalescing, per-interface sysfs and sysctls, set on a test
bed's interfaces and namespaces for a run, recorded before and after, and restored exactly on every
way out (success, error, Ctrl-C, SIGTERM; after a crash, by ``netrig testbed down``/``clean``).

``Knobs`` is the validated spec (``[testbed.knobs]`` in a config)::

    [testbed.knobs.dut]                       # every DUT-side interface (and the DUT's namespace)
    features = { gro = "off", tso = "off" }   # ethtool -K: short names, -k long names, kernel names
    coalesce = { rx-usecs = 0 }               # ethtool -C names, integers
    sysfs = { napi_defer_hard_irqs = 2, gro_flush_timeout = 200000, "queues/rx-*/rps_cpus" = "2" }
    [testbed.knobs.dut.sysctl]                # per-namespace sysctls, in the DUT's namespace
    "net.core.rmem_max" = 4194304
    [testbed.knobs.tester]                    # every tester port's interface (and its namespace)
    features = { gro = "off" }
    [testbed.knobs.host.sysctl]               # host-wide sysctls: one value for tester and DUT
    "net.core.busy_poll" = 50
    [testbed.knobs.interfaces.dtx]            # one interface: its name, or a test bed's role suffix
    features = { rx-gro-list = "on" }

:class:`KnobApplier` (or the :func:`applied_knobs` context manager) applies a spec to a
:class:`KnobLayout` (a test bed's interfaces and namespaces): it reads every targeted value first,
then writes each knob and reads it back, and at the end restores each in reverse order and reads
everything again (``restored`` is true only when every value equals the one read before).

Where each kind is read and written, always inside the interface's network namespace:

* ``features``, ``coalesce``: the ethtool ioctl (``pyroute2.ethtool.ioctl``; ETHTOOL_[GS]FEATURES,
  ETHTOOL_[GS]COALESCE) on a socket made in a thread inside the namespace;
* ``sysfs``: ``/sys/class/net/<if>/…`` in a thread with a private mount namespace and a sysfs mounted
  from inside the network namespace (``run_in_netns(sysfs=True)``); every access first checks that
  the interface's ``ifindex`` there equals the namespace's own (``if_nametoindex``), so a sysfs of
  another namespace can never be read or written;
* ``sysctl``: ``/proc/sys`` in a thread inside the namespace (it follows the thread's namespace).
"""
from __future__ import annotations

import contextlib
import ctypes
import difflib
import errno
import fcntl
import fnmatch
import functools
import glob
import os
import re
import signal
import socket
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from netrig.errors import ConfigError, Terminated, TestbedError
from netrig.testbed import state as st
from netrig.testbed.nsthread import NETNS_DIR, read_sysctl, run_in_netns, write_sysctl

# --------------------------------------------------------------------------------------------- #
# The vocabulary

#: Knob kinds, in the order they are applied on one target (restored in reverse): sysctls of the
#: namespace first, then per interface offloads before sysfs (veth needs GRO on before ``threaded``).
KINDS = ("sysctl", "features", "coalesce", "sysfs")
#: Targets of a spec: test-bed roles, the host, and single interfaces (``interfaces.<name>``).
TARGETS = ("dut", "tester", "host", "interfaces")

#: ``ethtool -K``'s short feature names → (``ethtool -k``'s long name, the kernel features they
#: switch, as ethtool's glob). From ethtool's ``off_flag_def``.
FEATURE_GROUPS: dict[str, tuple[str, str]] = {
    "rx": ("rx-checksumming", "rx-checksum"),
    "tx": ("tx-checksumming", "tx-checksum-*"),
    "sg": ("scatter-gather", "tx-scatter-gather*"),
    "tso": ("tcp-segmentation-offload", "tx-tcp*-segmentation"),
    "ufo": ("udp-fragmentation-offload", "tx-udp-fragmentation"),
    "gso": ("generic-segmentation-offload", "tx-generic-segmentation"),
    "gro": ("generic-receive-offload", "rx-gro"),
    "lro": ("large-receive-offload", "rx-lro"),
    "rxvlan": ("rx-vlan-offload", "rx-vlan-hw-parse"),
    "txvlan": ("tx-vlan-offload", "tx-vlan-hw-insert"),
    "ntuple": ("ntuple-filters", "rx-ntuple-filter"),
    "rxhash": ("receive-hashing", "rx-hashing"),
}
_BY_LONG_NAME = {long: short for short, (long, _) in FEATURE_GROUPS.items()}

#: The kernel's feature names (``ethtool -k`` shows them; Linux 6.18). Names the running kernel
#: reports are accepted too.
KERNEL_FEATURES = (
    "tx-scatter-gather", "tx-checksum-ipv4", "tx-checksum-ip-generic", "tx-checksum-ipv6", "highdma",
    "tx-scatter-gather-fraglist", "tx-vlan-hw-insert", "rx-vlan-hw-parse", "rx-vlan-filter",
    "vlan-challenged", "tx-generic-segmentation", "rx-gro", "rx-lro", "tx-tcp-segmentation",
    "tx-gso-robust", "tx-tcp-ecn-segmentation", "tx-tcp-mangleid-segmentation", "tx-tcp6-segmentation",
    "tx-fcoe-segmentation", "tx-gre-segmentation", "tx-gre-csum-segmentation", "tx-ipxip4-segmentation",
    "tx-ipxip6-segmentation", "tx-udp_tnl-segmentation", "tx-udp_tnl-csum-segmentation", "tx-gso-partial",
    "tx-tunnel-remcsum-segmentation", "tx-sctp-segmentation", "tx-esp-segmentation", "tx-udp-segmentation",
    "tx-gso-list", "tx-tcp-accecn-segmentation", "tx-checksum-fcoe-crc", "tx-checksum-sctp",
    "rx-ntuple-filter", "rx-hashing", "rx-checksum", "tx-nocache-copy", "loopback", "rx-fcs", "rx-all",
    "tx-vlan-stag-hw-insert", "rx-vlan-stag-hw-parse", "rx-vlan-stag-filter", "l2-fwd-offload",
    "hw-tc-offload", "esp-hw-offload", "esp-tx-csum-hw-offload", "rx-udp_tunnel-port-offload",
    "tls-hw-tx-offload", "tls-hw-rx-offload", "rx-gro-hw", "tls-hw-record", "rx-gro-list",
    "macsec-hw-offload", "rx-udp-gro-forwarding", "hsr-tag-ins-offload", "hsr-tag-rm-offload",
    "hsr-fwd-offload", "hsr-dup-offload",
)

#: ``ethtool -C`` parameter → field of ``struct ethtool_coalesce`` (the ioctl's; the netlink-only
#: parameters such as ``cqe-mode-rx`` are not offered).
COALESCE: dict[str, str] = {
    "rx-usecs": "rx_coalesce_usecs", "rx-frames": "rx_max_coalesced_frames",
    "rx-usecs-irq": "rx_coalesce_usecs_irq", "rx-frames-irq": "rx_max_coalesced_frames_irq",
    "tx-usecs": "tx_coalesce_usecs", "tx-frames": "tx_max_coalesced_frames",
    "tx-usecs-irq": "tx_coalesce_usecs_irq", "tx-frames-irq": "tx_max_coalesced_frames_irq",
    "stats-block-usecs": "stats_block_coalesce_usecs",
    "adaptive-rx": "use_adaptive_rx_coalesce", "adaptive-tx": "use_adaptive_tx_coalesce",
    "sample-interval": "rate_sample_interval",
    "pkt-rate-low": "pkt_rate_low", "rx-usecs-low": "rx_coalesce_usecs_low",
    "rx-frames-low": "rx_max_coalesced_frames_low", "tx-usecs-low": "tx_coalesce_usecs_low",
    "tx-frames-low": "tx_max_coalesced_frames_low",
    "pkt-rate-high": "pkt_rate_high", "rx-usecs-high": "rx_coalesce_usecs_high",
    "rx-frames-high": "rx_max_coalesced_frames_high", "tx-usecs-high": "tx_coalesce_usecs_high",
    "tx-frames-high": "tx_max_coalesced_frames_high",
}
_COALESCE_SWITCHES = ("adaptive-rx", "adaptive-tx")

#: Per-interface sysfs attributes (``/sys/class/net/<if>/<name>``) and how their values read.
SYSFS_ATTRS: dict[str, str] = {
    "gro_flush_timeout": "int",     # ns a NAPI poll that found work keeps GRO packets before flushing
    "napi_defer_hard_irqs": "int",  # empty NAPI polls before the device IRQ is re-armed
    "threaded": "int",              # 1: NAPI runs in kernel threads napi/<if>-<id>
    "tx_queue_len": "int",
}
#: Per-queue attributes (``queues/rx-N/…``, ``queues/tx-N/…``; ``N`` may be ``*``: every queue).
SYSFS_QUEUE_ATTRS: dict[str, dict[str, str]] = {
    "rx": {"rps_cpus": "mask", "rps_flow_cnt": "int"},
    "tx": {"xps_cpus": "mask", "xps_rxqs": "mask", "tx_maxrate": "int"},
}
_QUEUE_RE = re.compile(r"^queues/(rx|tx)-(\d+|\*)/([a-z_]+)$")
_MASK_RE = re.compile(r"^[0-9a-fA-F]+(,[0-9a-fA-F]+)*$")
_SYSCTL_RE = re.compile(r"^net(\.[A-Za-z0-9_-]+)+$")
_IFNAME_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")

#: Sysctls the kernel keeps once for the whole host (absent from other network namespaces): they
#: go under ``host``. Others found host-wide at run time are skipped with that reason.
HOST_WIDE_SYSCTLS = frozenset("net.core." + n for n in (
    "busy_poll", "busy_read", "netdev_budget", "netdev_budget_usecs", "netdev_max_backlog", "dev_weight",
    "dev_weight_rx_bias", "dev_weight_tx_bias", "gro_normal_batch", "rps_sock_flow_entries",
    "flow_limit_cpu_bitmap", "flow_limit_table_len", "netdev_tstamp_prequeue", "high_order_alloc_disable",
    "max_skb_frags", "skb_defer_max", "mem_pcpu_rsv", "default_qdisc", "bpf_jit_enable", "bpf_jit_harden",
    "bpf_jit_kallsyms", "bpf_jit_limit", "netdev_rss_key", "message_cost", "message_burst", "warnings",
    "netdev_unregister_timeout_secs", "devconf_inherit_init_net", "fb_tunnels_only_for_init_net")) | frozenset({
    "net.ipv4.tcp_mem", "net.ipv4.udp_mem", "net.ipv4.tcp_max_orphans", "net.nf_conntrack_max",
    "net.netfilter.nf_log_all_netns"})

_ON = ("on", "true", "yes", "1")
_OFF = ("off", "false", "no", "0")
_U32 = 2**32 - 1


# --------------------------------------------------------------------------------------------- #
# The spec

def _suggest(key: str, allowed: list[str] | tuple[str, ...], what: str) -> str:
    close = difflib.get_close_matches(key, list(allowed), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown {what}; {hint}"


@functools.lru_cache(maxsize=1)
def known_features() -> frozenset[str]:
    """Every feature name a spec may use: short and long ``ethtool`` names, the kernel's names
    (the table above and, where readable, the running kernel's own list)."""
    names = set(FEATURE_GROUPS) | set(_BY_LONG_NAME) | set(KERNEL_FEATURES)
    try:
        from pyroute2.ethtool.ioctl import ETH_SS_FEATURES, IoctlEthtool

        eth = IoctlEthtool("lo")
        try:
            names |= {n for n in eth.get_stringset(set_id=ETH_SS_FEATURES) if n}
        finally:
            eth.close()
    except Exception:  # no lo in this namespace, an old kernel: the table stands
        pass
    return frozenset(names)


def feature_pattern(name: str) -> str:
    """The kernel feature glob a spec's feature name switches (``tso`` → ``tx-tcp*-segmentation``)."""
    short = _BY_LONG_NAME.get(name, name)
    return FEATURE_GROUPS[short][1] if short in FEATURE_GROUPS else name


def _feature_value(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _ON + _OFF:
        return value.strip().lower() in _ON
    raise ConfigError(path, f"{value!r}: must be \"on\" or \"off\" (or true/false)")


def _coalesce_value(name: str, value: Any, path: str) -> int:
    if name in _COALESCE_SWITCHES and isinstance(value, (bool, str)):
        return int(_feature_value(value, path))
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "an integer or \"on\"/\"off\"" if name in _COALESCE_SWITCHES else "an integer"
        raise ConfigError(path, f"{value!r}: must be {kind} (as for ethtool -C {name} N)")
    if not 0 <= value <= _U32:
        raise ConfigError(path, f"{value}: must be 0..{_U32}")
    return value


def sysfs_kind(name: str) -> str | None:
    """How a sysfs knob's value reads: ``"int"``, ``"mask"`` (hex CPU mask), None: not a knob."""
    if name in SYSFS_ATTRS:
        return SYSFS_ATTRS[name]
    m = _QUEUE_RE.match(name)
    if m and m.group(3) in SYSFS_QUEUE_ATTRS[m.group(1)]:
        return SYSFS_QUEUE_ATTRS[m.group(1)][m.group(3)]
    return None


def _sysfs_kind(name: str, path: str) -> str:
    kind = sysfs_kind(name)
    if kind is not None:
        return kind
    allowed = [*SYSFS_ATTRS] + [f"queues/{d}-N/{a}" for d, attrs in SYSFS_QUEUE_ATTRS.items() for a in attrs]
    raise ConfigError(path, _suggest(name, allowed, "sysfs attribute")
                      + f"allowed: {', '.join(allowed)} (N: a queue number or * for every queue)")


def _sysfs_value(name: str, value: Any, path: str) -> int | str:
    kind = _sysfs_kind(name, path)
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(path, f"{value!r}: must be an integer >= 0")
        return value
    if isinstance(value, list):  # CPU (or queue) numbers → hex mask
        if not value or any(isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < 4096 for c in value):
            raise ConfigError(path, f"{value!r}: a list must hold CPU numbers 0..4095")
        return f"{sum(1 << c for c in set(value)):x}"
    if isinstance(value, str) and _MASK_RE.match(value.strip()):
        return value.strip().lower()
    raise ConfigError(path, f"{value!r}: must be a hex CPU mask as a string (\"2\" = CPU 1, \"3\" = CPUs 0-1) "
                            "or a list of CPU numbers ([1])")


def _sysctl_value(value: Any, path: str) -> int | str:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(path, f"{value!r}: must be an integer or a string")
    if isinstance(value, str) and (not value.strip() or "\n" in value or len(value) > 256):
        raise ConfigError(path, f"{value!r}: must be one line of text (up to 256 characters)")
    return value


@dataclass(frozen=True)
class KnobSet:
    """The knobs of one target, each table in the order it is applied (restored in reverse).

    ``features``: feature name → on (True) / off; ``coalesce``: ``ethtool -C`` name → value;
    ``sysfs``: attribute path under ``/sys/class/net/<if>/`` → value (hex masks as strings);
    ``sysctl``: dotted name (``net.…``) → value."""

    features: dict[str, bool] = field(default_factory=dict)
    coalesce: dict[str, int] = field(default_factory=dict)
    sysfs: dict[str, int | str] = field(default_factory=dict)
    sysctl: dict[str, int | str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.features or self.coalesce or self.sysfs or self.sysctl)

    @classmethod
    def from_dict(cls, data: Any, path: str, kinds: tuple[str, ...] = KINDS,
                  host_wide_ok: bool = False) -> KnobSet:
        if isinstance(data, KnobSet):
            data = data.to_dict()
        if not isinstance(data, dict):
            raise ConfigError(path, f"must be a table of knob kinds: {', '.join(kinds)} (got {data!r})")
        out: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
        for kind, table in data.items():
            kpath = f"{path}.{kind}"
            if kind not in KINDS:
                raise ConfigError(kpath, _suggest(str(kind), kinds, "knob kind") + f"allowed: {', '.join(kinds)}")
            if kind not in kinds:
                raise ConfigError(kpath, _misplaced(kind, path))
            if not isinstance(table, dict):
                raise ConfigError(kpath, f"must be a table of {kind} names and values (got {table!r})")
            for name, value in table.items():
                npath = f"{kpath}.{name}"
                name = str(name)
                if kind == "features":
                    if name not in known_features():
                        raise ConfigError(npath, _suggest(name, sorted(known_features()), "feature")
                                          + "use a name `ethtool -k` shows (generic-receive-offload, rx-gro-list) "
                                          f"or a short one of ethtool -K ({', '.join(FEATURE_GROUPS)})")
                    out[kind][name] = _feature_value(value, npath)
                elif kind == "coalesce":
                    if name not in COALESCE:
                        raise ConfigError(npath, _suggest(name, list(COALESCE), "coalescing parameter")
                                          + f"allowed (ethtool -C names): {', '.join(COALESCE)}")
                    out[kind][name] = _coalesce_value(name, value, npath)
                elif kind == "sysfs":
                    out[kind][name] = _sysfs_value(name, value, npath)
                else:
                    if not _SYSCTL_RE.match(name):
                        raise ConfigError(npath, "not a network sysctl name; use the dotted form under net., "
                                                 "e.g. \"net.core.rmem_max\"")
                    if name in HOST_WIDE_SYSCTLS and not host_wide_ok:
                        raise ConfigError(npath, "host-wide, not per network namespace (one value for tester and "
                                                 "DUT alike): set it under testbed.knobs.host.sysctl")
                    out[kind][name] = _sysctl_value(value, npath)
        return cls(**out)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.features:
            d["features"] = {k: "on" if v else "off" for k, v in self.features.items()}
        for kind in ("coalesce", "sysfs", "sysctl"):
            if getattr(self, kind):
                d[kind] = dict(getattr(self, kind))
        return d


def _misplaced(kind: str, path: str) -> str:
    if kind == "sysctl":
        return "sysctls belong to a namespace, not to one interface: put them under dut, tester or host"
    return (f"{path.rsplit('.', 1)[-1]} takes only sysctl (host-wide ones); tune interfaces under dut, tester "
            "or interfaces.<name>")


@dataclass(frozen=True)
class Knobs:
    """A test bed's tuning knobs by target (see the module docstring for the config shape)."""

    dut: KnobSet = field(default_factory=KnobSet)
    tester: KnobSet = field(default_factory=KnobSet)
    host: KnobSet = field(default_factory=KnobSet)
    interfaces: dict[str, KnobSet] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.dut or self.tester or self.host or any(self.interfaces.values()))

    @classmethod
    def from_dict(cls, data: Any, path: str = "knobs") -> Knobs:
        """Validate a ``[testbed.knobs]`` table; every error names its path (``path.dut.features.gro``)."""
        if data is None:
            return cls()
        if isinstance(data, Knobs):
            return data
        if not isinstance(data, dict):
            raise ConfigError(path, f"must be a table of targets: {', '.join(TARGETS)} (got {data!r})")
        kw: dict[str, Any] = {}
        for target, value in data.items():
            tpath = f"{path}.{target}"
            if target in ("dut", "tester"):
                kw[target] = KnobSet.from_dict(value, tpath)
            elif target == "host":
                kw[target] = KnobSet.from_dict(value, tpath, kinds=("sysctl",), host_wide_ok=True)
            elif target == "interfaces":
                if not isinstance(value, dict):
                    raise ConfigError(tpath, f"must be a table of interface names (got {value!r})")
                ifs = {}
                for ifname, knobs in value.items():
                    if not isinstance(ifname, str) or not _IFNAME_RE.match(ifname):
                        raise ConfigError(f"{tpath}.{ifname}", "not an interface name")
                    ifs[ifname] = KnobSet.from_dict(knobs, f"{tpath}.{ifname}",
                                                    kinds=("features", "coalesce", "sysfs"))
                kw[target] = ifs
            else:
                raise ConfigError(tpath, _suggest(str(target), TARGETS, "target")
                                  + "allowed: dut (every DUT-side interface), tester (every tester port), "
                                    "host (host-wide sysctls), interfaces.<name> (one interface)")
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {t: getattr(self, t).to_dict() for t in ("dut", "tester", "host") if getattr(self, t)}
        ifs = {n: k.to_dict() for n, k in self.interfaces.items() if k}
        if ifs:
            d["interfaces"] = ifs
        return d

    def for_selftest(self) -> Knobs:
        """What the tester's self-test (its loopback test bed) runs with: the tester's and the
        host's knobs, so it proves the tester as tuned for the run."""
        return Knobs(tester=self.tester, host=self.host)

    def features_of(self, target: str) -> dict[str, bool]:
        """``{kernel feature glob: on}`` asked of ``dut``/``tester`` (for consistency checks)."""
        ks: KnobSet = getattr(self, target)
        return {feature_pattern(n): v for n, v in ks.features.items()}


def placement_conflict(knobs: Knobs, placement: str) -> tuple[str, str] | None:
    """``(field, message)`` when the DUT's knobs undo what DUT placement ``placement`` set up."""
    if placement == "threaded-napi":
        if knobs.features_of("dut").get("rx-gro") is False:
            name = next(n for n in knobs.dut.features if feature_pattern(n) == "rx-gro")
            return (f"knobs.dut.features.{name}", "off stops veth's NAPI, which dut_placement threaded-napi runs "
                                                  "the DUT in; use dut_placement = \"rps\" or leave GRO on")
        if knobs.dut.sysfs.get("threaded") == 0:
            return ("knobs.dut.sysfs.threaded", "0 undoes dut_placement threaded-napi; use dut_placement = \"rps\"")
    if placement == "rps" and any(_QUEUE_RE.match(n) and "rps_cpus" in n for n in knobs.dut.sysfs):
        return ("knobs.dut.sysfs", "rps_cpus would override dut_placement rps (dut_cpus sets the RPS masks)")
    return None


# --------------------------------------------------------------------------------------------- #
# What knobs address

@dataclass(frozen=True)
class KnobInterface:
    """One interface knobs can reach: its role (``dut``/``tester``), namespace (None: the host's)
    and name; ``alias`` is the role suffix of a test bed's name (``dtx`` for ``nr1a2b-dtx``)."""

    role: str
    netns: str | None
    ifname: str
    alias: str | None = None


@dataclass(frozen=True)
class KnobLayout:
    """The interfaces and namespaces a spec's targets resolve to."""

    interfaces: tuple[KnobInterface, ...] = ()
    #: role → the namespaces its sysctls go to (``host`` → ``(None,)``, the host's)
    namespaces: dict[str, tuple[str | None, ...]] = field(default_factory=dict)
    name: str = "interfaces"

    @classmethod
    def of_testbed(cls, tb: Any) -> KnobLayout:
        """Every interface a test bed recorded (``dut``: its DUT side, ``tester``: its tester ports)."""
        ifs = []
        for i in tb.state.interfaces:
            m = st.NAME_RE.match(i.ifname)
            ifs.append(KnobInterface(i.role, i.netns, i.ifname, i.ifname.split("-", 1)[1] if m else None))
        tester = tuple(dict.fromkeys(i.netns for i in ifs if i.role == "tester"))
        spaces: dict[str, tuple[str | None, ...]] = {"tester": tester, "host": (None,)}
        if tb.dut_netns:
            spaces["dut"] = (tb.dut_netns,)
        return cls(tuple(ifs), spaces, f"test bed {tb.id} ({tb.topology})")

    def find(self, name: str) -> KnobInterface | None:
        for i in self.interfaces:
            if name in (i.ifname, i.alias):
                return i
        return None


# --------------------------------------------------------------------------------------------- #
# Reading and writing, inside the namespace

class _Skip(Exception):
    """A knob that cannot be applied here; the message is the reason."""


SIOCETHTOOL = 0x8946
ETHTOOL_GDRVINFO = 0x3


class _IfReq(ctypes.Structure):
    _fields_ = [("ifr_name", ctypes.c_char * 16), ("ifr_data", ctypes.c_void_p), ("_pad", ctypes.c_char * 16)]


def _driver_here(ifname: str) -> str:
    buf = ctypes.create_string_buffer(196)  # struct ethtool_drvinfo
    struct.pack_into("I", buf, 0, ETHTOOL_GDRVINFO)
    req = _IfReq(ifname.encode(), ctypes.addressof(buf))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s.fileno(), SIOCETHTOOL, req)
    return buf.raw[4:36].split(b"\0", 1)[0].decode(errors="replace") or "?"


def _ethtool(ifname: str) -> Any:
    from pyroute2.ethtool.ioctl import IoctlEthtool

    return IoctlEthtool(ifname)


def _features_here(ifname: str) -> dict[str, tuple[bool, bool, bool]]:
    """``{feature: (changeable, requested, active)}`` of every feature the kernel names."""
    eth = _ethtool(ifname)
    try:
        f = eth.get_features()
        names = f.keys()  # iterating f itself yields tuples
        return {n: (f.is_available(n), f.is_requested(n), f.is_active(n)) for n in names if n}
    finally:
        eth.close()


def _features_set_here(ifname: str, requested: dict[str, bool]) -> str | None:
    """Set the requested state of features (ETHTOOL_SFEATURES); returns a note when the kernel
    says it could not make every one active (ETHTOOL_F_WISH)."""
    from pyroute2.ethtool.ioctl import NotSupportedError

    eth = _ethtool(ifname)
    try:
        f = eth.get_features()
        for n, v in requested.items():
            f[n] = v
        try:
            eth.set_features(f)
        except NotSupportedError:  # a positive return: ETHTOOL_F_WISH / _UNSUPPORTED; read back tells
            return "the kernel did not make every requested feature active"
        return None
    finally:
        eth.close()


def features_set_in(netns: str | None, ifname: str, requested: dict[str, bool]) -> str | None:
    """Set features (kernel names, e.g. ``rx-gro``) of ``ifname`` in ``netns``; a note if the kernel
    did not make every one active."""
    return run_in_netns(netns, _features_set_here, ifname, requested)


def _coalesce_here(ifname: str) -> dict[str, int]:
    eth = _ethtool(ifname)
    try:
        c = eth.get_coalesce()
        return {k: int(v) for k, v in c.items() if k != "cmd"}
    finally:
        eth.close()


def _coalesce_set_here(ifname: str, fld: str, value: int) -> None:
    eth = _ethtool(ifname)
    try:
        c = eth.get_coalesce()
        c[fld] = value
        eth.set_coalesce(c)
    finally:
        eth.close()


def _sysfs_path(ifname: str, rel: str) -> str:
    """``/sys/class/net/<if>/<rel>`` after checking this sysfs shows the interface of this thread's
    network namespace (a sysfs mounted elsewhere shows another namespace's interfaces)."""
    base = f"/sys/class/net/{ifname}"
    try:
        with open(f"{base}/ifindex") as f:
            shown = int(f.read())
    except FileNotFoundError:
        raise TestbedError(f"{ifname}: not in the sysfs of its namespace") from None
    if shown != socket.if_nametoindex(ifname):
        raise TestbedError(f"{ifname}: the sysfs here shows another namespace's interface (ifindex {shown})")
    return f"{base}/{rel}"


def _sysfs_read_here(ifname: str, rel: str) -> str:
    with open(_sysfs_path(ifname, rel)) as f:
        return f.read().rstrip("\n")


def _sysfs_write_here(ifname: str, rel: str, value: str) -> None:
    with open(_sysfs_path(ifname, rel), "w") as f:
        f.write(value)


def _queues_here(ifname: str, direction: str) -> list[str]:
    _sysfs_path(ifname, "queues")
    found = glob.glob(f"/sys/class/net/{ifname}/queues/{direction}-*")
    return sorted((os.path.basename(p) for p in found), key=lambda q: int(q.split("-")[1]))


def _ns_present(netns: str | None) -> bool:
    return netns is None or os.path.exists(os.path.join(NETNS_DIR, netns))


def _errno_reason(e: BaseException) -> tuple[int | None, str]:
    from pyroute2.ethtool.ioctl import NoSuchDevice, NotSupportedError

    if isinstance(e, NotSupportedError):
        return errno.EOPNOTSUPP, "Operation not supported"
    if isinstance(e, NoSuchDevice):
        return errno.ENODEV, "No such device"
    if isinstance(e, OSError):
        return e.errno, e.strerror or str(e)
    return None, str(e)


# --------------------------------------------------------------------------------------------- #
# The applier

@dataclass
class _Knob:
    """One concrete knob: a value for one interface (or namespace)."""

    target: str
    kind: str
    name: str
    value: Any
    netns: str | None
    ifname: str | None
    before: Any = None

    @property
    def label(self) -> str:
        return f"{self.kind}.{self.name}"

    @property
    def where(self) -> str:
        return self.ifname or self.netns or "host"


def _show_feature(changeable: bool, requested: bool, active: bool) -> str:
    s = "on" if active else "off"
    if requested != active:
        s += f" [requested {'on' if requested else 'off'}]"
    if not changeable:
        s += " [fixed]"
    return s


def _show_state(kind: str, value: Any) -> Any:
    return _show_feature(*value) if kind == "features" and value is not None else value


def _show_features(states: dict[str, tuple[bool, bool, bool]]) -> str | dict[str, str]:
    shown = {n: _show_feature(*s) for n, s in states.items()}
    values = set(shown.values())
    return values.pop() if len(values) == 1 else shown


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """While knobs are held, a signal that would kill the process outright (default action) raises
    instead (SIGINT ``KeyboardInterrupt``, SIGTERM/SIGHUP ``Terminated``), so the restore runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old: dict[signal.Signals, Any] = {}
    for sig in _SIGNALS:
        if signal.getsignal(sig) == signal.SIG_DFL:
            old[sig] = signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else _raise_terminated)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP while knobs are written or restored (a half-done write must not
    race its restore); they are delivered right after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    old = {sig: signal.signal(sig, lambda signum, frame: pending.append(signum)) for sig in _SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        for signum in dict.fromkeys(pending):
            os.kill(os.getpid(), signum)


class KnobApplier:
    """Applies a :class:`Knobs` spec to a :class:`KnobLayout` and restores it.

    ``state``: a test bed's state; the undo log is written into it (``state.knobs``) before
    every change, so ``netrig testbed down``/``clean`` restore what a killed run left. ``record``
    is the JSON-able account (``before``, ``applied``, ``changed``, ``skipped``, ``restored``).
    Use :func:`applied_knobs` unless you need the two steps apart. ``path`` names the spec in
    errors (``testbed.knobs`` in a run's config)."""

    def __init__(self, knobs: Knobs, layout: KnobLayout, state: st.TestbedState | None = None,
                 path: str = "knobs"):
        self.knobs, self.layout, self.state, self.path = knobs, layout, state, path
        self._changed: list[dict[str, Any]] = []
        self._skipped: list[dict[str, Any]] = []
        self.record: dict[str, Any] = {"requested": knobs.to_dict(), "before": {}, "applied": {},
                                       "changed": self._changed, "skipped": self._skipped, "restored": False,
                                       "restore_problems": []}
        self._plan: list[_Knob] = self._resolve()
        self._undo: list[st.KnobUndo] = []
        self._checked: list[_Knob] = []  # read before: compared again after the restore
        self._snapshots: dict[tuple[str, str | None, str], Any] = {}
        self._drivers: dict[tuple[str | None, str], str] = {}

    # ------------------------------------------------------------ resolving targets (no side effects)
    def _resolve(self) -> list[_Knob]:
        k, lay = self.knobs, self.layout
        plan: list[_Knob] = []

        def add(target: str, ks: KnobSet, spaces: tuple[str | None, ...], ifs: list[KnobInterface]) -> None:
            for name, value in ks.sysctl.items():
                plan.extend(_Knob(target, "sysctl", name, value, ns, None) for ns in spaces)
            for i in ifs:
                for kind in ("features", "coalesce", "sysfs"):
                    for name, value in getattr(ks, kind).items():
                        plan.append(_Knob(target, kind, name, value, i.netns, i.ifname))

        if k.host:
            add("host", k.host, (None,), [])
        for role in ("dut", "tester"):
            ks: KnobSet = getattr(k, role)
            if not ks:
                continue
            ifs = [i for i in lay.interfaces if i.role == role]
            spaces = lay.namespaces.get(role, ())
            if not ifs and not spaces:
                other = "the tester ports (tester)" if role == "dut" else "dut"
                raise ConfigError(f"{self.path}.{role}", f"{lay.name} has no {role} interfaces; tune {other} "
                                                         "or interfaces.<name>")
            if ks.sysctl and not spaces:
                raise ConfigError(f"{self.path}.{role}.sysctl", f"{lay.name} has no {role} namespace")
            add(role, ks, spaces, ifs)
        for name, ks in k.interfaces.items():
            i = lay.find(name)
            if i is None:
                names = ", ".join(x.alias or x.ifname for x in lay.interfaces) or "none"
                raise ConfigError(f"{self.path}.interfaces.{name}",
                                  f"no such interface in {lay.name}; its interfaces: {names}")
            add(f"interfaces.{name}", ks, (), [i])
        return plan

    # ------------------------------------------------------------ applying
    def apply(self) -> dict[str, Any]:
        """Read every targeted value, then set and read back each knob. On an exception, what was
        set so far stays in the undo log: call :meth:`restore`."""
        self._restore_leftovers()
        ready: list[_Knob] = []
        for k in self._expand(self._plan):
            try:
                k.before = self._read(k)
            except _Skip as e:
                self._skip(k, str(e))
                continue
            self._put("before", k, self._show(k, k.before))
            self._checked.append(k)
            ready.append(k)
        for k in ready:
            self._apply_one(k)
        return self.record

    def _expand(self, plan: list[_Knob]) -> Iterator[_Knob]:
        """``queues/rx-*/…`` → one knob per queue the interface has."""
        for k in plan:
            m = _QUEUE_RE.match(k.name) if k.kind == "sysfs" else None
            if not m or m.group(2) != "*":
                yield k
                continue
            assert k.ifname is not None
            queues = self._in_ns(k, _queues_here, k.ifname, m.group(1))
            if not queues:
                self._skip(k, f"{k.ifname} has no {m.group(1)} queues in sysfs")
            for q in queues:
                yield _Knob(k.target, k.kind, f"queues/{q}/{m.group(3)}", k.value, k.netns, k.ifname)

    def _apply_one(self, k: _Knob) -> None:
        if k.kind == "features":
            states = k.before
            want: Any = {n: bool(k.value) for n, (changeable, _, _) in states.items() if changeable}
            if not want:
                self._skip(k, f"fixed on {k.ifname} ({self._driver(k)}): the driver cannot change "
                              f"{', '.join(states)} (`ethtool -k` shows [fixed])")
                return
            already = all(states[n][1] == v and states[n][2] == v for n, v in want.items())
            entry = st.KnobUndo(k.kind, k.netns, k.ifname, k.label, k.target,
                                requested={n: states[n][1] for n in want})
        else:
            want = self._wire(k)
            already = self._same(k, k.before, want)
            entry = st.KnobUndo(k.kind, k.netns, k.ifname, k.label, k.target, k.name, k.before)
        if already:
            self._done(k, k.before)
            return
        self._log(entry)  # before the write: a crash right after it still knows how to undo it
        try:
            note = self._write(k, want)
        except _Skip as e:
            try:
                unchanged = self._read(k) == k.before
            except _Skip:
                unchanged = False
            if unchanged:  # refused: nothing to restore
                self._undo.remove(entry)
                self._persist()
            self._skip(k, str(e))
            return
        self._done(k, self._read(k), note)

    def _done(self, k: _Knob, after: Any, note: str | None = None) -> None:
        self._put("applied", k, self._show(k, after))
        ok = (all(a == k.value for (c, _, a) in after.values() if c) if k.kind == "features"
              else self._same(k, after, self._wire(k)))
        if not ok:
            item = {"knob": k.label, "target": k.target, "where": k.where,
                    "requested": self._show_request(k), "read_back": self._show(k, after)}
            if note:
                item["note"] = note
            self._changed.append(item)

    # ------------------------------------------------------------ restoring
    def restore(self) -> list[str]:
        """Undo every change in reverse order, then read every knob again: ``record["restored"]``
        is true when each equals its value before. Returns the problems (empty: exact)."""
        problems = restore_entries(self._undo)
        self._undo.clear()
        for k in self._checked:
            if k.kind in ("features", "coalesce"):
                continue  # compared below, with everything else of the interface
            try:
                now = self._read(k)
            except (_Skip, TestbedError) as e:
                if not _ns_present(k.netns):
                    continue  # the namespace is gone, and the knob with it
                problems.append(f"{k.target} {k.where} {k.label}: cannot read it back ({e})")
                continue
            if now != k.before:
                problems.append(f"{k.target} {k.where} {k.label}: {k.before!r} before, {now!r} after the restore")
        for (kind, netns, ifname), before in self._snapshots.items():
            if not _ns_present(netns):
                continue
            try:
                now = self._snapshot(kind, netns, ifname)
            except Exception as e:
                problems.append(f"{ifname} {kind}: cannot read it back ({_errno_reason(e)[1]})")
                continue
            for n in sorted(set(before) | set(now)):
                b, a = before.get(n), now.get(n)
                if b != a:
                    problems.append(f"{ifname} {kind} {n}: {_show_state(kind, b)!r} before, "
                                    f"{_show_state(kind, a)!r} after the restore")
        self.record["restore_problems"] = problems
        self.record["restored"] = not problems
        self._persist()
        return problems

    # ------------------------------------------------------------ per kind
    def _read(self, k: _Knob) -> Any:
        try:
            if k.kind == "sysctl":
                return self._in_ns(k, read_sysctl, k.name)
            assert k.ifname is not None
            if k.kind == "features":
                self._snapshot_once("features", k)
                pattern = feature_pattern(k.name)
                live = self._in_ns(k, _features_here, k.ifname)
                members = {n: s for n, s in live.items() if fnmatch.fnmatchcase(n, pattern)}
                if not members:
                    also = f" ({pattern})" if pattern != k.name else ""
                    raise _Skip(f"this kernel has no feature {k.name!r}{also}")
                return members
            if k.kind == "coalesce":
                self._snapshot_once("coalesce", k)
                return self._in_ns(k, _coalesce_here, k.ifname)[COALESCE[k.name]]
            return self._in_ns(k, _sysfs_read_here, k.ifname, k.name)
        except (_Skip, TestbedError):
            raise
        except Exception as e:
            raise _Skip(self._reason(k, e, reading=True)) from None

    def _write(self, k: _Knob, value: Any) -> str | None:
        """Set a knob; a note when the kernel took a feature change only in part."""
        try:
            if k.kind == "sysctl":
                self._in_ns(k, write_sysctl, k.name, value)
                return None
            assert k.ifname is not None
            if k.kind == "features":
                return self._in_ns(k, _features_set_here, k.ifname, value)
            if k.kind == "coalesce":
                self._in_ns(k, _coalesce_set_here, k.ifname, COALESCE[k.name], value)
            else:
                self._in_ns(k, _sysfs_write_here, k.ifname, k.name, value)
            return None
        except TestbedError:
            raise
        except Exception as e:
            raise _Skip(self._reason(k, e, reading=False, value=value)) from None

    def _reason(self, k: _Knob, e: BaseException, reading: bool, value: Any = None) -> str:
        code, text = _errno_reason(e)
        drv = self._driver(k) if k.ifname else None
        if k.kind == "coalesce" and code == errno.EOPNOTSUPP:
            if reading:
                return f"{drv} has no interrupt coalescing (ethtool -c {k.ifname}: {text})"
            return f"{drv} does not support {k.name} (ethtool -C {k.ifname} {k.name}: {text})"
        if k.kind == "sysctl" and code == errno.ENOENT:
            if k.netns is not None and os.path.exists("/proc/sys/" + k.name.replace(".", "/")):
                return "host-wide, not per network namespace: set it under testbed.knobs.host.sysctl"
            return f"no such sysctl in {k.where} (is its kernel module loaded?)"
        if k.kind == "sysctl" and code in (errno.EACCES, errno.EPERM) and k.netns is not None and not reading:
            return f"refused: {text}: read-only inside a network namespace on this kernel (value {value!r})"
        if k.kind == "sysfs" and code == errno.ENOENT:
            return f"/sys/class/net/{k.ifname}/{k.name} does not exist ({drv})"
        if code in (errno.EOPNOTSUPP, errno.ENOTTY):
            hint = ""
            if k.name == "threaded" and drv == "veth":
                hint = "; veth has NAPI only with GRO on or an XDP program: add features.gro = \"on\""
            return f"{drv or k.where} does not support it ({text}){hint}"
        if reading:
            return f"cannot read it: {text}"
        return f"refused: {text} (value {value!r})"

    def _wire(self, k: _Knob) -> Any:
        """The value as written: coalesce ints, sysfs/sysctl text."""
        return k.value if k.kind == "coalesce" else str(k.value)

    def _same(self, k: _Knob, read: Any, wire: Any) -> bool:
        """Does a value read equal one requested (masks and sysctl lists compare by meaning)?"""
        if read is None:
            return False
        if k.kind == "coalesce":
            return bool(read == wire)
        if k.kind == "sysfs" and _sysfs_kind(k.name, k.label) == "mask":
            try:
                return int(str(read).replace(",", ""), 16) == int(str(wire).replace(",", ""), 16)
            except ValueError:
                return False
        return str(read).split() == str(wire).split()

    def _show(self, k: _Knob, value: Any) -> Any:
        return _show_features(value) if k.kind == "features" else value

    def _show_request(self, k: _Knob) -> Any:
        return ("on" if k.value else "off") if k.kind == "features" else k.value

    # ------------------------------------------------------------ helpers
    def _in_ns(self, k: _Knob, fn: Callable[..., Any], *args: Any) -> Any:
        return run_in_netns(k.netns, fn, *args, sysfs=k.kind == "sysfs")

    def _snapshot(self, kind: str, netns: str | None, ifname: str) -> dict[str, Any]:
        fn = _features_here if kind == "features" else _coalesce_here
        return run_in_netns(netns, fn, ifname)

    def _snapshot_once(self, kind: str, k: _Knob) -> Any:
        """The whole feature set / coalescing of an interface before the first change, to check
        after the restore that nothing else moved (a feature the kernel switched along)."""
        assert k.ifname is not None
        key = (kind, k.netns, k.ifname)
        if key not in self._snapshots:
            self._snapshots[key] = self._snapshot(kind, k.netns, k.ifname)
        return self._snapshots[key]

    def _driver(self, k: _Knob) -> str:
        assert k.ifname is not None
        key = (k.netns, k.ifname)
        if key not in self._drivers:
            try:
                self._drivers[key] = run_in_netns(k.netns, _driver_here, k.ifname)
            except Exception:
                self._drivers[key] = "its driver"
        return self._drivers[key]

    def _put(self, part: str, k: _Knob, value: Any) -> None:
        self.record[part].setdefault(k.target, {}).setdefault(k.where, {})[k.label] = value

    def _skip(self, k: _Knob, reason: str) -> None:
        self._skipped.append({"knob": k.label, "target": k.target, "where": k.where, "reason": reason})

    def _log(self, entry: st.KnobUndo) -> None:
        """Record how to undo a change before making it."""
        self._undo.append(entry)
        self._persist()

    def _persist(self) -> None:
        if self.state is None:
            return
        self.state.knobs = st.KnobHold(os.getpid(), st.proc_start_time(), tuple(self._undo)) if self._undo else None
        if self.state.id:
            st.write_state(self.state)

    def _restore_leftovers(self) -> None:
        """Knobs a killed run left on this test bed: restored first (their owner is gone)."""
        if self.state is None:
            return
        left = self.state.knobs
        if left is None or not left.undo:
            return
        if st.pid_alive(left.owner_pid, left.owner_start_time):
            raise TestbedError(f"test bed {self.state.id}: process {left.owner_pid} holds tuning "
                               "knobs on it; wait for it to end (two runs would restore each other's values)")
        problems = restore_entries(left.undo)
        self.record["leftovers_restored"] = [e.label for e in left.undo]
        if problems:
            raise TestbedError(f"test bed {self.state.id}: knobs a killed run (pid {left.owner_pid}) "
                               f"left cannot be restored: {'; '.join(problems)}")
        self._persist()  # nothing of ours yet: drops the old log


def restore_entries(entries: Sequence[st.KnobUndo]) -> list[str]:
    """Write back each undo-log entry, the last first; returns what failed (a knob whose namespace
    is gone went with it and counts as restored)."""
    problems: list[str] = []
    for e in reversed(entries):
        ns, ifname = e.netns, e.ifname
        if not _ns_present(ns):
            continue
        try:
            if e.kind == "features":
                run_in_netns(ns, _features_set_here, ifname, e.requested)
            elif e.kind == "coalesce":
                run_in_netns(ns, _coalesce_set_here, ifname, COALESCE[str(e.name)], e.value)
            elif e.kind == "sysfs":
                run_in_netns(ns, _sysfs_write_here, ifname, e.name, e.value, sysfs=True)
            else:
                run_in_netns(ns, write_sysctl, e.name, e.value)
        except Exception as ex:
            if not _ns_present(ns):
                continue
            problems.append(f"{e.target} {ifname or ns or 'host'} {e.label}: not restored to "
                            f"{e.requested if e.requested is not None else e.value!r} ({_errno_reason(ex)[1]})")
    return problems


@contextlib.contextmanager
def applied_knobs(knobs: Knobs, layout: KnobLayout, state: st.TestbedState | None = None,
                  path: str = "knobs") -> Iterator[dict[str, Any]]:
    """Apply ``knobs`` for the block and restore them after it, also on exceptions, Ctrl-C and
    SIGTERM/SIGHUP (signals are held while values are written or restored, then delivered).
    Yields the record; a restore that is not exact raises ``TestbedError`` naming the knobs
    (unless the block is already failing: then it is only in ``record["restore_problems"]``)."""
    applier = KnobApplier(knobs, layout, state, path)  # resolves targets: a ConfigError changes nothing
    with _signals_raise():
        try:
            with _signals_deferred():
                applier.apply()
            yield applier.record
        except BaseException:
            with _signals_deferred():
                applier.restore()
            raise
        with _signals_deferred():
            problems = applier.restore()
        if problems:
            raise TestbedError(f"tuning knobs not restored exactly: {'; '.join(problems)}")


__all__ = ["Knobs", "KnobSet", "KnobLayout", "KnobInterface", "KnobApplier", "applied_knobs", "restore_entries",
           "placement_conflict", "known_features", "sysfs_kind", "feature_pattern", "FEATURE_GROUPS", "COALESCE",
           "SYSFS_ATTRS", "SYSFS_QUEUE_ATTRS", "HOST_WIDE_SYSCTLS"]
