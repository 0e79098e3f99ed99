//! Interface facts: index, MTU, MAC, link speed, driver, queue counts, XDP support hints.
//! Read from sysfs and ethtool ioctls in the current thread's network namespace (wrap calls in
//! [`super::netns::in_netns`] for another namespace).
use std::ffi::{CStr, CString};
use std::fs;
use std::io;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::error::PortError;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IfInfo {
    pub name: String,
    pub ifindex: u32,
    pub mtu: usize,
    pub mac: [u8; 6],
    /// Link speed in bit/s, when the driver reports one.
    pub speed_bps: Option<u64>,
    pub driver: String,
    pub rx_queues: usize,
    pub tx_queues: usize,
    /// Administratively up (`IFF_UP`): someone brought it up; without a carrier it may still come.
    pub admin_up: bool,
    /// Running with a carrier, as the kernel has it now (`IFF_RUNNING` and `IFF_LOWER_UP`).
    pub oper_up: bool,
}

fn read_trim(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Interface index of `name`, or `NoSuchInterface`.
pub fn ifindex(name: &str, netns: Option<&str>) -> Result<u32, PortError> {
    let c = CString::new(name)
        .map_err(|_| PortError::NoSuchInterface { ifname: name.to_string(), netns: netns.map(str::to_string) })?;
    // SAFETY: c is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(PortError::NoSuchInterface { ifname: name.to_string(), netns: netns.map(str::to_string) });
    }
    Ok(idx)
}

fn count_dir(path: &str, prefix: &str) -> usize {
    fs::read_dir(path)
        .map(|d| d.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with(prefix)).count())
        .unwrap_or(0)
}

/// Everything about `name` in the calling thread's namespace.
///
/// Note: `/sys/class/net` shows the namespace sysfs was mounted in, so for interfaces in another
/// namespace the values come from ioctls where possible (index, MTU, MAC, speed, driver).
pub fn ifinfo(name: &str, netns: Option<&str>) -> Result<IfInfo, PortError> {
    let ifindex = ifindex(name, netns)?;
    let sock = Sock::new().map_err(|e| io_err(name, "socket", e))?;
    let mtu = sock.ifreq_int(name, libc::SIOCGIFMTU).map_err(|e| io_err(name, "SIOCGIFMTU", e))? as usize;
    let mac = sock.hwaddr(name).unwrap_or([0; 6]);
    let flags = sock.ifreq_int(name, libc::SIOCGIFFLAGS).unwrap_or(0);
    let (driver, mut speed_bps) = sock.ethtool_info(name);
    if VIRTUAL_DRIVERS.contains(&driver.as_str()) {
        speed_bps = None; // a made-up number (veth says 10 Gbit/s), not a line rate
    }
    let base = format!("/sys/class/net/{name}");
    let sys_ok = read_trim(&format!("{base}/ifindex")).and_then(|s| s.parse::<u32>().ok()) == Some(ifindex);
    let (rx_queues, tx_queues) = if sys_ok {
        (count_dir(&format!("{base}/queues"), "rx-").max(1), count_dir(&format!("{base}/queues"), "tx-").max(1))
    } else {
        sock.channels(name).unwrap_or((1, 1))
    };
    Ok(IfInfo {
        name: name.to_string(),
        ifindex,
        mtu,
        mac,
        speed_bps,
        driver,
        rx_queues,
        tx_queues,
        admin_up: flags & libc::IFF_UP != 0,
        // The carrier too, read now: `IFF_RUNNING` alone lags a peer's going down (see `link`).
        oper_up: super::link::link_state(ifindex).map_or(flags & libc::IFF_RUNNING != 0, |l| l.oper_up),
    })
}

/// Drivers whose ethtool speed is not a line rate (veth reports 10 Gbit/s whatever it carries):
/// their interfaces have no speed, so a nominal one is used and said to be nominal.
pub const VIRTUAL_DRIVERS: &[&str] = &["veth", "tun", "dummy", "vxlan", "geneve", "bridge", "macvlan", "ipvlan"];

