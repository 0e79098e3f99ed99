//! The netrig signature: 18 bytes at the start of the UDP payload of every test frame.
//!
//! | offset | size | field                                                    |
//! |-------:|-----:|----------------------------------------------------------|
//! |      0 |    2 | magic `0x4E52` ("NR")                                    |
//! |      2 |    4 | flow id                                                  |
//! |      6 |    6 | sequence number (per flow, 48 bits)                      |
//! |     12 |    6 | TX timestamp, ns since the trial epoch (48 bits, ~78 h)  |
//!
//! All fields are big-endian. Ethernet (14) + IPv4 (20) + UDP (8) + 18 = 60 bytes: a
//! 64-byte frame with FCS.

mod field {
    use crate::Field;
    pub const MAGIC: Field = 0..2;
    pub const FLOW_ID: Field = 2..6;
    pub const SEQ: Field = 6..12;
    pub const TX_TS: Field = 12..18;
}

/// Length of the signature in bytes.
pub const LEN: usize = field::TX_TS.end;
/// The magic number, "NR".
pub const MAGIC: u16 = 0x4E52;
/// Offset of the sequence number inside the signature.
pub const SEQ_OFFSET: usize = field::SEQ.start;
/// Offset of the TX timestamp inside the signature.
pub const TX_TS_OFFSET: usize = field::TX_TS.start;
/// Mask of the 48-bit sequence number and timestamp fields.
pub const MASK_48: u64 = (1 << 48) - 1;

/// The decoded signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Signature {
    pub flow_id: u32,
    /// Sequence number; only the low 48 bits are carried.
    pub seq: u64,
    /// Transmit timestamp in ns; only the low 48 bits are carried.
    pub tx_ts_ns: u64,
}

#[inline(always)]
fn put48(b: &mut [u8; 6], v: u64) {
    let x = v.to_be_bytes();
    b.copy_from_slice(&x[2..8]);
}

#[inline(always)]
fn get48(b: &[u8]) -> u64 {
    u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
}

impl Signature {
    /// Writes the signature into `buf[..LEN]`; seq and timestamp are truncated to 48 bits.
    /// Does nothing if `buf` is shorter than [`LEN`] (callers size buffers once, up front).
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) {
        let Some(out) = buf.get_mut(..LEN) else {
            return;
        };
        let mut s = [0u8; LEN];
        s[field::MAGIC].copy_from_slice(&MAGIC.to_be_bytes());
        s[field::FLOW_ID].copy_from_slice(&self.flow_id.to_be_bytes());
        let mut w = [0u8; 6];
        put48(&mut w, self.seq);
        s[field::SEQ].copy_from_slice(&w);
        put48(&mut w, self.tx_ts_ns);
        s[field::TX_TS].copy_from_slice(&w);
        out.copy_from_slice(&s);
    }

    /// Encodes into a fresh array.
    #[inline]
    pub fn to_bytes(&self) -> [u8; LEN] {
        let mut s = [0u8; LEN];
        self.emit(&mut s);
        s
    }

    /// Decodes `buf[..LEN]`; `None` if `buf` is shorter than [`LEN`] or the magic differs.
    #[inline]
    pub fn parse(buf: &[u8]) -> Option<Signature> {
        let s: &[u8; LEN] = buf.get(..LEN)?.try_into().ok()?;
        if u16::from_be_bytes([s[0], s[1]]) != MAGIC {
            return None;
        }
        Some(Signature {
            flow_id: u32::from_be_bytes([s[2], s[3], s[4], s[5]]),
            seq: get48(&s[field::SEQ]),
            tx_ts_ns: get48(&s[field::TX_TS]),
        })
    }
}

/// Encodes seq and timestamp (48 bits each) as the 12 bytes that follow the flow id.
#[inline(always)]
pub(crate) fn write_seq_ts_array(w: &mut [u8; 12], seq: u64, ts: u64) {
    w[..8].copy_from_slice(&(seq << 16).to_be_bytes());
    w[6..].copy_from_slice(&ts.to_be_bytes()[2..]);
}

/// Overwrites only the sequence number and timestamp of a signature already in
/// `buf[..LEN]` (both truncated to 48 bits). Does nothing if `buf` is shorter than [`LEN`].
/// Does not maintain any checksum: see [`crate::builder::patch_seq_ts`] for that.
#[inline]
pub fn write_seq_ts(buf: &mut [u8], seq: u64, ts: u64) {
    let Some(out) = buf.get_mut(field::SEQ.start..field::TX_TS.end) else {
        return;
    };
    let mut w = [0u8; 12];
    write_seq_ts_array(&mut w, seq, ts);
    out.copy_from_slice(&w);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_fixture() {
        let s = Signature { flow_id: 0x0102_0304, seq: 0x0A0B_0C0D_0E0F, tx_ts_ns: 0x1112_1314_1516 };
        let b = s.to_bytes();
        assert_eq!(b, [0x4E, 0x52, 1, 2, 3, 4, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16]);
        assert_eq!(Signature::parse(&b), Some(s));
        assert_eq!(LEN, 60 - 14 - 20 - 8);
    }

    #[test]
    fn truncation_and_errors() {
        let s = Signature { flow_id: 1, seq: u64::MAX, tx_ts_ns: (1 << 48) + 5 };
        let mut b = [0u8; 20];
        s.emit(&mut b);
        let p = Signature::parse(&b).unwrap();
        assert_eq!(p.seq, MASK_48);
        assert_eq!(p.tx_ts_ns, 5);
        assert_eq!(Signature::parse(&b[..17]), None);
        b[0] = 0;
        assert_eq!(Signature::parse(&b), None);
        let mut short = [0u8; 17];
        s.emit(&mut short);
        assert_eq!(short, [0u8; 17]);
    }

    #[test]
    fn write_seq_ts_patches_only_variable_fields() {
        let mut b = Signature { flow_id: 77, seq: 1, tx_ts_ns: 2 }.to_bytes();
        write_seq_ts(&mut b, 0xFFFF_1234_5678_9ABC, 0x0000_0000_0000_0042);
        assert_eq!(Signature::parse(&b), Some(Signature { flow_id: 77, seq: 0x1234_5678_9ABC, tx_ts_ns: 0x42 }));
        write_seq_ts(&mut b[..17], 9, 9); // too short: untouched
        assert_eq!(Signature::parse(&b).unwrap().seq, 0x1234_5678_9ABC);
    }
}
