//! netrig-wire: packet views and representations for the netrig test rig.
//!
//! No I/O, no `unsafe`, no dependencies. The layout follows smoltcp's style:
//!
//! * every protocol has a view `Packet<T: AsRef<[u8]>>` (or `Frame`/`Tag`) whose
//!   `new_checked` validates the buffer length once, after which no accessor can panic;
//!   getters need `T: AsRef<[u8]>`, setters need `T: AsMut<[u8]>`;
//! * a small `Repr` struct with `parse` (from a checked view) and `emit` (into a byte
//!   buffer; `emit` checks the buffer size and returns [`WireError::BufferTooSmall`]
//!   instead of panicking);
//! * field offsets are named constants in a private `mod field`.
//!
//! The hot-path entry points used by the engine are [`dissect::find_signature`] /
//! [`dissect::locate_udp_payload`] on receive, and [`stack`] (a compiled header stack whose
//! `fill` writes each frame: a stream's from [`frames`], an OTG flow's from its packet) on transmit. The frame layout is documented in `docs/wire-format.md`.
#![forbid(unsafe_code)]

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

pub mod arp;
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
/// The open-ended rest of a buffer (payload).
pub(crate) type Rest = core::ops::RangeFrom<usize>;

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

/// Everything that can go wrong while parsing or emitting a packet.
///
/// `Copy`, no allocation: it is cheap to return from hot paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// The buffer is shorter than the header or than a length field says.
    Truncated,
    /// A field holds a value the protocol forbids; the string names the field.
    Malformed(&'static str),
    /// A checksum does not verify.
    Checksum,
    /// An EtherType this crate does not handle.
    UnknownEtherType(u16),
    /// Valid on the wire but not supported here (e.g. an ICMP type other than echo).
    Unsupported(&'static str),
    /// An output buffer is too small for what must be written into it.
    BufferTooSmall { needed: usize, available: usize },
    /// A requested frame length is below the minimum for its headers plus signature.
    FrameTooShort { min: usize, requested: usize },
    /// An argument to an emit/build function is out of range; the string names it.
    Invalid(&'static str),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => f.write_str("packet truncated: buffer shorter than its headers"),
            WireError::Malformed(what) => write!(f, "malformed packet: {what}"),
            WireError::Checksum => f.write_str("checksum mismatch"),
            WireError::UnknownEtherType(t) => write!(f, "unknown EtherType 0x{t:04x}"),
            WireError::Unsupported(what) => write!(f, "unsupported: {what}"),
            WireError::BufferTooSmall { needed, available } => {
                write!(f, "buffer too small: {needed} bytes needed, {available} available")
            }
            WireError::FrameTooShort { min, requested } => write!(
                f,
                "frame length {requested} B (without FCS) is below the minimum of {min} B for \
                 these headers plus the netrig signature; use a frame size of at least {} B \
                 (with FCS)",
                min + 4
            ),
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

#[inline(always)]
pub(crate) fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
pub(crate) fn set_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline(always)]
pub(crate) fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Checks that an output buffer holds at least `needed` bytes.
#[inline]
pub(crate) fn check_out(buf: &[u8], needed: usize) -> Result<()> {
    if buf.len() < needed {
        Err(WireError::BufferTooSmall { needed, available: buf.len() })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_display_names_the_problem() {
        assert_eq!(WireError::UnknownEtherType(0x1234).to_string(), "unknown EtherType 0x1234");
        let e = WireError::FrameTooShort { min: 60, requested: 50 };
        assert!(e.to_string().contains("at least 64 B"));
        let e: Box<dyn std::error::Error> = Box::new(WireError::Checksum);
        assert_eq!(e.to_string(), "checksum mismatch");
    }

    #[test]
    fn ip_pair_pseudo_header_matches_checksum_module() {
        let p = IpPair::V4 { src: Ipv4Addr::new(198, 18, 0, 1), dst: Ipv4Addr::new(198, 19, 0, 1) };
        assert_eq!(p.pseudo_header(17, 26), checksum::pseudo_header_v4(&[198, 18, 0, 1], &[198, 19, 0, 1], 17, 26));
        assert!(!p.is_v6());
    }
}
