//! The wire's counts in time: frames that arrived at a DUT's receive ring, that the ring dropped,
//! and that the DUT's CPU took, per slot of [`SLOT_NS`] (0.52 ms), from the kernel's CPUMAP
//! tracepoints (the wire itself, `sys::wire`, keeps totals only).
//!
//! ```text
//!  xdp:xdp_cpumap_enqueue (a bulk of arriving frames put on a DUT CPU's ring: processed, drops)
//!  xdp:xdp_cpumap_kthread (a batch the DUT CPU's ring thread took: processed)
//!      ──▶ netrig_wclk_enq / netrig_wclk_take: the CPUMAP is one of the watched (its map id in
//!          netrig_wclkids)? ──▶ this CPU's slot (ktime >> 19) in its own SLOTS entries of an
//!          ARRAY (CPU × SLOTS + slot mod SLOTS): {slot, arrived, dropped, taken} (reset when the
//!          entry held an older slot)
//! ```
//! Each CPU writes only its own entries: no atomics, and exact. User space reads them through the
//! map's memory (`bpf::mapped_array`: a map's system calls would hold `bpf_prog_active` and make
//! the kernel skip the stall watch's programs on the reader's CPU), well within the SLOTS ×
//! SLOT_NS (8.6 s) they span.
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::sys::bpf::BPF_FUNC_GET_SMP_PROCESSOR_ID;
use crate::sys::bpf::{self, Asm, Insn, Reg, Size, BPF_FUNC_KTIME_GET_NS, BPF_FUNC_MAP_LOOKUP_ELEM};
use crate::sys::stalls::{ctx, Attached};

/// log2 of the slot length in ns: 2^19 ns = 0.524 ms.
pub const SLOT_SHIFT: u32 = 19;
/// A slot's length, ns.
pub const SLOT_NS: u64 = 1 << SLOT_SHIFT;
/// Slots each CPU's ring holds (a power of two): 8.6 s.
pub const SLOTS: u32 = 16384;
const ENTRY: usize = 32;
/// CPUMAPs that can be watched at once.
const MAX_MAPS: u32 = 64;

/// One CPU's counts in one slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotCount {
    /// `CLOCK_MONOTONIC` ns >> [`SLOT_SHIFT`].
    pub slot: u64,
    pub cpu: u32,
    pub arrived: u64,
    pub dropped: u64,
    pub taken: u64,
}

/// Which tracepoint a program counts.
#[derive(Clone, Copy)]
enum Counts {
    /// arrived += processed, dropped += drops
    Enqueue { processed: i16, drops: i16 },
    /// taken += processed
    Take { processed: i16 },
}

fn program(ids: RawFd, slots: RawFd, map_id_off: i16, counts: Counts) -> Vec<Insn> {
    use Reg::*;
    let mut a = Asm::new();
    a.mov_reg(R6, R1).load(Size::W, R1, R6, map_id_off).store(Size::W, R10, -4, R1);
    a.mov_reg(R2, R10).add_imm(R2, -4).load_map_fd(R1, ids).call(BPF_FUNC_MAP_LOOKUP_ELEM).jeq_imm(R0, 0, "out");
    a.call(BPF_FUNC_KTIME_GET_NS).rsh_imm(R0, SLOT_SHIFT as i32).mov_reg(R7, R0);
    // this CPU's entries: CPU × SLOTS + slot mod SLOTS
    a.call(BPF_FUNC_GET_SMP_PROCESSOR_ID).lsh_imm(R0, SLOTS.trailing_zeros() as i32);
    a.mov_reg(R1, R7).and_imm(R1, (SLOTS - 1) as i32).add_reg(R1, R0).store(Size::W, R10, -8, R1);
    a.mov_reg(R2, R10).add_imm(R2, -8).load_map_fd(R1, slots).call(BPF_FUNC_MAP_LOOKUP_ELEM).jeq_imm(R0, 0, "out");
    a.load(Size::DW, R1, R0, 0).jeq_reg(R1, R7, "add");
    a.store(Size::DW, R0, 0, R7).store_imm(Size::DW, R0, 8, 0).store_imm(Size::DW, R0, 16, 0).store_imm(
        Size::DW,
        R0,
        24,
        0,
    );
    a.label("add");
    let mut add = |field: i16, at: i16| {
        a.load(Size::W, R1, R6, field).load(Size::DW, R2, R0, at).add_reg(R2, R1).store(Size::DW, R0, at, R2);
    };
    match counts {
        Counts::Enqueue { processed, drops } => {
            add(processed, 8);
            add(drops, 16);
        }
        Counts::Take { processed } => add(processed, 24),
    }
    a.label("out").mov_imm(R0, 0).exit();
    a.finish()
}

