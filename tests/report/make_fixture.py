"""Write the hand-made golden result files used until real runs replace them.

    .venv/bin/python tests/report/make_fixture.py   # writes tests/data/report-*-handmade.json

The documents follow ``docs/result-format.md`` (schema 1). The numbers are shaped like a router
(and a router with NAT) on veth at a configured nominal 1 Gbit/s: throughput limited by the DUT's
per-packet cost for small frames and by the nominal line rate for large ones, receive livelock
above the loss-free rate at 64 B, DUT monitoring samples on the latency and frame-loss trials.
Every file says ``"source": "hand-made fixture"`` in its config. Deterministic (seeded).
"""
from __future__ import annotations

import json
import random
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path

SPEED_BPS = 1_000_000_000
SIZES = [64, 128, 256, 512, 1024, 1280, 1518, "imix"]
IMIX = [[64, 57], [570, 7], [594, 16], [1518, 20]]
IMIX_MEAN = sum(s * w for s, w in IMIX) / sum(w for _, w in IMIX)
DATA = Path(__file__).resolve().parents[1] / "data"


def recovery_intervals(overload: float, throughput: float, recovery: float, rec_s: float) -> list[dict]:
    """A system-recovery trial's intervals as netrig writes them: 10 s of overload (losing what is
    above the throughput), then 10 s at the recovery load that lose frames for ``rec_s``."""
    from netrig.measure import Interval

    ivs = [Interval(0.0, 10.0, 0, round(overload * 10), round(throughput * 10)),
           Interval(10.0, rec_s, 1, round(recovery * rec_s), round(recovery * rec_s * 0.9)),
           Interval(10.0 + rec_s, 10.0 - rec_s, 1, round(recovery * (10 - rec_s)), round(recovery * (10 - rec_s)))]
    return [iv.to_dict() for iv in ivs]

def mean(size) -> float:
    return IMIX_MEAN if size == "imix" else float(size)


def line_rate(size) -> float:
    return SPEED_BPS / ((mean(size) + 20) * 8)


def rate_obj(size, fps: float) -> dict:
    return {"fps": round(fps, 1), "pct_line_rate": round(100 * fps / line_rate(size), 3),
            "l1_bps": round(fps * (mean(size) + 20) * 8, 1), "l2_bps": round(fps * mean(size) * 8, 1)}


def stats(vals: list[float]) -> dict:
    return {"min": min(vals), "median": statistics.median(vals), "max": max(vals), "n": len(vals)}


