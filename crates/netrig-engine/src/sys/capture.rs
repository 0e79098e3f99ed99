//! Capture sources of the capture benchmark ([`crate::run::capture`]) that the port backends do not
//! already provide: a plain `AF_PACKET/SOCK_RAW` socket read with `recvfrom` (one frame per call)
//! or `recvmmsg` (a batch per call), and libpcap, loaded at run time with `dlopen` so the build
//! needs no link dependency. Each is an [`RxQueue`]: `recv` lends every captured frame to the
//! caller, `stats().ring_drops` is the method's own drop counter (`PACKET_STATISTICS` `tp_drops`
//! for the sockets, `pcap_stats` `ps_drop` for libpcap), cumulative since the source was opened.
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr;
use std::time::Duration;

use crate::error::PortError;
use crate::port::{PortSpec, RxMeta, RxQueue, RxQueueStats};
use crate::sys::af_packet::{abi, add_packet_stats, bind_ll, packet_socket, packet_stats, probe, set_int, IfCtx};
use crate::sys::netns;

/// Largest frame a socket source reads (MTU 1500 + Ethernet header + one VLAN tag, rounded up;
/// longer frames are truncated by the kernel and still counted).
const SNAP: usize = 2048;

fn socket_for(ifname: &str, netns_name: Option<&str>, timeout: Duration) -> Result<(IfCtx, OwnedFd), PortError> {
    let spec = PortSpec { netns: netns_name.map(str::to_string), transmit: false, ..PortSpec::new(ifname) };
    let (ctx, _) = probe(&spec, "capture")?;
    let fd = netns::in_netns(netns_name, || {
        let sock = packet_socket(&ctx, 0, "AF_PACKET capture socket")?;
        let fd = sock.as_raw_fd();
        set_int(&ctx, 0, fd, libc::SOL_PACKET, abi::PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING")?;
        let tv = libc::timeval { tv_sec: timeout.as_secs() as _, tv_usec: timeout.subsec_micros() as _ };
        crate::sys::af_packet::setsockopt(&ctx, 0, fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv, "SO_RCVTIMEO")?;
        bind_ll(&ctx, 0, fd, libc::ETH_P_ALL as u16)?;
        let _ = packet_stats(fd); // start the drop counter at zero
        Ok(sock)
    })?;
    Ok((ctx, fd))
}

/// An `AF_PACKET/SOCK_RAW` socket bound to one interface, read with one `recvfrom` per frame
/// (blocking, `SO_RCVTIMEO` bounds the wait) or with `recvmmsg` batches.
pub struct SocketCapture {
    fd: OwnedFd,
    ctx: IfCtx,
    /// `None`: `recvfrom`; `Some(n)`: `recvmmsg` of up to `n` frames.
    batch: Option<usize>,
    bufs: Vec<u8>,
    _iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    stats: RxQueueStats,
}

// SAFETY: the raw pointers in `iovs`/`msgs` point only into `bufs`/`iovs`, heap blocks owned by
// this struct that never move or grow after `open`.
unsafe impl Send for SocketCapture {}

impl SocketCapture {
    /// `batch` `None`: one `recvfrom` per frame; `Some(n)`: `recvmmsg` with `n` messages.
    pub fn open(
        ifname: &str,
        netns_name: Option<&str>,
        batch: Option<usize>,
        timeout: Duration,
    ) -> Result<Self, PortError> {
        let (ctx, fd) = socket_for(ifname, netns_name, timeout)?;
        let n = batch.unwrap_or(1).max(1);
        let mut bufs = vec![0u8; n * SNAP];
        let mut iovs: Vec<libc::iovec> = (0..n)
            .map(|i| libc::iovec {
                // SAFETY: i * SNAP < bufs.len(); the pointer stays inside the allocation.
                iov_base: unsafe { bufs.as_mut_ptr().add(i * SNAP) } as *mut c_void,
                iov_len: SNAP,
            })
            .collect();
        let msgs = (0..n)
            .map(|i| {
                // SAFETY: all-zero is a valid mmsghdr.
                let mut m: libc::mmsghdr = unsafe { mem::zeroed() };
                // SAFETY: i < iovs.len().
                m.msg_hdr.msg_iov = unsafe { iovs.as_mut_ptr().add(i) };
                m.msg_hdr.msg_iovlen = 1;
                m
            })
            .collect();
        Ok(SocketCapture { fd, ctx, batch, bufs, _iovs: iovs, msgs, stats: RxQueueStats::default() })
    }

    fn would_block(e: &io::Error) -> bool {
        matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR))
    }
}

