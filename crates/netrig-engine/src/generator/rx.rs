//! The generator's RX worker: one per RX queue of every port, pinned, counting every frame.
//!
//! Per frame: the capture (while one runs on the port) keeps it; the port's totals count it; the
//! signature at its end ([`netrig_wire::dissect::locate`] at [`Site::End`]) names the flow and the start
//! it belongs to (the tag): the flow's counters of this worker count it when that start is the
//! flow's current one (the worker resets its counters when it sees a new tag), else it is stale
//! (an earlier start's frame still in flight, another tester's). Latency: receive stamp − transmit
//! stamp, less the frame times of the flow's latency mode. All counters are atomics this worker
//! alone writes; the capture buffer is held locked by this worker for as long as the capture runs
//! (taken when it starts, released when it stops: no lock per frame).
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use netrig_wire::dissect::locate;
use netrig_wire::signature::Site;
use netrig_wire::signature::MASK_40;

use super::capring::CaptureRing;
use super::stats::{Counters, FlowCtl, PortCounters};
use crate::analyze::FUTURE_TOLERANCE_NS;
use crate::port::{RxMeta, RxQueue, RxWait};

/// A port's capture switch: `on` and a generation the workers acknowledge.
#[derive(Debug, Default)]
pub(crate) struct CaptureCtl {
    pub on: AtomicBool,
    pub epoch: AtomicU64,
}

/// Most frames taken from the queue at once, and how long a receive waits.
const RX_BATCH: usize = 256;
const RX_WAIT: Duration = Duration::from_millis(5);
const HALF_40: u64 = 1 << 39;

/// Everything an RX worker needs.
pub(crate) struct RxWorker {
    pub queue: Box<dyn RxQueue>,
    pub ctl: Arc<[FlowCtl]>,
    /// This worker's counters of every flow.
    pub slots: Arc<[Counters]>,
    pub port: Arc<PortCounters>,
    pub capture: Arc<CaptureCtl>,
    /// This worker's capture buffer; `acked`: the capture generation it has acted on.
    pub ring: Arc<Mutex<CaptureRing>>,
    pub acked: Arc<AtomicU64>,
    pub stop: Arc<AtomicBool>,
    pub epoch_ns: u64,
    /// Frame-time corrections, picoseconds per byte: this port's, and per flow what its latency
    /// mode adds for the sending port (0 for cut-through).
    pub ps_per_byte: u64,
    pub flow_ps_per_byte: Arc<[u64]>,
    pub errors: Arc<Mutex<Vec<String>>>,
    /// A TX worker is pinned to this worker's CPU: nap, never spin (as a trial's receiver).
    pub shares_tx_cpu: bool,
}

/// How a receiver waits on an empty queue, given whether its last receive found frames. On a CPU
/// of its own, while frames flow, it polls the ring for a moment before sleeping in `poll(2)`:
/// asleep there, it makes the CPU that delivers each batch (on veth, the sender's) pay a wake-up
/// per batch (measured: 20-25 % of the OTG sender's time, docs/performance.md). Idle, it sleeps in
/// `poll(2)` and costs nothing. On a sender's CPU it naps.
fn rx_wait(shares_tx_cpu: bool, busy: bool) -> RxWait {
    match (shares_tx_cpu, busy) {
        (true, _) => RxWait::Nap,
        (false, true) => RxWait::Spin,
        (false, false) => RxWait::Poll,
    }
}

impl RxWorker {
    /// Count until the generator stops; then hand the queue back, open (see `Generator::release`).
    pub fn run(mut self) -> Box<dyn RxQueue> {
        self.serve();
        self.queue
    }

