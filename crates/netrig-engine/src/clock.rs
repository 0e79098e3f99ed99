//! The engine clock: `CLOCK_MONOTONIC` nanoseconds for pacing and for signature timestamps.
//!
//! Kernel receive timestamps (TPACKET_V3 `tp_sec/tp_nsec`, `SO_TIMESTAMPING` software stamps)
//! are `CLOCK_REALTIME`; [`RealtimeOffset`] converts them into this clock, measured once per
//! trial, so latency = rx (monotonic) - tx (monotonic).
use std::time::Duration;

use crate::sys::time::clock_ns;

/// Monotonic nanoseconds.
#[inline]
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Realtime nanoseconds since the Unix epoch.
#[inline]
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// `realtime - monotonic`, sampled tightly, to map kernel realtime stamps onto the engine clock.
#[derive(Debug, Clone, Copy)]
pub struct RealtimeOffset(pub i128);

impl RealtimeOffset {
    /// The tightest of several samples (the smallest monotonic window around the realtime read):
    /// one sample read across a vCPU stall would be off by the stall, milliseconds here.
    pub fn measure() -> Self {
        const TIGHT_NS: u64 = 2_000;
        let mut best = (u64::MAX, 0i128);
        for i in 0..64 {
            let a = now_ns();
            let r = realtime_ns();
            let b = now_ns();
            if b - a < best.0 {
                best = (b - a, r as i128 - ((a as i128 + b as i128) / 2));
            }
            if i >= 4 && best.0 <= TIGHT_NS {
                break;
            }
        }
        RealtimeOffset(best.1)
    }

    /// Convert a realtime stamp to engine-clock nanoseconds.
    #[inline]
    pub fn to_mono(self, realtime_ns: u64) -> u64 {
        (realtime_ns as i128 - self.0).max(0) as u64
    }
}

/// A [`RealtimeOffset`] kept fresh: measured again once it is a second old (the realtime clock,
/// in which the kernel stamps received frames, may be stepped or slewed meanwhile).
#[derive(Debug, Clone, Copy)]
pub struct FreshOffset {
    offset: RealtimeOffset,
    at_ns: u64,
}

impl FreshOffset {
    pub fn new() -> Self {
        FreshOffset { offset: RealtimeOffset::measure(), at_ns: now_ns() }
    }

    /// The offset at engine time `now`, measured again if it is older than a second.
    pub fn at(&mut self, now: u64) -> RealtimeOffset {
        if now.saturating_sub(self.at_ns) > 1_000_000_000 {
            *self = FreshOffset { offset: RealtimeOffset::measure(), at_ns: now };
        }
        self.offset
    }
}

impl Default for FreshOffset {
    fn default() -> Self {
        Self::new()
    }
}

/// Sleep until monotonic `deadline_ns`: sleeps coarsely, then spins the last stretch.
pub fn sleep_until(deadline_ns: u64) {
    const SPIN_NS: u64 = 60_000;
    loop {
        let now = now_ns();
        if now >= deadline_ns {
            return;
        }
        let left = deadline_ns - now;
        if left > SPIN_NS {
            std::thread::sleep(Duration::from_nanos(left - SPIN_NS));
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_offset() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a);
        let off = RealtimeOffset::measure();
        let mono = now_ns();
        let back = off.to_mono(realtime_ns());
        assert!(back.abs_diff(mono) < 5_000_000, "offset conversion off by {} ns", back.abs_diff(mono));
    }

    #[test]
    fn sleep_until_is_not_early() {
        let d = now_ns() + 2_000_000;
        sleep_until(d);
        assert!(now_ns() >= d);
    }
}
