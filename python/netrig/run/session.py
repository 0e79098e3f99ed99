"""The composition root: the one place that turns a configuration into what a run measures with.

``open_session(config, role)`` is a context manager yielding a :class:`Session` for the DUT
(``role="dut"``) or for the tester's self-test on its loopback test bed (``role="selftest"``):

* a **simulated** test bed (``testbed.name = "simulated"``): a :class:`SimulatedMeasurer` on the
  configured DUT model (for the self-test, the same model without a DUT: only the tester ceiling);
* a **real** one: the test bed is built (``netrig.testbed``; torn down when the block exits, also
  on errors and Ctrl-C), its tester ports opened as engine ports, an :class:`EngineMeasurer` made
  with the addressing that crosses the DUT, DUT monitoring around every trial when
  ``trial.monitor`` is on, the test bed's tuning knobs applied (``testbed.knobs``; restored before
  it is torn down, their record the ``knobs`` of ``Session.testbed``), the environment captured, and
  the line rate decided.

Nothing else wires these together: methods see only the measurer and the line rate; the run loop
(``netrig.run.runner``) only sessions and the result store.
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from netrig.environment import capture
from netrig.errors import ConfigError, NetrigError, TestbedError
from netrig.measure import DutModel, DutRing, Measurer, SimulatedMeasurer
from netrig.measure.engine import EngineMeasurer
from netrig.measure.otg import OtgMeasurer
from netrig.measure.platform import platform_watch
from netrig.measure.stack import StackEndpoints
from netrig.model import LineRate
from netrig.monitor import Monitor, RemoteMonitor
from netrig.monitor.cpu import matching_pids
from netrig.otgclient.client import OtgClient, OtgDown, OtgRefused, client_context, read_token
from netrig.results.typed import from_dict
from netrig.run.config import PortsConfig, TestConfig, TrialConfig
from netrig.testbed import Testbed
from netrig.testbed.knobs import KnobLayout, Knobs, applied_knobs
from netrig.testbed.placement import keep_off_dut
from netrig.testbed.state import in_use
from netrig.testbed.topologies import WIRED_TOPOLOGIES as DUT_TOPOLOGIES
from netrig.trial import Port, Snapshot

#: Monitoring samples per trial: about five, between every 0.1 s and every 1 s.
MONITOR_SAMPLES_PER_TRIAL = 5


@dataclass(frozen=True)
class TesterCpus:
    """The tester's worker CPUs (empty: the engine's default placement)."""

    __test__ = False
    tx: tuple[int, ...] = ()
    rx: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.tx or self.rx)

    def to_dict(self) -> dict[str, list[int]]:
        return {"tx_cpus": list(self.tx), "rx_cpus": list(self.rx)}


@dataclass
class Session:
    """What a run measures with: the measurer, the line rate, and what to record about them."""

    measurer: Measurer
    line_rate: LineRate
    #: The test bed's description, as the result records it (``testbed``).
    testbed: dict = field(default_factory=dict)
    environment: dict = field(default_factory=dict)
    #: The test bed's name (its topology; ``simulated``, ``otg``).
    testbed_name: str = ""
    #: The DUT is a model (resets itself; no command needed).
    simulated: bool = False
    #: Environment variables naming the test bed's parts for user commands (``NETRIG_DUT_NETNS`` …).
    command_env: dict[str, str] = field(default_factory=dict)
    #: Called before every measured trial: checks the test bed and restores what a link flap
    #: removed (returns what it restored; raises ``TestbedError`` when the test bed is broken).
    before_trial: Callable[[], list[str]] | None = None
    #: Called after every measured trial: what went wrong with the DUT during it (a DUT process
    #: that died); a non-empty answer makes the trial invalid, never the DUT's loss.
    after_trial: Callable[[], list[str]] | None = None
    #: The tester's worker CPUs this session measures with; the self-test run beside the DUT uses the
    #: same.
    tester_cpus: TesterCpus = TesterCpus()
    #: The DUT can slow the tester's sender instead of dropping (``Testbed.dut_can_hold_sender``):
    #: only then is a sender that fell short below its proven rate the DUT's backpressure.
    dut_can_hold_sender: bool = True
    #: The run measures on a test bed it shares with another run on purpose (``testbed.shared``),
    #: and whether another run held it when this one started.
    shared_testbed: bool = False
    shared_with: bool = False
    #: The DUT's network namespace (``None``: none, or not on this host), where user commands run.
    dut_netns: str | None = None
    #: Why the DUT shares its CPUs with the tester (a one-CPU machine; ``None``: it does not): the
    #: DUT's capacity is what the tester left it.
    dut_shares_cpu: str | None = None

    def watch(self, on_snapshot: Callable[[Snapshot], None] | None) -> None:
        """Hand the engine's live snapshots of every measured trial to ``on_snapshot`` (``None``:
        stop); a simulated DUT has none."""
        if isinstance(self.measurer, EngineMeasurer):
            self.measurer.on_snapshot = on_snapshot


#: ``provider(config, role)`` -> context manager of a Session (tests pass their own).
Provider = Callable[[TestConfig, str], AbstractContextManager[Session]]


def line_rate(config: TestConfig, interface: str | None, speed_bps: float | None) -> LineRate:
    """The configured speed, else the interface's, else the nominal speed (said so in reports)."""
    if config.line_rate.speed_bps is not None:
        return LineRate(config.line_rate.speed_bps, "config", interface)
    if speed_bps:
        return LineRate(speed_bps, "interface", interface)
    return LineRate(config.line_rate.nominal_bps, "nominal", interface)


