//! Property tests: emit → parse round trips, template patching keeps every checksum valid,
//! and no parser panics on arbitrary bytes.

use std::net::{Ipv4Addr, Ipv6Addr};

use netrig_wire::builder::{self, L3Spec, TemplateInfo, TemplateSpec};
use netrig_wire::dissect::{self, L3};
use netrig_wire::signature::{self, Signature};
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
fn template_spec() -> impl Strategy<Value = TemplateSpec> {
    (mac(), mac(), proptest::option::of(vlan_repr()), l3_spec(), any::<u16>(), any::<u16>(), any::<bool>()).prop_map(
        |(src_mac, dst_mac, vlan, l3, src_port, dst_port, udp_checksum)| TemplateSpec {
            src_mac,
            dst_mac,
            outer_vlan: None,
            vlan,
            l3,
            proto: builder::Proto::Udp,
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

/// Checks the IPv4 header checksum and the UDP checksum of a built frame via the views.
fn verify_frame(f: &[u8], info: &TemplateInfo) -> Result<(), TestCaseError> {
    let ip = &f[info.l3_offset..];
    let ips = match info.l3 {
        Some(L3::V4) => {
            let p = ipv4::Packet::new_checked(ip).unwrap();
            prop_assert!(p.verify_checksum(), "IPv4 header checksum");
            prop_assert!(ipv4::Repr::parse(&p).is_ok());
            IpPair::V4 { src: p.src_addr(), dst: p.dst_addr() }
        }
        _ => {
            let p = ipv6::Packet::new_checked(ip).unwrap();
            prop_assert!(ipv6::Repr::parse(&p).is_ok());
            IpPair::V6 { src: p.src_addr(), dst: p.dst_addr() }
        }
    };
    let u = udp::Packet::new_checked(&f[info.l4_offset..]).unwrap();
    prop_assert_eq!(u.len() as usize, info.frame_len - info.l4_offset);
    prop_assert!(udp::Repr::parse(&u, &ips).is_ok(), "UDP checksum");
    prop_assert_eq!(u.checksum() != 0, info.l4_csum_offset.is_some());
    Ok(())
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

    /// Build a template, patch flow addresses/ports, signature, seq/ts and length: the
    /// dissector finds exactly the signature written and every checksum verifies.
    #[test]
    fn template_patching_keeps_frames_valid(spec in template_spec(), extra in 0usize..1500, flow_ips in ip_pair(),
                                            ports in any::<(u16, u16)>(), s in sig(), seq in any::<u64>(),
                                            ts in any::<u64>(), new_extra in 0usize..1500) {
        let len = builder::min_frame_len(&spec) + extra;
        let mut buf = vec![0x5Au8; 1600];
        let info = builder::build_udp_frame(&spec, len, &mut buf).unwrap();
        verify_frame(&buf[..len], &info)?;

        let same_family = matches!(
            (spec.l3, flow_ips),
            (L3Spec::V4 { .. }, IpPair::V4 { .. }) | (L3Spec::V6 { .. }, IpPair::V6 { .. })
        );
        prop_assert_eq!(builder::set_l3_addrs(&mut buf, &info, &flow_ips).is_ok(), same_family);
        verify_frame(&buf[..len], &info)?;
        builder::set_ports(&mut buf, &info, ports.0, ports.1).unwrap();
        verify_frame(&buf[..len], &info)?;

        builder::patch_signature(&mut buf, &info, &s).unwrap();
        verify_frame(&buf[..len], &info)?;
        prop_assert_eq!(dissect::find_signature(&buf[..len]), Some(s));
        let loc = dissect::locate_udp_payload(&buf[..len]).unwrap();
        prop_assert_eq!(Some(loc.l3), info.l3);
        prop_assert_eq!((loc.l3_offset, loc.l4_offset, loc.payload_offset), (info.l3_offset, info.l4_offset, info.sig_offset));
        prop_assert_eq!(loc.payload_len, len - info.sig_offset);

        builder::patch_signature(&mut buf, &info, &Signature { seq, tx_ts_ns: ts, ..s }).unwrap();
        verify_frame(&buf[..len], &info)?;
        let expect = Signature { seq: seq & signature::MASK_40, tx_ts_ns: ts & signature::MASK_40, ..s };
        prop_assert_eq!(dissect::find_signature(&buf[..len]), Some(expect));

        let new_len = builder::min_frame_len(&spec) + new_extra;
        let info2 = builder::set_frame_len(&mut buf, &info, new_len).unwrap();
        verify_frame(&buf[..new_len], &info2)?;
        prop_assert_eq!(dissect::find_signature(&buf[..new_len]), Some(expect));
        // Equivalent to building at that length and patching the same way.
        let mut fresh = vec![0u8; new_len];
        let info3 = builder::build_udp_frame(&spec, new_len, &mut fresh).unwrap();
        prop_assert_eq!(info3, info2);
        if same_family {
            builder::set_l3_addrs(&mut fresh, &info3, &flow_ips).unwrap();
        }
        builder::set_ports(&mut fresh, &info3, ports.0, ports.1).unwrap();
        builder::patch_signature(&mut fresh, &info3, &expect).unwrap();
        // UDP checksum 0x0000 vs 0xFFFF are the same value; compare the rest byte for byte.
        let mut a = buf[..new_len].to_vec();
        if let Some(o) = info2.l4_csum_offset {
            for v in [&mut a, &mut fresh] {
                if v[o] == 0 && v[o + 1] == 0 { v[o] = 0xFF; v[o + 1] = 0xFF; }
            }
        }
        prop_assert_eq!(a, fresh);
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
    fn corrupted_frames_never_panic(spec in template_spec(), s in sig(),
                                    edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
                                    cut in any::<usize>()) {
        let len = builder::min_frame_len(&spec);
        let mut buf = vec![0u8; len];
        let info = builder::build_udp_frame(&spec, len, &mut buf).unwrap();
        builder::patch_signature(&mut buf, &info, &s).unwrap();
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
