//! netrig-wire: the frames netrig sends and reads, as bytes.
//!
//! No I/O, no `unsafe`, no dependencies. On transmit, [`stack`] compiles a header stack (a
//! stream's from [`frames`], an OTG flow's from its packet) whose `fill` writes each frame, its
//! fields from [`pattern`]s and its [`signature`] in place; on receive, [`dissect::find_signature`]
//! and [`dissect::locate_udp_payload`] find the signature and the headers. The protocol modules
//! (`ethernet`, `vlan`, `ipv4`, `ipv6`, `udp`, `tcp`, `icmpv4`, `icmpv6`) hold the constants
//! both use; the views that parsed and emitted whole headers served only tests, and the tests'
//! own checks of built frames now sit with them (`tests/prop.rs`). The frame layout is
//! documented in `docs/wire-format.md`.
#![forbid(unsafe_code)]

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

pub mod capfile;
pub mod checksum;
pub mod dissect;
pub mod ethernet;
pub mod fcs;
pub mod frames;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod pattern;
pub mod pcap;
pub mod signature;
pub mod stack;
pub mod stamp;
pub mod tcp;
pub mod udp;
pub mod vlan;

pub use ethernet::{EtherType, EthernetAddress};
pub use signature::Signature;

/// A byte range of a fixed-size header field.
pub(crate) type Field = core::ops::Range<usize>;

/// IP protocol numbers used by netrig (IANA "Assigned Internet Protocol Numbers").
pub mod ip_proto {
    pub const HOP_BY_HOP: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const IPV6_ROUTING: u8 = 43;
    pub const IPV6_FRAGMENT: u8 = 44;
    pub const ICMPV6: u8 = 58;
    pub const IPV6_NO_NEXT: u8 = 59;
    pub const IPV6_DEST_OPTS: u8 = 60;
}

/// What can go wrong reading a value of this crate (a MAC address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// An argument is out of range or malformed; the string says what it must be.
    Invalid(&'static str),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Invalid(what) => write!(f, "invalid argument: {what}"),
        }
    }
}

impl std::error::Error for WireError {}

/// Result alias used throughout this crate.
pub type Result<T> = core::result::Result<T, WireError>;

/// The source and destination addresses of an IP packet, as needed for the transport
/// pseudo-header checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpPair {
    V4 { src: Ipv4Addr, dst: Ipv4Addr },
    V6 { src: Ipv6Addr, dst: Ipv6Addr },
}

impl IpPair {
    /// Partial ones-complement sum of the pseudo-header for `proto` and `len` bytes of
    /// transport header plus payload (see [`checksum`]).
    #[inline]
    pub fn pseudo_header(&self, proto: u8, len: u32) -> u32 {
        match self {
            IpPair::V4 { src, dst } => checksum::pseudo_header_v4(&src.octets(), &dst.octets(), proto, len as u16),
            IpPair::V6 { src, dst } => checksum::pseudo_header_v6(&src.octets(), &dst.octets(), proto, len),
        }
    }

    /// True for IPv6.
    #[inline]
    pub fn is_v6(&self) -> bool {
        matches!(self, IpPair::V6 { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_display_names_the_problem() {
        let e: Box<dyn std::error::Error> = Box::new(WireError::Invalid("MAC address must be 6 bytes"));
        assert_eq!(e.to_string(), "invalid argument: MAC address must be 6 bytes");
    }

    #[test]
    fn ip_pair_pseudo_header_matches_checksum_module() {
        let p = IpPair::V4 { src: Ipv4Addr::new(198, 18, 0, 1), dst: Ipv4Addr::new(198, 19, 0, 1) };
        assert_eq!(p.pseudo_header(17, 26), checksum::pseudo_header_v4(&[198, 18, 0, 1], &[198, 19, 0, 1], 17, 26));
        assert!(!p.is_v6());
    }
}
