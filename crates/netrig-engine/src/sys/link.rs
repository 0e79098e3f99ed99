//! A link's state from the kernel (`RTM_GETLINK` over rtnetlink): operational state, how often
//! the carrier changed, and whether an XDP program is attached. Read before and after every trial
//! (`trial.rs`), so a tester port whose link went down, even for a moment, is never taken for DUT
//! loss.
//!
//! The netlink socket is created in the calling thread's network namespace: wrap calls in
//! [`super::netns::in_netns`] for a port in another namespace (sysfs would show the namespace it
//! was mounted in, not the port's).
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

use crate::port::{LinkSource, LinkState};

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const NLM_F_ACK: u16 = 4;
const NLA_F_NESTED: u16 = 1 << 15;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_FLAGS: u16 = 3;
/// `XDP_FLAGS_UPDATE_IF_NOEXIST`: refuse to replace a program that is already attached.
pub const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1;
/// `XDP_FLAGS_DRV_MODE`: native (driver) XDP.
pub const XDP_FLAGS_DRV_MODE: u32 = 4;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;

// Attributes of <linux/if_link.h> (enum IFLA_*).
const IFLA_LINK: u16 = 5;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_CARRIER_CHANGES: u16 = 35;
const IFLA_LINK_NETNSID: u16 = 37;
// <linux/net_namespace.h>: a namespace's id as another names it.
const RTM_NEWNSID: u16 = 88;
const RTM_GETNSID: u16 = 90;
const NETNSA_NSID: u16 = 1;
const NETNSA_FD: u16 = 3;
const IFLA_XDP: u16 = 43;
const IFLA_CARRIER_DOWN_COUNT: u16 = 48;
const IFLA_XDP_PROG_ID: u16 = 4;
const NLA_TYPE_MASK: u16 = 0x3FFF;

const IFF_UP: u32 = 0x1;
const IFF_RUNNING: u32 = 0x40;
/// The carrier as it is now (`netif_carrier_ok`). `IFF_RUNNING` follows the operational state,
/// which linkwatch updates from a workqueue: for a moment after a veth's peer goes down it still
/// says running. Only the full flags of `RTM_GETLINK` carry this bit (`SIOCGIFFLAGS` has 16).
const IFF_LOWER_UP: u32 = 0x1_0000;
/// Up, running and with a carrier: a port that can pass frames now.
const LINK_UP: u32 = IFF_UP | IFF_RUNNING | IFF_LOWER_UP;

/// The state of interface `ifindex` in the calling thread's namespace.
pub fn link_state(ifindex: u32) -> io::Result<LinkState> {
    parse_reply(&request(&link_msg(RTM_GETLINK, NLM_F_REQUEST, ifindex, &[]))?)
}

/// Attach XDP program `prog_fd` to `ifindex` through netlink (`IFLA_XDP`), or detach with -1:
/// unlike a BPF link, the program stays attached after this process exits, until it is detached
/// or the interface is deleted. `flags`: [`XDP_FLAGS_DRV_MODE`], [`XDP_FLAGS_UPDATE_IF_NOEXIST`].
pub fn set_xdp(ifindex: u32, prog_fd: i32, flags: u32) -> io::Result<()> {
    let mut xdp = Vec::with_capacity(16);
    for (ty, v) in [(IFLA_XDP_FD, prog_fd as u32), (IFLA_XDP_FLAGS, flags)] {
        xdp.extend_from_slice(&8u16.to_ne_bytes());
        xdp.extend_from_slice(&ty.to_ne_bytes());
        xdp.extend_from_slice(&v.to_ne_bytes());
    }
    let mut attr = Vec::with_capacity(4 + xdp.len());
    attr.extend_from_slice(&((4 + xdp.len()) as u16).to_ne_bytes());
    attr.extend_from_slice(&(IFLA_XDP | NLA_F_NESTED).to_ne_bytes());
    attr.extend_from_slice(&xdp);
    let reply = request(&link_msg(RTM_SETLINK, NLM_F_REQUEST | NLM_F_ACK, ifindex, &attr))?;
    if u16_at(&reply, 4) == Some(NLMSG_ERROR) {
        let errno = u32_at(&reply, NLMSG_HDRLEN).ok_or_else(|| bad("truncated error"))? as i32;
        if errno != 0 {
            return Err(io::Error::from_raw_os_error(-errno));
        }
    }
    Ok(())
}

