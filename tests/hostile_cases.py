"""Bad inputs, as a new user and a hostile one type them: every one must give exactly one error line
naming the option or field (exit status 2), never a traceback, an internal error, a run that
starts anyway, or a silently different test.

``CASES`` is the table; ``run_case`` runs one and says whether it was handled well. Used by
``tests/test_hostile_inputs.py`` (one test per case) and ``scripts/hostile.py`` (the counts).
Cases run in-process through ``netrig.cli.main.main`` (command lines, config files, result files)
or call the Python API directly. Command lines that would touch the network use ``lo``, which the
transmit guard refuses, so a case that wrongly passes validation still sends nothing.
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import struct
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netrig.methods import REGISTRY as _REGISTRY

#: A simulated run that would finish quickly if a bad value slipped through.
SIM = ["--testbed", "simulated", "--frame-sizes", "64", "--duration", "0.05s", "--no-selftest"]
TX = ["trial", "--tx", "lo", "--rx", "lo"]
TRIAL = [*TX, "--duration", "0.1s"]


@dataclass(frozen=True)
class Case:
    """One bad input: a command line (``argv``), a config file (``config`` text with ``suffix``), a
    result/trial-log file for ``netrig report`` / ``run --resume`` (``files``), or an API call
    (``call``). ``expect``: text the error line must contain (the option or field it names)."""

    name: str
    expect: str
    argv: tuple[str, ...] = ()
    config: str | bytes | None = None
    suffix: str = ".toml"
    files: dict[str, str | bytes] = field(default_factory=dict)
    call: Callable[[], Any] | None = None


CASES: list[Case] = []


def cli(expect: str, *argv: str, name: str = "") -> None:
    CASES.append(Case(name or " ".join(argv), expect, argv=tuple(argv)))


def conf(name: str, expect: str, text: str | bytes, suffix: str = ".toml") -> None:
    CASES.append(Case(f"config {name}", expect, config=text, suffix=suffix))


def api(name: str, expect: str, call: Callable[[], Any]) -> None:
    CASES.append(Case(f"api {name}", expect, call=call))


def resume(name: str, expect: str, files: dict[str, str | bytes]) -> None:
    CASES.append(Case(f"resume {name}", expect, argv=("run", "--resume", "{dir}"), files=files))


def report(name: str, expect: str, files: dict[str, str | bytes], target: str = "result.json") -> None:
    CASES.append(Case(f"report {name}", expect, argv=("report", "{dir}/" + target, "-o", "{dir}/r.html"),
                      files=files))


# ------------------------------------------------------------------------------ netrig stress
STRESS = ["stress", "--testbed", "simulated", "--no-selftest", "--duration", "0.1s"]
cli("--profile", *STRESS, "--profile", "wave", name="stress --profile unknown")
cli("--peak", *STRESS, "--peak", "90", name="stress --peak below throughput")
cli("--peak", *STRESS, "--peak", "nan", name="stress --peak nan")
cli("--base", *STRESS, "--base", "100", name="stress --base at throughput")
cli("--base", *STRESS, "--base", "-5", name="stress --base negative")
cli("--interval", *STRESS, "--interval", "60", name="stress --interval longer than a phase")
cli("--interval", *STRESS, "--interval", "0.001", name="stress --interval below 10 ms")

# ------------------------------------------------------------------------------ netrig sweep
SWEEP = ["sweep", "--testbed", "simulated", "--no-selftest", "--duration", "0.1s"]
cli("--over", "sweep", "--testbed", "simulated", name="sweep without --over")
cli("--over", *SWEEP, "--over", "flows", name="sweep --over without values")
cli("--over", *SWEEP, "--over", "=1,2", name="sweep --over without a dimension")
cli("--over", *SWEEP, "--over", "flows=1,,2", name="sweep --over with an empty value")
cli("--over", *SWEEP, "--over", "flows=1", name="sweep --over one value")
cli("--over", *SWEEP, "--over", "flows=1,1k,1000", name="sweep --over a value twice")
cli("--over", *SWEEP, "--over", "flows=" + ",".join(str(i) for i in range(1, 40)), name="sweep --over 39 values")
cli("--over", *SWEEP, "--over", "flows=1,0", name="sweep --over flows=0")
cli("ports.flows = -2: ports.flows: must be a positive integer", *SWEEP, "--over", "flows=1,-2",
    name="sweep --over flows=-2")
cli("--over", *SWEEP, "--over", "flows=1,99999999999", name="sweep --over flows past the limit")
cli("--over", *SWEEP, "--over", "Flows!=1,2", name="sweep --over a malformed key")
cli("--over", *SWEEP, "--over", "nosuch.key=1,2", name="sweep --over an unknown config key")
cli("--over", *SWEEP, "--over", "name=a,b", name="sweep --over the run's name")
cli("--over", *SWEEP, "--over", "methods=a,b", name="sweep --over the methods")
cli("--over", *SWEEP, "--over", "rules=10,100", name="sweep --over rules on a test bed without an ACL")
cli("--method", *SWEEP, "--over", "flows=1,2", "--method", "nope", name="sweep --method unknown")
cli("--name", *SWEEP, "--over", "flows=1,2", "--name", "../x", name="sweep --name with a path")

# ------------------------------------------------------------------------------ netrig trial
for v in ["63", "16385", "0", "-1", "abc", "imix2", "random:64", "random:1518-64", "inc:64-1518:0",
          "inc:1518-64", "inc:64-1518:-5", "mix:64x0", "mix:", "nan", "inf", "1e99", "64.5", "mix:64x7+abcx4",
          "random:0-64", "64x"]:
    cli("--frame-size", *TRIAL, "--frame-size", v)
for v in ["lots", "-5kpps", "0", "150%", "1e400pps", "1e300pps", "20Tbps", "nan", "inf", "5k%", "10pps-l2",
          "", "max%", "1e10", "-0.5", "50%"]:
    cli("--rate", *TRIAL, "--rate", v)
for v in ["1e99s", "1x", "-1s", "0", "nan", "inf", "2w", "", "8d", "604801", "-inf"]:
    cli("--duration", *TRIAL, "--duration", v)
for v in ["1e99s", "61s", "-1", "nan", "abc", "2m"]:
    cli("--drain", *TRIAL, "--drain", v)
for v in ["0", "61s", "-1", "nan", "abc"]:
    cli("--late", *TRIAL, "--late", v)
for v in ["1e99s", "8d", "-1", "abc", "inf"]:
    cli("--warmup", *TRIAL, "--warmup", v)
for v in ["0", "-5", "1e30", "abc", "1e999", "nan", "2e15"]:
    cli("--frames", *TX, "--frames", v)
cli("--frames", *TX, "--frames", "", name="trial --frames ''")
cli("--frames", *TRIAL, "--frames", "100", name="trial --frames with --duration")
cli("--io", *TRIAL, "--io", "dpdk")
for v in ["0", "65", "x", "-1"]:
    cli("--queues", *TRIAL, "--queues", v)
for v in ["-1", "2s", "x", "1e99s"]:
    cli("--busy-poll", *TRIAL, "--busy-poll", v)
cli("--busy-poll", *TRIAL, "--io", "af_packet", "--busy-poll", "50us")
for v in ["0", "-1", "x", "20000000"]:
    cli("--flows", *TRIAL, "--flows", v)
for opt in ("--src-mac", "--dst-mac"):
    for v in ["zz", "01:02:03", "", "01:02:03:04:05:06:07", "gg:00:00:00:00:00"]:
        cli(opt, *TRIAL, opt, v)
for opt in ("--src-ip", "--dst-ip"):
    for v in ["300.1.1.1", "abc", "", "1.2.3", "::zz"]:
        cli(opt, *TRIAL, opt, v)
cli("--dst-ip", *TRIAL, "--dst-ip", "2001:db8::1")
for v in ["0", "4095", "5000", "-1", "x"]:
    cli("--vlan", *TRIAL, "--vlan", v)
for v in ["0", "4095", "-1", "x"]:
    cli("--outer-vlan", *TRIAL, "--vlan", "10", "--outer-vlan", v)
cli("--outer-vlan", *TRIAL, "--outer-vlan", "10", name="trial --outer-vlan without --vlan")
for v in ["sctp", "", "UDP"]:
    cli("--protocol", *TRIAL, "--protocol", v)
for v in ["SX", "syn", "1"]:
    cli("--tcp-flags", *TRIAL, "--protocol", "tcp", "--tcp-flags", v)
for v in ["-1", "4294967296", "x"]:
    cli("--tcp-seq", *TRIAL, "--protocol", "tcp", "--tcp-seq", v)
for v in ["0x0800", "0x86dd", "0x8100", "0x88a8", "0x0806", "1500", "0x10000", "zz", "-1"]:
    cli("--ethertype", *TRIAL, "--protocol", "raw", "--ethertype", v)
for v in ["vlans", "vlans=x", "colours=3", "src_ports=0", "dst_macs=-1", "dst_ports=70000"]:
    cli("--vary", *TRIAL, "--vary", v)
cli("--vary", *TRIAL, "--vary", "vlans=2", name="trial --vary vlans without --vlan")
cli("--vary", *TRIAL, "--vlan", "4000", "--vary", "vlans=200", name="trial --vary vlans past 4094")
cli("--vary", *TRIAL, "--protocol", "raw", "--vary", "dst_ips=2", name="trial --vary dst_ips on a raw stream")
cli("--vary", *TRIAL, "--flows", "2", "--vary", "src_ports=3", name="trial --flows and --vary src_ports")
cli("--vary", *TRIAL, "--dst-mac", "ff:ff:ff:ff:ff:fe", "--vary", "dst_macs=4", name="trial --vary dst_macs past ff")
cli("--flow-order", *TRIAL, "--flow-order", "random")
for v in ["10:100", "x:100:10", "10:100:1", "10:100:1001", "0:100:10", "10:-5:10", "10:100:2.5", "nan:100:3", "",
          "10:100:10:1"]:
    cli("--ramp", *TRIAL, "--ramp", v)
for steps in ["0", "-3"]:  # the error names the step count, not the length of a step
    cli(f"--ramp: {steps} steps", *TRIAL, "--ramp", f"10:100:{steps}", name=f"trial --ramp 10:100:{steps} (steps)")
cli("--ramp", *TX, "--frames", "1000", "--ramp", "10:100:10", name="trial --ramp with --frames")
cli("--event", *TRIAL, "--ramp", "10:100:2", "--event", "true", "--at", "0.05s", name="trial --event with --ramp")
for v in ["x", "1.5"]:
    cli("--seed", *TRIAL, "--seed", v)
cli("--frame-size", *TRIAL, "--protocol", "tcp", "--frame-size", "64", name="trial --protocol tcp --frame-size 64 (below 76)")
for v in ["fast", "0", "-1", "1e99", "nan", "inf"]:
    cli("--line-rate", *TRIAL, "--line-rate", v)
cli("--rate", *TRIAL, "--rate", "2Mpps", "--line-rate", "1Gbps")
for opt in ("--tx-cpus", "--rx-cpus", "--tx-cpu", "--rx-cpu"):
    for v in ["999", "-1", "x", "1-0"]:
        cli(opt, *TRIAL, opt, v)
# events under load
cli("--at", *TRIAL, "--at", "0.05s", name="trial --at without --event")
cli("--at", *TRIAL, "--event", "true", name="trial --event without --at")
cli("--at", *TRIAL, "--event", "true", "--at", "1s", "--event", "true", name="trial two --event, one --at")
for v in ["5s", "0.1s", "abc", "-1s", "nan", "inf", ""]:
    cli("--at", *TRIAL, "--event", "true", "--at", v)
for v in ["", "   ", "echo 'unclosed"]:
    cli("--event", *TRIAL, "--event", v, "--at", "0.05s")
cli("--event", "trial", "--tx", "lo", "--rx", "lo", "--frames", "100", "--event", "true", "--at", "0s",
    name="trial --event with --frames")
cli("--event", *TRIAL, *["--event", "true", "--at", "0.01s"] * 64, name="trial 64 events")
cli("--event-netns", *TRIAL, "--event-netns", "nrnosuchns", name="trial --event-netns without --event")
# pcap replay
def _pcap(frames: list[bytes], linktype: int = 1, snap: int = 0) -> bytes:
    """A little-endian microsecond pcap; ``snap`` > 0 records each frame as captured short of its length."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)]
    out += [struct.pack("<IIII", 0, 0, len(f), len(f) + snap) + f for f in frames]
    return b"".join(out)


