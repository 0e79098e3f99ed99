//! The platform's stalls over a run: the kernel's episodes (`sys::stalls`) drained by a thread
//! into a bounded history, read back per trial window.
//!
//! A `StallWatch` lives as long as a session (a test bed), not a trial: the programs cost the same
//! whether a trial runs or not, and a trial reads the episodes that overlap its own window. Which
//! CPUs are the DUT's and which tasks are its workers is the caller's to say; the watch records
//! what the kernel saw.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{ConfigError, EngineError};
pub use crate::sys::stalls::{RawEpisode, StallKind};
use crate::sys::stalls::{StallProbe, RING};
use crate::sys::wire_clock::{SlotCount, WireClock, SLOT_NS, SLOT_SHIFT};

/// How often the drainer reads the kernel's rings: far below the time the episode ring takes to
/// fill at the highest episode rates seen here (tens per second and CPU), and the 8.6 s the
/// wire's slot ring spans.
const DRAIN_EVERY: Duration = Duration::from_millis(250);
/// Episodes kept: hours of the worst stall rate measured on this VM.
const HISTORY: usize = 1 << 20;

/// What to watch, and how finely.
#[derive(Debug, Clone, PartialEq)]
pub struct StallConfig {
    /// CPUs whose timer ticks are watched (a gap is a stall of that CPU).
    pub cpus: Vec<u32>,
    /// Tick period, ns.
    pub period_ns: u64,
    /// A gap longer than the period by more than this, or a watched task's wait longer than this,
    /// is an episode, ns.
    pub threshold_ns: u64,
    /// Where the drainer thread may run (empty: where the caller may): off the DUT's CPUs, so the
    /// watch never takes the DUT's time.
    pub drain_cpus: Vec<u32>,
}

impl StallConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field: &str, reason: String| Err(ConfigError::new(field, reason));
        if self.cpus.is_empty() {
            return bad("cpus", "name at least one CPU to watch".into());
        }
        if !(100_000..=100_000_000).contains(&self.period_ns) {
            return bad("period", format!("{} ns: give 100 µs to 100 ms", self.period_ns));
        }
        if !(100_000..=1_000_000_000).contains(&self.threshold_ns) {
            return bad("threshold", format!("{} ns: give 100 µs to 1 s", self.threshold_ns));
        }
        Ok(())
    }
}

struct History {
    episodes: VecDeque<RawEpisode>,
    /// Episodes the kernel's ring overwrote before they were read, and those dropped from the
    /// front of a full history.
    lost: u64,
    next: u64,
}

/// log2 of the wire slots kept: 2^19 slots of 0.52 ms, 4.6 minutes.
const WIRE_HISTORY_SHIFT: u32 = 19;

/// The wire's slots over the last minutes: for each slot number's place in the ring, the slot it
/// holds and each CPU's counts (a CPU's entry in the kernel is replaced as it is read again, so a
/// slot still being counted is read whole in the end).
struct WireHistory {
    clock: WireClock,
    cpus: usize,
    slots: Vec<u64>,
    counts: Vec<[u64; 3]>,
    /// The slot the previous read ended at: the next reads from there (it may still have been
    /// counting).
    read_to: u64,
}

impl WireHistory {
    fn new(clock: WireClock) -> Self {
        let cpus = crate::sys::bpf::possible_cpus();
        let n = 1usize << WIRE_HISTORY_SHIFT;
        let now = crate::clock::now_ns() >> SLOT_SHIFT;
        WireHistory { clock, cpus, slots: vec![0; n], counts: vec![[0; 3]; n * cpus], read_to: now }
    }

