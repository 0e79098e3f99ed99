//! The `bpf(2)` calls netrig needs, without libbpf: an XSKMAP, the hand-assembled XDP program
//! that steers netrig test frames to AF_XDP sockets, and a BPF link that attaches it.
//!
//! The program is a dozen instructions written with the tiny [`Asm`] encoder below. It redirects
//! a frame to the XSK of its receive queue only when the frame carries the netrig signature:
//! Ethernet (optionally one 802.1Q tag), IPv4 without options and not a non-first fragment, or
//! IPv6 with UDP as the next header, then UDP, then the 2-byte magic [`SIGNATURE_MAGIC`] at the
//! start of the UDP payload. Everything else (ARP, the host's own traffic, and signature frames
//! on a queue without a socket) gets `XDP_PASS`.
//! With stamping on, a matching frame also gets 16 bytes of XDP metadata holding the kernel's
//! receive time ([`RX_STAMP_LEN`]), which the AF_XDP receiver reads from in front of the frame.
//!
//! The program is attached through `BPF_LINK_CREATE`: the link is an fd owned by the process and
//! never pinned, so the kernel detaches the program when netrig exits or crashes.
use std::ffi::CString;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The two bytes at the start of the UDP payload of every netrig test frame ("NR"): the
/// signature's, from `netrig-wire`.
pub use netrig_wire::signature::MAGIC as SIGNATURE_MAGIC;
use netrig_wire::{ethernet, ipv4, ipv6, udp};

// bpf(2) commands.
const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_LOOKUP_ELEM: u32 = 1;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_MAP_DELETE_ELEM: u32 = 3;
const BPF_PROG_LOAD: u32 = 5;
const BPF_PROG_TEST_RUN: u32 = 10;
const BPF_PROG_GET_FD_BY_ID: u32 = 13;
const BPF_MAP_GET_FD_BY_ID: u32 = 14;
const BPF_OBJ_GET_INFO_BY_FD: u32 = 15;
const BPF_RAW_TRACEPOINT_OPEN: u32 = 17;
const BPF_LINK_CREATE: u32 = 28;

const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
const BPF_MAP_TYPE_DEVMAP: u32 = 14;
const BPF_MAP_TYPE_CPUMAP: u32 = 16;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// A program run by a tracepoint perf event (`PERF_TYPE_TRACEPOINT`).
pub const BPF_PROG_TYPE_TRACEPOINT: u32 = 5;
/// A program run by a sampling perf event (e.g. the software CPU clock's timer).
pub const BPF_PROG_TYPE_PERF_EVENT: u32 = 7;
/// A program whose context is an array of u64 arguments: [`prog_test_run_ctx`] runs it on one the
/// caller writes (the stall watch's tests run its tracepoint programs' logic that way).
pub const BPF_PROG_TYPE_RAW_TRACEPOINT: u32 = 17;
/// `expected_attach_type` of a program attached to an interface's XDP hook.
pub const BPF_XDP: u32 = 37;
/// `expected_attach_type` of a program run by a CPUMAP entry (`enum bpf_attach_type`).
pub const BPF_XDP_CPUMAP: u32 = 35;
/// `BPF_F_XDP_HAS_FRAGS`: the program accepts multi-buffer frames (MTU above a page).
pub const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
/// `bpf_map_lookup_elem`.
pub const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
/// `bpf_ktime_get_ns`: `CLOCK_MONOTONIC` ns.
pub const BPF_FUNC_KTIME_GET_NS: i32 = 5;
/// `bpf_get_smp_processor_id`.
pub const BPF_FUNC_GET_SMP_PROCESSOR_ID: i32 = 8;
/// `bpf_redirect_map`.
pub const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `bpf_probe_read_kernel`.
pub const BPF_FUNC_PROBE_READ_KERNEL: i32 = 113;
const BPF_FUNC_XDP_ADJUST_HEAD: i32 = 44;
const BPF_FUNC_XDP_ADJUST_META: i32 = 54;

/// Bytes the steering program writes in front of a stamped frame: the receive time
/// (`bpf_ktime_get_ns`, CLOCK_MONOTONIC, u64 native-endian) then [`RX_STAMP_MAGIC`] (u32
/// native-endian) and 4 zero bytes. As XDP metadata ([`Stamp::Meta`]) AF_XDP copies them into
/// the UMEM frame just before the frame data (copy and zero-copy mode alike); as a prefix
/// ([`Stamp::Head`]) they are the first bytes of the data.
pub const RX_STAMP_LEN: usize = 16;

/// Where the steering program puts a matching frame's receive time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    /// No stamp: user space stamps per batch.
    Off,
    /// In XDP metadata (`bpf_xdp_adjust_meta`): the frame's data is untouched.
    Meta,
    /// In front of the frame, inside its data (`bpf_xdp_adjust_head`), for a kernel that keeps
    /// `bpf_xdp_adjust_meta` from XDP programs. The prefix's last bytes are zero where an
    /// unprefixed frame the program redirects has its ethertype (IPv4, IPv6 or 802.1Q), so a
    /// prefix is never taken for a frame, nor a frame for a prefix.
    Head,
}
/// Marks valid metadata ("NRts"): user space clears it after reading, so a stale stamp in a
/// reused UMEM frame is never taken for a fresh one.
pub const RX_STAMP_MAGIC: u32 = 0x4E52_7473;

/// XDP return codes.
pub const XDP_DROP: i32 = 1;
pub const XDP_PASS: i32 = 2;
pub const XDP_TX: i32 = 3;
pub const XDP_REDIRECT: i32 = 4;

/// `XDP_FLAGS_SKB_MODE` / `XDP_FLAGS_DRV_MODE` for the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// Native (driver) XDP.
    Drv,
    /// Generic XDP in the stack (`xdpgeneric`), slower but works everywhere.
    Skb,
}

impl XdpMode {
    fn flags(self) -> u32 {
        match self {
            XdpMode::Skb => 1 << 1,
            XdpMode::Drv => 1 << 2,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            XdpMode::Drv => "native (drv)",
            XdpMode::Skb => "generic (skb)",
        }
    }
}

/// The 144-byte `union bpf_attr`, filled field by field at the offsets of `linux/bpf.h`.
#[repr(C, align(8))]
struct Attr([u8; 144]);

impl Attr {
    fn new() -> Self {
        Attr([0; 144])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn name(&mut self, off: usize, name: &str) -> &mut Self {
        let n = name.len().min(15);
        self.0[off..off + n].copy_from_slice(&name.as_bytes()[..n]);
        self
    }
    fn get_u32(&self, off: usize) -> u32 {
        u32::from_ne_bytes([self.0[off], self.0[off + 1], self.0[off + 2], self.0[off + 3]])
    }
}

fn sys_bpf(cmd: u32, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: attr is a live, zero-padded 144-byte bpf_attr laid out per linux/bpf.h; the kernel
    // reads at most `size` bytes from it and writes only output fields inside it. Pointers stored
    // in it (insns, license, log, keys) point at buffers that outlive this call.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd as libc::c_long, attr as *mut Attr, mem::size_of::<Attr>()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc)
}

fn sys_bpf_fd(cmd: u32, attr: &mut Attr) -> io::Result<OwnedFd> {
    let fd = sys_bpf(cmd, attr)? as RawFd;
    // SAFETY: the kernel returned a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Create an XSKMAP with `entries` slots (one per receive queue).
pub fn xskmap_create(entries: u32) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, BPF_MAP_TYPE_XSKMAP).u32(4, 4).u32(8, 4).u32(12, entries.max(1)).name(28, "netrig_xsks");
    sys_bpf_fd(BPF_MAP_CREATE, &mut a)
}

/// Put the AF_XDP socket `xsk_fd` into slot `queue` of an XSKMAP.
pub fn xskmap_set(map: &OwnedFd, queue: u32, xsk_fd: RawFd) -> io::Result<()> {
    let key = queue;
    let value = xsk_fd as u32;
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32).u64(8, &key as *const u32 as u64).u64(16, &value as *const u32 as u64).u64(24, 0);
    sys_bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// Clear slot `queue` of an XSKMAP.
pub fn xskmap_clear(map: &OwnedFd, queue: u32) -> io::Result<()> {
    let key = queue;
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32).u64(8, &key as *const u32 as u64);
    sys_bpf(BPF_MAP_DELETE_ELEM, &mut a).map(|_| ())
}

/// Create a DEVMAP (`BPF_MAP_TYPE_DEVMAP`, key u32 → egress ifindex u32) with `entries` slots.
pub fn devmap_create(entries: u32) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, BPF_MAP_TYPE_DEVMAP).u32(4, 4).u32(8, 4).u32(12, entries.max(1)).name(28, "netrig_devmap");
    sys_bpf_fd(BPF_MAP_CREATE, &mut a)
}

/// Put egress `ifindex` into slot `key` of a DEVMAP. The kernel resolves the ifindex in the
/// caller's network namespace: call it in the namespace of the interface.
pub fn devmap_set(map: &OwnedFd, key: u32, ifindex: u32) -> io::Result<()> {
    let value = ifindex;
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32).u64(8, &key as *const u32 as u64).u64(16, &value as *const u32 as u64).u64(24, 0);
    sys_bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// Create a CPUMAP with `entries` slots (key: a CPU number; value: `struct bpf_cpumap_val`).
