"""One option vocabulary (issues 27 and 39): every option of every command (``testbed up`` and the
other nested ones too) is in one table, ``netrig.methodology.vocabulary.OPTIONS``, with its value
type; an option more than one command takes has one meaning and one syntax; one concept has one
name; values carry units, names do not; old spellings still work with a one-line deprecation note.
No privileges needed: only the parsers and the option checks before anything opens."""
from __future__ import annotations

import argparse
from collections import defaultdict

import pytest

from netrig.cli import capture_bench, forward
from netrig.cli.main import build_parser, main
from netrig.errors import ConfigError
from netrig.methodology.vocabulary import FLAG, OPTIONS, VALUES, Typed, Value, _Deprecated
from netrig.model import FrameSize, Rate


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command that runs something (``testbed up``, ``trial`` …) by its name, and the root (``netrig``)."""
    out: dict[str, argparse.ArgumentParser] = {}

    def walk(p: argparse.ArgumentParser, name: str) -> None:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or not name:
            out[name or "netrig"] = p
        for s in subs:
            for sub_name, sp in s.choices.items():
                walk(sp, f"{name} {sub_name}".strip())

    walk(build_parser(), "")
    return out


def value_of(a: argparse.Action) -> Value | None:
    """An option's value type as its parser declares it (``None``: not through the vocabulary)."""
    if a.nargs == 0 or getattr(a, "old_value", False):  # forward's --json [FILE]: the flag, FILE the old form
        return FLAG
    return a.type.value if isinstance(a.type, Typed) else None


def syntax(p: argparse.ArgumentParser, a: argparse.Action) -> str:
    if value_of(a) is FLAG:
        return "flag"
    f = p._get_formatter()
    return f._format_args(a, f._get_default_metavar_for_optional(a))


def options() -> dict[str, dict[str, tuple[argparse.ArgumentParser, argparse.Action]]]:
    """``--name`` → command → (its parser, the option), deprecated spellings left out."""
    out: dict[str, dict[str, tuple[argparse.ArgumentParser, argparse.Action]]] = defaultdict(dict)
    for cmd, p in commands().items():
        for a in p._actions:
            if isinstance(a, _Deprecated) or a.help == argparse.SUPPRESS:
                continue
            for name in a.option_strings:
                if name.startswith("--") and name != "--help":
                    out[name][cmd] = (p, a)
    return out


ALL = options()
NAMES = sorted(ALL)
SHARED_NAMES = sorted(n for n, by in ALL.items() if len(by) > 1)


@pytest.mark.parametrize("name", NAMES)
def test_every_option_is_in_the_vocabulary(name):
    assert name in OPTIONS, f"{name} ({', '.join(sorted(ALL[name]))}) is not in vocabulary.OPTIONS: add it, or " \
                            "use the name the table has for its concept"


@pytest.mark.parametrize("name", NAMES)
def test_every_option_takes_the_value_type_of_the_table(name):
    want = OPTIONS[name].value if name in OPTIONS else None
    got = {cmd: value_of(a) for cmd, (_, a) in ALL[name].items()}
    wrong = {cmd: v.name if v else "undeclared (add it with vocabulary.option)" for cmd, v in got.items()
             if v is None or v != want}
    assert not wrong, f"{name} takes {want.name if want else '?'} in the table, but: {wrong}"


@pytest.mark.parametrize("name", SHARED_NAMES)
def test_a_shared_option_has_one_syntax(name):
    forms = defaultdict(list)
    for cmd, (p, a) in ALL[name].items():
        forms[syntax(p, a)].append(cmd)
    assert len(forms) == 1, f"{name} is spelt {dict(forms)}"


@pytest.mark.parametrize("name", SHARED_NAMES)
def test_a_shared_option_has_one_meaning(name):
    meaning = " ".join(OPTIONS[name].meaning.split()).replace("%", "%%") if name in OPTIONS else ""
    assert meaning, f"{name} is taken by {sorted(ALL[name])}: give it a meaning in vocabulary.OPTIONS"
    other = {cmd: h for cmd, (_, a) in ALL[name].items()
             if not (h := " ".join((a.help or "").split())).startswith(meaning)}
    assert not other, f"{name} means {OPTIONS[name].meaning!r}, but: {other}"


