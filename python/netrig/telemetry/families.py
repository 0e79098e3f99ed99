"""Every metric family netrig exports: name, type, labels and meaning, written once.

``docs/telemetry.md`` lists the same families (a test checks that every one is there); the state
(:mod:`netrig.telemetry.state`) keeps values under these names and the collector
(:mod:`netrig.telemetry.collect`) turns them into the Prometheus client's metric families.

Names follow Prometheus' conventions: base units (seconds, bytes), ``_total`` for counters (the
name below is without it: the client library adds it), rates in frames per second as ``_pps``
(netrig's own unit, as in ``result.json``), each named for what it is — intended, achieved (TX) or
received — as the console and ``result.json`` name it (``netrig.model.rates``). Label values
are short and bounded: a run, a method, a frame size, a port, a stream, a flow group (a range of a
stream's flow ids, at most :data:`FLOW_GROUPS` per stream, or a served flow), a CPU, a process, an
interface — never a trial's key or a flow id, so the number of series does not grow with trials or
flows.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

#: At most this many flow groups per stream: a stream of N flows is cut into ranges of flow ids.
FLOW_GROUPS = 8

#: Labels of the counts of trials: the run, the method, the frame size, and whether the trial was
#: measured by this process or replayed from an interrupted run's trial log (``--resume``).
TRIAL = ("run", "method", "frame_size", "replayed")
#: Labels of values of the trial in progress, or of the last finished trial of a method and size.
NOW = ("run", "method", "frame_size")


@dataclass(frozen=True)
class Family:
    """One metric family: ``kind`` is ``counter``, ``gauge``, ``summary`` or ``info``."""

    name: str
    kind: str
    labels: tuple[str, ...]
    help: str
    unit: str = ""


def _c(name: str, labels: tuple[str, ...], text: str, unit: str = "") -> Family:
    return Family(name, "counter", labels, text, unit)


def _g(name: str, labels: tuple[str, ...], text: str, unit: str = "") -> Family:
    return Family(name, "gauge", labels, text, unit)


def members(group: object) -> tuple[Family, ...]:
    """The families of a group (one of the frozen classes below), in order."""
    return tuple(getattr(group, f.name) for f in fields(group))  # type: ignore[arg-type]


@dataclass(frozen=True)
class TrialCountFamilies:
    """Counts of finished trials, from the ``TrialCounts`` each trial record is written from (their
    sums are the sums over ``result.json``'s ``trials[].counts``)."""

    frames_sent: Family = _c("netrig_frames_sent", TRIAL, "Frames the tester sent in finished trials")
    frames_received: Family = _c("netrig_frames_received", TRIAL, "Test frames received (each once) in finished "
                                                                  "trials")
    frames_lost: Family = _c("netrig_frames_lost", TRIAL, "Frames sent and never received, per trial (sent - "
                                                          "received)")
    reordered: Family = _c("netrig_frames_reordered", TRIAL, "Frames received out of order")
    duplicated: Family = _c("netrig_frames_duplicated", TRIAL, "Duplicate frames received")
    late: Family = _c("netrig_frames_late", TRIAL, "Frames received after the late threshold (the drain time)")
    foreign: Family = _c("netrig_frames_foreign", TRIAL, "Frames without a netrig signature seen by the receiver")
    stray: Family = _c("netrig_frames_stray", TRIAL, "Frames of another trial (an earlier one's late frames, another "
                                                     "tester's), never counted as received")
    forged: Family = _c("netrig_frames_forged", TRIAL, "Frames with this trial's tag but impossible contents, never "
                                                       "counted as received")


TRIAL_COUNTS = TrialCountFamilies()

TRIALS = _c("netrig_trials", (*TRIAL, "valid"), "Finished trials (valid=false: the tester failed, not a DUT result)")
LATENCY = Family("netrig_latency_seconds", "summary", NOW,
                 "One-way latency: quantiles of the last trial that received frames; sum and count over every "
                 "finished trial (sum = mean x frames received)", "seconds")
LATENCY_MAX = _g("netrig_latency_max_seconds", NOW, "Highest one-way latency of the last trial that received "
                                                    "frames", "seconds")

#: The engine's breakdown of finished trials (engine trials only: a simulated DUT has none).
STREAM = ("run", "method", "frame_size", "stream")
PORT = ("run", "port")
GROUP = ("run", "method", "frame_size", "stream", "flow_group")


@dataclass(frozen=True)
class BreakdownFamilies:
    stream_frames_sent: Family = _c("netrig_stream_frames_sent", STREAM, "Frames sent per stream")
    stream_frames_received: Family = _c("netrig_stream_frames_received", STREAM, "Frames received per stream")
    stream_bytes_sent: Family = _c("netrig_stream_sent_bytes", STREAM, "Bytes sent per stream", "bytes")
    stream_bytes_received: Family = _c("netrig_stream_received_bytes", STREAM, "Bytes received per stream", "bytes")
    port_tx_frames: Family = _c("netrig_port_tx_frames", PORT, "Frames a tester port sent (learning frames too)")
    port_rx_frames: Family = _c("netrig_port_rx_frames", PORT, "Frames a tester port received (every frame it saw)")
    port_tx_bytes: Family = _c("netrig_port_tx_bytes", PORT, "Bytes a tester port sent", "bytes")
    port_rx_bytes: Family = _c("netrig_port_rx_bytes", PORT, "Bytes a tester port received", "bytes")
    port_rx_ring_drops: Family = _c("netrig_port_rx_ring_drops", PORT, "Frames the tester's own receive ring "
                                                                       "dropped (the tester's loss, never the DUT's)")
    group_frames_sent: Family = _c("netrig_flow_group_frames_sent", GROUP, "Frames sent per flow group")
    group_frames_received: Family = _c("netrig_flow_group_frames_received", GROUP, "Frames received per flow group")
    group_frames_lost: Family = _c("netrig_flow_group_frames_lost", GROUP, "Frames lost per flow group")


BREAKDOWN = BreakdownFamilies()


@dataclass(frozen=True)
class LastFamilies:
    """The last finished trial of each method and frame size: its three rates (``netrig.model.rates``)
    and its loss."""

    intended_rate_pps: Family = _g("netrig_intended_rate_pps", NOW, "Intended rate: what the last finished trial "
                                                                    "asked for (frames/s, aggregate, one direction)")
    achieved_rate_pps: Family = _g("netrig_achieved_rate_pps", NOW, "Achieved TX rate: what the tester really sent "
                                                                    "in the last finished trial, over its sending "
                                                                    "window (frames/s)")
    received_rate_pps: Family = _g("netrig_received_rate_pps", NOW, "Received rate: what arrived through the DUT in "
                                                                    "the last finished trial, over the sending "
                                                                    "window (frames/s)")
    loss_ratio: Family = _g("netrig_loss_ratio", NOW, "Frames lost / frames sent in the last finished trial")


LAST = LastFamilies()


@dataclass(frozen=True)
class LiveFamilies:
    """The trial in progress: live, from the engine's snapshots (every ~0.2 s). ``trial_index`` and
    ``trials_estimated`` are the run's; the others go when the trial ends."""

    trial_index: Family = _g("netrig_trial_index", ("run",), "Number of the trial in progress (or last), from 1")
    trials_estimated: Family = _g("netrig_trials_estimated", ("run",), "The run's estimated total of trials")
    trial_running: Family = _g("netrig_trial_running", (*NOW, "kind"), "1 while a trial of this method and size runs")
    trial_intended_rate_pps: Family = _g("netrig_trial_intended_rate_pps", NOW, "Intended rate: what the trial in "
                                                                                "progress asks for (frames/s)")
    trial_elapsed_seconds: Family = _g("netrig_trial_elapsed_seconds", NOW, "Time since the trial in progress began "
                                                                            "sending", "seconds")
    trial_frames_sent: Family = _g("netrig_trial_frames_sent", NOW, "Frames the trial in progress has sent so far")
    trial_frames_received: Family = _g("netrig_trial_frames_received", NOW, "Frames the trial in progress has "
                                                                            "received so far")
    trial_achieved_rate_pps: Family = _g("netrig_trial_achieved_rate_pps", NOW, "Achieved TX rate: what the trial in "
                                                                                "progress really sent between its "
                                                                                "last two snapshots (frames/s)")
    trial_received_rate_pps: Family = _g("netrig_trial_received_rate_pps", NOW, "Received rate: what the trial in "
                                                                                "progress received between its last "
                                                                                "two snapshots (frames/s)")

    def of_trial(self) -> tuple[Family, ...]:
        """The families of the trial in progress (not the run's)."""
        return tuple(f for f in members(self) if f not in (self.trial_index, self.trials_estimated))


LIVE = LiveFamilies()


@dataclass(frozen=True)
class IntervalFamilies:
    """The settled intervals of soak trials, counted by transmit time (final when exported)."""

    frames_sent: Family = _c("netrig_interval_frames_sent", TRIAL, "Frames sent in settled soak intervals")
    frames_received: Family = _c("netrig_interval_frames_received", TRIAL, "Frames received of settled soak "
                                                                           "intervals")
    frames_lost: Family = _c("netrig_interval_frames_lost", TRIAL, "Frames lost of settled soak intervals")
    intervals: Family = _c("netrig_intervals", TRIAL, "Settled soak intervals")


INTERVALS = IntervalFamilies()

#: A method's result values (``MethodResult.stats_values``): live while a method publishes them
#: (the soak's verdict state), every method's when a repetition ends.
RESULT = _g("netrig_result", (*NOW, "value"), "A method's result value (the soak's verdict state while it runs: "
                                              "leaks, cpu_spikes, loss_episodes, loss_ratio, rx_pps)")


@dataclass(frozen=True)
class DutFamilies:
    """The DUT monitor's newest sample (a soak's every interval; with --monitor, every trial's last)."""

    cpu_busy: Family = _g("netrig_dut_cpu_busy_percent", ("run", "cpu"), "Busy share of a CPU (all: every CPU)")
    cpu_softirq: Family = _g("netrig_dut_cpu_softirq_percent", ("run", "cpu"), "Softirq share of a CPU")
    proc_cpu: Family = _g("netrig_dut_process_cpu_percent", ("run", "process"), "CPU of a DUT process (100 = one "
                                                                                "CPU)")
    proc_rss: Family = _g("netrig_dut_process_rss_bytes", ("run", "process"), "Resident memory of a DUT process",
                          "bytes")
    mem: Family = _g("netrig_dut_memory_bytes", ("run", "kind"), "Host memory: available, used (total - available), "
                                                                 "slab", "bytes")
    conntrack: Family = _g("netrig_dut_conntrack_entries", ("run", "netns"), "Connection-tracking entries")
    drops: Family = _g("netrig_dut_interface_drops", ("run", "interface", "counter"),
                       "An interface's drop or error counter (the kernel's cumulative value)")


DUT = DutFamilies()

RUN_INFO = Family("netrig_run", "info", ("run", "run_id", "out_dir"), "The runs this process ran or runs")
RUN_COMPLETE = _g("netrig_run_complete", ("run",), "1 when the run finished every planned trial, 0 when it "
                                                    "stopped early (Ctrl-C, SIGTERM, an error); absent while it runs")
RESUMES = _g("netrig_run_resumes", ("run",), "How often the run was continued with --resume (its counters "
                                             "restarted then: replayed trials are labelled replayed=true)")

#: ``netrig forward`` (the host as the DUT): per port and queue, live.
FORWARD_LABELS = ("port", "queue")
FORWARD = {
    "rx_frames": _c("netrig_forward_rx_frames", FORWARD_LABELS, "Frames the forwarder received"),
    "rx_bytes": _c("netrig_forward_rx_bytes", FORWARD_LABELS, "Bytes the forwarder received", "bytes"),
    "tx_frames": _c("netrig_forward_tx_frames", FORWARD_LABELS, "Frames the forwarder sent"),
    "tx_bytes": _c("netrig_forward_tx_bytes", FORWARD_LABELS, "Bytes the forwarder sent", "bytes"),
    "tx_drops": _c("netrig_forward_tx_drops", FORWARD_LABELS, "Frames dropped on the way out (egress full)"),
    "rx_ring_drops": _c("netrig_forward_rx_ring_drops", FORWARD_LABELS, "Frames the receive ring dropped"),
    "tx_errors": _c("netrig_forward_tx_errors", FORWARD_LABELS, "Send errors"),
}

#: Served flow groups (``netrig serve``: one per OTG flow, live; past this many, consecutive flows are
#: folded into ranges so that a scrape's cost stays bounded).
MAX_SERVED_GROUPS = 128
#: Served flow groups (``netrig serve``: one per OTG flow, live).
SERVED_LABELS = ("flow_group", "tx_port", "rx_port")
SERVED = {
    "frames_sent": _c("netrig_served_frames_sent", SERVED_LABELS, "Frames a served flow group sent"),
    "frames_received": _c("netrig_served_frames_received", SERVED_LABELS, "Frames a served flow group received"),
    "bytes_sent": _c("netrig_served_sent_bytes", SERVED_LABELS, "Bytes a served flow group sent", "bytes"),
    "bytes_received": _c("netrig_served_received_bytes", SERVED_LABELS, "Bytes a served flow group received",
                         "bytes"),
}

#: Every family, for the docs check.
ALL: tuple[Family, ...] = (*members(TRIAL_COUNTS), TRIALS, LATENCY, LATENCY_MAX, *members(BREAKDOWN),
                           *members(LAST), *members(LIVE), *members(INTERVALS), RESULT, *members(DUT), RUN_INFO,
                           RUN_COMPLETE, RESUMES, *FORWARD.values(), *SERVED.values())
