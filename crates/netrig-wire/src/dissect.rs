//! The receive hot path: find the UDP payload (and the netrig signature) in a frame.
//!
//! Straight-line bounds checks on the raw slice, no allocation, no panics, no checksum
//! verification (the kernel/NIC already dropped frames with a bad FCS; UDP checksums are
//! not needed to recognise netrig's frames and cost too much per frame).

use crate::signature::{self, Signature, Site};
use crate::{ethernet, icmpv4, icmpv6, ip_proto, ipv4, ipv6, tcp, udp, vlan, EtherType};

/// Network-layer family of a located datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L3 {
    V4,
    V6,
}

/// Where the UDP datagram sits in a frame. All offsets are from the start of the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpLocation {
    pub l3: L3,
    /// Start of the IPv4/IPv6 header.
    pub l3_offset: usize,
    /// Start of the UDP header.
    pub l4_offset: usize,
    /// Start of the UDP payload (`l4_offset + 8`).
    pub payload_offset: usize,
    /// UDP payload length: from the UDP length field, except for a first IPv4/IPv6
    /// fragment where it is what this frame carries.
    pub payload_len: usize,
}

/// Maximum number of VLAN tags (802.1Q / 802.1ad) skipped.
pub const MAX_VLAN_TAGS: usize = 2;
/// Maximum number of IPv6 extension headers skipped.
pub const MAX_IPV6_EXT_HEADERS: usize = 4;

#[inline(always)]
fn rd16(b: &[u8], at: usize) -> Option<u16> {
    match b.get(at..at + 2) {
        Some(&[x, y]) => Some(u16::from_be_bytes([x, y])),
        _ => None,
    }
}

/// Walks Ethernet → up to two VLAN tags → IPv4 (IHL honoured; non-first fragments and
/// bad lengths rejected) or IPv6 (a few extension headers skipped; non-first fragments
/// rejected) → UDP. Returns `None` for anything that is not a well-formed UDP datagram.
#[inline]
pub fn locate_udp_payload(frame: &[u8]) -> Option<UdpLocation> {
    let mut ethertype = rd16(frame, ethernet::HEADER_LEN - 2)?;
    let mut off = ethernet::HEADER_LEN;
    let mut tags = 0;
    while ethertype == EtherType::VLAN || ethertype == EtherType::QINQ {
        if tags == MAX_VLAN_TAGS {
            return None;
        }
        ethertype = rd16(frame, off + 2)?;
        off += vlan::HEADER_LEN;
        tags += 1;
    }
    let l3_offset = off;
    let ip = frame.get(l3_offset..)?;
    match ethertype {
        EtherType::IPV4 => locate_v4(ip, l3_offset),
        EtherType::IPV6 => locate_v6(ip, l3_offset),
        _ => None,
    }
}

#[inline(always)]
fn locate_v4(ip: &[u8], l3_offset: usize) -> Option<UdpLocation> {
    let hdr = ip.get(..ipv4::HEADER_LEN)?;
    let ver_ihl = hdr[0];
    if ver_ihl >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(ver_ihl & 0x0F) * 4;
    let total = usize::from(u16::from_be_bytes([hdr[2], hdr[3]]));
    if ihl < ipv4::HEADER_LEN || total < ihl || total > ip.len() || hdr[9] != ip_proto::UDP {
        return None;
    }
    let flags_off = u16::from_be_bytes([hdr[6], hdr[7]]);
    if flags_off & 0x1FFF != 0 {
        return None; // non-first fragment: no UDP header here
    }
    let first_fragment = flags_off & 0x2000 != 0;
    locate_udp(&ip[ihl..total], L3::V4, l3_offset, l3_offset + ihl, first_fragment)
}

