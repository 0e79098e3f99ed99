//! Property tests: emit → parse round trips, a stream's frames keep every checksum valid for
//! every flow, and no parser panics on arbitrary bytes.

use std::net::{Ipv4Addr, Ipv6Addr};

use std::sync::Arc;

use netrig_wire::dissect::{self, L3};
use netrig_wire::frames::{min_frame_len, FrameSpec, L3Spec, PerFlow, Proto};
use netrig_wire::pattern::Pattern;
use netrig_wire::signature::{self, Signature};
use netrig_wire::stack::{self, KeySpec, KeyValues};
use netrig_wire::{arp, ethernet, icmpv4, icmpv6, ipv4, ipv6, tcp, udp, vlan, EthernetAddress, IpPair};
use proptest::prelude::*;

fn mac() -> impl Strategy<Value = EthernetAddress> {
    any::<[u8; 6]>().prop_map(EthernetAddress)
}
fn v4() -> impl Strategy<Value = Ipv4Addr> {
    any::<[u8; 4]>().prop_map(Ipv4Addr::from)
}
fn v6() -> impl Strategy<Value = Ipv6Addr> {
    any::<[u8; 16]>().prop_map(Ipv6Addr::from)
}
fn ip_pair() -> impl Strategy<Value = IpPair> {
    prop_oneof![
        (v4(), v4()).prop_map(|(src, dst)| IpPair::V4 { src, dst }),
        (v6(), v6()).prop_map(|(src, dst)| IpPair::V6 { src, dst }),
    ]
}
fn vlan_repr() -> impl Strategy<Value = vlan::Repr> {
    (0u8..8, any::<bool>(), 0u16..4096, any::<u16>()).prop_map(|(pcp, dei, vid, inner_ethertype)| vlan::Repr {
        pcp,
        dei,
        vid,
        inner_ethertype,
    })
}
fn l3_spec() -> impl Strategy<Value = L3Spec> {
    prop_oneof![
        (v4(), v4(), any::<u8>(), 0u8..64).prop_map(|(src, dst, ttl, dscp)| L3Spec::V4 { src, dst, ttl, dscp }),
        (v6(), v6(), any::<u8>(), any::<u8>()).prop_map(|(src, dst, hop_limit, tc)| L3Spec::V6 {
            src,
            dst,
            hop_limit,
            tc
        }),
    ]
}
fn frame_spec() -> impl Strategy<Value = FrameSpec> {
    (mac(), mac(), proptest::option::of(vlan_repr()), l3_spec(), any::<u16>(), any::<u16>(), any::<bool>()).prop_map(
        |(src_mac, dst_mac, vlan, l3, src_port, dst_port, udp_checksum)| FrameSpec {
            src_mac,
            dst_mac,
            outer_vlan: None,
            vlan,
            l3,
            proto: Proto::Udp,
            src_port,
            dst_port,
            udp_checksum,
        },
    )
}
fn sig() -> impl Strategy<Value = Signature> {
    (0..=signature::TRIAL_MASK, any::<bool>(), 0..=signature::FLOW_MASK, 0..=signature::MASK_40, 0..=signature::MASK_40)
        .prop_map(|(trial, warmup, flow_id, seq, tx_ts_ns)| Signature { trial, warmup, flow_id, seq, tx_ts_ns })
}

