//! One policy for pinning a worker thread to its CPU, for every kind of worker (a trial's TX and
//! RX workers, a listen's, a capture's, the forwarder's, the generator's).
//!
//! A worker asks for its CPU as it starts. One the kernel refuses (a CPU outside the cpuset the
//! process may use, one taken offline, a sandbox that forbids `sched_setaffinity`) still runs,
//! where the scheduler puts it — stopping a trial for it would be worse than measuring — but the
//! failure is never ignored: it is collected in a [`PinLog`] and recorded in the result the
//! workers produce (`pin_failures`), where Python flags the run that asked for pinning and did
//! not get it.
//!
//! A [`PinLog`] may also tell a [`WorkerSink`] of each worker as it starts (its thread id): the
//! platform's stall watch follows the tester's own workers so, and names what kept them from
//! their CPU (`stalls`).
use std::sync::{Arc, Mutex, OnceLock};

use crate::sys::cpu;

/// Scheduler slice TX workers ask for (`sys::cpu::request_short_slices`; the kernel's minimum).
const TX_SLICE_NS: u64 = 100_000;

/// What a TX worker asks of its own thread as it starts: wake on time (no timer slack), an
/// ordinary thread, and short slices, so a CPU hog sharing its CPU does not delay the wake-up
/// (smooth pacing does not get late time back). Best effort: a refusal leaves the defaults.
pub(crate) fn for_sending() {
    let _ = cpu::set_timer_slack_ns(1);
    let _ = cpu::normal_priority();
    let _ = cpu::request_short_slices(TX_SLICE_NS);
}

/// The CPU of the `i`th worker: the `i`th of `list` (round robin), or with an empty list one
/// of the upper half of the online CPUs (`from_top`: senders) or of the lower half (receivers).
pub(crate) fn pick_cpu(list: &[usize], i: usize, from_top: bool) -> usize {
    if !list.is_empty() {
        return list[i % list.len()];
    }
    // Receivers on the lower half of the CPUs, senders on the upper half, never mixed: a
    // receiver woken by every arriving frame would preempt a sender on its CPU, and smooth
    // pacing does not get that time back. One CPU: everything on it.
    let n = cpu::online_cpus();
    let rx_n = if n > 1 { n / 2 } else { 1 };
    if from_top {
        let tx_n = if n > 1 { n - rx_n } else { 1 };
        n - 1 - (i % tx_n)
    } else {
        i % rx_n
    }
}

/// The CPUs the senders run on, given `list` (their CPUs as configured; empty: the engine's
/// split, [`pick_cpu`]). On veth the receive work of a frame runs on the CPU that transmitted it,
/// and a control-plane daemon that transmits on a tester port from a receiver's CPU moves the
/// traffic's receive work there: such daemons belong on these CPUs.
pub fn sender_cpus(list: &[usize]) -> Vec<usize> {
    let n = if list.is_empty() { cpu::online_cpus() } else { list.len() };
    let mut cpus: Vec<usize> = (0..n).map(|i| pick_cpu(list, i, true)).collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// A worker that does not run on the CPU it asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinFailure {
    /// The worker's thread name (`netrig-tx0`, `netrig-listen1`, `nr-fwd-p0q0`, …).
    pub worker: String,
    /// The CPU it asked for.
    pub cpu: usize,
    /// Why not (the kernel's answer).
    pub error: String,
}

impl std::fmt::Display for PinFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} not pinned to CPU {}: {}", self.worker, self.cpu, self.error)
    }
}

/// Pin the calling thread, the worker named `worker`, to `cpu`; the failure when the kernel
/// refused (the thread then runs wherever the scheduler puts it).
pub fn pin_worker(worker: &str, cpu: usize) -> Result<(), PinFailure> {
    cpu::pin_current_thread(cpu).map_err(|e| PinFailure { worker: worker.to_string(), cpu, error: e.to_string() })
}

/// Told of each worker thread of a run as it starts, by its kernel thread id.
pub trait WorkerSink: Send + Sync {
    fn started(&self, worker: &str, tid: u32);
}

/// The pin failures of a set of workers, collected as each starts (shared by their threads), and
/// who is told of them starting.
#[derive(Default)]
pub struct PinLog(Mutex<Vec<PinFailure>>, OnceLock<Arc<dyn WorkerSink>>);

impl std::fmt::Debug for PinLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PinLog").field(&self.0).field(&self.1.get().is_some()).finish()
    }
}

impl PinLog {
    pub fn new() -> PinLog {
        PinLog::default()
    }