    fn serve(&mut self) {
        let ring = self.ring.clone();
        let mut seen = 0u64;
        let mut guard: Option<MutexGuard<'_, CaptureRing>> = None;
        let mut polls = 0u32;
        let mut wait = rx_wait(self.shares_tx_cpu, false);
        self.queue.set_wait(wait);
        while !self.stop.load(Ordering::Relaxed) {
            let epoch = self.capture.epoch.load(Ordering::Acquire);
            if epoch != seen {
                seen = epoch;
                guard = None;
                if self.capture.on.load(Ordering::Acquire) {
                    let mut g = ring.lock().unwrap_or_else(|e| e.into_inner());
                    g.clear();
                    guard = Some(g);
                }
                self.acked.store(seen, Ordering::Release);
            }
            let counted = &mut Count {
                ctl: &self.ctl,
                slots: &self.slots,
                port: &self.port,
                epoch_ns: self.epoch_ns,
                ps_per_byte: self.ps_per_byte,
                flow_ps: &self.flow_ps_per_byte,
            };
            let cap = guard.as_deref_mut();
            let r = match cap {
                Some(c) => self.queue.recv(RX_BATCH, RX_WAIT, &mut |f, m| {
                    c.push(f, m.ts_ns);
                    counted.frame(f, m);
                }),
                None => self.queue.recv(RX_BATCH, RX_WAIT, &mut |f, m| counted.frame(f, m)),
            };
            let n = match r {
                Ok(n) => n,
                Err(e) => {
                    self.errors.lock().unwrap_or_else(|x| x.into_inner()).push(e.to_string());
                    break;
                }
            };
            if rx_wait(self.shares_tx_cpu, n > 0) != wait {
                wait = rx_wait(self.shares_tx_cpu, n > 0);
                self.queue.set_wait(wait);
            }
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(16) {
                self.port.ring_drops.store(self.queue.stats().ring_drops, Ordering::Relaxed);
            }
        }
        self.port.ring_drops.store(self.queue.stats().ring_drops, Ordering::Relaxed);
    }
}

/// The per-frame counting of one worker.
struct Count<'a> {
    ctl: &'a [FlowCtl],
    slots: &'a [Counters],
    port: &'a PortCounters,
    epoch_ns: u64,
    ps_per_byte: u64,
    flow_ps: &'a [u64],
}

impl Count<'_> {
    #[inline(always)]
    fn frame(&mut self, f: &[u8], m: RxMeta) {
        let wire = (f.len() + crate::stream::FCS_LEN) as u64;
        PortCounters::add(&self.port.frames, 1);
        PortCounters::add(&self.port.bytes, wire);
        let Some(sig) = locate(f, Site::End) else {
            PortCounters::add(&self.port.foreign, 1);
            return;
        };
        let i = sig.flow_id as usize;
        let tag = match self.ctl.get(i) {
            Some(c) => c.tag.load(Ordering::Relaxed),
            None => u32::MAX,
        };
        if sig.trial != tag || sig.warmup {
            PortCounters::add(&self.port.stale, 1);
            return;
        }
        let slot = &self.slots[i];
        if slot.tag.load(Ordering::Relaxed) != tag {
            slot.reset(tag);
        }
        slot.count(wire, m.ts_ns);
        slot.count_tag(sig.seq);
        // Transmit stamps are 40-bit ns since the epoch: unwrap against the receive time.
        let rx_rel = m.ts_ns.saturating_sub(self.epoch_ns);
        let d = rx_rel.wrapping_sub(sig.tx_ts_ns) & MASK_40;
        let raw = if d <= HALF_40 {
            d
        } else if MASK_40 + 1 - d <= FUTURE_TOLERANCE_NS {
            0
        } else {
            return;
        };
        let correction = wire * (self.ps_per_byte + self.flow_ps[i]) / 1000;
        slot.latency(raw.saturating_sub(correction));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receivers_spin_only_while_frames_flow_on_a_cpu_of_their_own() {
        assert_eq!(rx_wait(false, true), RxWait::Spin);
        assert_eq!(rx_wait(false, false), RxWait::Poll);
        assert_eq!((rx_wait(true, true), rx_wait(true, false)), (RxWait::Nap, RxWait::Nap));
    }
}
