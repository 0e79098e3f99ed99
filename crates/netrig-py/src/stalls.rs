//! `_native.StallWatch`: the platform's stalls (`netrig_engine::stalls`) for a session.
use std::sync::{Arc, Mutex};

use netrig_engine::pin::WorkerSink;
use netrig_engine::stalls::{StallConfig, StallWatch as EngineWatch};
use netrig_engine::EngineError;
use pyo3::prelude::*;

use crate::args;
use crate::errors::Result;
use crate::results::{StallEpisode, WireSlot};

fn refused(e: std::io::Error) -> EngineError {
    EngineError::Capability { what: "the stall watch".into(), reason: e.to_string() }
}

/// Watch `cpus` for stalls: a tick every `period_s` on each, an episode for a gap longer than the
/// period by more than `threshold_s`, and for a watched task that waited longer than `threshold_s`;
/// the thread that reads the kernel's rings runs on `drain_cpus` (default: where the caller may).
/// Raises CapabilityError where the kernel refuses a BPF program or perf event (not root, no BPF).
/// Detached on `close()` or when collected.
#[pyclass(frozen, module = "netrig._native")]
pub struct StallWatch {
    inner: Arc<Mutex<Option<EngineWatch>>>,
    config: StallConfig,
}

/// A run's workers watched while they live: each is watched as it starts, and unwatched when the
/// run is over (its control, which holds this, dropped), so a session's trials never fill the
/// watch's task table. A watch closed meanwhile, or one that refuses, leaves them unwatched.
pub struct Workers {
    watch: Arc<Mutex<Option<EngineWatch>>>,
    tids: Mutex<Vec<u32>>,
}

impl WorkerSink for Workers {
    fn started(&self, _worker: &str, tid: u32) {
        if let Some(w) = self.watch.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            if w.watch(tid).is_ok() {
                self.tids.lock().unwrap_or_else(|p| p.into_inner()).push(tid);
            }
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        if let Some(w) = self.watch.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            for tid in self.tids.get_mut().unwrap_or_else(|p| p.into_inner()).drain(..) {
                let _ = w.unwatch(tid);
            }
        }
    }
}

impl StallWatch {
    /// A sink that watches a run's workers (`PinLog::tell`).
    pub fn workers(&self) -> Arc<Workers> {
        Arc::new(Workers { watch: self.inner.clone(), tids: Mutex::new(Vec::new()) })
    }

    fn with<T>(&self, f: impl FnOnce(&EngineWatch) -> std::io::Result<T>) -> Result<T> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let w = guard.as_ref().ok_or_else(|| crate::errors::config("stall_watch", "closed: open a new one"))?;
        Ok(f(w).map_err(refused)?)
    }
}

#[pymethods]
impl StallWatch {
    #[new]
    #[pyo3(signature = (cpus, period_s=None, threshold_s=None, drain_cpus=None))]
    fn new(
        py: Python<'_>,
        cpus: &Bound<'_, PyAny>,
        period_s: Option<&Bound<'_, PyAny>>,
        threshold_s: Option<&Bound<'_, PyAny>>,
        drain_cpus: Option<&Bound<'_, PyAny>>,
    ) -> Result<Self> {
        let ns = |v: f64| (v * 1e9).round() as u64;
        let config = StallConfig {
            cpus: args::req(cpus, "cpus")?,
            period_ns: ns(args::opt(period_s, "period_s", 0.001)?),
            threshold_ns: ns(args::opt(threshold_s, "threshold_s", 0.001)?),
            drain_cpus: args::opt(drain_cpus, "drain_cpus", Vec::new())?,
        };
        config.validate()?;
        let c = config.clone();
        let w = py.allow_threads(|| EngineWatch::start(c))?;
        Ok(StallWatch { inner: Arc::new(Mutex::new(Some(w))), config })
    }

    /// Watch task `tid` (a thread id): each wait to run longer than the threshold is an episode.
    fn watch(&self, tid: &Bound<'_, PyAny>) -> Result<()> {
        let tid: u32 = args::req(tid, "tid")?;
        self.with(|w| w.watch(tid))
    }

    /// Stop watching task `tid`.
    fn unwatch(&self, tid: &Bound<'_, PyAny>) -> Result<()> {
        let tid: u32 = args::req(tid, "tid")?;
        self.with(|w| w.unwatch(tid))
    }

    /// The episodes overlapping `[from_ns, to_ns]` (CLOCK_MONOTONIC), by start, and how many
    /// episodes were lost so far (the kernel's ring overwrote them before they were read).
    fn episodes(
        &self,
        py: Python<'_>,
        from_ns: &Bound<'_, PyAny>,
        to_ns: &Bound<'_, PyAny>,
    ) -> Result<(Vec<StallEpisode>, u64)> {
        let (a, b): (u64, u64) = (args::req(from_ns, "from_ns")?, args::req(to_ns, "to_ns")?);
        let (eps, lost) = py.allow_threads(|| self.with(|w| w.episodes(a, b)))?;
        Ok((eps.iter().map(StallEpisode::from).collect(), lost))
    }

    /// Events the kernel skipped the watch's programs for since it started (a wake-up, switch or
    /// tick on a CPU already in a BPF program or a BPF system call): a window's episodes may then
    /// be incomplete.
    fn missed(&self) -> Result<u64> {
        self.with(|w| Ok(w.missed()))
    }

    /// Count the wire whose ring map (CPUMAP) has id `map_id` in time slots (`wire_cpumap_id`).
    fn watch_wire(&self, map_id: &Bound<'_, PyAny>) -> Result<()> {
        let id: u32 = args::req(map_id, "map_id")?;
        self.with(|w| w.watch_wire(id))
    }

    /// The watched wires' slots overlapping `[from_ns, to_ns]` and whether all were still held (the
    /// last 4.6 minutes are), or None when no wire is watched.
    fn wire_slots(
        &self,
        py: Python<'_>,
        from_ns: &Bound<'_, PyAny>,
        to_ns: &Bound<'_, PyAny>,
    ) -> Result<Option<(Vec<WireSlot>, bool)>> {
        let (a, b): (u64, u64) = (args::req(from_ns, "from_ns")?, args::req(to_ns, "to_ns")?);
        let got = py.allow_threads(|| self.with(|w| w.wire_slots(a, b)))?;
        Ok(got.map(|(slots, complete)| (slots.iter().map(WireSlot::from).collect(), complete)))
    }

    /// Task waits are recorded too (the scheduler's tracepoints were readable), not only the CPUs' ticks.
    #[getter]
    fn tasks_watched(&self) -> Result<bool> {
        self.with(|w| Ok(w.tasks_watched()))
    }

    /// Timers a busy CPU took late are recorded too ("late" episodes: the kernel's BTF gave their layout).
    #[getter]
    fn timers_late(&self) -> Result<bool> {
        self.with(|w| Ok(w.timers_late()))
    }

    #[getter]
    fn cpus(&self) -> Vec<u32> {
        self.config.cpus.clone()
    }

    #[getter]
    fn period_ns(&self) -> u64 {
        self.config.period_ns
    }

    #[getter]
    fn threshold_ns(&self) -> u64 {
        self.config.threshold_ns
    }

    /// Detach the programs and stop draining (idempotent).
    fn close(&self, py: Python<'_>) {
        let w = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        py.allow_threads(|| drop(w));
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&self, py: Python<'_>, _a: PyObject, _b: PyObject, _c: PyObject) {
        self.close(py);
    }
}
