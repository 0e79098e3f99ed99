"""Reports drawn from result files alone: a self-contained HTML page with plots, and a Markdown
summary beside it; comparisons of several results overlaid with ratios to a baseline.

    from netrig.report import write_report, write_compare
    html = write_report("out/result.json")                   # out/report.html + out/report.md
    html = write_compare(["router.json", "nat.json"], "compare.html")
    html = write_study("results/service-cost")                # its compare.html + each variant's report

Every problem with an input file is a one-line ``ResultError`` naming the file. Results are read
only through ``netrig.results`` (by ``RunView.load``).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from netrig._native import __version__
from netrig.errors import ResultError
from netrig.report import tables
from netrig.report.html import compare_html, report_html
from netrig.report.markdown import compare_markdown, report_markdown
from netrig.report.study_record import StudyRecord
from netrig.run import consistency
from netrig.view.markdown import table_md
from netrig.view.run_view import RunView, unique_names

__all__ = ["RunView", "load_run", "render_report", "render_compare", "write_report", "write_compare",
           "write_study", "default_report_path"]


def load_run(path: str | os.PathLike) -> RunView:
    """Read one result file (``result.json``, its directory, or a ``trials.ndjson``)."""
    return RunView.load(path)


def default_report_path(result_path: str | os.PathLike) -> Path:
    """``out/result.json`` → ``out/report.html``; ``x.json`` → ``x.html`` (beside the result)."""
    p = Path(result_path)
    if p.is_dir():
        return p / "report.html"
    if p.name in ("result.json", "trials.ndjson"):
        return p.with_name("report.html")
    return p.with_suffix(".html")


def render_report(run: RunView) -> tuple[str, str]:
    """``(html, markdown)`` of one result."""
    return report_html(run, __version__), report_markdown(run)


def render_compare(runs: Sequence[RunView]) -> tuple[str, str]:
    """``(html, markdown)`` comparing ``runs``; the first is the baseline."""
    unique_names(runs)
    return compare_html(runs, __version__), compare_markdown(runs)


def _write(path: Path, text: str | None) -> None:
    """Write atomically (temp file + rename) so a viewer never sees half a report; a write that
    fails leaves no temp file behind. ``text`` None only tries: a report that cannot be written
    is said before it is drawn (drawing takes seconds), not after."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text or "")
        if text is None:
            os.unlink(tmp)
            return
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise ResultError(f"{path}: cannot write the report: {e.strerror or e}") from None


def write_report(result_path: str | os.PathLike | Sequence[str | os.PathLike],
                 out_html: str | os.PathLike | None = None, notify: Callable[[str], None] | None = None) -> Path:
    """Draw the report of ``result_path``: HTML at ``out_html`` (default: ``report.html`` beside the
    result) and Markdown beside it (same name, ``.md``). Returns the HTML path. ``notify`` hears
    what reading left out (a torn last record of a trial log), one line each.

    ``result_path`` may also be a list of results of one configuration (e.g. the demo's
    ``rfc2544/result.json`` and ``ndr-pdr/result.json``): they are drawn as one report."""
    paths = [result_path] if isinstance(result_path, (str, os.PathLike)) else list(result_path)
    if not paths:
        raise ResultError("report: no result file given")
    views = [load_run(p) for p in paths]
    if notify is not None:
        for line in (x for v in views for x in v.torn):
            notify(line)
    if len(views) > 1:  # results drawn as one: do their methods agree across them?
        consistency.annotate_parts([v.doc for v in views])
    run = RunView.merge(views)
    out = Path(out_html) if out_html is not None else default_report_path(paths[0])
    _write(out, None)
    html_text, md = render_report(run)
    md = md.replace("\n\n", f"\n\nHTML report with plots: `{out.name}`\n\n", 1)
    _write(out, html_text)
    _write(out.with_suffix(".md"), md)
    return out


def write_compare(result_paths: Sequence[str | os.PathLike], out_html: str | os.PathLike = "compare.html") -> Path:
    """Overlay several results (the first is the baseline): HTML at ``out_html``, Markdown beside it."""
    if len(result_paths) < 2:
        raise ResultError("compare: give at least two result files (the first is the baseline)")
    runs = [load_run(p) for p in result_paths]
    out = Path(out_html)
    _write(out, None)
    html_text, md = render_compare(runs)
    _write(out, html_text)
    _write(out.with_suffix(".md"), md)
    return out


def write_study(study_dir: str | os.PathLike) -> Path:
    """A study's reports (``netrig.run.study``): each finished variant's own report, and
    ``compare.html`` (+ ``.md``) in ``study_dir``: every variant against the baseline. Returns the
    comparison's path."""
    d = Path(study_dir)
    study = StudyRecord.load(d / "study.json")
    variants = study.variants
    paths = [p for v in variants if (p := d / v.dir / "result.json").exists()]
    base = d / variants[0].dir / "result.json" if variants else None
    if base is None or not paths or paths[0] != base:
        raise ResultError(f"{d}: the baseline variant {variants[0].name if variants else '?'} has no result; "
                          "nothing to compare against (run the study again to continue it)")
    for p in paths:
        write_report(p)
    runs = [load_run(p) for p in paths]
    unique_names(runs)
    out = d / "compare.html"
    html_text = compare_html(runs, __version__, study=study)
    md = compare_markdown(runs, out.name)
    if len(runs) > 1:
        study_md = "## Study: every variant against the baseline\n\n" + table_md(tables.study_table(runs)) + "\n\n"
        if study.sweep is not None:
            study_md = ("## Sweep: every headline number against the swept value\n\n"
                        + table_md(tables.sweep_table(runs, study)) + "\n\n" + study_md)
        at = md.find("## Summary per configuration")
        md = md[:at] + study_md + md[at:] if at >= 0 else md + "\n" + study_md
    _write(out, html_text)
    _write(out.with_suffix(".md"), md)
    return out
