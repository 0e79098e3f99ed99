"""The ``Testbed`` context manager: builds a topology, exposes its tester ports, always tears down."""
from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from netrig import _native
from netrig.errors import CapabilityError, ConfigError, Terminated, TestbedError
from netrig.testbed import state as st
from netrig.testbed.knobs import restore_entries
from netrig.testbed.links import (
    NUD_PERMANENT,
    Link,
    del_broadcast,
    read_addrs,
    read_broadcasts,
    read_links,
    read_permanent_neighbours,
    read_routes,
)
from netrig.testbed.nsthread import (
    create_netns,
    kill_in_netns,
    netlink_route,
    netns_path,
    read_sysctl,
    remove_netns,
    run_in_netns,
    write_sysctl,
)
from netrig.testbed.options import MACHINE_CPUS, TestbedOptions

if TYPE_CHECKING:  # pyroute2 takes ~0.2 s to import: it loads when a test bed talks netlink
    from pyroute2 import IPRoute
from netrig.testbed.placement import HOLDS_SENDER
from netrig.testbed.state import Expected, Interface, Placement, SysctlChange, TestbedState, TesterPort
from netrig.testbed.topologies import TOPOLOGIES, stop_processes, topology_options

__all__ = ["Testbed", "TesterPort", "teardown_state", "dead_processes", "iter_states"]


def _ns_exists(name: str) -> bool:
    return os.path.exists(netns_path(name))