/// Checks the IPv4 header checksum and the UDP checksum of a stream's UDP frame via the views,
/// and where the dissector finds its parts. Returns its addresses.
fn verify_frame(f: &[u8], spec: &FrameSpec) -> Result<IpPair, TestCaseError> {
    let l3_offset = 14 + if spec.vlan.is_some() { 4 } else { 0 };
    let (ips, l4_offset) = match spec.l3 {
        L3Spec::V4 { .. } => {
            let p = ipv4::Packet::new_checked(&f[l3_offset..]).unwrap();
            prop_assert!(p.verify_checksum(), "IPv4 header checksum");
            prop_assert!(ipv4::Repr::parse(&p).is_ok());
            (IpPair::V4 { src: p.src_addr(), dst: p.dst_addr() }, l3_offset + 20)
        }
        L3Spec::V6 { .. } => {
            let p = ipv6::Packet::new_checked(&f[l3_offset..]).unwrap();
            prop_assert!(ipv6::Repr::parse(&p).is_ok());
            (IpPair::V6 { src: p.src_addr(), dst: p.dst_addr() }, l3_offset + 40)
        }
    };
    let u = udp::Packet::new_checked(&f[l4_offset..]).unwrap();
    prop_assert_eq!(u.len() as usize, f.len() - l4_offset);
    prop_assert!(udp::Repr::parse(&u, &ips).is_ok(), "UDP checksum");
    let v6 = matches!(spec.l3, L3Spec::V6 { .. });
    prop_assert_eq!(u.checksum() != 0, spec.udp_checksum || v6);
    let loc = dissect::locate_udp_payload(f).unwrap();
    prop_assert_eq!(loc.l3, if v6 { L3::V6 } else { L3::V4 });
    prop_assert_eq!((loc.l3_offset, loc.l4_offset, loc.payload_offset), (l3_offset, l4_offset, l4_offset + 8));
    Ok(ips)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    #[test]
    fn ethernet_round_trip(src_addr in mac(), dst_addr in mac(), ethertype in any::<u16>()) {
        let r = ethernet::Repr { src_addr, dst_addr, ethertype };
        let mut b = [0u8; ethernet::HEADER_LEN];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(ethernet::Repr::parse(&ethernet::Frame::new_checked(&b[..]).unwrap()).unwrap(), r);
        prop_assert_eq!(src_addr.to_string().parse::<EthernetAddress>().unwrap(), src_addr);
    }

    #[test]
    fn vlan_round_trip(r in vlan_repr()) {
        let mut b = [0u8; vlan::HEADER_LEN];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(vlan::Repr::parse(&vlan::Tag::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn arp_round_trip(req in any::<bool>(), sha in mac(), spa in v4(), tha in mac(), tpa in v4()) {
        let operation = if req { arp::Operation::Request } else { arp::Operation::Reply };
        let r = arp::Repr {
            operation,
            source_hardware_addr: sha,
            source_protocol_addr: spa,
            target_hardware_addr: tha,
            target_protocol_addr: tpa,
        };
        let mut b = [0u8; arp::PACKET_LEN];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(arp::Repr::parse(&arp::Packet::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn ipv4_round_trip(src_addr in v4(), dst_addr in v4(), protocol in any::<u8>(), payload_len in 0u16..2000,
                       ttl in any::<u8>(), dscp in 0u8..64, ident in any::<u16>()) {
        let r = ipv4::Repr { src_addr, dst_addr, protocol, payload_len, ttl, dscp, ident };
        let mut b = vec![0u8; ipv4::HEADER_LEN + payload_len as usize];
        r.emit(&mut b).unwrap();
        let p = ipv4::Packet::new_checked(&b[..]).unwrap();
        prop_assert!(p.verify_checksum());
        prop_assert_eq!(ipv4::Repr::parse(&p).unwrap(), r);
    }

    #[test]
    fn ipv6_round_trip(src_addr in v6(), dst_addr in v6(), next_header in any::<u8>(), payload_len in 0u16..2000,
                       hop_limit in any::<u8>(), traffic_class in any::<u8>(), flow_label in 0u32..(1 << 20)) {
        let r = ipv6::Repr { src_addr, dst_addr, next_header, payload_len, hop_limit, traffic_class, flow_label };
        let mut b = vec![0u8; ipv6::HEADER_LEN + payload_len as usize];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(ipv6::Repr::parse(&ipv6::Packet::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn udp_round_trip(src_port in any::<u16>(), dst_port in any::<u16>(), ips in ip_pair(),
                      payload in proptest::collection::vec(any::<u8>(), 0..300), csum in any::<bool>()) {
        let r = udp::Repr { src_port, dst_port };
        let mut b = vec![0u8; udp::HEADER_LEN + payload.len()];
        b[udp::HEADER_LEN..].copy_from_slice(&payload);
        r.emit(&mut b, payload.len(), &ips, csum).unwrap();
        let p = udp::Packet::new_checked(&b[..]).unwrap();
        prop_assert_eq!(udp::Repr::parse(&p, &ips).unwrap(), r);
        prop_assert_eq!(p.payload(), &payload[..]);
        prop_assert_eq!(p.checksum() != 0, csum || ips.is_v6());
    }

    #[test]
    fn tcp_round_trip(src_port in any::<u16>(), dst_port in any::<u16>(), seq_number in any::<u32>(),
                      ack_number in any::<u32>(), flags in any::<u8>(), window_len in any::<u16>(), ips in ip_pair(),
                      payload in proptest::collection::vec(any::<u8>(), 0..100)) {
        let r = tcp::Repr { src_port, dst_port, seq_number, ack_number, flags, window_len, checksum: 0 };
        let mut b = vec![0u8; tcp::HEADER_LEN + payload.len()];
        b[tcp::HEADER_LEN..].copy_from_slice(&payload);
        r.emit(&mut b, Some(&ips)).unwrap();
        let p = tcp::Packet::new_checked(&b[..]).unwrap();
        let back = tcp::Repr::parse(&p, Some(&ips)).unwrap();
        prop_assert_eq!(tcp::Repr { checksum: 0, ..back }, r);
        prop_assert_eq!(back.checksum, p.checksum());
    }

    #[test]
    fn icmp_round_trip(req in any::<bool>(), ident in any::<u16>(), seq_no in any::<u16>(),
                       data in proptest::collection::vec(any::<u8>(), 0..100), src in v6(), dst in v6()) {
        let m4 = if req { icmpv4::Message::EchoRequest } else { icmpv4::Message::EchoReply };
        let r4 = icmpv4::Repr { message: m4, ident, seq_no, data: &data };
        let mut b = vec![0u8; r4.buffer_len()];
        r4.emit(&mut b).unwrap();
        let p4 = icmpv4::Packet::new_checked(&b[..]).unwrap();
        prop_assert_eq!(icmpv4::Repr::parse(&p4).unwrap(), r4);

        let m6 = if req { icmpv6::Message::EchoRequest } else { icmpv6::Message::EchoReply };
        let r6 = icmpv6::Repr { message: m6, ident, seq_no, data: &data };
        let mut b = vec![0u8; r6.buffer_len()];
        r6.emit(&mut b, &src, &dst).unwrap();
        let p6 = icmpv6::Packet::new_checked(&b[..]).unwrap();
        prop_assert_eq!(icmpv6::Repr::parse(&p6, &src, &dst).unwrap(), r6);
    }

    #[test]
    fn signature_round_trip(s in sig(), hi_seq in any::<u32>(), hi_ts in any::<u32>(), hi_flow in any::<u8>()) {
        // Bits beyond a field's width are dropped on emit, never spilled into the next field.
        let wide = Signature {
            flow_id: s.flow_id | (u32::from(hi_flow) << 24),
            seq: s.seq | (u64::from(hi_seq >> 8) << 40),
            tx_ts_ns: s.tx_ts_ns | (u64::from(hi_ts >> 8) << 40),
            ..s
        };
        let mut b = [0u8; signature::LEN];
        wide.emit(&mut b);
        prop_assert_eq!(Signature::parse(&b), Some(s));
    }

    /// A stream's UDP frames with per-flow source addresses and destination ports, at any length
    /// its headers allow, walked from any key by any stride: every frame parses, every checksum
    /// verifies, its fields are its flow's and the dissector finds exactly the signature written.
    #[test]
    fn stream_frames_are_valid_for_every_flow(spec in frame_spec(), extra in 0usize..1500, s in sig(),
                                             ips in 1u32..40, ports in proptest::collection::vec(1u16.., 1..40),
                                             stride in any::<u64>(), start in any::<u64>()) {
        let src = match spec.l3 {
            L3Spec::V4 { src, .. } => u128::from(u32::from(src)),
            L3Spec::V6 { src, .. } => u128::from(src),
        };
        let max = if matches!(spec.l3, L3Spec::V4 { .. }) { u128::from(u32::MAX) } else { u128::MAX };
        prop_assume!(src <= max - u128::from(ips));
        let table: Arc<[u16]> = Arc::from(ports.clone());
        let per_flow = PerFlow {
            keys: KeySpec { radices: vec![ports.len() as u32, ips] },
            dst_port: Some(Pattern::ByKey { digit: 0, values: KeyValues::Table(table) }),
            src_ip: Some(Pattern::ByKey { digit: 1, values: KeyValues::Offset(src) }),
            ..PerFlow::default()
        };
        let len = min_frame_len(&spec) + extra;
        let c = stack::compile(&spec.stack(&per_flow), &[len]).unwrap();
        let n = per_flow.keys.count();
        let mut stride = stride % n;
        while n > 1 && (stride == 0 || stack::keys::gcd(stride, n) != 1) {
            stride = (stride + 1) % n;
        }
        let mut st = c.start_with(per_flow.keys.cursor(0..n, stride.max(1), start % n));
        let mut buf = vec![0x5Au8; len];
        for _ in 0..4 {
            let key = st.key.key();
            c.fill(&mut buf, 0, &mut st, &s);
            let addrs = verify_frame(&buf, &spec)?;
            let got_src = match addrs { IpPair::V4 { src, .. } => u128::from(u32::from(src)), IpPair::V6 { src, .. } => u128::from(src) };
            prop_assert_eq!(got_src, src + u128::from(key as u32 / ports.len() as u32));
            let l4 = spec.headers_len() - 8;
            prop_assert_eq!(u16::from_be_bytes([buf[l4 + 2], buf[l4 + 3]]), ports[(key % ports.len() as u64) as usize]);
            prop_assert_eq!(dissect::find_signature(&buf), Some(s));
        }
    }

    /// No view, parser or dissector panics on arbitrary bytes.
    #[test]
    fn arbitrary_bytes_never_panic(mut b in proptest::collection::vec(any::<u8>(), 0..200), ips in ip_pair(),
                                   v6src in v6(), v6dst in v6()) {
        let _ = dissect::locate_udp_payload(&b);
        let _ = dissect::find_signature(&b);
        let _ = Signature::parse(&b);
        if let Ok(f) = ethernet::Frame::new_checked(&b[..]) {
            let _ = (ethernet::Repr::parse(&f), f.payload().len());
        }
        if let Ok(t) = vlan::Tag::new_checked(&b[..]) {
            let _ = (vlan::Repr::parse(&t), t.payload().len());
        }
        if let Ok(p) = arp::Packet::new_checked(&b[..]) {
            let _ = arp::Repr::parse(&p);
        }
        if let Ok(p) = ipv4::Packet::new_checked(&b[..]) {
            let _ = (ipv4::Repr::parse(&p), p.payload().len(), p.options().len(), p.frag_offset(), p.ecn());
        }
        if let Ok(mut p) = ipv4::Packet::new_checked(&mut b[..]) {
            p.fill_checksum();
            let _ = p.payload_mut().len();
        }
        if let Ok(p) = ipv6::Packet::new_checked(&b[..]) {
            let _ = (ipv6::Repr::parse(&p), p.payload().len());
        }
        if let Ok(p) = udp::Packet::new_checked(&b[..]) {
            let _ = (udp::Repr::parse(&p, &ips), p.payload().len());
        }
        if let Ok(mut p) = udp::Packet::new_checked(&mut b[..]) {
            p.fill_checksum(&ips);
            let _ = p.payload_mut().len();
        }
        if let Ok(p) = tcp::Packet::new_checked(&b[..]) {
            let _ = (tcp::Repr::parse(&p, Some(&ips)), p.options().len(), p.payload().len());
        }
        if let Ok(p) = icmpv4::Packet::new_checked(&b[..]) {
            let _ = icmpv4::Repr::parse(&p);
        }
        if let Ok(p) = icmpv6::Packet::new_checked(&b[..]) {
            let _ = icmpv6::Repr::parse(&p, &v6src, &v6dst);
        }
    }

    /// Corrupting bytes of a valid frame never makes the dissector panic, and whatever it
    /// reports stays inside the frame.
    #[test]
    fn corrupted_frames_never_panic(spec in frame_spec(), s in sig(),
                                    edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
                                    cut in any::<usize>()) {
        let len = min_frame_len(&spec);
        let mut buf = spec.frame(len, &s).unwrap();
        for (at, v) in edits {
            let i = at % len;
            buf[i] = v;
        }
        let f = &buf[..cut % (len + 1)];
        if let Some(loc) = dissect::locate_udp_payload(f) {
            prop_assert!(loc.payload_offset + loc.payload_len <= f.len());
        }
        let _ = dissect::find_signature(f);
    }
}
