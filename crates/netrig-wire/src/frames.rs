//! netrig's stream frames as a header stack: Ethernet, 0..2 VLAN tags (the outer one 802.1ad),
//! IPv4 or IPv6, then UDP, TCP, an ICMP/ICMPv6 echo request or nothing (raw L2 under an
//! EtherType), zeros after the headers and the signature right after them ([`Site::Payload`],
//! where `dissect::find_signature`, the XDP steering program and replay stamping look).
//!
//! [`FrameSpec::stack`] gives the [`StackSpec`] that [`crate::stack::compile`] turns into the TX
//! program; [`PerFlow`] puts a [`Pattern::ByKey`] on the fields a stream's flows vary. IPv4:
//! identification 0, DSCP as given; UDP's checksum computed, or 0 over IPv4 unless asked for
//! (RFC 768: none); TCP without options; an echo's identifier is the source port and its sequence
//! number the destination port, so port ranges vary them.
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::ethernet::{self, EthernetAddress};
use crate::pattern::Pattern;
use crate::signature::{self, Signature};
use crate::stack::{self, HeaderKind, HeaderSpec, KeySpec, Payload, Site, StackSpec};
use crate::tcp::flags as fl;
use crate::{icmpv4, ipv4, ipv6, tcp, udp, vlan, EtherType, IpPair};

/// Minimum Ethernet frame length without FCS (64 B on the wire).
pub const MIN_FRAME_LEN: usize = 60;

/// Network layer of a stream's frames.
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
}

/// What follows the IP header (or, for [`Proto::Raw`], the Ethernet header): the part of a
/// frame that carries the signature.
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

/// What a stream's frames look like. A tag's `inner_ethertype` is ignored (set from what
/// follows). `outer_vlan` is an 802.1ad service tag (TPID 0x88A8) in front of `vlan` (802.1Q,
/// TPID 0x8100): QinQ; it needs `vlan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameSpec {
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
    /// default: checksum 0 means "none" over IPv4 and saves the per-frame sum.
    pub udp_checksum: bool,
}

/// The fields a stream's flows vary, each a [`Pattern::ByKey`] reading a digit of `keys`
/// (`None`: the frame's own value in every flow).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerFlow {
    pub keys: KeySpec,
    pub src_ip: Option<Pattern>,
    pub dst_ip: Option<Pattern>,
    pub src_port: Option<Pattern>,
    pub dst_port: Option<Pattern>,
    pub src_mac: Option<Pattern>,
    pub dst_mac: Option<Pattern>,
    pub vlan: Option<Pattern>,
}

