//! Stamping captured frames with the signature (pcap replay).
//!
//! The signature goes where the receiver looks for it ([`dissect::locate_signature`]): the first
//! 18 bytes of the UDP or TCP payload, of an ICMP/ICMPv6 echo's data, or of a raw L2 frame's
//! payload (any EtherType but IPv4, IPv6 and ARP). Lengths never change; the transport checksum
//! is updated incrementally (RFC 1624), so a frame whose checksum was right stays right and one
//! captured with a wrong one (checksum offload on the capturing host) stays wrong by the same
//! amount. A UDP/IPv4 checksum of 0 (none) stays 0. Frames with no such place or a shorter
//! payload are not stamped.
use crate::dissect::{self, locate_signature, locate_udp_payload};
use crate::signature::{self, Signature};
use crate::{checksum, ethernet, ip_proto, ipv4, ipv6, vlan, EtherType};

/// Where a captured frame takes the signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StampSite {
    /// Offset of the signature in the frame.
    pub sig_offset: usize,
    /// Offset of the transport checksum to update (None: none, e.g. raw L2 or UDP/IPv4 with 0).
    pub csum_offset: Option<usize>,
    /// The checksum is UDP's (a result of 0 is written as 0xFFFF).
    pub udp: bool,
}

fn rd16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// The EtherType after up to two VLAN tags and where the network header starts.
fn l3(frame: &[u8]) -> Option<(u16, usize)> {
    let mut ethertype = rd16(frame, ethernet::HEADER_LEN - 2)?;
    let mut off = ethernet::HEADER_LEN;
    let mut tags = 0;
    while ethertype == EtherType::VLAN || ethertype == EtherType::QINQ {
        if tags == dissect::MAX_VLAN_TAGS {
            return None;
        }
        ethertype = rd16(frame, off + 2)?;
        off += vlan::HEADER_LEN;
        tags += 1;
    }
    Some((ethertype, off))
}

/// The transport protocol and where its header starts (IPv4: after the options; IPv6: TCP and
/// ICMPv6 right after the fixed header, UDP also after extension headers, as the receiver does).
fn l4(frame: &[u8], ethertype: u16, off: usize) -> Option<(u8, usize)> {
    match ethertype {
        EtherType::IPV4 => {
            let hdr = frame.get(off..off + ipv4::HEADER_LEN)?;
            Some((hdr[9], off + usize::from(hdr[0] & 0x0F) * 4))
        }
        EtherType::IPV6 => {
            let next = *frame.get(off + 6)?;
            match next {
                ip_proto::TCP | ip_proto::ICMPV6 => Some((next, off + ipv6::HEADER_LEN)),
                _ => locate_udp_payload(frame).map(|l| (ip_proto::UDP, l.l4_offset)),
            }
        }
        _ => None,
    }
}

/// Where `frame` takes the signature, or `None` when the receiver would not find one there
/// (ARP, other IP protocols and ICMP types, later fragments, a payload shorter than 18 bytes).
pub fn stamp_site(frame: &[u8]) -> Option<StampSite> {
    let (at, len) = locate_signature(frame)?;
    if len < signature::LEN {
        return None;
    }
    let (ethertype, off) = l3(frame)?;
    let (csum_offset, udp) = match l4(frame, ethertype, off) {
        None => (None, false),
        Some((ip_proto::UDP, l4)) => {
            let c = l4 + 6;
            (if rd16(frame, c)? == 0 && ethertype == EtherType::IPV4 { None } else { Some(c) }, true)
        }
        Some((ip_proto::TCP, l4)) => (Some(l4 + 16), false),
        Some((ip_proto::ICMP | ip_proto::ICMPV6, l4)) => (Some(l4 + 2), false),
        Some(_) => return None,
    };
    if csum_offset.is_some_and(|c| c + 2 > at) {
        return None;
    }
    Some(StampSite { sig_offset: at, csum_offset, udp })
}

/// Writes `sig` at `site` of `frame` (a copy of the captured frame) and updates its checksum.
#[inline]
pub fn stamp(frame: &mut [u8], site: &StampSite, sig: &Signature) {
    let new = sig.to_bytes();
    let Some(dst) = frame.get_mut(site.sig_offset..site.sig_offset + signature::LEN) else {
        return;
    };
    let mut old = [0u8; signature::LEN];
    old.copy_from_slice(dst);
    dst.copy_from_slice(&new);
    if let Some(c) = site.csum_offset {
        if let Some(cur) = rd16(frame, c) {
            let mut v = checksum::update(cur, &old, &new);
            if site.udp && v == 0 {
                v = 0xFFFF;
            }
            frame[c..c + 2].copy_from_slice(&v.to_be_bytes());
        }
    }
}