pub fn cpumap_create(entries: u32, name: &str) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, BPF_MAP_TYPE_CPUMAP).u32(4, 4).u32(8, 8).u32(12, entries.max(1)).name(28, name);
    sys_bpf_fd(BPF_MAP_CREATE, &mut a)
}

/// Give CPU `cpu` a queue of `qsize` frames in a CPUMAP, drained by a kernel thread on that CPU
/// that first runs `prog` (loaded with [`BPF_XDP_CPUMAP`]) on every frame.
pub fn cpumap_set(map: &OwnedFd, cpu: u32, qsize: u32, prog: &OwnedFd) -> io::Result<()> {
    let value: [u32; 2] = [qsize, prog.as_raw_fd() as u32];
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32).u64(8, &cpu as *const u32 as u64).u64(16, value.as_ptr() as u64).u64(24, 0);
    sys_bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// Create an ARRAY of `entries` u32 values.
pub fn array_u32_create(entries: u32, name: &str) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, BPF_MAP_TYPE_ARRAY).u32(4, 4).u32(8, 4).u32(12, entries.max(1)).name(28, name);
    sys_bpf_fd(BPF_MAP_CREATE, &mut a)
}

/// Set slot `key` of a u32 ARRAY.
pub fn array_u32_set(map: &OwnedFd, key: u32, value: u32) -> io::Result<()> {
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32).u64(8, &key as *const u32 as u64).u64(16, &value as *const u32 as u64).u64(24, 0);
    sys_bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// Create an ARRAY of `entries` values of `value_size` bytes (a multiple of 8).
pub fn array_create(entries: u32, value_size: u32, name: &str) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, BPF_MAP_TYPE_ARRAY).u32(4, 4).u32(8, value_size).u32(12, entries.max(1)).name(28, name);
    sys_bpf_fd(BPF_MAP_CREATE, &mut a)
}

/// `BPF_F_MMAPABLE`: an ARRAY user space maps into its memory.
const BPF_F_MMAPABLE: u32 = 1 << 10;

/// An ARRAY of `entries` values of `value_size` bytes (a multiple of 8) that user space reads
/// through its memory ([`MappedArray`]), with no system call.
///
/// Why: a map's system calls (`BPF_MAP_LOOKUP_ELEM`, `_BATCH`) hold the CPU's `bpf_prog_active`
/// while they copy, preemptibly, and the kernel skips every perf-event and tracepoint program on
/// that CPU meanwhile (docs/performance.md, *The stall watch*).
pub fn mapped_array(entries: u32, value_size: u32, name: &str) -> io::Result<MappedArray> {
    let mut a = Attr::new();
    a.u32(0, BPF_MAP_TYPE_ARRAY).u32(4, 4).u32(8, value_size).u32(12, entries.max(1)).u32(16, BPF_F_MMAPABLE);
    a.name(28, name);
    let fd = sys_bpf_fd(BPF_MAP_CREATE, &mut a)?;
    let len = entries.max(1) as usize * value_size as usize;
    // SAFETY: a fresh shared read-only mapping of the map's values, `len` bytes; unmapped on drop.
    let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(MappedArray { fd, ptr: ptr.cast(), len })
}

/// A mapped ARRAY ([`mapped_array`]): its values, read as the BPF programs write them.
pub struct MappedArray {
    pub fd: OwnedFd,
    ptr: *const u64,
    len: usize,
}

// SAFETY: the mapping is read only through atomic loads, from any thread.
unsafe impl Send for MappedArray {}
unsafe impl Sync for MappedArray {}

impl MappedArray {
    /// The u64 at byte `off` (a multiple of 8, inside the map), as the programs last wrote it.
    pub fn u64_at(&self, off: usize) -> u64 {
        assert!(off.is_multiple_of(8) && off + 8 <= self.len, "offset {off} outside a {}-byte map", self.len);
        // SAFETY: in bounds and 8-aligned (the mapping is page-aligned); programs write it
        // concurrently, hence an atomic load.
        unsafe { std::sync::atomic::AtomicU64::from_ptr(self.ptr.add(off / 8).cast_mut()) }
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// `len` bytes from `off` (multiples of 8), u64 by u64.
    pub fn copy(&self, off: usize, len: usize) -> Vec<u8> {
        (off..off + len).step_by(8).flat_map(|o| self.u64_at(o).to_ne_bytes()).collect()
    }
}

impl Drop for MappedArray {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `mapped_array`, of `len` bytes, unmapped once.
        unsafe { libc::munmap(self.ptr.cast_mut().cast(), self.len) };
    }
}

/// Create a HASH of at most `entries` u32 keys to values of `value_size` bytes.
pub fn hash_u32_create(entries: u32, value_size: u32, name: &str) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, BPF_MAP_TYPE_HASH).u32(4, 4).u32(8, value_size).u32(12, entries.max(1)).name(28, name);
    sys_bpf_fd(BPF_MAP_CREATE, &mut a)
}

/// Copy the value of u32 `key` of `map` into `value` (its whole size).
pub fn map_lookup_u32(map: &OwnedFd, key: u32, value: &mut [u8]) -> io::Result<()> {
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32).u64(8, &key as *const u32 as u64).u64(16, value.as_mut_ptr() as u64);
    sys_bpf(BPF_MAP_LOOKUP_ELEM, &mut a).map(|_| ())
}

/// Set u32 `key` of `map` to `value` (its whole size).
pub fn map_update_u32(map: &OwnedFd, key: u32, value: &[u8]) -> io::Result<()> {
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32).u64(8, &key as *const u32 as u64).u64(16, value.as_ptr() as u64).u64(24, 0);
    sys_bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// Remove u32 `key` from a HASH.
pub fn map_delete_u32(map: &OwnedFd, key: u32) -> io::Result<()> {
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32).u64(8, &key as *const u32 as u64);
    sys_bpf(BPF_MAP_DELETE_ELEM, &mut a).map(|_| ())
}

/// Create a PERCPU_ARRAY of `entries` values of `value_size` bytes (a multiple of 8).
pub fn percpu_array_create(entries: u32, value_size: u32, name: &str) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, BPF_MAP_TYPE_PERCPU_ARRAY).u32(4, 4).u32(8, value_size).u32(12, entries.max(1)).name(28, name);
    sys_bpf_fd(BPF_MAP_CREATE, &mut a)
}

/// The CPUs a per-CPU map holds a value for (`/sys/devices/system/cpu/possible`, e.g. `0-1`).
pub fn possible_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| {
            s.trim()
                .split(',')
                .map(|r| r.rsplit('-').next().and_then(|x| x.parse::<usize>().ok()))
                .try_fold(0usize, |m, v| v.map(|v| m.max(v + 1)))
        })
        .unwrap_or(1)
        .max(1)
}

/// The value of slot `key` of a PERCPU_ARRAY of u64 fields (`fields` per value), summed over every
/// possible CPU.
pub fn percpu_u64_sum(map: &OwnedFd, key: u32, fields: usize) -> io::Result<Vec<u64>> {
    let cpus = possible_cpus();
    let mut buf = vec![0u64; cpus * fields];
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32).u64(8, &key as *const u32 as u64).u64(16, buf.as_mut_ptr() as u64);
    sys_bpf(BPF_MAP_LOOKUP_ELEM, &mut a)?;
    let mut out = vec![0u64; fields];
    for c in buf.chunks(fields) {
        for (o, v) in out.iter_mut().zip(c) {
            *o += v;
        }
    }
    Ok(out)
}

/// Load an XDP program. On a verifier rejection the error text carries the verifier log.
pub fn prog_load_xdp(insns: &[Insn], name: &str) -> io::Result<OwnedFd> {
    prog_load_xdp_as(insns, name, BPF_XDP, 0)
}

/// Load an XDP program for attach type `attach` (`BPF_XDP`, [`BPF_XDP_CPUMAP`]) with `flags`
/// (e.g. [`BPF_F_XDP_HAS_FRAGS`]).
pub fn prog_load_xdp_as(insns: &[Insn], name: &str, attach: u32, flags: u32) -> io::Result<OwnedFd> {
    prog_load(BPF_PROG_TYPE_XDP, insns, name, attach, flags)
}

/// Load a program of type `prog_type` (e.g. [`BPF_PROG_TYPE_PERF_EVENT`]). On a verifier
/// rejection the error text carries the verifier log.
pub fn prog_load(prog_type: u32, insns: &[Insn], name: &str, attach: u32, flags: u32) -> io::Result<OwnedFd> {
    let license = CString::new("GPL").expect("static string has no NUL");
    let load = |log: Option<&mut Vec<u8>>| {
        let mut a = Attr::new();
        a.u32(0, prog_type)
            .u32(4, insns.len() as u32)
            .u64(8, insns.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .u32(44, flags)
            .name(48, name)
            .u32(68, attach);
        if let Some(buf) = log {
            a.u32(24, 1).u32(28, buf.len() as u32).u64(32, buf.as_mut_ptr() as u64);
        }
        sys_bpf_fd(BPF_PROG_LOAD, &mut a)
    };
    match load(None) {
        Ok(fd) => Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::EACCES) || e.raw_os_error() == Some(libc::EINVAL) => {
            let mut log = vec![0u8; 64 * 1024];
            let again = load(Some(&mut log));
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]).trim().to_string();
            match again {
                Ok(fd) => Ok(fd),
                Err(e2) => Err(io::Error::new(e2.kind(), format!("{e2}; verifier log: {text}"))),
            }
        }
        Err(e) => Err(e),
    }
}

