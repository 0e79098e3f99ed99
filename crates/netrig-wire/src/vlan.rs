//! IEEE 802.1Q VLAN tags (also used for 802.1ad QinQ service tags).
//!
//! The view covers the 4 bytes that follow the TPID (the TPID itself, 0x8100 or 0x88A8,
//! is the EtherType field of the enclosing Ethernet header or tag):
//! TCI (PCP 3 bits, DEI 1 bit, VID 12 bits) and the inner EtherType.

use crate::{check_out, get_u16, set_u16, Result, WireError};

mod field {
    use crate::Rest;
    pub const TCI: usize = 0;
    pub const ETHERTYPE: usize = 2;
    pub const PAYLOAD: Rest = 4..;
}

/// Length of a tag after its TPID.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A read/write view of an 802.1Q tag.
#[derive(Debug, Clone)]
pub struct Tag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Tag<T> {
    pub const fn new_unchecked(buffer: T) -> Tag<T> {
        Tag { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Tag<T>> {
        let t = Tag::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
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
    pub fn tci(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::TCI)
    }
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0FFF
    }
    pub fn inner_ethertype(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ETHERTYPE)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Tag<T> {
    pub fn set_tci(&mut self, tci: u16) {
        set_u16(self.buffer.as_mut(), field::TCI, tci);
    }
    pub fn set_inner_ethertype(&mut self, t: u16) {
        set_u16(self.buffer.as_mut(), field::ETHERTYPE, t);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// An 802.1Q tag in high-level form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Priority code point, 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN id, 0..=4095 (0 = priority tag only; 4095 reserved).
    pub vid: u16,
    pub inner_ethertype: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(tag: &Tag<T>) -> Result<Repr> {
        tag.check_len()?;
        Ok(Repr { pcp: tag.pcp(), dei: tag.dei(), vid: tag.vid(), inner_ethertype: tag.inner_ethertype() })
    }
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// The 16-bit TCI; fails if `pcp` or `vid` are out of range.
    pub fn tci(&self) -> Result<u16> {
        if self.pcp > 7 {
            return Err(WireError::Invalid("VLAN pcp must be 0..=7"));
        }
        if self.vid > 0x0FFF {
            return Err(WireError::Invalid("VLAN id must be 0..=4095"));
        }
        Ok(u16::from(self.pcp) << 13 | u16::from(self.dei) << 12 | self.vid)
    }
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let tci = self.tci()?;
        check_out(buf, HEADER_LEN)?;
        let mut t = Tag::new_unchecked(buf);
        t.set_tci(tci);
        t.set_inner_ethertype(self.inner_ethertype);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EtherType;

    #[test]
    fn fixture() {
        // PCP 5, DEI 1, VID 100 (0x064), inner IPv6.
        let b = [0xB0, 0x64, 0x86, 0xDD, 0x60];
        let t = Tag::new_checked(&b[..]).unwrap();
        let r = Repr::parse(&t).unwrap();
        assert_eq!(r, Repr { pcp: 5, dei: true, vid: 100, inner_ethertype: EtherType::IPV6 });
        assert_eq!(t.payload(), &[0x60]);
        let mut out = [0u8; 4];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b[..4]);
    }

    #[test]
    fn errors() {
        assert_eq!(Tag::new_checked(&[0u8; 3][..]).unwrap_err(), WireError::Truncated);
        let r = Repr { pcp: 8, dei: false, vid: 1, inner_ethertype: 0x0800 };
        assert!(matches!(r.emit(&mut [0; 4]), Err(WireError::Invalid(_))));
        let r = Repr { pcp: 0, dei: false, vid: 4096, inner_ethertype: 0x0800 };
        assert!(matches!(r.emit(&mut [0; 4]), Err(WireError::Invalid(_))));
    }
}
