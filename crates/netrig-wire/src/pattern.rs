//! Field patterns: the value a header field takes in frame `j` of a flow, bit-exact writes of
//! such values, and the ones'-complement sums the checksum fix-ups need.
//!
//! A pattern yields one value per frame; all of a flow's patterns advance together, frame `j`
//! taking value `j mod count` of each. A [`Cursor`] holds where a pattern is, so the next value
//! costs an add (counters), an index (lists) or one hash (random), never a division.
//!
//! Sums: a field's bytes are summed as if they started at an even offset of the checksummed
//! region ([`span_sum`]); at an odd offset the ones'-complement sum is the byte-swapped one
//! (RFC 1071 §2(B)), so one sum serves every checksum that covers the field ([`lane`]).
use crate::stack::keys::KeyValues;

/// The values a field takes, frame after frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// One value in every frame.
    Fixed(u128),
    /// Derived from the stack (a length, a type, a checksum), or `fallback` where nothing derives
    /// it (see `stack`).
    Auto(u128),
    /// These values in turn.
    List(Vec<u128>),
    /// `start`, `start ± step`, … (`count` values, modulo the field's width), then again.
    Counter { start: u128, step: u128, count: u32, down: bool },
    /// `count` pseudo-random values in `[min, max]` from `seed`, then again.
    Random { min: u64, max: u64, count: u32, seed: u64 },
    /// Checksum fields only: a checksum that never verifies (the good one + 1).
    BadChecksum,
    /// Per flow: a function of digit `digit` of the frame's flow key ([`crate::stack::keys`]).
    ByKey { digit: u8, values: KeyValues },
}

impl Pattern {
    /// How many frames before the values repeat (1 for a constant).
    pub fn period(&self) -> u64 {
        match self {
            Pattern::List(v) => v.len().max(1) as u64,
            Pattern::Counter { count, .. } | Pattern::Random { count, .. } => u64::from((*count).max(1)),
            _ => 1,
        }
    }

    /// The value changes from frame to frame (a per-flow value: from flow to flow).
    pub fn varies(&self) -> bool {
        self.period() > 1 || matches!(self, Pattern::ByKey { .. })
    }

    /// The largest value the pattern produces before masking, for range checks (`None`: it wraps
    /// by design, like a counter).
    pub fn max_value(&self) -> Option<u128> {
        match self {
            Pattern::Fixed(v) | Pattern::Auto(v) => Some(*v),
            Pattern::List(v) => v.iter().copied().max(),
            Pattern::Counter { start, .. } => Some(*start),
            Pattern::Random { max, .. } => Some(u128::from(*max)),
            // Checked against the key's radix where the stack is compiled.
            Pattern::BadChecksum | Pattern::ByKey { .. } => None,
        }
    }
}

/// Where a pattern is: the current value and its index in the period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    pub value: u128,
    pub index: u32,
}

/// SplitMix64: a fast, well-mixing hash of `x` (random patterns hash `seed` and the index).
#[inline(always)]
pub fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The `index`-th value of a random pattern.
#[inline(always)]
fn random_value(min: u64, max: u64, seed: u64, index: u32) -> u128 {
    let span = u128::from(max - min) + 1;
    u128::from(min) + u128::from(splitmix64(seed ^ u64::from(index).wrapping_mul(0xD6E8_FEB8_6659_FD93))) % span
}

/// A field pattern ready for the TX path: its first value and how to step to the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stepper {
    pattern: Pattern,
    mask: u128,
}

impl Stepper {
    /// `pattern` for a field of `bits` bits (1..=128).
    pub fn new(pattern: Pattern, bits: u32) -> Stepper {
        let mask = if bits >= 128 { u128::MAX } else { (1u128 << bits) - 1 };
        Stepper { pattern, mask }
    }

    /// The pattern it steps through.
    pub fn pattern(&self) -> &Pattern {
        &self.pattern
    }

    /// The cursor at frame 0.
    pub fn start(&self) -> Cursor {
        let value = match &self.pattern {
            Pattern::Fixed(v) | Pattern::Auto(v) => *v,
            Pattern::List(v) => v.first().copied().unwrap_or(0),
            Pattern::Counter { start, .. } => *start,
            Pattern::Random { min, max, seed, .. } => random_value(*min, *max, *seed, 0),
            Pattern::ByKey { values, .. } => values.at(0),
            Pattern::BadChecksum => 0,
        };
        Cursor { value: value & self.mask, index: 0 }
    }

    /// The value of a per-flow field for its digit's value `d` ([`Pattern::ByKey`]).
    #[inline(always)]
    pub fn key_value(&self, d: u32) -> u128 {
        match &self.pattern {
            Pattern::ByKey { values, .. } => values.at(d) & self.mask,
            _ => 0,
        }
    }