/// The verifier's verdict in a load error: its log's last line that says why (the instruction
/// counts that end the log say nothing), else the error itself.
pub(crate) fn verifier_reason(e: &io::Error) -> String {
    let text = e.to_string();
    let Some((_, log)) = text.split_once("verifier log: ") else { return text };
    let why = log.lines().rev().find(|l| !l.starts_with("processed ") && !l.trim().is_empty());
    why.map_or(text.clone(), |l| l.rsplit_once("; ").map_or(l, |(_, w)| w).trim().to_string())
}

/// Attach an XDP program to `ifindex` through a BPF link (detached when the fd is closed).
pub fn link_create_xdp(prog: &OwnedFd, ifindex: u32, mode: XdpMode) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32).u32(4, ifindex).u32(8, BPF_XDP).u32(12, mode.flags());
    sys_bpf_fd(BPF_LINK_CREATE, &mut a)
}

/// Run an XDP program once on `frame` (BPF_PROG_TEST_RUN) and return its verdict.
pub fn prog_test_run(prog: &OwnedFd, frame: &[u8]) -> io::Result<u32> {
    prog_test_run_out(prog, frame).map(|(v, _)| v)
}

/// Like [`prog_test_run`], also returning the output: metadata (if the program added any)
/// followed by the frame.
pub fn prog_test_run_out(prog: &OwnedFd, frame: &[u8]) -> io::Result<(u32, Vec<u8>)> {
    let mut out = vec![0u8; frame.len() + 512];
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32)
        .u32(8, frame.len() as u32)
        .u32(12, out.len() as u32)
        .u64(16, frame.as_ptr() as u64)
        .u64(24, out.as_mut_ptr() as u64)
        .u32(32, 1);
    sys_bpf(BPF_PROG_TEST_RUN, &mut a)?;
    out.truncate((a.get_u32(12) as usize).min(out.len()));
    Ok((a.get_u32(4), out))
}

/// Attach a [`BPF_PROG_TYPE_RAW_TRACEPOINT`] program to the kernel tracepoint `name` (e.g.
/// `xdp_cpumap_enqueue`; no tracefs needed); detached when the returned fd closes. Its context is
/// the tracepoint's arguments, 8 bytes each. Unlike a tracepoint perf event's program, a raw one
/// guards against recursion by itself, not by the CPU's `bpf_prog_active`, so running it never
/// makes the kernel skip another program that interrupts it (a perf event's: the stall watch's tick).
pub fn raw_tracepoint_open(prog: &OwnedFd, name: &str) -> io::Result<OwnedFd> {
    let name = std::ffi::CString::new(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut a = Attr::new();
    a.u64(0, name.as_ptr() as u64).u32(8, prog.as_raw_fd() as u32);
    sys_bpf_fd(BPF_RAW_TRACEPOINT_OPEN, &mut a)
}

/// Run a [`BPF_PROG_TYPE_RAW_TRACEPOINT`] program once on the context `ctx` (at most 96 bytes,
/// BPF_PROG_TEST_RUN) and return its return value.
pub fn prog_test_run_ctx(prog: &OwnedFd, ctx: &[u8]) -> io::Result<u32> {
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32).u32(40, ctx.len() as u32).u64(48, ctx.as_ptr() as u64);
    sys_bpf(BPF_PROG_TEST_RUN, &mut a)?;
    Ok(a.get_u32(4))
}

/// The id of the loaded BPF program `prog`.
pub fn prog_id(prog: &OwnedFd) -> io::Result<u32> {
    let mut info = [0u8; 80];
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32).u32(4, info.len() as u32).u64(8, info.as_mut_ptr() as u64);
    sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a)?;
    Ok(u32::from_ne_bytes([info[4], info[5], info[6], info[7]]))
}

/// How often the kernel skipped `prog` because its CPU was already in a BPF program or a BPF
/// system call (`bpf_prog_info.recursion_misses`, at byte 208).
pub fn prog_misses(prog: &OwnedFd) -> io::Result<u64> {
    let mut info = [0u8; 216];
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32).u32(4, info.len() as u32).u64(8, info.as_mut_ptr() as u64);
    sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a)?;
    Ok(u64::from_ne_bytes(info[208..216].try_into().expect("8 bytes")))
}

/// The name of loaded BPF program `id` (`bpf_prog_info.name`, at most 15 bytes).
pub fn prog_name(id: u32) -> io::Result<String> {
    let mut a = Attr::new();
    a.u32(0, id);
    let fd = sys_bpf_fd(BPF_PROG_GET_FD_BY_ID, &mut a)?;
    // struct bpf_prog_info up to and including `name` (offset 64, 16 bytes).
    let mut info = [0u8; 80];
    let mut a = Attr::new();
    a.u32(0, fd.as_raw_fd() as u32).u32(4, info.len() as u32).u64(8, info.as_mut_ptr() as u64);
    sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a)?;
    let name = &info[64..80];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// The ids of the maps loaded program `id` uses (at most 8) and an fd on the program.
pub fn prog_map_ids(id: u32) -> io::Result<Vec<u32>> {
    let mut a = Attr::new();
    a.u32(0, id);
    let fd = sys_bpf_fd(BPF_PROG_GET_FD_BY_ID, &mut a)?;
    let mut ids = [0u32; 8];
    // struct bpf_prog_info up to `map_ids`: nr_map_ids at 52, the map_ids pointer at 56.
    let mut info = [0u8; 64];
    info[52..56].copy_from_slice(&(ids.len() as u32).to_ne_bytes());
    info[56..64].copy_from_slice(&(ids.as_mut_ptr() as u64).to_ne_bytes());
    let mut a = Attr::new();
    a.u32(0, fd.as_raw_fd() as u32).u32(4, info.len() as u32).u64(8, info.as_mut_ptr() as u64);
    sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a)?;
    let n = u32::from_ne_bytes([info[52], info[53], info[54], info[55]]) as usize;
    Ok(ids[..n.min(ids.len())].to_vec())
}

/// An fd on map `id` and its name (`bpf_map_info.name`).
pub fn map_by_id(id: u32) -> io::Result<(OwnedFd, String)> {
    let mut a = Attr::new();
    a.u32(0, id);
    let fd = sys_bpf_fd(BPF_MAP_GET_FD_BY_ID, &mut a)?;
    // struct bpf_map_info up to and including `name` (offset 24, 16 bytes).
    let mut info = [0u8; 40];
    let mut a = Attr::new();
    a.u32(0, fd.as_raw_fd() as u32).u32(4, info.len() as u32).u64(8, info.as_mut_ptr() as u64);
    sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a)?;
    let name = &info[24..40];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok((fd, String::from_utf8_lossy(&name[..end]).into_owned()))
}

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

impl Insn {
    /// The opcode byte.
    pub fn code(&self) -> u8 {
        self.code
    }
    /// The offset field (jump distance for jumps).
    pub fn off(&self) -> i16 {
        self.off
    }
}

/// eBPF registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reg {
    R0 = 0,
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    R8,
    R9,
    R10,
}

// Opcode parts (linux/bpf_common.h, linux/bpf.h).
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const ST: u8 = 0x02;
const STX: u8 = 0x03;
const ALU64: u8 = 0x07;
const JMP: u8 = 0x05;
const W: u8 = 0x00;
const H: u8 = 0x08;
const B: u8 = 0x10;
const DW: u8 = 0x18;
const MEM: u8 = 0x60;
const IMM: u8 = 0x00;
const K: u8 = 0x00;
const X: u8 = 0x08;
const MOV: u8 = 0xb0;
const LSH: u8 = 0x60;
const ATOMIC: u8 = 0xc0;
/// `BPF_ADD | BPF_FETCH`: the atomic add returns the old value in its source register.
const FETCH_ADD: i32 = 0x01;
const JGE: u8 = 0x30;
const JLE: u8 = 0xb0;
const ADD: u8 = 0x00;
const SUB: u8 = 0x10;
const AND: u8 = 0x50;
const RSH: u8 = 0x70;
const MOD: u8 = 0x90;
const XOR: u8 = 0xa0;
const JA: u8 = 0x00;
const JEQ: u8 = 0x10;
const JGT: u8 = 0x20;
const JNE: u8 = 0x50;
const CALL: u8 = 0x80;
const EXIT: u8 = 0x90;
const PSEUDO_MAP_FD: u8 = 1;

/// Load width.
#[derive(Debug, Clone, Copy)]
pub enum Size {
    B,
    H,
    W,
    DW,
}