#[inline(always)]
fn locate_v6(ip: &[u8], l3_offset: usize) -> Option<UdpLocation> {
    let hdr = ip.get(..ipv6::HEADER_LEN)?;
    if hdr[0] >> 4 != 6 {
        return None;
    }
    let end = ipv6::HEADER_LEN + usize::from(u16::from_be_bytes([hdr[4], hdr[5]]));
    if end > ip.len() {
        return None;
    }
    let mut next = hdr[6];
    let mut off = ipv6::HEADER_LEN;
    let mut first_fragment = false;
    let mut hops = 0;
    while next != ip_proto::UDP {
        if hops == MAX_IPV6_EXT_HEADERS {
            return None;
        }
        hops += 1;
        let ext = ip.get(off..off + 8)?;
        match next {
            ip_proto::HOP_BY_HOP | ip_proto::IPV6_ROUTING | ip_proto::IPV6_DEST_OPTS => {
                off += (usize::from(ext[1]) + 1) * 8;
            }
            ip_proto::IPV6_FRAGMENT => {
                let frag = u16::from_be_bytes([ext[2], ext[3]]);
                if frag & 0xFFF8 != 0 {
                    return None;
                }
                first_fragment = frag & 1 != 0;
                off += 8;
            }
            _ => return None,
        }
        next = ext[0];
    }
    if off > end {
        return None;
    }
    locate_udp(&ip[off..end], L3::V6, l3_offset, l3_offset + off, first_fragment)
}

/// `dgram` is the IP payload (bounded by the IP length fields).
#[inline(always)]
fn locate_udp(dgram: &[u8], l3: L3, l3_offset: usize, l4_offset: usize, first_fragment: bool) -> Option<UdpLocation> {
    let hdr = dgram.get(..udp::HEADER_LEN)?;
    let ulen = usize::from(u16::from_be_bytes([hdr[4], hdr[5]]));
    if ulen < udp::HEADER_LEN {
        return None;
    }
    let payload_len = if first_fragment {
        ulen.min(dgram.len()) - udp::HEADER_LEN
    } else if ulen <= dgram.len() {
        ulen - udp::HEADER_LEN
    } else {
        return None;
    };
    Some(UdpLocation { l3, l3_offset, l4_offset, payload_offset: l4_offset + udp::HEADER_LEN, payload_len })
}

/// Where the signature of a netrig frame of any protocol would start, and how many bytes the
/// frame carries from there: the UDP or TCP payload, the data of an ICMP/ICMPv6 echo request
/// or reply, or (for any EtherType other than IPv4, IPv6 and ARP) the payload right after the
/// Ethernet header and up to two VLAN tags. `None` when there is no such place (ARP, IP
/// fragments after the first, other IP protocols and ICMP types, malformed lengths).
///
/// UDP is looked at first, along the same straight path as [`locate_udp_payload`]; the other
/// protocols cost one more comparison each.
#[inline]
pub fn locate_signature(frame: &[u8]) -> Option<(usize, usize)> {
    let mut ethertype = rd16(frame, ethernet::HEADER_LEN - 2)?;
    let mut off = ethernet::HEADER_LEN;
    let mut tags = 0;
    while ethertype == EtherType::VLAN || ethertype == EtherType::QINQ {
        if tags == MAX_VLAN_TAGS {
            return None;
        }
        ethertype = rd16(frame, off + 2)?;
        off += vlan::HEADER_LEN;
        tags += 1;
    }
    let ip = frame.get(off..)?;
    match ethertype {
        EtherType::IPV4 => {
            let hdr = ip.get(..ipv4::HEADER_LEN)?;
            let ver_ihl = hdr[0];
            let ihl = usize::from(ver_ihl & 0x0F) * 4;
            let total = usize::from(u16::from_be_bytes([hdr[2], hdr[3]]));
            if ver_ihl >> 4 != 4 || ihl < ipv4::HEADER_LEN || total < ihl || total > ip.len() {
                return None;
            }
            let flags_off = u16::from_be_bytes([hdr[6], hdr[7]]);
            if flags_off & 0x1FFF != 0 {
                return None;
            }
            let first_fragment = flags_off & 0x2000 != 0;
            let seg = &ip[ihl..total];
            match hdr[9] {
                ip_proto::UDP => {
                    locate_udp(seg, L3::V4, off, off + ihl, first_fragment).map(|l| (l.payload_offset, l.payload_len))
                }
                p => locate_other(seg, p, ip_proto::ICMP, off + ihl),
            }
        }
        EtherType::IPV6 => {
            let hdr = ip.get(..ipv6::HEADER_LEN)?;
            let end = ipv6::HEADER_LEN + usize::from(u16::from_be_bytes([hdr[4], hdr[5]]));
            if hdr[0] >> 4 != 6 || end > ip.len() {
                return None;
            }
            match hdr[6] {
                p @ (ip_proto::TCP | ip_proto::ICMPV6) => {
                    locate_other(&ip[ipv6::HEADER_LEN..end], p, ip_proto::ICMPV6, off + ipv6::HEADER_LEN)
                }
                // UDP, directly or after extension headers.
                _ => locate_v6(ip, off).map(|l| (l.payload_offset, l.payload_len)),
            }
        }
        EtherType::ARP => None,
        _ => Some((off, frame.len() - off)),
    }
}

