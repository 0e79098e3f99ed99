//! The wire into a DUT on a namespace test bed: a receive ring of a stated size on the DUT's CPUs.
//!
//! On veth the receiving side's work runs on the CPU that transmits, and a frame keeps the
//! sender's socket (its TX completion, its send-buffer charge) until the receiving stack frees
//! it. A Linux DUT behind a plain veth therefore forwards on the tester's CPU and holds the
//! tester's frames while it works: a slow DUT slows the sender instead of dropping. A real wire
//! does neither: the frame leaves the tester, lands in the DUT's NIC ring, and is lost when the
//! ring is full.
//!
//! The wire program restores that. It is attached (natively, through netlink, so it lives as long
//! as the interface) to every DUT interface that faces a tester port:
//!
//! ```text
//!  tester sendto ─▶ veth_xmit ─▶ DUT iface NAPI (on the tester's CPU, inside its sendto):
//!      netrig_wire: count "arrived", pick a DUT CPU (flow hash), bpf_redirect_map(CPUMAP)
//!      the tester's skb is copied into an XDP frame and freed here: its completion is immediate
//!  ─▶ CPUMAP ring of `ring` frames on the DUT CPU   (full: the frame is dropped, like a NIC ring)
//!  ─▶ kthread cpumap/<cpu> on the DUT CPU: netrig_wire_rx counts "taken", then the kernel builds
//!     the skb (GRO) and the DUT's stack runs: forwarding, nftables, the bridge, NAT — all there
//! ```
//!
//! Counters (one PERCPU_ARRAY slot, summed): frames that arrived, frames the DUT's CPU took off
//! its ring, and frames the program could not steer (no CPUMAP entry; they went to the stack on
//! the arriving CPU). Once the ring has drained, `arrived − taken − unsteered` is exactly what the
//! ring dropped: the DUT's own receive-ring drop counter.
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::error::PortError;
use crate::sys::bpf::{self, wire16, Asm, Insn, Reg, Size, BPF_FUNC_MAP_LOOKUP_ELEM, BPF_FUNC_REDIRECT_MAP};
use crate::sys::{ifinfo, link, netns::in_netns};

/// Name of the program on the DUT's interface (`ip link` shows it).
pub const WIRE_PROG_NAME: &str = "netrig_wire";
/// Name of the program the CPUMAP runs on the DUT's CPU for every frame it takes.
pub const WIRE_RX_PROG_NAME: &str = "netrig_wire_rx";
/// Name of the counters map.
pub const WIRE_STATS_MAP: &str = "netrig_wstats";
/// Name of the ring map (the CPUMAP).
pub const WIRE_CPUMAP: &str = "netrig_wcpus";
/// Default ring: 1024 frames per DUT CPU (a common NIC receive ring).
pub const DEFAULT_RING: u32 = 1024;
/// Smallest and largest ring the kernel's CPUMAP takes (`qsize`; at most 16384 here).
pub const MIN_RING: u32 = 8;
pub const MAX_RING: u32 = 16384;

const ARRIVED: usize = 0;
const TAKEN: usize = 1;
const UNSTEERED: usize = 2;
const FIELDS: usize = 3;

/// The wire's counters for one DUT interface, since it was attached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireCounts {
    /// Frames that arrived at the DUT's interface.
    pub arrived: u64,
    /// Frames the DUT's CPU took off its ring (handed to its stack).
    pub taken: u64,
    /// Frames the program could not steer to a DUT CPU (processed where they arrived).
    pub unsteered: u64,
}

impl WireCounts {
    /// Frames the ring dropped (exact once the ring has drained; frames still queued count here
    /// until they are taken).
    pub fn dropped(&self) -> u64 {
        self.arrived.saturating_sub(self.taken).saturating_sub(self.unsteered)
    }

