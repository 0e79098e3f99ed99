//! IPv6 fixed headers (RFC 8200). Addresses are [`std::net::Ipv6Addr`].
//! Extension headers are not parsed here (see [`crate::dissect`] for the receive path).

pub use std::net::Ipv6Addr as Address;

use crate::{check_out, get_u16, get_u32, set_u16, set_u32, Result, WireError};

mod field {
    use crate::Field;
    pub const VER_TC_FLOW: usize = 0;
    pub const LENGTH: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Field = 8..24;
    pub const DST_ADDR: Field = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = field::DST_ADDR.end;
/// Offset of the payload-length field inside the IPv6 header.
pub const LENGTH_OFFSET: usize = field::LENGTH;
/// Offset of the source address inside the IPv6 header (destination follows at +16).
pub const SRC_ADDR_OFFSET: usize = field::SRC_ADDR.start;

/// A read/write view of an IPv6 packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }
    /// Checks: buffer ≥ 40 bytes and ≥ 40 + payload length (trailing bytes allowed).
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < HEADER_LEN + self.payload_len() as usize {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn first_word(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VER_TC_FLOW)
    }
    pub fn version(&self) -> u8 {
        (self.first_word() >> 28) as u8
    }
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }
    pub fn flow_label(&self) -> u32 {
        self.first_word() & 0x000F_FFFF
    }
    pub fn payload_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }
    pub fn src_addr(&self) -> Address {
        let b: [u8; 16] = self.buffer.as_ref()[field::SRC_ADDR].try_into().unwrap_or([0; 16]);
        Address::from(b)
    }
    pub fn dst_addr(&self) -> Address {
        let b: [u8; 16] = self.buffer.as_ref()[field::DST_ADDR].try_into().unwrap_or([0; 16]);
        Address::from(b)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + self.payload_len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version 6, traffic class and flow label (20 bits).
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let w = (6u32 << 28) | (u32::from(traffic_class) << 20) | (flow_label & 0x000F_FFFF);
        set_u32(self.buffer.as_mut(), field::VER_TC_FLOW, w);
    }
    pub fn set_payload_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, v);
    }
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NEXT_HEADER] = v;
    }
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }
    pub fn set_src_addr(&mut self, a: Address) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }
    pub fn set_dst_addr(&mut self, a: Address) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + self.payload_len() as usize;
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// An IPv6 fixed header in high-level form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub src_addr: Address,
    pub dst_addr: Address,
    pub next_header: u8,
    pub payload_len: u16,
    pub hop_limit: u8,
    pub traffic_class: u8,
    /// 20-bit flow label.
    pub flow_label: u32,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        if p.version() != 6 {
            return Err(WireError::Malformed("IPv6 version"));
        }
        Ok(Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            next_header: p.next_header(),
            payload_len: p.payload_len(),
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        })
    }
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the 40-byte header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if self.flow_label > 0x000F_FFFF {
            return Err(WireError::Invalid("IPv6 flow label must fit 20 bits"));
        }
        check_out(buf, HEADER_LEN)?;
        let mut p = Packet::new_unchecked(&mut buf[..HEADER_LEN]);
        p.set_version_tc_flow(self.traffic_class, self.flow_label);
        p.set_payload_len(self.payload_len);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip_proto;

    // 2001:2::1 → 2001:2::2, TC 0xB8, flow 0x12345, UDP, payload 4, hop limit 64.
    const PACKET: [u8; 44] = [
        0x6B, 0x81, 0x23, 0x45, 0x00, 0x04, 0x11, 0x40, //
        0x20, 0x01, 0x00, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, //
        0x20, 0x01, 0x00, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, //
        1, 2, 3, 4,
    ];

    #[test]
    fn parse_fixture_and_round_trip() {
        let p = Packet::new_checked(&PACKET[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                src_addr: "2001:2::1".parse().unwrap(),
                dst_addr: "2001:2::2".parse().unwrap(),
                next_header: ip_proto::UDP,
                payload_len: 4,
                hop_limit: 64,
                traffic_class: 0xB8,
                flow_label: 0x12345,
            }
        );
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
        let mut out = [0u8; 40];
        r.emit(&mut out).unwrap();
        assert_eq!(out, PACKET[..40]);
    }

    #[test]
    fn errors() {
        assert_eq!(Packet::new_checked(&PACKET[..39]).unwrap_err(), WireError::Truncated);
        assert_eq!(Packet::new_checked(&PACKET[..43]).unwrap_err(), WireError::Truncated);
        let mut b = PACKET;
        b[0] = 0x4B;
        assert!(matches!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()), Err(WireError::Malformed(_))));
        let mut r = Repr::parse(&Packet::new_checked(&PACKET[..]).unwrap()).unwrap();
        r.flow_label = 1 << 20;
        assert!(matches!(r.emit(&mut [0; 40]), Err(WireError::Invalid(_))));
        r.flow_label = 0;
        assert!(matches!(r.emit(&mut [0; 39]), Err(WireError::BufferTooSmall { .. })));
    }
}
