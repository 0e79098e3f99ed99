//! The AF_XDP (XSK) backend: raw `socket(AF_XDP)`, UMEM and rings set up with `setsockopt`,
//! mapped with `mmap`, and the steering XDP program from [`super::bpf`]; no libbpf/libxdp.
//!
//! Layout per queue: two sockets bound to (interface, queue) sharing one UMEM of `umem_frames`
//! frames: the receiving one registered it and has the fill, completion and RX rings, the sending
//! one the TX ring (`XDP_SHARED_UMEM`; why two: `create_xsk`). The lower half of the UMEM belongs
//! to the TX half of the queue (free stack, TX ring, completion ring), the upper half to the RX
//! half (fill ring, RX ring). The halves touch disjoint rings and frames, so [`XskTx`] and
//! [`XskRx`] run on different threads without locks, in user space or in the kernel; the sockets
//! are shared through an `Arc`.
//!
//! The XDP program is loaded and attached only on the first `open_rx` (a TX-only XSK needs none),
//! through a BPF link that the kernel releases when the process exits or crashes. It redirects
//! only netrig signature frames; everything else goes to the kernel stack.
//!
//! For workers: `send` lends UMEM frames from a free stack, so a frame's old contents are those
//! of whatever frame used it last: `fill` must write the whole frame. Call `send` in a loop with
//! batches of about 64; fewer accepted frames mean the TX ring or the frame pool is full (the
//! call has already kicked the kernel and reaped completions). Receive timestamps come from the
//! XDP program (`TimestampSource::KernelXdp`): it writes `bpf_ktime_get_ns()` into XDP metadata
//! in front of every netrig frame (a generator's port: of every frame it takes), so the stamp is taken in the driver's receive path and not
//! after the RX worker wakes up; a frame without valid metadata gets the time the worker read
//! its batch (`TimestampSource::User`, also the source when `rx_stamps` is off). Halves may be dropped and opened again (each trial does);
//! their counters restart with them.
//!
//! Kernel semantics this relies on:
//! - Copy mode transmits only from `sendmsg` context (`xsk_generic_xmit`, at most 32 frames per
//!   call unless the socket raises its budget with `XDP_MAX_TX_SKB_BUDGET`, Linux >= 6.17: netrig
//!   asks for 512), so copy-mode TX kicks with `sendto(MSG_DONTWAIT)` after every batch; zero-copy
//!   kicks only when the TX ring carries `XDP_RING_NEED_WAKEUP`.
//! - An XSK binds to a queue exclusively; the kernel releases the binding asynchronously after
//!   the owning process exits, so a quick re-open can get `EBUSY`.
use std::io;
use std::marker::PhantomData;
use std::mem;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::bpf::{self, OnMatch, Stamp, XdpMode};
use super::ifinfo;
use super::netns::in_netns;
use crate::clock;
use crate::error::PortError;
use crate::port::{
    Backend, Port, PortCaps, PortSpec, RxMeta, RxQueue, RxQueueStats, RxWait, TimestampSource, TxQueue, TxQueueStats,
    WakeFd,
};

/// Name of the XDP program that steers netrig frames to the AF_XDP sockets. A port of another
/// backend on an interface that carries it never sees netrig frames (the trial says so).
pub const STEER_PROG_NAME: &str = "netrig_steer";
/// Name of the XDP program that steers every frame to the AF_XDP sockets (`netrig forward`).
pub const FORWARD_PROG_NAME: &str = "netrig_fwd";

/// Default UMEM frames per queue (half for TX, half for RX): 32 MiB at 2 KiB frames. The RX
/// half (8192 frames) absorbs receiver stalls of ~30 ms at 250 kpps — on a VM the receiver
/// thread is descheduled for several ms at a time, and with 2048 RX frames a 10 s trial at
/// 250 kpps lost ~900 frames in the tester's ring (measured; 0 with 8192). TX stays in cache:
/// its free list is LIFO and at most 256 frames are in flight.
pub const DEFAULT_UMEM_FRAMES: u32 = 16384;
/// Default UMEM frame (chunk) size.
pub const DEFAULT_FRAME_SIZE: u32 = 2048;
/// Headroom the kernel leaves in front of received data in every RX frame (`XDP_PACKET_HEADROOM`).
const XDP_PACKET_HEADROOM: u32 = 256;
/// Most completions reaped per `send` call.
const REAP_MAX: u32 = 1024;
/// Default TX frames in flight in copy mode: twice [`COPY_MODE_TX_BUDGET`], so user space fills
/// one budget's worth while the kernel sends the other. Small enough that the frames in use (a
/// LIFO pool) stay cache-hot and the tester's own queueing delay at the top rate stays ~2 ms on
/// this VM (it is ~0 at any paced rate the path can carry: every batch is sent when submitted).
const COPY_MODE_INFLIGHT: u32 = 1024;
/// Default frames per copy-mode `sendto` (where the kernel lets a socket raise its budget of 32).
/// Measured on veth, 64 B TX-only (median of 3 × 5 s, A/B interleaved 3 times): 32 per call
/// 0.557 Mpps, 512 per call 0.573 Mpps; fewer syscalls, same kernel work per frame.
const COPY_MODE_TX_BUDGET: u32 = 512;
/// Shortest frame handed to the kernel.
const ETH_HLEN: usize = 14;

/// `setsockopt(SOL_XDP, XDP_MAX_TX_SKB_BUDGET)` (Linux 6.17, not yet in the libc crate).
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;
/// Frames a copy-mode `sendto` sends unless the socket raises it (`TX_BATCH_SIZE` in xsk.c).
const KERNEL_TX_BUDGET: u32 = 32;

const SO_BUSY_POLL: libc::c_int = 46;
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// Zero-copy policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZeroCopy {
    /// Try `XDP_ZEROCOPY`, fall back to copy mode (and say why).
    Auto,
    /// Zero-copy or fail.
    Require,
    /// Copy mode only.
    Off,
}

/// AF_XDP tuning. [`open`] uses the defaults with `umem_frames` from `PortSpec::ring_frames`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XskConfig {
    /// UMEM frames per queue, a power of two in 128..=65536; half TX, half RX. Ring sizes are
    /// half of this.
    pub umem_frames: u32,
    /// UMEM frame size: 2048 or 4096.
    pub frame_size: u32,
    pub zero_copy: ZeroCopy,
    /// XDP attach mode for the steering program; `None`: native, then generic.
    pub xdp_mode: Option<XdpMode>,
    /// `SO_BUSY_POLL` microseconds (with `SO_PREFER_BUSY_POLL`); 0 = off.
    pub busy_poll_us: u32,
    /// `SO_BUSY_POLL_BUDGET` when busy polling.
    pub busy_poll_budget: u32,
    /// Receive timestamps taken by the XDP program (XDP metadata); off: user-space stamps per
    /// batch. Costs one `bpf_ktime_get_ns` per received frame in the kernel.
    pub rx_stamps: bool,
    /// Copy mode: frames per `sendto` to ask the kernel for (`XDP_MAX_TX_SKB_BUDGET`, where the
    /// kernel has it; capped at the TX ring size); 32 or less keeps the kernel default.
    pub tx_budget: u32,
    /// Copy mode: most TX frames submitted and not yet completed.
    pub tx_inflight: u32,
    /// Steer every frame of a queue to its socket ([`FORWARD_PROG_NAME`], for a forwarder or the
    /// generator) instead of only netrig frames.
    pub steer_all: bool,
    /// With `steer_all`: ARP, ND, ICMP and LLDP frames without netrig's signature go to the kernel
    /// ([`bpf::keep_control_program`]; the port's emulated devices answer them).
    pub control_to_kernel: bool,
}

impl Default for XskConfig {
    fn default() -> Self {
        XskConfig {
            umem_frames: DEFAULT_UMEM_FRAMES,
            frame_size: DEFAULT_FRAME_SIZE,
            zero_copy: ZeroCopy::Auto,
            xdp_mode: None,
            busy_poll_us: 0,
            busy_poll_budget: 64,
            rx_stamps: true,
            tx_budget: COPY_MODE_TX_BUDGET,
            tx_inflight: COPY_MODE_INFLIGHT,
            steer_all: false,
            control_to_kernel: false,
        }
    }
}

impl XskConfig {
    fn validate(&self, ifname: &str) -> Result<(), PortError> {
        let bad = |message: String| Err(PortError::Other { ifname: ifname.to_string(), message });
        if !self.umem_frames.is_power_of_two() || !(128..=65536).contains(&self.umem_frames) {
            return bad(format!(
                "ring_frames={} is not valid for AF_XDP: use a power of two between 128 and 65536 (0 = default {})",
                self.umem_frames, DEFAULT_UMEM_FRAMES
            ));
        }
        if self.tx_inflight == 0 {
            return bad("AF_XDP tx_inflight=0 would never send: use at least 1".into());
        }
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return bad(format!("AF_XDP frame size {} is not valid: use 2048 or 4096", self.frame_size));
        }
        Ok(())
    }

    fn ring_size(&self) -> u32 {
        self.umem_frames / 2
    }
}

/// Open `spec` with this backend (default tuning; `spec.ring_frames` sets the UMEM frames,
/// `spec.busy_poll_us` busy polling).
pub fn open(spec: &PortSpec) -> Result<Box<dyn Port>, PortError> {
    let mut cfg = XskConfig::default();
    if spec.ring_frames != 0 {
        cfg.umem_frames = u32::try_from(spec.ring_frames).unwrap_or(u32::MAX);
    }
    cfg.busy_poll_us = spec.busy_poll_us;
    cfg.rx_stamps = spec.rx_stamps;
    if spec.rx_all {
        cfg.steer_all = true;
        cfg.control_to_kernel = spec.control_to_kernel;
    }
    open_with(spec, cfg)
}

/// How long opening waits for a queue that a just-closed XSK still holds (the kernel releases it
/// asynchronously, ~1-2 s after close).
const BUSY_RETRY: Duration = Duration::from_secs(4);

/// Open `spec` with explicit AF_XDP tuning.
pub fn open_with(spec: &PortSpec, cfg: XskConfig) -> Result<Box<dyn Port>, PortError> {
    let t0 = std::time::Instant::now();
    loop {
        match XskPort::open(spec, cfg.clone()) {
            Err(PortError::Busy { .. }) if t0.elapsed() < BUSY_RETRY => std::thread::sleep(Duration::from_millis(50)),
            r => return Ok(Box::new(r?)),
        }
    }
}

fn io_err(ifname: &str, queue: usize, op: &str, source: io::Error) -> PortError {
    let errno = source.raw_os_error();
    if errno == Some(libc::EPERM) || errno == Some(libc::EACCES) {
        return PortError::PermissionDenied { ifname: ifname.to_string(), what: format!("AF_XDP ({op})") };
    }
    PortError::Io { ifname: ifname.to_string(), queue, op: op.to_string(), source }
}

fn unsupported(ifname: &str, reason: String) -> PortError {
    PortError::Unsupported { ifname: ifname.to_string(), backend: "af_xdp".into(), reason }
}

