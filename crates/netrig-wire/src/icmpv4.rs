//! ICMPv4 echo request / reply (RFC 792). Other message types are viewable through
//! [`Packet`] but [`Repr::parse`] reports them as unsupported.

use crate::{check_out, checksum, get_u16, set_u16, Result, WireError};

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const IDENT: usize = 4;
    pub const SEQ_NO: usize = 6;
}

/// Length of the echo header (type, code, checksum, identifier, sequence number).
pub const HEADER_LEN: usize = 8;
/// Offset of the checksum inside the header.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;
pub const TYPE_ECHO_REPLY: u8 = 0;
pub const TYPE_ECHO_REQUEST: u8 = 8;

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

/// A read/write view of an ICMPv4 message; the whole buffer is the message.
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
    pub fn verify_checksum(&self) -> bool {
        checksum::fold(checksum::sum(self.buffer.as_ref())) == 0
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
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::fold(checksum::sum(self.buffer.as_ref()));
        self.set_checksum(c);
    }
}

/// An ICMPv4 echo message in high-level form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr<'a> {
    pub message: Message,
    pub ident: u16,
    pub seq_no: u16,
    pub data: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parses an echo request/reply, verifying the checksum.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &'a Packet<&'a T>) -> Result<Repr<'a>> {
        p.check_len()?;
        let message = match (p.msg_type(), p.msg_code()) {
            (TYPE_ECHO_REQUEST, 0) => Message::EchoRequest,
            (TYPE_ECHO_REPLY, 0) => Message::EchoReply,
            _ => return Err(WireError::Unsupported("ICMPv4 message other than echo")),
        };
        if !p.verify_checksum() {
            return Err(WireError::Checksum);
        }
        let data = &p.buffer.as_ref()[HEADER_LEN..];
        Ok(Repr { message, ident: p.echo_ident(), seq_no: p.echo_seq_no(), data })
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.data.len()
    }

    /// The reply to this request (same identifier, sequence number and data).
    pub fn reply(&self) -> Repr<'a> {
        Repr { message: Message::EchoReply, ..*self }
    }

    /// Writes header and data into `buf[..buffer_len()]` with the checksum.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let len = self.buffer_len();
        check_out(buf, len)?;
        let mut p = Packet::new_unchecked(&mut buf[..len]);
        p.set_msg_type(self.message.type_code());
        p.set_msg_code(0);
        p.set_echo_ident(self.ident);
        p.set_echo_seq_no(self.seq_no);
        p.data_mut().copy_from_slice(self.data);
        p.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Echo request id 0x1234 seq 1 data "abcd": sum 0800+1234+0001+6162+6364 = 0xdefb → 0x2104.
    const PING: [u8; 12] = [0x08, 0x00, 0x21, 0x04, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd'];

    #[test]
    fn fixture_and_reply() {
        let p = Packet::new_checked(&PING[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r, Repr { message: Message::EchoRequest, ident: 0x1234, seq_no: 1, data: b"abcd" });
        let mut out = [0u8; 12];
        r.emit(&mut out).unwrap();
        assert_eq!(out, PING);
        r.reply().emit(&mut out).unwrap();
        let p = Packet::new_checked(&out[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap().message, Message::EchoReply);
    }

    #[test]
    fn errors() {
        assert_eq!(Packet::new_checked(&PING[..7]).unwrap_err(), WireError::Truncated);
        let mut b = PING;
        b[11] = b'x';
        assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap_err(), WireError::Checksum);
        b[0] = 3;
        assert!(matches!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()), Err(WireError::Unsupported(_))));
        let r = Repr { message: Message::EchoRequest, ident: 0, seq_no: 0, data: b"xyz" };
        assert!(r.emit(&mut [0u8; 10]).is_err());
    }
}
