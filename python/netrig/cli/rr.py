"""``netrig rr``: request/response through a DUT with sockperf ping-pong — round trips per second,
round-trip-time percentiles, and the CPU each process used.

One message is in flight on one connection (TCP) or socket pair (UDP): port ``tx`` sends
``--message-size`` bytes, port ``rx`` sends them back, and the next request leaves when the reply is in
(netperf's TCP_RR/UDP_RR). Latency is the full round trip (sockperf's default "latency" is half
of it; netrig reports the round trip only). sockperf leaves the run's first 400 ms and last 50 ms
out of its measured window. A lost UDP request or reply stops sockperf's ping-pong: that run is
an error, not a low rate.

``--testbed NAME`` builds a test bed of that topology (with tester stacks) for the run and tears it
down afterwards (on success, error and Ctrl-C); ``--testbed ID`` uses one that
``netrig testbed up --tester-stack`` built.

Examples::

    netrig rr --testbed router                          # TCP, 64-byte messages, 10 s, as fast as it goes
    netrig rr --testbed firewall --protocol udp --message-size 512 --mps 10000 --json
"""
from __future__ import annotations

import argparse
import contextlib

from netrig.cli.common import require_root
from netrig.cli.shortcuts import knobs_of
from netrig.cli.tcp import (
    add_dut_options,
    add_result_options,
    add_testbed_options,
    endpoints,
    on_dut,
    testbed_for,
    write_result,
)
from netrig.errors import ConfigError
from netrig.measure.rr import (
    DEFAULT_PORT,
    MAX_SIZE_BYTES,
    MIN_SIZE_BYTES,
    PROTOCOLS,
    RrParams,
    RrResult,
    check_sockperf,
    run_sockperf,
)
from netrig.methodology.vocabulary import deprecated, option
from netrig.testbed import Testbed


def register(sub) -> None:
    p = sub.add_parser("rr", help="request/response through the DUT with sockperf: round trips/s, RTT percentiles, CPU",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_testbed_options(p)
    option(p, "--protocol", "tcp (one connection) or udp (default tcp)", default="tcp", choices=PROTOCOLS)
    option(p, "--message-size", f"{MIN_SIZE_BYTES} to {MAX_SIZE_BYTES} bytes (default 64)", default="64")
    deprecated(p, "--size", "--message-size")
    option(p, "--duration", "whole seconds: 10s, 2m (default 10s)", default="10s")
    option(p, "--mps", "requests per second on a fixed schedule (late ones catch up), or max: the next as soon as the "
                       "reply is in (default max)", default="max")
    option(p, "--family", "default 4; IPv6 needs sockperf 3.8 or later", default=4, choices=(4, 6))
    option(p, "--server-port", f"sockperf's (default {DEFAULT_PORT})", default=str(DEFAULT_PORT))
    deprecated(p, "--port", "--server-port")
    add_dut_options(p, "sockperf")
    add_result_options(p, "rr.json")
    p.set_defaults(func=run)


def _params(args: argparse.Namespace) -> RrParams:
    names = {"protocol": "--protocol", "size_bytes": "--message-size", "duration_s": "--duration", "mps": "--mps",
             "port": "--server-port"}
    mps: int | None = None
    if str(args.mps).strip().lower() != "max":
        try:
            mps = int(str(args.mps).strip())
        except ValueError:
            raise ConfigError("--mps", f"must be a whole number of requests per second or max (got {args.mps!r})") \
                from None
    try:
        return RrParams(protocol=args.protocol, size_bytes=args.message_size, duration_s=args.duration, mps=mps,
                        port=args.server_port)
    except ConfigError as e:
        raise ConfigError(names.get(e.field, e.field), e.message) from None


def measure(tb: Testbed, params: RrParams, family: int = 4) -> RrResult:
    """sockperf ping-pong from the test bed's port ``tx`` (client) to port ``rx`` (server)."""
    return run_sockperf(*endpoints(tb, family), params)


def table(r: RrResult) -> str:
    p, t = r.params, r.rtt
    rate = f"at most {p.mps}/s" if p.mps else "as fast as it goes"
    lines = [f"sockperf ping-pong {p.protocol.upper()}, {p.size_bytes}-byte messages, {p.duration_s:g} s ({rate}) "
             f"to {r.server} port {p.port}",
             f"  {r.tps:,.0f} transactions/s ({r.samples} round trips in the measured {r.measured_s:g} s)",
             f"  round-trip time µs: p50 {t.p50_us:.1f}  p99 {t.p99_us:.1f}  p99.9 {t.p99_9_us:.1f}  "
             f"max {t.max_us:.1f}  (mean {t.mean_us:.1f}, min {t.min_us:.1f})"]
    if r.dropped or r.duplicated or r.out_of_order:
        lines.append(f"  dropped {r.dropped}, duplicated {r.duplicated}, out of order {r.out_of_order}")
    for c in r.processes:
        lines.append(f"  CPU {c.name} ({c.netns}): user {c.user_s:.2f} s, sys {c.sys_s:.2f} s")
    if (c_m := r.cpu_s_per_million_transactions()) is not None:
        lines.append(f"  CPU-seconds per million transactions (client + server, whole run): {c_m:.2f}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    params = _params(args)
    knobs = knobs_of(args.knob)
    require_root("building a test bed and running sockperf in its namespaces")
    check_sockperf(args.family)  # before a test bed is built for nothing
    tb, built = testbed_for(args, "sockperf")
    with tb if built else contextlib.nullcontext(tb), on_dut(tb, knobs, args.monitor) as dut:
        result = measure(tb, params, args.family)
    write_result({"testbed": tb.topology, "testbed_id": tb.id, **result.to_dict(), **dut.to_dict()},
                 table(result) + dut.lines(), args, "rr.json")
    return 0
