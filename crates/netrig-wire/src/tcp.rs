//! TCP headers (RFC 9293), header only: netrig uses TCP for frame templates, it does not
//! implement TCP.

use crate::{check_out, checksum, get_u16, get_u32, ip_proto, set_u16, set_u32, IpPair, Result, WireError};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ_NUM: usize = 4;
    pub const ACK_NUM: usize = 8;
    pub const OFF_FLAGS: usize = 12;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
}

/// Length of a TCP header without options.
pub const HEADER_LEN: usize = 20;
/// Offset of the checksum inside the TCP header.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;

/// TCP flag bits (low byte of the offset/flags word).
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

/// A read/write view of a TCP segment.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }
    /// Checks: buffer ≥ 20 bytes, data offset ≥ 5 words and ≤ buffer length.
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
            return Err(WireError::Malformed("TCP data offset below 5"));
        }
        if len < hl {
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
    pub fn seq_number(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::SEQ_NUM)
    }
    pub fn ack_number(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::ACK_NUM)
    }
    /// Header length in bytes (data offset · 4).
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::OFF_FLAGS] >> 4) * 4
    }
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::OFF_FLAGS + 1]
    }
    pub fn window_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::WINDOW)
    }
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }
    pub fn urgent_at(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::URGENT)
    }
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len() as usize]
    }
    /// Everything after the header (the view does not know the IP payload length; pass a
    /// buffer that ends where the segment ends).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len() as usize..]
    }
    /// True if the checksum over the whole buffer (header + payload) verifies.
    pub fn verify_checksum(&self, ips: &IpPair) -> bool {
        let b = self.buffer.as_ref();
        checksum::fold(ips.pseudo_header(ip_proto::TCP, b.len() as u32) + checksum::sum(b)) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT, v);
    }
    pub fn set_dst_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT, v);
    }
    pub fn set_seq_number(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::SEQ_NUM, v);
    }
    pub fn set_ack_number(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::ACK_NUM, v);
    }
    /// Sets the header length in bytes (multiple of 4, 20..=60).
    pub fn set_header_len(&mut self, v: u8) {
        let b = self.buffer.as_mut();
        b[field::OFF_FLAGS] = ((v / 4) << 4) | (b[field::OFF_FLAGS] & 0x0F);
    }
    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[field::OFF_FLAGS + 1] = v;
    }
    pub fn set_window_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::WINDOW, v);
    }
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }
    pub fn set_urgent_at(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::URGENT, v);
    }
    /// Computes and stores the checksum over the whole buffer (header + payload).
    pub fn fill_checksum(&mut self, ips: &IpPair) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let c = checksum::fold(ips.pseudo_header(ip_proto::TCP, b.len() as u32) + checksum::sum(b));
        self.set_checksum(c);
    }
}

/// A TCP header (without options) in high-level form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq_number: u32,
    pub ack_number: u32,
    /// See [`flags`].
    pub flags: u8,
    pub window_len: u16,
    /// The checksum as found on the wire (ignored by [`Repr::emit`], which computes it).
    pub checksum: u16,
}

impl Repr {
    /// Parses a checked segment; if `ips` is given, the checksum over the whole buffer must
    /// verify.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>, ips: Option<&IpPair>) -> Result<Repr> {
        p.check_len()?;
        if let Some(ips) = ips {
            if !p.verify_checksum(ips) {
                return Err(WireError::Checksum);
            }
        }
        Ok(Repr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq_number: p.seq_number(),
            ack_number: p.ack_number(),
            flags: p.flags(),
            window_len: p.window_len(),
            checksum: p.checksum(),
        })
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes a 20-byte header at the start of `buf` (urgent pointer 0). With `ips`, the
    /// checksum is computed over the whole of `buf` as the segment (header + payload);
    /// without, it is left 0.
    pub fn emit(&self, buf: &mut [u8], ips: Option<&IpPair>) -> Result<()> {
        check_out(buf, HEADER_LEN)?;
        let mut p = Packet::new_unchecked(&mut *buf);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_seq_number(self.seq_number);
        p.set_ack_number(self.ack_number);
        p.set_header_len(HEADER_LEN as u8);
        p.set_flags(self.flags);
        p.set_window_len(self.window_len);
        p.set_urgent_at(0);
        p.set_checksum(0);
        if let Some(ips) = ips {
            p.fill_checksum(ips);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    // SYN 10.0.0.1:40000 → 10.0.0.2:80, seq 1, window 64240.
    const SYN: [u8; 20] = [
        0x9c, 0x40, 0x00, 0x50, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x50, 0x02, 0xfa, 0xf0, 0x00, 0x00,
        0x00, 0x00,
    ];

    #[test]
    fn fixture_round_trip() {
        let ips = IpPair::V4 { src: Ipv4Addr::new(10, 0, 0, 1), dst: Ipv4Addr::new(10, 0, 0, 2) };
        let r = Repr::parse(&Packet::new_checked(&SYN[..]).unwrap(), None).unwrap();
        assert_eq!(r.src_port, 40000);
        assert_eq!(r.dst_port, 80);
        assert_eq!(r.seq_number, 1);
        assert_eq!(r.flags, flags::SYN);
        assert_eq!(r.window_len, 64240);
        let mut out = [0u8; 24];
        out[20..].copy_from_slice(b"data");
        r.emit(&mut out, Some(&ips)).unwrap();
        assert_eq!(out[..16], SYN[..16]);
        let p = Packet::new_checked(&out[..]).unwrap();
        assert!(p.verify_checksum(&ips));
        assert_eq!(p.payload(), b"data");
        let back = Repr::parse(&p, Some(&ips)).unwrap();
        assert_eq!(Repr { checksum: 0, ..back }, r);
    }

    #[test]
    fn errors() {
        assert_eq!(Packet::new_checked(&SYN[..19]).unwrap_err(), WireError::Truncated);
        let mut b = SYN;
        b[12] = 0x40;
        assert!(matches!(Packet::new_checked(&b[..]), Err(WireError::Malformed(_))));
        b[12] = 0x60;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), WireError::Truncated);
        let ips = IpPair::V4 { src: Ipv4Addr::new(10, 0, 0, 1), dst: Ipv4Addr::new(10, 0, 0, 2) };
        assert_eq!(Repr::parse(&Packet::new_checked(&SYN[..]).unwrap(), Some(&ips)).unwrap_err(), WireError::Checksum);
    }
}