@contextlib.contextmanager
def simulated_session(config: TestConfig, role: str) -> Iterator[Session]:
    model = config.testbed.simulator or DutModel()
    if role == "selftest":  # a looped-back tester: no DUT, only the tester's own ceiling and stalls
        model = DutModel(capacity_pps=1e15, tester_ceiling_pps=model.tester_ceiling_pps,
                         tester_stall_probability=model.tester_stall_probability,
                         trial_delay_s=model.trial_delay_s, seed=model.seed + 1)
    yield Session(SimulatedMeasurer(model), line_rate(config, "simulated", None),
                  {"name": "simulated", "role": role, "model": model.to_dict()}, {}, "simulated", simulated=True)


@contextlib.contextmanager
def existing_testbed(tb_id: str) -> Iterator[Testbed]:
    """A test bed built earlier (``netrig testbed up``); left standing. (Every measured trial checks
    and repairs it first: ``Session.before_trial``.)"""
    tb = Testbed.attach(tb_id)
    if tb.state.status != "up":
        raise TestbedError(f"testbed {tb_id} is {tb.state.status}, not up: `netrig testbed status {tb_id}`")
    yield tb


@contextlib.contextmanager
def engine_session(config: TestConfig, role: str) -> Iterator[Session]:
    """Build the test bed (the DUT's, or ``selftest.testbed`` for the self-test) and yield a
    Session; with ``testbed.id`` the DUT's test bed is the existing one of that id."""
    name, opts = (config.testbed.name, dict(config.testbed.options)) if role == "dut" else _selftest_bed(config)
    stack_methods = sorted({m.name for m in config.methods if m.method.stack_kind is not None})
    if role == "dut" and stack_methods:
        if name == "external" or from_dict(_BedOptions, opts).tester_stack is False:
            raise ConfigError("testbed.options.tester_stack",
                              f"method(s) {', '.join(stack_methods)} run between the tester ports' kernel stacks: "
                              f"use a test bed built of namespaces with tester_stack = true, not {name}"
                              + (" with tester_stack = false" if name != "external" else ""))
        if not config.testbed.id:
            opts["tester_stack"] = True
    bed: AbstractContextManager[Testbed] = (
        existing_testbed(config.testbed.id) if role == "dut" and config.testbed.id
        else Testbed.create(name, **opts))
    knobs = config.testbed.knobs if role == "dut" else config.testbed.knobs.for_selftest()
    shared = role == "dut" and config.testbed.shared
    with bed as tb, held(tb, role, shared) as others, _tuned(tb, knobs) as knob_record, \
            platform_watch(tb) as (platform, platform_note):
        name = tb.topology
        if role == "dut" and stack_methods and not tb.options.tester_stack:
            raise ConfigError("testbed.id", f"method(s) {', '.join(stack_methods)} run between the tester ports' "
                                            f"kernel stacks: test bed {tb.id} has none (rebuild it with "
                                            "--tester-stack)")
        p, t = config.ports, config.trial
        tp, rp = tb.port(p.tx), tb.port(p.rx)
        # A DUT with its own pinned threads on this host (a forwarder, a capture) keeps its CPUs:
        # the tester's workers go on the others, so neither slows the other.
        auto = tb.tester_cpus() if role == "dut" else ()
        cpus = TesterCpus(p.tx_cpus or auto, p.rx_cpus or auto)
        tx, rx = ports_of(p, (tp.ifname, tp.netns), (rp.ifname, rp.netns))
        monitor_factory, interval_monitor = _monitors(tb, t, role)
        template = {**tb.stream_defaults(tx=p.tx, rx=p.rx, family=p.family), **config.stream.stream_fields()}
        measurer = EngineMeasurer(tx, rx, template, drain_s=t.drain_s, late_s=t.late_s,
                                  warmup_s=t.warmup_s, learning_frames=t.learning_frames,
                                  tx_tolerance_pct=t.tx_tolerance_pct, flows=config.stream.flows_with(p.flows),
                                  monitor_factory=monitor_factory,
                                  stall_threshold_ms=t.stall_threshold_ms, stall_retries=t.stall_retries,
                                  pacing=t.pacing, smoothness_tolerance_pct=t.smoothness_tolerance_pct,
                                  stack=StackEndpoints.between(tp, rp) if stack_methods else None,
                                  cpu_procs=t.cpu_procs, reverse_template=_responder(tb, p.tx, p.rx, p.family),
                                  dut_netns=tb.dut_netns,
                                  interval_monitor=interval_monitor,
                                  tx_cpus=cpus.tx, rx_cpus=cpus.rx,
                                  dut_ring=_ring_reader(tb) if tb.wire_counts() else None,
                                  dut_cpus=tb.dut_cpus(), platform=platform)
        env, desc = _recorded(tb, name, role, knob_record, cpus)
        desc["stall_watch"] = platform_note
        # the tester ports the trials kept open close before the test bed is taken down
        with keep_off_dut(cpus.tx if role == "dut" else ()), contextlib.closing(measurer):
            yield Session(measurer, line_rate(config, tp.ifname, tx.info().speed_bps), desc, env, name,
                          command_env=tb.command_env(), before_trial=tb.repair, after_trial=tb.dead_processes,
                          tester_cpus=cpus, dut_can_hold_sender=tb.dut_can_hold_sender, shared_testbed=shared,
                          shared_with=others, dut_netns=tb.dut_netns, dut_shares_cpu=_shares_cpu(tb))


