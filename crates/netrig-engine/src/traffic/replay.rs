//! pcap replay: a stream whose frames are a capture's, in order, looped as often as the trial
//! needs, at the stream's rate.
//!
//! The capture is read once, when the stream is configured ([`Replay::load`]): the whole file
//! into one buffer of at most [`MAX_CAPTURE_BYTES`] (a larger file is refused with the remedy),
//! parsed by [`netrig_wire::pcap`] (errors name the file and the record), frames pointing into
//! that buffer. Nothing is copied per frame beyond writing it into the TX queue's buffer.
//!
//! Stamping (`stamp`): every frame with room for it gets the signature where the receiver looks
//! ([`netrig_wire::stamp`]); its flow is its captured 5-tuple (VLAN ids, addresses, protocol,
//! ports or echo identifier; MACs and EtherType for non-IP), numbered in order of first
//! appearance from the stream's first flow id, folded onto [`MAX_REPLAY_FLOWS`] ids beyond that.
//! Frames without room (ARP, too short a payload, other protocols) go out as captured and are
//! counted apart (`unstamped`). Without stamping no frame is counted by the receiver, and the
//! stream's loss is not measured.
use std::collections::HashMap;
use std::io::Read;

use netrig_wire::pcap::{self, Capture};
use netrig_wire::stamp::{self, StampSite};
use netrig_wire::{ethernet, vlan, EtherType};

use crate::error::ConfigError;

/// Largest capture file read (bytes): it is held in memory whole for the trial.
pub const MAX_CAPTURE_BYTES: u64 = 256 << 20;
/// Most flow ids of a stamped replay; 5-tuples beyond are folded onto them (modulo).
pub const MAX_REPLAY_FLOWS: u32 = 1 << 16;
/// What a frame shorter than the Ethernet minimum counts on the wire (without FCS): padded to 60.
const MIN_WIRE_LEN: usize = 60;
const FCS_LEN: usize = 4;

/// One frame of a replay: where it is in the capture, and where the signature goes.
#[derive(Debug, Clone, Copy)]
pub struct ReplayFrame {
    pub offset: usize,
    pub len: usize,
    /// Its size as netrig counts frames: at least 64 bytes, including the FCS.
    pub size: u64,
    /// Where the signature goes (stamped replays only).
    pub site: Option<StampSite>,
    /// Stream-local flow index (stamped frames).
    pub flow: u32,
}

/// A loaded capture, ready to replay.
pub struct Replay {
    pub path: String,
    pub stamp: bool,
    pub capture: Capture,
    pub frames: Vec<ReplayFrame>,
    /// Flow ids this stream needs (1 when nothing is stamped).
    pub flows: u32,
    /// Frames stamped / not stamped per pass through the capture.
    pub stamped_per_pass: u64,
    /// Bytes per pass (frame sizes as netrig counts them, including FCS).
    pub bytes_per_pass: u64,
    /// Largest frame without its VLAN tags and FCS (what the port's MTU limits), and its record (from 1).
    pub max_untagged_len: usize,
    pub max_record: usize,
    /// Largest frame as captured (tags included, no FCS).
    pub max_len: usize,
    /// Frames that already carry a netrig signature (a capture of a netrig trial).
    pub signed_in_capture: u64,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay")
            .field("path", &self.path)
            .field("stamp", &self.stamp)
            .field("frames", &self.frames.len())
            .field("flows", &self.flows)
            .finish()
    }
}

impl PartialEq for Replay {
    fn eq(&self, o: &Self) -> bool {
        self.path == o.path && self.stamp == o.stamp && self.capture == o.capture
    }
}

fn vlan_tags(frame: &[u8]) -> usize {
    let mut n = 0;
    let mut at = ethernet::HEADER_LEN - 2;
    while let Some(&[a, b]) = frame.get(at..at + 2) {
        let t = u16::from_be_bytes([a, b]);
        if t != EtherType::VLAN && t != EtherType::QINQ {
            break;
        }
        n += 1;
        at += vlan::HEADER_LEN;
    }
    n
}

