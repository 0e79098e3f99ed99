//! Reading captures for replay: classic pcap and pcapng, Ethernet only, from bytes in memory.
//!
//! Classic pcap: both byte orders, microsecond (`0xa1b2c3d4`) and nanosecond (`0xa1b23c4d`)
//! timestamps. pcapng: Section Header (either byte order, several sections), Interface
//! Description (link type, `if_tsresol`), Enhanced Packet, Simple Packet and the obsolete Packet
//! block, several interfaces; every other block is skipped. Every interface that carries a frame
//! must be Ethernet (link type 1).
//!
//! A replay must send what was captured, so a frame captured shorter than it was on the wire
//! (snap length: captured < original length) is refused, never padded: padding would invent
//! bytes the capture does not have. Errors name the record (the frame's number, from 1) or the
//! block and say what to do. The parsed [`Capture`] keeps the file's bytes and one [`Record`]
//! per frame pointing into them: no copy of the frames.

/// The link type of Ethernet (`LINKTYPE_ETHERNET`).
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Shortest frame a capture may hold: an Ethernet header.
pub const MIN_FRAME_LEN: usize = 14;

/// One frame of a capture: where its bytes are and when it was captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Offset of the frame's first byte in [`Capture::data`].
    pub offset: usize,
    /// Length in bytes (captured = original: snapped frames are refused). No FCS.
    pub len: usize,
    /// Capture timestamp in ns (since the capture's epoch; 0 where the format has none).
    pub ts_ns: u64,
}

/// A parsed capture: the file's bytes and its frames, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    pub data: Vec<u8>,
    pub records: Vec<Record>,
    /// `"pcap"` or `"pcapng"`.
    pub format: &'static str,
}

impl Capture {
    /// The bytes of frame `i`.
    pub fn frame(&self, i: usize) -> &[u8] {
        let r = self.records[i];
        &self.data[r.offset..r.offset + r.len]
    }
}

/// What is wrong with a capture: a message naming the record or block, with the remedy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapError(pub String);

impl core::fmt::Display for PcapError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PcapError {}

fn err<T>(m: impl Into<String>) -> Result<T, PcapError> {
    Err(PcapError(m.into()))
}

/// Byte order of a file or section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Little,
    Big,
}

impl Order {
    fn u16(self, b: &[u8], at: usize) -> Option<u16> {
        let x: [u8; 2] = b.get(at..at + 2)?.try_into().ok()?;
        Some(match self {
            Order::Little => u16::from_le_bytes(x),
            Order::Big => u16::from_be_bytes(x),
        })
    }
    fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let x: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        Some(match self {
            Order::Little => u32::from_le_bytes(x),
            Order::Big => u32::from_be_bytes(x),
        })
    }
}

/// Classic pcap magic numbers (microsecond, nanosecond timestamps), as written in host order.
pub const PCAP_MAGIC_US: u32 = 0xa1b2_c3d4;
pub const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
/// pcapng: the Section Header Block type and its byte-order magic.
pub const PCAPNG_SHB: u32 = 0x0a0d_0d0a;
pub const PCAPNG_BOM: u32 = 0x1a2b_3c4d;

/// Parse a whole capture file's bytes.
pub fn parse(data: Vec<u8>) -> Result<Capture, PcapError> {
    if data.is_empty() {
        return err("the file is empty: give a pcap or pcapng capture");
    }
    let Some(head) = data.get(..4) else {
        return err(format!(
            "{} bytes are too short for a capture's header: give a pcap or pcapng capture",
            data.len()
        ));
    };
    let le = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let be = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    let (records, format) = if le == PCAPNG_SHB {
        (parse_pcapng(&data)?, "pcapng")
    } else if [PCAP_MAGIC_US, PCAP_MAGIC_NS].contains(&le) {
        (parse_pcap(&data, Order::Little, le == PCAP_MAGIC_NS)?, "pcap")
    } else if [PCAP_MAGIC_US, PCAP_MAGIC_NS].contains(&be) {
        (parse_pcap(&data, Order::Big, be == PCAP_MAGIC_NS)?, "pcap")
    } else {
        return err(format!(
            "not a pcap or pcapng capture (magic {be:#010x}): give a file written by tcpdump, tshark or libpcap"
        ));
    };
    if records.is_empty() {
        return err("the capture holds no frames: give one with at least one frame");
    }
    Ok(Capture { data, records, format })
}

