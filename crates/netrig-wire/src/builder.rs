//! Header templates for the TX path, and per-frame patching with incremental checksums.
//!
//! The engine builds one template per (stream, frame length) with [`build_udp_frame`],
//! copies it into each TX buffer and then patches only what varies:
//! [`set_l3_addrs`] / [`set_ports`] per flow, [`patch_signature`] per frame, and [`set_frame_len`] for variable frame sizes. Every patch
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
use crate::{
    arp, check_out, checksum, icmpv4, icmpv6, ip_proto, ipv4, ipv6, tcp, udp, vlan, EtherType, IpPair, Result,
    WireError,
};

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

/// What follows the IP header (or, for [`Proto::Raw`], the Ethernet header): the part of a
/// template that carries the signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Proto {
    /// UDP; the signature starts the UDP payload (the default, netrig's classic frame).
    #[default]
    Udp,
    /// A TCP segment without options: `flags` (see [`tcp::flags`]), sequence and
    /// acknowledgement numbers and window as given; the signature starts the TCP payload;
    /// the checksum is always valid.
    Tcp { flags: u8, seq: u32, ack: u32, window: u16 },
    /// ICMP echo request (ICMPv6 echo request over IPv6): identifier = the source port,
    /// sequence number = the destination port (so port ranges vary them); the signature
    /// starts the echo data; the checksum is always valid.
    IcmpEcho,
    /// No IP: the signature follows the Ethernet header (and tags) directly, under this
    /// EtherType (not IPv4, IPv6, ARP or a VLAN TPID).
    Raw { ethertype: u16 },
}

impl Proto {
    /// The transport header length (0 for raw frames).
    pub fn header_len(&self) -> usize {
        match self {
            Proto::Udp => udp::HEADER_LEN,
            Proto::Tcp { .. } => tcp::HEADER_LEN,
            Proto::IcmpEcho => icmpv4::HEADER_LEN,
            Proto::Raw { .. } => 0,
        }
    }
    /// `"udp"`, `"tcp"`, `"icmp"` or `"raw"`.
    pub fn name(&self) -> &'static str {
        match self {
            Proto::Udp => "udp",
            Proto::Tcp { .. } => "tcp",
            Proto::IcmpEcho => "icmp",
            Proto::Raw { .. } => "raw",
        }
    }
    /// EtherTypes a raw frame may not use: they would make it an IP, ARP or tagged frame.
    pub fn raw_ethertype_ok(ethertype: u16) -> bool {
        ethertype >= 0x0600
            && ![EtherType::IPV4, EtherType::IPV6, EtherType::ARP, EtherType::VLAN, EtherType::QINQ]
                .contains(&ethertype)
    }
}

/// What a stream's frames look like. The tags' `inner_ethertype` is ignored (set from what
/// follows). `outer_vlan` is an 802.1ad service tag (TPID 0x88A8) in front of `vlan` (802.1Q,
/// TPID 0x8100): QinQ; it needs `vlan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TemplateSpec {
    pub src_mac: EthernetAddress,
    pub dst_mac: EthernetAddress,
    pub outer_vlan: Option<vlan::Repr>,
    pub vlan: Option<vlan::Repr>,
    /// Ignored for [`Proto::Raw`].
    pub l3: L3Spec,
    pub proto: Proto,
    pub src_port: u16,
    pub dst_port: u16,
    /// Compute the UDP checksum over IPv4 (over IPv6 it is always computed). Off by
    /// default: checksum 0 means "none" over IPv4 and saves the per-frame update.
    pub udp_checksum: bool,
}

impl TemplateSpec {
    /// A UDP template (no QinQ): the fields every template has.
    pub fn udp(src_mac: EthernetAddress, dst_mac: EthernetAddress, l3: L3Spec, src_port: u16, dst_port: u16) -> Self {
        TemplateSpec {
            src_mac,
            dst_mac,
            outer_vlan: None,
            vlan: None,
            l3,
            proto: Proto::Udp,
            src_port,
            dst_port,
            udp_checksum: false,
        }
    }
}

