//! The TX worker: paced generation of signed frames on one queue.
//!
//! A worker owns one [`TxQueue`] and a share of the trial's streams (for a stream spread over
//! several queues, each worker owns a disjoint subset of its flows, so per-flow sequence
//! numbers stay consistent). Pacing runs on the monotonic clock: the worker's `k`-th frame is
//! due at `start + k / rate`; at every iteration it sends every frame that is due (up to a batch),
//! so a worker that is briefly late catches up in batches, and a worker that cannot keep up at
//! all ends the trial with fewer frames sent than intended — measured and reported, never hidden.
//! Streams sharing a worker are interleaved by smooth weighted round robin on their rates.
//!
//! Per frame the worker copies the size's template, patches the flow's addresses/ports (only
//! when the stream has more than one flow) and writes the signature (flow id, sequence, transmit
//! timestamp, under the trial's tag) with incremental checksum updates. The timestamp is read
//! once per batch.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use netrig_wire::builder;
use netrig_wire::signature::Signature;

use crate::clock;
use crate::error::PortError;
use crate::port::{TxQueue, TxQueueStats};
use crate::stream::{apply_flow, CompiledStream, Stop};

/// Frames per `send` call at full speed.
pub const BATCH: usize = 64;

/// Live counters a worker publishes once per batch (read by progress displays).
#[derive(Debug, Default)]
pub struct TxLive {
    pub frames: AtomicU64,
    pub bytes: AtomicU64,
}

/// This worker's part of one stream.
pub struct TxShare {
    pub stream: Arc<CompiledStream>,
    /// Flows of the stream this worker sends: `flow_index ≡ share (mod shares)`.
    pub share: u64,
    pub shares: u64,
    /// Rate of this share in frames/s.
    pub rate_pps: f64,
    /// Frames this share must send (count/burst stops), or None for duration stops.
    pub limit: Option<u64>,
}

/// What a worker did, per stream share.
#[derive(Debug, Clone, Default)]
pub struct TxShareResult {
    pub stream: usize,
    pub frames: u64,
    pub bytes: u64,
    /// Frames sent per flow (index = stream-local flow index), i.e. the next sequence number.
    pub per_flow: Vec<u64>,
    /// TX timestamps (ns since the trial epoch) of this share's first and last frame: its send
    /// window, for streams that stop after a count.
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
}

#[derive(Debug, Clone, Default)]
pub struct TxWorkerResult {
    pub shares: Vec<TxShareResult>,
    /// Time of the first and last frame handed to the queue (engine clock).
    pub first_ns: u64,
    pub last_ns: u64,
    /// Intended frames for the whole run of this worker.
    pub intended: u64,
    pub queue: TxQueueStats,
    /// Longest the worker fell behind its schedule, in ns (it was descheduled, or the queue
    /// pushed back). The backlog is then sent at no more than [`CATCHUP_FACTOR`] × the rate.
    pub max_lag_ns: u64,
    /// Largest number of frames sent at once to catch up (beyond one batch).
    pub max_catchup: u64,
    /// The queue failed: the message (the trial reports it).
    pub error: Option<String>,
}

/// A paced worker that fell behind catches up at most this many times faster than its rate.
pub const CATCHUP_FACTOR: f64 = 2.0;

/// Most frames a paced worker sends at once after falling behind: the larger of one batch and
/// 200 µs worth of frames. The rest of a backlog is spread at [`CATCHUP_FACTOR`] × the rate, so
/// a tester that was descheduled for a few milliseconds (common on VMs) does not hit the DUT with
/// its whole backlog in one burst — that would overrun policers and shallow buffers that a steady
/// stream never touches.
pub fn catchup_burst(rate_pps: f64) -> u64 {
    ((rate_pps * 200e-6) as u64).max(BATCH as u64)
}

struct ShareState {
    share: TxShare,
    /// Frames sent by this share (the share's frame index j).
    sent: u64,
    bytes: u64,
    seq: Vec<u64>,
    /// Smooth weighted round robin credit.
    credit: f64,
    done: bool,
    /// TX timestamps of the first and last frame.
    first_ts: u64,
    last_ts: u64,
}

/// Parameters of a worker run.
pub struct TxPlan {
    pub shares: Vec<TxShare>,
    /// Trial epoch on the engine clock: signature timestamps are relative to it.
    pub epoch_ns: u64,
    /// When to start sending (engine clock).
    pub start_ns: u64,
    /// Stop condition for duration-bounded shares (engine clock), in addition to limits.
    pub end_ns: Option<u64>,
    /// Burst shape (from the first share's stop), if any.
    pub bursts: Option<(u64, u64, u64)>,
    /// Warm-up: frames carry the warm-up flag and are not counted as trial frames.
    pub warmup: bool,
    /// The trial's tag, written into every frame's signature.
    pub trial: u32,
}

