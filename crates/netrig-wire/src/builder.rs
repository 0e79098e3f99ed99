//! Header templates for the TX path, and per-frame patching with incremental checksums.
//!
//! The engine builds one template per (stream, frame length) with [`build_udp_frame`],
//! copies it into each TX buffer and then patches only what varies:
//! [`set_l3_addrs`] / [`set_ports`] per flow, [`patch_signature`] (or the cheaper
//! [`patch_seq_ts`]) per frame, and [`set_frame_len`] for variable frame sizes. Every patch
//! keeps the IPv4 header checksum and (when enabled) the UDP checksum valid by RFC 1624
//! incremental update, reading the old bytes from the buffer itself — so a patch is
//! correct on any buffer holding a valid frame built from the same template, whatever
//! was patched into it before.
//!
//! Every function checks the buffer length against [`TemplateInfo::frame_len`] up front
//! and returns an error instead of panicking.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::dissect::L3;
use crate::ethernet::{self, EthernetAddress};
use crate::signature::{self, Signature};
use crate::{arp, check_out, checksum, ip_proto, ipv4, ipv6, udp, vlan, EtherType, IpPair, Result, WireError};

/// Minimum Ethernet frame length without FCS (64 B on the wire).
pub const MIN_FRAME_LEN: usize = 60;

/// Network-layer part of a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L3Spec {
    V4 { src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, dscp: u8 },
    V6 { src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8, tc: u8 },
}

impl L3Spec {
    pub fn ip_pair(&self) -> IpPair {
        match *self {
            L3Spec::V4 { src, dst, .. } => IpPair::V4 { src, dst },
            L3Spec::V6 { src, dst, .. } => IpPair::V6 { src, dst },
        }
    }
    fn header_len(&self) -> usize {
        match self {
            L3Spec::V4 { .. } => ipv4::HEADER_LEN,
            L3Spec::V6 { .. } => ipv6::HEADER_LEN,
        }
    }
    fn ethertype(&self) -> u16 {
        match self {
            L3Spec::V4 { .. } => EtherType::IPV4,
            L3Spec::V6 { .. } => EtherType::IPV6,
        }
    }
}

/// What a stream's frames look like. `vlan.inner_ethertype` is ignored (set from `l3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TemplateSpec {
    pub src_mac: EthernetAddress,
    pub dst_mac: EthernetAddress,
    pub vlan: Option<vlan::Repr>,
    pub l3: L3Spec,
    pub src_port: u16,
    pub dst_port: u16,
    /// Compute the UDP checksum over IPv4 (over IPv6 it is always computed). Off by
    /// default: checksum 0 means "none" over IPv4 and saves the per-frame update.
    pub udp_checksum: bool,
}

/// Where the patchable fields of a built template are. Offsets are from the frame start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TemplateInfo {
    /// Frame length without FCS.
    pub frame_len: usize,
    pub l3: L3,
    pub l3_offset: usize,
    pub l4_offset: usize,
    /// Start of the signature (= start of the UDP payload).
    pub sig_offset: usize,
    /// IPv4 header checksum (None for IPv6).
    pub ipv4_csum_offset: Option<usize>,
    /// UDP checksum (None when it is 0 = disabled, IPv4 only).
    pub udp_csum_offset: Option<usize>,
}

impl TemplateInfo {
    /// UDP payload length.
    pub fn payload_len(&self) -> usize {
        self.frame_len - self.sig_offset
    }
}

fn l3_offset(spec: &TemplateSpec) -> usize {
    ethernet::HEADER_LEN + if spec.vlan.is_some() { vlan::HEADER_LEN } else { 0 }
}

/// Smallest frame (without FCS) that holds the headers plus the signature, never below
/// 60: IPv4 60, IPv4+VLAN 64, IPv6 80, IPv6+VLAN 84.
pub fn min_frame_len(spec: &TemplateSpec) -> usize {
    let n = l3_offset(spec) + spec.l3.header_len() + udp::HEADER_LEN + signature::LEN;
    n.max(MIN_FRAME_LEN)
}