type Fields = Vec<(&'static str, Pattern)>;

fn header(kind: HeaderKind, fields: Fields) -> HeaderSpec {
    HeaderSpec { kind, fields: fields.into_iter().map(|(n, p)| (n.to_string(), p)).collect(), bytes: Vec::new() }
}

fn fixed(v: impl Into<u128>) -> Pattern {
    Pattern::Fixed(v.into())
}

/// `p` where a flow varies the field, else its value `v`.
fn or(p: &Option<Pattern>, v: impl Into<u128>) -> Pattern {
    p.clone().unwrap_or(Pattern::Fixed(v.into()))
}

fn mac(m: EthernetAddress) -> u128 {
    m.0.iter().fold(0u128, |a, &b| a << 8 | u128::from(b))
}

impl FrameSpec {
    /// A UDP frame (no tags): the fields every frame has.
    pub fn udp(src_mac: EthernetAddress, dst_mac: EthernetAddress, l3: L3Spec, src_port: u16, dst_port: u16) -> Self {
        FrameSpec {
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

    /// Bytes of headers: Ethernet, tags, IP (none for raw frames) and the transport header.
    pub fn headers_len(&self) -> usize {
        let tags = usize::from(self.vlan.is_some()) + usize::from(self.outer_vlan.is_some());
        let l3 = if matches!(self.proto, Proto::Raw { .. }) { 0 } else { self.l3.header_len() };
        ethernet::HEADER_LEN + tags * vlan::HEADER_LEN + l3 + self.proto.header_len()
    }

    /// The header stack of these frames, with `per_flow`'s fields varying by flow.
    pub fn stack(&self, per_flow: &PerFlow) -> StackSpec {
        let raw = match self.proto {
            Proto::Raw { ethertype } => Some(ethertype),
            _ => None,
        };
        let mut eth =
            vec![("dst", or(&per_flow.dst_mac, mac(self.dst_mac))), ("src", or(&per_flow.src_mac, mac(self.src_mac)))];
        if self.outer_vlan.is_some() {
            eth.push(("ether_type", fixed(EtherType::QINQ)));
        } else if let (None, Some(e)) = (self.vlan, raw) {
            eth.push(("ether_type", fixed(e)));
        }
        let mut headers = vec![header(HeaderKind::Ethernet, eth)];
        for (tag, inner) in [(self.outer_vlan, false), (self.vlan, true)] {
            let Some(v) = tag else { continue };
            let id = if inner { or(&per_flow.vlan, v.vid) } else { fixed(v.vid) };
            let mut f = vec![("priority", fixed(v.pcp)), ("cfi", fixed(v.dei)), ("id", id)];
            if let (true, Some(e)) = (inner, raw) {
                f.push(("tpid", fixed(e)));
            }
            headers.push(header(HeaderKind::Vlan, f));
        }
        if raw.is_none() {
            headers.push(self.ip_header(per_flow));
        }
        headers.extend(self.transport(per_flow));
        StackSpec { headers, payload: Payload::zeros(), site: Site::Payload, keys: per_flow.keys.clone() }
    }

    /// The IPv4 or IPv6 header, its addresses per flow where they vary.
    fn ip_header(&self, per_flow: &PerFlow) -> HeaderSpec {
        match self.l3 {
            L3Spec::V4 { src, dst, ttl, dscp } => header(
                HeaderKind::Ipv4,
                vec![
                    ("version", fixed(4u8)),
                    ("dscp", fixed(dscp)),
                    ("time_to_live", fixed(ttl)),
                    ("src", or(&per_flow.src_ip, u32::from(src))),
                    ("dst", or(&per_flow.dst_ip, u32::from(dst))),
                ],
            ),
            L3Spec::V6 { src, dst, hop_limit, tc } => header(
                HeaderKind::Ipv6,
                vec![
                    ("version", fixed(6u8)),
                    ("traffic_class", fixed(tc)),
                    ("hop_limit", fixed(hop_limit)),
                    ("src", or(&per_flow.src_ip, src)),
                    ("dst", or(&per_flow.dst_ip, dst)),
                ],
            ),
        }
    }

    /// The header after IP: UDP, TCP or an echo request, its ports (an echo's identifier and
    /// sequence number) per flow where they vary; none for raw frames.
    fn transport(&self, per_flow: &PerFlow) -> Option<HeaderSpec> {
        let v6 = matches!(self.l3, L3Spec::V6 { .. });
        let (sp, dp) = (or(&per_flow.src_port, self.src_port), or(&per_flow.dst_port, self.dst_port));
        Some(match self.proto {
            Proto::Udp if self.udp_checksum || v6 => header(HeaderKind::Udp, vec![("src_port", sp), ("dst_port", dp)]),
            Proto::Udp => header(HeaderKind::Udp, vec![("src_port", sp), ("dst_port", dp), ("checksum", fixed(0u8))]),
            Proto::Tcp { flags, seq, ack, window } => {
                let bit = |name: &'static str, b: u8| (name, fixed(flags & b != 0));
                let mut f = vec![("src_port", sp), ("dst_port", dp)];
                f.extend([("seq_num", fixed(seq)), ("ack_num", fixed(ack)), ("window", fixed(window))]);
                f.extend([bit("ecn_cwr", fl::CWR), bit("ecn_echo", fl::ECE), bit("ctl_urg", fl::URG)]);
                f.extend([bit("ctl_ack", fl::ACK), bit("ctl_psh", fl::PSH), bit("ctl_rst", fl::RST)]);
                f.extend([bit("ctl_syn", fl::SYN), bit("ctl_fin", fl::FIN)]);
                header(HeaderKind::Tcp, f)
            }
            Proto::IcmpEcho => header(
                if v6 { HeaderKind::Icmpv6 } else { HeaderKind::Icmp },
                vec![
                    ("type", fixed(if v6 { 128u8 } else { 8 })),
                    ("code", fixed(0u8)),
                    ("identifier", sp),
                    ("sequence_number", dp),
                ],
            ),
            Proto::Raw { .. } => return None,
        })
    }

    /// One frame of `len` bytes (without FCS) signed with `sig`: for tests and tools (a TX path
    /// compiles the stack once).
    pub fn frame(&self, len: usize, sig: &Signature) -> Result<Vec<u8>, stack::StackError> {
        Ok(stack::compile(&self.stack(&PerFlow::default()), &[len])?.frame(0, 0, sig))
    }
}

/// Smallest frame (without FCS) that holds the headers plus the signature, never below
/// 60: UDP over IPv4 60, +VLAN 64, IPv6 80, IPv6+VLAN 84; TCP adds 12.
pub fn min_frame_len(spec: &FrameSpec) -> usize {
    (spec.headers_len() + signature::LEN).max(MIN_FRAME_LEN)
}
