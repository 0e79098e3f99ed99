//! The per-frame program of a compiled stack (the TX hot path: no allocation, no whole-frame sum).
use super::{checksum_value, field_sums, start_cursors, Csum, HeaderKind, LengthFix, Varying, MAX_CHECKSUMS};
use crate::pattern::{bytes_sum, lane, write_bits, Cursor};
use crate::signature::Signature;

/// A stack ready for the TX path (see [`super::compile`]).
#[derive(Debug, Clone)]
pub struct CompiledStack {
    pub(super) template: Vec<u8>,
    pub(super) headers_len: usize,
    pub(super) kinds: Vec<HeaderKind>,
    pub(super) varying: Vec<Varying>,
    pub(super) lengths: Vec<LengthFix>,
    pub(super) csums: Vec<Csum>,
    /// Frame lengths without FCS, by size index.
    pub(super) lens: Vec<usize>,
    /// Where each length carries the signature ([`crate::signature::Site`]) and how many bytes of
    /// it: the signature's, or 0 (untracked, or a stack without one).
    pub(super) sig_at: Vec<usize>,
    pub(super) sig_lens: Vec<usize>,
    /// `bases[size * csums + c]`: checksum `c`'s region sum with every varying part zeroed.
    pub(super) bases: Vec<u64>,
    /// Same shape: the signature sits in an odd lane of checksum `c`'s region.
    pub(super) sig_odd: Vec<bool>,
}

impl CompiledStack {
    /// Frame lengths (without FCS) by size index.
    pub fn lens(&self) -> &[usize] {
        &self.lens
    }

    /// Bytes of headers (the payload and the signature follow).
    pub fn headers_len(&self) -> usize {
        self.headers_len
    }

    /// Frames of size index `size` carry the signature; without room for it they are sent
    /// untracked: counted per port, not per flow.
    #[inline]
    pub fn signed(&self, size: usize) -> bool {
        self.sig_lens[size] > 0
    }

    /// The header kinds, in order.
    pub fn kinds(&self) -> &[HeaderKind] {
        &self.kinds
    }

    /// Fields that change from frame to frame.
    pub fn varying_fields(&self) -> usize {
        self.varying.len()
    }

    /// Where the varying fields start (frame 0); one cursor per varying field.
    pub fn cursors(&self) -> Vec<Cursor> {
        start_cursors(&self.varying)
    }

    /// Write the next frame of size index `size` into `buf` (at least that long) with signature
    /// `sig` at the stack's site (when it has room: [`Self::signed`]), and advance `cursors` to the
    /// following frame. Returns the length.
    #[inline]
    pub fn fill(&self, buf: &mut [u8], size: usize, cursors: &mut [Cursor], sig: &Signature) -> usize {
        let len = self.lens[size];
        let out = &mut buf[..len];
        out.copy_from_slice(&self.template[..len]);
        for l in &self.lengths {
            out[l.at..l.at + 2].copy_from_slice(&((len - l.minus) as u16).to_be_bytes());
        }
        for (v, c) in self.varying.iter().zip(cursors.iter()) {
            write_bits(out, &v.span, c.value);
        }
        let (sig_at, sig_len) = (self.sig_at[size], self.sig_lens[size]);
        if sig_len > 0 {
            sig.emit(&mut out[sig_at..]);
        }
        let n = self.csums.len();
        if n > 0 {
            self.checksums(out, size, sig_at..sig_at + sig_len);
        }
        for (v, c) in self.varying.iter().zip(cursors.iter_mut()) {
            v.stepper.step(c);
        }
        len
    }

    /// Write the checksums of a frame whose other bytes are final.
    #[inline(always)]
    fn checksums(&self, out: &mut [u8], size: usize, sig: std::ops::Range<usize>) {
        let n = self.csums.len();
        let mut acc = [0u64; MAX_CHECKSUMS];
        acc[..n].copy_from_slice(&self.bases[size * n..size * n + n]);
        field_sums(out, &self.varying, &mut acc);
        let sig_sum = bytes_sum(&out[sig]);
        let odd = &self.sig_odd[size * n..size * n + n];
        for (c, cs) in self.csums.iter().enumerate() {
            if cs.end.is_none() {
                acc[c] += lane(sig_sum, odd[c]);
            }
        }
        for (c, cs) in self.csums.iter().enumerate() {
            let v = checksum_value(acc[c], cs.udp, cs.bad);
            out[cs.at..cs.at + 2].copy_from_slice(&v.to_be_bytes());
            for &(o, odd) in &cs.outer {
                acc[o] += lane(u64::from(v), odd);
            }
        }
    }

    /// Frame `j` of size index `size` (builds the frames before it: for tests and previews).
    pub fn frame(&self, size: usize, j: u64, sig: &Signature) -> Vec<u8> {
        let mut cursors = self.cursors();
        let mut buf = vec![0u8; self.lens[size]];
        for _ in 0..j {
            self.fill(&mut buf, size, &mut cursors, sig);
        }
        self.fill(&mut buf, size, &mut cursors, sig);
        buf
    }

    /// The checksum regions, for tests: (field offset, region start, region end or the frame's).
    pub fn checksum_regions(&self) -> Vec<(usize, usize, Option<usize>)> {
        self.csums.iter().map(|c| (c.at, c.start, c.end)).collect()
    }
}
