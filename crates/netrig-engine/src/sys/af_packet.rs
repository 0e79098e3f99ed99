//! AF_PACKET backend with memory-mapped rings.
//!
//! * **TX**: one `SOCK_RAW` packet socket per queue with a `TPACKET_V2` TX ring, bound to the
//!   interface with protocol 0 (so it never receives), `PACKET_QDISC_BYPASS`, `PACKET_VNET_HDR`
//!   (each frame copied into the skb, not linked from the ring: see [`tx_vnet`]) and a forced
//!   large send buffer (veth back-pressure otherwise turns into `EAGAIN` storms).
//!   [`TxQueue::send`] writes frames straight into ring slots and kicks the kernel once per batch.
//! * **RX**: one packet socket per queue with a `TPACKET_V3` RX ring (blocks of many frames,
//!   retired by the kernel when full or after a few milliseconds), bound with `ETH_P_ALL`,
//!   `PACKET_IGNORE_OUTGOING`, kernel software timestamps; several queues share the interface
//!   through a `PACKET_FANOUT_HASH` group (per-flow order is kept inside one queue).
//!
//! Ring ownership protocol (both rings): a 32-bit status word in each slot/block header says who
//! owns it. We read it with an `Acquire` load before touching the slot's data, and hand the slot
//! back with a `Release` store after our last access, so data writes (TX) or reads (RX) can never
//! be reordered across the hand-over. The kernel side uses `smp_wmb`/`smp_rmb` around the same
//! words.
//!
//! Helpers shared with the plain-socket backend ([`super::socket`]) live here too.
use std::ffi::c_void;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{self, FreshOffset};
use crate::error::PortError;
use crate::port::{
    Backend, Port, PortCaps, PortSpec, RxMeta, RxQueue, RxQueueStats, RxWait, TimestampSource, TxQueue, TxQueueStats,
    WakeFd,
};
use crate::sys::{ifinfo, netns};

/// Kernel ABI constants and structs from `<linux/if_packet.h>` and `<asm/socket.h>` (x86_64 and
/// arm64 values), spelled out here so the backend does not depend on which of them a given
/// `libc` release exports.
pub(crate) mod abi {
    pub const SO_SNDBUFFORCE: i32 = 32;
    pub const SO_RCVBUFFORCE: i32 = 33;
    pub const SO_TIMESTAMPNS: i32 = 35;
    pub const SCM_TIMESTAMPNS: i32 = SO_TIMESTAMPNS;

    pub const PACKET_RX_RING: i32 = 5;
    pub const PACKET_STATISTICS: i32 = 6;
    pub const PACKET_AUXDATA: i32 = 8;
    pub const PACKET_VERSION: i32 = 10;
    pub const PACKET_TX_RING: i32 = 13;
    pub const PACKET_VNET_HDR: i32 = 15;
    pub const PACKET_FANOUT: i32 = 18;
    pub const PACKET_QDISC_BYPASS: i32 = 20;
    pub const PACKET_IGNORE_OUTGOING: i32 = 23;

    pub const PACKET_FANOUT_HASH: u32 = 0;

    pub const TPACKET_V2: i32 = 1;
    pub const TPACKET_V3: i32 = 2;

    pub const TP_STATUS_KERNEL: u32 = 0;
    pub const TP_STATUS_USER: u32 = 1 << 0;
    pub const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
    pub const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

    pub const TP_STATUS_SEND_REQUEST: u32 = 1 << 0;
    pub const TP_STATUS_SENDING: u32 = 1 << 1;
    pub const TP_STATUS_WRONG_FORMAT: u32 = 1 << 2;

    pub const TPACKET_ALIGNMENT: usize = 16;

    /// `struct tpacket_req` (TX ring, V2).
    #[repr(C)]
    #[derive(Default)]
    pub struct TpacketReq {
        pub tp_block_size: u32,
        pub tp_block_nr: u32,
        pub tp_frame_size: u32,
        pub tp_frame_nr: u32,
    }

    /// `struct tpacket_req3` (RX ring, V3).
    #[repr(C)]
    #[derive(Default)]
    pub struct TpacketReq3 {
        pub tp_block_size: u32,
        pub tp_block_nr: u32,
        pub tp_frame_size: u32,
        pub tp_frame_nr: u32,
        pub tp_retire_blk_tov: u32,
        pub tp_sizeof_priv: u32,
        pub tp_feature_req_word: u32,
    }

    /// `struct tpacket_stats_v3`.
    #[repr(C)]
    #[derive(Default)]
    pub struct TpacketStatsV3 {
        pub tp_packets: u32,
        pub tp_drops: u32,
        pub tp_freeze_q_cnt: u32,
    }

    /// `struct tpacket_auxdata` (cmsg of `PACKET_AUXDATA`).
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    pub struct TpacketAuxdata {
        pub tp_status: u32,
        pub tp_len: u32,
        pub tp_snaplen: u32,
        pub tp_mac: u16,
        pub tp_net: u16,
        pub tp_vlan_tci: u16,
        pub tp_vlan_tpid: u16,
    }

    /// `struct tpacket2_hdr` field offsets.
    pub mod v2 {
        pub const STATUS: usize = 0;
        pub const LEN: usize = 4;
        /// `sizeof(struct tpacket2_hdr)` = 32; without `PACKET_TX_HAS_OFF` the kernel reads TX
        /// frame data at `TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)` = 32.
        pub const TX_DATA: usize = 32;
    }

    /// `struct virtio_net_hdr` (little-endian fields): with `PACKET_VNET_HDR` it leads every TX
    /// frame; `hdr_len` bytes of the frame go into the skb's linear part.
    pub mod vnet {
        pub const LEN: usize = 10;
        pub const HDR_LEN: usize = 2;
    }

    /// `struct tpacket_block_desc` / `tpacket_hdr_v1` field offsets.
    pub mod block {
        pub const STATUS: usize = 8;
        pub const NUM_PKTS: usize = 12;
        pub const FIRST_PKT: usize = 16;
        /// Size of the block descriptor.
        pub const HDR: usize = 48;
    }