/// Run one TX worker to completion (or until `stop` is set). Never panics on I/O errors: they
/// end the worker and are reported in the result.
pub fn run_tx_worker(queue: &mut dyn TxQueue, plan: TxPlan, stop: &AtomicBool, live: &TxLive) -> TxWorkerResult {
    let total_rate: f64 = plan.shares.iter().map(|s| s.rate_pps).sum();
    let unpaced = !total_rate.is_finite();
    let mut st: Vec<ShareState> = plan
        .shares
        .into_iter()
        .map(|share| {
            let nflows = share.stream.flows.count();
            let mine = (nflows + share.shares - 1 - share.share) / share.shares;
            ShareState {
                seq: vec![0; mine as usize],
                share,
                sent: 0,
                bytes: 0,
                credit: 0.0,
                done: false,
                first_ts: 0,
                last_ts: 0,
            }
        })
        .collect();
    let intended = match (plan.end_ns, unpaced) {
        (Some(end), false) => ((end - plan.start_ns) as f64 * total_rate / 1e9).round() as u64,
        _ => st.iter().filter_map(|s| s.share.limit).sum(),
    };
    let mut res = TxWorkerResult { intended, ..Default::default() };
    clock::sleep_until(plan.start_ns);
    // The schedule is anchored at the planned start, so a late wake-up is caught up.
    let start = plan.start_ns;
    let ns_per_frame = if unpaced { 0.0 } else { 1e9 / total_rate };
    // Catch-up token bucket: depth `burst`, refilled at CATCHUP_FACTOR × rate.
    let burst = catchup_burst(total_rate) as f64;
    let mut tokens = burst;
    let mut tokens_at = start;
    let refill_per_ns = total_rate * CATCHUP_FACTOR / 1e9;
    let mut total_sent: u64 = 0;
    let mut first = true;
    // Burst state: frames per burst, number of bursts, gap between burst starts.
    let (burst_len, burst_count, burst_gap) = plan.bursts.unwrap_or((u64::MAX, 1, 0));
    let mut burst_idx = 0u64;
    let mut in_burst = 0u64;
    let mut burst_start = start;
    let mut burst_sent_base = 0u64;
    // Frames due before the end may still go out in a short grace period after it.
    const END_GRACE_NS: u64 = 2_000_000;
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let now = clock::now_ns();
        if let Some(end) = plan.end_ns {
            if now >= end + END_GRACE_NS || (now >= end && (unpaced || total_sent >= intended)) {
                break;
            }
        }
        if st.iter().all(|s| s.done) {
            break;
        }
        // How many frames are due now.
        let mut due = if unpaced {
            BATCH as u64
        } else {
            let t = match plan.end_ns {
                Some(end) => now.min(end),
                None => now,
            };
            let elapsed = t.saturating_sub(burst_start) as f64;
            let mut target = (elapsed / ns_per_frame) as u64 + 1;
            if plan.end_ns.is_some() {
                target = target.min(intended);
            }
            target.saturating_sub(total_sent - burst_sent_base)
        };
        if plan.bursts.is_some() {
            due = due.min(burst_len - in_burst);
        } else if !unpaced {
            tokens = (tokens + now.saturating_sub(tokens_at) as f64 * refill_per_ns).min(burst);
            tokens_at = now;
            if due > 1 {
                let lag = (due as f64 * ns_per_frame) as u64;
                res.max_lag_ns = res.max_lag_ns.max(lag);
            }
            if due > BATCH as u64 {
                res.max_catchup = res.max_catchup.max((tokens as u64).min(due));
            }
            if due as f64 > tokens {
                due = tokens as u64;
                if due == 0 {
                    std::hint::spin_loop();
                    continue;
                }
            }
        }
        if due == 0 {
            if plan.end_ns.is_some_and(|end| now >= end) {
                break;
            }
            // Next frame not yet due: sleep or spin until it is.
            let next = burst_start + ((total_sent - burst_sent_base) as f64 * ns_per_frame) as u64;
            if next > now + 200_000 {
                let _ = queue.flush();
                clock::sleep_until(next.min(now + 1_000_000));
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        let mut want = due.min(BATCH as u64);
        if st.iter().all(|s| s.share.limit.is_some()) {
            let remaining: u64 = st.iter().map(|s| s.share.limit.unwrap_or(0).saturating_sub(s.sent)).sum();
            want = want.min(remaining);
        }
        let want = want as usize;
        let ts = clock::now_ns().saturating_sub(plan.epoch_ns);
        let mut n_filled = 0usize;
        let mut fill = |buf: &mut [u8]| -> usize {
            n_filled += 1;
            fill_one(&mut st, buf, ts, plan.warmup, plan.trial)
        };
        let sent = match queue.send(want, &mut fill) {
            Ok(n) => n,
            Err(e) => {
                res.error = Some(e.to_string());
                break;
            }
        };
        debug_assert_eq!(sent, n_filled);
        if sent > 0 {
            if first {
                res.first_ns = now;
                first = false;
            }
            res.last_ns = clock::now_ns();
            total_sent += sent as u64;
            let bytes: u64 = st.iter().map(|s| s.bytes).sum();
            live.frames.store(total_sent, Ordering::Relaxed);
            live.bytes.store(bytes, Ordering::Relaxed);
        }
        if plan.bursts.is_some() {
            in_burst += sent as u64;
            if in_burst >= burst_len {
                burst_idx += 1;
                if burst_idx >= burst_count {
                    break;
                }
                in_burst = 0;
                let _ = queue.flush();
                clock::sleep_until(start + burst_idx * burst_gap);
                burst_start = clock::now_ns();
                burst_sent_base = total_sent;
            }
        }
    }
    if let Err(e) = drain_queue(queue, stop) {
        res.error.get_or_insert(e.to_string());
    }
    res.queue = queue.stats();
    res.shares = st
        .into_iter()
        .map(|s| TxShareResult {
            stream: s.share.stream.index,
            frames: s.sent,
            bytes: s.bytes,
            per_flow: s.seq,
            first_ts_ns: s.first_ts,
            last_ts_ns: s.last_ts,
        })
        .collect();
    res
}

/// Flush until the queue is idle (bounded: 1 s, or until stopped).
fn drain_queue(queue: &mut dyn TxQueue, stop: &AtomicBool) -> Result<(), PortError> {
    let deadline = clock::now_ns() + 1_000_000_000;
    loop {
        queue.flush()?;
        if queue.idle() || clock::now_ns() > deadline || stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
}

/// Pick the next share (smooth weighted round robin) and write one frame into `buf`.
#[inline]
fn fill_one(st: &mut [ShareState], buf: &mut [u8], ts: u64, warmup: bool, trial: u32) -> usize {
    let i = if st.len() == 1 {
        0
    } else {
        let total: f64 = st.iter().filter(|s| !s.done).map(|s| s.share.rate_pps).sum();
        let mut best = 0;
        let mut best_credit = f64::MIN;
        for (k, s) in st.iter_mut().enumerate() {
            if s.done {
                continue;
            }
            s.credit += s.share.rate_pps;
            if s.credit > best_credit {
                best_credit = s.credit;
                best = k;
            }
        }
        st[best].credit -= total;
        best
    };
    let s = &mut st[i];
    let cs = &*s.share.stream;
    let j = s.sent;
    // Frame j of this share: the share's local flow k, the stream flow index, the size.
    let nmine = s.seq.len() as u64;
    let k = cs.flows.flow_for_frame(j) % nmine.max(1);
    let local_flow = if s.share.shares == 1 { cs.flows.flow_for_frame(j) } else { k };
    let flow_index = if s.share.shares == 1 { local_flow } else { local_flow * s.share.shares + s.share.share };
    let t = &cs.templates[cs.size_schedule[(j % cs.size_schedule.len() as u64) as usize] as usize];
    let len = t.info.frame_len;
    let out = &mut buf[..len];
    out.copy_from_slice(&t.bytes);
    if cs.flows.count() > 1 {
        apply_flow(out, &t.info, &cs.flows.tuple(flow_index));
    }
    let slot = &mut s.seq[local_flow as usize];
    let flow_id = cs.flow_base + flow_index as u32;
    let sig = Signature { trial, warmup, flow_id, seq: *slot, tx_ts_ns: ts };
    let _ = builder::patch_signature(out, &t.info, &sig);
    *slot += 1;
    if s.sent == 0 {
        s.first_ts = ts;
    }
    s.last_ts = ts;
    s.sent += 1;
    s.bytes += t.size as u64;
    if let Some(limit) = s.share.limit {
        if s.sent >= limit {
            s.done = true;
        }
    }
    len
}

/// Split a stream over `shares` workers: flow subsets and rates.
pub fn split_stream(stream: &Arc<CompiledStream>, shares: u64) -> Vec<TxShare> {
    let nflows = stream.flows.count();
    let shares = shares.min(nflows).max(1);
    (0..shares)
        .map(|share| {
            let mine = (nflows + shares - 1 - share) / shares;
            let frac = mine as f64 / nflows as f64;
            TxShare {
                stream: stream.clone(),
                share,
                shares,
                rate_pps: stream.rate_pps * frac,
                limit: stream.frame_limit.map(|l| {
                    // Distribute the count exactly: the first (l % shares) shares get one more.
                    l / shares + u64::from(share < l % shares)
                }),
            }
        })
        .collect()
}

/// Stop condition helper: the end time for duration stops.
pub fn end_for(stop: &Stop, start_ns: u64) -> Option<u64> {
    match *stop {
        Stop::Duration { ns } => Some(start_ns + ns),
        _ => None,
    }
}