    /// The counts accumulated since `before`.
    pub fn since(&self, before: &WireCounts) -> WireCounts {
        WireCounts {
            arrived: self.arrived.saturating_sub(before.arrived),
            taken: self.taken.saturating_sub(before.taken),
            unsteered: self.unsteered.saturating_sub(before.unsteered),
        }
    }
}

fn fail(ifname: &str, what: &str, e: io::Error) -> PortError {
    PortError::Other { ifname: ifname.to_string(), message: format!("the test bed's wire: {what} failed: {e}") }
}

/// Attach the wire to `ifname` (in `netns`): frames arriving there go to a ring of `ring` frames
/// on one of `cpus` (a flow hash picks it), where the DUT's stack takes them. Returns the id of the
/// attached program. Refuses an interface that already carries an XDP program.
pub fn attach(ifname: &str, netns: Option<&str>, cpus: &[u32], ring: u32) -> Result<u32, PortError> {
    if cpus.is_empty() || !(MIN_RING..=MAX_RING).contains(&ring) {
        return Err(PortError::Other {
            ifname: ifname.to_string(),
            message: format!("the test bed's wire needs at least one CPU and a ring of {MIN_RING}..={MAX_RING} frames"),
        });
    }
    let possible = bpf::possible_cpus() as u32;
    let stats = bpf::percpu_array_create(1, (FIELDS * 8) as u32, WIRE_STATS_MAP).map_err(|e| fail(ifname, "map", e))?;
    let cpumap = bpf::cpumap_create(possible, WIRE_CPUMAP).map_err(|e| fail(ifname, "CPUMAP", e))?;
    let rx = rx_program(stats.as_raw_fd());
    let rx = bpf::prog_load_xdp_as(&rx, WIRE_RX_PROG_NAME, bpf::BPF_XDP_CPUMAP, bpf::BPF_F_XDP_HAS_FRAGS)
        .map_err(|e| fail(ifname, "loading the ring program", e))?;
    for &cpu in cpus {
        bpf::cpumap_set(&cpumap, cpu, ring, &rx).map_err(|e| fail(ifname, &format!("a ring on CPU {cpu}"), e))?;
    }
    let spread = spread_map(ifname, cpus)?;
    let insns = wire_program(stats.as_raw_fd(), cpumap.as_raw_fd(), cpus, spread.as_ref().map(|m| m.as_raw_fd()));
    let prog = bpf::prog_load_xdp_as(&insns, WIRE_PROG_NAME, bpf::BPF_XDP, bpf::BPF_F_XDP_HAS_FRAGS)
        .map_err(|e| fail(ifname, "loading the wire program", e))?;
    in_netns(netns, || {
        let ifindex = ifinfo::ifindex(ifname, netns)?;
        link::set_xdp(ifindex, prog.as_raw_fd(), link::XDP_FLAGS_DRV_MODE | link::XDP_FLAGS_UPDATE_IF_NOEXIST).map_err(
            |e| match e.raw_os_error() {
                Some(libc::EBUSY) | Some(libc::EEXIST) => PortError::Busy {
                    ifname: ifname.to_string(),
                    message: "another XDP program is attached; the test bed's wire needs the interface's XDP hook"
                        .into(),
                },
                _ => fail(ifname, "attaching (native XDP)", e),
            },
        )
    })?;
    bpf::prog_id(&prog).map_err(|e| fail(ifname, "reading the program id", e))
}

/// The map from a flow-hash slot to a DUT CPU (only with several CPUs).
fn spread_map(ifname: &str, cpus: &[u32]) -> Result<Option<OwnedFd>, PortError> {
    if cpus.len() < 2 {
        return Ok(None);
    }
    let m = bpf::array_u32_create(cpus.len() as u32, "netrig_wspread").map_err(|e| fail(ifname, "map", e))?;
    for (i, &c) in cpus.iter().enumerate() {
        bpf::array_u32_set(&m, i as u32, c).map_err(|e| fail(ifname, "map", e))?;
    }
    Ok(Some(m))
}