_UDP = bytes(12) + b"\x08\x00" + bytes([0x45, 0, 0, 46]) + bytes(5) + b"\x11" + bytes(10) + b"\x04\x00\x04\x00\x00\x1a" \
    + bytes(20)
_ARP = b"\xff" * 6 + bytes(6) + b"\x08\x06" + bytes(28)


def pcap_case(expect: str, content: bytes | None, *extra: str, name: str) -> None:
    files = {} if content is None else {"c.pcap": content}
    CASES.append(Case(f"trial --pcap {name}", expect, argv=(*TRIAL, "--pcap", "{dir}/c.pcap", *extra), files=files))


pcap_case("--pcap", None, name="missing file")
pcap_case("--pcap", b"", name="empty file")
pcap_case("--pcap", b"this is not a capture at all", name="not a pcap")
pcap_case("--pcap", _pcap([]), name="no frames")
pcap_case("--pcap", _pcap([_UDP], linktype=113), name="Linux cooked link type")
pcap_case("--pcap", _pcap([_UDP, _UDP])[:-7], name="truncated record")
pcap_case("--pcap", _pcap([_UDP], snap=100), name="snapped frame")
pcap_case("--pcap", _pcap([b"\x01\x02\x03"]), name="frame shorter than an Ethernet header")
pcap_case("--pcap-stamp", _pcap([_ARP]), "--pcap-stamp", name="--pcap-stamp, no frame with room")
for opt, value in (("--frame-size", "128"), ("--flows", "4"), ("--vary", "dst_ips=2"), ("--protocol", "tcp"),
                   ("--vlan", "10"), ("--dst-mac", "02:00:00:00:00:09"), ("--src-ip", "198.18.0.9")):
    pcap_case(opt, _pcap([_UDP]), opt, value, name=f"with {opt}")
cli("--pcap-stamp", *TRIAL, "--pcap-stamp", name="trial --pcap-stamp without --pcap")
cli("--event-netns", *TRIAL, "--event", "true", "--at", "0s", "--event-netns", "nrnosuchns")
cli("--event-netns", *TRIAL, "--event", "true", "--at", "0s", "--event-netns", "../etc")
for v in ["0", "abc", "-1s", "nan"]:
    cli("--event-timeout", *TRIAL, "--event", "true", "--at", "0s", "--event-timeout", v)
# events under load on the shortcut commands (every timed method): the same pairing, and times
# that must fall inside each method's trials
FL = ["rfc2544", *SIM, "--tests", "frame-loss"]
cli("--at", *FL, "--at", "0.01s", name="rfc2544 frame-loss --at without --event")
cli("--at", *FL, "--event", "true", "--at", "0.01s", "--event", "true", name="rfc2544 two --event, one --at")
for v in ["0.05s", "1h", "abc", "-1s", "nan", ""]:
    cli("--at", *FL, "--event", "true", "--at", v, name=f"rfc2544 --at {v!r}")
for v in ["", "  ", "echo 'unclosed"]:
    cli("--event", *FL, "--event", v, "--at", "0.01s", name=f"rfc2544 frame-loss --event {v!r}")
cli("--event", *FL, *["--event", "true", "--at", "0.01s"] * 64, name="rfc2544 64 events")
cli("--event-timeout", *FL, "--event-timeout", "1s", name="rfc2544 frame-loss --event-timeout without --event")
for v in ["0", "abc", "-1s"]:
    cli("--event-timeout", *FL, "--event", "true", "--at", "0.01s", "--event-timeout", v,
        name=f"rfc2544 --event-timeout {v!r}")
cli("--at", "soak", *SIM, "--rate", "1kpps", "--duration", "2s", "--interval", "0.5s", "--event", "true", "--at",
    "3s", name="soak --at beyond the soak")
cli("--at", "rfc2544", *SIM, "--tests", "back-to-back", "--event", "true", "--at", "0.01s",
    name="rfc2544 --event on bursts only")
for _cmd in [c.name for c in _REGISTRY.commands()]:  # the shared event options of every shortcut
    cli("--at", _cmd, *SIM, "--at", "1s", name=f"{_cmd} --at without --event")
    cli("--event", _cmd, *SIM, "--event", "", "--at", "0s", name=f"{_cmd} --event ''")
    cli("--event-timeout", _cmd, *SIM, "--event-timeout", "1s", name=f"{_cmd} --event-timeout without --event")
cli("--testbed", "trial", "--testbed", "ffff", name="trial --testbed <missing id>")
cli("--testbed", "trial", "--testbed", "routr", name="trial --testbed <neither an id nor a topology>")
cli("--testbed", "trial", "--testbed", "../../etc")
cli("--family", "trial", "--testbed", "ffff", "--family", "5")
cli("--rate", "trial", "--rx", "lo", "--rate", "5kpps", name="trial receive-only with a sending option")
cli("--frames", "trial", "--rx", "lo", "--frames", "10", name="trial receive-only with --frames")
cli("--rx", "trial", "--rx", "lo", "--rx", "lo", name="trial receive-only on one interface twice")
cli("--duration", "trial", "--rx", "lo", "--duration", "0s", name="trial receive-only for 0 s")
cli("--duration", "trial", "--rx", "lo", "--duration", "2d", name="trial receive-only for more than a day")
cli("--rx: 1 --tx but 2 --rx", "trial", "--testbed", "ffff", "--tx", "tx", "--rx", "rx", "--rx", "rx",
    name="trial --testbed, 1 --tx, 2 --rx")
cli("--dst-mac", "trial", "--tx", "lo", name="trial transmit-only without --dst-mac")
cli("--rx", "trial", "--tx", "lo", "--rx", "lo", "--tx", "lo", name="trial two --tx, one --rx")
cli("--tx", "trial", "--tx", "lo@", "--rx", "lo", name="trial --tx IF@ without a namespace")
cli("--tx", "trial", "--tx", "@ns", "--rx", "lo", name="trial --tx @NS without an interface")
cli("--tx", "trial", "--tx", "lo@a", "--tx-netns", "b", "--rx", "lo", name="trial --tx IF@NS and --tx-netns")
cli("nrnosuchns: no such network namespace", "trial", "--tx", "lo", "--rx", "lo@nrnosuchns",
    name="trial --rx IF@<missing namespace>")
cli("--dst-mac", *TRIAL, "--dst-mac", "02:00:00:00:00:01", "--dst-mac", "02:00:00:00:00:01",
    name="trial the same --dst-mac twice")
cli("--dst-mac", *TRIAL, "--dst-mac", "02:00:00:00:00:01", "--dst-mac", "nope", name="trial a bad second --dst-mac")
cli("--testbed", "trial", "--testbed", "ffff", "--tx", "tx@ns", name="trial --testbed with --tx IF@NS")
cli("nope0: no such interface", "trial", "--tx", "nope0", "--rx", "lo")
cli("nrnosuchns: no such network namespace", "trial", "--tx", "lo", "--rx", "lo", "--tx-netns", "nrnosuchns")
cli("--tx", "trial", "--tx", "a/b", "--rx", "lo")
cli("--tx", "trial", "--tx", "x" * 16, "--rx", "lo")
cli("loopback", *TRIAL, name="trial on lo (transmit guard)")

