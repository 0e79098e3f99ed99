//! ICMPv6 echo request / reply (RFC 4443). The checksum covers the IPv6 pseudo-header.

use std::net::Ipv6Addr;

use crate::{check_out, checksum, get_u16, ip_proto, set_u16, Result, WireError};

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const IDENT: usize = 4;
    pub const SEQ_NO: usize = 6;
}

/// Length of the echo header.
pub const HEADER_LEN: usize = 8;
/// Offset of the checksum inside the header.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;
pub const TYPE_ECHO_REQUEST: u8 = 128;
pub const TYPE_ECHO_REPLY: u8 = 129;

/// Echo message kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message {
    EchoRequest,
    EchoReply,
}

impl Message {
    pub const fn type_code(self) -> u8 {
        match self {
            Message::EchoRequest => TYPE_ECHO_REQUEST,
            Message::EchoReply => TYPE_ECHO_REPLY,
        }
    }
}

fn pseudo(src: &Ipv6Addr, dst: &Ipv6Addr, len: usize) -> u32 {
    checksum::pseudo_header_v6(&src.octets(), &dst.octets(), ip_proto::ICMPV6, len as u32)
}

/// A read/write view of an ICMPv6 message; the whole buffer is the message.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }
    pub fn echo_ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::IDENT)
    }
    pub fn echo_seq_no(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SEQ_NO)
    }
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let b = self.buffer.as_ref();
        checksum::fold(pseudo(src, dst, b.len()) + checksum::sum(b)) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }
    pub fn set_msg_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }
    pub fn set_echo_ident(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::IDENT, v);
    }
    pub fn set_echo_seq_no(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::SEQ_NO, v);
    }
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let c = checksum::fold(pseudo(src, dst, b.len()) + checksum::sum(b));
        self.set_checksum(c);
    }
}

/// An ICMPv6 echo message in high-level form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr<'a> {
    pub message: Message,
    pub ident: u16,
    pub seq_no: u16,
    pub data: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parses an echo request/reply, verifying the checksum against the IPv6 addresses.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &'a Packet<&'a T>, src: &Ipv6Addr, dst: &Ipv6Addr) -> Result<Repr<'a>> {
        p.check_len()?;
        let message = match (p.msg_type(), p.msg_code()) {
            (TYPE_ECHO_REQUEST, 0) => Message::EchoRequest,
            (TYPE_ECHO_REPLY, 0) => Message::EchoReply,
            _ => return Err(WireError::Unsupported("ICMPv6 message other than echo")),
        };
        if !p.verify_checksum(src, dst) {
            return Err(WireError::Checksum);
        }
        let data = &p.buffer.as_ref()[HEADER_LEN..];
        Ok(Repr { message, ident: p.echo_ident(), seq_no: p.echo_seq_no(), data })
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.data.len()
    }

    pub fn reply(&self) -> Repr<'a> {
        Repr { message: Message::EchoReply, ..*self }
    }

    /// Writes header and data into `buf[..buffer_len()]` with the checksum for an IPv6
    /// packet from `src` to `dst`.
    pub fn emit(&self, buf: &mut [u8], src: &Ipv6Addr, dst: &Ipv6Addr) -> Result<()> {
        let len = self.buffer_len();
        check_out(buf, len)?;
        let mut p = Packet::new_unchecked(&mut buf[..len]);
        p.set_msg_type(self.message.type_code());
        p.set_msg_code(0);
        p.set_echo_ident(self.ident);
        p.set_echo_seq_no(self.seq_no);
        p.data_mut().copy_from_slice(self.data);
        p.fill_checksum(src, dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_checksum_binds_addresses() {
        let src: Ipv6Addr = "2001:2::1".parse().unwrap();
        let dst: Ipv6Addr = "2001:2::2".parse().unwrap();
        let r = Repr { message: Message::EchoRequest, ident: 7, seq_no: 9, data: b"netrig" };
        let mut buf = [0u8; 14];
        r.emit(&mut buf, &src, &dst).unwrap();
        assert_eq!(buf[0], 128);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Repr::parse(&p, &src, &dst).unwrap(), r);
        // Swapping addresses keeps the sum; a different address breaks it.
        let other: Ipv6Addr = "2001:2::3".parse().unwrap();
        assert_eq!(Repr::parse(&p, &src, &other).unwrap_err(), WireError::Checksum);
        r.reply().emit(&mut buf, &dst, &src).unwrap();
        assert_eq!(buf[0], 129);
    }

    #[test]
    fn fixture_checksum() {
        // Reference value: ping6 ::1 → ::1, id 0, seq 0, no data. Pseudo-header sum:
        // 0001 + 0001 + 0008 + 003a = 0x44, message 8000 → 0x8044 → checksum 0x7fbb.
        let lo = Ipv6Addr::LOCALHOST;
        let r = Repr { message: Message::EchoRequest, ident: 0, seq_no: 0, data: b"" };
        let mut buf = [0u8; 8];
        r.emit(&mut buf, &lo, &lo).unwrap();
        assert_eq!(&buf[2..4], &[0x7f, 0xbb]);
    }

    #[test]
    fn errors() {
        let lo = Ipv6Addr::LOCALHOST;
        assert_eq!(Packet::new_checked(&[0u8; 7][..]).unwrap_err(), WireError::Truncated);
        let b = [1u8, 0, 0, 0, 0, 0, 0, 0];
        assert!(matches!(Repr::parse(&Packet::new_checked(&b[..]).unwrap(), &lo, &lo), Err(WireError::Unsupported(_))));
    }
}
