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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from netrig.errors import ConfigError
from netrig.measure.rr import DEFAULT_PORT, PROTOCOLS, RrParams
from netrig.methodology.method import Section
from netrig.methodology.stats import check
from netrig.methods.stack import StackMethod, stat_value
from netrig.view import fmt
from netrig.view.plotkit import plot, run_colour, subplots
from netrig.view.run_view import RunView, Stat, num, obj, objs
from netrig.view.table import Table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

METHOD_NAME = "rr"
#: Round-trip-time percentiles kept as statistics (key in the document → stats name).
RTT_KEYS = (("p50", "rtt_p50_us"), ("p99", "rtt_p99_us"), ("p99_9", "rtt_p99_9_us"), ("max", "rtt_max_us"))


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
class RrMethodResult:
    family: int
    doc: dict

    @property
    def headline_pps(self) -> float | None:
        return None

    def stats_values(self) -> dict[str, float | None]:
        rtt = obj(self.doc, "rtt_us")
        per = obj(self.doc, "cpu_per")
        out: dict[str, float | None] = {"tps": num(self.doc, "tps"), "busy_cpu_s": num(obj(self.doc, "cpu"), "busy_s"),
                                        "busy_cpu_s_per_mtrans": num(per, "busy_s_per_mtrans"),
                                        "cpu_s_per_mtrans": num(per, "busy_s_per_mtrans"),
                                        "tool_cpu_s_per_mtrans": num(self.doc, "cpu_s_per_million_transactions"),
                                        "dropped": num(self.doc, "dropped")}
        for key, name in RTT_KEYS:
            out[name] = num(rtt, key)
        return out

    def to_dict(self) -> dict:
        d = self.doc
        return {"family": self.family, "protocol": d.get("protocol"), "size_bytes": d.get("size_bytes"),
                "duration_s": d.get("duration_s"), "tps": d.get("tps"), "samples": d.get("samples"),
                "rtt_us": d.get("rtt_us"), "dropped": d.get("dropped"), "processes": d.get("processes"),
                "cpu": d.get("cpu"), "cpu_per": d.get("cpu_per"), "simulated": bool(d.get("simulated"))}


def entries(run: RunView) -> list[dict]:
    out = []
    for r in run.method_results(METHOD_NAME):
        st = obj(r, "stats")
        reps = [x for x in objs(r, "repetitions") if x.get("complete", True) is not False]
        e = {"reps": reps, "tps": Stat.from_stats(st.get("tps")),
             "per_mtrans": Stat.from_stats(st.get("cpu_s_per_mtrans")),
             "tool_per_mtrans": Stat.from_stats(st.get("tool_cpu_s_per_mtrans"))}
        for _, name in RTT_KEYS:
            e[name] = Stat.from_stats(st.get(name))
        out.append(e)
    return out


def _us(s: Stat | None) -> str:
    return fmt.DASH if s is None else f"{s.value:.1f} µs"


def table(run: RunView) -> Table:
    t = Table(["protocol, message", "transactions/s", "RTT p50", "RTT p99", "RTT p99.9", "RTT max",
               "sockperf CPU-s per M transactions", "all-core busy CPU-s per M transactions"],
              caption="median of repetitions; one connection, one message outstanding; round-trip times; all-core "
                      "busy time includes whatever else ran on the host: measure on a quiet one")
    for e in entries(run):
        rep0 = e["reps"][0] if e["reps"] else {}
        tps = e["tps"]
        t.add([f"{rep0.get('protocol', '?')}, {rep0.get('size_bytes', '?')} B (IPv{rep0.get('family', 4)})",
               fmt.DASH if tps is None else f"{tps.value:,.0f}", _us(e["rtt_p50_us"]), _us(e["rtt_p99_us"]),
               _us(e["rtt_p99_9_us"]), _us(e["rtt_max_us"]),
               fmt.DASH if e["tool_per_mtrans"] is None else f"{e['tool_per_mtrans'].value:.3g}",
               fmt.DASH if e["per_mtrans"] is None else f"{e['per_mtrans'].value:.3g}"])
    return t


@plot("rr")
def rr_plot(runs: Sequence[RunView]) -> Figure | None:
    """Request/response through the DUT: transactions per second (left) and the round-trip time's
    median, 99th and 99.9th percentile (right) of each result."""
    data = [(r, e) for r in runs for e in entries(r)[:1] if e["tps"] is not None]
    if not data:
        return None
    fig, axes = subplots(1, 2, w=7.6, h=max(2.2, 0.45 * len(data) + 1.2))
    names = [r.name for r, _ in data]
    ax = axes[0][0]
    for i, (_, e) in enumerate(data):
        ax.barh([i], [e["tps"].value], color=run_colour(i), height=0.6)
    ax.set_xlabel("transactions/s")
    ax2 = axes[0][1]
    for i, (_, e) in enumerate(data):
        pts = [(k, e[n].value) for k, n in RTT_KEYS[:3] if e[n] is not None]
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
    ratio_rows = (("tps", "transactions/s", lambda v: f"{v:,.0f}"),
                  ("rtt_p99_us", "RTT p99", lambda v: f"{v:.1f} µs"),
                  ("per_mtrans", "busy CPU-s per M transactions", lambda v: f"{v:.3g}"))

    def entries(self, run: RunView) -> list[dict]:
        return entries(run)

    def table(self, run: RunView) -> Table:
        return table(run)

    def config_defaults(self, params: dict, trial_duration_s: float) -> dict:
        """sockperf runs whole seconds: the trial duration rounded, at least 1 s."""
        if "duration_s" not in params:
            params = {**params, "duration_s": float(max(1, round(trial_duration_s)))}
        return params

    def console_rows(self, result: dict, flags: str) -> list[list[str]]:
        st = result.get("stats", {})

        def med(k: str) -> float | None:
            return (st.get(k) or {}).get("median")

        tps, p50, p99, c = med("tps"), med("rtt_p50_us"), med("rtt_p99_us"), med("cpu_s_per_mtrans")
        return [["stack", "-" if tps is None else f"{tps:,.0f}", "-" if p50 is None else f"{p50:.1f} µs",
                 "-" if p99 is None else f"{p99:.1f} µs", "-" if c is None else f"{c:.3g}", flags]]

    def compare_values(self, run: RunView) -> dict[str, tuple[float | None, bool]]:
        out: dict[str, tuple[float | None, bool]] = {}
        for e in entries(run):
            rep0 = e["reps"][0] if e["reps"] else {}
            what = f"{rep0.get('protocol', '?')} {rep0.get('size_bytes', '?')} B"
            out[f"transactions/s ({what})"] = (stat_value(e, "tps"), True)
            out[f"RTT p99 ({what})"] = (stat_value(e, "rtt_p99_us"), False)
            out[f"CPU-s per M transactions ({what})"] = (stat_value(e, "per_mtrans"), False)
        return out


METHOD = RequestResponse()

__all__ = ["METHOD", "PROTOCOLS", "RrMethodParams", "RrMethodResult"]
