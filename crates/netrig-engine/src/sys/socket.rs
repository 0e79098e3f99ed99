//! Plain-socket backend: `AF_PACKET/SOCK_RAW` without rings, batched with `sendmmsg` and
//! `recvmmsg`. The fallback when neither AF_XDP nor packet rings are available; same semantics
//! as the ring backend (see [`super::af_packet`] for the shared helpers).
//!
//! * **TX**: a scratch array of [`BATCH`] frame buffers; `send` lets the caller fill free
//!   buffers, then one `sendmmsg(MSG_DONTWAIT)` hands them to the kernel. Frames the kernel
//!   refused with `EAGAIN`/`ENOBUFS` stay queued (in order) and go first next time, so an
//!   accepted frame is never lost and the TX counters count exactly what the kernel took.
//! * **RX**: `recvmmsg` into a scratch array, kernel software timestamps from `SO_TIMESTAMPNS`,
//!   VLAN tags restored from `PACKET_AUXDATA`, `PACKET_IGNORE_OUTGOING`, fanout for several
//!   queues, drops from `PACKET_STATISTICS` (receive-buffer overruns).
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{self, FreshOffset};
use crate::error::PortError;
use crate::port::{
    Backend, Port, PortCaps, PortSpec, RxMeta, RxQueue, RxQueueStats, RxWait, TimestampSource, TxQueue, TxQueueStats,
    WakeFd,
};
use crate::sys::af_packet::{
    abi, add_packet_stats, bad_len, bind_ll, force_buf, join_fanout, new_fanout_id, packet_socket, packet_stats,
    poll_in, probe, reinsert_vlan, set_int, tx_len_ok, IfCtx, VLAN_HLEN,
};
use crate::sys::netns;

/// Frames per `sendmmsg`/`recvmmsg`.
pub const BATCH: usize = 64;
const DEFAULT_RCVBUF: usize = 32 << 20;
/// Control buffer per received message: one timespec cmsg + one auxdata cmsg, generously.
const CTRL_LEN: usize = 128;

struct SocketPort {
    ctx: IfCtx,
    caps: PortCaps,
    fanout_id: u16,
}

/// Open `spec` with this backend.
pub fn open(spec: &PortSpec) -> Result<Box<dyn Port>, PortError> {
    let (ctx, info) = probe(spec, "socket")?;
    let caps = PortCaps {
        name: ctx.ifname.clone(),
        backend: Backend::Socket,
        tx_queues: ctx.queues,
        rx_queues: ctx.queues,
        max_frame_len: ctx.mtu + 14,
        speed_bps: info.speed_bps,
        rx_timestamp: TimestampSource::KernelSoftware,
        zero_copy: false,
        notes: format!(
            "plain AF_PACKET sockets: sendmmsg/recvmmsg in batches of {BATCH}, qdisc bypass, SO_TIMESTAMPNS{}",
            if ctx.queues > 1 { ", fanout hash" } else { "" }
        ),
    };
    let fanout_id = new_fanout_id(ctx.ifindex);
    Ok(Box::new(SocketPort { ctx, caps, fanout_id }))
}

impl Port for SocketPort {
    fn caps(&self) -> &PortCaps {
        &self.caps
    }

    fn open_tx(&mut self, queue: usize) -> Result<Box<dyn TxQueue>, PortError> {
        if queue >= self.ctx.queues {
            return Err(PortError::NoSuchQueue { ifname: self.ctx.ifname.clone(), queue, queues: self.ctx.queues });
        }
        let ctx = self.ctx.clone();
        netns::in_netns(ctx.netns.clone().as_deref(), move || {
            Ok(Box::new(SockTx::open(ctx, queue)?) as Box<dyn TxQueue>)
        })
    }

    fn open_rx(&mut self, queue: usize) -> Result<Box<dyn RxQueue>, PortError> {
        if queue >= self.ctx.queues {
            return Err(PortError::NoSuchQueue { ifname: self.ctx.ifname.clone(), queue, queues: self.ctx.queues });
        }
        let ctx = self.ctx.clone();
        let fanout = (ctx.queues > 1).then_some(self.fanout_id);
        netns::in_netns(ctx.netns.clone().as_deref(), move || {
            Ok(Box::new(SockRx::open(ctx, queue, fanout)?) as Box<dyn RxQueue>)
        })
    }