/// Checks every frame: Ethernet (captured by an Ethernet interface), not snapped, at least an
/// Ethernet header long.
fn check_frame(n: u64, caplen: usize, origlen: usize, linktype: u32) -> Result<(), PcapError> {
    if linktype != LINKTYPE_ETHERNET {
        return err(format!(
            "record {n}: link type {linktype} ({}), only Ethernet (1) can be replayed: capture on an Ethernet interface (not `any`, not a tunnel)",
            linktype_name(linktype)
        ));
    }
    if caplen < origlen {
        return err(format!(
            "record {n}: {caplen} of {origlen} bytes captured (snap length): a snapped frame cannot be replayed faithfully; capture whole frames (tcpdump -s 0)"
        ));
    }
    if caplen < MIN_FRAME_LEN {
        return err(format!("record {n}: {caplen} bytes is shorter than an Ethernet header (14 bytes)"));
    }
    Ok(())
}

fn linktype_name(t: u32) -> &'static str {
    match t {
        0 => "BSD loopback",
        101 => "raw IP",
        105 => "802.11",
        113 => "Linux cooked, `tcpdump -i any`",
        127 => "802.11 radiotap",
        228 => "raw IPv4",
        229 => "raw IPv6",
        276 => "Linux cooked v2, `tcpdump -i any`",
        _ => "not Ethernet",
    }
}

fn parse_pcap(data: &[u8], o: Order, nanos: bool) -> Result<Vec<Record>, PcapError> {
    if data.len() < 24 {
        return err(format!("the pcap file header is truncated ({} of 24 bytes)", data.len()));
    }
    // The link type's upper bits may carry FCS information (LINKTYPE_ETHERNET stays in the low 16).
    let linktype = o.u32(data, 20).unwrap_or(0) & 0xFFFF;
    let mut out = Vec::new();
    let mut at = 24;
    let mut n = 0u64;
    while at < data.len() {
        n += 1;
        let (Some(sec), Some(frac), Some(caplen), Some(origlen)) =
            (o.u32(data, at), o.u32(data, at + 4), o.u32(data, at + 8), o.u32(data, at + 12))
        else {
            return err(format!(
                "record {n}: truncated: its 16-byte header is cut after {} bytes (the file ends)",
                data.len() - at
            ));
        };
        let (caplen, origlen) = (caplen as usize, origlen as usize);
        let start = at + 16;
        if caplen > data.len() - start {
            return err(format!(
                "record {n}: truncated: it says {caplen} bytes, the file ends after {}",
                data.len() - start
            ));
        }
        check_frame(n, caplen, origlen, linktype)?;
        let ts_ns = u64::from(sec) * 1_000_000_000 + u64::from(frac) * if nanos { 1 } else { 1000 };
        out.push(Record { offset: start, len: caplen, ts_ns });
        at = start + caplen;
    }
    Ok(out)
}

/// An interface of a pcapng section.
#[derive(Debug, Clone, Copy)]
struct Iface {
    linktype: u32,
    snaplen: u32,
    /// Nanoseconds per timestamp unit, as a ratio num/den.
    ts_num: u64,
    ts_den: u64,
}

