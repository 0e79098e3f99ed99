"""What a method is: one module per method (``netrig.methods``) declares everything about itself,
and everything else — config parsing, the run loop, the console summary, the HTML/Markdown report,
comparisons and the CLI shortcuts — iterates the :class:`Registry` and never names a method.

A method module defines

* its **parameters**: a frozen dataclass (units in the field names, validation in
  ``__post_init__`` naming the field), parsed from the config file by field type;
* its **result**: a frozen dataclass with ``to_dict()`` (the repetition result of
  ``docs/result-format.md``), ``headline_pps`` and ``stats_values()``;
* how it **runs**: :meth:`Method.run` against the measurer seam, given a :class:`Context`;
* its **trial estimate**, the top rate it offers and its longest trial (the self-test proves that
  rate for that long), its threshold metrics;
* its **presentation**: console summary rows, report sections (HTML and Markdown), comparison
  ratios and its plot types — read from result documents only (``netrig.view.RunView``);
* optionally its **CLI shortcut** (a test of ``netrig rfc2544``, or ``netrig ndr-pdr``).

and ends with ``METHOD = TheMethod()``; ``netrig.methods`` lists every ``METHOD`` once.
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from netrig.errors import ConfigError, ResultError
from netrig.measure import Measurer
from netrig.methodology.tester import ProvenLimit, proven_limit
from netrig.model import FrameSize, LineRate
from netrig.results.typed import from_dict
from netrig.view.plotkit import Plot
from netrig.view.run_view import RunView, Stat
from netrig.view.table import Table


class MethodResult(Protocol):
    """What every method's result offers the run loop and the result document."""

    @property
    def headline_pps(self) -> float | None:
        """The method's headline rate (throughput, NDR, received rate…), ``None`` if it has none."""
        ...

    def stats_values(self) -> dict[str, float | None]:
        """The numbers summarised as min / median / max over repetitions (``stats`` in the result)."""
        ...

    def to_dict(self) -> dict:
        """The repetition result as stored in ``summary[].results[].repetitions``."""
        ...


#: The attribute of an exception that carries a method's partial result.
PARTIAL_RESULT_ATTR = "netrig_partial_result"


def with_partial(exc: BaseException, build: Callable[[], MethodResult]) -> BaseException:
    """Attach the partial result ``build()`` makes to ``exc`` (an error or Ctrl-C that stopped a
    method mid-way), unless an inner search already did; the run loop records it as incomplete.
    A failure to build it never hides ``exc``."""
    if getattr(exc, PARTIAL_RESULT_ATTR, None) is None:
        try:
            setattr(exc, PARTIAL_RESULT_ATTR, build())
        except Exception:  # the original error matters more than a partial result
            pass
    return exc


def partial_result(exc: BaseException) -> MethodResult | None:
    """The partial result a method attached to ``exc`` (``None`` if none)."""
    return getattr(exc, PARTIAL_RESULT_ATTR, None)


def _no_notice(message: str) -> None:
    """Where a method's live lines go when nobody shows them."""


def _no_publish(result: MethodResult) -> None:
    """Where a method's live result goes when nobody exports it."""


@dataclass(frozen=True)
class Answer:
    """One answer of a method to "how much does the DUT forward?": its name (``RFC 2544``, ``NDR``),
    the rate it gives, the load it saw pass and the lowest load above it it saw the DUT fail (None:
    none, or only the tester limited it), how it decides (trials per load, duration, loss goal), and
    whether it answers for zero loss (NDR does; PDR allows some, so it lies above the others by design)."""

    name: str
    value_pps: float
    lower_pps: float
    upper_pps: float | None
    basis: str
    zero_loss: bool = True
    #: The tester, not the DUT, stopped it: the rate is a lower bound only.
    at_least: bool = False


