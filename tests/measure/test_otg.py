"""The OTG measurer without a server (a scripted stand-in answers its requests): the config a trial
sets, the counts it makes of the flows' rows, what it marks as not measured, and how it fails."""
from __future__ import annotations

import pytest

from netrig.errors import CapabilityError, ConfigError, TestbedError
from netrig.measure import Load, Phase
from netrig.measure.otg import NOT_MEASURED, OtgMeasurer, OtgPair
from netrig.model import FrameSize
from netrig.otgclient.client import OtgRefused

PAIRS = (OtgPair("a/a1", "b/b1", "02:00:00:00:0a:01", "02:00:00:00:0b:01"),
         OtgPair("b/b2", "a/a2", "02:00:00:00:0b:02", "02:00:00:00:0a:02", "2001:2::1", "2001:2::2"))


def row(name: str, tx: int, rx: int, *, loss: float | None = 0.0, span_s: float = 1.0, latency: bool = True) -> dict:
    m: dict = {"name": name, "transmit": "stopped", "frames_tx": tx, "frames_rx": rx, "loss": loss,
               "timestamps": {"first_timestamp_ns": 1e9, "last_timestamp_ns": 1e9 + span_s * 1e9}}
    if loss is None:
        del m["loss"]
    if latency:
        m["latency"] = {"minimum_ns": 1000.0, "average_ns": 2000.0, "maximum_ns": 3000.0}
    return m


class FakeServer:
    """Answers the measurer's OTG requests with scripted flow rows; keeps every request."""

    def __init__(self, rows: list[dict], running_polls: int = 1, refuse: OtgRefused | None = None,
                 ports: list[dict] | None = None, sequence: list[dict] | None = None, latency: list[dict] | None = None,
                 ipdv: list[dict] | None = None, pacing: list[dict] | None = None, sending: list[dict] | None = None):
        self.rows, self.running, self.refuse, self.ports, self.sequence = rows, running_polls, refuse, ports, sequence
        self.latency, self.ipdv, self.pacing, self.sending = latency, ipdv, pacing, sending
        self.requests: list[tuple[str, str, object]] = []

    def call(self, method: str, path: str, body: object = None) -> dict:
        self.requests.append((method, path, body))
        if self.refuse is not None and path == "/config":
            raise self.refuse
        if path == "/monitor/metrics":
            self.running -= 1
            state = "started" if self.running >= 0 else "stopped"
            return {"flow_metrics": [{**r, "transmit": state} for r in self.rows]}
        if path == "/netrig/agents":  # an older server: no ports, no sequence
            return {"supervision": {"state": "off"}, **({"ports": self.ports} if self.ports is not None else {}),
                    **({"sequence": self.sequence} if self.sequence is not None else {}),
                    **({"latency": self.latency} if self.latency is not None else {}),
                    **({"ipdv": self.ipdv} if self.ipdv is not None else {}),
                    **({"pacing": self.pacing} if self.pacing is not None else {}),
                    **({"sending": self.sending} if self.sending is not None else {})}
        return {"warnings": []}


def measurer(server: FakeServer, **kw) -> OtgMeasurer:
    return OtgMeasurer(server, PAIRS, learning_frames=False, **kw)  # type: ignore[arg-type]


def test_a_trial_sets_one_flow_per_pair_and_counts_exactly():
    s = FakeServer([row("pair0", 500, 500), row("pair1", 500, 499, latency=False)])
    c = measurer(s).measure(Load(1000.0, FrameSize(size=128)), 1.0)
    cfg = next(b for m, p, b in s.requests if p == "/config")
    assert [p["location"] for p in cfg["ports"]] == ["a/a1", "b/b1", "b/b2", "a/a2"]
    f0, f1 = cfg["flows"]
    assert f0["duration"]["fixed_packets"]["packets"] == f1["duration"]["fixed_packets"]["packets"] == 500
    assert f0["rate"] == {"choice": "bps", "bps": round(500 * (128 + 20) * 8)}
    assert f1["packet"][1]["choice"] == "ipv6" and f1["tx_rx"]["port"] == {"tx_name": "p2", "rx_names": ["p3"]}
    assert (c.frames_sent, c.frames_received, c.frames_lost, c.valid) == (1000, 999, 1, True)
    assert c.achieved_pps == pytest.approx(2 * 499)  # 500 frames over 1 s from first to last arrival
    assert c.latency is not None and (c.latency.min_ns, c.latency.mean_ns, c.latency.p99_ns) == (1000.0, 2000.0, None)
    otg = c.raw["otg"]
    assert otg["latency_left_out"] == ["pair1"] and otg["not_measured"] == list(NOT_MEASURED)
    states = [b["traffic"]["flow_transmit"]["state"] for m, p, b in s.requests if p == "/control/state"]
    assert states == ["start"]


