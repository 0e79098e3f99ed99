"""HTML pieces of a report: tables, figures with inline SVG, empty-section notes, collapsibles.

Everything is escaped here; nothing loads from the network (the page's CSP forbids it anyway).
"""
from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from netrig.view import plotkit
from netrig.view.run_view import RunView
from netrig.view.table import Table


def esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def table_html(t: Table, cls: str = "", left: int = 1) -> str:
    """``t`` as an HTML table; the first ``left`` columns are left-aligned."""
    if not t:
        return ""
    head = "".join(f'<th{" class=l" if i < left else ""} scope="col">{esc(h)}</th>' for i, h in enumerate(t.header))
    rows = []
    for row, rc in zip(t.rows, t.row_class):
        cells = "".join(f'<td{" class=l" if i < left else ""}>{esc(c)}</td>' for i, c in enumerate(row))
        rows.append(f'<tr class="{esc(rc)}">{cells}</tr>' if rc else f"<tr>{cells}</tr>")
    cap = f"<caption>{esc(t.caption)}</caption>" if t.caption else ""
    return f'<table class="{esc(cls)}">{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def kv_html(t: Table) -> str:
    if not t:
        return ""
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in t.rows)
    return f'<table class="kv"><tbody>{rows}</tbody></table>'


def empty(what: str) -> str:
    return f'<p class="empty">{esc(what)}</p>'


def details(summary: str, body: str, open_: bool = False) -> str:
    return f'<details{" open" if open_ else ""}><summary>{esc(summary)}</summary>{body}</details>'


def figure(p: plotkit.Plot, runs: Sequence[RunView], prefix: str | None = None, **opts: Any) -> str:
    """A plot as ``<figure>`` with inline SVG and its description as caption; ``""`` if no data."""
    svg = plotkit.render_svg(p, runs, prefix=prefix, **opts)
    if svg is None:
        return ""
    return f'<figure class="plot" data-plot="{esc(p.name)}">{svg}<figcaption>{esc(p.caption)}</figcaption></figure>'
