"""Run a Python function inside a named network namespace, without shelling out to ``ip netns exec``.

``setns(2)`` changes the namespace of the calling *thread* only, so :func:`run_in_netns` starts a
short-lived thread, moves it into ``/run/netns/<name>`` and runs the function there. Everything the
function opens stays bound to that namespace after the thread ends (sockets, netlink handles), and
processes it starts (``subprocess``) inherit the namespace too.

With ``sysfs=True`` the thread also gets a private mount namespace with a fresh ``/sys`` so that
``/sys/class/net`` shows the namespace's interfaces (what ``ip netns exec`` does for a process).
The host's mounts are untouched: the new mount namespace is made private before ``/sys`` is mounted.

``/proc/sys/net/...`` (sysctls) follows the thread's namespace by itself; ``/proc/net/...`` must be
read as ``/proc/thread-self/net/...``.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import socket
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from netrig.errors import TestbedError

T = TypeVar("T")

CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18

NETNS_DIR = "/run/netns"

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def netns_path(name: str) -> str:
    return os.path.join(NETNS_DIR, name)


def enter_netns(name: str | None, sysfs: bool = False) -> None:
    """Move the *calling thread* into netns ``name`` (None = stay). Only call in a throw-away thread."""
    if sysfs:
        _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    if name is not None:
        path = netns_path(name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise TestbedError(f"netns {name}: no such network namespace ({path} is missing)") from None
        try:
            _check(_libc.setns(fd, CLONE_NEWNET), f"setns({name})")
        finally:
            os.close(fd)
    if sysfs:
        _check(_libc.mount(b"sysfs", b"/sys", b"sysfs", 0, None), "mount sysfs")


def run_in_netns(name: str | None, fn: Callable[..., T], *args: Any, sysfs: bool = False,
                 **kwargs: Any) -> T:
    """Call ``fn(*args, **kwargs)`` in a thread inside netns ``name`` and return its result.

    ``name=None`` runs in the caller's namespace (still in a thread, so ``sysfs`` works the same).
    Exceptions raised by ``fn`` are re-raised in the caller.
    """
    values: list[T] = []
    errors: list[BaseException] = []

    def body() -> None:
        try:
            enter_netns(name, sysfs=sysfs)
            values.append(fn(*args, **kwargs))
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=body, name=f"netrig-ns-{name}", daemon=True)
    t.start()
    t.join()
    if errors:
        raise errors[0]
    return values[0]


def read_sysctl(name: str) -> str:
    path = "/proc/sys/" + name.replace(".", "/")
    with open(path) as f:
        return f.read().strip()


def write_sysctl(name: str, value: str | int) -> None:
    path = "/proc/sys/" + name.replace(".", "/")
    with open(path, "w") as f:
        f.write(str(value))


def sysctl_in(ns: str | None, name: str, value: str | int | None = None) -> str:
    """Read (and if ``value`` is given, first write) a sysctl inside netns ``ns``; returns the value."""

    def body() -> str:
        if value is not None:
            write_sysctl(name, value)
        return read_sysctl(name)

    return run_in_netns(ns, body)


def sysctls_in(ns: str | None, values: dict[str, str | int]) -> None:
    """Write several sysctls inside netns ``ns`` in one thread."""

    def body() -> None:
        for k, v in values.items():
            try:
                write_sysctl(k, v)
            except OSError as e:
                raise TestbedError(f"netns {ns}: sysctl {k}={v} failed: {e.strerror or e}") from None

    run_in_netns(ns, body)


MS_BIND = 4096
MS_SHARED = 1 << 20
MNT_DETACH = 2
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def create_netns(name: str) -> None:
    """Create ``/run/netns/<name>`` like ``ip netns add`` (in a thread; no fork, unlike pyroute2)."""
    os.makedirs(NETNS_DIR, exist_ok=True)
    d = NETNS_DIR.encode()
    if _libc.mount(b"", d, b"none", MS_SHARED | MS_REC, None) != 0:
        _check(_libc.mount(d, d, b"none", MS_BIND | MS_REC, None), f"bind {NETNS_DIR}")
        _check(_libc.mount(b"", d, b"none", MS_SHARED | MS_REC, None), f"share {NETNS_DIR}")
    path = netns_path(name)
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0))
    except FileExistsError:
        raise TestbedError(f"netns {name}: already exists") from None

    def body() -> None:
        _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
        _check(_libc.mount(b"/proc/thread-self/ns/net", path.encode(), b"none", MS_BIND, None),
               f"bind netns {name}")

    try:
        run_in_netns(None, body)
    except BaseException:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise


#: prctl(2) option: the signal a child gets when its parent thread dies.
PR_SET_PDEATHSIG = 1


def processes_in_netns(name: str) -> list[int]:
    """Pids of the processes whose network namespace is ``name`` (a tool a killed build left
    running there, a DUT process): matched by the namespace's inode."""
    try:
        ino = os.stat(netns_path(name)).st_ino
    except OSError:
        return []
    me = os.getpid()
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino == ino:
                out.append(int(pid))
        except OSError:
            continue
    return out


def kill_in_netns(name: str) -> list[int]:
    """SIGKILL every process in namespace ``name``; the pids killed."""
    pids = processes_in_netns(name)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return pids


def dies_with_parent() -> None:
    """``preexec_fn`` of a test bed's tools (nft, ethtool): the kernel kills the child when the thread
    that started it dies, so a netrig killed mid-build leaves no tool running on its own."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def remove_netns(name: str) -> None:
    """Like ``ip netns del``: unmount and unlink ``/run/netns/<name>`` (its interfaces go with it)."""
    path = netns_path(name)
    _libc.umount2(path.encode(), MNT_DETACH)
    os.unlink(path)


def netlink_route(name: str | None):
    """A pyroute2 ``IPRoute`` whose netlink socket lives in netns ``name`` (created in a thread)."""
    from pyroute2 import IPRoute  # ~0.2 s to import: only when a test bed talks netlink

    if name is None:
        return IPRoute()

    def body() -> int:
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 0)  # 0 = NETLINK_ROUTE
        return s.detach()

    fd = run_in_netns(name, body)
    return IPRoute(fileno=fd)