/// Largest frame (without FCS) the IP and UDP length fields can describe.
pub fn max_frame_len(spec: &TemplateSpec) -> usize {
    let l3 = l3_offset(spec);
    match spec.l3 {
        L3Spec::V4 { .. } => l3 + usize::from(u16::MAX),
        L3Spec::V6 { .. } => l3 + ipv6::HEADER_LEN + usize::from(u16::MAX),
    }
}

/// Writes a complete frame of `frame_len` bytes (without FCS) into `buf`: Ethernet,
/// optional 802.1Q tag, IPv4 or IPv6, UDP with correct lengths and checksums, then a
/// zeroed signature and zero padding.
pub fn build_udp_frame(spec: &TemplateSpec, frame_len: usize, buf: &mut [u8]) -> Result<TemplateInfo> {
    let min = min_frame_len(spec);
    if frame_len < min {
        return Err(WireError::FrameTooShort { min, requested: frame_len });
    }
    if frame_len > max_frame_len(spec) {
        return Err(WireError::Invalid("frame length exceeds what the IP/UDP length fields can carry"));
    }
    check_out(buf, frame_len)?;
    let buf = &mut buf[..frame_len];
    buf.fill(0);

    let l3_off = l3_offset(spec);
    let l4_off = l3_off + spec.l3.header_len();
    let sig_off = l4_off + udp::HEADER_LEN;
    let udp_len = frame_len - l4_off;

    let outer = if spec.vlan.is_some() { EtherType::VLAN } else { spec.l3.ethertype() };
    ethernet::Repr { src_addr: spec.src_mac, dst_addr: spec.dst_mac, ethertype: outer }.emit(buf)?;
    if let Some(tag) = spec.vlan {
        vlan::Repr { inner_ethertype: spec.l3.ethertype(), ..tag }.emit(&mut buf[ethernet::HEADER_LEN..])?;
    }
    let (ipv4_csum_offset, udp_csum) = match spec.l3 {
        L3Spec::V4 { src, dst, ttl, dscp } => {
            ipv4::Repr {
                src_addr: src,
                dst_addr: dst,
                protocol: ip_proto::UDP,
                payload_len: udp_len as u16,
                ttl,
                dscp,
                ident: 0,
            }
            .emit(&mut buf[l3_off..])?;
            (Some(l3_off + ipv4::CHECKSUM_OFFSET), spec.udp_checksum)
        }
        L3Spec::V6 { src, dst, hop_limit, tc } => {
            ipv6::Repr {
                src_addr: src,
                dst_addr: dst,
                next_header: ip_proto::UDP,
                payload_len: udp_len as u16,
                hop_limit,
                traffic_class: tc,
                flow_label: 0,
            }
            .emit(&mut buf[l3_off..])?;
            (None, true)
        }
    };
    udp::Repr { src_port: spec.src_port, dst_port: spec.dst_port }.emit(
        &mut buf[l4_off..],
        udp_len - udp::HEADER_LEN,
        &spec.l3.ip_pair(),
        udp_csum,
    )?;
    Ok(TemplateInfo {
        frame_len,
        l3: match spec.l3 {
            L3Spec::V4 { .. } => L3::V4,
            L3Spec::V6 { .. } => L3::V6,
        },
        l3_offset: l3_off,
        l4_offset: l4_off,
        sig_offset: sig_off,
        ipv4_csum_offset,
        udp_csum_offset: udp_csum.then_some(l4_off + udp::CHECKSUM_OFFSET),
    })
}

#[inline(always)]
fn check_frame(buf: &[u8], info: &TemplateInfo) -> Result<()> {
    if buf.len() < info.frame_len {
        Err(WireError::BufferTooSmall { needed: info.frame_len, available: buf.len() })
    } else {
        Ok(())
    }
}

#[inline(always)]
fn range(at: usize, len: usize) -> Result<core::ops::Range<usize>> {
    Ok(at..at.checked_add(len).ok_or(WireError::Truncated)?)
}

#[inline(always)]
fn read16(buf: &[u8], at: usize) -> Result<u16> {
    match buf.get(range(at, 2)?) {
        Some(&[a, b]) => Ok(u16::from_be_bytes([a, b])),
        _ => Err(WireError::Truncated),
    }
}

