//! A seeded fault injector between a TX worker and its queue: drops, duplicates, reorders and
//! delays frames, stalls the worker (as a descheduled sender would be), and logs exactly what it
//! did — and when each frame left — so tests can compare the engine's counts with the truth.
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use netrig_wire::dissect;
use netrig_wire::signature::Site;

use crate::error::{ConfigError, PortError};
use crate::port::{TxQueue, TxQueueStats};
use crate::rng::XorShift;

#[derive(Debug, Clone, PartialEq)]
pub struct FaultConfig {
    pub seed: u64,
    /// Probabilities per frame.
    pub drop: f64,
    pub duplicate: f64,
    /// Hold a frame back and emit it after the next `reorder_distance` frames.
    pub reorder: f64,
    pub reorder_distance: usize,
    /// Block the worker for `stall_ns` inside `send` every `stall_every` frames (0: never).
    pub stall_every: u64,
    pub stall_ns: u64,
    /// Log when every frame went on to the inner queue (`FaultLog::departures`).
    pub record_departures: bool,
}

impl FaultConfig {
    /// Probabilities within 0..1 that add up to at most 1, a distance for reordering. Field:
    /// `faults`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let named = [("drop", self.drop), ("duplicate", self.duplicate), ("reorder", self.reorder)];
        if let Some((k, v)) = named.iter().find(|(_, v)| !(0.0..=1.0).contains(v)) {
            return Err(ConfigError::new("faults", format!("{k}={v} is not a probability: give 0..1")));
        }
        let sum: f64 = named.iter().map(|x| x.1).sum();
        if sum > 1.0 {
            return Err(ConfigError::new("faults", format!("drop + duplicate + reorder is {sum}: at most 1")));
        }
        if self.reorder > 0.0 && self.reorder_distance == 0 {
            return Err(ConfigError::new("faults", "reorder needs distance >= 1 (frames a held one waits for)"));
        }
        Ok(())
    }
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            seed: 1,
            drop: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_distance: 3,
            stall_every: 0,
            stall_ns: 0,
            record_departures: false,
        }
    }
}

/// What the injector did, by (flow id, sequence).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultLog {
    pub passed: u64,
    pub dropped: Vec<(u32, u64)>,
    pub duplicated: Vec<(u32, u64)>,
    /// Frames chosen to be held back.
    pub held: Vec<(u32, u64)>,
    /// Frames that went onto the wire after a higher sequence of the same flow: what a
    /// receiver must count as reordered.
    pub reordered: Vec<(u32, u64)>,
    /// Highest sequence put on the wire per flow.
    pub max_emitted: std::collections::HashMap<u32, u64>,
    /// Engine-clock time each frame went on to the inner queue (with `record_departures`).
    pub departures: Vec<u64>,
    /// Stalls injected.
    pub stalls: u64,
}

/// How many frames the injector passed, dropped, duplicated, held back and sent reordered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    pub passed: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub held: u64,
    pub reordered: u64,
}

impl FaultLog {
    pub fn counts(&self) -> FaultCounts {
        FaultCounts {
            passed: self.passed,
            dropped: self.dropped.len() as u64,
            duplicated: self.duplicated.len() as u64,
            held: self.held.len() as u64,
            reordered: self.reordered.len() as u64,
        }
    }

    fn emitted(&mut self, k: (u32, u64)) {
        match self.max_emitted.get_mut(&k.0) {
            Some(m) if k.1 < *m => self.reordered.push(k),
            Some(m) => *m = k.1,
            None => {
                self.max_emitted.insert(k.0, k.1);
            }
        }
    }
}

pub struct FaultyTx {
    inner: Box<dyn TxQueue>,
    cfg: FaultConfig,
    rng: XorShift,
    log: Arc<Mutex<FaultLog>>,
    scratch: Vec<u8>,
    /// Frames ready to go to the inner queue.
    pending: VecDeque<Vec<u8>>,
    /// Frames held back: (frame, frames still to pass before it).
    held: Vec<(Vec<u8>, usize)>,
    stats: TxQueueStats,
    /// Frame count at which the next stall happens.
    next_stall: u64,
    /// Time stamped on frames emitted by the current `send`.
    now_ns: u64,
}

