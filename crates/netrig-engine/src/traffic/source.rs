//! A source: one traffic unit's frames as the TX worker that sends them writes them, one at a time.
//!
//! Both TX workers (a trial's, for its share of a stream; the generator's, for an OTG flow) keep
//! one [`Source`] per unit they send and ask it for the next frame: the next size of the unit's
//! size schedule, the next key of its walk written by its header stack
//! ([`netrig_wire::stack::CompiledStack::fill_held`], where the signature is written), or a
//! capture's next frame stamped where it has room. The source counts what it wrote; the worker
//! decides when frames go and publishes its counts. So a frame's contents, its sequence number and
//! what is counted of it are the same for every entry point.
//!
//! Sequence numbers: a key's sequence number is the number of cycles its walk completed over the
//! keys, less the frames without room for the signature (`untracked`: only a source of one key,
//! an OTG flow, has sizes that small; a stream's sizes all carry it, validated).
use std::sync::Arc;

use netrig_wire::signature::Signature;
use netrig_wire::stack::{CompiledStack, FillState, KeyCursor};
use netrig_wire::stamp;

use crate::traffic::replay::Replay;

/// Where a source's frames come from.
enum Frames {
    /// A header stack, its key walking from `first`.
    Stack { stack: Arc<CompiledStack>, at: FillState, first: Box<KeyCursor> },
    /// A capture's frames, as captured, with each flow's next sequence number.
    Replay { replay: Arc<Replay>, seq: Vec<u64> },
}

/// One frame a source wrote.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Written {
    /// Bytes written into the buffer.
    pub len: usize,
    /// Its size as netrig counts frames (with the FCS).
    pub wire: u64,
    /// It carries the signature.
    pub signed: bool,
}

/// One traffic unit's frames and what of them was written (see the module's documentation).
pub(crate) struct Source {
    frames: Frames,
    /// Size index per frame, cycled; each size's bytes with the FCS, by index.
    schedule: Box<[u16]>,
    wire: Box<[u64]>,
    /// Position in the size schedule (or the capture).
    size_at: usize,
    /// Some size has no room for the signature.
    unsigned_sizes: bool,
    /// The unit's first flow id: key `k` is sent as flow `flow_base + k`.
    flow_base: u32,
    pub sent: u64,
    pub bytes: u64,
    /// Of `sent`: frames without room for the signature.
    pub untracked: u64,
    /// Replays: frames sent with the signature.
    pub stamped: u64,
    /// TX timestamps (ns since the epoch) of the first and last frame written.
    pub first_ts: u64,
    pub last_ts: u64,
}

impl Source {
    /// Frames of `stack` walking the keys of `first`, sizes by `schedule` (indices into `sizes`,
    /// each with the FCS).
    pub(crate) fn stack(
        stack: Arc<CompiledStack>,
        first: KeyCursor,
        schedule: &[u16],
        sizes: &[usize],
        flow_base: u32,
    ) -> Source {
        let at = stack.start_with(first.clone());
        let mut src = Source::new(Frames::Stack { stack, at, first: Box::new(first) }, schedule, sizes, flow_base);
        src.unsigned_sizes = src.any_unsigned();
        src
    }

    /// The frames of `replay`, in the capture's order, its flows numbered from `flow_base`.
    pub(crate) fn replay(replay: Arc<Replay>, flow_base: u32) -> Source {
        let seq = vec![0; replay.flows as usize];
        Source::new(Frames::Replay { replay, seq }, &[], &[], flow_base)
    }

    fn new(frames: Frames, schedule: &[u16], sizes: &[usize], flow_base: u32) -> Source {
        Source {
            frames,
            schedule: schedule.into(),
            wire: sizes.iter().map(|&n| n as u64).collect(),
            size_at: 0,
            unsigned_sizes: false,
            flow_base,
            sent: 0,
            bytes: 0,
            untracked: 0,
            stamped: 0,
            first_ts: 0,
            last_ts: 0,
        }
    }

    /// Back to the first frame, nothing written (a flow started again).
    pub(crate) fn restart(&mut self) {
        match &mut self.frames {
            Frames::Stack { stack, at, first } => *at = stack.start_with((**first).clone()),
            Frames::Replay { seq, .. } => seq.fill(0),
        }
        self.size_at = 0;
        (self.sent, self.bytes, self.untracked, self.stamped, self.first_ts, self.last_ts) = (0, 0, 0, 0, 0, 0);
    }

    /// Go on with another stack of the same walk, or other sizes (a flow updated): from where
    /// the walk is, and the new size schedule's start when it changed.
    pub(crate) fn update(&mut self, new: Arc<CompiledStack>, schedule: &[u16], sizes: &[usize]) {
        if let Frames::Stack { stack, .. } = &mut self.frames {
            *stack = new;
        }
        if *schedule != *self.schedule {
            self.size_at = 0;
        }
        (self.schedule, self.wire) = (schedule.into(), sizes.iter().map(|&n| n as u64).collect());
        self.unsigned_sizes = self.any_unsigned();
    }

