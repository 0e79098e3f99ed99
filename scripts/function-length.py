#!/usr/bin/env python3
"""The house limit on Python function length, as lint (``make lint``): a function or method is at most
80 lines from its ``def`` line to its last line, docstring and comments included. A nested function
counts within the function that holds it, and for itself.

    scripts/function-length.py [--max N] DIR_OR_FILE ...

Prints every function over the limit as ``path:line: name is N lines (limit 80)`` and exits 1 if
there is one.
"""
from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

LIMIT = 80


def too_long(path: Path, limit: int) -> Iterator[str]:
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = (node.end_lineno or node.lineno) - node.lineno + 1
            if n > limit:
                yield f"{path}:{node.lineno}: {node.name} is {n} lines (limit {limit}): split it"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=LIMIT, help="the most lines a function may have")
    ap.add_argument("paths", nargs="+", type=Path)
    a = ap.parse_args(argv)
    files = sorted(f for p in a.paths for f in ([p] if p.is_file() else p.rglob("*.py")))
    found = [line for f in files for line in too_long(f, a.max)]
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
