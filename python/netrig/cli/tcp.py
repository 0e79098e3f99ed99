"""``netrig tcp``: TCP goodput through a DUT with iperf3, and the CPU each process used.

The test bed's tester ports get kernel stacks (``tester_stack``): their namespaces carry the
ports' addresses and routes through the DUT, and iperf3 runs there — the client on port ``tx``,
the server on port ``rx``. ``--testbed NAME`` builds a test bed of that topology for the run and
tears it down afterwards (on success, error and Ctrl-C); ``--testbed ID`` uses one that
``netrig testbed up --tester-stack`` built. With a line rate (``--line-rate``, else the speed port
``tx``'s interface reports; veth reports none) the goodput of each direction is also a share of it.

Examples::

    netrig tcp --testbed router                       # 5 streams, 10 s, through a Linux router
    netrig tcp --testbed firewall --testbed-option rules=1000 --direction bidir --json
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
from collections.abc import Iterator
from typing import Any

from netrig import _native
from netrig.cli.common import require_root, testbed_options
from netrig.cli.shortcuts import knobs_of
from netrig.errors import ConfigError, TestbedError
from netrig.measure.stack import StackEndpoints
from netrig.measure.tcp import DEFAULT_PORT, DIRECTIONS, TcpParams, TcpResult, run_iperf3
from netrig.methodology.vocabulary import deprecated, option
from netrig.model import LineRate, format_bps
from netrig.monitor import Monitor
from netrig.monitor.monitor import MonitorResult
from netrig.testbed import TOPOLOGIES, Testbed
from netrig.testbed.knobs import KnobLayout, Knobs, applied_knobs


def register(sub) -> None:
    p = sub.add_parser("tcp", help="TCP goodput through the DUT with iperf3, with each process's CPU",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_testbed_options(p)
    option(p, "--streams", "parallel TCP connections (default 5)", default="5")
    option(p, "--duration", "10s, 500ms, 2m (default 10s)", default="10s")
    option(p, "--direction", "forward: port tx sends to port rx; reverse: rx sends to tx; bidir: both (default "
                             "forward)", default="forward", choices=DIRECTIONS)
    option(p, "--family", "default 4", default=4, choices=(4, 6))
    option(p, "--window", "socket buffer size (iperf3 -w)")
    option(p, "--mss", "TCP maximum segment size (iperf3 -M)")
    option(p, "--length", "bytes per write (iperf3 -l)")
    option(p, "--server-port", f"iperf3's (default {DEFAULT_PORT})", default=str(DEFAULT_PORT))
    deprecated(p, "--port", "--server-port")
    option(p, "--interval", "per-interval goodput (default 1s)", default="1s")
    option(p, "--line-rate", "each direction's goodput as a share of it (default: port tx's interface speed; veth "
                             "has none)")
    add_dut_options(p, "iperf3")
    add_result_options(p, "tcp.json")
    p.set_defaults(func=run)


def _params(args: argparse.Namespace) -> TcpParams:
    names = {"streams": "--streams", "duration_s": "--duration", "direction": "--direction",
             "window_bytes": "--window", "mss": "--mss", "length_bytes": "--length", "port": "--server-port",
             "interval_s": "--interval"}
    try:
        return TcpParams(streams=args.streams, duration_s=args.duration, direction=args.direction,
                         window_bytes=args.window, mss=args.mss, length_bytes=args.length, port=args.server_port,
                         interval_s=args.interval)
    except ConfigError as e:
        raise ConfigError(names.get(e.field, e.field), e.message) from None


def testbed_for(args: argparse.Namespace, tool: str) -> tuple[Testbed, bool]:
    """The test bed of ``--testbed``/``--testbed-option`` with tester stacks for ``tool`` to run in,
    and whether this command built it (and must tear it down). Shared with ``netrig rr``."""
    opts: dict[str, Any] = testbed_options(args.testbed_option)
    if args.testbed in TOPOLOGIES:
        if opts.get("tester_stack") is False:
            raise ConfigError("--testbed-option tester_stack", f"must be true: {tool} runs in the testers' stacks")
        opts["tester_stack"] = True
        try:
            return Testbed.create(args.testbed, **opts), True
        except ConfigError as e:
            raise ConfigError(f"--testbed-option {e.field}", e.message) from None
    if opts:
        raise ConfigError("--testbed-option", f"applies to a topology built for the run, not to test bed "
                                              f"{args.testbed} (it is built already)")
    try:
        tb = Testbed.attach(args.testbed)
    except TestbedError as e:
        raise ConfigError("--testbed", f"{args.testbed!r} is neither a topology ({', '.join(TOPOLOGIES)}) nor a "
                                       f"test bed that is up: {e}") from None
    if not tb.options.tester_stack:
        raise ConfigError("--testbed", f"test bed {tb.id} was built without --tester-stack: its tester ports have "
                                       f"no kernel stack for {tool}; build one with it")
    return tb, False


def endpoints(tb: Testbed, family: int) -> tuple[str | None, str | None, str]:
    """``(client namespace, server namespace, server address)``: from the test bed's port ``tx``
    to its port ``rx``, in IP ``family``."""
    ep = StackEndpoints.between(tb.port("tx"), tb.port("rx"))
    try:
        return ep.client_netns, ep.server_netns, ep.server(family)
    except ConfigError as e:
        raise ConfigError("--family", f"test bed {tb.id}: {e.message}") from None


def measure(tb: Testbed, params: TcpParams, family: int = 4) -> TcpResult:
    """iperf3 from the test bed's port ``tx`` (client) to port ``rx`` (server)."""
    return run_iperf3(*endpoints(tb, family), params)


