"""Plots that do not mislead: a lower bound ("≥ X, tester-limited") is an arrow, an invalid trial an
open marker, each with its legend entry, and a frames/s axis is logarithmic when its values span decades."""
from __future__ import annotations

import pytest

from netrig.report.plots import all_plots
from netrig.view.plotkit import INVALID_LABEL, LOWER_BOUND_LABEL, draw, render_svg
from netrig.view.run_view import RunView

PLOTS = all_plots()


def _results(doc: dict, method: str) -> list[dict]:
    return next(e for e in doc["summary"] if e.get("method") == method)["results"]


def _svg(doc: dict, name: str) -> str:
    svg = render_svg(PLOTS[name], [RunView.from_doc(doc)])
    assert svg is not None
    return svg


def _tester_limited_throughput(doc: dict) -> dict:
    """The 64-B RFC 2544 throughput a lower bound: the search ended at the tester's limit (as netrig
    writes it now: ``bounded_by_tester`` too, else the reader takes it for an older result's flag)."""
    for rep in _results(doc, "rfc2544_throughput")[0]["repetitions"]:
        rep.update(tester_limited=True, bounded_by_tester=True, upper_pps=None)
    return doc


@pytest.mark.parametrize("name", ["throughput", "selftest"])
def test_a_tester_limited_throughput_is_drawn_as_a_lower_bound(router_doc, name):
    plain = _svg(router_doc, name)
    bounded = _svg(_tester_limited_throughput(router_doc), name)
    assert LOWER_BOUND_LABEL not in plain
    assert LOWER_BOUND_LABEL in bounded and bounded != plain


def test_a_tester_limited_goal_is_drawn_as_a_lower_bound(router_doc):
    plain = _svg(router_doc, "ndr_pdr")
    for rep in _results(router_doc, "mlrsearch")[0]["repetitions"]:
        for g in rep["goals"]:
            g["tester_limited"] = True
            g["upper_bound_pps"] = None
    bounded = _svg(router_doc, "ndr_pdr")
    assert LOWER_BOUND_LABEL not in plain
    assert LOWER_BOUND_LABEL in bounded and "the tester's limit: ≥" in bounded


def test_invalid_frame_loss_trials_are_open_markers(router_doc):
    plain = _svg(router_doc, "forwarded_vs_intended")
    curve = _results(router_doc, "rfc2544_frame_loss")[0]["repetitions"][0]["curve"]
    assert len(curve) > 2
    curve[0].update(valid=False, backpressure=False)
    marked = _svg(router_doc, "forwarded_vs_intended")
    assert INVALID_LABEL not in plain
    assert INVALID_LABEL in marked


def test_selftest_axis_is_log_when_the_ceilings_span_decades(router_doc):
    """A stalled self-test proved 7 k and 3 k beside 16 M required: on a linear axis the bars were
    invisible; the rates now span more than 30 ×, and the axis is logarithmic."""
    ceilings = router_doc["selftest"]["ceilings"]
    assert len(ceilings) >= 2
    linear_svg = _svg(router_doc, "selftest")
    linear = draw(PLOTS["selftest"], [RunView.from_doc(router_doc)])
    assert linear is not None and linear.axes[0].get_yscale() == "linear"
    ceilings[0].update(required_rate_pps=16.4e6, proven_rate_pps=7e3, passed=False)
    ceilings[1].update(proven_rate_pps=3e3, passed=False)
    fig = draw(PLOTS["selftest"], [RunView.from_doc(router_doc)])
    assert fig is not None and fig.axes[0].get_yscale() == "log"
    log_svg = _svg(router_doc, "selftest")
    assert log_svg != linear_svg
    for tick in ("10k", "100k", "1M", "10M"):  # one tick a decade
        assert f">{tick}<" in log_svg
