//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Partial sums are carried as `u32` values that are always folded to at most `0xFFFF`,
//! so up to 65 536 of them can be added with plain `+` before calling [`fold`].
//! A partial sum of a slice that starts at an odd offset of the checksummed data is not
//! composable; netrig only sums even-aligned regions.

/// Ones-complement partial sum of `data` (big-endian 16-bit words; an odd trailing byte
/// is padded with zero). The result is folded to at most `0xFFFF`.
///
/// Processes 8 bytes per step with a `u64` accumulator (ones-complement addition is
/// associative across word sizes because 2^16 ≡ 1 mod 0xFFFF).
#[inline]
pub fn sum(data: &[u8]) -> u32 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        acc += (w >> 32) + (w & 0xFFFF_FFFF);
    }
    let rest = chunks.remainder();
    let mut words = rest.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    fold64(acc)
}

#[inline(always)]
fn fold64(mut acc: u64) -> u32 {
    // Two rounds bring any u64 below 2^17, two more below 2^16 + 1 ... loop is cheaper to read.
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    acc as u32
}

/// Folds a partial sum to 16 bits and returns its ones complement: the value to store
/// in a checksum field. When verifying (summing over data that includes the checksum
/// field), a correct packet gives `fold(..) == 0`.
#[inline]
pub fn fold(sum: u32) -> u16 {
    !(fold64(u64::from(sum)) as u16)
}

/// Partial sum of the IPv4 pseudo-header (RFC 768 / RFC 793): addresses, zero, protocol,
/// transport length.
#[inline]
pub fn pseudo_header_v4(src: &[u8; 4], dst: &[u8; 4], proto: u8, len: u16) -> u32 {
    let acc = u32::from(u16::from_be_bytes([src[0], src[1]]))
        + u32::from(u16::from_be_bytes([src[2], src[3]]))
        + u32::from(u16::from_be_bytes([dst[0], dst[1]]))
        + u32::from(u16::from_be_bytes([dst[2], dst[3]]))
        + u32::from(proto)
        + u32::from(len);
    fold64(u64::from(acc))
}

/// Partial sum of the IPv6 pseudo-header (RFC 8200 §8.1): addresses, 32-bit upper-layer
/// length, next header.
#[inline]
pub fn pseudo_header_v6(src: &[u8; 16], dst: &[u8; 16], next_header: u8, len: u32) -> u32 {
    let acc = u64::from(sum(src))
        + u64::from(sum(dst))
        + u64::from(len >> 16)
        + u64::from(len & 0xFFFF)
        + u64::from(next_header);
    fold64(acc)
}

/// RFC 1624 eqn. 3: the new checksum after one 16-bit word of the covered data changed
/// from `old` to `new`: `HC' = ~(~HC + ~m + m')`.
#[inline]
pub fn update16(old_csum: u16, old: u16, new: u16) -> u16 {
    fold(u32::from(!old_csum) + u32::from(!old) + u32::from(new))
}

/// Like [`update16`] for a whole even-aligned region that changed from `old` to `new`
/// (same length, starting at an even offset of the covered data).
#[inline]
pub fn update(old_csum: u16, old: &[u8], new: &[u8]) -> u16 {
    let old_sum = fold64(u64::from(sum(old))) as u16;
    fold(u32::from(!old_csum) + u32::from(!old_sum) + sum(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference: plain 16-bit word summing as in RFC 1071 §4.1.
    fn naive(data: &[u8]) -> u32 {
        let mut acc: u32 = 0;
        for w in data.chunks(2) {
            let v = if w.len() == 2 { u16::from_be_bytes([w[0], w[1]]) } else { u16::from(w[0]) << 8 };
            acc += u32::from(v);
            acc = (acc & 0xFFFF) + (acc >> 16);
        }
        acc
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&d), 0xddf2);
        assert_eq!(fold(sum(&d)), !0xddf2);
    }

    #[test]
    fn matches_naive_for_all_lengths() {
        let data: Vec<u8> = (0..300u32).map(|i| (i.wrapping_mul(151) ^ (i >> 3)) as u8).collect();
        for n in 0..data.len() {
            let s = sum(&data[..n]);
            assert!(s <= 0xFFFF);
            // Results may differ only in the representation of zero (0 vs 0xFFFF).
            assert_eq!(fold(s), fold(naive(&data[..n])), "length {n}");
        }
        assert_eq!(sum(&[0xff; 64]), 0xFFFF);
        assert_eq!(sum(&[]), 0);
        assert_eq!(sum(&[0x12]), 0x1200);
    }

    #[test]
    fn known_ipv4_header() {
        // Wikipedia's worked example: checksum 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!(fold(sum(&h)), 0xb861);
        h[10] = 0xb8;
        h[11] = 0x61;
        assert_eq!(fold(sum(&h)), 0);
    }

    #[test]
    fn incremental_update_matches_recompute() {
        let mut h = [0u8; 20];
        for (i, b) in h.iter_mut().enumerate() {
            *b = (i * 37 + 5) as u8;
        }
        h[10] = 0;
        h[11] = 0;
        let c = fold(sum(&h));
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let old = u16::from_be_bytes([h[2], h[3]]);
        h[2..4].copy_from_slice(&0x1234u16.to_be_bytes());
        let c2 = update16(c, old, 0x1234);
        h[10..12].copy_from_slice(&c2.to_be_bytes());
        assert_eq!(fold(sum(&h)), 0);
        let old_region: [u8; 6] = h[12..18].try_into().unwrap();
        let new_region = [9u8, 8, 7, 6, 5, 4];
        h[12..18].copy_from_slice(&new_region);
        let c3 = update(c2, &old_region, &new_region);
        h[10..12].copy_from_slice(&c3.to_be_bytes());
        assert_eq!(fold(sum(&h)), 0);
    }

    #[test]
    fn pseudo_headers() {
        let v4 = pseudo_header_v4(&[10, 0, 0, 1], &[10, 0, 0, 2], 17, 8);
        assert_eq!(v4, naive(&[10, 0, 0, 1, 10, 0, 0, 2, 0, 17, 0, 8]));
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src[0] = 0x20;
        src[15] = 1;
        dst[0] = 0x20;
        dst[15] = 2;
        let mut raw = Vec::new();
        raw.extend_from_slice(&src);
        raw.extend_from_slice(&dst);
        raw.extend_from_slice(&70_000u32.to_be_bytes());
        raw.extend_from_slice(&[0, 0, 0, 17]);
        assert_eq!(pseudo_header_v6(&src, &dst, 17, 70_000), naive(&raw));
    }
}
