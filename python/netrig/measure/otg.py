"""A measurer on an OTG server: `netrig run`'s trials through `netrig serve` — a controller of agents
on many hosts (docs/distributed.md), or one server — over the OTG API alone.

One trial (:meth:`OtgMeasurer.measure`)::

    set_config: one flow per pair (tx → rx port locations, the pair's addressing), the trial's frame
                size, each pair's share of the rate (the load is the aggregate, split evenly) and its
                frame count (rate × duration, or the burst's share) — counts are exact
    start every flow ─▶ poll flow metrics until every flow is stopped (the server says so once the
                last frame had time to arrive) ─▶ the receiving ports' own drops, each flow's
                duplicated and reordered frames and latency buckets (GET /netrig/agents) ─▶
                TrialCounts (percentiles: the buckets pooled)

A frame the tester lost itself is never the DUT's: a receiving port that dropped frames in its own
ring or kernel since the start (the server's ``ports``, netrig.otg.rxdrops) makes the trial invalid,
with the port and its counts (``raw.otg.tester_rx_drops``). What OTG's flow metrics do not carry is
marked, never made up (a trial's ``raw`` holds ``otg``: ``not_measured``, ``achieved_from``,
``latency_left_out``): the sender's pacing where the server does not report it (netrig's does, per
sending port in ``pacing``: the trial's ``pacing``, the worst port's), the sending window where the
server does not report it (netrig's does, per flow in ``sending``: the achieved rate is then the
sender's, never stretched by a DUT's delay; else it is estimated from each flow's first and last
arrival: ``achieved_from``), duplicates and reordering where the server does not report them
(netrig's does, in ``sequence``; else an excess of arrivals is counted as duplicates: a lower
bound), stray and foreign frames and the testers' own receive drops where the server does not
report them, forged frames where it does not judge them on every receiving port (netrig's judges a
flow it sends itself, by its sender's counts; a controller's agent cannot judge a flow another
agent sends), late frames and latency percentiles where the server has no latency buckets
for a flow that received frames (then min, mean and max only; netrig's has them for its first 256
flows, in ``latency``: frames above the late threshold — ``late_s``, else the drain time — are
late, lost to RFC 2544 and left out of the percentiles, as a trial's are), and a cross-agent flow's
latency that the controller left out, wholly or in part, because its clocks' bound was wider than
the value (``latency_left_out``). An agent down makes the trial's flows stale: the run stops
(resumable) rather than count them.

The server is reached through :class:`netrig.otgclient.client.OtgClient`; its flow metrics are
read as :class:`netrig.otgclient.messages.FlowMetric`.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from netrig.errors import CapabilityError, ConfigError, TestbedError
from netrig.measure.engine import LEARNING_DURATION_S, LEARNING_RATE_PPS
from netrig.measure.events import Event, EventRun
from netrig.measure.seam import FlowTrial, IntervalSink, LatencySummary, Load, Pacing, Phase, StackRequest, TrialCounts
from netrig.model import MAX_FRAME_SIZE, WIRE_OVERHEAD_BYTES, FrameSize, defaults
from netrig.otgclient import report
from netrig.otgclient.client import OtgClient, OtgDown, OtgRefused
from netrig.otgclient.messages import FlowMetric, MetricsResponse, read
from netrig.otgclient.report import FlowIpdv, FlowLatency, FlowSending, FlowSequence, PortDrops, PortPacing, add_buckets
from netrig.otgclient.typed import MessageError
from netrig.trial import Stream

#: A pair's addressing defaults: a stream's.
_STREAM = Stream(rate_pps=1)
#: How often a running trial's flow metrics are read, s.
POLL_S = 0.05
#: A trial whose flows are not all stopped this long after they should have is stopped, s.
FINISH_GRACE_S = 5.0
#: A per-flow answer of the server (``GET /netrig/agents``).
F = TypeVar("F", FlowLatency, FlowIpdv)
#: A per-port answer of the server.
P = TypeVar("P", PortDrops, PortPacing)
#: The receiving ports' own drops: measured when the server reports them (``GET /netrig/agents``).
TESTER_DROPS = "tester receive drops"
#: What OTG's flow metrics do not tell (every trial's ``not_measured`` under ``otg`` in ``raw``).
#: Reordering: measured when the server reports each flow's sequence (``GET /netrig/agents``).
REORDERED = "reordered"
#: Latency percentiles: measured when the server reports every received flow's latency buckets
#: (``GET /netrig/agents``: a netrig server's first 256 flows).
PERCENTILES = "latency percentiles"
#: Late frames (latency above the late threshold, lost to RFC 2544 as a trial's are): measured from the
#: same buckets, to their precision (0.1 %).
LATE = "late"
#: The sender's pacing: measured when the server reports every sending port's (``GET /netrig/agents``).
PACING = "pacing"
#: Each flow's first to last frame sent: measured when the server reports every flow's (``sending``);
#: else the achieved rate is read from arrivals.
SENDING = "sending window"
#: Frames a receiving port took that no flow sent (another start's or tester's; unsigned): measured
#: when the server reports them with its ports' drops.
STRAY, FOREIGN = "stray", "foreign"
#: Frames signed as a flow's current start that its sender cannot have sent: measured when the
#: server judges them on every receiving port (netrig's does where it sends the flows it receives;
#: a controller's agent cannot for a flow another agent sends).
FORGED = "forged"
NOT_MEASURED = (PACING, SENDING, REORDERED, LATE, STRAY, FORGED, FOREIGN, TESTER_DROPS, PERCENTILES)


@dataclass(frozen=True)
class ServerReport:
    """What the server says of a trial beside OTG's metrics (``GET /netrig/agents``), ``None``
    where it does not say: the receiving ports' own drops since the trial's start, by location
    (``ports``, netrig.otg.rxdrops); each flow's duplicated and reordered frames (``sequence``),
    latency buckets (``latency``) and |IPDV| (``ipdv``), by flow name; how each sending port kept its
    schedule (``pacing``), by location; each flow's sending window (``sending``), by flow name."""

    drops: dict[str, PortDrops] | None = None
    sequence: dict[str, FlowSequence] | None = None
    latency: dict[str, FlowLatency] | None = None
    ipdv: dict[str, FlowIpdv] | None = None
    pacing: dict[str, PortPacing] | None = None
    sending: dict[str, FlowSending] | None = None
    #: The sending ports' drops (their kernels' on transmit, ``tx_kernel_drops``), by location.
    sent_drops: dict[str, PortDrops] | None = None


