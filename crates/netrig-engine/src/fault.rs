//! A seeded fault injector between a TX worker and its queue: drops, duplicates, reorders and
//! delays frames, stalls the worker (as a descheduled sender would be), and logs exactly what it
//! did — and when each frame left — so tests can compare the engine's counts with the truth.
//!
//! One draw per frame picks its fate: drop, duplicate, hold back for a number of frames
//! (reorder; released early only once no frame has come in for 20 ms), hold back for a time (a
//! delay class), or pass. A delayed frame leaves at the first `send` or `flush` at or after its
//! time (the owner calls `flush` while `idle` is false: a trial's TX worker every 100 µs as it
//! drains, the forwarder every millisecond), so its latency is the class's delay plus at most
//! that; frames it overtakes make it reordered.
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
    /// Delay classes: a frame is held back `ns` with probability `p` (each class its own share).
    pub delays: Vec<Delay>,
    /// Block the worker for `stall_ns` inside `send` every `stall_every` frames (0: never).
    pub stall_every: u64,
    pub stall_ns: u64,
    /// Log when every frame went on to the inner queue (`FaultLog::departures`).
    pub record_departures: bool,
}

/// A delay class of [`FaultConfig::delays`]: probability `p` per frame, held `ns`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Delay {
    pub p: f64,
    pub ns: u64,
}

/// Longest delay a class may give (a minute is a trial's longest drain; ten seconds test any late
/// threshold a test needs).
pub const MAX_DELAY_NS: u64 = 10_000_000_000;

impl FaultConfig {
    /// Probabilities within 0..1 that add up to at most 1, a distance for reordering, delays of
    /// 1 ns..10 s. Field: `faults`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut named = vec![("drop", self.drop), ("duplicate", self.duplicate), ("reorder", self.reorder)];
        named.extend(self.delays.iter().map(|d| ("delay", d.p)));
        if let Some((k, v)) = named.iter().find(|(_, v)| !(0.0..=1.0).contains(v)) {
            return Err(ConfigError::new("faults", format!("{k}={v} is not a probability: give 0..1")));
        }
        let sum: f64 = named.iter().map(|x| x.1).sum();
        if sum > 1.0 {
            return Err(ConfigError::new("faults", format!("drop + duplicate + reorder + delays is {sum}: at most 1")));
        }
        if let Some(d) = self.delays.iter().find(|d| !(1..=MAX_DELAY_NS).contains(&d.ns)) {
            let ms = d.ns as f64 / 1e6;
            return Err(ConfigError::new("faults", format!("a delay of {ms} ms: give more than 0 and at most 10 s")));
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
            delays: Vec::new(),
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
    /// Frames held back per delay class (as [`FaultConfig::delays`]).
    pub delayed: Vec<Vec<(u32, u64)>>,
    /// Highest sequence put on the wire per flow.
    pub max_emitted: std::collections::HashMap<u32, u64>,
    /// Engine-clock time each frame went on to the inner queue (with `record_departures`).
    pub departures: Vec<u64>,
    /// Stalls injected.
    pub stalls: u64,
}

/// How many frames the injector passed, dropped, duplicated, held back, sent reordered, and
/// delayed per class.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultCounts {
    pub passed: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub held: u64,
    pub reordered: u64,
    pub delayed: Vec<u64>,
}

impl FaultLog {
    pub fn counts(&self) -> FaultCounts {
        FaultCounts {
            passed: self.passed,
            dropped: self.dropped.len() as u64,
            duplicated: self.duplicated.len() as u64,
            held: self.held.len() as u64,
            reordered: self.reordered.len() as u64,
            delayed: self.delayed.iter().map(|d| d.len() as u64).collect(),
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
    /// Per delay class, frames held back with the time each is due (in order: one delay a class).
    delayed: Vec<VecDeque<(Vec<u8>, u64)>>,
    stats: TxQueueStats,
    /// Frame count at which the next stall happens.
    next_stall: u64,
    /// Time stamped on frames emitted by the current `send`.
    now_ns: u64,
    /// When the last frame came in (0: none yet).
    last_in_ns: u64,
}

/// How long no frame must have come in before `flush` releases the frames held for reordering (so
/// a pause in the stream, a stall of either side, never releases one before the frames it waits
/// for).
const QUIET_NS: u64 = 20_000_000;

impl FaultyTx {
    pub fn new(inner: Box<dyn TxQueue>, cfg: FaultConfig, log: Arc<Mutex<FaultLog>>) -> Self {
        let mut g = log.lock().unwrap_or_else(|e| e.into_inner());
        let classes = g.delayed.len().max(cfg.delays.len());
        g.delayed.resize_with(classes, Vec::new);
        drop(g);
        FaultyTx {
            inner,
            rng: XorShift::new(cfg.seed),
            log,
            scratch: vec![0; 9018],
            pending: VecDeque::new(),
            held: Vec::new(),
            delayed: cfg.delays.iter().map(|_| VecDeque::new()).collect(),
            stats: TxQueueStats::default(),
            next_stall: cfg.stall_every,
            now_ns: 0,
            last_in_ns: 0,
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

    /// Send on every delayed frame whose time has come, earliest first.
    fn release_due(&mut self) {
        loop {
            let due = self.delayed.iter().enumerate().filter_map(|(c, q)| q.front().map(|f| (f.1, c))).min();
            match due {
                Some((t, c)) if t <= self.now_ns => {
                    let (f, _) = self.delayed[c].pop_front().expect("a front was seen");
                    self.push_out(f);
                }
                _ => return,
            }
        }
    }

    /// The fate of the next frame from one draw: `Some(class)` of a delay, else what the
    /// probabilities before the delays say (`None`: pass, drop, duplicate or hold: see `send_held`).
    fn delay_class(&self, r: f64) -> Option<usize> {
        let mut edge = self.cfg.drop + self.cfg.duplicate + self.cfg.reorder;
        if r < edge {
            return None;
        }
        self.cfg.delays.iter().position(|d| {
            edge += d.p;
            r < edge
        })
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
        self.release_due();
        if count > 0 {
            self.last_in_ns = self.now_ns;
        }
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
            } else if let Some(c) = self.delay_class(r) {
                log.delayed[c].push(k);
                drop(log);
                self.delayed[c].push_back((f, self.now_ns + self.cfg.delays[c].ns));
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
        // Release frames held for reordering once the stream has ended (they are late but not
        // lost); delayed ones keep their time.
        if self.now_ns.saturating_sub(self.last_in_ns) >= QUIET_NS {
            let held: Vec<_> = self.held.drain(..).map(|(f, _)| f).collect();
            for f in held {
                self.emit(f);
            }
        }
        self.release_due();
        self.pump()?;
        self.inner.flush()
    }

    fn idle(&mut self) -> bool {
        self.pending.is_empty()
            && self.held.is_empty()
            && self.delayed.iter().all(|q| q.is_empty())
            && self.inner.idle()
    }

    fn stats(&self) -> TxQueueStats {
        self.stats
    }
}