/// Remove the wire from `ifname` (nothing to do when no wire is attached).
pub fn detach(ifname: &str, netns: Option<&str>) -> Result<(), PortError> {
    in_netns(netns, || {
        let ifindex = ifinfo::ifindex(ifname, netns)?;
        let st = link::link_state(ifindex).map_err(|e| fail(ifname, "reading the link", e))?;
        match st.xdp_prog_id {
            Some(id) if bpf::prog_name(id).map(|n| n == WIRE_PROG_NAME).unwrap_or(false) => {
                link::set_xdp(ifindex, -1, link::XDP_FLAGS_DRV_MODE).map_err(|e| fail(ifname, "detaching", e))
            }
            _ => Ok(()),
        }
    })
}

/// The wire's counters on `ifname`, or `None` when it carries no wire.
pub fn counts(ifname: &str, netns: Option<&str>) -> Result<Option<WireCounts>, PortError> {
    let id = in_netns(netns, || {
        let ifindex = ifinfo::ifindex(ifname, netns)?;
        link::link_state(ifindex).map_err(|e| fail(ifname, "reading the link", e))
    })?
    .xdp_prog_id;
    let Some(id) = id else { return Ok(None) };
    if bpf::prog_name(id).map(|n| n != WIRE_PROG_NAME).unwrap_or(true) {
        return Ok(None);
    }
    for map_id in bpf::prog_map_ids(id).map_err(|e| fail(ifname, "reading the program's maps", e))? {
        let (fd, name) = bpf::map_by_id(map_id).map_err(|e| fail(ifname, "opening a map", e))?;
        if name == WIRE_STATS_MAP {
            let v = bpf::percpu_u64_sum(&fd, 0, FIELDS).map_err(|e| fail(ifname, "reading the counters", e))?;
            return Ok(Some(WireCounts { arrived: v[ARRIVED], taken: v[TAKEN], unsteered: v[UNSTEERED] }));
        }
    }
    Ok(None)
}

/// The id of the ring map (CPUMAP) of the wire on `ifname`, or None when it carries no wire: what
/// `sys::wire_clock` counts in time.
pub fn cpumap_id(ifname: &str, netns: Option<&str>) -> Result<Option<u32>, PortError> {
    let id = in_netns(netns, || {
        let ifindex = ifinfo::ifindex(ifname, netns)?;
        link::link_state(ifindex).map_err(|e| fail(ifname, "reading the link", e))
    })?
    .xdp_prog_id;
    let Some(id) = id else { return Ok(None) };
    if bpf::prog_name(id).map(|n| n != WIRE_PROG_NAME).unwrap_or(true) {
        return Ok(None);
    }
    for map_id in bpf::prog_map_ids(id).map_err(|e| fail(ifname, "reading the program's maps", e))? {
        let (_, name) = bpf::map_by_id(map_id).map_err(|e| fail(ifname, "opening a map", e))?;
        if name == WIRE_CPUMAP {
            return Ok(Some(map_id));
        }
    }
    Ok(None)
}

/// `stats[0].field += 1` (clobbers R0-R5; the slot always exists, the verifier wants the check).
fn count(a: &mut Asm, stats_fd: RawFd, field: usize, skip: &'static str) {
    use Reg::*;
    a.store_imm(Size::W, R10, -4, 0)
        .load_map_fd(R1, stats_fd)
        .mov_reg(R2, R10)
        .add_imm(R2, -4)
        .call(BPF_FUNC_MAP_LOOKUP_ELEM)
        .jeq_imm(R0, 0, skip)
        .load(Size::DW, R1, R0, (field * 8) as i16)
        .add_imm(R1, 1)
        .store(Size::DW, R0, (field * 8) as i16, R1)
        .label(skip);
}