/// One link message: header, `ifinfomsg` for `ifindex`, then `attrs` (already encoded).
fn link_msg(ty: u16, flags: u16, ifindex: u32, attrs: &[u8]) -> Vec<u8> {
    let mut req = vec![0u8; NLMSG_HDRLEN + IFINFOMSG_LEN];
    req.extend_from_slice(attrs);
    let len = req.len() as u32;
    req[0..4].copy_from_slice(&len.to_ne_bytes());
    req[4..6].copy_from_slice(&ty.to_ne_bytes());
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    req[NLMSG_HDRLEN] = libc::AF_UNSPEC as u8;
    req[NLMSG_HDRLEN + 4..NLMSG_HDRLEN + 8].copy_from_slice(&(ifindex as i32).to_ne_bytes());
    req
}

/// Send one request to the kernel over a fresh rtnetlink socket; the first reply datagram.
fn request(req: &[u8]) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; REPLY_BUF];
    let n = request_on(&route_socket()?, req, &mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

/// Room for one link reply (a link message with every attribute is a few KiB).
const REPLY_BUF: usize = 64 * 1024;

/// A fresh rtnetlink socket in the calling thread's network namespace.
fn route_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket syscall; the fd is owned right away.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Send one request over `sock` and read its reply into `buf`; the reply's length.
fn request_on(sock: &OwnedFd, req: &[u8], buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: an all-zero sockaddr_nl addresses the kernel.
    let mut kernel: libc::sockaddr_nl = unsafe { mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as u16;
    // SAFETY: req and kernel are live for the call; lengths match their sizes.
    let sent = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: buf is writable for its whole length.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// An interface's link, read over netlink in its namespace. The socket is made in the
/// namespace once and kept (a socket stays in the namespace it was made in): a trial's link
/// watcher reads every port every 50 ms, and entering the namespace and making a socket for each
/// read took 128-512 µs of CPU, on whichever CPU it ran, a sender's among them.
#[derive(Debug)]
pub struct NetlinkLink {
    netns: Option<String>,
    ifindex: u32,
    /// The socket and its reply buffer, made at the first read (dropped after a failed one).
    kept: Mutex<Option<(OwnedFd, Vec<u8>)>>,
}

impl NetlinkLink {
    /// `parse` of the kernel's `RTM_GETLINK` answer for this interface.
    fn read<T>(&self, parse: impl FnOnce(&[u8]) -> io::Result<T>) -> Option<T> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.is_none() {
            let sock = super::netns::in_netns(self.netns.as_deref(), || Ok(route_socket())).ok()?.ok()?;
            *kept = Some((sock, vec![0u8; REPLY_BUF]));
        }
        let (sock, buf) = kept.as_mut()?;
        let req = link_msg(RTM_GETLINK, NLM_F_REQUEST, self.ifindex, &[]);
        let got = request_on(sock, &req, buf).and_then(|n| parse(&buf[..n]));
        if got.is_err() {
            *kept = None;
        }
        got.ok()
    }
}

impl LinkSource for NetlinkLink {
    fn state(&self) -> Option<LinkState> {
        self.read(parse_reply)
    }

    fn location(&self) -> Option<(Option<&str>, u32)> {
        Some((self.netns.as_deref(), self.ifindex))
    }

    fn is_veth_peer_of(&self, other: &dyn LinkSource) -> bool {
        let (Some((netns, ifindex)), Some(Some((peer, nsid)))) = (other.location(), self.read(veth_peer)) else {
            return false;
        };
        peer == ifindex
            && match nsid {
                None => netns == self.netns.as_deref(),
                Some(id) => netns_id(self.netns.as_deref(), netns) == Some(id),
            }
    }
}

/// A veth's other end in an `RTM_GETLINK` answer: its index, and its namespace's id as the
/// answering namespace numbers it (`None`: the same namespace); `None` for any other kind of link.
fn veth_peer(b: &[u8]) -> io::Result<Option<(u32, Option<i32>)>> {
    let msg = b.get(NLMSG_HDRLEN + IFINFOMSG_LEN..).ok_or_else(|| bad("truncated"))?;
    let (mut veth, mut peer, mut nsid) = (false, None, None);
    for (ty, p) in attrs(msg) {
        match ty {
            IFLA_LINKINFO => veth = attrs(p).any(|(t, v)| t == IFLA_INFO_KIND && v.starts_with(b"veth\0")),
            IFLA_LINK => peer = u32_at(p, 0),
            IFLA_LINK_NETNSID => nsid = u32_at(p, 0).map(|v| v as i32),
            _ => {}
        }
    }
    Ok(peer.filter(|_| veth).map(|p| (p, nsid)))
}

/// The id namespace `from` (`None`: the caller's) gives namespace `of`, if it gave it one
/// (`RTM_GETNSID`): how a link's `IFLA_LINK_NETNSID` names the namespace its other end is in.
fn netns_id(from: Option<&str>, of: Option<&str>) -> Option<i32> {
    // Opened here, before entering `from`: `None` is the caller's namespace.
    let target = std::fs::File::open(of.map_or("/proc/thread-self/ns/net".into(), super::netns::netns_path)).ok()?;
    let mut req = vec![0u8; NLMSG_HDRLEN + 4];
    req.extend_from_slice(&8u16.to_ne_bytes());
    req.extend_from_slice(&NETNSA_FD.to_ne_bytes());
    req.extend_from_slice(&(target.as_raw_fd() as u32).to_ne_bytes());
    let len = req.len() as u32;
    req[0..4].copy_from_slice(&len.to_ne_bytes());
    req[4..6].copy_from_slice(&RTM_GETNSID.to_ne_bytes());
    req[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    let reply = super::netns::in_netns(from, || Ok(request(&req))).ok()?.ok()?;
    if u16_at(&reply, 4) != Some(RTM_NEWNSID) {
        return None;
    }
    let id = attrs(reply.get(NLMSG_HDRLEN + 4..)?).find(|(t, _)| *t == NETNSA_NSID).and_then(|(_, v)| u32_at(v, 0));
    id.map(|v| v as i32).filter(|&v| v >= 0)
}

/// The link source of interface `ifindex` in namespace `netns`.
pub fn source(netns: Option<&str>, ifindex: u32) -> std::sync::Arc<dyn LinkSource> {
    std::sync::Arc::new(NetlinkLink { netns: netns.map(str::to_string), ifindex, kept: Mutex::new(None) })
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Attributes `(type, payload)` of a netlink attribute stream (4-byte aligned).
fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = u16_at(b, 0)? as usize;
        let ty = u16_at(b, 2)? & NLA_TYPE_MASK;
        if len < 4 || len > b.len() {
            return None;
        }
        let payload = &b[4..len];
        b = b.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        Some((ty, payload))
    })
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("RTM_GETLINK reply: {what}"))
}

