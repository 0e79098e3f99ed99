//! A port's capture buffer: the frames a receiver saw, in order, in a fixed amount of memory
//! allocated when the capture starts (the receive path never allocates).
//!
//! Frames are kept up to the snap length. When the buffer is full, `overwrite` drops the oldest
//! frames to make room (the newest are kept); otherwise later frames are not kept and counted.
//! A filter (terms, all of which must match) keeps only the frames it matches; the others take
//! no room and are not counted as dropped.
use std::collections::VecDeque;

use netrig_wire::capfile::OutRecord;

/// One kept frame.
#[derive(Debug, Clone, Copy)]
struct Rec {
    /// Engine-clock receive time, ns.
    ts_ns: u64,
    /// Where its bytes are, how many were kept, and its length (without FCS).
    at: usize,
    kept: usize,
    len: usize,
}

/// One comparison of a capture filter: the frame's bytes at `at` equal `value` on the `care`
/// bits (a frame too short does not match), or, with `negate`, do not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureTerm {
    pub at: usize,
    pub value: Vec<u8>,
    pub care: Vec<u8>,
    pub negate: bool,
}

impl CaptureTerm {
    pub fn matches(&self, frame: &[u8]) -> bool {
        let hit = frame
            .get(self.at..self.at.saturating_add(self.value.len()))
            .is_some_and(|got| got.iter().zip(&self.value).zip(&self.care).all(|((g, v), c)| (g ^ v) & c == 0));
        hit != self.negate
    }
}

/// The frames of one receive queue.
#[derive(Debug, Default)]
pub struct CaptureRing {
    data: Vec<u8>,
    recs: VecDeque<Rec>,
    /// Where the next frame's bytes go.
    write: usize,
    snaplen: usize,
    overwrite: bool,
    /// Frames kept: those matching every term.
    filter: Vec<CaptureTerm>,
    /// Frames not kept (buffer full without overwrite) or dropped to make room (with overwrite).
    pub dropped: u64,
}

/// Smallest frame the ring plans room for: its record table holds `bytes / MIN_FRAME` entries.
const MIN_FRAME: usize = 60;

impl CaptureRing {
    /// An empty ring of `bytes` (allocated now) keeping `snaplen` bytes of each frame.
    pub fn new(bytes: usize, snaplen: usize, overwrite: bool) -> CaptureRing {
        CaptureRing {
            data: vec![0; bytes],
            recs: VecDeque::with_capacity(bytes / MIN_FRAME + 1),
            write: 0,
            snaplen: snaplen.max(1),
            overwrite,
            filter: Vec::new(),
            dropped: 0,
        }
    }

    /// Keep only the frames that match every one of `terms`.
    pub fn with_filter(mut self, terms: Vec<CaptureTerm>) -> CaptureRing {
        self.filter = terms;
        self
    }

    /// Forget every frame (keeps the memory).
    pub fn clear(&mut self) {
        self.recs.clear();
        self.write = 0;
        self.dropped = 0;
    }

    /// Bytes kept of each frame.
    pub fn snaplen(&self) -> usize {
        self.snaplen
    }