@dataclass(frozen=True)
class Context:
    """What the run loop hands a method for one frame size and repetition."""

    measurer: Measurer
    frame: FrameSize
    line_rate: LineRate
    #: The configured trial duration (``trial.duration_s``), for searches a method runs for itself.
    trial_duration_s: float
    #: The DUT's throughput at this frame size (from an earlier method, or measured for this one),
    #: for methods with ``needs_throughput`` (``uses_throughput``: from an earlier method only);
    #: ``None`` when none was found.
    throughput_pps: float | None = None
    #: The DUT is a model that resets itself (the simulated test bed): no reset command is needed.
    simulated_dut: bool = False
    #: Environment variables for user commands (the reset command): the test bed's namespaces and
    #: interfaces (``NETRIG_DUT_NETNS``, ``NETRIG_TX_IFNAME`` …; see ``Testbed.command_env``).
    command_env: Mapping[str, str] = field(default_factory=dict)
    #: The highest rate the tester vouches for at this frame size: the self-test's proven ceiling
    #: divided by its factor (``None`` without a self-test). Searches never ask for more.
    tester_limit_pps: float | None = None
    #: Show a line to the user while the method runs (the console's notes; a soak's live verdicts).
    notify: Callable[[str], None] = _no_notice
    #: The DUT can slow the sender instead of dropping (``Session.dut_can_hold_sender``); behind
    #: a test bed's wire it cannot, and a sender that fell short is the tester's.
    dut_can_hold_sender: bool = True
    #: Publish the method's result while it runs (the soak's live verdicts): the run's telemetry.
    publish: Callable[[MethodResult], None] = _no_publish

    @property
    def tester_limit(self) -> ProvenLimit:
        return proven_limit(self.tester_limit_pps, self.dut_can_hold_sender)

    def throughput_or(self, floor_pct: float) -> float:
        """The throughput, or ``floor_pct`` % of the line rate when none is known."""
        tp = self.throughput_pps
        return tp if tp is not None and tp > 0 else self.line_rate.fps(self.frame) * floor_pct / 100


@dataclass(frozen=True)
class Section:
    """A section of the report (and of a comparison), in page order of its first method."""

    id: str
    title: str
    #: The section's title in a comparison (default: ``title``).
    compare_title: str = ""
    #: Shown (saying it has no data) in reports of runs without its methods; otherwise only when
    #: one of its methods has something to show.
    shown_when_empty: bool = False


@dataclass(frozen=True)
class Capacity:
    """A method's rate headline per frame size, as tables and plots across methods use it."""

    frame_size: Any
    rate: Stat
    pct: Stat | None
    l1_bps: float | None
    l2_bps: float | None
    #: The rate is a lower bound ("≥"): the tester's limit ended the search, not the DUT.
    at_least: bool = False


@dataclass(frozen=True)
class Command:
    """A CLI shortcut command: ``netrig <name>`` runs its methods on a test bed without a config file
    (the CLI registers one per command its methods name)."""

    name: str
    summary: str
    description: str
    #: The default of ``--frame-sizes``.
    sizes_default: str = "rfc"


@dataclass(frozen=True)
class Shortcut:
    """This method as test ``test`` of a shortcut command (``netrig rfc2544 --tests throughput``; a
    command with one method has no ``--tests``)."""

    command: Command
    test: str
    #: Run by default when ``--tests`` is not given.
    default: bool = True


#: The frame size of a stack method's results and trials: the kernel stack chooses its frames.
STACK_FRAME = FrameSize(name="stack", mix=((1518, 1),))