    fn link(&self) -> Option<std::sync::Arc<dyn crate::port::LinkSource>> {
        Some(crate::sys::link::source(self.ctx.netns.as_deref(), self.ctx.ifindex))
    }
}

/// Scratch buffers plus the `iovec`/`mmsghdr` arrays that point into them. The heap blocks never
/// move after construction, so the raw pointers stay valid for the life of the struct.
struct Scratch {
    /// Owns the frame memory; only ever accessed through the raw pointers in `iovs`.
    _buf: Vec<u8>,
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    stride: usize,
}

impl Scratch {
    /// `headroom` bytes in front of every buffer stay outside the iovec (for VLAN re-insertion).
    fn new(stride: usize, headroom: usize, ctrl: Option<&mut [u64]>) -> Self {
        let mut buf = vec![0u8; BATCH * stride];
        let base = buf.as_mut_ptr();
        let iovs: Vec<libc::iovec> = (0..BATCH)
            // SAFETY: i * stride + headroom < BATCH * stride: inside `buf`.
            .map(|i| libc::iovec {
                iov_base: unsafe { base.add(i * stride + headroom) } as *mut _,
                iov_len: stride - headroom,
            })
            .collect();
        let mut s = Scratch { _buf: buf, iovs, msgs: Vec::with_capacity(BATCH), stride };
        let ctrl_ptr = ctrl.map(|c| c.as_mut_ptr() as *mut u8);
        for i in 0..BATCH {
            // SAFETY: all-zero is a valid mmsghdr (null pointers, zero lengths).
            let mut m: libc::mmsghdr = unsafe { mem::zeroed() };
            m.msg_hdr.msg_iov = &mut s.iovs[i];
            m.msg_hdr.msg_iovlen = 1;
            if let Some(c) = ctrl_ptr {
                // SAFETY: the caller's control area holds BATCH * CTRL_LEN bytes.
                m.msg_hdr.msg_control = unsafe { c.add(i * CTRL_LEN) } as *mut _;
                m.msg_hdr.msg_controllen = CTRL_LEN as _;
            }
            s.msgs.push(m);
        }
        s
    }
}

fn stride_for(max_frame_len: usize) -> usize {
    (max_frame_len + VLAN_HLEN + 64).div_ceil(64) * 64
}

// ---------------------------------------------------------------------------------------------
// TX
// ---------------------------------------------------------------------------------------------

struct SockTx {
    fd: OwnedFd,
    ctx: IfCtx,
    queue: usize,
    s: Scratch,
    /// `s.iovs[..pending]` hold accepted frames the kernel has not taken yet, oldest first;
    /// `s.iovs[pending..]` are free buffers.
    pending: usize,
    stats: TxQueueStats,
}

// SAFETY: the raw pointers in `Scratch` point only into heap blocks owned by this struct.
unsafe impl Send for SockTx {}

impl SockTx {
    fn open(ctx: IfCtx, queue: usize) -> Result<Self, PortError> {
        let sock = packet_socket(&ctx, queue, "AF_PACKET TX socket")?;
        let fd = sock.as_raw_fd();
        set_int(&ctx, queue, fd, libc::SOL_PACKET, abi::PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS")?;
        force_buf(&ctx, queue, fd, true, 8 << 20)?;
        bind_ll(&ctx, queue, fd, 0)?;
        let s = Scratch::new(stride_for(ctx.max_frame_len), 0, None);
        Ok(SockTx { fd: sock, ctx, queue, s, pending: 0, stats: TxQueueStats::default() })
    }

    /// One `sendmmsg` over the pending frames; returns how many the kernel took.
    fn push(&mut self) -> Result<usize, PortError> {
        if self.pending == 0 {
            return Ok(0);
        }
        // SAFETY: msgs[..pending] are valid mmsghdrs whose iovecs point at filled buffers.
        let rc = unsafe {
            libc::sendmmsg(self.fd.as_raw_fd(), self.s.msgs.as_mut_ptr(), self.pending as u32, libc::MSG_DONTWAIT)
        };
        let k = if rc < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // ENETDOWN: the interface set down; its frames wait for it, in order.
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) | Some(libc::ENETDOWN) => {
                    self.stats.backpressure += 1;
                    0
                }
                _ => return Err(self.ctx.io_err(self.queue, "sendmmsg", e)),
            }
        } else {
            rc as usize
        };
        for iov in &self.s.iovs[..k] {
            self.stats.frames += 1;
            self.stats.bytes += iov.iov_len as u64;
        }
        if k > 0 && k < self.pending {
            // Partial send (the next frame hit back-pressure): keep the rest in order at the
            // front; the sent buffers become free.
            self.stats.backpressure += 1;
        }
        self.s.iovs[..self.pending].rotate_left(k);
        self.pending -= k;
        Ok(k)
    }
}

