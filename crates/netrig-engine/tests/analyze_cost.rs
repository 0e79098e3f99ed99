//! Cost of the receive analysis per frame (`Analyzer::frame`), for before/after comparisons of
//! hot-path changes. Ignored by default; run in release on a quiet machine:
//! `cargo test -p netrig-engine --release --test analyze_cost -- --ignored --nocapture`.
//! Two set-ups: `plain` (an analyser without a trial: tag 0, no bound on sequence numbers) and
//! `trial` (a trial's analyser whose bound on sequence numbers follows a sender that publishes
//! its count every 64 frames, as the TX workers do).
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use netrig_engine::port::RxMeta;
use netrig_engine::traffic::analyze::{Analyzer, TrialIdent};
use netrig_wire::frames::{min_frame_len, FrameSpec, L3Spec, Proto};
use netrig_wire::signature::Signature;

const FRAMES: u64 = 4_000_000;

#[test]
#[ignore = "timing measurement: run explicitly in release"]
fn analyzer_frame_cost() {
    for flows in [1, 64] {
        for trial in [false, true] {
            measure(flows, trial, Proto::Udp, false);
        }
    }
    // The other protocols (and QinQ) through the same analyser: 64 flows, a trial's analyser.
    let tcp = Proto::Tcp { flags: netrig_wire::tcp::flags::ACK, seq: 0, ack: 0, window: 65535 };
    for (proto, qinq) in [(tcp, false), (Proto::IcmpEcho, false), (Proto::Raw { ethertype: 0x88B5 }, false)] {
        measure(64, true, proto, qinq);
    }
    measure(64, true, Proto::Udp, true);
    measure(64, true, tcp, true);
}

fn measure(flows: usize, trial: bool, proto: Proto, qinq: bool) {
    let tag = |vid| netrig_wire::vlan::Repr { pcp: 0, dei: false, vid, inner_ethertype: 0 };
    let spec = FrameSpec {
        src_mac: netrig_wire::ethernet::EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: netrig_wire::ethernet::EthernetAddress([2, 0, 0, 0, 0, 2]),
        outer_vlan: qinq.then(|| tag(10)),
        vlan: qinq.then(|| tag(20)),
        proto,
        l3: L3Spec::V4 { src: [198, 18, 0, 1].into(), dst: [198, 19, 0, 1].into(), ttl: 64, dscp: 0 },
        src_port: 1024,
        dst_port: 1024,
        udp_checksum: false,
    };
    // A receive ring: frame i sits in slot i % RING, written RING frames ahead of the reader (as
    // a kernel fills a ring), so the reader never loads bytes it has just stored itself.
    const RING: usize = 4096;
    let len = min_frame_len(&spec);
    // 64-byte slots for 60-byte frames (as before the other protocols), 128 for longer ones.
    let slot_len = if len <= 64 { 64 } else { 128 };
    let mut ring = vec![0u8; RING * slot_len];
    let mut sig_offset = 0;
    for slot in 0..RING {
        let flow = slot % flows;
        let sig =
            Signature { trial: if trial { 77 } else { 0 }, warmup: false, flow_id: flow as u32, seq: 0, tx_ts_ns: 0 };
        ring[slot * slot_len..slot * slot_len + len].copy_from_slice(&spec.frame(len, &sig).unwrap());
        sig_offset = spec.headers_len();
    }
    let write = |ring: &mut [u8], i: u64| {
        let slot = (i % RING as u64) as usize;
        let flow = slot % flows;
        Signature {
            trial: if trial { 77 } else { 0 },
            warmup: false,
            flow_id: flow as u32,
            seq: i / flows as u64,
            tx_ts_ns: 1_000_000 + i * 100,
        }
        .emit(&mut ring[slot * slot_len + sig_offset..slot * slot_len + len]);
    };
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        for i in 0..RING as u64 {
            write(&mut ring, i);
        }
        let sent = Arc::new(AtomicU64::new(0));
        let mut an = Analyzer::new(flows, 0, u64::MAX / 4);
        if trial {
            let s = sent.clone();
            let ident = TrialIdent { tag: 77, earlier: 3, concurrent: Vec::new() };
            an = an.for_trial(ident, Box::new(move || s.load(Ordering::Acquire) + 64));
        }
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let t0 = Instant::now();
        for i in 0..FRAMES {
            if i % 64 == 0 {
                sent.store(i + RING as u64, Ordering::Release);
            }
            let tx_ts = 1_000_000 + i * 100;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let slot = (i % RING as u64) as usize;
            an.frame(
                &ring[slot * slot_len..slot * slot_len + len],
                RxMeta { ts_ns: tx_ts + 2_000 + x % 20_000, queue: 0 },
            );
            write(&mut ring, i + RING as u64);
        }
        let ns = t0.elapsed().as_nanos() as f64 / FRAMES as f64;
        assert_eq!((0..an.flow_count()).map(|i| an.flow(i).received).sum::<u64>(), FRAMES);
        best = best.min(ns);
    }
    let kind = if trial { "trial" } else { "plain" };
    let what = format!("{}{}", proto.name(), if qinq { " QinQ" } else { "" });
    println!(
        "Analyzer::frame: {best:.2} ns/frame (best of 5 x {FRAMES} frames, {flows} flows, {kind}, {what} {len} B)"
    );
}

/// Flow counts of the per-flow scaling measurement (`FLOWS=1,1024` to choose).
fn scale_flows() -> Vec<usize> {
    match std::env::var("FLOWS") {
        Ok(v) => v.split(',').filter_map(|x| x.trim().parse().ok()).collect(),
        Err(_) => vec![1, 1 << 10, 1 << 20, 1 << 24],
    }
}