/// The program the CPUMAP runs on the DUT's CPU: count the frame as taken, hand it on.
pub fn rx_program(stats_fd: RawFd) -> Vec<Insn> {
    let mut a = Asm::new();
    count(&mut a, stats_fd, TAKEN, "out");
    a.mov_imm(Reg::R0, bpf::XDP_PASS).exit();
    a.finish()
}

/// The program on the DUT's interface: count, pick a CPU, redirect into its ring. With several
/// CPUs a flow hash of the IPv4 or IPv6 addresses and the first four L4 bytes picks one (others
/// frames: the first CPU), so a flow keeps its order.
pub fn wire_program(stats_fd: RawFd, cpumap_fd: RawFd, cpus: &[u32], spread_fd: Option<RawFd>) -> Vec<Insn> {
    use Reg::*;
    let mut a = Asm::new();
    a.mov_reg(R6, R1);
    count(&mut a, stats_fd, ARRIVED, "counted");
    a.mov_imm(R9, cpus[0] as i32);
    if let Some(spread) = spread_fd {
        flow_hash(&mut a);
        a.mod_imm(R8, cpus.len() as i32)
            .store(Size::W, R10, -8, R8)
            .load_map_fd(R1, spread)
            .mov_reg(R2, R10)
            .add_imm(R2, -8)
            .call(BPF_FUNC_MAP_LOOKUP_ELEM)
            .jeq_imm(R0, 0, "send")
            .load(Size::W, R9, R0, 0);
    }
    a.label("send")
        .load_map_fd(R1, cpumap_fd)
        .mov_reg(R2, R9)
        .mov_imm(R3, bpf::XDP_PASS)
        .call(BPF_FUNC_REDIRECT_MAP)
        .jeq_imm(R0, bpf::XDP_REDIRECT, "out")
        .mov_reg(R7, R0);
    count(&mut a, stats_fd, UNSTEERED, "unsteered");
    a.mov_reg(R0, R7).label("out").exit();
    a.finish()
}

/// R8 = a hash of the frame's IPv4/IPv6 addresses and first four L4 bytes (0 for other frames).
fn flow_hash(a: &mut Asm) {
    use Reg::*;
    const V4_END: i32 = 14 + 20 + 4;
    const V6_END: i32 = 14 + 40 + 4;
    a.mov_imm(R8, 0)
        .load(Size::W, R2, R6, 0)
        .load(Size::W, R3, R6, 4)
        .mov_reg(R4, R2)
        .add_imm(R4, V6_END)
        .jgt_reg(R4, R3, "short")
        .load(Size::H, R5, R2, 12)
        .jeq_imm(R5, wire16(0x86DD), "v6")
        .label("short")
        .mov_reg(R4, R2)
        .add_imm(R4, V4_END)
        .jgt_reg(R4, R3, "mix")
        .load(Size::H, R5, R2, 12)
        .jne_imm(R5, wire16(0x0800), "mix")
        .load(Size::W, R8, R2, 26)
        .load(Size::W, R5, R2, 30)
        .xor_reg(R8, R5)
        .load(Size::W, R5, R2, 34)
        .xor_reg(R8, R5)
        .ja("mix")
        .label("v6")
        .load(Size::W, R8, R2, 34)
        .load(Size::W, R5, R2, 50)
        .xor_reg(R8, R5)
        .load(Size::W, R5, R2, 54)
        .xor_reg(R8, R5)
        .label("mix")
        .mov_reg(R5, R8)
        .rsh_imm(R5, 16)
        .xor_reg(R8, R5)
        .mov_reg(R5, R8)
        .rsh_imm(R5, 8)
        .xor_reg(R8, R5);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_end_in_exit_and_jump_forward_inside() {
        for p in [wire_program(3, 4, &[1], None), wire_program(3, 4, &[1, 2, 3], Some(5)), rx_program(3)] {
            for (i, insn) in p.iter().enumerate() {
                let code = insn.code();
                if code & 0x07 == 0x05 && code & 0xf0 != 0x80 && code & 0xf0 != 0x90 {
                    let t = i as isize + 1 + insn.off() as isize;
                    assert!(insn.off() > 0 && (t as usize) < p.len(), "jump at {i} to {t}");
                }
            }
            assert_eq!(p.last().map(|i| i.code()), Some(0x95));
        }
    }

    #[test]
    fn counts_subtract_and_say_what_the_ring_dropped() {
        let a = WireCounts { arrived: 1000, taken: 900, unsteered: 10 };
        assert_eq!(a.dropped(), 90);
        let b = WireCounts { arrived: 1500, taken: 1300, unsteered: 10 };
        assert_eq!(b.since(&a), WireCounts { arrived: 500, taken: 400, unsteered: 0 });
        assert_eq!(b.since(&a).dropped(), 100);
    }
}