    /// Pin the calling thread (see [`pin_worker`]) and record a failure; whether it is pinned.
    pub fn pin(&self, worker: &str, cpu: usize) -> bool {
        match pin_worker(worker, cpu) {
            Ok(()) => true,
            Err(f) => {
                self.0.lock().unwrap_or_else(|e| e.into_inner()).push(f);
                false
            }
        }
    }

    /// Pin the calling thread by its own name (see [`PinLog::pin`]), and tell the sink, if any,
    /// that it started.
    pub fn pin_self(&self, cpu: usize) -> bool {
        let name = std::thread::current().name().unwrap_or("netrig-worker").to_string();
        if let Some(sink) = self.1.get() {
            sink.started(&name, cpu::current_tid());
        }
        self.pin(&name, cpu)
    }

    /// Start worker `name` in `scope`: it pins itself to `cpu` (a refusal recorded here), then
    /// runs `f`.
    pub(crate) fn spawn_scoped<'scope, T: Send + 'scope>(
        &'scope self,
        scope: &'scope std::thread::Scope<'scope, '_>,
        name: String,
        cpu: usize,
        f: impl FnOnce() -> T + Send + 'scope,
    ) -> std::thread::ScopedJoinHandle<'scope, T> {
        let spawned = std::thread::Builder::new().name(name.clone()).spawn_scoped(scope, move || {
            self.pin_self(cpu);
            f()
        });
        spawned.unwrap_or_else(|e| panic!("spawning {name}: {e}"))
    }

    /// Tell `sink` of every worker that starts from now on (the first sink set stays).
    pub fn tell(&self, sink: Arc<dyn WorkerSink>) {
        let _ = self.1.set(sink);
    }

    /// Every failure so far, once each (a worker started again — a trial's warm-up, then its
    /// run — fails again alike), by worker name.
    pub fn failures(&self) -> Vec<PinFailure> {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        v.sort_by(|a, b| (&a.worker, a.cpu).cmp(&(&b.worker, b.cpu)));
        v.dedup_by(|a, b| a.worker == b.worker && a.cpu == b.cpu);
        v
    }

    /// [`PinLog::failures`], and the log starts afresh (for the next run of the same workers).
    pub fn take(&self) -> Vec<PinFailure> {
        let v = self.failures();
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_senders_cpus_are_the_configured_ones_or_the_upper_half_never_a_receivers() {
        assert_eq!(sender_cpus(&[3, 1, 3]), vec![1, 3]);
        let n = cpu::online_cpus();
        let senders = sender_cpus(&[]);
        let receivers: Vec<usize> = (0..n).map(|i| pick_cpu(&[], i, false)).collect();
        assert_eq!(
            senders,
            (0..n)
                .map(|i| pick_cpu(&[], i, true))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
        );
        if n > 1 {
            assert!(senders.iter().all(|c| !receivers.contains(c)), "{senders:?} {receivers:?}");
        }
    }

    #[test]
    fn a_cpu_that_does_not_exist_is_a_recorded_failure_not_a_panic() {
        let log = PinLog::new();
        std::thread::scope(|s| {
            s.spawn(|| {
                assert!(!log.pin("netrig-test0", 100_000));
                assert!(!log.pin("netrig-test1", 1023));
            });
        });
        let f = log.failures();
        assert_eq!(f.len(), 2);
        assert_eq!((f[0].worker.as_str(), f[0].cpu), ("netrig-test0", 100_000));
        assert!(f[0].to_string().starts_with("netrig-test0 not pinned to CPU 100000: "), "{}", f[0]);
        assert_eq!(f[1].cpu, 1023);
    }

    #[derive(Default)]
    struct Seen(Mutex<Vec<(String, u32)>>);

    impl WorkerSink for Seen {
        fn started(&self, worker: &str, tid: u32) {
            self.0.lock().unwrap().push((worker.to_string(), tid));
        }
    }

    #[test]
    fn a_sink_is_told_of_each_worker_by_name_and_thread_id() {
        let (log, seen) = (PinLog::new(), Arc::new(Seen::default()));
        log.tell(seen.clone());
        let tid = std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("netrig-tx7".into())
                .spawn_scoped(s, || {
                    log.pin_self(0);
                    cpu::current_tid()
                })
                .unwrap()
                .join()
                .unwrap()
        });
        assert_eq!(*seen.0.lock().unwrap(), vec![("netrig-tx7".to_string(), tid)]);
        assert_ne!(tid, cpu::current_tid());
    }
}