/// What the transmit guard looks at, read in the calling thread's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveFacts {
    /// The interface is a loopback device (`IFF_LOOPBACK`).
    pub loopback: bool,
    /// Every address configured on it.
    pub addresses: Vec<IpAddr>,
    /// The gateways of the default routes (IPv4 and IPv6) that leave through it; `None` for a
    /// default route without a gateway (straight out of the device).
    pub default_routes: Vec<Option<IpAddr>>,
}

/// The facts about `name` the transmit guard needs (addresses, default routes, loopback).
pub fn live_facts(name: &str, netns: Option<&str>) -> Result<LiveFacts, PortError> {
    ifindex(name, netns)?;
    let sock = Sock::new().map_err(|e| io_err(name, "socket", e))?;
    let flags = sock.ifreq_int(name, libc::SIOCGIFFLAGS).map_err(|e| io_err(name, "SIOCGIFFLAGS", e))?;
    let addresses = addresses_of(name).map_err(|e| io_err(name, "getifaddrs", e))?;
    // /proc/thread-self/net shows the namespace of this thread (the caller may have entered one).
    let read = |f: &str| fs::read_to_string(format!("/proc/thread-self/net/{f}")).unwrap_or_default();
    let mut default_routes = default_routes_v4(&read("route"), name);
    default_routes.extend(default_routes_v6(&read("ipv6_route"), name));
    Ok(LiveFacts { loopback: flags & libc::IFF_LOOPBACK != 0, addresses, default_routes })
}

fn addresses_of(name: &str) -> io::Result<Vec<IpAddr>> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free with freeifaddrs below; every node and
    // its sockaddr are valid until then, and each sockaddr is read as the type its family says.
    unsafe {
        if libc::getifaddrs(&mut head) != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut p = head;
        while !p.is_null() {
            let a = &*p;
            p = a.ifa_next;
            if a.ifa_addr.is_null() || a.ifa_name.is_null() || CStr::from_ptr(a.ifa_name).to_bytes() != name.as_bytes()
            {
                continue;
            }
            match (*a.ifa_addr).sa_family as i32 {
                libc::AF_INET => {
                    let sin = &*(a.ifa_addr as *const libc::sockaddr_in);
                    out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))));
                }
                libc::AF_INET6 => {
                    let sin6 = &*(a.ifa_addr as *const libc::sockaddr_in6);
                    out.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                }
                _ => {}
            }
        }
        libc::freeifaddrs(head);
    }
    Ok(out)
}

const RTF_UP: u32 = 0x1;
const RTF_GATEWAY: u32 = 0x2;
const RTF_REJECT: u32 = 0x200;

/// Default routes out of `ifname` in `/proc/net/route` text: their gateways.
fn default_routes_v4(text: &str, ifname: &str) -> Vec<Option<IpAddr>> {
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (dev, dst, gw, flags, mask) =
                (f.first()?, hex(f.get(1)?)?, hex(f.get(2)?)?, hex(f.get(3)?)?, hex(f.get(7)?)?);
            if *dev != ifname || dst != 0 || mask != 0 || flags & RTF_UP == 0 || flags & RTF_REJECT != 0 {
                return None;
            }
            // The kernel prints the big-endian address as a native-endian number.
            Some((flags & RTF_GATEWAY != 0).then(|| IpAddr::V4(Ipv4Addr::from(gw.to_ne_bytes()))))
        })
        .collect()
}

/// Default routes out of `ifname` in `/proc/net/ipv6_route` text: their gateways.
fn default_routes_v6(text: &str, ifname: &str) -> Vec<Option<IpAddr>> {
    let addr = |s: &str| u128::from_str_radix(s, 16).ok().map(Ipv6Addr::from);
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (dst, plen, gw) = (addr(f.first()?)?, f.get(1)?, addr(f.get(4)?)?);
            let flags = u32::from_str_radix(f.get(8)?, 16).ok()?;
            if *f.get(9)? != ifname || !dst.is_unspecified() || *plen != "00" || flags & RTF_REJECT != 0 {
                return None;
            }
            Some((!gw.is_unspecified()).then_some(IpAddr::V6(gw)))
        })
        .collect()
}

fn io_err(ifname: &str, op: &str, source: io::Error) -> PortError {
    PortError::Io { ifname: ifname.to_string(), queue: 0, op: op.to_string(), source }
}

struct Sock(i32);

impl Drop for Sock {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.0) };
    }
}

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: [u8; 24],
}