class Method:
    """Base of every method; subclasses set the class attributes and override what they have."""

    #: The config key and the ``method`` of results, e.g. ``"rfc2544_throughput"``.
    name: ClassVar[str]
    #: How the console, reports and flags call it, e.g. ``"RFC 2544 §26.1 throughput"``.
    label: ClassVar[str]
    #: A short name for narrow columns (trial tables, timelines); default: ``name``.
    short_name: ClassVar[str] = ""
    #: What its zero-loss answer is called beside other methods' (default: its label).
    answer_label: ClassVar[str] = ""
    #: The parameters' frozen dataclass.
    params_type: ClassVar[type]
    #: It runs at a rate relative to the DUT's throughput (taken from an earlier method that
    #: ``provides_throughput``, its ``throughput_from``, or, when no such method ran at its frame
    #: size, measured by the primary method; where one ran and found none, it is not run there).
    needs_throughput: ClassVar[bool] = False
    #: It takes the DUT's throughput when an earlier method of the run found one at its frame size
    #: (``Context.throughput_pps``), and finds what it needs itself otherwise.
    uses_throughput: ClassVar[bool] = False
    #: Its headline is a throughput other methods can run relative to.
    provides_throughput: ClassVar[bool] = False
    #: Its headline is *the* throughput of a run: the summary per configuration, the self-test
    #: comparison and a throughput measured for methods that need one use it (one method).
    primary: ClassVar[bool] = False
    #: Trials shorter than this are flagged ``short_trials`` (the RFC's duration), if it has one.
    rfc_duration_s: ClassVar[float | None] = None
    #: The report sections it draws into, in page order.
    sections: ClassVar[tuple[Section, ...]] = ()
    #: Its plot types.
    plots: ClassVar[tuple[Plot, ...]] = ()
    #: Console summary columns (after the frame size, before the flags).
    console_columns: ClassVar[tuple[str, ...]] = ()
    #: Its CLI shortcut, if it has one.
    shortcut: ClassVar[Shortcut | None] = None
    #: Its shortcut's ``--duration`` is its own parameter ``duration_s`` (a soak's hours), not the
    #: trial duration (which stays at its default for the self-test and searches).
    owns_duration: ClassVar[bool] = False
    #: It runs stack trials (``Measurer.measure_stack``) of this kind: the test bed's tester ports
    #: get kernel stacks, and the method runs once per repetition, not per frame size (its results
    #: carry the frame size ``STACK_FRAME.label``: the kernel stack chooses the frames).
    stack_kind: ClassVar[str | None] = None
    #: The test beds (topologies) it runs on; ``None``: any, the simulated one included. A config
    #: naming another is refused before anything runs.
    testbeds: ClassVar[tuple[str, ...] | None] = None
    #: Events under load (``trial.events``, ``--event CMD --at T``) run in its trials of this kind:
    #: ``"rate"`` (every timed trial at a rate), ``"phases"`` (its continuous multi-phase trial) or
    #: ``"soak"``; ``None``: it takes none (bursts, stack and stateful trials, or trials whose own
    #: analysis an outage would confound).
    event_trials: ClassVar[str | None] = None

    # ---------------------------------------------------------------- configuration
    def config_defaults(self, params: dict, trial_duration_s: float) -> dict:
        """Fill defaults that come from the rest of the config (``params`` as given in the file).
        Default: ``duration_s`` is the trial duration."""
        fields = {f.name for f in dataclasses.fields(self.params_type)}
        if "duration_s" in fields and "duration_s" not in params:
            params = {**params, "duration_s": trial_duration_s}
        return params

    # ---------------------------------------------------------------- running
    def run(self, params: Any, ctx: Context) -> MethodResult:
        raise NotImplementedError

    def event_window_s(self, params: Any) -> float:
        """How long each of its trials that take events runs (every event's time must be inside it).
        Default: its ``duration_s``."""
        return float(params.duration_s)

    def estimate_trials(self, params: Any, frame: FrameSize, line_fps: float) -> int:
        """About how many trials one repetition at one frame size takes (for progress)."""
        return 1

    def top_rate_pct(self, params: Any) -> float:
        """The highest load it offers, in % of line rate (the self-test proves 1.1 × this)."""
        return 100.0

    def top_rate_pps(self, params: Any, frame: FrameSize, line_rate: LineRate) -> float:
        """The highest load it offers at ``frame``, frames/s (the self-test proves factor × this):
        ``top_rate_pct`` of the line rate, unless it knows its load otherwise (a soak at 20 kpps)."""
        return line_rate.fps(frame) * self.top_rate_pct(params) / 100

    def selftest_trial_s(self, params: Any) -> float | None:
        """How long the self-test's trials must last for it: its longest trial at a rate (default:
        its ``duration_s``); ``None``: the run's trial duration."""
        d = getattr(params, "duration_s", None)
        return float(d) if d is not None else None

    def default_throughput(self, ctx: Context) -> float | None:
        """Primary method only: measure the throughput with default parameters."""
        raise NotImplementedError(f"{self.name} is not the primary method")

    # ---------------------------------------------------------------- results
    def result_class(self) -> type:
        """Its repetition result's dataclass: what :meth:`run` returns."""
        return inspect.signature(type(self).run, eval_str=True).return_annotation

    def read_params(self, params: Mapping[str, Any]) -> Any:
        """Stored parameters (``summary[].params``) as its parameters' type again; ``None`` when
        they do not read as that (a hand-made or foreign document)."""
        try:
            return from_dict(self.params_type, params)
        except (ConfigError, ResultError, TypeError, ValueError):
            return None

    def read_result(self, repetition: dict, frame: FrameSize, line_rate: LineRate) -> Any:
        """A stored repetition (``summary[].results[].repetitions[]``) as its result type again."""
        return from_dict(self.result_class(), repetition, frame=frame, line_rate=line_rate)

    def verdict_values(self, result: dict) -> dict[str, float | None]:
        """Values of threshold metrics (``throughput_pct``, ``latency_ns``, ``loss_ratio``) for one
        frame-size result of the summary; a metric absent here is not checked."""
        return {}

    def console_rows(self, result: dict, flags: str, line_rate: LineRate | None = None) -> list[list[str]]:
        """Console summary rows of one frame-size result: the frame size, ``console_columns``, flags."""
        return []

    def zero_loss_bounds(self, repetition: dict, params: dict) -> tuple[float, float | None, str] | None:
        """If this repetition result brackets the DUT's zero-loss throughput: ``(a load it saw pass,
        the lowest load above that it saw the DUT fail or None, how it decides)``. Methods that
        measure the same thing are checked against each other with it (``netrig.run.consistency``)."""
        return None

    def answers(self, repetition: dict, params: dict) -> list[Answer]:
        """The rates this repetition answers "how much does the DUT forward?" with, each with how it
        decides (the demo's answers side by side, ``netrig.run.consistency.answers``): its zero-loss
        bracket by default; a method with several goals (MLRsearch's NDR and PDR) gives each."""
        b = self.zero_loss_bounds(repetition, params)
        if b is None:
            return []
        bounded = self.tester_bounded(repetition)
        return [Answer(self.answer_label or self.label, b[0], b[0], b[1], b[2], at_least=bounded)]

    def tester_bounded(self, repetition: dict) -> bool:
        """The tester, not the DUT, bounded this repetition's answer (it is a lower bound only)."""
        return False

    def capacity(self, run: RunView) -> list[Capacity]:
        """Its rate headline per frame size, sorted by frame size (primary method)."""
        return []

    # ---------------------------------------------------------------- report
    def html(self, run: RunView) -> dict[str, str]:
        """HTML per section id (its own sections, or ``"summary"``), whatever the run holds:
        a section without its data says so."""
        return {}

    def compare_html(self, runs: Sequence[RunView]) -> dict[str, str]:
        """HTML per section id of a comparison (``runs[0]`` is the baseline)."""
        return {}

    def markdown(self, run: RunView) -> str:
        """Its sections of the Markdown summary."""
        return ""

    def ratio_table(self, runs: Sequence[RunView]) -> tuple[str, Table] | None:
        """Each run's numbers as a percentage of ``runs[0]`` (a comparison), if it has any."""
        return None

    def compare_values(self, run: RunView) -> dict[str, tuple[float | None, bool]]:
        """Its headline numbers for a study's chart of variants against the baseline: metric label →
        ``(value, higher is better)``; labels are the same in every run it appears in."""
        return {}

    # ---------------------------------------------------------------- CLI
    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        """Options of its shortcut (each declared once, kebab-case, with help and default)."""

    def cli_params(self, args: argparse.Namespace) -> dict:
        """Its parameters from the shortcut's options, in config-file form."""
        return {}

    #: Shortcut options → the parameter they set, for error messages (``{"resolution_pct": "--resolution"}``).
    cli_fields: ClassVar[dict[str, str]] = {}


