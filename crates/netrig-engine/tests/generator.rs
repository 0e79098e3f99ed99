//! The generator on in-process loopback ports: flows with header stacks and field patterns,
//! started, paused, resumed, stopped and restarted; exact counts; captures; refusals.
mod common;

use std::time::{Duration, Instant};

use netrig_engine::fault::{FaultConfig, FaultLog};
use netrig_engine::run::generator::{
    CaptureConfig, FlowState, GenConfig, GenDuration, GenFlowConfig, Generator, TxPacing,
};
use netrig_engine::{FrameSize, Port, Rate};
use netrig_wire::pattern::Pattern;
use netrig_wire::pcap;
use netrig_wire::stack::{HeaderKind, HeaderSpec, Payload, Site, StackSpec};

fn ports() -> Vec<Box<dyn Port>> {
    common::ports(None).0
}

fn h(kind: HeaderKind, fields: &[(&str, Pattern)]) -> HeaderSpec {
    HeaderSpec { kind, fields: fields.iter().map(|(n, p)| (n.to_string(), p.clone())).collect(), bytes: vec![] }
}

fn udp_flow(name: &str, frames: u64, rate: f64) -> GenFlowConfig {
    let mut f = GenFlowConfig::new(name);
    f.stack = StackSpec {
        headers: vec![
            h(HeaderKind::Ethernet, &[("dst", Pattern::List(vec![0x0200_0000_0002, 0x0200_0000_0003]))]),
            h(HeaderKind::Vlan, &[("id", Pattern::Counter { start: 100, step: 1, count: 4, down: false })]),
            h(
                HeaderKind::Ipv4,
                &[
                    ("version", Pattern::Fixed(4)),
                    ("time_to_live", Pattern::Fixed(64)),
                    ("src", Pattern::Counter { start: 0xC612_0001, step: 1, count: 10, down: false }),
                    ("dst", Pattern::Fixed(0xC613_0001)),
                ],
            ),
            h(HeaderKind::Udp, &[("src_port", Pattern::Random { min: 1000, max: 2000, count: 7, seed: 5 })]),
        ],
        payload: Payload::IncrementByte,
        site: Site::End,
        keys: Default::default(),
    };
    f.frame_size = FrameSize::Increment { min: 100, max: 140, step: 7 };
    f.rate = Rate::Pps(rate);
    f.duration = GenDuration::Frames(frames);
    f
}

fn tcp6_flow(name: &str, frames: u64) -> GenFlowConfig {
    let mut f = GenFlowConfig::new(name);
    f.stack = StackSpec {
        headers: vec![
            h(HeaderKind::Ethernet, &[]),
            h(HeaderKind::Ipv6, &[("version", Pattern::Fixed(6)), ("src", Pattern::Fixed(0x2001_0002 << 96))]),
            h(HeaderKind::Tcp, &[("ctl_syn", Pattern::Fixed(1)), ("dst_port", Pattern::List(vec![80, 443]))]),
        ],
        payload: Payload::zeros(),
        site: Site::End,
        keys: Default::default(),
    };
    f.frame_size = FrameSize::Weighted(vec![(96, 3), (200, 1)]);
    f.rate = Rate::Pps(20_000.0);
    f.duration = GenDuration::Frames(frames);
    f
}

fn config(flows: Vec<GenFlowConfig>) -> GenConfig {
    GenConfig {
        flows,
        captures: vec![CaptureConfig {
            port: 1,
            snaplen: 65535,
            overwrite: false,
            buffer_bytes: 1 << 20,
            filter: vec![],
        }],
        tx_cpus: vec![common::tx_cpu()],
        rx_cpus: vec![0],
        ..Default::default()
    }
}

