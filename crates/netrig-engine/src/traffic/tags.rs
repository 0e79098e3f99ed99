//! Trial tags: the nonce in every frame's signature that tells one trial's (or one generator
//! start's) frames from an earlier one's, still in flight, and from a concurrent or foreign one's.
use std::sync::Mutex;

use netrig_wire::signature::TRIAL_MASK;

use crate::traffic::analyze::{TrialIdent, EARLIER_TRIALS};

/// Trial tags: a random base per process, then one tag per trial, so consecutive trials of a
/// process never share a tag and two processes share one with probability 2^-23.
struct Tags {
    next: u32,
    claimed: u32,
    running: Vec<u32>,
}

static TAGS: Mutex<Tags> = Mutex::new(Tags { next: 0, claimed: 0, running: Vec::new() });

/// A claimed tag; no longer running once dropped.
pub struct TagClaim(u32);

impl Drop for TagClaim {
    fn drop(&mut self) {
        TAGS.lock().unwrap_or_else(|e| e.into_inner()).running.retain(|&t| t != self.0);
    }
}

/// Claim the next trial tag of this process: what the trial's receivers need to tell its frames
/// from an earlier trial's (late) and from a concurrent or foreign trial's.
pub fn claim_tag() -> (TagClaim, TrialIdent) {
    let mut g = TAGS.lock().unwrap_or_else(|e| e.into_inner());
    if g.claimed == 0 {
        use std::hash::{BuildHasher, Hasher};
        // RandomState is keyed from the OS's randomness once per process.
        g.next = std::collections::hash_map::RandomState::new().build_hasher().finish() as u32 & TRIAL_MASK;
    }
    let tag = g.next;
    g.next = (tag + 1) & TRIAL_MASK;
    let ident = TrialIdent { tag, earlier: g.claimed.min(EARLIER_TRIALS), concurrent: g.running.clone() };
    g.claimed = g.claimed.saturating_add(1);
    g.running.push(tag);
    (TagClaim(tag), ident)
}