# ------------------------------------------------------------------------------ shortcut commands
RFC = ["rfc2544", *SIM, "--out", "{dir}/out"]
for v in ["abc", "63", "", "64,,", "20000", "rfc2", "nan", "inc:64-1518:0", "inc:1518-64", "random:1518-64"]:
    cli("--frame-sizes", *RFC, "--frame-sizes", v)
cli("--sizes", *RFC, "--sizes", "63")
for v in ["1e99s", "nan", "-1", "0", "abc", "inf", "8d"]:
    cli("--duration", *RFC, "--duration", v)
for v in ["1e99s", "61", "-1", "nan"]:
    cli("--drain", *RFC, "--drain", v)
for v in ["0", "61", "-1s"]:
    cli("--late", *RFC, "--late", v)
for v in ["0", "-1", "x", "100000"]:
    cli("--repetitions", *RFC, "--repetitions", v)
for v in ["dpdk", ""]:
    cli("--io", *RFC, "--io", v)
for opt in ("--nominal-speed", "--line-rate"):
    for v in ["fast", "0", "-1", "1e99", "nan", "inf"]:
        cli(opt, *RFC, opt, v)
for v in ["0", "-1", "nan", "inf", "200"]:
    cli("--resolution", *RFC, "--resolution", v)
for v in ["0", "-1", "x"]:
    cli("--latency-trials", *RFC, "--tests", "latency", "--latency-trials", v)
for v in ["0", "-5", "nan", "inf", "200"]:
    cli("--step", *RFC, "--tests", "frame-loss", "--step", v)
for v in ["linear", "", "BINARY"]:
    cli("--search", *RFC, "--tests", "throughput", "--search", v)
for v in ["0", "-5", "nan", "inf", "200"]:
    cli("--search-step", *RFC, "--tests", "throughput", "--search", "linear-up", "--search-step", v)
for v in ["0", "-1"]:
    cli("--b2b-trials", *RFC, "--tests", "back-to-back", "--b2b-trials", v)
for v in ["bogus", "", ",", "throughput,bogus"]:
    cli("--tests", *RFC, "--tests", v)
for v in ["nosuch", "", "0000", "ROUTER"]:
    cli("--testbed", "rfc2544", "--testbed", v, "--out", "{dir}/out")
for v in ["0", "-1", "nan", "inf", "1e300", "50%", "1Gbps"]:
    cli("--sim-capacity", *RFC, "--sim-capacity", v)
cli("--sim-capacity-pps", *RFC, "--sim-capacity-pps", "inf")
cli("--reset-command", "rfc2544", "--testbed", "router", "--tests", "reset", "--out", "{dir}/out")
cli("--reset-command", *RFC, "--tests", "reset", "--reset-command", "'unclosed")
cli("--reset-command", *RFC, "--tests", "reset", "--reset-command", "sh -c \"x")
cli("--i-know-this-is-live", *RFC, "--i-know-this-is-live=yes")
for v in ["noequals", "dut.features.grooo=on", "bogus.features.gro=on", "dut.coalesce.rx-usecs=fast"]:
    cli("--knob", *RFC, "--knob", v)
cli("--monitor", *RFC, "--monitor=yes")
for v in ["-oProxyCommand=x", "a host", "", "dut;reboot"]:
    cli("--monitor-remote", *RFC, "--monitor-remote", v)
TB = ["rfc2544", "--testbed", "router", "--out", "{dir}/out", "--testbed-option"]
cli("--testbed-option", *TB, "noequals")
for kv, name in [("rules=abc", "rules"), ("rules=5", "rules"), ("cap=100kpps", "cap"), ("mtu=100", "mtu"),
                 ("mtu=abc", "mtu"), ("mtu=70000", "mtu"), ("log=maybe", "log"), ("log=true", "log"),
                 ("dut_cpus=999", "dut_cpus"), ("nat=static", "nat"), ("cap_burst=10", "cap_burst"),
                 ("colour=red", "colour"), ("conntrack_max=-1", "conntrack_max"), ("tester_stack=2", "tester_stack"),
                 ("ifaces=eth9", "ifaces"), ("dut_placement=magic", "dut_placement"), ("rules=1e3", "rules"),
                 ("conntrack_max=1000", "conntrack_max")]:
    cli(f"--testbed-option {name}", *TB, kv)
for tb, kv, name in [("policer", "cap=fast", "cap"), ("policer", "cap_burst=0", "cap_burst"),
                     ("firewall", "rules=1", "rules"), ("nat", "nat=full", "nat"),
                     ("firewall", "log=2", "log"), ("acl", "rules=0", "rules"), ("nat", "conntrack_max=x", "conntrack_max"),
                     ("loopback", "dut_cpus=0", "dut_cpus"), ("external", "mtu=9000", "mtu")]:
    cli(f"--testbed-option {name}", "rfc2544", "--testbed", tb, "--out", "{dir}/out", "--testbed-option", kv)
cli("cap", "rfc2544", "--testbed", "policer", "--out", "{dir}/out", name="rfc2544 policer without a cap")
for tb, kv, name in [("nat", "conntrack_buckets=0", "conntrack_buckets"), ("nat", "conntrack_buckets=x", "conntrack_buckets"),
                     ("firewall", "conntrack_buckets=99999999999", "conntrack_buckets"),
                     ("nat", "conntrack_timeout_s=-5", "conntrack_timeout_s"),
                     ("fwnat", "conntrack_timeout_s=1e9", "conntrack_timeout_s"),
                     ("nat", "conntrack_timeout_s=99999999999", "conntrack_timeout_s"),
                     ("router", "conntrack_timeout_s=60", "conntrack_timeout_s"),
                     ("router", "conntrack_buckets=1024", "conntrack_buckets")]:
    cli(f"--testbed-option {name}", "stateful", "--testbed", tb, "--out", "{dir}/out", "--testbed-option", kv)
STATEFUL = ["stateful", *SIM, "--out", "{dir}/out"]
for opt, vals in [("--connections", ["0", "-1", "abc", "65537", "4294967297", "16777217", "1e6"]),
                  ("--establish-rate", ["0", "nan", "inf", "-1", "abc"]),
                  ("--capacity", ["10,abc", "0", "1,-5", "65537", "1e6"]), ("--skip", ["bogus", "throughput,x"]),
                  ("--max-rate", ["-5", "nan", "0"])]:
    for v in vals:
        cli(opt, *STATEFUL, opt, v)
cli("testbed", *STATEFUL, name="stateful on the simulated test bed")
NDR = ["ndr-pdr", *SIM, "--out", "{dir}/out"]
for opt, vals in [("--pdr-loss", ["2", "-1", "nan", "inf"]), ("--width", ["0", "2", "nan", "-1"]),
                  ("--exceed-ratio", ["2", "-1", "nan"]), ("--initial-duration", ["abc", "0", "1e99s"]),
                  ("--final-duration", ["abc", "-1", "1e99s"]), ("--duration-sum", ["abc", "0", "1e99s"]),
                  ("--implementation", ["csit", ""])]:
    for v in vals:
        cli(opt, *NDR, opt, v)
cli("--initial-duration", *NDR, "--initial-duration", "5s", "--final-duration", "1s",
    name="ndr-pdr --initial-duration longer than --final-duration")
LL = ["livelock", *SIM, "--out", "{dir}/out"]
for opt, vals in [("--points", ["0", "1", "-1", "x"]), ("--resolution", ["0", "-1", "nan"])]:
    for v in vals:
        cli(opt, *LL, opt, v)
SK = ["soak", "--testbed", "simulated", "--frame-sizes", "64", "--no-selftest", "--duration", "3s", "--interval", "1s",
      "--rate", "10kpps", "--out", "{dir}/out"]
for opt, vals in [("--rate", ["max", "abc", "0%NDR", "150%NDR", "-1kpps", "nan", "101%", "1e99pps"]),
                  ("--ndr", ["abc", "-5", "0", "50%", "1Gbps", "inf"]),
                  ("--ndr-trial", ["0", "-1s", "x", "2h"]),
                  ("--interval", ["0", "0.01s", "2h", "x", "nan"]),
                  ("--duration", ["2s", "1e99s", "-1s"]),
                  ("--confidence", ["100", "10", "nan", "x"]),
                  ("--leak-growth", ["-1", "nan", "1e9"]),
                  ("--cpu-spike", ["0", "101", "nan"]),
                  ("--loss-min-frames", ["0", "-1", "x", "1.5"])]:
    for v in vals:
        cli(opt, *SK, opt, v)
cli("--host-memory-verdict", *SK, "--host-memory-verdict=1")
cli("no such run directory", "soak", "--resume", "{dir}/nowhere", name="soak --resume a missing directory")
cli("trials.ndjson", "soak", "--resume", "{dir}", name="soak --resume a directory without a run")
cli("--ndr", *SK, "--rate", "80%NDR", "--ndr", "1e99", name="soak --ndr above the frame-rate limit")
cli("--size", *NDR, "--size", "63")
cli("--size", *NDR, "--size", "inc:1518-64")
for cmd in ("ndr-pdr", "livelock", "soak", "selftest", "stateful", "stress"):  # the shared options of every
    # shortcut command
    base = [cmd, "--testbed", "simulated", "--out", "{dir}/out"]
    for opt, v in [("--frame-sizes", "63"), ("--duration", "1e99s"), ("--drain", "61s"), ("--late", "0"),
                   ("--repetitions", "0"),
                   ("--io", "dpdk"), ("--nominal-speed", "nan"), ("--line-rate", "-1"), ("--sim-capacity", "inf"),
                   ("--testbed-option", "mtu=9000"), ("--testbed", "nosuch"), ("--i-know-this-is-live", ""),
                   ("--monitor", ""), ("--knob", "dut.sysfs.threaded"), ("--monitor-remote", "-oX=y"),
                   ("--share-testbed", "")]:
        flag = opt in ("--i-know-this-is-live", "--monitor", "--share-testbed")
        argv = [*base, opt, v] if v or not flag else [*base, f"{opt}=1"]
        if opt == "--testbed":
            argv = [cmd, "--testbed", v, "--out", "{dir}/out"]
        cli(opt, *argv)
