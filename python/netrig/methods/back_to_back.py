"""RFC 2544 §26.4 back-to-back frames, with the RFC 9004 buffer-time estimates.

One *trial* is a search over burst length (bursts at line rate) for the longest burst forwarded
with no loss; it is repeated ``trials`` times (50 by default) and the mean burst reported.

RFC 9004 §5.4 calculations (R = max theoretical frame rate, X = measured throughput, N = mean burst):
  Implied DUT Buffer Time   = N / R
  Corrected DUT Buffer Time = (N − (N / R) × X) / R
i.e. the frames the DUT forwarded during the burst (at its throughput X) are removed from the
burst before converting it to time at line rate.
"""
from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import dataclass

from netrig.measure import Load, Measurer
from netrig.methodology.method import Context, Method, Shortcut
from netrig.methodology.stats import check
from netrig.methods.sections import OTHER_METHODS, RFC2544
from netrig.model import FrameSize, LineRate
from netrig.view import fmt
from netrig.view.html import empty, esc, table_html
from netrig.view.markdown import section_md, table_md
from netrig.view.run_view import RunView, Stat, med, num, obj, objs
from netrig.view.table import Table


@dataclass(frozen=True)
class BackToBackParams:
    trials: int = 50
    rate_pct: float = 100.0  # of line rate
    min_burst_frames: int = 1
    max_burst_frames: int | None = None  # default: 2 s at the burst rate (RFC 9004 §5.1)
    resolution_frames: int | None = None  # default: 0.1 % of the burst found, at least 1 frame
    throughput_from: int | None = None
    repetitions: int | None = None

    def __post_init__(self) -> None:
        check("trials", self.trials, lo=1, integer=True)
        check("rate_pct", self.rate_pct, lo=0, lo_open=True, hi=1000)
        check("min_burst_frames", self.min_burst_frames, lo=1, integer=True)
        if self.max_burst_frames is not None:
            check("max_burst_frames", self.max_burst_frames, lo=self.min_burst_frames, integer=True)
        if self.resolution_frames is not None:
            check("resolution_frames", self.resolution_frames, lo=1, integer=True)
        if self.throughput_from is not None:
            check("throughput_from", self.throughput_from, lo=0, integer=True)
        if self.repetitions is not None:
            check("repetitions", self.repetitions, lo=1, integer=True)


@dataclass(frozen=True)
class BackToBackResult:
    frame: FrameSize
    line_rate: LineRate
    burst_rate_fps: float
    bursts_frames: tuple[int, ...]
    throughput_fps: float | None
    max_burst_reached: bool
    resolution_frames: int

    @property
    def mean_burst_frames(self) -> float:
        return statistics.fmean(self.bursts_frames) if self.bursts_frames else 0.0

    @property
    def stdev_burst_frames(self) -> float:
        return statistics.stdev(self.bursts_frames) if len(self.bursts_frames) > 1 else 0.0

    @property
    def implied_buffer_time_s(self) -> float:
        return self.mean_burst_frames / self.burst_rate_fps

    @property
    def corrected_buffer_time_s(self) -> float | None:
        if self.throughput_fps is None:
            return None
        n, r = self.mean_burst_frames, self.burst_rate_fps
        return (n - (n / r) * self.throughput_fps) / r

    @property
    def headline_pps(self) -> float | None:
        return None

    def stats_values(self) -> dict:
        return {"mean_burst_frames": self.mean_burst_frames,
                "corrected_buffer_time_s": self.corrected_buffer_time_s}

    def to_dict(self) -> dict:
        return {
            "bursts_frames": list(self.bursts_frames), "mean_burst_frames": self.mean_burst_frames,
            "stdev_burst_frames": self.stdev_burst_frames, "line_rate_fps": self.burst_rate_fps,
            "throughput_fps": self.throughput_fps, "implied_buffer_time_s": self.implied_buffer_time_s,
            "corrected_buffer_time_s": self.corrected_buffer_time_s,
            "max_burst_reached": self.max_burst_reached, "resolution_frames": self.resolution_frames,
        }