#[cfg(test)]
mod kernel_tests {
    use super::*;
    use crate::sys::bpf::testkit::{is_root, TestFrame};

    fn frame(ipv6: bool) -> Vec<u8> {
        let mut f = vec![0u8; 128];
        let n = TestFrame { ipv6, ..Default::default() }.build(&mut f);
        f.truncate(n);
        f
    }

    fn stats_of(stats: &OwnedFd) -> Vec<u64> {
        bpf::percpu_u64_sum(stats, 0, FIELDS).expect("reading the counters")
    }

    #[test]
    fn the_wire_counts_and_redirects_into_a_ring_or_says_it_could_not() {
        if !is_root() {
            eprintln!("skipped: loading BPF programs needs root");
            return;
        }
        let stats = bpf::percpu_array_create(1, (FIELDS * 8) as u32, WIRE_STATS_MAP).expect("PERCPU_ARRAY");
        let cpumap = bpf::cpumap_create(bpf::possible_cpus() as u32, "netrig_test").expect("CPUMAP");
        let rx = bpf::prog_load_xdp_as(
            &rx_program(stats.as_raw_fd()),
            WIRE_RX_PROG_NAME,
            bpf::BPF_XDP_CPUMAP,
            bpf::BPF_F_XDP_HAS_FRAGS,
        )
        .expect("the ring program passes the verifier");
        let load = |cpus: &[u32], spread: Option<RawFd>| {
            let p = wire_program(stats.as_raw_fd(), cpumap.as_raw_fd(), cpus, spread);
            bpf::prog_load_xdp_as(&p, WIRE_PROG_NAME, bpf::BPF_XDP, bpf::BPF_F_XDP_HAS_FRAGS).expect("verifier")
        };
        // No ring on CPU 0 yet: the frame cannot be steered and goes to the stack, counted.
        let one = load(&[0], None);
        assert_eq!(bpf::prog_test_run(&one, &frame(false)).expect("test run"), bpf::XDP_PASS as u32);
        assert_eq!(stats_of(&stats), vec![1, 0, 1]);
        bpf::cpumap_set(&cpumap, 0, 64, &rx).expect("a ring on CPU 0");
        for v6 in [false, true] {
            assert_eq!(bpf::prog_test_run(&one, &frame(v6)).expect("test run"), bpf::XDP_REDIRECT as u32);
        }
        assert_eq!(stats_of(&stats), vec![3, 0, 1]);
        // Several CPUs: the flow hash picks one of them through the spread map (every slot a ring here).
        let spread = bpf::array_u32_create(3, "netrig_test").expect("ARRAY");
        for i in 0..3 {
            bpf::array_u32_set(&spread, i, 0).expect("slot");
        }
        let three = load(&[0, 0, 0], Some(spread.as_raw_fd()));
        for v6 in [false, true] {
            assert_eq!(bpf::prog_test_run(&three, &frame(v6)).expect("test run"), bpf::XDP_REDIRECT as u32);
        }
        assert_eq!(stats_of(&stats), vec![5, 0, 1]);
    }
}