    fn drain(&mut self) {
        let mask = (1usize << WIRE_HISTORY_SHIFT) - 1;
        let now = crate::clock::now_ns() >> SLOT_SHIFT;
        let from = self.read_to;
        self.read_to = now;
        for SlotCount { slot, cpu, arrived, dropped, taken } in self.clock.read(from, now) {
            let i = slot as usize & mask;
            if self.slots[i] != slot {
                if self.slots[i] > slot {
                    continue; // older than the history keeps
                }
                self.slots[i] = slot;
                self.counts[i * self.cpus..(i + 1) * self.cpus].fill([0; 3]);
            }
            self.counts[i * self.cpus + cpu as usize] = [arrived, dropped, taken];
        }
    }

    /// The slots that overlap `[from_ns, to_ns]`, every CPU summed; and whether the history still
    /// held all of them.
    fn between(&self, from_ns: u64, to_ns: u64) -> (Vec<WireSlot>, bool) {
        let mask = (1usize << WIRE_HISTORY_SHIFT) - 1;
        let (first, last) = (from_ns >> SLOT_SHIFT, to_ns >> SLOT_SHIFT);
        let newest = self.slots.iter().copied().max().unwrap_or(0);
        let complete = newest.saturating_sub(first) < (1u64 << WIRE_HISTORY_SHIFT);
        let mut out = Vec::new();
        for slot in first..=last {
            let i = slot as usize & mask;
            if self.slots[i] != slot {
                continue;
            }
            let mut sum = [0u64; 3];
            for c in &self.counts[i * self.cpus..(i + 1) * self.cpus] {
                (0..3).for_each(|k| sum[k] += c[k]);
            }
            out.push(WireSlot { start_ns: slot << SLOT_SHIFT, arrived: sum[0], dropped: sum[1], taken: sum[2] });
        }
        (out, complete)
    }
}

/// The wire's counts in one slot of `SLOT_NS`, over every watched ring and CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireSlot {
    pub start_ns: u64,
    /// Frames that arrived at a DUT receive ring.
    pub arrived: u64,
    /// Frames a full ring dropped.
    pub dropped: u64,
    /// Frames the DUT's CPUs took off their rings.
    pub taken: u64,
}

/// A slot's length, ns.
pub const WIRE_SLOT_NS: u64 = SLOT_NS;

struct Shared {
    probe: StallProbe,
    history: Mutex<History>,
    wire: Mutex<Option<WireHistory>>,
}

impl Shared {
    /// Read the kernel's rings (through their memory: nothing here can fail).
    fn drain(&self) {
        let mut h = self.history.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = h.next;
        let (new, lost) = self.probe.read(&mut next);
        h.next = next;
        h.lost += lost;
        for e in new {
            if h.episodes.len() == HISTORY {
                h.episodes.pop_front();
                h.lost += 1;
            }
            h.episodes.push_back(e);
        }
        drop(h);
        if let Some(w) = self.wire.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            w.drain();
        }
    }
}

/// The programs attached and a thread that drains their episodes; detached when dropped.
pub struct StallWatch {
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pub config: StallConfig,
}