def test_the_vocabulary_lists_only_options_a_command_takes():
    unused = sorted(set(OPTIONS) - set(ALL))
    assert not unused, f"in vocabulary.OPTIONS, but no command takes them: {unused}"


def test_one_concept_has_one_name():
    """A value type that is one concept (a frame size, the line rate, an I/O backend, CPUs) is taken
    under its one name only: ``--frame-size``/``--sizes``/``--size`` or ``--io``/``--backend`` can
    not come back."""
    second = {n: o.value.name for n, o in OPTIONS.items() if o.value.names and n not in o.value.names}
    assert not second, f"a second name for a concept (its one name: Value.names): {second}"


def test_a_list_option_takes_a_list_of_its_singulars_values():
    """``--frame-size`` and ``--frame-sizes``, ``--rate`` and ``--rates``: the list's items are what
    the singular takes."""
    for name, opt in OPTIONS.items():
        one = OPTIONS.get(name.removesuffix("s"))
        if name.endswith("s") and one is not None:
            assert opt.value.item is one.value, f"{name} is not a list of {name.removesuffix('s')}'s values"


@pytest.mark.parametrize("name", NAMES)
def test_names_carry_no_unit_values_do(name):
    """``--conntrack-timeout 30s``, ``--sim-capacity 1Mpps``: a unit in a name (``-s``, ``-pps``) is a
    value without one."""
    assert not name.endswith(("-s", "-ms", "-us", "-ns", "-pps", "-fps", "-bps")), name


@pytest.mark.parametrize("name", [n for n, o in OPTIONS.items() if o.absent is not None])
def test_every_command_takes_it_or_the_table_says_why_not(name):
    absent = OPTIONS[name].absent or {}
    lacking, taking = [], []
    for cmd in commands():
        if cmd == "netrig":
            continue
        why = absent.get(cmd) or absent.get(cmd.split()[0])
        if why is None and cmd not in ALL[name]:
            lacking.append(cmd)
        if why is not None and cmd in ALL[name]:
            taking.append(cmd)
    assert not lacking, f"{name} is missing from {lacking} (or say why in vocabulary.OPTIONS[{name!r}].absent)"
    assert not taking, f"{name}: the table says {taking} do not take it, but they do"


def test_every_value_type_is_listed():
    used = {o.value for o in OPTIONS.values()}
    assert used <= set(VALUES), sorted(v.name for v in used - set(VALUES))


def test_the_docs_carry_the_vocabulary_tables():
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    for name in OPTIONS:
        assert f"| `{name}` |" in text, name
    for v in VALUES:
        assert f"| {v.name} |" in text, v.name


def test_values_are_parsed_once_where_they_enter():
    """The command line hands its types on: ``netrig trial`` reads a FrameSize, a Rate, seconds and
    CPU numbers, and a Stream given a FrameSize keeps it (no text is parsed again)."""
    from netrig.trial import Stream

    args = build_parser().parse_args(["trial", "--tx", "a", "--frame-size", "imix", "--rate", "50%", "--drain",
                                      "500ms", "--line-rate", "10G", "--tx-cpus", "0"])
    assert isinstance(args.frame_size, FrameSize) and args.frame_size.name == "imix"
    assert isinstance(args.rate, Rate) and (args.rate.kind, args.rate.value) == ("percent_line", 50.0)
    assert (args.drain, args.line_rate, args.tx_cpus) == (0.5, 1e10, (0,))
    s = Stream(frame_size=args.frame_size, rate=args.rate, line_rate_bps=args.line_rate)
    assert s.frame_size is args.frame_size and s.rate is args.rate
    assert Stream(frame_size="128", rate="1Mpps").frame_size == FrameSize(size=128)  # the API's edge


