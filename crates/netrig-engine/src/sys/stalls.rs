//! The platform's stalls, seen by the kernel: episodes in which a CPU did not run at all, and in
//! which a watched task (a DUT's ring thread, a DUT process) was ready to run but did not.
//!
//! ```text
//!  cpu-clock perf event, one per watched CPU: an hrtimer every `period`
//!  hrtimer_expire_entry (raw tracepoint: any timer's expiry) ──▶ netrig_tick: on a watched CPU,
//!      gap since its last tick > period + threshold ──▶ episode "cpu": the CPU did not run (a host
//!      that stopped the vCPU; the guest's scheduler never sees it), [last tick, this tick];
//!      else this (hard) timer expiring later than threshold after its due time ──▶ episode "late":
//!      the CPU could not take the timer's interrupt, [due, now] (the timer's fields at offsets the
//!      kernel's BTF gives; none without BTF)
//!  cpu_idle (raw tracepoint) ──▶ netrig_idle: an idle CPU has no ticks to miss (its clock event
//!      may not fire at all): entering idle suspends the tick program, leaving it counts as a tick
//!  sched_waking, sched_wakeup / sched_switch tracepoints (every CPU) ──▶ netrig_wake / netrig_switch:
//!      a watched task woken (either event, whichever comes first after a switch-out), or switched
//!      out while still runnable, starts waiting (switched out asleep, it is not); switched in, it stops; a wait longer than threshold ──▶ episode "task": the guest gave the task's CPU
//!      to another task (named: the one that held the CPU longest meanwhile, from a table of each
//!      CPU's running task and longest hold the switch program keeps)
//!  every episode ──▶ one ARRAY value: a 64-byte header (the next record's index, taken with an
//!      atomic add) and RING records of 64 bytes; user space drains it (`read`)
//! ```
//!
//! The tick program costs one timer interrupt per CPU and period (its run time a few hundred ns);
//! the tracepoint programs run at every wake-up and context switch. Closing the probe closes the
//! perf events and raw tracepoint links, which detaches every program.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::sys::bpf::{self, Asm, Insn, Reg, Size, BPF_FUNC_MAP_LOOKUP_ELEM};
use crate::sys::bpf::{BPF_FUNC_GET_SMP_PROCESSOR_ID, BPF_FUNC_KTIME_GET_NS, BPF_FUNC_PROBE_READ_KERNEL};

/// Records the episode ring holds (a power of two).
pub const RING: usize = 1024;
const RECORD: usize = 64;
const HEADER: usize = 64;
const RING_BYTES: usize = HEADER + RING * RECORD;
/// Bytes of a watched task's state: when it began waiting (0: not waiting), at [`BY_PID`] the
/// thread id and at [`BY`] the name of the task that ran on its CPU when the wait began (the one
/// it waits for).
const TASK_STATE: usize = 32;
/// Where in a task's state the name of the task it waits for is, and its thread id.
const BY: i16 = 16;
const BY_PID: i16 = 8;
/// Bytes of a CPU's entry in the table of running tasks: the name of the task running there, at
/// [`CUR_AT`] when the last switch the switch program saw there was, at [`CUR_PID`] the task's
/// thread id; at [`CUR_PREV`] the name of the task that switch took the CPU from, at
/// [`CUR_PREV_PID`] its thread id; at [`CUR_MARK`] when a watched task last began waiting there,
/// and at [`MOST`], [`MOST_PID`], [`MOST_LEN`] the task that held the CPU longest since then (name,
/// thread id, ns: a hold counted from that mark at the earliest).
const CUR: u32 = 96;
const CUR_AT: i16 = 16;
const CUR_PID: i16 = 24;
const CUR_PREV: i16 = 32;
const CUR_PREV_PID: i16 = 48;
const CUR_MARK: i16 = 56;
const MOST: i16 = 64;
const MOST_PID: i16 = 80;
const MOST_LEN: i16 = 88;
/// Where on the programs' stack the thread id of the task an episode names is, beside its name at
/// -32 (`append` takes both).
const STACK_BY_PID: i16 = -48;
/// Where on the switch program's stack the task its CPU's last switch seen took the CPU from is
/// kept (its name, its thread id), read before this switch overwrites it.
const STACK_LAST_PREV: i16 = -64;
const STACK_LAST_PREV_PID: i16 = -68;
/// Bytes of a CPU's tick state: the last tick ns, the idle mark, the watched mark.
const LAST: u32 = 24;
const WATCHED_AT: i16 = 16;
/// CPUs the table of each CPU's running task holds (by CPU number).
const MAX_CPUS: u32 = 4096;
/// Tasks that can be watched at once.
pub const MAX_TASKS: u32 = 4096;

/// What an episode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StallKind {
    /// The CPU did not run: its timer tick came late (invisible to the guest's scheduler).
    Cpu,
    /// A watched task was ready to run and did not: the guest ran another task on its CPU.
    Task,
    /// A busy CPU took a timer's interrupt late (the host stopped the vCPU past the timer's due
    /// time): `start_ns` is when the timer was due, `len_ns` how late it was taken, both exact.
    Late,
}

/// One episode, as recorded by the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEpisode {
    pub kind: StallKind,
    /// `Cpu`: the last tick before the gap; `Task`: when the task began waiting. `CLOCK_MONOTONIC` ns.
    pub start_ns: u64,
    /// `Cpu`: the gap between two ticks (the stall is at most this, at least this less a period);
    /// `Task`: how long it waited, ns.
    pub len_ns: u64,
    pub cpu: u32,
    /// `Task`: the watched task; 0 for `Cpu`.
    pub pid: u32,
    /// `Task`: the task that held the CPU before the watched one ran again (`comm`), and its
    /// thread id.
    pub by: String,
    pub by_pid: u32,
    /// `Task`: that task was a thread of this process when the episode was read (within a drain
    /// period of it, 0.25 s): the tester's own work on the watched task's CPU.
    pub by_self: bool,
}

/// The loaded programs, their maps and perf events.
pub struct StallProbe {
    ring: bpf::MappedArray,
    tasks: OwnedFd,
    _attached: Attached,
    /// The tracepoint part is attached (tracefs readable): task episodes are recorded.
    pub tasks_watched: bool,
    /// Late timers are read (the kernel's BTF gave their layout): `Late` episodes are recorded.
    pub timers_late: bool,
}

/// Programs and what attaches them (perf events, raw tracepoint links); detached when dropped,
/// off the caller's path. Detaching a tracepoint's program waits for RCU grace periods under the kernel's
/// `event_mutex`: 64-84 ms per event here, one after another, so 0.22 s of every session's close
/// (strace). A thread of their own closes them; their maps live as long as the programs. If the
/// process ends first, the kernel closes them; if no thread can start, they close at once.
#[derive(Default)]
pub(crate) struct Attached {
    pub(crate) events: Vec<OwnedFd>,
    pub(crate) progs: Vec<OwnedFd>,
}

impl Drop for Attached {
    fn drop(&mut self) {
        let held = (std::mem::take(&mut self.events), std::mem::take(&mut self.progs));
        if held.0.is_empty() {
            return;
        }
        let _ = std::thread::Builder::new().name("netrig-detach".into()).spawn(move || drop(held));
    }
}

