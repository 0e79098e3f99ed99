//! IEEE 802.1Q VLAN tags (also 802.1ad QinQ service tags): the 4 bytes after the TPID (0x8100 or
//! 0x88A8, the EtherType of the enclosing header): TCI (PCP 3 bits, DEI 1 bit, VID 12 bits) and
//! the inner EtherType. Written by [`crate::stack`], read by [`crate::dissect`].

/// Length of a tag after its TPID.
pub const HEADER_LEN: usize = 4;

/// An 802.1Q tag as a stream gives it.
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