def test_a_late_threshold_reaches_the_trial_and_a_shortcuts_config():
    """``--late`` is a trial's ``late_s`` (``netrig trial``) and a run's ``trial.late_s`` (the
    shortcut commands); it must be above 0, one line naming it."""
    from netrig.cli.shortcuts import base_config
    from netrig.cli.trial import _run_spec

    args = build_parser().parse_args(["trial", "--tx", "a", "--rx", "b", "--late", "50ms"])
    assert _run_spec(args, [], True).kwargs()["late_s"] == 0.05
    assert _run_spec(build_parser().parse_args(["trial", "--tx", "a"]), [], False).late_s is None
    assert base_config(build_parser().parse_args(["rfc2544", "--late", "20ms"]))["trial"]["late_s"] == 0.02
    with pytest.raises(ConfigError, match="--late: must be > 0"):
        build_parser().parse_args(["rfc2544", "--late", "0"])


@pytest.mark.parametrize("argv, dest, value, note", [
    (["trial", "--size", "128"], "frame_size", FrameSize(size=128), "--size is deprecated and goes in the next "
                                                                    "release: use --frame-size"),
    (["rr", "--testbed", "router", "--size", "512"], "message_size", 512, "use --message-size"),
    (["rfc2544", "--speed", "1G"], "line_rate", 1e9, "use --line-rate"),
    (["rfc2544", "--nominal-speed", "1G"], "nominal_speed", 1e9, "use --line-rate"),
    (["rfc2544", "--sizes", "64,imix"], "frame_sizes", (FrameSize(size=64), FrameSize.parse("imix")),
     "use --frame-sizes"),
    (["ndr-pdr", "--size", "64"], "frame_sizes", (FrameSize(size=64),), "use --frame-sizes"),
    (["rfc2544", "--sim-capacity-pps", "2e6"], "sim_capacity", Rate("pps", 2e6), "use --sim-capacity"),
    (["forward", "--port", "a", "--json", "x.json"], "json_file", "x.json", "use --out DIR"),
    (["forward", "--backend", "xdp"], "io", "xdp", "use --io"),
    (["forward", "--mode", "macswap"], "forward_mode", "macswap", "use --forward-mode"),
    (["forward", "--cpus", "0"], "dut_cpus", (0,), "use --dut-cpus"),
    (["tcp", "--testbed", "router", "--port", "5300"], "server_port", 5300, "use --server-port"),
    (["capture", "--method", "mmap"], "capture_method", "mmap", "use --capture-method"),
    (["capture", "--cpu", "0"], "dut_cpus", (0,), "use --dut-cpus"),
    (["capture-bench", "--methods", "recvfrom"], "capture_methods", ("recvfrom",), "use --capture-methods"),
    (["capture-bench", "--sizes", "64"], "frame_sizes", (FrameSize(size=64),), "use --frame-sizes"),
    (["capture-bench", "--cpu", "0"], "dut_cpus", (0,), "use --dut-cpus"),
    (["selftest", "--rate", "1M"], "rates", (Rate("pps", 1e6),), "use --rates"),
    (["trial", "--tx-cpu", "0", "--tx-cpu", "0"], "tx_cpus", (0, 0), "use --tx-cpus"),
    (["testbed", "up", "nat", "--conntrack-timeout-s", "30"], "conntrack_timeout", 30.0, "use --conntrack-timeout"),
    (["trial", "--busy-poll", "50"], "busy_poll", 50e-6, "give the unit, --busy-poll 50us"),
])
def test_old_spellings_work_with_a_one_line_note(capsys, argv, dest, value, note):
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) == pytest.approx(value) if isinstance(value, float) else getattr(args, dest) == value
    err = capsys.readouterr().err
    assert note in err and len(err.strip().splitlines()) == 1, err