/// An `mmap`ed region, unmapped on drop.
struct Mmap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory shared with the kernel; all access goes through raw
// pointers whose use is coordinated by the ring protocol (each ring and UMEM partition has one
// user-space owner), so moving or sharing the handle between threads is sound.
unsafe impl Send for Mmap {}
// SAFETY: see above; `Mmap` itself exposes no interior mutability.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Zeroed anonymous memory for a UMEM, 2 MiB aligned and advised for transparent huge pages
    /// (fewer TLB misses when the worker walks thousands of frames), faulted in up front.
    fn anonymous(len: usize) -> io::Result<Mmap> {
        const HUGE: usize = 2 << 20;
        let total = len + HUGE;
        // SAFETY: fresh private anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = p as usize;
        let start = (base + HUGE - 1) & !(HUGE - 1);
        // SAFETY: trims the unaligned head and the tail of the mapping created above; the kept
        // range [start, start + len) lies inside it. madvise is advisory; failure is harmless.
        // Writing one byte per page faults the range in (huge pages where the kernel can).
        unsafe {
            if start > base {
                libc::munmap(p, start - base);
            }
            let tail = base + total - (start + len);
            if tail > 0 {
                libc::munmap((start + len) as *mut libc::c_void, tail);
            }
            libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
            let mut off = 0;
            while off < len {
                ptr::write_volatile((start + off) as *mut u8, 0);
                off += 4096;
            }
        }
        Ok(Mmap { ptr: start as *mut u8, len })
    }

    fn ring(fd: RawFd, len: usize, pgoff: u64) -> io::Result<Mmap> {
        // SAFETY: maps the XSK ring at the kernel-defined page offset of a socket we own.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap { ptr: p.cast(), len })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe a mapping this value created and nobody uses any more (all
        // ring/UMEM users hold an Arc to the owning Xsk).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The two bound AF_XDP sockets of a queue with their UMEM and ring mappings. Field order is drop
/// order: rings are unmapped, then the sockets are closed, then the UMEM is unmapped.
struct Xsk {
    _rings: [Mmap; 4],
    /// The sending socket: the TX ring, sharing `fd`'s buffer pool (see `create_xsk`).
    tx_fd: OwnedFd,
    /// The receiving socket: it registered the UMEM, holds the fill, completion and RX rings and
    /// is the one in the XSKMAP.
    fd: OwnedFd,
    umem: Mmap,
    zero_copy: bool,
    /// Frames the kernel sends per `sendto` in copy mode.
    tx_budget: u32,
}

/// Pointers into one mapped ring.
struct RingPtrs {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut u8,
    size: u32,
}

// SAFETY: the pointers target a ring mapping kept alive by the Arc<Xsk> stored next to every
// RingPtrs; each ring has exactly one user-space owner (a queue slot, then one queue half), so
// moving it between threads is sound.
unsafe impl Send for RingPtrs {}

impl RingPtrs {
    fn new(map: &Mmap, off: &libc::xdp_ring_offset, size: u32) -> RingPtrs {
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS for this very mapping, which is at
        // least `off.desc + size * entry` bytes long (the length we mapped).
        unsafe {
            RingPtrs {
                producer: map.ptr.add(off.producer as usize).cast(),
                consumer: map.ptr.add(off.consumer as usize).cast(),
                flags: map.ptr.add(off.flags as usize).cast(),
                desc: map.ptr.add(off.desc as usize),
                size,
            }
        }
    }

    #[inline]
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into a live ring mapping (kept alive by the Arc<Xsk> of the owner); the
        // kernel accesses it atomically as well.
        unsafe { &*self.producer }
    }

    #[inline]
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for producer().
        unsafe { &*self.consumer }
    }

    #[inline]
    fn needs_wakeup(&self) -> bool {
        // SAFETY: as for producer().
        unsafe { &*self.flags }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

/// User-space producer side of a ring (fill, TX) with cached indices.
struct ProdRing<T> {
    r: RingPtrs,
    cached_prod: u32,
    /// Last seen consumer index plus the ring size: `cached_cons - cached_prod` is free space.
    cached_cons: u32,
    _t: PhantomData<T>,
}

impl<T: Copy> ProdRing<T> {
    fn new(r: RingPtrs) -> Self {
        let cached_prod = r.producer().load(Ordering::Relaxed);
        let cached_cons = r.consumer().load(Ordering::Acquire).wrapping_add(r.size);
        ProdRing { r, cached_prod, cached_cons, _t: PhantomData }
    }

    /// Free slots, refreshing the consumer index only when fewer than `want` are known free.
    #[inline]
    fn free(&mut self, want: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        self.cached_cons = self.r.consumer().load(Ordering::Acquire).wrapping_add(self.r.size);
        self.cached_cons.wrapping_sub(self.cached_prod)
    }

    /// Write entry `i` past the current producer index (the caller checked `free`).
    #[inline]
    fn write(&mut self, i: u32, v: T) {
        let idx = self.cached_prod.wrapping_add(i) & (self.r.size - 1);
        // SAFETY: idx < size and the descriptor array has `size` entries of T; the slot is free
        // (between producer and consumer+size), so the kernel does not read it concurrently.
        unsafe { ptr::write(self.r.desc.cast::<T>().add(idx as usize), v) };
    }

    #[inline]
    fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.r.producer().store(self.cached_prod, Ordering::Release);
    }

    /// Entries submitted and not yet consumed by the kernel.
    fn pending(&self) -> u32 {
        self.cached_prod.wrapping_sub(self.r.consumer().load(Ordering::Acquire))
    }
}

/// User-space consumer side of a ring (RX, completion) with cached indices.
struct ConsRing<T> {
    r: RingPtrs,
    cached_prod: u32,
    cached_cons: u32,
    _t: PhantomData<T>,
}

impl<T: Copy> ConsRing<T> {
    fn new(r: RingPtrs) -> Self {
        let cached_cons = r.consumer().load(Ordering::Relaxed);
        let cached_prod = r.producer().load(Ordering::Acquire);
        ConsRing { r, cached_prod, cached_cons, _t: PhantomData }
    }