class Testbed:
    """A test bed built from a named topology. Use as a context manager::

        with Testbed.create("router", dut_cpus="1") as tb:
            defaults = tb.stream_defaults()          # src/dst MAC and IP that cross the DUT
            tx, rx = tb.port("tx"), tb.port("rx")

    Building is done in ``__enter__`` (or :meth:`up`); ``__exit__`` (or :meth:`down`) always tears down,
    also on SIGINT/SIGTERM (handlers raising ``KeyboardInterrupt``/``netrig.errors.Terminated`` are installed while
    the test bed is up, when used from the main thread).
    """

    __test__ = False

    def __init__(self, topology: str, options: TestbedOptions, state: TestbedState | None = None):
        if topology not in TOPOLOGIES:
            raise ConfigError("topology", f"{topology!r}: unknown; choose one of {', '.join(TOPOLOGIES)}")
        self.topology = topology
        self.options = options
        self._topo = TOPOLOGIES[topology]
        self.state = state or TestbedState("", topology)
        self._built = state is not None
        self._old_handlers: dict[int, Any] = {}
        self._pending_signal: int | None = None
        self._iprs: dict[str | None, IPRoute] = {}

    # ---------------------------------------------------------------- construction
    @classmethod
    def create(cls, topology: str, **opts: Any) -> Testbed:
        """Validate ``opts`` (see :class:`TestbedOptions`) and return an unbuilt test bed."""
        if topology not in TOPOLOGIES:
            raise ConfigError("topology", f"{topology!r}: unknown; choose one of {', '.join(TOPOLOGIES)}")
        known = set(TestbedOptions.__dataclass_fields__)
        for k in opts:
            if k not in known:
                raise ConfigError(k, f"unknown test-bed option; known: {', '.join(sorted(known))}")
        tb = cls(topology, TestbedOptions(**opts))
        TOPOLOGIES[topology].validate(tb.options)
        return tb

    @classmethod
    def attach(cls, tb_id: str) -> Testbed:
        """A handle on an existing test bed (from its state file), e.g. to ``down()`` it."""
        s = st.read_state(tb_id)
        opts = dict(s.options)
        topology = s.topology
        unknown = sorted(set(opts) - set(TestbedOptions.__dataclass_fields__))
        if topology not in TOPOLOGIES or unknown:
            what = f"topology {topology!r}" if topology not in TOPOLOGIES else f"option {unknown[0]!r}"
            raise TestbedError(f"test bed {tb_id} was built by another netrig version (its {what} is unknown to "
                               f"this one): remove it with the netrig that built it, or with `netrig testbed clean` "
                               "once its owner has exited")
        return cls(topology, TestbedOptions.from_dict(opts), state=s)

    @property
    def id(self) -> str:
        return self.state.id

    def name(self, suffix: str) -> str:
        """Interface / namespace name ``nr<id>-<suffix>``."""
        n = f"nr{self.id}-{suffix}"
        assert len(n) <= 15, n
        return n

    def __enter__(self) -> Testbed:
        self._install_signal_handlers()
        try:
            self.up()
        except BaseException:
            self._restore_signal_handlers()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self._defer_signals()
        try:
            self.down()
        finally:
            self._restore_signal_handlers()

    def up(self) -> Testbed:
        """Build the test bed. On any failure, everything created so far is removed again."""
        if self._built:
            raise TestbedError(f"testbed {self.id}: already built")
        t0 = time.monotonic()
        self.state = TestbedState(st.new_id(), self.topology, self.options.to_dict(), owner_pid=os.getpid(),
                                  owner_start_time=st.proc_start_time(), created_at=st.now())
        st.write_state(self.state)
        self._built = True
        try:
            self._topo.build(self)
            self.state.status = "up"
            self.state.build_s = round(time.monotonic() - t0, 4)
            st.write_state(self.state)
        except BaseException as e:
            try:
                self._close_iprs()
                self.down()
            except TestbedError as e2:
                raise TestbedError(f"testbed {self.id}: build failed ({e}); teardown also failed: {e2}") from e
            raise
        finally:
            self._close_iprs()
        return self

    def detach(self) -> None:
        """Keep the test bed after this process exits (``netrig testbed up``); ``down`` removes it."""
        self.state.detached = True
        self.state.owner_pid = None
        st.write_state(self.state)

    def down(self) -> None:
        """Remove everything this test bed created. Raises ``TestbedError`` listing what was left."""
        if not self._built:
            return
        self._close_iprs()
        t0 = time.monotonic()
        leftovers = teardown_state(self.state)
        self.state.teardown_s = round(time.monotonic() - t0, 4)
        self._built = False
        if leftovers:
            raise TestbedError(f"testbed {self.id}: teardown left {'; '.join(leftovers)} "
                               "(run `netrig testbed clean --force`)")

    # ---------------------------------------------------------------- building blocks (topologies)
    def ipr(self, ns: str | None) -> IPRoute:
        if ns not in self._iprs:
            self._iprs[ns] = netlink_route(ns)
        return self._iprs[ns]

    def _close_iprs(self) -> None:
        for ipr in self._iprs.values():
            try:
                ipr.close()
            except Exception:
                pass
        self._iprs.clear()

    def add_netns(self, role: str, sysctls: dict[str, Any]) -> str:
        name = self.name(role)
        if _ns_exists(name):
            raise TestbedError(f"netns {name}: already exists (run `netrig testbed clean`)")
        self.state.namespaces.append(name)
        st.write_state(self.state)  # recorded before it exists: a crash now still gets cleaned
        create_netns(name)

        def body() -> None:
            for k, v in sysctls.items():
                write_sysctl(k, v)

        try:
            run_in_netns(name, body)
        except OSError as e:
            raise TestbedError(f"netns {name}: sysctl failed: {e}") from None
        self.state.sysctls[name] = {k: str(v) for k, v in sysctls.items()}
        return name

    def set_global_sysctl(self, name: str, value: Any) -> None:
        """Set a host-wide sysctl, remembering the old value so teardown restores it."""
        try:
            old = read_sysctl(name)
            write_sysctl(name, value)
        except OSError as e:
            raise TestbedError(f"sysctl {name}: cannot set to {value}: {e.strerror or e}") from None
        self.state.global_sysctls[name] = SysctlChange(old, read_sysctl(name))
        st.write_state(self.state)

    def add_veth(self, ns_a: str, if_a: str, ns_b: str, if_b: str, role_a: str, role_b: str) -> None:
        try:
            self.ipr(None).link("add", ifname=if_a, kind="veth", net_ns_fd=ns_a,
                                peer={"ifname": if_b, "net_ns_fd": ns_b})
        except Exception as e:
            raise TestbedError(f"veth {if_a}/{if_b}: cannot create: {e}") from None
        self.state.interfaces += [Interface(ns_a, if_a, role_a, if_b), Interface(ns_b, if_b, role_b, if_a)]
        if self.options.mtu is not None:
            for ns, ifname in ((ns_a, if_a), (ns_b, if_b)):
                try:
                    self.ipr(ns).link("set", index=self.index(ns, ifname), mtu=self.options.mtu)
                except Exception as e:
                    raise TestbedError(f"{ifname}: cannot set MTU {self.options.mtu}: {e}") from None

    def index(self, ns: str | None, ifname: str) -> int:
        idx = self.ipr(ns).link_lookup(ifname=ifname)
        if not idx:
            raise TestbedError(f"interface {ifname}: not found in netns {ns or '(host)'}")
        return idx[0]

    def link_up(self, ns: str | None, ifname: str, **kw: Any) -> None:
        self.ipr(ns).link("set", index=self.index(ns, ifname), state="up", **kw)
        self._expect(Expected("up", ns, ifname))

    def _expect(self, item: Expected) -> None:
        """Record what the build configured, so :meth:`health` can check it and :meth:`repair`
        restore it (a link that went down and up loses its routes, neighbours and IPv6 addresses)."""
        self.state.expected.append(item)

    def mac(self, ns: str | None, ifname: str) -> str:
        """The interface's MAC, read back from the kernel (never assumed)."""
        link = self.ipr(ns).get_links(self.index(ns, ifname))[0]
        return link.get_attr("IFLA_ADDRESS")

    def add_addr(self, ns: str | None, ifname: str, cidr: str) -> None:
        addr, plen = cidr.split("/")
        kw: dict[str, Any] = {}
        if ":" in addr:
            kw["flags"] = 0x02  # IFA_F_NODAD
        self.ipr(ns).addr("add", index=self.index(ns, ifname), address=addr, prefixlen=int(plen), **kw)
        self._expect(Expected("addr", ns, ifname, cidr=cidr))

    def add_neigh(self, ns: str, ifname: str, ip: str, mac: str) -> None:
        self.ipr(ns).neigh("add", dst=ip, lladdr=mac, ifindex=self.index(ns, ifname), state=0x80)  # PERMANENT
        self._expect(Expected("neigh", ns, ifname, ip=ip, mac=mac))

    def add_route(self, ns: str, dst: str, gateway: str | None, metric: int | None = None,
                  ifname: str | None = None) -> None:
        """A route to ``dst`` via ``gateway``, or straight out of ``ifname`` (no gateway); kept
        (``health``, ``repair``) like every part of the build."""
        item = Expected("route", ns, ifname, dst=dst, gateway=gateway, metric=metric)
        _restore(self.ipr(ns), item, {ifname: self.index(ns, ifname)} if ifname is not None else {}, "add")
        self._expect(item)

    def del_broadcast(self, ns: str, ifname: str, ip: str) -> None:
        """Make ``ip``, the broadcast address of a subnet on ``ifname``, a destination like any other
        (the kernel's broadcast route goes; it is kept gone after a link flap)."""
        del_broadcast(self.ipr(ns), self.index(ns, ifname), ip)
        self._expect(Expected("no_broadcast", ns, ifname, ip=ip))

    def send_learning_frames(self) -> None:
        """Send one frame from every tester port (source = its MAC) so an L2 DUT learns where it is."""
        for p in self.ports:
            if p.netns is None:
                continue
            frame = (bytes.fromhex((p.peer_mac or "ff:ff:ff:ff:ff:ff").replace(":", ""))
                     + bytes.fromhex(p.mac.replace(":", "")) + b"\x88\xb5" + b"netrig-learn".ljust(46, b"\0"))

            def body(ifname: str = p.ifname, frame: bytes = frame) -> None:
                with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as s:
                    s.bind((ifname, 0))
                    s.send(frame)

            run_in_netns(p.netns, body)

    # ---------------------------------------------------------------- inspection
    @property
    def ports(self) -> list[TesterPort]:
        return list(self.state.ports)

    def port(self, name: str) -> TesterPort:
        """The tester port called ``name``; ``"tx"``/``"rx"`` also mean the first/second port where no
        port has that name (fourport: p0/p1), so a two-port config works on every topology."""
        ports = self.ports
        for p in ports:
            if p.name == name:
                return p
        alias = {"tx": 0, "rx": 1}.get(name)
        if alias is not None and len(ports) == 1 and self.state.one_port:
            return ports[0]  # one-port loopback: frames come back on the port they left by
        if alias is not None and len(ports) > alias and not any(p.name in ("tx", "rx") for p in ports):
            return ports[alias]
        raise ConfigError("port", f"{name!r}: no such tester port in {self.topology}; "
                                  f"ports are {', '.join(p.name for p in self.ports)}")

    @property
    def namespaces(self) -> list[str]:
        return list(self.state.namespaces)

    @property
    def dut_netns(self) -> str | None:
        return self.state.dut_netns

    @property
    def placement(self) -> Placement | None:
        return self.state.placement

    def dut_cpus(self) -> tuple[int, ...]:
        """The CPUs the DUT works on here: its placement's (the wire's rings, RPS, NAPI threads)
        and those its own pinned threads hold (``netrig forward``, testpmd, a capture process)."""
        placed = self.placement.cpus if self.placement is not None else None
        return tuple(sorted(set(self.state.dut_threads_cpus) | set(placed or ())))

    def tester_cpus(self) -> tuple[int, ...]:
        """The CPUs the tester's workers should use: every CPU but the DUT's (:meth:`dut_cpus`);
        empty when the DUT has none, or all of them (then the engine's default split applies, and
        the two share — a one-CPU machine; the placement record says so)."""
        held = set(self.dut_cpus())
        free = tuple(c for c in MACHINE_CPUS if c not in held)
        return free if held and free else ()

    @property
    def dut_can_hold_sender(self) -> bool:
        """Whether this DUT can slow the tester's sender instead of dropping: a Linux DUT placed
        with the kernel's own knobs (``rps``, ``threaded-napi``) or not at all (``inline``), or a
        real DUT on real NICs (Ethernet PAUSE). Behind the wire it cannot: a sender that fell short
        is the tester's."""
        if self.topology == "external":
            return True
        return self.placement is not None and self.placement.mode in HOLDS_SENDER

    def wire_counts(self) -> dict[str, _native.WireCounts]:
        """The wire's counters per DUT interface (``dut_placement`` wire; empty otherwise)."""
        pl = self.placement
        if pl is None or pl.mode != "wire":
            return {}
        out = {}
        for ifname in pl.interfaces:
            c = _native.wire_counts(ifname, pl.netns)
            if c is not None:
                out[ifname] = c
        return out

    @property
    def expected_rx_src_ip(self) -> str | None:
        """IPv4 source address the receiving tester port sees (translated for ``nat``)."""
        return self.expected_rx_src(4)

    @property
    def expected_rx_src_ipv6(self) -> str | None:
        return self.expected_rx_src(6)

    @property
    def translates_source(self) -> bool:
        """The DUT rewrites the source address (a NAT): the receiver sees another one than was sent."""
        return bool(self.state.expected_rx_src)

    def expected_rx_src(self, family: int) -> str | None:
        """The source address of IP version ``family`` the receiving port sees: the NAT's where the
        DUT translates, else the first port's."""
        nat = (self.state.expected_rx_src or {}).get(str(family))
        ps = self.ports
        return nat or ((ps[0].ipv4 if family == 4 else ps[0].ipv6) if ps else None)

    def stream_defaults(self, tx: str = "tx", rx: str = "rx", family: int = 4) -> dict[str, Any]:
        """``src_mac, dst_mac, src_ip, dst_ip`` for a stream from port ``tx`` to port ``rx``.

        Pass to ``netrig.Stream(**defaults, frame_size=..., rate_pps=...)``.
        """
        if family not in (4, 6):
            raise ConfigError("family", f"{family!r}: must be 4 or 6")
        t, r = self.port(tx), self.port(rx)
        if t.peer_mac is None:
            raise TestbedError(f"port {tx}: the MAC to send to is unknown for an external DUT; set dst_mac")
        src_ip = t.ipv4 if family == 4 else t.ipv6
        dst_ip = r.ipv4 if family == 4 else r.ipv6
        return {"src_mac": t.mac, "dst_mac": t.peer_mac, "src_ip": src_ip, "dst_ip": dst_ip}

    def monitor_targets(self) -> dict[str | None, list[str]]:
        """``{netns: [ifname, ...]}`` of every test-bed interface, for ``netrig.monitor.Monitor``."""
        out: dict[str | None, list[str]] = {}
        for i in self.state.interfaces:
            out.setdefault(i.netns, []).append(i.ifname)
        return out

    def command_env(self) -> dict[str, str]:
        """Environment variables naming this test bed's parts, for user commands (the reset
        command): ``NETRIG_TESTBED_ID``, ``NETRIG_TESTBED_TOPOLOGY``, ``NETRIG_DUT_NETNS``,
        ``NETRIG_DUT_IFACES`` (comma list), and per tester port ``NETRIG_<PORT>_NETNS`` /
        ``NETRIG_<PORT>_IFNAME`` (``NETRIG_TX_NETNS`` …), and the commands the test bed offers
        (``NETRIG_BGP_WITHDRAW`` …, ``TestbedState.commands``). Absent parts are left out."""
        env = {"NETRIG_TESTBED_ID": self.id, "NETRIG_TESTBED_TOPOLOGY": self.topology}
        if self.dut_netns:
            env["NETRIG_DUT_NETNS"] = self.dut_netns
            env["NETRIG_DUT_IFACES"] = ",".join(i.ifname for i in self.state.interfaces if i.netns == self.dut_netns)
        for p in self.ports:
            key = p.name.upper()
            if p.netns:
                env[f"NETRIG_{key}_NETNS"] = p.netns
            env[f"NETRIG_{key}_IFNAME"] = p.ifname
        env.update({f"NETRIG_{name}": line for name, line in self.state.commands.items()})
        return env

    def health(self) -> list[str]:
        """What is wrong with the test bed as built, in words (empty: healthy): namespaces gone,
        links down, addresses, permanent neighbours or routes missing (a DUT link that went down
        and up loses its routes and neighbours)."""
        return self._check(repair=False)[0]

    def repair(self) -> list[str]:
        """Restore what a link flap removed (addresses, neighbours, routes) on links that are up;
        returns what was restored. Raises ``TestbedError`` when something cannot be restored (a
        namespace gone, a link still down): the test bed is broken and trials would lose everything."""
        deadline = time.monotonic() + REPAIR_SETTLE_S
        restored: list[str] = []
        while True:
            problems, done, settling = self._check(repair=True)
            restored += done
            if not settling or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # a link just set up reports carrier through linkwatch, up to ~1 s later
        if problems:
            raise TestbedError(f"testbed {self.id} is broken: {'; '.join(problems)} "
                               f"(restore it, or `netrig testbed down {self.id}` and build a new one)")
        return restored

    def dead_processes(self) -> list[str]:
        """The test bed's DUT processes that are no longer running, in words (empty: all alive)."""
        return dead_processes(self.state)

    def _check(self, repair: bool) -> tuple[list[str], list[str], list[str]]:
        problems: list[str] = []
        restored: list[str] = []
        settling: list[str] = []
        expected = self.state.expected
        spaces = list(dict.fromkeys(i.netns for i in expected))
        missing = [n for n in self.namespaces if not _ns_exists(n)]
        if missing:
            return [f"network namespace {', '.join(missing)} is gone"], [], []
        dead = dead_processes(self.state)
        problems += dead
        stuck = bool(dead)
        try:
            for ns in spaces:
                p, r, w, down_by_hand = _check_ns(functools.partial(self.ipr, ns), ns,
                                                  [i for i in expected if i.netns == ns], repair)
                problems += p
                restored += r
                settling += w
                stuck |= down_by_hand
        except PermissionError:
            raise CapabilityError("checking a test bed needs root or CAP_NET_ADMIN/CAP_SYS_ADMIN "
                                  "(it enters the test bed's namespaces)") from None
        except (OSError, TestbedError) as e:
            problems.append(f"cannot inspect: {getattr(e, 'strerror', None) or e}")
        except Exception as e:  # pyroute2's netlink errors
            problems.append(f"cannot inspect: {e}")
        finally:
            self._close_iprs()
        # A link gone or set down, or a dead DUT process, does not come back by waiting: neither does
        # the carrier of a link whose peer is down, so nothing is left settling.
        return problems, restored, [] if stuck else settling

    def status(self) -> dict[str, Any]:
        s = self.state
        health: list[str] | None = []
        if s.status == "up":
            try:
                health = self.health()
            except CapabilityError:
                health = None  # not checked: needs root
        return {"id": self.id, "topology": self.topology,
                "status": "broken" if health else s.status, "problems": health,
                "owner_pid": s.owner_pid, "owner_alive": st.owner_alive(s),
                "detached": s.detached, "namespaces": self.namespaces,
                "namespaces_present": [n for n in self.namespaces if _ns_exists(n)],
                "ports": [p.to_dict() for p in self.ports]}

    def describe(self) -> dict[str, Any]:
        """JSON-able description of the whole test bed, read live from the kernel where possible."""
        s = self.state
        namespaces: dict[str, Any] = {}
        spaces: list[str | None] = [*self.namespaces] or [None]
        for ns in spaces:
            if ns is not None and not _ns_exists(ns):
                namespaces[ns] = {"present": False}
            else:
                namespaces[ns or "(host)"] = _describe_ns(ns, s.sysctls.get(ns or "", {}), s.nft.get(ns or ""))
        d: dict[str, Any] = {
            "id": self.id, "topology": self.topology, "description": self._topo.description,
            "options": self.options.to_dict(), "ports": [p.to_dict() for p in self.ports],
            "topology_options": list(topology_options(self.topology)),
            "dut_netns": self.dut_netns, "placement": self.placement.to_dict() if self.placement else None,
            "global_sysctls": {k: asdict(v) for k, v in s.global_sysctls.items()},
            "expected_rx_src": s.expected_rx_src, "flowtable": asdict(s.flowtable) if s.flowtable else None,
            "build_s": s.build_s, "notes": list(s.notes), "namespaces": namespaces,
        }
        return d

    # ---------------------------------------------------------------- signals
    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def on_term(signum: int, frame: Any) -> None:
            raise Terminated(signum)  # like Ctrl-C: the run keeps what finished; teardown follows

        self._old_handlers = {signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
                              signal.SIGTERM: signal.signal(signal.SIGTERM, on_term)}

    def _defer_signals(self) -> None:
        if not self._old_handlers or threading.current_thread() is not threading.main_thread():
            return

        def remember(signum: int, frame: Any) -> None:
            self._pending_signal = signum

        signal.signal(signal.SIGINT, remember)
        signal.signal(signal.SIGTERM, remember)

    def _restore_signal_handlers(self) -> None:
        if not self._old_handlers:
            return
        for sig, h in self._old_handlers.items():
            signal.signal(sig, h if h is not None else signal.SIG_DFL)
        self._old_handlers = {}
        pending, self._pending_signal = self._pending_signal, None
        if pending is not None:  # a signal that arrived during teardown: deliver it now
            os.kill(os.getpid(), pending)

    def __repr__(self) -> str:
        return f"Testbed({self.topology!r}, id={self.id!r}, built={self._built})"