def line_rate_of(args: argparse.Namespace, tb: Testbed) -> LineRate | None:
    """``--line-rate``, else the speed port ``tx``'s interface reports (``None``: it reports none)."""
    if args.line_rate is not None:
        return LineRate(args.line_rate, "config")
    tx = tb.port("tx")
    speed = _native.interface_info(tx.ifname, tx.netns).speed_bps
    return LineRate(float(speed), "interface", tx.ifname) if speed else None


def of_line_rate(r: TcpResult, line: LineRate | None) -> dict[str, Any]:
    """The line rate and each direction's goodput as a share of it (nothing without a line rate)."""
    if line is None:
        return {}
    return {"line_rate": line.to_dict(),
            "goodput_pct_line_rate": {d: 100 * bps / line.bps for d, bps in r.goodput_by_direction.items()}}


def line_rate_line(r: TcpResult, line: LineRate | None) -> str:
    if line is None:
        return ""
    shares = ", ".join(f"{d} {100 * bps / line.bps:.1f} %" for d, bps in r.goodput_by_direction.items())
    return f"\n  goodput of the line rate {line.label}: {shares}"


def table(r: TcpResult) -> str:
    lines = [f"iperf3 {r.params.direction}, {r.params.streams} stream(s), {r.params.duration_s:g} s to {r.server}: "
             f"goodput {format_bps(r.goodput_bps)}"
             + (f" (forward {format_bps(r.goodput_by_direction['forward'])}, reverse "
                f"{format_bps(r.goodput_by_direction['reverse'])})" if len(r.goodput_by_direction) > 1 else "")
             + (f", {r.retransmits} retransmits" if r.retransmits is not None else "")]
    for s in r.streams:
        rtt = f", RTT mean {s.mean_rtt_us:g} µs max {s.max_rtt_us:g} µs" if s.mean_rtt_us is not None else ""
        cwnd = f", cwnd max {s.max_cwnd_bytes} B" if s.max_cwnd_bytes is not None else ""
        lines.append(f"  stream {s.id} ({s.direction}): {format_bps(s.goodput_bps)}"
                     + (f", {s.retransmits} retransmits" if s.retransmits is not None else "") + rtt + cwnd)
    for p in r.processes:
        lines.append(f"  CPU {p.name} ({p.netns}): user {p.user_s:.2f} s, sys {p.sys_s:.2f} s")
    if (c := r.cpu_s_per_gbit()) is not None:
        lines.append(f"  CPU-seconds per Gbit of goodput (client + server): {c:.3f}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    params = _params(args)
    knobs = knobs_of(args.knob)
    require_root("building a test bed and running iperf3 in its namespaces")
    tb, built = testbed_for(args, "iperf3")
    with tb if built else contextlib.nullcontext(tb), on_dut(tb, knobs, args.monitor) as dut:
        line = line_rate_of(args, tb)
        result = measure(tb, params, args.family)
    write_result({"testbed": tb.topology, **result.to_dict(), **of_line_rate(result, line), **dut.to_dict()},
                 table(result) + line_rate_line(result, line) + dut.lines(), args, "tcp.json")
    return 0


def add_dut_options(p: argparse.ArgumentParser, tool: str) -> None:
    """``--knob`` and ``--monitor`` of a command that runs ``tool`` through a test bed's DUT."""
    option(p, "--knob", "as in a config's testbed.knobs (docs/methodology.md): e.g. dut.features.gro=off, "
                        "dut.sysfs.threaded=1, host.sysctl.net.core.busy_poll=50; recorded in the JSON result",
           action="append", default=[])
    option(p, "--monitor", f"here the whole {tool} run: per-CPU busy, softirq and system time, memory, conntrack and "
                           "interface counters, into the JSON result and a line per CPU [off]")


@dataclasses.dataclass
class DutRecord:
    """What a run through a test bed's DUT records beside its result: the knobs it set (their
    record) and, with ``--monitor``, the test bed's samples."""

    knobs: Any = None
    monitor: MonitorResult | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.knobs is not None:
            out["knobs"] = self.knobs
        if self.monitor is not None:
            out["monitor"] = {**self.monitor.to_dict(), "summary": self.monitor.summary()}
        return out

    def lines(self) -> str:
        """The monitor's per-CPU means, a line each (none without ``--monitor``)."""
        mon = self.monitor
        if mon is None:
            return ""
        busy, soft, system = (mon.cpu_mean(kind=k) for k in ("busy", "softirq", "system"))
        cpus = [c for c in busy if c != "all"]
        lines = [f"\n  monitor ({len(mon.window())} samples of {mon.interval_s:g} s), mean per CPU:"]
        lines += [f"    {c}: busy {busy[c]:.1f} %, softirq {soft.get(c, 0.0):.1f} %, system {system.get(c, 0.0):.1f} %"
                  for c in cpus]
        if not cpus:
            lines.append("    no sample: the run was shorter than one monitor interval")
        return "\n".join(lines)


@contextlib.contextmanager
def on_dut(tb: Testbed, knobs: Knobs, monitor: bool) -> Iterator[DutRecord]:
    """The block with ``knobs`` applied (restored after it) and, with ``monitor``, the test bed
    sampled; the :class:`DutRecord` it yields is filled in when the block ends."""
    record = DutRecord()
    tuned = (applied_knobs(knobs, KnobLayout.of_testbed(tb), state=tb.state, path="testbed.knobs") if knobs
             else contextlib.nullcontext(None))
    with tuned as applied:
        mon = Monitor(testbed=tb, interval_s=0.5) if monitor else None
        with mon if mon is not None else contextlib.nullcontext():
            yield record
        record.knobs = applied
        if mon is not None:
            record.monitor = mon.result


def add_testbed_options(p: argparse.ArgumentParser) -> None:
    """``--testbed NAME|ID`` and ``--testbed-option`` of a command that runs socket tools in the
    testers' stacks (``tcp``, ``rr``)."""
    option(p, "--testbed", f"{', '.join(t for t in TOPOLOGIES if t != 'external')}, or the id of one built with "
                           "`netrig testbed up --tester-stack`", required=True)
    option(p, "--testbed-option", "for a topology built for the run, e.g. rules=100", action="append", default=[])


def add_result_options(p: argparse.ArgumentParser, file: str) -> None:
    """``--json`` and ``--out DIR`` (the JSON result written to ``DIR/file``)."""
    option(p, "--json")
    option(p, "--out", f"the JSON result is written to DIR/{file} too [none]")


def write_result(doc: dict, text: str, args: argparse.Namespace, file: str) -> None:
    """The result on stdout (JSON with ``--json``, else ``text``) and in ``--out DIR`` as ``file``."""
    body = json.dumps(doc, indent=1)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, file), "w") as f:
            f.write(body + "\n")
    print(body if args.json else text)