/// What makes a captured frame's flow: the VLAN ids, and for IP the addresses, the protocol and
/// the ports (UDP, TCP) or the echo identifier (ICMP); for anything else the MAC addresses and
/// the EtherType. Frames with equal keys are one flow of a stamped replay.
pub fn flow_key(frame: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(48);
    let Some((ethertype, off)) = l3(frame) else {
        k.extend_from_slice(frame.get(..ethernet::HEADER_LEN).unwrap_or(frame));
        return k;
    };
    // The tags' VLAN ids (TCI without priority bits).
    let mut t = ethernet::HEADER_LEN;
    while t < off {
        k.extend_from_slice(&(rd16(frame, t).unwrap_or(0) & 0x0FFF).to_be_bytes());
        t += vlan::HEADER_LEN;
    }
    k.extend_from_slice(&ethertype.to_be_bytes());
    let addrs = match ethertype {
        EtherType::IPV4 => frame.get(off + 12..off + 20),
        EtherType::IPV6 => frame.get(off + 8..off + 40),
        _ => None,
    };
    match (addrs, l4(frame, ethertype, off)) {
        (Some(a), Some((proto, l4))) => {
            k.extend_from_slice(a);
            k.push(proto);
            let ports = match proto {
                ip_proto::UDP | ip_proto::TCP => frame.get(l4..l4 + 4),
                ip_proto::ICMP | ip_proto::ICMPV6 => frame.get(l4 + 4..l4 + 6),
                _ => None,
            };
            k.extend_from_slice(ports.unwrap_or(&[]));
        }
        _ => k.extend_from_slice(&frame[..12]),
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dissect::find_signature;
    use crate::frames::{FrameSpec, L3Spec, Proto};
    use crate::EthernetAddress;

    fn spec(proto: Proto, v6: bool, udp_checksum: bool) -> FrameSpec {
        let l3 = if v6 {
            L3Spec::V6 { src: "2001:2::1".parse().unwrap(), dst: "2001:2::2".parse().unwrap(), hop_limit: 64, tc: 0 }
        } else {
            L3Spec::V4 { src: [198, 18, 0, 1].into(), dst: [198, 19, 0, 1].into(), ttl: 64, dscp: 0 }
        };
        FrameSpec {
            src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
            outer_vlan: None,
            vlan: None,
            l3,
            proto,
            src_port: 1000,
            dst_port: 2000,
            udp_checksum,
        }
    }

    /// The ones-complement sum over a frame's pseudo-header (not ICMP) and transport segment.
    fn l4_sum(f: &[u8], v6: bool) -> u32 {
        let (et, off) = l3(f).unwrap();
        let (proto, l4o) = l4(f, et, off).unwrap();
        let seg = &f[l4o..];
        let ph = if proto == ip_proto::ICMP {
            0
        } else if v6 {
            let (s, d) = (f[off + 8..off + 24].try_into().unwrap(), f[off + 24..off + 40].try_into().unwrap());
            checksum::pseudo_header_v6(s, d, proto, seg.len() as u32)
        } else {
            let (s, d) = (f[off + 12..off + 16].try_into().unwrap(), f[off + 16..off + 20].try_into().unwrap());
            checksum::pseudo_header_v4(s, d, proto, seg.len() as u16)
        };
        ph + checksum::sum(seg)
    }

    #[test]
    fn stamps_where_the_receiver_looks_and_keeps_checksums_right() {
        let sig = Signature { trial: 77, warmup: false, flow_id: 3, seq: 12345, tx_ts_ns: 999 };
        let cases = [
            (Proto::Udp, false, true),
            (Proto::Udp, true, true),
            (Proto::Tcp { flags: 0x10, seq: 5, ack: 0, window: 100 }, false, true),
            (Proto::Tcp { flags: 0x10, seq: 5, ack: 0, window: 100 }, true, true),
            (Proto::IcmpEcho, false, true),
            (Proto::IcmpEcho, true, true),
        ];
        for (proto, v6, csum) in cases {
            let s = spec(proto, v6, csum);
            let mut f = s.frame(120, &Signature::default()).unwrap();
            // Arbitrary payload, checksum made right for it, like a captured frame.
            let site = stamp_site(&f).unwrap_or_else(|| panic!("{proto:?} v6 {v6}"));
            for (i, b) in f[site.sig_offset..].iter_mut().enumerate() {
                *b = i as u8 ^ 0x5A;
            }
            let c = site.csum_offset.unwrap();
            f[c..c + 2].copy_from_slice(&[0, 0]);
            let cs = checksum::fold(l4_sum(&f, v6));
            f[c..c + 2].copy_from_slice(&cs.to_be_bytes());
            assert_eq!(checksum::fold(l4_sum(&f, v6)), 0, "{proto:?} v6 {v6}: the fixture");
            let orig = f.clone();
            stamp(&mut f, &site, &sig);
            assert_eq!(find_signature(&f), Some(sig), "{proto:?} v6 {v6}");
            assert_eq!(checksum::fold(l4_sum(&f, v6)), 0, "{proto:?} v6 {v6}: after stamping");
            assert_eq!(f.len(), orig.len());
            let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != orig[i]).collect();
            assert!(
                changed
                    .iter()
                    .all(|&i| (site.sig_offset..site.sig_offset + 18).contains(&i) || (c..c + 2).contains(&i)),
                "only the signature and the checksum change"
            );
        }
    }

    #[test]
    fn udp_without_checksum_stays_without_and_no_room_is_none() {
        let mut f = spec(Proto::Udp, false, false).frame(64, &Signature::default()).unwrap();
        let site = stamp_site(&f).unwrap();
        assert_eq!(site.csum_offset, None);
        stamp(&mut f, &site, &Signature::default());
        assert_eq!(&f[40..42], &[0, 0]);
        // 17 bytes of payload: no room.
        assert_eq!(stamp_site(&f[..59]), None);
        // ARP has no place.
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&EtherType::ARP.to_be_bytes());
        assert_eq!(stamp_site(&arp), None);
        // Raw L2: right after the Ethernet header, no checksum.
        let mut raw = vec![0u8; 60];
        raw[12..14].copy_from_slice(&0x88B5u16.to_be_bytes());
        assert_eq!(stamp_site(&raw), Some(StampSite { sig_offset: 14, csum_offset: None, udp: false }));
    }

    #[test]
    fn flow_keys_tell_five_tuples_apart() {
        let a = spec(Proto::Udp, false, false).frame(80, &Signature::default()).unwrap();
        let mut b = a.clone();
        b[34] ^= 1; // another source port
        let mut c = a.clone();
        c[60] ^= 1; // payload only
        assert_ne!(flow_key(&a), flow_key(&b));
        assert_eq!(flow_key(&a), flow_key(&c));
    }
}