AnyMonitor = Monitor | RemoteMonitor


def ports_of(p: PortsConfig, tx: tuple[str, str | None], rx: tuple[str, str | None]) -> tuple[Port, Port]:
    """The run's transmit and receive ports, (interface, namespace) each, as ``p`` sets them up; one
    port both ways when they are one interface (one-port topologies: it is opened once)."""
    def port(ref: tuple[str, str | None]) -> Port:
        return Port(ref[0], netns=ref[1], io=p.io, queues=p.queues, ring_frames=p.ring_frames,
                    busy_poll_us=p.busy_poll_us, i_know_this_is_live=p.i_know_this_is_live)

    t = port(tx)
    return t, t if rx == tx else port(rx)


def _monitors(tb: Testbed, t: TrialConfig, role: str) -> tuple[Callable[[], AnyMonitor] | None,
                                                              Callable[[float], AnyMonitor] | None]:
    """The DUT's monitors: one per trial (``trial.monitor``, ``trial.monitor_remote``) and a soak's
    per-interval one; the self-test has neither."""
    if role != "dut":
        return None, None
    monitor_factory = None
    if t.monitor or t.monitor_remote:
        interval = min(1.0, max(0.1, t.duration_s / MONITOR_SAMPLES_PER_TRIAL))

        def monitor_factory() -> Monitor | RemoteMonitor:
            if t.monitor_remote:  # the DUT is another host: sample it over SSH, not this one
                return RemoteMonitor(t.monitor_remote, interval_s=interval, procs=t.cpu_procs,
                                     ssh_config=t.monitor_ssh_config)
            return Monitor(testbed=tb, interval_s=interval)

    def interval_monitor(interval_s: float) -> Monitor | RemoteMonitor:
        """A soak's monitor: every interval, the DUT processes (``trial.cpu_procs``) by pid."""
        if t.monitor_remote:
            return RemoteMonitor(t.monitor_remote, interval_s=interval_s, procs=t.cpu_procs,
                                 ssh_config=t.monitor_ssh_config)
        return Monitor(testbed=tb, interval_s=interval_s, pids=sorted(matching_pids(t.cpu_procs)))

    return monitor_factory, interval_monitor


