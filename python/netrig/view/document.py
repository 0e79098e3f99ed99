"""The parts of a result document a report reads beside the methods' results — identity, line rate,
frame sizes, self-test, test bed, run flags, verdicts — each read once from the document into its
type (``RunView.head``), never by key.

The reading is tolerant (``netrig.view.reading``); nested parts are kept as stored and read by their
own type when asked for, so a malformed one reads as ``None`` without losing its neighbours.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from netrig.view.reading import Flag, LineRateInfo, finite, read_each, read_one


def text(v: object) -> str | None:
    """``v`` if it is a non-blank string."""
    return v if isinstance(v, str) and v.strip() else None


@dataclass(frozen=True)
class FrameSizeInfo:
    """A ``frame_sizes[]`` entry: the size, its mean frame length and its line rate in frames/s."""

    frame_size: Any = None
    mean_frame_size: Any = None
    line_rate_fps: Any = None


@dataclass(frozen=True)
class _Proven:
    fps: Any = None


@dataclass(frozen=True)
class CeilingInfo:
    """A self-test ceiling: the frame size and the rate the tester proved there."""

    frame_size: Any = None
    proven_rate_pps: Any = None
    #: Older documents: ``{"fps": …}``.
    proven: Any = None
    #: The entry as stored (read by the self-test's own type, ``methodology.selftest.Ceiling``).
    stored: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def proven_pps(self) -> float | None:
        old = read_one(_Proven, self.proven)
        return finite(self.proven_rate_pps) or (finite(old.fps) if old is not None else None)


@dataclass(frozen=True)
class SelftestInfo:
    """``selftest``: the test bed it ran on, its factor and trial length, whether it passed, its
    ceilings per frame size."""

    testbed: Any = None
    factor: Any = None
    duration_s: Any = None
    passed: Any = None
    ceilings: Any = None

    @property
    def testbed_name(self) -> Any:
        """The test bed it ran on (``loopback`` where not said: the self-test's default)."""
        return self.testbed if self.testbed is not None else "loopback"

    @property
    def factor_shown(self) -> Any:
        """Its factor (1.1 where not said: the default)."""
        return self.factor if self.factor is not None else 1.1

    @property
    def ceiling_list(self) -> tuple[CeilingInfo, ...]:
        stored = [c for c in self.ceilings if isinstance(c, Mapping)] if isinstance(self.ceilings, list) else []
        return tuple(replace(c, stored=d) for d in stored if (c := read_one(CeilingInfo, d)) is not None)


@dataclass(frozen=True)
class PlacementInfo:
    """The test bed's DUT placement as recorded: its mode, CPUs and what it says in words."""

    mode: Any = None
    cpus: Any = None
    note: Any = None

    @property
    def cpu_list(self) -> tuple[int, ...]:
        c = self.cpus
        ok = isinstance(c, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in c)
        return tuple(c) if ok else ()


@dataclass(frozen=True)
class TestbedInfo:
    """``testbed``: its name (a topology, ``simulated``, ``external``), topology, id, options, the
    options its topology reads (``topology_options``, recorded since netrig 2026-12) and placement."""

    __test__ = False

    name: Any = None
    topology: Any = None
    id: Any = None
    options: Any = None
    topology_options: Any = None
    placement: Any = None

    @property
    def placed(self) -> PlacementInfo:
        return read_one(PlacementInfo, self.placement) or PlacementInfo()

    @property
    def option_values(self) -> Mapping[str, Any]:
        return self.options if isinstance(self.options, Mapping) else {}

    @property
    def reads(self) -> tuple[str, ...]:
        """The options its topology reads (empty when the document does not say)."""
        t = self.topology_options
        return tuple(x for x in t if isinstance(x, str)) if isinstance(t, list) else ()


@dataclass(frozen=True)
class VerdictInfo:
    """A ``verdicts[]`` entry: a threshold check on one method's result at one frame size."""

    check: Any = None
    method_index: Any = None
    frame_size: Any = None
    threshold: Any = None
    value: Any = None
    passed: Any = None


@dataclass(frozen=True)
class ConfigInfo:
    """What a report shows of ``config`` beside the whole of it: its name or label."""

    name: Any = None
    label: Any = None


@dataclass(frozen=True)
class Document:
    """A result document's top level (docs/result-format.md): identity and the parts above, each
    read by its type on access; ``config``, ``environment`` and ``testbed`` are also kept whole (a
    report shows them as they are)."""

    tool: Any = None
    tool_version: Any = None
    command: Any = None
    run_id: Any = None
    started_at: Any = None
    finished_at: Any = None
    complete: Any = None
    interrupted_reason: Any = None
    resumed: Any = None
    config: Any = None
    environment: Any = None
    testbed: Any = None
    line_rate: Any = None
    frame_sizes: Any = None
    selftest: Any = None
    flags: Any = None
    verdicts: Any = None
    summary: Any = None
    trials: Any = None

    @classmethod
    def read(cls, doc: object) -> Document:
        return read_one(cls, doc) or cls()

    @property
    def run_flags(self) -> tuple[Flag, ...]:
        return read_each(Flag, self.flags)

    @property
    def sizes(self) -> tuple[FrameSizeInfo, ...]:
        return read_each(FrameSizeInfo, self.frame_sizes)

    @property
    def rate(self) -> LineRateInfo:
        return read_one(LineRateInfo, self.line_rate) or LineRateInfo()

    @property
    def self_test(self) -> SelftestInfo | None:
        """``None`` when the run has no self-test (or an empty one)."""
        return read_one(SelftestInfo, self.selftest) if self.selftest else None

    @property
    def bed(self) -> TestbedInfo:
        return read_one(TestbedInfo, self.testbed) or TestbedInfo()

    @property
    def configured(self) -> ConfigInfo:
        return read_one(ConfigInfo, self.config) or ConfigInfo()

    @property
    def verdict_list(self) -> tuple[VerdictInfo, ...]:
        return read_each(VerdictInfo, self.verdicts)