#[inline(always)]
fn write16(buf: &mut [u8], at: usize, v: u16) -> Result<()> {
    buf.get_mut(range(at, 2)?).ok_or(WireError::Truncated)?.copy_from_slice(&v.to_be_bytes());
    Ok(())
}

/// Replaces `N` bytes at `at` with `new`, updating the checksums at `csums` (IPv4
/// header and/or UDP; a UDP result of 0 is stored as 0xFFFF).
#[inline(always)]
fn replace<const N: usize>(
    buf: &mut [u8],
    at: usize,
    new: &[u8; N],
    ip_csum: Option<usize>,
    udp_csum: Option<usize>,
) -> Result<()> {
    let dst = buf.get_mut(range(at, N)?).ok_or(WireError::Truncated)?;
    let mut old = [0u8; N];
    old.copy_from_slice(dst);
    dst.copy_from_slice(new);
    if let Some(o) = ip_csum {
        let c = checksum::update(read16(buf, o)?, &old, new);
        write16(buf, o, c)?;
    }
    if let Some(o) = udp_csum {
        let c = checksum::update(read16(buf, o)?, &old, new);
        write16(buf, o, if c == 0 { 0xFFFF } else { c })?;
    }
    Ok(())
}

/// Writes the whole signature and keeps the UDP checksum valid.
#[inline]
pub fn patch_signature(buf: &mut [u8], info: &TemplateInfo, sig: &Signature) -> Result<()> {
    check_frame(buf, info)?;
    replace(buf, info.sig_offset, &sig.to_bytes(), None, info.udp_csum_offset)
}

/// Writes only the sequence number and timestamp of a signature already patched in
/// (magic, tag and flow id unchanged) and keeps the UDP checksum valid.
#[inline]
pub fn patch_seq_ts(buf: &mut [u8], info: &TemplateInfo, seq: u64, ts: u64) -> Result<()> {
    check_frame(buf, info)?;
    let mut new = [0u8; 10];
    signature::write_seq_ts_array(&mut new, seq, ts);
    replace(buf, info.sig_offset + signature::SEQ_OFFSET, &new, None, info.udp_csum_offset)
}

/// Replaces the IP source and destination addresses; the family must match the template.
/// Updates the IPv4 header checksum and the UDP checksum (pseudo-header).
pub fn set_l3_addrs(buf: &mut [u8], info: &TemplateInfo, addrs: &IpPair) -> Result<()> {
    check_frame(buf, info)?;
    match (info.l3, addrs) {
        (L3::V4, IpPair::V4 { src, dst }) => {
            let mut new = [0u8; 8];
            new[..4].copy_from_slice(&src.octets());
            new[4..].copy_from_slice(&dst.octets());
            let at = info.l3_offset + ipv4::SRC_ADDR_OFFSET;
            replace(buf, at, &new, info.ipv4_csum_offset, info.udp_csum_offset)
        }
        (L3::V6, IpPair::V6 { src, dst }) => {
            let mut new = [0u8; 32];
            new[..16].copy_from_slice(&src.octets());
            new[16..].copy_from_slice(&dst.octets());
            let at = info.l3_offset + ipv6::SRC_ADDR_OFFSET;
            replace(buf, at, &new, None, info.udp_csum_offset)
        }
        _ => Err(WireError::Invalid("address family differs from the template's")),
    }
}

/// Replaces the UDP source and destination ports, updating the UDP checksum.
pub fn set_ports(buf: &mut [u8], info: &TemplateInfo, src_port: u16, dst_port: u16) -> Result<()> {
    check_frame(buf, info)?;
    let mut new = [0u8; 4];
    new[..2].copy_from_slice(&src_port.to_be_bytes());
    new[2..].copy_from_slice(&dst_port.to_be_bytes());
    replace(buf, info.l4_offset, &new, None, info.udp_csum_offset)
}

