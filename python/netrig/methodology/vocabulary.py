"""One option vocabulary: every option more than one command takes (the methods' own options
too), with its one meaning and its one value syntax. Each command's help for such an option begins
with the meaning written here (:func:`helptext`); docs/cli.md's table is made from this table
(``scripts/gen-cli-doc.py``), and ``tests/cli/test_vocabulary.py`` fails when a command gives a
shared name another meaning or syntax.

Old spellings keep working for one release: :func:`deprecated` adds a hidden alias that says, in one
line on stderr, which option replaces it.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

DURATION = "a duration with a unit: 10s, 500ms, 2m (a bare number is seconds)"
RATE = "100kpps, 1.5Mpps, 10Gbps (L1 bit/s), 10Gbps-l2, 50% (of the line rate)"
SPEED = "a bit rate: 10G, 25Gbps, 1e10"


@dataclasses.dataclass(frozen=True)
class Shared:
    """A shared option: what it means in every command, and what its value looks like."""

    meaning: str
    syntax: str = ""  # what a value looks like, beyond the option's metavar (flags: "")


SHARED: dict[str, Shared] = {
    "--testbed": Shared("the test bed: a topology built for the run and removed after it, or the id of one "
                        "`netrig testbed up` built (left standing)",
                        "a topology of `netrig testbed list` (simulated too, where a command simulates) or a "
                        "test-bed id"),
    "--testbed-option": Shared("a test-bed option (repeatable)", "typed as in a config file: rules=100, "
                                                                 "cap=1Mpps, log=false, mtu=9000"),
    "--share-testbed": Shared("run although another run holds the test bed (a shared-DUT experiment)"),
    "--knob": Shared("a host tuning knob set for the run and restored after it (repeatable)",
                     "e.g. dut.features.gro=off, host.sysctl.net.core.busy_poll=50"),
    "--duration": Shared("how long", DURATION),
    "--drain": Shared("how long to wait for frames in flight after the last one is sent", DURATION),
    "--interval": Shared("how often a count is taken (and a line printed)", DURATION),
    "--event": Shared("events under load: a shell command line run mid-trial (repeatable, paired with --at)"),
    "--at": Shared("when the matching --event runs, after the measured run begins", DURATION),
    "--event-timeout": Shared("kill an --event command still running after this long", DURATION),
    "--io": Shared("port I/O backend", "auto, af_xdp, af_packet, socket"),
    "--queues": Shared("queues per port, one worker each"),
    "--sizes": Shared("frame sizes, incl. the 4-byte FCS", "a list: 64,512,1518, rfc, imix, simple-imix"),
    "--rate": Shared("the intended rate", RATE + ", max; a %NDR rate where the help says"),
    "--line-rate": Shared("the line rate: the link speed for % rates and for reporting", SPEED),
    "--nominal-speed": Shared("the line rate to assume when the interface reports none", SPEED),
    "--monitor": Shared("sample the DUT and the host during every trial"),
    "--monitor-remote": Shared("sample a DUT on another host over SSH during every trial", "an ~/.ssh/config alias "
                                                                                           "or user@host"),
    "--json": Shared("print the result as JSON on stdout instead of tables"),
    "--out": Shared("the result directory"),
    "--quiet": Shared("no live progress display"),
    "--metrics-listen": Shared("serve the run's counters as OpenMetrics for Prometheus",
                               "PORT alone: loopback; 0: any free port"),
    "--i-know-this-is-live": Shared("transmit even on an interface that looks live"),
    "--family": Shared("the IP family", "4 or 6"),
    "--port": Shared("an interface to use (repeatable where a command takes several)", "IF or IF@NS"),
    "--netns": Shared("the network namespace of the interfaces", "a name under /run/netns"),
    "--batch": Shared("frames per receive batch"),
    "--cpu": Shared("the CPU of the capture process"),
    "--protocol": Shared("what the test traffic carries", "udp, tcp (and more where the help says)"),
    "--resolution": Shared("the search resolution, % of the line rate (capture-bench: of the tester's limit)"),
    "--capture-method": Shared("the capture application's method", "one of those `netrig capture --help` lists"),
    "--resume": Shared("continue the stopped run in DIR"),
    "--server-port": Shared("the server's TCP or UDP port number"),
    "--output": Shared("the HTML file to write"),
    "--repetitions": Shared("repeat every method N times"),
    "--no-selftest": Shared("skip the RFC 8219 self-test on the loopback test bed"),
    "--sim-capacity-pps": Shared("with --testbed simulated: the simulated DUT's capacity", "frames/s: 1e6"),
}

#: Names kept apart on purpose, each with one meaning (not shared, listed so nobody merges them back).
APART: dict[str, str] = {
    "--frame-size": "`netrig trial`: one frame size incl. FCS (was --size)",
    "--message-size": "`netrig rr`: request and reply payload bytes (was --size)",
    "--rates": "`netrig selftest`: the rates to prove, a comma list (was --rate)",
}

def helptext(name: str, detail: str = "") -> str:
    """The help of shared option ``name``: its meaning, then what this command adds (``detail``)."""
    meaning = SHARED[name].meaning.replace("%", "%%")  # argparse formats help with %
    return f"{meaning}; {detail}" if detail else meaning


class _Deprecated(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, new: str = "", note: str = "", append: bool = False,
                 **kw: Any) -> None:
        self.new, self.note, self.append = new, note, append
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        how = f" ({self.note})" if self.note else ""
        print(f"netrig: note: {option_string} is deprecated and goes in the next release: use {self.new}{how}",
              file=sys.stderr)
        if self.nargs == 0:
            setattr(namespace, self.dest, self.const)
        elif self.append:
            setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])
        else:
            setattr(namespace, self.dest, values)


def deprecated(p: argparse.ArgumentParser, old: str, new: str, *, dest: str | None = None, note: str = "",
               flag: bool = False, append: bool = False, type: Any = None) -> None:
    """Hidden ``old`` spelling of option ``new`` (stored in ``new``'s place, ``dest`` when it differs):
    works, and says once on stderr that ``new`` replaces it."""
    kw: dict[str, Any] = {"nargs": 0, "const": True} if flag else {}
    if type is not None:
        kw["type"] = type
    p.add_argument(old, action=_Deprecated, new=new, note=note, append=append, help=argparse.SUPPRESS,
                   dest=dest or new.lstrip("-").replace("-", "_"), default=argparse.SUPPRESS, **kw)


class JsonFlag(argparse.Action):
    """``--json``, the flag; ``--json FILE`` (``netrig forward``'s old spelling) still writes FILE
    (into ``json_file``), with the deprecation note. ``old_value``: a flag whose value is the old form."""

    old_value = True

    def __init__(self, option_strings: list[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs="?", const=True, default=False, metavar="FILE", **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, True)
        if isinstance(values, str):
            print(f"netrig: note: {option_string} FILE is deprecated and goes in the next release: use --out DIR "
                  "(writes DIR/forward.json)", file=sys.stderr)
            namespace.json_file = values
