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