cli("--share-testbed", "rfc2544", "--testbed", "router", "--share-testbed", "--out", "{dir}/out",
    name="rfc2544 --share-testbed on a test bed built for the run")
cli("--share-testbed", "trial", "--tx", "lo", "--rx", "lo", "--share-testbed", name="trial --share-testbed without --testbed")
ST = ["selftest", "--testbed", "simulated", "--frame-sizes", "64", "--duration", "0.05s", "--out", "{dir}/out"]
for v in ["abc", "0", "50%", "1e300", "-1", "1M,abc"]:
    cli("--rates", *ST, "--rates", v)
for v in ["0.5", "11", "nan", "inf"]:
    cli("--factor", *ST, "--factor", v)

# ------------------------------------------------------------------------------ config files
SECTIONS = {"testbed": ['name = "simulated"'], "trial": ['duration_s = "0.05s"'], "frames": ["sizes = [64]"],
            "selftest": ["enabled = false"]}
M = '[[methods]]\n[methods.rfc2544_throughput]\n'


def toml(top: str = "", methods: str = M, **extra: str) -> str:
    """A config file: ``top`` lines first (top-level keys), then the sections with ``extra``
    lines added (``trial="drain_s = 61"``), then ``methods``."""
    out = top
    for sect in dict.fromkeys([*SECTIONS, *extra]):
        lines = [ln for ln in SECTIONS.get(sect, []) if not any(
            ln.split(" =")[0] == e.split(" =")[0] for e in extra.get(sect, "").splitlines())]
        out += f"[{sect.replace('__', '.')}]\n" + "".join(f"{ln}\n" for ln in lines) + \
            (extra[sect] + "\n" if sect in extra else "")
    return out + methods


BASE = toml(methods="")
conf("trial.events not a list of tables", "trial.events", toml(trial='events = 5'))
conf("trial.events without command", "trial.events[0]", toml(trial='events = [{at_s = "0.01s"}]'))
conf("trial.events unknown key", "trial.events[0].when", toml(trial='events = [{command = "true", when = 1}]'))
conf("trial.events at_s beyond the trial", "trial.events",
     toml(trial='events = [{command = "true", at_s = "1s"}]'))
conf("trial.events at_s negative", "trial.events[0].at_s", toml(trial='events = [{command = "true", at_s = -1}]'))
conf("trial.events empty command", "trial.events[0].command", toml(trial='events = [{command = "", at_s = 0}]'))
conf("trial.events on burst methods only", "trial.events",
     toml(trial='events = [{command = "true", at_s = 0}]', methods='[[methods]]\n[methods.rfc2544_back_to_back]\n'))
conf("trial.event_timeout_s = 0", "trial.event_timeout_s", toml(trial="event_timeout_s = 0"))
for sect, key, val, want in [
        ("trial", "duration_s", "inf", "trial.duration_s"), ("trial", "duration_s", "nan", "trial.duration_s"),
        ("trial", "duration_s", '"1e99s"', "trial.duration_s"), ("trial", "drain_s", "1e99", "trial.drain_s"),
        ("trial", "drain_s", "61", "trial.drain_s"), ("trial", "warmup_s", '"1e99s"', "trial.warmup_s"),
        ("trial", "warmup_s", "-inf", "trial.warmup_s"), ("trial", "tx_tolerance_pct", "nan", "trial.tx_tolerance_pct"),
        ("trial", "stall_threshold_ms", "inf", "trial.stall_threshold_ms"),
        ("trial", "stall_retries", "1.5", "trial.stall_retries"), ("trial", "monitor", '"yes"', "trial.monitor"),
        ("trial", "monitor_remote", '"-oProxyCommand=x"', "trial.monitor_remote"),
        ("trial", "monitor_remote", "7", "trial.monitor_remote"),
        ("trial", "monitor_ssh_config", '"/nonexistent/ssh_config"', "trial.monitor_ssh_config"),
        ("line_rate", "nominal_bps", "inf", "line_rate.nominal_bps"), ("line_rate", "speed_bps", "nan", "line_rate.speed_bps"),
        ("line_rate", "speed_bps", "1e99", "line_rate.speed_bps"), ("ports", "io", '"dpdk"', "ports.io"),
        ("ports", "queues", "0", "ports.queues"), ("ports", "queues", "1000", "ports.queues"),
        ("ports", "flows", "0", "ports.flows"), ("ports", "flows", "100000000", "ports.flows"),
        ("ports", "family", "5", "ports.family"), ("ports", "busy_poll_us", "-1", "ports.busy_poll_us"),
        ("ports", "ring_frames", "-1", "ports.ring_frames"),
        ("ports", "i_know_this_is_live", '"yes"', "ports.i_know_this_is_live"),
        ("ports", "tx_cpus", "[4096]", "ports.tx_cpus"), ("ports", "rx_cpus", '["a"]', "ports.rx_cpus"),
        ("selftest", "factor", "nan", "selftest.factor"), ("selftest", "rates_pps", "[inf]", "selftest.rates_pps"),
        ("selftest", "rates_pps", "[1e300]", "selftest.rates_pps"), ("selftest", "duration_s", "-1", "selftest.duration_s"),
        ("thresholds", "min_throughput_pct", "nan", "thresholds.min_throughput_pct"),
        ("thresholds", "max_latency_ns", "inf", "thresholds.max_latency_ns"),
        ("thresholds", "max_loss_ratio", "2", "thresholds.max_loss_ratio"),
        ("thresholds", "max_loss_ratio", "-0.5", "thresholds.max_loss_ratio"),
        ("frames", "sizes", '["inc:64-1518:0"]', "frames.sizes"), ("frames", "sizes", '"inc:1518-64"', "frames.sizes"),
        ("frames", "sizes", "[nan]", "frames.sizes"), ("frames", "sizes", "[]", "frames.sizes"),
        ("frames", "sizes", '""', "frames.sizes"), ("frames", "sizes", '"64,,128"', "frames.sizes"),
        ("stream", "protocol", '"sctp"', "stream.protocol"), ("stream", "protocol", "6", "stream.protocol"),
        ("stream", "tcp_flags", '"Z"', "stream.tcp_flags"), ("stream", "tcp_seq", "-1", "stream.tcp_seq"),
        ("stream", "protocol = \"raw\"\nethertype", "0x0800", "stream.ethertype"), ("stream", "ethertype", '"x"', "stream.ethertype"),
        ("stream", "vlan", "4095", "stream.vlan"), ("stream", "outer_vlan", "7", "stream.outer_vlan"),
        ("stream", "flows", "{ vlans = 2 }", "stream.flows.vlans"), ("stream", "flows", "{ colour = 2 }", "stream.flows"),
        ("stream", "flows", "3", "stream.flows"), ("stream", "flow_order", '"chaos"', "stream.flow_order"),
        ("stream", "seed", '"x"', "stream.seed"), ("stream", "colour", "1", "stream.colour"),
        ("stream", "protocol", '"tcp"', "frames.sizes")]:
    conf(f"{sect}.{key} = {val}", want, toml(**{sect: f"{key} = {val}"}))
SM = '[[methods]]\n[methods.stateful]\n'
for key, val in [("connections", "0"), ("connections", '"1000"'), ("connections", "65537"), ("connections", "1.5"),
                 ("establish_rate_pps", "nan"), ("establish_rate_pps", "-1"),
                 ("capacity_connections", "[0]"), ("capacity_connections", '["x"]'), ("throughput", '"yes"'),
                 ("teardown", "1"), ("establishment_rate", '"no"'), ("max_rate_pps", "inf"), ("resolution_pct", "0"),
                 ("resolution_pct", "nan"), ("duration_s", "-1"), ("flow_order", '"chaos"'), ("seed", "-1"),
                 ("seed", '"x"'), ("repetitions", "0"), ("colour", '"red"')]:
    conf(f"stateful.{key} = {val}", f"methods[0].stateful.{key}", toml(methods=SM) + f"{key} = {val}\n")
for key, val in [("resolution_pct", "nan"), ("resolution_pct", "inf"), ("duration_s", '"1e99s"'),
                 ("initial_rate_pct", "nan"), ("acceptable_loss_ratio", "inf"), ("repetitions", "0"),
                 ("max_rate_pct", "-inf"), ("colour", '"red"')]:
    conf(f"rfc2544_throughput.{key} = {val}", f"methods[0].rfc2544_throughput.{key}", toml() + f"{key} = {val}\n")
for key, val in [("rate", '"max"'), ("rate", "80"), ("rate", '"80%NDR%"'), ("host_memory_verdict", '"yes"'),
                 ("interval_s", "0"), ("duration_s", '"1s"'), ("ndr_pps", "-1"), ("stage_pct", "60"),
                 ("loss_min_frames", "0.5"), ("cpu_spike_pct", "inf")]:
    conf(f"soak.{key} = {val}", f"methods[0].soak.{key}",
         toml(methods=f"[[methods]]\n[methods.soak]\n{key} = {val}\n"))