/// The cost per frame as the flows grow: frames visit the flows in a pseudorandom order (every
/// flow once per cycle, as a stream's pseudorandom flow order or RSS-spread traffic does), each
/// flow's sequence numbers in order, from a 4096-slot ring rewritten ahead of the reader, pushed
/// and flushed every `BATCH` frames (256, as an RX worker; `BATCH=1`: every frame counted at once). One
/// cycle over every flow first (each flow's state touched once), then `max(4M, 2 cycles)` frames
/// timed. Wall clock on a shared machine: compare with the instruction and cache-miss counts of
/// `analyzer_scale_callgrind`.
#[test]
#[ignore = "timing measurement: run explicitly in release"]
fn analyzer_cost_by_flows() {
    for flows in scale_flows() {
        let (warm, timed) = scale_frames(flows);
        let mut best = f64::INFINITY;
        let mut batch = 0;
        for _ in 0..3 {
            let mut run = ScaleRun::new(flows);
            batch = run.batch;
            run.warm_up(warm);
            let t0 = Instant::now();
            run.frames(warm, timed);
            best = best.min(t0.elapsed().as_nanos() as f64 / timed as f64);
        }
        println!(
            "Analyzer at {flows} flows: {best:.1} ns/frame (best of 3 x {timed} frames, pseudorandom order, batches of {batch})"
        );
    }
}

/// Under `valgrind --tool=callgrind --cache-sim=yes`: the warm cycle, then the timed frames in
/// `ScaleRun::frames` (its inclusive cost divided by the frames of the second call).
#[test]
#[ignore = "instruction count: run under valgrind --tool=callgrind"]
fn analyzer_scale_callgrind() {
    for flows in scale_flows() {
        let (warm, timed) = scale_frames(flows);
        let mut run = ScaleRun::new(flows);
        run.warm_up(warm);
        run.frames(warm, timed);
    }
}

fn scale_frames(flows: usize) -> (u64, u64) {
    (flows as u64, (4_000_000u64).max(2 * flows as u64))
}

struct ScaleRun {
    an: Analyzer,
    ring: Vec<u8>,
    len: usize,
    sig_offset: usize,
    flows: u64,
    stride: u64,
    /// Frames pushed between flushes, as an RX worker's batch (`BATCH`, 256; 1: each frame alone).
    batch: u64,
}

const SCALE_RING: usize = 4096;
const SCALE_SLOT: usize = 64;

impl ScaleRun {
    fn new(flows: usize) -> Self {
        let spec = FrameSpec {
            src_mac: netrig_wire::ethernet::EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_mac: netrig_wire::ethernet::EthernetAddress([2, 0, 0, 0, 0, 2]),
            outer_vlan: None,
            vlan: None,
            proto: Proto::Udp,
            l3: L3Spec::V4 { src: [198, 18, 0, 1].into(), dst: [198, 19, 0, 1].into(), ttl: 64, dscp: 0 },
            src_port: 1024,
            dst_port: 1024,
            udp_checksum: false,
        };
        let len = min_frame_len(&spec);
        let mut ring = vec![0u8; SCALE_RING * SCALE_SLOT];
        let frame = spec.frame(len, &Signature::default()).unwrap();
        for slot in 0..SCALE_RING {
            ring[slot * SCALE_SLOT..slot * SCALE_SLOT + len].copy_from_slice(&frame);
        }
        let sig_offset = spec.headers_len();
        let n = flows as u64;
        // An odd stride is coprime with a power of two: a permutation of the flows per cycle.
        let stride = if n > 1 { (0x9E37_79B9_7F4A_7C15u64 % n) | 1 } else { 1 };
        let an = Analyzer::new(flows, 0, u64::MAX / 4)
            .for_trial(TrialIdent { tag: 77, earlier: 3, concurrent: Vec::new() }, Box::new(|| u64::MAX));
        let batch = std::env::var("BATCH").ok().and_then(|b| b.parse().ok()).unwrap_or(256u64).max(1);
        let mut run = ScaleRun { an, ring, len, sig_offset, flows: n, stride, batch };
        for i in 0..SCALE_RING as u64 {
            run.write(i);
        }
        run
    }

    /// Frame `i` of the stream into its ring slot.
    fn write(&mut self, i: u64) {
        let slot = (i % SCALE_RING as u64) as usize;
        let flow = ((i % self.flows) * self.stride % self.flows) as u32;
        let sig =
            Signature { trial: 77, warmup: false, flow_id: flow, seq: i / self.flows, tx_ts_ns: 1_000_000 + i * 100 };
        let at = slot * SCALE_SLOT + self.sig_offset;
        sig.emit(&mut self.ring[at..slot * SCALE_SLOT + self.len]);
    }

    /// Analyse frames `0..n` (not counted by callgrind's `frames`).
    #[inline(never)]
    fn warm_up(&mut self, n: u64) {
        self.run(0, n);
    }

    /// Analyse frames `first..first + n`.
    #[inline(never)]
    fn frames(&mut self, first: u64, n: u64) {
        self.run(first, n);
    }

    #[inline(always)]
    fn run(&mut self, first: u64, n: u64) {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in first..first + n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let slot = (i % SCALE_RING as u64) as usize;
            let tx_ts = 1_000_000 + i * 100;
            self.an.push(
                &self.ring[slot * SCALE_SLOT..slot * SCALE_SLOT + self.len],
                RxMeta { ts_ns: tx_ts + 2_000 + x % 20_000, queue: 0 },
            );
            if (i + 1) % self.batch == 0 {
                self.an.flush();
            }
            self.write(i + SCALE_RING as u64);
        }
        self.an.flush();
        assert_eq!(self.an.totals.frames, first + n);
    }
}