impl Replay {
    /// Read and parse the capture at `path` (field `pcap`), and with `stamp` find every frame's
    /// place for the signature (field `pcap_stamp`: refused when no frame has one).
    pub fn load(path: &str, stamp: bool) -> Result<Replay, ConfigError> {
        let e = |m: String| ConfigError::new("pcap", format!("{path}: {m}"));
        let file = std::fs::File::open(path).map_err(|x| e(format!("cannot open: {x}")))?;
        let meta = file.metadata().map_err(|x| e(format!("cannot read: {x}")))?;
        if !meta.is_file() {
            return Err(e("not a regular file: give a capture file (pcap or pcapng)".into()));
        }
        let size = meta.len();
        if size > MAX_CAPTURE_BYTES {
            return Err(e(format!(
                "{} MiB is above the limit of {} MiB a replay holds in memory: cut it (editcap -r FILE OUT 1-100000, or tcpdump -r FILE -c N -w OUT)",
                size >> 20,
                MAX_CAPTURE_BYTES >> 20
            )));
        }
        let mut data = Vec::with_capacity(size as usize);
        file.take(MAX_CAPTURE_BYTES + 1).read_to_end(&mut data).map_err(|x| e(format!("cannot read: {x}")))?;
        if data.len() as u64 > MAX_CAPTURE_BYTES {
            return Err(e(format!("grew beyond {} MiB while being read", MAX_CAPTURE_BYTES >> 20)));
        }
        let capture = pcap::parse(data).map_err(|x| e(x.0))?;
        Self::from_capture(path, capture, stamp)
    }

    /// A replay of a parsed capture (see [`Replay::load`]).
    pub fn from_capture(path: &str, capture: Capture, stamp: bool) -> Result<Replay, ConfigError> {
        let mut keys: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut frames = Vec::with_capacity(capture.records.len());
        let (mut stamped, mut bytes, mut signed, mut max_untagged, mut max_record) = (0u64, 0u64, 0u64, 0usize, 1);
        for (i, r) in capture.records.iter().enumerate() {
            let f = capture.frame(i);
            let untagged = r.len - vlan::HEADER_LEN * vlan_tags(f);
            if untagged > max_untagged {
                (max_untagged, max_record) = (untagged, i + 1);
            }
            signed += u64::from(netrig_wire::dissect::find_signature(f).is_some());
            let site = if stamp { stamp::stamp_site(f) } else { None };
            let mut flow = 0;
            if site.is_some() {
                stamped += 1;
                let n = keys.len() as u32;
                flow = *keys.entry(stamp::flow_key(f)).or_insert(n) % MAX_REPLAY_FLOWS;
            }
            let size = (r.len.max(MIN_WIRE_LEN) + FCS_LEN) as u64;
            bytes += size;
            frames.push(ReplayFrame { offset: r.offset, len: r.len, size, site, flow });
        }
        if stamp && stamped == 0 {
            return Err(ConfigError::new(
                "pcap_stamp",
                format!(
                    "{path}: none of its {} frames has room for the signature (18 bytes of UDP/TCP payload, ICMP echo data or a raw L2 payload): replay it without stamping",
                    frames.len()
                ),
            ));
        }
        Ok(Replay {
            path: path.to_string(),
            stamp,
            flows: (keys.len() as u32).clamp(1, MAX_REPLAY_FLOWS),
            stamped_per_pass: stamped,
            bytes_per_pass: bytes,
            max_untagged_len: max_untagged,
            max_record,
            max_len: capture.records.iter().map(|r| r.len).max().unwrap_or(0),
            signed_in_capture: signed,
            capture,
            frames,
        })
    }

    /// Mean frame size in bytes, including FCS (what bit rates convert with).
    pub fn mean_size(&self) -> f64 {
        self.bytes_per_pass as f64 / self.frames.len() as f64
    }

    /// Frames per pass through the capture.
    pub fn frames_per_pass(&self) -> u64 {
        self.frames.len() as u64
    }

