//! The Ethernet frame check sequence: CRC-32 (IEEE 802.3), as the NIC appends it.
//!
//! netrig writes and reads frames without it; a capture of what the wire carried
//! ([`crate::capfile`]) appends it again.

/// The reflected CRC-32 table (polynomial 0xEDB88320).
const TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// CRC-32 of `data` (initial value and final xor 0xFFFFFFFF).
pub fn crc32(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |c, &b| TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8))
}

/// The 4 bytes a NIC appends to `frame` (the CRC, least significant byte first).
pub fn fcs(frame: &[u8]) -> [u8; 4] {
    crc32(frame).to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926, "the CRC-32 check value");
        // A frame followed by its FCS has the CRC-32 residue 0x2144DF1C.
        let frame: Vec<u8> = (0..60u8).collect();
        let mut with = frame.clone();
        with.extend_from_slice(&fcs(&frame));
        assert_eq!(crc32(&with), 0x2144_DF1C);
    }
}