/// Changes the frame length of a template-built frame whose payload after the signature
/// is all zero (as [`build_udp_frame`] leaves it): rewrites the IP and UDP length fields,
/// updates the checksums incrementally and zeroes any bytes added when growing. `buf`
/// must hold at least `new_len` bytes. Returns the info for the new length.
pub fn set_frame_len(buf: &mut [u8], info: &TemplateInfo, new_len: usize) -> Result<TemplateInfo> {
    check_frame(buf, info)?;
    let min = (info.sig_offset + signature::LEN).max(MIN_FRAME_LEN);
    if new_len < min {
        return Err(WireError::FrameTooShort { min, requested: new_len });
    }
    let l3_len = new_len - info.l3_offset;
    let udp_len = new_len - info.l4_offset;
    let (ip_len_at, ip_len) = match info.l3 {
        L3::V4 => (info.l3_offset + ipv4::LENGTH_OFFSET, l3_len),
        L3::V6 => (info.l3_offset + ipv6::LENGTH_OFFSET, udp_len),
    };
    if ip_len > usize::from(u16::MAX) || udp_len > usize::from(u16::MAX) {
        return Err(WireError::Invalid("frame length exceeds what the IP/UDP length fields can carry"));
    }
    check_out(buf, new_len)?;
    if new_len > info.frame_len {
        buf[info.frame_len..new_len].fill(0);
    }
    let old_ip_len = read16(buf, ip_len_at)?;
    write16(buf, ip_len_at, ip_len as u16)?;
    if let Some(o) = info.ipv4_csum_offset {
        let c = checksum::update16(read16(buf, o)?, old_ip_len, ip_len as u16);
        write16(buf, o, c)?;
    }
    let udp_len_at = info.l4_offset + udp::LENGTH_OFFSET;
    let old_udp_len = read16(buf, udp_len_at)?;
    write16(buf, udp_len_at, udp_len as u16)?;
    if let Some(o) = info.udp_csum_offset {
        // The UDP length is covered twice: in the header and in the pseudo-header.
        let c = checksum::update16(read16(buf, o)?, old_udp_len, udp_len as u16);
        let c = checksum::update16(c, old_udp_len, udp_len as u16);
        write16(buf, o, if c == 0 { 0xFFFF } else { c })?;
    }
    Ok(TemplateInfo { frame_len: new_len, ..*info })
}

