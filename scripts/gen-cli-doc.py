#!/usr/bin/env python3
"""Regenerate docs/cli.md from the argparse definitions, so the CLI reference stays true.

    .venv/bin/python scripts/gen-cli-doc.py > docs/cli.md
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
os.environ["COLUMNS"] = "100"

from netrig.cli.main import build_parser
from netrig.methodology.vocabulary import OPTIONS, VALUES, _Deprecated

INTRO = """# netrig command-line reference

Generated from the parsers by `scripts/gen-cli-doc.py`; do not edit by hand.

Conventions: options are kebab-case on the command line and the same words in snake_case in config
files and JSON (a config key adds the unit its value is in: `--duration` is `duration_s`, `--line-rate`
is `line_rate.speed_bps`). Rates take units (`100kpps`, `1.5Mpps`, `10Gbps` = layer-1 bit/s, `10Gbps-l2`,
`50%` of the line rate); durations too (`10s`, `500ms`, `2m`). Frame sizes include the 4-byte FCS.
Every error is one line on stderr naming the option or field and the remedy (no traceback, also
for an unprivileged user: "needs root or CAP_NET_ADMIN/CAP_NET_RAW/CAP_BPF"); exit status 2 for bad
input or an error, 1 for a trial that ran but is invalid (or a failed threshold), 130 after Ctrl-C,
143 after SIGTERM (129 after SIGHUP); partial results are kept. Inputs have limits (a trial of at
most one week, a drain of at most 60 s, at most 10^9 frames/s or 10 Tbit/s per stream, 10^15
frames); NaN and infinities are refused everywhere. Without a terminal (CI logs) a run prints one
timestamped line per trial instead of the live display.

## Resuming an interrupted run

Every run (`netrig run`, `rfc2544`, `ndr-pdr`, `livelock`, `selftest`, `demo`) writes
`config.json` and the header of `trials.ndjson` into its output directory before the first
trial, and every finished trial is fsync'd before the next starts. However a run ends — Ctrl-C,
SIGTERM or SIGHUP, `kill -9`, power loss or the OOM killer, a full disk, a test bed that broke — it
continues with one command, which the interruption message prints:

```
netrig run --resume DIR
```

It reads the run's configuration from `DIR/config.json` (else from the trial log's header),
replays the finished trials and measures the rest; a torn last line (a record cut off by the
crash) is removed first, and said so. A run that fails before its first trial (a bad test-bed
option, no permission) leaves no output directory behind; `netrig demo` resumes a crashed demo
instead of starting over.

## The transmit guard

