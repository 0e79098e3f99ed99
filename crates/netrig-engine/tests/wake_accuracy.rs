//! How late a TX worker wakes from a timed wait: `thread::sleep` (the trial's `Waker`) against
//! `thread::park_timeout` (the generator's worker, which commands must also wake), for the
//! waits a paced worker makes (docs/pipeline.md, open question 5). The two are interleaved, one
//! wait of each per round, so the machine's noise falls on both alike, with the timer slack the
//! workers set (1 ns; `WORKER_SLACK=0` keeps Linux's default 50 µs, to see what the slack costs).
//! A third series measures how soon an `unpark` from another thread ends a long `park_timeout`
//! (a command's latency).
//!
//! A measurement, not a check: `taskset -c 1 cargo test -p netrig-engine --release --test
//! wake_accuracy -- --ignored --nocapture` on a quiet machine.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use netrig_engine::sys::cpu;

/// Waits per primitive and length.
const ROUNDS: usize = 2000;

fn percentiles(mut v: Vec<u64>) -> (u64, u64, u64, u64) {
    v.sort_unstable();
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.99), at(0.999), v[v.len() - 1])
}

fn show(what: &str, wait_us: u64, late_ns: Vec<u64>) {
    let (p50, p99, p999, max) = percentiles(late_ns);
    let us = |ns: u64| ns as f64 / 1e3;
    println!(
        "{what:<12} {wait_us:>5} us: late p50 {:>7.1} us  p99 {:>8.1} us  p99.9 {:>8.1} us  max {:>8.1} us",
        us(p50),
        us(p99),
        us(p999),
        us(max)
    );
}

/// Lateness of one wait of `d` by `wait`, ns.
fn late(d: Duration, wait: impl Fn(Duration)) -> u64 {
    let t0 = Instant::now();
    wait(d);
    (t0.elapsed().saturating_sub(d)).as_nanos() as u64
}

#[test]
#[ignore = "timing measurement: run explicitly in release, pinned"]
fn sleep_and_park_timeout_wake_as_late() {
    if std::env::var("WORKER_SLACK").as_deref() != Ok("0") {
        cpu::set_timer_slack_ns(1).expect("timer slack");
    }
    for wait_us in [30u64, 100, 300, 1000, 5000] {
        let d = Duration::from_micros(wait_us);
        let (mut sleep, mut park) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
        let rounds = if wait_us >= 1000 { ROUNDS / 4 } else { ROUNDS };
        for _ in 0..rounds {
            sleep.push(late(d, thread::sleep));
            park.push(late(d, thread::park_timeout));
        }
        show("sleep", wait_us, sleep);
        show("park_timeout", wait_us, park);
    }
}

#[test]
#[ignore = "timing measurement: run explicitly in release, pinned"]
fn unpark_ends_a_long_park_at_once() {
    let sent = Arc::new(AtomicU64::new(0));
    let epoch = Instant::now();
    let waiter = {
        let sent = sent.clone();
        thread::spawn(move || {
            cpu::set_timer_slack_ns(1).expect("timer slack");
            let mut lat = Vec::with_capacity(ROUNDS / 4);
            while lat.len() < ROUNDS / 4 {
                thread::park_timeout(Duration::from_millis(100));
                let at = sent.swap(0, Ordering::Acquire);
                if at > 0 {
                    lat.push((epoch.elapsed().as_nanos() as u64).saturating_sub(at));
                }
            }
            lat
        })
    };
    for _ in 0..ROUNDS / 4 {
        thread::sleep(Duration::from_micros(700));
        sent.store(epoch.elapsed().as_nanos() as u64, Ordering::Release);
        waiter.thread().unpark();
    }
    // The waiter may still wait for the last ones: wake it until it is done.
    while !waiter.is_finished() {
        thread::sleep(Duration::from_micros(700));
        sent.store(epoch.elapsed().as_nanos() as u64, Ordering::Release);
        waiter.thread().unpark();
    }
    show("unpark", 0, waiter.join().unwrap());
}