    pub fn len(&self) -> usize {
        self.recs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    /// Keep `frame`, received at `ts_ns` (engine clock).
    #[inline]
    pub fn push(&mut self, frame: &[u8], ts_ns: u64) {
        if !self.filter.iter().all(|t| t.matches(frame)) {
            return;
        }
        let kept = frame.len().min(self.snaplen);
        if kept > self.data.len() {
            self.dropped += 1;
            return;
        }
        let mut at = self.write;
        if at + kept > self.data.len() {
            at = 0;
        }
        // Live bytes run from the oldest record to `write` (wrapping): evict what the new frame
        // would overwrite, or give up on it.
        while let Some(old) = self.recs.front().copied() {
            let overlaps = old.at < at + kept && at < old.at + old.kept;
            let full = self.recs.len() == self.recs.capacity();
            if !overlaps && !full {
                break;
            }
            if !self.overwrite {
                self.dropped += 1;
                return;
            }
            self.recs.pop_front();
            self.dropped += 1;
        }
        self.data[at..at + kept].copy_from_slice(&frame[..kept]);
        self.recs.push_back(Rec { ts_ns, at, kept, len: frame.len() });
        self.write = at + kept;
    }

    /// The kept frames, oldest first, with `fcs(frame)` appended to whole frames (what the wire
    /// carried): `(engine-clock ts, bytes, length on the wire)`.
    pub fn frames(&self, fcs: impl Fn(&[u8]) -> [u8; 4]) -> Vec<(u64, Vec<u8>, u32)> {
        self.recs
            .iter()
            .map(|r| {
                let mut bytes = self.data[r.at..r.at + r.kept].to_vec();
                if r.kept == r.len {
                    let room = self.snaplen.saturating_sub(r.kept).min(4);
                    bytes.extend_from_slice(&fcs(&bytes)[..room]);
                }
                (r.ts_ns, bytes, (r.len + 4) as u32)
            })
            .collect()
    }
}

/// Records for a capture file from `(ts, bytes, wire length)` with the realtime offset applied.
pub fn out_records(frames: &[(u64, Vec<u8>, u32)], realtime_offset_ns: i128) -> Vec<OutRecord<'_>> {
    frames
        .iter()
        .map(|(ts, b, len)| OutRecord {
            ts_ns: (i128::from(*ts) + realtime_offset_ns).max(0) as u64,
            data: b,
            orig_len: *len,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: usize, v: u8) -> Vec<u8> {
        vec![v; n]
    }

    #[test]
    fn keeps_in_order_and_overwrites_the_oldest() {
        let mut r = CaptureRing::new(300, 1000, true);
        for i in 0..10u8 {
            r.push(&frame(100, i), u64::from(i));
        }
        let got = r.frames(|_| [0xAA; 4]);
        let first: Vec<u8> = got.iter().map(|(_, b, _)| b[0]).collect();
        assert_eq!(first, [7, 8, 9], "the newest frames that fit");
        assert_eq!(got[0].1.len(), 104, "FCS appended");
        assert_eq!(r.dropped, 7);
        let mut keep = CaptureRing::new(300, 64, false);
        for i in 0..10u8 {
            keep.push(&frame(100, i), 0);
        }
        let got = keep.frames(|_| [0; 4]);
        assert_eq!(got.iter().map(|(_, b, _)| b[0]).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert!(got.iter().all(|(_, b, len)| b.len() == 64 && *len == 104), "snapped: no FCS, length kept");
        assert_eq!(keep.dropped, 6);
        keep.clear();
        assert!(keep.is_empty());
    }

    #[test]
    fn a_filter_keeps_the_frames_every_term_matches() {
        let term = |at: usize, value: &[u8], care: &[u8], negate: bool| CaptureTerm {
            at,
            value: value.to_vec(),
            care: care.to_vec(),
            negate,
        };
        // byte 1 is 0x4_ (the low nibble not compared) and byte 3 is not 7
        let terms = vec![term(1, &[0x40], &[0xF0], false), term(3, &[7], &[0xFF], true)];
        let mut r = CaptureRing::new(1000, 1000, false).with_filter(terms.clone());
        let frames: [&[u8]; 5] = [&[0, 0x45, 0, 6], &[0, 0x55, 0, 6], &[0, 0x4F, 0, 7], &[0, 0x40, 0, 8], &[0, 0x45]];
        for f in frames {
            r.push(f, 0);
        }
        let kept: Vec<Vec<u8>> = r.frames(|_| [0; 4]).into_iter().map(|(_, b, _)| b[..b.len() - 4].to_vec()).collect();
        assert_eq!(
            kept,
            [vec![0, 0x45, 0, 6], vec![0, 0x40, 0, 8], vec![0, 0x45]],
            "a short frame lacks byte 3: not 7"
        );
        assert_eq!(r.dropped, 0, "a frame the filter leaves out is not a dropped one");
        assert!(!terms[0].matches(&[0]), "too short to hold the compared byte: no match");
    }
}