netrig refuses to send test traffic on an interface that looks like a live network: `lo`, an
interface that carries a default route (unless its gateway is in a benchmarking range, as on a test
bed with `tester_stack`), or one with an address outside the benchmarking ranges 198.18.0.0/15 and
2001:2::/48 (link-local addresses do not count). The check runs in the interface's namespace when
the engine opens a port that will transmit (test frames, or a receiving port's learning frames), so
the API, every command and every method are covered; test beds pass by construction. The error
names the interface, the rule that fired and the override: `--i-know-this-is-live` (`netrig trial`
and the shortcut commands), `ports.i_know_this_is_live = true` in a config file,
`Port(..., i_know_this_is_live=True)` in the API.

## Test beds by id

`netrig testbed up TOPOLOGY` builds a test bed and prints its id; `netrig trial --testbed ID` and
`--testbed ID` on every shortcut command (or `testbed.id` in a config file) run on it: ports,
namespaces, MACs and addresses come from the test bed, and it is left standing. Before every
trial a run checks it and restores what a DUT link flap removed (routes, neighbours, addresses);
`netrig testbed status` says `broken` and what is missing, `netrig testbed repair ID` restores it.
The reset command sees the test bed in its environment: `NETRIG_DUT_NETNS`, `NETRIG_DUT_IFACES`,
`NETRIG_TX_NETNS`, `NETRIG_TX_IFNAME`, `NETRIG_RX_NETNS`, `NETRIG_RX_IFNAME`, `NETRIG_TESTBED_ID`,
`NETRIG_TESTBED_TOPOLOGY`.
"""


def commands(parser: argparse.ArgumentParser, prefix: str = "netrig") -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command's parser (``netrig testbed up`` …), the groups left out."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [(prefix, parser)]
    return [c for s in subs for name, p in s.choices.items() for c in commands(p, f"{prefix} {name}")]


def first_clause(text: str) -> str:
    """``text`` up to its first "; " outside parentheses."""
    depth = 0
    for i, c in enumerate(text):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth == 0 and text.startswith("; ", i):
            return text[:i]
    return text


def vocabulary(parser: argparse.ArgumentParser) -> str:
    """The value types and the option table (``netrig.methodology.vocabulary``), what every command
    takes and why some do not, and the old spellings that still work."""
    takers: dict[str, list[str]] = {}
    helps: dict[str, str] = {}
    old: dict[tuple[str, str], list[str]] = {}
    for cmd, p in [("netrig", parser), *commands(parser)]:
        for a in p._actions:
            if isinstance(a, _Deprecated):
                old.setdefault((a.option_strings[0], a.new), []).append(f"`{cmd}`")
                continue
            for name in a.option_strings:
                takers.setdefault(name, []).append(cmd.removeprefix("netrig ") or "netrig")
                helps.setdefault(name, first_clause(" ".join((a.help or "").replace("%%", "%").split())))
    rows = ["## One option vocabulary", "",
            "Every option of every command is in one table, with the type of its value; an option more than one "
            "command takes means the same and is written the same in each, one concept has one name, and values "
            "carry units, names do not (`tests/cli/test_vocabulary.py` holds every command to these tables; they "
            "are made from `netrig.methodology.vocabulary`). A value is parsed once, where it enters.", "",
            "| value type | written | what it looks like |", "|---|---|---|"]
    rows += [f"| {v.name} | {f'`{v.metavar}`' if v.metavar else ''} | {v.syntax} |" for v in VALUES]
    rows += ["", "| option | value | meaning | commands |", "|---|---|---|---|"]
    for name, o in sorted(OPTIONS.items()):
        what = f"{o.meaning or helps.get(name, '')}{' (' + o.syntax + ')' if o.syntax else ''}".replace("|", "\\|")
        cmds = takers.get(name, [])
        where = "every command but those below" if o.absent is not None else \
            ", ".join(dict.fromkeys(cmds)) if len(cmds) < 8 else f"{len(cmds)} commands"
        rows.append(f"| `{name}` | {o.value.name} | {what} | {where} |")
    rows += ["", "Options every command takes, and the commands that do not, with why:", "",
             "| option | command | why not |", "|---|---|---|"]
    rows += [f"| `{name}` | `{cmd}` | {why} |" for name, o in OPTIONS.items() if o.absent
             for cmd, why in o.absent.items()]
    rows += ["", "Old spellings work for one release, with a one-line note on stderr:", "",
             "| old | new | commands |", "|---|---|---|"]
    rows += [f"| `{o}` | `{n}` | {', '.join(cmds)} |" for (o, n), cmds in sorted(old.items())]
    rows.append("| `--json FILE` | `--out DIR` (writes `DIR/forward.json`) | `netrig forward` |")
    rows.append("| `--busy-poll N` (a bare number of microseconds) | `--busy-poll Nus` | `netrig trial` |")
    return "\n".join(rows) + "\n"


def walk(parser: argparse.ArgumentParser, prefix: str, out: list[str]) -> None:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    out.append(f"## `{prefix}`\n\n```\n{parser.format_help().rstrip()}\n```\n")
    for s in subs:
        for name, p in s.choices.items():
            walk(p, f"{prefix} {name}", out)


def main() -> None:
    parser = build_parser()
    out = [INTRO, vocabulary(parser)]
    walk(parser, "netrig", out)
    print("\n".join(out))


if __name__ == "__main__":
    main()
