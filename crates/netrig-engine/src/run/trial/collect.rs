//! Collection: the TX workers' reports and the RX workers' analysers merged into a
//! [`TrialResult`], and the facts the validity rules read ([`validity::judge`]).
use std::sync::Arc;

use hdrhistogram::Histogram;

use super::{
    FlowResult, IntervalResult, LinkWatch, PortResult, RunFacts, RxWorkerOut, StreamResult, TrialConfig, TrialResult,
};
use crate::port::{Backend, Port, TxQueueStats};
use crate::run::validity::{self, LinkFacts, PortFacts, SeqBeyond, StreamFacts, TrialFacts};
use crate::traffic::analyze::{empty_flow, FlowRx, LatencySummary, RxTotals};
use crate::traffic::pacing::{self, Smoothness};
use crate::traffic::schedule::{IntervalGrid, RatePhase};
use crate::traffic::stream::{CompiledStream, Rate, Stop};
use crate::traffic::timeline::LatencyTimeline;
use crate::traffic::tx::TxWorkerResult;

/// Merge the workers' counts into the result and decide whether the trial is valid: the facts
/// the validity rules read are gathered step by step, then [`validity::judge`] applies
/// [`validity::RULES`] (docs/methodology.md lists them).
pub(super) fn collect(
    ports: &[Box<dyn Port>],
    cfg: &TrialConfig,
    streams: &[Arc<CompiledStream>],
    rx: Vec<RxWorkerOut>,
    tx: Vec<(usize, TxWorkerResult)>,
    run: RunFacts,
) -> TrialResult {
    let totals = tx_totals(streams, &tx);
    let mut facts = TrialFacts {
        interrupted: run.interrupted,
        pacing: cfg.pacing,
        max_stretch_ratio: cfg.max_stretch_ratio,
        errors: worker_errors(&tx, &rx),
        ..Default::default()
    };
    let (stream_results, all) = stream_results(cfg, streams, &rx, &tx, &totals, &mut facts);
    let port_results = port_results(ports, &rx, &tx, &run.links, &mut facts);
    tx_facts(cfg, streams, &tx, &mut facts);
    let verdict = validity::judge(&facts);
    let duration_s = streams
        .iter()
        .find_map(|s| match s.config.stop {
            Stop::Duration { ns } => Some(ns as f64 / 1e9),
            _ => None,
        })
        .unwrap_or(totals.window_s);
    let end_rel = tx.iter().map(|(_, w)| w.end_ns).max().unwrap_or(0).saturating_sub(run.epoch_ns);
    TrialResult {
        latency: LatencySummary::from_flow(&all),
        streams: stream_results,
        ports: port_results,
        trial_tag: run.tag,
        duration_s,
        tx_window_s: totals.window_s,
        drain_s: run.drained_ns as f64 / 1e9,
        valid: verdict.valid,
        invalid_reason: verdict.reason,
        interrupted: run.interrupted,
        tx_cpus: run.tx_cpus,
        rx_cpus: run.rx_cpus,
        started_realtime_ns: run.started_realtime_ns,
        tx_max_lag_ns: facts.max_lag_ns,
        tx_max_catchup: tx.iter().map(|(_, w)| w.max_catchup).max().unwrap_or(0),
        pacing: cfg.pacing,
        tx_stretch_ns: tx.iter().map(|(_, w)| w.stretch_ns).max().unwrap_or(0),
        max_stretch_ratio: cfg.max_stretch_ratio,
        smoothness: smoothness(&tx),
        intervals: interval_results(run.grid.as_deref(), end_rel, &rx, &tx),
        latency_timeline: LatencyTimeline::merged(
            &rx.iter().filter_map(|w| w.analyzer.timeline.as_ref()).collect::<Vec<_>>(),
        ),
        epoch_ns: run.epoch_ns,
        run_start_ns: run.run_start_ns,
        flow_memory_bytes: run.flow_memory_bytes,
        pin_failures: run.pin_failures,
    }
}

/// What the TX workers sent, per stream and per flow.
struct TxTotals {
    /// Frames sent per flow (index: the trial's flow id).
    per_flow: Vec<u64>,
    frames: Vec<u64>,
    bytes: Vec<u64>,
    /// Replays: frames sent with the signature.
    stamped: Vec<u64>,
    /// Each stream's send window (TX timestamps of its first and last frame, over its shares).
    window: Vec<(u64, u64)>,
    /// First to last frame handed to a queue, over all workers, seconds.
    window_s: f64,
}