impl IfReq {
    fn new(name: &str) -> Self {
        let mut r = IfReq { name: [0; libc::IFNAMSIZ], data: [0; 24] };
        let n = name.len().min(libc::IFNAMSIZ - 1);
        r.name[..n].copy_from_slice(&name.as_bytes()[..n]);
        r
    }
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSET: u32 = 0x1;
const ETHTOOL_GDRVINFO: u32 = 0x3;
const ETHTOOL_GCHANNELS: u32 = 0x3c;

impl Sock {
    fn new() -> io::Result<Self> {
        // SAFETY: plain socket syscall.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Sock(fd))
    }

    fn ifreq_int(&self, name: &str, req: libc::c_ulong) -> io::Result<i32> {
        let mut r = IfReq::new(name);
        // SAFETY: r is a properly sized ifreq for these requests.
        if unsafe { libc::ioctl(self.0, req, &mut r) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(i32::from_ne_bytes([r.data[0], r.data[1], r.data[2], r.data[3]]))
    }

    fn hwaddr(&self, name: &str) -> Option<[u8; 6]> {
        let mut r = IfReq::new(name);
        // SAFETY: ifreq sized for SIOCGIFHWADDR (sockaddr in data).
        if unsafe { libc::ioctl(self.0, libc::SIOCGIFHWADDR, &mut r) } != 0 {
            return None;
        }
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&r.data[2..8]);
        Some(mac)
    }