fn parse_pcapng(data: &[u8]) -> Result<Vec<Record>, PcapError> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut block = 0u64;
    let mut n = 0u64;
    let mut order = Order::Little;
    let mut ifaces: Vec<Iface> = Vec::new();
    let mut last_ts = 0u64;
    while at < data.len() {
        block += 1;
        let rest = data.len() - at;
        if rest < 12 {
            return err(format!("block {block}: truncated: {rest} bytes left, a block is at least 12"));
        }
        let le_type = u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
        if le_type == PCAPNG_SHB {
            order = match Order::Little.u32(data, at + 8) {
                Some(PCAPNG_BOM) => Order::Little,
                _ if Order::Big.u32(data, at + 8) == Some(PCAPNG_BOM) => Order::Big,
                _ => return err(format!("block {block}: a section header without the byte-order magic 0x1a2b3c4d")),
            };
            ifaces.clear();
        }
        let btype = order.u32(data, at).unwrap_or(0);
        let blen = order.u32(data, at + 4).unwrap_or(0) as usize;
        if blen < 12 || !blen.is_multiple_of(4) {
            return err(format!("block {block}: length {blen} is not a valid block length (a multiple of 4, >= 12)"));
        }
        if blen > rest {
            return err(format!("block {block}: truncated: it says {blen} bytes, the file ends after {rest}"));
        }
        let body = &data[at + 8..at + blen - 4];
        let body_at = at + 8;
        match btype {
            1 => {
                // Interface Description: link type, reserved, snap length, options.
                let (Some(lt), Some(snap)) = (order.u16(body, 0), order.u32(body, 4)) else {
                    return err(format!("block {block}: interface description truncated"));
                };
                let (ts_num, ts_den) = ts_resolution(body.get(8..).unwrap_or(&[]), order)
                    .map_err(|m| PcapError(format!("block {block}: {m}")))?;
                ifaces.push(Iface { linktype: u32::from(lt), snaplen: snap, ts_num, ts_den });
            }
            6 | 2 => {
                // Enhanced Packet: iface (4), ts (8), caplen, origlen. Obsolete Packet: iface (2),
                // drops (2), ts (8), caplen, origlen.
                n += 1;
                let iface = if btype == 6 { order.u32(body, 0) } else { order.u16(body, 0).map(u32::from) };
                let (Some(iface), Some(hi), Some(lo), Some(caplen), Some(origlen)) =
                    (iface, order.u32(body, 4), order.u32(body, 8), order.u32(body, 12), order.u32(body, 16))
                else {
                    return err(format!("record {n} (block {block}): packet block truncated"));
                };
                let Some(ifc) = ifaces.get(iface as usize) else {
                    return err(format!(
                        "record {n} (block {block}): interface {iface} is not described (the section has {})",
                        ifaces.len()
                    ));
                };
                let caplen = caplen as usize;
                if 20 + caplen > body.len() {
                    return err(format!(
                        "record {n} (block {block}): truncated: it says {caplen} bytes, the block holds {}",
                        body.len().saturating_sub(20)
                    ));
                }
                check_frame(n, caplen, origlen as usize, ifc.linktype)?;
                let units = (u64::from(hi) << 32) | u64::from(lo);
                let ts_ns = (u128::from(units) * u128::from(ifc.ts_num) / u128::from(ifc.ts_den)) as u64;
                last_ts = ts_ns;
                out.push(Record { offset: body_at + 20, len: caplen, ts_ns });
            }
            3 => {
                // Simple Packet: original length, then the frame (at most the snap length of
                // interface 0); no timestamp (the previous frame's is kept).
                n += 1;
                let Some(ifc) = ifaces.first() else {
                    return err(format!("record {n} (block {block}): a simple packet block needs interface 0"));
                };
                let Some(origlen) = order.u32(body, 0) else {
                    return err(format!("record {n} (block {block}): packet block truncated"));
                };
                let mut caplen = (origlen as usize).min(body.len() - 4);
                if ifc.snaplen > 0 {
                    caplen = caplen.min(ifc.snaplen as usize);
                }
                check_frame(n, caplen, origlen as usize, ifc.linktype)?;
                out.push(Record { offset: body_at + 4, len: caplen, ts_ns: last_ts });
            }
            _ => {}
        }
        at += blen;
    }
    Ok(out)
}

/// The `if_tsresol` option (code 9) of an interface's options: ns per unit as num/den.
/// Default: microseconds.
fn ts_resolution(mut opts: &[u8], o: Order) -> Result<(u64, u64), String> {
    while opts.len() >= 4 {
        let code = o.u16(opts, 0).unwrap_or(0);
        let len = usize::from(o.u16(opts, 2).unwrap_or(0));
        if code == 0 {
            break;
        }
        let val = opts.get(4..4 + len).ok_or("an interface option runs past its block")?;
        if code == 9 && len >= 1 {
            let r = val[0];
            let e = u32::from(r & 0x7F);
            return if r & 0x80 == 0 {
                // 10^-e s per unit.
                match e {
                    0..=9 => Ok((10u64.pow(9 - e), 1)),
                    10..=18 => Ok((1, 10u64.pow(e - 9))),
                    _ => Err(format!("timestamp resolution 10^-{e} s is beyond what netrig reads")),
                }
            } else {
                // 2^-e s per unit.
                if e > 63 {
                    return Err(format!("timestamp resolution 2^-{e} s is beyond what netrig reads"));
                }
                Ok((1_000_000_000, 1u64 << e))
            };
        }
        opts = &opts[(4 + len.div_ceil(4) * 4).min(opts.len())..];
    }
    Ok((1000, 1))
}

