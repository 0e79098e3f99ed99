//! Flow keys: a stack's flows as the values of one mixed-radix number, and the order frames visit
//! them in.
//!
//! A stream with ranges (addresses, ports, MACs, VLAN ids) has one flow per combination of their
//! values. Each range of more than one value is a digit of the key; digit 0 varies fastest. A
//! field that varies per flow takes [`crate::pattern::Pattern::ByKey`]: its value is a function of
//! one digit ([`KeyValues`]). The key is the flow's index within the stack.
//!
//! A [`KeyCursor`] walks a contiguous block of keys `lo..hi` (all of them, or one TX queue's
//! share), from a start, adding a stride coprime with the block's length (1: in order; another:
//! RFC 4814 §4.5's pseudorandom order). Each key is visited once per cycle of `hi - lo` frames, so
//! the cycle count is every key's sequence number. The digits are kept beside the key and carried
//! by additions: no division per frame.
use std::ops::Range;
use std::sync::Arc;

/// The digits of a stack's flow key: the number of values of each (digit 0 fastest). No digits:
/// one flow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeySpec {
    pub radices: Vec<u32>,
}

/// The values a [`Pattern::ByKey`](crate::pattern::Pattern::ByKey) field takes, by its digit's
/// value `d`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyValues {
    /// `base + d` (within the field's width): addresses, MACs, VLAN ids.
    Offset(u128),
    /// `table[d]`: port numbers that wrap at 65535, or an RFC 4814 permutation of them.
    Table(Arc<[u16]>),
}

impl KeyValues {
    /// The value for digit value `d`, before masking to the field's width.
    #[inline(always)]
    pub fn at(&self, d: u32) -> u128 {
        match self {
            KeyValues::Offset(base) => base.wrapping_add(u128::from(d)),
            KeyValues::Table(t) => u128::from(t[d as usize]),
        }
    }

    /// The largest value for digits `0..radix` (`None`: the table is too short for them).
    pub fn max_value(&self, radix: u32) -> Option<u128> {
        match self {
            KeyValues::Offset(base) => base.checked_add(u128::from(radix.max(1) - 1)),
            KeyValues::Table(t) if t.len() >= radix as usize => t[..radix as usize].iter().max().map(|&v| v.into()),
            KeyValues::Table(_) => None,
        }
    }
}

impl KeySpec {
    /// Keys in all: the product of the radices.
    pub fn count(&self) -> u64 {
        self.radices.iter().fold(1u64, |n, &r| n.saturating_mul(u64::from(r)))
    }

    /// A cursor over `block` (within `0..count`), starting `start` keys into it and stepping
    /// `stride` keys at a time (`stride` coprime with the block's length: every key once a cycle).
    pub fn cursor(&self, block: Range<u64>, stride: u64, start: u64) -> KeyCursor {
        let len = block.end - block.start;
        assert!(len > 0 && block.end <= self.count(), "key block {block:?} outside 0..{}", self.count());
        assert!(gcd(stride % len, len) == 1 || len == 1, "stride {stride} is not coprime with {len}");
        let first = block.start + start % len;
        KeyCursor {
            radices: self.radices.clone(),
            digits: self.digits_of(first),
            stride: self.digits_of(stride % len),
            lo_digits: self.digits_of(block.start),
            block_len: self.digits_of(len),
            key: first,
            hi: block.end,
            stride_n: stride % len,
            len,
            pos: 0,
            cycle: 0,
        }
    }

    /// A cursor over every key, in order from key 0.
    pub fn sequential(&self) -> KeyCursor {
        self.cursor(0..self.count(), 1, 0)
    }

    /// `key`'s digits (`key` below the count; the count itself gives all zeros).
    fn digits_of(&self, mut key: u64) -> Vec<u32> {
        self.radices
            .iter()
            .map(|&r| {
                let d = (key % u64::from(r)) as u32;
                key /= u64::from(r);
                d
            })
            .collect()
    }
}

/// Greatest common divisor.
pub fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Where a walk over a block of keys is: the key, its digits, and how many cycles are done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyCursor {
    radices: Vec<u32>,
    digits: Vec<u32>,
    /// The stride, the block's length and its first key as digits.
    stride: Vec<u32>,
    lo_digits: Vec<u32>,
    block_len: Vec<u32>,
    key: u64,
    hi: u64,
    stride_n: u64,
    len: u64,
    /// Frames into the current cycle, and cycles done.
    pos: u64,
    cycle: u64,
}

impl KeyCursor {
    /// The current key.
    #[inline(always)]
    pub fn key(&self) -> u64 {
        self.key
    }

    /// Cycles over the block completed: the current key's sequence number.
    #[inline(always)]
    pub fn cycle(&self) -> u64 {
        self.cycle
    }

    /// Digit `d` of the current key.
    #[inline(always)]
    pub fn digit(&self, d: usize) -> u32 {
        self.digits[d]
    }