#: How long :meth:`Testbed.repair` waits for links that were just set up to report carrier.
REPAIR_SETTLE_S = 3.0
_OPER_OK = ("UP", "UNKNOWN")


def dead_processes(state: TestbedState) -> list[str]:
    """The test bed's DUT processes (a forwarder, testpmd, a capture) that are no longer running,
    in words: such a test bed is broken — its DUT would drop everything, and a trial would report
    that as the DUT's 100 % loss. A dead process cannot be repaired: rebuild the test bed."""
    return [f"its DUT process {p.role} (pid {p.pid}) is not running any more (log {p.log}): rebuild the test "
            "bed (netrig testbed down, then up)" for p in state.processes if not st.pid_alive(p.pid, p.start_time)]


def _links_down(links: dict[str, Link], expected: list[Expected], where: str) -> tuple[list[str], list[str], set[str]]:
    """(problems, links set up without a carrier yet, links gone, down or without carrier) of the
    links the build set up."""
    problems: list[str] = []
    settling: list[str] = []
    down: set[str] = set()
    for item in expected:
        if item.kind != "up" or item.ifname is None:
            continue
        lk = links.get(item.ifname)
        if lk is None:
            problems.append(f"link {item.ifname}{where} is gone")
        elif not lk.up:
            problems.append(f"link {item.ifname}{where} is down")
        elif not lk.carrier or lk.operstate not in _OPER_OK:
            state = str(lk.operstate).lower() if lk.operstate not in _OPER_OK else "no carrier"
            problems.append(f"link {item.ifname}{where} has no carrier ({state}: is its peer down?)")
            settling.append(item.ifname)
        else:
            continue
        down.add(item.ifname)
    return problems, settling, down


