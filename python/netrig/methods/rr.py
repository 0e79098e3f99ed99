"""Request/response through the DUT (``rr``): sockperf ping-pong between the tester ports' kernel
stacks — netperf's TCP_RR/UDP_RR idea (netperf is not packaged here) — with the CPU of every party.

One stack trial per repetition (``Measurer.measure_stack``, kind ``rr``; results carry the frame
size ``stack``): one connection, one message outstanding, so transactions per second is the inverse
of the round-trip time. The document holds the round trips per second over sockperf's measured
window, exact round-trip-time percentiles (``measure.rr``: never sockperf's half-RTT), lost/duplicated
/reordered replies, each sockperf process's CPU (``wait4``) and every core's and packet kernel
thread's CPU over the trial; the cost is busy CPU-seconds (all cores) per million transactions.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from netrig.errors import ConfigError
from netrig.measure.rr import DEFAULT_PORT, PROTOCOLS, RrParams
from netrig.methodology.method import Section
from netrig.methodology.stats import check
from netrig.methods.stack import StackEntries, StackMethod, StackRepetition, stat_value
from netrig.model import LineRate
from netrig.results.typed import from_dict
from netrig.view import fmt
from netrig.view.frame_results import read_frame_results
from netrig.view.plotkit import plot, run_colour, subplots
from netrig.view.run_view import RunView, Stat
from netrig.view.table import Table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

METHOD_NAME = "rr"
#: Round-trip-time percentiles kept as statistics (key in the document → stats name).
RTT_KEYS = (("p50", "rtt_p50_us"), ("p99", "rtt_p99_us"), ("p99_9", "rtt_p99_9_us"), ("max", "rtt_max_us"))


@dataclass(frozen=True)
class _ToolCpu:
    """The tool's own CPU in its document (``measure.rr.RrResult.to_dict``)."""

    cpu_s_per_million_transactions: float | None = None


@dataclass(frozen=True)
class RrMethodParams:
    """sockperf ping-pong over ``protocol`` (tcp/udp) with ``size_bytes`` messages for ``duration_s``
    (whole seconds), at most ``mps`` messages per second (None: as fast as round trips allow), over
    IPv ``family``."""

    protocol: str = "tcp"
    size_bytes: int = 64
    duration_s: float = 10.0
    mps: int | None = None
    family: int = 4
    port: int = DEFAULT_PORT
    repetitions: int | None = None

    def __post_init__(self) -> None:
        if self.family not in (4, 6):
            raise ConfigError("family", f"{self.family!r}: must be 4 or 6")
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)
        self.tool_params()

    def tool_params(self) -> RrParams:
        return RrParams(protocol=self.protocol, size_bytes=self.size_bytes, duration_s=self.duration_s, mps=self.mps,
                        port=self.port)


@dataclass(frozen=True)
class RttUs:
    """The round-trip times of a repetition in µs (``measure.rr``'s ``rtt_us``: exact, never half-RTT)."""

    samples: int | None = None
    mean: float | None = None
    stddev: float | None = None
    min: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    p99_9: float | None = None
    max: float | None = None
    percentiles: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RrMethodResult(StackRepetition):
    """One repetition: sockperf's round trips per second and times, lost replies, sockperf's own CPU
    (``processes``, ``tool_cpu_s_per_mtrans``) and every core's (``cpu``, ``cpu_per``)."""

    protocol: str | None = None
    size_bytes: int | None = None
    tps: float | None = None
    samples: int | None = None
    rtt_us: RttUs = field(default_factory=RttUs)
    dropped: int | None = None
    tool_cpu_s_per_mtrans: float | None = None

    @classmethod
    def of(cls, family: int, doc: dict) -> RrMethodResult:
        """From the trial's document (``measure.rr`` with ``cpu`` and ``cpu_per``)."""
        tool = from_dict(_ToolCpu, doc, partial=True)
        return from_dict(cls, doc, partial=True, family=family,
                         tool_cpu_s_per_mtrans=tool.cpu_s_per_million_transactions)

    def stats_values(self) -> dict[str, float | None]:
        per = self.cpu_per.busy_s_per_mtrans
        out: dict[str, float | None] = {"tps": self.tps, "busy_cpu_s": None if self.cpu is None else self.cpu.busy_s,
                                        "busy_cpu_s_per_mtrans": per, "cpu_s_per_mtrans": per,
                                        "tool_cpu_s_per_mtrans": self.tool_cpu_s_per_mtrans,
                                        "dropped": None if self.dropped is None else float(self.dropped)}
        for key, name in RTT_KEYS:
            out[name] = getattr(self.rtt_us, key)
        return out

    def to_dict(self) -> dict:
        return {**self.stack_dict(), "protocol": self.protocol, "size_bytes": self.size_bytes, "tps": self.tps,
                "samples": self.samples, "rtt_us": dataclasses.asdict(self.rtt_us), "dropped": self.dropped,
                "tool_cpu_s_per_mtrans": self.tool_cpu_s_per_mtrans}

    @property
    def label(self) -> str:
        return f"{self.protocol or '?'} {self.size_bytes or '?'} B"


def entries(run: RunView) -> list[StackEntries[RrMethodResult]]:
    """Per configured ``rr`` method: its repetitions and its stats (``tps``, the RTT percentiles,
    ``cpu_s_per_mtrans``, ``tool_cpu_s_per_mtrans``)."""
    return METHOD.entries(run)