    /// Entries ready (at most `max`), refreshing the producer index only when none are known.
    #[inline]
    fn available(&mut self, max: u32) -> u32 {
        let mut n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n == 0 {
            self.cached_prod = self.r.producer().load(Ordering::Acquire);
            n = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        n.min(max)
    }

    #[inline]
    fn read(&self, i: u32) -> T {
        let idx = self.cached_cons.wrapping_add(i) & (self.r.size - 1);
        // SAFETY: idx < size; the entry is between consumer and the producer index we loaded
        // with Acquire, so the kernel finished writing it and won't touch it until release().
        unsafe { ptr::read(self.r.desc.cast::<T>().add(idx as usize)) }
    }

    #[inline]
    fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.r.consumer().store(self.cached_cons, Ordering::Release);
    }
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: v points at a live T of the size we pass.
    let rc =
        unsafe { libc::setsockopt(fd, level, name, (v as *const T).cast(), mem::size_of::<T>() as libc::socklen_t) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn xdp_statistics(fd: RawFd) -> libc::xdp_statistics {
    // SAFETY: all-zero is a valid xdp_statistics; getsockopt writes at most `len` bytes into it.
    unsafe {
        let mut s: libc::xdp_statistics = mem::zeroed();
        let mut len = mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
            (&mut s as *mut libc::xdp_statistics).cast(),
            &mut len,
        );
        s
    }
}

/// The four rings of a freshly bound socket.
struct Rings {
    tx: ProdRing<libc::xdp_desc>,
    comp: ConsRing<u64>,
    rx: ConsRing<libc::xdp_desc>,
    fill: ProdRing<u64>,
}

/// Why a bind attempt failed (the op names the step for the error message).
struct CreateError {
    op: &'static str,
    source: io::Error,
}

fn step<T>(op: &'static str, r: io::Result<T>) -> Result<T, CreateError> {
    r.map_err(|source| CreateError { op, source })
}

fn new_socket() -> Result<OwnedFd, CreateError> {
    // SAFETY: plain socket(2).
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(CreateError { op: "socket(AF_XDP)", source: io::Error::last_os_error() });
    }
    // SAFETY: fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn mmap_offsets(s: RawFd) -> Result<libc::xdp_mmap_offsets, CreateError> {
    // SAFETY: all-zero is a valid xdp_mmap_offsets; getsockopt fills at most `len` bytes.
    let mut off: libc::xdp_mmap_offsets = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
    // SAFETY: off is a live, correctly sized out-buffer.
    let rc = unsafe {
        libc::getsockopt(
            s,
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            (&mut off as *mut libc::xdp_mmap_offsets).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(CreateError { op: "getsockopt(XDP_MMAP_OFFSETS)", source: io::Error::last_os_error() });
    }
    if len as usize != mem::size_of::<libc::xdp_mmap_offsets>() {
        return Err(CreateError {
            op: "getsockopt(XDP_MMAP_OFFSETS)",
            source: io::Error::other("kernel too old: no ring flags (need_wakeup needs Linux >= 5.4)"),
        });
    }
    Ok(off)
}

fn set_busy_poll(s: RawFd, cfg: &XskConfig) -> Result<(), CreateError> {
    if cfg.busy_poll_us > 0 {
        let one: libc::c_int = 1;
        let us = cfg.busy_poll_us as libc::c_int;
        let budget = cfg.busy_poll_budget as libc::c_int;
        step("setsockopt(SO_PREFER_BUSY_POLL)", setsockopt(s, libc::SOL_SOCKET, SO_PREFER_BUSY_POLL, &one))?;
        step("setsockopt(SO_BUSY_POLL)", setsockopt(s, libc::SOL_SOCKET, SO_BUSY_POLL, &us))?;
        step("setsockopt(SO_BUSY_POLL_BUDGET)", setsockopt(s, libc::SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget))?;
    }
    Ok(())
}

fn bind_xsk(s: RawFd, flags: u16, ifindex: u32, queue: u32, shared_umem_fd: RawFd) -> Result<(), CreateError> {
    let sa = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: shared_umem_fd as u32,
    };
    // SAFETY: sa is a valid sockaddr_xdp of the size we pass.
    let rc = unsafe {
        libc::bind(
            s,
            (&sa as *const libc::sockaddr_xdp).cast(),
            mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(CreateError { op: "bind", source: io::Error::last_os_error() });
    }
    Ok(())
}

/// Create, configure and bind the two sockets of one queue; `zero_copy` selects XDP_ZEROCOPY or
/// XDP_COPY. The receiving socket registers the UMEM and owns the fill, completion and RX rings;
/// the sending one has the TX ring alone and shares the first one's buffer pool
/// (`XDP_SHARED_UMEM` on the same queue). Two sockets, because in copy mode `poll(2)` on a socket
/// with a TX ring transmits from it (`xsk_poll` drives `xsk_generic_xmit`): a receiver waiting on
/// one shared socket took the TX mutex from the sender and spun on it (measured with perf: 95 %
/// of an OTG sending port's receiver, 5 % of the receiving CPU, in `mutex_spin_on_owner`).
fn create_xsk(ifindex: u32, queue: u32, cfg: &XskConfig, zero_copy: bool) -> Result<(Xsk, Rings), CreateError> {
    let fd = new_socket()?;
    let s = fd.as_raw_fd();
    let umem_len = cfg.umem_frames as usize * cfg.frame_size as usize;
    let umem = step("UMEM allocation", Mmap::anonymous(umem_len))?;
    let reg = libc::xdp_umem_reg {
        addr: umem.ptr as u64,
        len: umem_len as u64,
        chunk_size: cfg.frame_size,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    step("setsockopt(XDP_UMEM_REG)", setsockopt(s, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg))?;
    let n = cfg.ring_size();
    step("setsockopt(XDP_UMEM_FILL_RING)", setsockopt(s, libc::SOL_XDP, libc::XDP_UMEM_FILL_RING, &n))?;
    step("setsockopt(XDP_UMEM_COMPLETION_RING)", setsockopt(s, libc::SOL_XDP, libc::XDP_UMEM_COMPLETION_RING, &n))?;
    step("setsockopt(XDP_RX_RING)", setsockopt(s, libc::SOL_XDP, libc::XDP_RX_RING, &n))?;
    let tx_fd = new_socket()?;
    let t = tx_fd.as_raw_fd();
    step("setsockopt(XDP_TX_RING)", setsockopt(t, libc::SOL_XDP, libc::XDP_TX_RING, &n))?;
    // Copy mode sends at most `max_tx_budget` frames per sendto (32 by default). Linux >= 6.17
    // lets a socket raise it (XDP_MAX_TX_SKB_BUDGET, at most the TX ring size); older kernels
    // answer ENOPROTOOPT and keep 32.
    let tx_budget = if zero_copy || cfg.tx_budget <= KERNEL_TX_BUDGET {
        KERNEL_TX_BUDGET
    } else {
        let want = cfg.tx_budget.min(n);
        match setsockopt(t, libc::SOL_XDP, XDP_MAX_TX_SKB_BUDGET, &want) {
            Ok(()) => want,
            Err(_) => KERNEL_TX_BUDGET,
        }
    };
    let (off, tx_off) = (mmap_offsets(s)?, mmap_offsets(t)?);
    let desc = mem::size_of::<libc::xdp_desc>();
    let rx_map =
        step("mmap(RX ring)", Mmap::ring(s, off.rx.desc as usize + n as usize * desc, libc::XDP_PGOFF_RX_RING as u64))?;
    let tx_map = step(
        "mmap(TX ring)",
        Mmap::ring(t, tx_off.tx.desc as usize + n as usize * desc, libc::XDP_PGOFF_TX_RING as u64),
    )?;
    let fr_map =
        step("mmap(fill ring)", Mmap::ring(s, off.fr.desc as usize + n as usize * 8, libc::XDP_UMEM_PGOFF_FILL_RING))?;
    let cr_map = step(
        "mmap(completion ring)",
        Mmap::ring(s, off.cr.desc as usize + n as usize * 8, libc::XDP_UMEM_PGOFF_COMPLETION_RING),
    )?;
    set_busy_poll(s, cfg)?;
    set_busy_poll(t, cfg)?;
    let mode = if zero_copy { libc::XDP_ZEROCOPY } else { libc::XDP_COPY };
    bind_xsk(s, mode | libc::XDP_USE_NEED_WAKEUP, ifindex, queue, 0)?;
    bind_xsk(t, libc::XDP_SHARED_UMEM, ifindex, queue, s)?;
    let rings = Rings {
        tx: ProdRing::new(RingPtrs::new(&tx_map, &tx_off.tx, n)),
        comp: ConsRing::new(RingPtrs::new(&cr_map, &off.cr, n)),
        rx: ConsRing::new(RingPtrs::new(&rx_map, &off.rx, n)),
        fill: ProdRing::new(RingPtrs::new(&fr_map, &off.fr, n)),
    };
    Ok((Xsk { _rings: [rx_map, tx_map, fr_map, cr_map], tx_fd, fd, umem, zero_copy, tx_budget }, rings))
}

/// The attached steering program: link first so that dropping detaches before the program and
/// map go away.
struct XdpAttach {
    _link: OwnedFd,
    _prog: OwnedFd,
    map: OwnedFd,
    mode: XdpMode,
    /// Frames the steering program passed to the kernel (not netrig's), counted per CPU.
    passed: Option<OwnedFd>,
    /// Where the program writes receive timestamps.
    stamps: Stamp,
    /// Metadata stamps were asked for and the kernel refused them: why ([`load_steer`]).
    stamps_refused: Option<String>,
}

impl XdpAttach {
    /// Frames passed to the kernel so far (0 for the forwarding program, which passes none).
    fn passed(&self) -> u64 {
        self.passed.as_ref().and_then(|m| bpf::percpu_u64_sum(m, 0, 1).ok()).map_or(0, |v| v[0])
    }
}

fn attach_xdp(
    ifname: &str,
    ifindex: u32,
    entries: u32,
    want: Option<XdpMode>,
    stamp: StampWish,
    all: bool,
    control: bool,
) -> Result<(XdpAttach, String), PortError> {
    let bpf_err = |what: &str, e: io::Error| match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) if what != "load" => {
            PortError::PermissionDenied { ifname: ifname.to_string(), what: format!("BPF ({what})") }
        }
        Some(libc::ENOSYS) => unsupported(ifname, format!("the kernel has no bpf() syscall ({what})")),
        _ => unsupported(ifname, format!("cannot {what} the netrig XDP program: {e}")),
    };
    let map = bpf::xskmap_create(entries).map_err(|e| bpf_err("create the XSKMAP for", e))?;
    let passed = if all && !control {
        None
    } else {
        Some(bpf::percpu_array_create(1, 8, "netrig_passed").map_err(|e| bpf_err("create the counter for", e))?)
    };
    let (prog, stamps, stamps_refused) = match (&passed, all) {
        (None, _) => load_stamped(stamp, FORWARD_PROG_NAME, |s| bpf::redirect_all_program(map.as_raw_fd(), s)),
        (Some(c), true) => {
            load_stamped(stamp, FORWARD_PROG_NAME, |s| bpf::keep_control_program(map.as_raw_fd(), c.as_raw_fd(), s))
        }
        (Some(c), false) => load_steer(map.as_raw_fd(), Some(c.as_raw_fd()), stamp, STEER_PROG_NAME),
    }
    .map_err(|e| bpf_err("load", e))?;
    let modes: &[XdpMode] = match want {
        Some(XdpMode::Drv) => &[XdpMode::Drv],
        Some(XdpMode::Skb) => &[XdpMode::Skb],
        None => &[XdpMode::Drv, XdpMode::Skb],
    };
    let mut why = Vec::new();
    for &mode in modes {
        match bpf::link_create_xdp(&prog, ifindex, mode) {
            Ok(link) => {
                let note = if why.is_empty() {
                    format!("XDP {} via BPF link", mode.as_str())
                } else {
                    format!("XDP {} via BPF link ({})", mode.as_str(), why.join("; "))
                };
                let att = XdpAttach { _link: link, _prog: prog, map, mode, passed, stamps, stamps_refused };
                return Ok((att, note));
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EEXIST)) => {
                return Err(PortError::Other {
                    ifname: ifname.to_string(),
                    message: format!(
                        "another XDP program is attached ({e}); see `ip link show dev {ifname}` and detach it \
                         (`ip link set dev {ifname} xdp off`) or stop the process that owns it"
                    ),
                });
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) => {
                return Err(bpf_err("attach", e))
            }
            Err(e) => why.push(format!("{} refused: {e}", mode.as_str())),
        }
    }
    Err(unsupported(ifname, format!("cannot attach the XDP program: {}", why.join("; "))))
}

/// Check, without attaching anything, that the steering program loads here (BPF permitted, the
/// verifier accepts it): half of what receiving over AF_XDP needs; the other half is attaching it
/// to the interface, which [`Port::prepare_rx`] does.
pub fn probe_program(ifname: &str) -> Result<String, PortError> {
    let err = |what: &str, e: io::Error| match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            PortError::PermissionDenied { ifname: ifname.to_string(), what: format!("BPF ({what})") }
        }
        _ => unsupported(ifname, format!("cannot {what} the netrig XDP program: {e}")),
    };
    let map = bpf::xskmap_create(1).map_err(|e| err("create the XSKMAP for", e))?;
    let wish = StampWish { on: true, prefix_fits: true };
    let (_, stamp, refused) = load_steer(map.as_raw_fd(), None, wish, "netrig_probe").map_err(|e| err("load", e))?;
    let stamps = stamp_note(stamp, refused.as_deref());
    Ok(format!("XDP program loads ({stamps}); attached when the port receives"))
}

/// Which receive stamps a port asks of its steering program.
#[derive(Debug, Clone, Copy)]
struct StampWish {
    /// Kernel stamps at all (`XskConfig::rx_stamps`: not a forwarder's port).
    on: bool,
    /// The port's largest frame (its MTU, one VLAN tag) with a [`bpf::RX_STAMP_LEN`]-byte prefix
    /// fits the room a UMEM frame has for received data, so [`Stamp::Head`] can stand in.
    prefix_fits: bool,
}

/// What a port's notes say of its receive stamps.
fn stamp_note(stamp: Stamp, refused: Option<&str>) -> String {
    match (stamp, refused) {
        (Stamp::Meta, _) => "RX timestamps from XDP metadata".to_string(),
        (Stamp::Head, Some(why)) => format!("RX timestamps from the XDP program, in front of each frame ({why})"),
        (Stamp::Head, None) => "RX timestamps from the XDP program, in front of each frame".to_string(),
        (Stamp::Off, Some(why)) => format!("RX timestamps in user space ({why})"),
        (Stamp::Off, None) => "RX timestamps in user space".to_string(),
    }
}

/// Load the steering program with the receive stamps `wish` asks for: in XDP metadata; where
/// the kernel refuses that program and accepts one that prefixes the frame (a kernel that keeps
/// `bpf_xdp_adjust_meta` from XDP programs), with a prefix if it fits; else none, and user space
/// stamps per batch, as on a driver without room for metadata. The program, where it stamps, and
/// why not in metadata when metadata was refused.
fn load_steer(
    map: RawFd,
    passed: Option<RawFd>,
    wish: StampWish,
    name: &str,
) -> io::Result<(OwnedFd, Stamp, Option<String>)> {
    load_stamped(wish, name, |stamp| bpf::steer_program(OnMatch::Redirect(map), stamp, passed))
}