/// The loaded programs, their maps and perf events; detached when dropped.
pub struct WireClock {
    ids: OwnedFd,
    slots: bpf::MappedArray,
    cpus: usize,
    _attached: Attached,
}

impl WireClock {
    /// Attach the counting programs (nothing is counted until a CPUMAP is watched).
    ///
    /// As raw tracepoint programs: a tracepoint perf event's program holds the CPU's
    /// `bpf_prog_active` while it runs, and these run with interrupts on (in the sender's softirq,
    /// in the DUT's ring thread), so the stall watch's perf event and tracepoint programs on that
    /// CPU were skipped meanwhile (until 2026-12-04 its tick was one: false stalls; the numbers in
    /// docs/methodology.md, *Loss in stalls*).
    pub fn open() -> io::Result<WireClock> {
        let ids = bpf::hash_u32_create(MAX_MAPS, 4, "netrig_wclkids").map_err(ctx("the CPUMAP id map"))?;
        let cpus = bpf::possible_cpus();
        let slots = bpf::mapped_array(SLOTS * cpus as u32, ENTRY as u32, "netrig_wclk").map_err(ctx("the slot map"))?;
        // the tracepoints' arguments, 8 bytes each: (map_id, processed, drops, to_cpu) and
        // (map_id, processed, drops, sched, xdp_stats)
        let enq = program(ids.as_raw_fd(), slots.fd.as_raw_fd(), 0, Counts::Enqueue { processed: 8, drops: 16 });
        let take = program(ids.as_raw_fd(), slots.fd.as_raw_fd(), 0, Counts::Take { processed: 8 });
        let mut progs = Vec::new();
        let mut links = Vec::new();
        for (tp, insns, name) in
            [("xdp_cpumap_enqueue", enq, "netrig_wclk_enq"), ("xdp_cpumap_kthread", take, "netrig_wclk_take")]
        {
            let prog = bpf::prog_load(bpf::BPF_PROG_TYPE_RAW_TRACEPOINT, &insns, name, 0, 0)
                .map_err(ctx("loading a wire clock program"))?;
            links.push(bpf::raw_tracepoint_open(&prog, tp).map_err(ctx("an xdp tracepoint"))?);
            progs.push(prog);
        }
        Ok(WireClock { ids, slots, cpus, _attached: Attached { events: links, progs } })
    }

    /// Count the CPUMAP with id `map_id` (a wire's ring map: `sys::wire::cpumap_id`).
    pub fn watch(&self, map_id: u32) -> io::Result<()> {
        bpf::map_update_u32(&self.ids, map_id, &1u32.to_ne_bytes())
    }

    /// Every CPU's entries for the slots from `from_slot` to `to_slot` (at most [`SLOTS`] of them,
    /// the ring wrapped as needed) that hold one of those slots, in no order.
    pub fn read(&self, from_slot: u64, to_slot: u64) -> Vec<SlotCount> {
        let count = (to_slot.saturating_sub(from_slot) + 1).min(u64::from(SLOTS));
        let mut out = Vec::new();
        for slot in to_slot + 1 - count..=to_slot {
            for cpu in 0..self.cpus {
                let off = (cpu * SLOTS as usize + (slot & u64::from(SLOTS - 1)) as usize) * ENTRY;
                let c = SlotCount {
                    slot: self.slots.u64_at(off),
                    cpu: cpu as u32,
                    arrived: self.slots.u64_at(off + 8),
                    dropped: self.slots.u64_at(off + 16),
                    taken: self.slots.u64_at(off + 24),
                };
                if c.slot >= from_slot && (c.slot | c.arrived | c.dropped | c.taken) != 0 {
                    out.push(c);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_programs_assemble() {
        for c in [Counts::Enqueue { processed: 24, drops: 20 }, Counts::Take { processed: 24 }] {
            let p = program(3, 4, 8, c);
            assert!(p.len() > 20 && p.len() < 80);
            assert_eq!(p.last().map(|i| i.code()), Some(0x95));
        }
    }
}
