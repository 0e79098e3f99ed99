//! Ethernet II: MAC addresses, EtherTypes and the header's length (frames are written by
//! [`crate::stack`], read by [`crate::dissect`]; no FCS: the NIC or kernel adds and strips it).

use core::fmt;
use core::str::FromStr;

use crate::{Result, WireError};

/// A 48-bit MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

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

/// Length of the Ethernet II header: destination, source, EtherType.
pub const HEADER_LEN: usize = 14;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_parsing() {
        assert_eq!("FF-ff-FF-ff-ff-ff".parse::<EthernetAddress>().unwrap(), EthernetAddress::BROADCAST);
        for bad in ["", "02:00:00:00:00", "02:00:00:00:00:01:03", "2:00:00:00:00:01", "zz:00:00:00:00:01"] {
            assert!(bad.parse::<EthernetAddress>().is_err(), "{bad}");
        }
        let m: EthernetAddress = "02:00:00:00:00:01".parse().unwrap();
        assert!(m.is_local() && m.is_unicast() && !m.is_broadcast());
        assert!(EthernetAddress::BROADCAST.is_multicast());
        assert_eq!(m.to_string(), "02:00:00:00:00:01");
    }
}
