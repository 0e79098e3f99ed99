"""One option vocabulary (issue 27): an option name that more than one command takes has one meaning
(the help of every command begins with the meaning in ``netrig.methodology.vocabulary.SHARED``) and one
syntax (flag, or the same value form); old spellings still work with a one-line deprecation note.
No privileges needed: only the parsers and the option checks before anything opens."""
from __future__ import annotations

import argparse
from collections import defaultdict

import pytest

from netrig.cli import capture_bench, forward
from netrig.cli.main import build_parser, main
from netrig.methodology.vocabulary import SHARED, _Deprecated


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command that runs something (``testbed up``, ``trial`` …), by its name."""
    out: dict[str, argparse.ArgumentParser] = {}

    def walk(p: argparse.ArgumentParser, name: str) -> None:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs and name:
            out[name] = p
        for s in subs:
            for sub_name, sp in s.choices.items():
                walk(sp, f"{name} {sub_name}".strip())

    walk(build_parser(), "")
    return out


def syntax(p: argparse.ArgumentParser, a: argparse.Action) -> str:
    if a.nargs == 0 or getattr(a, "old_value", False):  # forward's --json [FILE]: the flag, FILE the old form
        return "flag"
    f = p._get_formatter()
    return f._format_args(a, f._get_default_metavar_for_optional(a))


def options() -> dict[str, dict[str, tuple[str, str]]]:
    """``--name`` → command → (syntax, help), deprecated spellings left out."""
    out: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)
    for cmd, p in commands().items():
        for a in p._actions:
            if isinstance(a, _Deprecated) or a.help == argparse.SUPPRESS:
                continue
            for name in a.option_strings:
                if name.startswith("--") and name != "--help":
                    out[name][cmd] = (syntax(p, a), " ".join((a.help or "").split()))
    return out


SHARED_NAMES = sorted(n for n, by in options().items() if len(by) > 1)


@pytest.mark.parametrize("name", SHARED_NAMES)
def test_a_shared_option_has_one_syntax(name):
    by = options()[name]
    forms = defaultdict(list)
    for cmd, (form, _) in by.items():
        forms[form].append(cmd)
    assert len(forms) == 1, f"{name} is spelt {dict(forms)}"


@pytest.mark.parametrize("name", SHARED_NAMES)
def test_a_shared_option_has_one_meaning(name):
    assert name in SHARED, f"{name} is taken by {sorted(options()[name])}: add it to vocabulary.SHARED"
    meaning = " ".join(SHARED[name].meaning.split()).replace("%", "%%")
    other = {cmd: h for cmd, (_, h) in options()[name].items() if not h.startswith(meaning)}
    assert not other, f"{name} means {SHARED[name].meaning!r}, but: {other}"


def test_the_vocabulary_lists_only_shared_options():
    assert sorted(SHARED) == SHARED_NAMES


def test_the_docs_carry_the_vocabulary_table():
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    for name in SHARED:
        assert f"| `{name}` |" in text, name


@pytest.mark.parametrize("argv, dest, value, note", [
    (["trial", "--size", "128"], "frame_size", "128", "--size is deprecated and goes in the next release: use "
                                                       "--frame-size"),
    (["rr", "--testbed", "router", "--size", "512"], "message_size", 512, "use --message-size"),
    (["rfc2544", "--speed", "1G"], "line_rate", "1G", "use --line-rate"),
    (["forward", "--port", "a", "--json", "x.json"], "json_file", "x.json", "use --out DIR"),
    (["tcp", "--testbed", "router", "--port", "5300"], "server_port", 5300, "use --server-port"),
    (["capture", "--method", "mmap"], "capture_method", "mmap", "use --capture-method"),
    (["selftest", "--rate", "1M"], "rates", "1M", "use --rates"),
])
def test_old_spellings_work_with_a_one_line_note(capsys, argv, dest, value, note):
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) == value
    err = capsys.readouterr().err
    assert note in err and len(err.strip().splitlines()) == 1, err


def test_testbed_up_takes_testbed_options(monkeypatch, capsys):
    """`testbed up --testbed-option rules=30` builds with 30 rules, as the methods' option does; the
    same option given twice with two values is one line naming both spellings."""
    from netrig.cli import testbed as cli_testbed

    args = build_parser().parse_args(["testbed", "up", "firewall", "--testbed-option", "rules=30"])
    assert args.testbed_option == ["rules=30"]
    built: list[tuple[str, dict]] = []

    def create(topology, **opts):
        built.append((topology, opts))
        raise SystemExit(0)  # stop before anything is built
    monkeypatch.setattr(cli_testbed, "require_root", lambda why: None)
    monkeypatch.setattr(cli_testbed.Testbed, "create", staticmethod(create))
    with pytest.raises(SystemExit):
        main(["testbed", "up", "firewall", "--testbed-option", "rules=30", "--testbed-option", "cap=5kpps"])
    assert built == [("firewall", {"rules": 30, "cap": "5kpps"})]
    assert main(["testbed", "up", "firewall", "--rules", "3000", "--testbed-option", "rules=30"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--testbed-option rules" in err[0] and "--rules" in err[0], err


@pytest.mark.parametrize("text, seconds", [("500ms", 0.5), ("2s", 2.0), ("3", 3.0), ("1m", 60.0)])
def test_forward_and_capture_bench_take_durations_with_units(text, seconds):
    p = build_parser()
    fwd = p.parse_args(["forward", "--port", "a", "--duration", text, "--interval", text])
    assert forward.durations(fwd) == (seconds, seconds)
    cb = p.parse_args(["capture-bench", "--duration", text, "--drain", "500ms"])
    if seconds <= 60:
        got = capture_bench.params(cb)
        assert (got.duration_s, got.drain_s) == (seconds, 0.5)


def test_a_bad_duration_is_one_line_naming_the_option(capsys):
    assert main(["forward", "--port", "a", "--duration", "soon"]) == 2
    err = capsys.readouterr().err
    assert "--duration" in err and len(err.strip().splitlines()) == 1, err


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
             "crates/netrig-engine/src/pacing.rs"]
    for page in pages:
        text = " ".join((root / page).read_text().split())
        for claim in ("up to 2x the rate", "up to 2× the rate", "up to twice the rate"):
            assert claim not in text, f"{page}: {claim!r}"
    text = " ".join((root / "docs/methodology.md").read_text().split())
    assert "5× was measured" in text
