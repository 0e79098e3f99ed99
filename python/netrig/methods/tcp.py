"""TCP through the DUT (``tcp``): iperf3 between the tester ports' kernel stacks, N parallel streams,
with the CPU of every party over the trial — the service-cost lab report's measurement.

One stack trial per repetition (``Measurer.measure_stack``; frame size plays no part: results carry
the frame size ``stack``). Its document holds iperf3's goodput (total, per direction, per stream, per
second), retransmits, RTT and cwnd, each iperf3 process's own CPU-seconds (``wait4``), and ``cpu``:
every core's user/system/irq/softirq CPU-seconds and the packet kernel threads' (``ksoftirqd``,
``napi``) over the trial (``netrig.monitor.cpu``). The headline is the goodput; the cost is busy
CPU-seconds (all cores) per Gbit of goodput — on one host that is the tester's and the DUT's
together, so compare it between DUT variants rather than reading it as the DUT's alone.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from netrig.measure.tcp import DEFAULT_PORT, DIRECTIONS, TcpParams
from netrig.methodology.method import Section
from netrig.methodology.stats import check
from netrig.methods.stack import StackMethod, stat_value
from netrig.view import fmt
from netrig.view.html import table_html
from netrig.view.plotkit import plot, run_colour, subplots
from netrig.view.run_view import RunView, Stat, num, obj, objs
from netrig.view.table import Table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

METHOD_NAME = "tcp"


@dataclass(frozen=True)
class TcpMethodParams:
    """iperf3 with ``streams`` parallel connections for ``duration_s`` in ``direction`` over IPv
    ``family``; ``window_bytes``/``mss``/``length_bytes`` as iperf3's ``-w``/``-M``/``-l``."""

    streams: int = 5
    duration_s: float = 10.0
    direction: str = "forward"
    family: int = 4
    window_bytes: int | None = None
    mss: int | None = None
    length_bytes: int | None = None
    port: int = DEFAULT_PORT
    repetitions: int | None = None

    def __post_init__(self) -> None:
        if self.family not in (4, 6):
            from netrig.errors import ConfigError
            raise ConfigError("family", f"{self.family!r}: must be 4 or 6")
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)
        self.tool_params()  # validates the rest, naming the field

    def tool_params(self) -> TcpParams:
        return TcpParams(streams=self.streams, duration_s=self.duration_s, direction=self.direction,
                         window_bytes=self.window_bytes, mss=self.mss, length_bytes=self.length_bytes, port=self.port)


@dataclass(frozen=True)
class TcpMethodResult:
    """One repetition: the trial's document (``measure.tcp`` + ``cpu``)."""

    family: int
    doc: dict

    @property
    def headline_pps(self) -> float | None:
        return None

    @property
    def goodput_bps(self) -> float | None:
        return num(self.doc, "goodput_bps")

    def stats_values(self) -> dict[str, float | None]:
        cpu, per = obj(self.doc, "cpu"), obj(self.doc, "cpu_per")
        cores = obj(cpu, "cores")
        softirq = sum(num(c, "softirq") or 0.0 for c in cores.values() if isinstance(c, dict)) if cores else None
        return {"goodput_bps": self.goodput_bps, "retransmits": num(self.doc, "retransmits"),
                "busy_cpu_s": num(cpu, "busy_s"), "softirq_cpu_s": softirq,
                "busy_cpu_s_per_gbit": num(per, "busy_s_per_gbit"),
                "cpu_s_per_gbit": num(per, "busy_s_per_gbit"),
                "tool_cpu_s_per_gbit": num(self.doc, "cpu_s_per_gbit"), "mean_rtt_us": mean_rtt_us(self.doc)}

    def to_dict(self) -> dict:
        d = self.doc
        return {"family": self.family, "goodput_bps": self.goodput_bps,
                "goodput_by_direction": d.get("goodput_by_direction"), "retransmits": d.get("retransmits"),
                "streams": d.get("streams_requested"), "direction": d.get("direction"),
                "duration_s": d.get("duration_s"), "mean_rtt_us": mean_rtt_us(d),
                "processes": d.get("processes"), "cpu": d.get("cpu"), "cpu_per": d.get("cpu_per"),
                "simulated": bool(d.get("simulated"))}