impl StallWatch {
    /// Attach the probe to the configured CPUs and start draining it.
    pub fn start(config: StallConfig) -> Result<StallWatch, EngineError> {
        config.validate()?;
        let refused = |reason: String| EngineError::Capability { what: "the stall watch".into(), reason };
        let probe = StallProbe::open(&config.cpus, config.period_ns, config.threshold_ns)
            .map_err(|e| refused(e.to_string()))?;
        let shared = Arc::new(Shared {
            probe,
            history: Mutex::new(History { episodes: VecDeque::new(), lost: 0, next: 0 }),
            wire: Mutex::new(None),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (shared.clone(), stop.clone());
        let drain_cpus = config.drain_cpus.clone();
        let thread = std::thread::Builder::new()
            .name("netrig-stalls".into())
            .spawn(move || {
                // Ordinary priority (a bookkeeping thread's SCHED_IDLE would starve beside a spinning
                // worker and let the kernel's rings overflow); a drain takes ~0.1 ms every 250 ms.
                let _ = crate::sys::cpu::normal_priority();
                let _ = crate::sys::cpu::pin_current_thread_to(&drain_cpus);
                while !st.load(Ordering::Relaxed) {
                    // parked, not asleep: closing the watch unparks it (a sleep held every close
                    // up to DRAIN_EVERY, 0.25 s per run)
                    std::thread::park_timeout(DRAIN_EVERY);
                    s.drain();
                }
            })
            .map_err(|e| refused(format!("its thread: {e}")))?;
        Ok(StallWatch { shared, stop, thread: Some(thread), config })
    }

    /// Watch task `tid`: each wait to run longer than the threshold becomes an episode.
    pub fn watch(&self, tid: u32) -> std::io::Result<()> {
        self.shared.probe.watch(tid)
    }

    /// Stop watching `tid`.
    pub fn unwatch(&self, tid: u32) -> std::io::Result<()> {
        self.shared.probe.unwatch(tid)
    }

    /// Events the kernel skipped the watch's programs for since it started
    /// (`sys::stalls::StallProbe::missed`): a window's episodes may then be incomplete.
    pub fn missed(&self) -> u64 {
        self.shared.probe.missed()
    }

    /// Whether task waits are recorded (tracefs readable), besides the CPUs' ticks.
    pub fn tasks_watched(&self) -> bool {
        self.shared.probe.tasks_watched
    }

    /// Whether timers taken late are recorded (`Late` episodes: the kernel's BTF gave their layout).
    pub fn timers_late(&self) -> bool {
        self.shared.probe.timers_late
    }

    /// The episodes that overlap `[from_ns, to_ns]` (`CLOCK_MONOTONIC`), in order of start, and
    /// how many episodes were lost so far (overwritten before they were read).
    pub fn episodes(&self, from_ns: u64, to_ns: u64) -> std::io::Result<(Vec<RawEpisode>, u64)> {
        self.shared.drain();
        let h = self.shared.history.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<RawEpisode> =
            h.episodes.iter().filter(|e| e.start_ns <= to_ns && e.start_ns + e.len_ns >= from_ns).cloned().collect();
        out.sort_by_key(|e| e.start_ns);
        Ok((out, h.lost))
    }

    /// Count the wire whose ring map (CPUMAP) has id `map_id` in time slots (`sys::wire::cpumap_id`).
    pub fn watch_wire(&self, map_id: u32) -> std::io::Result<()> {
        let mut w = self.shared.wire.lock().unwrap_or_else(|p| p.into_inner());
        if w.is_none() {
            *w = Some(WireHistory::new(WireClock::open()?));
        }
        w.as_ref().expect("just set").clock.watch(map_id)
    }

    /// The watched wires' slots overlapping `[from_ns, to_ns]`, and whether every one of them was
    /// still held (the last 4.6 minutes are); None when no wire is watched.
    pub fn wire_slots(&self, from_ns: u64, to_ns: u64) -> std::io::Result<Option<(Vec<WireSlot>, bool)>> {
        self.shared.drain();
        let w = self.shared.wire.lock().unwrap_or_else(|p| p.into_inner());
        Ok(w.as_ref().map(|w| w.between(from_ns, to_ns)))
    }

    /// The size of the kernel's episode ring.
    pub fn ring(&self) -> usize {
        RING
    }
}

impl Drop for StallWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_out_of_range_names_its_field() {
        let ok = StallConfig { cpus: vec![0], period_ns: 1_000_000, threshold_ns: 1_000_000, drain_cpus: vec![] };
        assert!(ok.validate().is_ok());
        for (cfg, field) in [
            (StallConfig { cpus: vec![], ..ok.clone() }, "cpus"),
            (StallConfig { period_ns: 10, ..ok.clone() }, "period"),
            (StallConfig { threshold_ns: 5_000_000_000, ..ok.clone() }, "threshold"),
        ] {
            assert!(cfg.validate().unwrap_err().to_string().starts_with(field), "{field}");
        }
    }
}