impl RxQueue for SocketCapture {
    fn recv(
        &mut self,
        max: usize,
        _timeout: Duration,
        on_frame: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, PortError> {
        let fd = self.fd.as_raw_fd();
        let meta = RxMeta::default();
        match self.batch {
            None => {
                // One frame per call: the first call waits (up to SO_RCVTIMEO), the rest only
                // take what is already queued.
                let mut got = 0;
                while got < max.max(1) {
                    let flags = if got == 0 { 0 } else { libc::MSG_DONTWAIT };
                    // SAFETY: bufs holds at least SNAP writable bytes; no address is asked for.
                    let n = unsafe {
                        libc::recvfrom(
                            fd,
                            self.bufs.as_mut_ptr() as *mut c_void,
                            SNAP,
                            flags,
                            ptr::null_mut(),
                            ptr::null_mut(),
                        )
                    };
                    if n < 0 {
                        let e = io::Error::last_os_error();
                        if Self::would_block(&e) {
                            break;
                        }
                        return Err(self.ctx.io_err(0, "recvfrom", e));
                    }
                    on_frame(&self.bufs[..(n as usize).min(SNAP)], meta);
                    got += 1;
                }
                Ok(got)
            }
            Some(n) => {
                for m in self.msgs.iter_mut() {
                    m.msg_len = 0;
                }
                let want = n.min(max.max(1)) as c_uint;
                // SAFETY: msgs has `n` entries, each pointing at one iovec of SNAP bytes in bufs.
                let rc =
                    unsafe { libc::recvmmsg(fd, self.msgs.as_mut_ptr(), want, libc::MSG_WAITFORONE, ptr::null_mut()) };
                if rc < 0 {
                    let e = io::Error::last_os_error();
                    if Self::would_block(&e) {
                        return Ok(0);
                    }
                    return Err(self.ctx.io_err(0, "recvmmsg", e));
                }
                for (i, m) in self.msgs.iter().take(rc as usize).enumerate() {
                    let len = (m.msg_len as usize).min(SNAP);
                    on_frame(&self.bufs[i * SNAP..i * SNAP + len], meta);
                }
                Ok(rc as usize)
            }
        }
    }

    fn stats(&mut self) -> RxQueueStats {
        add_packet_stats(self.fd.as_raw_fd(), &mut self.stats)
    }
}

// ---------------------------------------------------------------------------------------------
// libpcap through dlopen
// ---------------------------------------------------------------------------------------------

/// The library names tried, in order (Debian/Ubuntu ship the runtime as `libpcap.so.0.8`).
pub const PCAP_LIBRARIES: &[&str] = &["libpcap.so.0.8", "libpcap.so.1", "libpcap.so"];
/// What to install when none loads.
pub const PCAP_PACKAGE: &str = "libpcap0.8 (apt install libpcap0.8)";

#[repr(C)]
struct PcapPkthdr {
    ts: libc::timeval,
    caplen: u32,
    len: u32,
}

#[repr(C)]
#[derive(Default)]
struct PcapStat {
    ps_recv: c_uint,
    ps_drop: c_uint,
    ps_ifdrop: c_uint,
}

type Handler = extern "C" fn(*mut u8, *const PcapPkthdr, *const u8);

/// The libpcap functions used, resolved with `dlsym`.
struct PcapApi {
    create: extern "C" fn(*const c_char, *mut c_char) -> *mut c_void,
    set_snaplen: extern "C" fn(*mut c_void, c_int) -> c_int,
    set_promisc: extern "C" fn(*mut c_void, c_int) -> c_int,
    set_timeout: extern "C" fn(*mut c_void, c_int) -> c_int,
    activate: extern "C" fn(*mut c_void) -> c_int,
    geterr: extern "C" fn(*mut c_void) -> *const c_char,
    dispatch: extern "C" fn(*mut c_void, c_int, Handler, *mut u8) -> c_int,
    stats: extern "C" fn(*mut c_void, *mut PcapStat) -> c_int,
    setnonblock: extern "C" fn(*mut c_void, c_int, *mut c_char) -> c_int,
    get_selectable_fd: extern "C" fn(*mut c_void) -> c_int,
    close: extern "C" fn(*mut c_void),
    lib_version: extern "C" fn() -> *const c_char,
}

fn pcap_err(ifname: &str, message: String) -> PortError {
    PortError::Unsupported { ifname: ifname.to_string(), backend: "libpcap".into(), reason: message }
}

/// A symbol's address as the function pointer type `F`.
///
/// # Safety
/// `p` must be a function of exactly the C signature `F` describes.
unsafe fn as_fn<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(mem::size_of::<F>(), mem::size_of::<*mut c_void>());
    // SAFETY: same size (checked), and the caller vouches for the signature.
    unsafe { mem::transmute_copy::<*mut c_void, F>(&p) }
}