/// Where the patchable fields of a built template are. Offsets are from the frame start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TemplateInfo {
    /// Frame length without FCS.
    pub frame_len: usize,
    /// The IP family (`None` for raw L2 frames).
    pub l3: Option<L3>,
    pub proto: Proto,
    /// Start of the 802.1Q tag's TCI (the inner tag under QinQ), if tagged.
    pub vlan_tci_offset: Option<usize>,
    pub l3_offset: usize,
    pub l4_offset: usize,
    /// Start of the signature (= start of the UDP/TCP payload, the echo data, or the L2 payload).
    pub sig_offset: usize,
    /// IPv4 header checksum (None for IPv6 and raw).
    pub ipv4_csum_offset: Option<usize>,
    /// The transport checksum (UDP, TCP, ICMP, ICMPv6); None for raw frames and for UDP over
    /// IPv4 without a checksum (0 = disabled).
    pub l4_csum_offset: Option<usize>,
    /// The transport checksum covers the IP addresses and length (a pseudo-header: UDP, TCP,
    /// ICMPv6; not ICMPv4).
    pub l4_pseudo: bool,
}

impl TemplateInfo {
    /// Payload length after the transport header (UDP/TCP payload, echo data, L2 payload).
    pub fn payload_len(&self) -> usize {
        self.frame_len - self.sig_offset
    }
}

fn l3_offset(spec: &TemplateSpec) -> usize {
    ethernet::HEADER_LEN
        + if spec.vlan.is_some() { vlan::HEADER_LEN } else { 0 }
        + if spec.outer_vlan.is_some() { vlan::HEADER_LEN } else { 0 }
}

fn l3_header_len(spec: &TemplateSpec) -> usize {
    match spec.proto {
        Proto::Raw { .. } => 0,
        _ => spec.l3.header_len(),
    }
}

/// Smallest frame (without FCS) that holds the headers plus the signature, never below
/// 60: UDP over IPv4 60, +VLAN 64, IPv6 80, IPv6+VLAN 84; TCP adds 12.
pub fn min_frame_len(spec: &TemplateSpec) -> usize {
    let n = l3_offset(spec) + l3_header_len(spec) + spec.proto.header_len() + signature::LEN;
    n.max(MIN_FRAME_LEN)
}

/// Largest frame (without FCS) the IP and UDP length fields can describe.
pub fn max_frame_len(spec: &TemplateSpec) -> usize {
    let l3 = l3_offset(spec);
    match (spec.proto, spec.l3) {
        (Proto::Raw { .. }, _) => usize::MAX,
        (_, L3Spec::V4 { .. }) => l3 + usize::from(u16::MAX),
        (_, L3Spec::V6 { .. }) => l3 + ipv6::HEADER_LEN + usize::from(u16::MAX),
    }
}

/// Writes a complete UDP frame; see [`build_frame`] (kept for the callers that name it).
pub fn build_udp_frame(spec: &TemplateSpec, frame_len: usize, buf: &mut [u8]) -> Result<TemplateInfo> {
    build_frame(spec, frame_len, buf)
}

/// Writes a complete frame of `frame_len` bytes (without FCS) into `buf`: Ethernet, optional
/// 802.1ad and 802.1Q tags, then (unless raw) IPv4 or IPv6 and the transport header of
/// `spec.proto` with correct lengths and checksums, then a zeroed signature and zero padding.
pub fn build_frame(spec: &TemplateSpec, frame_len: usize, buf: &mut [u8]) -> Result<TemplateInfo> {
    check_spec(spec, frame_len)?;
    check_out(buf, frame_len)?;
    let buf = &mut buf[..frame_len];
    buf.fill(0);

    let l3_off = l3_offset(spec);
    let l4_off = l3_off + l3_header_len(spec);
    let sig_off = l4_off + spec.proto.header_len();
    let l4_len = frame_len - l4_off;
    let vlan_tci_offset = emit_l2(spec, buf)?;
    let l3 = match spec.proto {
        Proto::Raw { .. } => None,
        _ => Some(match spec.l3 {
            L3Spec::V4 { .. } => L3::V4,
            L3Spec::V6 { .. } => L3::V6,
        }),
    };
    let ipv4_csum_offset = match l3 {
        Some(_) => emit_l3(spec, &mut buf[l3_off..], l4_len)?.map(|o| l3_off + o),
        None => None,
    };
    let (l4_csum_offset, l4_pseudo) = emit_l4(spec, &mut buf[l4_off..], l4_len)?;
    Ok(TemplateInfo {
        frame_len,
        l3,
        proto: spec.proto,
        vlan_tci_offset,
        l3_offset: l3_off,
        l4_offset: l4_off,
        sig_offset: sig_off,
        ipv4_csum_offset,
        l4_csum_offset: l4_csum_offset.map(|o| l4_off + o),
        l4_pseudo,
    })
}

