//! The in-kernel forwarder (`netrig forward --backend xdp`): one hand-assembled XDP program per
//! port, a DEVMAP of the egress interfaces and `bpf_redirect_map`, no user-space worker.
//!
//! Per ingress port `p` the program ([`forward_program`]) counts the frame (PERCPU_ARRAY slot `p`:
//! rx frames and bytes), rewrites its MACs as the mode says (a bounds check first, as the verifier
//! demands; a frame shorter than the two MACs goes on unchanged, like the user-space
//! [`crate::run::forward::Rewrite`]) and then
//! - `io`, `mac`, `l2fwd`: `bpf_redirect_map(devmap, egress(p), XDP_DROP)`, the DEVMAP's slot `e`
//!   holding port `e`'s ifindex;
//! - `macswap`: `XDP_TX` (back out of the ingress port);
//! - `rxonly`: `XDP_DROP`.
//!
//! Forwarded frames (the verdict is XDP_REDIRECT or XDP_TX) and bytes go to fields 2 and 3 of the
//! slot, frames whose redirect failed in the program (empty DEVMAP slot) to field 4. A frame the
//! kernel accepted for redirection can still be lost after the program (the egress device refused
//! it); on veth that is the peer rule below, and the kernel counts those in the egress veth's
//! `ethtool -S` (`peer_tq_xdp_xmit_err`), not here.
//!
//! The program serves every receive queue of its port (it runs in whatever context the driver
//! receives in, on the CPU that receives): there are no queues or worker CPUs to choose.
//!
//! Programs are attached through BPF links like the AF_XDP steering program: the links, programs
//! and maps are fds of this process, released when [`XdpRedirect`] drops — or when the process
//! dies, however it dies.
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::error::PortError;
use crate::sys::bpf::{self, Asm, Insn, Reg, Size, XdpMode, BPF_FUNC_MAP_LOOKUP_ELEM, BPF_FUNC_REDIRECT_MAP};

/// Name of the in-kernel forwarding program (`bpftool prog` shows it).
pub const XDP_FWD_PROG_NAME: &str = "netrig_xdpfwd";
/// u64 fields per port in the statistics map.
pub const STAT_FIELDS: usize = 5;
/// Field indexes of a port's statistics.
pub const RX_FRAMES: usize = 0;
pub const RX_BYTES: usize = 1;
pub const FWD_FRAMES: usize = 2;
pub const FWD_BYTES: usize = 3;
pub const FWD_FAILED: usize = 4;

/// What the program of one ingress port does after counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `bpf_redirect_map(devmap, slot, XDP_DROP)`.
    Redirect(u32),
    /// `XDP_TX`: back out of the ingress port.
    Tx,
    /// `XDP_DROP`: count only.
    Drop,
}

/// MAC rewrite in the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacRewrite {
    None,
    Set { dst: [u8; 6], src: [u8; 6] },
    Swap,
}

