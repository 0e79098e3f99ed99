//! Clock reads (`clock_gettime`): the engine clock's source (`crate::clock`).

/// Nanoseconds of clock `id` (`CLOCK_MONOTONIC`, `CLOCK_REALTIME`).
#[inline]
pub fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec; the vDSO serves this without a syscall.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
