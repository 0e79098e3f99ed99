#!/usr/bin/env python3
"""Routing daemons as route injectors, measured (issue 44): GoBGP (gobgpd), BIRD 2 (bird) and FRR (bgpd).

Test bed: two namespaces of its own, ``nrrd-inj`` and ``nrrd-dut``, joined by one veth pair
(198.18.0.1/30 and 198.18.0.2/30, 2001:2:0:ffff::1/126 and ::2/126). In ``nrrd-inj`` the candidate
daemon (AS 64512) holds N host routes and advertises them over one eBGP session to BIRD 2 in
``nrrd-dut`` (AS 64513), the receiver. The receiver installs nothing into the kernel (its kernel
protocol exports none), so what is timed is the daemons and the BGP path, not the kernel FIB.

Routes: IPv4 /32s from 198.18.1.0 (at most 130 816 fit in 198.18.0.0/15), IPv6 /128s from
2001:2:0:1:: (inside 2001:2::/48); ``--family auto`` takes IPv4 up to 130 816 routes, IPv6 above.

Per candidate, per N, per repetition, with fresh daemons each time:

- load: the injector is told to hold N routes (gobgpd: the gRPC AddPathStream API from a small Go
  program, bench/routing_daemons/inject/, 1000 paths per message; bird: a generated ``protocol
  static`` of N routes and ``birdc configure``; FRR: ``vtysh -f`` of N ``network`` lines). Timed: the
  injector holding them (the API answer; bird's static protocol counting N), and the receiver
  holding N (its BGP channel's imported count, polled every 10 ms over its control socket);
- memory: the injector's and the receiver's VmRSS (and VmHWM) before, after the load, after the
  withdraw (/proc/<pid>/status); bytes per route = (RSS after load - RSS before) / N;
- withdraw: the injector drops the N routes (gobgpd: AddPathStream with withdraw paths, per prefix;
  bird: the empty static protocol, ``birdc configure``; FRR: ``vtysh -f`` of ``no network`` lines),
  timed until the receiver holds 0;
- CPU-seconds of the injector and the receiver over each phase (/proc/<pid>/stat).

A phase that takes longer than --timeout is stopped; the trial records how many routes the receiver
reached and the rate, and larger N are skipped for that candidate.

Result: bench/results/routing-daemons-<UTC date>.json (every trial, rewritten after each one, and the
medians), and a table on stdout. Needs root, iproute2, gobgpd, bird2, frr and Go (for the injector
program, built into the run's temporary directory). Everything it creates (daemons, namespaces,
temporary directory) is removed on success, failure, Ctrl-C and SIGTERM.

    python3 bench/routing_daemons.py --routes 1000,100000,1000000 --reps 3
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
NS_INJ, NS_DUT = "nrrd-inj", "nrrd-dut"
IF_INJ, IF_DUT = "nrrd-i", "nrrd-d"
AS_INJ, AS_DUT = 64512, 64513
LINK = {"ipv4": ("198.18.0.1", "198.18.0.2", 30), "ipv6": ("2001:2:0:ffff::1", "2001:2:0:ffff::2", 126)}
ROUTE_BASE = {"ipv4": "198.18.1.0", "ipv6": "2001:2:0:1::"}
MAX_IPV4_ROUTES = (1 << 17) - 256  # 198.18.1.0 .. 198.19.255.255
POLL_S = 0.01
CANDIDATES = ("gobgp", "bird", "frr")
#: The command each candidate needs, and the package that brings it.
NEEDS = {"gobgp": [("gobgpd", "gobgpd"), ("gobgp", "gobgpd"), ("go", "golang-go")],
         "bird": [("bird", "bird2"), ("birdc", "bird2")],
         "frr": [("/usr/lib/frr/bgpd", "frr"), ("vtysh", "frr")]}
CLK_TCK = os.sysconf("SC_CLK_TCK")


class Stop(Exception):
    """SIGTERM or SIGHUP: unwind through the finally blocks like Ctrl-C."""


# ---------------------------------------------------------------------------------------------
# Routes, commands, processes


def route(family: str, i: int) -> str:
    """Route i as text: the i-th host prefix after the family's base."""
    if family == "ipv4":
        a = (198 << 24 | 18 << 16 | 1 << 8) + i
        return f"{a >> 24}.{a >> 16 & 255}.{a >> 8 & 255}.{a & 255}/32"
    return f"2001:2:0:1::{i >> 16:x}:{i & 0xffff:x}/128"


