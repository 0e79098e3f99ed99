//! IPv4 headers (RFC 791). Addresses are [`std::net::Ipv4Addr`].

pub use std::net::Ipv4Addr as Address;

use crate::{check_out, checksum, get_u16, set_u16, Result, WireError};

mod field {
    use crate::Field;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC_ADDR: Field = 12..16;
    pub const DST_ADDR: Field = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = field::DST_ADDR.end;
/// Offset of the header checksum inside the IPv4 header.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;
/// Offset of the source address inside the IPv4 header (destination follows at +4).
pub const SRC_ADDR_OFFSET: usize = field::SRC_ADDR.start;
/// Offset of the total-length field inside the IPv4 header.
pub const LENGTH_OFFSET: usize = field::LENGTH;

/// A read/write view of an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Checks: buffer ≥ 20 bytes, IHL ≥ 5, buffer ≥ IHL·4, total length ≥ IHL·4 and
    /// buffer ≥ total length (trailing bytes, e.g. Ethernet padding, are allowed and
    /// excluded from [`Packet::payload`]).
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
        let hl = self.header_len() as usize;
        if hl < HEADER_LEN {
            return Err(WireError::Malformed("IPv4 IHL below 5"));
        }
        let total = self.total_len() as usize;
        if total < hl {
            return Err(WireError::Malformed("IPv4 total length below header length"));
        }
        if len < hl || len < total {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }
    /// Header length in bytes (IHL · 4).
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0F) * 4
    }
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }
    pub fn total_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }
    pub fn ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::IDENT)
    }
    pub fn dont_frag(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & 0x4000 != 0
    }
    pub fn more_frags(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & 0x2000 != 0
    }
    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (get_u16(self.buffer.as_ref(), field::FLG_OFF) & 0x1FFF) << 3
    }
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }
    pub fn src_addr(&self) -> Address {
        let b = &self.buffer.as_ref()[field::SRC_ADDR];
        Address::new(b[0], b[1], b[2], b[3])
    }
    pub fn dst_addr(&self) -> Address {
        let b = &self.buffer.as_ref()[field::DST_ADDR];
        Address::new(b[0], b[1], b[2], b[3])
    }
    /// Header options (empty when IHL = 5).
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len() as usize]
    }
    /// True if the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::fold(checksum::sum(&self.buffer.as_ref()[..self.header_len() as usize])) == 0
    }
    /// The payload: bytes between the header and the total length.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[self.header_len() as usize..self.total_len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version 4 and the header length in bytes (multiple of 4, 20..=60).
    pub fn set_version_and_header_len(&mut self, header_len: u8) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | ((header_len / 4) & 0x0F);
    }
    pub fn set_dscp_ecn(&mut self, dscp: u8, ecn: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = (dscp << 2) | (ecn & 0x03);
    }
    pub fn set_total_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, v);
    }
    pub fn set_ident(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::IDENT, v);
    }
    /// Sets flags and fragment offset (offset in bytes, multiple of 8).
    pub fn set_frag(&mut self, dont_frag: bool, more_frags: bool, offset: u16) {
        let v = (u16::from(dont_frag) << 14) | (u16::from(more_frags) << 13) | ((offset >> 3) & 0x1FFF);
        set_u16(self.buffer.as_mut(), field::FLG_OFF, v);
    }
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }
    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = v;
    }
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }
    pub fn set_src_addr(&mut self, a: Address) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }
    pub fn set_dst_addr(&mut self, a: Address) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
    }
    /// Computes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len() as usize;
        let c = checksum::fold(checksum::sum(&self.buffer.as_ref()[..hl]));
        self.set_checksum(c);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, total) = (self.header_len() as usize, self.total_len() as usize);
        &mut self.buffer.as_mut()[hl..total]
    }
}

/// An IPv4 header in high-level form (no options, not fragmented, ECN 0, DF clear).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub src_addr: Address,
    pub dst_addr: Address,
    pub protocol: u8,
    pub payload_len: u16,
    pub ttl: u8,
    /// Differentiated services code point, 0..=63.
    pub dscp: u8,
    pub ident: u16,
}