def _us(s: Stat | None) -> str:
    return fmt.DASH if s is None else f"{s.value:.1f} µs"


def table(run: RunView) -> Table:
    t = Table(["protocol, message", "transactions/s", "RTT p50", "RTT p99", "RTT p99.9", "RTT max",
               "sockperf CPU-s per M transactions", "all-core busy CPU-s per M transactions"],
              caption="median of repetitions; one connection, one message outstanding; round-trip times; all-core "
                      "busy time includes whatever else ran on the host: measure on a quiet one")
    for e in entries(run):
        rep0 = e.first
        tps, tool, per = e.stat("tps"), e.stat("tool_cpu_s_per_mtrans"), e.stat("cpu_s_per_mtrans")
        t.add([f"{rep0.protocol or '?'}, {rep0.size_bytes or '?'} B (IPv{rep0.family})" if rep0 else "?",
               fmt.DASH if tps is None else f"{tps.value:,.0f}",
               *(_us(e.stat(name)) for _, name in RTT_KEYS),
               fmt.DASH if tool is None else f"{tool.value:.3g}", fmt.DASH if per is None else f"{per.value:.3g}"])
    return t


@plot("rr")
def rr_plot(runs: Sequence[RunView]) -> Figure | None:
    """Request/response through the DUT: transactions per second (left) and the round-trip time's
    median, 99th and 99.9th percentile (right) of each result."""
    data = [(r, e, tps) for r in runs for e in entries(r)[:1] if (tps := e.stat("tps")) is not None]
    if not data:
        return None
    fig, axes = subplots(1, 2, w=7.6, h=max(2.2, 0.45 * len(data) + 1.2))
    names = [r.name for r, _, _ in data]
    ax = axes[0][0]
    for i, (_, _, tps) in enumerate(data):
        ax.barh([i], [tps.value], color=run_colour(i), height=0.6)
    ax.set_xlabel("transactions/s")
    ax2 = axes[0][1]
    for i, (_, e, _) in enumerate(data):
        pts = [(k, s.value) for k, n in RTT_KEYS[:3] if (s := e.stat(n)) is not None]
        ax2.plot([v for _, v in pts], [i] * len(pts), color=run_colour(i), marker="o", lw=1.2)
        for k, v in pts:
            ax2.annotate(k.replace("_", "."), (v, i), xytext=(0, 5), textcoords="offset points", fontsize=7,
                         ha="center")
    ax2.set_xlabel("round-trip time (µs)")
    for a in (ax, ax2):
        a.set_yticks(range(len(names)))
        a.set_yticklabels(names)
        a.invert_yaxis()
        a.set_ylim(len(names) - 0.5, -0.7)
    ax2.set_yticklabels([])
    return fig


SECTION = Section("rr", "Request/response through the DUT (sockperf ping-pong)")


class RequestResponse(StackMethod):
    name = METHOD_NAME
    label = "Request/response through the DUT (sockperf)"
    short_name = "rr"
    params_type = RrMethodParams
    sections = (SECTION,)
    plots = (rr_plot,)
    console_columns = ("transactions/s", "RTT p50", "RTT p99", "CPU-s/M trans")
    stack_kind = "rr"
    result_type = RrMethodResult
    section = SECTION
    plot_type = rr_plot
    ratio_title = "Request/response through the DUT"
    ratio_rows = ((lambda e: e.stat("tps"), "transactions/s", lambda v: f"{v:,.0f}"),
                  (lambda e: e.stat("rtt_p99_us"), "RTT p99", lambda v: f"{v:.1f} µs"),
                  (lambda e: e.stat("cpu_s_per_mtrans"), "busy CPU-s per M transactions", lambda v: f"{v:.3g}"))

    def table(self, run: RunView) -> Table:
        return table(run)

    def config_defaults(self, params: dict, trial_duration_s: float) -> dict:
        """sockperf runs whole seconds: the trial duration rounded, at least 1 s."""
        if "duration_s" not in params:
            params = {**params, "duration_s": float(max(1, round(trial_duration_s)))}
        return params

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        fr = read_frame_results(result, RrMethodResult)
        tps, p50, p99, c = (fr.spread(k).median for k in ("tps", "rtt_p50_us", "rtt_p99_us", "cpu_s_per_mtrans"))
        return [["stack", "-" if tps is None else f"{tps:,.0f}", "-" if p50 is None else f"{p50:.1f} µs",
                 "-" if p99 is None else f"{p99:.1f} µs", "-" if c is None else f"{c:.3g}", flags]]

    def compare_values(self, run: RunView) -> dict[str, tuple[float | None, bool]]:
        out: dict[str, tuple[float | None, bool]] = {}
        for e in entries(run):
            what = e.first.label if e.first else "? ? B"
            out[f"transactions/s ({what})"] = (stat_value(e.stat("tps")), True)
            out[f"RTT p99 ({what})"] = (stat_value(e.stat("rtt_p99_us")), False)
            out[f"CPU-s per M transactions ({what})"] = (stat_value(e.stat("cpu_s_per_mtrans")), False)
        return out


METHOD = RequestResponse()

__all__ = ["METHOD", "PROTOCOLS", "RrMethodParams", "RrMethodResult"]
