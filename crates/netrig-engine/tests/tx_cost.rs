//! Cost of the TX worker per frame in user space (the pacing loop, the frame fill, the signature,
//! the offered-load meter), against a queue that hands out UMEM-like buffers and discards what was
//! written. For before/after comparisons of hot-path changes. Ignored by default; run in release on
//! a quiet machine: `cargo test -p netrig-engine --release --test tx_cost -- --ignored --nocapture`,
//! or count instructions (repeatable on a shared machine) with
//! `valgrind --tool=callgrind target/release/deps/tx_cost-* --ignored --exact tx_worker_cost_callgrind`.
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use netrig_engine::error::PortError;
use netrig_engine::port::{TxQueue, TxQueueStats};
use netrig_engine::traffic::stream::compile;
use netrig_engine::traffic::tx::{run_tx_worker, split_stream, RunShape, TxLive, TxPlan};
use netrig_engine::{Pacing, Rate, Stop, StreamConfig};

/// Frames in flight, and the stride between buffers (as the AF_XDP UMEM: 2 KiB frames, LIFO pool).
const POOL: usize = 1024;
const FRAME: usize = 2048;

struct NullTx {
    umem: Vec<u8>,
    free: Vec<usize>,
    inflight: Vec<usize>,
    stats: TxQueueStats,
    sink: u64,
}

impl NullTx {
    fn new() -> Self {
        NullTx {
            umem: vec![0; POOL * FRAME],
            free: (0..POOL).rev().map(|i| i * FRAME).collect(),
            inflight: Vec::with_capacity(POOL),
            stats: TxQueueStats::default(),
            sink: 0,
        }
    }
}

impl TxQueue for NullTx {
    fn send_held(
        &mut self,
        count: usize,
        fill: &mut dyn FnMut(&mut [u8], &mut u64) -> usize,
    ) -> Result<usize, PortError> {
        // "Completions": everything in flight comes back, most recent first.
        while let Some(a) = self.inflight.pop() {
            self.free.push(a);
        }
        let mut n = 0;
        while n < count {
            let Some(addr) = self.free.pop() else { break };
            let len = fill(&mut self.umem[addr..addr + FRAME - 1], &mut 0);
            self.sink = self.sink.wrapping_add(self.umem[addr + len - 1] as u64);
            self.stats.frames += 1;
            self.stats.bytes += len as u64;
            self.inflight.push(addr);
            n += 1;
        }
        Ok(n)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn stats(&self) -> TxQueueStats {
        self.stats
    }
}

/// `flows` flows: up to 1024 source ports, then 1024 ports × N source addresses (as bench/flows.py).
fn run(frames: u64, flows: u32) -> f64 {
    let mut c = StreamConfig::new("cost");
    c.rate = Rate::Max;
    c.stop = Stop::Frames { count: frames };
    c.flows.src_ports = flows.min(1024);
    c.flows.src_ips = flows.div_ceil(1024);
    let s = Arc::new(compile(0, &c, 0, 1514, 2).unwrap());
    let plan = TxPlan {
        shares: split_stream(&s, 1),
        epoch_ns: 0,
        start_ns: 0,
        shape: RunShape::Frames,
        pacing: Pacing::Smooth,
        intervals: None,
        warmup: false,
        trial: 1,
        cpu_shared: false,
    };
    let mut q = NullTx::new();
    let t0 = Instant::now();
    let r = run_tx_worker(&mut q, plan, &AtomicBool::new(false), &TxLive::default());
    let ns = t0.elapsed().as_nanos() as f64 / frames as f64;
    assert_eq!(r.shares[0].frames, frames);
    ns
}

#[test]
#[ignore = "timing measurement: run explicitly in release"]
fn tx_worker_cost() {
    for flows in [1, 64, 1 << 20] {
        let best = (0..5).map(|_| run(4_000_000, flows)).fold(f64::INFINITY, f64::min);
        println!("run_tx_worker unpaced: {best:.2} ns/frame (best of 5 x 4M frames, {flows} flows, 64 B)");
    }
}

#[test]
#[ignore = "instruction count: run under valgrind --tool=callgrind"]
fn tx_worker_cost_callgrind() {
    run(1_000_000, 1);
}

/// The same with 64 k flows (64 source addresses × 1024 source ports): the per-flow fields and
/// their checksum updates.
#[test]
#[ignore = "instruction count: run under valgrind --tool=callgrind"]
fn tx_worker_flows_cost_callgrind() {
    run(1_000_000, 1 << 16);
}