class Fixture:
    """One hand-made run document, built section by section. Two seeded random streams (``rng`` for
    the DUT's numbers, ``prng`` for pacing) are drawn from in a fixed order, so the file is the same
    every time."""

    def __init__(self, dut_pps: float, cost: float, seed: int, started: datetime):
        self.rng = random.Random(seed)
        self.prng = random.Random(seed + 1)  # pacing: its own stream, so the other numbers stay as they were
        self.trials: list[dict] = []
        self.clock = started + timedelta(seconds=1)
        self.capacity = {s: dut_pps * (1 - cost * (mean(s) - 64) / 1454) for s in SIZES}
        self.summary: list[dict] = []
        self.tput: dict = {}

    def latency(self, load_frac: float, base_us: float) -> dict:
        q = 1 / max(0.02, 1 - min(load_frac, 0.98))
        p50 = base_us * (1 + 0.15 * q) * self.rng.uniform(0.95, 1.05)
        return {"min_ns": int(p50 * 0.25e3), "mean_ns": float(int(p50 * 1.1e3)), "p50_ns": int(p50 * 1e3),
                "p90_ns": int(p50 * 1.8e3), "p99_ns": int(p50 * 4.5e3), "p999_ns": int(p50 * 11e3),
                "max_ns": int(p50 * 60e3), "pdv_ns": int(p50 * 10.7e3), "ipdv_ns": int(p50 * 0.6e3)}

    def monitor(self, duration_s: float, load_frac: float) -> dict:
        rng, samples = self.rng, []
        mem = 402_000_000 + rng.randint(0, 2_000_000)
        for i in range(int(duration_s / 0.5) + 1):
            busy = min(100.0, 100 * load_frac * rng.uniform(0.9, 1.05))
            c1 = {"user": round(busy * 0.03, 1), "system": round(busy * 0.14, 1),
                  "irq": round(busy * 0.05, 1), "softirq": round(busy * 0.78, 1)}
            c1["idle"] = round(max(0.0, 100 - sum(c1.values())), 1)
            c0 = {"user": round(rng.uniform(1, 4), 1), "system": round(rng.uniform(1, 3), 1),
                  "irq": 0.2, "softirq": round(rng.uniform(0, 2), 1)}
            c0["idle"] = round(100 - sum(c0.values()), 1)
            mem += rng.randint(-50_000, 120_000)
            samples.append({"t_s": round(i * 0.5, 2), "cpu": {"cpu0": c0, "cpu1": c1},
                            "mem": {"total_bytes": 2_047_000_000, "used_bytes": mem,
                                    "available_bytes": 2_047_000_000 - mem}})
        return {"interval_s": 0.5, "samples": samples}

    def pacing(self, offered: float, duration_s: float) -> dict:
        """Smooth pacing on a VM: a few ms lost to stalls stretch the trial; never above the rate."""
        prng = self.prng
        stretch = round(prng.choice([0.0, 0.0, 0.0004, 0.0011, 0.0032]) * duration_s, 6)
        intended = round(offered / 1000, 3)
        peak = int(intended) + prng.choice([0, 1, 1, 2])
        gap = 1e9 / offered
        return {"mode": "smooth", "stretch_s": stretch, "max_lag_s": round(stretch / 2 + 0.0002, 6),
                "peak_frames": peak, "intended_frames": intended, "gap_p50_ns": round(gap),
                "gap_p99_ns": round(gap * prng.uniform(1.5, 3)), "gap_max_ns": round(1e6 * prng.uniform(0.3, 4)),
                "tolerance_pct": 10.0, "peak_ratio": round(peak / intended, 4), "bunched": False}

    def trial(self, method: str, mi: int, size, rep: int, ti: int, offered: float, duration_s: float,
              capacity: float, lat: bool = True, mon: bool = False) -> dict:
        sent = int(offered * duration_s)
        if offered <= capacity:
            recv = sent
        else:  # receive livelock: forwarding falls as overload grows
            over = offered / capacity - 1
            recv = min(sent, int(capacity * duration_s * max(0.45, 1 - 0.35 * over) * self.rng.uniform(0.98, 1.0)))
        frac = min(1.0, offered / capacity)
        start = self.clock
        end = start + timedelta(seconds=duration_s + 0.5)
        self.clock = end + timedelta(seconds=0.3)
        raw = {"monitor": self.monitor(duration_s, frac)} if mon else {}
        t = {
            "seq": len(self.trials), "key": f"{mi}/{size}/{rep}/{ti}", "method": method, "method_index": mi,
            "frame_size": size, "repetition": rep, "trial_index": ti, "kind": "rate",
            "load": {"rate_pps": round(offered, 1), "frame_size": size, "burst_frames": None,
                     "duration_s": duration_s, "pct_line_rate": round(100 * offered / line_rate(size), 3)},
            "phases": None, "started_at": iso(start), "finished_at": iso(end),
            "counts": {"offered_pps": round(offered * self.rng.uniform(0.999, 1.0), 1), "frames_sent": sent,
                       "frames_received": recv, "frames_lost": sent - recv,
                       "loss_ratio": round((sent - recv) / sent, 6) if sent else 0.0,
                       "duplicated": 0, "reordered": 0, "late": 0, "valid": True, "invalid_reason": None,
                       "latency": self.latency(frac, 18 + mean(size) / 200) if lat else None,
                       "intervals": None, "reset_time_s": None, "pacing": self.pacing(offered, duration_s),
                       "raw": raw},
        }
        self.trials.append(t)
        return t

    def platform(self, seed: int) -> None:
        """The platform's stalls on every trial, the latency over time of the first 64-B latency trial."""
        pf = Platform(seed)
        for t in self.trials:
            if t["method_index"] >= 0:
                pf.stalls(t)
        pf.timeline(next(t for t in self.trials if t["method"] == "rfc2544_latency" and t["frame_size"] == 64))

    def selftest(self) -> list[dict]:
        """The self-test's trials (method_index -1) and ceilings."""
        ceilings = []
        for s in SIZES:
            need = 1.1 * line_rate(s)
            proven = need if s != "imix" else need * 0.999
            self.trial("selftest", -1, s, 0, 0, proven, 2.0, 3e6)
            ceilings.append({"frame_size": s, "required_rate_pps": round(need, 1),
                             "proven_rate_pps": round(proven, 1), "proven": rate_obj(s, proven),
                             "passed": s != "imix", "trial_keys": [f"-1/{s}/0/0"]})
        return ceilings

    def binary_search(self, s, rep: int) -> dict:
        """One repetition of the throughput method's binary search at frame size ``s``."""
        c = self.capacity[s] * self.rng.uniform(0.965, 1.03)
        lo, hi, n = 0.0, line_rate(s), 0
        tr = self.trial("rfc2544_throughput", 0, s, rep, n, hi, 2.0, c)
        if tr["counts"]["frames_lost"] == 0:
            lo, upper = hi, None
        else:
            for n in range(1, 9):
                mid = (lo + hi) / 2
                tr = self.trial("rfc2544_throughput", 0, s, rep, n, mid, 2.0, c)
                if tr["counts"]["frames_lost"] == 0:
                    lo = mid
                else:
                    hi = mid
            upper = round(hi, 1)
        return {"rate_pps": round(lo, 1), "rate": rate_obj(s, lo), "lower_pps": round(lo, 1),
                "upper_pps": upper, "trials": n + 1, "tester_limited": False, "tester_limit_pps": None}

    def throughput(self) -> None:
        """0: throughput, 3 repetitions of a binary search."""
        results = []
        for s in SIZES:
            reps = [self.binary_search(s, rep) for rep in range(3)]
            vals = [r["rate_pps"] for r in reps]
            flags = [NOMINAL_FLAG, SHORT_FLAG]
            if s == "imix":
                flags.append({"code": "above_selftest_ceiling",
                              "message": "imix: no self-test proved this frame size (1.1 × 100 % line rate not reached)"})
            results.append({"frame_size": s, "complete": True, "repetitions": reps,
                            "stats": {"rate_pps": stats(vals)}, "headline": rate_obj(s, statistics.median(vals)),
                            "flags": flags})
        self.summary.append({"method": "rfc2544_throughput", "method_index": 0, "label": "RFC 2544 §26.1 throughput",
                             "params": {"duration_s": 2.0, "resolution_pct": 0.5, "initial_rate_pct": 100.0,
                                        "min_rate_pct": 0.0, "max_rate_pct": 100.0, "acceptable_loss_ratio": 0.0,
                                        "repetitions": 3},
                             "results": results})
        self.tput = {r["frame_size"]: r["stats"]["rate_pps"]["median"] for r in results}

    def latency_method(self) -> None:
        """1: latency, 2 repetitions × 3 trials at the throughput rate."""
        results, tput = [], self.tput
        for s in SIZES:
            reps = []
            for rep in range(2):
                per = []
                for ti in range(3):
                    tr = self.trial("rfc2544_latency", 1, s, rep, ti, tput[s], 5.0, self.capacity[s] * 1.05, mon=True)
                    lat = tr["counts"]["latency"]
                    per.append({k: lat[k] for k in ("p50_ns", "p999_ns", "min_ns", "mean_ns", "max_ns", "pdv_ns",
                                                    "ipdv_ns")})
                med = lambda k, per=per: statistics.median(p[k] for p in per)
                reps.append({"rate_pps": tput[s], "rate": rate_obj(s, tput[s]), "per_trial": per,
                             "typical_ns": med("p50_ns"), "worst_case_ns": med("p999_ns"),
                             "min_ns": min(p["min_ns"] for p in per), "mean_ns": med("mean_ns"),
                             "max_ns": max(p["max_ns"] for p in per), "pdv_ns": med("pdv_ns"),
                             "ipdv_ns": med("ipdv_ns")})
            results.append({"frame_size": s, "complete": True, "repetitions": reps,
                            "stats": {"typical_ns": stats([r["typical_ns"] for r in reps]),
                                      "worst_case_ns": stats([r["worst_case_ns"] for r in reps])},
                            "headline": rate_obj(s, tput[s]), "flags": [NOMINAL_FLAG]})
        self.summary.append({"method": "rfc2544_latency", "method_index": 1, "label": "RFC 2544 §26.2 latency",
                             "params": {"duration_s": 5.0, "trials": 3, "rate_pct": 100.0, "throughput_from": 0},
                             "results": results})

    def frame_loss(self) -> None:
        """2: frame loss rate at 64 and 1518 (100 % down by 10 % until two loss-free)."""
        results = []
        for s in (64, 1518):
            curve, clean = [], 0
            for pct in range(100, 0, -10):
                off = line_rate(s) * pct / 100
                tr = self.trial("rfc2544_frame_loss", 2, s, 0, len(curve), off, 2.0, self.capacity[s], mon=True)
                c = tr["counts"]
                curve.append({"offered_pct": float(pct), "offered_pps": round(off, 1), "achieved_pps": c["offered_pps"],
                              "forwarded_pps": round(c["frames_received"] / 2.0, 1), "loss_ratio": c["loss_ratio"],
                              "valid": True})
                clean = clean + 1 if c["frames_lost"] == 0 else 0
                if clean == 2:
                    break
            free = [p["offered_pps"] for p in curve if p["loss_ratio"] == 0]
            best = max(p["forwarded_pps"] for p in curve)
            rep = {"curve": curve, "max_lossfree_pps": max(free) if free else None,
                   "livelock": curve[0]["forwarded_pps"] < 0.9 * best}
            results.append({"frame_size": s, "complete": True, "repetitions": [rep],
                            "stats": {"max_lossfree_pps": stats([rep["max_lossfree_pps"]])},
                            "headline": rate_obj(s, rep["max_lossfree_pps"]), "flags": [NOMINAL_FLAG, SHORT_FLAG]})
        self.summary.append({"method": "rfc2544_frame_loss", "method_index": 2, "label": "RFC 2544 §26.3 frame loss rate",
                             "params": {"duration_s": 2.0, "step_pct": 10.0, "start_pct": 100.0, "min_pct": 0.0,
                                        "stop_after_lossfree": 2},
                             "results": results})

    def back_to_back_and_recovery(self) -> None:
        """3: back-to-back at 64 B; 4: system recovery at 64 B."""
        rng, tput = self.rng, self.tput
        bursts = [int(self.capacity[64] * 0.0021 * rng.uniform(0.95, 1.05)) for _ in range(5)]
        mb = statistics.mean(bursts)
        b2b = {"bursts_frames": bursts, "mean_burst_frames": mb, "stdev_burst_frames": statistics.stdev(bursts),
               "burst_rate_fps": line_rate(64), "throughput_fps": tput[64], "implied_buffer_time_s": mb / line_rate(64),
               "corrected_buffer_time_s": (mb - mb / line_rate(64) * tput[64]) / line_rate(64),
               "max_burst_reached": False}
        self.summary.append({"method": "rfc2544_back_to_back", "method_index": 3, "label": "RFC 2544 §26.4 back-to-back",
                             "params": {"trials": 5, "throughput_from": 0},
                             "results": [{"frame_size": 64, "complete": True, "repetitions": [b2b],
                                          "stats": {"mean_burst_frames": stats([mb]),
                                                    "corrected_buffer_time_s": stats([b2b["corrected_buffer_time_s"]])},
                                          "headline": None, "flags": []}]})
        rec_s = round(rng.uniform(0.3, 0.6), 3)
        rec = {"throughput_pps": tput[64], "overload_pps": 1.1 * tput[64], "recovery_pps": 0.5 * tput[64],
               "recovery_time_s": rec_s, "recovered": True, "switch_s": 10.0,
               "intervals": recovery_intervals(1.1 * tput[64], tput[64], 0.5 * tput[64], rec_s)}
        self.summary.append({"method": "rfc2544_system_recovery", "method_index": 4,
                             "label": "RFC 2544 §26.5 system recovery",
                             "params": {"overload_pct": 110.0, "recovery_pct": 50.0, "overload_duration_s": 10.0,
                                        "recovery_duration_s": 10.0, "interval_s": 1.0, "throughput_from": 0},
                             "results": [{"frame_size": 64, "complete": True, "repetitions": [rec],
                                          "stats": {"recovery_time_s": stats([rec["recovery_time_s"]])},
                                          "headline": None, "flags": []}]})

    def mlr_repetition(self, s, rep: int) -> dict:
        """One MLRsearch repetition at frame size ``s``: NDR and PDR."""
        c = self.capacity[s] * self.rng.uniform(0.98, 1.02)
        goals: list[dict] = []
        for gname, lr in (("NDR", 0.0), ("PDR", 0.005)):
            ct = min(line_rate(s), c * (1 + lr * 5))
            upper = None if ct >= line_rate(s) else round(ct * 1.004, 1)
            self.trial("mlrsearch", 5, s, rep, len(goals), ct, 5.0, c * (1 + lr * 5))
            goals.append({"name": gname, "goal": {"name": gname, "loss_ratio": lr, "exceed_ratio": 0.5,
                                                  "relative_width": 0.005, "initial_trial_duration_s": 1.0,
                                                  "final_trial_duration_s": 5.0, "duration_sum_s": 5.0},
                          "conditional_throughput_pps": round(ct, 1), "lower_bound_pps": round(ct, 1),
                          "upper_bound_pps": upper, "rate": rate_obj(s, ct)})
        return {"goals": goals, "trials": 14, "search_time_s": 31.0}

    def mlrsearch(self) -> None:
        """5: MLRsearch NDR / PDR at 64 B and 1518 B, 2 repetitions."""
        results = []
        for s in (64, 1518):
            reps = [self.mlr_repetition(s, rep) for rep in range(2)]
            results.append({"frame_size": s, "complete": True, "repetitions": reps,
                            "stats": {f"{g}_pps": stats([next(x["conditional_throughput_pps"] for x in r["goals"]
                                                              if x["name"] == g) for r in reps]) for g in ("NDR", "PDR")},
                            "headline": reps[0]["goals"][0]["rate"], "flags": [NOMINAL_FLAG]})
        self.summary.append({"method": "mlrsearch", "method_index": 5, "label": "MLRsearch",
                             "params": {"goals": [g["goal"] for g in results[0]["repetitions"][0]["goals"]],
                                        "min_rate_pct": 1.0, "max_rate_pct": 100.0, "implementation": "netrig"},
                             "results": results})

    def iperf(self) -> None:
        """6: iperf-like at 50 % line rate, 64 B, 10 s."""
        off = line_rate(64) * 0.5
        per = [{"t_s": float(i), "rx_pps": round(min(off, self.capacity[64]) * self.rng.uniform(0.96, 1.0), 1),
                "frames_received": 0} for i in range(10)]
        for p in per:
            p["frames_received"] = int(p["rx_pps"])
        rx = statistics.mean(p["rx_pps"] for p in per)
        ip = {"offered_pps": round(off, 1), "received_pps": round(rx, 1), "loss_ratio": round(1 - rx / off, 6),
              "per_interval": per}
        self.summary.append({"method": "iperf", "method_index": 6, "label": "iperf-like fixed rate",
                             "params": {"rate_pct": 50.0, "duration_s": 10.0, "interval_s": 1.0},
                             "results": [{"frame_size": 64, "complete": True, "repetitions": [ip],
                                          "stats": {"received_pps": stats([ip["received_pps"]])},
                                          "headline": rate_obj(64, rx), "flags": [NOMINAL_FLAG]}]})


