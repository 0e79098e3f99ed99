//! The per-frame program of a compiled stack (the TX hot path: no allocation, no whole-frame sum).
use super::{checksum_value, start_cursors, Csum, HeaderKind, KeyCursor, KeySpec, Varying, MAX_CHECKSUMS};
use crate::pattern::{bytes_sum, lane, Cursor};
use crate::signature::Signature;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where a walk through a stack's frames is: each varying field's cursor and the flow key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FillState {
    pub cursors: Vec<Cursor>,
    pub key: KeyCursor,
}

/// One frame length of a compiled stack: its template (lengths and the checksums that do not
/// change per frame written) and where it carries the signature.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sized {
    /// The template's offset in `CompiledStack::sized`, and the frame length without FCS.
    pub(super) at: usize,
    pub(super) len: usize,
    /// Where it carries the signature ([`crate::signature::Site`]) and how many bytes of it: the
    /// signature's, or 0 (untracked, or a stack without one).
    pub(super) sig_at: usize,
    pub(super) sig_len: usize,
}

/// A stack ready for the TX path (see [`super::compile`]).
#[derive(Debug, Clone)]
pub struct CompiledStack {
    /// Unique per compilation in this process (a clone keeps it: the same bytes), never 0: it
    /// names the templates in buffers ([`Self::fill_held`]).
    pub(super) id: u64,
    /// Per length, its template, back to back.
    pub(super) sized: Vec<u8>,
    pub(super) sizes: Vec<Sized>,
    pub(super) lens: Vec<usize>,
    pub(super) headers_len: usize,
    pub(super) kinds: Vec<HeaderKind>,
    pub(super) varying: Vec<Varying>,
    /// The checksums a frame's own values change (a varying field, the signature or the payload
    /// after it, or an inner such checksum in their region), innermost first. The others are in
    /// the templates.
    pub(super) csums: Vec<Csum>,
    /// `bases[size * csums + c]`: checksum `c`'s region sum with every varying part zeroed (the
    /// templates' checksums included).
    pub(super) bases: Vec<u64>,
    /// Same shape: the signature sits in an odd lane of checksum `c`'s region.
    pub(super) sig_odd: Vec<bool>,
    /// Some checksum covers the signature.
    pub(super) sig_summed: bool,
    /// The flow key's digits.
    pub(super) keys: KeySpec,
}

/// Compilations so far ([`CompiledStack::id`]).
static COMPILED: AtomicU64 = AtomicU64::new(0);

impl CompiledStack {
    pub(super) fn next_id() -> u64 {
        COMPILED.fetch_add(1, Ordering::Relaxed) + 1
    }

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
        self.sizes[size].sig_len > 0
    }

    /// The header kinds, in order.
    pub fn kinds(&self) -> &[HeaderKind] {
        &self.kinds
    }

    /// Fields that change from frame to frame.
    pub fn varying_fields(&self) -> usize {
        self.varying.len()
    }

    /// The flow key's digits.
    pub fn keys(&self) -> &KeySpec {
        &self.keys
    }

    /// Frame 0 of a walk over every flow in order.
    pub fn start(&self) -> FillState {
        self.start_with(self.keys.sequential())
    }

    /// Frame 0 of a walk over the flows `key` visits.
    pub fn start_with(&self, key: KeyCursor) -> FillState {
        FillState { cursors: start_cursors(&self.varying), key }
    }

    /// Write the next frame of size index `size` into `buf` (at least that long), for the flow
    /// `st.key` is at, with signature `sig` at the stack's site (when it has room:
    /// [`Self::signed`]), and advance `st` to the following frame. Returns the length.
    #[inline]
    pub fn fill(&self, buf: &mut [u8], size: usize, st: &mut FillState, sig: &Signature) -> usize {
        self.fill_held(buf, &mut 0, size, st, sig)
    }

    /// [`Self::fill`] into a buffer that holds what `held` says (`TxQueue::send_held`'s mark):
    /// when that is this stack's template of this size, only the bytes that change from frame to
    /// frame are written (the varying fields, the signature, the checksums: every frame writes
    /// them all); else the whole template first. `held` is then this template's mark. A 1514-byte
    /// frame's copy was 4–6 % of a sending CPU.
    #[inline]
    pub fn fill_held(&self, buf: &mut [u8], held: &mut u64, size: usize, st: &mut FillState, sig: &Signature) -> usize {
        let sz = self.sizes[size];
        let out = &mut buf[..sz.len];
        let mark = (self.id << 16) | (size as u64 + 1);
        if *held != mark {
            out.copy_from_slice(&self.sized[sz.at..sz.at + sz.len]);
            *held = mark;
        }
        if self.varying.is_empty() && self.csums.is_empty() {
            // The same headers in every frame: the template and the signature.
            if sz.sig_len > 0 {
                sig.emit(&mut out[sz.sig_at..]);
            }
            st.key.step();
            return sz.len;
        }
        let n = self.csums.len();
        let mut acc = [0u64; MAX_CHECKSUMS];
        for (a, &b) in acc.iter_mut().zip(&self.bases[size * n..size * n + n]) {
            *a = b; // not a copy_from_slice: a call to memcpy for a few words
        }
        // Each varying field: its value (a per-flow one's from the key), its bytes, its sum into
        // the checksums over it, then the next frame's value.
        for (v, c) in self.varying.iter().zip(st.cursors.iter_mut()) {
            let value = match v.digit {
                Some(d) => v.stepper.key_value(st.key.digit(d)),
                None => {
                    let value = c.value;
                    v.stepper.step(c);
                    value
                }
            };
            let s = v.put(out, value);
            for &(k, odd) in &v.contribs {
                acc[k] += lane(s, odd);
            }
        }
        if sz.sig_len > 0 {
            sig.emit(&mut out[sz.sig_at..]);
        }
        if n > 0 {
            self.checksums(out, size, sz.sig_at..sz.sig_at + sz.sig_len, &mut acc);
        }
        st.key.step();
        sz.len
    }

    /// Write the checksums of a frame whose other bytes are final, from their sums so far.
    #[inline(always)]
    fn checksums(&self, out: &mut [u8], size: usize, sig: std::ops::Range<usize>, acc: &mut [u64; MAX_CHECKSUMS]) {
        let n = self.csums.len();
        if self.sig_summed {
            let sig_sum = bytes_sum(&out[sig]);
            let odd = &self.sig_odd[size * n..size * n + n];
            for (c, cs) in self.csums.iter().enumerate() {
                if cs.end.is_none() {
                    acc[c] += lane(sig_sum, odd[c]);
                }
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
        let mut st = self.start();
        let mut buf = vec![0u8; self.lens[size]];
        for _ in 0..j {
            self.fill(&mut buf, size, &mut st, sig);
        }
        self.fill(&mut buf, size, &mut st, sig);
        buf
    }
}
