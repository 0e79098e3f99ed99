//! Writing captures: classic pcap (nanosecond timestamps) and pcapng, Ethernet.
//!
//! Frames are written as the wire carried them, FCS included when the caller appended it:
//! pcapng says so in its interface's `if_fcslen` option; classic pcap has no portable way
//! (its link type stays plain Ethernet, readers see four trailing bytes).
use crate::pcap::{LINKTYPE_ETHERNET, PCAPNG_BOM, PCAPNG_SHB, PCAP_MAGIC_NS};

/// One frame to write: when it arrived (ns since the Unix epoch), the bytes kept (at most the snap
/// length) and its length on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutRecord<'a> {
    pub ts_ns: u64,
    pub data: &'a [u8],
    pub orig_len: u32,
}

/// A classic pcap file (little endian, nanoseconds, Ethernet) of `records`, snap length `snaplen`.
pub fn pcap(records: &[OutRecord<'_>], snaplen: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(24 + records.iter().map(|r| 16 + r.data.len()).sum::<usize>());
    for x in [PCAP_MAGIC_NS, 2 | 4 << 16, 0, 0, snaplen, LINKTYPE_ETHERNET] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    for r in records {
        for x in [(r.ts_ns / 1_000_000_000) as u32, (r.ts_ns % 1_000_000_000) as u32, r.data.len() as u32, r.orig_len] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(r.data);
    }
    v
}

fn block(v: &mut Vec<u8>, kind: u32, body: &[u8]) {
    let len = (12 + body.len().div_ceil(4) * 4) as u32;
    v.extend_from_slice(&kind.to_le_bytes());
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(body);
    v.resize(v.len() + (len as usize - 12 - body.len()), 0);
    v.extend_from_slice(&len.to_le_bytes());
}

fn option(v: &mut Vec<u8>, code: u16, value: &[u8]) {
    v.extend_from_slice(&code.to_le_bytes());
    v.extend_from_slice(&(value.len() as u16).to_le_bytes());
    v.extend_from_slice(value);
    v.resize(v.len() + (4 - value.len() % 4) % 4, 0);
}

/// A pcapng file (little endian) of `records` on one Ethernet interface named `if_name`:
/// nanosecond timestamps, snap length `snaplen`, `fcs_len` bytes of FCS on every frame.
pub fn pcapng(records: &[OutRecord<'_>], snaplen: u32, fcs_len: u8, if_name: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(128 + records.iter().map(|r| 32 + r.data.len()).sum::<usize>());
    let mut shb = Vec::new();
    shb.extend_from_slice(&PCAPNG_BOM.to_le_bytes());
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&[0xFF; 8]);
    block(&mut v, PCAPNG_SHB, &shb);
    let mut idb = Vec::new();
    idb.extend_from_slice(&(LINKTYPE_ETHERNET as u16).to_le_bytes());
    idb.extend_from_slice(&[0, 0]);
    idb.extend_from_slice(&snaplen.to_le_bytes());
    option(&mut idb, 2, if_name.as_bytes()); // if_name
    option(&mut idb, 9, &[9]); // if_tsresol: 10^-9 s
    option(&mut idb, 13, &[fcs_len]); // if_fcslen
    option(&mut idb, 0, &[]);
    block(&mut v, 1, &idb);
    for r in records {
        let mut epb = Vec::with_capacity(20 + r.data.len());
        for x in [0, (r.ts_ns >> 32) as u32, r.ts_ns as u32, r.data.len() as u32, r.orig_len] {
            epb.extend_from_slice(&x.to_le_bytes());
        }
        epb.extend_from_slice(r.data);
        block(&mut v, 6, &epb);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcap::parse;

    #[test]
    fn both_formats_read_back() {
        let a: Vec<u8> = (0..64u8).collect();
        let b: Vec<u8> = (0..99u8).rev().collect();
        let recs = [
            OutRecord { ts_ns: 1_700_000_000_123_456_789, data: &a, orig_len: 64 },
            OutRecord { ts_ns: 1_700_000_001_000_000_001, data: &b, orig_len: 99 },
        ];
        for file in [pcap(&recs, 65535), pcapng(&recs, 65535, 4, "veth0")] {
            let c = parse(file).unwrap();
            assert_eq!(c.records.len(), 2);
            assert_eq!(c.frame(0), &a[..]);
            assert_eq!(c.frame(1), &b[..]);
            assert_eq!(c.records[0].ts_ns, 1_700_000_000_123_456_789);
        }
    }
}
