//! Ethernet II frames (without FCS: the NIC or kernel adds and strips it).

use core::fmt;
use core::str::FromStr;

use crate::{check_out, get_u16, set_u16, Result, WireError};

/// A 48-bit MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// Builds an address from a slice of exactly six bytes.
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        let a: [u8; 6] = b.try_into().map_err(|_| WireError::Invalid("MAC address must be 6 bytes"))?;
        Ok(EthernetAddress(a))
    }
    pub fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }
    pub fn is_broadcast(&self) -> bool {
        self.0 == [0xff; 6]
    }
    /// Group bit set (includes broadcast).
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }
    /// Locally administered bit set (e.g. `02:..`).
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

impl FromStr for EthernetAddress {
    type Err = WireError;

    /// Parses `02:00:00:00:00:01` (also `-` as separator, either case).
    fn from_str(s: &str) -> Result<Self> {
        const BAD: WireError = WireError::Invalid("MAC address must look like 02:00:00:00:00:01 (six hex pairs)");
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in out.iter_mut() {
            let p = parts.next().ok_or(BAD)?;
            if p.len() != 2 {
                return Err(BAD);
            }
            *byte = u8::from_str_radix(p, 16).map_err(|_| BAD)?;
        }
        if parts.next().is_some() {
            return Err(BAD);
        }
        Ok(EthernetAddress(out))
    }
}

/// EtherType values used by netrig (`EtherType::IPV4`, ...).
#[derive(Debug, Clone, Copy)]
pub struct EtherType;

impl EtherType {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const IPV6: u16 = 0x86DD;
    pub const QINQ: u16 = 0x88A8;
}

mod field {
    use crate::{Field, Rest};
    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    pub const ETHERTYPE: usize = 12;
    pub const PAYLOAD: Rest = 14..;
}

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A read/write view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps a buffer without checking; accessors may panic if it is shorter than
    /// [`HEADER_LEN`].
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }
    /// Wraps a buffer after checking it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Frame::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
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
    pub fn dst_addr(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        EthernetAddress(a)
    }
    pub fn src_addr(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        EthernetAddress(a)
    }
    pub fn ethertype(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ETHERTYPE)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&a.0);
    }
    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&a.0);
    }
    pub fn set_ethertype(&mut self, t: u16) {
        set_u16(self.buffer.as_mut(), field::ETHERTYPE, t);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// The Ethernet II header in high-level form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub src_addr: EthernetAddress,
    pub dst_addr: EthernetAddress,
    pub ethertype: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<Repr> {
        frame.check_len()?;
        Ok(Repr { src_addr: frame.src_addr(), dst_addr: frame.dst_addr(), ethertype: frame.ethertype() })
    }
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        check_out(buf, HEADER_LEN)?;
        let mut f = Frame::new_unchecked(buf);
        f.set_dst_addr(self.dst_addr);
        f.set_src_addr(self.src_addr);
        f.set_ethertype(self.ethertype);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: [u8; 18] = [
        0x02, 0, 0, 0, 0, 0x02, // dst
        0x02, 0, 0, 0, 0, 0x01, // src
        0x08, 0x00, // IPv4
        0xde, 0xad, 0xbe, 0xef,
    ];

    #[test]
    fn parse_fixture() {
        let f = Frame::new_checked(&FRAME[..]).unwrap();
        let r = Repr::parse(&f).unwrap();
        assert_eq!(r.dst_addr, "02:00:00:00:00:02".parse().unwrap());
        assert_eq!(r.src_addr.to_string(), "02:00:00:00:00:01");
        assert_eq!(r.ethertype, EtherType::IPV4);
        assert_eq!(f.payload(), &[0xde, 0xad, 0xbe, 0xef]);
    }

    #[test]
    fn emit_round_trip() {
        let r = Repr::parse(&Frame::new_checked(&FRAME[..]).unwrap()).unwrap();
        let mut buf = [0u8; 18];
        r.emit(&mut buf).unwrap();
        assert_eq!(buf[..14], FRAME[..14]);
        assert!(matches!(r.emit(&mut [0u8; 13]), Err(WireError::BufferTooSmall { needed: 14, .. })));
    }

    #[test]
    fn truncated() {
        assert_eq!(Frame::new_checked(&FRAME[..13]).unwrap_err(), WireError::Truncated);
    }

    #[test]
    fn mac_parsing() {
        assert_eq!("FF-ff-FF-ff-ff-ff".parse::<EthernetAddress>().unwrap(), EthernetAddress::BROADCAST);
        for bad in ["", "02:00:00:00:00", "02:00:00:00:00:01:03", "2:00:00:00:00:01", "zz:00:00:00:00:01"] {
            assert!(bad.parse::<EthernetAddress>().is_err(), "{bad}");
        }
        let m: EthernetAddress = "02:00:00:00:00:01".parse().unwrap();
        assert!(m.is_local() && m.is_unicast() && !m.is_broadcast());
        assert!(EthernetAddress::BROADCAST.is_multicast());
    }
}