fn load_pcap(ifname: &str) -> Result<(PcapApi, String), PortError> {
    let mut handle = ptr::null_mut();
    let mut loaded = "";
    for name in PCAP_LIBRARIES {
        let c = CString::new(*name).expect("no NUL in a library name");
        // SAFETY: dlopen with a valid C string; the handle is kept for the life of the process
        // (libpcap is never unloaded: its functions may be referenced by an open capture).
        handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if !handle.is_null() {
            loaded = name;
            break;
        }
    }
    if handle.is_null() {
        return Err(pcap_err(
            ifname,
            format!("cannot load libpcap (tried {}): install {PCAP_PACKAGE}", PCAP_LIBRARIES.join(", ")),
        ));
    }
    let sym = |name: &str| -> Result<*mut c_void, PortError> {
        let c = CString::new(name).expect("no NUL in a symbol name");
        // SAFETY: handle is a live dlopen handle; the name is a valid C string.
        let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
        if p.is_null() {
            return Err(pcap_err(ifname, format!("{loaded} has no {name}: install {PCAP_PACKAGE}")));
        }
        Ok(p)
    };
    // SAFETY: each symbol is libpcap's function of exactly this C signature (pcap/pcap.h).
    let api = unsafe {
        PcapApi {
            create: as_fn(sym("pcap_create")?),
            set_snaplen: as_fn(sym("pcap_set_snaplen")?),
            set_promisc: as_fn(sym("pcap_set_promisc")?),
            set_timeout: as_fn(sym("pcap_set_timeout")?),
            activate: as_fn(sym("pcap_activate")?),
            geterr: as_fn(sym("pcap_geterr")?),
            dispatch: as_fn(sym("pcap_dispatch")?),
            stats: as_fn(sym("pcap_stats")?),
            setnonblock: as_fn(sym("pcap_setnonblock")?),
            get_selectable_fd: as_fn(sym("pcap_get_selectable_fd")?),
            close: as_fn(sym("pcap_close")?),
            lib_version: as_fn(sym("pcap_lib_version")?),
        }
    };
    // SAFETY: pcap_lib_version returns a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr((api.lib_version)()) }.to_string_lossy().into_owned();
    Ok((api, format!("{version} ({loaded})")))
}

/// A live libpcap capture (`pcap_create` … `pcap_activate`, read with `pcap_dispatch`).
pub struct PcapCapture {
    api: PcapApi,
    p: *mut c_void,
    ifname: String,
    /// libpcap's version string and the library file loaded.
    pub version: String,
    stats: RxQueueStats,
}

// SAFETY: the pcap_t is used by one thread at a time (the worker that owns this struct).
unsafe impl Send for PcapCapture {}

struct Sink<'a> {
    on_frame: &'a mut dyn FnMut(&[u8], RxMeta),
}