impl Size {
    fn code(self) -> u8 {
        match self {
            Size::B => B,
            Size::H => H,
            Size::W => W,
            Size::DW => DW,
        }
    }
}

fn insn(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
    Insn { code, regs: (dst as u8) | ((src as u8) << 4), off, imm }
}

/// A minimal assembler: instructions plus forward jumps to named labels, resolved by `finish`.
#[derive(Default)]
pub struct Asm {
    insns: Vec<Insn>,
    labels: Vec<(&'static str, usize)>,
    fixups: Vec<(usize, &'static str)>,
}

impl Asm {
    pub fn new() -> Self {
        Asm::default()
    }
    fn push(&mut self, i: Insn) -> &mut Self {
        self.insns.push(i);
        self
    }
    pub fn label(&mut self, name: &'static str) -> &mut Self {
        self.labels.push((name, self.insns.len()));
        self
    }
    pub fn mov_reg(&mut self, dst: Reg, src: Reg) -> &mut Self {
        self.push(insn(ALU64 | MOV | X, dst, src, 0, 0))
    }
    pub fn mov_imm(&mut self, dst: Reg, imm: i32) -> &mut Self {
        self.push(insn(ALU64 | MOV | K, dst, Reg::R0, 0, imm))
    }
    pub fn add_imm(&mut self, dst: Reg, imm: i32) -> &mut Self {
        self.push(insn(ALU64 | ADD | K, dst, Reg::R0, 0, imm))
    }
    pub fn add_reg(&mut self, dst: Reg, src: Reg) -> &mut Self {
        self.push(insn(ALU64 | ADD | X, dst, src, 0, 0))
    }
    pub fn sub_reg(&mut self, dst: Reg, src: Reg) -> &mut Self {
        self.push(insn(ALU64 | SUB | X, dst, src, 0, 0))
    }
    pub fn and_imm(&mut self, dst: Reg, imm: i32) -> &mut Self {
        self.push(insn(ALU64 | AND | K, dst, Reg::R0, 0, imm))
    }
    pub fn xor_reg(&mut self, dst: Reg, src: Reg) -> &mut Self {
        self.push(insn(ALU64 | XOR | X, dst, src, 0, 0))
    }
    pub fn lsh_imm(&mut self, dst: Reg, imm: i32) -> &mut Self {
        self.push(insn(ALU64 | LSH | K, dst, Reg::R0, 0, imm))
    }
    /// `src = atomic_fetch_add((u64 *)(dst + off), src)`: the old value lands in `src`.
    pub fn atomic_fetch_add(&mut self, dst: Reg, off: i16, src: Reg) -> &mut Self {
        self.push(insn(STX | ATOMIC | DW, dst, src, off, FETCH_ADD))
    }
    pub fn rsh_imm(&mut self, dst: Reg, imm: i32) -> &mut Self {
        self.push(insn(ALU64 | RSH | K, dst, Reg::R0, 0, imm))
    }
    /// `dst %= imm` (unsigned; `imm` > 0).
    pub fn mod_imm(&mut self, dst: Reg, imm: i32) -> &mut Self {
        self.push(insn(ALU64 | MOD | K, dst, Reg::R0, 0, imm))
    }
    /// `dst = *(size *)(src + off)`.
    pub fn load(&mut self, size: Size, dst: Reg, src: Reg, off: i16) -> &mut Self {
        self.push(insn(LDX | MEM | size.code(), dst, src, off, 0))
    }
    /// `*(size *)(dst + off) = src`.
    pub fn store(&mut self, size: Size, dst: Reg, off: i16, src: Reg) -> &mut Self {
        self.push(insn(STX | MEM | size.code(), dst, src, off, 0))
    }
    /// `*(size *)(dst + off) = imm`.
    pub fn store_imm(&mut self, size: Size, dst: Reg, off: i16, imm: i32) -> &mut Self {
        self.push(insn(ST | MEM | size.code(), dst, Reg::R0, off, imm))
    }
    /// `dst = map fd` (64-bit immediate load, two instruction slots).
    pub fn load_map_fd(&mut self, dst: Reg, fd: RawFd) -> &mut Self {
        self.push(Insn { code: LD | DW | IMM, regs: (dst as u8) | (PSEUDO_MAP_FD << 4), off: 0, imm: fd });
        self.push(Insn { code: 0, regs: 0, off: 0, imm: 0 })
    }
    fn jump(&mut self, code: u8, dst: Reg, src: Reg, imm: i32, target: &'static str) -> &mut Self {
        self.fixups.push((self.insns.len(), target));
        self.push(insn(code, dst, src, 0, imm))
    }
    pub fn ja(&mut self, target: &'static str) -> &mut Self {
        self.jump(JMP | JA, Reg::R0, Reg::R0, 0, target)
    }
    pub fn jeq_imm(&mut self, dst: Reg, imm: i32, target: &'static str) -> &mut Self {
        self.jump(JMP | JEQ | K, dst, Reg::R0, imm, target)
    }
    pub fn jeq_reg(&mut self, dst: Reg, src: Reg, target: &'static str) -> &mut Self {
        self.jump(JMP | JEQ | X, dst, src, 0, target)
    }
    pub fn jne_imm(&mut self, dst: Reg, imm: i32, target: &'static str) -> &mut Self {
        self.jump(JMP | JNE | K, dst, Reg::R0, imm, target)
    }
    pub fn jgt_reg(&mut self, dst: Reg, src: Reg, target: &'static str) -> &mut Self {
        self.jump(JMP | JGT | X, dst, src, 0, target)
    }
    /// Jump if `dst <= imm` (unsigned).
    pub fn jle_imm(&mut self, dst: Reg, imm: i32, target: &'static str) -> &mut Self {
        self.jump(JMP | JLE | K, dst, Reg::R0, imm, target)
    }
    /// Jump if `dst >= src` (unsigned).
    pub fn jge_reg(&mut self, dst: Reg, src: Reg, target: &'static str) -> &mut Self {
        self.jump(JMP | JGE | X, dst, src, 0, target)
    }
    /// Jump if `dst <= src` (unsigned).
    pub fn jle_reg(&mut self, dst: Reg, src: Reg, target: &'static str) -> &mut Self {
        self.jump(JMP | JLE | X, dst, src, 0, target)
    }
    pub fn call(&mut self, helper: i32) -> &mut Self {
        self.push(insn(JMP | CALL, Reg::R0, Reg::R0, 0, helper))
    }
    pub fn exit(&mut self) -> &mut Self {
        self.push(insn(JMP | EXIT, Reg::R0, Reg::R0, 0, 0))
    }
    /// Resolve jumps. Panics only on a programming error in a fixed program (unknown label).
    pub fn finish(mut self) -> Vec<Insn> {
        for &(at, name) in &self.fixups {
            let target = self
                .labels
                .iter()
                .find(|(n, _)| *n == name)
                .map(|&(_, i)| i)
                .unwrap_or_else(|| panic!("bpf asm: unknown label {name}"));
            self.insns[at].off = (target as isize - at as isize - 1) as i16;
        }
        self.insns
    }
}

/// What the program does with a netrig signature frame.
#[derive(Debug, Clone, Copy)]
pub enum OnMatch {
    /// `bpf_redirect_map(xskmap, rx_queue_index, XDP_PASS)`.
    Redirect(RawFd),
    /// Return this verdict (for tests of the classifier with BPF_PROG_TEST_RUN).
    Verdict(i32),
}

/// Byte pair as the little-endian u16 an `ldxh` of those bytes produces (x86/arm64 are LE).
pub(crate) const fn wire16(v: u16) -> i32 {
    u16::from_be(v) as i32
}

/// The steering program. Offsets are relative to the (possibly VLAN-shifted) start of frame in R2.
///
/// With a `stamp`, a matching frame first gets [`RX_STAMP_LEN`] bytes holding the kernel's
/// receive time, in XDP metadata or in front of its data ([`Stamp`]); if the driver has no room
/// for them the frame goes on unstamped and user space stamps it instead.
/// With `passed`, a PERCPU_ARRAY of one u64, every frame passed to the kernel (not a netrig
/// frame) is counted there: the receiver's count of foreign frames, which it never sees.
pub fn steer_program(on_match: OnMatch, stamp: Stamp, passed: Option<RawFd>) -> Vec<Insn> {
    use Reg::*;
    // The signature's magic starts the UDP payload: its offsets are netrig-wire's header lengths.
    const IP4_PROTO: i16 = 14 + 9;
    const IP4_FRAG: i16 = 14 + 6;
    const IP4_MAGIC: i16 = (ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN) as i16;
    const IP6_NEXT: i16 = 14 + 6;
    const IP6_MAGIC: i16 = (ethernet::HEADER_LEN + ipv6::HEADER_LEN + udp::HEADER_LEN) as i16;
    let mut a = Asm::new();
    ethertype(&mut a, "pass");
    a.jeq_imm(R5, wire16(0x0800), "ipv4")
        .jeq_imm(R5, wire16(0x86DD), "ipv6")
        .ja("pass")
        .label("ipv4")
        .mov_reg(R4, R2)
        .add_imm(R4, IP4_MAGIC as i32 + 2)
        .jgt_reg(R4, R3, "pass")
        .load(Size::B, R5, R2, 14)
        .jne_imm(R5, 0x45, "pass") // IPv4, IHL 5
        .load(Size::B, R5, R2, IP4_PROTO)
        .jne_imm(R5, libc::IPPROTO_UDP, "pass")
        .load(Size::H, R5, R2, IP4_FRAG)
        .and_imm(R5, wire16(0x1fff)) // fragment offset != 0: no UDP header here
        .jne_imm(R5, 0, "pass")
        .load(Size::H, R5, R2, IP4_MAGIC)
        .jne_imm(R5, wire16(SIGNATURE_MAGIC), "pass")
        .ja("match")
        .label("ipv6")
        .mov_reg(R4, R2)
        .add_imm(R4, IP6_MAGIC as i32 + 2)
        .jgt_reg(R4, R3, "pass")
        .load(Size::B, R5, R2, IP6_NEXT)
        .jne_imm(R5, libc::IPPROTO_UDP, "pass")
        .load(Size::H, R5, R2, IP6_MAGIC)
        .jne_imm(R5, wire16(SIGNATURE_MAGIC), "pass")
        .label("match");
    stamp_frame(&mut a, stamp);
    match on_match {
        OnMatch::Redirect(map_fd) => redirect_to_socket(&mut a, map_fd, stamp),
        OnMatch::Verdict(v) => {
            a.mov_imm(R0, v).exit();
        }
    }
    a.label("pass");
    if let Some(fd) = passed {
        count_passed(&mut a, fd);
    }
    a.mov_imm(R0, XDP_PASS).exit();
    a.finish()
}

/// With a `stamp`, put [`RX_STAMP_LEN`] bytes holding the kernel's receive time in XDP metadata or
/// in front of the frame's data ([`Stamp`]); a driver without room for them leaves the frame
/// unstamped (user space stamps it). Needs R6 = the context; clobbers R0-R5 and R7; R8 says
/// whether the data's start moved ([`Stamp::Head`]: 1 once it did, for [`redirect_to_socket`]).
fn stamp_frame(a: &mut Asm, stamp: Stamp) {
    use Reg::*;
    if stamp == Stamp::Off {
        return;
    }
    a.mov_imm(R8, 0);
    // Calls clobber R1-R5; R6 keeps the context, R7 the time. Moving the start of the data or
    // metadata invalidates every packet pointer, so the stamp's place and its end are read again
    // and bounds-checked.
    let (helper, at, end) = match stamp {
        Stamp::Head => (BPF_FUNC_XDP_ADJUST_HEAD, 0, 4), // data, data_end
        _ => (BPF_FUNC_XDP_ADJUST_META, 8, 0),           // data_meta, data
    };
    a.call(BPF_FUNC_KTIME_GET_NS)
        .mov_reg(R7, R0)
        .mov_reg(R1, R6)
        .mov_imm(R2, -(RX_STAMP_LEN as i32))
        .call(helper)
        .jne_imm(R0, 0, "stamped")
        .mov_imm(R8, 1)
        .load(Size::W, R2, R6, at)
        .load(Size::W, R3, R6, end)
        .mov_reg(R4, R2)
        .add_imm(R4, RX_STAMP_LEN as i32)
        .jgt_reg(R4, R3, "stamped")
        .store(Size::DW, R2, 0, R7)
        .mov_imm(R5, RX_STAMP_MAGIC as i32)
        .store(Size::W, R2, 8, R5)
        .store_imm(Size::W, R2, 12, 0)
        .label("stamped");
}

/// Redirect the frame to its queue's socket in the XSKMAP `map_fd` (R6 = the context, R8 as
/// [`stamp_frame`] leaves it). A queue without a socket passes the frame to the kernel, without the
/// prefix a [`Stamp::Head`] stamp put in front of it.
fn redirect_to_socket(a: &mut Asm, map_fd: RawFd, stamp: Stamp) {
    use Reg::*;
    a.load(Size::W, R2, R6, 16) // rx_queue_index
        .load_map_fd(R1, map_fd)
        .mov_imm(R3, XDP_PASS) // fallback verdict when the slot is empty
        .call(BPF_FUNC_REDIRECT_MAP);
    if stamp == Stamp::Head {
        a.jne_imm(R0, XDP_PASS, "redirected")
            .jeq_imm(R8, 0, "redirected")
            .mov_reg(R1, R6)
            .mov_imm(R2, RX_STAMP_LEN as i32)
            .call(BPF_FUNC_XDP_ADJUST_HEAD)
            .mov_imm(R0, XDP_PASS)
            .label("redirected");
    }
    a.exit();
}

/// The start of the steering programs: R6 = the context, R2 = the frame's start (moved past one
/// 802.1Q tag), R3 = its end, R5 = the ethertype as [`wire16`] reads it; a frame too short for
/// its Ethernet header jumps to `short`.
fn ethertype(a: &mut Asm, short: &'static str) {
    use Reg::*;
    const ETH: i32 = ethernet::HEADER_LEN as i32;
    a.mov_reg(R6, R1)
        .load(Size::W, R2, R1, 0) // data
        .load(Size::W, R3, R1, 4) // data_end
        .mov_reg(R4, R2)
        .add_imm(R4, ETH)
        .jgt_reg(R4, R3, short)
        .load(Size::H, R5, R2, 12)
        .jne_imm(R5, wire16(0x8100), "l3")
        .add_imm(R2, 4) // one 802.1Q tag: shift the frame start, re-read the ethertype
        .mov_reg(R4, R2)
        .add_imm(R4, ETH)
        .jgt_reg(R4, R3, short)
        .load(Size::H, R5, R2, 12)
        .label("l3");
}

/// Add one to the PERCPU_ARRAY `fd`'s only u64 (a frame passed to the kernel).
fn count_passed(a: &mut Asm, fd: RawFd) {
    use Reg::*;
    a.store_imm(Size::W, R10, -4, 0)
        .load_map_fd(R1, fd)
        .mov_reg(R2, R10)
        .add_imm(R2, -4)
        .call(BPF_FUNC_MAP_LOOKUP_ELEM)
        .jeq_imm(R0, 0, "passed")
        .load(Size::DW, R1, R0, 0)
        .add_imm(R1, 1)
        .store(Size::DW, R0, 0, R1)
        .label("passed");
}

/// The forwarding program: every frame of a queue goes to that queue's AF_XDP socket
/// (`bpf_redirect_map(xskmap, rx_queue_index, XDP_PASS)`), whatever it carries; a queue without a
/// socket passes its frames to the kernel. A forwarder must take every frame, where the steering
/// program ([`steer_program`]) takes only netrig's. With a `stamp` every frame carries the
/// kernel's receive time ([`stamp_frame`]). A prefix ([`Stamp::Head`]) is told from a frame as the
/// steering program's is, by its magic and the zeros where a frame has its ethertype: only a frame
/// the driver had no headroom for goes unprefixed, and it is read as a prefix only if it carries
/// the magic in its source MAC address and a zero ethertype.
pub fn redirect_all_program(map_fd: RawFd, stamp: Stamp) -> Vec<Insn> {
    use Reg::*;
    let mut a = Asm::new();
    a.mov_reg(R6, R1);
    stamp_frame(&mut a, stamp);
    redirect_to_socket(&mut a, map_fd, stamp);
    a.finish()
}

/// Frames a port with emulated devices or LLDP takes, where [`redirect_all_program`] takes all:
/// every frame goes to its queue's socket except ARP, LLDP, IPv4 ICMP, ICMPv6 and TCP (at most one
/// 802.1Q tag) that do not end in netrig's signature — the devices' address resolution and pings
/// (the kernel answers them), their BGP sessions (BIRD's TCP; the devices' nftables table drops
/// other TCP) and lldpd's PDUs. The generator writes its signature in a frame's last 18 bytes, so
/// its own ARP, ICMP and TCP flows still reach the socket. Frames passed are counted in `passed` (a
/// PERCPU_ARRAY of one u64): the port's foreign frames. Stamps as [`redirect_all_program`]'s, on
/// the frames taken.
pub fn keep_control_program(map_fd: RawFd, passed: RawFd, stamp: Stamp) -> Vec<Insn> {
    use Reg::*;
    const ETH: i32 = ethernet::HEADER_LEN as i32;
    const SIG: i32 = netrig_wire::signature::LEN as i32;
    let mut a = Asm::new();
    ethertype(&mut a, "take");
    a.jeq_imm(R5, wire16(0x0806), "tail")
        .jeq_imm(R5, wire16(0x88CC), "tail")
        .jeq_imm(R5, wire16(0x0800), "ipv4")
        .jeq_imm(R5, wire16(0x86DD), "ipv6")
        .ja("take")
        .label("ipv4")
        .mov_reg(R4, R2)
        .add_imm(R4, ETH + 10)
        .jgt_reg(R4, R3, "take")
        .load(Size::B, R5, R2, 14 + 9)
        .jeq_imm(R5, libc::IPPROTO_ICMP, "tail")
        .jeq_imm(R5, libc::IPPROTO_TCP, "tail")
        .ja("take")
        .label("ipv6")
        .mov_reg(R4, R2)
        .add_imm(R4, ETH + 7)
        .jgt_reg(R4, R3, "take")
        .load(Size::B, R5, R2, 14 + 6)
        .jeq_imm(R5, libc::IPPROTO_TCP, "tail")
        .jne_imm(R5, libc::IPPROTO_ICMPV6, "take")
        .label("tail") // a control frame, unless its last bytes are netrig's signature
        .load(Size::W, R2, R6, 0)
        .load(Size::W, R3, R6, 4)
        .mov_reg(R7, R3)
        .sub_reg(R7, R2)
        .jle_imm(R7, SIG + ETH - 1, "pass")
        .jle_imm(R7, 0x3FFF, "bounded") // the verifier needs the offset bounded
        .ja("pass")
        .label("bounded")
        .add_imm(R7, -SIG)
        .add_reg(R2, R7)
        .mov_reg(R4, R2)
        .add_imm(R4, 2)
        .jgt_reg(R4, R3, "pass")
        .load(Size::H, R5, R2, 0)
        .jne_imm(R5, wire16(SIGNATURE_MAGIC), "pass")
        .label("take");
    stamp_frame(&mut a, stamp);
    redirect_to_socket(&mut a, map_fd, stamp);
    a.label("pass");
    count_passed(&mut a, passed);
    a.mov_imm(R0, XDP_PASS).exit();
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_matches_the_kernel_abi() {
        assert_eq!(mem::size_of::<Insn>(), 8);
        let mut a = Asm::new();
        a.mov_imm(Reg::R0, 2).exit();
        let p = a.finish();
        assert_eq!(p[0], Insn { code: 0xb7, regs: 0, off: 0, imm: 2 });
        assert_eq!(p[1], Insn { code: 0x95, regs: 0, off: 0, imm: 0 });
        let mut a = Asm::new();
        a.load(Size::H, Reg::R5, Reg::R2, 12).jgt_reg(Reg::R4, Reg::R3, "x").load_map_fd(Reg::R1, 7).label("x").exit();
        a.store(Size::DW, Reg::R2, 8, Reg::R7).store(Size::W, Reg::R2, 0, Reg::R5);
        let p = a.finish();
        assert_eq!(p[0], Insn { code: 0x69, regs: 0x25, off: 12, imm: 0 });
        assert_eq!(p[1], Insn { code: 0x2d, regs: 0x34, off: 2, imm: 0 });
        assert_eq!(p[2], Insn { code: 0x18, regs: 0x11, off: 0, imm: 7 });
        assert_eq!(p[3], Insn { code: 0, regs: 0, off: 0, imm: 0 });
        // stxdw [r2+8], r7 and stxw [r2+0], r5 (BPF_STX | BPF_MEM | size)
        assert_eq!(p[5], Insn { code: 0x7b, regs: 0x72, off: 8, imm: 0 });
        assert_eq!(p[6], Insn { code: 0x63, regs: 0x52, off: 0, imm: 0 });
    }

    #[test]
    fn all_jumps_resolve_forward_inside_the_program() {
        for p in [
            steer_program(OnMatch::Redirect(3), Stamp::Off, None),
            steer_program(OnMatch::Redirect(3), Stamp::Meta, None),
            steer_program(OnMatch::Redirect(3), Stamp::Head, None),
            steer_program(OnMatch::Verdict(XDP_DROP), Stamp::Off, None),
            steer_program(OnMatch::Verdict(XDP_DROP), Stamp::Meta, None),
            steer_program(OnMatch::Verdict(XDP_DROP), Stamp::Head, None),
            redirect_all_program(3, Stamp::Off),
            redirect_all_program(3, Stamp::Meta),
        ] {
            for (i, insn) in p.iter().enumerate() {
                if insn.code & 0x07 == JMP && insn.code & 0xf0 != CALL && insn.code & 0xf0 != EXIT {
                    let t = i as isize + 1 + insn.off as isize;
                    assert!(insn.off > 0 && (t as usize) < p.len(), "jump at {i} to {t}");
                }
            }
            assert_eq!(p.last().map(|i| i.code), Some(JMP | EXIT));
        }
    }
}

/// Test frames and test plumbing shared by the BPF and AF_XDP tests.
#[cfg(test)]
pub(crate) mod testkit {
    use std::process::Command;
    use std::time::{Duration, Instant};

    use crate::error::PortError;
    use crate::open::open_port;
    use crate::port::{Port, PortSpec};

    /// Open a port, waiting up to 10 s while a just-closed XSK still holds the queue (the kernel
    /// releases it asynchronously); any other error fails the test.
    pub fn open_retry(s: &PortSpec) -> Box<dyn Port> {
        let t0 = Instant::now();
        loop {
            match open_port(s) {
                Err(PortError::Busy { .. }) if t0.elapsed() < Duration::from_secs(10) => {
                    std::thread::sleep(Duration::from_millis(200))
                }
                r => return r.unwrap_or_else(|e| panic!("open {}: {e}", s.ifname)),
            }
        }
    }

    pub const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0x4e, 0x01];
    pub const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0x4e, 0x02];
    pub const IP_A: [u8; 4] = [198, 18, 0, 1];
    pub const IP_B: [u8; 4] = [198, 18, 0, 2];