def _check_ns(ipr: Callable[[], IPRoute], ns: str | None, expected: list[Expected],
              repair: bool) -> tuple[list[str], list[str], list[str], bool]:
    """Compare namespace ``ns`` with what the build configured there; with ``repair``, re-add what a
    link flap removed on links that are up (through ``ipr()``: pyroute2 loads only then). Returns
    (problems left, things restored, links that are set up but have no carrier yet, whether a link
    is gone or set down)."""
    where = f" (netns {ns})" if ns else ""
    links = read_links(ns)
    problems, settling, down = _links_down(links, expected, where)
    restored: list[str] = []
    index = {name: lk.index for name, lk in links.items()}
    addrs = {(a.index, a.address, a.prefixlen) for a in read_addrs(ns)}
    neighs = {(n.index, n.ip, n.mac) for n in read_permanent_neighbours(ns)}
    routes = {(r.dst, r.gateway) for r in read_routes(ns)}
    # addresses first: a route's gateway needs its connected route back; broadcast routes last: an
    # address put back brings its broadcast route with it
    for kind in ("addr", "neigh", "route", "no_broadcast"):
        bcasts = read_broadcasts(ns) if kind == "no_broadcast" else set()
        for item in expected:
            if item.kind != kind or item.ifname in down:
                continue
            ok, what = _present(item, index.get(item.ifname or ""), addrs, neighs, routes, bcasts)
            if ok:
                continue
            if not repair or (kind == "route" and down):  # a route may lead over a link that is down
                problems.append(f"{what}{where} is {'back' if kind == 'no_broadcast' else 'missing'}")
                continue
            try:
                _restore(ipr(), item, index)
                restored.append(what + where + (" deleted again" if kind == "no_broadcast" else ""))
            except Exception as e:
                problems.append(f"{what}{where} is missing and cannot be restored: {e}")
    return problems, restored, settling, len(down) > len(settling)