/// Writes an Ethernet (optionally VLAN-tagged) ARP frame, zero-padded to 60 bytes.
/// Returns the frame length (without FCS).
pub fn build_arp_frame(
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    vlan: Option<vlan::Repr>,
    arp: &arp::Repr,
    buf: &mut [u8],
) -> Result<usize> {
    let l3 = ethernet::HEADER_LEN + if vlan.is_some() { vlan::HEADER_LEN } else { 0 };
    let len = (l3 + arp::PACKET_LEN).max(MIN_FRAME_LEN);
    check_out(buf, len)?;
    buf[..len].fill(0);
    let outer = if vlan.is_some() { EtherType::VLAN } else { EtherType::ARP };
    ethernet::Repr { src_addr: src_mac, dst_addr: dst_mac, ethertype: outer }.emit(buf)?;
    if let Some(tag) = vlan {
        vlan::Repr { inner_ethertype: EtherType::ARP, ..tag }.emit(&mut buf[ethernet::HEADER_LEN..])?;
    }
    arp.emit(&mut buf[l3..])?;
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dissect::{find_signature, locate_udp_payload};

    fn spec_v4() -> TemplateSpec {
        TemplateSpec {
            src_mac: "02:00:00:00:00:01".parse().unwrap(),
            dst_mac: "02:00:00:00:00:02".parse().unwrap(),
            vlan: None,
            l3: L3Spec::V4 { src: Ipv4Addr::new(198, 18, 0, 1), dst: Ipv4Addr::new(198, 19, 0, 1), ttl: 64, dscp: 0 },
            src_port: 1024,
            dst_port: 1024,
            udp_checksum: false,
        }
    }

    fn spec_v6() -> TemplateSpec {
        TemplateSpec {
            l3: L3Spec::V6 {
                src: "2001:2::1".parse().unwrap(),
                dst: "2001:2:0:1::1".parse().unwrap(),
                hop_limit: 64,
                tc: 0,
            },
            ..spec_v4()
        }
    }

    /// Verifies every checksum in a built frame the slow way, via the views.
    fn verify(buf: &[u8], info: &TemplateInfo) {
        let f = &buf[..info.frame_len];
        let ip = &f[info.l3_offset..];
        let ips = match info.l3 {
            L3::V4 => {
                let p = ipv4::Packet::new_checked(ip).unwrap();
                assert!(p.verify_checksum(), "IPv4 header checksum");
                assert_eq!(p.total_len() as usize, info.frame_len - info.l3_offset);
                IpPair::V4 { src: p.src_addr(), dst: p.dst_addr() }
            }
            L3::V6 => {
                let p = ipv6::Packet::new_checked(ip).unwrap();
                assert_eq!(p.payload_len() as usize, info.frame_len - info.l4_offset);
                IpPair::V6 { src: p.src_addr(), dst: p.dst_addr() }
            }
        };
        let u = udp::Packet::new_checked(&f[info.l4_offset..]).unwrap();
        assert_eq!(u.len() as usize, info.frame_len - info.l4_offset);
        assert!(u.verify_checksum(&ips), "UDP checksum");
        assert_eq!(u.checksum() != 0, info.udp_csum_offset.is_some());
    }

    /// The 64-byte IPv4 frame, byte for byte. IPv4 checksum by hand: 4500+002e+4011+c612+0001
    /// +c613+0001 = 0x2_1166 → 0x1168 → !0x1168 = 0xee97.
    #[test]
    fn ipv4_64_byte_fixture() {
        let mut buf = [0xAAu8; 80];
        let info = build_udp_frame(&spec_v4(), 60, &mut buf).unwrap();
        #[rustfmt::skip]
        let expected: [u8; 60] = [
            2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00,
            0x45, 0x00, 0x00, 0x2e, 0x00, 0x00, 0x00, 0x00, 0x40, 0x11, 0xee, 0x97,
            198, 18, 0, 1, 198, 19, 0, 1,
            0x04, 0x00, 0x04, 0x00, 0x00, 0x1a, 0x00, 0x00,
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(buf[..60], expected);
        assert_eq!(buf[60], 0xAA, "nothing written past frame_len");
        assert_eq!(
            info,
            TemplateInfo {
                frame_len: 60,
                l3: L3::V4,
                l3_offset: 14,
                l4_offset: 34,
                sig_offset: 42,
                ipv4_csum_offset: Some(24),
                udp_csum_offset: None
            }
        );
        verify(&buf, &info);
        assert_eq!(find_signature(&buf[..60]), None, "template carries a zeroed signature");
        let sig = Signature { trial: 5, warmup: false, flow_id: 3, seq: 41, tx_ts_ns: 123_456_789 };
        patch_signature(&mut buf, &info, &sig).unwrap();
        assert_eq!(find_signature(&buf[..60]), Some(sig));
    }

    #[test]
    fn minimum_lengths() {
        let mut s = spec_v4();
        assert_eq!(min_frame_len(&s), 60);
        s.vlan = Some(vlan::Repr { pcp: 0, dei: false, vid: 10, inner_ethertype: 0 });
        assert_eq!(min_frame_len(&s), 64);
        let mut s6 = spec_v6();
        assert_eq!(min_frame_len(&s6), 80);
        s6.vlan = s.vlan;
        assert_eq!(min_frame_len(&s6), 84);
        let mut buf = [0u8; 100];
        assert_eq!(build_udp_frame(&s, 60, &mut buf).unwrap_err(), WireError::FrameTooShort { min: 64, requested: 60 });
        assert!(matches!(build_udp_frame(&s, 101, &mut buf), Err(WireError::BufferTooSmall { needed: 101, .. })));
        assert!(matches!(build_udp_frame(&spec_v4(), 70_000, &mut buf), Err(WireError::Invalid(_))));
    }

    #[test]
    fn all_variants_verify_after_every_patch() {
        for base in [spec_v4(), spec_v6()] {
            for vlan in [None, Some(vlan::Repr { pcp: 3, dei: false, vid: 100, inner_ethertype: 0 })] {
                for udp_checksum in [false, true] {
                    let spec = TemplateSpec { vlan, udp_checksum, ..base };
                    for len in [min_frame_len(&spec), 128, 1514] {
                        let mut buf = vec![0u8; 1514];
                        let info = build_udp_frame(&spec, len, &mut buf).unwrap();
                        verify(&buf, &info);
                        let loc = locate_udp_payload(&buf[..len]).unwrap();
                        assert_eq!(loc.payload_offset, info.sig_offset);
                        assert_eq!(loc.payload_len, info.payload_len());
                        let sig = Signature {
                            trial: 0x7F_FFFF,
                            warmup: true,
                            flow_id: 0xFF_FFFF,
                            seq: 0xFF_FFFF_FFFF,
                            tx_ts_ns: 1,
                        };
                        patch_signature(&mut buf, &info, &sig).unwrap();
                        verify(&buf, &info);
                        patch_seq_ts(&mut buf, &info, 7, 8).unwrap();
                        verify(&buf, &info);
                        assert_eq!(find_signature(&buf[..len]), Some(Signature { seq: 7, tx_ts_ns: 8, ..sig }));
                        set_ports(&mut buf, &info, 0xFFFF, 0).unwrap();
                        verify(&buf, &info);
                        let addrs = match spec.l3 {
                            L3Spec::V4 { .. } => {
                                IpPair::V4 { src: Ipv4Addr::new(198, 18, 255, 255), dst: Ipv4Addr::new(198, 19, 0, 0) }
                            }
                            L3Spec::V6 { .. } => {
                                IpPair::V6 { src: "2001:2::ffff".parse().unwrap(), dst: "2001:2::".parse().unwrap() }
                            }
                        };
                        set_l3_addrs(&mut buf, &info, &addrs).unwrap();
                        verify(&buf, &info);
                        let grown = set_frame_len(&mut buf, &info, 1514).unwrap();
                        verify(&buf, &grown);
                        let shrunk = set_frame_len(&mut buf, &grown, min_frame_len(&spec)).unwrap();
                        verify(&buf, &shrunk);
                        assert_eq!(find_signature(&buf[..shrunk.frame_len]).unwrap().flow_id, 0xFF_FFFF);
                    }
                }
            }
        }
    }

    #[test]
    fn patch_errors() {
        let mut buf = [0u8; 60];
        let info = build_udp_frame(&spec_v4(), 60, &mut buf).unwrap();
        let sig = Signature::default();
        assert!(matches!(patch_signature(&mut buf[..59], &info, &sig), Err(WireError::BufferTooSmall { .. })));
        let v6 = IpPair::V6 { src: Ipv6Addr::LOCALHOST, dst: Ipv6Addr::LOCALHOST };
        assert!(matches!(set_l3_addrs(&mut buf, &info, &v6), Err(WireError::Invalid(_))));
        assert!(matches!(set_frame_len(&mut buf, &info, 59), Err(WireError::FrameTooShort { min: 60, .. })));
        assert!(matches!(set_frame_len(&mut buf, &info, 61), Err(WireError::BufferTooSmall { .. })));
        let bogus = TemplateInfo { sig_offset: usize::MAX - 3, ..info };
        assert!(patch_signature(&mut buf, &bogus, &sig).is_err());
    }

    #[test]
    fn arp_frame() {
        let mac: EthernetAddress = "02:00:00:00:00:01".parse().unwrap();
        let g = arp::Repr::gratuitous(mac, Ipv4Addr::new(198, 18, 0, 1));
        let mut buf = [0u8; 64];
        let n = build_arp_frame(mac, EthernetAddress::BROADCAST, None, &g, &mut buf).unwrap();
        assert_eq!(n, 60);
        assert_eq!(&buf[12..14], &[0x08, 0x06]);
        let p = arp::Packet::new_checked(&buf[14..n]).unwrap();
        assert_eq!(arp::Repr::parse(&p).unwrap(), g);
        let tag = vlan::Repr { pcp: 0, dei: false, vid: 5, inner_ethertype: 0 };
        let n = build_arp_frame(mac, EthernetAddress::BROADCAST, Some(tag), &g, &mut buf).unwrap();
        assert_eq!(n, 60);
        assert_eq!(&buf[12..18], &[0x81, 0x00, 0x00, 0x05, 0x08, 0x06]);
    }
}
