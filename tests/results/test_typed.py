"""Method results round-trip as their own types: every stored repetition of the golden result files
reads back (``Method.read_result``, ``netrig.results.typed.from_dict``) into its dataclass, and that
writes (``to_dict``) exactly the stored document again — a field renamed on one side fails here."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from netrig.errors import ResultError
from netrig.methodology.mlr import GoalResult, MlrResult, SearchGoal
from netrig.methods import REGISTRY
from netrig.methods.throughput import ThroughputResult
from netrig.model import FrameSize, LineRate
from netrig.results import load_result
from netrig.results.typed import from_dict

DATA = Path(__file__).resolve().parents[1] / "data"
#: Result files netrig wrote (the hand-made fixtures lack fields a real run always writes — ``found``,
#: ``resolution_pps``, iperf's ``intervals`` —: they are completed when the report reads typed results).
GOLDEN = sorted(p for p in DATA.glob("report-*.json") if "handmade" not in p.name)


def _repetitions(path: Path):
    doc = load_result(path)
    lr = doc["line_rate"]
    line_rate = LineRate(bps=lr["bps"], source=lr["source"], interface=lr.get("interface"))
    for entry in doc["summary"]:
        method = REGISTRY.get(entry["method"])
        for res in entry["results"]:
            frame = FrameSize.parse(res["frame_size"])
            for rep in res["repetitions"]:
                yield method, rep, frame, line_rate


def _json(d: object) -> object:
    return json.loads(json.dumps(d))


def _missing(stored: object, written: object, where: str = "") -> list[str]:
    """Where ``written`` differs from ``stored`` on what ``stored`` has (a golden file written before
    a field existed lacks it; everything it has must come back equal)."""
    if isinstance(stored, dict) and isinstance(written, dict):
        return [m for k, v in stored.items()
                for m in ([f"{where}.{k}: not written"] if k not in written else _missing(v, written[k], f"{where}.{k}"))]
    if isinstance(stored, list) and isinstance(written, list) and len(stored) == len(written):
        return [m for i, (a, b) in enumerate(zip(stored, written)) for m in _missing(a, b, f"{where}[{i}]")]
    return [] if stored == written else [f"{where}: stored {stored!r}, written {written!r}"]


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_golden_repetitions_round_trip(path):
    seen = 0
    for method, rep, frame, line_rate in _repetitions(path):
        typed = method.read_result(rep, frame, line_rate)
        assert isinstance(typed, method.result_class())
        diff = _missing(_json(rep), _json(typed.to_dict()))
        assert not diff, f"{method.name} at {frame.label}: {diff[:5]}"
        seen += 1
    assert seen > 0


def test_golden_files_cover_the_methods_they_claim():
    names = {m.name for p in GOLDEN for m, *_ in _repetitions(p)}
    assert {"rfc2544_throughput", "rfc2544_latency", "rfc2544_frame_loss", "mlrsearch"} <= names, names


def test_nested_results_come_back_as_their_types():
    frame, lr = FrameSize.parse(64), LineRate(bps=1e9, source="config")
    goal = GoalResult(SearchGoal("NDR", 0.0), 95_000.0, 95_000.0, 96_000.0)
    r = MlrResult(frame, lr, (goal,), trials=7, search_time_s=12.5)
    back = from_dict(MlrResult, _json(r.to_dict()), frame=frame, line_rate=lr)  # type: ignore[arg-type]
    assert back == r
    assert isinstance(back.goals, tuple) and isinstance(back.goals[0].goal, SearchGoal)


def test_a_renamed_field_is_an_error_naming_it():
    frame, lr = FrameSize.parse(64), LineRate(bps=1e9, source="config")
    r = ThroughputResult(frame, lr, 1e5, 1e5, None, 3, False, None, 100.0, True)
    d = r.to_dict()
    d["lower"] = d.pop("lower_pps")
    with pytest.raises(ResultError, match="ThroughputResult: the result has no 'lower_pps'"):
        from_dict(ThroughputResult, d, frame=frame, line_rate=lr)


def test_every_method_result_is_a_dataclass_the_reader_can_build():
    for m in REGISTRY:
        cls = m.result_class()
        assert dataclasses.is_dataclass(cls), m.name


def test_a_partial_read_leaves_what_the_document_lacks_none():
    frame, lr = FrameSize.parse(64), LineRate(bps=1e9, source="config")
    r = from_dict(ThroughputResult, {"rate_pps": 1e5, "lower_pps": 1e5}, partial=True, frame=frame, line_rate=lr)
    assert r.rate_pps == 1e5 and r.found is None and r.resolution_pps is None and r.backpressure_trials == 0


def test_throughput_written_before_bounded_by_tester_claims_no_bound():
    """``tester_limited`` of an older throughput repetition meant "some trial was invalid": read now,
    it is neither a bound by the tester nor an upper end the DUT was seen to fail."""
    from netrig.results import migrate

    rep = {"rate_pps": 1e5, "lower_pps": 1e5, "upper_pps": 2e5, "tester_limited": True}
    doc = migrate({"schema_version": 2, "summary": [{"method": "rfc2544_throughput",
                                                      "results": [{"frame_size": 64, "repetitions": [rep]}]}]})
    got = doc["summary"][0]["results"][0]["repetitions"][0]
    assert got["tester_limited"] is False and got["bounded_by_tester"] is False and got["upper_pps"] is None


def _sample(hint: object, k: int = 1) -> object:
    """A value of type ``hint`` (a dataclass: its fields without defaults filled the same way, the
    others at their defaults), for a result built from nothing but its type."""
    import enum
    import types
    import typing

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    plain = {FrameSize: FrameSize.parse(64), LineRate: LineRate(bps=1e9, source="config"), bool: True, int: 2 + k,
             float: 0.25 + k / 100, str: "1kpps"}
    if hint in plain:
        return plain[hint]  # type: ignore[index]
    if origin is typing.Literal:
        return args[0]
    if origin in (typing.Union, types.UnionType):
        return _sample(next(a for a in args if a is not type(None)), k)
    if origin is tuple:
        return (_sample(args[0], k), _sample(args[0], k + 1)) if args[1:] == (Ellipsis,) else \
            tuple(_sample(a, k) for a in args)
    if origin is list:
        return [_sample(args[0], k)]
    if origin is dict or hint is dict:
        return {}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return next(iter(hint))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        return hint(**{f.name: _sample(hints[f.name], k) for f in dataclasses.fields(hint) if f.init
                       and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING})
    raise TypeError(f"no sample value for {hint!r}")


@pytest.mark.parametrize("method", list(REGISTRY), ids=lambda m: m.name)
def test_every_method_result_round_trips_through_what_it_writes(method):
    """Every method's result type, written (``to_dict``) and read back (``read_result``), writes the
    same document again: no field the type is read from is left out of what it writes."""
    frame, lr = FrameSize.parse(64), LineRate(bps=1e9, source="config")
    written = _json(_sample(method.result_class()).to_dict())
    assert _json(method.read_result(written, frame, lr).to_dict()) == written


def test_repetitions_written_before_every_field_was_read_back_still_load():
    """A back-to-back repetition with its burst rate as ``line_rate_fps`` and a system recovery without
    ``switch_s`` (written before their types were read back) load as the types now write them."""
    from netrig.results import migrate

    b2b = {"bursts_frames": [100], "line_rate_fps": 1488095.0, "throughput_fps": 1e6, "max_burst_reached": False,
           "resolution_frames": 1}
    rec = {"throughput_pps": 1e5, "overload_pps": 1.1e5, "recovery_pps": 5e4, "valid": True,
           "intervals": [{"t_s": 0.0, "phase": 0}, {"t_s": 2.03, "phase": 1}]}
    doc = migrate({"schema_version": 3, "summary": [
        {"method": "rfc2544_back_to_back", "results": [{"frame_size": 64, "repetitions": [b2b]}]},
        {"method": "rfc2544_system_recovery", "results": [{"frame_size": 64, "repetitions": [rec]}]}]})
    (b2b_back,), (rec_back,) = (e["results"][0]["repetitions"] for e in doc["summary"])
    assert b2b_back["burst_rate_fps"] == 1488095.0 and "line_rate_fps" not in b2b_back
    assert rec_back["switch_s"] == 2.03


def test_a_soak_with_its_monitor_samples_round_trips():
    """A soak's intervals carry the DUT monitor's compact samples (CPU, processes, memory, conntrack,
    interface drops): they read back as types and write the same document."""
    from netrig.methods.soak import METHOD, SoakInterval, SoakParams, SoakResult
    from netrig.monitor.monitor import compact_sample, read_sample

    frame, lr = FrameSize.parse(64), LineRate(bps=1e9, source="config")
    raw = {"t_s": 1.0, "dt_s": 1.0, "cpu": {"all": {"busy": 50.0, "softirq": 1.0}, "cpu0": {"busy": 97.0, "softirq": 2}},
           "procs": {"7": {"name": "dut", "cpu_percent": 5.0, "rss_bytes": 1000}},
           "mem": {"available_bytes": 9, "used_bytes": 10, "slab_bytes": 3}, "conntrack": {"dut": 12},
           "ifaces": {"eth0": {"rx_dropped": 4, "tx_dropped": 0}}}
    sample = compact_sample(read_sample(raw)).to_dict()
    rows = [from_dict(SoakInterval, {"t_s": 10.0 * i, "duration_s": 10.0, "segment": i // 3, "frames_sent": 100,
                                     "frames_received": 99, "frames_lost": 1, "monitor": sample}) for i in range(6)]
    res = SoakResult.build(frame, lr, SoakParams(duration_s=60, interval_s=10), 100.0, None, rows, None)
    written = _json(res.to_dict())
    assert written["intervals"][0]["monitor"] == _json(sample)
    back = METHOD.read_result(written, frame, lr)
    assert back == res and _json(back.to_dict()) == written