def _present(item: Expected, ifindex: int | None, addrs: set, neighs: set, routes: set,
             bcasts: set) -> tuple[bool, str]:
    """Whether the address, neighbour or route ``item`` is configured (a deleted broadcast route
    absent), and what it is in words."""
    if item.kind == "no_broadcast":
        return (ifindex, item.ip) not in bcasts, f"broadcast route {item.ip} on {item.ifname}"
    if item.kind == "addr":
        addr, plen = str(item.cidr).split("/")
        return (ifindex, addr, int(plen)) in addrs, f"address {item.cidr} on {item.ifname}"
    if item.kind == "neigh":
        return (ifindex, item.ip, str(item.mac).lower()) in neighs, f"neighbour {item.ip} on {item.ifname}"
    if item.gateway is None:
        return (item.dst, None) in routes, f"route {item.dst} dev {item.ifname}"
    return (item.dst, item.gateway) in routes, f"route {item.dst} via {item.gateway}"


def _restore(ipr: IPRoute, item: Expected, index: dict[str, int], how: str = "replace") -> None:
    if item.kind == "addr":
        addr, plen = str(item.cidr).split("/")
        kw: dict[str, Any] = {"flags": 0x02} if ":" in addr else {}
        ipr.addr("replace", index=index[str(item.ifname)], address=addr, prefixlen=int(plen), **kw)
    elif item.kind == "neigh":
        ipr.neigh("replace", dst=item.ip, lladdr=item.mac, ifindex=index[str(item.ifname)], state=NUD_PERMANENT)
    elif item.kind == "no_broadcast":
        del_broadcast(ipr, index[str(item.ifname)], str(item.ip))
    else:
        where = {"gateway": item.gateway} if item.gateway is not None else {"oif": index[str(item.ifname)]}
        ipr.route(how, dst=item.dst, **where, **({"priority": item.metric} if item.metric is not None else {}))