extern "C" fn pcap_handler(user: *mut u8, h: *const PcapPkthdr, bytes: *const u8) {
    // SAFETY: `user` is the `Sink` passed to pcap_dispatch below, alive for the call; libpcap
    // hands a valid header and `caplen` readable bytes.
    unsafe {
        let sink = &mut *(user as *mut Sink<'_>);
        let frame = std::slice::from_raw_parts(bytes, (*h).caplen as usize);
        (sink.on_frame)(frame, RxMeta::default());
    }
}

impl PcapCapture {
    /// Open `ifname` (in `netns_name` if given) with libpcap: snaplen 65535, promiscuous, read
    /// timeout `timeout`, libpcap's default buffer (as a tcpdump-like application would).
    pub fn open(ifname: &str, netns_name: Option<&str>, timeout: Duration) -> Result<Self, PortError> {
        let (api, version) = load_pcap(ifname)?;
        let cname = CString::new(ifname).map_err(|_| pcap_err(ifname, "interface name contains NUL".into()))?;
        let p = netns::in_netns(netns_name, || {
            let mut errbuf = [0 as c_char; 512];
            let p = (api.create)(cname.as_ptr(), errbuf.as_mut_ptr());
            if p.is_null() {
                // SAFETY: libpcap wrote a NUL-terminated message into errbuf (PCAP_ERRBUF_SIZE 256).
                let msg = unsafe { CStr::from_ptr(errbuf.as_ptr()) }.to_string_lossy().into_owned();
                return Err(pcap_err(ifname, format!("pcap_create: {msg}")));
            }
            (api.set_snaplen)(p, 65535);
            (api.set_promisc)(p, 1);
            (api.set_timeout)(p, timeout.as_millis().clamp(1, 1000) as c_int);
            let rc = (api.activate)(p);
            if rc < 0 {
                // SAFETY: pcap_geterr returns the handle's NUL-terminated error text.
                let msg = unsafe { CStr::from_ptr((api.geterr)(p)) }.to_string_lossy().into_owned();
                (api.close)(p);
                if rc == -8 || msg.contains("ermission") {
                    return Err(PortError::PermissionDenied {
                        ifname: ifname.to_string(),
                        what: "libpcap capture".into(),
                    });
                }
                return Err(pcap_err(ifname, format!("pcap_activate failed ({rc}): {msg}")));
            }
            // Non-blocking, waited for with poll on pcap_get_selectable_fd: with TPACKET_V3 a
            // blocking pcap_dispatch waits for a filled block and would never see a stop flag.
            let mut errbuf = [0 as c_char; 512];
            if (api.setnonblock)(p, 1, errbuf.as_mut_ptr()) < 0 || (api.get_selectable_fd)(p) < 0 {
                (api.close)(p);
                return Err(pcap_err(ifname, "pcap_setnonblock / pcap_get_selectable_fd failed".into()));
            }
            Ok(p)
        })?;
        Ok(PcapCapture { api, p, ifname: ifname.to_string(), version, stats: RxQueueStats::default() })
    }
}

impl RxQueue for PcapCapture {
    fn recv(
        &mut self,
        max: usize,
        timeout: Duration,
        on_frame: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, PortError> {
        let mut sink = Sink { on_frame };
        let cnt = max.clamp(1, i32::MAX as usize) as c_int;
        let user = &mut sink as *mut Sink<'_> as *mut u8;
        let mut rc = (self.api.dispatch)(self.p, cnt, pcap_handler, user);
        if rc == 0 {
            let fd = (self.api.get_selectable_fd)(self.p);
            if crate::sys::af_packet::poll_in(fd, None, timeout).unwrap_or(false) {
                rc = (self.api.dispatch)(self.p, cnt, pcap_handler, user);
            }
        }
        if rc < 0 {
            // SAFETY: as in open.
            let msg = unsafe { CStr::from_ptr((self.api.geterr)(self.p)) }.to_string_lossy().into_owned();
            return Err(PortError::Other { ifname: self.ifname.clone(), message: format!("pcap_dispatch: {msg}") });
        }
        Ok(rc as usize)
    }

    fn stats(&mut self) -> RxQueueStats {
        let mut st = PcapStat::default();
        if (self.api.stats)(self.p, &mut st) == 0 {
            // libpcap's counters are totals since activation (32 bits).
            self.stats.ring_drops = u64::from(st.ps_drop);
        }
        self.stats
    }
}

impl Drop for PcapCapture {
    fn drop(&mut self) {
        (self.api.close)(self.p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_interface_names_itself() {
        let e = SocketCapture::open("nrcap-none0", None, None, Duration::from_millis(10)).map(|_| ()).unwrap_err();
        assert!(e.to_string().contains("nrcap-none0"), "{e}");
    }
}