/// [`load_steer`] for any program (`insns` with the stamp asked).
fn load_stamped(
    wish: StampWish,
    name: &str,
    insns: impl Fn(Stamp) -> Vec<bpf::Insn>,
) -> io::Result<(OwnedFd, Stamp, Option<String>)> {
    let load = |stamp: Stamp| bpf::prog_load_xdp(&insns(stamp), name);
    if !wish.on {
        return Ok((load(Stamp::Off)?, Stamp::Off, None));
    }
    let e = match load(Stamp::Meta) {
        Ok(prog) => return Ok((prog, Stamp::Meta, None)),
        Err(e) => e,
    };
    let why = format!("the kernel refused them in XDP metadata: {}", bpf::verifier_reason(&e));
    if wish.prefix_fits {
        if let Ok(prog) = load(Stamp::Head) {
            return Ok((prog, Stamp::Head, Some(why)));
        }
    }
    let why = if wish.prefix_fits { why } else { format!("{why}; a prefix would not fit the largest frame") };
    Ok((load(Stamp::Off)?, Stamp::Off, Some(why)))
}

/// TX-side state of a queue: in the port between TX halves, moved into the half while it is open
/// and moved back when it is dropped (so every trial can open the queue again).
struct TxState {
    tx: ProdRing<libc::xdp_desc>,
    comp: ConsRing<u64>,
    /// Free TX frames (UMEM addresses), a stack so that recently completed (cached) frames are
    /// reused first. Capacity is the TX partition size; never reallocates.
    free: Vec<u64>,
    /// Frames submitted and not yet completed.
    outstanding: u32,
    /// Per TX frame (its address / `chunk`), the mark its last fill left (`TxQueue::send_held`).
    held: Vec<u64>,
    chunk: u64,
}

/// RX-side state of a queue; moves like [`TxState`].
struct RxState {
    rx: ConsRing<libc::xdp_desc>,
    fill: ProdRing<u64>,
    /// The fill ring got the RX partition (done once, on the first `open_rx`).
    primed: bool,
}

/// Where a half's state lives while no half is open.
type Home<T> = Arc<Mutex<Option<T>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct QueueSlot {
    xsk: Arc<Xsk>,
    tx: Home<TxState>,
    rx: Home<RxState>,
}

/// An interface opened with AF_XDP: one bound socket per queue.
pub struct XskPort {
    caps: PortCaps,
    netns: Option<String>,
    ifindex: u32,
    map_entries: u32,
    cfg: XskConfig,
    queues: Vec<QueueSlot>,
    xdp: Option<Arc<XdpAttach>>,
    base_notes: String,
}

impl XskPort {
    fn open(spec: &PortSpec, cfg: XskConfig) -> Result<XskPort, PortError> {
        let ifname = spec.ifname.as_str();
        cfg.validate(ifname)?;
        if spec.queues == 0 {
            return Err(PortError::Other {
                ifname: ifname.to_string(),
                message: "queues=0: use at least 1 queue".into(),
            });
        }
        // The steering program redirects UDP netrig frames with at most one VLAN tag; anything
        // else would reach the kernel stack instead of this socket and be counted as lost.
        if spec.receive && spec.rx_beyond_udp && !cfg.steer_all {
            return Err(unsupported(
                ifname,
                "AF_XDP receives only UDP netrig frames with at most one VLAN tag (its XDP program \
                 steers no others); af_packet receives TCP, ICMP, raw L2 and QinQ streams"
                    .into(),
            ));
        }
        // A frame must fit one UMEM chunk (no multi-buffer): refuse larger ones before anything
        // is set up, so auto selection passes AF_XDP over for jumbo frames and says why.
        let room = (cfg.frame_size - XDP_PACKET_HEADROOM) as usize;
        if spec.max_frame_len > room {
            return Err(unsupported(
                ifname,
                format!(
                    "frames of up to {} B (with FCS) do not fit one {} B UMEM chunk (AF_XDP carries at most {} B \
                     with FCS); af_packet carries them",
                    spec.max_frame_len + 4,
                    cfg.frame_size,
                    room + 4
                ),
            ));
        }
        in_netns(spec.netns.as_deref(), || {
            let info = ifinfo::ifinfo(ifname, spec.netns.as_deref())?;
            let dev_queues = info.rx_queues.max(info.tx_queues);
            if spec.queues > dev_queues {
                return Err(PortError::NoSuchQueue {
                    ifname: ifname.to_string(),
                    queue: spec.queues - 1,
                    queues: dev_queues,
                });
            }
            let mut queues = Vec::with_capacity(spec.queues);
            let mut zc_note = String::new();
            let mut tx_budget = KERNEL_TX_BUDGET;
            for q in 0..spec.queues {
                let (xsk, rings, note) = Self::bind_queue(ifname, info.ifindex, &info.driver, q, &cfg)?;
                if q == 0 {
                    zc_note = note;
                    tx_budget = xsk.tx_budget;
                }
                let free = (0..cfg.ring_size() as u64).rev().map(|i| i * cfg.frame_size as u64).collect();
                let (held, chunk) = (vec![0; cfg.ring_size() as usize], u64::from(cfg.frame_size));
                let tx = TxState { tx: rings.tx, comp: rings.comp, free, outstanding: 0, held, chunk };
                let rx = RxState { rx: rings.rx, fill: rings.fill, primed: false };
                queues.push(QueueSlot {
                    xsk: Arc::new(xsk),
                    tx: Arc::new(Mutex::new(Some(tx))),
                    rx: Arc::new(Mutex::new(Some(rx))),
                });
            }
            let zero_copy = queues.iter().all(|s| s.xsk.zero_copy);
            let rx_room = (cfg.frame_size - XDP_PACKET_HEADROOM) as usize;
            let max_frame_len = (info.mtu + 14).min(rx_room);
            let driver =
                if info.driver.is_empty() { "unknown driver".to_string() } else { format!("driver {}", info.driver) };
            let base_notes = format!(
                "AF_XDP on {driver}, {zc_note}, need_wakeup{}, UMEM {} x {} B per queue ({} TX + {} RX), rings {}{}",
                if cfg.busy_poll_us > 0 { format!(", busy poll {} us", cfg.busy_poll_us) } else { String::new() },
                cfg.umem_frames,
                cfg.frame_size,
                cfg.ring_size(),
                cfg.ring_size(),
                cfg.ring_size(),
                if zero_copy {
                    String::new()
                } else {
                    format!(", TX in flight <= {}, {tx_budget} frames per sendto", cfg.ring_size().min(cfg.tx_inflight))
                },
            );
            let caps = PortCaps {
                name: ifname.to_string(),
                backend: Backend::AfXdp,
                tx_queues: spec.queues,
                rx_queues: spec.queues,
                max_frame_len,
                speed_bps: info.speed_bps,
                rx_timestamp: TimestampSource::User,
                zero_copy,
                notes: format!("{base_notes}; XDP program: attached on first RX open"),
            };
            Ok(XskPort {
                caps,
                netns: spec.netns.clone(),
                ifindex: info.ifindex,
                map_entries: info.rx_queues.max(spec.queues) as u32,
                cfg,
                queues,
                xdp: None,
                base_notes,
            })
        })
    }

    fn bind_queue(
        ifname: &str,
        ifindex: u32,
        driver: &str,
        q: usize,
        cfg: &XskConfig,
    ) -> Result<(Xsk, Rings, String), PortError> {
        let fail = |e: CreateError| -> PortError {
            let errno = e.source.raw_os_error();
            if e.op == "socket(AF_XDP)" && errno == Some(libc::EAFNOSUPPORT) {
                return unsupported(ifname, "the kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)".into());
            }
            if e.op == "bind" && errno == Some(libc::EBUSY) {
                return PortError::Busy {
                    ifname: ifname.to_string(),
                    message: format!(
                        "queue {q}: AF_XDP bind failed: the queue is still bound by another AF_XDP socket \
                         (EBUSY); if a previous netrig just exited, wait ~2 s and retry"
                    ),
                };
            }
            io_err(ifname, q, e.op, e.source)
        };
        let copy = |why: String| -> Result<(Xsk, Rings, String), PortError> {
            let (x, r) = create_xsk(ifindex, q as u32, cfg, false).map_err(fail)?;
            Ok((x, r, why))
        };
        match cfg.zero_copy {
            ZeroCopy::Off => copy("copy mode (zero-copy off by configuration)".into()),
            ZeroCopy::Require => {
                let (x, r) = create_xsk(ifindex, q as u32, cfg, true).map_err(|e| {
                    if e.op == "bind" && matches!(e.source.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::EINVAL))
                    {
                        unsupported(ifname, format!("{driver}: no AF_XDP zero-copy support ({})", e.source))
                    } else {
                        fail(e)
                    }
                })?;
                Ok((x, r, "zero-copy".into()))
            }
            ZeroCopy::Auto => match create_xsk(ifindex, q as u32, cfg, true) {
                Ok((x, r)) => Ok((x, r, "zero-copy".into())),
                Err(e)
                    if e.op == "bind"
                        && matches!(e.source.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)) =>
                {
                    copy(format!("copy mode (zero-copy refused by driver {driver}: {})", e.source))
                }
                Err(e) => Err(fail(e)),
            },
        }
    }

    fn ensure_xdp(&mut self) -> Result<Arc<XdpAttach>, PortError> {
        if let Some(x) = &self.xdp {
            return Ok(x.clone());
        }
        let ifname = self.caps.name.clone();
        let (ifindex, entries, mode, all) = (self.ifindex, self.map_entries, self.cfg.xdp_mode, self.cfg.steer_all);
        let room = (self.cfg.frame_size - XDP_PACKET_HEADROOM) as usize;
        let largest = self.caps.max_frame_len + 4; // an 802.1Q tag
        let stamp = StampWish { on: self.cfg.rx_stamps, prefix_fits: largest + bpf::RX_STAMP_LEN <= room };
        let control = self.cfg.control_to_kernel;
        let (att, note) =
            in_netns(self.netns.as_deref(), || attach_xdp(&ifname, ifindex, entries, mode, stamp, all, control))?;
        let steered = match (all, control) {
            (true, true) => "every frame steered to the sockets but ARP, ND, ICMP and LLDP (to the kernel), ",
            (true, false) => "every frame steered to the sockets, ",
            (false, _) => "",
        };
        let stamps = stamp_note(att.stamps, att.stamps_refused.as_deref());
        self.caps.notes = format!("{}, {note}, {steered}{stamps}", self.base_notes);
        if att.stamps != Stamp::Off {
            self.caps.rx_timestamp = TimestampSource::KernelXdp;
        }
        let att = Arc::new(att);
        self.xdp = Some(att.clone());
        Ok(att)
    }

    fn slot(&mut self, queue: usize) -> Result<&mut QueueSlot, PortError> {
        let n = self.queues.len();
        let ifname = self.caps.name.clone();
        self.queues.get_mut(queue).ok_or(PortError::NoSuchQueue { ifname, queue, queues: n })
    }

    /// XDP attach mode once the program is attached (after the first `open_rx`).
    pub fn xdp_mode(&self) -> Option<XdpMode> {
        self.xdp.as_ref().map(|x| x.mode)
    }
}