    /// The bytes of frame `i` as captured.
    #[inline]
    pub fn bytes(&self, f: &ReplayFrame) -> &[u8] {
        &self.capture.data[f.offset..f.offset + f.len]
    }

    /// Refuse a port whose largest frame (without FCS, untagged) is below the capture's.
    pub fn check_port(&self, max_frame_len: usize, port: &str, why: &str) -> Result<(), ConfigError> {
        if self.max_untagged_len > max_frame_len {
            return Err(ConfigError::new(
                "pcap",
                format!(
                    "{}: record {} is a {} B frame (without VLAN tags and FCS), above the largest {port} carries ({max_frame_len} B, {why})",
                    self.path, self.max_record, self.max_untagged_len
                ),
            ));
        }
        Ok(())
    }
}

/// What a replay stream did (in its stream's result).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayResult {
    pub file: String,
    pub stamped: bool,
    pub frames_per_pass: u64,
    pub bytes_per_pass: u64,
    /// Passes through the capture: frames sent / frames per pass (a fraction for a partial pass).
    pub passes: f64,
    /// Frames sent with / without the signature.
    pub frames_stamped: u64,
    pub frames_unstamped: u64,
    /// Flows of a stamped replay (distinct captured 5-tuples, at most [`MAX_REPLAY_FLOWS`]).
    pub flows: u64,
    /// Frames of the capture that already carried a netrig signature.
    pub signed_in_capture: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use netrig_wire::pcap::write;

    fn udp(sport: u8, payload: usize) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
        let ip_len = (20 + 8 + payload) as u16;
        f.extend_from_slice(&[0x45, 0, (ip_len >> 8) as u8, ip_len as u8, 0, 0, 0, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&[198, 18, 0, 1, 198, 19, 0, 1]);
        let ulen = (8 + payload) as u16;
        f.extend_from_slice(&[4, sport, 4, 0, (ulen >> 8) as u8, ulen as u8, 0, 0]);
        f.extend(std::iter::repeat_n(0xAB, payload));
        f
    }

    fn arp() -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 8, 6]);
        f.extend_from_slice(&[0; 28]);
        f
    }

    #[test]
    fn flows_stamped_and_sizes() {
        let frames = [udp(1, 30), udp(2, 30), arp(), udp(1, 10), udp(1, 40)];
        let recs: Vec<(u64, &[u8])> = frames.iter().map(|f| (0, f.as_slice())).collect();
        let cap = pcap::parse(write::pcap(&recs, false, false, 1)).unwrap();
        let r = Replay::from_capture("x.pcap", cap.clone(), true).unwrap();
        assert_eq!(r.flows, 2, "two 5-tuples");
        assert_eq!(r.stamped_per_pass, 3, "the ARP frame and the 10-byte payload have no room");
        assert_eq!(r.frames.iter().map(|f| f.flow).collect::<Vec<_>>(), [0, 1, 0, 0, 0]);
        // 72, 72, 42 → 60, 52 → 60, 82 bytes, + FCS each.
        assert_eq!(r.bytes_per_pass, 76 + 76 + 64 + 64 + 86);
        assert_eq!((r.max_untagged_len, r.max_record), (82, 5));
        let e = r.check_port(80, "veth0", "the MTU + 14").unwrap_err();
        assert!(e.message.contains("record 5 is a 82 B frame"), "{e}");
        let plain = Replay::from_capture("x.pcap", cap, false).unwrap();
        assert_eq!((plain.flows, plain.stamped_per_pass), (1, 0));
        let only_arp = pcap::parse(write::pcap(&[(0, arp().as_slice())], false, false, 1)).unwrap();
        let e = Replay::from_capture("a.pcap", only_arp, true).unwrap_err();
        assert_eq!(e.field, "pcap_stamp");
    }

    #[test]
    fn load_names_the_file() {
        let e = Replay::load("/nonexistent/x.pcap", false).unwrap_err();
        assert!(e.field == "pcap" && e.message.starts_with("/nonexistent/x.pcap: cannot open"), "{e}");
    }
}