def _recorded(tb: Testbed, name: str, role: str, knob_record: dict | None, cpus: TesterCpus) -> tuple[dict, dict]:
    """The environment (the DUT's run only; recorded, never required) and the test bed's description."""
    env: dict = {}
    if role == "dut":
        try:
            env = capture(testbed=tb)  # after the knobs: the environment as measured
        except (NetrigError, OSError) as e:
            env = {"error": str(e)}
    try:
        desc = tb.describe()
    except (NetrigError, OSError) as e:
        desc = {"name": name, "error": str(e)}
    desc.setdefault("name", name)
    if knob_record is not None:
        desc["knobs"] = knob_record  # the same dict: "restored" is filled in when the block ends
    if cpus:
        desc["tester_cpus"] = cpus.to_dict()
    return env, desc


def _shares_cpu(tb: Testbed) -> str | None:
    """Why the DUT shares its CPUs with the tester (the test bed's placement), ``None`` if it does not."""
    return tb.placement.shared if tb.placement is not None else None


@dataclass(frozen=True)
class _BedOptions:
    """The test bed options (``testbed.options``, ``TestbedOptions.to_dict()``) a session reads."""

    tester_stack: bool | None = None
    mtu: int | None = None
    dut_placement: str = "wire"


def held(tb: Testbed, role: str, shared: bool) -> AbstractContextManager[bool]:
    """The DUT's test bed, held for this run (``testbed.state.in_use``): a second run on it is
    refused naming the first, unless ``testbed.shared``. The self-test's bed is this run's own."""
    if role != "dut":
        return contextlib.nullcontext(False)
    return in_use(tb.id, shared)


def _ring_reader(tb: Testbed) -> Callable[[], DutRing]:
    """The DUT's receive-ring counters summed over its interfaces (the wire's), for every trial."""
    def read() -> DutRing:
        cs = tb.wire_counts().values()
        return DutRing(sum(c.arrived for c in cs), sum(c.taken for c in cs), sum(c.dropped for c in cs))
    return read


def _responder(tb: Testbed, tx: str, rx: str, family: int) -> dict | None:
    """The addressing of the responder's frames in stateful trials (rx port → tx port): to the
    address a source NAT translates the initiator to (``nat``, ``fwnat``), else to the initiator."""
    try:
        back = tb.stream_defaults(tx=rx, rx=tx, family=family)
    except NetrigError:  # an external DUT without a MAC to send back to: no stateful trials
        return None
    nat = tb.expected_rx_src(family) if tb.translates_source else None
    return {**back, "dst_ip": nat} if nat else back


def _tuned(tb: Testbed, knobs: Knobs) -> AbstractContextManager[dict | None]:
    """The test bed's tuning knobs, applied for the block and restored before it is torn down."""
    if not knobs:
        return contextlib.nullcontext(None)
    return applied_knobs(knobs, KnobLayout.of_testbed(tb), state=tb.state, path="testbed.knobs")


#: The placement options a self-test through a bridge takes from the DUT's test bed.
PLACEMENT_OPTIONS = ("dut_cpus", "dut_placement", "dut_ring")


