//! Cost of the receive analysis per frame (`Analyzer::frame`), for before/after comparisons of
//! hot-path changes. Ignored by default; run in release on a quiet machine:
//! `cargo test -p netrig-engine --release --test analyze_cost -- --ignored --nocapture`.
use std::time::Instant;

use netrig_engine::analyze::Analyzer;
use netrig_engine::port::RxMeta;
use netrig_wire::builder::{build_udp_frame, patch_signature, L3Spec, TemplateSpec};
use netrig_wire::signature::{write_seq_ts, Signature};

const FRAMES: u64 = 4_000_000;

#[test]
#[ignore = "timing measurement: run explicitly in release"]
fn analyzer_frame_cost() {
    for flows in [1, 64] {
        measure(flows);
    }
}

fn measure(flows: usize) {
    let spec = TemplateSpec {
        src_mac: netrig_wire::ethernet::EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: netrig_wire::ethernet::EthernetAddress([2, 0, 0, 0, 0, 2]),
        vlan: None,
        l3: L3Spec::V4 { src: [198, 18, 0, 1].into(), dst: [198, 19, 0, 1].into(), ttl: 64, dscp: 0 },
        src_port: 1024,
        dst_port: 1024,
        udp_checksum: false,
    };
    let mut frames = Vec::new();
    let mut sig_offset = 0;
    for flow in 0..flows {
        let mut buf = vec![0u8; 60];
        let info = build_udp_frame(&spec, 60, &mut buf).unwrap();
        patch_signature(&mut buf, &info, &Signature { flow_id: flow as u32, seq: 0, tx_ts_ns: 0 }).unwrap();
        sig_offset = info.sig_offset;
        frames.push(buf);
    }
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let mut an = Analyzer::new(flows, 0, u64::MAX / 4);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let t0 = Instant::now();
        for i in 0..FRAMES {
            let flow = (i % flows as u64) as usize;
            let tx_ts = 1_000_000 + i * 100;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let buf = &mut frames[flow];
            write_seq_ts(&mut buf[sig_offset..], i / flows as u64, tx_ts);
            an.frame(buf, RxMeta { ts_ns: tx_ts + 2_000 + x % 20_000, queue: 0 });
        }
        let ns = t0.elapsed().as_nanos() as f64 / FRAMES as f64;
        assert_eq!(an.flows.iter().map(|f| f.received).sum::<u64>(), FRAMES);
        best = best.min(ns);
    }
    println!("Analyzer::frame: {best:.2} ns/frame (best of 5 x {FRAMES} frames, {flows} flows)");
}