fn tx_totals(streams: &[Arc<CompiledStream>], tx: &[(usize, TxWorkerResult)]) -> TxTotals {
    let nflows: usize = streams.iter().map(|s| s.nflows as usize).sum();
    let n = streams.len();
    let mut t = TxTotals {
        per_flow: vec![0; nflows],
        frames: vec![0; n],
        bytes: vec![0; n],
        stamped: vec![0; n],
        window: vec![(u64::MAX, 0); n],
        window_s: 0.0,
    };
    let (mut first, mut last) = (u64::MAX, 0u64);
    for (_, w) in tx {
        if w.first_ns > 0 {
            first = first.min(w.first_ns);
            last = last.max(w.last_ns);
        }
        for sh in &w.shares {
            let s = &streams[sh.stream];
            t.frames[sh.stream] += sh.frames;
            t.bytes[sh.stream] += sh.bytes;
            t.stamped[sh.stream] += sh.stamped;
            if sh.frames > 0 {
                let win = &mut t.window[sh.stream];
                *win = (win.0.min(sh.first_ts_ns), win.1.max(sh.last_ts_ns));
            }
            let first = s.flow_base as usize + sh.first_flow as usize;
            for (sent, &n) in t.per_flow[first..first + sh.per_flow.len()].iter_mut().zip(&sh.per_flow) {
                *sent += n;
            }
        }
    }
    t.window_s = if last > first { (last - first) as f64 / 1e9 } else { 0.0 };
    t
}

/// The workers' I/O errors: TX workers' first, then RX workers'.
fn worker_errors(tx: &[(usize, TxWorkerResult)], rx: &[RxWorkerOut]) -> Vec<String> {
    tx.iter().filter_map(|(_, w)| w.error.clone()).chain(rx.iter().filter_map(|w| w.error.clone())).collect()
}

/// The shared latency and |IPDV| histograms (of flows without their own), merged over workers.
fn shared_hists(rx: &[RxWorkerOut]) -> Option<(Histogram<u32>, Histogram<u32>)> {
    let mut shared: Option<(Histogram<u32>, Histogram<u32>)> = None;
    for w in rx {
        match shared.as_mut() {
            None => shared = Some((w.analyzer.shared_hist.clone(), w.analyzer.shared_ipdv_hist.clone())),
            Some((lat, ipdv)) => {
                let _ = lat.add(&w.analyzer.shared_hist);
                let _ = ipdv.add(&w.analyzer.shared_ipdv_hist);
            }
        }
    }
    shared
}

/// Every stream's result, and every flow's receive state merged; the streams' validity facts
/// (and the flows that saw sequence numbers they never sent) go into `facts`.
fn stream_results(
    cfg: &TrialConfig,
    streams: &[Arc<CompiledStream>],
    rx: &[RxWorkerOut],
    tx: &[(usize, TxWorkerResult)],
    totals: &TxTotals,
    facts: &mut TrialFacts,
) -> (Vec<StreamResult>, FlowRx) {
    let shared = shared_hists(rx);
    let phases = cfg.run_phases();
    let mut all = empty_flow();
    let mut results = Vec::new();
    for (i, s) in streams.iter().enumerate() {
        let mut flows = stream_flows(s, rx, &totals.per_flow, cfg.max_flow_results, &mut facts.beyond);
        let (base, n) = (s.flow_base as usize, s.nflows as usize);
        if n > crate::traffic::analyze::PER_FLOW_HIST_LIMIT && base + n > crate::traffic::analyze::PER_FLOW_HIST_LIMIT {
            // Flows past the per-flow histogram limit recorded into the shared histogram.
            if let (Some((lat, ipdv)), 1) = (&shared, streams.len()) {
                add_hist(&mut flows.agg.hist, lat);
                add_hist(&mut flows.agg.ipdv_hist, ipdv);
            }
        }
        all.merge(&flows.agg);
        let paced = s.rate_pps.is_finite();
        let intended = intended_frames(s, &phases, totals.frames[i]);
        let (w0, w1) = totals.window[i];
        let own_window_s = if w1 > w0 { (w1 - w0) as f64 / 1e9 } else { 0.0 };
        let window_s = send_window_s(s, i, tx, own_window_s, totals.window_s);
        let tx_rate_pps = if window_s > 0.0 { totals.frames[i] as f64 / window_s } else { 0.0 };
        facts.streams.push(StreamFacts {
            name: s.config.name.clone(),
            count_stopped: matches!(s.config.stop, Stop::Frames { .. }),
            paced,
            unbounded: matches!(s.config.rate, Rate::Max),
            rate_pps: s.rate_pps,
            intended_frames: intended,
            tx_frames: totals.frames[i],
            own_window_s,
        });
        results.push(stream_result(i, s, flows, intended, tx_rate_pps, totals));
    }
    if let Some((lat, ipdv)) = &shared {
        if streams.len() > 1 && !lat.is_empty() {
            add_hist(&mut all.hist, lat);
            add_hist(&mut all.ipdv_hist, ipdv);
        }
    }
    (results, all)
}

