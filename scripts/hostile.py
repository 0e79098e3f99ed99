#!/usr/bin/env python3
"""Count how many of the bad inputs in tests/hostile_cases.py netrig handles well (one error line
naming the option or field, exit status 2, no traceback), and list the others.

    sudo .venv/bin/python scripts/hostile.py [-v]
"""
import os
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "python"))

from tests.hostile_cases import CASES, run_case  # noqa: E402


def main() -> int:
    verbose = "-v" in sys.argv
    t0 = time.monotonic()
    bad = []
    for case in CASES:
        out = run_case(case)
        if not out.ok:
            bad.append((case, out))
        elif verbose:
            print(f"ok   {case.name}: {out.stderr}")
    for case, out in bad:
        print(f"BAD  {case.name}: {out.why}\n     {out.stderr[:300]!r}")
    print(f"{len(CASES) - len(bad)} of {len(CASES)} bad inputs handled well "
          f"({time.monotonic() - t0:.0f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
