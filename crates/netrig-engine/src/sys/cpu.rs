//! CPU affinity and CPU counts.
use std::io;

/// Pin the calling thread to `cpu` (one beyond what a `cpu_set_t` holds: `EINVAL`, as the kernel
/// answers for a CPU that does not exist).
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is plain data and `cpu` is within it; sched_setaffinity(0) applies to the
    // calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Let the calling thread's timed sleeps end within `ns` of their deadline (Linux's default
/// "timer slack" lets them run up to 50 µs late, which a paced sender would lose at every frame).
pub fn set_timer_slack_ns(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and applies to the calling thread only.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `struct sched_attr` of `sched_setattr(2)` (the fields this module sets; the kernel accepts
/// this size, `SCHED_ATTR_SIZE_VER1`).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

/// Ask the scheduler for short time slices for the calling thread (`SCHED_OTHER`, same nice, same
/// share of the CPU): with EEVDF (Linux 6.12+) a thread with a short slice preempts a CPU hog as
/// soon as it wakes instead of waiting for the hog's slice to end. A paced sender that sleeps
/// between frames then wakes on time next to a compiler. Older kernels ignore or refuse it.
pub fn request_short_slices(slice_ns: u64) -> io::Result<()> {
    let mut attr = SchedAttr { size: std::mem::size_of::<SchedAttr>() as u32, runtime: slice_ns, ..Default::default() };
    // SAFETY: attr is a valid, initialised sched_attr of the size given in it; pid 0 = this thread.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &mut attr as *mut SchedAttr, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Run the calling thread as an ordinary thread (`SCHED_OTHER`, nice 0): the tester's bookkeeping
/// threads run at `SCHED_IDLE` on the tester's CPUs (netrig.testbed.placement keep_off_dut) so
/// that they never keep a worker waiting, and workers inherit that from the thread that starts
/// them. Leaving `SCHED_IDLE` needs CAP_SYS_NICE; without it the worker keeps what it inherited.
pub fn normal_priority() -> io::Result<()> {
    let mut attr = SchedAttr { size: std::mem::size_of::<SchedAttr>() as u32, ..Default::default() };
    // SAFETY: attr is a valid, initialised sched_attr (SCHED_OTHER, nice 0) of the size given in
    // it; pid 0 = this thread.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &mut attr as *mut SchedAttr, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread at `SCHED_OTHER` while this lives, then back to `SCHED_IDLE` if it was
/// there: a run's setup (opening rings, which zeroes megabytes in the kernel) is bounded work done
/// before any worker of its own runs, but on a test bed shared with another run (the tester's
/// CPUs busy with that run's workers) a `SCHED_IDLE` setup waited for the other run to end:
/// measured, an 8-s trial started beside another stayed in setup for 6 s, until the other ended.
pub struct OrdinaryWhile {
    was_idle: bool,
}

impl OrdinaryWhile {
    pub fn enter() -> Self {
        // SAFETY: plain syscall wrapper; pid 0 = this thread.
        let was_idle = unsafe { libc::sched_getscheduler(0) } == libc::SCHED_IDLE && normal_priority().is_ok();
        OrdinaryWhile { was_idle }
    }
}

impl Drop for OrdinaryWhile {
    fn drop(&mut self) {
        if self.was_idle {
            let _ = idle_priority();
        }
    }
}

/// Run the calling thread at `SCHED_IDLE`: tester bookkeeping, which runs only when no ordinary
/// thread (a worker) wants its CPU.
pub(crate) fn idle_priority() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: param is a valid sched_param; pid 0 = this thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Let the calling thread run on any of `cpus` (nothing happens for an empty list).
pub fn pin_current_thread_to(cpus: &[u32]) -> io::Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    // SAFETY: set is a zero-initialised cpu_set_t; CPU_SET writes inside it for cpus below its size.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| (c as usize) < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c as usize, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The CPUs the calling thread may run on (its affinity mask; empty when it cannot be read).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: set is a zero-initialised cpu_set_t the kernel fills; its size is given.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is writable for the size given; pid 0 = this thread.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET reads inside set for CPUs below its size.
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

/// The calling thread's id (what `/proc/PID/task/` lists, and the scheduler's events name).
pub fn current_tid() -> u32 {
    // SAFETY: plain syscall without arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Run the calling thread at `SCHED_FIFO` with `priority` (1-99; needs CAP_SYS_NICE): a real-time
/// task that takes its CPU from every ordinary one, as the stall tests inject.
pub fn realtime_priority(priority: i32) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: param is a valid sched_param; pid 0 = this thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Number of online CPUs on the machine, whatever CPUs the calling thread may run on: a process
/// started under `taskset -c 0`, or a thread an earlier run pinned, still places workers on every
/// CPU (`std::thread::available_parallelism` counts the caller's affinity mask: an external test
/// bed's `tx_cpus = [1]` was refused with "CPU 1 does not exist (this machine has CPUs 0-0)").
pub fn online_cpus() -> usize {
    // SAFETY: plain libc call without pointers.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    }
}

/// Make every later `sched_setaffinity` of the calling thread, and of the threads it starts, fail
/// with `EPERM` (a seccomp filter, as a sandbox that forbids changing affinity installs): tests
/// of what the engine does with a worker it cannot pin.
#[cfg(test)]
pub fn forbid_affinity_changes() -> io::Result<()> {
    use libc::{sock_filter, sock_fprog, BPF_ABS, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W};
    let stmt = |code: u32, k: u32| sock_filter { code: code as u16, jt: 0, jf: 0, k };
    let filter = [
        // Load the syscall number (offset 0 of seccomp_data).
        stmt(BPF_LD | BPF_W | BPF_ABS, 0),
        sock_filter { code: (BPF_JMP | BPF_JEQ | BPF_K) as u16, jt: 0, jf: 1, k: libc::SYS_sched_setaffinity as u32 },
        stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut sock_filter };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integers; PR_SET_SECCOMP reads `prog`, valid and alive for
    // the call (the kernel copies the filter), and applies to the calling thread only.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog as *const sock_fprog) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod online_tests {
    use super::*;

    #[test]
    fn a_thread_pinned_to_one_cpu_still_sees_every_cpu() {
        let all = online_cpus();
        let seen = std::thread::spawn(move || {
            pin_current_thread(0).expect("pin to CPU 0");
            (online_cpus(), std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0))
        })
        .join()
        .expect("the pinned thread");
        assert_eq!(seen.0, all);
        assert_eq!(seen.1, 1, "the thread's own mask is one CPU: the case this guards");
    }
}
