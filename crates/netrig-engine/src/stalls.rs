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

use crate::error::ConfigError;
pub use crate::sys::stalls::{RawEpisode, StallKind};
use crate::sys::stalls::{StallProbe, RING};

/// How often the drainer reads the kernel's ring: far below the time the ring takes to fill at the
/// highest episode rates seen here (tens per second and CPU).
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

struct Shared {
    probe: StallProbe,
    history: Mutex<History>,
}

impl Shared {
    fn drain(&self) -> std::io::Result<()> {
        let mut h = self.history.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = h.next;
        let (new, lost) = self.probe.read(&mut next)?;
        h.next = next;
        h.lost += lost;
        for e in new {
            if h.episodes.len() == HISTORY {
                h.episodes.pop_front();
                h.lost += 1;
            }
            h.episodes.push_back(e);
        }
        Ok(())
    }
}

/// Starting a watch failed.
#[derive(Debug, thiserror::Error)]
pub enum StallError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The kernel refused a map, a program or a perf event (no BPF, no perf events, not root).
    #[error("the stall watch: {0}")]
    Probe(String),
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
    pub fn start(config: StallConfig) -> Result<StallWatch, StallError> {
        config.validate()?;
        let probe = StallProbe::open(&config.cpus, config.period_ns, config.threshold_ns)
            .map_err(|e| StallError::Probe(e.to_string()))?;
        let shared =
            Arc::new(Shared { probe, history: Mutex::new(History { episodes: VecDeque::new(), lost: 0, next: 0 }) });
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (shared.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("netrig-stalls".into())
            .spawn(move || {
                while !st.load(Ordering::Relaxed) {
                    std::thread::sleep(DRAIN_EVERY);
                    let _ = s.drain(); // a failed read is retried; the ring keeps RING episodes
                }
            })
            .map_err(|e| StallError::Probe(format!("its thread: {e}")))?;
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

    /// Whether task waits are recorded (tracefs readable), besides the CPUs' ticks.
    pub fn tasks_watched(&self) -> bool {
        self.shared.probe.tasks_watched
    }

    /// The episodes that overlap `[from_ns, to_ns]` (`CLOCK_MONOTONIC`), in order of start, and
    /// how many episodes were lost so far (overwritten before they were read).
    pub fn episodes(&self, from_ns: u64, to_ns: u64) -> std::io::Result<(Vec<RawEpisode>, u64)> {
        self.shared.drain()?;
        let h = self.shared.history.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<RawEpisode> =
            h.episodes.iter().filter(|e| e.start_ns <= to_ns && e.start_ns + e.len_ns >= from_ns).cloned().collect();
        out.sort_by_key(|e| e.start_ns);
        Ok((out, h.lost))
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
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_out_of_range_names_its_field() {
        let ok = StallConfig { cpus: vec![0], period_ns: 1_000_000, threshold_ns: 1_000_000 };
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