    /// A hand-built test frame: Ethernet [+ 802.1Q] + IPv4/IPv6 + UDP (or another protocol),
    /// payload starting with the netrig magic (or not) followed by a sequence number.
    #[derive(Debug, Clone, Copy)]
    pub struct TestFrame {
        pub vlan: bool,
        pub ipv6: bool,
        pub proto: u8,
        pub magic: bool,
        pub ihl: u8,
        pub frag_off: u16,
        pub len: usize,
        pub seq: u64,
    }

    impl Default for TestFrame {
        fn default() -> Self {
            TestFrame { vlan: false, ipv6: false, proto: 17, magic: true, ihl: 5, frag_off: 0, len: 60, seq: 0 }
        }
    }

    fn csum(b: &[u8]) -> u16 {
        let mut s = 0u32;
        for c in b.chunks(2) {
            s += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
        }
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    impl TestFrame {
        /// Write the frame at the start of `f`; returns its length (without FCS).
        pub fn build(&self, f: &mut [u8]) -> usize {
            let len = self.len;
            f[..len].fill(0);
            f[0..6].copy_from_slice(&MAC_B);
            f[6..12].copy_from_slice(&MAC_A);
            let mut o = 12;
            if self.vlan {
                f[12..16].copy_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
                o = 16;
            }
            let (l3, l4) = if self.ipv6 {
                f[o..o + 2].copy_from_slice(&[0x86, 0xdd]);
                let ip = o + 2;
                let plen = (len - ip - 40) as u16;
                f[ip] = 0x60;
                f[ip + 4..ip + 6].copy_from_slice(&plen.to_be_bytes());
                f[ip + 6] = self.proto;
                f[ip + 7] = 64;
                f[ip + 8..ip + 10].copy_from_slice(&[0x20, 0x01]);
                f[ip + 10..ip + 12].copy_from_slice(&[0x00, 0x02]);
                f[ip + 23] = 1;
                f[ip + 24..ip + 26].copy_from_slice(&[0x20, 0x01]);
                f[ip + 26..ip + 28].copy_from_slice(&[0x00, 0x02]);
                f[ip + 39] = 2;
                (ip, ip + 40)
            } else {
                f[o..o + 2].copy_from_slice(&[0x08, 0x00]);
                let ip = o + 2;
                let hl = self.ihl as usize * 4;
                f[ip] = 0x40 | self.ihl;
                f[ip + 2..ip + 4].copy_from_slice(&((len - ip) as u16).to_be_bytes());
                f[ip + 6..ip + 8].copy_from_slice(&self.frag_off.to_be_bytes());
                f[ip + 8] = 64;
                f[ip + 9] = self.proto;
                f[ip + 12..ip + 16].copy_from_slice(&IP_A);
                f[ip + 16..ip + 20].copy_from_slice(&IP_B);
                let c = csum(&f[ip..ip + hl]);
                f[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
                (ip, ip + hl)
            };
            let _ = l3;
            f[l4..l4 + 2].copy_from_slice(&9u16.to_be_bytes());
            f[l4 + 2..l4 + 4].copy_from_slice(&9u16.to_be_bytes());
            f[l4 + 4..l4 + 6].copy_from_slice(&((len - l4) as u16).to_be_bytes());
            let p = l4 + 8;
            if self.magic {
                f[p..p + 2].copy_from_slice(&super::SIGNATURE_MAGIC.to_be_bytes());
            }
            f[p + 2..p + 10].copy_from_slice(&self.seq.to_le_bytes());
            len
        }
    }

    /// Sequence number of a 60-byte IPv4 test frame built by [`TestFrame`], if it has the magic.
    pub fn seq_of(f: &[u8]) -> Option<u64> {
        if f.len() < 52 || f[42..44] != super::SIGNATURE_MAGIC.to_be_bytes() {
            return None;
        }
        Some(u64::from_le_bytes(f[44..52].try_into().ok()?))
    }

    /// An ARP request from A for B's address.
    pub fn arp_request(f: &mut [u8]) -> usize {
        f[..60].fill(0);
        f[0..6].copy_from_slice(&[0xff; 6]);
        f[6..12].copy_from_slice(&MAC_A);
        f[12..14].copy_from_slice(&[0x08, 0x06]);
        f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        f[22..28].copy_from_slice(&MAC_A);
        f[28..32].copy_from_slice(&IP_A);
        f[38..42].copy_from_slice(&IP_B);
        60
    }

    pub fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    pub fn sh(args: &[&str]) -> Result<String, String> {
        let out = Command::new(args[0]).args(&args[1..]).output().map_err(|e| format!("{}: {e}", args[0]))?;
        if !out.status.success() {
            return Err(format!("{}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Two namespaces with a veth pair between them (A: MAC_A/IP_A, B: MAC_B/IP_B); all torn
    /// down on drop (deleting a namespace deletes its veth end).
    pub struct VethPair {
        pub ns_a: String,
        pub ns_b: String,
        pub if_a: String,
        pub if_b: String,
    }

    impl VethPair {
        pub fn new(tag: &str) -> VethPair {
            VethPair::with_queues(tag, 1)
        }

        /// A pair whose ends have `queues` TX and RX queues each.
        pub fn with_queues(tag: &str, queues: usize) -> VethPair {
            let id = std::process::id();
            let v = VethPair {
                ns_a: format!("nrxdp-{tag}-{id}-a"),
                ns_b: format!("nrxdp-{tag}-{id}-b"),
                if_a: format!("nx{tag}{id}a"),
                if_b: format!("nx{tag}{id}b"),
            };
            let mac = |m: [u8; 6]| m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
            let ip = |a: [u8; 4]| format!("{}.{}.{}.{}/30", a[0], a[1], a[2], a[3]);
            let steps: Vec<Vec<String>> = vec![
                vec!["ip".into(), "netns".into(), "add".into(), v.ns_a.clone()],
                vec!["ip".into(), "netns".into(), "add".into(), v.ns_b.clone()],
                format!("ip netns exec {} sysctl -qw net.ipv6.conf.all.disable_ipv6=1", v.ns_a)
                    .split(' ')
                    .map(String::from)
                    .collect(),
                format!("ip netns exec {} sysctl -qw net.ipv6.conf.all.disable_ipv6=1", v.ns_b)
                    .split(' ')
                    .map(String::from)
                    .collect(),
                format!(
                    "ip link add {} netns {} numtxqueues {queues} numrxqueues {queues} type veth peer name {} netns {} \
                     numtxqueues {queues} numrxqueues {queues}",
                    v.if_a, v.ns_a, v.if_b, v.ns_b
                )
                .split(' ')
                .map(String::from)
                .collect(),
                format!("ip -n {} link set {} address {} up", v.ns_a, v.if_a, mac(MAC_A))
                    .split(' ')
                    .map(String::from)
                    .collect(),
                format!("ip -n {} link set {} address {} up", v.ns_b, v.if_b, mac(MAC_B))
                    .split(' ')
                    .map(String::from)
                    .collect(),
                format!("ip -n {} addr add {} dev {}", v.ns_a, ip(IP_A), v.if_a).split(' ').map(String::from).collect(),
                format!("ip -n {} addr add {} dev {}", v.ns_b, ip(IP_B), v.if_b).split(' ').map(String::from).collect(),
            ];
            for s in steps {
                let a: Vec<&str> = s.iter().map(String::as_str).collect();
                if let Err(e) = sh(&a) {
                    drop(v);
                    panic!("test bed set-up failed: {e}");
                }
            }
            v
        }

        /// A counter of `ifname` in `ns` from sysfs (as seen inside the namespace).
        pub fn counter(&self, ns: &str, ifname: &str, name: &str) -> u64 {
            let path = format!("/sys/class/net/{ifname}/statistics/{name}");
            sh(&["ip", "netns", "exec", ns, "cat", &path]).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
        }

        pub fn link_show(&self, ns: &str, ifname: &str) -> String {
            sh(&["ip", "-n", ns, "link", "show", "dev", ifname]).unwrap_or_default()
        }
    }

    impl Drop for VethPair {
        fn drop(&mut self) {
            let _ = sh(&["ip", "netns", "del", &self.ns_a]);
            let _ = sh(&["ip", "netns", "del", &self.ns_b]);
        }
    }
}

#[cfg(test)]
mod kernel_tests {
    use super::testkit::*;
    use super::*;

    #[test]
    fn the_devices_program_passes_control_frames_to_the_kernel_and_takes_the_rest() {
        if !is_root() {
            eprintln!("skipped: loading BPF programs needs root");
            return;
        }
        let map = xskmap_create(4).expect("XSKMAP");
        let passed = percpu_array_create(1, 8, "netrig_test_ctl").expect("per-CPU counter");
        let prog =
            prog_load_xdp(&keep_control_program(map.as_raw_fd(), passed.as_raw_fd(), Stamp::Off), "netrig_test6")
                .expect("verifier accepts");
        let stamping = load_stamping(&keep_control_program(map.as_raw_fd(), passed.as_raw_fd(), Stamp::Meta));
        let prefixing =
            prog_load_xdp(&keep_control_program(map.as_raw_fd(), passed.as_raw_fd(), Stamp::Head), "netrig_test8")
                .expect("verifier accepts the prefixing variant");
        // A frame: Ethernet (optionally one 802.1Q tag), `ethertype`, then `proto` at the IPv4 or
        // IPv6 protocol offset, zeros to `len`, netrig's magic 18 bytes before the end if `signed`.
        let frame = |vlan: bool, ethertype: u16, proto: u8, len: usize, signed: bool| {
            let mut f = vec![0u8; len];
            let mut at = 12;
            if vlan {
                f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
                at = 16;
            }
            f[at..at + 2].copy_from_slice(&ethertype.to_be_bytes());
            let l3 = at + 2;
            match ethertype {
                0x0800 => f[l3 + 9] = proto,
                0x86DD => f[l3 + 6] = proto,
                _ => {}
            }
            if signed {
                f[len - 18..len - 16].copy_from_slice(&SIGNATURE_MAGIC.to_be_bytes());
            }
            f
        };
        let cases: Vec<(&str, Vec<u8>, bool)> = vec![
            ("arp", frame(false, 0x0806, 0, 60, false), true),
            ("arp in a vlan", frame(true, 0x0806, 0, 64, false), true),
            ("the generator's arp flow", frame(false, 0x0806, 0, 60, true), false),
            ("lldp", frame(false, 0x88CC, 0, 60, false), true),
            ("icmp echo", frame(false, 0x0800, 1, 98, false), true),
            ("the generator's icmp flow", frame(false, 0x0800, 1, 1514, true), false),
            ("icmpv6 nd", frame(false, 0x86DD, 58, 86, false), true),
            ("udp", frame(false, 0x0800, 17, 64, false), false),
            ("ipv6 udp", frame(false, 0x86DD, 17, 80, false), false),
            ("tcp (a BGP session's)", frame(true, 0x0800, 6, 64, false), true),
            ("ipv6 tcp", frame(false, 0x86DD, 6, 86, false), true),
            ("the generator's tcp flow", frame(false, 0x0800, 6, 128, true), false),
            ("other ethertype", frame(false, 0x88B5, 0, 64, false), false),
            ("a bare ethernet header", frame(false, 0x0806, 0, 14, false), true),
        ];
        for (what, f, to_kernel) in cases {
            let before = percpu_u64_sum(&passed, 0, 1).unwrap()[0];
            let verdict = prog_test_run(&prog, &f).unwrap_or_else(|e| panic!("{what}: test run: {e}"));
            assert_eq!(verdict, XDP_PASS as u32, "{what}: the empty XSKMAP's fallback");
            let after = percpu_u64_sum(&passed, 0, 1).unwrap()[0];
            assert_eq!(after - before, to_kernel as u64, "{what}: passed to the kernel?");
            // Prefixed and the queue without a socket: to the kernel as it came.
            assert_eq!(prog_test_run_out(&prefixing, &f).unwrap(), (XDP_PASS as u32, f.clone()), "{what}: prefixed");
            // Stamping, every frame taken carries the receive time in front, one passed nothing.
            match &stamping {
                Some(p) if to_kernel => assert_eq!(prog_test_run_out(p, &f).unwrap(), (XDP_PASS as u32, f), "{what}"),
                Some(p) => assert_eq!(run_stamped(what, p, &f), XDP_PASS as u32, "{what}"),
                None => {}
            }
        }
    }

    /// The metadata-stamping program, loaded; `None` where the kernel refuses the one helper it
    /// adds (`bpf_xdp_adjust_meta`: some kernels keep it from XDP programs, and receiving ports
    /// then stamp with a prefix). Any other refusal is a defect of the program and fails the test.
    fn load_stamping(insns: &[Insn]) -> Option<OwnedFd> {
        match prog_load_xdp(insns, "netrig_stamp") {
            Ok(fd) => Some(fd),
            Err(e) => {
                let why = verifier_reason(&e);
                assert!(why.contains("cannot use helper bpf_xdp_adjust_meta"), "the stamping program refused: {why}");
                None
            }
        }
    }

    #[test]
    fn a_refused_program_is_explained_by_the_verifiers_last_word() {
        let e = io::Error::other(
            "Invalid argument (os error 22); verifier log: 0: R1=ctx() 40: (85) call bpf_xdp_adjust_meta#54\n\
             program of this type cannot use helper bpf_xdp_adjust_meta#54\nprocessed 39 insns (limit 1000000)",
        );
        assert_eq!(verifier_reason(&e), "program of this type cannot use helper bpf_xdp_adjust_meta#54");
        let flat = io::Error::other("Invalid argument (os error 22); verifier log: 1: (85) call x; unknown func x#9");
        assert_eq!(verifier_reason(&flat), "unknown func x#9");
        assert_eq!(verifier_reason(&io::Error::other("Operation not permitted")), "Operation not permitted");
    }

    #[test]
    fn steering_program_passes_the_verifier_and_classifies() {
        if !is_root() {
            eprintln!("skipped: loading BPF programs needs root");
            return;
        }
        let prog_fd = prog_load_xdp(&steer_program(OnMatch::Verdict(XDP_DROP), Stamp::Off, None), "netrig_test")
            .expect("verifier accepts");
        let id = prog_id(&prog_fd).expect("program info");
        assert_eq!(prog_name(id).expect("program by id"), "netrig_test", "a program is found by its id");
        let map = xskmap_create(4).expect("XSKMAP");
        let _redirect =
            prog_load_xdp(&steer_program(OnMatch::Redirect(map.as_raw_fd()), Stamp::Off, None), "netrig_test2")
                .expect("verifier accepts the redirect variant");
        let passed = percpu_array_create(1, 8, "netrig_test_pass").expect("per-CPU counter");
        let _stamped =
            load_stamping(&steer_program(OnMatch::Redirect(map.as_raw_fd()), Stamp::Meta, Some(passed.as_raw_fd())));
        let prefixed = prog_load_xdp(
            &steer_program(OnMatch::Redirect(map.as_raw_fd()), Stamp::Head, Some(passed.as_raw_fd())),
            "netrig_test6",
        )
        .expect("verifier accepts the prefixing redirect variant that counts what it passes");
        let all_prefixed = prog_load_xdp(&redirect_all_program(map.as_raw_fd(), Stamp::Head), "netrig_test9")
            .expect("verifier accepts the prefixing redirect-everything variant");
        // A prefixed frame whose queue has no socket goes to the kernel as it came.
        let mut buf = vec![0u8; 2048];
        let n = TestFrame::default().build(&mut buf);
        for prog in [&prefixed, &all_prefixed] {
            assert_eq!(prog_test_run_out(prog, &buf[..n]).unwrap(), (XDP_PASS as u32, buf[..n].to_vec()));
        }
        let _all = prog_load_xdp(&redirect_all_program(map.as_raw_fd(), Stamp::Off), "netrig_test5")
            .expect("verifier accepts the redirect-everything variant");
        if let Some(all) = load_stamping(&redirect_all_program(map.as_raw_fd(), Stamp::Meta)) {
            stamps_every_frame(&all);
        }
        let base = TestFrame::default();
        let cases: Vec<(&str, TestFrame, u32)> = vec![
            ("ipv4 udp magic", base, XDP_DROP as u32),
            ("ipv4 udp magic 1514 B", TestFrame { len: 1514, ..base }, XDP_DROP as u32),
            ("ipv4 udp no magic", TestFrame { magic: false, ..base }, XDP_PASS as u32),
            ("ipv4 tcp", TestFrame { proto: 6, ..base }, XDP_PASS as u32),
            ("ipv4 with options", TestFrame { ihl: 6, ..base }, XDP_PASS as u32),
            ("ipv4 later fragment", TestFrame { frag_off: 0x0010, ..base }, XDP_PASS as u32),
            ("ipv4 first fragment (MF)", TestFrame { frag_off: 0x2000, ..base }, XDP_DROP as u32),
            ("vlan ipv4 magic", TestFrame { vlan: true, ..base }, XDP_DROP as u32),
            ("vlan ipv4 no magic", TestFrame { vlan: true, magic: false, ..base }, XDP_PASS as u32),
            ("ipv6 udp magic", TestFrame { ipv6: true, len: 78, ..base }, XDP_DROP as u32),
            ("vlan ipv6 udp magic", TestFrame { ipv6: true, vlan: true, len: 78, ..base }, XDP_DROP as u32),
            ("ipv6 udp no magic", TestFrame { ipv6: true, len: 78, magic: false, ..base }, XDP_PASS as u32),
            ("ipv6 tcp", TestFrame { ipv6: true, len: 78, proto: 6, ..base }, XDP_PASS as u32),
        ];
        for (name, tf, want) in cases {
            let mut buf = vec![0u8; 2048];
            let n = tf.build(&mut buf);
            let got = prog_test_run(&prog_fd, &buf[..n]).expect("test run");
            assert_eq!(got, want, "{name}");
        }
        let mut arp = [0u8; 60];
        let n = arp_request(&mut arp);
        assert_eq!(prog_test_run(&prog_fd, &arp[..n]).unwrap(), XDP_PASS as u32, "arp");
        // Truncated frames: every length of a matching frame below the magic's end passes.
        let mut buf = [0u8; 60];
        base.build(&mut buf);
        for cut in 14..44 {
            assert_eq!(prog_test_run(&prog_fd, &buf[..cut]).unwrap(), XDP_PASS as u32, "cut at {cut}");
        }
        assert_eq!(prog_test_run(&prog_fd, &buf[..44]).unwrap(), XDP_DROP as u32, "44 bytes is enough");
    }

    #[test]
    fn stamping_program_puts_the_kernel_receive_time_in_front_of_matching_frames_only() {
        if !is_root() {
            eprintln!("skipped: loading BPF programs needs root");
            return;
        }
        let meta = load_stamping(&steer_program(OnMatch::Verdict(XDP_DROP), Stamp::Meta, None));
        if meta.is_none() {
            eprintln!("metadata stamps skipped: this kernel keeps bpf_xdp_adjust_meta from XDP programs");
        }
        let head = prog_load_xdp(&steer_program(OnMatch::Verdict(XDP_DROP), Stamp::Head, None), "netrig_test7");
        for prog in meta.into_iter().chain([head.expect("verifier accepts the prefix")]) {
            stamps_matching_frames_only(&prog);
        }
    }

    /// `prog` puts the receive time and the magic in front of a netrig frame, and nothing in front
    /// of another frame.
    fn stamps_matching_frames_only(prog: &OwnedFd) {
        let mut buf = vec![0u8; 2048];
        let n = TestFrame::default().build(&mut buf);
        assert_eq!(run_stamped("a netrig frame", prog, &buf[..n]), XDP_DROP as u32);
        // A frame that is not netrig's gets no metadata.
        let n = TestFrame { magic: false, ..TestFrame::default() }.build(&mut buf);
        let (verdict, out) = prog_test_run_out(prog, &buf[..n]).expect("test run");
        assert_eq!(verdict, XDP_PASS as u32);
        assert_eq!(out.len(), n);
    }

    /// `prog` (a program taking every frame, its XSKMAP empty) stamps any frame.
    fn stamps_every_frame(prog: &OwnedFd) {
        let mut buf = vec![0u8; 2048];
        for (what, magic) in [("a netrig frame", true), ("another frame", false)] {
            let n = TestFrame { magic, ..TestFrame::default() }.build(&mut buf);
            assert_eq!(run_stamped(what, prog, &buf[..n]), XDP_PASS as u32, "{what}: the empty XSKMAP's fallback");
        }
    }

    /// Run `prog` on `frame`, which must come out with the receive time (CLOCK_MONOTONIC, taken
    /// during the run) and the magic in front, itself untouched; its verdict.
    fn run_stamped(what: &str, prog: &OwnedFd, frame: &[u8]) -> u32 {
        let before = crate::clock::now_ns();
        let (verdict, out) = prog_test_run_out(prog, frame).unwrap_or_else(|e| panic!("{what}: test run: {e}"));
        let after = crate::clock::now_ns();
        assert_eq!(out.len(), RX_STAMP_LEN + frame.len(), "{what}: metadata in front of the frame");
        let ts = u64::from_ne_bytes(out[..8].try_into().unwrap());
        assert_eq!(u32::from_ne_bytes(out[8..12].try_into().unwrap()), RX_STAMP_MAGIC, "{what}");
        assert_eq!(&out[12..16], &[0; 4], "{what}: zero where a frame has its ethertype");
        assert!(before <= ts && ts <= after, "{what}: stamp {ts} is CLOCK_MONOTONIC, between {before} and {after}");
        assert_eq!(&out[RX_STAMP_LEN..], frame, "{what}: the frame itself is untouched");
        verdict
    }
}