impl FaultyTx {
    pub fn new(inner: Box<dyn TxQueue>, cfg: FaultConfig, log: Arc<Mutex<FaultLog>>) -> Self {
        FaultyTx {
            inner,
            rng: XorShift::new(cfg.seed),
            log,
            scratch: vec![0; 9018],
            pending: VecDeque::new(),
            held: Vec::new(),
            stats: TxQueueStats::default(),
            next_stall: cfg.stall_every,
            now_ns: 0,
            cfg,
        }
    }

    fn emit(&mut self, f: Vec<u8>) {
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.emitted(key(&f));
        if self.cfg.record_departures {
            log.departures.push(self.now_ns);
        }
        drop(log);
        self.pending.push_back(f);
    }

    fn push_out(&mut self, f: Vec<u8>) {
        self.emit(f);
        // Every frame that passes brings held frames closer to release.
        let mut released = Vec::new();
        self.held.retain_mut(|(h, left)| {
            *left -= 1;
            if *left == 0 {
                released.push(std::mem::take(h));
                false
            } else {
                true
            }
        });
        for f in released {
            self.emit(f);
        }
    }

    fn pump(&mut self) -> Result<(), PortError> {
        while !self.pending.is_empty() {
            let mut it = self.pending.iter();
            let n = self.pending.len();
            let sent = self.inner.send(n, &mut |buf: &mut [u8]| {
                let f = it.next().expect("inner queue asks for at most n frames");
                buf[..f.len()].copy_from_slice(f);
                f.len()
            })?;
            self.pending.drain(..sent);
            if sent == 0 {
                break;
            }
        }
        Ok(())
    }
}

/// A frame's (flow, sequence), by its signature after the headers or at its end (OTG stacks).
fn key(frame: &[u8]) -> (u32, u64) {
    let sig = dissect::find_signature(frame).or_else(|| dissect::locate(frame, Site::End));
    sig.map(|s| (s.flow_id, s.seq)).unwrap_or((u32::MAX, 0))
}

impl TxQueue for FaultyTx {
    fn send_held(
        &mut self,
        count: usize,
        fill: &mut dyn FnMut(&mut [u8], &mut u64) -> usize,
    ) -> Result<usize, PortError> {
        if self.cfg.stall_every > 0 && count > 0 && self.stats.frames >= self.next_stall {
            std::thread::sleep(std::time::Duration::from_nanos(self.cfg.stall_ns));
            self.next_stall += self.cfg.stall_every;
            self.log.lock().unwrap_or_else(|e| e.into_inner()).stalls += 1;
        }
        self.now_ns = crate::clock::now_ns();
        for _ in 0..count {
            let n = fill(&mut self.scratch, &mut 0);
            self.stats.frames += 1;
            self.stats.bytes += n as u64;
            let f = self.scratch[..n].to_vec();
            let k = key(&f);
            let r = self.rng.next_f64();
            let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
            if r < self.cfg.drop {
                log.dropped.push(k);
            } else if r < self.cfg.drop + self.cfg.duplicate {
                log.duplicated.push(k);
                drop(log);
                self.push_out(f.clone());
                self.push_out(f);
            } else if r < self.cfg.drop + self.cfg.duplicate + self.cfg.reorder && self.cfg.reorder_distance > 0 {
                log.held.push(k);
                drop(log);
                self.held.push((f, self.cfg.reorder_distance));
            } else {
                log.passed += 1;
                drop(log);
                self.push_out(f);
            }
        }
        self.pump()?;
        Ok(count)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.now_ns = crate::clock::now_ns();
        // Release held frames at the end (they are late but not lost).
        let held: Vec<_> = self.held.drain(..).map(|(f, _)| f).collect();
        for f in held {
            self.emit(f);
        }
        self.pump()?;
        self.inner.flush()
    }

    fn idle(&mut self) -> bool {
        self.pending.is_empty() && self.held.is_empty() && self.inner.idle()
    }

    fn stats(&self) -> TxQueueStats {
        self.stats
    }
}
