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
from netrig.methods.stack import StackEntries, StackMethod, StackRepetition, stat_value
from netrig.model import LineRate
from netrig.results.typed import from_dict
from netrig.view import fmt
from netrig.view.frame_results import read_frame_results
from netrig.view.html import table_html
from netrig.view.plotkit import plot, run_colour, subplots
from netrig.view.run_view import RunView, Stat, num, objs
from netrig.view.table import Table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

METHOD_NAME = "tcp"


@dataclass(frozen=True)
class _ToolDoc:
    """What the method's result takes under its own names from the tool's document
    (``measure.tcp.TcpResult.to_dict``)."""

    streams_requested: int | None = None
    cpu_s_per_gbit: float | None = None


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
class TcpMethodResult(StackRepetition):
    """One repetition: iperf3's goodput (total and per direction), retransmits and the streams' mean
    RTT, iperf3's own CPU (``processes``, ``tool_cpu_s_per_gbit``) and every core's (``cpu``, ``cpu_per``)."""

    goodput_bps: float | None = None
    goodput_by_direction: dict[str, float] | None = None
    retransmits: int | None = None
    streams: int | None = None
    direction: str | None = None
    mean_rtt_us: float | None = None
    tool_cpu_s_per_gbit: float | None = None

    @classmethod
    def of(cls, family: int, doc: dict) -> TcpMethodResult:
        """From the trial's document (``measure.tcp`` with ``cpu`` and ``cpu_per``)."""
        tool = from_dict(_ToolDoc, doc, partial=True)
        return from_dict(cls, doc, partial=True, family=family, mean_rtt_us=mean_rtt_us(doc),
                         streams=tool.streams_requested, tool_cpu_s_per_gbit=tool.cpu_s_per_gbit)

    def stats_values(self) -> dict[str, float | None]:
        per = self.cpu_per.busy_s_per_gbit
        return {"goodput_bps": self.goodput_bps, "retransmits": self.retransmits,
                "busy_cpu_s": None if self.cpu is None else self.cpu.busy_s,
                "softirq_cpu_s": self.cpu.total("softirq") if self.cpu is not None and self.cpu.cores else None,
                "busy_cpu_s_per_gbit": per, "cpu_s_per_gbit": per,
                "tool_cpu_s_per_gbit": self.tool_cpu_s_per_gbit, "mean_rtt_us": self.mean_rtt_us}

    def to_dict(self) -> dict:
        return {**self.stack_dict(), "goodput_bps": self.goodput_bps, "goodput_by_direction": self.goodput_by_direction,
                "retransmits": self.retransmits, "streams": self.streams, "direction": self.direction,
                "mean_rtt_us": self.mean_rtt_us, "tool_cpu_s_per_gbit": self.tool_cpu_s_per_gbit}

    @property
    def label(self) -> str:
        return f"{self.streams or '?'} × {self.direction or '?'}"


def mean_rtt_us(doc: dict) -> float | None:
    """The streams' mean smoothed RTT (where iperf3 reports it)."""
    rtts = [v for s in objs(doc, "streams") if (v := num(s, "mean_rtt_us")) is not None]
    return sum(rtts) / len(rtts) if rtts else None


# --------------------------------------------------------------------------------------------- #
# Reading results

def entries(run: RunView) -> list[StackEntries[TcpMethodResult]]:
    """Per configured ``tcp`` method: its repetitions and its stats (``goodput_bps``,
    ``cpu_s_per_gbit``, ``tool_cpu_s_per_gbit``, ``retransmits``, ``mean_rtt_us``)."""
    return METHOD.entries(run)


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
        rep0 = e.first
        per_dir = ", ".join(f"{k} {v / 1e9:.2f}" for k, v in ((rep0 and rep0.goodput_by_direction) or {}).items()
                            if isinstance(v, (int, float)))
        rtt = e.stat("mean_rtt_us")
        t.add([f"{rep0.label} (IPv{rep0.family})" if rep0 else "? × ?",
               _gbps(e.stat("goodput_bps")), per_dir + " Gbit/s" if per_dir else fmt.DASH,
               _num(e.stat("retransmits"), 6), fmt.DASH if rtt is None else f"{rtt.value:.0f} µs",
               _num(e.stat("tool_cpu_s_per_gbit")), _num(e.stat("cpu_s_per_gbit"))])
    return t


def cpu_table(run: RunView) -> Table:
    """Every party's CPU-seconds in the first repetition's trial: the iperf3 processes (exact, from
    wait4), the packet kernel threads, and each core split as /proc/stat splits it."""
    t = Table(["party", "user CPU-s", "system CPU-s", "irq CPU-s", "softirq CPU-s", "busy CPU-s"],
              caption="over the trial (first repetition of each tcp method); cores: all work on that core")
    for e in entries(run):
        if (rep := e.first) is None:
            continue
        for p in rep.processes:
            t.add([f"{p.name} ({p.netns or 'host'})", _s(p.user_s), _s(p.sys_s), fmt.DASH, fmt.DASH, _s(p.total_s)])
        if (cpu := rep.cpu) is None:
            continue
        for k in cpu.procs:
            t.add([f"{k.name} (kernel thread)" if "/" in k.name else k.name, _s(k.user_s), _s(k.sys_s),
                   fmt.DASH, fmt.DASH, _s(k.total_s)])
        for core in sorted(cpu.cores):
            t.add([core, *(_s(cpu.seconds(core, kind)) for kind in ("user", "system", "irq", "softirq", "busy"))])
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
    for ax, key, scale, label in ((axes[0][0], "goodput_bps", 1e-9, "goodput (Gbit/s)"),
                                  (axes[0][1], "cpu_s_per_gbit", 1.0, "busy CPU-s per Gbit (all cores)")):
        for i, (_, e) in enumerate(data):
            s = e.stat(key)
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
    ratio_rows = ((lambda e: e.stat("goodput_bps"), "TCP goodput", lambda v: f"{v / 1e9:.2f} Gbit/s"),
                  (lambda e: e.stat("cpu_s_per_gbit"), "busy CPU-s per Gbit", lambda v: f"{v:.3g}"))

    def table(self, run: RunView) -> Table:
        return table(run)

    def more_html(self, run: RunView) -> str:
        return "<h3>CPU of every party</h3>" + table_html(cpu_table(run))

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        fr = read_frame_results(result, TcpMethodResult)
        g, r, c = (fr.spread(k).median for k in ("goodput_bps", "retransmits", "cpu_s_per_gbit"))
        return [["stack", "-" if g is None else f"{g / 1e9:.2f} Gbit/s", "-" if r is None else f"{r:,.0f}",
                 "-" if c is None else f"{c:.3g}", flags]]

    def compare_values(self, run: RunView) -> dict[str, tuple[float | None, bool]]:
        out: dict[str, tuple[float | None, bool]] = {}
        for e in entries(run):
            what = e.first.label if e.first else "? × ?"
            out[f"TCP goodput ({what})"] = (stat_value(e.stat("goodput_bps")), True)
            out[f"CPU-s per Gbit (TCP {what})"] = (stat_value(e.stat("cpu_s_per_gbit")), False)
        return out


METHOD = Tcp()

__all__ = ["METHOD", "DIRECTIONS", "TcpMethodParams", "TcpMethodResult"]