conf("rfc2544_throughput = 5", "methods[0].rfc2544_throughput", toml(methods="[[methods]]\nrfc2544_throughput = 5\n"))
conf("top-level rfc2544_throughput = 5", "rfc2544_throughput", toml(top="rfc2544_throughput = 5\n"))
conf("methods = 5", "methods", toml(top="methods = 5\n", methods=""))
conf("methods = [5]", "methods[0]", toml(top="methods = [5]\n", methods=""))
conf("methods = []", "methods", toml(top="methods = []\n", methods=""))
conf("no methods", "methods", BASE)
conf("unknown method", "methods[0]", toml(top="methods = ['rfc2544_speed']\n", methods=""))
conf("unknown key", "colour", toml(top="colour = 1\n"))
conf("testbed.name = nosuch", "testbed.name", toml(testbed='name = "nosuch"'))
conf("testbed.options on simulated", "testbed.options", toml(testbed__options="rules = 5"))
conf("router options.rules = 5", "testbed.options.rules", toml(testbed='name = "router"', testbed__options="rules = 5"))
conf("policer options.cap = 'fast'", "testbed.options.cap",
     toml(testbed='name = "policer"', testbed__options="cap = 'fast'"))
conf("firewall options.log = 'false'", "testbed.options.log",
     toml(testbed='name = "firewall"', testbed__options="log = 'false'"))
conf("router options.mtu = 9e3", "testbed.options.mtu", toml(testbed='name = "router"', testbed__options="mtu = 9e3"))
conf("testbed.id = 'zz'", "testbed.id", toml(testbed='id = "zz"'))
conf("simulator.capacity_pps = inf", "testbed.simulator.capacity_pps", toml(testbed__simulator="capacity_pps = inf"))
conf("simulator.capacity_pps = nan", "testbed.simulator.capacity_pps", toml(testbed__simulator="capacity_pps = nan"))
conf("repetitions = 0", "repetitions", toml(top="repetitions = 0\n"))
conf("repetitions = 1e9", "repetitions", toml(top="repetitions = 1000000000\n"))
conf("binary toml", ".toml", b"\x00\x01\x02\xff\xfe binary")
conf("binary json", ".json", b"\x89PNG\r\n\x1a\n\x00\x00", suffix=".json")
conf("binary yaml", ".yaml", b"\xff\xfe\x00\x00", suffix=".yaml")
conf("toml syntax", ".toml", "[trial\nduration_s = 1\n")
conf("json NaN", "trial.duration_s", json.dumps({"testbed": {"name": "simulated"}, "trial": {"duration_s": math.nan},
                                                  "methods": ["rfc2544_throughput"]}), suffix=".json")
conf("json Infinity rate", "selftest.rates_pps", '{"testbed": {"name": "simulated"}, "selftest": '
     '{"rates_pps": [Infinity]}, "methods": []}', suffix=".json")
conf("yaml .nan", "trial.drain_s", "testbed: {name: simulated}\ntrial: {drain_s: .nan}\nmethods: [rfc2544_throughput]\n",
     suffix=".yaml")
conf("yaml list at top", ".yaml", "- 1\n- 2\n", suffix=".yaml")
conf("yaml testbed twice", "testbed is given twice",
     "testbed: {name: simulated}\nmethods: [rfc2544_throughput]\ntestbed: {name: router}\n", suffix=".yaml")
conf("yaml nested key twice", "trial.duration_s is given twice",
     "testbed: {name: simulated}\ntrial: {duration_s: 0.05s, duration_s: 1s}\nmethods: [rfc2544_throughput]\n",
     suffix=".yaml")
conf("json testbed twice", "testbed is given twice",
     '{"testbed": {"name": "simulated"}, "methods": ["rfc2544_throughput"], "testbed": {"name": "router"}}',
     suffix=".json")
conf("json nested key twice", "methods[0].rfc2544_throughput.resolution_pct is given twice",
     '{"testbed": {"name": "simulated"}, "methods": [{"rfc2544_throughput": {"resolution_pct": 1, '
     '"resolution_pct": 2}}]}', suffix=".json")
conf("yaml scalar", ".yaml", "just text\n", suffix=".yaml")
conf("unknown suffix", ".txt", "x = 1\n", suffix=".txt")
conf("mlrsearch goal loss nan", "methods[0].mlrsearch.goals[0].loss_ratio",
     toml(methods="[[methods]]\n[methods.mlrsearch]\ngoals = [{name = 'NDR', loss_ratio = nan}]\n"))
conf("throughput_from later", "throughput_from",
     toml(methods="[[methods]]\n[methods.rfc2544_latency]\nthroughput_from = 3\n"))
cli("FILE", "run", name="run without FILE or --resume")
cli("no-such.toml", "run", "{dir}/no-such.toml")
cli("--out", "run", "{dir}/x.toml", "--resume", "{dir}/a", "--out", "{dir}/b")

# ------------------------------------------------------------------------------ resuming and reading results
HEADER = {"type": "header", "schema_version": 2, "run_id": "x", "started_at": "2026-01-01T00:00:00Z",
          "config": {"testbed": {"name": "simulated"}, "methods": ["rfc2544_throughput"],
                     "frames": {"sizes": [64]}, "selftest": {"enabled": False}}}


def _log(*records: object) -> str:
    return "".join(json.dumps(r) + "\n" for r in (HEADER, *records))


TRIAL_REC = {"type": "trial", "key": "0/64/0/0", "kind": "rate", "load": {"rate_pps": 14880952.380952382,
             "frame_size": 64, "burst_frames": None, "duration_s": 60.0}, "counts": {"offered_pps": 1.0,
             "frames_sent": 10, "frames_received": 10}}
resume("dir missing", "no such run directory", {})
resume("no trial log", "trials.ndjson", {"other.txt": "x"})
resume("binary trial log", "trials.ndjson", {"trials.ndjson": b"\xff\xfe\x00binary\n"})
resume("trial log is a list", "trials.ndjson:1", {"trials.ndjson": "[1, 2]\n"})
resume("corrupt middle line", "trials.ndjson:2", {"trials.ndjson": _log()[:-1] + "\n{oops\n" + json.dumps(TRIAL_REC) + "\n"})
resume("counts is a string", "trials.ndjson:2", {"trials.ndjson": _log({**TRIAL_REC, "counts": "many"})})
resume("load is a list", "trials.ndjson:2", {"trials.ndjson": _log({**TRIAL_REC, "load": [1]})})
resume("key is a number", "trials.ndjson:2", {"trials.ndjson": _log({**TRIAL_REC, "key": 5})})
resume("frames_sent is text", "0/64/0/0", {"trials.ndjson": _log({**TRIAL_REC, "counts": {
    "offered_pps": 1.0, "frames_sent": "ten", "frames_received": 10}})})
resume("rate_pps is text", "0/64/0/0", {"trials.ndjson": _log({**TRIAL_REC, "load": {**TRIAL_REC["load"],
                                                                                    "rate_pps": "fast"}})})
resume("latency is a list", "0/64/0/0", {"trials.ndjson": _log({**TRIAL_REC, "counts": {
    **TRIAL_REC["counts"], "latency": [1, 2]}})})
resume("header config is text", "trials.ndjson:1", {"trials.ndjson": json.dumps({**HEADER, "config": "x"}) + "\n"})
resume("header config invalid", "trial.duration_s", {"trials.ndjson": json.dumps(
    {**HEADER, "config": {**HEADER["config"], "trial": {"duration_s": -1}}}) + "\n"})
IV_REC = {"type": "interval", "key": "0/64/0/0", "segment": 0, "index": 0, "t_s": 0.0, "duration_s": 1.0,
          "frames_sent": 10, "frames_received": 10, "monitor": None}
resume("interval frames_sent is text", "trials.ndjson:2", {"trials.ndjson": _log({**IV_REC, "frames_sent": "x"})})
resume("interval frames_received < 0", "trials.ndjson:2", {"trials.ndjson": _log({**IV_REC, "frames_received": -1})})
resume("interval without segment", "trials.ndjson:2", {"trials.ndjson": _log({k: v for k, v in IV_REC.items()
                                                                                if k != "segment"})})
resume("interval t_s is nan text", "trials.ndjson:2", {"trials.ndjson": _log({**IV_REC, "t_s": "NaN"})})
resume("newer schema", "newer netrig", {"trials.ndjson": json.dumps({**HEADER, "schema_version": 99}) + "\n"})
resume("config.json binary", "config.json", {"config.json": b"\xff\x00", "trials.ndjson": _log()})
resume("config.json a list", "config.json", {"config.json": "[1]", "trials.ndjson": _log()})
report("missing", "no such result file", {})
report("binary", "result.json", {"result.json": b"\xff\xfe\x00\x01"})
report("not json", "not valid JSON", {"result.json": "{nope"})
report("newer schema", "newer netrig", {"result.json": json.dumps({"schema_version": 99})})
report("no schema", "schema_version", {"result.json": json.dumps({"tool": "netrig"})})
report("schema text", "schema_version", {"result.json": json.dumps({"schema_version": "2"})})
report("trials not a list", "trials", {"result.json": json.dumps({"schema_version": 2, "trials": 5})})
report("empty", "empty file", {"result.json": ""})
report("directory without results", "directory holds no", {"sub/x.txt": "x"}, target="sub")
report("trial log with a corrupt middle line", "trials.ndjson:2: corrupt line",
       {"trials.ndjson": _log()[:-1] + "\n{oops\n" + json.dumps(TRIAL_REC) + "\n"}, target="trials.ndjson")
report("trial log with a bad record", "trials.ndjson:3: trial 0/64/0/0: counts must be an object",
       {"trials.ndjson": _log(TRIAL_REC, {**TRIAL_REC, "counts": 5}) + '{"type": "tri'}, target="trials.ndjson")
for out in ("", "{dir}"):  # nothing, or a directory, where the report's file name belongs
    CASES.append(Case(f"report -o {out!r}", "-o: ", argv=("report", "{dir}/result.json", "-o", out),
                      files={"result.json": json.dumps({"schema_version": 2})}))
