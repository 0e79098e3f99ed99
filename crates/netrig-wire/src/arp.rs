//! ARP for Ethernet/IPv4 (RFC 826): requests, replies and gratuitous announcements.

use std::net::Ipv4Addr;

use crate::ethernet::EthernetAddress;
use crate::{check_out, get_u16, set_u16, EtherType, Result, WireError};

mod field {
    use crate::Field;
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const SHA: Field = 8..14;
    pub const SPA: Field = 14..18;
    pub const THA: Field = 18..24;
    pub const TPA: Field = 24..28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = field::TPA.end;
/// Hardware type Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;

/// ARP operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Request,
    Reply,
}

impl Operation {
    pub const fn code(self) -> u16 {
        match self {
            Operation::Request => 1,
            Operation::Reply => 2,
        }
    }
}

/// A read/write view of an ARP packet (any hardware/protocol type; [`Repr`] restricts to
/// Ethernet/IPv4, and the address accessors assume 6/4-byte addresses).
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }
    /// Checks the buffer holds a whole Ethernet/IPv4 ARP packet (28 bytes).
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < PACKET_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn hardware_type(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::HTYPE)
    }
    pub fn protocol_type(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::PTYPE)
    }
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }
    pub fn operation(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::OPER)
    }
    fn mac(&self, f: crate::Field) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[f]);
        EthernetAddress(a)
    }
    fn ip(&self, f: crate::Field) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[f];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
    pub fn source_hardware_addr(&self) -> EthernetAddress {
        self.mac(field::SHA)
    }
    pub fn source_protocol_addr(&self) -> Ipv4Addr {
        self.ip(field::SPA)
    }
    pub fn target_hardware_addr(&self) -> EthernetAddress {
        self.mac(field::THA)
    }
    pub fn target_protocol_addr(&self) -> Ipv4Addr {
        self.ip(field::TPA)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_hardware_type(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::HTYPE, v);
    }
    pub fn set_protocol_type(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::PTYPE, v);
    }
    pub fn set_hardware_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::HLEN] = v;
    }
    pub fn set_protocol_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::PLEN] = v;
    }
    pub fn set_operation(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::OPER, v);
    }
    pub fn set_source_hardware_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SHA].copy_from_slice(&a.0);
    }
    pub fn set_source_protocol_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SPA].copy_from_slice(&a.octets());
    }
    pub fn set_target_hardware_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::THA].copy_from_slice(&a.0);
    }
    pub fn set_target_protocol_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::TPA].copy_from_slice(&a.octets());
    }
}

/// An Ethernet/IPv4 ARP packet in high-level form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub operation: Operation,
    pub source_hardware_addr: EthernetAddress,
    pub source_protocol_addr: Ipv4Addr,
    pub target_hardware_addr: EthernetAddress,
    pub target_protocol_addr: Ipv4Addr,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        if p.hardware_type() != HTYPE_ETHERNET || p.hardware_len() != 6 {
            return Err(WireError::Unsupported("ARP hardware type other than Ethernet"));
        }
        if p.protocol_type() != EtherType::IPV4 || p.protocol_len() != 4 {
            return Err(WireError::Unsupported("ARP protocol type other than IPv4"));
        }
        let operation = match p.operation() {
            1 => Operation::Request,
            2 => Operation::Reply,
            _ => return Err(WireError::Malformed("ARP operation")),
        };
        Ok(Repr {
            operation,
            source_hardware_addr: p.source_hardware_addr(),
            source_protocol_addr: p.source_protocol_addr(),
            target_hardware_addr: p.target_hardware_addr(),
            target_protocol_addr: p.target_protocol_addr(),
        })
    }

    /// A request asking who has `target_ip`.
    pub fn request(my_mac: EthernetAddress, my_ip: Ipv4Addr, target_ip: Ipv4Addr) -> Repr {
        Repr {
            operation: Operation::Request,
            source_hardware_addr: my_mac,
            source_protocol_addr: my_ip,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: target_ip,
        }
    }

    /// A gratuitous ARP (request form, RFC 5227 announcement): sender and target IP are
    /// both `my_ip`. Send it to [`EthernetAddress::BROADCAST`]; switches and DUTs learn
    /// `my_mac` from it.
    pub fn gratuitous(my_mac: EthernetAddress, my_ip: Ipv4Addr) -> Repr {
        Repr::request(my_mac, my_ip, my_ip)
    }

    /// The reply to `request` if it asks for `my_ip`, else `None`.
    pub fn answer(request: &Repr, my_mac: EthernetAddress, my_ip: Ipv4Addr) -> Option<Repr> {
        if request.operation != Operation::Request || request.target_protocol_addr != my_ip {
            return None;
        }
        Some(Repr {
            operation: Operation::Reply,
            source_hardware_addr: my_mac,
            source_protocol_addr: my_ip,
            target_hardware_addr: request.source_hardware_addr,
            target_protocol_addr: request.source_protocol_addr,
        })
    }

    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        check_out(buf, PACKET_LEN)?;
        let mut p = Packet::new_unchecked(buf);
        p.set_hardware_type(HTYPE_ETHERNET);
        p.set_protocol_type(EtherType::IPV4);
        p.set_hardware_len(6);
        p.set_protocol_len(4);
        p.set_operation(self.operation.code());
        p.set_source_hardware_addr(self.source_hardware_addr);
        p.set_source_protocol_addr(self.source_protocol_addr);
        p.set_target_hardware_addr(self.target_hardware_addr);
        p.set_target_protocol_addr(self.target_protocol_addr);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Request: who has 198.18.0.2? tell 198.18.0.1 (02:00:00:00:00:01).
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, // htype, ptype, hlen, plen, oper
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 198, 18, 0, 1, // sha, spa
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 198, 18, 0, 2, // tha, tpa
    ];

    #[test]
    fn parse_and_answer() {
        let r = Repr::parse(&Packet::new_checked(&REQUEST[..]).unwrap()).unwrap();
        let me: EthernetAddress = "02:00:00:00:00:02".parse().unwrap();
        assert_eq!(
            r,
            Repr::request(
                "02:00:00:00:00:01".parse().unwrap(),
                Ipv4Addr::new(198, 18, 0, 1),
                Ipv4Addr::new(198, 18, 0, 2)
            )
        );
        assert!(Repr::answer(&r, me, Ipv4Addr::new(198, 18, 0, 3)).is_none());
        let reply = Repr::answer(&r, me, Ipv4Addr::new(198, 18, 0, 2)).unwrap();
        let mut buf = [0u8; 28];
        reply.emit(&mut buf).unwrap();
        assert_eq!(&buf[6..8], &[0, 2]);
        assert_eq!(&buf[18..24], &REQUEST[8..14]);
        assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap(), reply);
    }

    #[test]
    fn round_trip_and_errors() {
        let g = Repr::gratuitous("02:00:00:00:00:01".parse().unwrap(), Ipv4Addr::new(198, 18, 0, 1));
        let mut buf = [0u8; 28];
        g.emit(&mut buf).unwrap();
        assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap(), g);
        assert_eq!(Packet::new_checked(&buf[..27]).unwrap_err(), WireError::Truncated);
        buf[7] = 9;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap_err(),
            WireError::Malformed("ARP operation")
        );
        buf[1] = 6;
        assert!(matches!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()), Err(WireError::Unsupported(_))));
        assert!(g.emit(&mut [0u8; 27]).is_err());
    }
}
