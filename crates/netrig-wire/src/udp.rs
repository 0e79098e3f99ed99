//! UDP (RFC 768; IPv6 rules from RFC 8200 §8.1).

use crate::{check_out, checksum, get_u16, ip_proto, set_u16, IpPair, Result, WireError};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;
/// Offset of the checksum inside the UDP header.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;
/// Offset of the length field inside the UDP header.
pub const LENGTH_OFFSET: usize = field::LENGTH;

/// A read/write view of a UDP datagram.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }
    /// Checks: buffer ≥ 8 bytes, length field ≥ 8 and ≤ buffer length.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let field_len = self.len() as usize;
        if field_len < HEADER_LEN {
            return Err(WireError::Malformed("UDP length below 8"));
        }
        if len < field_len {
            return Err(WireError::Truncated);
        }
        Ok(())
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT)
    }
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT)
    }
    /// The length field (header + payload).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }
    /// The datagram as covered by the length field.
    fn datagram(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.len() as usize]
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.len() as usize]
    }
    /// True if the checksum verifies. Over IPv4 a zero checksum means "none" and is
    /// accepted; over IPv6 it is invalid.
    pub fn verify_checksum(&self, ips: &IpPair) -> bool {
        if self.checksum() == 0 {
            return !ips.is_v6();
        }
        let d = self.datagram();
        let s = ips.pseudo_header(ip_proto::UDP, d.len() as u32) + checksum::sum(d);
        checksum::fold(s) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT, v);
    }
    pub fn set_dst_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT, v);
    }
    pub fn set_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, v);
    }
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }
    /// Computes and stores the checksum over pseudo-header, header and payload (as
    /// covered by the length field). A computed 0 is sent as 0xFFFF.
    pub fn fill_checksum(&mut self, ips: &IpPair) {
        self.set_checksum(0);
        let d = self.datagram();
        let c = checksum::fold(ips.pseudo_header(ip_proto::UDP, d.len() as u32) + checksum::sum(d));
        self.set_checksum(if c == 0 { 0xFFFF } else { c });
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.len() as usize;
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// A UDP header in high-level form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
}

impl Repr {
    /// Parses a checked datagram, verifying the checksum against `ips`.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>, ips: &IpPair) -> Result<Repr> {
        p.check_len()?;
        if !p.verify_checksum(ips) {
            return Err(WireError::Checksum);
        }
        Ok(Repr { src_port: p.src_port(), dst_port: p.dst_port() })
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header at the start of `buf` for a payload of `payload_len` bytes that
    /// is already in `buf[8..8 + payload_len]`: fills the length and, if `checksum`
    /// (always for IPv6, where it is mandatory), the checksum; otherwise the checksum is 0
    /// ("none", IPv4 only).
    pub fn emit(&self, buf: &mut [u8], payload_len: usize, ips: &IpPair, checksum: bool) -> Result<()> {
        let total = HEADER_LEN + payload_len;
        if total > usize::from(u16::MAX) {
            return Err(WireError::Invalid("UDP payload length must be at most 65527 bytes"));
        }
        check_out(buf, total)?;
        let mut p = Packet::new_unchecked(&mut buf[..total]);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(total as u16);
        if checksum || ips.is_v6() {
            p.fill_checksum(ips);
        } else {
            p.set_checksum(0);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ips() -> IpPair {
        IpPair::V4 { src: Ipv4Addr::new(192, 168, 1, 1), dst: Ipv4Addr::new(192, 168, 1, 2) }
    }

    /// 1234 → 5678, payload "hi!", checksum computed by hand:
    /// pseudo c0a8+0101+c0a8+0102+0011+000b, header 04d2+162e+000b, data 6869+2100
    /// = 0x2_27e3 → 0x27e5 → checksum 0xd81a.
    const DGRAM: [u8; 11] = [0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0b, 0xd8, 0x1a, b'h', b'i', b'!'];

    #[test]
    fn fixture_checksum() {
        let p = Packet::new_checked(&DGRAM[..]).unwrap();
        assert!(p.verify_checksum(&ips()));
        assert_eq!(Repr::parse(&p, &ips()).unwrap(), Repr { src_port: 1234, dst_port: 5678 });
        assert_eq!(p.payload(), b"hi!");
        let mut out = [0u8; 11];
        out[8..].copy_from_slice(b"hi!");
        Repr { src_port: 1234, dst_port: 5678 }.emit(&mut out, 3, &ips(), true).unwrap();
        assert_eq!(out, DGRAM);
    }

    #[test]
    fn zero_checksum_rules() {
        let mut out = [0u8; 11];
        let r = Repr { src_port: 1, dst_port: 2 };
        r.emit(&mut out, 3, &ips(), false).unwrap();
        let p = Packet::new_checked(&out[..]).unwrap();
        assert_eq!(p.checksum(), 0);
        assert!(p.verify_checksum(&ips()));
        let v6 = IpPair::V6 { src: "2001:2::1".parse().unwrap(), dst: "2001:2::2".parse().unwrap() };
        assert!(!p.verify_checksum(&v6));
        r.emit(&mut out, 3, &v6, false).unwrap(); // mandatory over IPv6
        let p = Packet::new_checked(&out[..]).unwrap();
        assert_ne!(p.checksum(), 0);
        assert!(p.verify_checksum(&v6));
    }

    #[test]
    fn errors() {
        assert_eq!(Packet::new_checked(&DGRAM[..7]).unwrap_err(), WireError::Truncated);
        assert_eq!(Packet::new_checked(&DGRAM[..10]).unwrap_err(), WireError::Truncated);
        let mut b = DGRAM;
        b[5] = 7;
        assert!(matches!(Packet::new_checked(&b[..]), Err(WireError::Malformed(_))));
        let mut b = DGRAM;
        b[9] = b'o';
        assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap(), &ips()).unwrap_err(), WireError::Checksum);
        let r = Repr { src_port: 1, dst_port: 2 };
        assert!(matches!(r.emit(&mut [0u8; 10], 3, &ips(), true), Err(WireError::BufferTooSmall { .. })));
        assert!(matches!(r.emit(&mut [0u8; 10], 70_000, &ips(), true), Err(WireError::Invalid(_))));
    }
}