def _selftest_bed(config: TestConfig) -> tuple[str, dict]:
    """The self-test's test bed and options. It carries the frames the DUT's test bed carries (the
    same MTU). ``auto``: when the DUT sits behind the wire, a Linux bridge behind the same wire on
    the same CPUs — the tester's work on its own CPU (the wire's copy) and on the DUT's (its
    receiving port's path) is then what it will be through the DUT, and the bridge costs the DUT's
    CPU little — else the plain loopback."""
    opts = dict(config.testbed.options)
    if config.testbed.id:
        opts = Testbed.attach(config.testbed.id).options.to_dict()
    read = from_dict(_BedOptions, opts)
    base = {"mtu": read.mtu} if read.mtu is not None else {}
    name = config.selftest.testbed
    if name != "auto":
        return name, base
    if config.testbed.name in DUT_TOPOLOGIES and read.dut_placement == "wire":
        return "bridge", {**base, **{k: opts[k] for k in PLACEMENT_OPTIONS if opts.get(k) is not None}}
    return "loopback", base


@contextlib.contextmanager
def otg_session(config: TestConfig, role: str) -> Iterator[Session]:
    """An OTG server as the tester (``[otg]``): its server reached once (version, and a controller's
    agents), an :class:`OtgMeasurer` on its pairs; the line rate is the pairs' aggregate (each
    sending port at ``line_rate``'s speed). Nothing of this host is built or changed."""
    o = config.otg
    assert o is not None and role == "dut", "config_from_dict refuses a self-test with [otg]"
    tls = client_context(Path(o.ca) if o.ca else None, Path(o.cert) if o.cert else None, Path(o.key) if o.key else None,
                         ("otg.ca", "otg.cert", "otg.key")) if o.url.startswith("https:") else None
    token = read_token(o.token_file, "otg.token_file") if o.token_file else None
    client = OtgClient("OTG server", o.url.rstrip("/"), token, tls)
    try:
        version, agents = _reach(client)
    except OtgDown as e:
        raise TestbedError(f"otg.url: {e}: start netrig serve there, or fix the URL (or otg.ca)") from None
    except OtgRefused as e:
        field = "otg.token_file" if e.status == 401 else "otg.url"
        raise ConfigError(field, f"{e}: give the token of the server's --token-file") from None
    t = config.trial
    measurer = OtgMeasurer(client, o.pairs, learning_frames=t.learning_frames, tx_tolerance_pct=t.tx_tolerance_pct,
                           drain_s=t.drain_s, late_s=t.late_s, smoothness_tolerance_pct=t.smoothness_tolerance_pct)
    base = line_rate(config, "otg", None)
    rate = LineRate(base.bps * len(o.pairs), base.source, f"{len(o.pairs)} sending port(s) of otg.pairs")
    desc = {"name": "otg", "role": role, "url": o.url, "server": version.app_version,
            "pairs": [dataclasses.asdict(pair) for pair in o.pairs], **({"agents": agents} if agents else {})}
    yield Session(measurer, rate, desc, {}, "otg", dut_can_hold_sender=False)


@dataclass(frozen=True)
class _Version:
    """An OTG server's ``GET /capabilities/version``: what the result records of it."""

    app_version: str | None = None


@dataclass(frozen=True)
class _Agents:
    """A controller's ``GET /netrig/agents``."""

    agents: list | None = None


def _reach(client: OtgClient) -> tuple[_Version, list | None]:
    """An OTG server's version, and its agents when it is a controller (``GET /netrig/agents``)."""
    version = from_dict(_Version, client.call("GET", "/capabilities/version", timeout=10))
    try:
        return version, from_dict(_Agents, client.call("GET", "/netrig/agents", timeout=10)).agents
    except OtgRefused as e:
        if e.status != 400:
            raise
        return version, None  # one netrig serve, no controller


def open_session(config: TestConfig, role: str) -> AbstractContextManager[Session]:
    """The session for ``role`` (``"dut"`` or ``"selftest"``) of ``config``."""
    if config.otg is not None:
        return otg_session(config, role)
    if config.testbed.name == "simulated":
        return simulated_session(config, role)
    return engine_session(config, role)
