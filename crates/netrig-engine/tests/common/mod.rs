//! Helpers shared by the engine's loopback tests (`mod common;` in each test file).
#![allow(dead_code)]
use std::sync::{Arc, Mutex, MutexGuard};

use netrig_engine::fault::{FaultConfig, FaultLog};
use netrig_engine::loopback;
use netrig_engine::{Port, StreamConfig, TrialConfig};

/// Two in-process loopback ports; `faults` on the sending one, whose log is returned.
pub fn ports(faults: Option<FaultConfig>) -> (Vec<Box<dyn Port>>, Arc<Mutex<FaultLog>>) {
    let (mut a, b) = loopback::pair("lo-a", "lo-b");
    a.faults = faults;
    let log = a.fault_log.clone();
    (vec![Box::new(a), Box::new(b)], log)
}

/// The sender on its own CPU (the last) when there are two: sharing one with the receiver costs it
/// time at every wake-up, which smooth pacing does not recover (the trial would be stretched).
pub fn tx_cpu() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()) - 1
}

/// Trials of a test file run one at a time: the test harness runs tests in parallel, and paced
/// senders on one CPU would stall each other.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A trial of `stream` for tests that count frames. On a shared machine a paced run may be
/// stretched (smooth pacing sends every frame, later, when the sender loses CPU time): a generous
/// stretch tolerance keeps them about counting. Pacing itself is tested in `tests/pacing.rs`.
pub fn counting(stream: StreamConfig) -> TrialConfig {
    TrialConfig {
        streams: vec![stream],
        drain_ns: 100_000_000,
        tx_cpus: vec![tx_cpu()],
        rx_cpus: vec![0],
        max_stretch_ratio: 10.0,
        ..Default::default()
    }
}