def mean_rtt_us(doc: dict) -> float | None:
    """The streams' mean smoothed RTT (where iperf3 reports it)."""
    rtts = [v for s in objs(doc, "streams") if (v := num(s, "mean_rtt_us")) is not None]
    return sum(rtts) / len(rtts) if rtts else None


# --------------------------------------------------------------------------------------------- #
# Reading results

def entries(run: RunView) -> list[dict]:
    """Per configured ``tcp`` method: ``{params, goodput, per_gbit, tool_per_gbit, retransmits, rtt,
    repetitions}`` (Stats over the repetitions)."""
    out = []
    for r in run.method_results(METHOD_NAME):
        st = obj(r, "stats")
        reps = [x for x in objs(r, "repetitions") if x.get("complete", True) is not False]
        out.append({"reps": reps, "goodput": Stat.from_stats(st.get("goodput_bps")),
                    "per_gbit": Stat.from_stats(st.get("cpu_s_per_gbit")),
                    "tool_per_gbit": Stat.from_stats(st.get("tool_cpu_s_per_gbit")),
                    "retransmits": Stat.from_stats(st.get("retransmits")),
                    "rtt": Stat.from_stats(st.get("mean_rtt_us"))})
    return out


def _gbps(s: Stat | None) -> str:
    if s is None:
        return fmt.DASH
    rng = f" ({s.lo / 1e9:.2f}–{s.hi / 1e9:.2f})" if s.spread and s.lo is not None and s.hi is not None else ""
    return f"{s.value / 1e9:.2f} Gbit/s{rng}"


def _num(s: Stat | None, digits: int = 3) -> str:
    return fmt.DASH if s is None else f"{s.value:.{digits}g}"


def table(run: RunView) -> Table:
    t = Table(["streams × direction", "goodput", "per direction", "retransmits", "mean RTT",
               "iperf3 CPU-s per Gbit", "all-core busy CPU-s per Gbit"],
              caption="median of repetitions (min–max); CPU-s per Gbit: CPU-seconds per Gbit of goodput moved; "
                      "all-core busy time includes whatever else ran on the host: measure on a quiet one")
    for e in entries(run):
        rep0 = e["reps"][0] if e["reps"] else {}
        per_dir = ", ".join(f"{k} {v / 1e9:.2f}" for k, v in (rep0.get("goodput_by_direction") or {}).items()
                            if isinstance(v, (int, float)))
        t.add([f"{rep0.get('streams', '?')} × {rep0.get('direction', '?')} (IPv{rep0.get('family', 4)})",
               _gbps(e["goodput"]), per_dir + " Gbit/s" if per_dir else fmt.DASH,
               _num(e["retransmits"], 6), fmt.DASH if e["rtt"] is None else f"{e['rtt'].value:.0f} µs",
               _num(e["tool_per_gbit"]), _num(e["per_gbit"])])
    return t


def cpu_table(run: RunView) -> Table:
    """Every party's CPU-seconds in the first repetition's trial: the iperf3 processes (exact, from
    wait4), the packet kernel threads, and each core split as /proc/stat splits it."""
    t = Table(["party", "user CPU-s", "system CPU-s", "irq CPU-s", "softirq CPU-s", "busy CPU-s"],
              caption="over the trial (first repetition of each tcp method); cores: all work on that core")
    for e in entries(run):
        if not e["reps"]:
            continue
        rep = e["reps"][0]
        for p in objs(rep, "processes"):
            t.add([f"{p.get('name')} ({p.get('netns') or 'host'})", _s(num(p, "user_s")), _s(num(p, "sys_s")),
                   fmt.DASH, fmt.DASH, _s(num(p, "total_s"))])
        cpu = obj(rep, "cpu")
        for p in objs(cpu, "procs"):
            t.add([f"{p.get('name')} (kernel thread)" if "/" in str(p.get("name")) else str(p.get("name")),
                   _s(num(p, "user_s")), _s(num(p, "sys_s")), fmt.DASH, fmt.DASH,
                   _s((num(p, "user_s") or 0.0) + (num(p, "sys_s") or 0.0))])
        for core, c in sorted(obj(cpu, "cores").items()):
            if isinstance(c, dict):
                t.add([core, _s(num(c, "user")), _s(num(c, "system")), _s(num(c, "irq")), _s(num(c, "softirq")),
                       _s(num(c, "busy"))])
    return t