    /// Some size of the stack has no room for the signature.
    fn any_unsigned(&self) -> bool {
        match &self.frames {
            Frames::Stack { stack, .. } => (0..self.wire.len()).any(|size| !stack.signed(size)),
            Frames::Replay { .. } => false,
        }
    }

    /// Write the next frame into `buf`, which holds what `held` says (`TxQueue::send_held`),
    /// signed under tag `trial` with transmit stamp `ts`, and count it.
    #[inline]
    pub(crate) fn write(&mut self, buf: &mut [u8], held: &mut u64, trial: u32, warmup: bool, ts: u64) -> Written {
        let w = match &mut self.frames {
            Frames::Stack { stack, at, .. } => {
                let size = self.schedule[step_cycle(&mut self.size_at, self.schedule.len())] as usize;
                let seq = at.key.cycle() - self.untracked;
                let flow_id = self.flow_base + at.key.key() as u32;
                let sig = Signature { trial, warmup, flow_id, seq, tx_ts_ns: ts };
                let mut signed = true;
                if self.unsigned_sizes && !stack.signed(size) {
                    // Only a source with a size too small for the signature looks (most never do).
                    (signed, self.untracked) = (false, self.untracked + 1);
                }
                Written { len: stack.fill_held(buf, held, size, at, &sig), wire: self.wire[size], signed }
            }
            Frames::Replay { replay, seq } => {
                // The capture's next frame, as captured; stamped where it has room.
                let f = &replay.frames[step_cycle(&mut self.size_at, replay.frames.len())];
                let out = &mut buf[..f.len];
                out.copy_from_slice(replay.bytes(f));
                *held = 0;
                if let Some(site) = &f.site {
                    let slot = &mut seq[f.flow as usize];
                    let sig = Signature { trial, warmup, flow_id: self.flow_base + f.flow, seq: *slot, tx_ts_ns: ts };
                    stamp::stamp(out, site, &sig);
                    *slot += 1;
                    self.stamped += 1;
                }
                Written { len: f.len, wire: f.size, signed: f.site.is_some() }
            }
        };
        if self.sent == 0 {
            self.first_ts = ts;
        }
        self.last_ts = ts;
        self.sent += 1;
        self.bytes += w.wire;
        w
    }

    /// Frames sent per key of the walk (the next sequence number of each), or per flow of a
    /// replay.
    pub(crate) fn per_key(&self) -> Vec<u64> {
        match &self.frames {
            Frames::Stack { at, first, .. } => at.key.sent_per_key((**first).clone()),
            Frames::Replay { seq, .. } => seq.clone(),
        }
    }
}

/// The place `at` holds in a cycle of `len` (a size schedule, a capture's frames), and `at`
/// moved to the next: a compare, not a division, per frame.
#[inline(always)]
pub(crate) fn step_cycle(at: &mut usize, len: usize) -> usize {
    let i = *at;
    *at = if i + 1 == len { 0 } else { i + 1 };
    i
}

#[cfg(test)]
mod tests {
    use super::Source;
    use netrig_wire::dissect::locate;
    use netrig_wire::stack::{compile, HeaderKind, HeaderSpec, KeySpec, Payload, Site, StackSpec};
    use std::sync::Arc;

    /// An OTG flow whose smaller size has no room for the signature (64 B with a VLAN tag):
    /// those frames go out untracked and the signed ones are numbered without gaps, so a
    /// receiver counts no loss; a restart numbers from 0 again.
    #[test]
    fn frames_too_small_for_the_signature_leave_no_gap_in_the_sequence() {
        let h = |kind| HeaderSpec { kind, fields: Vec::new(), bytes: Vec::new() };
        let headers = [HeaderKind::Ethernet, HeaderKind::Vlan, HeaderKind::Ipv4, HeaderKind::Udp].map(h).to_vec();
        let spec = StackSpec { headers, payload: Payload::zeros(), site: Site::End, keys: KeySpec::default() };
        let stack = Arc::new(compile(&spec, &[60, 124]).unwrap());
        let mut src = Source::stack(stack.clone(), stack.keys().sequential(), &[0, 1], &[64, 128], 3);
        let mut buf = [0u8; 256];
        let mut seqs = Vec::new();
        for ts in 0..6 {
            let w = src.write(&mut buf, &mut 0, 9, false, ts);
            assert_eq!((w.wire, w.signed), ([64, 128][ts as usize % 2], ts % 2 == 1));
            if let Some(sig) = w.signed.then(|| locate(&buf[..w.len], Site::End)).flatten() {
                assert_eq!((sig.flow_id, sig.trial, sig.tx_ts_ns), (3, 9, ts));
                seqs.push(sig.seq);
            }
        }
        assert_eq!((seqs, src.sent, src.untracked, src.bytes), (vec![0, 1, 2], 6, 3, 576));
        src.restart();
        let w = src.write(&mut buf, &mut 0, 9, false, 7);
        assert_eq!((w.signed, src.sent, src.untracked), (false, 1, 1));
        let w = src.write(&mut buf, &mut 0, 9, false, 8);
        assert_eq!(locate(&buf[..w.len], Site::End).map(|s| s.seq), Some(0));
    }
}