CASES.append(Case("compare -o ''", "-o: ", argv=("compare", "{dir}/a.json", "{dir}/a.json", "-o", ""),
                  files={"a.json": json.dumps({"schema_version": 2})}))
CASES.append(Case("compare missing", "no such result file", argv=("compare", "{dir}/a.json", "{dir}/b.json",
                                                                   "-o", "{dir}/c.html")))

# ------------------------------------------------------------------------------ test beds
for argv, want in [(["mesh"], "topology"), (["router", "--cap", "100kpps"], "--cap"),
                   (["router", "--rules", "5"], "--rules"), (["policer"], "--cap"),
                   (["firewall", "--rules", "1"], "--rules"), (["router", "--mtu", "100"], "--mtu"),
                   (["router", "--mtu", "70000"], "--mtu"), (["router", "--dut-cpus", "999"], "--dut-cpus"),
                   (["router", "--ifaces", "eth1"], "--ifaces"), (["external"], "--ifaces"),
                   (["loopback", "--dut-cpus", "0"], "--dut-cpus"), (["policer", "--cap", "1kpps", "--cap-burst", "0"],
                                                                      "--cap-burst"),
                   (["nat", "--conntrack-max", "0"], "--conntrack-max"), (["router", "--log"], "--log"),
                   (["router", "--nat", "static"], "--nat"), (["policer", "--cap", "fast"], "--cap"),
                   (["loopback", "--dut-placement", "rps"], "--dut-placement"),
                   (["external", "--ifaces", "bad name!"], "--ifaces"), (["bridge", "--rules", "3"], "--rules"),
                   (["fourport", "--conntrack-max", "5"], "--conntrack-max"), (["router", "--rules", "x"], "--rules"),
                   (["nat", "--conntrack-buckets", "0"], "--conntrack-buckets"),
                   (["router", "--conntrack-buckets", "1024"], "--conntrack-buckets"),
                   (["nat", "--conntrack-timeout", "-1s"], "--conntrack-timeout"),
                   (["firewall", "--conntrack-timeout", "x"], "--conntrack-timeout"),
                   (["loopback", "--conntrack-timeout", "60s"], "--conntrack-timeout"),
                   (["nat", "--conntrack-timeout", "0.5s"], "--conntrack-timeout"),
                   (["nat", "--conntrack-timeout-s", "x"], "--conntrack-timeout-s"),
                   (["router", "--dut-ring", "4"], "--dut-ring"), (["router", "--dut-ring", "x"], "--dut-ring"),
                   (["router", "--dut-ring", "256", "--dut-placement", "rps"], "--dut-ring"),
                   (["loopback", "--dut-ring", "256"], "--dut-ring"),
                   (["router", "--dut-placement", "inline", "--dut-cpus", "0"], "--dut-cpus")]:
    cli(want, "testbed", "up", *argv)
for argv, want in [(["forwarder", "--forward-mode", "macswap"], "--forward-mode"),
                   (["forwarder", "--forward-backend", "dpdk"], "--forward-backend"),
                   (["router", "--forward-mode", "mac"], "--forward-mode"),
                   (["forwarder", "--rules", "3"], "--rules"),
                   (["forwarder", "--forward-backend", "xdp", "--dut-cpus", "99"], "--dut-cpus"),
                   (["oneport", "--forward-mode", "mac"], "--forward-mode"),
                   (["oneport", "--forward-backend", "XDP"], "--forward-backend"),
                   (["oneport", "--forward-backend", "xdp", "--dut-cpus", "0-1-2"], "--dut-cpus"),
                   (["oneport", "--cap", "1kpps"], "--cap"),
                   (["forwarder", "--forward-backend", "bridge", "--forward-mode", "l2fwd"], "--forward-mode"),
                   (["oneport", "--forward-backend", "bridge"], "--forward-backend"),
                   (["forwarder", "--forward-backend", "testpmd", "--dut-cpus", "0,1"], "--dut-cpus")]:
    cli(want, "testbed", "up", *argv)
for tb, kv, name in [("forwarder", "forward_mode=rxonly", "forward_mode"),
                     ("forwarder", "forward_backend=xdp_redirect", "forward_backend"),
                     ("oneport", "forward_mode=rxonly", "forward_mode"),
                     ("oneport", "forward_mode=io", "forward_mode"),
                     ("oneport", "forward_backend=dpdk", "forward_backend"),
                     ("oneport", "rules=3", "rules"),
                     ("router", "forward_backend=socket", "forward_backend"),
                     ("forwarder", "dut_cpus=999", "dut_cpus"),
                     ("forwarder", "forward_backend=testpmd_af_xdp", "forward_backend")]:
    cli(f"--testbed-option {name}", "rfc2544", "--testbed", tb, "--out", "{dir}/out", "--testbed-option", kv)
# netrig capture-bench and netrig capture: every bad value is refused before a test bed is built.
CB = ["capture-bench", "--out", "{dir}/cb"]
cli("--capture-methods", *CB, "--capture-methods", "pf_ring", name="capture-bench unknown method")
cli("--capture-methods", *CB, "--capture-methods", "", name="capture-bench no method")
cli("--capture-methods", *CB, "--capture-methods", "recvfrom,recvfrom", name="capture-bench method twice")
cli("--frame-sizes", *CB, "--frame-sizes", "12", name="capture-bench bad size")
cli("--frame-sizes", *CB, "--frame-sizes", "jumbo", name="capture-bench unknown size")
cli("--batch", *CB, "--batch", "0", name="capture-bench batch 0")
cli("--batch", *CB, "--batch", "x", name="capture-bench batch not a number")
cli("--loads", *CB, "--loads", "150", name="capture-bench load above 100")
cli("--loads", *CB, "--loads", "a,b", name="capture-bench loads not numbers")
cli("--duration", *CB, "--duration", "0", name="capture-bench duration 0")
cli("--drain", *CB, "--drain", "-1", name="capture-bench negative drain")
cli("--resolution", *CB, "--resolution", "0", name="capture-bench resolution 0")
cli("--dut-cpus", *CB, "--dut-cpus", "999", name="capture-bench cpu beyond the machine")
cli("--dut-cpus", *CB, "--dut-cpus", "0-1", name="capture-bench two cpus")
CAP = ["capture", "--port", "lo", "--duration", "0.1"]
cli("--port", "capture", "--duration", "0.1", name="capture without --port")
cli("--capture-method", *CAP, "--capture-method", "pf_ring", name="capture unknown method")
cli("--batch", *CAP, "--batch", "0", name="capture batch 0")
cli("--batch", *CAP, "--batch", "2000", name="capture batch too large")
cli("--dut-cpus", *CAP, "--dut-cpus", "999", name="capture cpu beyond the machine")
cli("--cpu", *CAP, "--cpu", "999", name="capture cpu beyond the machine (old spelling)")
cli("--stats", *CAP, "--stats", "/nonexistent/dir/s.json", name="capture stats unwritable")
cli("--capture-method", "testbed", "up", "capture", "--capture-method", "pf_ring", name="testbed capture-method")
cli("--capture-batch", "testbed", "up", "router", "--capture-batch", "5", name="testbed capture-batch on router")
# netrig forward: lo would be refused by the transmit guard if a bad value slipped through; every
# case also has a short --duration so nothing can run on.
FWD = ["forward", "--port", "lo", "--duration", "0.1"]
cli("--port", "forward", "--duration", "0.1", name="forward without --port")
cli("--port", *FWD, "--port", "", name="forward --port empty")
cli("--port", *FWD, "--port", "x" * 16, name="forward --port too long")
cli("--port", *FWD, "--port", "a/b", name="forward --port with a slash")
cli("--port", *FWD, "--port", "lo", name="forward --port twice")
cli("--forward-mode", *FWD, "--forward-mode", "fwd")
cli("--forward-mode", *FWD, "--forward-mode", "", name="forward --forward-mode empty")
cli("--io", *FWD, "--io", "dpdk")
cli("--io", *FWD, "--io", "loopback", name="forward --io loopback")
cli("--queues", *FWD, "--queues", "0")
cli("--queues", *FWD, "--queues", "65")
cli("--queues", *FWD, "--queues", "two")
cli("--queues", *FWD, "--queues", "1.5")
cli("--peer-mac", *FWD, "--forward-mode", "mac", "--peer-mac", "02:00:00:00:00", name="forward --peer-mac short")
cli("--peer-mac", *FWD, "--forward-mode", "mac", "--peer-mac", "zz:00:00:00:00:01", name="forward --peer-mac not hex")
cli("--peer-mac", *FWD, "--forward-mode", "io", "--peer-mac", "02:00:00:00:00:01", name="forward --peer-mac with io")
cli("--peer-mac", *FWD, "--port", "lo2", "--forward-mode", "mac", "--peer-mac", "02:00:00:00:00:01",
    name="forward --peer-mac fewer than ports")