    /// `struct tpacket3_hdr` field offsets.
    pub mod v3 {
        pub const NEXT_OFFSET: usize = 0;
        pub const SEC: usize = 4;
        pub const NSEC: usize = 8;
        pub const SNAPLEN: usize = 12;
        pub const STATUS: usize = 20;
        pub const MAC: usize = 24;
        pub const VLAN_TCI: usize = 32;
        pub const VLAN_TPID: usize = 36;
        /// `sizeof(struct tpacket3_hdr)`.
        pub const HDR: usize = 48;
    }
}

pub(crate) const MAX_QUEUES: usize = 64;
/// Upper bound for `ring_frames` (keeps ring memory sane; 4 Mi frames ≈ 8 GiB at 2 KiB).
pub(crate) const MAX_RING_FRAMES: usize = 1 << 22;
const ETH_HLEN: usize = 14;
/// Bytes of headroom callers may need in front of a received frame to re-insert a VLAN tag the
/// kernel moved into metadata.
pub(crate) const VLAN_HLEN: usize = 4;

// ---------------------------------------------------------------------------------------------
// Shared helpers (also used by the socket backend)
// ---------------------------------------------------------------------------------------------

/// What an opened port remembers about its interface.
#[derive(Debug, Clone)]
pub(crate) struct IfCtx {
    pub ifname: String,
    pub netns: Option<String>,
    pub ifindex: u32,
    pub mtu: usize,
    pub max_frame_len: usize,
    pub queues: usize,
    pub ring_frames: usize,
}

impl IfCtx {
    pub fn io_err(&self, queue: usize, op: &str, source: io::Error) -> PortError {
        if matches!(source.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
            return PortError::PermissionDenied { ifname: self.ifname.clone(), what: op.to_string() };
        }
        PortError::Io { ifname: self.ifname.clone(), queue, op: op.to_string(), source }
    }

    fn check_queue(&self, queue: usize) -> Result<(), PortError> {
        if queue >= self.queues {
            return Err(PortError::NoSuchQueue { ifname: self.ifname.clone(), queue, queues: self.queues });
        }
        Ok(())
    }
}

fn other(ifname: &str, message: String) -> PortError {
    PortError::Other { ifname: ifname.to_string(), message }
}

/// Validate a spec (no resources touched), then look the interface up inside its namespace,
/// check it is up and that we may open packet sockets.
pub(crate) fn probe(spec: &PortSpec, backend: &str) -> Result<(IfCtx, ifinfo::IfInfo), PortError> {
    let name = &spec.ifname;
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['/', ' ', '\0']) {
        return Err(other(
            name,
            format!(
                "invalid interface name {name:?}: use 1 to {} characters without '/' or spaces",
                libc::IFNAMSIZ - 1
            ),
        ));
    }
    if spec.queues == 0 || spec.queues > MAX_QUEUES {
        return Err(other(name, format!("queues = {}: {backend} supports 1 to {MAX_QUEUES} queues", spec.queues)));
    }
    if spec.ring_frames != 0 && !(16..=MAX_RING_FRAMES).contains(&spec.ring_frames) {
        return Err(other(
            name,
            format!("ring_frames = {}: use 0 (default) or 16 to {MAX_RING_FRAMES}", spec.ring_frames),
        ));
    }
    netns::in_netns(spec.netns.as_deref(), || {
        let mut info = ifinfo::ifinfo(name, spec.netns.as_deref())?;
        // A link brought up a moment ago gets its carrier asynchronously: linkwatch defers a
        // non-urgent event by up to a second after the previous one (more on a busy host), so
        // give it up to three before calling it down. One nobody brought up (no IFF_UP) will not
        // come up by itself: it is down at once.
        let t0 = clock::now_ns();
        while info.admin_up && !info.oper_up && clock::now_ns() - t0 < 3_000_000_000 {
            std::thread::sleep(Duration::from_millis(10));
            info = ifinfo::ifinfo(name, spec.netns.as_deref())?;
        }
        if !info.oper_up {
            return Err(other(
                name,
                "interface is down (not running): bring it up with `ip link set dev IF up` (for veth, bring up both ends)"
                    .to_string(),
            ));
        }
        // Probe permission now, so `auto` stops with one clear error instead of trying on.
        let ctx = IfCtx {
            ifname: name.clone(),
            netns: spec.netns.clone(),
            ifindex: info.ifindex,
            mtu: info.mtu,
            max_frame_len: info.mtu + ETH_HLEN + VLAN_HLEN,
            queues: spec.queues,
            ring_frames: spec.ring_frames,
        };
        drop(packet_socket(&ctx, 0, &format!("{backend} socket"))?);
        Ok((ctx, info))
    })
}

/// A new `AF_PACKET/SOCK_RAW` socket with protocol 0 (receives nothing until bound with one).
pub(crate) fn packet_socket(ctx: &IfCtx, queue: usize, what: &str) -> Result<OwnedFd, PortError> {
    // SAFETY: plain syscall; the returned fd is owned by the OwnedFd below.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(ctx.io_err(queue, what, io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh, valid descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn setsockopt<T>(
    ctx: &IfCtx,
    queue: usize,
    fd: RawFd,
    level: i32,
    name: i32,
    val: &T,
    what: &str,
) -> Result<(), PortError> {
    // SAFETY: val points at a live T of the size we pass.
    let rc = unsafe {
        libc::setsockopt(fd, level, name, val as *const T as *const c_void, mem::size_of::<T>() as libc::socklen_t)
    };
    if rc != 0 {
        return Err(ctx.io_err(queue, what, io::Error::last_os_error()));
    }
    Ok(())
}

pub(crate) fn set_int(
    ctx: &IfCtx,
    queue: usize,
    fd: RawFd,
    level: i32,
    name: i32,
    val: i32,
    what: &str,
) -> Result<(), PortError> {
    setsockopt(ctx, queue, fd, level, name, &val, what)
}