fn imm4(b: &[u8]) -> i32 {
    i32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

fn imm2(b: &[u8]) -> i32 {
    u16::from_ne_bytes([b[0], b[1]]) as i32
}

/// The forwarding program of ingress port `port`. `stats_fd` is the PERCPU_ARRAY (value
/// [`STAT_FIELDS`] u64), `devmap_fd` the DEVMAP (only read for [`Action::Redirect`]).
pub fn forward_program(port: u32, stats_fd: RawFd, devmap_fd: RawFd, rewrite: MacRewrite, action: Action) -> Vec<Insn> {
    use Reg::*;
    let mut a = Asm::new();
    a.mov_reg(R6, R1)
        .load(Size::W, R2, R6, 0) // data
        .load(Size::W, R7, R6, 4) // data_end
        .sub_reg(R7, R2) // R7 = frame length (kept across calls)
        .store_imm(Size::W, R10, -4, port as i32)
        .load_map_fd(R1, stats_fd)
        .mov_reg(R2, R10)
        .add_imm(R2, -4)
        .call(BPF_FUNC_MAP_LOOKUP_ELEM)
        .jeq_imm(R0, 0, "drop") // the slot always exists; the verifier wants the check
        .mov_reg(R8, R0)
        .load(Size::DW, R1, R8, (RX_FRAMES * 8) as i16)
        .add_imm(R1, 1)
        .store(Size::DW, R8, (RX_FRAMES * 8) as i16, R1)
        .load(Size::DW, R1, R8, (RX_BYTES * 8) as i16)
        .add_reg(R1, R7)
        .store(Size::DW, R8, (RX_BYTES * 8) as i16, R1);
    // Action::Drop falls through to "drop".
    if action != Action::Drop {
        if rewrite != MacRewrite::None {
            // The call clobbered R2-R5: read the packet pointers again and check 12 bytes.
            a.load(Size::W, R2, R6, 0).load(Size::W, R3, R6, 4).mov_reg(R4, R2).add_imm(R4, 12).jgt_reg(R4, R3, "send");
            match rewrite {
                MacRewrite::Set { dst, src } => {
                    a.store_imm(Size::W, R2, 0, imm4(&dst[..4]))
                        .store_imm(Size::H, R2, 4, imm2(&dst[4..]))
                        .store_imm(Size::W, R2, 6, imm4(&src[..4]))
                        .store_imm(Size::H, R2, 10, imm2(&src[4..]));
                }
                MacRewrite::Swap => {
                    a.load(Size::W, R1, R2, 0)
                        .load(Size::H, R3, R2, 4)
                        .load(Size::W, R4, R2, 6)
                        .load(Size::H, R5, R2, 10)
                        .store(Size::W, R2, 0, R4)
                        .store(Size::H, R2, 4, R5)
                        .store(Size::W, R2, 6, R1)
                        .store(Size::H, R2, 10, R3);
                }
                MacRewrite::None => {}
            }
        }
        a.label("send");
        match action {
            Action::Redirect(slot) => {
                a.load_map_fd(R1, devmap_fd)
                    .mov_imm(R2, slot as i32)
                    .mov_imm(R3, bpf::XDP_DROP) // the verdict when the slot is empty
                    .call(BPF_FUNC_REDIRECT_MAP)
                    .mov_reg(R9, R0)
                    .jne_imm(R9, bpf::XDP_REDIRECT, "failed");
            }
            Action::Tx => {
                a.mov_imm(R9, bpf::XDP_TX);
            }
            Action::Drop => {}
        }
        a.label("count")
            .load(Size::DW, R1, R8, (FWD_FRAMES * 8) as i16)
            .add_imm(R1, 1)
            .store(Size::DW, R8, (FWD_FRAMES * 8) as i16, R1)
            .load(Size::DW, R1, R8, (FWD_BYTES * 8) as i16)
            .add_reg(R1, R7)
            .store(Size::DW, R8, (FWD_BYTES * 8) as i16, R1)
            .mov_reg(R0, R9)
            .exit();
        if matches!(action, Action::Redirect(_)) {
            a.label("failed")
                .load(Size::DW, R1, R8, (FWD_FAILED * 8) as i16)
                .add_imm(R1, 1)
                .store(Size::DW, R8, (FWD_FAILED * 8) as i16, R1)
                .mov_reg(R0, R9)
                .exit();
        }
    }
    a.label("drop").mov_imm(R0, bpf::XDP_DROP).exit();
    a.finish()
}

/// One port of the in-kernel forwarder.
#[derive(Debug, Clone)]
pub struct XdpPort {
    pub ifname: String,
    pub ifindex: u32,
    pub rewrite: MacRewrite,
    pub action: Action,
}

/// The attached programs and their maps. Field order is drop order: links first (detaching the
/// programs), then the programs, then the maps.
pub struct XdpRedirect {
    _links: Vec<OwnedFd>,
    _progs: Vec<OwnedFd>,
    stats: OwnedFd,
    _devmap: OwnedFd,
    /// Per port: the XDP mode attached and what was tried.
    pub notes: Vec<(XdpMode, String)>,
}

impl XdpRedirect {
    /// Create the maps, load one program per port and attach them (native XDP first, generic if
    /// the driver refuses; `want` forces one). Call it in the ports' network namespace: the
    /// DEVMAP's ifindexes and the links resolve there.
    pub fn attach(ports: &[XdpPort], want: Option<XdpMode>) -> Result<XdpRedirect, PortError> {
        let first = ports.first().map(|p| p.ifname.as_str()).unwrap_or("");
        let err = |ifname: &str, what: &str, e: io::Error| match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) if what != "load" => {
                PortError::PermissionDenied { ifname: ifname.to_string(), what: format!("BPF ({what})") }
            }
            _ => PortError::Unsupported {
                ifname: ifname.to_string(),
                backend: "xdp".into(),
                reason: format!("cannot {what} the XDP forwarding program: {e}"),
            },
        };
        let n = ports.len() as u32;
        let stats = bpf::percpu_array_create(n, (STAT_FIELDS * 8) as u32, "netrig_fwdstat")
            .map_err(|e| err(first, "create the statistics map of", e))?;
        let devmap = bpf::devmap_create(n).map_err(|e| err(first, "create the DEVMAP of", e))?;
        for (i, p) in ports.iter().enumerate() {
            bpf::devmap_set(&devmap, i as u32, p.ifindex).map_err(|e| err(&p.ifname, "fill the DEVMAP of", e))?;
        }
        let mut progs = Vec::with_capacity(ports.len());
        for (i, p) in ports.iter().enumerate() {
            let insns = forward_program(i as u32, stats.as_raw_fd(), devmap.as_raw_fd(), p.rewrite, p.action);
            progs.push(bpf::prog_load_xdp(&insns, XDP_FWD_PROG_NAME).map_err(|e| err(&p.ifname, "load", e))?);
        }
        let modes: &[XdpMode] = match want {
            Some(m) => {
                if m == XdpMode::Drv {
                    &[XdpMode::Drv]
                } else {
                    &[XdpMode::Skb]
                }
            }
            None => &[XdpMode::Drv, XdpMode::Skb],
        };
        let mut links = Vec::with_capacity(ports.len());
        let mut notes = Vec::with_capacity(ports.len());
        for (p, prog) in ports.iter().zip(&progs) {
            let mut why = Vec::new();
            let mut done = false;
            for &mode in modes {
                match bpf::link_create_xdp(prog, p.ifindex, mode) {
                    Ok(link) => {
                        links.push(link);
                        let mut note = format!("in-kernel XDP_REDIRECT, XDP {} via BPF link", mode.as_str());
                        if !why.is_empty() {
                            note += &format!(" ({})", why.join("; "));
                        }
                        notes.push((mode, note));
                        done = true;
                        break;
                    }
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EEXIST)) => {
                        return Err(PortError::Other {
                            ifname: p.ifname.clone(),
                            message: format!(
                                "another XDP program is attached ({e}); see `ip link show dev {0}` and detach it \
                                 (`ip link set dev {0} xdp off`) or stop the process that owns it",
                                p.ifname
                            ),
                        });
                    }
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) => {
                        return Err(err(&p.ifname, "attach", e));
                    }
                    Err(e) => why.push(format!("{} refused: {e}", mode.as_str())),
                }
            }
            if !done {
                return Err(PortError::Unsupported {
                    ifname: p.ifname.clone(),
                    backend: "xdp".into(),
                    reason: format!("cannot attach the XDP forwarding program: {}", why.join("; ")),
                });
            }
        }
        Ok(XdpRedirect { _links: links, _progs: progs, stats, _devmap: devmap, notes })
    }

    /// Port `p`'s counters summed over the CPUs ([`STAT_FIELDS`] values; zeros if unreadable).
    pub fn counters(&self, p: usize) -> [u64; STAT_FIELDS] {
        let mut out = [0u64; STAT_FIELDS];
        if let Ok(v) = bpf::percpu_u64_sum(&self.stats, p as u32, STAT_FIELDS) {
            out.copy_from_slice(&v);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_end_in_exit_and_jump_inside() {
        let rw =
            [MacRewrite::None, MacRewrite::Swap, MacRewrite::Set { dst: [2, 0, 0, 0, 0, 1], src: [2, 0, 0, 0, 0, 2] }];
        for rewrite in rw {
            for action in [Action::Redirect(1), Action::Tx, Action::Drop] {
                let p = forward_program(0, 3, 4, rewrite, action);
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
    }

    #[test]
    fn mac_immediates_store_the_bytes_in_wire_order() {
        let dst = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
        let mut mem = [0u8; 6];
        mem[..4].copy_from_slice(&imm4(&dst[..4]).to_ne_bytes());
        mem[4..].copy_from_slice(&(imm2(&dst[4..]) as u16).to_ne_bytes());
        assert_eq!(mem, dst);
    }
}

#[cfg(test)]
mod kernel_tests {
    use super::*;
    use crate::sys::bpf::testkit::{is_root, TestFrame, MAC_A, MAC_B};

    fn maps() -> (OwnedFd, OwnedFd) {
        let stats = bpf::percpu_array_create(2, (STAT_FIELDS * 8) as u32, "netrig_test").expect("PERCPU_ARRAY");
        let devmap = bpf::devmap_create(2).expect("DEVMAP");
        bpf::devmap_set(&devmap, 1, 1).expect("lo's ifindex into slot 1");
        (stats, devmap)
    }

    #[test]
    fn every_variant_passes_the_verifier_rewrites_and_counts() {
        if !is_root() {
            eprintln!("skipped: loading BPF programs needs root");
            return;
        }
        let mut buf = vec![0u8; 128];
        let n = TestFrame::default().build(&mut buf);
        let frame = &buf[..n];
        let (dst, src) = ([2, 0, 0, 0, 0x4e, 0x99], [2, 0, 0, 0, 0x4e, 0x98]);
        type Case = (MacRewrite, Action, i32, [u8; 6], [u8; 6]);
        let cases: Vec<Case> = vec![
            (MacRewrite::None, Action::Redirect(1), bpf::XDP_REDIRECT, MAC_B, MAC_A),
            (MacRewrite::Set { dst, src }, Action::Redirect(1), bpf::XDP_REDIRECT, dst, src),
            (MacRewrite::Swap, Action::Tx, bpf::XDP_TX, MAC_A, MAC_B),
            (MacRewrite::Swap, Action::Redirect(1), bpf::XDP_REDIRECT, MAC_A, MAC_B),
            (MacRewrite::None, Action::Drop, bpf::XDP_DROP, MAC_B, MAC_A),
            (MacRewrite::None, Action::Redirect(0), bpf::XDP_DROP, MAC_B, MAC_A), // empty slot
        ];
        for (i, (rewrite, action, verdict, want_dst, want_src)) in cases.into_iter().enumerate() {
            let (stats, devmap) = maps();
            let insns = forward_program(0, stats.as_raw_fd(), devmap.as_raw_fd(), rewrite, action);
            let prog = bpf::prog_load_xdp(&insns, "netrig_test").unwrap_or_else(|e| panic!("case {i}: {e}"));
            let (v, out) = bpf::prog_test_run_out(&prog, frame).expect("test run");
            assert_eq!(v, verdict as u32, "case {i} verdict");
            assert_eq!(&out[..6], &want_dst, "case {i} destination MAC");
            assert_eq!(&out[6..12], &want_src, "case {i} source MAC");
            assert_eq!(&out[12..], &frame[12..], "case {i}: only the MACs change");
            let c = bpf::percpu_u64_sum(&stats, 0, STAT_FIELDS).expect("counters");
            assert_eq!((c[RX_FRAMES], c[RX_BYTES]), (1, n as u64), "case {i} rx counters");
            let forwarded = matches!(verdict, bpf::XDP_REDIRECT | bpf::XDP_TX) as u64;
            assert_eq!((c[FWD_FRAMES], c[FWD_BYTES]), (forwarded, forwarded * n as u64), "case {i} fwd");
            assert_eq!(c[FWD_FAILED], (action == Action::Redirect(0)) as u64, "case {i} failed");
        }
    }
}