/// A frame of `frame_len` bytes can be built from `spec`: long enough, not longer than the length
/// fields can describe, an outer tag only with an inner one, a raw EtherType that is not IP's.
fn check_spec(spec: &TemplateSpec, frame_len: usize) -> Result<()> {
    let min = min_frame_len(spec);
    if frame_len < min {
        return Err(WireError::FrameTooShort { min, requested: frame_len });
    }
    if frame_len > max_frame_len(spec) {
        return Err(WireError::Invalid("frame length exceeds what the IP/UDP length fields can carry"));
    }
    if spec.outer_vlan.is_some() && spec.vlan.is_none() {
        return Err(WireError::Invalid("an outer (802.1ad) tag needs an inner 802.1Q tag"));
    }
    if let Proto::Raw { ethertype } = spec.proto {
        if !Proto::raw_ethertype_ok(ethertype) {
            return Err(WireError::Invalid("raw EtherType must be >= 0x0600 and not IPv4, IPv6, ARP or a VLAN TPID"));
        }
    }
    Ok(())
}

/// Ethernet, then the tags from the outside in: each tag names what follows it. Returns the
/// offset of the 802.1Q tag.
fn emit_l2(spec: &TemplateSpec, buf: &mut [u8]) -> Result<Option<usize>> {
    let inner = match spec.proto {
        Proto::Raw { ethertype } => ethertype,
        _ => spec.l3.ethertype(),
    };
    let mut at = ethernet::HEADER_LEN;
    let mut vlan_tci_offset = None;
    let outer = match (spec.outer_vlan, spec.vlan) {
        (Some(_), _) => EtherType::QINQ,
        (None, Some(_)) => EtherType::VLAN,
        (None, None) => inner,
    };
    ethernet::Repr { src_addr: spec.src_mac, dst_addr: spec.dst_mac, ethertype: outer }.emit(buf)?;
    if let Some(tag) = spec.outer_vlan {
        vlan::Repr { inner_ethertype: EtherType::VLAN, ..tag }.emit(&mut buf[at..])?;
        at += vlan::HEADER_LEN;
    }
    if let Some(tag) = spec.vlan {
        vlan::Repr { inner_ethertype: inner, ..tag }.emit(&mut buf[at..])?;
        vlan_tci_offset = Some(at);
    }
    Ok(vlan_tci_offset)
}

/// The IPv4 or IPv6 header at the start of `buf`, for `l4_len` bytes of transport. Returns the
/// offset of the IPv4 header checksum in it (None for IPv6).
fn emit_l3(spec: &TemplateSpec, buf: &mut [u8], l4_len: usize) -> Result<Option<usize>> {
    let ip_proto = match (spec.proto, spec.l3) {
        (Proto::Udp, _) => ip_proto::UDP,
        (Proto::Tcp { .. }, _) => ip_proto::TCP,
        (Proto::IcmpEcho, L3Spec::V4 { .. }) => ip_proto::ICMP,
        (Proto::IcmpEcho, L3Spec::V6 { .. }) => ip_proto::ICMPV6,
        (Proto::Raw { .. }, _) => 0,
    };
    match spec.l3 {
        L3Spec::V4 { src, dst, ttl, dscp } => {
            ipv4::Repr {
                src_addr: src,
                dst_addr: dst,
                protocol: ip_proto,
                payload_len: l4_len as u16,
                ttl,
                dscp,
                ident: 0,
            }
            .emit(buf)?;
            Ok(Some(ipv4::CHECKSUM_OFFSET))
        }
        L3Spec::V6 { src, dst, hop_limit, tc } => {
            ipv6::Repr {
                src_addr: src,
                dst_addr: dst,
                next_header: ip_proto,
                payload_len: l4_len as u16,
                hop_limit,
                traffic_class: tc,
                flow_label: 0,
            }
            .emit(buf)?;
            Ok(None)
        }
    }
}

/// The transport header at the start of `buf` (`l4_len` bytes of transport). Returns the offset
/// of its checksum in it (None: raw, or UDP over IPv4 without a checksum) and whether the checksum
/// covers a pseudo-header.
fn emit_l4(spec: &TemplateSpec, buf: &mut [u8], l4_len: usize) -> Result<(Option<usize>, bool)> {
    let ips = spec.l3.ip_pair();
    Ok(match spec.proto {
        Proto::Udp => {
            let csum = spec.udp_checksum || ips.is_v6();
            udp::Repr { src_port: spec.src_port, dst_port: spec.dst_port }.emit(
                buf,
                l4_len - udp::HEADER_LEN,
                &ips,
                csum,
            )?;
            (csum.then_some(udp::CHECKSUM_OFFSET), true)
        }
        Proto::Tcp { flags, seq, ack, window } => {
            tcp::Repr {
                src_port: spec.src_port,
                dst_port: spec.dst_port,
                seq_number: seq,
                ack_number: ack,
                flags,
                window_len: window,
                checksum: 0,
            }
            .emit(buf, Some(&ips))?;
            (Some(tcp::CHECKSUM_OFFSET), true)
        }
        Proto::IcmpEcho => emit_echo(spec, buf),
        Proto::Raw { .. } => (None, false),
    })
}