def _describe_ns(ns: str | None, sysctls: dict[str, str], nft_text: str | None) -> dict[str, Any]:
    links = read_links(ns)
    addrs = read_addrs(ns)
    names = {lk.index: lk.ifname for lk in links.values()}
    interfaces = [{"ifname": lk.ifname, "index": lk.index, "kind": lk.kind, "mac": lk.mac, "mtu": lk.mtu,
                   "operstate": lk.operstate, "master": names.get(lk.master) if lk.master else None,
                   "addresses": [f"{a.address}/{a.prefixlen}" for a in addrs if a.index == lk.index]}
                  for lk in links.values()]
    routes = [{"family": r.family, "dst": "default" if r.default else r.dst, "gateway": r.gateway,
               "dev": names.get(r.oif) if r.oif is not None else None} for r in read_routes(ns)]
    neigh = [{"ip": n.ip, "mac": n.mac, "dev": names.get(n.index)}
             for n in read_permanent_neighbours(ns)]  # permanent entries: the ones netrig set
    d: dict[str, Any] = {"present": True, "interfaces": interfaces, "routes": routes, "neighbours": neigh}

    def read_sysctls() -> dict[str, str]:
        live = {}
        for k in sysctls:
            try:
                live[k] = read_sysctl(k)
            except OSError as e:
                live[k] = f"unavailable: {e.strerror}"
        return live

    d["sysctls"] = run_in_netns(ns, read_sysctls)
    if nft_text is not None:
        lines = nft_text.splitlines()
        if len(lines) > 400:
            import hashlib

            d["nft_ruleset"] = "\n".join(lines[:200] + [f"... {len(lines) - 400} lines omitted ..."]
                                         + lines[-200:])
            d["nft_ruleset_lines"] = len(lines)
            d["nft_ruleset_sha256"] = hashlib.sha256(nft_text.encode()).hexdigest()
        else:
            d["nft_ruleset"] = nft_text
    return d


