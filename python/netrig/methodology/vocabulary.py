"""One option vocabulary: every option of every command (the methods' own too) in one table,
:data:`OPTIONS`, with the type of its value (:class:`Value`) and, for an option more than one command
takes, its one meaning (each command's help for it begins with that meaning: :func:`helptext`).

A value is parsed once, where it enters: :func:`option` declares an option with its value type's
parser as argparse's ``type``, so a command reads a :class:`~netrig.model.FrameSize`, a
:class:`~netrig.model.Rate`, seconds or CPU numbers, never text to parse again; a bad value is one
line naming the option (``netrig: error: --drain: must be a duration like 2s ...``).

``tests/cli/test_vocabulary.py`` walks every command's parser and fails on an option missing from
the table, one whose value type differs from it, a value type taken under a second name (one
concept, one name: :attr:`Value.names`), a unit in an option's name (values carry units), a list
option whose items are not its singular's value, or a command without an option every command takes
unless the table says why (:attr:`Option.absent`). docs/cli.md's tables are made from these.

Old spellings keep working for one release: :func:`deprecated` adds a hidden alias that says, in one
line on stderr, which option replaces it.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

from netrig.errors import ConfigError
from netrig.model import FrameSize, cpu_list, parse_count, parse_duration, parse_frame_sizes, parse_rate, parse_speed

#: ``(text, option name, option) -> value``; errors are ConfigErrors naming the option.
Parser = Callable[[str, str, "Option"], Any]


@dataclasses.dataclass(frozen=True)
class Value:
    """A value type: what a user writes after an option (``syntax``, shown as ``metavar``) and what
    ``parse`` makes of it. ``names``: the only options that take it (a concept with one name; empty:
    any); ``item``: of a comma list, the value type of one item."""

    name: str
    metavar: str
    syntax: str
    parse: Parser
    names: tuple[str, ...] = ()
    item: Value | None = None


@dataclasses.dataclass(frozen=True)
class Option:
    """One option name: its value type; ``meaning``: what it means in every command that takes it
    (required when more than one does); ``syntax``: what its value looks like beyond the value
    type's; ``metavar``: instead of the value type's; ``zero``: a duration that may be 0;
    ``bare_unit``: the unit an old bare number had (still read, with a deprecation note);
    ``absent``: for an option every command takes, the commands that do not (a name or its first
    word: ``testbed``), each with why."""

    value: Value
    meaning: str = ""
    syntax: str = ""
    metavar: str = ""
    zero: bool = False
    bare_unit: str = ""
    absent: Mapping[str, str] | None = None


def _text(text: str, name: str, opt: Option) -> str:
    return text


def _integer(text: str, name: str, opt: Option) -> int:
    try:
        return int(text.strip(), 10)
    except ValueError:
        raise ConfigError(name, f"{text!r} is not a whole number") from None


def _number(text: str, name: str, opt: Option, what: str = "a number") -> float:
    try:
        v = float(text)
    except ValueError:
        raise ConfigError(name, f"{text!r} is not {what}") from None
    if not math.isfinite(v):
        raise ConfigError(name, f"must be a finite number (got {text!r})")
    return v


def _percent(text: str, name: str, opt: Option) -> float:
    return _number(text.strip().removesuffix("%"), name, opt, "a percentage (e.g. 10 or 10%)")


def _duration(text: str, name: str, opt: Option) -> float:
    if opt.bare_unit and re.fullmatch(r"\s*\d+\s*", text):
        print(f"netrig: note: {name} {text.strip()} (a bare number of {opt.bare_unit}) is deprecated and goes in "
              f"the next release: give the unit, {name} {text.strip()}{opt.bare_unit}", file=sys.stderr)
        text = text.strip() + opt.bare_unit
    return parse_duration(text, name, allow_zero=opt.zero)


def _cpus(text: str, name: str, opt: Option) -> tuple[int, ...]:
    cpus, count = cpu_list(text, name), os.cpu_count() or 1
    if not cpus or cpus[-1] >= count:
        raise ConfigError(name, f"{text!r}: this machine has CPUs 0..{count - 1}")
    return cpus


def _frame_sizes(text: str, name: str, opt: Option) -> tuple[FrameSize, ...]:
    try:
        return parse_frame_sizes(text, name)
    except ConfigError as e:  # "--frame-sizes[1]: ...": the option, its value in the message
        raise ConfigError(name, e.message) from None


def _list(item: Parser) -> Parser:
    def parse(text: str, name: str, opt: Option) -> tuple:
        items = [t.strip() for t in text.split(",")]
        if not all(items):
            raise ConfigError(name, f"{text!r} has an empty item: give items separated by single commas")
        return tuple(item(t, name, opt) for t in items)
    return parse


FLAG = Value("flag", "", "no value", _text)
TEXT = Value("text", "TEXT", "as the help says", _text)
CHOICE = Value("choice", "", "one of the words the help lists", _text)
CHOICES = Value("choices", "LIST", "a comma list of the words the help lists", _list(_text), item=CHOICE)
INTEGER = Value("integer", "N", "a whole number", _integer)
COUNT = Value("count", "N", "a count: 1000, 10k, 1M", lambda t, n, o: parse_count(t, n))
NUMBER = Value("number", "X", "a number: 0.5, 1e-3", _number)
PERCENT = Value("percent", "PCT", "a percentage: 10 or 10%", _percent)
PERCENTS = Value("percents", "LIST", "a comma list of percentages: 25,50,100", _list(_percent), item=PERCENT)
DURATION = Value("duration", "T", "a duration with a unit: 10s, 500ms, 2m (a bare number is seconds)", _duration)
RATE = Value("rate", "RATE", "100kpps, 1.5Mpps, 10Gbps (L1 bit/s), 10Gbps-l2, 50% (of the line rate), max",
             lambda t, n, o: parse_rate(t, n))
RATES = Value("rates", "LIST", "a comma list of rates: 1M,500k", _list(lambda t, n, o: parse_rate(t, n)), item=RATE)
SPEED = Value("speed", "SPEED", "a bit rate: 10G, 25Gbps, 1e10", lambda t, n, o: parse_speed(t, n),
              names=("--line-rate",))
FRAME_SIZE = Value("frame size", "SIZE", "bytes incl. the 4-byte FCS (64), imix, simple-imix, mix:64x7+570x4, "
                                         "random:64-1518, inc:64-1518:64", lambda t, n, o: FrameSize.parse(t, n),
                   names=("--frame-size",))
FRAME_SIZES = Value("frame sizes", "LIST", "a comma list of frame sizes: 64,512,1518; rfc (the RFC 2544 sizes)",
                    _frame_sizes, names=("--frame-sizes",), item=FRAME_SIZE)
CPUS = Value("CPUs", "CPUS", "a CPU list: 1, 0-1, 0,2-3", _cpus, names=("--tx-cpus", "--rx-cpus", "--dut-cpus"))
IO = Value("I/O backend", "MODE", "auto, af_xdp, af_packet, socket", _text, names=("--io",))
INTERFACE = Value("interface", "IF[@NS]", "an interface, optionally in network namespace NS", _text)
NETNS = Value("namespace", "NS", "a network namespace: a name under /run/netns", _text)
FILE = Value("file", "FILE", "a file path", _text)
DIR = Value("directory", "DIR", "a directory path", _text)
ADDRESS = Value("address", "ADDR:PORT", "an address and a port: 127.0.0.1:9000, [::1]:9000, 9000", _text)

#: Every value type, in the order docs/cli.md lists them.
VALUES = (FLAG, TEXT, CHOICE, CHOICES, INTEGER, COUNT, NUMBER, PERCENT, PERCENTS, DURATION, RATE, RATES, SPEED,
          FRAME_SIZE, FRAME_SIZES, CPUS, IO, INTERFACE, NETNS, FILE, DIR, ADDRESS)

_NO_TRAFFIC = "sends no traffic"
_FROM_RESULT = "draws stored results"

OPTIONS: dict[str, Option] = {
    # ------------------------------------------------------------------ where and on what
    "--testbed": Option(TEXT, "the test bed: a topology built for the run and removed after it, or the id of one "
                              "`netrig testbed up` built (left standing)",
                        "a topology of `netrig testbed list` (simulated too, where a command simulates) or a "
                        "test-bed id", metavar="NAME|ID"),
    "--testbed-option": Option(TEXT, "a test-bed option (repeatable)", "typed as in a config file: rules=100, "
                                                                        "cap=1Mpps, log=false, mtu=9000",
                               metavar="KEY=VALUE"),
    "--share-testbed": Option(FLAG, "run although another run holds the test bed (a shared-DUT experiment)"),
    "--knob": Option(TEXT, "a host tuning knob set for the run and restored after it (repeatable)",
                     "e.g. dut.features.gro=off, host.sysctl.net.core.busy_poll=50", metavar="TARGET.KIND.NAME=VALUE"),
    "--port": Option(INTERFACE, "an interface to use (repeatable where a command takes several)", "IF or IF@NS"),
    "--netns": Option(NETNS, "the network namespace of the interfaces"),
    "--tx": Option(INTERFACE, "`netrig trial`: a transmit interface"),
    "--rx": Option(INTERFACE, "`netrig trial`: a receive interface"),
    "--tx-netns": Option(NETNS), "--rx-netns": Option(NETNS), "--event-netns": Option(NETNS),
    "--io": Option(IO, "port I/O backend", absent={
        "ports": "probes every backend", "testbed": "builds and shows test beds (the forwarder DUT's I/O is "
        "--forward-backend)", "run": "the config file's ports.io", "study": "each variant's config: ports.io",
        "report": _FROM_RESULT, "compare": _FROM_RESULT, "demo": "runs its fixed config (auto)",
        "capture": "its I/O is --capture-method", "capture-bench": "compares the --capture-methods (the tester "
        "picks its own)", "tcp": "iperf3 sends through the testers' kernel stacks, not through netrig's ports",
        "rr": "sockperf sends through the testers' kernel stacks, not through netrig's ports"}),
    "--queues": Option(INTEGER, "queues per port, one worker each"),
    "--busy-poll": Option(DURATION, zero=True, bare_unit="us"),
    "--ring-frames": Option(INTEGER, "frames a port's rings hold per queue (0: the backend's default)"),
    "--tx-cpus": Option(CPUS, "the CPUs of the tester's TX workers (queue i on the i-th)"),
    "--rx-cpus": Option(CPUS, "the CPUs of the tester's RX workers (queue i on the i-th)"),
    "--dut-cpus": Option(CPUS, "the CPUs of the DUT's packet processing (a test bed's DUT, the forwarder's "
                               "workers, the capture process)"),
    "--i-know-this-is-live": Option(FLAG, "transmit even on an interface that looks live"),
    "--family": Option(INTEGER, "the IP family", "4 or 6"),
    # ------------------------------------------------------------------ what is sent
    "--frame-size": Option(FRAME_SIZE, "one frame size incl. the 4-byte FCS, or a distribution of sizes"),
    "--frame-sizes": Option(FRAME_SIZES, "the frame sizes to test, each incl. the 4-byte FCS",
                            "imix, simple-imix and the other distributions count as one size each"),
    "--rate": Option(RATE, "the intended rate", "a %NDR rate (80%NDR) where the help says"),
    "--rates": Option(RATES, "`netrig selftest`: the rates to prove, frames/s"),
    "--line-rate": Option(SPEED, "the line rate: the link speed % rates and reports relate to", absent={
        "ports": "shows each interface's speed", "testbed": _NO_TRAFFIC, "run": "the config file's "
        "line_rate.speed_bps", "study": "each variant's config: line_rate.speed_bps", "report": _FROM_RESULT,
        "compare": _FROM_RESULT, "demo": "runs its fixed config (1 Gbit/s)", "forward": "forwards what arrives: "
        "no rate relates to a line rate", "capture": "counts what arrives", "capture-bench": "its loads are % "
        "of the tester's proven limit", "serve": "an OTG config sets its flows' rates (a % is of the port's "
        "speed)", "rr": "one message is in flight: a round-trip rate is no share of a link's speed"}),
    "--protocol": Option(CHOICE, "what the test traffic carries", "udp, tcp (and more where the help says)",
                         metavar="PROTO"),
    "--frames": Option(COUNT), "--ramp": Option(TEXT, metavar="FROM:TO:STEPS"),
    "--pacing": Option(CHOICE), "--max-stretch": Option(PERCENT),
    "--tcp-flags": Option(TEXT, metavar="LETTERS"), "--tcp-seq": Option(INTEGER),
    "--ethertype": Option(TEXT, metavar="HEX"), "--flows": Option(INTEGER), "--vary": Option(TEXT, metavar="RANGE=N"),
    "--flow-order": Option(CHOICE), "--seed": Option(INTEGER), "--pcap": Option(FILE), "--pcap-stamp": Option(FLAG),
    "--src-mac": Option(TEXT, metavar="MAC"), "--dst-mac": Option(TEXT, metavar="MAC"),
    "--peer-mac": Option(TEXT, metavar="MAC"), "--src-ip": Option(TEXT, metavar="ADDR"),
    "--dst-ip": Option(TEXT, metavar="ADDR"), "--vlan": Option(INTEGER, metavar="ID"),
    "--outer-vlan": Option(INTEGER, metavar="ID"),
    # ------------------------------------------------------------------ when
    "--duration": Option(DURATION, "how long"),
    "--drain": Option(DURATION, "the longest wait for frames in flight after the last one is sent (a trial on this "
                                "host ends it once every frame has arrived)", zero=True),
    "--late": Option(DURATION, "latency above which a frame is late: lost to RFC 2544, left out of the percentiles"),
    "--warmup": Option(DURATION, zero=True),
    "--interval": Option(DURATION, "how often a count is taken (and a line printed)", zero=True),
    "--event": Option(TEXT, "events under load: a shell command line run mid-trial (repeatable, paired with --at)",
                      metavar="CMD"),
    "--at": Option(DURATION, "when the matching --event runs, after the measured run begins", zero=True),
    "--event-timeout": Option(DURATION, "kill an --event command still running after this long"),
    # ------------------------------------------------------------------ what is reported
    "--json": Option(FLAG, "print the result as JSON on stdout instead of tables", absent={
        "testbed down": "prints the one test bed it removed", "testbed repair": "prints what it restored",
        "testbed list": "prints the topologies and their options", "testbed clean": "prints what it removed",
        "report": "writes HTML and Markdown and prints their paths", "compare": "writes HTML and Markdown and "
        "prints their paths", "demo": "writes its results (result.json) and report.html", "study": "writes each "
        "variant's result.json and compare.html", "capture": "prints its JSON summary always (the DUT of "
        "capture-bench)"}),
    "--out": Option(DIR, "the result directory"),
    "--output": Option(FILE, "the HTML file to write", metavar="HTML"),
    "--quiet": Option(FLAG, "no live progress display"),
    "--monitor": Option(FLAG, "sample the DUT and the host during every trial"),
    "--monitor-remote": Option(TEXT, "sample a DUT on another host over SSH during every trial",
                               "an ~/.ssh/config alias or user@host", metavar="HOST"),
    "--metrics-listen": Option(ADDRESS, "serve the run's counters as OpenMetrics for Prometheus",
                               "PORT alone: loopback; 0: any free port"),
    "--resume": Option(DIR, "continue the stopped run in DIR"),
    "--no-probe": Option(FLAG), "--force": Option(FLAG), "--verbose": Option(FLAG), "--version": Option(FLAG),
    # ------------------------------------------------------------------ the shortcut commands and their methods
    "--repetitions": Option(INTEGER, "repeat every method N times"),
    "--no-selftest": Option(FLAG, "skip the RFC 8219 self-test on the loopback test bed"),
    "--sim-capacity": Option(RATE, "with --testbed simulated: the simulated DUT's capacity", "frames/s: 1Mpps, 1e6"),
    "--tests": Option(CHOICES), "--resolution": Option(PERCENT, "the search resolution, % of the line rate "
                                                                "(capture-bench: of the tester's limit)"),
    "--step": Option(PERCENT), "--search": Option(CHOICE), "--search-step": Option(PERCENT),
    "--latency-trials": Option(INTEGER), "--b2b-trials": Option(INTEGER),
    "--reset-command": Option(TEXT, metavar="CMD"), "--pdr-loss": Option(NUMBER), "--width": Option(NUMBER),
    "--exceed-ratio": Option(NUMBER), "--initial-duration": Option(DURATION), "--final-duration": Option(DURATION),
    "--duration-sum": Option(DURATION), "--implementation": Option(CHOICE), "--profile": Option(CHOICE),
    "--peak": Option(PERCENT), "--base": Option(PERCENT), "--points": Option(INTEGER),
    "--connections": Option(INTEGER), "--establish-rate": Option(RATE), "--capacity": Option(TEXT, metavar="LIST"),
    "--max-rate": Option(RATE), "--skip": Option(CHOICES), "--ndr": Option(RATE), "--ndr-trial": Option(DURATION),
    "--confidence": Option(PERCENT), "--leak-growth": Option(PERCENT), "--host-memory-verdict": Option(FLAG),
    "--cpu-spike": Option(PERCENT), "--loss-min-frames": Option(INTEGER),
    "--over": Option(TEXT, metavar="DIMENSION=V1,V2,..."), "--method": Option(TEXT, metavar="NAME"),
    "--name": Option(TEXT), "--factor": Option(NUMBER),
    # ------------------------------------------------------------------ tcp, rr
    "--server-port": Option(INTEGER, "the server's TCP or UDP port number"),
    "--streams": Option(INTEGER), "--direction": Option(CHOICE), "--window": Option(INTEGER, metavar="BYTES"),
    "--mss": Option(INTEGER, metavar="BYTES"), "--length": Option(INTEGER, metavar="BYTES"),
    "--message-size": Option(INTEGER, "`netrig rr`: request and reply payload bytes", metavar="BYTES"),
    "--mps": Option(TEXT, metavar="N|max"),
    # ------------------------------------------------------------------ test beds (the test-bed options' words)
    "--rules": Option(INTEGER), "--cap": Option(TEXT, metavar="RATE"), "--cap-burst": Option(INTEGER),
    "--nat": Option(CHOICE), "--conntrack-max": Option(INTEGER), "--conntrack-buckets": Option(INTEGER),
    "--conntrack-timeout": Option(DURATION), "--dut-placement": Option(CHOICE),
    "--dut-ring": Option(INTEGER, metavar="FRAMES"), "--log": Option(FLAG), "--flowtable": Option(FLAG),
    "--ifaces": Option(TEXT, metavar="LIST"), "--tester-stack": Option(FLAG), "--mtu": Option(INTEGER),
    "--forward-mode": Option(CHOICE, "the forwarder's mode (the forwarder topology's DUT, `netrig forward`)",
                             metavar="MODE"),
    "--forward-backend": Option(CHOICE, metavar="BACKEND"),
    "--capture-method": Option(CHOICE, "the capture application's method", "one of those `netrig capture --help` "
                                                                           "lists", metavar="METHOD"),
    "--capture-methods": Option(CHOICES), "--capture-batch": Option(INTEGER),
    # ------------------------------------------------------------------ forward, capture, capture-bench, serve
    "--batch": Option(INTEGER, "frames per receive batch"), "--stats": Option(FILE), "--loads": Option(PERCENTS),
    "--faults": Option(TEXT, "a seeded fault injector on every egress queue: a DUT that drops, duplicates and "
                             "reorders as asked, to test a tester", metavar="KEY=VALUE,..."),
    "--listen": Option(ADDRESS), "--http": Option(FLAG), "--cert": Option(FILE), "--key": Option(FILE),
    "--client-ca": Option(FILE), "--token-file": Option(FILE),
    "--ptp-socket": Option(FILE), "--agent": Option(TEXT, metavar="NAME=URL"),
    "--agent-token-file": Option(FILE), "--agent-ca": Option(FILE), "--agent-cert": Option(FILE),
    "--agent-key": Option(FILE), "--capture-mb": Option(INTEGER), "--record": Option(DIR),
}


def helptext(name: str, detail: str = "") -> str:
    """The help of option ``name``: its meaning (if it has one), then what this command adds (``detail``)."""
    meaning = OPTIONS[name].meaning.replace("%", "%%")  # argparse formats help with %
    return f"{meaning}; {detail}" if meaning and detail else meaning or detail


class BadValue(Exception):
    """A value its option's parser refused; not a ``ValueError``, so argparse passes it on and netrig's
    parser raises the ConfigError it carries (one line naming the option, as every netrig error)."""

    def __init__(self, error: ConfigError) -> None:
        super().__init__(str(error))
        self.error = error


class Typed:
    """argparse's ``type`` of option ``name``: its value type's parser."""

    def __init__(self, name: str, opt: Option) -> None:
        self.name, self.option = name, opt
        self.__name__ = opt.value.name  # argparse names a type by it

    @property
    def value(self) -> Value:
        return self.option.value

    def __call__(self, text: str) -> Any:
        try:
            return self.option.value.parse(text, self.name, self.option)
        except ConfigError as e:
            raise BadValue(e) from None

    def __repr__(self) -> str:
        return f"Typed({self.name!r}, {self.option.value.name})"


def option(p: argparse.ArgumentParser, name: str, detail: str = "", *, flags: tuple[str, ...] = (),
           **kw: Any) -> argparse.Action:
    """Add option ``name`` of :data:`OPTIONS` to ``p``: its value type's parser and metavar, and its
    help (the meaning, then ``detail``); ``flags``: short spellings (``-o``); ``kw`` as argparse takes."""
    opt = OPTIONS[name]
    if opt.value is FLAG:
        kw.setdefault("action", "store_true")
    else:
        kw.setdefault("type", Typed(name, opt))
        kw.setdefault("metavar", opt.metavar or opt.value.metavar or None)
    return p.add_argument(*flags, name, help=helptext(name, detail), **kw)


class _Deprecated(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, new: str = "", note: str = "", extend: bool = False,
                 **kw: Any) -> None:
        self.new, self.note, self.extend, self.said = new, note, extend, False
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if not self.said:  # once, however often the old spelling is repeated
            how = f" ({self.note})" if self.note else ""
            print(f"netrig: note: {option_string} is deprecated and goes in the next release: use {self.new}{how}",
                  file=sys.stderr)
            self.said = True
        if self.nargs == 0:
            setattr(namespace, self.dest, self.const)
        elif self.extend:
            setattr(namespace, self.dest, (*(getattr(namespace, self.dest, None) or ()), *values))
        else:
            setattr(namespace, self.dest, values)


def deprecated(p: argparse.ArgumentParser, old: str, new: str, *, dest: str | None = None, note: str = "",
               extend: bool = False) -> None:
    """Hidden ``old`` spelling of option ``new`` (its value type; stored in ``new``'s place, ``dest``
    when it differs): works, and says once on stderr that ``new`` replaces it. ``extend``: each use
    adds to the list (an old repeatable option whose new one takes a list)."""
    opt = OPTIONS[new]
    kw: dict[str, Any] = {"nargs": 0, "const": True} if opt.value is FLAG else {"type": Typed(old, opt)}
    p.add_argument(old, action=_Deprecated, new=new, note=note, extend=extend, help=argparse.SUPPRESS,
                   dest=dest or new.lstrip("-").replace("-", "_"), default=argparse.SUPPRESS, **kw)


class JsonFlag(argparse.Action):
    """``--json``, the flag; ``--json FILE`` (``netrig forward``'s old spelling) still writes FILE
    (into ``json_file``), with the deprecation note. ``old_value``: a flag whose value is the old form."""

    old_value = True

    def __init__(self, option_strings: list[str], dest: str, **kw: Any) -> None:
        kw.pop("metavar", None)
        super().__init__(option_strings, dest, nargs="?", const=True, default=False, metavar="FILE", **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, True)
        if isinstance(values, str):
            print(f"netrig: note: {option_string} FILE is deprecated and goes in the next release: use --out DIR "
                  "(writes DIR/forward.json)", file=sys.stderr)
            namespace.json_file = values
