//! Helpers shared by the engine's loopback tests (`mod common;` in each test file).
#![allow(dead_code)]
use std::sync::{Arc, Mutex, MutexGuard};

use netrig_engine::fault::{FaultConfig, FaultLog};
use netrig_engine::loopback;
use netrig_engine::Port;

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