def _remove_host_parts(state: TestbedState) -> list[str]:
    """The addresses and nftables tables the build added in the host's namespace, removed (one
    already gone is fine); what could not be."""
    left = []
    for a in state.host_addrs:
        r = subprocess.run(["ip", "addr", "del", a.cidr, "dev", a.ifname], capture_output=True, text=True, check=False)
        if r.returncode != 0 and "Cannot assign" not in r.stderr and "Cannot find device" not in r.stderr:
            left.append(f"address {a.cidr} on {a.ifname} ({r.stderr.strip()})")
    for table in state.host_nft:
        r = subprocess.run(["nft", "delete", "table", "inet", table], capture_output=True, text=True, check=False)
        if r.returncode != 0 and "No such file" not in r.stderr:
            left.append(f"nftables table inet {table} ({r.stderr.strip().splitlines()[0] if r.stderr.strip() else ''})")
    return left


def teardown_state(state: TestbedState) -> list[str]:
    """Remove what ``state`` records; return a list of what could not be removed (empty = clean)."""
    leftovers: list[str] = stop_processes(state)  # DUT processes first: they hold the namespaces' ports
    for proc in state.processes:
        for f in (proc.log, proc.stats):  # a capture's stats file too
            if f and not leftovers:
                with contextlib.suppress(OSError):
                    os.unlink(f)
    if state.knobs is not None and state.knobs.undo:
        # tuning knobs a killed run left (on the host or real NICs they outlive the namespaces)
        problems = restore_entries(state.knobs.undo)
        leftovers += [f"knob {p}" for p in problems]
        if not problems:
            state.knobs = None
    for ns in reversed(state.namespaces):
        if not _ns_exists(ns):
            continue
        kill_in_netns(ns)  # a tool a killed build left running there (an nft loading a big rule set)
        try:
            remove_netns(ns)
        except Exception as e:
            leftovers.append(f"netns {ns} ({e})")
    leftovers += _remove_host_parts(state)
    for name, change in state.global_sysctls.items():
        try:
            if read_sysctl(name) == change.new:  # only if nobody changed it since
                write_sysctl(name, change.old)
        except OSError as e:
            leftovers.append(f"sysctl {name} not restored to {change.old} ({e.strerror})")
    if not leftovers:
        st.remove_state(state.id)
    else:
        state.status = "teardown-failed"
        try:
            st.write_state(state)
        except OSError:
            pass
    return leftovers


def iter_states() -> Iterator[TestbedState]:
    yield from st.all_states()