/// Writers of captures, for tests (here and in the engine): classic pcap and pcapng.
pub mod write {
    /// A classic pcap file: `big` endian or little, `nanos` timestamps or micro, link type.
    pub fn pcap(frames: &[(u64, &[u8])], big: bool, nanos: bool, linktype: u32) -> Vec<u8> {
        let w32 = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&if big { x.to_be_bytes() } else { x.to_le_bytes() });
        let w16 = |v: &mut Vec<u8>, x: u16| v.extend_from_slice(&if big { x.to_be_bytes() } else { x.to_le_bytes() });
        let mut v = Vec::new();
        w32(&mut v, if nanos { super::PCAP_MAGIC_NS } else { super::PCAP_MAGIC_US });
        w16(&mut v, 2);
        w16(&mut v, 4);
        w32(&mut v, 0);
        w32(&mut v, 0);
        w32(&mut v, 262_144);
        w32(&mut v, linktype);
        for (ts, f) in frames {
            let unit = if nanos { 1 } else { 1000 };
            w32(&mut v, (ts / 1_000_000_000) as u32);
            w32(&mut v, ((ts % 1_000_000_000) / unit) as u32);
            w32(&mut v, f.len() as u32);
            w32(&mut v, f.len() as u32);
            v.extend_from_slice(f);
        }
        v
    }

    /// A pcapng file with one section: interfaces by link type (nanosecond resolution), then
    /// enhanced packet blocks `(interface, ts_ns, frame)`.
    pub fn pcapng(ifaces: &[u32], frames: &[(u32, u64, &[u8])], big: bool) -> Vec<u8> {
        let w32 = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&if big { x.to_be_bytes() } else { x.to_le_bytes() });
        let w16 = |v: &mut Vec<u8>, x: u16| v.extend_from_slice(&if big { x.to_be_bytes() } else { x.to_le_bytes() });
        let block = |v: &mut Vec<u8>, t: u32, body: &[u8]| {
            let len = 12 + body.len().div_ceil(4) * 4;
            w32(v, t);
            w32(v, len as u32);
            v.extend_from_slice(body);
            v.resize(v.len() + (len - 12 - body.len()), 0);
            w32(v, len as u32);
        };
        let mut v = Vec::new();
        let mut shb = Vec::new();
        w32(&mut shb, super::PCAPNG_BOM);
        w16(&mut shb, 1);
        w16(&mut shb, 0);
        shb.extend_from_slice(&[0xFF; 8]);
        block(&mut v, super::PCAPNG_SHB, &shb);
        for &lt in ifaces {
            let mut idb = Vec::new();
            w16(&mut idb, lt as u16);
            w16(&mut idb, 0);
            w32(&mut idb, 0);
            // if_tsresol = 9 (ns), then opt_endofopt.
            w16(&mut idb, 9);
            w16(&mut idb, 1);
            idb.extend_from_slice(&[9, 0, 0, 0]);
            w32(&mut idb, 0);
            block(&mut v, 1, &idb);
        }
        for (iface, ts, f) in frames {
            let mut epb = Vec::new();
            w32(&mut epb, *iface);
            w32(&mut epb, (ts >> 32) as u32);
            w32(&mut epb, *ts as u32);
            w32(&mut epb, f.len() as u32);
            w32(&mut epb, f.len() as u32);
            epb.extend_from_slice(f);
            block(&mut v, 6, &epb);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames() -> Vec<Vec<u8>> {
        (0..3u8).map(|i| (0..60 + i).map(|b| b ^ i).collect()).collect()
    }

    fn refs(f: &[Vec<u8>]) -> Vec<(u64, &[u8])> {
        f.iter().enumerate().map(|(i, x)| (1_000_000_000 + i as u64 * 1_500_000, x.as_slice())).collect()
    }

    #[test]
    fn classic_pcap_both_orders_micro_and_nano() {
        let f = frames();
        for big in [false, true] {
            for nanos in [false, true] {
                let c = parse(write::pcap(&refs(&f), big, nanos, 1)).unwrap();
                assert_eq!(c.format, "pcap");
                assert_eq!(c.records.len(), 3, "big {big} nanos {nanos}");
                for (i, x) in f.iter().enumerate() {
                    assert_eq!(c.frame(i), x.as_slice());
                }
                assert_eq!(c.records[1].ts_ns - c.records[0].ts_ns, 1_500_000);
            }
        }
        // Nanoseconds survive the nanosecond format, not the microsecond one.
        let one = [(7u64, f[0].as_slice())];
        assert_eq!(parse(write::pcap(&one, false, true, 1)).unwrap().records[0].ts_ns, 7);
        assert_eq!(parse(write::pcap(&one, false, false, 1)).unwrap().records[0].ts_ns, 0);
    }

    #[test]
    fn pcapng_two_interfaces_both_orders() {
        let f = frames();
        for big in [false, true] {
            let recs: Vec<(u32, u64, &[u8])> =
                f.iter().enumerate().map(|(i, x)| ((i % 2) as u32, 5 + i as u64 * 10, x.as_slice())).collect();
            let c = parse(write::pcapng(&[1, 1], &recs, big)).unwrap();
            assert_eq!(c.format, "pcapng");
            assert_eq!(c.records.len(), 3);
            for (i, x) in f.iter().enumerate() {
                assert_eq!(c.frame(i), x.as_slice());
                assert_eq!(c.records[i].ts_ns, 5 + i as u64 * 10);
            }
            // An interface of another link type carrying a frame is refused, naming the record.
            let e = parse(write::pcapng(&[1, 113], &recs, big)).unwrap_err();
            assert!(e.0.starts_with("record 2: link type 113"), "{e}");
            // A packet of an undescribed interface.
            let e = parse(write::pcapng(&[1], &recs, big)).unwrap_err();
            assert!(e.0.contains("interface 1 is not described"), "{e}");
        }
    }

    #[test]
    fn simple_packet_and_skipped_blocks() {
        let f = frames();
        let mut v = write::pcapng(&[1], &[(0, 99, f[0].as_slice())], false);
        // A name resolution block (skipped), then a simple packet block.
        v.extend_from_slice(&4u32.to_le_bytes());
        v.extend_from_slice(&16u32.to_le_bytes());
        v.extend_from_slice(&[0; 4]);
        v.extend_from_slice(&16u32.to_le_bytes());
        let len = 16 + f[1].len().div_ceil(4) * 4;
        v.extend_from_slice(&3u32.to_le_bytes());
        v.extend_from_slice(&(len as u32).to_le_bytes());
        v.extend_from_slice(&(f[1].len() as u32).to_le_bytes());
        v.extend_from_slice(&f[1]);
        v.resize(v.len() + len - 16 - f[1].len(), 0);
        v.extend_from_slice(&(len as u32).to_le_bytes());
        let c = parse(v).unwrap();
        assert_eq!(c.records.len(), 2);
        assert_eq!(c.frame(1), f[1].as_slice());
        assert_eq!(c.records[1].ts_ns, 99, "a simple packet keeps the previous timestamp");
    }

    #[test]
    fn errors_name_the_record_and_the_remedy() {
        let f = frames();
        assert!(parse(Vec::new()).unwrap_err().0.contains("empty"));
        assert!(parse(b"hello world, not a capture".to_vec()).unwrap_err().0.contains("not a pcap"));
        assert!(parse(write::pcap(&[], false, false, 1)).unwrap_err().0.contains("no frames"));
        let e = parse(write::pcap(&refs(&f), false, false, 113)).unwrap_err();
        assert!(e.0.starts_with("record 1: link type 113") && e.0.contains("tcpdump -i any"), "{e}");
        // Truncated in the last record's data, and in its header.
        let full = write::pcap(&refs(&f), true, false, 1);
        let e = parse(full[..full.len() - 5].to_vec()).unwrap_err();
        assert!(e.0.starts_with("record 3: truncated"), "{e}");
        let cut = 24 + 16 + 60 + 16 + 61 + 7;
        assert!(parse(full[..cut].to_vec()).unwrap_err().0.starts_with("record 3: truncated"));
        assert!(parse(full[..10].to_vec()).unwrap_err().0.contains("header is truncated"));
        // Snapped: captured 60 of 100.
        let mut snapped = write::pcap(&refs(&f[..1]), false, false, 1);
        snapped[24 + 12..24 + 16].copy_from_slice(&100u32.to_le_bytes());
        let e = parse(snapped).unwrap_err();
        assert!(e.0.contains("60 of 100 bytes captured") && e.0.contains("-s 0"), "{e}");
        // Shorter than an Ethernet header.
        let e = parse(write::pcap(&[(0, &[1, 2, 3][..])], false, false, 1)).unwrap_err();
        assert!(e.0.contains("shorter than an Ethernet header"), "{e}");
        // pcapng truncated mid-block.
        let ng = write::pcapng(&[1], &[(0, 1, f[0].as_slice())], false);
        let e = parse(ng[..ng.len() - 8].to_vec()).unwrap_err();
        assert!(e.0.starts_with("block 3: truncated"), "{e}");
    }
}