/// TCP (payload after the data offset) or an ICMP echo request/reply (`icmp` is ICMP or
/// ICMPv6) in `seg`, the IP payload at `l4_offset`.
#[inline(always)]
fn locate_other(seg: &[u8], proto: u8, icmp: u8, l4_offset: usize) -> Option<(usize, usize)> {
    if proto == ip_proto::TCP {
        let hl = usize::from(seg.get(12)? >> 4) * 4;
        if hl < tcp::HEADER_LEN || hl > seg.len() {
            return None;
        }
        Some((l4_offset + hl, seg.len() - hl))
    } else if proto == icmp {
        let t = *seg.first()?;
        let echo = if icmp == ip_proto::ICMP {
            t == icmpv4::TYPE_ECHO_REQUEST || t == icmpv4::TYPE_ECHO_REPLY
        } else {
            t == icmpv6::TYPE_ECHO_REQUEST || t == icmpv6::TYPE_ECHO_REPLY
        };
        if !echo || seg.len() < icmpv4::HEADER_LEN {
            return None;
        }
        Some((l4_offset + icmpv4::HEADER_LEN, seg.len() - icmpv4::HEADER_LEN))
    } else {
        None
    }
}

/// What a frame carries, for counting frames that are not netrig's: the EtherType after up to
/// two VLAN tags, and the IP protocol (IPv4) or first next header (IPv6) when it is IP.
/// `None` for a frame shorter than an Ethernet header.
#[inline]
pub fn classify(frame: &[u8]) -> Option<(u16, Option<u8>)> {
    let mut ethertype = rd16(frame, ethernet::HEADER_LEN - 2)?;
    let mut off = ethernet::HEADER_LEN;
    let mut tags = 0;
    while (ethertype == EtherType::VLAN || ethertype == EtherType::QINQ) && tags < MAX_VLAN_TAGS {
        let Some(inner) = rd16(frame, off + 2) else { break };
        ethertype = inner;
        off += vlan::HEADER_LEN;
        tags += 1;
    }
    let proto = match ethertype {
        EtherType::IPV4 => frame.get(off + 9).copied(),
        EtherType::IPV6 => frame.get(off + 6).copied(),
        _ => None,
    };
    Some((ethertype, proto))
}

/// [`locate_signature`] followed by [`Signature::parse`]: `None` for a frame that is not
/// netrig's (no place for a signature, payload shorter than the signature, wrong magic).
#[inline]
pub fn find_signature(frame: &[u8]) -> Option<Signature> {
    let (at, len) = locate_signature(frame)?;
    if len < signature::LEN {
        return None;
    }
    Signature::parse(frame.get(at..)?)
}