impl TxQueue for SockTx {
    fn send_held(
        &mut self,
        count: usize,
        fill: &mut dyn FnMut(&mut [u8], &mut u64) -> usize,
    ) -> Result<usize, PortError> {
        let free = BATCH - self.pending;
        let n = count.min(free);
        if count > 0 && free == 0 {
            self.stats.backpressure += 1;
        }
        let cap = self.s.stride;
        for i in self.pending..self.pending + n {
            // SAFETY: iovs[i] (i >= pending) is a free buffer of `stride` bytes inside the
            // scratch block; no other reference to it exists.
            let buf = unsafe { std::slice::from_raw_parts_mut(self.s.iovs[i].iov_base as *mut u8, cap) };
            let len = fill(buf, &mut 0);
            if !tx_len_ok(buf, len, self.ctx.mtu) {
                self.stats.errors += 1;
                self.pending = i;
                return Err(bad_len(&self.ctx, self.queue, len));
            }
            self.s.iovs[i].iov_len = len;
        }
        self.pending += n;
        self.push()?;
        Ok(n)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        let deadline = clock::now_ns() + 200_000_000;
        while self.pending > 0 && clock::now_ns() < deadline {
            if self.push()? == 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        Ok(())
    }

    fn idle(&mut self) -> bool {
        if self.pending > 0 {
            let _ = self.push();
        }
        self.pending == 0
    }

    fn stats(&self) -> TxQueueStats {
        self.stats
    }
}

// ---------------------------------------------------------------------------------------------
// RX
// ---------------------------------------------------------------------------------------------

struct SockRx {
    fd: OwnedFd,
    ifname: String,
    queue: usize,
    s: Scratch,
    /// Control-message area (u64 for cmsg alignment), pointed into by `s.msgs`.
    _ctrl: Vec<u64>,
    offset: FreshOffset,
    /// How an empty queue is waited on (`RxQueue::set_wait`, `RxQueue::set_wake`).
    wait: RxWait,
    wake: Option<Arc<WakeFd>>,
    stats: RxQueueStats,
}

// SAFETY: the raw pointers in `Scratch` point only into heap blocks owned by this struct.
unsafe impl Send for SockRx {}

impl SockRx {
    fn open(ctx: IfCtx, queue: usize, fanout: Option<u16>) -> Result<Self, PortError> {
        let sock = packet_socket(&ctx, queue, "AF_PACKET RX socket")?;
        let fd = sock.as_raw_fd();
        let rcvbuf = if ctx.ring_frames == 0 { DEFAULT_RCVBUF } else { ctx.ring_frames * (ctx.max_frame_len + 768) };
        force_buf(&ctx, queue, fd, false, rcvbuf)?;
        set_int(&ctx, queue, fd, libc::SOL_SOCKET, abi::SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS")?;
        set_int(&ctx, queue, fd, libc::SOL_PACKET, abi::PACKET_AUXDATA, 1, "PACKET_AUXDATA")?;
        set_int(&ctx, queue, fd, libc::SOL_PACKET, abi::PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING")?;
        bind_ll(&ctx, queue, fd, libc::ETH_P_ALL as u16)?;
        if let Some(id) = fanout {
            join_fanout(&ctx, queue, fd, id)?;
        }
        let _ = packet_stats(fd);
        let mut ctrl = vec![0u64; BATCH * CTRL_LEN / 8];
        let s = Scratch::new(stride_for(ctx.max_frame_len), VLAN_HLEN, Some(&mut ctrl));
        Ok(SockRx {
            wait: RxWait::Poll,
            wake: None,
            fd: sock,
            ifname: ctx.ifname,
            queue,
            s,
            _ctrl: ctrl,
            offset: FreshOffset::new(),
            stats: RxQueueStats::default(),
        })
    }
}

impl RxQueue for SockRx {
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
        let fd = self.fd.as_raw_fd();
        let mut delivered = 0;
        let mut polled = false;
        while delivered < max {
            let want = (max - delivered).min(BATCH);
            for m in &mut self.s.msgs[..want] {
                m.msg_hdr.msg_controllen = CTRL_LEN as _;
                m.msg_hdr.msg_flags = 0;
                m.msg_len = 0;
            }
            // SAFETY: msgs[..want] are valid mmsghdrs pointing at our buffers and control areas.
            let rc = unsafe {
                libc::recvmmsg(fd, self.s.msgs.as_mut_ptr(), want as u32, libc::MSG_DONTWAIT, ptr::null_mut())
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => {
                        if delivered > 0 || polled {
                            break;
                        }
                        polled = true;
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
                    _ => {
                        return Err(PortError::Io {
                            ifname: self.ifname.clone(),
                            queue: self.queue,
                            op: "recvmmsg".into(),
                            source: e,
                        })
                    }
                }
            }
            let k = rc as usize;
            let user_ts = clock::now_ns();
            for i in 0..k {
                let m = &self.s.msgs[i];
                let len = (m.msg_len as usize).min(self.s.iovs[i].iov_len);
                let mut ts = user_ts;
                let mut vlan: Option<(u16, u16)> = None;
                // SAFETY: the kernel wrote msg_controllen bytes of well-formed cmsgs into our
                // control area; CMSG_* walk stays inside it.
                unsafe {
                    let hdr = &m.msg_hdr;
                    let mut c = libc::CMSG_FIRSTHDR(hdr);
                    while !c.is_null() {
                        let (lvl, ty) = ((*c).cmsg_level, (*c).cmsg_type);
                        if lvl == libc::SOL_SOCKET && ty == abi::SCM_TIMESTAMPNS {
                            let t: libc::timespec = ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                            ts = offset.to_mono(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
                        } else if lvl == libc::SOL_PACKET && ty == abi::PACKET_AUXDATA {
                            let a: abi::TpacketAuxdata =
                                ptr::read_unaligned(libc::CMSG_DATA(c) as *const abi::TpacketAuxdata);
                            if a.tp_status & abi::TP_STATUS_VLAN_VALID != 0 {
                                let tpid = if a.tp_status & abi::TP_STATUS_VLAN_TPID_VALID != 0 {
                                    a.tp_vlan_tpid
                                } else {
                                    0x8100
                                };
                                vlan = Some((tpid, a.tp_vlan_tci));
                            }
                        }
                        c = libc::CMSG_NXTHDR(hdr, c);
                    }
                }
                let base = self.s.iovs[i].iov_base as *mut u8;
                // SAFETY: base .. base+len was written by the kernel; VLAN_HLEN bytes of headroom
                // in front of base belong to the same scratch buffer.
                let frame = unsafe {
                    match vlan {
                        Some((tpid, tci)) => {
                            std::slice::from_raw_parts(reinsert_vlan(base, len, tpid, tci), len + VLAN_HLEN)
                        }
                        None => std::slice::from_raw_parts(base, len),
                    }
                };
                on_frame(frame, RxMeta { ts_ns: ts, queue: self.queue as u16 });
            }
            delivered += k;
            if k < want {
                break;
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
    fn stride_holds_a_tagged_max_frame() {
        assert!(stride_for(1518) >= 1518 + VLAN_HLEN);
        assert_eq!(stride_for(1518) % 64, 0);
    }

    #[test]
    fn missing_interface_names_itself() {
        match open(&PortSpec::new("nr-nonexistent1")) {
            Err(PortError::NoSuchInterface { ifname, .. }) => assert_eq!(ifname, "nr-nonexistent1"),
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("opened a missing interface"),
        }
    }
}
