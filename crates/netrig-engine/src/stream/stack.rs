//! A stream as a header stack (`netrig_wire::stack`): the one description of traffic that the
//! OTG generator's flows already use (docs/pipeline.md, step (b)).
//!
//! Ethernet, 0..2 VLAN tags (the outer one 802.1ad), IPv4 or IPv6 (TTL, DSCP 0, identification
//! 0), then UDP (its checksum computed, or 0 over IPv4 without `udp_checksum`), TCP (flags,
//! sequence and acknowledgement numbers, window), an ICMP or ICMPv6 echo request (identifier = the
//! source port, sequence number = the destination port), or for raw frames the EtherType. Zeros
//! after the headers, and the signature right after them ([`Site::Payload`]). Every range of
//! `flows` is a digit of the flow key ([`FlowSpec::fields`]). The frames are byte for byte the
//! template builder's with [`crate::flows::FlowTable`] applied (tested below).
use netrig_wire::builder::{L3Spec, Proto, TemplateSpec};
use netrig_wire::pattern::Pattern;
use netrig_wire::stack::{HeaderKind, HeaderSpec, Payload, Site, StackSpec};
use netrig_wire::tcp::flags as fl;

use super::StreamConfig;
use crate::error::ConfigError;
use crate::flows::{FlowBase, FlowFields, FlowWalk};