/// One stream's flows, merged over the RX workers.
struct StreamFlows {
    /// All its flows' receive state together.
    agg: FlowRx,
    /// The first `max_flow_results` flows'.
    flow_results: Vec<FlowResult>,
    lost: u64,
}

/// Merge stream `s`'s flows, flow by flow (read back from each RX worker's compact state; never
/// all flows at once: at millions of flows a copy would double the memory). Flows that saw
/// sequence numbers they never sent are added to `beyond`.
fn stream_flows(
    s: &CompiledStream,
    rx: &[RxWorkerOut],
    tx_per_flow: &[u64],
    max_flow_results: usize,
    beyond: &mut Vec<SeqBeyond>,
) -> StreamFlows {
    let merged = |k: usize| -> FlowRx {
        let mut it = rx.iter().filter(|w| k < w.analyzer.flow_count());
        let mut f = it.next().map_or_else(empty_flow, |w| w.analyzer.flow(k));
        for w in it {
            f.merge(&w.analyzer.flow(k));
        }
        f
    };
    let base = s.flow_base as usize;
    let mut out = StreamFlows { agg: empty_flow(), flow_results: Vec::new(), lost: 0 };
    for k in 0..s.nflows as usize {
        let f = &merged(base + k);
        let sent = tx_per_flow[base + k];
        let flost = sent.saturating_sub(f.received);
        out.lost += flost;
        if f.received > sent || f.next_seq() > sent {
            beyond.push(SeqBeyond { flow: base + k, received: f.received, sent, next_seq: f.next_seq() });
        }
        out.agg.merge(f);
        if k < max_flow_results {
            out.flow_results.push(FlowResult {
                flow_id: (base + k) as u32,
                tx_frames: sent,
                rx_frames: f.received,
                rx_bytes: f.bytes,
                lost: flost,
                reordered: f.reordered,
                duplicated: f.duplicated,
                late: f.late,
                latency: LatencySummary::from_flow(f),
                gaps: f.gaps(),
                last_rx_tx_ns: f.last_tx_ns(),
                tail_missing: sent.saturating_sub(f.next_seq()),
            });
        }
    }
    out
}

/// Frames stream `s` was to send: its frame limit, or its rate over the phases (paced duration
/// stops); an unpaced duration stream intended what it sent.
fn intended_frames(s: &CompiledStream, phases: &[RatePhase], sent: u64) -> u64 {
    if !s.rate_pps.is_finite() {
        return s.frame_limit.unwrap_or(sent);
    }
    match s.frame_limit {
        Some(l) => l,
        None => phases.iter().map(|p| (s.rate_pps * p.rate_scale * p.duration_ns as f64 / 1e9).round() as u64).sum(),
    }
}

/// The window stream `i`'s achieved rate is measured over, seconds: a paced duration stream's
/// longest worker's run ([`TxWorkerResult::paced_span_ns`]: its planned length plus its stretch,
/// or to its last departure when it ended with frames left); a count-stopped stream's own window
/// (TX stamps of its first and last frame: streams of one worker end at different times);
/// otherwise the duration, or first to last frame.
fn send_window_s(s: &CompiledStream, i: usize, tx: &[(usize, TxWorkerResult)], own_s: f64, all_s: f64) -> f64 {
    match s.config.stop {
        Stop::Duration { .. } if s.rate_pps.is_finite() => tx
            .iter()
            .filter(|(_, w)| w.shares.iter().any(|sh| sh.stream == i))
            .map(|(_, w)| w.paced_span_ns() as f64 / 1e9)
            .fold(0.0, f64::max),
        Stop::Duration { ns } => ns as f64 / 1e9,
        Stop::Frames { .. } => own_s,
        Stop::Bursts { .. } => all_s,
    }
}