cli("--port", *FWD, "--port", "lo2", "--port", "lo3", "--forward-mode", "l2fwd", name="forward l2fwd odd ports")
cli("--duration", "forward", "--port", "lo", "--duration", "0")
cli("--duration", "forward", "--port", "lo", "--duration", "-1")
cli("--duration", "forward", "--port", "lo", "--duration", "nan")
cli("--duration", "forward", "--port", "lo", "--duration", "inf")
cli("--duration", "forward", "--port", "lo", "--duration", "soon")
cli("--interval", *FWD, "--interval", "-1")
cli("--interval", *FWD, "--interval", "x")
cli("--dut-cpus", *FWD, "--dut-cpus", "9999")
cli("--dut-cpus", *FWD, "--dut-cpus", "1-0")
cli("--dut-cpus", *FWD, "--dut-cpus", "-1")
cli("--cpus", *FWD, "--cpus", "x", name="forward --cpus x (old spelling)")
cli("--batch", *FWD, "--batch", "0")
cli("--batch", *FWD, "--batch", "100000")
cli("--batch", *FWD, "--batch", "lots")
cli("--netns", *FWD, "--netns", "nrnosuchns")
cli("--netns", *FWD, "--netns", "../etc")
cli("--out", *FWD, "--forward-mode", "rxonly", "--out", "/proc/netrig-no-dir", name="forward --out unwritable")
cli("refusing", *FWD, name="forward on lo (the transmit guard)")
# --io xdp: the kernel forwards on every queue, on the receiving CPU, without batches.
cli("--queues", *FWD, "--io", "xdp", "--queues", "2", name="forward xdp --queues")
cli("--queues", *FWD, "--io", "xdp", "--queues", "", name="forward xdp --queues empty")
cli("--dut-cpus", *FWD, "--io", "xdp", "--dut-cpus", "0", name="forward xdp --dut-cpus")
cli("--batch", *FWD, "--io", "xdp", "--batch", "32", name="forward xdp --batch")
cli("--io", *FWD, "--io", "XDP", name="forward --io XDP")
cli("--io", *FWD, "--io", "xdp_redirect", name="forward --io xdp_redirect")
cli("--peer-mac", *FWD, "--io", "xdp", "--forward-mode", "mac", "--peer-mac", "02:00:00:00:00:zz",
    name="forward xdp --peer-mac not hex")
cli("refusing", *FWD, "--io", "xdp", name="forward xdp on lo (the transmit guard)")
cli("id", "testbed", "down", "zz")
cli("no such test bed", "testbed", "down", "ffff")
cli("id", "testbed", "status", "../x")
cli("no such test bed", "testbed", "status", "ffff")
cli("nope0", "ports", "nope0")
cli("nrnosuchns", "ports", "--netns", "nrnosuchns")

# ------------------------------------------------------------------------------ --metrics-listen
# Checked and bound before anything starts: a malformed value, an address this host does not have
# (192.0.2.1, TEST-NET-1) or a port in use is one line naming the option (binding sends nothing).
BAD_LISTEN = ["abc", "127.0.0.1:", "127.0.0.1:65536", "localhost:9464", "::1:9464", "192.0.2.1:9464", "-1"]
for cmd in [*(c.name for c in _REGISTRY.commands()), "selftest"]:
    bed = "nat" if cmd == "stateful" else "simulated"  # stateful runs on a NAT's conntrack table only
    cli("--metrics-listen", cmd, "--testbed", bed, "--out", "{dir}/out", "--metrics-listen", "abc")
for v in BAD_LISTEN:
    cli("--metrics-listen", "rfc2544", *SIM, "--out", "{dir}/out", "--metrics-listen", v)
    cli("--metrics-listen", *FWD, "--metrics-listen", v)
    cli("--metrics-listen", "serve", "--port", "lo", "--http", "--metrics-listen", v)
# ------------------------------------------------------------------------------ serve: agents, controller
_NOAGENT = "a=http://127.0.0.1:1"  # nothing listens on port 1: a controller that got this far fails naming it
for v in ("a", "a=ftp://x", "=http://x", "a b=http://x", "a=http://"):
    cli("--agent", "serve", "--http", "--agent", v)
cli("--agent", "serve", "--http", "--agent", _NOAGENT, "--agent", "a=http://127.0.0.1:2", name="serve --agent twice")
cli("--port", "serve", "--http", "--agent", _NOAGENT, "--port", "lo", name="serve --agent with --port")
cli("--agent", "serve", "--http", "--agent", _NOAGENT, name="serve --agent unreachable")
cli("--agent-cert", "serve", "--http", "--agent", "a=https://127.0.0.1:1", "--agent-cert", "{dir}/c.pem")
cli("--agent-token-file", "serve", "--http", "--agent", _NOAGENT, "--agent-token-file", "{dir}/missing")
cli("--token-file", "serve", "--port", "lo", "--http", "--token-file", "{dir}/missing")
cli("--capture-mb", "serve", "--port", "lo", "--http", "--capture-mb", "1000000000")
cli("--ptp-socket", "serve", "--port", "lo", "--http", "--ptp-socket", "{dir}/missing", name="serve --ptp-socket missing")
cli("--ptp-socket", "serve", "--http", "--agent", _NOAGENT, "--ptp-socket", "{dir}/p", name="serve --agent --ptp-socket")
cli("--tx-cpus", "serve", "--http", "--agent", _NOAGENT, "--tx-cpus", "0", name="serve --agent --tx-cpus")
cli("--rx-cpus", "serve", "--port", "lo", "--http", "--rx-cpus", "99", name="serve --rx-cpus beyond the machine")
cli("--http", "serve", "--port", "lo", "--http", "--listen", "192.0.2.1:8443", name="serve --http beyond loopback")
CASES.append(Case("serve --token-file too short", "--token-file", files={"t": "short\n"},
                  argv=("serve", "--port", "lo", "--http", "--token-file", "{dir}/t")))
_STUDY = ('[base]\n[base.testbed]\nname = "simulated"\n[base.selftest]\nenabled = false\n[base.trial]\n'
          'duration_s = "0.05s"\n[base.frames]\nsizes = [64]\n[[base.methods]]\n[base.methods.rfc2544_throughput]\n'
          '[[variant]]\nname = "a"\n')
for v in BAD_LISTEN:
    CASES.append(Case(f"run --metrics-listen {v}", "--metrics-listen", files={"c.toml": toml()},
                      argv=("run", "{dir}/c.toml", "--out", "{dir}/out", "--metrics-listen", v)))
    CASES.append(Case(f"study --metrics-listen {v}", "--metrics-listen", files={"s.toml": _STUDY},
                      argv=("study", "{dir}/s.toml", "--out", "{dir}/out", "--metrics-listen", v)))
cli("--metrics-listen", "sweep", *SIM, "--over", "flows=1,2", "--out", "{dir}/out", "--metrics-listen", "[::1]",
    name="sweep --metrics-listen [::1] without a port")


def _listen_on_a_busy_port() -> None:
    import socket

    from netrig.telemetry.telemetry import Telemetry

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        Telemetry(f"127.0.0.1:{s.getsockname()[1]}").close()


api("Telemetry on a port in use", "--metrics-listen", _listen_on_a_busy_port)

# ------------------------------------------------------------------------------ the Python API


def _stream_cases() -> None:
    from netrig import Stream
    from netrig.model import MAX_FRAME_SIZE, MIN_FRAME_SIZE

    for kw, want in [({"rate_pps": True}, "rate_pps"), ({"rate_pps": "x"}, "rate_pps"),
                     ({"rate_pps": math.inf}, "rate_pps"), ({"rate_pps": math.nan}, "rate_pps"),
                     ({"rate_pps": 1e300}, "rate_pps"), ({"rate_pps": -1}, "rate_pps"),
                     ({"rate": "1e300pps"}, "rate"), ({"rate": "1e400pps"}, "rate"), ({"rate": 5j}, "rate"),
                     ({"rate_pps": 1, "rate": "1kpps"}, "rate"), ({}, "rate"),
                     ({"rate_pps": 1, "frame_size": None}, "frame_size"),
                     ({"rate_pps": 1, "frame_size": [1, 2]}, "frame_size"),
                     ({"rate_pps": 1, "frame_size": "inc:64-1518:0"}, "frame_size"),
                     ({"rate_pps": 1, "frame_size": math.nan}, "frame_size"),
                     ({"rate_pps": 1, "src_ip": 5}, "src_ip"), ({"rate_pps": 1, "dst_ip": "::zz"}, "dst_ip"),
                     ({"rate_pps": 1, "src_mac": None}, "src_mac"), ({"rate_pps": 1, "vlan": "a"}, "vlan"),
                     ({"rate_pps": 1, "vlan": True}, "vlan"), ({"rate_pps": 1, "flows": {"src_ips": "a"}}, "flows"),
                     ({"rate_pps": 1, "flows": 0}, "flows"), ({"rate_pps": 1, "flows": 2.5}, "flows"),
                     ({"rate_pps": 1, "flows": {"colour": 1}}, "flows"), ({"rate_pps": 1, "ttl": 999}, "ttl"),
                     ({"rate_pps": 1, "ttl": None}, "ttl"), ({"rate_pps": 1, "src_port": 70000}, "src_port"),
                     ({"rate_pps": 1, "flow_order": "chaos"}, "flow_order"), ({"rate_pps": 1, "seed": -1}, "seed"),
                     ({"rate_pps": 1, "line_rate_bps": math.inf}, "line_rate_bps"),
                     ({"rate_pps": 1, "line_rate_bps": 1e30}, "line_rate_bps"),
                     ({"rate_pps": 1, "udp_checksum": "yes"}, "udp_checksum"), ({"rate_pps": 1, "name": 5}, "name"),
                     ({"rate_pps": 1, "tx_port": -1}, "tx_port"),
                     ({"rate_pps": 1, "protocol": "sctp"}, "protocol"), ({"rate_pps": 1, "protocol": None}, "protocol"),
                     ({"rate_pps": 1, "protocol": "tcp", "tcp_flags": "Q"}, "tcp_flags"),
                     ({"rate_pps": 1, "protocol": "tcp", "tcp_seq": -1}, "tcp_seq"),
                     ({"rate_pps": 1, "protocol": "raw", "ethertype": 0x0800}, "ethertype"),
                     ({"rate_pps": 1, "protocol": "raw", "ethertype": "0xzz"}, "ethertype"),
                     ({"rate_pps": 1, "protocol": "raw", "ethertype": 1.5}, "ethertype"),
                     ({"rate_pps": 1, "outer_vlan": 5}, "outer_vlan"),
                     ({"rate_pps": 1, "frame_size": 128, "vlan": 5, "outer_vlan": 4095}, "outer_vlan"),
                     ({"rate_pps": 1, "flows": {"vlans": 2}}, "flows.vlans"),
                     ({"rate_pps": 1, "flows": {"dst_macs": 0}}, "flows.dst_macs"),
                     ({"rate_pps": 1, "protocol": "raw", "flows": {"dst_ports": 2}}, "flows.dst_ports"),
                     ({"rate_pps": 1, "pcap": 5}, "pcap"), ({"rate_pps": 1, "pcap": ""}, "pcap"),
                     ({"rate_pps": 1, "pcap": "/nonexistent/x.pcap"}, "pcap"),
                     ({"rate_pps": 1, "pcap_stamp": True}, "pcap_stamp"),
                     ({"rate_pps": 1, "pcap": "/dev/null"}, "pcap"),
                     ({"rate_pps": 1, "pcap": "/dev/zero"}, "pcap"), ({"rate_pps": 1, "pcap": "/tmp"}, "pcap")]:
        api(f"Stream({kw})", want, lambda kw=kw: Stream(**kw))
    for size in (-1, 1 << 70):  # the frame sizes' range, not the engine integer's
        api(f"Stream(frame_size={size}) range", f"frame sizes are {MIN_FRAME_SIZE}..{MAX_FRAME_SIZE} bytes",
            lambda size=size: Stream(rate_pps=1, frame_size=size))