    /// Move `c` to the next frame's value (a per-flow field's moves with the key, not here).
    #[inline(always)]
    pub fn step(&self, c: &mut Cursor) {
        let next = c.index + 1;
        match &self.pattern {
            Pattern::List(v) => {
                c.index = if next as usize >= v.len() { 0 } else { next };
                c.value = v.get(c.index as usize).copied().unwrap_or(0) & self.mask;
            }
            Pattern::Counter { start, step, count, down } => {
                if next >= *count {
                    *c = Cursor { value: *start & self.mask, index: 0 };
                } else {
                    let v = if *down { c.value.wrapping_sub(*step) } else { c.value.wrapping_add(*step) };
                    *c = Cursor { value: v & self.mask, index: next };
                }
            }
            Pattern::Random { min, max, count, seed } => {
                c.index = if next >= *count { 0 } else { next };
                c.value = random_value(*min, *max, *seed, c.index) & self.mask;
            }
            _ => {}
        }
    }

    /// The value of frame `j` (for tests and for checking the stepping).
    pub fn value_at(&self, j: u64) -> u128 {
        let mut c = self.start();
        for _ in 0..(j % self.pattern.period()) {
            self.step(&mut c);
        }
        c.value
    }
}

/// Where a field sits: its bytes and the bits of its first and last byte that are its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitSpan {
    /// Bit offset from the start of the frame, and width.
    pub bit: usize,
    pub bits: u32,
}

impl BitSpan {
    pub fn first_byte(&self) -> usize {
        self.bit / 8
    }

    pub fn last_byte(&self) -> usize {
        (self.bit + self.bits as usize - 1) / 8
    }

    /// The mask of the field's bits in byte `k` of its span.
    #[inline(always)]
    pub fn byte_mask(&self, k: usize) -> u8 {
        let lo = self.bit.max(k * 8);
        let hi = (self.bit + self.bits as usize).min(k * 8 + 8);
        let width = hi - lo;
        let shift = k * 8 + 8 - hi;
        (((1u16 << width) - 1) << shift) as u8
    }

    /// Byte-aligned and whole bytes: written with a plain copy.
    pub fn aligned(&self) -> bool {
        self.bit.is_multiple_of(8) && self.bits.is_multiple_of(8)
    }
}

/// Write `value` (its low `span.bits` bits) into `buf` at `span`, keeping the other bits of
/// shared bytes. `buf` must hold the span (the caller sized it).
#[inline(always)]
pub fn write_bits(buf: &mut [u8], span: &BitSpan, value: u128) {
    let (b0, b1) = (span.first_byte(), span.last_byte());
    if span.aligned() {
        // Fixed-size stores for the common widths (ports, IPv4 addresses, MACs).
        match b1 + 1 - b0 {
            2 => buf[b0..b0 + 2].copy_from_slice(&(value as u16).to_be_bytes()),
            4 => buf[b0..b0 + 4].copy_from_slice(&(value as u32).to_be_bytes()),
            6 => buf[b0..b0 + 6].copy_from_slice(&(value as u64).to_be_bytes()[2..]),
            n => buf[b0..=b1].copy_from_slice(&value.to_be_bytes()[16 - n..]),
        }
        return;
    }
    // Unaligned fields are at most 32 bits wide (the header tables say so): a u64 window.
    let n = b1 + 1 - b0;
    let mut w: u64 = 0;
    for &b in &buf[b0..=b1] {
        w = w << 8 | u64::from(b);
    }
    let shift = n * 8 - (span.bit - b0 * 8) - span.bits as usize;
    let mask = ((1u64 << span.bits) - 1) << shift;
    w = (w & !mask) | ((value as u64) << shift & mask);
    for (i, b) in buf[b0..=b1].iter_mut().enumerate() {
        *b = (w >> (8 * (n - 1 - i))) as u8;
    }
}

/// Ones'-complement partial sum of the field's own bits (other bits of shared bytes masked out),
/// its first byte taken as the high byte of a 16-bit word. Unfolded: add it, fold at the end.
#[inline(always)]
pub fn span_sum(buf: &[u8], span: &BitSpan) -> u64 {
    let (b0, b1) = (span.first_byte(), span.last_byte());
    if span.aligned() {
        return bytes_sum(&buf[b0..=b1]);
    }
    let mut acc = 0u64;
    for (i, &b) in buf[b0..=b1].iter().enumerate() {
        let byte = u64::from(b & span.byte_mask(b0 + i));
        acc += if i % 2 == 0 { byte << 8 } else { byte };
    }
    acc
}

/// Ones'-complement partial sum of a byte-aligned field of `bytes` bytes holding `value`, its
/// first byte the high byte of a word (as [`span_sum`] reads it back): from the value, without
/// reading the frame.
#[inline(always)]
pub fn value_sum(value: u128, bytes: usize) -> u64 {
    let mut w = if bytes % 2 == 1 { value << 8 } else { value };
    let mut acc = 0u64;
    for _ in 0..bytes.div_ceil(2) {
        acc += (w & 0xFFFF) as u64;
        w >>= 16;
    }
    acc
}