fn stream_result(
    i: usize,
    s: &CompiledStream,
    flows: StreamFlows,
    intended: u64,
    tx_rate_pps: f64,
    totals: &TxTotals,
) -> StreamResult {
    let agg = &flows.agg;
    StreamResult {
        index: i,
        name: s.config.name.clone(),
        tx_port: s.config.tx_port,
        rx_port: s.config.rx_port,
        frame_size_mean: s.mean_size(),
        flows: s.nflows,
        intended_rate_pps: s.rate_pps,
        intended_frames: intended,
        tx_frames: totals.frames[i],
        tx_bytes: totals.bytes[i],
        tx_rate_pps,
        rx_frames: agg.received,
        rx_bytes: agg.bytes,
        lost: flows.lost,
        reordered: agg.reordered,
        duplicated: agg.duplicated,
        late: agg.late,
        latency: LatencySummary::from_flow(agg),
        flow_results: flows.flow_results,
        loss_measured: s.config.replay.as_ref().is_none_or(|r| r.stamp),
        replay: s.config.replay.as_ref().map(|r| crate::traffic::replay::ReplayResult {
            file: r.path.clone(),
            stamped: r.stamp,
            frames_per_pass: r.frames_per_pass(),
            bytes_per_pass: r.bytes_per_pass,
            passes: totals.frames[i] as f64 / r.frames_per_pass() as f64,
            frames_stamped: totals.stamped[i],
            frames_unstamped: totals.frames[i] - totals.stamped[i],
            flows: if r.stamp { u64::from(r.flows) } else { 0 },
            signed_in_capture: r.signed_in_capture,
        }),
    }
}

/// Per-port tester counters, links and XDP programs; the ports' validity facts go into `facts`.
fn port_results(
    ports: &[Box<dyn Port>],
    rx: &[RxWorkerOut],
    tx: &[(usize, TxWorkerResult)],
    links: &[LinkWatch],
    facts: &mut TrialFacts,
) -> Vec<PortResult> {
    let mut results: Vec<PortResult> = ports
        .iter()
        .map(|p| {
            let c = p.caps();
            PortResult {
                name: c.name.clone(),
                backend: c.backend.as_str().to_string(),
                notes: c.notes.clone(),
                timestamp_source: c.rx_timestamp.as_str().to_string(),
                ..Default::default()
            }
        })
        .collect();
    for (p, w) in tx {
        let q: TxQueueStats = w.queue;
        let r = &mut results[*p];
        r.tx_frames += q.frames;
        r.tx_bytes += q.bytes;
        r.tx_backpressure += q.backpressure;
        r.tx_errors += q.errors;
    }
    for w in rx {
        add_rx_counts(&mut results[w.port], w);
    }
    for (p, r) in results.iter_mut().enumerate() {
        if r.tx_errors > 0 {
            r.notes.push_str(&format!(
                "; the kernel dropped {} frames this port sent after taking them (on veth: the peer's receive ring \
                 was full; its ingress's loss, the tester's own when the peer is a tester port)",
                r.tx_errors
            ));
        }
        let watch = links.get(p).cloned().unwrap_or_default();
        let link = link_facts(r, &watch);
        let backend = ports[p].caps().backend;
        let mut steering_xdp = Vec::new();
        if rx.iter().any(|w| w.port == p) && backend != Backend::AfXdp {
            for (id, name) in &watch.xdp {
                r.notes.push_str(&format!("; XDP program {id} ({name:?}) was attached: it sees frames first"));
                if name == crate::sys::af_xdp::STEER_PROG_NAME {
                    steering_xdp.push(*id);
                }
            }
        }
        let at_tester =
            watch.veth_peer.filter(|_| r.tx_errors > 0).map(|q| (ports[q].caps().name.clone(), r.tx_errors));
        facts.ports.push(PortFacts {
            name: r.name.clone(),
            backend: backend.as_str(),
            ring_drops: r.rx_ring_drops,
            tx_drops_at_tester: at_tester,
            other_trial: r.rx_other_trial,
            link,
            steering_xdp,
        });
    }
    results
}

fn add_rx_counts(r: &mut PortResult, w: &RxWorkerOut) {
    let t: RxTotals = w.analyzer.totals;
    r.rx_frames += t.frames;
    r.rx_bytes += t.bytes;
    r.rx_foreign += t.foreign + w.stats.foreign;
    r.rx_unknown_flow += t.unknown_flow;
    r.rx_warmup += t.warmup;
    r.rx_earlier_trial += t.earlier_trial;
    r.rx_other_trial += t.other_trial;
    r.rx_implausible += t.implausible;
    r.rx_ring_drops += w.stats.ring_drops;
    r.rx_overruns += w.stats.overruns;
}