def measure_back_to_back(measurer: Measurer, frame: FrameSize, line_rate: LineRate,
                         params: BackToBackParams = BackToBackParams(),
                         throughput_pps: float | None = None) -> BackToBackResult:
    rate = line_rate.fps(frame) * params.rate_pct / 100
    max_burst = params.max_burst_frames or max(params.min_burst_frames, int(round(2.0 * rate)))
    bursts: list[int] = []
    reached = False

    def ok(n: int) -> bool:
        c = measurer.measure(Load(rate, frame, burst_frames=n), n / rate)
        return c.valid and c.frames_lost == 0

    for _ in range(params.trials):
        if ok(max_burst):
            bursts.append(max_burst)
            reached = True
            continue
        lo, hi = params.min_burst_frames - 1, max_burst  # lo passes (or is below min), hi fails
        while hi - lo > (params.resolution_frames or max(1, hi // 1000)):
            mid = (lo + hi) // 2
            if ok(mid):
                lo = mid
            else:
                hi = mid
        bursts.append(max(lo, 0))
    res = params.resolution_frames or max(1, int(max(bursts, default=0)) // 1000)
    return BackToBackResult(frame, line_rate, rate, tuple(bursts), throughput_pps, reached, res)


# --------------------------------------------------------------------------------------------- #
# Reading it back from results

def table(r: RunView) -> Table:
    t = Table(["frame size", "mean burst (frames)", "bursts (min–max)", "stdev", "implied buffer time",
               "corrected buffer time (RFC 9004)", "max burst reached"])
    for e in r.method_results(METHOD_NAME):
        reps = objs(e, "repetitions")
        bursts = [b for x in reps for b in (x.get("bursts_frames") or []) if isinstance(b, (int, float))]
        mb = (Stat.from_stats(obj(e, "stats").get("mean_burst_frames"))
              or Stat.over(num(x, "mean_burst_frames") for x in reps))
        t.add([fmt.size(e.get("frame_size")), fmt.count(mb.value if mb else None),
               f"{min(bursts):,.0f}–{max(bursts):,.0f}" if bursts else fmt.DASH,
               fmt.count(med(reps, "stdev_burst_frames")),
               fmt.seconds(med(reps, "implied_buffer_time_s")), fmt.seconds(med(reps, "corrected_buffer_time_s")),
               "yes" if any(x.get("max_burst_reached") for x in reps) else "no"])
    return t


# --------------------------------------------------------------------------------------------- #
# The method

METHOD_NAME = "rfc2544_back_to_back"


class BackToBack(Method):
    name = METHOD_NAME
    label = "RFC 2544 §26.4 back-to-back"
    short_name = "back_to_back"
    params_type = BackToBackParams
    needs_throughput = True
    sections = (OTHER_METHODS,)
    console_columns = ("mean burst (frames)", "implied buffer", "corrected buffer")
    shortcut = Shortcut(RFC2544, "back-to-back", default=False)
    cli_fields = {"trials": "--b2b-trials"}

    def run(self, params: BackToBackParams, ctx: Context) -> BackToBackResult:
        return measure_back_to_back(ctx.measurer, ctx.frame, ctx.line_rate, params,
                                    throughput_pps=ctx.throughput_pps or None)

    def estimate_trials(self, params: BackToBackParams, frame: FrameSize, line_fps: float) -> int:
        if not params.resolution_frames:
            return params.trials * (int(math.log2(1000)) + 1)
        mb = params.max_burst_frames or 2 * line_fps
        return params.trials * (int(math.log2(max(2.0, mb / params.resolution_frames))) + 1)

    def top_rate_pct(self, params: BackToBackParams) -> float:
        return params.rate_pct

    def console_rows(self, result: dict, flags: str) -> list[list[str]]:
        st, rep = result.get("stats", {}), result["repetitions"]
        mb = st.get("mean_burst_frames", {}).get("median")
        ib = rep[0]["implied_buffer_time_s"] if rep else None
        cb = st.get("corrected_buffer_time_s", {}).get("median")
        return [[fmt.size(result["frame_size"]), f"{mb:.0f}" if mb is not None else "-",
                 f"{ib * 1e3:.3f} ms" if ib is not None else "-",
                 f"{cb * 1e3:.3f} ms" if cb is not None else "-", flags]]

    def html(self, run: RunView) -> dict[str, str]:
        return {OTHER_METHODS.id: "<h3>" + esc("Back-to-back frames (RFC 2544 §26.4, RFC 9004 buffer time)") + "</h3>"
                + (table_html(table(run)) or empty(f"No {self.label} in this result."))}

    def markdown(self, run: RunView) -> str:
        t = table(run)
        return section_md("Back-to-back", table_md(t), "") if t else ""

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--b2b-trials", type=int, default=50, help="back-to-back trials per frame size [50]")

    def cli_params(self, args: argparse.Namespace) -> dict:
        return {"trials": args.b2b_trials}


METHOD = BackToBack()
