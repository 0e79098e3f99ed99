//! The receive loop every entry point's RX worker runs: a trial's, the OTG generator's and a
//! listen's differ only in what they do with a frame and after a batch ([`RxSink`]).
//!
//! ```text
//! until stop: sink.before ─▶ RxQueue::recv (RX_BATCH, RX_WAIT) ─▶ sink.frame per frame
//!                                                              ─▶ sink.batch (n, when it polled)
//! then (a trial, a listen): the frames already in the tester's ring, for RX_FINAL_PASS_NS,
//!             through the same sink (batch with `draining`)
//! ```
//! The loop is generic over the sink, so each worker's per-frame path is compiled as its own.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::clock;
use crate::port::{RxMeta, RxQueue};

/// Most frames a worker takes from its queue at once.
pub const RX_BATCH: usize = 256;
/// How long a receive waits for frames: a stop is seen within it.
pub const RX_WAIT: Duration = Duration::from_millis(5);
/// After the drain every receiver empties its ring for this long: frames that reached the tester
/// before the end are counted, not dropped with the socket (af_packet hands a partly filled block
/// over after its 4 ms timeout). With `drain_ns = 0` this is all the waiting there is.
pub const RX_FINAL_PASS_NS: u64 = 10_000_000;
/// How long one receive of the final pass waits.
const FINAL_WAIT: Duration = Duration::from_millis(1);

/// Live counters of one RX worker.
#[derive(Debug, Default)]
pub struct RxLive {
    pub frames: AtomicU64,
    /// Of them, the frames of the trial's flows counted once each ([`crate::traffic::analyze::Analyzer::arrived`]).
    pub arrived: AtomicU64,
}

/// What a worker does with what it receives.
pub trait RxSink {
    /// Before each receive (the generator turns its capture on or off here).
    fn before(&mut self) {}
    /// One received frame (without FCS).
    fn frame(&mut self, frame: &[u8], meta: RxMeta);
    /// After each receive: it gave `n` frames and began at `polled_ns` (monotonic); `draining`:
    /// in the final pass.
    fn batch(&mut self, q: &mut dyn RxQueue, n: usize, polled_ns: u64, draining: bool);
}

/// Receive from `q` into `sink` until `stop` is set; then, with `final_pass`, what is already in
/// the tester's ring. The first receive error ends it, returned as its message.
pub fn receive<S: RxSink>(
    q: &mut dyn RxQueue,
    stop: &AtomicBool,
    sink: &mut S,
    final_pass: bool,
) -> Result<(), String> {
    while !stop.load(Ordering::Relaxed) {
        sink.before();
        let polled = clock::now_ns();
        let n = q.recv(RX_BATCH, RX_WAIT, &mut |f, m| sink.frame(f, m)).map_err(|e| e.to_string())?;
        sink.batch(q, n, polled, false);
    }
    let end = if final_pass { clock::now_ns() + RX_FINAL_PASS_NS } else { 0 };
    while clock::now_ns() < end {
        let polled = clock::now_ns();
        let n = q.recv(RX_BATCH, FINAL_WAIT, &mut |f, m| sink.frame(f, m)).map_err(|e| e.to_string())?;
        sink.batch(q, n, polled, true);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loopback::pair;
    use crate::port::Port;

    #[derive(Default)]
    struct Tally {
        frames: u64,
        batches: Vec<(usize, bool)>,
    }

    impl RxSink for Tally {
        fn frame(&mut self, _: &[u8], _: RxMeta) {
            self.frames += 1;
        }
        fn batch(&mut self, _: &mut dyn RxQueue, n: usize, _: u64, draining: bool) {
            self.batches.push((n, draining));
        }
    }

    /// Frames queued before the stop are all counted: by the loop if it ran, else by the final
    /// pass; without the final pass a stopped loop receives nothing.
    #[test]
    fn a_stopped_worker_counts_what_is_in_its_ring_only_with_the_final_pass() {
        for final_pass in [true, false] {
            let (mut a, mut b) = pair("lo-a", "lo-b");
            let (mut tx, mut rx) = (a.open_tx(0).unwrap(), b.open_rx(0).unwrap());
            let sent = tx.send(600, &mut |buf: &mut [u8]| buf.len().min(64)).unwrap();
            assert_eq!(sent, 600);
            let stop = AtomicBool::new(true);
            let mut tally = Tally::default();
            receive(&mut *rx, &stop, &mut tally, final_pass).unwrap();
            let want = if final_pass { 600 } else { 0 };
            assert_eq!(tally.frames, want, "final pass {final_pass}");
            let counted: usize = tally.batches.iter().map(|b| b.0).sum();
            assert_eq!(counted as u64, want);
            assert!(tally.batches.iter().all(|b| b.1 && b.0 <= RX_BATCH), "{:?}", tally.batches);
        }
    }
}
