//! pcap replay on in-process loopback ports (no root): a capture written here, stamped and not,
//! counted against the fault injector's own log.
use std::sync::Arc;

use netrig_engine::fault::FaultConfig;
use netrig_engine::traffic::replay::Replay;
use netrig_engine::{run_trial, Rate, Stop, StreamConfig, TrialConfig, TrialControl};
use netrig_wire::pcap::{self, write};

mod common;
use common::{counting, ports, serial};

fn udp(sport: u8, payload: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
    let ip_len = (20 + 8 + payload) as u16;
    f.extend_from_slice(&[0x45, 0, (ip_len >> 8) as u8, ip_len as u8, 0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&[198, 18, 0, 1, 198, 19, 0, 1]);
    let ulen = (8 + payload) as u16;
    f.extend_from_slice(&[4, sport, 4, 0, (ulen >> 8) as u8, ulen as u8, 0, 0]);
    f.extend(std::iter::repeat_n(0xAB, payload));
    f
}

fn replay(stamp: bool) -> Arc<Replay> {
    let frames = [udp(1, 30), udp(2, 100), udp(3, 4), udp(1, 50)];
    let recs: Vec<(u64, &[u8])> = frames.iter().map(|f| (0, f.as_slice())).collect();
    let cap = pcap::parse(write::pcap(&recs, true, true, 1)).unwrap();
    Arc::new(Replay::from_capture("t.pcap", cap, stamp).unwrap())
}

fn cfg(r: Arc<Replay>, frames: u64) -> TrialConfig {
    let mut s = StreamConfig::new("replay");
    s.rate = Rate::Pps(100_000.0);
    s.stop = Stop::Frames { count: frames };
    s.replay = Some(r);
    counting(s)
}

#[test]
fn stamped_replay_counts_per_flow_and_sees_the_injected_loss() {
    let _serial = serial();
    let (mut p, log) = ports(Some(FaultConfig { drop: 0.01, seed: 3, ..FaultConfig::default() }));
    let n = 40_000;
    let r = run_trial(&mut p, &cfg(replay(true), n), &TrialControl::new()).unwrap();
    let st = &r.streams[0];
    let rp = st.replay.as_ref().unwrap();
    assert_eq!((rp.frames_per_pass, rp.passes, rp.flows), (4, 10_000.0, 2));
    assert_eq!((rp.frames_stamped, rp.frames_unstamped), (30_000, 10_000), "the 4-byte payload has no room");
    assert_eq!(st.tx_frames, n);
    assert!(st.loss_measured);
    let (dropped, dropped_stamped) = {
        let l = log.lock().unwrap();
        (l.dropped.len() as u64, l.dropped.iter().filter(|k| k.0 != u32::MAX).count() as u64)
    };
    // Every dropped frame is gone, stamped or not; the stamped ones are the stream's loss, exactly.
    assert_eq!(st.rx_frames + r.ports[1].rx_foreign + dropped, n);
    assert!(dropped_stamped > 0 && dropped_stamped < dropped);
    assert_eq!(st.lost, dropped_stamped);
    assert_eq!(st.rx_frames, 30_000 - dropped_stamped);
    let flows: Vec<u64> = st.flow_results.iter().map(|f| f.tx_frames).collect();
    assert_eq!(flows, [20_000, 10_000]);
    assert!((st.loss_ratio() - st.lost as f64 / 30_000.0).abs() < 1e-12);
    assert!(r.valid, "{:?}", r.invalid_reason);
}

#[test]
fn unstamped_replay_does_not_measure_loss() {
    let _serial = serial();
    let (mut p, _) = ports(None);
    let r = run_trial(&mut p, &cfg(replay(false), 1000), &TrialControl::new()).unwrap();
    let st = &r.streams[0];
    assert!(!st.loss_measured);
    assert_eq!((st.tx_frames, st.rx_frames, st.lost), (1000, 0, 0));
    assert_eq!(st.replay.as_ref().unwrap().frames_unstamped, 1000);
    assert_eq!(r.ports[1].rx_foreign, 1000, "the receiving port saw every frame");
    assert_eq!(st.tx_bytes, 250 * (76 + 146 + 64 + 96));
    assert!(r.valid, "{:?}", r.invalid_reason);
}