def test_a_tester_that_fell_short_is_invalid_never_dut_loss():
    short = measurer(FakeServer([row("pair0", 400, 400), row("pair1", 500, 500)]))
    c = short.measure(Load(1000.0, FrameSize(size=64)), 1.0)
    assert not c.valid and c.invalid_reason == "the tester sent 400 of 500 frames (pair0)"
    slow = measurer(FakeServer([row("pair0", 500, 500, span_s=2.0), row("pair1", 500, 500, span_s=2.0)]))
    c = slow.measure(Load(1000.0, FrameSize(size=64)), 1.0)
    assert not c.valid and "the tester fell short" in (c.invalid_reason or "")


def drops(ring: int = 0, kernel: int | None = 0, apart: tuple[int, int, int | None] | None = None) -> list[dict]:
    """The server's ports (as the measurer names them, p0..p3 for a/a1 b/b1 b/b2 a/a2); b/b1, the
    first pair's receiver, dropped ``ring`` frames in its ring, ``kernel`` in its kernel, and took
    ``apart`` = (stray, foreign, forged) frames of no flow or forged (left out: an older server,
    which does not say; forged ``None``: b/b1 did not judge, a flow sent elsewhere)."""
    extra = {} if apart is None else {"rx_stray": 0, "rx_foreign": 0, "rx_forged": 0}
    ports = [{"name": f"p{k}", "location": loc, "rx_ring_drops": ring if loc == "b/b1" else 0,
              "rx_kernel_drops": kernel if loc == "b/b1" else 0, **extra}
             for k, loc in enumerate(["a/a1", "b/b1", "b/b2", "a/a2"])]
    if apart is not None:
        ports[1].update(rx_stray=apart[0], rx_foreign=apart[1], rx_forged=apart[2])
    return ports


@pytest.mark.parametrize("ring, kernel, words", [(0, 0, None), (0, 120, "(0 in its ring, 120 in its kernel)"),
                                                 (118, None, "(118 in its ring, unread in its kernel)")])
def test_frames_a_receiving_tester_port_dropped_itself_are_never_dut_loss(ring, kernel, words):
    """Issue 45: a bare veth pair, no DUT, 2 % of the frames lost in the receiving agent's own ring or
    kernel: the trial is the tester's (invalid, naming the port), never a valid trial with loss."""
    s = FakeServer([row("pair0", 6000, 5880), row("pair1", 6000, 6000)], ports=drops(ring, kernel))
    c = measurer(s).measure(Load(12000.0, FrameSize(size=1280)), 1.0)
    otg = c.raw["otg"]
    assert "tester receive drops" not in otg["not_measured"]
    assert otg["tester_rx_drops"]["b/b1"] == {"name": "p1", "location": "b/b1", "rx_ring_drops": ring,
                                              "rx_kernel_drops": kernel, "rx_foreign": None, "rx_stray": None,
                                              "rx_forged": None, "tx_kernel_drops": None, "tx_peer": None}
    if words is None:  # nothing dropped by the tester: the 120 frames are the DUT's loss
        assert c.valid and c.frames_lost == 120
        return
    assert not c.valid and c.invalid_reason == (f"the receiving tester port b/b1 dropped frames itself {words}: "
                                                "the tester's loss, not the DUT's")


