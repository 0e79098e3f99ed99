//! The transmit guard: test traffic never leaves on a production network by mistake.
//!
//! Before a port that will transmit is opened, its interface is checked in its namespace. The
//! guard refuses it when it
//! * is the loopback interface (`lo`: the frames would reach the host's own stack),
//! * carries a default route (it leads to a network beyond the DUT), unless the route's gateway is
//!   itself in a benchmarking range (a test bed's tester stack routes through its DUT), or
//! * carries an address that is routable and outside the benchmarking ranges (RFC 2544 / RFC 5180:
//!   198.18.0.0/15 and 2001:2::/48); link-local, loopback and multicast addresses do not count.
//!
//! Test beds pass by construction (their tester ports carry nothing, or benchmarking addresses).
//! An explicit override (`PortSpec::live_ok`, `--i-know-this-is-live`) turns the check off for a
//! port; the error names the rule that fired and the override.
use std::net::IpAddr;

use crate::error::PortError;
use crate::port::{Backend, PortSpec};
use crate::sys::ifinfo::{self, LiveFacts};
use crate::sys::netns;

/// In 198.18.0.0/15 (RFC 2544) or 2001:2::/48 (RFC 5180): addresses for benchmarking only.
pub fn is_benchmarking(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => {
            let o = a.octets();
            o[0] == 198 && (o[1] & 0xfe) == 18
        }
        IpAddr::V6(a) => {
            let s = a.segments();
            s[0] == 0x2001 && s[1] == 0x0002 && s[2] == 0
        }
    }
}

/// An address that means the interface is on a routed network: any unicast address but
/// unspecified, loopback, link-local and the benchmarking ranges (private and unique-local
/// addresses count: production networks use them).
pub fn is_live_address(ip: &IpAddr) -> bool {
    if is_benchmarking(ip) || ip.is_unspecified() || ip.is_loopback() || ip.is_multicast() {
        return false;
    }
    match ip {
        IpAddr::V4(a) => !(a.is_link_local() || a.is_broadcast() || a.octets()[0] == 0),
        IpAddr::V6(a) => (a.segments()[0] & 0xffc0) != 0xfe80,
    }
}

/// The rule `facts` break, if any, in words.
pub fn live_rule(ifname: &str, facts: &LiveFacts) -> Option<String> {
    if facts.loopback || ifname == "lo" {
        return Some("it is the loopback interface (frames would go to this host's own stack)".into());
    }
    if let Some(gw) = facts.default_routes.iter().find(|gw| !gw.is_some_and(|g| is_benchmarking(&g))) {
        let via = gw.map(|g| format!(" via {g}")).unwrap_or_default();
        return Some(format!("it carries a default route{via} (it leads to a network beyond the DUT)"));
    }
    if let Some(a) = facts.addresses.iter().find(|a| is_live_address(a)) {
        return Some(format!(
            "it carries the address {a}, outside the benchmarking ranges 198.18.0.0/15 and 2001:2::/48"
        ));
    }
    None
}

/// Refuse `spec` if it will transmit on what looks like a live network, unless overridden.
pub fn check(spec: &PortSpec) -> Result<(), PortError> {
    if !spec.transmit || spec.live_ok || spec.backend == Some(Backend::Loopback) {
        return Ok(());
    }
    let ns = spec.netns.as_deref();
    let facts = netns::in_netns(ns, || ifinfo::live_facts(&spec.ifname, ns))?;
    match live_rule(&spec.ifname, &facts) {
        None => Ok(()),
        Some(rule) => Err(PortError::Live { ifname: spec.ifname.clone(), netns: spec.netns.clone(), rule }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn benchmarking_ranges() {
        for a in ["198.18.0.1", "198.19.255.254", "2001:2::1", "2001:2:0:ffff::1"] {
            assert!(is_benchmarking(&ip(a)), "{a}");
            assert!(!is_live_address(&ip(a)), "{a}");
        }
        for a in ["198.20.0.1", "198.17.0.1", "2001:2:1::1", "2001:db8::1"] {
            assert!(!is_benchmarking(&ip(a)), "{a}");
        }
        for a in ["10.0.0.1", "192.168.1.2", "8.8.8.8", "fd00::1", "2a00::1"] {
            assert!(is_live_address(&ip(a)), "{a}");
        }
        for a in ["127.0.0.1", "169.254.1.1", "fe80::1", "::1", "0.0.0.0", "224.0.0.1", "ff02::1"] {
            assert!(!is_live_address(&ip(a)), "{a}");
        }
    }

    #[test]
    fn rules_fire_and_say_which() {
        let clean = LiveFacts::default();
        assert_eq!(live_rule("veth0", &clean), None);
        let lo = LiveFacts { loopback: true, ..LiveFacts::default() };
        assert!(live_rule("lo", &lo).unwrap().contains("loopback"));
        let dflt = LiveFacts { default_routes: vec![Some(ip("192.168.0.1"))], ..LiveFacts::default() };
        assert!(live_rule("eth0", &dflt).unwrap().contains("default route via 192.168.0.1"));
        let dev = LiveFacts { default_routes: vec![None], ..LiveFacts::default() };
        assert!(live_rule("eth0", &dev).unwrap().contains("default route"));
        let tb = LiveFacts {
            default_routes: vec![Some(ip("198.18.0.1")), Some(ip("2001:2::1"))],
            addresses: vec![ip("198.18.0.2"), ip("fe80::1")],
            ..LiveFacts::default()
        };
        assert_eq!(live_rule("nr1234-tx", &tb), None, "a test bed's tester stack passes");
        let addr = LiveFacts { addresses: vec![ip("fe80::1"), ip("10.1.2.3")], ..LiveFacts::default() };
        assert!(live_rule("eth1", &addr).unwrap().contains("10.1.2.3"));
    }

    #[test]
    fn override_and_receive_only_ports_are_not_checked() {
        let s = PortSpec { live_ok: true, ..PortSpec::new("lo") };
        check(&s).unwrap();
        let s = PortSpec { transmit: false, ..PortSpec::new("lo") };
        check(&s).unwrap();
        let e = check(&PortSpec::new("lo")).unwrap_err();
        assert!(matches!(e, PortError::Live { .. }), "{e}");
        let text = e.to_string();
        assert!(text.contains("loopback") && text.contains("--i-know-this-is-live"), "{text}");
    }
}