def _port_and_trial_cases() -> None:
    from netrig import Stream, run_trial
    from netrig.trial import Port

    lo = Port("lo")
    s1 = Stream(rate_pps=1000)
    for args, kw, want in [((5,), {}, "ifname"), (("lo",), {"queues": True}, "queues"), (("lo",), {"queues": 0}, "queues"),
                           (("lo",), {"io": "dpdk"}, "io"), (("lo",), {"busy_poll_us": -1}, "busy_poll_us"),
                           (("lo",), {"netns": 5}, "netns"), (("lo",), {"i_know_this_is_live": "yes"},
                                                               "i_know_this_is_live"),
                           (("lo",), {"ring_frames": 1.5}, "ring_frames"), (("",), {}, "ifname")]:
        api(f"Port{args}{kw}", want, lambda args=args, kw=kw: Port(*args, **kw))
    for kw, want in [({"duration_s": 1e99}, "duration_s"), ({"duration_s": math.inf}, "duration_s"),
                     ({"duration_s": "1e99s"}, "duration_s"), ({"duration_s": 1, "drain_s": 1e99}, "drain_s"),
                     ({"duration_s": 1, "drain_s": 61}, "drain_s"), ({"duration_s": 1, "warmup_s": "1e99s"}, "warmup_s"),
                     ({"frames": 10**30}, "frames"), ({"frames": "1e30"}, "frames"), ({"frames": True}, "frames"),
                     ({"duration_s": 1, "tx_cpus": "a"}, "tx_cpus"), ({"duration_s": 1, "rx_cpus": [999]}, "rx_cpus"),
                     ({"bursts": (1, 2, math.nan)}, "bursts"), ({"bursts": (1, 2)}, "bursts"),
                     ({"bursts": (10**19, 2, 0.1)}, "bursts"), ({}, "duration_s"),
                     ({"duration_s": 1, "frames": 5}, "duration_s"), ({"duration_s": 1, "late_s": -1}, "late_s"),
                     ({"duration_s": 1, "learning": "no"}, "learning")]:
        api(f"run_trial({kw})", want, lambda kw=kw: run_trial(lo, lo, [s1], **kw))
    api("run_trial(streams=5)", "streams", lambda: run_trial(lo, lo, 5, duration_s=1))
    api("run_trial(streams=['x'])", "streams[0]", lambda: run_trial(lo, lo, ["x"], duration_s=1))
    api("run_trial(tx=None)", "ports", lambda: run_trial(None, None, [s1], duration_s=1))
    api("run_trial on lo", "loopback", lambda: run_trial(lo, lo, [s1], duration_s=0.1, drain_s=0))


def _model_testbed_and_config_cases() -> None:
    from netrig.model import FrameSize, parse_count, parse_duration, parse_rate, parse_speed
    from netrig.run.config import config_from_dict
    from netrig.testbed import Testbed, TestbedOptions

    for text, want in [("inc:64-1518:0", "x"), ("inc:1518-64", "x"), ("random:64", "x"), (None, "x"), (63, "x")]:
        api(f"FrameSize.parse({text!r})", want, lambda text=text: FrameSize.parse(text, "x"))
    for fn, v in [(parse_rate, "1e300pps"), (parse_rate, math.nan), (parse_duration, "1e99s"), (parse_duration, math.inf),
                  (parse_speed, "1e99"), (parse_count, "1e999"), (parse_count, "1e30"), (parse_speed, True)]:
        api(f"{fn.__name__}({v!r})", "f", lambda fn=fn, v=v: fn(v, "f"))
    for kw, want in [({"rules": "100"}, "rules"), ({"log": "false"}, "log"), ({"tester_stack": 1}, "tester_stack"),
                     ({"cap": True}, "cap"), ({"cap_burst": 1.5}, "cap_burst"), ({"mtu": 100}, "mtu"),
                     ({"nat": 5}, "nat"), ({"ifaces": 5}, "ifaces"), ({"dut_placement": None}, "dut_placement"),
                     ({"conntrack_max": "1000"}, "conntrack_max")]:
        api(f"TestbedOptions({kw})", want, lambda kw=kw: TestbedOptions(**kw))
    for topo, kw, want in [("router", {"cap": "100kpps"}, "cap"), ("router", {"rules": 5}, "rules"),
                           ("loopback", {"nat": "static"}, "nat"), ("mesh", {}, "topology"),
                           ("external", {"ifaces": ("eth1",), "mtu": 9000}, "mtu")]:
        api(f"Testbed.create({topo!r}, {kw})", want, lambda topo=topo, kw=kw: Testbed.create(topo, **kw))
    for data, want in [(5, "config"), ({"methods": 5}, "methods"),
                       ({"methods": ["rfc2544_throughput"], "trial": {"duration_s": math.inf}}, "trial.duration_s"),
                       ({"methods": ["rfc2544_throughput"], "trial": {"duration_s": True}}, "trial.duration_s"),
                       ({"methods": [{"rfc2544_throughput": {"resolution_pct": math.nan}}]}, "resolution_pct"),
                       ({"methods": ["rfc2544_throughput"], "repetitions": 2.0}, "repetitions"),
                       ({"methods": ["rfc2544_throughput"], "ports": {"queues": "2"}}, "ports.queues")]:
        api(f"config_from_dict({data})", want, lambda data=data: config_from_dict(data))


_stream_cases()
_port_and_trial_cases()
_model_testbed_and_config_cases()


# ------------------------------------------------------------------------------ running a case

@dataclass
class Outcome:
    ok: bool
    status: int | None
    stderr: str
    why: str = ""


def run_case(case: Case, workdir: str | None = None) -> Outcome:
    """Run ``case`` in a fresh directory; handled well = exit status 2 (a ``ConfigError`` or other
    ``NetrigError`` for the API) with one error line containing ``case.expect``, no traceback and no
    internal error."""
    from netrig.cli.main import main
    from netrig.errors import NetrigError

    with tempfile.TemporaryDirectory(dir=workdir) as d:
        if case.call is not None:
            try:
                case.call()
            except NetrigError as e:
                text = str(e)
                ok = case.expect in text and "\n" not in text.strip()
                return Outcome(ok, 2, text, "" if ok else f"message lacks {case.expect!r}")
            except BaseException as e:
                return Outcome(False, None, f"{type(e).__name__}: {e}", "raw exception, not a ConfigError")
            return Outcome(False, 0, "", "accepted")
        for rel, content in case.files.items():
            p = Path(d) / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                p.write_bytes(content)
            else:
                p.write_text(content)
            p.chmod(0o600)  # as a token file must be: a case tests what it names, not the file's mode
        argv = [a.replace("{dir}", d) for a in case.argv]
        if case.config is not None:
            cfg = Path(d) / f"c{case.suffix}"
            if isinstance(case.config, bytes):
                cfg.write_bytes(case.config)
            else:
                cfg.write_text(case.config)
            argv = ["run", str(cfg), "--out", f"{d}/out", "--quiet"]
        if case.argv[:2] == ("run", "--resume") and not case.files:
            argv = ["run", "--resume", f"{d}/missing"]
        err, out = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                try:
                    status: int | None = main(argv)
                except SystemExit as e:
                    status = e.code if isinstance(e.code, int) else 2
        except BaseException:
            return Outcome(False, None, traceback.format_exc(), "raised out of main()")
        finally:
            _remove_built_testbed(out.getvalue())
        text = err.getvalue().strip()
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if status != 2:
            return Outcome(False, status, text, f"exit status {status}, not 2")
        if len(lines) != 1:
            return Outcome(False, status, text, f"{len(lines)} lines on stderr, not 1")
        if "Traceback" in text or "internal error" in text:
            return Outcome(False, status, text, "traceback or internal error")
        if case.expect not in lines[0]:
            return Outcome(False, status, text, f"the error line does not name {case.expect!r}")
        return Outcome(True, status, text)


def _remove_built_testbed(stdout: str) -> None:
    """A case that wrongly builds a test bed (``testbed up``) must not leave it standing: remove
    the one it printed (only that one: other test beds on this machine are someone else's)."""
    from netrig.testbed import down

    m = re.search(r"^testbed ([0-9a-f]{4}) \(", stdout, re.M)
    if m:
        with contextlib.suppress(Exception):
            down(m.group(1))


if os.environ.get("NETRIG_HOSTILE_LIST"):
    for c in CASES:
        print(c.name)
