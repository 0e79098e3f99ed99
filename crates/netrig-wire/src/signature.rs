//! The netrig signature: 18 bytes at the start of the UDP payload of every test frame.
//!
//! | offset | size | field                                                                 |
//! |-------:|-----:|-----------------------------------------------------------------------|
//! |      0 |    2 | magic `0x4E52` ("NR")                                                 |
//! |      2 |    3 | tag: bit 23 = warm-up, bits 0–22 = the trial's nonce                  |
//! |      5 |    3 | flow id (24 bits: a trial has at most 2^24 flows)                     |
//! |      8 |    5 | sequence number (per flow, 40 bits; the receiver extends it)          |
//! |     13 |    5 | TX timestamp, ns since the trial epoch (40 bits, wraps every 18.3 min) |
//!
//! All fields are big-endian. Ethernet (14) + IPv4 (20) + UDP (8) + 18 = 60 bytes: a
//! 64-byte frame with FCS. The magic stays at offset 0 (the XDP steering program matches it).

mod field {
    use crate::Field;
    pub const MAGIC: Field = 0..2;
    pub const TAG: Field = 2..5;
    pub const FLOW_ID: Field = 5..8;
    pub const SEQ: Field = 8..13;
    pub const TX_TS: Field = 13..18;
}

// The fields follow each other without gaps (parse and emit treat bytes 2..18 as one integer).
const _: () = assert!(
    field::MAGIC.end == field::TAG.start
        && field::TAG.end == field::FLOW_ID.start
        && field::FLOW_ID.end == field::SEQ.start
        && field::SEQ.end == field::TX_TS.start
);

/// Length of the signature in bytes.
pub const LEN: usize = field::TX_TS.end;
/// The magic number, "NR".
pub const MAGIC: u16 = 0x4E52;
/// Offset of the sequence number inside the signature (the timestamp follows it).
pub const SEQ_OFFSET: usize = field::SEQ.start;
/// Offset of the TX timestamp inside the signature.
pub const TX_TS_OFFSET: usize = field::TX_TS.start;
/// Bits of the trial nonce.
pub const TRIAL_BITS: u32 = 23;
/// Mask of the trial nonce.
pub const TRIAL_MASK: u32 = (1 << TRIAL_BITS) - 1;
/// Mask of the 24-bit flow id.
pub const FLOW_MASK: u32 = (1 << 24) - 1;
/// Bits of the sequence number and of the timestamp.
pub const SEQ_TS_BITS: u32 = 40;
/// Mask of the 40-bit sequence number and timestamp fields.
pub const MASK_40: u64 = (1 << SEQ_TS_BITS) - 1;

/// Where a frame carries its signature ([`crate::dissect::locate`] finds it there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Site {
    /// Right after the headers, at the payload's start: netrig's streams and replayed frames, and
    /// where the `netrig_steer` XDP program matches the magic
    /// ([`crate::dissect::find_signature`] parses the headers to it).
    Payload,
    /// In the frame's last [`LEN`] bytes: OTG stacks, whose receivers may see headers a DUT added
    /// or removed in front of it.
    End,
    /// None: the frames are not counted per flow (learning frames).
    None,
}

/// The decoded signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Signature {
    /// The trial's nonce; only the low 23 bits are carried.
    pub trial: u32,
    /// A warm-up frame: sent before the measurement, counted apart.
    pub warmup: bool,
    /// Flow index within the trial; only the low 24 bits are carried.
    pub flow_id: u32,
    /// Sequence number; only the low 40 bits are carried.
    pub seq: u64,
    /// Transmit timestamp in ns; only the low 40 bits are carried.
    pub tx_ts_ns: u64,
}

impl Signature {
    /// The 16 bytes after the magic as one big-endian integer.
    #[inline(always)]
    fn body(&self) -> u128 {
        let tag = (self.trial & TRIAL_MASK) | (u32::from(self.warmup) << TRIAL_BITS);
        (u128::from(tag) << 104)
            | (u128::from(self.flow_id & FLOW_MASK) << 80)
            | (u128::from(self.seq & MASK_40) << 40)
            | u128::from(self.tx_ts_ns & MASK_40)
    }