/// Wait (at most `s` seconds) until `done` holds.
fn wait_for(s: f64, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs_f64(s);
    while Instant::now() < end {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    done()
}

#[test]
fn flows_send_exactly_their_frames_and_every_one_is_counted() {
    let _s = common::serial();
    let g = Generator::open(ports(), config(vec![udp_flow("a", 3000, 30_000.0), tcp6_flow("b", 1000)])).unwrap();
    assert_eq!(g.start(&[0, 1]).unwrap(), vec![0, 1]);
    assert!(wait_for(5.0, || g.flow_stats().iter().all(|s| s.state == FlowState::Done as u8)));
    assert!(wait_for(2.0, || g.flow_stats().iter().all(|s| s.rx_frames == s.tx_frames)));
    let st = g.flow_stats();
    assert_eq!((st[0].tx_frames, st[0].rx_frames), (3000, 3000));
    assert_eq!((st[1].tx_frames, st[1].rx_frames), (1000, 1000));
    assert_eq!(st[0].tx_bytes, st[0].rx_bytes);
    assert!(st[0].latency_frames == 3000 && st[0].latency_max_ns >= st[0].latency_min_ns);
    let ports = g.port_stats();
    assert_eq!(ports[0].tx_frames, 4000);
    assert_eq!(ports[1].rx_frames, 4000);
    assert_eq!(ports[1].rx_foreign + ports[1].rx_stale, 0);
    // The sender's pacing: every frame through the meter, the two flows' rates in its 1-ms window
    // (50 kframes/s: 50 frames), published once nothing is left due; port 1 sends nothing.
    assert!(wait_for(2.0, || g.tx_pacing()[0].is_some_and(|p| p.frames == 4000)), "{:?}", g.tx_pacing());
    let p = g.tx_pacing()[0].unwrap();
    assert!((p.smoothness.intended_frames - 50.0).abs() < 1e-9 && p.smoothness.peak_frames > 0, "{p:?}");
    assert!(p.smoothness.gap_max_ns >= p.smoothness.gap_p99_ns && p.smoothness.gap_p99_ns >= p.smoothness.gap_p50_ns);
    assert_eq!(g.tx_pacing()[1], None);
    // A second start counts from zero again, its pacing too (from idle: a new trial).
    g.start(&[1]).unwrap();
    assert!(wait_for(5.0, || g.flow_stats()[1].state == FlowState::Done as u8));
    assert!(wait_for(2.0, || g.flow_stats()[1].rx_frames == 1000));
    assert_eq!(g.flow_stats()[1].tx_frames, 1000);
    assert!(wait_for(2.0, || g.tx_pacing()[0].is_some_and(|p| p.frames == 1000)), "{:?}", g.tx_pacing());
    assert!((g.tx_pacing()[0].unwrap().smoothness.intended_frames - 20.0).abs() < 1e-9);
    assert!(g.errors().is_empty());
}

/// The generator counts with the trial's per-flow state: through a path that drops, duplicates
/// and reorders, each count equals the fault injector's log (as `loopback_trial.rs` holds a
/// trial's), and the duplicates are arrivals, never received frames.
#[test]
fn duplicates_and_reordering_are_counted_against_the_fault_log() {
    let _s = common::serial();
    let faults = FaultConfig {
        seed: 5,
        drop: 0.01,
        duplicate: 0.005,
        reorder: 0.005,
        reorder_distance: 20,
        ..Default::default()
    };
    let (ports, log) = common::ports(Some(faults));
    let g = Generator::open(ports, config(vec![udp_flow("a", 20_000, 200_000.0)])).unwrap();
    g.start(&[0]).unwrap();
    assert!(wait_for(5.0, || g.flow_stats()[0].state == FlowState::Done as u8));
    let log = || log.lock().unwrap().clone();
    let expected = |l: &FaultLog| 20_000 - l.dropped.len() as u64 + l.duplicated.len() as u64;
    assert!(wait_for(2.0, || g.flow_stats()[0].rx_frames == expected(&log())), "{:?}", g.flow_stats()[0]);
    let (st, log) = (g.flow_stats()[0], log());
    assert!(!log.dropped.is_empty() && !log.duplicated.is_empty() && !log.reordered.is_empty());
    assert_eq!(st.rx_duplicated, log.duplicated.len() as u64, "duplicates");
    assert_eq!(st.rx_reordered, log.reordered.len() as u64, "reordering");
    assert_eq!(st.latency_frames, st.rx_frames - st.rx_duplicated, "latency of the unique frames only");
    assert_eq!(st.ipdv_samples, st.latency_frames - 1, "one |IPDV| between each two latencies");
    assert!(
        st.ipdv_max_ns <= st.latency_max_ns - st.latency_min_ns && st.ipdv_sum_ns <= st.ipdv_samples * st.ipdv_max_ns
    );
    let b = g.flow_latency().remove(0).expect("the first flows have histograms");
    let lat = b.latency;
    assert_eq!(lat.iter().map(|b| b.1).sum::<u64>(), st.latency_frames, "one bucket entry per unique frame");
    assert_eq!(b.ipdv.iter().map(|b| b.1).sum::<u64>(), st.ipdv_samples, "one |IPDV| bucket entry per difference");
    let ipdv_top = b.ipdv.last().unwrap().0;
    assert!(st.ipdv_max_ns <= ipdv_top && ipdv_top <= st.ipdv_max_ns + st.ipdv_max_ns / 100 + 1, "{ipdv_top}: {st:?}");
    assert!(lat.windows(2).all(|w| w[0].0 < w[1].0), "lowest first, one entry per bucket");
    let top = lat.last().unwrap().0;
    assert!(st.latency_max_ns <= top && top <= st.latency_max_ns + st.latency_max_ns / 1000 + 1, "{top}: {st:?}");
    assert!(g.errors().is_empty());
}

/// Smooth pacing through real stalls: a flow whose worker is held 5 ms every 5 000 frames (50 ms
/// in 1 s) sends every frame, later by its stretch (what it could not give back: the log's span
/// says so), and never bunches them: its busiest 1 ms holds at most the rate, 2 % more given back,
/// its depth, and the batch a stall held up.
#[test]
fn a_held_flow_is_stretched_by_what_it_did_not_give_back_and_never_bunches() {
    let _s = common::serial();
    let (p, log) = stalled_flow(50_000, 5_000, 5_000_000);
    assert!(log.stalls >= 9, "{} stalls", log.stalls);
    let span_ms = (log.departures.last().unwrap() - log.departures.first().unwrap()) as f64 / 1e6;
    let (stretch_ms, planned_ms) = (p.stretch_ns as f64 / 1e6, 49_999.0 / 50.0);
    assert!((span_ms - planned_ms - stretch_ms).abs() < 2.0, "sent over {span_ms} ms, stretch {stretch_ms} ms");
    // What was given back shows: 50 ms lost, 20 ms of it given back (2 % of 1 s), less the depth
    // each time; the machine's own stalls only add.
    assert!(stretch_ms >= 25.0, "stretch {stretch_ms} ms");
    // The rate × 1.02 over 1 ms, the depth let out after a stall (4 frames), one frame of rounding.
    let peak = netrig_engine::traffic::pacing::most_in_window(&log.departures, 1_000_000);
    assert!(peak <= 51 + 4 + 1, "{peak} frames in 1 ms of 50: {:?}", p.smoothness);
    assert!(p.smoothness.peak_frames.abs_diff(peak) <= 3, "the meter's peak {:?}, the log's {peak}", p.smoothness);
    // Each stall held a picked batch back from the queue 5 ms: its lateness, as a trial's worker
    // measures it (at the pick alone it read nothing: the schedule shifts from the hand-off).
    assert!(p.max_lag_ns >= 5_000_000, "max lag {} ns", p.max_lag_ns);
}

/// One flow of `frames` frames at `frames` frames/s (1 s) whose worker the fault injector blocks
/// for `stall_ns` every `every` frames, sent to its end: its pacing and the injector's log.
fn stalled_flow(frames: u64, every: u64, stall_ns: u64) -> (TxPacing, FaultLog) {
    let faults = FaultConfig { stall_every: every, stall_ns, record_departures: true, ..Default::default() };
    let (ports, log) = common::ports(Some(faults));
    let g = Generator::open(ports, config(vec![udp_flow("a", frames, frames as f64)])).unwrap();
    g.start(&[0]).unwrap();
    assert!(wait_for(5.0, || g.flow_stats()[0].state == FlowState::Done as u8));
    assert!(wait_for(2.0, || g.tx_pacing()[0].is_some_and(|p| p.frames == frames)), "{:?}", g.tx_pacing());
    assert!(g.errors().is_empty());
    let p = g.tx_pacing()[0].unwrap();
    let log = log.lock().unwrap().clone();
    (p, log)
}

/// A stall shorter than the depth's time before the hand-off: the batch it held and the frames due
/// by its end go out as one burst, not as the batch and then the depth (166-168 frames in 1 ms of
/// 148.8 counted as two).
#[test]
fn a_batch_held_up_and_the_frames_due_after_it_are_one_burst() {
    let _s = common::serial();
    let (p, log) = stalled_flow(148_810, 499, 50_000);
    assert!(log.stalls >= 200, "{} stalls", log.stalls);
    // The rate × 1.02 over 1 ms (152), the depth (11), one frame of rounding.
    let peak = netrig_engine::traffic::pacing::most_in_window(&log.departures, 1_000_000);
    assert!(peak <= 152 + 11 + 1, "{peak} frames in 1 ms of 148.8: {:?}", p.smoothness);
}

/// While a flow runs, no read of its counts has more frames received than sent: the receivers'
/// snapshots are taken first, the transmit counters (a frame is counted before it is sent) after.
#[test]
fn a_running_flow_never_reads_as_more_received_than_sent() {
    let _s = common::serial();
    let g = Generator::open(ports(), config(vec![udp_flow("a", 200_000, 200_000.0)])).unwrap();
    g.start(&[0]).unwrap();
    let mut reads = 0;
    while g.flow_stats()[0].state != FlowState::Done as u8 {
        let s = g.flow_stats()[0];
        assert!(s.rx_frames <= s.tx_frames, "read {reads}: {} received of {} sent", s.rx_frames, s.tx_frames);
        reads += 1;
    }
    assert!(reads > 10, "{reads} reads while it ran");
    assert!(g.errors().is_empty());
}

#[test]
fn flows_at_the_top_rate_share_the_port_evenly() {
    // Before: of two Rate::Max flows, the one queued second sent all but one frame of each batch.
    let _s = common::serial();
    let flows: Vec<GenFlowConfig> = ["m0", "m1"]
        .iter()
        .map(|name| {
            let mut f = udp_flow(name, 0, 1.0);
            (f.rate, f.duration) = (Rate::Max, GenDuration::Continuous);
            f
        })
        .collect();
    let g = Generator::open(ports(), config(flows)).unwrap();
    g.start(&[0, 1]).unwrap();
    assert!(wait_for(5.0, || g.flow_stats().iter().map(|s| s.tx_frames).sum::<u64>() > 100_000));
    g.stop(&[0, 1]).unwrap();
    let st = g.flow_stats();
    let (a, b) = (st[0].tx_frames, st[1].tx_frames);
    assert!(a.abs_diff(b) * 20 < a.max(b), "{a} and {b} frames");
    assert!(g.errors().is_empty());
}

#[test]
fn pause_resume_stop_keep_counts_exact() {
    let _s = common::serial();
    let mut f = udp_flow("c", 0, 5_000.0);
    f.duration = GenDuration::Continuous;
    let g = Generator::open(ports(), config(vec![f])).unwrap();
    g.start(&[0]).unwrap();
    assert!(wait_for(2.0, || g.flow_stats()[0].tx_frames > 200));
    g.pause(&[0]).unwrap();
    assert_eq!(g.flow_stats()[0].state, FlowState::Paused as u8);
    std::thread::sleep(Duration::from_millis(30));
    let paused = g.flow_stats()[0].tx_frames;
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(g.flow_stats()[0].tx_frames, paused, "nothing sent while paused");
    g.resume(&[0]).unwrap();
    assert!(wait_for(2.0, || g.flow_stats()[0].tx_frames > paused + 200));
    g.stop(&[0]).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    let s = g.flow_stats()[0];
    assert_eq!(s.state, FlowState::Stopped as u8);
    assert!(wait_for(2.0, || g.flow_stats()[0].rx_frames == s.tx_frames));
    assert_eq!(g.flow_stats()[0].tx_frames, s.tx_frames, "nothing sent after the stop");
}

#[test]
fn a_running_flows_rate_and_sizes_change_in_place_with_every_frame_counted_once() {
    let _s = common::serial();
    let mut f = udp_flow("u", 0, 2_000.0);
    f.duration = GenDuration::Continuous;
    let g = Generator::open(ports(), config(vec![f.clone()])).unwrap();
    g.start(&[0]).unwrap();
    assert!(wait_for(2.0, || g.flow_stats()[0].tx_frames > 100));
    // Ten times the rate and other sizes: 2 000 frames take 0.1 s at the new rate, 1 s at the old
    // one; the bound leaves room for the platform's stalls, not for the old rate.
    let mut fast = f.clone();
    fast.rate = Rate::Pps(20_000.0);
    fast.frame_size = FrameSize::Fixed(300);
    let (before, t0) = (g.flow_stats()[0].tx_frames, Instant::now());
    g.update(vec![(0, fast.clone(), None)]).unwrap();
    assert!(wait_for(2.0, || g.flow_stats()[0].tx_frames >= before + 2000));
    assert!(t0.elapsed() < Duration::from_millis(500), "2000 frames took {:?} after the update", t0.elapsed());
    // And back: 200 frames take 0.1 s at 2 kfps (10 ms at 20 kfps); stalls only lengthen that.
    g.update(vec![(0, f.clone(), None)]).unwrap();
    let (before, t0) = (g.flow_stats()[0].tx_frames, Instant::now());
    assert!(wait_for(2.0, || g.flow_stats()[0].tx_frames >= before + 200));
    assert!(t0.elapsed() > Duration::from_millis(60), "200 frames in {:?} back at 2 kfps", t0.elapsed());
    g.stop(&[0]).unwrap();
    assert!(wait_for(2.0, || {
        let s = g.flow_stats()[0];
        s.rx_frames == s.tx_frames
    }));
    let (s, p) = (g.flow_stats()[0], g.port_stats());
    assert_eq!((s.tx_bytes, p[1].rx_stale + p[1].rx_foreign), (s.rx_bytes, 0), "one start, no frame twice");
    // Anything but the rate, the size and the headers is refused, naming the flow; a fixed-seconds
    // flow keeps its rate.
    let mut other = f.clone();
    other.delay_ns = 5;
    assert_eq!(g.update(vec![(0, other, None)]).unwrap_err().field, "flows[0]");
    let mut timed = udp_flow("t", 0, 2_000.0);
    timed.duration = GenDuration::Seconds(1.0);
    let g = Generator::open(ports(), config(vec![timed.clone()])).unwrap();
    timed.rate = Rate::Pps(4_000.0);
    assert_eq!(g.update(vec![(0, timed, None)]).unwrap_err().field, "flows[0].rate");
    assert!(g.errors().is_empty());
}

#[test]
fn bursts_delay_and_capture_byte_by_byte() {
    let _s = common::serial();
    let mut f = udp_flow("d", 0, 100_000.0);
    f.duration = GenDuration::Bursts { packets: 5, count: 3, gap_ns: 2_000_000 };
    f.delay_ns = 10_000_000;
    let g = Generator::open(ports(), config(vec![f.clone()])).unwrap();
    g.set_capture(1, true).unwrap();
    let t0 = Instant::now();
    g.start(&[0]).unwrap();
    assert!(wait_for(2.0, || g.flow_stats()[0].rx_frames == 15));
    let s = g.flow_stats()[0];
    assert_eq!((s.tx_frames, s.state), (15, FlowState::Done as u8));
    assert!(t0.elapsed() >= Duration::from_millis(14), "a 10 ms delay and two 2 ms gaps");
    assert!(s.tx_last_ns - s.tx_first_ns >= 4_000_000);
    assert!(g.capture_file(1, true, "lo-b").is_err(), "running captures are not read");
    g.set_capture(1, false).unwrap();
    let cap = pcap::parse(g.capture_file(1, true, "lo-b").unwrap()).unwrap();
    assert_eq!(cap.records.len(), 15);
    // The frames as compiled (signature aside), each followed by its FCS.
    let compiled = netrig_engine::run::generator::compile_flow(0, &f, 9018, None).unwrap();
    for (j, _) in cap.records.iter().enumerate() {
        let got = cap.frame(j);
        let (frame, fcs) = got.split_at(got.len() - 4);
        assert_eq!(fcs, netrig_wire::fcs::fcs(frame));
        let sig = netrig_wire::dissect::locate(frame, netrig_wire::signature::Site::End).unwrap();
        assert_eq!(sig.seq, j as u64);
        let size = compiled.size_schedule[j % compiled.size_schedule.len()] as usize;
        let want = compiled.stack.frame(size, j as u64, &sig);
        assert_eq!(frame, &want[..], "frame {j}");
    }
}

#[test]
fn commands_check_every_index_first() {
    let _s = common::serial();
    let g = Generator::open(ports(), config(vec![udp_flow("e", 10, 1000.0)])).unwrap();
    let e = g.start(&[0, 5]).unwrap_err();
    assert_eq!(e.field, "flows[1]");
    assert_eq!(g.flow_stats()[0].state, FlowState::Stopped as u8, "nothing started");
    assert!(g.set_capture(0, true).unwrap_err().message.contains("no capture"));
    let mut bad = udp_flow("x", 10, 1000.0);
    bad.stack.headers[2].fields.push(("nope".into(), Pattern::Fixed(1)));
    let e = Generator::open(ports(), config(vec![udp_flow("ok", 10, 1000.0), bad])).unwrap_err();
    assert!(e.to_string().starts_with("flows[1].packet[2].ipv4.nope"), "{e}");
}