NOMINAL_FLAG = {"code": "nominal_line_rate", "message": "line rate is a configured 1 Gbit/s (veth has no link speed)"}
SHORT_FLAG = {"code": "short_trials", "message": "2 s trials (RFC 2544 asks for 60 s)"}


class Platform:
    """The platform's stalls over every trial and one latency timeline, from a third seeded stream
    (so the numbers drawn before stay as they were): a host that stops the DUT's vCPU for 1-4 ms
    about once every 2 s (now and then a kernel worker takes the DUT's CPU instead), the tester's
    CPU stopped less often, and a DUT timer that spikes the latency every 100 ms."""

    RING = 1024

    def __init__(self, seed: int):
        self.rng = random.Random(seed + 2)

    def side(self, duration_s: float, per_s: float, cpu: int, by: str | None) -> dict:
        from netrig.measure.platform import StallEpisode, StallSide
        rng, eps = self.rng, []
        for _ in range(int(duration_s * per_s + rng.random())):
            guest = by is not None and rng.random() < 0.25
            eps.append(StallEpisode(round(rng.uniform(0, duration_s), 4), round(rng.uniform(1.0, 4.0), 2), cpu,
                                    guest, by if guest else None))
        return StallSide(tuple(sorted(eps, key=lambda e: e.start_s))).to_dict()

    def stalls(self, t: dict) -> None:
        """The trial's stalls and the loss its DUT stalls explain (ring drops while a stall longer
        than the ring's time at the load was under way)."""
        c, dur, rate = t["counts"], t["load"]["duration_s"] or 1.0, t["load"]["rate_pps"] or 1.0
        dut = self.side(dur, 0.5, 1, "kworker/1:2")
        c["stalls"] = {"dut": dut, "tester": self.side(dur, 0.2, 0, None), "threshold_ms": 1.0, "lost_episodes": 0}
        ring_ms = 1e3 * self.RING / rate
        over = sum(max(0.0, e["length_ms"] - ring_ms) * rate / 1e3 for e in dut["episodes"])
        c["loss_in_stalls"] = min(c["frames_lost"], int(over))

    def timeline(self, t: dict) -> None:
        """A latency timeline over the trial: p50 near the trial's, a spike every 100 ms."""
        from netrig import _native
        from netrig.measure.platform import LatencyTimeline, periodicity, spikes
        rng, c = self.rng, t["counts"]
        window_ms = _native.LATENCY_WINDOW_NS / 1e6
        n = int(t["load"]["duration_s"] * 1e3 / window_ms)
        fpw = int(t["load"]["rate_pps"] * window_ms / 1e3)
        p50 = c["latency"]["p50_ns"] / 1e3
        spiky = {round(i * 100 / window_ms) + 3 for i in range(int(n * window_ms / 100))}
        p50s = [round(p50 * rng.uniform(0.9, 1.1), 1) for _ in range(n)]
        p99s = [round(x * rng.uniform(2.5, 4.5), 1) for x in p50s]
        maxs = [round(x * (rng.uniform(8, 20) if i in spiky else rng.uniform(1.2, 2.0)), 1)
                for i, x in enumerate(p99s)]
        frames = [fpw] * n
        sp = spikes(maxs, p50s, frames)
        c["latency_timeline"] = LatencyTimeline(window_ms, 0.0, tuple(frames), tuple(p50s), tuple(p99s), tuple(maxs),
                                                sp, periodicity(sp, window_ms, n)).to_dict()


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def make(name: str, dut_pps: float, cost: float, seed: int, started: datetime) -> dict:
    f = Fixture(dut_pps, cost, seed, started)
    ceilings = f.selftest()
    f.throughput()
    f.latency_method()
    f.frame_loss()
    f.back_to_back_and_recovery()
    f.mlrsearch()
    f.iperf()
    f.platform(seed)
    return document(name, seed, started, f, ceilings)