@pytest.mark.parametrize("peer", ["b/b1", None])
def test_frames_a_sending_port_dropped_at_a_tester_ports_ring_are_never_dut_loss(peer):
    """A sending port's kernel dropped the 120 lost frames on transmit, at its veth's other end: a
    served port there (a bare pair) makes the trial the tester's, naming both; anything else (a
    DUT's ingress) leaves them the DUT's loss."""
    ports = drops()
    ports[0].update(tx_kernel_drops=120, tx_peer=peer)
    s = FakeServer([row("pair0", 6000, 5880), row("pair1", 6000, 6000)], ports=ports)
    c = measurer(s).measure(Load(12000.0, FrameSize(size=1280)), 1.0)
    if peer is None:
        assert c.valid and c.frames_lost == 120
        return
    assert not c.valid and c.invalid_reason == ("the sending tester port a/a1's kernel dropped 120 frames at the "
                                                "receive ring of tester port b/b1: the tester's loss, not the DUT's")


def test_drops_of_a_receiving_port_in_a_trial_that_lost_nothing_were_not_its_frames():
    s = FakeServer([row("pair0", 6000, 6000), row("pair1", 6000, 6000)], ports=drops(0, 7))
    c = measurer(s).measure(Load(12000.0, FrameSize(size=1280)), 1.0)
    assert c.valid and c.frames_lost == 0 and c.raw["otg"]["tester_rx_drops"]["b/b1"]["rx_kernel_drops"] == 7


def test_a_server_that_reports_no_ports_leaves_the_testers_drops_not_measured():
    c = measurer(FakeServer([row("pair0", 10, 10), row("pair1", 10, 10)])).measure(Load(18.0, FrameSize(size=64)), 1.0)
    assert c.valid and "tester receive drops" in c.raw["otg"]["not_measured"] and c.raw["otg"]["tester_rx_drops"] == {}


def pacing(name: str, location: str, stretch_ns: int, peak: int, intended: float) -> dict:
    return {"name": name, "location": location, "frames": 500, "stretch_ns": stretch_ns, "max_lag_ns": stretch_ns // 2,
            "peak_frames": peak, "intended_frames": intended, "gap_p50_ns": 2000, "gap_p99_ns": 9000 + stretch_ns,
            "gap_max_ns": 10_000 + stretch_ns}


def test_the_senders_pacing_is_the_worst_sending_ports():
    """The two sending ports (p0 a/a1, p2 b/b2) each say how they kept their schedule: the trial's
    pacing has the larger stretch, lag and gaps, and the more bunched port's peak (b/b2: 3 frames in
    a 1-ms window meant for 0.5); one port unsaid leaves the pacing not measured."""
    rows = [row("pair0", 500, 500), row("pair1", 500, 500)]
    both = [pacing("p0", "a/a1", 3_000_000, 1, 0.5), pacing("p2", "b/b2", 0, 3, 0.5)]
    c = measurer(FakeServer(rows, pacing=both)).measure(Load(1000.0, FrameSize(size=64)), 1.0)
    p = c.pacing
    assert p is not None and "pacing" not in c.raw["otg"]["not_measured"]
    assert (p.mode, p.stretch_s, p.max_lag_s, p.peak_frames, p.intended_frames) == ("smooth", 0.003, 0.0015, 3, 0.5)
    assert (p.gap_p50_ns, p.gap_p99_ns, p.gap_max_ns) == (2000, 3_009_000, 3_010_000)
    assert not p.bunched  # 3 frames is within the timing allowance
    c = measurer(FakeServer(rows, pacing=both[:1])).measure(Load(1000.0, FrameSize(size=64)), 1.0)
    assert c.pacing is None and "pacing" in c.raw["otg"]["not_measured"]


def test_a_dut_that_delays_its_later_frames_more_is_never_the_tester_falling_short():
    """A DUT whose queue builds over the trial delays the last frames more than the first: the 500
    frames of each flow arrive over 2 s though they left over 1 s. Read from the arrivals, the
    tester sent at half the rate (invalid, the tester's); read from the server's sending windows it
    sent at the rate, and the trial is valid."""
    rows = [row("pair0", 500, 500, span_s=2.0), row("pair1", 500, 500, span_s=2.0)]
    windows = [{"name": f"pair{k}", "frames": 500, "first_ns": 10**9, "last_ns": 10**9 + 998 * 10**6} for k in (0, 1)]
    c = measurer(FakeServer(rows, sending=windows)).measure(Load(1000.0, FrameSize(size=64)), 1.0)
    assert c.valid and c.achieved_pps == pytest.approx(1000.0), (c.invalid_reason, c.achieved_pps)
    assert "sending window" not in c.raw["otg"]["not_measured"]
    assert c.raw["otg"]["achieved_from"].startswith("each flow's frames over its first to last frame sent")
    c = measurer(FakeServer(rows)).measure(Load(1000.0, FrameSize(size=64)), 1.0)
    assert not c.valid and "the tester fell short" in (c.invalid_reason or "")
    assert "sending window" in c.raw["otg"]["not_measured"]


