"""A table as plain data (header + rows of strings), drawn as HTML, Markdown or on the console."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from netrig.model import size_label, size_sort_key
from netrig.view.fmt import DASH


class HasFrameSize(Protocol):
    @property
    def frame_size(self) -> Any: ...


E = TypeVar("E", bound=HasFrameSize)


@dataclass
class Table:
    """A table: ``header`` (column titles), ``rows`` (cells as text), optional per-row CSS class."""

    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    row_class: list[str] = field(default_factory=list)
    caption: str = ""

    def add(self, row: Sequence[Any], cls: str = "") -> None:
        self.rows.append([str(c) for c in row])
        self.row_class.append(cls)

    def __bool__(self) -> bool:
        return bool(self.rows)


def plain(v: Any) -> str:
    """A JSON value as table text: ``—`` for null, yes/no, ``%g`` floats, lists joined."""
    if v is None:
        return DASH
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, dict)):
        if isinstance(v, list) and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in v):
            return ", ".join(str(x) for x in v) if v else "[]"
        return json.dumps(v, sort_keys=False, ensure_ascii=False)
    return str(v)


def flatten(d: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested objects as ``("a.b.c", value)`` rows; lists of scalars joined, other lists as JSON."""
    out: list[tuple[str, str]] = []
    if isinstance(d, dict):
        for k, v in d.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict) and v:
                out += flatten(v, key)
            else:
                out.append((key, plain(v)))
    else:
        out.append((prefix, plain(d)))
    return out


def key_value_table(d: dict) -> Table:
    t = Table(["key", "value"])
    for k, v in flatten(d):
        t.add([k, v])
    return t


# -- comparisons ----------------------------------------------------------------------------------
def by_size(entries: Sequence[E]) -> dict[str, E]:
    """Entries (each with a ``frame_size`` attribute) by frame-size label."""
    return {size_label(e.frame_size): e for e in entries}


def sizes_of(data: Sequence[dict[str, Any]]) -> list[str]:
    """Every frame-size label of several runs' :func:`by_size` maps, in display order."""
    labs: list[str] = []
    for d in data:
        for lab in d:
            if lab not in labs:
                labs.append(lab)
    return sorted(labs, key=lambda s: size_sort_key(size_of_label(s)))


def size_of_label(lab: str) -> Any:
    """A frame-size label back to a result's ``frame_size`` (``"64"`` → ``64``)."""
    return int(lab) if lab.isdigit() else lab


def ratio_header(names: Sequence[str], *lead: str) -> list[str]:
    """``frame size, <lead…>, <baseline> (baseline), <run>, % of baseline, …``."""
    return ["frame size", *lead, f"{names[0]} (baseline)"] + [x for n in names[1:] for x in (n, "% of baseline")]