    fn ethtool<T>(&self, name: &str, cmd: &mut T) -> io::Result<()> {
        let mut r = IfReq::new(name);
        let ptr = cmd as *mut T as usize;
        r.data[..mem::size_of::<usize>()].copy_from_slice(&ptr.to_ne_bytes());
        // SAFETY: ifr_data points at a live, correctly sized ethtool command struct.
        if unsafe { libc::ioctl(self.0, SIOCETHTOOL, &mut r) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn ethtool_info(&self, name: &str) -> (String, Option<u64>) {
        #[repr(C)]
        struct DrvInfo {
            cmd: u32,
            driver: [u8; 32],
            version: [u8; 32],
            fw_version: [u8; 32],
            bus_info: [u8; 32],
            erom_version: [u8; 32],
            reserved2: [u8; 12],
            n_priv_flags: u32,
            n_stats: u32,
            testinfo_len: u32,
            eedump_len: u32,
            regdump_len: u32,
        }
        // SAFETY: all-zero is a valid DrvInfo.
        let mut d: DrvInfo = unsafe { mem::zeroed() };
        d.cmd = ETHTOOL_GDRVINFO;
        let driver = match self.ethtool(name, &mut d) {
            Ok(()) => {
                let end = d.driver.iter().position(|&b| b == 0).unwrap_or(32);
                String::from_utf8_lossy(&d.driver[..end]).into_owned()
            }
            Err(_) => String::new(),
        };
        #[repr(C)]
        struct Cmd {
            cmd: u32,
            supported: u32,
            advertising: u32,
            speed: u16,
            duplex: u8,
            port: u8,
            phy_address: u8,
            transceiver: u8,
            autoneg: u8,
            mdio_support: u8,
            maxtxpkt: u32,
            maxrxpkt: u32,
            speed_hi: u16,
            eth_tp_mdix: u8,
            eth_tp_mdix_ctrl: u8,
            lp_advertising: u32,
            reserved: [u32; 2],
        }
        // SAFETY: all-zero is a valid Cmd.
        let mut c: Cmd = unsafe { mem::zeroed() };
        c.cmd = ETHTOOL_GSET;
        let speed = match self.ethtool(name, &mut c) {
            Ok(()) => {
                let mbps = ((c.speed_hi as u32) << 16) | c.speed as u32;
                if mbps == 0 || mbps == u32::MAX || mbps == 0xffff {
                    None
                } else {
                    Some(mbps as u64 * 1_000_000)
                }
            }
            Err(_) => None,
        };
        (driver, speed)
    }

    fn channels(&self, name: &str) -> Option<(usize, usize)> {
        #[repr(C)]
        #[derive(Default)]
        struct Channels {
            cmd: u32,
            max_rx: u32,
            max_tx: u32,
            max_other: u32,
            max_combined: u32,
            rx_count: u32,
            tx_count: u32,
            other_count: u32,
            combined_count: u32,
        }
        let mut c = Channels { cmd: ETHTOOL_GCHANNELS, ..Default::default() };
        self.ethtool(name, &mut c).ok()?;
        let rx = (c.rx_count + c.combined_count).max(1) as usize;
        let tx = (c.tx_count + c.combined_count).max(1) as usize;
        Some((rx, tx))
    }
}

/// Names of all interfaces in the calling thread's namespace (from `if_nameindex`).
pub fn list_interfaces() -> Vec<String> {
    let mut out = Vec::new();
    // SAFETY: if_nameindex returns a heap array terminated by a zero entry, freed below.
    unsafe {
        let base = libc::if_nameindex();
        if base.is_null() {
            return out;
        }
        let mut p = base;
        while (*p).if_index != 0 {
            out.push(std::ffi::CStr::from_ptr((*p).if_name).to_string_lossy().into_owned());
            p = p.add(1);
        }
        libc::if_freenameindex(base);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_interface_is_found() {
        let i = ifinfo("lo", None).expect("lo exists in every namespace");
        assert_eq!(i.name, "lo");
        assert!(i.ifindex >= 1);
        assert!(i.mtu >= 1500);
        assert!(list_interfaces().iter().any(|n| n == "lo"));
    }

    /// Linkwatch updates the operational state (and so `IFF_RUNNING`) from a workqueue, and a
    /// non-urgent event (a veth whose peer has the same index in another namespace) at most once
    /// a second: a peer's going down within a second of a run that applied the up is unseen in
    /// `IFF_RUNNING` for the rest of that second. The carrier is read as it is now (CI saw a port
    /// probe pass in that second).
    #[test]
    fn a_veth_whose_peer_just_went_down_is_down_at_once() {
        use crate::sys::bpf::testkit::{is_root, sh, VethPair};
        use std::time::Duration;
        if !is_root() {
            eprintln!("skipped: needs root (namespaces, veth)");
            return;
        }
        let v = VethPair::new("lw");
        sh(&["ip", "-n", &v.ns_a, "link", "set", &v.if_a, "down"]).unwrap();
        // The down is applied within a second; a second after that, the next event runs at once.
        std::thread::sleep(Duration::from_millis(2100));
        sh(&["ip", "-n", &v.ns_a, "link", "set", &v.if_a, "up"]).unwrap();
        std::thread::sleep(Duration::from_millis(50)); // applied: IFF_RUNNING; the next run waits
        sh(&["ip", "-n", &v.ns_b, "link", "set", &v.if_b, "down"]).unwrap();
        let info = super::super::netns::in_netns(Some(&v.ns_a), || ifinfo(&v.if_a, Some(&v.ns_a))).unwrap();
        assert!(info.admin_up && !info.oper_up, "{info:?}");
    }

    #[test]
    fn loopback_facts() {
        let f = live_facts("lo", None).expect("lo exists in every namespace");
        assert!(f.loopback);
    }

    #[test]
    fn default_routes_are_parsed_from_proc() {
        let v4 = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                  eth0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
                  eth0\t0000A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n\
                  eth1\t00000000\t00000000\t0001\t0\t0\t100\t00000000\t0\t0\t0\n";
        let gw = Ipv4Addr::from(0x0100A8C0u32.to_ne_bytes());
        assert_eq!(default_routes_v4(v4, "eth0"), vec![Some(IpAddr::V4(gw))]);
        assert_eq!(default_routes_v4(v4, "eth1"), vec![None]);
        assert!(default_routes_v4(v4, "eth2").is_empty());
        let v6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                  fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth0\n\
                  20010db8000000000000000000000000 40 00000000000000000000000000000000 00 \
                  00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n\
                  00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                  00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n";
        assert_eq!(default_routes_v6(v6, "eth0"), vec![Some("fe80::1".parse().unwrap())]);
        assert!(default_routes_v6(v6, "lo").is_empty(), "an unreachable default is no route out");
    }

    #[test]
    fn unknown_interface_names_itself() {
        let e = ifinfo("nr-nonexistent0", None).unwrap_err();
        assert!(e.to_string().contains("nr-nonexistent0"));
    }
}