/// An ICMP or ICMPv6 echo request header at the start of `buf`. The echo data (signature and
/// padding) is all zero here: it adds nothing to the sum.
fn emit_echo(spec: &TemplateSpec, buf: &mut [u8]) -> (Option<usize>, bool) {
    match spec.l3 {
        L3Spec::V4 { .. } => {
            let mut p = icmpv4::Packet::new_unchecked(buf);
            p.set_msg_type(icmpv4::TYPE_ECHO_REQUEST);
            p.set_msg_code(0);
            p.set_echo_ident(spec.src_port);
            p.set_echo_seq_no(spec.dst_port);
            p.fill_checksum();
            (Some(icmpv4::CHECKSUM_OFFSET), false)
        }
        L3Spec::V6 { src, dst, .. } => {
            let mut p = icmpv6::Packet::new_unchecked(buf);
            p.set_msg_type(icmpv6::TYPE_ECHO_REQUEST);
            p.set_msg_code(0);
            p.set_echo_ident(spec.src_port);
            p.set_echo_seq_no(spec.dst_port);
            p.fill_checksum(&src, &dst);
            (Some(icmpv6::CHECKSUM_OFFSET), true)
        }
    }
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

/// Replaces `N` bytes at `at` with `new`, updating the checksums at `ip_csum` (IPv4 header)
/// and `l4_csum` (transport; a result of 0 is stored as 0xFFFF, its ones'-complement twin,
/// since 0 means "no checksum" for UDP).
#[inline(always)]
fn replace<const N: usize>(
    buf: &mut [u8],
    at: usize,
    new: &[u8; N],
    ip_csum: Option<usize>,
    l4_csum: Option<usize>,
) -> Result<()> {
    let dst = buf.get_mut(range(at, N)?).ok_or(WireError::Truncated)?;
    let mut old = [0u8; N];
    old.copy_from_slice(dst);
    dst.copy_from_slice(new);
    if let Some(o) = ip_csum {
        let c = checksum::update(read16(buf, o)?, &old, new);
        write16(buf, o, c)?;
    }
    if let Some(o) = l4_csum {
        let c = checksum::update(read16(buf, o)?, &old, new);
        write16(buf, o, if c == 0 { 0xFFFF } else { c })?;
    }
    Ok(())
}

/// Writes the whole signature and keeps the transport checksum valid.
#[inline]
pub fn patch_signature(buf: &mut [u8], info: &TemplateInfo, sig: &Signature) -> Result<()> {
    check_frame(buf, info)?;
    replace(buf, info.sig_offset, &sig.to_bytes(), None, info.l4_csum_offset)
}

/// The transport checksum when it covers the IP pseudo-header (UDP, TCP, ICMPv6).
#[inline(always)]
fn pseudo_csum(info: &TemplateInfo) -> Option<usize> {
    if info.l4_pseudo {
        info.l4_csum_offset
    } else {
        None
    }
}

/// Replaces the IP source and destination addresses; the family must match the template.
/// Updates the IPv4 header checksum and the transport checksum when it covers the addresses.
pub fn set_l3_addrs(buf: &mut [u8], info: &TemplateInfo, addrs: &IpPair) -> Result<()> {
    check_frame(buf, info)?;
    match (info.l3, addrs) {
        (Some(L3::V4), IpPair::V4 { src, dst }) => {
            let mut new = [0u8; 8];
            new[..4].copy_from_slice(&src.octets());
            new[4..].copy_from_slice(&dst.octets());
            let at = info.l3_offset + ipv4::SRC_ADDR_OFFSET;
            replace(buf, at, &new, info.ipv4_csum_offset, pseudo_csum(info))
        }
        (Some(L3::V6), IpPair::V6 { src, dst }) => {
            let mut new = [0u8; 32];
            new[..16].copy_from_slice(&src.octets());
            new[16..].copy_from_slice(&dst.octets());
            let at = info.l3_offset + ipv6::SRC_ADDR_OFFSET;
            replace(buf, at, &new, None, pseudo_csum(info))
        }
        (None, _) => Err(WireError::Invalid("a raw L2 frame has no IP addresses")),
        _ => Err(WireError::Invalid("address family differs from the template's")),
    }
}

/// Replaces the source and destination ports (UDP, TCP) or the echo identifier and
/// sequence number (ICMP: identifier = `src_port`, sequence number = `dst_port`), updating
/// the transport checksum.
pub fn set_ports(buf: &mut [u8], info: &TemplateInfo, src_port: u16, dst_port: u16) -> Result<()> {
    check_frame(buf, info)?;
    let mut new = [0u8; 4];
    new[..2].copy_from_slice(&src_port.to_be_bytes());
    new[2..].copy_from_slice(&dst_port.to_be_bytes());
    let at = match info.proto {
        Proto::Udp | Proto::Tcp { .. } => info.l4_offset,
        Proto::IcmpEcho => info.l4_offset + 4,
        Proto::Raw { .. } => return Err(WireError::Invalid("a raw L2 frame has no ports")),
    };
    replace(buf, at, &new, None, info.l4_csum_offset)
}

/// Replaces the destination and source MAC addresses (no checksum covers them).
pub fn set_macs(buf: &mut [u8], info: &TemplateInfo, src: EthernetAddress, dst: EthernetAddress) -> Result<()> {
    check_frame(buf, info)?;
    let out = buf.get_mut(..12).ok_or(WireError::Truncated)?;
    out[..6].copy_from_slice(&dst.0);
    out[6..].copy_from_slice(&src.0);
    Ok(())
}

/// Replaces the VLAN id of the 802.1Q tag (the inner one under QinQ), keeping PCP and DEI.
pub fn set_vlan_id(buf: &mut [u8], info: &TemplateInfo, vid: u16) -> Result<()> {
    check_frame(buf, info)?;
    let at = info.vlan_tci_offset.ok_or(WireError::Invalid("the template has no VLAN tag"))?;
    if vid > 0x0FFF {
        return Err(WireError::Invalid("VLAN id must be 0..=4095"));
    }
    let tci = read16(buf, at)?;
    write16(buf, at, (tci & 0xF000) | vid)
}

/// Changes the frame length of a template-built frame whose payload after the signature
/// is all zero (as [`build_frame`] leaves it): rewrites the IP and UDP length fields,
/// updates the checksums incrementally and zeroes any bytes added when growing. `buf`
/// must hold at least `new_len` bytes. Returns the info for the new length.
pub fn set_frame_len(buf: &mut [u8], info: &TemplateInfo, new_len: usize) -> Result<TemplateInfo> {
    check_frame(buf, info)?;
    let min = (info.sig_offset + signature::LEN).max(MIN_FRAME_LEN);
    if new_len < min {
        return Err(WireError::FrameTooShort { min, requested: new_len });
    }
    let l3_len = new_len - info.l3_offset;
    let l4_len = new_len - info.l4_offset;
    let ip_len = match info.l3 {
        Some(L3::V4) => Some((info.l3_offset + ipv4::LENGTH_OFFSET, l3_len)),
        Some(L3::V6) => Some((info.l3_offset + ipv6::LENGTH_OFFSET, l4_len)),
        None => None,
    };
    if ip_len.is_some_and(|(_, n)| n > usize::from(u16::MAX)) || l4_len > usize::from(u16::MAX) && ip_len.is_some() {
        return Err(WireError::Invalid("frame length exceeds what the IP/UDP length fields can carry"));
    }
    check_out(buf, new_len)?;
    if new_len > info.frame_len {
        buf[info.frame_len..new_len].fill(0);
    }
    let Some((ip_len_at, ip_len)) = ip_len else {
        return Ok(TemplateInfo { frame_len: new_len, ..*info });
    };
    let old_ip_len = read16(buf, ip_len_at)?;
    write16(buf, ip_len_at, ip_len as u16)?;
    if let Some(o) = info.ipv4_csum_offset {
        let c = checksum::update16(read16(buf, o)?, old_ip_len, ip_len as u16);
        write16(buf, o, c)?;
    }
    let old_l4_len = (info.frame_len - info.l4_offset) as u16;
    let new_l4_len = l4_len as u16;
    if info.proto == Proto::Udp {
        let udp_len_at = info.l4_offset + udp::LENGTH_OFFSET;
        write16(buf, udp_len_at, new_l4_len)?;
    }
    if let Some(o) = info.l4_csum_offset {
        let mut c = read16(buf, o)?;
        // The transport length is in the pseudo-header, and for UDP in the header as well.
        if info.l4_pseudo {
            c = checksum::update16(c, old_l4_len, new_l4_len);
        }
        if info.proto == Proto::Udp {
            c = checksum::update16(c, old_l4_len, new_l4_len);
        }
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
            outer_vlan: None,
            vlan: None,
            l3: L3Spec::V4 { src: Ipv4Addr::new(198, 18, 0, 1), dst: Ipv4Addr::new(198, 19, 0, 1), ttl: 64, dscp: 0 },
            proto: Proto::Udp,
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
        let ips = match info.l3.unwrap() {
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
        assert_eq!(u.checksum() != 0, info.l4_csum_offset.is_some());
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
                l3: Some(L3::V4),
                proto: Proto::Udp,
                vlan_tci_offset: None,
                l3_offset: 14,
                l4_offset: 34,
                sig_offset: 42,
                ipv4_csum_offset: Some(24),
                l4_csum_offset: None,
                l4_pseudo: true,
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
                        patch_signature(&mut buf, &info, &Signature { seq: 7, tx_ts_ns: 8, ..sig }).unwrap();
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

    /// Ones'-complement sum of 16-bit big-endian words, written out here so the checks below do
    /// not lean on the code under test.
    fn ones_sum(parts: &[&[u8]]) -> u16 {
        let mut acc: u64 = 0;
        for p in parts {
            for w in p.chunks(2) {
                acc += u64::from(w[0]) << 8 | u64::from(*w.get(1).unwrap_or(&0));
            }
        }
        while acc > 0xFFFF {
            acc = (acc & 0xFFFF) + (acc >> 16);
        }
        acc as u16
    }

    /// Recomputes every checksum of a built frame from its bytes: IPv4 header, and the transport
    /// checksum with the pseudo-header for UDP/TCP/ICMPv6 and without for ICMPv4.
    fn recheck(f: &[u8], info: &TemplateInfo) {
        let Some(l3) = info.l3 else { return };
        let ip = &f[info.l3_offset..];
        let seg = &f[info.l4_offset..info.frame_len];
        let (proto, pseudo): (u8, Vec<u8>) = match l3 {
            L3::V4 => {
                assert_eq!(ones_sum(&[&ip[..20]]), 0xFFFF, "IPv4 header checksum");
                assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), info.frame_len - info.l3_offset);
                let mut ph = ip[12..20].to_vec();
                ph.extend_from_slice(&[0, ip[9]]);
                ph.extend_from_slice(&(seg.len() as u16).to_be_bytes());
                (ip[9], ph)
            }
            L3::V6 => {
                assert_eq!(usize::from(u16::from_be_bytes([ip[4], ip[5]])), seg.len());
                let mut ph = ip[8..40].to_vec();
                ph.extend_from_slice(&(seg.len() as u32).to_be_bytes());
                ph.extend_from_slice(&[0, 0, 0, ip[6]]);
                (ip[6], ph)
            }
        };
        match proto {
            ip_proto::ICMP => assert_eq!(ones_sum(&[seg]), 0xFFFF, "ICMPv4 checksum"),
            ip_proto::UDP if seg[6..8] == [0, 0] => assert_eq!(l3, L3::V4, "UDP checksum 0 only over IPv4"),
            _ => assert_eq!(ones_sum(&[&pseudo, seg]), 0xFFFF, "transport checksum, protocol {proto}"),
        }
    }

    fn with(proto: Proto, base: TemplateSpec) -> TemplateSpec {
        TemplateSpec { proto, ..base }
    }

    const SYN_ACK: Proto =
        Proto::Tcp { flags: tcp::flags::SYN | tcp::flags::ACK, seq: 0x0102_0304, ack: 7, window: 512 };

    /// A 64-byte TCP/IPv4 frame: the header bytes as configured, every checksum recomputed.
    #[test]
    fn tcp_v4_bytes_and_checksums() {
        let mut buf = [0u8; 80];
        let spec = with(SYN_ACK, spec_v4());
        assert_eq!(min_frame_len(&spec), 72);
        let info = build_frame(&spec, 72, &mut buf).unwrap();
        assert_eq!((info.l4_offset, info.sig_offset, info.l4_csum_offset), (34, 54, Some(50)));
        assert_eq!(&buf[12..14], &[0x08, 0x00]);
        assert_eq!(buf[23], 6, "IP protocol TCP");
        #[rustfmt::skip]
        let tcp_hdr = [0x04, 0x00, 0x04, 0x00, 1, 2, 3, 4, 0, 0, 0, 7, 0x50, 0x12, 0x02, 0x00];
        assert_eq!(&buf[34..50], &tcp_hdr);
        assert_eq!(&buf[52..54], &[0, 0], "urgent pointer");
        recheck(&buf, &info);
        let sig = Signature { trial: 9, warmup: false, flow_id: 4, seq: 77, tx_ts_ns: 1_000 };
        patch_signature(&mut buf, &info, &sig).unwrap();
        recheck(&buf, &info);
        assert_eq!(find_signature(&buf[..72]), Some(sig));
        set_ports(&mut buf, &info, 40000, 80).unwrap();
        assert_eq!(&buf[34..38], &[0x9c, 0x40, 0x00, 0x50]);
        set_l3_addrs(
            &mut buf,
            &info,
            &IpPair::V4 { src: Ipv4Addr::new(198, 18, 1, 2), dst: Ipv4Addr::new(198, 19, 3, 4) },
        )
        .unwrap();
        recheck(&buf, &info);
        patch_signature(&mut buf, &info, &Signature { seq: 78, tx_ts_ns: 2_000, ..sig }).unwrap();
        recheck(&buf, &info);
        let grown = set_frame_len(&mut buf, &info, 80).unwrap();
        recheck(&buf, &grown);
        assert_eq!(find_signature(&buf[..80]).unwrap().seq, 78);
        // A frame with the same fields built afresh is the same frame.
        let mut fresh = [0u8; 80];
        let spec2 = TemplateSpec {
            l3: L3Spec::V4 { src: Ipv4Addr::new(198, 18, 1, 2), dst: Ipv4Addr::new(198, 19, 3, 4), ttl: 64, dscp: 0 },
            src_port: 40000,
            dst_port: 80,
            ..spec
        };
        let i2 = build_frame(&spec2, 80, &mut fresh).unwrap();
        patch_signature(&mut fresh, &i2, &Signature { seq: 78, tx_ts_ns: 2_000, ..sig }).unwrap();
        assert_eq!(buf, fresh);
    }

    #[test]
    fn icmp_echo_v4_and_v6() {
        let mut buf = [0u8; 128];
        let info = build_frame(&with(Proto::IcmpEcho, spec_v4()), 60, &mut buf).unwrap();
        assert_eq!((buf[23], buf[34], buf[35]), (1, 8, 0), "IP protocol 1, echo request, code 0");
        assert_eq!(&buf[38..42], &[0x04, 0x00, 0x04, 0x00], "identifier and sequence number from the ports");
        assert_eq!((info.sig_offset, info.l4_pseudo), (42, false));
        recheck(&buf, &info);
        let before = [buf[36], buf[37]];
        set_l3_addrs(
            &mut buf,
            &info,
            &IpPair::V4 { src: Ipv4Addr::new(198, 18, 0, 9), dst: Ipv4Addr::new(198, 19, 0, 9) },
        )
        .unwrap();
        assert_eq!([buf[36], buf[37]], before, "ICMPv4 has no pseudo-header");
        set_ports(&mut buf, &info, 0x1234, 0xFFFF).unwrap();
        assert_eq!(&buf[38..42], &[0x12, 0x34, 0xFF, 0xFF]);
        let sig = Signature { trial: 1, warmup: true, flow_id: 2, seq: 3, tx_ts_ns: 4 };
        patch_signature(&mut buf, &info, &sig).unwrap();
        recheck(&buf, &info);
        assert_eq!(find_signature(&buf[..60]), Some(sig));
        let g = set_frame_len(&mut buf, &info, 100).unwrap();
        recheck(&buf, &g);

        let mut buf = [0u8; 128];
        let info = build_frame(&with(Proto::IcmpEcho, spec_v6()), 80, &mut buf).unwrap();
        assert_eq!((buf[20], buf[54], info.l4_pseudo), (58, 128, true), "next header ICMPv6, echo request");
        recheck(&buf, &info);
        set_l3_addrs(
            &mut buf,
            &info,
            &IpPair::V6 { src: "2001:2::7".parse().unwrap(), dst: "2001:2::8".parse().unwrap() },
        )
        .unwrap();
        patch_signature(&mut buf, &info, &sig).unwrap();
        recheck(&buf, &info);
        assert_eq!(find_signature(&buf[..80]), Some(sig));
        let g = set_frame_len(&mut buf, &info, 128).unwrap();
        recheck(&buf, &g);
        assert_eq!(find_signature(&buf[..128]), Some(sig));
        // An echo reply carrying a signature is found too; another ICMP type is not.
        buf[54] = 129;
        assert!(find_signature(&buf[..128]).is_some());
        buf[54] = 1;
        assert_eq!(find_signature(&buf[..128]), None);
    }

    #[test]
    fn raw_l2_frames() {
        let mut buf = [0u8; 64];
        let spec = with(Proto::Raw { ethertype: 0x88B5 }, spec_v4());
        let info = build_frame(&spec, 60, &mut buf).unwrap();
        assert_eq!((info.l3, info.sig_offset, info.l4_csum_offset), (None, 14, None));
        assert_eq!(&buf[12..14], &[0x88, 0xB5]);
        assert!(buf[14..60].iter().all(|&b| b == 0));
        let sig = Signature { trial: 3, warmup: false, flow_id: 1, seq: 2, tx_ts_ns: 5 };
        patch_signature(&mut buf, &info, &sig).unwrap();
        assert_eq!(&buf[14..16], b"NR");
        assert_eq!(find_signature(&buf[..60]), Some(sig));
        assert!(set_ports(&mut buf, &info, 1, 2).is_err());
        assert!(set_l3_addrs(&mut buf, &info, &spec.l3.ip_pair()).is_err());
        set_macs(&mut buf, &info, EthernetAddress([2, 0, 0, 0, 1, 1]), EthernetAddress([2, 0, 0, 0, 2, 2])).unwrap();
        assert_eq!(&buf[..12], &[2, 0, 0, 0, 2, 2, 2, 0, 0, 0, 1, 1]);
        for bad in [0x0800, 0x86DD, 0x0806, 0x8100, 0x88A8, 0x05DC] {
            let e = build_frame(&with(Proto::Raw { ethertype: bad }, spec_v4()), 60, &mut buf).unwrap_err();
            assert!(matches!(e, WireError::Invalid(_)), "{bad:#x}");
        }
        // An ARP frame is never taken for a raw one.
        let mut arp = buf;
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(find_signature(&arp[..60]), None);
    }

    /// 802.1ad outer + 802.1Q inner in front of every protocol: the tag bytes, then the same
    /// frame as untagged, 8 bytes later.
    #[test]
    fn qinq_in_front_of_every_protocol() {
        let outer = vlan::Repr { pcp: 5, dei: false, vid: 100, inner_ethertype: 0 };
        let inner = vlan::Repr { pcp: 0, dei: true, vid: 200, inner_ethertype: 0 };
        for proto in [Proto::Udp, SYN_ACK, Proto::IcmpEcho, Proto::Raw { ethertype: 0x88B5 }] {
            for base in [spec_v4(), spec_v6()] {
                let plain = with(proto, base);
                let tagged = TemplateSpec { outer_vlan: Some(outer), vlan: Some(inner), ..plain };
                let len = min_frame_len(&tagged).max(96);
                let mut a = vec![0u8; len];
                let mut b = vec![0u8; len - 8];
                let ia = build_frame(&tagged, len, &mut a).unwrap();
                let ib = build_frame(&plain, len - 8, &mut b).unwrap();
                assert_eq!(&a[12..22], &[0x88, 0xA8, 0xA0, 100, 0x81, 0x00, 0x10, 200, b[12], b[13]], "{proto:?}");
                assert_eq!(a[22..], b[14..], "{proto:?}");
                assert_eq!((ia.sig_offset, ia.vlan_tci_offset), (ib.sig_offset + 8, Some(18)));
                recheck(&a, &ia);
                let sig = Signature { trial: 11, warmup: false, flow_id: 12, seq: 13, tx_ts_ns: 14 };
                patch_signature(&mut a, &ia, &sig).unwrap();
                set_vlan_id(&mut a, &ia, 4094).unwrap();
                assert_eq!(&a[18..20], &[0x1F, 0xFE], "DEI kept, VLAN id 4094");
                assert_eq!(find_signature(&a), Some(sig), "{proto:?}");
                recheck(&a, &ia);
            }
        }
        let mut buf = [0u8; 96];
        let e = build_frame(&TemplateSpec { outer_vlan: Some(outer), ..spec_v4() }, 64, &mut buf).unwrap_err();
        assert!(matches!(e, WireError::Invalid(_)));
        let info = build_frame(&spec_v4(), 60, &mut buf).unwrap();
        assert!(set_vlan_id(&mut buf, &info, 5).is_err(), "untagged template");
    }
}