// perf_event_open(2)
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const PERF_SAMPLE_RAW: u64 = 1 << 10;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
const PERF_ATTR_SIZE: usize = 128;

fn perf_event_open(kind: u32, config: u64, period: u64, sample_type: u64, cpu: i32) -> io::Result<OwnedFd> {
    let mut attr = [0u8; PERF_ATTR_SIZE];
    attr[0..4].copy_from_slice(&kind.to_ne_bytes());
    attr[4..8].copy_from_slice(&(PERF_ATTR_SIZE as u32).to_ne_bytes());
    attr[8..16].copy_from_slice(&config.to_ne_bytes());
    attr[16..24].copy_from_slice(&period.to_ne_bytes());
    attr[24..32].copy_from_slice(&sample_type.to_ne_bytes());
    attr[40..48].copy_from_slice(&1u64.to_ne_bytes()); // disabled: enabled after the program is set
    attr[48..52].copy_from_slice(&1u32.to_ne_bytes()); // wakeup_events
                                                       // SAFETY: attr is a zero-padded perf_event_attr of the size it states; the kernel only reads it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            -1 as libc::pid_t,
            cpu,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd the kernel returned, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn enable(event: &OwnedFd) -> io::Result<()> {
    // SAFETY: the request takes an integer argument and touches no user memory.
    if unsafe { libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_ENABLE, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn attach(event: &OwnedFd, prog: &OwnedFd) -> io::Result<()> {
    for (what, req, arg) in [
        ("attaching the program", PERF_EVENT_IOC_SET_BPF, prog.as_raw_fd() as libc::c_ulong),
        ("enabling the event", PERF_EVENT_IOC_ENABLE, 0),
    ] {
        // SAFETY: both requests take an integer argument and touch no user memory.
        if unsafe { libc::ioctl(event.as_raw_fd(), req, arg) } < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
        }
    }
    Ok(())
}

/// `e` with what was being done.
pub(crate) fn ctx(what: &str) -> impl Fn(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// A tracepoint's id and the offsets of the named fields, from its `format` file.
fn tracepoint(dir: &std::path::Path, event: &str, fields: &[&str]) -> io::Result<(u64, Vec<i16>)> {
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, format!("tracepoint {event}: {what}"));
    let id =
        std::fs::read_to_string(dir.join(event).join("id"))?.trim().parse::<u64>().map_err(|e| bad(e.to_string()))?;
    let format = std::fs::read_to_string(dir.join(event).join("format"))?;
    let offset = |name: &str| {
        format.lines().find_map(|l| {
            let decl = l.split(';').next()?;
            let named = decl.trim_end().ends_with(&format!(" {name}")) || decl.contains(&format!(" {name}["));
            let off = l.split("offset:").nth(1)?.split(';').next()?.trim().parse::<i16>().ok()?;
            named.then_some(off)
        })
    };
    let offs =
        fields.iter().map(|f| offset(f).ok_or_else(|| bad(format!("no field {f}")))).collect::<Result<_, _>>()?;
    Ok((id, offs))
}

/// `R0 = &ring` or jump to `out`: a lookup of key 0, with the key at `[R10 - 4]`.
fn lookup0(a: &mut Asm, map: RawFd, out: &'static str) {
    a.store_imm(Size::W, Reg::R10, -4, 0)
        .mov_reg(Reg::R2, Reg::R10)
        .add_imm(Reg::R2, -4)
        .load_map_fd(Reg::R1, map)
        .call(BPF_FUNC_MAP_LOOKUP_ELEM)
        .jeq_imm(Reg::R0, 0, out);
}

/// Append a record: `start` in R8, `len` in R9, the CPU at `[R10 - 12]`, the pid at `[R10 - 8]`;
/// `comm` the two u64 loads of the name (or none), the named task's thread id then at
/// [`STACK_BY_PID`]. Clobbers R0-R5.
fn append(a: &mut Asm, ring: RawFd, kind: u32, comm: Option<(Reg, i16)>, out: &'static str) {
    use Reg::*;
    lookup0(a, ring, out);
    a.mov_imm(R1, 1)
        .atomic_fetch_add(R0, 0, R1)
        .mov_reg(R2, R1)
        .and_imm(R2, (RING - 1) as i32)
        .lsh_imm(R2, RECORD.trailing_zeros() as i32)
        .mov_reg(R3, R0)
        .add_reg(R3, R2);
    let h = HEADER as i16;
    a.store(Size::DW, R3, h + 8, R8).store(Size::DW, R3, h + 16, R9);
    a.load(Size::W, R4, R10, -12).store(Size::W, R3, h + 24, R4);
    a.store_imm(Size::W, R3, h + 28, kind as i32);
    a.load(Size::W, R4, R10, -8).store(Size::W, R3, h + 32, R4);
    match comm {
        Some((ctx, off)) => {
            a.load(Size::DW, R4, ctx, off).store(Size::DW, R3, h + 40, R4);
            a.load(Size::DW, R4, ctx, off + 8).store(Size::DW, R3, h + 48, R4);
            a.load(Size::W, R4, R10, STACK_BY_PID).store(Size::W, R3, h + 56, R4);
        }
        None => {
            a.store_imm(Size::DW, R3, h + 40, 0).store_imm(Size::DW, R3, h + 48, 0);
            a.store_imm(Size::W, R3, h + 56, 0);
        }
    }
    a.add_imm(R1, 1).store(Size::DW, R3, h, R1); // the record's sequence, written last
}

/// What an episode record's kind word says.
const KIND_CPU: u32 = 0;
const KIND_TASK: u32 = 1;
const KIND_LATE: u32 = 2;

/// Where a `struct hrtimer`'s due time (`node.expires`, 8 bytes) and its `is_soft` flag (1 byte)
/// are, from the running kernel's BTF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerLayout {
    pub expires: i16,
    pub is_soft: i16,
}

impl TimerLayout {
    /// The running kernel's, or None where its BTF cannot say (no lateness is then read).
    pub fn of_kernel() -> Option<TimerLayout> {
        let btf = crate::sys::btf::Btf::vmlinux().ok()?;
        let (expires, 8) = btf.offset_of("hrtimer", &["node", "expires"])? else { return None };
        let (is_soft, 1) = btf.offset_of("hrtimer", &["is_soft"])? else { return None };
        Some(TimerLayout { expires: i16::try_from(expires).ok()?, is_soft: i16::try_from(is_soft).ok()? })
    }
}

/// A timer taken later than this after its due time is not read as a late one: the clock of
/// another base (a `CLOCK_REALTIME` timer's), not a stop.
const LATE_MAX_NS: i32 = 2_000_000_000;

/// The tick program: on a watched CPU, a gap above `limit_ns` since its previous tick (or its
/// return from idle) is an episode; nothing while the CPU idles (an idle CPU's clock event may not fire: a
/// stall then shows as a late wake-up of the task that had work, `switch_program`). With `late`
/// (the timer's layout and a threshold), a hard timer taken later than the threshold after its due
/// time is an episode of its own ([`late_check`]): a busy CPU's stop shorter than the gap rule sees.
fn tick_program(last: RawFd, ring: RawFd, limit_ns: i32, late: Option<(TimerLayout, i32)>) -> Vec<Insn> {
    use Reg::*;
    let mut a = Asm::new();
    a.mov_reg(R6, R1).call(BPF_FUNC_KTIME_GET_NS).mov_reg(R7, R0);
    lookup0(&mut a, last, "out");
    a.load(Size::DW, R1, R0, WATCHED_AT).jeq_imm(R1, 0, "out");
    a.load(Size::DW, R1, R0, 8).jne_imm(R1, 0, "out");
    a.load(Size::DW, R8, R0, 0).store(Size::DW, R0, 0, R7).jeq_imm(R8, 0, "out");
    a.mov_reg(R9, R7).sub_reg(R9, R8).jle_imm(R9, limit_ns, "late");
    append_cpu(&mut a, ring, KIND_CPU);
    a.ja("out").label("late");
    if let Some((layout, late_ns)) = late {
        late_check(&mut a, layout, late_ns);
        append_cpu(&mut a, ring, KIND_LATE);
    }
    a.label("out").mov_imm(R0, 0).exit();
    a.finish()
}

/// Append a CPU's episode of `kind` (this CPU, no task), `start` in R8 and `len` in R9.
fn append_cpu(a: &mut Asm, ring: RawFd, kind: u32) {
    a.call(BPF_FUNC_GET_SMP_PROCESSOR_ID).store(Size::W, Reg::R10, -12, Reg::R0).store_imm(Size::W, Reg::R10, -8, 0);
    append(a, ring, kind, None, "out");
}

/// The timer of the raw tracepoint's context (in R6: `struct hrtimer *`, then `ktime_t *now`, the
/// time its expiry began in the timer's own clock) taken more than `late_ns` after its due time,
/// or jump to `out`: a soft timer (run from a softirq, late by the guest's own work) is not. Then
/// R8 = when it was due (the engine's clock: R7 less the lateness), R9 = the lateness.
fn late_check(a: &mut Asm, t: TimerLayout, late_ns: i32) {
    use Reg::*;
    let read = |a: &mut Asm, to: i16, len: i32, ctx_arg: i16, off: i16| {
        a.load(Size::DW, R3, R6, ctx_arg).add_imm(R3, off as i32);
        a.mov_reg(R1, R10).add_imm(R1, to as i32).mov_imm(R2, len);
        a.call(BPF_FUNC_PROBE_READ_KERNEL).jne_imm(R0, 0, "out");
    };
    a.store_imm(Size::DW, R10, -40, 0);
    read(a, -40, 1, 0, t.is_soft);
    a.load(Size::B, R1, R10, -40).jne_imm(R1, 0, "out");
    read(a, -24, 8, 0, t.expires);
    read(a, -32, 8, 8, 0);
    a.load(Size::DW, R9, R10, -32).load(Size::DW, R1, R10, -24).sub_reg(R9, R1);
    a.jle_imm(R9, late_ns, "out").mov_imm(R1, LATE_MAX_NS).jgt_reg(R9, R1, "out");
    a.mov_reg(R8, R7).sub_reg(R8, R9);
}

/// The idle program (`cpu_idle`, `state` at `state_off`: the raw tracepoint's first argument, an
/// unsigned int in a u64, its low half first on a little-endian CPU): entering idle marks the CPU
/// idle; leaving it (state `PWR_EVENT_EXIT`, -1) clears the mark and counts as a tick.
fn idle_program(last: RawFd, state_off: i16) -> Vec<Insn> {
    use Reg::*;
    let mut a = Asm::new();
    a.mov_reg(R6, R1).call(BPF_FUNC_KTIME_GET_NS).mov_reg(R7, R0);
    lookup0(&mut a, last, "out");
    // state + 1 overflows 32 bits only for PWR_EVENT_EXIT (u32 -1)
    a.load(Size::W, R1, R6, state_off).add_imm(R1, 1).rsh_imm(R1, 32).jne_imm(R1, 0, "exit");
    a.store_imm(Size::DW, R0, 8, 1).ja("out");
    a.label("exit").store_imm(Size::DW, R0, 8, 0).store(Size::DW, R0, 0, R7);
    a.label("out").mov_imm(R0, 0).exit();
    a.finish()
}

/// The wake-up program: a watched task woken (`pid` at `pid_off` of the context, its CPU at
/// `cpu_off`) starts waiting, for the task running on that CPU now (`cur`).
fn wake_program(tasks: RawFd, cur: RawFd, pid_off: i16, cpu_off: i16) -> Vec<Insn> {
    use Reg::*;
    let mut a = Asm::new();
    a.mov_reg(R6, R1).call(BPF_FUNC_KTIME_GET_NS).mov_reg(R7, R0);
    a.load(Size::W, R1, R6, pid_off).store(Size::W, R10, -4, R1);
    a.mov_reg(R2, R10).add_imm(R2, -4).load_map_fd(R1, tasks).call(BPF_FUNC_MAP_LOOKUP_ELEM).jeq_imm(R0, 0, "out");
    a.load(Size::DW, R1, R0, 0).jne_imm(R1, 0, "out").store(Size::DW, R0, 0, R7).mov_reg(R8, R0);
    a.load(Size::W, R1, R6, cpu_off).store(Size::W, R10, -8, R1);
    a.mov_reg(R2, R10).add_imm(R2, -8).load_map_fd(R1, cur).call(BPF_FUNC_MAP_LOOKUP_ELEM).jeq_imm(R0, 0, "out");
    a.load(Size::DW, R1, R0, 0).store(Size::DW, R8, BY, R1).load(Size::DW, R1, R0, 8).store(Size::DW, R8, BY + 8, R1);
    a.load(Size::W, R1, R0, CUR_PID).store(Size::W, R8, BY_PID, R1);
    restart_holds(&mut a);
    a.label("out").mov_imm(R0, 0).exit();
    a.finish()
}

/// Offsets in the `sched_switch` record: prev_comm, prev_pid, prev_state, next_comm, next_pid.
struct SwitchFields {
    prev_comm: i16,
    prev_pid: i16,
    prev_state: i16,
    next_comm: i16,
    next_pid: i16,
}

/// The context-switch program: it keeps each CPU's running task's name (`cur`); a watched task
/// switched out while runnable starts waiting, for the task switched in; one switched out asleep is
/// not waiting; one switched in stops, and a wait above `threshold_ns` is an episode naming the task
/// it waited for: the one that held its CPU longest since the wait began (each CPU's entry in
/// `cur` keeps it; a wake-up or a preemption of a watched task there restarts it). Before, the one
/// kept when the wait began named it: a 150-ms take was named after a kernel worker that ran for
/// microseconds before and after it, 1 run in 3 once `sched_wakeup` started waits; and before
/// 2026-12-03 the one switched out last: a 5-ms take after an ordinary task that ran between it
/// and the waiting task. The switch-out sets the task's state either way:
/// the kernel also reports a wake-up of a task still on its CPU (one that set itself to sleep and
/// was woken before it left: a DUT's ring thread under load gets thousands), and that start, kept
/// through the task's next sleep, made its next switch-in read as a wait as long as the sleep
/// (a 475-ms DUT stall ending at a trial's start).
///
/// Some switches never reach the tracepoint: here, those of a task of the host's outside the
/// guest's PID namespace (a `tokio-rt-worker` at nice -10, once a second; its switches in and out
/// are missing from ftrace too). A watched task switched in after it runs unseen, and its wait never
/// ends. So the program keeps each CPU's last switch it saw (`cur`, [`CUR_AT`]): a watched task
/// switched out while it was waiting since before that switch was switched in unseen after it, and
/// its wait up to that switch is an episode (a lower bound). One woken while it ran has no switch
/// on its CPU after the wake-up, and no wait. (A 50-ms take of a DUT ring thread's CPU that ended
/// with that task running went unreported: 1 trial in 15.)
fn switch_program(tasks: RawFd, ring: RawFd, cur: RawFd, f: &SwitchFields, threshold_ns: i32) -> Vec<Insn> {
    use Reg::*;
    let mut a = Asm::new();
    a.mov_reg(R6, R1).call(BPF_FUNC_KTIME_GET_NS).mov_reg(R7, R0);
    a.call(BPF_FUNC_GET_SMP_PROCESSOR_ID).store(Size::W, R10, -12, R0).store_imm(Size::DW, R10, -40, 0);
    a.store_imm(Size::DW, R10, STACK_LAST_PREV, 0).store_imm(Size::DW, R10, STACK_LAST_PREV + 8, 0);
    a.store_imm(Size::W, R10, STACK_LAST_PREV_PID, 0);
    cpu_entry(&mut a, cur, "prev");
    copy_name(&mut a, R10, STACK_LAST_PREV, R0, CUR_PREV);
    a.load(Size::W, R1, R0, CUR_PREV_PID).store(Size::W, R10, STACK_LAST_PREV_PID, R1);
    copy_name(&mut a, R0, CUR_PREV, R6, f.prev_comm);
    a.load(Size::W, R1, R6, f.prev_pid).store(Size::W, R0, CUR_PREV_PID, R1);
    longest_hold(&mut a, f);
    copy_name(&mut a, R0, 0, R6, f.next_comm);
    a.load(Size::W, R1, R6, f.next_pid).store(Size::W, R0, CUR_PID, R1);
    a.load(Size::DW, R1, R0, CUR_AT).store(Size::DW, R10, -40, R1).store(Size::DW, R0, CUR_AT, R7);
    a.label("prev").load(Size::W, R1, R6, f.prev_pid).store(Size::W, R10, -4, R1);
    a.mov_reg(R2, R10).add_imm(R2, -4).load_map_fd(R1, tasks).call(BPF_FUNC_MAP_LOOKUP_ELEM).jeq_imm(R0, 0, "next");
    unseen_switch_in(&mut a, tasks, ring, threshold_ns);
    // any state bit below TASK_REPORT_MAX (0x100, "preempted") means it went to sleep
    a.load(Size::DW, R1, R6, f.prev_state).and_imm(R1, 0xff).jne_imm(R1, 0, "asleep");
    a.store(Size::DW, R0, 0, R7);
    copy_name(&mut a, R0, BY, R6, f.next_comm);
    a.load(Size::W, R1, R6, f.next_pid).store(Size::W, R0, BY_PID, R1);
    cpu_entry(&mut a, cur, "next");
    restart_holds(&mut a);
    a.ja("next");
    a.label("asleep").store_imm(Size::DW, R0, 0, 0);
    a.label("next").load(Size::W, R1, R6, f.next_pid).store(Size::W, R10, -8, R1).store(Size::W, R10, -4, R1);
    a.mov_reg(R2, R10).add_imm(R2, -4).load_map_fd(R1, tasks).call(BPF_FUNC_MAP_LOOKUP_ELEM).jeq_imm(R0, 0, "out");
    a.load(Size::DW, R8, R0, 0).jeq_imm(R8, 0, "out").store_imm(Size::DW, R0, 0, 0);
    a.mov_reg(R9, R7).sub_reg(R9, R8).jle_imm(R9, threshold_ns, "out");
    // the name it waited for: the task that held its CPU longest since the wait began (this
    // switch's included), else the one kept
    name_waited_for(&mut a, R0, (R6, f.prev_comm, f.prev_pid), ["kept", "named"]);
    cpu_entry(&mut a, cur, "append");
    a.load(Size::DW, R1, R0, MOST_LEN).jeq_imm(R1, 0, "append");
    copy_name(&mut a, R10, -32, R0, MOST);
    a.load(Size::W, R1, R0, MOST_PID).store(Size::W, R10, STACK_BY_PID, R1);
    a.label("append");
    append(&mut a, ring, KIND_TASK, Some((R10, -32)), "out");
    a.label("out").mov_imm(R0, 0).exit();
    a.finish()
}

/// Within [`switch_program`], this CPU's entry in `cur` (its number at `[R10 - 12]`) in `R0`, or a
/// jump to `miss`.
fn cpu_entry(a: &mut Asm, cur: RawFd, miss: &'static str) {
    use Reg::*;
    a.mov_reg(R2, R10).add_imm(R2, -12).load_map_fd(R1, cur).call(BPF_FUNC_MAP_LOOKUP_ELEM).jeq_imm(R0, 0, miss);
}

/// A watched task began waiting on the CPU whose `cur` entry is in `R0` (at `R7`, now): its holds
/// count from now.
fn restart_holds(a: &mut Asm) {
    a.store(Size::DW, Reg::R0, CUR_MARK, Reg::R7).store_imm(Size::DW, Reg::R0, MOST_LEN, 0);
}

/// Within [`switch_program`], its CPU's entry in `R0` (before this switch is written): the task
/// switched out now held the CPU since the last switch seen there, or since the mark if later; the
/// longest such hold since the mark is kept (`MOST`). Clobbers R1-R3.
fn longest_hold(a: &mut Asm, f: &SwitchFields) {
    use Reg::*;
    a.load(Size::DW, R1, R0, CUR_AT).load(Size::DW, R2, R0, CUR_MARK).jge_reg(R1, R2, "from").mov_reg(R1, R2);
    // a mark another CPU's clock set a little ahead of this one's: no hold
    a.label("from").jgt_reg(R1, R7, "held").mov_reg(R3, R7).sub_reg(R3, R1);
    a.load(Size::DW, R2, R0, MOST_LEN).jge_reg(R2, R3, "held").store(Size::DW, R0, MOST_LEN, R3);
    copy_name(a, R0, MOST, R6, f.prev_comm);
    a.load(Size::W, R1, R6, f.prev_pid).store(Size::W, R0, MOST_PID, R1);
    a.label("held");
}

/// Within [`switch_program`], the task switched out in `R0` (its state): a wait since before the
/// CPU's last switch seen (at `[R10 - 40]`) ended unseen after that switch, and up to it is an
/// episode named by the task kept, or else the one that switch took the CPU from (a 5-ms take
/// that ended in a switch to a task whose switches go unseen was named after the idle task that
/// ran before it: the host's); `R0` is the task's state again after. Clobbers R1-R5, R8, R9.
fn unseen_switch_in(a: &mut Asm, tasks: RawFd, ring: RawFd, threshold_ns: i32) {
    use Reg::*;
    a.load(Size::DW, R8, R0, 0).jeq_imm(R8, 0, "seen");
    a.load(Size::DW, R9, R10, -40).jle_reg(R9, R8, "seen").sub_reg(R9, R8).jle_imm(R9, threshold_ns, "seen");
    // the one that last switch took the CPU from, unless a task was kept
    name_waited_for(a, R0, (R10, STACK_LAST_PREV, STACK_LAST_PREV_PID), ["unseen_kept", "unseen_named"]);
    a.load(Size::W, R1, R10, -4).store(Size::W, R10, -8, R1);
    append(a, ring, KIND_TASK, Some((R10, -32)), "again");
    // the state again (`append` took the key at [R10 - 4]; the pid is at [R10 - 8] too)
    a.label("again").mov_reg(R2, R10).add_imm(R2, -8).load_map_fd(R1, tasks).call(BPF_FUNC_MAP_LOOKUP_ELEM);
    a.jeq_imm(R0, 0, "next").label("seen");
}

/// The task a watched task (its state in `state`) waited for, on the stack for `append` (name at
/// -32, thread id at [`STACK_BY_PID`]): the one kept when its wait began, unless none was or it
/// was the idle task; then `fallback` (where a name and a thread id are: woken on an idle CPU,
/// something other than the idle task may have run first, and the last before it ran says who;
/// the idle task itself, the host's late wake). `labels`: two unique to the program. Clobbers R1.
fn name_waited_for(a: &mut Asm, state: Reg, fallback: (Reg, i16, i16), [kept, named]: [&'static str; 2]) {
    use Reg::*;
    let (src, name, pid) = fallback;
    copy_name(a, R10, -32, src, name);
    a.load(Size::W, R1, src, pid).store(Size::W, R10, STACK_BY_PID, R1);
    a.load(Size::DW, R1, state, BY).jeq_imm(R1, 0, named);
    a.load(Size::W, R1, state, BY).jne_imm(R1, IDLE[0], kept);
    a.load(Size::W, R1, state, BY + 4).jeq_imm(R1, IDLE[1], named);
    a.label(kept);
    copy_name(a, R10, -32, state, BY);
    a.load(Size::W, R1, state, BY_PID).store(Size::W, R10, STACK_BY_PID, R1);
    a.label(named);
}

/// "swapper/", the idle task's name's first 8 bytes, as two native-endian u32s.
const IDLE: [i32; 2] = [u32::from_ne_bytes(*b"swap") as i32, u32::from_ne_bytes(*b"per/") as i32];

/// `dst[dst_off..+16] = src[src_off..+16]` (a task's name), through R1.
fn copy_name(a: &mut Asm, dst: Reg, dst_off: i16, src: Reg, src_off: i16) {
    use Reg::*;
    a.load(Size::DW, R1, src, src_off).store(Size::DW, dst, dst_off, R1);
    a.load(Size::DW, R1, src, src_off + 8).store(Size::DW, dst, dst_off + 8, R1);
}

fn ns_i32(ns: u64, what: &str) -> io::Result<i32> {
    i32::try_from(ns).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{what} is above 2.1 s")))
}

impl StallProbe {
    /// Attach the tick program to `cpus` (a tick every `period_ns`, an episode for a gap above
    /// `period_ns + threshold_ns`) and, where tracefs is readable, the task programs on every CPU
    /// (an episode for a watched task that waited above `threshold_ns`).
    pub fn open(cpus: &[u32], period_ns: u64, threshold_ns: u64) -> io::Result<StallProbe> {
        let ring = bpf::mapped_array(1, RING_BYTES as u32, "netrig_stalls").map_err(ctx("the episode map"))?;
        let tasks =
            bpf::hash_u32_create(MAX_TASKS, TASK_STATE as u32, "netrig_stalltask").map_err(ctx("the task map"))?;
        // per CPU (by number): the name of the task running there, kept by the switch program
        let cur = bpf::array_create(MAX_CPUS, CUR, "netrig_stallcur").map_err(ctx("the running-task map"))?;
        let last = Self::tick_map(cpus)?;
        let limit_ns = ns_i32(period_ns + threshold_ns, "period + threshold")?;
        let late_ns = ns_i32(threshold_ns, "threshold")?;
        let late = TimerLayout::of_kernel().map(|t| (t, late_ns));
        let (mut progs, mut events) = Self::attach_ticks(&last, &ring, limit_ns, late)?;
        // the clock: an hrtimer every period on each watched CPU (no program: the tick program
        // sees its expiry)
        for &cpu in cpus {
            let ev = perf_event_open(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, period_ns, 0, cpu as i32)
                .map_err(|e| ctx(&format!("the CPU {cpu} clock event"))(e))?;
            enable(&ev).map_err(|e| ctx(&format!("the CPU {cpu} clock event"))(e))?;
            events.push(ev);
        }
        let tasks_watched = match crate::sys::tracefs::events("sched", "sched_switch") {
            Some(ev) => {
                Self::attach_tasks(
                    ev.dir(),
                    [&tasks, &ring.fd, &cur],
                    ns_i32(threshold_ns, "threshold")?,
                    &mut progs,
                    &mut events,
                )?;
                true
            }
            None => false,
        };
        drop(last); // the programs hold their own references
        Ok(StallProbe {
            ring,
            tasks,
            _attached: Attached { events, progs },
            tasks_watched,
            timers_late: late.is_some(),
        })
    }

    /// The per-CPU tick state ([`LAST`] bytes): the last tick (or return from idle) ns, 1 while
    /// idle, and at [`WATCHED_AT`] 1 on the CPUs in `cpus`.
    fn tick_map(cpus: &[u32]) -> io::Result<OwnedFd> {
        let last = bpf::percpu_array_create(1, LAST, "netrig_stalltick").map_err(ctx("the tick map"))?;
        let mut values = vec![0u8; bpf::possible_cpus() * LAST as usize];
        for &cpu in cpus {
            let at = cpu as usize * LAST as usize + WATCHED_AT as usize;
            if let Some(flag) = values.get_mut(at..at + 8) {
                flag.copy_from_slice(&1u64.to_ne_bytes());
            }
        }
        bpf::map_update_u32(&last, 0, &values).map_err(ctx("the tick map"))?;
        Ok(last)
    }

    /// The tick program on `hrtimer_expire_entry` and the idle program on `cpu_idle`, both raw
    /// tracepoints (no tracefs): any timer's expiry on a watched CPU is a tick, and with `late` also
    /// a timer taken late.
    ///
    /// Raw tracepoint programs, not perf events: a perf event's or tracepoint's program is
    /// skipped while its CPU's `bpf_prog_active` is held, by another such program or by a map's
    /// system call (preemptibly, for as long as the caller is preempted), and each skipped tick
    /// was a false 2-ms stall (docs/performance.md, *The stall watch*).
    fn attach_ticks(
        last: &OwnedFd,
        ring: &bpf::MappedArray,
        limit_ns: i32,
        late: Option<(TimerLayout, i32)>,
    ) -> io::Result<(Vec<OwnedFd>, Vec<OwnedFd>)> {
        let tick = tick_program(last.as_raw_fd(), ring.fd.as_raw_fd(), limit_ns, late);
        let tick = bpf::prog_load(bpf::BPF_PROG_TYPE_RAW_TRACEPOINT, &tick, "netrig_tick", 0, 0)
            .map_err(ctx("loading the tick program"))?;
        let idle =
            bpf::prog_load(bpf::BPF_PROG_TYPE_RAW_TRACEPOINT, &idle_program(last.as_raw_fd(), 0), "netrig_idle", 0, 0)
                .map_err(ctx("loading the idle program"))?;
        let events = vec![
            bpf::raw_tracepoint_open(&tick, "hrtimer_expire_entry").map_err(ctx("the hrtimer tracepoint"))?,
            bpf::raw_tracepoint_open(&idle, "cpu_idle").map_err(ctx("the cpu_idle tracepoint"))?,
        ];
        Ok((vec![tick, idle], events))
    }

    fn attach_tasks(
        dir: &std::path::Path,
        [tasks, ring, cur]: [&OwnedFd; 3],
        threshold: i32,
        progs: &mut Vec<OwnedFd>,
        events: &mut Vec<OwnedFd>,
    ) -> io::Result<()> {
        // `sched_waking`: a wake-up aimed at an idle CPU goes on that CPU's wake list with an
        // interrupt, and `sched_wakeup` fires there once it runs, after whatever kept the CPU from
        // running (a host that left the halted vCPU stopped: no tick is missed in idle).
        // `sched_waking` fires on the waker's CPU as the wake-up begins. Measured (bpftrace, a DUT
        // ring thread at 20 kfps): 98 896 of 99 069 `sched_wakeup`s fired on the woken thread's
        // CPU, 4-8 µs after `sched_waking` on the sender's, up to 1.25 ms.
        // And `sched_wakeup`, for a wake-up that raced the task's own going to sleep: its
        // `sched_waking` came after the scheduler read the task's state as asleep and before the
        // switch-out, which ends any wait; the task is queued after the switch, and `sched_wakeup`
        // fires then (ftrace: a DUT ring thread woken 2 µs before switching itself out to a 5-ms
        // take, then kept off for all of it, unreported: 1 take in about 25). The wake program
        // starts no wait for a task already waiting, so the two never count one wake-up twice.
        let mut wakes = Vec::new();
        for name in ["sched_waking", "sched_wakeup"] {
            let (id, w) = tracepoint(dir, name, &["pid", "target_cpu"])?;
            let wake = wake_program(tasks.as_raw_fd(), cur.as_raw_fd(), w[0], w[1]);
            let wake = bpf::prog_load(bpf::BPF_PROG_TYPE_TRACEPOINT, &wake, "netrig_wake", 0, 0)
                .map_err(ctx("loading the wake-up program"))?;
            wakes.push((id, wake));
        }
        let (switch_id, s) =
            tracepoint(dir, "sched_switch", &["prev_comm", "prev_pid", "prev_state", "next_comm", "next_pid"])?;
        let fields =
            SwitchFields { prev_comm: s[0], prev_pid: s[1], prev_state: s[2], next_comm: s[3], next_pid: s[4] };
        let switch = switch_program(tasks.as_raw_fd(), ring.as_raw_fd(), cur.as_raw_fd(), &fields, threshold);
        let switch = bpf::prog_load(bpf::BPF_PROG_TYPE_TRACEPOINT, &switch, "netrig_switch", 0, 0)
            .map_err(ctx("loading the context-switch program"))?;
        // A tracepoint's programs run wherever it fires: one event (on CPU 0, as libbpf opens them)
        // attaches a program for every CPU, and a second one would be refused (EEXIST).
        for (id, prog) in wakes.iter().map(|(id, p)| (*id, p)).chain([(switch_id, &switch)]) {
            let ev = perf_event_open(PERF_TYPE_TRACEPOINT, id, 1, PERF_SAMPLE_RAW, 0)
                .map_err(ctx("a scheduler tracepoint"))?;
            attach(&ev, prog).map_err(ctx("a scheduler tracepoint"))?;
            events.push(ev);
        }
        progs.extend(wakes.into_iter().map(|(_, p)| p));
        progs.push(switch);
        Ok(())
    }

    /// Watch task `pid` (a thread id): its waits to run become episodes.
    pub fn watch(&self, pid: u32) -> io::Result<()> {
        bpf::map_update_u32(&self.tasks, pid, &[0u8; TASK_STATE])
    }

    /// How often the kernel skipped one of the probe's programs since it opened: a wake-up, a
    /// switch or a tick it did not see, its CPU already in a BPF program or a BPF system call
    /// (another process's, or the tester's own map reads). The scheduler programs are tracepoint
    /// perf event programs, skipped while the CPU's `bpf_prog_active` is held; a window with
    /// misses may lack episodes, or hold a wait whose end was not seen.
    pub fn missed(&self) -> u64 {
        self._attached.progs.iter().filter_map(|p| bpf::prog_misses(p).ok()).sum()
    }

    /// Stop watching `pid` (no error if it was not watched).
    pub fn unwatch(&self, pid: u32) -> io::Result<()> {
        match bpf::map_delete_u32(&self.tasks, pid) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            r => r,
        }
    }

    /// The episodes recorded since index `*next` (advanced past what was read), and how many were
    /// overwritten before they could be read.
    pub fn read(&self, next: &mut u64) -> (Vec<RawEpisode>, u64) {
        let buf = self.ring.copy(0, RING_BYTES);
        let u64_at = |off: usize| u64::from_ne_bytes(buf[off..off + 8].try_into().expect("8 bytes"));
        let u32_at = |off: usize| u32::from_ne_bytes(buf[off..off + 4].try_into().expect("4 bytes"));
        let written = u64_at(0);
        let lost = written.saturating_sub(*next).saturating_sub(RING as u64);
        *next += lost;
        let mut out = Vec::new();
        while *next < written {
            let r = HEADER + (*next as usize % RING) * RECORD;
            if u64_at(r) != *next + 1 {
                break; // being written: the next read takes it
            }
            let comm = &buf[r + 40..r + 56];
            let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
            let by_pid = u32_at(r + 56);
            out.push(RawEpisode {
                kind: match u32_at(r + 28) {
                    KIND_CPU => StallKind::Cpu,
                    KIND_LATE => StallKind::Late,
                    _ => StallKind::Task,
                },
                start_ns: u64_at(r + 8),
                len_ns: u64_at(r + 16),
                cpu: u32_at(r + 24),
                pid: u32_at(r + 32),
                by: String::from_utf8_lossy(&comm[..end]).into_owned(),
                by_pid,
                by_self: by_pid != 0 && std::path::Path::new(&format!("/proc/self/task/{by_pid}")).exists(),
            });
            *next += 1;
        }
        (out, lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_assemble_with_every_jump_resolved() {
        let f = SwitchFields { prev_comm: 8, prev_pid: 24, prev_state: 32, next_comm: 40, next_pid: 56 };
        for p in [
            tick_program(3, 4, 2_000_000, None),
            tick_program(3, 4, 2_000_000, Some((TimerLayout { expires: 24, is_soft: 58 }, 1_000_000))),
            wake_program(3, 5, 24, 28),
            switch_program(3, 4, 5, &f, 1_000_000),
            idle_program(3, 8),
        ] {
            assert!(p.len() > 10 && p.len() < 400);
            assert_eq!(p.last().map(|i| i.code()), Some(0x95), "ends with exit");
        }
    }

    /// The wake-up and switch programs run by the kernel on contexts written here (as raw
    /// tracepoint programs, whose context is the u64 array BPF_PROG_TEST_RUN takes), in the
    /// order of a watched task's events. Root only (BPF).
    struct Events {
        probe: StallProbe,
        _cur: OwnedFd,
        wake: OwnedFd,
        switch: OwnedFd,
        next: u64,
    }

    // the test's record layout: prev_comm at 8, prev_pid at 24, prev_state at 32, next_pid at 40,
    // next_comm at 48; a wake-up's pid at 24, its CPU at 28
    const F: SwitchFields = SwitchFields { prev_comm: 8, prev_pid: 24, prev_state: 32, next_comm: 48, next_pid: 40 };
    const WATCHED: u32 = 4242;

    impl Events {
        fn open(threshold_ns: i32) -> Option<Events> {
            let tasks = bpf::hash_u32_create(8, TASK_STATE as u32, "t_stalltask").ok()?;
            let ring = bpf::mapped_array(1, RING_BYTES as u32, "t_stalls").unwrap();
            let cur = bpf::array_create(MAX_CPUS, CUR, "t_stallcur").unwrap();
            let load = |p: Vec<Insn>, name| bpf::prog_load(bpf::BPF_PROG_TYPE_RAW_TRACEPOINT, &p, name, 0, 0).unwrap();
            let wake = load(wake_program(tasks.as_raw_fd(), cur.as_raw_fd(), F.prev_pid, 28), "t_wake");
            let switch = load(
                switch_program(tasks.as_raw_fd(), ring.fd.as_raw_fd(), cur.as_raw_fd(), &F, threshold_ns),
                "t_switch",
            );
            bpf::map_update_u32(&tasks, WATCHED, &[0u8; TASK_STATE]).unwrap();
            // CPU 4000 (no switch of the test's runs there) runs "busy": a wake-up aimed at it waits for it
            let mut busy = [0u8; CUR as usize];
            busy[..4].copy_from_slice(b"busy");
            busy[CUR_PID as usize..CUR_PID as usize + 4].copy_from_slice(&99u32.to_ne_bytes());
            bpf::map_update_u32(&cur, 4000, &busy).unwrap();
            // CPU 4001 idles: whoever runs there first after a wake-up is named
            let mut idle = [0u8; CUR as usize];
            idle[..9].copy_from_slice(b"swapper/9");
            bpf::map_update_u32(&cur, 4001, &idle).unwrap();
            let probe =
                StallProbe { ring, tasks, _attached: Attached::default(), tasks_watched: true, timers_late: false };
            Some(Events { probe, _cur: cur, wake, switch, next: 0 })
        }

        /// `pid` woken to run on CPU `cpu`.
        fn wake_on(&self, pid: u32, cpu: u32) {
            let mut ctx = [0u8; 64];
            ctx[24..28].copy_from_slice(&pid.to_ne_bytes());
            ctx[28..32].copy_from_slice(&cpu.to_ne_bytes());
            bpf::prog_test_run_ctx(&self.wake, &ctx).unwrap();
        }

        /// `pid` woken to run on CPU 0 (where a test that calls it runs its switches).
        fn wake(&self, pid: u32) {
            self.wake_on(pid, 0)
        }

        /// `prev` switched out (`asleep`: in a sleeping state, else runnable), `next` in; every
        /// task but the watched one is named "other", but the one switched in is "next".
        fn switch(&self, prev: u32, asleep: bool, next: u32) {
            self.switch_from(prev, b"other", asleep, next)
        }

        /// [`Events::switch`], the task switched out named `prev_comm` (up to 15 bytes).
        fn switch_from(&self, prev: u32, prev_comm: &[u8], asleep: bool, next: u32) {
            let mut ctx = [0u8; 64];
            ctx[8..8 + prev_comm.len()].copy_from_slice(prev_comm);
            ctx[48..53].copy_from_slice(b"next\0");
            ctx[24..28].copy_from_slice(&prev.to_ne_bytes());
            ctx[32..40].copy_from_slice(&(asleep as u64).to_ne_bytes()); // TASK_INTERRUPTIBLE
            ctx[40..44].copy_from_slice(&next.to_ne_bytes());
            bpf::prog_test_run_ctx(&self.switch, &ctx).unwrap();
        }

        fn episodes(&mut self) -> Vec<RawEpisode> {
            self.probe.read(&mut self.next).0
        }
    }

    fn pause_ms(ms: u64) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }

    #[test]
    fn a_task_waits_only_while_runnable_and_off_its_cpu() {
        let Some(mut ev) = Events::open(2_000_000) else {
            eprintln!("skipped: needs root (BPF maps and programs)");
            return;
        };
        // the programs run on the test's CPU, and a CPU's holds are its own: one CPU throughout
        crate::sys::cpu::pin_current_thread_to(&[0]).unwrap();
        // preempted (switched out runnable) for 5 ms: one wait, for the task that preempted it (here
        // a task's name is "next" as it is switched in, "other" as it is switched out)
        ev.switch(WATCHED, false, 7);
        pause_ms(5);
        ev.switch(7, false, WATCHED);
        let eps = ev.episodes();
        assert_eq!(eps.len(), 1, "{eps:?}");
        assert!(eps[0].pid == WATCHED && eps[0].len_ns >= 5_000_000, "{eps:?}");
        assert_eq!((eps[0].by_pid, eps[0].by_self), (7, false), "the preempting task's thread id, not ours");
        // preempted by one of this process's own threads: the tester's work on the DUT's CPU
        let own = unsafe { libc::gettid() } as u32;
        ev.switch(WATCHED, false, own);
        pause_ms(3);
        ev.switch(own, false, WATCHED);
        let eps = ev.episodes();
        assert!(eps.len() == 1 && eps[0].by_pid == own && eps[0].by_self, "{eps:?}");
        // woken while still on its CPU, then asleep for 5 ms, woken and switched in at once:
        // no wait (before the fix: a 5-ms one, from the wake-up while it ran)
        ev.wake(WATCHED);
        ev.switch(WATCHED, true, 0);
        pause_ms(5);
        ev.wake(WATCHED);
        ev.switch(0, false, WATCHED);
        assert_eq!(ev.episodes(), vec![]);
        // woken as it switched itself out asleep (`sched_waking` before the switch, `sched_wakeup`
        // after it, once the task is queued), then kept off its CPU for 5 ms: a wait from the
        // `sched_wakeup` (before it was attached: none at all)
        ev.wake(WATCHED);
        ev.switch(WATCHED, true, 7);
        ev.wake(WATCHED);
        pause_ms(5);
        ev.switch(7, false, WATCHED);
        let eps = ev.episodes();
        assert!(eps.len() == 1 && eps[0].len_ns >= 5_000_000, "{eps:?}");
        // woken while on its CPU, then preempted for 5 ms: the wait starts at the switch-out
        ev.wake(WATCHED);
        pause_ms(5);
        ev.switch(WATCHED, false, 7);
        ev.switch(7, false, WATCHED);
        assert_eq!(ev.episodes(), vec![]);
        // woken from sleep and kept off its CPU for 5 ms by the task running there then, another
        // running briefly after it: a wait from the wake-up, for the task running at the wake-up
        ev.switch(WATCHED, true, 99);
        ev.wake(WATCHED);
        pause_ms(5);
        ev.switch(99, false, 7);
        ev.switch(7, false, WATCHED);
        let eps = ev.episodes();
        assert!(eps.len() == 1 && eps[0].len_ns >= 5_000_000, "{eps:?}");
        assert_eq!(eps[0].by_pid, 99, "the task that held the CPU longest: the one running at the wake-up");
        // woken while that task ran briefly, then a take of 5 ms, then that task briefly again:
        // named after the take (before: after the task running at the wake-up and at the end)
        ev.switch(WATCHED, true, 99);
        ev.wake(WATCHED);
        ev.switch(99, false, 50);
        pause_ms(5);
        ev.switch(50, false, 99);
        ev.switch(99, false, WATCHED);
        let eps = ev.episodes();
        assert!(eps.len() == 1 && eps[0].by_pid == 50, "{eps:?}");
        // woken on its idle CPU, which the host ran again only 5 ms later: named after the idle
        // task (the host's late wake, as user space reads it)
        ev.switch(WATCHED, true, 0);
        ev.wake(WATCHED);
        pause_ms(5);
        ev.switch_from(0, b"swapper/0", false, WATCHED);
        let eps = ev.episodes();
        assert!(eps.len() == 1 && eps[0].by == "swapper/0" && eps[0].by_pid == 0, "{eps:?}");
    }

    #[test]
    fn a_wait_whose_switch_in_was_not_seen_ends_at_the_last_switch_seen_on_its_cpu() {
        let Some(mut ev) = Events::open(2_000_000) else {
            eprintln!("skipped: needs root (BPF maps and programs)");
            return;
        };
        // the programs run on the test's CPU, and the last switch is per CPU: one CPU throughout
        crate::sys::cpu::pin_current_thread_to(&[0]).unwrap();
        // preempted; 5 ms later another switch on its CPU, and its own switch-in is not seen; it
        // runs 5 ms and is switched out: a wait of at least 5 ms, up to that other switch
        ev.switch(WATCHED, false, 7);
        pause_ms(5);
        ev.switch(7, false, 8);
        let other = crate::clock::now_ns();
        pause_ms(5);
        ev.switch(WATCHED, true, 0);
        let eps = ev.episodes();
        assert_eq!(eps.len(), 1, "{eps:?}");
        let e = &eps[0];
        assert!(e.pid == WATCHED && e.by == "next" && e.len_ns >= 5_000_000 && e.start_ns + e.len_ns <= other, "{e:?}");
        // woken on an idle CPU; a real-time take there for 5 ms, then a switch from it to a task
        // whose switches go unseen, its own switch-in among them: the wait up to the switch seen is
        // named after the task that switch took the CPU from (before: the idle task, the host's)
        ev.wake_on(WATCHED, 4001);
        ev.switch(0, false, 7);
        pause_ms(5);
        ev.switch(7, false, 8);
        pause_ms(1);
        ev.switch(WATCHED, true, 0);
        let eps = ev.episodes();
        assert!(eps.len() == 1 && eps[0].len_ns >= 5_000_000, "{eps:?}");
        assert_eq!((eps[0].by.as_str(), eps[0].by_pid), ("other", 7), "{eps:?}");
        // woken while it ran (no switch on its CPU after the wake-up), switched out 5 ms later: no wait
        ev.switch(0, false, WATCHED);
        ev.wake(WATCHED);
        pause_ms(5);
        ev.switch(WATCHED, false, 7);
        ev.switch(7, false, WATCHED);
        assert_eq!(ev.episodes(), vec![]);
    }

    #[test]
    fn a_dropped_probe_detaches_every_program() {
        if !bpf::testkit::is_root() {
            eprintln!("skipped: loading BPF programs needs root");
            return;
        }
        let probe = StallProbe::open(&[0], 1_000_000, 1_000_000).unwrap();
        let ids: Vec<u32> = probe._attached.progs.iter().map(|p| bpf::prog_id(p).unwrap()).collect();
        assert!(!ids.is_empty() && ids.iter().all(|&id| bpf::prog_name(id).is_ok()));
        drop(probe); // returns at once; a thread of its own detaches them
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while ids.iter().any(|&id| bpf::prog_name(id).is_ok()) {
            assert!(std::time::Instant::now() < deadline, "programs {ids:?} still loaded 10 s after the drop");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    #[test]
    fn scheduler_events_on_a_cpu_inside_a_map_system_call_are_counted_as_missed() {
        if !bpf::testkit::is_root() {
            eprintln!("skipped: loading BPF programs needs root");
            return;
        }
        use std::sync::atomic::{AtomicBool, Ordering};
        let probe = StallProbe::open(&[0], 1_000_000, 1_000_000).unwrap();
        let before = probe.missed();
        // on CPU 0: a thread reading a 64-KB map in a loop (inside the system call, preemptibly,
        // nearly all the time) and one that sleeps 50 µs at a time (a wake-up and two switches each)
        let map = bpf::array_create(1, 65536, "t_big").unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                crate::sys::cpu::pin_current_thread_to(&[0]).unwrap();
                let mut buf = vec![0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    bpf::map_lookup_u32(&map, 0, &mut buf).unwrap();
                }
            });
            s.spawn(|| {
                crate::sys::cpu::pin_current_thread_to(&[0]).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
            });
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while probe.missed() == before && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            stop.store(true, Ordering::Relaxed);
        });
        assert!(probe.missed() > before, "no skipped program counted in 10 s");
    }

    #[test]
    fn field_offsets_come_from_the_format_file() {
        let dir = std::env::temp_dir().join(format!("netrig-tp-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sched_switch")).unwrap();
        std::fs::write(dir.join("sched_switch/id"), "321\n").unwrap();
        std::fs::write(
            dir.join("sched_switch/format"),
            "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
             \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
             \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n",
        )
        .unwrap();
        let (id, offs) = tracepoint(&dir, "sched_switch", &["prev_comm", "next_pid", "prev_pid"]).unwrap();
        assert_eq!((id, offs), (321, vec![8, 56, 24]));
        assert!(tracepoint(&dir, "sched_switch", &["prev_state"])
            .unwrap_err()
            .to_string()
            .contains("no field prev_state"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