/// Parse the kernel's answer to one `RTM_GETLINK` request.
fn parse_reply(b: &[u8]) -> io::Result<LinkState> {
    let len = u32_at(b, 0).ok_or_else(|| bad("truncated"))? as usize;
    let ty = u16_at(b, 4).ok_or_else(|| bad("truncated"))?;
    let msg = b.get(..len).ok_or_else(|| bad("length beyond the datagram"))?;
    if ty == NLMSG_ERROR {
        let errno = u32_at(msg, NLMSG_HDRLEN).ok_or_else(|| bad("truncated error"))? as i32;
        return Err(io::Error::from_raw_os_error(-errno));
    }
    if ty != RTM_NEWLINK || msg.len() < NLMSG_HDRLEN + IFINFOMSG_LEN {
        return Err(bad("not a link message"));
    }
    let flags = u32_at(msg, NLMSG_HDRLEN + 8).ok_or_else(|| bad("truncated"))?;
    let mut st = LinkState { oper_up: flags & LINK_UP == LINK_UP, ..Default::default() };
    for (ty, p) in attrs(&msg[NLMSG_HDRLEN + IFINFOMSG_LEN..]) {
        match ty {
            IFLA_CARRIER_CHANGES => st.carrier_changes = u32_at(p, 0).unwrap_or(0),
            IFLA_CARRIER_DOWN_COUNT => st.carrier_down = u32_at(p, 0),
            IFLA_XDP => {
                st.xdp_prog_id = attrs(p).find(|(t, _)| *t == IFLA_XDP_PROG_ID).and_then(|(_, v)| u32_at(v, 0));
            }
            _ => {}
        }
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_up_without_xdp() {
        let idx = super::super::ifinfo::ifindex("lo", None).unwrap();
        let st = link_state(idx).unwrap();
        assert!(st.oper_up, "{st:?}");
        assert_eq!(st.xdp_prog_id, None);
    }

    /// A source keeps its socket from one read to the next; one whose interface went away reads
    /// nothing and drops it.
    #[test]
    fn a_source_reads_over_one_kept_socket() {
        let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let lo = NetlinkLink { netns: None, ifindex: 1, kept: Mutex::new(None) };
        assert!(lo.state().is_some_and(|s| s.oper_up));
        let (kept, open) = (lo.kept.lock().unwrap().as_ref().map(|(fd, _)| fd.as_raw_fd()), fds());
        for _ in 0..100 {
            assert!(lo.state().is_some_and(|s| s.oper_up));
        }
        assert_eq!(lo.kept.lock().unwrap().as_ref().map(|(fd, _)| fd.as_raw_fd()), kept);
        assert!(fds() <= open, "no socket per read");
        let gone = NetlinkLink { netns: None, ifindex: 0x7FFF_FFF0, kept: Mutex::new(None) };
        assert!(gone.state().is_none());
        assert!(gone.kept.lock().unwrap().is_none());
    }

    /// Each end of a veth pair across two namespaces is the other's peer (through the id one
    /// namespace gives the other); neither is loopback's, and loopback has none.
    #[test]
    fn a_veth_end_knows_its_other_end_across_namespaces() {
        use super::super::bpf::testkit::{is_root, VethPair};
        if !is_root() {
            eprintln!("skipped: needs root (namespaces)");
            return;
        }
        let v = VethPair::new("pe");
        let index = |ns: &str, ifn: &str| {
            super::super::netns::in_netns(Some(ns), || super::super::ifinfo::ifindex(ifn, Some(ns))).unwrap()
        };
        let end = |ns: &str, ifn: &str| source(Some(ns), index(ns, ifn));
        let (a, b) = (end(&v.ns_a, &v.if_a), end(&v.ns_b, &v.if_b));
        let lo = source(None, 1);
        assert!(a.is_veth_peer_of(b.as_ref()) && b.is_veth_peer_of(a.as_ref()));
        assert!(!a.is_veth_peer_of(a.as_ref()) && !a.is_veth_peer_of(lo.as_ref()));
        assert!(!lo.is_veth_peer_of(a.as_ref()));
        // The same index in another namespace is not the peer: loopback is 1 in each.
        let lo_b = source(Some(&v.ns_b), 1);
        assert!(!a.is_veth_peer_of(lo_b.as_ref()));
    }

    #[test]
    fn unknown_index_is_an_error() {
        let e = link_state(0x7FFF_FFF0).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{e}");
    }

    #[test]
    fn reply_parser_reads_the_attributes_and_survives_garbage() {
        let mut m = vec![0u8; NLMSG_HDRLEN + IFINFOMSG_LEN];
        m[4..6].copy_from_slice(&RTM_NEWLINK.to_ne_bytes());
        m[NLMSG_HDRLEN + 8..NLMSG_HDRLEN + 12].copy_from_slice(&LINK_UP.to_ne_bytes());
        let mut attr = |ty: u16, payload: &[u8]| {
            m.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
            m.extend_from_slice(&ty.to_ne_bytes());
            m.extend_from_slice(payload);
            while !m.len().is_multiple_of(4) {
                m.push(0);
            }
        };
        attr(IFLA_CARRIER_CHANGES, &7u32.to_ne_bytes());
        attr(IFLA_CARRIER_DOWN_COUNT, &3u32.to_ne_bytes());
        let mut xdp = Vec::new();
        xdp.extend_from_slice(&8u16.to_ne_bytes());
        xdp.extend_from_slice(&IFLA_XDP_PROG_ID.to_ne_bytes());
        xdp.extend_from_slice(&42u32.to_ne_bytes());
        attr(IFLA_XDP | 0x8000, &xdp);
        let n = m.len() as u32;
        m[0..4].copy_from_slice(&n.to_ne_bytes());
        let st = parse_reply(&m).unwrap();
        assert_eq!(st, LinkState { oper_up: true, carrier_changes: 7, carrier_down: Some(3), xdp_prog_id: Some(42) });
        // Running by an operational state linkwatch has not caught up with, but no carrier: down.
        let mut stale = m.clone();
        stale[NLMSG_HDRLEN + 8..NLMSG_HDRLEN + 12].copy_from_slice(&(IFF_UP | IFF_RUNNING).to_ne_bytes());
        assert!(!parse_reply(&stale).unwrap().oper_up);
        for cut in 0..m.len() {
            let _ = parse_reply(&m[..cut]);
        }
        m[NLMSG_HDRLEN + IFINFOMSG_LEN] = 0xFF; // an attribute longer than the message
        assert!(parse_reply(&m).is_ok());
    }
}