/// Ones'-complement sum of bytes taken as big-endian 16-bit words from an even position.
#[inline(always)]
pub fn bytes_sum(bytes: &[u8]) -> u64 {
    let mut acc = 0u64;
    let mut words = bytes.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Fold an unfolded sum to 16 bits (without complementing).
#[inline(always)]
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    acc as u16
}

/// A sum taken from an even position, moved to the lane it is in: as is (`odd == false`) or
/// byte-swapped (it starts at an odd offset of the checksummed region).
#[inline(always)]
pub fn lane(sum: u64, odd: bool) -> u64 {
    if odd {
        u64::from(fold(sum).swap_bytes())
    } else {
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_step_through_their_values() {
        let c = Stepper::new(Pattern::Counter { start: 10, step: 3, count: 4, down: false }, 16);
        assert_eq!((0..9).map(|j| c.value_at(j)).collect::<Vec<_>>(), [10, 13, 16, 19, 10, 13, 16, 19, 10]);
        let d = Stepper::new(Pattern::Counter { start: 1, step: 2, count: 3, down: true }, 8);
        assert_eq!((0..4).map(|j| d.value_at(j)).collect::<Vec<_>>(), [1, 255, 253, 1], "wraps within 8 bits");
        let l = Stepper::new(Pattern::List(vec![5, 6, 7]), 8);
        assert_eq!((0..5).map(|j| l.value_at(j)).collect::<Vec<_>>(), [5, 6, 7, 5, 6]);
        let r = Stepper::new(Pattern::Random { min: 100, max: 110, count: 5, seed: 9 }, 16);
        let vals: Vec<u128> = (0..10).map(|j| r.value_at(j)).collect();
        assert!(vals.iter().all(|v| (100..=110).contains(v)));
        assert_eq!(vals[..5], vals[5..], "the same values each period");
        let mut cur = r.start();
        for j in 1..10 {
            r.step(&mut cur);
            assert_eq!(cur.value, r.value_at(j));
        }
        let wide = Stepper::new(Pattern::Counter { start: u128::MAX, step: 1, count: 2, down: false }, 128);
        assert_eq!(wide.value_at(1), 0);
    }

    #[test]
    fn bit_writes_keep_their_neighbours() {
        // A VLAN TCI: priority 3 bits, cfi 1, id 12.
        let mut b = [0xFFu8; 4];
        write_bits(&mut b, &BitSpan { bit: 4, bits: 12 }, 0x123);
        assert_eq!(b, [0xF1, 0x23, 0xFF, 0xFF]);
        write_bits(&mut b, &BitSpan { bit: 0, bits: 3 }, 0b010);
        assert_eq!(b[0], 0b0101_0001);
        // An IPv6 flow label: 20 bits at bit 12.
        let mut v6 = [0x60u8, 0, 0, 0];
        write_bits(&mut v6, &BitSpan { bit: 12, bits: 20 }, 0xABCDE);
        assert_eq!(v6, [0x60, 0x0A, 0xBC, 0xDE]);
        let mut mac = [0u8; 8];
        write_bits(&mut mac, &BitSpan { bit: 16, bits: 48 }, 0x0011_2233_4455);
        assert_eq!(mac, [0, 0, 0, 0x11, 0x22, 0x33, 0x44, 0x55]);
    }

    #[test]
    fn sums_by_lane_match_a_whole_sum() {
        let frame: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37).wrapping_add(11)).collect();
        let whole = fold(bytes_sum(&frame));
        // Split into an even-aligned span and an odd one: lanes put them back together.
        for cut in 1..frame.len() {
            let a = bytes_sum(&frame[..cut]);
            let b = lane(bytes_sum(&frame[cut..]), cut % 2 == 1);
            assert_eq!(fold(a + b), whole, "cut at {cut}");
        }
        // A whole-byte field's sum from its value is the one read back.
        for (bytes, value) in [(1usize, 0xABu128), (2, 0xBEEF), (3, 0x12_3456), (4, 0xC612_0001), (6, 0x0200_0000_00FF)]
        {
            let span = BitSpan { bit: 16, bits: 8 * bytes as u32 };
            let mut b = [0xEEu8; 24];
            write_bits(&mut b, &span, value);
            assert_eq!(value_sum(value, bytes), span_sum(&b, &span), "{bytes} bytes");
        }
        let v6 = BitSpan { bit: 0, bits: 128 };
        let mut b = [0u8; 16];
        write_bits(&mut b, &v6, u128::MAX - 5);
        assert_eq!(value_sum(u128::MAX - 5, 16), span_sum(&b, &v6));
        // A sub-byte field counts only its own bits.
        let b = [0xABu8, 0xCD];
        assert_eq!(span_sum(&b, &BitSpan { bit: 4, bits: 8 }), 0x0B00 + 0xC0);
    }
}
