"""Test-bed state files and leftover cleaning.

Every test bed writes ``/run/netrig/testbeds/<id>.json`` *before* it creates anything and updates it
as it goes, so another process (``netrig testbed down/status/clean``) always knows what to remove.

Names netrig creates (``<id>`` is 4 lowercase hex digits):

* network namespaces ``nr<id>-<role>`` (``tx``, ``rx``, ``dut``, ``p0`` … ``p3``);
* interfaces ``nr<id>-<suffix>`` (all inside those namespaces, never in the host namespace);
* nftables tables ``netrig_<id>`` (inside the DUT namespace, so they go with it).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from netrig.errors import ConfigError, ResultError, TestbedError
from netrig.results.typed import from_dict

STATE_DIR = "/run/netrig/testbeds"

#: A namespace or interface name netrig created: ``nr`` + 4 hex digits + ``-`` + role.
NAME_RE = re.compile(r"^nr([0-9a-f]{4})-[a-z0-9]{1,8}$")
ID_RE = re.compile(r"^[0-9a-f]{4}$")


# --------------------------------------------------------------------------------------------- #
# The state file's parts, each a type (read back with ``netrig.results.typed.from_dict``)

@dataclass(frozen=True)
class TesterPort:
    """One tester port: an interface (one end of a veth pair) in its own namespace.

    ``peer_mac`` is the MAC that frames sent from this port must be addressed to (the DUT's interface
    for routed topologies, the other tester port for loopback/bridge). ``ipv4``/``ipv6`` are the
    addresses the port stands for (not configured in its kernel stack unless ``tester_stack=True``).
    """

    __test__ = False

    name: str
    ifname: str
    netns: str | None
    mac: str
    ipv4: str | None = None
    ipv6: str | None = None
    peer_mac: str | None = None
    gateway_ipv4: str | None = None
    gateway_ipv6: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Interface:
    """An interface of the test bed (a veth end, the DUT's bridge, a user's NIC): its namespace
    (``None``: the host's), name, ``role`` (``tester`` or ``dut``) and veth peer."""

    netns: str | None
    ifname: str
    role: str
    peer: str | None = None


@dataclass(frozen=True)
class Expected:
    """One thing the build configured, so ``Testbed.health`` can check it and ``repair`` restore
    it: a link set ``up``, an ``addr`` (``cidr``) on ``ifname``, a permanent ``neigh`` (``ip`` →
    ``mac``), a ``route`` (``dst`` via ``gateway``, or out of ``ifname`` without one),
    ``no_broadcast`` (the kernel's broadcast route of ``ip`` on ``ifname`` deleted: it comes back
    with the address after a link flap)."""

    kind: str
    netns: str | None
    ifname: str | None = None
    cidr: str | None = None
    ip: str | None = None
    mac: str | None = None
    dst: str | None = None
    gateway: str | None = None
    #: A route's metric (priority) where it must win over a connected route of the same prefix.
    metric: int | None = None


@dataclass(frozen=True)
class DutProcess:
    """A DUT process the test bed runs (a forwarder, testpmd, a capture): recorded before it
    starts, so teardown finds it by pid and start time whoever built the test bed."""

    role: str
    pid: int
    start_time: float | None
    argv: tuple[str, ...]
    log: str
    #: A directory the process makes that teardown removes once it has stopped.
    runtime_dir: str | None = None
    #: A capture's statistics file.
    stats: str | None = None


@dataclass(frozen=True)
class SysctlChange:
    """A host-wide sysctl the build changed: its value before (restored at teardown, unless
    somebody changed it since) and the value set."""

    old: str
    new: str


@dataclass(frozen=True)
class HostAddr:
    """An address the build added to an interface of the host's namespace (an external test bed's
    port): removed at teardown."""

    ifname: str
    cidr: str


@dataclass(frozen=True)
class NapiThread:
    """A threaded-NAPI kernel thread pinned to the DUT's CPUs."""

    pid: int
    comm: str
    affinity: tuple[int, ...] = ()
    interface: str | None = None


@dataclass(frozen=True)
class Placement:
    """Where the DUT's packet work runs (``netrig.testbed.placement``; docs/testbed.md): ``mode``
    (``wire``, ``rps``, ``threaded-napi``, ``inline``, or ``forwarder``/``capture-xdp`` for a DUT
    process's own pinned threads), its ``cpus`` (``None``: the sender's), what was set per DUT
    interface, in words (``note``), and ``shared`` when the DUT and the tester share the only CPU."""

    mode: str
    cpus: tuple[int, ...] | None = None
    netns: str | None = None
    #: Per DUT interface what was set (the wire's program id, an RPS mask, GRO and threaded NAPI).
    interfaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    note: str | None = None
    shared: str | None = None
    #: The wire's ring, frames per DUT CPU.
    ring: int | None = None
    threads: tuple[NapiThread, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cpus"] = list(self.cpus) if self.cpus is not None else None
        return {k: v for k, v in d.items() if v is not None or k in ("cpus", "note")}


@dataclass(frozen=True)
class FlowtableRecord:
    """The DUT's nftables flowtable (the ``flowtable`` option)."""

    name: str
    devices: tuple[str, ...]
    hook: str
    hardware_offload: bool
    slow_path_rule: str


@dataclass(frozen=True)
class PolicerRecord:
    """The policer DUT's cap and token bucket (``burst`` in ``burst_unit``: packets or bytes)."""

    cap_pps: float | None
    cap_bps: float | None
    burst: int
    burst_unit: str


@dataclass(frozen=True)
class CaptureRecord:
    """The capture DUT: its method, batch, CPU, interface and namespace, statistics file and pid."""

    method: str
    batch: int
    cpu: int
    ifname: str
    netns: str
    stats: str
    pid: int


@dataclass(frozen=True)
class KnobUndo:
    """How to undo one tuning knob a run set (written before the change): ``kind`` (``sysctl``,
    ``sysfs``, ``coalesce``, ``features``), where, and the value to write back — ``value`` for
    ``name``, or ``requested`` (feature → on) for features."""

    kind: str
    netns: str | None
    ifname: str | None
    label: str
    target: str
    name: str | None = None
    value: Any = None
    requested: dict[str, bool] | None = None


@dataclass(frozen=True)
class KnobHold:
    """Tuning knobs a run holds on the test bed: its pid and start time, and the undo log."""

    owner_pid: int | None
    owner_start_time: float | None
    undo: tuple[KnobUndo, ...] = ()


@dataclass
class TestbedState:
    """A test bed as its state file records it: written before each part is created and updated as
    the build goes, so another process (``netrig testbed down/status/clean``) always knows what to
    remove. Mutable while the build fills it; every part is a frozen type."""

    __test__ = False

    id: str
    topology: str
    options: dict[str, Any] = field(default_factory=dict)
    owner_pid: int | None = None
    owner_start_time: float | None = None
    detached: bool = False
    created_at: float | None = None
    #: ``building``, ``up`` or ``teardown-failed``.
    status: str = "building"
    namespaces: list[str] = field(default_factory=list)
    #: The sysctls each namespace was created with.
    sysctls: dict[str, dict[str, str]] = field(default_factory=dict)
    global_sysctls: dict[str, SysctlChange] = field(default_factory=dict)
    #: What the build added to the host's own namespace (external ports): addresses, and nftables
    #: tables by name; removed at teardown (a namespace takes its own with it).
    host_addrs: list[HostAddr] = field(default_factory=list)
    host_nft: list[str] = field(default_factory=list)
    ports: list[TesterPort] = field(default_factory=list)
    interfaces: list[Interface] = field(default_factory=list)
    expected: list[Expected] = field(default_factory=list)
    processes: list[DutProcess] = field(default_factory=list)
    #: The nftables rule set loaded per namespace.
    nft: dict[str, str] = field(default_factory=dict)
    placement: Placement | None = None
    dut_netns: str | None = None
    #: One tester port that is tx and rx (``oneport``).
    one_port: bool = False
    #: The CPUs the DUT's own pinned threads hold (a forwarder, testpmd, a capture).
    dut_threads_cpus: list[int] = field(default_factory=list)
    #: The source address the receiving port sees, by IP version (``"4"``, ``"6"``): a NAT's.
    expected_rx_src: dict[str, str] | None = None
    flowtable: FlowtableRecord | None = None
    policer: PolicerRecord | None = None
    capture: CaptureRecord | None = None
    knobs: KnobHold | None = None
    notes: list[str] = field(default_factory=list)
    #: Shell command lines the test bed offers its users, by name (``BGP_WITHDRAW``): in their
    #: commands' environment as ``NETRIG_<name>`` (``Testbed.command_env``).
    commands: dict[str, str] = field(default_factory=dict)
    build_s: float | None = None
    teardown_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TestbedState:
        return from_dict(cls, d)


def state_path(tb_id: str) -> str:
    return os.path.join(STATE_DIR, f"{tb_id}.json")


def write_state(state: TestbedState) -> None:
    """Write the state file atomically (a temporary file renamed over it); on failure (a full or
    read-only state directory) the temporary file is removed and the error names the file and the
    remedy."""
    path = state_path(state.id)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        os.makedirs(STATE_DIR, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(state.to_dict(), f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        remedy = (f"free space in {STATE_DIR} (df -h {STATE_DIR})" if e.errno in (errno.ENOSPC, errno.EDQUOT)
                  else f"make {STATE_DIR} writable for netrig (it runs as root)")
        raise TestbedError(f"{path}: cannot write the test bed's state ({e.strerror or e}): {remedy}") from None


def read_state(tb_id: str) -> TestbedState:
    if not ID_RE.match(tb_id):
        raise TestbedError(f"id {tb_id!r}: not a test-bed id (4 hex digits, see `netrig testbed status`)")
    try:
        with open(state_path(tb_id)) as f:
            return TestbedState.from_dict(json.load(f))
    except FileNotFoundError:
        raise TestbedError(f"id {tb_id}: no such test bed (no {state_path(tb_id)}; "
                           "see `netrig testbed status`)") from None
    except (OSError, ValueError, TypeError, ResultError) as e:
        raise TestbedError(f"id {tb_id}: state file {state_path(tb_id)} unreadable: {e} (written by another "
                           "netrig version? remove it with that netrig, or `netrig testbed clean --force`)") from None


def remove_state(tb_id: str) -> None:
    for path in (state_path(tb_id), lock_path(tb_id)):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def all_states() -> list[TestbedState]:
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
    if _zombie(pid):  # dead, not yet reaped by its parent
        return False
    if start_time is not None:
        try:
            import psutil

            if abs(psutil.Process(pid).create_time() - start_time) > 1.0:
                return False  # pid reused by another process
        except Exception:
            pass
    return True


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return False


def proc_start_time() -> float | None:
    """This process's start time (recorded with its pid, so a reused pid is not taken for it)."""
    try:
        import psutil

        return psutil.Process().create_time()
    except Exception:
        return None


def owner_alive(state: TestbedState) -> bool:
    return pid_alive(state.owner_pid, state.owner_start_time)


def new_id() -> str:
    existing = {s.id for s in all_states()}
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


def lock_path(tb_id: str) -> str:
    return os.path.join(STATE_DIR, f"{tb_id}.lock")


#: What ``testbed.shared`` allows: several runs receiving on one test bed, each seeing every frame.
#: AF_XDP hands each frame to one socket (one steering program per interface), so a run sharing a
#: test bed receives with a backend that takes a copy.
SHARED_IO = ("af_packet", "socket")



def shared_io(io: str, option: str) -> str:
    """The I/O backend of a run sharing a test bed: ``auto`` becomes af_packet; af_xdp is refused."""
    if io == "auto":
        return SHARED_IO[0]
    if io not in SHARED_IO:
        raise ConfigError(option, f"{io} cannot share a test bed: AF_XDP hands each frame to one socket, so one run "
                                  f"would take the other's frames unseen; use {' or '.join(SHARED_IO)} in every run")
    return io


@contextlib.contextmanager
def in_use(tb_id: str, shared: bool = False) -> Iterator[bool]:
    """Hold test bed ``tb_id`` for a run: a ``flock`` on its lock file, released by the kernel
    however this process ends. A run holds it alone (``LOCK_EX``): a second run is refused with
    one line naming the holder, its pid and command — two testers on one DUT each measure the
    other's load as the DUT's. ``shared`` (a deliberate shared-DUT experiment) takes ``LOCK_SH``:
    several shared runs may hold it together, never beside a run that holds it alone. Yields
    whether another run held it when this one started."""
    os.makedirs(STATE_DIR, exist_ok=True)
    path = lock_path(tb_id)
    fd = _flock(path, shared)
    try:
        if fd is None:
            remedy = ("it holds the test bed alone: wait for it to finish (a shared-DUT experiment gives "
                      "--share-testbed to every run)" if shared else
                      "wait for it to finish, or, for a deliberate shared-DUT experiment, give --share-testbed to "
                      "every run (testbed.shared = true; their trials are then flagged)")
            raise TestbedError(f"test bed {tb_id} is in use by {_named(lock_holders(path))}: {remedy}")
        yield any(h.pid != os.getpid() for h in lock_holders(path))
    finally:
        if fd is not None:
            os.close(fd)


def _flock(path: str, shared: bool) -> int | None:
    """A descriptor of ``path`` holding its ``flock`` (``LOCK_SH`` if ``shared``), or ``None`` when
    another process holds it in a way that excludes this one."""
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


#: Where the locks of ports in use by a netrig process are: a served port, or the ports of a trial,
#: a forwarder, a capture.
PORTS_DIR = os.path.join(os.path.dirname(STATE_DIR), "ports")


def port_lock_path(ifname: str, netns: str | None) -> str:
    """``IF@INODE.lock``, the inode that of the interface's network namespace: one port has one lock
    whether it is named ``veth0@ns1`` or ``veth0`` by a process running in ns1 (``ip netns exec``),
    and ``eth1`` in two namespaces are two ports."""
    ns = f"/run/netns/{netns}" if netns else "/proc/self/ns/net"
    try:
        ino = os.stat(ns).st_ino
    except OSError:
        raise ConfigError("netns", f"{netns}: no such network namespace (ip netns list)") from None
    return os.path.join(PORTS_DIR, f"{ifname}@{ino}.lock")


@contextlib.contextmanager
def ports_held(ports: list[tuple[str, str | None]], option: str, shared: bool = False) -> Iterator[None]:
    """Hold each port (interface, namespace) for this process, as :func:`in_use` holds a test bed:
    a second netrig process on one of them is refused at once, naming the holder (two processes on
    one port count each other's frames, or take them: a false loss). ``shared``: beside other
    shared holders only (the runs of a shared test bed); ``option`` names the ports in the error."""
    os.makedirs(PORTS_DIR, exist_ok=True)
    _sweep_stale(PORTS_DIR)
    paths: dict[str, str] = {}  # lock file → the port's name (a port named twice is held once)
    for ifname, netns in ports:
        try:
            paths.setdefault(port_lock_path(ifname, netns), f"{ifname}@{netns}" if netns else ifname)
        except ConfigError as e:
            raise ConfigError(option, e.message) from None
    held: list[tuple[int, str]] = []
    try:
        for path, name in paths.items():
            fd = _flock_file(path, shared)
            if fd is None:
                raise ConfigError(option, f"port {name} is in use by {_named(lock_holders(path))}: stop it, or use "
                                          "another port")
            held.append((fd, path))
        yield
    finally:
        for fd, path in held:
            _release_file(fd, path)


def _sweep_stale(directory: str) -> None:
    """Remove the lock files nobody holds: a holder killed (SIGKILL, a crash) leaves its file, and
    one per port and namespace inode would pile up. Safe beside holders: a file is removed only
    while locked here, and a holder that locked it meanwhile finds it gone and locks anew
    (:func:`_flock_file`)."""
    try:
        names = [n for n in os.listdir(directory) if n.endswith(".lock")]
    except OSError:
        return
    for name in names:
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _same_file(fd, path):
                os.unlink(path)
        except OSError:
            pass  # held: in use
        finally:
            os.close(fd)


def _same_file(fd: int, path: str) -> bool:
    """``path`` still names the file ``fd`` is open on (its last holder did not remove it)."""
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _flock_file(path: str, shared: bool) -> int | None:
    """:func:`_flock` on a lock file its last holder removes on release (:func:`_release_file`): a
    lock taken on a file removed meanwhile, or refused by a holder that was removing it, is tried
    again on the file now at ``path``."""
    while True:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            if _same_file(fd, path):
                os.close(fd)
                return None
        else:
            if _same_file(fd, path):
                return fd
        os.close(fd)


def _release_file(fd: int, path: str) -> None:
    """Release a lock of :func:`_flock_file`, removing its file when no other process holds it (a
    shared holder turns its lock exclusive to know; one that cannot leaves the file to the others)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if _same_file(fd, path):
            os.unlink(path)
    except OSError:
        pass
    finally:
        os.close(fd)


#: How much of a holder's command line an error shows.
COMMAND_CHARS = 160


@dataclass(frozen=True)
class LockHolder:
    pid: int
    shared: bool

    def command(self) -> str:
        try:
            with open(f"/proc/{self.pid}/cmdline", "rb") as f:
                words = f.read().rstrip(b"\0").split(b"\0")
        except OSError:
            return "?"
        line = " ".join(os.path.basename(w.decode(errors="replace")) if i == 0 else w.decode(errors="replace")
                        for i, w in enumerate(words))
        line = " ".join(line.split())  # one line, whatever the arguments hold
        return line if len(line) <= COMMAND_CHARS else line[:COMMAND_CHARS - 1] + "…"


def lock_holders(path: str) -> list[LockHolder]:
    """The processes holding a ``flock`` on ``path``, from ``/proc/locks`` (matched by inode)."""
    try:
        st_ = os.stat(path)
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        w = line.split()
        if "->" in w or len(w) < 6 or w[1] != "FLOCK":
            continue
        major, minor, ino = w[5].split(":")
        if (int(ino), int(major, 16), int(minor, 16)) == (st_.st_ino, os.major(st_.st_dev), os.minor(st_.st_dev)):
            out.append(LockHolder(int(w[4]), w[3] == "READ"))
    return out


def _named(holders: list[LockHolder]) -> str:
    if not holders:
        return "another netrig run"
    return ", ".join(f"pid {h.pid} ({h.command()}{', shared' if h.shared else ''})" for h in holders)
