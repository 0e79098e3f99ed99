"""A served session as a netrig result (``netrig serve --record DIR``; ``netrig report`` draws it).

Every ``set_config`` starts a session: a directory ``DIR/<UTC time>`` with ``trials.ndjson`` (its
header holds the OTG config) and, once the session ends (the next config, or the server stops),
``result.json``. Each flow's run — from a traffic start to its stop, or to its last frame when
its duration ended — is one trial record of kind ``otg`` (method ``otg``): the flow's frames sent
and received, loss, latency, achieved rate, and its ports under ``otg``. Records are
written as runs end (fsync'd, as every netrig trial log), so a crash loses nothing finished.
"""
from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from netrig import _native
from netrig.environment import capture as environment
from netrig.model import size_label
from netrig.otg import metrics
from netrig.otgclient.report import FlowLatency, quantile
from netrig.results import SCHEMA_VERSION, TrialLog, utc_now, write_result

if TYPE_CHECKING:
    from netrig.otg.service import Service

#: The method and trial kind of a served flow's run in results.
METHOD = "otg"
#: A flow's latency and |IPDV| buckets (``Generator.flow_latency``'s).
Hists = tuple[list[tuple[int, int]], list[tuple[int, int]]]


class Recorder:
    """Writes sessions under ``base`` (see the module doc); ``on_change`` is the service's hook."""

    def __init__(self, base: Path, command: str):
        self.base, self.command = base, command
        self.log: TrialLog | None = None
        self.doc: dict = {}
        self.trials: list[dict] = []
        #: Flow index → (run number, start time) of runs not recorded yet.
        self.open: dict[int, tuple[int, str]] = {}
        self.runs = 0

    def on_change(self, what: str, service: Service) -> None:
        if what == "end":
            self._finish(service)
        elif what == "config":
            self._begin(service)
        elif what == "starting":
            self._record(service, ended_only=True, restarting=service.starting)
        elif what == "start":
            self.runs += 1
            stats = service.generator.flow_stats() if service.generator else []
            for i, s in enumerate(stats):
                if s.state == "running" and i not in self.open:
                    self.open[i] = (self.runs, utc_now())
        elif what == "stop":
            self._record(service, ended_only=False)

    def _begin(self, service: Service) -> None:
        assert service.plan is not None
        name = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%f")
        ports = [{"name": n, "location": s.name} for n, s in zip(service.plan.port_names, service.plan.serve_ports)]
        rates = [r for r in service.plan.line_rates if r]
        self.doc = {
            "schema_version": SCHEMA_VERSION, "tool": "netrig", "tool_version": _native.__version__,
            "run_id": uuid.uuid4().hex, "command": self.command, "started_at": utc_now(), "resumed": [],
            "environment": environment(interfaces=[(s.port.netns, s.ifname) for s in service.plan.serve_ports]),
            "testbed": {"name": "otg", "ports": ports},
            "line_rate": {"bps": rates[0] if rates else None, "source": "interface" if rates else "none",
                          "label": f"{rates[0] / 1e9:g} Gbit/s" if rates else "no link speed (veth)"},
            "frame_sizes": [], "config": {"otg": service.get_config()}, "selftest": None,
        }
        self.log = TrialLog(self.base / name)
        self.log.open(self.doc)
        self.trials, self.open, self.runs = [], {}, 0

    def _record(self, service: Service, ended_only: bool, restarting: list[int] | None = None) -> None:
        """Record the open runs that ended, and those of ``restarting`` flows that are not running
        (a start resets their counters); all of them at a stop or the session's end."""
        if self.log is None or service.generator is None or service.plan is None:
            return
        stats, lat = service.generator.flow_stats(), service.generator.flow_latency()
        now = time.monotonic_ns()
        again = set(restarting or ())
        for i in sorted(self.open):
            s, f = stats[i], service.plan.flows[i]
            reset = i in again and s.state not in ("running", "paused")
            if ended_only and not reset and metrics.transmit(s, f.rx_tx_ratio, service.drain_ns, now) != "stopped":
                continue
            run, started = self.open.pop(i)
            rec = _trial(len(self.trials), run, i, f.name, (s, lat[i]), service, started)
            self.log.append(rec)
            self.trials.append(rec)

    def _finish(self, service: Service) -> None:
        if self.log is None:
            return
        self._record(service, ended_only=False)
        self.log.close()
        doc = {**self.doc, "complete": True, "interrupted_reason": None, "finished_at": utc_now(),
               "trials": self.trials, "summary": [], "verdicts": [], "flags": []}
        write_result(self.log.dir, doc)
        self.log = None


def _trial(seq: int, run: int, i: int, name: str, counts: tuple[_native.GenFlowStats, Hists | None],
           service: Service, started: str) -> dict:
    """One flow's run as a trial record, from its counts and its latency and |IPDV| buckets
    (``None``: none kept)."""
    s, hists = counts
    buckets, ipdv_buckets = hists or ((), ())
    assert service.plan is not None
    f = service.plan.flows[i]
    window_s = (s.tx_last_ns - s.tx_first_ns) / 1e9 if s.tx_frames > 1 else 0.0
    expected = s.tx_frames * f.rx_tx_ratio
    # latency above the drain is late, and lost, as in a trial (unknown beyond the first 256 flows: 0)
    on_time, late = FlowLatency(name=name, buckets=tuple(buckets or ())).on_time(service.drain_ns)
    received = s.rx_frames - s.rx_duplicated - late  # unique frames: a duplicate never hides a lost one
    lost = max(0, round(expected) - received)
    size = round(s.tx_bytes / s.tx_frames) if s.tx_frames else 0
    latency = None
    if s.latency_frames:
        latency = {"min_ns": s.latency_min_ns, "mean_ns": s.latency_sum_ns / s.latency_frames,
                   "max_ns": s.latency_max_ns}
        pct = on_time.percentiles()
        latency.update({k: v for k, v in pct.items() if v is not None})
        if (p99 := pct["p99_ns"]) is not None:
            latency["pdv_ns"] = p99 - s.latency_min_ns
        if s.ipdv_samples:
            latency.update(ipdv_ns=s.ipdv_sum_ns / s.ipdv_samples, ipdv_max_ns=s.ipdv_max_ns)
            if (ipdv_p99 := quantile(ipdv_buckets, 0.99)) is not None:
                latency["ipdv_p99_ns"] = ipdv_p99
    # the achieved rate; the rate the flow was asked for is not known here (intended_pps null)
    achieved = (s.tx_frames - 1) / window_s if window_s > 0 else None
    return {
        "seq": seq, "key": f"{METHOD}/{name}/{run}", "method": METHOD, "method_index": -1,
        "frame_size": size_label(size) if size else None, "repetition": run - 1, "trial_index": i, "kind": METHOD,
        "load": {"rate_pps": achieved, "frame_size": size, "burst_frames": None, "duration_s": window_s},
        "started_at": started, "finished_at": utc_now(),
        "counts": {"achieved_pps": achieved, "intended_pps": None, "frames_sent": s.tx_frames,
                   "frames_received": received,
                   "frames_lost": lost, "loss_ratio": lost / expected if expected else 0.0,
                   "duplicated": s.rx_duplicated, "reordered": s.rx_reordered, "late": late, "valid": True,
                   "invalid_reason": None, "latency": latency},
        "otg": {"flow": name, "port_tx": f.tx, "port_rx": list(f.rx), "rx_tx_ratio": f.rx_tx_ratio},
    }