type Fields = Vec<(&'static str, Pattern)>;

fn header(kind: HeaderKind, fields: Fields) -> HeaderSpec {
    HeaderSpec { kind, fields: fields.into_iter().map(|(n, p)| (n.to_string(), p)).collect(), bytes: Vec::new() }
}

fn fixed(v: impl Into<u128>) -> Pattern {
    Pattern::Fixed(v.into())
}

impl StreamConfig {
    /// The flows' base values: the stream's own addresses, ports, MACs and VLAN id.
    pub(crate) fn flow_base(&self, t: &TemplateSpec) -> FlowBase {
        FlowBase {
            ips: t.l3.ip_pair(),
            src_port: self.src_port,
            dst_port: self.dst_port,
            src_mac: self.src_mac,
            dst_mac: self.dst_mac,
            vlan: self.vlan.unwrap_or(0),
        }
    }

    /// This stream's frames as a header stack whose flow key walks its flows; `walk` gives the
    /// order and the port values (see [`FlowWalk::new`]).
    pub fn stack_spec(&self) -> Result<(StackSpec, FlowWalk), ConfigError> {
        let t = self.template_spec()?;
        let walk = FlowWalk::new(&self.flows);
        let ff = self.flows.fields(&self.flow_base(&t), &walk);
        let raw = match t.proto {
            Proto::Raw { ethertype } => Some(u128::from(ethertype)),
            _ => None,
        };
        let or = |p: &Option<Pattern>, v: u128| p.clone().unwrap_or(Pattern::Fixed(v));
        let mac = |m: netrig_wire::EthernetAddress| m.0.iter().fold(0u128, |a, &b| a << 8 | u128::from(b));
        let mut eth = vec![("dst", or(&ff.dst_mac, mac(t.dst_mac))), ("src", or(&ff.src_mac, mac(t.src_mac)))];
        if t.outer_vlan.is_some() {
            eth.push(("ether_type", fixed(0x88A8u16)));
        } else if let (None, Some(e)) = (t.vlan, raw) {
            eth.push(("ether_type", fixed(e)));
        }
        let mut headers = vec![header(HeaderKind::Ethernet, eth)];
        for (tag, inner) in [(t.outer_vlan, false), (t.vlan, true)] {
            let Some(v) = tag else { continue };
            let id = if inner { or(&ff.vlan, v.vid.into()) } else { fixed(v.vid) };
            let mut f = vec![("priority", fixed(v.pcp)), ("cfi", fixed(v.dei)), ("id", id)];
            if let (true, Some(e)) = (inner, raw) {
                f.push(("tpid", fixed(e)));
            }
            headers.push(header(HeaderKind::Vlan, f));
        }
        let v6 = raw.is_none() && matches!(t.l3, L3Spec::V6 { .. });
        if raw.is_none() {
            headers.push(ip_header(&t.l3, &ff));
        }
        if let Some(h) = transport(&t, &ff, v6) {
            headers.push(h);
        }
        let spec = StackSpec { headers, payload: Payload::zeros(), site: Site::Payload, keys: ff.keys };
        Ok((spec, walk))
    }
}

/// The IPv4 or IPv6 header, its addresses per flow where they vary.
fn ip_header(l3: &L3Spec, ff: &FlowFields) -> HeaderSpec {
    let addr = |p: &Option<Pattern>, v: u128| p.clone().unwrap_or(Pattern::Fixed(v));
    match *l3 {
        L3Spec::V4 { src, dst, ttl, dscp } => header(
            HeaderKind::Ipv4,
            vec![
                ("version", fixed(4u8)),
                ("dscp", fixed(dscp)),
                ("time_to_live", fixed(ttl)),
                ("src", addr(&ff.src_ip, u32::from(src).into())),
                ("dst", addr(&ff.dst_ip, u32::from(dst).into())),
            ],
        ),
        L3Spec::V6 { src, dst, hop_limit, tc } => header(
            HeaderKind::Ipv6,
            vec![
                ("version", fixed(6u8)),
                ("traffic_class", fixed(tc)),
                ("hop_limit", fixed(hop_limit)),
                ("src", addr(&ff.src_ip, src.into())),
                ("dst", addr(&ff.dst_ip, dst.into())),
            ],
        ),
    }
}

/// The header after IP: UDP, TCP or an echo request, its ports (echo: identifier and sequence
/// number) per flow where they vary; none for raw frames.
fn transport(t: &TemplateSpec, ff: &FlowFields, v6: bool) -> Option<HeaderSpec> {
    let port = |p: &Option<Pattern>, v: u16| p.clone().unwrap_or(Pattern::Fixed(v.into()));
    let (sp, dp) = (port(&ff.src_port, t.src_port), port(&ff.dst_port, t.dst_port));
    Some(match t.proto {
        Proto::Udp if t.udp_checksum || v6 => header(HeaderKind::Udp, vec![("src_port", sp), ("dst_port", dp)]),
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

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use netrig_wire::builder::{build_frame, min_frame_len, patch_signature, L3Spec, Proto, TemplateSpec};
    use netrig_wire::signature::{self, Signature};
    use netrig_wire::{stack, vlan, EthernetAddress};

    use crate::flows::{FlowOrder, FlowSpec, FlowWalk};
    use crate::stream::{StreamConfig, FCS_LEN};

    const FLOW_BASE: u32 = 1000;

    /// Flow `i`'s template: its addresses, ports, MACs and VLAN id taken apart by division (the
    /// destination port fastest), a reference independent of the key walk's carries.
    fn flow_template(cfg: &StreamConfig, t: &TemplateSpec, walk: &FlowWalk, i: u64) -> TemplateSpec {
        let f = &cfg.flows;
        let mut rest = i;
        let mut digit = |n: u32| {
            let d = rest % u64::from(n);
            rest /= u64::from(n);
            d as u32
        };
        let (dp, sp, di, si, vi, dm, sm) = (
            digit(f.dst_ports),
            digit(f.src_ports),
            digit(f.dst_ips),
            digit(f.src_ips),
            digit(f.vlans),
            digit(f.dst_macs),
            digit(f.src_macs),
        );
        let port = |base: u16, n: u32, k: u32| if n == 1 { base } else { walk.port(base.max(1), k) };
        let mac = |m: EthernetAddress, k: u32| {
            let v = m.0.iter().fold(0u64, |a, &b| a << 8 | u64::from(b)) + u64::from(k);
            let b = v.to_be_bytes();
            EthernetAddress([b[2], b[3], b[4], b[5], b[6], b[7]])
        };
        let mut out = *t;
        out.l3 = match t.l3 {
            L3Spec::V4 { src, dst, ttl, dscp } => {
                let (src, dst) = ((u32::from(src) + si).into(), (u32::from(dst) + di).into());
                L3Spec::V4 { src, dst, ttl, dscp }
            }
            L3Spec::V6 { src, dst, hop_limit, tc } => {
                let (src, dst) = ((u128::from(src) + u128::from(si)).into(), (u128::from(dst) + u128::from(di)).into());
                L3Spec::V6 { src, dst, hop_limit, tc }
            }
        };
        (out.src_port, out.dst_port) = (port(t.src_port, f.src_ports, sp), port(t.dst_port, f.dst_ports, dp));
        (out.src_mac, out.dst_mac) = (mac(t.src_mac, sm), mac(t.dst_mac, dm));
        out.vlan = t.vlan.map(|v| vlan::Repr { vid: v.vid + vi as u16, ..v });
        out
    }

    /// Walk `cfg`'s frames at each of `sizes` both ways: the template builder's for the flow the
    /// walk's formula gives, the signature patched in, and the stack's with its key walking the
    /// flows. Returns the frames compared.
    fn same_frames(cfg: &StreamConfig, sizes: &[usize]) -> usize {
        let (spec, walk) = cfg.stack_spec().unwrap();
        let t = cfg.template_spec().unwrap();
        let lens: Vec<usize> = sizes.iter().map(|s| s - FCS_LEN).collect();
        let c = stack::compile(&spec, &lens).unwrap();
        let n = cfg.flows.count();
        let mut compared = 0;
        for (si, &len) in lens.iter().enumerate() {
            let mut st = c.start_with(spec.keys.cursor(0..n, walk.stride, walk.start));
            let mut buf = vec![0u8; len];
            for j in 0..2 * n + 3 {
                let i = (u128::from(j % n) * u128::from(walk.stride) + u128::from(walk.start)) as u64 % n;
                assert_eq!(st.key.key(), i, "{cfg:?}: frame {j}'s flow");
                let sig = |flow: u64, seq| Signature {
                    trial: 0xABCDE,
                    warmup: j % 2 == 1,
                    flow_id: FLOW_BASE + flow as u32,
                    seq,
                    tx_ts_ns: signature::MASK_40 - j,
                };
                let mut want = vec![0u8; len];
                let info = build_frame(&flow_template(cfg, &t, &walk, i), len, &mut want).unwrap();
                patch_signature(&mut want, &info, &sig(i, j / n)).unwrap();
                let got_sig = sig(st.key.key(), st.key.cycle());
                c.fill(&mut buf, si, &mut st, &got_sig);
                assert_eq!(buf, want, "{:?} {:?}, {len} B, frame {j} (flow {i})", cfg.protocol, cfg.flows);
                compared += 1;
            }
        }
        compared
    }

    fn protocols() -> [Proto; 4] {
        use netrig_wire::tcp::flags;
        [
            Proto::Udp,
            Proto::Tcp { flags: flags::SYN | flags::ECE, seq: 0x0102_0304, ack: 7, window: 0xFFFF },
            Proto::IcmpEcho,
            Proto::Raw { ethertype: 0x88B5 },
        ]
    }

    /// The streams of the grid: every protocol, IPv4 and IPv6, no tag, one and two tags, the UDP
    /// checksum on and off.
    fn grid() -> Vec<StreamConfig> {
        let mut out = Vec::new();
        for proto in protocols() {
            for (src, dst) in [("198.18.0.1", "198.19.255.254"), ("2001:2::1", "2001:2:0:ffff::fe")] {
                for (tags, udp_checksum) in (0..3).flat_map(|n| [(n, false), (n, true)]) {
                    let mut c = StreamConfig::new("s");
                    (c.protocol, c.udp_checksum, c.ttl) = (proto, udp_checksum, 9);
                    (c.src_ip, c.dst_ip) = (src.parse::<IpAddr>().unwrap(), dst.parse::<IpAddr>().unwrap());
                    (c.src_port, c.dst_port) = (0xBEEF, 53);
                    c.dst_mac = EthernetAddress([2, 0xAB, 0xCD, 0xEF, 0x12, 0x34]);
                    (c.outer_vlan, c.vlan) = [(None, None), (None, Some(100)), (Some(4000), Some(1))][tags];
                    out.push(c);
                }
            }
        }
        out
    }

    /// The smallest frame with FCS, one byte more, and the largest standard one.
    fn sizes(c: &StreamConfig) -> [usize; 3] {
        let min = min_frame_len(&c.template_spec().unwrap()) + FCS_LEN;
        [min, min + 1, 1518]
    }

    #[test]
    fn one_flow_streams_are_the_template_builders_frames_byte_for_byte() {
        let compared: usize = grid().iter().map(|c| same_frames(c, &sizes(c))).sum();
        assert_eq!(compared, 48 * 3 * 5, "48 streams × 3 sizes × 5 frames");
    }

    /// Every range, in both orders: the key walks the flows in the walk's order, and each flow's
    /// fields (ports past 65535 wrapping to 1, MACs carried across bytes) and checksums are the
    /// builder's for that flow.
    #[test]
    fn every_flow_of_every_range_in_both_orders_is_the_builders_frame() {
        let mut compared = 0;
        for (k, c) in grid().into_iter().enumerate().filter(|(k, _)| k % 3 != 1) {
            let raw = matches!(c.protocol, Proto::Raw { .. });
            let order = if k % 2 == 0 { FlowOrder::Sequential } else { FlowOrder::Pseudorandom { seed: k as u64 } };
            let ip = if raw { 1 } else { 3 };
            let flows = FlowSpec {
                src_ips: ip,
                dst_ips: ip.min(2),
                src_ports: ip,
                dst_ports: if raw { 1 } else { 5 },
                src_macs: 2,
                dst_macs: 1 + u32::from(raw),
                vlans: if c.vlan.is_some() { 3 } else { 1 },
                order,
            };
            let c = StreamConfig { flows, src_mac: EthernetAddress([2, 0, 0, 0, 0, 0xFF]), src_port: 65534, ..c };
            compared += same_frames(&c, &sizes(&c)[..2]);
        }
        assert!(compared > 10_000, "{compared} frames");
    }
}