class Registry:
    """Every method, in the order reports show them."""

    def __init__(self, methods: Iterable[Method]):
        self._methods = tuple(methods)
        self._by_name = {m.name: m for m in self._methods}
        if len(self._by_name) != len(self._methods):
            raise ValueError("two methods share a name")
        primary = [m for m in self._methods if m.primary]
        if len(primary) != 1:
            raise ValueError("exactly one method must be primary")
        self.primary: Method = primary[0]

    def __iter__(self) -> Iterator[Method]:
        return iter(self._methods)

    def __len__(self) -> int:
        return len(self._methods)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def get(self, name: str, field: str = "method") -> Method:
        """The method called ``name``; a ``ConfigError`` naming ``field`` and the allowed names if none."""
        try:
            return self._by_name[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self._by_name), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(field, f"unknown method; {hint}allowed: {', '.join(self._by_name)}") from None

    def label(self, name: str) -> str:
        """How reports call method ``name`` (the name itself for a method this netrig lacks)."""
        m = self._by_name.get(name)
        return m.label if m is not None else name

    def short_name(self, name: str) -> str:
        """Method ``name``'s short name (the name itself for the self-test or an unknown method)."""
        m = self._by_name.get(name)
        return (m.short_name or m.name) if m is not None else name

    def sections(self) -> list[Section]:
        """Every method section in page order (first appearance), without duplicates."""
        out: dict[str, Section] = {}
        for m in self._methods:
            for s in m.sections:
                out.setdefault(s.id, s)
        return list(out.values())

    def plots(self) -> list[Plot]:
        return [p for m in self._methods for p in m.plots]

    def commands(self) -> list[Command]:
        """Every shortcut command, in registry order of its first method."""
        out: dict[str, Command] = {}
        for m in self._methods:
            if m.shortcut is not None:
                out.setdefault(m.shortcut.command.name, m.shortcut.command)
        return list(out.values())

    def stack_methods(self) -> list[Method]:
        """The methods that run stack trials."""
        return [m for m in self._methods if m.stack_kind is not None]

    def shortcuts(self, command: str) -> list[Method]:
        """The methods of shortcut command ``command``."""
        return [m for m in self._methods if m.shortcut is not None and m.shortcut.command.name == command]


#: Threshold checks of ``config.thresholds``: check name → (metric, "min" or "max").
THRESHOLDS: dict[str, tuple[str, str]] = {
    "min_throughput_pct": ("throughput_pct", "min"),
    "max_latency_ns": ("latency_ns", "max"),
    "max_loss_ratio": ("loss_ratio", "max"),
}
