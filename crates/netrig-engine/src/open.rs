//! Opening a port by spec: the explicit backend, or `auto` (probe and pick the fastest that
//! works, saying why).
//!
//! Auto tries AF_XDP, then AF_PACKET, then plain sockets. A backend counts as working when the
//! port opens (for transmit) and, for a port that will receive (`PortSpec::receive`), when its
//! receive path sets up too ([`Port::prepare_rx`]: for AF_XDP, loading and attaching the XDP
//! program). The chosen port's `caps().notes` start with `auto: <backend>` and the reasons the
//! faster backends were passed over, so every result says what was picked and why.
use crate::error::PortError;
use crate::port::{Backend, Port, PortCaps, PortSpec, RxQueue, TxQueue};
use crate::sys;

/// Open a port. With `spec.backend == None` tries AF_XDP, then AF_PACKET, then plain sockets,
/// and records in `caps().notes` what was tried and why the choice fell where it did. A port that
/// will transmit passes the transmit guard first ([`crate::guard::check`]): every path to the
/// wire opens its ports here.
pub fn open_port(spec: &PortSpec) -> Result<Box<dyn Port>, PortError> {
    crate::guard::check(spec)?;
    open_backend(spec)
}

fn open_backend(spec: &PortSpec) -> Result<Box<dyn Port>, PortError> {
    match spec.backend {
        Some(Backend::AfXdp) => sys::af_xdp::open(spec),
        Some(Backend::AfPacket) => sys::af_packet::open(spec),
        Some(Backend::Socket) => sys::socket::open(spec),
        Some(Backend::Loopback) => Err(PortError::Unsupported {
            ifname: spec.ifname.clone(),
            backend: "loopback".into(),
            reason: "loopback ports are created in pairs with loopback::pair(), not opened by name".into(),
        }),
        None => {
            let mut tried = Vec::new();
            for b in [Backend::AfXdp, Backend::AfPacket, Backend::Socket] {
                let s = PortSpec { backend: Some(b), ..spec.clone() };
                let opened = open_backend(&s).and_then(|mut p| {
                    if spec.receive {
                        p.prepare_rx()?;
                    }
                    Ok(p)
                });
                match opened {
                    Ok(p) => return Ok(Box::new(AutoPort::new(p, &tried))),
                    Err(
                        e @ (PortError::NoSuchInterface { .. }
                        | PortError::PermissionDenied { .. }
                        | PortError::Live { .. }
                        | PortError::Netns { .. }),
                    ) => return Err(e),
                    Err(e) => tried.push(format!("{b} passed over: {e}")),
                }
            }
            Err(PortError::Other {
                ifname: spec.ifname.clone(),
                message: format!("no backend works: {}", tried.join("; ")),
            })
        }
    }
}

/// A port chosen by auto selection: the backend's port, with the choice prefixed to its notes.
struct AutoPort {
    inner: Box<dyn Port>,
    prefix: String,
    caps: PortCaps,
}

impl AutoPort {
    fn new(inner: Box<dyn Port>, passed_over: &[String]) -> AutoPort {
        let b = inner.caps().backend;
        let prefix = if passed_over.is_empty() {
            format!("auto: {b}, the fastest backend, works")
        } else {
            format!("auto: {b} ({})", passed_over.join("; "))
        };
        let mut p = AutoPort { caps: inner.caps().clone(), inner, prefix };
        p.refresh();
        p
    }

    /// Backends amend their caps when the receive path is set up (XDP mode, timestamp source).
    fn refresh(&mut self) {
        self.caps = self.inner.caps().clone();
        self.caps.notes = format!("{}; {}", self.prefix, self.caps.notes);
    }
}

impl Port for AutoPort {
    fn caps(&self) -> &PortCaps {
        &self.caps
    }

    fn open_tx(&mut self, queue: usize) -> Result<Box<dyn TxQueue>, PortError> {
        self.inner.open_tx(queue)
    }

    fn open_rx(&mut self, queue: usize) -> Result<Box<dyn RxQueue>, PortError> {
        let q = self.inner.open_rx(queue);
        self.refresh();
        q
    }

    fn prepare_rx(&mut self) -> Result<(), PortError> {
        let r = self.inner.prepare_rx();
        self.refresh();
        r
    }

    fn link(&self) -> Option<std::sync::Arc<dyn crate::port::LinkSource>> {
        self.inner.link()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::bpf::testkit::{is_root, open_retry, VethPair};
    use crate::sys::bpf::{self, OnMatch, XdpMode, XDP_PASS};
    use crate::sys::netns::in_netns;

    fn auto(ifname: &str, ns: &str, receive: bool) -> PortSpec {
        PortSpec { netns: Some(ns.to_string()), receive, ..PortSpec::new(ifname) }
    }

    #[test]
    fn auto_picks_af_xdp_and_says_so() {
        if !is_root() {
            eprintln!("skipped: needs root (namespaces, veth, XDP)");
            return;
        }
        let v = VethPair::new("o");
        let mut p = open_retry(&auto(&v.if_b, &v.ns_b, true));
        let c = p.caps().clone();
        assert_eq!(c.backend, Backend::AfXdp);
        assert!(c.notes.starts_with("auto: af_xdp, the fastest backend, works;"), "{}", c.notes);
        assert!(c.notes.contains("XDP native (drv)"), "receive path set up at open: {}", c.notes);
        crate::sys::af_xdp::tests::assert_stamp_source(&c);
        assert!(v.link_show(&v.ns_b, &v.if_b).contains("prog/xdp"));
        let _rx = p.open_rx(0).expect("open_rx");
        drop(_rx);
        drop(p);
        // A transmit-only port attaches nothing.
        let p = open_retry(&auto(&v.if_a, &v.ns_a, false));
        assert_eq!(p.caps().backend, Backend::AfXdp);
        assert!(!v.link_show(&v.ns_a, &v.if_a).contains("prog/xdp"));
    }

    #[test]
    fn auto_falls_back_to_af_packet_when_the_xdp_program_cannot_attach() {
        if !is_root() {
            eprintln!("skipped: needs root (namespaces, veth, XDP)");
            return;
        }
        let v = VethPair::new("g");
        // Someone else's XDP program on the receive interface: AF_XDP cannot steer frames there.
        let foreign = in_netns(Some(&v.ns_b), || {
            let prog =
                bpf::prog_load_xdp(&bpf::steer_program(OnMatch::Verdict(XDP_PASS), bpf::Stamp::Off, None), "foreign")
                    .map_err(|e| PortError::Other { ifname: v.if_b.clone(), message: e.to_string() })?;
            let idx = crate::sys::ifinfo::ifindex(&v.if_b, None)?;
            let link = bpf::link_create_xdp(&prog, idx, XdpMode::Drv)
                .map_err(|e| PortError::Other { ifname: v.if_b.clone(), message: e.to_string() })?;
            Ok((prog, link))
        })
        .expect("attach a foreign XDP program");
        let mut p = open_retry(&auto(&v.if_b, &v.ns_b, true));
        let c = p.caps().clone();
        assert_eq!(c.backend, Backend::AfPacket, "{}", c.notes);
        assert!(c.notes.starts_with("auto: af_packet (af_xdp passed over:"), "{}", c.notes);
        assert!(c.notes.contains("another XDP program is attached"), "{}", c.notes);
        assert!(p.open_rx(0).is_ok());
        // Transmit-only, AF_XDP still works there (TX needs no program).
        let t = open_retry(&auto(&v.if_b, &v.ns_b, false));
        assert_eq!(t.caps().backend, Backend::AfXdp);
        drop(foreign);
    }
}