def test_frames_of_no_flow_a_receiving_port_took_are_the_trials_stray_and_foreign_and_forged_apart():
    """Stray, foreign and forged frames are counted apart, never received; a port that did not
    judge forgery (it received a flow another agent sends) leaves forged alone not measured."""
    rows = [row("pair0", 500, 500), row("pair1", 500, 500)]
    apart = set(NOT_MEASURED) - {"stray", "foreign", "forged"}
    c = measurer(FakeServer(rows, ports=drops(apart=(4, 3, 2)))).measure(Load(1000.0, FrameSize(size=64)), 1.0)
    assert c.valid and (c.stray, c.foreign, c.forged, c.frames_received) == (4, 3, 2, 1000)
    assert not {"stray", "foreign", "forged"} & set(c.raw["otg"]["not_measured"])
    c = measurer(FakeServer(rows, ports=drops(apart=(4, 3, None)))).measure(Load(1000.0, FrameSize(size=64)), 1.0)
    assert (c.stray, c.foreign, c.forged) == (4, 3, 0) and set(c.raw["otg"]["not_measured"]) - apart == {"forged"}
    c = measurer(FakeServer(rows, ports=drops())).measure(Load(1000.0, FrameSize(size=64)), 1.0)
    assert (c.stray, c.foreign) == (0, 0) and {"stray", "foreign", "forged"} <= set(c.raw["otg"]["not_measured"])


def test_duplicates_are_counted_apart_and_a_burst_is_split():
    s = FakeServer([row("pair0", 51, 53), row("pair1", 50, 50)])
    c = measurer(s).measure(Load(1e5, FrameSize(size=64), burst_frames=101), 1.0)
    flows = next(b for m, p, b in s.requests if p == "/config")["flows"]
    assert [f["duration"]["fixed_packets"]["packets"] for f in flows] == [51, 50]
    assert (c.frames_received, c.duplicated, c.valid) == (101, 2, True)


def test_the_servers_duplicates_and_reordering_are_the_trials_and_a_lost_frame_is_not_hidden_by_a_duplicate():
    """502 arrivals of 500 frames: 3 duplicates and 1 frame lost, as the server's sequence windows
    say. Without them the excess of arrivals reads as 2 duplicates and no loss."""
    rows = [row("pair0", 500, 502), row("pair1", 500, 500)]
    seq = [{"name": "pair0", "duplicated": 3, "reordered": 4}, {"name": "pair1", "duplicated": 0, "reordered": 1}]
    c = measurer(FakeServer(rows, sequence=seq)).measure(Load(1000.0, FrameSize(size=64)), 1.0)
    assert (c.frames_received, c.frames_lost, c.duplicated, c.reordered) == (999, 1, 3, 5)
    assert "reordered" not in c.raw["otg"]["not_measured"]
    c = measurer(FakeServer(rows)).measure(Load(1000.0, FrameSize(size=64)), 1.0)
    assert (c.frames_received, c.frames_lost, c.duplicated, c.reordered) == (1000, 0, 2, 0)
    assert "reordered" in c.raw["otg"]["not_measured"]


def test_an_agent_down_or_a_refusal_stops_the_run_with_one_line():
    with pytest.raises(TestbedError, match="have no loss: an agent is down"):
        measurer(FakeServer([row("pair0", 10, 10, loss=None), row("pair1", 10, 10)])).measure(
            Load(10.0, FrameSize(size=64)), 1.0)
    refused = FakeServer([], refuse=OtgRefused("OTG server: agent b is down: restart it", 409))
    with pytest.raises(TestbedError, match=r"restart the agent \(the controller takes it back\)"):
        measurer(refused).measure(Load(10.0, FrameSize(size=64)), 1.0)