@dataclass(frozen=True)
class OtgPair:
    """One stream of the trial: from port location ``tx`` to ``rx`` (``AGENT/IF`` at a controller),
    with the addressing that crosses the DUT between them."""

    tx: str
    rx: str
    src_mac: str = _STREAM.src_mac
    dst_mac: str = _STREAM.dst_mac
    src_ip: str = _STREAM.src_ip
    dst_ip: str = _STREAM.dst_ip
    src_port: int = _STREAM.src_port
    dst_port: int = _STREAM.dst_port

    def __post_init__(self) -> None:
        for name in ("tx", "rx"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ConfigError(name, f"{getattr(self, name)!r}: give a port location of the server (AGENT/IF at a "
                                        "controller, e.g. a/eth1)")
        if self.tx == self.rx:
            raise ConfigError("rx", f"{self.rx!r} is also tx: a pair goes from one port to another")
        if (":" in str(self.src_ip)) != (":" in str(self.dst_ip)):
            raise ConfigError("dst_ip", f"{self.dst_ip!r}: give both addresses of one family (src_ip is "
                                        f"{self.src_ip!r})")
        self.check(FrameSize(size=MAX_FRAME_SIZE))

    def check(self, frame: FrameSize) -> None:
        """The engine's checks of the pair's frames at this size (errors name the field)."""
        Stream(rate_pps=1, frame_size=frame, **{k: getattr(self, k) for k in (
            "src_mac", "dst_mac", "src_ip", "dst_ip", "src_port", "dst_port")})


@dataclass(frozen=True)
class FlowRow:
    """The part of an OTG ``Flow.Metric`` a trial reads."""

    name: str
    transmit: str
    frames_tx: int
    frames_rx: int
    #: ``None``: the server left it out — a flow with a part on an agent that is down (stale).
    loss: float | None
    first_ns: float | None
    last_ns: float | None
    #: (min, average, max) ns; ``None``: not reported (nothing received, or left out by a controller).
    latency: tuple[float, float, float] | None

    @classmethod
    def of(cls, m: FlowMetric) -> FlowRow:
        ts, lat = m.timestamps, m.latency
        latency = None
        if lat is not None and lat.minimum_ns is not None and lat.average_ns is not None and lat.maximum_ns is not None:
            latency = (lat.minimum_ns, lat.average_ns, lat.maximum_ns)
        return cls(m.name or "", m.transmit or "", m.frames_tx or 0, m.frames_rx or 0, m.loss,
                   ts.first_timestamp_ns if ts else None, ts.last_timestamp_ns if ts else None, latency)

    def sending_pps(self) -> float | None:
        """The rate the flow arrived at (its frames over its first to last arrival): the sender's
        rate, unless its first or last frames were lost; ``None`` with fewer than two arrivals."""
        if self.frames_rx < 2 or self.first_ns is None or self.last_ns is None or self.last_ns <= self.first_ns:
            return None
        return (self.frames_tx - 1) / ((self.last_ns - self.first_ns) / 1e9)


def otg_size(frame: FrameSize) -> dict:
    """A frame size as OTG's ``FlowSize``."""
    if frame.size is not None:
        return {"choice": "fixed", "fixed": frame.size}
    if frame.random is not None:
        return {"choice": "random", "random": {"min": frame.random[0], "max": frame.random[1]}}
    if frame.increment is not None:
        lo, hi, step = frame.increment
        return {"choice": "increment", "increment": {"start": lo, "end": hi, "step": step}}
    assert frame.mix is not None
    return {"choice": "weight_pairs", "weight_pairs": {"choice": "custom", "custom": [
        {"size": s, "weight": float(w)} for s, w in frame.mix]}}


def _value(v: object) -> dict:
    return {"choice": "value", "value": v}


class OtgMeasurer:
    """A :class:`~netrig.measure.seam.Measurer` whose trials an OTG server runs (see the module doc)."""

    def __init__(self, client: OtgClient, pairs: Sequence[OtgPair], *, learning_frames: bool = True,
                 tx_tolerance_pct: float = defaults.TX_TOLERANCE_PCT, drain_s: float = defaults.DRAIN_S,
                 late_s: float | None = None,
                 smoothness_tolerance_pct: float = defaults.SMOOTHNESS_TOLERANCE_PCT):
        if not pairs:
            raise CapabilityError("an OTG measurer needs at least one pair of ports")
        self.client, self.pairs = client, tuple(pairs)
        self.learning_frames = learning_frames
        self.tolerance = tx_tolerance_pct / 100
        self.drain_s = drain_s
        #: Latency above which a frame is late (``None``: the drain time), as a local trial's.
        self.late_ns = (drain_s if late_s is None else late_s) * 1e9
        self.smoothness_tolerance_pct = smoothness_tolerance_pct
        self.ports = list(dict.fromkeys(loc for p in self.pairs for loc in (p.tx, p.rx)))
        self._learned: set[int | str] = set()

    # ------------------------------------------------------------------------------- the server
    def _call(self, method: str, path: str, body: object = None) -> dict:
        """One OTG request; a server that is unreachable or refuses is the test bed's failure."""
        try:
            return self.client.call(method, path, body)
        except OtgDown as e:
            raise TestbedError(f"otg.url: {e}: start netrig serve there, then netrig run --resume") from None
        except OtgRefused as e:
            hint = "restart the agent (the controller takes it back), then netrig run --resume" \
                if e.status == 409 else "fix the pairs' locations or addressing (otg.pairs)"
            raise TestbedError(f"{e}: {hint}") from None

    def _config(self, frame: FrameSize, rate_pps: float, frames: Sequence[int]) -> dict:
        """The OTG config of one trial: a port per location, a flow per pair."""
        l1_bits = (frame.mean_size + WIRE_OVERHEAD_BYTES) * 8
        ports = [{"name": f"p{k}", "location": loc} for k, loc in enumerate(self.ports)]
        flows = []
        for i, (p, n) in enumerate(zip(self.pairs, frames)):
            ip = "ipv6" if ":" in p.src_ip else "ipv4"
            flows.append({
                "name": f"pair{i}",
                "tx_rx": {"choice": "port", "port": {"tx_name": f"p{self.ports.index(p.tx)}",
                                                     "rx_names": [f"p{self.ports.index(p.rx)}"]}},
                "packet": [{"choice": "ethernet", "ethernet": {"src": _value(p.src_mac), "dst": _value(p.dst_mac)}},
                           {"choice": ip, ip: {"src": _value(p.src_ip), "dst": _value(p.dst_ip)}},
                           {"choice": "udp", "udp": {"src_port": _value(p.src_port), "dst_port": _value(p.dst_port)}}],
                "size": otg_size(frame),
                "rate": {"choice": "bps", "bps": max(1, round(rate_pps / len(self.pairs) * l1_bits))},
                "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": n}},
                "metrics": {"enable": True, "loss": True, "timestamps": True, "latency": {"enable": True}},
            })
        return {"ports": ports, "flows": flows}

    def _traffic(self, state: str) -> None:
        self._call("POST", "/control/state", {"choice": "traffic", "traffic": {
            "choice": "flow_transmit", "flow_transmit": {"state": state, "flow_names": []}}})

    def _rows(self) -> list[FlowRow]:
        got = self._call("POST", "/monitor/metrics", {"choice": "flow", "flow": {"flow_names": []}})
        try:
            return [FlowRow.of(m) for m in read(MetricsResponse, got).flow_metrics]
        except MessageError as e:
            raise TestbedError(f"otg.url: {self.client.label}: its flow metrics are not OTG's: {e}") from None

    def _run(self, frame: FrameSize, rate_pps: float, frames: Sequence[int]) -> tuple[list[FlowRow], bool]:
        """One trial on the server: its flows' rows, and whether every flow finished in time (else
        they were stopped). Whatever ends it early (Ctrl-C, SIGTERM, an error) stops the flows first."""
        self._call("POST", "/config", self._config(frame, rate_pps, frames))
        expected_s = max(frames) / (rate_pps / len(self.pairs))
        deadline = time.monotonic() + expected_s * (1 + self.tolerance) + self.drain_s + FINISH_GRACE_S
        try:
            self._traffic("start")
            while True:
                time.sleep(POLL_S)
                rows = self._rows()
                if all(r.transmit == "stopped" for r in rows):
                    return rows, True
                if time.monotonic() > deadline:
                    self._traffic("stop")
                    return self._rows(), False
        except BaseException:
            self._stop_quietly()
            raise

    def _stop_quietly(self) -> None:
        try:
            self._traffic("stop")
        except TestbedError:
            pass  # the server is gone: nothing of ours runs there

    def _learn(self, frame: FrameSize) -> None:
        """Learning frames (RFC 2544 §23) before the first trial of each frame size: discarded."""
        if not self.learning_frames or frame.label in self._learned:
            return
        per = max(1, round(LEARNING_RATE_PPS * LEARNING_DURATION_S / len(self.pairs)))
        self._run(frame, LEARNING_RATE_PPS, [per] * len(self.pairs))
        self._learned.add(frame.label)

    def _server_report(self) -> ServerReport:
        """What the server says of the trial beside OTG's metrics (``GET /netrig/agents``)."""
        try:
            r = report.read(report.AgentsReport, self._call("GET", "/netrig/agents"))
        except MessageError:
            return ServerReport()
        sequence = {q.name: q for q in r.sequence} if r.sequence is not None else None
        latency = {q.name: q for q in r.latency} if r.latency is not None else None
        ipdv = {q.name: q for q in r.ipdv} if r.ipdv is not None else None
        sending = {q.name: q for q in r.sending} if r.sending is not None else None
        pacing = self._by_port(r.pacing, [p.tx for p in self.pairs])
        drops = self._by_port(r.ports, [p.rx for p in self.pairs])
        sent_drops = self._by_port(r.ports, [p.tx for p in self.pairs])
        return ServerReport(drops, sequence, latency, ipdv, pacing, sending, sent_drops)

    def _by_port(self, said: Sequence[P] | None, locations: Sequence[str]) -> dict[str, P] | None:
        """What the server said of each of ``locations`` (its ports are named ``p<index>``);
        ``None`` when it did not say it of every one."""
        if said is None:
            return None
        by_name = {p.name: p for p in said}
        got = {loc: by_name.get(f"p{self.ports.index(loc)}") for loc in locations}
        return {loc: d for loc, d in got.items() if d is not None} if None not in got.values() else None

    # ------------------------------------------------------------------------------- the seam
    def measure(self, load: Load, duration_s: float) -> TrialCounts:
        self._learn(load.frame_size)
        n = len(self.pairs)
        total = load.burst_frames if load.burst_frames is not None else max(n, round(load.rate_pps * duration_s))
        frames = [total // n + (1 if i < total % n else 0) for i in range(n)]
        rows, finished = self._run(load.frame_size, load.rate_pps, frames)
        server = self._server_report()
        return self._counts(rows, frames, load.rate_pps, finished, server, checked=load.burst_frames is None)

    def _counts(self, rows: list[FlowRow], planned: Sequence[int], intended_pps: float | None,
                finished: bool, server: ServerReport, checked: bool = True) -> TrialCounts:
        """The trial's counts from its flows' rows and what the server said beside them
        (``intended_pps``: the rate asked for; ``checked`` ``False``: a burst, no rate check)."""
        drops = server.drops
        stale = [r.name for r in rows if r.loss is None]
        if stale:
            raise TestbedError(f"otg: flow(s) {', '.join(stale)} have no loss: an agent is down (GET /netrig/agents "
                               "on the controller): restart it (the controller takes it back), then netrig run "
                               "--resume")
        sent = sum(r.frames_tx for r in rows)
        windows = [(server.sending or {}).get(r.name) for r in rows]
        rates = [w.pps() if w is not None else r.sending_pps() for r, w in zip(rows, windows)]
        from_windows = None not in windows
        known = [x for x in rates if x is not None]
        achieved = sum(known) if len(known) == len(rates) else (intended_pps or 0.0)
        reason = self._invalid(rows, planned, finished, drops,
                               achieved if checked and intended_pps is not None and None not in rates else None,
                               intended_pps, "were sent" if from_windows else "arrived", server.sent_drops)
        left_out = [r.name for r in rows if r.latency is None and r.frames_rx]
        latency, has_pct, late = _latency(rows, _pooled(rows, server.latency), self.late_ns)
        if latency is not None and (ipdv := _ipdv(rows, server.ipdv)) is not None:
            latency = dataclasses.replace(latency, ipdv_ns=ipdv[0], ipdv_max_ns=ipdv[1], ipdv_p99_ns=ipdv[2])
        pacing = _pacing(server.pacing, self.smoothness_tolerance_pct)
        stray, foreign, forged = _apart(drops)
        measured = {TESTER_DROPS: drops is not None, REORDERED: server.sequence is not None, PERCENTILES: has_pct,
                    LATE: late is not None, PACING: pacing is not None, SENDING: from_windows,
                    STRAY: stray is not None, FOREIGN: foreign is not None, FORGED: forged is not None}
        not_measured = [x for x in NOT_MEASURED if not measured.get(x)]
        duplicated, reordered, unique = _sequence(rows, server.sequence, sent)
        raw = {"otg": {"flows": [r.__dict__ for r in rows], "not_measured": not_measured,
                       "achieved_from": _achieved_from(from_windows, None not in rates),
                       "latency_left_out": left_out,
                       "tester_rx_drops": {loc: dataclasses.asdict(d) for loc, d in (drops or {}).items()}}}
        return TrialCounts(achieved_pps=achieved, intended_pps=intended_pps, frames_sent=sent,
                           frames_received=min(unique - (late or 0), sent), duplicated=duplicated,
                           reordered=reordered, late=late or 0, latency=latency, valid=reason is None,
                           invalid_reason=reason, pacing=pacing, stray=stray or 0, foreign=foreign or 0,
                           forged=forged or 0, raw=raw)

    def _invalid(self, rows: list[FlowRow], planned: Sequence[int], finished: bool,
                 drops: dict[str, PortDrops] | None, achieved: float | None, intended_pps: float | None,
                 timed: str = "arrived", sent: dict[str, PortDrops] | None = None) -> str | None:
        """Why the trial is the tester's, never the DUT's (``None``: valid): its flows did not finish,
        it sent short, a receiving port dropped frames itself or a sending port's kernel dropped
        them at another tester port's receive ring (``sent``: the sending ports'), or they were sent
        (or, ``timed``, arrived) below the rate (``achieved``: the rate to check, ``None``: none). A
        port's drops matter only to a trial that lost frames: without a loss, what it dropped was
        not the trial's (a neighbour's multicast)."""
        short = [(r, n) for r, n in zip(rows, planned) if r.frames_tx < n]
        lost = sum(r.frames_tx for r in rows) > sum(r.frames_rx for r in rows)
        said = [d.describe() for d in (drops or {}).values()] + [d.describe_tx() for d in (sent or {}).values()]
        own = [why for why in said if why] if lost else []
        if not finished:
            return "the flows did not finish in time (stopped): the tester stalled or an agent hung"
        if short:
            r, n = short[0]
            return f"the tester sent {r.frames_tx} of {n} frames ({r.name})"
        if own:
            return "; ".join(own) + ": the tester's loss, not the DUT's"
        if achieved is not None and intended_pps is not None and achieved < intended_pps * (1 - self.tolerance):
            return (f"the frames {timed} at {achieved:.0f} fps, {100 * achieved / intended_pps:.1f}% of "
                    f"the intended {intended_pps:.0f} fps: the tester fell short")
        return None

    def measure_phases(self, frame_size: FrameSize, phases: Sequence[Phase], interval_s: float,
                       tag: str = "", events: Sequence[Event] = (),
                       run_event: Callable[[Event], EventRun] | None = None) -> TrialCounts:
        raise _unsupported("multi-phase trials (per-interval counts)")

    def measure_events(self, load: Load, duration_s: float, events: Sequence[Event],
                       run_event: Callable[[Event], EventRun]) -> TrialCounts:
        raise _unsupported("trials with events")

    def measure_soak(self, load: Load, duration_s: float, interval_s: float, on_interval: IntervalSink,
                     events: Sequence[Event] = (), run_event: Callable[[Event], EventRun] | None = None) -> TrialCounts:
        raise _unsupported("soak trials (per-interval counts)")

    def measure_stack(self, request: StackRequest) -> dict:
        raise _unsupported("stack trials (kernel stacks on the tester ports)")

    def measure_flows(self, request: FlowTrial) -> TrialCounts:
        raise _unsupported("stateful trials (the DUT's conntrack table)")

def _unsupported(what: str) -> CapabilityError:
    return CapabilityError(f"{what}: not through an OTG server (otg): only methods whose trials are one load for a "
                           "time or a burst run there (throughput, frame loss, latency, MLRsearch, back-to-back…)")


def _of_received(rows: Sequence[FlowRow], by_name: dict[str, F] | None) -> list[F] | None:
    """What the server said of each flow that received frames (``None``: it did not say for one)."""
    found = [by_name.get(r.name) for r in rows if r.frames_rx] if by_name is not None else [None]
    return None if None in found else [g for g in found if g is not None]


def _pooled(rows: Sequence[FlowRow], latency: dict[str, FlowLatency] | None) -> FlowLatency | None:
    """Every flow's latency buckets pooled, with the widest clocks' bound (``None``: the server has
    none for a flow that received frames)."""
    parts = _of_received(rows, latency)
    if parts is None:
        return None
    return FlowLatency(name="trial", buckets=add_buckets(*(g.buckets for g in parts)),
                       uncertainty_ns=max((g.uncertainty_ns for g in parts), default=0.0))


def _latency(rows: Sequence[FlowRow], pooled: FlowLatency | None,
             late_ns: float) -> tuple[LatencySummary | None, bool, int | None]:
    """The trial's latency (min, mean and max from OTG's rows; percentiles from the server's
    buckets at or below the late threshold, as a trial's histograms leave late frames out),
    whether it has percentiles, and its late frames (``None``: unknown). A cross-agent percentile
    at or below its clocks' bound is left out, as the controller leaves out such a minimum or mean."""
    lat = [(r.latency, r.frames_rx) for r in rows if r.latency is not None and r.frames_rx]
    late, pct = None, {}
    if pooled is not None:
        on_time, late = pooled.on_time(late_ns)
        pct = {k: v for k, v in on_time.percentiles().items() if v is not None}
    if not lat:
        return None, False, late
    latency = LatencySummary(min_ns=min(x[0] for x, _ in lat), max_ns=max(x[2] for x, _ in lat),
                             mean_ns=sum(x[1] * k for x, k in lat) / sum(k for _, k in lat), **pct)
    if latency.p99_ns is not None and latency.min_ns is not None:
        latency = dataclasses.replace(latency, pdv_ns=latency.p99_ns - latency.min_ns)
    return latency, bool(pct), late


def _apart(drops: dict[str, PortDrops] | None) -> tuple[int | None, int | None, int | None]:
    """The frames the receiving ports took that no flow sent, or that their flow's sender cannot
    have sent: stray, foreign and forged, each summed (``None``: a port that does not say)."""
    if drops is None:
        return None, None, None
    ports = list(drops.values())

    def total(counts: list[int | None]) -> int | None:
        return None if None in counts else sum(x or 0 for x in counts)

    return (total([d.rx_stray for d in ports]), total([d.rx_foreign for d in ports]),
            total([d.rx_forged for d in ports]))


def _achieved_from(windows: bool, every_rate: bool) -> str:
    """What a trial's ``achieved_pps`` was read from, in words."""
    if not every_rate:
        return "the intended rate (a flow had fewer than two frames to time)"
    return ("each flow's frames over its first to last frame sent (the server's sending window)" if windows
            else "each flow's frames over its first to last arrival")


def _pacing(ports: dict[str, PortPacing] | None, tolerance_pct: float) -> Pacing | None:
    """The trial's pacing from each sending port's (the generator's pacing is smooth): the largest
    stretch, lag and gaps of any port, the most bunched port's peak (``None``: not reported)."""
    if not ports:
        return None
    worst = max(ports.values(), key=lambda p: (p.peak_frames - 1) / p.intended_frames if p.intended_frames > 0
                else float("-inf"))
    return Pacing(mode="smooth", stretch_s=max(p.stretch_ns for p in ports.values()) / 1e9,
                  max_lag_s=max(p.max_lag_ns for p in ports.values()) / 1e9, peak_frames=worst.peak_frames,
                  intended_frames=worst.intended_frames, gap_p50_ns=max(p.gap_p50_ns for p in ports.values()),
                  gap_p99_ns=max(p.gap_p99_ns for p in ports.values()),
                  gap_max_ns=max(p.gap_max_ns for p in ports.values()), tolerance_pct=tolerance_pct)


def _ipdv(rows: Sequence[FlowRow], ipdv: dict[str, FlowIpdv] | None) -> tuple[float, float, float | None] | None:
    """The trial's mean, largest and 99th-percentile |IPDV| over its flows, the percentile from
    their buckets pooled, as a trial's (``None``: a flow with differences has no buckets, beyond a
    server's first 256). ``None`` in all: the server did not say for a flow that received frames,
    or no flow had two frames."""
    parts = _of_received(rows, ipdv)
    if parts is None:
        return None
    samples = sum(g.samples for g in parts)
    if not samples:
        return None
    every = all(g.buckets or not g.samples for g in parts)
    p99 = report.quantile(add_buckets(*(g.buckets for g in parts)), 0.99) if every else None
    return sum(g.sum_ns for g in parts) / samples, max(g.max_ns for g in parts), p99


def _sequence(rows: Sequence[FlowRow], sequence: dict[str, FlowSequence] | None,
              sent: int) -> tuple[int, int, int]:
    """The trial's duplicated, reordered and unique frames: the server's counts of its flows, the
    unique ones from the same count when it gives it (a frame arriving between the metrics read
    and this one would else read as a lost frame); without them the excess of arrivals over
    frames sent as duplicates (a lower bound) and no reordering."""
    arrived = sum(r.frames_rx for r in rows)
    if sequence is None:
        return max(0, arrived - sent), 0, min(arrived, sent)
    got = [sequence[r.name] for r in rows if r.name in sequence]
    duplicated = sum(q.duplicated for q in got)
    counted = [q.frames_rx for q in got]
    if len(got) == len(rows) and None not in counted:
        arrived = sum(n for n in counted if n is not None)
    return duplicated, sum(q.reordered for q in got), arrived - duplicated