impl Port for XskPort {
    fn caps(&self) -> &PortCaps {
        &self.caps
    }

    fn open_tx(&mut self, queue: usize) -> Result<Box<dyn TxQueue>, PortError> {
        let ifname = self.caps.name.clone();
        let max_len = self.caps.max_frame_len;
        let cfg = self.cfg.clone();
        let slot = self.slot(queue)?;
        let Some(st) = lock(&slot.tx).take() else {
            return Err(PortError::Other { ifname, message: format!("queue {queue}: TX half already open") });
        };
        Ok(Box::new(XskTx {
            umem: slot.xsk.umem.ptr,
            always_kick: !slot.xsk.zero_copy || cfg.busy_poll_us > 0,
            inflight_cap: if slot.xsk.zero_copy { cfg.ring_size() } else { cfg.ring_size().min(cfg.tx_inflight) },
            errors_base: xdp_statistics(slot.xsk.tx_fd.as_raw_fd()).tx_invalid_descs,
            xsk: slot.xsk.clone(),
            st: ManuallyDrop::new(st),
            home: slot.tx.clone(),
            frame_mask: !(cfg.frame_size as u64 - 1),
            max_len,
            stats: TxQueueStats::default(),
            ifname,
            queue,
        }))
    }

    fn prepare_rx(&mut self) -> Result<(), PortError> {
        self.ensure_xdp().map(|_| ())
    }

    fn link(&self) -> Option<Arc<dyn crate::port::LinkSource>> {
        Some(super::link::source(self.netns.as_deref(), self.ifindex))
    }

    fn open_rx(&mut self, queue: usize) -> Result<Box<dyn RxQueue>, PortError> {
        let ifname = self.caps.name.clone();
        let cfg = self.cfg.clone();
        if lock(&self.slot(queue)?.rx).is_none() {
            return Err(PortError::Other { ifname, message: format!("queue {queue}: RX half already open") });
        }
        let xdp = self.ensure_xdp()?;
        let stamps = xdp.stamps;
        let slot = self.slot(queue)?;
        let Some(mut st) = lock(&slot.rx).take() else {
            return Err(PortError::Other { ifname, message: format!("queue {queue}: RX half already open") });
        };
        let frames = cfg.ring_size();
        let frame_mask = !(cfg.frame_size as u64 - 1);
        if !st.primed {
            // The RX partition is the upper half of the UMEM; all of it goes into the fill ring,
            // which is exactly that large, so returning received frames never finds it full.
            let base = frames as u64 * cfg.frame_size as u64;
            if st.fill.free(frames) < frames {
                *lock(&slot.rx) = Some(st);
                return Err(PortError::Other {
                    ifname,
                    message: format!("queue {queue}: fill ring not empty at open"),
                });
            }
            for i in 0..frames {
                st.fill.write(i, base + i as u64 * cfg.frame_size as u64);
            }
            st.fill.submit(frames);
            st.primed = true;
        } else {
            // Frames left over from a previous RX half belong to an earlier trial: recycle them.
            loop {
                let n = st.rx.available(frames);
                if n == 0 {
                    break;
                }
                let n = n.min(st.fill.free(n));
                for i in 0..n {
                    let addr = st.rx.read(i).addr & frame_mask;
                    st.fill.write(i, addr);
                }
                st.fill.submit(n);
                st.rx.release(n);
            }
        }
        if let Err(e) = bpf::xskmap_set(&xdp.map, queue as u32, slot.xsk.fd.as_raw_fd()) {
            *lock(&slot.rx) = Some(st);
            return Err(io_err(&ifname, queue, "XSKMAP update", e));
        }
        Ok(Box::new(XskRx {
            umem: slot.xsk.umem.ptr,
            busy_poll: cfg.busy_poll_us > 0,
            base: xdp_statistics(slot.xsk.fd.as_raw_fd()),
            passed_base: xdp.passed(),
            xsk: slot.xsk.clone(),
            xdp,
            st: ManuallyDrop::new(st),
            home: slot.rx.clone(),
            frame_mask,
            queue: queue as u16,
            stamps,
            wait: RxWait::Spin,
            wake: None,
        }))
    }
}

/// A frame the steering program prefixed with its receive time ([`Stamp::Head`]): the time and
/// the frame. `None` for a frame without the prefix (the driver had no headroom): its bytes 12-13
/// are the ethertype the program matched, never the prefix's zeros.
#[inline(always)]
fn split_stamp(data: &[u8]) -> Option<(u64, &[u8])> {
    let (prefix, frame) = data.split_first_chunk::<{ bpf::RX_STAMP_LEN }>()?;
    let magic = u32::from_ne_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]);
    if magic != bpf::RX_STAMP_MAGIC || prefix[12..] != [0; 4] {
        return None;
    }
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&prefix[..8]);
    Some((u64::from_ne_bytes(ts), frame))
}

/// Transmit half of one AF_XDP queue.
pub struct XskTx {
    xsk: Arc<Xsk>,
    st: ManuallyDrop<TxState>,
    home: Home<TxState>,
    umem: *mut u8,
    frame_mask: u64,
    max_len: usize,
    errors_base: u64,
    /// Copy mode (or busy poll): every batch needs a `sendto` to be transmitted.
    always_kick: bool,
    /// Most frames submitted and not completed (never more than the TX partition).
    inflight_cap: u32,
    stats: TxQueueStats,
    ifname: String,
    queue: usize,
}

// SAFETY: the raw pointers point into the UMEM and ring mappings owned by `xsk` (an Arc kept in
// this struct); this half is the only user-space writer of the TX ring, the only reader of the
// completion ring and the only user of the TX UMEM partition, so moving it to another thread is
// sound.
unsafe impl Send for XskTx {}

impl XskTx {
    #[inline]
    fn reap(&mut self) {
        let n = self.st.comp.available(REAP_MAX);
        for i in 0..n {
            let addr = self.st.comp.read(i) & self.frame_mask;
            self.st.free.push(addr);
        }
        if n > 0 {
            self.st.comp.release(n);
            self.st.outstanding -= n;
        }
    }

    #[inline]
    fn kick(&mut self, force: bool) -> Result<(), PortError> {
        if !(force || self.always_kick || self.st.tx.r.needs_wakeup()) {
            return Ok(());
        }
        // SAFETY: sendto with no buffer on a socket we own (via Arc) only wakes the TX path.
        let rc =
            unsafe { libc::sendto(self.xsk.tx_fd.as_raw_fd(), ptr::null(), 0, libc::MSG_DONTWAIT, ptr::null(), 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // Copy mode: the driver dropped the frame it was given (NET_XMIT_DROP; veth: its
                // peer's ring was full), which the kernel completes and reports as EBUSY, stopping
                // there: one frame that never left, though the tester counted it sent.
                Some(libc::EBUSY) => self.stats.errors += 1,
                // Budget exhausted, no skb memory: retry on the next batch. The interface set down
                // (ENETDOWN, before any descriptor is read): the frames wait in the ring and leave
                // once it is up again, as a back-pressured batch does.
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) | Some(libc::ENETDOWN) => {}
                _ => return Err(io_err(&self.ifname, self.queue, "sendto (TX kick)", e)),
            }
        }
        Ok(())
    }
}

impl TxQueue for XskTx {
    fn send_held(
        &mut self,
        count: usize,
        fill: &mut dyn FnMut(&mut [u8], &mut u64) -> usize,
    ) -> Result<usize, PortError> {
        self.reap();
        let room = self.inflight_cap.saturating_sub(self.st.outstanding) as usize;
        let want = count.min(room) as u32;
        let n = if want == 0 { 0 } else { want.min(self.st.tx.free(want)) };
        if n == 0 {
            if count > 0 {
                self.stats.backpressure += 1;
            }
            if self.st.outstanding > 0 {
                self.kick(false)?;
            }
            return Ok(0);
        }
        let mut bytes = 0u64;
        for i in 0..n {
            let Some(addr) = self.st.free.pop() else { break };
            // SAFETY: addr is the start of a TX-partition frame of at least max_len bytes inside
            // the UMEM mapping; the frame is ours (not in any ring) until submitted below.
            let buf = unsafe { std::slice::from_raw_parts_mut(self.umem.add(addr as usize), self.max_len) };
            // A descriptor the kernel rejects is never completed: keep every length valid.
            let slot = (addr / self.st.chunk) as usize;
            let held = &mut self.st.held[slot];
            let len = fill(buf, held).clamp(ETH_HLEN, self.max_len);
            bytes += len as u64;
            self.st.tx.write(i, libc::xdp_desc { addr, len: len as u32, options: 0 });
        }
        self.st.tx.submit(n);
        self.st.outstanding += n;
        self.stats.frames += n as u64;
        self.stats.bytes += bytes;
        if n < count as u32 {
            self.stats.backpressure += 1;
        }
        self.kick(false)?;
        Ok(n as usize)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if self.st.tx.pending() > 0 {
            self.kick(true)?;
        }
        self.reap();
        Ok(())
    }

    fn idle(&mut self) -> bool {
        if self.flush().is_err() {
            return false;
        }
        self.st.outstanding == 0
    }

    fn stats(&self) -> TxQueueStats {
        let s = xdp_statistics(self.xsk.tx_fd.as_raw_fd());
        // Descriptors the kernel refused, and frames a driver dropped (counted at the kick).
        TxQueueStats { errors: s.tx_invalid_descs.saturating_sub(self.errors_base) + self.stats.errors, ..self.stats }
    }
}

/// Receive half of one AF_XDP queue.
pub struct XskRx {
    xsk: Arc<Xsk>,
    xdp: Arc<XdpAttach>,
    st: ManuallyDrop<RxState>,
    home: Home<RxState>,
    /// Socket statistics when this half was opened (its stats are relative to them).
    base: libc::xdp_statistics,
    umem: *mut u8,
    frame_mask: u64,
    queue: u16,
    busy_poll: bool,
    /// Where the XDP program writes receive timestamps.
    stamps: Stamp,
    /// How an empty ring is waited on (`RxQueue::set_wait`).
    wait: RxWait,
    wake: Option<Arc<WakeFd>>,
    /// The steering program's count of frames passed to the kernel when this half was opened.
    passed_base: u64,
}

// SAFETY: the raw pointers point into mappings owned by `xsk` (an Arc kept here); this half is
// the only user-space reader of the RX ring, the only writer of the fill ring and the only user
// of the RX UMEM partition.
unsafe impl Send for XskRx {}