def test_testbed_up_takes_testbed_options(monkeypatch, capsys):
    """`testbed up --testbed-option rules=30` builds with 30 rules, as the methods' option does; the
    same option given twice with two values is one line naming both spellings; a duration takes
    units and reaches the test bed in whole seconds."""
    from netrig.cli import testbed as cli_testbed

    args = build_parser().parse_args(["testbed", "up", "firewall", "--testbed-option", "rules=30"])
    assert args.testbed_option == ["rules=30"]
    built: list[tuple[str, dict]] = []

    def create(topology, **opts):
        built.append((topology, opts))
        raise SystemExit(0)  # stop before anything is built
    monkeypatch.setattr(cli_testbed, "require_root", lambda why: None)
    monkeypatch.setattr(cli_testbed.Testbed, "create", staticmethod(create))
    for argv in (["firewall", "--testbed-option", "rules=30", "--testbed-option", "cap=5kpps"],
                 ["nat", "--conntrack-timeout", "2m", "--dut-cpus", "0"]):
        with pytest.raises(SystemExit):
            main(["testbed", "up", *argv])
    assert built == [("firewall", {"rules": 30, "cap": "5kpps"}),
                     ("nat", {"conntrack_timeout_s": 120, "dut_cpus": (0,)})]
    assert main(["testbed", "up", "firewall", "--rules", "3000", "--testbed-option", "rules=30"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--testbed-option rules" in err[0] and "--rules" in err[0], err
    assert main(["testbed", "up", "nat", "--conntrack-timeout", "1.5s"]) == 2
    assert "--conntrack-timeout: 1.5s: the kernel takes whole seconds" in capsys.readouterr().err


@pytest.mark.parametrize("text, seconds", [("500ms", 0.5), ("2s", 2.0), ("3", 3.0), ("1m", 60.0)])
def test_forward_and_capture_bench_take_durations_with_units(text, seconds):
    p = build_parser()
    fwd = p.parse_args(["forward", "--port", "a", "--duration", text, "--interval", text])
    assert forward.durations(fwd) == (seconds, seconds)
    cb = p.parse_args(["capture-bench", "--duration", text, "--drain", "500ms"])
    if seconds <= 60:
        got = capture_bench.params(cb)
        assert (got.duration_s, got.drain_s) == (seconds, 0.5)


@pytest.mark.parametrize("argv, needle", [
    (["forward", "--port", "a", "--duration", "soon"], "netrig: error: --duration: must be a duration like 2s"),
    (["testbed", "up", "nat", "--conntrack-timeout", "soon"], "--conntrack-timeout: must be a duration"),
    (["trial", "--tx", "a", "--frame-size", "63"], "--frame-size: 63 B is out of range"),
    (["rfc2544", "--frame-sizes", "64,,128"], "--frame-sizes: '64,,128' has an empty item"),
    (["capture", "--dut-cpus", "0-9999"], "--dut-cpus: '0-9999': this machine has CPUs 0.."),
    (["rfc2544", "--testbed", "simulated", "--sim-capacity", "50%"], "--sim-capacity: 50%: give it in frames/s"),
    (["trial", "--tx", "a", "--queues", "two"], "--queues: 'two' is not a whole number"),
])
def test_a_bad_value_is_one_line_naming_the_option(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1, err


def test_the_pacing_help_says_what_pacing_does():
    """Smooth pacing stops at --max-stretch (24 655 of 40 000 frames were sent once); catch-up's
    1-ms peak was 5x the rate, not "up to 2x"."""
    trial = commands()["trial"]
    [pacing] = [a for a in trial._actions if "--pacing" in a.option_strings]
    text = " ".join((pacing.help or "").split())
    assert "--max-stretch" in text and "up to 2x" not in text and "5x was measured" in text, text


def test_the_docs_say_what_catch_up_pacing_does():
    """Catch-up pacing schedules a backlog at 2x the rate, but its batches leave back to back (a 1-ms
    peak of 5x was measured): no page, docstring or config error says "up to 2x" of it any more."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    pages = ["docs/methodology.md", "docs/architecture.md", "python/netrig/run/config.py",
             "python/netrig/measure/seam.py", "python/netrig/trial.py", "python/netrig/_native.pyi",
             "crates/netrig-engine/src/traffic/pacing.rs"]
    for page in pages:
        text = " ".join((root / page).read_text().split())
        for claim in ("up to 2x the rate", "up to 2× the rate", "up to twice the rate"):
            assert claim not in text, f"{page}: {claim!r}"
    text = " ".join((root / "docs/methodology.md").read_text().split())
    assert "5× was measured" in text