def _s(v: float | None) -> str:
    return fmt.DASH if v is None else f"{v:.3f}"


@plot("tcp")
def tcp_plot(runs: Sequence[RunView]) -> Figure | None:
    """TCP through the DUT: goodput (left) and the busy CPU-seconds of all cores per Gbit of goodput
    (right) of each result, median of repetitions with the min–max range."""
    data = [(r, e) for r in runs for e in entries(r)[:1]]
    if not data:
        return None
    fig, axes = subplots(1, 2, w=7.6, h=max(2.2, 0.45 * len(data) + 1.2))
    names = [r.name for r, _ in data]
    for ax, key, scale, label in ((axes[0][0], "goodput", 1e-9, "goodput (Gbit/s)"),
                                  (axes[0][1], "per_gbit", 1.0, "busy CPU-s per Gbit (all cores)")):
        for i, (_, e) in enumerate(data):
            s = e[key]
            if s is None:
                continue
            lo = (s.value - (s.lo if s.lo is not None else s.value)) * scale
            hi = ((s.hi if s.hi is not None else s.value) - s.value) * scale
            ax.barh([i], [s.value * scale], xerr=[[lo], [hi]], color=run_colour(i), height=0.6)
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names)
        ax.invert_yaxis()
        ax.set_xlabel(label)
    axes[0][1].set_yticklabels([])
    return fig


SECTION = Section("tcp", "TCP through the DUT (iperf3) with the CPU of every party")


class Tcp(StackMethod):
    name = METHOD_NAME
    label = "TCP through the DUT (iperf3)"
    short_name = "tcp"
    params_type = TcpMethodParams
    sections = (SECTION,)
    plots = (tcp_plot,)
    console_columns = ("goodput", "retransmits", "CPU-s/Gbit")
    stack_kind = "tcp"
    result_type = TcpMethodResult
    section = SECTION
    plot_type = tcp_plot
    ratio_title = "TCP through the DUT"
    ratio_rows = (("goodput", "TCP goodput", lambda v: f"{v / 1e9:.2f} Gbit/s"),
                  ("per_gbit", "busy CPU-s per Gbit", lambda v: f"{v:.3g}"))

    def entries(self, run: RunView) -> list[dict]:
        return entries(run)

    def table(self, run: RunView) -> Table:
        return table(run)

    def more_html(self, run: RunView) -> str:
        return "<h3>CPU of every party</h3>" + table_html(cpu_table(run))

    def console_rows(self, result: dict, flags: str) -> list[list[str]]:
        st = result.get("stats", {})
        g = (st.get("goodput_bps") or {}).get("median")
        r = (st.get("retransmits") or {}).get("median")
        c = (st.get("cpu_s_per_gbit") or {}).get("median")
        return [["stack", "-" if g is None else f"{g / 1e9:.2f} Gbit/s", "-" if r is None else f"{r:,.0f}",
                 "-" if c is None else f"{c:.3g}", flags]]

    def compare_values(self, run: RunView) -> dict[str, tuple[float | None, bool]]:
        out: dict[str, tuple[float | None, bool]] = {}
        for e in entries(run):
            rep0 = e["reps"][0] if e["reps"] else {}
            what = f"{rep0.get('streams', '?')} × {rep0.get('direction', '?')}"
            out[f"TCP goodput ({what})"] = (stat_value(e, "goodput"), True)
            out[f"CPU-s per Gbit (TCP {what})"] = (stat_value(e, "per_gbit"), False)
        return out


METHOD = Tcp()

__all__ = ["METHOD", "DIRECTIONS", "TcpMethodParams", "TcpMethodResult"]