    /// Move on by one key (in order): the lowest digit up, carried where it overflows, and back
    /// to the block's start at its end.
    #[inline(always)]
    fn step_one(&mut self) {
        self.key += 1;
        if self.key == self.hi {
            self.key = self.hi - self.len;
            self.digits.clone_from(&self.lo_digits);
            return;
        }
        // Most steps only move the lowest digit.
        if self.digits[0] + 1 < self.radices[0] {
            self.digits[0] += 1;
            return;
        }
        for (d, &r) in self.digits.iter_mut().zip(&self.radices) {
            *d += 1;
            if *d < r {
                return;
            }
            *d = 0;
        }
    }

    /// Frames sent per key of the block (index: key − the block's start) by a walk that started
    /// at `from` (a cursor of the same block) and is now here.
    pub fn sent_per_key(&self, mut from: KeyCursor) -> Vec<u64> {
        let lo = self.hi - self.len;
        let mut sent = vec![self.cycle; self.len as usize];
        for _ in 0..self.pos {
            sent[(from.key - lo) as usize] += 1;
            from.step();
        }
        sent
    }

    /// Move to the next frame's key.
    #[inline(always)]
    pub fn step(&mut self) {
        if self.len == 1 {
            self.cycle += 1;
            return;
        }
        self.pos += 1;
        if self.pos == self.len {
            self.pos = 0;
            self.cycle += 1;
        }
        if self.stride_n == 1 {
            return self.step_one();
        }
        // key + stride, digit by digit; past the block's end, back by its length. A carry or a
        // borrow out of the top digit is the wrap modulo the count, where the sum lands anyway.
        let next = self.key + self.stride_n;
        let mut carry = 0u32;
        for ((d, &s), &r) in self.digits.iter_mut().zip(&self.stride).zip(&self.radices) {
            let v = *d + s + carry;
            (*d, carry) = if v >= r { (v - r, 1) } else { (v, 0) };
        }
        self.key = next;
        if next >= self.hi {
            self.key = next - self.len;
            let mut borrow = 0u32;
            for ((d, &s), &r) in self.digits.iter_mut().zip(&self.block_len).zip(&self.radices) {
                let sub = s + borrow;
                (*d, borrow) = if *d >= sub { (*d - sub, 0) } else { (*d + r - sub, 1) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(radices: &[u32]) -> KeySpec {
        KeySpec { radices: radices.to_vec() }
    }

    /// The digits a cursor holds are always its key's, and the key follows `start + j * stride`
    /// within the block.
    fn walk(s: &KeySpec, block: Range<u64>, stride: u64, start: u64, frames: u64) -> Vec<u64> {
        let mut c = s.cursor(block.clone(), stride, start);
        let len = block.end - block.start;
        (0..frames)
            .map(|j| {
                let want = block.start + (start + j * stride) % len;
                assert_eq!(c.key(), want, "frame {j}");
                assert_eq!(c.digits, s.digits_of(want), "digits of {want}");
                assert_eq!(c.cycle(), j / len, "cycle at frame {j}");
                let k = c.key();
                c.step();
                k
            })
            .collect()
    }

    #[test]
    fn a_walk_visits_every_key_of_its_block_once_a_cycle_with_the_right_digits() {
        let s = spec(&[3, 5, 7]);
        assert_eq!(s.count(), 105);
        // In order over everything, a stride over everything, and strides over blocks that start
        // and end mid-digit.
        for (block, stride, start) in
            [(0..105, 1, 0), (0..105, 52, 17), (0..105, 104, 3), (10..60, 1, 0), (10..60, 17, 49), (99..105, 5, 2)]
        {
            let len = block.end - block.start;
            let keys = walk(&s, block.clone(), stride, start, 3 * len);
            let mut cycle: Vec<u64> = keys[..len as usize].to_vec();
            cycle.sort_unstable();
            assert_eq!(cycle, block.clone().collect::<Vec<_>>(), "{block:?} stride {stride}");
            assert_eq!(keys[..len as usize], keys[len as usize..2 * len as usize]);
        }
    }

    #[test]
    fn one_key_and_no_digits_counts_cycles_as_frames() {
        let mut c = KeySpec::default().sequential();
        for j in 0..5 {
            assert_eq!((c.key(), c.cycle()), (0, j));
            c.step();
        }
        let mut big = spec(&[65535, 256]).cursor(0..65535 * 256, 1, 65534);
        big.step();
        assert_eq!((big.key(), big.digit(0), big.digit(1)), (65535, 0, 1), "a carry into digit 1");
    }

    #[test]
    fn values_by_digit() {
        assert_eq!(KeyValues::Offset(10).at(5), 15);
        assert_eq!(KeyValues::Offset(u128::MAX).max_value(2), None);
        let t = KeyValues::Table(Arc::from(vec![65535u16, 1, 2]));
        assert_eq!((t.at(0), t.at(1)), (65535, 1));
        assert_eq!(t.max_value(3), Some(65535));
        assert_eq!(t.max_value(4), None);
    }
}