def test_an_interrupted_trial_stops_the_flows(monkeypatch):
    s = FakeServer([row("pair0", 10, 10), row("pair1", 10, 10)], running_polls=10 ** 6)
    polls = iter(range(3))

    def sleep_then_interrupt(_: float) -> None:
        if next(polls, None) is None:
            raise KeyboardInterrupt

    monkeypatch.setattr("netrig.measure.otg.time.sleep", sleep_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        measurer(s).measure(Load(10.0, FrameSize(size=64)), 1.0)
    states = [b["traffic"]["flow_transmit"]["state"] for m, p, b in s.requests if p == "/control/state"]
    assert states == ["start", "stop"]


def test_what_it_cannot_do_is_refused_naming_it():
    m = measurer(FakeServer([]))
    with pytest.raises(CapabilityError, match="multi-phase trials"):
        m.measure_phases(FrameSize(size=64), [Phase(10.0, 1.0)], 0.1)


@pytest.mark.parametrize("kw, field", [
    ({"tx": "a/a1", "rx": "a/a1"}, "rx"),
    ({"tx": "", "rx": "a/a1"}, "tx"),
    ({"tx": "a/a1", "rx": "b/b1", "src_mac": "nope"}, "src_mac"),
    ({"tx": "a/a1", "rx": "b/b1", "src_ip": "2001:2::1"}, "dst_ip"),
])
def test_a_bad_pair_names_its_field(kw, field):
    with pytest.raises(ConfigError) as e:
        OtgPair(**kw)
    assert e.value.field == field


def test_the_session_reaches_the_server_once_and_says_why_it_cannot(tmp_path):
    from netrig.otg.mapping import ServePort
    from netrig.otg.server import OtgServer
    from netrig.otg.service import Service
    from netrig.run.config import config_from_dict
    from netrig.run.session import open_session
    from netrig.trial import Port

    server = OtgServer(Service([ServePort("va@na", Port("va", "na"), None)]), "127.0.0.1", 0, None, token="k" * 32)
    server.start()
    try:
        def config(token: str, url: str = server.url):
            (tmp_path / "token").write_text(token + "\n")
            (tmp_path / "token").chmod(0o600)  # a token file others may read is refused
            return config_from_dict({"otg": {"url": url, "token_file": str(tmp_path / "token"),
                                             "pairs": [{"tx": "a/a1", "rx": "b/b1"}, {"tx": "b/b2", "rx": "a/a2"}]},
                                     "selftest": {"enabled": False}, "line_rate": {"speed_bps": "10M"},
                                     "methods": [{"rfc2544_throughput": {}}]})

        with open_session(config("k" * 32), "dut") as s:
            assert isinstance(s.measurer, OtgMeasurer) and s.testbed["server"].startswith("netrig")
            assert "agents" not in s.testbed  # one netrig serve, no controller
            assert s.line_rate.bps == 2 * 10e6  # the pairs' aggregate
        with pytest.raises(ConfigError) as e, open_session(config("w" * 32), "dut"):
            pass
        assert e.value.field == "otg.token_file" and "Authorization: Bearer" in e.value.message
    finally:
        server.stop()
    with pytest.raises(TestbedError, match="otg.url: OTG server .*: start netrig serve there"), \
            open_session(config("k" * 32, server.url), "dut"):
        pass


def test_the_servers_latency_buckets_give_the_trials_percentiles_over_every_frame():
    """Two flows' buckets pooled: 100 frames at 1 µs, 90 at 3 µs (p50 1 µs, p90 and p99 3 µs) and 1
    at 50 µs in the second flow (p99.9 50 µs). A received flow without buckets (beyond a server's
    256), or a server without them, leaves the percentiles not measured."""
    rows = [row("pair0", 100, 100), row("pair1", 91, 91)]
    lat = [{"name": "pair0", "buckets": [[1000, 100]]}, {"name": "pair1", "buckets": [[3001, 90], [50015, 1]]}]
    c = measurer(FakeServer(rows, latency=lat)).measure(Load(191.0, FrameSize(size=64)), 1.0)
    assert c.latency is not None
    got = (c.latency.p50_ns, c.latency.p90_ns, c.latency.p99_ns, c.latency.p999_ns, c.latency.pdv_ns)
    assert got == (1000, 3001, 3001, 50015, 3001 - 1000)
    assert "latency percentiles" not in c.raw["otg"]["not_measured"]
    for partial in (lat[:1], None):
        c = measurer(FakeServer(rows, latency=partial)).measure(Load(191.0, FrameSize(size=64)), 1.0)
        assert c.latency is not None and c.latency.p99_ns is None
        assert "latency percentiles" in c.raw["otg"]["not_measured"]


def test_a_cross_agent_percentile_within_the_clocks_bound_is_left_out():
    rows = [row("pair0", 100, 100)]
    lat = [{"name": "pair0", "buckets": [[200, 50], [5000, 50]], "uncertainty_ns": 1000.0}]
    c = measurer(FakeServer(rows, latency=lat)).measure(Load(100.0, FrameSize(size=64)), 1.0)
    assert c.latency is not None and (c.latency.p50_ns, c.latency.p99_ns) == (None, 5000)


def test_frames_later_than_the_drain_are_late_lost_and_left_out_of_the_percentiles():
    rows = [row("pair0", 100, 100)]
    lat = [{"name": "pair0", "buckets": [[1000, 97], [5000, 1], [3_000_000_000, 2]]}]
    c = measurer(FakeServer(rows, latency=lat)).measure(Load(100.0, FrameSize(size=64)), 1.0)
    assert (c.frames_received, c.late, c.frames_lost) == (98, 2, 2)
    assert c.latency is not None and c.latency.p999_ns == 5000
    assert "late" not in c.raw["otg"]["not_measured"]
    c = measurer(FakeServer(rows)).measure(Load(100.0, FrameSize(size=64)), 1.0)
    assert (c.frames_received, c.late) == (100, 0) and "late" in c.raw["otg"]["not_measured"]
    # A late threshold of its own (trial.late_s) below the 5-us frame makes it late too.
    c = measurer(FakeServer(rows, latency=lat), late_s=2e-6).measure(Load(100.0, FrameSize(size=64)), 1.0)
    assert (c.frames_received, c.late) == (97, 3) and c.latency is not None and c.latency.p999_ns == 1000


def test_the_servers_ipdv_gives_the_trials_mean_largest_and_99th_percentile():
    """The 99th percentile comes from both flows' buckets pooled (198 differences: the 197th is
    in pair1's 900-ns bucket), and is not said when a flow with differences has no buckets."""
    rows = [row("pair0", 100, 100), row("pair1", 100, 100)]
    ipdv = [{"name": "pair0", "sum_ns": 9900, "samples": 99, "max_ns": 400, "buckets": [[100, 98], [400, 1]]},
            {"name": "pair1", "sum_ns": 29700, "samples": 99, "max_ns": 900, "buckets": [[300, 96], [900, 3]]}]
    c = measurer(FakeServer(rows, ipdv=ipdv)).measure(Load(200.0, FrameSize(size=64)), 1.0)
    assert c.latency is not None and (c.latency.ipdv_ns, c.latency.ipdv_max_ns, c.latency.ipdv_p99_ns) == (200.0, 900, 900)
    ipdv[1]["buckets"] = []
    c = measurer(FakeServer(rows, ipdv=ipdv)).measure(Load(200.0, FrameSize(size=64)), 1.0)
    assert c.latency is not None and (c.latency.ipdv_ns, c.latency.ipdv_p99_ns) == (200.0, None)
    c = measurer(FakeServer(rows, ipdv=ipdv[:1])).measure(Load(200.0, FrameSize(size=64)), 1.0)
    assert c.latency is not None and c.latency.ipdv_ns is None, "a flow the server did not say for"


def test_a_duplicate_arriving_after_the_metrics_were_read_is_no_lost_frame():
    """The metrics counted 500 arrivals of 500 frames; a duplicate arrived before the server's
    sequence counts were read. Unique frames come from the count the duplicates are in."""
    rows = [row("pair0", 500, 500), row("pair1", 500, 500)]
    seq = [{"name": "pair0", "duplicated": 1, "reordered": 0, "frames_rx": 501},
           {"name": "pair1", "duplicated": 0, "reordered": 0, "frames_rx": 500}]
    c = measurer(FakeServer(rows, sequence=seq)).measure(Load(1000.0, FrameSize(size=64)), 1.0)
    assert (c.frames_received, c.frames_lost, c.duplicated) == (1000, 0, 1)