impl XskRx {
    fn wake(&self) {
        // SAFETY: recvfrom with no buffer on our socket only drives the RX path (busy poll).
        unsafe {
            libc::recvfrom(
                self.xsk.fd.as_raw_fd(),
                ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
    }

    fn sleep_in_poll(&self, timeout: Duration) {
        let wake = self.wake.as_ref().map_or(-1, |w| w.raw());
        let mut pfd = [
            libc::pollfd { fd: self.xsk.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: wake, events: libc::POLLIN, revents: 0 },
        ];
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: two valid pollfds (a negative fd is ignored) and a valid timespec; EINTR just
        // ends the wait early.
        unsafe { libc::ppoll(pfd.as_mut_ptr(), 2, &ts, ptr::null()) };
    }
}

#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint and never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// How long an empty RX queue is polled in user space before the worker sleeps in `ppoll`.
const RX_SPIN: Duration = Duration::from_micros(500);

impl RxQueue for XskRx {
    fn recv(
        &mut self,
        max: usize,
        timeout: Duration,
        on_frame: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, PortError> {
        let max = max.min(u32::MAX as usize) as u32;
        if max == 0 {
            return Ok(0);
        }
        let mut n = self.st.rx.available(max);
        if n == 0 {
            if self.busy_poll || self.st.fill.r.needs_wakeup() {
                self.wake();
                n = self.st.rx.available(max);
            }
            // Spin briefly before sleeping: a receiver asleep in poll() makes the CPU that
            // delivers (on veth, the one that transmits into the port) pay a wake-up for every
            // batch it redirects (~20 % of its cycles in sock_def_readable, measured with perf).
            // A worker pinned to its own CPU spins when frames may come too fast for a nap
            // (`RxWait::alone`); one that shares a sender's CPU naps (`RxWait::Nap`).
            if n == 0 && self.wait == RxWait::Spin && !timeout.is_zero() {
                let spin_until = clock::now_ns() + RX_SPIN.min(timeout).as_nanos() as u64;
                while n == 0 && clock::now_ns() < spin_until {
                    std::hint::spin_loop();
                    n = self.st.rx.available(max);
                }
            }
            if n == 0 && !timeout.is_zero() {
                self.wait.wait(timeout, |t| {
                    self.sleep_in_poll(t);
                    Ok(())
                })?;
                n = self.st.rx.available(max);
            }
            if n == 0 {
                return Ok(0);
            }
        }
        // All RX frames fit in the fill ring, so there is always room to return these n.
        let room = self.st.fill.free(n);
        let n = n.min(room);
        let mut meta = RxMeta { ts_ns: clock::now_ns(), queue: self.queue };
        let batch_ts = meta.ts_ns;
        let mut next = self.st.rx.read(0);
        for i in 0..n {
            let d = next;
            if i + 1 < n {
                // The kernel wrote these frames on another CPU: start pulling the next one's
                // headers (and signature) into cache while the current one is analysed.
                next = self.st.rx.read(i + 1);
                prefetch(self.umem.wrapping_add(next.addr as usize));
                prefetch(self.umem.wrapping_add(next.addr as usize + 64));
                if self.stamps == Stamp::Meta {
                    prefetch(self.umem.wrapping_add(next.addr as usize - bpf::RX_STAMP_LEN));
                }
            }
            // SAFETY: the kernel wrote d.len bytes at UMEM offset d.addr of a frame of the RX
            // partition; the frame stays ours until it is put back in the fill ring below.
            let mut data = unsafe { std::slice::from_raw_parts(self.umem.add(d.addr as usize), d.len as usize) };
            meta.ts_ns = batch_ts;
            if self.stamps == Stamp::Head {
                if let Some((ts, frame)) = split_stamp(data) {
                    (meta.ts_ns, data) = (ts, frame);
                }
            }
            // The kernel puts RX data XDP_PACKET_HEADROOM (256) bytes into its frame; checked
            // anyway, so that a driver doing otherwise costs the stamp, never memory safety.
            if self.stamps == Stamp::Meta && (d.addr & !self.frame_mask) as usize >= bpf::RX_STAMP_LEN {
                // SAFETY: the RX_STAMP_LEN bytes in front of the data are inside the same frame
                // (checked above), which is ours until it goes back to the fill ring. Unaligned
                // reads: the kernel aligns data only to 2 bytes in some drivers.
                unsafe {
                    let m = self.umem.add(d.addr as usize - bpf::RX_STAMP_LEN);
                    if ptr::read_unaligned(m.add(8).cast::<u32>()) == bpf::RX_STAMP_MAGIC {
                        meta.ts_ns = ptr::read_unaligned(m.cast::<u64>());
                        ptr::write_unaligned(m.add(8).cast::<u32>(), 0);
                    }
                }
            }
            on_frame(data, meta);
            self.st.fill.write(i, d.addr & self.frame_mask);
        }
        self.st.fill.submit(n);
        self.st.rx.release(n);
        Ok(n as usize)
    }

    fn stats(&mut self) -> RxQueueStats {
        let (s, b) = (xdp_statistics(self.xsk.fd.as_raw_fd()), &self.base);
        RxQueueStats {
            ring_drops: (s.rx_dropped + s.rx_ring_full).saturating_sub(b.rx_dropped + b.rx_ring_full),
            overruns: s.rx_fill_ring_empty_descs.saturating_sub(b.rx_fill_ring_empty_descs),
            // The program serves every queue of the port: its count is reported once, by queue 0.
            foreign: if self.queue == 0 { self.xdp.passed().saturating_sub(self.passed_base) } else { 0 },
        }
    }

    fn set_wait(&mut self, wait: RxWait) {
        self.wait = wait;
    }

    fn set_wake(&mut self, wake: Option<Arc<WakeFd>>) {
        self.wake = wake;
    }

    fn ring_frames(&self) -> Option<usize> {
        Some(self.st.rx.r.size as usize)
    }
}

impl Drop for XskRx {
    fn drop(&mut self) {
        // Stop steering frames into a socket nobody reads (they go to the kernel until the next
        // open_rx); the link goes when the last holder of the program drops.
        let _ = bpf::xskmap_clear(&self.xdp.map, self.queue as u32);
        // SAFETY: `st` is taken exactly once, here, and not used afterwards.
        let st = unsafe { ManuallyDrop::take(&mut self.st) };
        *lock(&self.home) = Some(st);
    }
}

impl Drop for XskTx {
    fn drop(&mut self) {
        // SAFETY: `st` is taken exactly once, here, and not used afterwards.
        let st = unsafe { ManuallyDrop::take(&mut self.st) };
        *lock(&self.home) = Some(st);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sys::bpf::testkit::*;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::time::Instant;

    fn spec(ifname: &str, ns: &str) -> PortSpec {
        PortSpec { netns: Some(ns.to_string()), backend: Some(Backend::AfXdp), ..PortSpec::new(ifname) }
    }

    /// Send `n` frames built by `make(seq, buf)`, keeping at most `window` ahead of `acked`.
    fn send_all(
        tx: &mut dyn TxQueue,
        n: u64,
        window: u64,
        acked: &AtomicU64,
        make: &mut dyn FnMut(u64, &mut [u8]) -> usize,
    ) {
        let mut seq = 0u64;
        let t0 = Instant::now();
        while seq < n {
            assert!(t0.elapsed() < Duration::from_secs(60), "sending stalled at {seq}");
            if seq.saturating_sub(acked.load(Ordering::Relaxed)) >= window {
                tx.flush().unwrap();
                std::thread::yield_now();
                continue;
            }
            let k = (n - seq).min(64) as usize;
            let mut next = seq;
            let sent = tx
                .send(k, &mut |buf| {
                    let l = make(next, buf);
                    next += 1;
                    l
                })
                .unwrap();
            assert_eq!(next - seq, sent as u64, "fill called once per accepted frame");
            seq = next;
        }
        let t0 = Instant::now();
        while !tx.idle() {
            assert!(t0.elapsed() < Duration::from_secs(10), "TX never drained");
            std::thread::yield_now();
        }
    }

    #[test]
    fn config_is_validated_before_anything_is_opened() {
        let s = PortSpec { ring_frames: 1000, ..PortSpec::new("nr-does-not-exist0") };
        let e = open(&s).err().expect("bad ring_frames");
        assert!(e.to_string().contains("ring_frames=1000"), "{e}");
        let e = open_with(&PortSpec::new("nr-does-not-exist0"), XskConfig { frame_size: 3000, ..XskConfig::default() })
            .err()
            .expect("bad frame size");
        assert!(e.to_string().contains("2048 or 4096"), "{e}");
        let e = open(&PortSpec::new("nr-does-not-exist0")).err().expect("no such interface");
        assert!(matches!(e, PortError::NoSuchInterface { .. }), "{e}");
    }

    #[test]
    fn without_privileges_the_error_says_so() {
        if is_root() {
            eprintln!("skipped: checks the unprivileged error, runs only as non-root");
            return;
        }
        let e = open(&PortSpec::new("lo")).err().expect("AF_XDP needs CAP_NET_RAW");
        assert!(matches!(e, PortError::PermissionDenied { .. }), "{e}");
    }

    /// A receiving port stamps in its XDP program: in metadata where this kernel's verifier
    /// takes that program (loaded here as the oracle), else in front of each frame, saying why.
    pub(crate) fn assert_stamp_source(caps: &PortCaps) {
        assert_eq!(caps.rx_timestamp, TimestampSource::KernelXdp, "{}", caps.notes);
        let map = bpf::xskmap_create(1).expect("XSKMAP");
        let meta = bpf::steer_program(OnMatch::Redirect(map.as_raw_fd()), Stamp::Meta, None);
        let why = if bpf::prog_load_xdp(&meta, "netrig_test").is_ok() {
            "RX timestamps from XDP metadata"
        } else {
            "RX timestamps from the XDP program, in front of each frame (the kernel refused them in XDP metadata: "
        };
        assert!(caps.notes.contains(why), "{}", caps.notes);
    }

    #[test]
    fn xsk_tx_to_xsk_rx_counts_every_frame_and_the_link_dies_with_the_port() {
        if !is_root() {
            eprintln!("skipped: needs root (namespaces, veth, XDP)");
            return;
        }
        const N: u64 = 200_000;
        let v = VethPair::new("t");
        let mut rxp = open_retry(&spec(&v.if_b, &v.ns_b));
        assert!(!v.link_show(&v.ns_b, &v.if_b).contains("prog/xdp"), "no program before open_rx");
        let mut rxq = rxp.open_rx(0).expect("open_rx");
        let shown = v.link_show(&v.ns_b, &v.if_b);
        assert!(shown.contains("prog/xdp"), "program attached natively: {shown}");
        let notes = rxp.caps().notes.clone();
        assert!(notes.contains("native (drv)") && notes.contains("copy mode"), "{notes}");
        assert_stamp_source(rxp.caps());
        let mut txp = open_retry(&spec(&v.if_a, &v.ns_a));
        assert!(!v.link_show(&v.ns_a, &v.if_a).contains("prog/xdp"), "TX-only port attaches no program");
        let mut txq = txp.open_tx(0).expect("open_tx");

        let acked = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let rx_thread = {
            let (acked, done) = (acked.clone(), done.clone());
            std::thread::spawn(move || {
                let mut seen = vec![0u8; N as usize];
                let (mut count, mut bad) = (0u64, 0u64);
                // Kernel stamps: per frame, in arrival order, never in the future.
                let (mut last_ts, mut distinct, mut backwards) = (0u64, 0u64, 0u64);
                let t0 = Instant::now();
                while count < N && t0.elapsed() < Duration::from_secs(60) && !done.load(Ordering::Relaxed) {
                    rxq.recv(64, Duration::from_millis(20), &mut |f, meta| {
                        assert!(meta.ts_ns > 0 && meta.ts_ns <= crate::clock::now_ns());
                        distinct += (meta.ts_ns != last_ts) as u64;
                        backwards += (meta.ts_ns < last_ts) as u64;
                        last_ts = meta.ts_ns;
                        match seq_of(f) {
                            Some(s) if s < N && f.len() == 60 => seen[s as usize] += 1,
                            _ => bad += 1,
                        }
                        count += 1;
                    })
                    .unwrap();
                    acked.store(count, Ordering::Relaxed);
                }
                let stats = rxq.stats();
                assert_eq!(backwards, 0, "XDP stamps of one queue never go backwards");
                assert!(distinct > count * 9 / 10, "a stamp per frame, not per batch: {distinct} of {count}");
                (count, bad, seen.iter().filter(|&&c| c != 1).count(), stats)
            })
        };
        let mut make = |seq: u64, buf: &mut [u8]| TestFrame { seq, ..TestFrame::default() }.build(buf);
        send_all(&mut *txq, N, 1024, &acked, &mut make);
        let st = txq.stats();
        let (count, bad, wrong, rxstats) = {
            let t0 = Instant::now();
            while acked.load(Ordering::Relaxed) < N && t0.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(10));
            }
            done.store(true, Ordering::Relaxed);
            rx_thread.join().expect("rx thread")
        };
        assert_eq!(st.frames, N);
        assert_eq!(st.bytes, N * 60);
        assert_eq!(st.errors, 0);
        assert_eq!((count, bad, wrong), (N, 0, 0), "every frame received exactly once");
        assert_eq!(rxstats, RxQueueStats::default());
        drop(txq);
        drop(txp);
        drop(rxp);
        let shown = v.link_show(&v.ns_b, &v.if_b);
        assert!(!shown.contains("prog/xdp"), "program detached after the port was dropped: {shown}");
    }

    #[test]
    fn frames_without_the_signature_go_to_the_kernel() {
        if !is_root() {
            eprintln!("skipped: needs root (namespaces, veth, XDP)");
            return;
        }
        let v = VethPair::new("p");
        let mut rxp = open_retry(&spec(&v.if_b, &v.ns_b));
        let mut rxq = rxp.open_rx(0).expect("open_rx");
        let mut txp = open_retry(&spec(&v.if_a, &v.ns_a));
        let mut txq = txp.open_tx(0).expect("open_tx");
        let udp = |v: &VethPair| -> u64 {
            let snmp = sh(&["ip", "netns", "exec", &v.ns_b, "cat", "/proc/net/snmp"]).unwrap();
            let mut lines = snmp.lines().filter(|l| l.starts_with("Udp:"));
            let (h, vals) = (lines.next().unwrap(), lines.next().unwrap());
            let get = |k: &str| -> u64 {
                let i = h.split_whitespace().position(|x| x == k).unwrap();
                vals.split_whitespace().nth(i).unwrap().parse().unwrap()
            };
            get("InDatagrams") + get("NoPorts") + get("InErrors")
        };
        let udp0 = udp(&v);
        // ARP from A: B's kernel must see it (it learns A's address from the request).
        let none = AtomicU64::new(0);
        send_all(&mut *txq, 1, 1, &none, &mut |_, buf| arp_request(buf));
        // 1000 netrig frames interleaved with 1000 plain UDP frames.
        let make = |seq: u64, buf: &mut [u8]| {
            TestFrame { seq: seq / 2, magic: seq.is_multiple_of(2), ..TestFrame::default() }.build(buf)
        };
        let mut got = 0u64;
        let mut total = 0u64;
        // Small window and receiving inline keep this single-threaded and loss-free.
        let mut seq = 0u64;
        while seq < 2000 {
            let mut next = seq;
            let k = txq
                .send(64.min((2000 - seq) as usize), &mut |buf| {
                    let l = make(next, buf);
                    next += 1;
                    l
                })
                .unwrap();
            seq += k as u64;
            let _ = txq.flush();
            rxq.recv(256, Duration::from_millis(1), &mut |f, _| {
                total += 1;
                if seq_of(f).is_some() {
                    got += 1;
                }
            })
            .unwrap();
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(500) {
            rxq.recv(256, Duration::from_millis(10), &mut |f, _| {
                total += 1;
                if seq_of(f).is_some() {
                    got += 1;
                }
            })
            .unwrap();
        }
        assert_eq!((got, total), (1000, 1000), "the socket gets the netrig frames and nothing else");
        let t0 = Instant::now();
        while udp(&v) - udp0 < 1000 && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(udp(&v) - udp0, 1000, "the plain UDP frames reached B's UDP layer");
        let neigh = sh(&["ip", "-n", &v.ns_b, "neigh", "show", "198.18.0.1"]).unwrap();
        assert!(neigh.contains("02:00:00:00:4e:01"), "B's kernel processed the ARP request: {neigh}");
    }

    /// Send `n` frames on `tx` while receiving on `rx` inline; returns the signature frames seen.
    fn exchange(tx: &mut dyn TxQueue, rx: &mut dyn RxQueue, n: u64, make: &dyn Fn(u64, &mut [u8]) -> usize) -> u64 {
        let (mut seq, mut got) = (0u64, 0u64);
        let mut count = |f: &[u8], _: RxMeta| {
            if seq_of(f).is_some() {
                got += 1;
            }
        };
        while seq < n {
            let mut next = seq;
            let k = tx
                .send(64.min((n - seq) as usize), &mut |buf| {
                    let l = make(next, buf);
                    next += 1;
                    l
                })
                .unwrap();
            seq += k as u64;
            tx.flush().unwrap();
            rx.recv(256, Duration::from_millis(1), &mut count).unwrap();
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(300) {
            rx.recv(256, Duration::from_millis(10), &mut count).unwrap();
        }
        got
    }

    #[test]
    fn one_port_transmits_and_receives_on_the_same_queue() {
        if !is_root() {
            eprintln!("skipped: needs root (namespaces, veth, XDP)");
            return;
        }
        let v = VethPair::new("b");
        let mut pa = open_retry(&spec(&v.if_a, &v.ns_a));
        let mut pb = open_retry(&spec(&v.if_b, &v.ns_b));
        let (mut ta, mut ra) = (pa.open_tx(0).unwrap(), pa.open_rx(0).unwrap());
        let (mut tb, mut rb) = (pb.open_tx(0).unwrap(), pb.open_rx(0).unwrap());
        let make = |seq: u64, buf: &mut [u8]| TestFrame { seq, ..TestFrame::default() }.build(buf);
        assert_eq!(exchange(&mut *ta, &mut *rb, 5000, &make), 5000, "A to B");
        assert_eq!(exchange(&mut *tb, &mut *ra, 5000, &make), 5000, "B to A");
        // The TX halves keep working on another thread while the RX halves stay here.
        let h = std::thread::spawn(move || {
            let acked = AtomicU64::new(0);
            send_all(&mut *ta, 1000, u64::MAX, &acked, &mut |seq, buf| {
                TestFrame { seq, ..TestFrame::default() }.build(buf)
            });
            ta
        });
        let ta = h.join().unwrap();
        let mut got = 0;
        let t0 = Instant::now();
        while got < 1000 && t0.elapsed() < Duration::from_secs(2) {
            got += rb.recv(256, Duration::from_millis(10), &mut |_, _| {}).unwrap();
        }
        assert_eq!(got, 1000, "frames sent from another thread arrive");
        assert_eq!(ta.stats().frames, 6000);
        assert_eq!(rb.stats(), RxQueueStats::default());
        assert!(pa.open_tx(0).is_err() && pa.open_rx(0).is_err(), "one half of each kind at a time");
        assert!(matches!(pa.open_tx(1), Err(PortError::NoSuchQueue { .. })));
        // Trials open the halves again: the state goes back to the port when a half drops.
        drop((ta, rb));
        let (mut ta, mut rb) = (pa.open_tx(0).unwrap(), pb.open_rx(0).unwrap());
        assert_eq!(ta.stats(), TxQueueStats::default(), "counters restart with the half");
        assert_eq!(exchange(&mut *ta, &mut *rb, 3000, &make), 3000, "A to B again");
        assert_eq!(ta.stats().frames, 3000);
        assert_eq!(rb.stats(), RxQueueStats::default());
        assert!(v.link_show(&v.ns_a, &v.if_a).contains("prog/xdp"));
        drop((ta, ra, tb, rb, pb));
        drop(pa);
        assert!(!v.link_show(&v.ns_a, &v.if_a).contains("prog/xdp"), "link released with the last half");
    }

    #[test]
    fn two_queues_steer_each_queue_to_its_own_socket_and_a_bound_queue_is_busy() {
        if !is_root() {
            eprintln!("skipped: needs root (namespaces, veth, XDP)");
            return;
        }
        let v = VethPair::with_queues("q", 2);
        let two = |ifname: &str, ns: &str| PortSpec { queues: 2, ..spec(ifname, ns) };
        let mut pa = open_retry(&two(&v.if_a, &v.ns_a));
        let mut pb = open_retry(&two(&v.if_b, &v.ns_b));
        assert_eq!((pa.caps().tx_queues, pa.caps().rx_queues), (2, 2));
        let e = open(&two(&v.if_a, &v.ns_a)).err().expect("queues already bound");
        assert!(e.to_string().contains("wait ~2 s"), "{e}");
        let e = open(&PortSpec { queues: 3, ..spec(&v.if_a, &v.ns_a) }).err().expect("only 2 queues");
        assert!(matches!(e, PortError::NoSuchQueue { queues: 2, .. }), "{e}");
        let (mut t0, mut t1) = (pa.open_tx(0).unwrap(), pa.open_tx(1).unwrap());
        let (mut r0, mut r1) = (pb.open_rx(0).unwrap(), pb.open_rx(1).unwrap());
        let queue_of = |rx: &mut dyn RxQueue| {
            let mut q = Vec::new();
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(300) {
                rx.recv(256, Duration::from_millis(10), &mut |_, m| q.push(m.queue)).unwrap();
            }
            q
        };
        let make = |seq: u64, buf: &mut [u8]| TestFrame { seq, ..TestFrame::default() }.build(buf);
        let acked = AtomicU64::new(0);
        send_all(&mut *t1, 700, u64::MAX, &acked, &mut |s, b| make(s, b));
        send_all(&mut *t0, 300, u64::MAX, &acked, &mut |s, b| make(s, b));
        let (q0, q1) = (queue_of(&mut *r0), queue_of(&mut *r1));
        assert_eq!((q0.len(), q1.len()), (300, 700), "veth maps TX queue i to peer RX queue i");
        assert!(q0.iter().all(|&q| q == 0) && q1.iter().all(|&q| q == 1));
    }

    #[test]
    fn tuning_variants_work_busy_poll_big_frames_small_umem() {
        if !is_root() {
            eprintln!("skipped: needs root (namespaces, veth, XDP)");
            return;
        }
        let v = VethPair::new("v");
        let cfg = XskConfig { umem_frames: 256, frame_size: 4096, busy_poll_us: 20, ..XskConfig::default() };
        let mut pa = open_with(&spec(&v.if_a, &v.ns_a), cfg.clone()).unwrap();
        let mut pb = open_with(&spec(&v.if_b, &v.ns_b), XskConfig { xdp_mode: Some(XdpMode::Skb), ..cfg }).unwrap();
        assert_eq!(pa.caps().max_frame_len, 1514);
        assert!(
            pa.caps().notes.contains("busy poll 20 us") && pa.caps().notes.contains("UMEM 256 x 4096 B"),
            "{}",
            pa.caps().notes
        );
        let mut ta = pa.open_tx(0).unwrap();
        let mut rb = pb.open_rx(0).unwrap();
        assert!(pb.caps().notes.contains("generic (skb)"), "{}", pb.caps().notes);
        assert!(v.link_show(&v.ns_b, &v.if_b).contains("prog/xdp"), "generic XDP shows as xdpgeneric prog/xdp");
        let make = |seq: u64, buf: &mut [u8]| TestFrame { seq, len: 1514, ..TestFrame::default() }.build(buf);
        assert_eq!(exchange(&mut *ta, &mut *rb, 3000, &make), 3000);
        assert_eq!(ta.stats().bytes, 3000 * 1514);
    }

    /// A copy-mode kick sends one budget of frames; the rest wait in the TX ring for the next
    /// kick. `poll(2)` on a socket with a TX ring transmits from it in copy mode, so a receiver
    /// waiting on a socket the sender used would send (and fight the sender for its mutex): the
    /// frames left after the kick stay in the ring while the queue's RX half waits.
    #[test]
    fn one_copy_mode_kick_sends_its_budget_and_the_queues_waiting_receiver_sends_nothing() {
        if !is_root() {
            eprintln!("skipped: needs root (namespaces, veth)");
            return;
        }
        let v = VethPair::new("u");
        let mut txp = open_retry(&spec(&v.if_a, &v.ns_a));
        let notes = txp.caps().notes.clone();
        let budget = if notes.contains(&format!("{COPY_MODE_TX_BUDGET} frames per sendto")) {
            COPY_MODE_TX_BUDGET as u64
        } else {
            assert!(notes.contains(&format!("{KERNEL_TX_BUDGET} frames per sendto")), "{notes}");
            eprintln!("note: this kernel has no XDP_MAX_TX_SKB_BUDGET; checking the default budget");
            KERNEL_TX_BUDGET as u64
        };
        let (mut txq, mut rxq) = (txp.open_tx(0).expect("open_tx"), txp.open_rx(0).expect("open_rx"));
        let before = v.counter(&v.ns_a, &v.if_a, "tx_packets");
        // One send() call: submits the frames and kicks once; the kernel sends `budget` of them.
        let mut seq = 0;
        let n = txq
            .send(2 * budget as usize, &mut |buf| {
                seq += 1;
                TestFrame { seq, ..TestFrame::default() }.build(buf)
            })
            .expect("send");
        assert_eq!(n as u64, 2 * budget);
        let sent = v.counter(&v.ns_a, &v.if_a, "tx_packets") - before;
        // (tx_packets also counts the odd frame of the host's own, e.g. IPv6 neighbour discovery.)
        assert!((budget..budget + 4).contains(&sent), "one sendto sent {sent} frames, budget {budget}");
        for wait in [RxWait::Poll, RxWait::Spin] {
            rxq.set_wait(wait);
            for _ in 0..5 {
                assert_eq!(rxq.recv(64, Duration::from_millis(10), &mut |_, _| {}).expect("recv"), 0);
            }
        }
        let waited = v.counter(&v.ns_a, &v.if_a, "tx_packets") - before;
        assert!(waited < sent + 4, "the RX half's waits sent {} frames", waited - sent);
        txq.flush().expect("flush");
        let t0 = Instant::now();
        while !txq.idle() && t0.elapsed() < Duration::from_secs(5) {}
        let all = v.counter(&v.ns_a, &v.if_a, "tx_packets") - before;
        assert!((2 * budget..2 * budget + 4).contains(&all), "{all} frames after the flush");
    }

    #[test]
    fn xsk_tx_reaches_a_peer_without_xdp() {
        if !is_root() {
            eprintln!("skipped: needs root (namespaces, veth)");
            return;
        }
        const N: u64 = 100_000;
        let v = VethPair::new("k");
        let before = v.counter(&v.ns_b, &v.if_b, "rx_packets");
        let mut txp = open_retry(&spec(&v.if_a, &v.ns_a));
        let mut txq = txp.open_tx(0).expect("open_tx");
        let acked = AtomicU64::new(u64::MAX / 2);
        let mut make = |seq: u64, buf: &mut [u8]| TestFrame { seq, ..TestFrame::default() }.build(buf);
        send_all(&mut *txq, N, u64::MAX, &acked, &mut make);
        assert_eq!(txq.stats().frames, N);
        let got = v.counter(&v.ns_b, &v.if_b, "rx_packets") - before;
        let dropped = v.counter(&v.ns_a, &v.if_a, "tx_dropped");
        assert!(got + dropped >= N && got <= N + 20, "peer rx_packets {got} (+{dropped} dropped) for {N} sent");
        assert!(got >= N * 99 / 100, "veth dropped {dropped} of {N}");
    }

    fn thread_cpu_s() -> f64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: valid timespec out-pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    }

    /// Quick rate check: `cargo test --release -p netrig-engine xsk_rate -- --ignored --nocapture`.
    /// TX-only for 3 s from CPU 1 (copy a 60-byte template, write a sequence number: the work a
    /// tester does per frame) to a peer whose XDP program drops netrig frames (as the peers were
    /// measured); then TX+RX with an AF_XDP receiver on CPU 0 that reads every frame's sequence.
    /// `NETRIG_RATE_MODES=drop,xskrx,none` picks the cases.
    #[test]
    #[ignore]
    fn xsk_rate_sanity() {
        if !is_root() {
            eprintln!("skipped: needs root");
            return;
        }
        let modes = std::env::var("NETRIG_RATE_MODES").unwrap_or_else(|_| "drop,xskrx".into());
        let secs = 3.0;
        for mode in modes.split(',') {
            let v = VethPair::new("r");
            let _link = (mode == "drop" || mode == "ceiling").then(|| {
                // Drop everything in two instructions, as the peers' `xdpdrop` receiver does.
                let mut a = bpf::Asm::new();
                a.mov_imm(bpf::Reg::R0, bpf::XDP_DROP).exit();
                let prog = bpf::prog_load_xdp(&a.finish(), "netrig_drop").unwrap();
                let idx = in_netns(Some(&v.ns_b), || ifinfo::ifindex(&v.if_b, None)).unwrap();
                let link = in_netns(Some(&v.ns_b), || {
                    bpf::link_create_xdp(&prog, idx, XdpMode::Drv).map_err(|e| io_err("x", 0, "link", e))
                })
                .unwrap();
                (prog, link)
            });
            if mode == "ceiling" {
                // The bare reference sender (../shared/peers/xsk-ceiling), same bed, same moment.
                let bin = std::env::var("NETRIG_XSK_CEILING").unwrap_or_else(|_| "/tmp/xsk_ceiling".into());
                let out = sh(&["ip", "netns", "exec", &v.ns_a, "taskset", "-c", "1", &bin, &v.if_a, "-d", "3"]);
                eprintln!("xsk_rate_sanity [ceiling]: {}", out.unwrap_or_else(|e| e).trim());
                continue;
            }
            let stop = Arc::new(AtomicBool::new(false));
            let mut rxp = (mode == "xskrx").then(|| open_retry(&spec(&v.if_b, &v.ns_b)));
            let rx_thread = rxp.as_mut().map(|p| {
                let mut rxq = p.open_rx(0).unwrap();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    crate::sys::cpu::pin_current_thread(0).unwrap();
                    let (mut got, mut sum) = (0u64, 0u64);
                    while !stop.load(Ordering::Relaxed) {
                        got += rxq
                            .recv(256, Duration::from_millis(5), &mut |f, _| {
                                sum = sum.wrapping_add(seq_of(f).unwrap_or(0))
                            })
                            .unwrap() as u64;
                    }
                    (got, sum, rxq.stats())
                })
            });
            let mut txp = open_retry(&spec(&v.if_a, &v.ns_a));
            eprintln!("caps: {}", txp.caps().notes);
            let mut txq = txp.open_tx(0).unwrap();
            let before = v.counter(&v.ns_b, &v.if_b, "rx_packets");
            let h = std::thread::spawn(move || {
                crate::sys::cpu::pin_current_thread(1).unwrap();
                let mut template = [0u8; 60];
                TestFrame::default().build(&mut template);
                let mut seq = 0u64;
                let t0 = Instant::now();
                let mut spins = 0u32;
                let cpu0 = thread_cpu_s();
                loop {
                    spins += 1;
                    if spins.is_multiple_of(64) && t0.elapsed().as_secs_f64() >= secs {
                        break;
                    }
                    txq.send(64, &mut |buf| {
                        buf[..60].copy_from_slice(&template);
                        buf[44..52].copy_from_slice(&seq.to_le_bytes());
                        seq += 1;
                        60
                    })
                    .unwrap();
                }
                let el = t0.elapsed().as_secs_f64();
                let cpu = thread_cpu_s() - cpu0;
                let t1 = Instant::now();
                while !txq.idle() && t1.elapsed() < Duration::from_secs(1) {}
                (txq.stats(), el, cpu)
            });
            let (st, el, cpu) = h.join().unwrap();
            std::thread::sleep(Duration::from_millis(100));
            stop.store(true, Ordering::Relaxed);
            let rx = v.counter(&v.ns_b, &v.if_b, "rx_packets") - before;
            let txdrop = v.counter(&v.ns_a, &v.if_a, "tx_dropped");
            let rx_note = match rx_thread.map(|h| h.join().unwrap()) {
                Some((got, _, s)) => {
                    format!("; XSK receiver read {:.2} Mpps, ring drops {}", got as f64 / el / 1e6, s.ring_drops)
                }
                None => String::new(),
            };
            eprintln!(
                "xsk_rate_sanity [{mode}]: sent {} in {el:.2} s = {:.2} Mpps ({:.2} Mpps per sender CPU-second, {cpu:.2} s CPU); \
                 peer rx_packets {:.2} Mpps, veth tx_dropped {txdrop}; backpressure {}{rx_note}",
                st.frames,
                st.frames as f64 / el / 1e6,
                st.frames as f64 / cpu / 1e6,
                rx as f64 / el / 1e6,
                st.backpressure
            );
            drop(txp);
            drop(rxp);
        }
    }
}
