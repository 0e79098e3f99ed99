"""Every bad input of ``tests/hostile_cases.py`` is handled well: one error line naming the option or
field, exit status 2, no traceback (``scripts/hostile.py`` prints the counts)."""
from __future__ import annotations

import argparse

import pytest
from tests.conftest import IS_ROOT
from tests.hostile_cases import CASES, run_case

from netrig.methods import REGISTRY

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="needs root: some cases open interfaces and namespaces")


def test_enough_cases():
    assert len(CASES) >= 250
    assert len({c.name for c in CASES}) == len(CASES), "case names are unique"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_line_naming_the_field(case, tmp_path):
    out = run_case(case, str(tmp_path))
    assert out.ok, f"{out.why}: status {out.status}\n{out.stderr}"


#: Options that take no bad value: where to write, and on/off switches without a value.
NO_BAD_VALUE = {"-h", "--help", "--out", "--quiet", "--no-selftest", "--json"}


def test_every_option_of_every_shortcut_command_has_a_bad_input():
    from netrig.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in [*(c.name for c in REGISTRY.commands()), "selftest"]:
        p = sub.choices[name]
        # old spellings (hidden, deprecated: tests/cli/test_vocabulary.py) are the new ones' values
        options = {o for a in p._actions if a.help != argparse.SUPPRESS for o in a.option_strings
                   if o.startswith("--")} - NO_BAD_VALUE
        tried = {a.split("=")[0] for c in CASES if c.argv[:1] == (name,) for a in c.argv if a.startswith("--")}
        assert options <= tried, f"netrig {name}: no bad-input case for {sorted(options - tried)}"