def run(*argv: str, ns: str | None = None, check: bool = True) -> str:
    cmd = ["ip", "netns", "exec", ns, *argv] if ns else list(argv)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {(p.stderr or p.stdout).strip()[:300]}")
    return p.stdout


def rss_kib(pid: int) -> dict:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0])
    return {"rss_kib": out["VmRSS"], "hwm_kib": out["VmHWM"]}


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


class Procs:
    """Every process this run started, stopped by pid in reverse order."""

    def __init__(self) -> None:
        self.live: list[subprocess.Popen] = []

    def start(self, argv: list[str], ns: str, log: Path) -> subprocess.Popen:
        with open(log, "ab") as f:
            # A session of its own: a Ctrl-C in the terminal reaches this script only, which stops them.
            p = subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=f, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        self.live.append(p)
        return p

    def stop(self, p: subprocess.Popen) -> None:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        if p in self.live:
            self.live.remove(p)

    def stop_all(self) -> None:
        for p in reversed(list(self.live)):
            self.stop(p)


class BirdCtl:
    """BIRD's control socket (what birdc speaks): one command, its reply lines."""

    def __init__(self, path: Path, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(str(path))
                break
            except OSError as e:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{path}: BIRD's control socket did not open in {timeout_s} s") from e
                time.sleep(0.05)
        self.buf = b""
        self._reply()  # the greeting

    def _reply(self) -> list[str]:
        lines = []
        while True:
            while b"\n" not in self.buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise RuntimeError("BIRD closed its control socket")
                self.buf += chunk
            line, self.buf = self.buf.split(b"\n", 1)
            text = line.decode(errors="replace")
            lines.append(text)
            if len(text) >= 5 and text[:4].isdigit() and text[4] == " ":
                return lines

    def cmd(self, text: str) -> list[str]:
        self.sock.sendall(text.encode() + b"\n")
        return self._reply()

    def imported(self, proto: str) -> int:
        """The routes a protocol's channel holds (0 when it is down)."""
        for line in self.cmd(f"show protocols all {proto}"):
            m = re.search(r"Routes:\s+(\d+) imported", line)
            if m:
                return int(m.group(1))
        return 0

    def established(self, proto: str) -> bool:
        return any("Established" in line for line in self.cmd(f"show protocols {proto}"))

    def since(self, proto: str) -> str:
        """The protocol's state and the time it entered it: a change means the session flapped."""
        for line in self.cmd(f"show protocols {proto}"):
            parts = line[5:].split() if line[:4].isdigit() else line.split()
            if parts and parts[0] == proto:
                return " ".join(parts[3:])
        return ""

    def close(self) -> None:
        self.sock.close()


# ---------------------------------------------------------------------------------------------
# The test bed


def netns_exists(name: str) -> bool:
    return any(line.split()[0] == name for line in run("ip", "netns", "list").splitlines() if line.strip())


def delete_netns(name: str) -> None:
    if not netns_exists(name):
        return
    for pid in run("ip", "netns", "pids", name, check=False).split():
        try:
            os.kill(int(pid), signal.SIGKILL)  # only processes inside our own namespace
        except ProcessLookupError:
            pass
    run("ip", "netns", "del", name, check=False)


def build_testbed() -> None:
    for ns in (NS_INJ, NS_DUT):
        if netns_exists(ns):
            print(f"routing_daemons: removing {ns} left by an earlier run", file=sys.stderr)
            delete_netns(ns)
        run("ip", "netns", "add", ns)
    run("ip", "link", "add", IF_INJ, "netns", NS_INJ, "type", "veth", "peer", "name", IF_DUT, "netns", NS_DUT)
    for ns, ifname, idx in ((NS_INJ, IF_INJ, 0), (NS_DUT, IF_DUT, 1)):
        run("ip", "-n", ns, "link", "set", "lo", "up")
        run("ip", "-n", ns, "addr", "add", f"{LINK['ipv4'][idx]}/{LINK['ipv4'][2]}", "dev", ifname)
        run("ip", "-n", ns, "addr", "add", f"{LINK['ipv6'][idx]}/{LINK['ipv6'][2]}", "dev", ifname, "nodad")
        run("ip", "-n", ns, "link", "set", ifname, "up")


def teardown_testbed() -> None:
    for ns in (NS_INJ, NS_DUT):
        delete_netns(ns)


# ---------------------------------------------------------------------------------------------
# The receiver: BIRD 2 in nrrd-dut


def start_receiver(procs: Procs, d: Path, family: str) -> tuple[subprocess.Popen, BirdCtl]:
    inj, dut, _ = LINK[family]
    conf = d / "recv.conf"
    conf.write_text(f"""router id {LINK['ipv4'][1]};
log stderr {{ info, warning, error, remote, auth }};
protocol device {{ scan time 60; }}
protocol kernel {{ {family} {{ import none; export none; }}; }}
protocol bgp inj {{
  local {dut} as {AS_DUT}; neighbor {inj} as {AS_INJ};
  connect delay time 1; connect retry time 2; error wait time 1, 5;
  {family} {{ import all; export none; }};
}}
""")
    ctl = d / "recv.ctl"
    p = procs.start(["bird", "-f", "-c", str(conf), "-s", str(ctl)], NS_DUT, d / "recv.log")
    return p, BirdCtl(ctl)


# ---------------------------------------------------------------------------------------------
# Injectors: one class per candidate, one interface


@dataclass
class Injector:
    procs: Procs
    d: Path
    family: str
    n: int
    opts: argparse.Namespace
    proc: subprocess.Popen | None = None
    notes: dict = field(default_factory=dict)

    name = "?"
    load_how = "?"
    withdraw_how = "?"

    def start(self) -> None: ...

    def prepare_load(self) -> None:
        """Work done before the clock starts (generated files)."""

    def load(self) -> subprocess.Popen | None:
        """Start loading N routes; a process to wait for, or None when done already."""

    def held(self) -> int | None:
        """The routes the injector holds, when it can say more than its command's exit."""
        return None

    def prepare_withdraw(self) -> None: ...

    def withdraw(self) -> subprocess.Popen | None: ...

    def api_seconds(self) -> float | None:
        return None


class GoBgp(Injector):
    name = "gobgp"

    @property
    def load_how(self) -> str:
        return {"stream": f"gRPC AddPathStream, {self.opts.gobgp_batch} paths/message",
                "unary": "gRPC AddPath per route, 8 in flight",
                "cli": "`gobgp global rib add` per route"}[self.opts.gobgp_load]

    @property
    def withdraw_how(self) -> str:
        return {"stream": "gRPC AddPathStream of withdraw paths, per prefix",
                "delete-each": "gRPC DeletePath per route, 8 in flight",
                "delete-all": "one gRPC DeletePath for the family (all local paths)"}[self.opts.gobgp_withdraw]

    def start(self) -> None:
        inj, dut, _ = LINK[self.family]
        conf = self.d / "gobgpd.toml"
        conf.write_text(f"""[global.config]
  as = {AS_INJ}
  router-id = "{LINK['ipv4'][0]}"
  local-address-list = ["{inj}"]
[[neighbors]]
  [neighbors.config]
    neighbor-address = "{dut}"
    peer-as = {AS_DUT}
  [neighbors.transport.config]
    local-address = "{inj}"
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "{self.family}-unicast"
""")
        self.proc = self.procs.start(["gobgpd", "-f", str(conf), "-t", "toml", "--api-hosts", "127.0.0.1:50051",
                                      "--pprof-disable", "-l", "warn", "-p"], NS_INJ, self.d / "gobgpd.log")

    def _inject(self, op: str) -> subprocess.Popen:
        inj = LINK[self.family][0]
        argv = [str(self.opts.inject_bin), "-op", op, "-family", self.family, "-n", str(self.n),
                "-base", ROUTE_BASE[self.family], "-nexthop", inj, "-batch", str(self.opts.gobgp_batch)]
        self.last_out = self.d / f"inject-{op}.out"
        with open(self.last_out, "wb") as f:
            return subprocess.Popen(["ip", "netns", "exec", NS_INJ, *argv], stdout=f, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)

    def prepare_load(self) -> None:
        if self.opts.gobgp_load == "cli":
            lines = [f"gobgp global rib add -a {self.family} {route(self.family, i)}" for i in range(self.n)]
            (self.d / "cli-add.sh").write_text("\n".join(lines) + "\n")

    def load(self) -> subprocess.Popen:
        if self.opts.gobgp_load == "cli":
            return subprocess.Popen(["ip", "netns", "exec", NS_INJ, "sh", "-e", str(self.d / "cli-add.sh")],
                                    stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True)
        return self._inject({"stream": "add", "unary": "add-unary"}[self.opts.gobgp_load])

    def withdraw(self) -> subprocess.Popen:
        return self._inject({"stream": "withdraw"}.get(self.opts.gobgp_withdraw, self.opts.gobgp_withdraw))

    def api_seconds(self) -> float | None:
        """The seconds the Go program timed from its first request to the daemon's last answer."""
        try:
            return float(json.loads(self.last_out.read_text().strip().splitlines()[-1])["elapsed_s"])
        except (AttributeError, OSError, ValueError, KeyError, IndexError):
            return None


class Bird(Injector):
    name = "bird"
    load_how = "generated `protocol static` of N routes, `birdc configure`"

    @property
    def withdraw_how(self) -> str:
        return {"reload": "the static protocol emptied, `birdc configure` (config reload)",
                "disable": "`birdc disable` of the static protocol (all its routes)"}[self.opts.bird_withdraw]

    def start(self) -> None:
        inj, dut, _ = LINK[self.family]
        (self.d / "routes.conf").write_text("")
        conf = self.d / "inj.conf"
        conf.write_text(f"""router id {LINK['ipv4'][0]};
protocol device {{ scan time 60; }}
protocol static nets {{
  {self.family};
include "{self.d / 'routes.conf'}";
}}
protocol bgp dut {{
  local {inj} as {AS_INJ}; neighbor {dut} as {AS_DUT};
  connect delay time 1; connect retry time 2; error wait time 1, 5;
  {self.family} {{ import none; export all; }};
}}
""")
        self.ctl_path = self.d / "inj.ctl"
        self.proc = self.procs.start(["bird", "-f", "-c", str(conf), "-s", str(self.ctl_path)], NS_INJ,
                                     self.d / "inj.log")
        self.ctl = BirdCtl(self.ctl_path)

    def prepare_load(self) -> None:
        t = time.monotonic()
        with open(self.d / "routes.next", "w") as f:
            f.writelines(f"route {route(self.family, i)} blackhole;\n" for i in range(self.n))
        self.notes["config_write_s"] = round(time.monotonic() - t, 3)

    def _configure(self) -> subprocess.Popen:
        return subprocess.Popen(["birdc", "-s", str(self.ctl_path), "configure"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def load(self) -> subprocess.Popen:
        os.replace(self.d / "routes.next", self.d / "routes.conf")
        return self._configure()

    def held(self) -> int:
        return self.ctl.imported("nets")

    def prepare_withdraw(self) -> None:
        (self.d / "routes.next").write_text("")

    def withdraw(self) -> subprocess.Popen:
        if self.opts.bird_withdraw == "disable":
            return subprocess.Popen(["birdc", "-s", str(self.ctl_path), "disable", "nets"], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        os.replace(self.d / "routes.next", self.d / "routes.conf")
        return self._configure()


class Frr(Injector):
    name = "frr"
    load_how = "`vtysh -f` of N `network` lines (bgpd alone, -Z: no zebra)"
    withdraw_how = "`vtysh -f` of N `no network` lines, per prefix"

    def start(self) -> None:
        inj, dut, _ = LINK[self.family]
        conf = self.d / "bgpd.conf"
        conf.write_text(f"""frr defaults traditional
hostname nrrd-inj
log file {self.d / 'bgpd.frrlog'} warnings
!
router bgp {AS_INJ}
 bgp router-id {LINK['ipv4'][0]}
 no bgp ebgp-requires-policy
 no bgp network import-check
 no bgp default ipv4-unicast
 neighbor {dut} remote-as {AS_DUT}
 neighbor {dut} update-source {inj}
 address-family {self.family} unicast
  neighbor {dut} activate
 exit-address-family
!
""")
        self.vty = self.d / "vty"
        self.vty.mkdir()
        self.proc = self.procs.start(["/usr/lib/frr/bgpd", "-Z", "-S", "-f", str(conf), "-i", str(self.d / "bgpd.pid"),
                                      "--vty_socket", str(self.vty), "-A", "127.0.0.1", "-P", "0"],
                                     NS_INJ, self.d / "bgpd.log")

    def _write(self, name: str, neg: bool) -> None:
        with open(self.d / name, "w") as f:
            f.write(f"router bgp {AS_INJ}\n address-family {self.family} unicast\n")
            f.writelines(f"  {'no ' if neg else ''}network {route(self.family, i)}\n" for i in range(self.n))

    def _vtysh(self, name: str) -> subprocess.Popen:
        with open(self.d / f"{name}.out", "wb") as f:  # a file, not a pipe: N error lines must not block vtysh
            return subprocess.Popen(["ip", "netns", "exec", NS_INJ, "vtysh", "--vty_socket", str(self.vty), "-d",
                                     "bgpd", "-f", str(self.d / name)], stdout=f, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)

    def prepare_load(self) -> None:
        self._write("add.conf", False)

    def load(self) -> subprocess.Popen:
        return self._vtysh("add.conf")

    def prepare_withdraw(self) -> None:
        self._write("del.conf", True)

    def withdraw(self) -> subprocess.Popen:
        return self._vtysh("del.conf")

    def stop_cleanup(self) -> None:
        # bgpd keeps a crash-log directory per pid under /var/tmp/frr.
        if self.proc is not None:
            shutil.rmtree(f"/var/tmp/frr/bgpd.{self.proc.pid}", ignore_errors=True)


INJECTORS = {"gobgp": GoBgp, "bird": Bird, "frr": Frr}


# ---------------------------------------------------------------------------------------------
# One trial


def wait_phase(cmd: subprocess.Popen | None, inj: Injector, recv: BirdCtl, target: int, timeout_s: float,
               t0: float, pids: tuple[int, int]) -> dict:
    """Poll until the command has exited, the injector holds `target` (when it can say) and the
    receiver holds `target`, or until the timeout. Times are seconds since t0."""
    out = {"command_s": None, "injector_s": None, "receiver_s": None, "timed_out": False}
    cpu0 = [cpu_s(p) for p in pids]
    deadline = t0 + timeout_s
    reached = -1
    while True:
        now = time.monotonic()
        if out["command_s"] is None and (cmd is None or cmd.poll() is not None):
            out["command_s"] = now - t0
            if cmd is not None and cmd.returncode != 0:
                err = (cmd.stdout.read() if cmd.stdout else b"").decode(errors="replace").strip()
                what = " ".join(map(str, cmd.args[-4:]))
                raise RuntimeError(f"{inj.name}: {what}: exit {cmd.returncode} {err[:300]}")
        if out["injector_s"] is None and out["command_s"] is not None:
            held = inj.held()
            if held is None or held == target:
                out["injector_s"] = now - t0
        reached = recv.imported("inj")
        if reached == target and out["receiver_s"] is None:
            out["receiver_s"] = now - t0
        if out["receiver_s"] is not None and out["injector_s"] is not None:
            break
        if now > deadline:
            out["timed_out"] = True
            if cmd is not None and cmd.poll() is None:
                cmd.kill()
                cmd.wait()
            break
        time.sleep(POLL_S)
    out["receiver_reached"] = reached
    out["elapsed_s"] = time.monotonic() - t0
    out["cpu_s"] = {"injector": round(cpu_s(pids[0]) - cpu0[0], 3), "receiver": round(cpu_s(pids[1]) - cpu0[1], 3)}
    return out


def trial(cand: str, n: int, family: str, rep: int, opts: argparse.Namespace, procs: Procs, root: Path) -> dict:
    d = Path(tempfile.mkdtemp(prefix=f"{cand}-{n}-{rep}-", dir=root))
    rec = {"candidate": cand, "routes": n, "family": family, "rep": rep}
    recv_p, recv = start_receiver(procs, d, family)
    inj = INJECTORS[cand](procs, d, family, n, opts)
    try:
        t = time.monotonic()
        inj.start()
        rec["load_how"], rec["withdraw_how"] = inj.load_how, inj.withdraw_how
        while not recv.established("inj"):
            if time.monotonic() - t > 60:
                raise RuntimeError(f"{cand}: the BGP session did not come up in 60 s (logs in {d})")
            if inj.proc.poll() is not None:
                raise RuntimeError(f"{cand}: the daemon exited with {inj.proc.returncode} (logs in {d})")
            time.sleep(0.05)
        rec["session_up_s"] = round(time.monotonic() - t, 3)
        time.sleep(opts.settle)
        pids = (inj.proc.pid, recv_p.pid)
        since = recv.since("inj")
        mem = {"before": {"injector": rss_kib(pids[0]), "receiver": rss_kib(pids[1])}}

        inj.prepare_load()
        t0 = time.monotonic()
        load = wait_phase(inj.load(), inj, recv, n, opts.timeout, t0, pids)
        load["api_s"] = inj.api_seconds()
        time.sleep(opts.settle)
        mem["after_load"] = {"injector": rss_kib(pids[0]), "receiver": rss_kib(pids[1])}
        rec["load"] = load
        if load["timed_out"]:
            rec["withdraw"] = None
        else:
            inj.prepare_withdraw()
            t0 = time.monotonic()
            wd = wait_phase(inj.withdraw(), inj, recv, 0, opts.timeout, t0, pids)
            wd["api_s"] = inj.api_seconds()
            rec["withdraw"] = wd
            time.sleep(opts.settle)
            mem["after_withdraw"] = {"injector": rss_kib(pids[0]), "receiver": rss_kib(pids[1])}
        rec["memory_kib"] = mem
        rec["session_flapped"] = recv.since("inj") != since
        rec["notes"] = inj.notes
        derive(rec)
        return rec
    finally:
        recv.close()
        if inj.proc is not None:
            procs.stop(inj.proc)
        procs.stop(recv_p)
        if isinstance(inj, Frr):
            inj.stop_cleanup()
        if not opts.keep_logs:
            shutil.rmtree(d, ignore_errors=True)


def derive(rec: dict) -> None:
    """Secondary values: rates and bytes per route."""
    n, load, wd, mem = rec["routes"], rec["load"], rec["withdraw"], rec["memory_kib"]
    reached = load["receiver_reached"]
    end = load["receiver_s"] if load["receiver_s"] is not None else load["elapsed_s"]
    rec["load_routes_per_s"] = round(reached / end) if end else None
    rec["injector_routes_per_s"] = round(n / load["injector_s"]) if load["injector_s"] else None
    if wd is not None and wd["receiver_s"]:
        rec["withdraw_routes_per_s"] = round(n / wd["receiver_s"])
    else:
        rec["withdraw_routes_per_s"] = None
    for who in ("injector", "receiver"):
        held = reached if reached > 0 else None
        delta = mem["after_load"][who]["rss_kib"] - mem["before"][who]["rss_kib"]
        rec[f"{who}_bytes_per_route"] = round(delta * 1024 / held, 1) if held else None


# ---------------------------------------------------------------------------------------------
# The run


def medians(trials: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for t in trials:
        groups.setdefault((t["candidate"], t["routes"], t["family"], t["load_how"], t["withdraw_how"]), []).append(t)

    def med(rows: list[dict], get) -> float | None:
        vals = [v for v in (get(r) for r in rows) if v is not None]
        return round(statistics.median(vals), 3) if vals else None

    out = []
    for (cand, n, fam, how, _), rows in groups.items():
        out.append({
            "candidate": cand, "routes": n, "family": fam, "reps": len(rows), "load_how": how,
            "withdraw_how": rows[0]["withdraw_how"],
            "timed_out": any(r["load"]["timed_out"] for r in rows),
            "receiver_reached": med(rows, lambda r: r["load"]["receiver_reached"]),
            "injector_load_s": med(rows, lambda r: r["load"]["injector_s"]),
            "receiver_all_s": med(rows, lambda r: r["load"]["receiver_s"]),
            "load_routes_per_s": med(rows, lambda r: r["load_routes_per_s"]),
            "injector_bytes_per_route": med(rows, lambda r: r["injector_bytes_per_route"]),
            "receiver_bytes_per_route": med(rows, lambda r: r["receiver_bytes_per_route"]),
            "injector_rss_before_kib": med(rows, lambda r: r["memory_kib"]["before"]["injector"]["rss_kib"]),
            "injector_rss_loaded_kib": med(rows, lambda r: r["memory_kib"]["after_load"]["injector"]["rss_kib"]),
            "injector_hwm_loaded_kib": med(rows, lambda r: r["memory_kib"]["after_load"]["injector"]["hwm_kib"]),
            "injector_load_cpu_s": med(rows, lambda r: r["load"]["cpu_s"]["injector"]),
            "withdraw_s": med(rows, lambda r: r["withdraw"] and r["withdraw"]["receiver_s"]),
            "withdraw_routes_per_s": med(rows, lambda r: r["withdraw_routes_per_s"]),
            "injector_rss_withdrawn_kib": med(rows, lambda r: "after_withdraw" in r["memory_kib"]
                                              and r["memory_kib"]["after_withdraw"]["injector"]["rss_kib"] or None),
        })
    return out


def table(summary: list[dict]) -> str:
    head = (f"{'daemon':7} {'routes':>8} {'fam':4} {'inj load s':>10} {'recv all s':>10} {'routes/s':>9} "
            f"{'inj B/route':>11} {'inj RSS MiB':>11} {'withdraw s':>10} {'wd routes/s':>11}")
    rows = [head, "-" * len(head)]

    def f(v, fmt):
        return "-" if v is None else format(v, fmt)

    for s in summary:
        flag = " (timed out: reached {:.0f})".format(s["receiver_reached"]) if s["timed_out"] else ""
        rss_mib = s["injector_rss_loaded_kib"] / 1024 if s["injector_rss_loaded_kib"] else None
        rows.append(f"{s['candidate']:7} {s['routes']:>8} {s['family'][-2:]:4} {f(s['injector_load_s'], '10.3f')} "
                    f"{f(s['receiver_all_s'], '10.3f')} {f(s['load_routes_per_s'], '9.0f')} "
                    f"{f(s['injector_bytes_per_route'], '11.0f')} {f(rss_mib, '11.1f')} "
                    f"{f(s['withdraw_s'], '10.3f')} {f(s['withdraw_routes_per_s'], '11.0f')}{flag}")
    return "\n".join(rows)


def versions() -> dict:
    out = {}
    for pkg in ("gobgpd", "bird2", "frr", "iproute2"):
        p = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg], capture_output=True, text=True)
        out[pkg] = p.stdout.strip() or None
    p = subprocess.run(["go", "version"], capture_output=True, text=True) if shutil.which("go") else None
    out["go"] = p.stdout.strip() if p else None
    out["gobgp_api_module"] = "github.com/osrg/gobgp/v3 v3.10.0"
    return out


def host() -> dict:
    mem = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), None)
    return {"kernel": platform.release(), "cpus": os.cpu_count(), "cpu_model": model, "mem_kib": int(mem),
            "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3]}


def check_needs(cands: list[str]) -> None:
    if os.geteuid() != 0:
        sys.exit("routing_daemons: needs root (namespaces, veth): run it with sudo")
    for cmd, pkg in [("ip", "iproute2"), ("bird", "bird2")] + [x for c in cands for x in NEEDS[c]]:
        if not (os.access(cmd, os.X_OK) if cmd.startswith("/") else shutil.which(cmd)):
            sys.exit(f"routing_daemons: {cmd} is missing: apt-get install -y {pkg}")


def build_inject(root: Path) -> Path:
    out = root / "nrrd-inject"
    p = subprocess.run(["go", "build", "-o", str(out), "."], cwd=HERE / "routing_daemons" / "inject",
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"go build of bench/routing_daemons/inject failed: {p.stderr.strip()[:500]}")
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--routes", default="1000,100000,1000000", help="comma list of route counts (default "
                    "1000,100000,1000000)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per candidate and count (default 3)")
    ap.add_argument("--candidates", default=",".join(CANDIDATES),
                    help="comma list of gobgp, bird, frr (default all three)")
    ap.add_argument("--family", choices=("auto", "ipv4", "ipv6"), default="auto",
                    help=f"auto: IPv4 /32s up to {MAX_IPV4_ROUTES} routes, IPv6 /128s above")
    ap.add_argument("--gobgp-load", choices=("stream", "unary", "cli"), default="stream",
                    help="gobgpd load path: gRPC AddPathStream (default), AddPath per route, or the gobgp CLI "
                         "per route")
    ap.add_argument("--gobgp-batch", type=int, default=1000, help="paths per AddPathStream message (default 1000)")
    ap.add_argument("--gobgp-withdraw", choices=("stream", "delete-each", "delete-all"), default="stream",
                    help="gobgpd withdraw: AddPathStream of withdraw paths (default), DeletePath per route, or one "
                         "DeletePath of every local path of the family")
    ap.add_argument("--bird-withdraw", choices=("reload", "disable"), default="reload",
                    help="bird withdraw: the static protocol emptied and `birdc configure` (default), or `birdc "
                         "disable` of the static protocol")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per phase before giving up (default 300)")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds before each memory reading (default 1)")
    ap.add_argument("--out", help="JSON file (default bench/results/routing-daemons-<UTC date>.json)")
    ap.add_argument("--keep-logs", action="store_true", help="keep the daemons' logs in the temporary directory")
    o = ap.parse_args(argv)
    o.route_counts = [int(x) for x in o.routes.split(",") if x]
    o.cands = [c for c in o.candidates.split(",") if c]
    for c in o.cands:
        if c not in CANDIDATES:
            ap.error(f"--candidates: {c!r} is not one of {', '.join(CANDIDATES)}")
    if o.reps < 1 or any(n < 1 for n in o.route_counts):
        ap.error("--reps and --routes must be >= 1")
    if o.family == "ipv4" and max(o.route_counts) > MAX_IPV4_ROUTES:
        ap.error(f"--family ipv4: at most {MAX_IPV4_ROUTES} /32s fit in 198.18.0.0/15 after the link")
    return o


def main(argv: list[str]) -> int:
    opts = parse_args(argv)
    check_needs(opts.cands)
    started = dt.datetime.now(dt.UTC)
    out = Path(opts.out) if opts.out else HERE / "results" / f"routing-daemons-{started:%Y-%m-%d}.json"
    doc = {"schema_version": 1, "tool": "bench/routing_daemons.py",
           "started_utc": started.isoformat(timespec="seconds"),
           "host": host(), "versions": versions(),
           "config": {"routes": opts.route_counts, "reps": opts.reps, "candidates": opts.cands, "family": opts.family,
                      "gobgp_load": opts.gobgp_load, "gobgp_batch": opts.gobgp_batch,
                      "gobgp_withdraw": opts.gobgp_withdraw,
                      "bird_withdraw": opts.bird_withdraw,
                      "timeout_s": opts.timeout, "settle_s": opts.settle, "poll_s": POLL_S,
                      "receiver": "bird2 in nrrd-dut, kernel protocol export none",
                      "link": LINK, "route_base": ROUTE_BASE, "as": {"injector": AS_INJ, "receiver": AS_DUT}},
           "trials": [], "summary": []}

    def on_signal(signum, _frame):
        raise Stop(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C, even when started with SIGINT ignored
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    procs = Procs()
    root = Path(tempfile.mkdtemp(prefix="nrrd-"))
    try:
        if "gobgp" in opts.cands:
            opts.inject_bin = build_inject(root)
        build_testbed()
        gave_up: set[str] = set()
        for n in sorted(opts.route_counts):
            family = opts.family if opts.family != "auto" else ("ipv4" if n <= MAX_IPV4_ROUTES else "ipv6")
            for rep in range(opts.reps):
                order = opts.cands[rep % len(opts.cands):] + opts.cands[:rep % len(opts.cands)]
                for cand in order:
                    if cand in gave_up:
                        continue
                    print(f"  {cand} {n} {family} rep {rep + 1}/{opts.reps} ...", end="", flush=True)
                    rec = trial(cand, n, family, rep, opts, procs, root)
                    doc["trials"].append(rec)
                    print(f" receiver {rec['load']['receiver_reached']} routes in "
                          f"{rec['load']['receiver_s'] or rec['load']['elapsed_s']:.2f} s, "
                          f"withdrawn in {(rec['withdraw'] or {}).get('receiver_s') or float('nan'):.2f} s", flush=True)
                    if rec["load"]["timed_out"]:
                        print(f"  {cand}: gave up after {opts.timeout:.0f} s; larger counts skipped", flush=True)
                        gave_up.add(cand)
                    doc["summary"] = medians(doc["trials"])
                    out.parent.mkdir(parents=True, exist_ok=True)
                    tmp = out.with_suffix(".json.tmp")
                    tmp.write_text(json.dumps(doc, indent=1) + "\n")
                    os.replace(tmp, out)
        doc["finished_utc"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        out.write_text(json.dumps(doc, indent=1) + "\n")
        print(table(doc["summary"]))
        print(f"medians of {opts.reps} repetitions; every trial in {out}")
        return 0
    except (KeyboardInterrupt, Stop) as e:
        print(f"\nrouting_daemons: stopped ({type(e).__name__} {e}); cleaning up", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not interrupt the cleanup
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        procs.stop_all()
        teardown_testbed()
        if opts.keep_logs:
            print(f"routing_daemons: logs kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