def document(name: str, seed: int, started: datetime, f: Fixture, ceilings: list[dict]) -> dict:
    """The run document around the sections ``f`` built."""
    summary, tput = f.summary, f.tput
    return {
        "schema_version": 1, "tool": "netrig", "tool_version": "0.1.0", "run_id": f"{seed:032x}",
        "command": f"hand-made fixture ({name})", "complete": True, "interrupted_reason": None,
        "started_at": iso(started), "finished_at": iso(f.clock), "resumed": [],
        "environment": {"kernel": "6.18.44", "os": "Debian GNU/Linux 12 (bookworm)", "cpu_model": "AMD EPYC",
                        "cpus": 2, "python": "3.11.2", "hostname": "netrig-vm",
                        "interfaces": [{"name": "nrt0", "driver": "veth", "mtu": 1500, "queues": 1, "speed_bps": None},
                                       {"name": "nrr0", "driver": "veth", "mtu": 1500, "queues": 1, "speed_bps": None}],
                        "sysctls": {"net.ipv4.ip_forward": "1"}},
        "testbed": {"name": name, "dut_cores": 1, "queues": 1, "ports": {"tx": "nrt0", "rx": "nrr0"},
                    "affinity": {"dut_softirq": "cpu1", "tester": "cpu0"}},
        "line_rate": {"bps": float(SPEED_BPS), "source": "config", "interface": "nrt0",
                      "label": "1 Gbit/s (configured: veth has no link speed)"},
        "frame_sizes": [{"frame_size": s, "mean_frame_size": mean(s), "mix": IMIX if s == "imix" else None,
                         "line_rate_fps": line_rate(s)} for s in SIZES],
        "config": {"name": name, "source": "hand-made fixture",
                   "testbed": {"name": name.split("+")[0], "options": {"nat": "+nat" in name}},
                   "ports": {"tx": "tx", "rx": "rx", "io": "auto", "family": 4},
                   "line_rate": {"speed_bps": float(SPEED_BPS), "nominal_bps": None},
                   "frames": {"sizes": SIZES}, "trial": {"duration_s": 2.0, "drain_s": 0.5, "warmup_s": 0.0},
                   "selftest": {"enabled": True, "factor": 1.1, "duration_s": 2.0, "testbed": "loopback"},
                   "repetitions": 3, "methods": [{e["method"]: e["params"]} for e in summary]},
        "selftest": {"testbed": "loopback", "factor": 1.1, "duration_s": 2.0, "passed": False, "ceilings": ceilings},
        "trials": f.trials,
        "summary": summary,
        "verdicts": [{"check": "min_throughput_pct", "method_index": 0, "frame_size": 64, "threshold": 20.0,
                      "value": round(100 * tput[64] / line_rate(64), 2), "passed": tput[64] > 0.2 * line_rate(64)}],
        "flags": [NOMINAL_FLAG],
    }




def main() -> None:
    DATA.mkdir(exist_ok=True)
    for name, pps, cost, seed, when in (
        ("router", 580_000, 0.10, 1, datetime(2026, 11, 21, 21, 2, 11, tzinfo=UTC)),
        ("router+nat", 455_000, 0.12, 2, datetime(2026, 11, 21, 21, 25, 43, tzinfo=UTC)),
    ):
        out = DATA / f"report-{name.replace('+', '-')}-handmade.json"
        out.write_text(json.dumps(make(name, pps, cost, seed, when), indent=1) + "\n")
        print(out, out.stat().st_size)


if __name__ == "__main__":
    main()
