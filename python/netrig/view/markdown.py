"""Markdown pieces of a report: tables and sections (the summary written beside the HTML)."""
from __future__ import annotations

from netrig.view.table import Table


def md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def table_md(t: Table) -> str:
    if not t:
        return ""
    lines = ["| " + " | ".join(md_escape(h) for h in t.header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(t.header))) + "|"]
    lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in t.rows]
    if t.caption:
        lines.append(f"\n*{t.caption}*")
    return "\n".join(lines) + "\n"


def section_md(title: str, body: str, none: str) -> str:
    return f"## {title}\n\n{body or none}\n"
