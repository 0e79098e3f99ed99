"""docs/cli.md is generated from the parsers; it must match them (regenerate with
``.venv/bin/python scripts/gen-cli-doc.py > docs/cli.md``)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_cli_reference_is_current():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen-cli-doc.py")], capture_output=True, text=True,
                         check=True).stdout
    assert out == (ROOT / "docs" / "cli.md").read_text(), "docs/cli.md is stale: run scripts/gen-cli-doc.py"


def _commands(text: str) -> list[str]:
    """The netrig commands a page shows: `netrig X` inline, and lines of code blocks that run netrig."""
    import re

    inline = re.findall(r"`(?:\S*/)?netrig ([a-z][a-z0-9-]*)", text)
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)
    return inline + [c for b in blocks for c in re.findall(r"^\s*(?:\$ |sudo )?(?:\S*/)?netrig ([a-z][a-z0-9-]*)", b,
                                                           re.M)]


def test_the_docs_show_only_commands_that_exist():
    """A page that shows `netrig iperf` (there is none: the method runs from a config file) sends
    a reader to an error; every command the README and docs/ show is one of the CLI's. docs/cli.md
    is generated from the parsers and left out. The README's `netrig tcp` says what tcp shows: the
    CPU of iperf3's client and server (it said "CPU of every process")."""
    import argparse

    from netrig.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    pages = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "cli.md")]
    shown = {p.name: _commands(p.read_text()) for p in pages}
    assert sum(map(len, shown.values())) > 100, "the pattern finds the commands the pages show"
    assert {p: [c for c in cs if c not in sub.choices] for p, cs in shown.items()} == {p: [] for p in shown}
    assert _commands("run `netrig iperf` with ...") == ["iperf"]
    tcp = next(ln for ln in (ROOT / "README.md").read_text().splitlines() if "netrig tcp" in ln)
    assert "CPU of client and server" in tcp and "every process" not in tcp, tcp