    /// Writes the signature into `buf[..LEN]`; every field is truncated to its width.
    /// Does nothing if `buf` is shorter than [`LEN`] (callers size buffers once, up front).
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) {
        let Some(out) = buf.get_mut(..LEN) else {
            return;
        };
        out.copy_from_slice(&self.to_bytes());
    }

    /// Encodes into a fresh array.
    #[inline]
    pub fn to_bytes(&self) -> [u8; LEN] {
        let mut s = [0u8; LEN];
        s[field::MAGIC].copy_from_slice(&MAGIC.to_be_bytes());
        s[field::TAG.start..].copy_from_slice(&self.body().to_be_bytes());
        s
    }

    /// Decodes `buf[..LEN]`; `None` if `buf` is shorter than [`LEN`] or the magic differs.
    #[inline]
    pub fn parse(buf: &[u8]) -> Option<Signature> {
        let s: &[u8; LEN] = buf.get(..LEN)?.try_into().ok()?;
        if u16::from_be_bytes([s[0], s[1]]) != MAGIC {
            return None;
        }
        let mut b = [0u8; 16];
        b.copy_from_slice(&s[field::TAG.start..]);
        let x = u128::from_be_bytes(b);
        let tag = (x >> 104) as u32;
        Some(Signature {
            trial: tag & TRIAL_MASK,
            warmup: tag >> TRIAL_BITS & 1 == 1,
            flow_id: (x >> 80) as u32 & FLOW_MASK,
            seq: (x >> 40) as u64 & MASK_40,
            tx_ts_ns: x as u64 & MASK_40,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_fixture() {
        let s = Signature {
            trial: 0x0A_BCDE,
            warmup: false,
            flow_id: 0x01_0203,
            seq: 0x0A_0B0C_0D0E,
            tx_ts_ns: 0x11_1213_1415,
        };
        let b = s.to_bytes();
        assert_eq!(
            b,
            [0x4E, 0x52, 0x0A, 0xBC, 0xDE, 1, 2, 3, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x11, 0x12, 0x13, 0x14, 0x15]
        );
        assert_eq!(Signature::parse(&b), Some(s));
        let w = Signature { warmup: true, ..s };
        assert_eq!(w.to_bytes()[2], 0x8A, "the warm-up flag is the tag's top bit");
        assert_eq!(Signature::parse(&w.to_bytes()), Some(w));
        assert_eq!(LEN, 60 - 14 - 20 - 8);
        // The sequence number and the timestamp start on an even offset, so the UDP checksum
        // can be updated incrementally over them.
        assert!(SEQ_OFFSET.is_multiple_of(2));
    }

    #[test]
    fn the_example_of_docs_wire_format() {
        let s = Signature { trial: 5, warmup: false, flow_id: 1, seq: 2, tx_ts_ns: 3 };
        assert_eq!(s.to_bytes(), [0x4E, 0x52, 0, 0, 5, 0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3]);
        assert_eq!(Signature { warmup: true, ..s }.to_bytes()[..8], [0x4E, 0x52, 0x80, 0, 5, 0, 0, 1]);
    }

    #[test]
    fn truncation_and_errors() {
        let s = Signature { trial: u32::MAX, warmup: false, flow_id: u32::MAX, seq: u64::MAX, tx_ts_ns: (1 << 40) + 5 };
        let mut b = [0u8; 20];
        s.emit(&mut b);
        let p = Signature::parse(&b).unwrap();
        assert_eq!((p.trial, p.warmup, p.flow_id), (TRIAL_MASK, false, FLOW_MASK), "a wide trial never sets warm-up");
        assert_eq!(p.seq, MASK_40);
        assert_eq!(p.tx_ts_ns, 5);
        assert_eq!(Signature::parse(&b[..17]), None);
        b[0] = 0;
        assert_eq!(Signature::parse(&b), None);
        let mut short = [0u8; 17];
        s.emit(&mut short);
        assert_eq!(short, [0u8; 17]);
    }
}