impl Repr {
    /// Parses a checked packet: version must be 4, the checksum must verify, the packet
    /// must not be a fragment. Options are skipped (`payload_len` excludes them).
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        if p.version() != 4 {
            return Err(WireError::Malformed("IPv4 version"));
        }
        if !p.verify_checksum() {
            return Err(WireError::Checksum);
        }
        if p.more_frags() || p.frag_offset() != 0 {
            return Err(WireError::Unsupported("IPv4 fragment"));
        }
        Ok(Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: p.total_len() - u16::from(p.header_len()),
            ttl: p.ttl(),
            dscp: p.dscp(),
            ident: p.ident(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the 20-byte header (with checksum) into the start of `buf`. The payload is
    /// not touched.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if self.dscp > 63 {
            return Err(WireError::Invalid("IPv4 dscp must be 0..=63"));
        }
        if usize::from(self.payload_len) > usize::from(u16::MAX) - HEADER_LEN {
            return Err(WireError::Invalid("IPv4 payload length must be at most 65515 bytes"));
        }
        check_out(buf, HEADER_LEN)?;
        let mut p = Packet::new_unchecked(&mut buf[..HEADER_LEN]);
        p.set_version_and_header_len(HEADER_LEN as u8);
        p.set_dscp_ecn(self.dscp, 0);
        p.set_total_len(self.payload_len + HEADER_LEN as u16);
        p.set_ident(self.ident);
        p.set_frag(false, false, 0);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        p.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip_proto;

    /// 192.168.0.1 → 192.168.0.199, UDP, total length 0x73, DF, TTL 64, checksum 0xb861.
    const HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
        0x00, 0xc7,
    ];

    fn packet() -> Vec<u8> {
        let mut v = HEADER.to_vec();
        v.resize(0x73, 0xAB);
        v.extend_from_slice(&[0, 0, 0]); // Ethernet padding
        v
    }

    #[test]
    fn parse_fixture() {
        let buf = packet();
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum());
        assert!(p.dont_frag() && !p.more_frags());
        assert_eq!(p.payload().len(), 0x73 - 20);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.src_addr, Address::new(192, 168, 0, 1));
        assert_eq!(r.dst_addr, Address::new(192, 168, 0, 199));
        assert_eq!(r.protocol, ip_proto::UDP);
        assert_eq!(r.payload_len, 0x73 - 20);
        assert_eq!(r.ttl, 64);
    }

    #[test]
    fn emit_round_trip() {
        let r = Repr {
            src_addr: Address::new(198, 18, 0, 1),
            dst_addr: Address::new(198, 19, 0, 1),
            protocol: ip_proto::UDP,
            payload_len: 26,
            ttl: 64,
            dscp: 46,
            ident: 0x1234,
        };
        let mut buf = [0u8; 46];
        r.emit(&mut buf).unwrap();
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(Repr::parse(&p).unwrap(), r);
    }

    #[test]
    fn options_are_honoured() {
        let mut buf = [0u8; 24 + 4];
        {
            let mut p = Packet::new_unchecked(&mut buf[..]);
            p.set_version_and_header_len(24);
            p.set_total_len(28);
            p.set_ttl(1);
            p.set_protocol(ip_proto::UDP);
            p.fill_checksum();
        }
        buf[20] = 0x01; // NOP option... checksum now wrong
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap_err(), WireError::Checksum);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.fill_checksum();
        assert_eq!(p.options(), &[1, 0, 0, 0]);
        assert_eq!(p.payload().len(), 4);
        assert_eq!(Repr::parse(&p).unwrap().payload_len, 4);
    }

    #[test]
    fn errors() {
        let buf = packet();
        assert_eq!(Packet::new_checked(&buf[..19]).unwrap_err(), WireError::Truncated);
        assert_eq!(Packet::new_checked(&buf[..0x72]).unwrap_err(), WireError::Truncated);
        let mut b = buf.clone();
        b[0] = 0x44;
        assert!(matches!(Packet::new_checked(&b[..]), Err(WireError::Malformed(_))));
        let mut b = buf.clone();
        b[2] = 0;
        b[3] = 10;
        assert!(matches!(Packet::new_checked(&b[..]), Err(WireError::Malformed(_))));
        let mut b = buf.clone();
        b[0] = 0x65;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap_err(),
            WireError::Malformed("IPv4 version")
        );
        let mut b = buf.clone();
        b[11] ^= 1;
        assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap_err(), WireError::Checksum);
        let mut b = buf;
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_frag(false, true, 0);
        p.fill_checksum();
        assert!(matches!(Repr::parse(&p), Err(WireError::Unsupported(_))));
    }
}