/// The signature of a frame that carries it at `site`: after the headers (parsed to it, as
/// [`find_signature`]) or in its last [`signature::LEN`] bytes. `None` for a frame that is not
/// netrig's, and always for [`Site::None`].
#[inline]
pub fn locate(frame: &[u8], site: Site) -> Option<Signature> {
    match site {
        Site::Payload => find_signature(frame),
        Site::End => Signature::parse(&frame[frame.len().checked_sub(signature::LEN)?..]),
        Site::None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_names_ethertype_and_ip_protocol() {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(classify(&f), Some((0x0806, None)));
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14 + 9] = 6;
        assert_eq!(classify(&f), Some((0x0800, Some(6))));
        // Behind a QinQ pair of tags: IPv6 with next header 58 (ICMPv6).
        let mut q = vec![0u8; 80];
        q[12..14].copy_from_slice(&0x88a8u16.to_be_bytes());
        q[16..18].copy_from_slice(&0x8100u16.to_be_bytes());
        q[20..22].copy_from_slice(&0x86ddu16.to_be_bytes());
        q[22 + 6] = 58;
        assert_eq!(classify(&q), Some((0x86dd, Some(58))));
        assert_eq!(classify(&q[..13]), None);
        // A tag with nothing behind it is the tag's EtherType.
        assert_eq!(classify(&q[..16]), Some((0x88a8, None)));
    }

    /// 02:00:00:00:00:02 ← 02:00:00:00:00:01, 198.18.0.1:1024 → 198.19.0.1:1024, UDP
    /// checksum 0, signature flow 5 seq 6 ts 7: a complete 60-byte (64 B with FCS) frame.
    fn frame_v4() -> Vec<u8> {
        let mut f = vec![
            2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, // Ethernet
            0x45, 0x00, 0x00, 0x2e, 0x00, 0x00, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00, 198, 18, 0, 1, 198, 19, 0,
            1, // IPv4 (checksum not needed by the dissector)
            0x04, 0x00, 0x04, 0x00, 0x00, 0x1a, 0x00, 0x00, // UDP, length 26
        ];
        f.extend_from_slice(&Signature { trial: 4, warmup: false, flow_id: 5, seq: 6, tx_ts_ns: 7 }.to_bytes());
        assert_eq!(f.len(), 60);
        f
    }

    #[test]
    fn finds_signature_in_minimal_ipv4_frame() {
        let f = frame_v4();
        let loc = locate_udp_payload(&f).unwrap();
        assert_eq!(loc, UdpLocation { l3: L3::V4, l3_offset: 14, l4_offset: 34, payload_offset: 42, payload_len: 18 });
        assert_eq!(find_signature(&f), Some(Signature { trial: 4, warmup: false, flow_id: 5, seq: 6, tx_ts_ns: 7 }));
        // Ethernet padding after the datagram is fine.
        let mut padded = f.clone();
        padded.extend_from_slice(&[0; 10]);
        assert_eq!(locate_udp_payload(&padded), Some(loc));
    }

    #[test]
    fn vlan_and_qinq() {
        let f = frame_v4();
        let mut one = f[..12].to_vec();
        one.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
        one.extend_from_slice(&f[12..]);
        let loc = locate_udp_payload(&one).unwrap();
        assert_eq!((loc.l3_offset, loc.payload_offset), (18, 46));
        assert!(find_signature(&one).is_some());
        let mut two = f[..12].to_vec();
        two.extend_from_slice(&[0x88, 0xa8, 0x00, 0x0a, 0x81, 0x00, 0x00, 0x64]);
        two.extend_from_slice(&f[12..]);
        assert_eq!(locate_udp_payload(&two).unwrap().l3_offset, 22);
        let mut three = f[..12].to_vec();
        three.extend_from_slice(&[0x81, 0x00, 0, 1, 0x81, 0x00, 0, 2, 0x81, 0x00, 0, 3]);
        three.extend_from_slice(&f[12..]);
        assert_eq!(locate_udp_payload(&three), None);
    }

    #[test]
    fn ipv4_options_and_fragments() {
        let f = frame_v4();
        let mut o = f[..34].to_vec();
        o.extend_from_slice(&[1, 1, 1, 0]); // NOP NOP NOP EOL
        o.extend_from_slice(&f[34..]);
        o[14] = 0x46;
        o[17] = 0x32;
        let loc = locate_udp_payload(&o).unwrap();
        assert_eq!((loc.l4_offset, loc.payload_offset), (38, 46));
        assert!(find_signature(&o).is_some());
        // Non-first fragment: ignored.
        let mut nf = f.clone();
        nf[21] = 0x01;
        assert_eq!(locate_udp_payload(&nf), None);
        // First fragment with a UDP length beyond this frame: payload as carried.
        let mut ff = f.clone();
        ff[20] = 0x20;
        ff[38] = 0x05;
        ff[39] = 0xc8;
        assert_eq!(locate_udp_payload(&ff).unwrap().payload_len, 18);
        assert!(find_signature(&ff).is_some());
    }

    #[test]
    fn not_netrigs() {
        let f = frame_v4();
        for cut in 0..f.len() {
            assert_eq!(find_signature(&f[..cut]), None, "cut at {cut}");
        }
        let mut arp = f.clone();
        arp[13] = 0x06;
        assert_eq!(locate_udp_payload(&arp), None);
        let mut tcp = f.clone();
        tcp[23] = 6;
        assert_eq!(locate_udp_payload(&tcp), None);
        let mut magic = f.clone();
        magic[42] = b'X';
        assert!(locate_udp_payload(&magic).is_some());
        assert_eq!(find_signature(&magic), None);
        let mut short = f.clone();
        short[17] = 0x2d; // IP total 45, UDP length 26 no longer fits
        assert_eq!(locate_udp_payload(&short), None);
        let mut udp_short = f.clone();
        udp_short[39] = 0x19; // UDP payload 17 bytes: too short for the signature
        assert!(locate_udp_payload(&udp_short).is_some());
        assert_eq!(find_signature(&udp_short), None);
        let mut ulen7 = f;
        ulen7[39] = 7;
        assert_eq!(locate_udp_payload(&ulen7), None);
    }

    fn frame_v6(ext: &[u8], first_nh: u8) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd];
        let plen = (ext.len() + 8 + signature::LEN) as u16;
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&plen.to_be_bytes());
        f.extend_from_slice(&[first_nh, 64]);
        f.extend_from_slice(&[0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(ext);
        f.extend_from_slice(&[0x04, 0x00, 0x04, 0x00, 0x00, 26, 0x12, 0x34]);
        f.extend_from_slice(&Signature { trial: 0, warmup: false, flow_id: 1, seq: 2, tx_ts_ns: 3 }.to_bytes());
        f
    }

    #[test]
    fn ipv6_direct_and_with_extension_headers() {
        let f = frame_v6(&[], ip_proto::UDP);
        let loc = locate_udp_payload(&f).unwrap();
        assert_eq!(loc, UdpLocation { l3: L3::V6, l3_offset: 14, l4_offset: 54, payload_offset: 62, payload_len: 18 });
        assert_eq!(find_signature(&f).unwrap().tx_ts_ns, 3);
        // Hop-by-hop (8 bytes) then destination options (16 bytes) then UDP.
        let mut ext = vec![ip_proto::IPV6_DEST_OPTS, 0, 1, 4, 0, 0, 0, 0];
        ext.extend_from_slice(&[ip_proto::UDP, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let f = frame_v6(&ext, ip_proto::HOP_BY_HOP);
        assert_eq!(locate_udp_payload(&f).unwrap().l4_offset, 54 + 24);
        assert!(find_signature(&f).is_some());
        // Fragment header: first fragment accepted, later fragments not.
        let f = frame_v6(&[ip_proto::UDP, 0, 0, 1, 0, 0, 0, 9], ip_proto::IPV6_FRAGMENT);
        assert!(find_signature(&f).is_some());
        let f = frame_v6(&[ip_proto::UDP, 0, 0, 8, 0, 0, 0, 9], ip_proto::IPV6_FRAGMENT);
        assert_eq!(locate_udp_payload(&f), None);
        // ICMPv6 / no next header: not netrig's.
        assert_eq!(locate_udp_payload(&frame_v6(&[], ip_proto::ICMPV6)), None);
        assert_eq!(locate_udp_payload(&frame_v6(&[0; 8], ip_proto::IPV6_NO_NEXT)), None);
        // Extension header running past the payload length.
        let f = frame_v6(&[ip_proto::UDP, 200, 0, 0, 0, 0, 0, 0], ip_proto::HOP_BY_HOP);
        assert_eq!(locate_udp_payload(&f), None);
        let f = frame_v6(&[], ip_proto::UDP);
        for cut in 0..f.len() {
            assert_eq!(find_signature(&f[..cut]), None, "cut at {cut}");
        }
    }
}