/// The port's link fields from what was seen of its link (up and not watched when its state was
/// not read before and after); the link's facts when it was watched.
fn link_facts(r: &mut PortResult, watch: &LinkWatch) -> Option<LinkFacts> {
    r.link_up = true;
    let (Some(b), Some(a)) = (watch.before, watch.after) else { return None };
    r.link_watched = true;
    r.link_up = b.oper_up && a.oper_up;
    r.link_down_events = match (b.carrier_down, a.carrier_down) {
        (Some(x), Some(y)) => u64::from(y.wrapping_sub(x)),
        _ => u64::from(a.carrier_changes.wrapping_sub(b.carrier_changes)).div_ceil(2),
    };
    if r.link_down_events > 0 || !r.link_up || watch.seen_down {
        r.link_down_events = r.link_down_events.max(1);
    }
    Some(LinkFacts { down_events: r.link_down_events, up_at_start: b.oper_up, up_at_end: a.oper_up })
}

/// The TX workers' validity facts: bursts, the worst stretch beyond the tolerance, the longest lag.
fn tx_facts(cfg: &TrialConfig, streams: &[Arc<CompiledStream>], tx: &[(usize, TxWorkerResult)], f: &mut TrialFacts) {
    f.max_lag_ns = tx.iter().map(|(_, w)| w.max_lag_ns).max().unwrap_or(0);
    f.over_stretched = tx
        .iter()
        .filter(|(_, w)| w.planned_ns > 0 && w.stretch_ns as f64 > w.planned_ns as f64 * cfg.max_stretch_ratio)
        .max_by_key(|(_, w)| w.stretch_ns)
        .map(|(_, w)| (w.stretch_ns, w.planned_ns));
    f.bursts = streams.iter().any(|s| matches!(s.config.stop, Stop::Bursts { .. }));
}

/// Smoothness: the most bunched worker's peak; the gaps of all workers.
fn smoothness(tx: &[(usize, TxWorkerResult)]) -> Smoothness {
    let mut peak = Smoothness::default();
    let mut gaps = pacing::new_gap_hist();
    let mut gap_max = 0;
    for (_, w) in tx {
        peak = peak.worse(w.smoothness);
        gap_max = gap_max.max(w.smoothness.gap_max_ns);
        if let Some(h) = &w.gaps {
            let _ = gaps.add(h);
        }
    }
    pacing::merged(peak, &gaps, gap_max)
}

/// The counting intervals' results (none without a grid); `end_rel`: the run's end since the epoch.
fn interval_results(
    grid: Option<&IntervalGrid>,
    end_rel: u64,
    rx: &[RxWorkerOut],
    tx: &[(usize, TxWorkerResult)],
) -> Vec<IntervalResult> {
    let Some(g) = grid else { return Vec::new() };
    (0..g.len())
        .map(|k| {
            let (phase, start, len) = g.interval(k, end_rel);
            let counters = || rx.iter().filter_map(|w| w.analyzer.intervals.as_ref());
            let rx_frames: u64 = counters().map(|c| c.counts.get(k).copied().unwrap_or(0)).sum();
            let lat_sum: u64 = counters().map(|c| c.latency_sum_ns.get(k).copied().unwrap_or(0)).sum();
            IntervalResult {
                start_s: start as f64 / 1e9,
                duration_s: len as f64 / 1e9,
                phase,
                tx_frames: tx.iter().map(|(_, w)| w.intervals.get(k).copied().unwrap_or(0)).sum(),
                rx_frames,
                latency_mean_ns: if rx_frames > 0 { lat_sum as f64 / rx_frames as f64 } else { 0.0 },
                latency_max_ns: counters().map(|c| c.latency_max_ns.get(k).copied().unwrap_or(0)).max().unwrap_or(0),
            }
        })
        .collect()
}

/// Add `src` into `dst` (or make `dst` a copy of it). Histograms of one kind share their bounds,
/// so adding cannot fail.
fn add_hist(dst: &mut Option<Histogram<u32>>, src: &Histogram<u32>) {
    match dst {
        Some(d) => {
            let _ = d.add(src);
        }
        None => *dst = Some(src.clone()),
    }
}
