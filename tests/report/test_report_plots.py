"""Every plot type renders from every golden result file, overlaid too, reproducibly."""
from __future__ import annotations

import re

import pytest
from report_golden import GOLDEN, NAT, ROUTER

from netrig.methods import REGISTRY
from netrig.report.plots import REPORT_PLOTS, all_plots
from netrig.view.plotkit import render_svg
from netrig.view.run_view import RunView

EXTERNAL = re.compile(r"""(?:href|src)\s*=\s*["']?\s*(?:https?:|//)""", re.I)


PLOTS = all_plots()
OVERLAY = sorted(n for n, p in PLOTS.items() if p.overlay)
#: Plot type -> the method it draws (the report's own plot types draw no method's data).
OWNER = {p.name: m.name for m in REGISTRY for p in m.plots}


def holds_data_for(run: RunView, name: str, runs: int = 1) -> bool:
    """The hand-made files hold data for every plot type of the methods they ran (the study's
    chart compares several runs: one has nothing to draw; tests/run/test_study.py draws it; the
    sweep's curve needs a sweep study: tests/run/test_sweep.py draws it)."""
    return (name != "study" or runs > 1) and name != "sweep" and (name not in OWNER or OWNER[name] in run.methods())


def test_registry_has_every_plot_type():
    assert set(PLOTS) >= {
        "throughput", "forwarded_vs_intended", "frame_loss", "latency_vs_frame_size", "latency_vs_load",
        "ndr_pdr", "selftest", "iperf", "timeline", "trial_timeline",
    }


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
@pytest.mark.parametrize("name", sorted(PLOTS))
def test_plot_renders_from_golden_file(path, name):
    run = RunView.load(path)
    svg = render_svg(PLOTS[name], [run])
    if path in (ROUTER, NAT) and holds_data_for(run, name):
        assert svg is not None, f"{name} drew nothing from {path.name}"
    if svg is None:
        return
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "http://" not in svg and "https://" not in svg and not EXTERNAL.search(svg)
    assert "<text" in svg  # text kept as text (svg.fonttype none): titles, axis labels
    if name not in ("timeline", "trial_timeline"):
        assert "frames/s" in svg or "µs" in svg or "%" in svg  # an axis with a unit


@pytest.mark.parametrize("name", OVERLAY)
def test_overlay_names_every_configuration(name):
    runs = [RunView.load(ROUTER), RunView.load(NAT)]
    svg = render_svg(PLOTS[name], runs)
    if not holds_data_for(runs[0], name, len(runs)):
        assert svg is None
        return
    assert svg is not None
    if name not in ("frame_loss",):
        assert "router+nat" in svg


def test_reproducible_svg():
    run = RunView.load(ROUTER)
    assert render_svg(PLOTS["throughput"], [run]) == render_svg(PLOTS["throughput"], [run])


def test_ids_prefixed_per_plot():
    run = RunView.load(ROUTER)
    a = render_svg(PLOTS["throughput"], [run], prefix="a-")
    b = render_svg(PLOTS["ndr_pdr"], [run], prefix="b-")
    ids_a = set(re.findall(r'id="([^"]+)"', a))
    ids_b = set(re.findall(r'id="([^"]+)"', b))
    assert ids_a and ids_b and not ids_a & ids_b
    for ref in re.findall(r'href="#([^"]+)"', a):
        assert ref in ids_a


def test_error_bars_and_log_scale(router_doc):
    svg = render_svg(PLOTS["latency_vs_frame_size"], [RunView.from_doc(router_doc)])
    assert "log scale" in svg and "µs" in svg


def test_no_data_draws_nothing(minimal_doc):
    run = RunView.from_doc(minimal_doc)
    for name, p in PLOTS.items():
        assert render_svg(p, [run]) is None, name


def test_plot_names_are_unique():
    names = [p.name for p in (*REGISTRY.plots(), *REPORT_PLOTS)]
    assert len(names) == len(set(names))


def test_a_very_long_name_is_shortened_in_the_plots_and_nothing_warns(tmp_path):
    """A name hundreds of characters long (a config name, a run directory) squeezed the axes to nothing
    and matplotlib warned on stderr; titles and legends now cut such a line in the middle."""
    import json
    import warnings

    from netrig.report import write_compare, write_report
    from netrig.view.plotkit import MAX_TEXT_CHARS

    files = []
    for tag, path in (("a", ROUTER), ("b", NAT)):  # between them, data for every plot type
        doc = json.loads(path.read_text())
        doc["config"]["name"] = f"{tag}-{'x' * 400}-end"
        files.append(tmp_path / f"{tag}.json")
        files[-1].write_text(json.dumps(doc))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write_report(files[0], tmp_path / "a.html")
        write_report(files[1], tmp_path / "b.html")
        write_compare(files, tmp_path / "c.html")
    assert [str(w.message) for w in caught] == []
    for page in ("a.html", "b.html", "c.html"):
        texts = re.findall(r"<text\b[^>]*>([^<]*)</text>", (tmp_path / page).read_text())
        assert texts and max(len(t) for t in texts) <= MAX_TEXT_CHARS, page
    assert any(t.startswith("b-xxx") and t.endswith("x-end") and "…" in t for t in texts)
