//! Property tests: a stream's frames, read back from their bytes alone, keep every length and
//! checksum valid for every flow; the signature survives a round trip; the dissector never panics
//! on arbitrary or corrupted bytes.

use std::net::{Ipv4Addr, Ipv6Addr};

use std::sync::Arc;

use netrig_wire::dissect::{self, L3};
use netrig_wire::frames::{min_frame_len, FrameSpec, L3Spec, PerFlow, Proto};
use netrig_wire::pattern::Pattern;
use netrig_wire::signature::{self, Signature};
use netrig_wire::stack::{self, KeySpec, KeyValues};
use netrig_wire::{checksum, ip_proto, vlan, EthernetAddress, IpPair};
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

/// Reads a stream's UDP frame as a receiver would, from the bytes alone: the IPv4 header's
/// version, length and checksum, or IPv6's version and payload length; the UDP length and its
/// checksum over the pseudo-header (0 only over IPv4 when not asked for); and where the
/// dissector finds its parts. Returns its addresses.
fn verify_frame(f: &[u8], spec: &FrameSpec) -> Result<IpPair, TestCaseError> {
    let be = |at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
    let l3_offset = 14 + if spec.vlan.is_some() { 4 } else { 0 };
    let (ips, l4_offset) = match spec.l3 {
        L3Spec::V4 { .. } => {
            let h = &f[l3_offset..l3_offset + 20];
            prop_assert_eq!(h[0], 0x45, "IPv4, no options");
            prop_assert_eq!(usize::from(be(l3_offset + 2)), f.len() - l3_offset, "IPv4 total length");
            prop_assert_eq!(checksum::fold(checksum::sum(h)), 0, "IPv4 header checksum");
            let (src, dst) = (<[u8; 4]>::try_from(&h[12..16]).unwrap(), <[u8; 4]>::try_from(&h[16..20]).unwrap());
            (IpPair::V4 { src: src.into(), dst: dst.into() }, l3_offset + 20)
        }
        L3Spec::V6 { .. } => {
            let h = &f[l3_offset..l3_offset + 40];
            prop_assert_eq!(h[0] >> 4, 6, "IPv6");
            prop_assert_eq!(usize::from(be(l3_offset + 4)), f.len() - l3_offset - 40, "IPv6 payload length");
            let (src, dst) = (<[u8; 16]>::try_from(&h[8..24]).unwrap(), <[u8; 16]>::try_from(&h[24..40]).unwrap());
            (IpPair::V6 { src: src.into(), dst: dst.into() }, l3_offset + 40)
        }
    };
    let udp = &f[l4_offset..];
    prop_assert_eq!(usize::from(be(l4_offset + 4)), udp.len(), "UDP length");
    let v6 = matches!(spec.l3, L3Spec::V6 { .. });
    let sent = be(l4_offset + 6);
    prop_assert_eq!(sent != 0, spec.udp_checksum || v6);
    if sent != 0 {
        let sum = checksum::sum(udp) + ips.pseudo_header(ip_proto::UDP, udp.len() as u32);
        prop_assert_eq!(checksum::fold(sum), 0, "UDP checksum");
    }
    let loc = dissect::locate_udp_payload(f).unwrap();
    prop_assert_eq!(loc.l3, if v6 { L3::V6 } else { L3::V4 });
    prop_assert_eq!((loc.l3_offset, loc.l4_offset, loc.payload_offset), (l3_offset, l4_offset, l4_offset + 8));
    Ok(ips)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

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

    /// Neither the dissector nor the signature parser panics on arbitrary bytes.
    #[test]
    fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = dissect::locate_udp_payload(&b);
        let _ = dissect::find_signature(&b);
        let _ = Signature::parse(&b);
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
