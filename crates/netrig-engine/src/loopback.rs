//! In-process loopback ports: what one end sends, the other receives. Engine tests run on them
//! without root, with [`crate::fault::FaultyTx`] in between to drop, duplicate and reorder.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::clock;
use crate::error::PortError;
use crate::port::{
    Backend, LinkSource, LinkState, Port, PortCaps, RxMeta, RxQueue, RxQueueStats, TimestampSource, TxQueue,
    TxQueueStats,
};

/// Frames in flight (with their send time) and the count dropped because the queue was full.
type InFlight = (VecDeque<(Vec<u8>, u64)>, u64);

#[derive(Default)]
struct Wire {
    q: Mutex<InFlight>,
    cv: Condvar,
}

/// Capacity of one direction, in frames; beyond it frames are dropped and counted as the
/// receiver's ring drops (like a full RX ring).
pub const CAPACITY: usize = 1 << 16;

/// The link between the two ends of a pair: tests take it down; frames sent while it is down are
/// lost on the wire (the sender still counts them, as a NIC does).
#[derive(Debug, Default)]
pub struct LoopLink {
    down: AtomicBool,
    changes: AtomicU32,
}

impl LoopLink {
    /// Take the link down (`false`) or bring it back up (`true`).
    pub fn set_up(&self, up: bool) {
        if self.down.swap(!up, Ordering::SeqCst) == up {
            self.changes.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl LinkSource for LoopLink {
    fn state(&self) -> Option<LinkState> {
        let changes = self.changes.load(Ordering::SeqCst);
        Some(LinkState {
            oper_up: !self.down.load(Ordering::SeqCst),
            carrier_changes: changes,
            carrier_down: Some(changes.div_ceil(2)),
            xdp_prog_id: None,
        })
    }
}

/// One end of a loopback pair.
pub struct LoopbackPort {
    caps: PortCaps,
    out: Arc<Wire>,
    inp: Arc<Wire>,
    /// The pair's link (shared by both ends).
    pub link: Arc<LoopLink>,
    /// Wrap the TX half in a fault injector (set by tests).
    pub faults: Option<crate::fault::FaultConfig>,
    pub fault_log: Arc<Mutex<crate::fault::FaultLog>>,
}

/// A connected pair of loopback ports named `a` and `b`.
pub fn pair(a: &str, b: &str) -> (LoopbackPort, LoopbackPort) {
    let ab = Arc::new(Wire::default());
    let ba = Arc::new(Wire::default());
    let caps = |name: &str| PortCaps {
        name: name.to_string(),
        backend: Backend::Loopback,
        tx_queues: 1,
        rx_queues: 1,
        max_frame_len: 9018,
        speed_bps: None,
        rx_timestamp: TimestampSource::User,
        zero_copy: false,
        notes: "in-process loopback".into(),
    };
    let link = Arc::new(LoopLink::default());
    (
        LoopbackPort {
            caps: caps(a),
            out: ab.clone(),
            inp: ba.clone(),
            link: link.clone(),
            faults: None,
            fault_log: Default::default(),
        },
        LoopbackPort { caps: caps(b), out: ba, inp: ab, link, faults: None, fault_log: Default::default() },
    )
}

impl LoopbackPort {
    /// This end as a port of `bps` (a link speed; the pair has none).
    pub fn with_speed(mut self, bps: u64) -> LoopbackPort {
        self.caps.speed_bps = Some(bps);
        self
    }
}

struct LoopTx {
    wire: Arc<Wire>,
    link: Arc<LoopLink>,
    scratch: Vec<u8>,
    stats: TxQueueStats,
}

impl TxQueue for LoopTx {
    fn send_held(
        &mut self,
        count: usize,
        fill: &mut dyn FnMut(&mut [u8], &mut u64) -> usize,
    ) -> Result<usize, PortError> {
        let mut frames = Vec::with_capacity(count);
        for _ in 0..count {
            let n = fill(&mut self.scratch, &mut 0);
            self.stats.frames += 1;
            self.stats.bytes += n as u64;
            frames.push(self.scratch[..n].to_vec());
        }
        if self.link.down.load(Ordering::Relaxed) {
            return Ok(count);
        }
        let now = clock::now_ns();
        let mut g = self.wire.q.lock().unwrap_or_else(|e| e.into_inner());
        for f in frames {
            if g.0.len() >= CAPACITY {
                g.1 += 1;
            } else {
                g.0.push_back((f, now));
            }
        }
        drop(g);
        self.wire.cv.notify_one();
        Ok(count)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn stats(&self) -> TxQueueStats {
        self.stats
    }
}

struct LoopRx {
    wire: Arc<Wire>,
    batch: VecDeque<(Vec<u8>, u64)>,
}

impl RxQueue for LoopRx {
    fn recv(
        &mut self,
        max: usize,
        timeout: Duration,
        on_frame: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, PortError> {
        if self.batch.is_empty() {
            let g = self.wire.q.lock().unwrap_or_else(|e| e.into_inner());
            let (mut g, _) =
                self.wire.cv.wait_timeout_while(g, timeout, |q| q.0.is_empty()).unwrap_or_else(|e| e.into_inner());
            let n = g.0.len().min(4096);
            self.batch.extend(g.0.drain(..n));
        }
        let mut n = 0;
        let ts = clock::now_ns();
        while n < max {
            let Some((f, _)) = self.batch.pop_front() else { break };
            on_frame(&f, RxMeta { ts_ns: ts, queue: 0 });
            n += 1;
        }
        Ok(n)
    }

    fn stats(&mut self) -> RxQueueStats {
        let g = self.wire.q.lock().unwrap_or_else(|e| e.into_inner());
        RxQueueStats { ring_drops: g.1, ..Default::default() }
    }
}

impl Port for LoopbackPort {
    fn caps(&self) -> &PortCaps {
        &self.caps
    }

    fn open_tx(&mut self, queue: usize) -> Result<Box<dyn TxQueue>, PortError> {
        if queue != 0 {
            return Err(PortError::NoSuchQueue { ifname: self.caps.name.clone(), queue, queues: 1 });
        }
        let tx = LoopTx {
            wire: self.out.clone(),
            link: self.link.clone(),
            scratch: vec![0; 9018],
            stats: TxQueueStats::default(),
        };
        Ok(match &self.faults {
            Some(cfg) => Box::new(crate::fault::FaultyTx::new(Box::new(tx), cfg.clone(), self.fault_log.clone())),
            None => Box::new(tx),
        })
    }

    fn open_rx(&mut self, queue: usize) -> Result<Box<dyn RxQueue>, PortError> {
        if queue != 0 {
            return Err(PortError::NoSuchQueue { ifname: self.caps.name.clone(), queue, queues: 1 });
        }
        Ok(Box::new(LoopRx { wire: self.inp.clone(), batch: VecDeque::new() }))
    }

    fn link(&self) -> Option<Arc<dyn LinkSource>> {
        Some(self.link.clone())
    }
}