/// Bind `fd` to the interface with `protocol` (host order; 0 = send only).
pub(crate) fn bind_ll(ctx: &IfCtx, queue: usize, fd: RawFd, protocol: u16) -> Result<(), PortError> {
    // SAFETY: all-zero is a valid sockaddr_ll.
    let mut sll: libc::sockaddr_ll = unsafe { mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ctx.ifindex as i32;
    // SAFETY: sll is a valid sockaddr_ll of the size passed.
    let rc = unsafe {
        libc::bind(
            fd,
            &sll as *const _ as *const libc::sockaddr,
            mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENODEV) {
            return Err(PortError::NoSuchInterface { ifname: ctx.ifname.clone(), netns: ctx.netns.clone() });
        }
        return Err(ctx.io_err(queue, "bind", e));
    }
    Ok(())
}

/// Large kernel socket buffers (`SO_SNDBUFFORCE`/`SO_RCVBUFFORCE` ignore the sysctl limits;
/// we are root). Falls back to the capped option when forcing is not allowed.
pub(crate) fn force_buf(ctx: &IfCtx, queue: usize, fd: RawFd, send: bool, bytes: usize) -> Result<(), PortError> {
    let bytes = bytes.min(i32::MAX as usize / 2) as i32;
    let (force, plain, what) = if send {
        (abi::SO_SNDBUFFORCE, libc::SO_SNDBUF, "SO_SNDBUFFORCE")
    } else {
        (abi::SO_RCVBUFFORCE, libc::SO_RCVBUF, "SO_RCVBUFFORCE")
    };
    if set_int(ctx, queue, fd, libc::SOL_SOCKET, force, bytes, what).is_ok() {
        return Ok(());
    }
    set_int(ctx, queue, fd, libc::SOL_SOCKET, plain, bytes, what)
}

/// Wait until `fd` (or `wake`, see [`WakeFd`]) is readable or `timeout` passes. Returns false on
/// timeout or `EINTR`.
pub(crate) fn poll_in(fd: RawFd, wake: Option<&WakeFd>, timeout: Duration) -> io::Result<bool> {
    let ev = libc::POLLIN | libc::POLLERR;
    let mut p = [libc::pollfd { fd, events: ev, revents: 0 }, libc::pollfd { fd: -1, events: ev, revents: 0 }];
    if let Some(w) = wake {
        p[1].fd = w.raw();
    }
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: p is a valid pollfd array of length 2 (a negative fd is ignored by poll).
    let rc = unsafe { libc::poll(p.as_mut_ptr(), 2, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(rc > 0)
}

/// `PACKET_STATISTICS` (v3 layout; for non-V3 sockets the kernel fills the first two fields).
/// The kernel resets the counters on every read: callers accumulate.
pub(crate) fn packet_stats(fd: RawFd) -> Option<abi::TpacketStatsV3> {
    let mut st = abi::TpacketStatsV3::default();
    let mut len = mem::size_of::<abi::TpacketStatsV3>() as libc::socklen_t;
    // SAFETY: st is a writable buffer of `len` bytes.
    let rc = unsafe {
        libc::getsockopt(fd, libc::SOL_PACKET, abi::PACKET_STATISTICS, &mut st as *mut _ as *mut c_void, &mut len)
    };
    (rc == 0).then_some(st)
}

/// `stats` with the drops (and, on a `TPACKET_V3` ring, the freezes) the kernel counted on `fd`
/// since the last read added; `PACKET_STATISTICS` resets them as it is read.
pub(crate) fn add_packet_stats(fd: RawFd, stats: &mut RxQueueStats) -> RxQueueStats {
    if let Some(st) = packet_stats(fd) {
        stats.ring_drops += st.tp_drops as u64;
        stats.overruns += st.tp_freeze_q_cnt as u64;
    }
    *stats
}

/// The kernel's rule for a raw Ethernet frame on TX: at least a header, at most MTU + 14, or
/// MTU + 18 when it carries an 802.1Q tag (`packet_extra_vlan_len_allowed`).
#[inline]
pub(crate) fn tx_len_ok(frame: &[u8], len: usize, mtu: usize) -> bool {
    len >= ETH_HLEN
        && len <= frame.len()
        && (len <= mtu + ETH_HLEN || (len <= mtu + ETH_HLEN + VLAN_HLEN && frame[12] == 0x81 && frame[13] == 0x00))
}

#[cold]
pub(crate) fn bad_len(ctx: &IfCtx, queue: usize, len: usize) -> PortError {
    other(
        &ctx.ifname,
        format!(
            "queue {queue}: the stream produced a {len}-byte frame; this port sends {ETH_HLEN} to {} bytes (MTU {} + 14, +4 with an 802.1Q tag)",
            ctx.mtu + ETH_HLEN + VLAN_HLEN,
            ctx.mtu
        ),
    )
}

/// Re-insert a VLAN tag the kernel moved into metadata: the frame starts at `mac`, and the 4
/// bytes in front of it are ours to overwrite. Returns the new start.
///
/// # Safety
/// `mac - 4 .. mac + len` must be valid, writable and exclusively ours.
#[inline]
pub(crate) unsafe fn reinsert_vlan(mac: *mut u8, len: usize, tpid: u16, tci: u16) -> *mut u8 {
    let start = mac.sub(VLAN_HLEN);
    if len >= 12 {
        ptr::copy(mac, start, 12);
    }
    let tag = [(tpid >> 8) as u8, tpid as u8, (tci >> 8) as u8, tci as u8];
    ptr::copy_nonoverlapping(tag.as_ptr(), start.add(12), VLAN_HLEN);
    start
}

/// A shared memory mapping of a packet ring; unmapped on drop.
pub(crate) struct Mmap {
    pub ptr: *mut u8,
    pub len: usize,
}

impl Mmap {
    fn map(ctx: &IfCtx, queue: usize, fd: RawFd, len: usize) -> Result<Self, PortError> {
        // SAFETY: mapping a packet socket's ring at offset 0 with the exact size the kernel
        // allocated (block_size * block_nr); MAP_SHARED as required.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(ctx.io_err(queue, "mmap of the packet ring", io::Error::last_os_error()));
        }
        Ok(Mmap { ptr: p as *mut u8, len })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; nothing borrows the ring past drop.
        unsafe { libc::munmap(self.ptr as *mut c_void, self.len) };
    }
}

/// Acquire-load of a ring status word shared with the kernel.
///
/// # Safety
/// `p` must point into a live ring mapping and be 4-byte aligned (all ring headers are).
#[inline(always)]
unsafe fn load_acquire(p: *const u8) -> u32 {
    // SAFETY: caller guarantees a valid, aligned u32 in the mapping; the kernel only writes it
    // with word-sized stores, so an atomic view is sound.
    unsafe { AtomicU32::from_ptr(p as *mut u32) }.load(Ordering::Acquire)
}

/// Release-store of a ring status word: all our earlier accesses to the slot happen before it.
///
/// # Safety
/// As for [`load_acquire`].
#[inline(always)]
unsafe fn store_release(p: *mut u8, v: u32) {
    // SAFETY: see load_acquire.
    unsafe { AtomicU32::from_ptr(p as *mut u32) }.store(v, Ordering::Release)
}

#[inline(always)]
unsafe fn read_u32(p: *const u8) -> u32 {
    // SAFETY: caller guarantees p is valid and aligned.
    unsafe { ptr::read_volatile(p as *const u32) }
}

#[inline(always)]
unsafe fn read_u16(p: *const u8) -> u16 {
    // SAFETY: caller guarantees p is valid and aligned.
    unsafe { ptr::read_volatile(p as *const u16) }
}

fn align_up(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

fn page_size() -> usize {
    // SAFETY: plain sysconf query.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

// ---------------------------------------------------------------------------------------------
// Ring geometry (pure functions, unit-tested)
// ---------------------------------------------------------------------------------------------

/// TX ring geometry for `TPACKET_V2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TxGeom {
    frame_size: usize,
    block_size: usize,
    block_nr: usize,
    frame_nr: usize,
}

const TX_DEFAULT_FRAMES: usize = 2048;
const TX_MAX_RING_BYTES: usize = 64 << 20;

fn tx_geom(max_frame_len: usize, ring_frames: usize, page: usize) -> TxGeom {
    let frame_size = (abi::v2::TX_DATA + abi::vnet::LEN + max_frame_len).next_power_of_two().max(2048);
    let block_size = frame_size.max(page).max(64 << 10);
    let fpb = block_size / frame_size;
    let want = if ring_frames == 0 { TX_DEFAULT_FRAMES } else { ring_frames };
    let want = want.min(TX_MAX_RING_BYTES / frame_size).max(16);
    let block_nr = want.div_ceil(fpb);
    TxGeom { frame_size, block_size, block_nr, frame_nr: block_nr * fpb }
}

/// RX ring geometry for `TPACKET_V3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RxGeom {
    block_size: usize,
    block_nr: usize,
    frame_size: usize,
}

const RX_DEFAULT_BLOCK: usize = 256 << 10;
const RX_DEFAULT_BLOCKS: usize = 128;
const RX_BLOCK_TOV_MS: u32 = 4;

/// Ring bytes one frame of `len` bytes takes in a V3 block (header, sockaddr_ll, MAC padding).
fn rx_slot(len: usize) -> usize {
    align_up(align_up(abi::v3::HDR + 20 + 16, abi::TPACKET_ALIGNMENT) - ETH_HLEN + len, abi::TPACKET_ALIGNMENT)
}

fn rx_geom(max_frame_len: usize, ring_frames: usize, page: usize) -> RxGeom {
    let min_block = (abi::block::HDR + rx_slot(max_frame_len)).next_power_of_two().max(page);
    let (block_size, block_nr) = if ring_frames == 0 {
        (RX_DEFAULT_BLOCK.max(min_block), RX_DEFAULT_BLOCKS)
    } else {
        let bytes = ring_frames * rx_slot(max_frame_len);
        if bytes >= 4 * (1 << 20) {
            let b = (1usize << 20).max(min_block);
            (b, bytes.div_ceil(b))
        } else {
            let b = (bytes / 4).next_power_of_two().max(min_block);
            (b, bytes.div_ceil(b).max(4))
        }
    };
    // V3 ignores the frame size for packing but the kernel still validates it.
    let frame_size = 2048.min(block_size);
    RxGeom { block_size, block_nr, frame_size }
}

// ---------------------------------------------------------------------------------------------
// The port
// ---------------------------------------------------------------------------------------------

static INSTANCE: AtomicUsize = AtomicUsize::new(0);

/// A `PACKET_FANOUT` group id for one opened port: derived from pid, ifindex and a per-process
/// port counter, so ports of this and other processes on the same interface do not collide.
pub(crate) fn new_fanout_id(ifindex: u32) -> u16 {
    let pid = std::process::id() as usize;
    let n = INSTANCE.fetch_add(1, Ordering::Relaxed);
    ((pid.wrapping_mul(31) ^ (ifindex as usize).wrapping_mul(7919) ^ n.wrapping_mul(104_729)) & 0xffff) as u16
}

/// Join fanout group `id` (hash mode: one flow stays on one queue, so per-flow order holds).
pub(crate) fn join_fanout(ctx: &IfCtx, queue: usize, fd: RawFd, id: u16) -> Result<(), PortError> {
    let arg = id as u32 | (abi::PACKET_FANOUT_HASH << 16);
    set_int(ctx, queue, fd, libc::SOL_PACKET, abi::PACKET_FANOUT, arg as i32, "PACKET_FANOUT")
}

struct AfPacketPort {
    ctx: IfCtx,
    caps: PortCaps,
    fanout_id: u16,
    page: usize,
}

/// Open `spec` with this backend.
pub fn open(spec: &PortSpec) -> Result<Box<dyn Port>, PortError> {
    let (ctx, info) = probe(spec, "af_packet")?;
    let page = page_size();
    let rx = rx_geom(ctx.max_frame_len, ctx.ring_frames, page);
    let tx = tx_geom(ctx.max_frame_len, ctx.ring_frames, page);
    let caps = PortCaps {
        name: ctx.ifname.clone(),
        backend: Backend::AfPacket,
        tx_queues: ctx.queues,
        rx_queues: ctx.queues,
        max_frame_len: ctx.mtu + ETH_HLEN,
        speed_bps: info.speed_bps,
        rx_timestamp: TimestampSource::KernelSoftware,
        zero_copy: false,
        notes: format!(
            "TPACKET_V3 RX ring {}x{} KiB (block timeout {RX_BLOCK_TOV_MS} ms{}), TPACKET_V2 TX ring {}x{} B with qdisc bypass",
            rx.block_nr,
            rx.block_size >> 10,
            if ctx.queues > 1 { ", fanout hash" } else { "" },
            tx.frame_nr,
            tx.frame_size
        ),
    };
    let fanout_id = new_fanout_id(ctx.ifindex);
    Ok(Box::new(AfPacketPort { ctx, caps, fanout_id, page }))
}

impl Port for AfPacketPort {
    fn caps(&self) -> &PortCaps {
        &self.caps
    }

    fn open_tx(&mut self, queue: usize) -> Result<Box<dyn TxQueue>, PortError> {
        self.ctx.check_queue(queue)?;
        let ctx = self.ctx.clone();
        let page = self.page;
        netns::in_netns(ctx.netns.clone().as_deref(), move || {
            Ok(Box::new(TxRing::open(ctx, queue, page)?) as Box<dyn TxQueue>)
        })
    }

    fn open_rx(&mut self, queue: usize) -> Result<Box<dyn RxQueue>, PortError> {
        self.ctx.check_queue(queue)?;
        let ctx = self.ctx.clone();
        let page = self.page;
        let fanout = (ctx.queues > 1).then_some(self.fanout_id);
        netns::in_netns(ctx.netns.clone().as_deref(), move || {
            Ok(Box::new(RxRing::open(ctx, queue, page, fanout)?) as Box<dyn RxQueue>)
        })
    }

    fn link(&self) -> Option<std::sync::Arc<dyn crate::port::LinkSource>> {
        Some(crate::sys::link::source(self.ctx.netns.as_deref(), self.ctx.ifindex))
    }
}

// ---------------------------------------------------------------------------------------------
// TX ring
// ---------------------------------------------------------------------------------------------

struct TxRing {
    // Field order matters: the mapping is dropped before the socket is closed.
    map: Mmap,
    fd: OwnedFd,
    ctx: IfCtx,
    queue: usize,
    frame_size: usize,
    frame_nr: usize,
    /// Next slot to fill.
    head: usize,
    /// Oldest submitted slot not yet seen completed.
    tail: usize,
    /// Slots submitted (SEND_REQUEST) and not yet reclaimed.
    pending: usize,
    stats: TxQueueStats,
    /// Submitted since the last kick.
    unkicked: bool,
    /// Per slot, the mark its last fill left (`TxQueue::send_held`).
    held: Vec<u64>,
    /// Bytes of `virtio_net_hdr` before each frame (`PACKET_VNET_HDR`; 0 where it was refused).
    vnet: usize,
}

// SAFETY: the raw ring pointer is owned exclusively by this queue (no aliases are handed out
// beyond a `send` call), so moving the queue to another thread is sound.
unsafe impl Send for TxRing {}

/// Ask for a `virtio_net_hdr` before each TX frame (`PACKET_VNET_HDR`, before the ring exists);
/// its length, or 0 where the kernel refuses it. With it every frame is copied whole into the
/// skb's linear part (`hdr_len` = the frame); without it the kernel links the ring's page into the
/// skb (zero copy) and, since veth hands the skb to another device, copies that page into a new
/// one (`skb_copy_ubufs`): a page allocated, filled and freed per frame. Measured on veth, 3 × 5 s
/// interleaved with the peers: 64 B 0.65 → 0.82 Mpps (1.29 × trafgen, 1.31 × testpmd), 1518 B
/// 0.53 → 0.59 Mpps (1.20 ×, 1.26 ×), TX+RX 64 B 0.31 → 0.37 Mpps.
fn tx_vnet(ctx: &IfCtx, queue: usize, fd: RawFd) -> usize {
    match set_int(ctx, queue, fd, libc::SOL_PACKET, abi::PACKET_VNET_HDR, 1, "PACKET_VNET_HDR") {
        Ok(()) => abi::vnet::LEN,
        Err(_) => 0,
    }
}

impl TxRing {
    fn open(ctx: IfCtx, queue: usize, page: usize) -> Result<Self, PortError> {
        let g = tx_geom(ctx.max_frame_len, ctx.ring_frames, page);
        let sock = packet_socket(&ctx, queue, "AF_PACKET TX socket")?;
        let fd = sock.as_raw_fd();
        set_int(&ctx, queue, fd, libc::SOL_PACKET, abi::PACKET_VERSION, abi::TPACKET_V2, "PACKET_VERSION")?;
        set_int(&ctx, queue, fd, libc::SOL_PACKET, abi::PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS")?;
        let vnet = tx_vnet(&ctx, queue, fd);
        // Enough socket memory for the whole ring in flight (skb truesize ~ frame + overhead).
        force_buf(&ctx, queue, fd, true, (g.frame_nr * (g.frame_size + 1024)).max(4 << 20))?;
        let req = abi::TpacketReq {
            tp_block_size: g.block_size as u32,
            tp_block_nr: g.block_nr as u32,
            tp_frame_size: g.frame_size as u32,
            tp_frame_nr: g.frame_nr as u32,
        };
        setsockopt(&ctx, queue, fd, libc::SOL_PACKET, abi::PACKET_TX_RING, &req, "PACKET_TX_RING")?;
        let map = Mmap::map(&ctx, queue, fd, g.block_size * g.block_nr)?;
        bind_ll(&ctx, queue, fd, 0)?;
        Ok(TxRing {
            map,
            fd: sock,
            ctx,
            queue,
            frame_size: g.frame_size,
            frame_nr: g.frame_nr,
            head: 0,
            tail: 0,
            pending: 0,
            stats: TxQueueStats::default(),
            unkicked: false,
            held: vec![0; g.frame_nr],
            vnet,
        })
    }

    #[inline(always)]
    fn slot(&self, i: usize) -> *mut u8 {
        // Blocks are whole multiples of the frame size, so slots are contiguous.
        // SAFETY: i < frame_nr, so the slot lies inside the mapping.
        unsafe { self.map.ptr.add(i * self.frame_size) }
    }

    /// Reclaim completed slots in order; counts what the kernel took.
    #[inline]
    fn reclaim(&mut self) -> Result<(), PortError> {
        while self.pending > 0 {
            let s = self.slot(self.tail);
            // SAFETY: s is a slot header in the live mapping; Acquire pairs with the kernel's
            // status update after it finished with the slot.
            let st = unsafe { load_acquire(s.add(abi::v2::STATUS)) };
            if st & (abi::TP_STATUS_SEND_REQUEST | abi::TP_STATUS_SENDING) != 0 {
                break;
            }
            if st & abi::TP_STATUS_WRONG_FORMAT != 0 {
                // The kernel refused this frame and stops at it (PACKET_LOSS is off so that we
                // see it): the ring cannot advance any more.
                self.stats.errors += 1;
                // SAFETY: slot header in the mapping.
                let len = unsafe { read_u32(s.add(abi::v2::LEN)) } as usize - self.vnet;
                return Err(other(
                    &self.ctx.ifname,
                    format!("queue {}: the kernel rejected a {len}-byte frame (TP_STATUS_WRONG_FORMAT; did the MTU change?); reopen the port", self.queue),
                ));
            }
            // SAFETY: slot header in the mapping; we wrote tp_len ourselves.
            let len = unsafe { read_u32(s.add(abi::v2::LEN)) } as usize - self.vnet;
            self.stats.frames += 1;
            self.stats.bytes += len as u64;
            self.pending -= 1;
            self.tail += 1;
            if self.tail == self.frame_nr {
                self.tail = 0;
            }
        }
        Ok(())
    }

    /// Ask the kernel to transmit every slot in SEND_REQUEST. Returns false on back-pressure.
    #[inline]
    fn kick(&mut self) -> Result<bool, PortError> {
        self.unkicked = false;
        // SAFETY: a zero-length sendto on a TX-ring socket just walks the ring.
        let rc = unsafe { libc::sendto(self.fd.as_raw_fd(), ptr::null(), 0, libc::MSG_DONTWAIT, ptr::null(), 0) };
        if rc >= 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            // ENETDOWN: the interface set down, the ring not walked; its frames wait for it.
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) | Some(libc::ENETDOWN) => {
                // Frames stay in SEND_REQUEST and go out on the next kick.
                self.stats.backpressure += 1;
                self.unkicked = true;
                Ok(false)
            }
            Some(libc::EINVAL) | Some(libc::EMSGSIZE) => {
                self.reclaim()?;
                Err(self.ctx.io_err(self.queue, "TX ring send", e))
            }
            _ => Err(self.ctx.io_err(self.queue, "TX ring send", e)),
        }
    }
}

impl TxQueue for TxRing {
    fn send_held(
        &mut self,
        count: usize,
        fill: &mut dyn FnMut(&mut [u8], &mut u64) -> usize,
    ) -> Result<usize, PortError> {
        self.reclaim()?;
        let room = self.frame_nr - self.pending;
        let n = count.min(room);
        let data = abi::v2::TX_DATA + self.vnet;
        let data_len = self.frame_size - data;
        let mut done = 0;
        while done < n {
            let s = self.slot(self.head);
            // The slot is free: pending < frame_nr and slots are reclaimed in order, so the slot
            // at `head` was seen AVAILABLE by `reclaim` (or never used).
            // SAFETY: data area of a slot we own, inside the mapping, data_len bytes long.
            let buf = unsafe { std::slice::from_raw_parts_mut(s.add(data), data_len) };
            let len = fill(buf, &mut self.held[self.head]);
            if !tx_len_ok(buf, len, self.ctx.mtu) {
                self.stats.errors += 1;
                if done > 0 {
                    self.kick()?;
                }
                return Err(bad_len(&self.ctx, self.queue, len));
            }
            if self.vnet > 0 {
                // A virtio_net_hdr of zeros but hdr_len: no offload, the frame linear up to 64 KiB.
                // The kernel hands the ring out zeroed and only reads these bytes.
                let hdr = (len.min(u16::MAX as usize) as u16).to_le_bytes();
                // SAFETY: hdr_len lies in the slot's vnet bytes, between its header and its data.
                unsafe { ptr::copy_nonoverlapping(hdr.as_ptr(), s.add(abi::v2::TX_DATA + abi::vnet::HDR_LEN), 2) };
            }
            // SAFETY: slot header we own; the Release store publishes tp_len and the frame data
            // before the kernel can see SEND_REQUEST.
            unsafe {
                ptr::write_volatile(s.add(abi::v2::LEN) as *mut u32, (len + self.vnet) as u32);
                store_release(s.add(abi::v2::STATUS), abi::TP_STATUS_SEND_REQUEST);
            }
            self.head += 1;
            if self.head == self.frame_nr {
                self.head = 0;
            }
            self.pending += 1;
            done += 1;
        }
        if done > 0 || self.unkicked || (count > 0 && room == 0) {
            if count > 0 && room == 0 {
                self.stats.backpressure += 1;
            }
            self.kick()?;
            // On veth the kernel completes synchronously: reclaim now so stats are current.
            self.reclaim()?;
        }
        Ok(done)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        let deadline = clock::now_ns() + 200_000_000;
        loop {
            self.reclaim()?;
            if self.pending == 0 {
                return Ok(());
            }
            if !self.kick()? {
                std::thread::sleep(Duration::from_micros(50));
            }
            self.reclaim()?;
            if self.pending == 0 || clock::now_ns() > deadline {
                return Ok(());
            }
            std::thread::yield_now();
        }
    }

    fn idle(&mut self) -> bool {
        if self.reclaim().is_err() {
            return true; // nothing more will leave; the error surfaces on the next send
        }
        if self.pending > 0 {
            let _ = self.kick();
            let _ = self.reclaim();
        }
        self.pending == 0
    }

    fn stats(&self) -> TxQueueStats {
        self.stats
    }
}

// ---------------------------------------------------------------------------------------------
// RX ring
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct BlockPos {
    left: u32,
    off: usize,
}

struct RxRing {
    map: Mmap,
    fd: OwnedFd,
    ifname: String,
    queue: usize,
    block_size: usize,
    block_nr: usize,
    /// Block we read next.
    cur: usize,
    /// Position inside `cur` when a previous `recv` stopped mid-block.
    pos: Option<BlockPos>,
    offset: FreshOffset,
    /// How an empty queue is waited on (`RxQueue::set_wait`, `RxQueue::set_wake`).
    wait: RxWait,
    wake: Option<Arc<WakeFd>>,
    stats: RxQueueStats,
    /// Frames with impossible ring offsets (never expected; counted instead of trusted).
    malformed: u64,
}

// SAFETY: as for TxRing, the ring mapping is owned exclusively by this queue.
unsafe impl Send for RxRing {}

const ETH_P_ALL: u16 = libc::ETH_P_ALL as u16;

impl RxRing {
    fn open(ctx: IfCtx, queue: usize, page: usize, fanout: Option<u16>) -> Result<Self, PortError> {
        let g = rx_geom(ctx.max_frame_len, ctx.ring_frames, page);
        let sock = packet_socket(&ctx, queue, "AF_PACKET RX socket")?;
        let fd = sock.as_raw_fd();
        set_int(&ctx, queue, fd, libc::SOL_PACKET, abi::PACKET_VERSION, abi::TPACKET_V3, "PACKET_VERSION")?;
        let req = abi::TpacketReq3 {
            tp_block_size: g.block_size as u32,
            tp_block_nr: g.block_nr as u32,
            tp_frame_size: g.frame_size as u32,
            tp_frame_nr: ((g.block_size / g.frame_size) * g.block_nr) as u32,
            tp_retire_blk_tov: RX_BLOCK_TOV_MS,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(&ctx, queue, fd, libc::SOL_PACKET, abi::PACKET_RX_RING, &req, "PACKET_RX_RING")?;
        let map = Mmap::map(&ctx, queue, fd, g.block_size * g.block_nr)?;
        // Kernel software stamps taken when the frame enters the stack (not when it is copied).
        set_int(&ctx, queue, fd, libc::SOL_SOCKET, abi::SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS")?;
        set_int(&ctx, queue, fd, libc::SOL_PACKET, abi::PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING")?;
        bind_ll(&ctx, queue, fd, ETH_P_ALL)?;
        if let Some(id) = fanout {
            join_fanout(&ctx, queue, fd, id)?;
        }
        // Reset the kernel counters so ours start at open.
        let _ = packet_stats(fd);
        Ok(RxRing {
            wait: RxWait::Poll,
            wake: None,
            map,
            fd: sock,
            ifname: ctx.ifname.clone(),
            queue,
            block_size: g.block_size,
            block_nr: g.block_nr,
            cur: 0,
            pos: None,
            offset: FreshOffset::new(),
            stats: RxQueueStats::default(),
            malformed: 0,
        })
    }

    #[inline(always)]
    fn block(&self, i: usize) -> *mut u8 {
        // SAFETY: i < block_nr, inside the mapping.
        unsafe { self.map.ptr.add(i * self.block_size) }
    }

    #[inline]
    fn release_block(&mut self) {
        let b = self.block(self.cur);
        // SAFETY: block header in the mapping; Release orders all our reads (and VLAN rewrites)
        // of this block before the kernel may reuse it.
        unsafe { store_release(b.add(abi::block::STATUS), abi::TP_STATUS_KERNEL) };
        self.pos = None;
        self.cur += 1;
        if self.cur == self.block_nr {
            self.cur = 0;
        }
    }
}

impl RxQueue for RxRing {
    fn set_wait(&mut self, wait: RxWait) {
        self.wait = wait;
    }

    fn set_wake(&mut self, wake: Option<Arc<WakeFd>>) {
        self.wake = wake;
    }

    fn recv(
        &mut self,
        max: usize,
        timeout: Duration,
        on_frame: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, PortError> {
        let offset = self.offset.at(clock::now_ns());
        let queue = self.queue as u16;
        let bs = self.block_size;
        let mut delivered = 0usize;
        let mut polled = false;
        while delivered < max {
            let b = self.block(self.cur);
            let mut pos = match self.pos {
                Some(p) => p,
                None => {
                    // SAFETY: block header in the mapping; Acquire pairs with the kernel's
                    // release of the block (smp_wmb before the status flip) so the frames
                    // written into it are visible.
                    let st = unsafe { load_acquire(b.add(abi::block::STATUS)) };
                    if st & abi::TP_STATUS_USER == 0 {
                        if delivered > 0 || polled {
                            break;
                        }
                        polled = true;
                        let fd = self.fd.as_raw_fd();
                        let (ifname, queue) = (&self.ifname, self.queue);
                        let wake = self.wake.as_deref();
                        self.wait.wait(timeout, |t| {
                            poll_in(fd, wake, t).map(|_| ()).map_err(|e| PortError::Io {
                                ifname: ifname.clone(),
                                queue,
                                op: "poll".into(),
                                source: e,
                            })
                        })?;
                        continue;
                    }
                    // SAFETY: block header fields in the mapping, owned by us now.
                    let (num, first) =
                        unsafe { (read_u32(b.add(abi::block::NUM_PKTS)), read_u32(b.add(abi::block::FIRST_PKT))) };
                    BlockPos { left: num, off: first as usize }
                }
            };
            while pos.left > 0 && delivered < max {
                if pos.off < abi::block::HDR || pos.off + abi::v3::HDR > bs || pos.off % 4 != 0 {
                    self.malformed += 1;
                    pos.left = 0;
                    break;
                }
                // SAFETY: pos.off + HDR <= block size, so the frame header is inside the block,
                // which the kernel handed to us (TP_STATUS_USER).
                let h = unsafe { b.add(pos.off) };
                // SAFETY: header fields inside the block (aligned: offsets are 16-aligned).
                let (next, sec, nsec, snap, st, mac) = unsafe {
                    (
                        read_u32(h.add(abi::v3::NEXT_OFFSET)),
                        read_u32(h.add(abi::v3::SEC)),
                        read_u32(h.add(abi::v3::NSEC)),
                        read_u32(h.add(abi::v3::SNAPLEN)) as usize,
                        read_u32(h.add(abi::v3::STATUS)),
                        read_u16(h.add(abi::v3::MAC)) as usize,
                    )
                };
                if mac < abi::v3::HDR + VLAN_HLEN || pos.off + mac + snap > bs {
                    self.malformed += 1;
                    pos.left = 0;
                    break;
                }
                let ts = offset.to_mono(sec as u64 * 1_000_000_000 + nsec as u64);
                let meta = RxMeta { ts_ns: ts, queue };
                // SAFETY: h + mac .. + snap is inside the block (checked above), and the 4 bytes
                // before it (>= the frame header end) are ours to rewrite while we own the block.
                let frame = unsafe {
                    if st & abi::TP_STATUS_VLAN_VALID != 0 {
                        let tci = read_u32(h.add(abi::v3::VLAN_TCI)) as u16;
                        let tpid = if st & abi::TP_STATUS_VLAN_TPID_VALID != 0 {
                            read_u16(h.add(abi::v3::VLAN_TPID))
                        } else {
                            0x8100
                        };
                        let start = reinsert_vlan(h.add(mac), snap, tpid, tci);
                        std::slice::from_raw_parts(start, snap + VLAN_HLEN)
                    } else {
                        std::slice::from_raw_parts(h.add(mac), snap)
                    }
                };
                on_frame(frame, meta);
                delivered += 1;
                pos.left -= 1;
                pos.off += next as usize;
            }
            if pos.left == 0 {
                self.release_block();
            } else {
                self.pos = Some(pos);
            }
        }
        Ok(delivered)
    }

    fn stats(&mut self) -> RxQueueStats {
        add_packet_stats(self.fd.as_raw_fd(), &mut self.stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_geometry_fits_frames() {
        let g = tx_geom(1518, 0, 4096);
        assert_eq!(g.frame_size, 2048);
        assert!(g.frame_size - abi::v2::TX_DATA >= 1518);
        assert_eq!(g.block_size % g.frame_size, 0);
        assert_eq!(g.frame_nr, g.block_nr * (g.block_size / g.frame_size));
        assert!(g.frame_nr >= TX_DEFAULT_FRAMES);
        let big = tx_geom(65535 + 18, 0, 4096);
        assert!(big.frame_size - abi::v2::TX_DATA >= 65553);
        assert!(big.frame_nr * big.frame_size <= TX_MAX_RING_BYTES);
        assert_eq!(big.block_size % 4096, 0);
        let small = tx_geom(1518, 16, 4096);
        assert!(small.frame_nr >= 16);
    }

    #[test]
    fn rx_geometry_holds_frames() {
        for (mfl, frames) in [(1518, 0), (1518, 64), (1518, 100_000), (65553, 0), (65553, 16), (9018, 5000)] {
            let g = rx_geom(mfl, frames, 4096);
            assert!(g.block_size.is_power_of_two(), "{g:?}");
            assert!(g.block_size >= abi::block::HDR + rx_slot(mfl), "{g:?}");
            assert!(g.block_nr >= 4, "{g:?}");
            assert_eq!(g.block_size % g.frame_size, 0);
            if frames > 0 {
                assert!(g.block_size * g.block_nr >= frames * rx_slot(mfl), "{g:?}");
            }
        }
        assert_eq!(rx_slot(60), 144);
    }

    #[test]
    fn tx_length_rule_matches_kernel() {
        let mut f = [0u8; 1518];
        assert!(tx_len_ok(&f, 60, 1500));
        assert!(tx_len_ok(&f, 14, 1500));
        assert!(!tx_len_ok(&f, 13, 1500));
        assert!(tx_len_ok(&f, 1514, 1500));
        assert!(!tx_len_ok(&f, 1518, 1500));
        f[12] = 0x81;
        assert!(tx_len_ok(&f, 1518, 1500));
        assert!(!tx_len_ok(&f, 1519, 1500));
    }

    #[test]
    fn vlan_reinsertion() {
        let mut buf = [0u8; 4 + 16];
        for (i, b) in buf[4..].iter_mut().enumerate() {
            *b = i as u8;
        }
        // SAFETY: buf has 4 bytes of headroom before the 16-byte frame.
        let start = unsafe { reinsert_vlan(buf.as_mut_ptr().add(4), 16, 0x8100, 0x0123) };
        assert_eq!(start, buf.as_mut_ptr());
        assert_eq!(&buf[..12], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        assert_eq!(&buf[12..16], &[0x81, 0x00, 0x01, 0x23]);
        assert_eq!(&buf[16..], &[12, 13, 14, 15]);
    }

    #[test]
    fn bad_options_are_rejected_before_anything_is_opened() {
        let mut s = PortSpec::new("nr-nonexistent0");
        s.queues = 0;
        let e = open(&s).err().expect("queues 0 must fail");
        assert!(e.to_string().contains("queues"), "{e}");
        s.queues = 65;
        assert!(open(&s).err().expect("65 queues").to_string().contains("queues"));
        s.queues = 1;
        s.ring_frames = 3;
        assert!(open(&s).err().expect("ring_frames 3").to_string().contains("ring_frames"));
        let e = open(&PortSpec::new("x".repeat(20))).err().expect("long name");
        assert!(e.to_string().contains("invalid interface name"), "{e}");
    }

    #[test]
    fn missing_interface_names_itself() {
        match open(&PortSpec::new("nr-nonexistent0")) {
            Err(PortError::NoSuchInterface { ifname, .. }) => assert_eq!(ifname, "nr-nonexistent0"),
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("opened a missing interface"),
        }
    }
}
