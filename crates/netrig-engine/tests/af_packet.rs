//! AF_PACKET ring and plain-socket backends on a real veth pair between two fresh namespaces.
//! Needs root (creates namespaces); skips with a reason otherwise.
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use netrig_engine::clock;
use netrig_engine::open::open_port;
use netrig_engine::{Backend, PortError, PortSpec, RxQueue, TxQueue};

const ETHERTYPE: [u8; 2] = [0x88, 0xb5]; // IEEE local experimental
const MAGIC: [u8; 4] = *b"nrT1";

/// Root tests share two CPUs: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

macro_rules! need_root {
    () => {
        if !is_root() {
            eprintln!("skipped: needs root (creates network namespaces and veth pairs)");
            return;
        }
    };
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// Two namespaces joined by a veth pair (`a` in `ns_a`, `b` in `ns_b`), IPv6 off so the kernel
/// sends nothing of its own. Deleted on drop (deleting a namespace deletes its veth end). The ends
/// get different ifindexes: in fresh namespaces both would be 2, and linkwatch then runs the carrier
/// of a veth whose ifindex equals its peer's up to 1 s late (a port opened then waits for it).
struct VethPair {
    ns_a: String,
    ns_b: String,
    a: String,
    b: String,
}

impl VethPair {
    fn new(tag: &str) -> VethPair {
        let pid = std::process::id() % 100_000;
        let p = VethPair {
            ns_a: format!("nrt-{pid}-{tag}-a"),
            ns_b: format!("nrt-{pid}-{tag}-b"),
            a: format!("nrt{pid}{tag}a"),
            b: format!("nrt{pid}{tag}b"),
        };
        ip(&["netns", "add", &p.ns_a]);
        ip(&["netns", "add", &p.ns_b]);
        for ns in [&p.ns_a, &p.ns_b] {
            for conf in ["all", "default"] {
                let _ = Command::new("ip")
                    .args(["netns", "exec", ns, "sysctl", "-qw", &format!("net.ipv6.conf.{conf}.disable_ipv6=1")])
                    .status();
            }
        }
        ip(&[
            "link",
            "add",
            &p.a,
            "netns",
            &p.ns_a,
            "address",
            "02:00:00:00:00:01",
            "index",
            "10",
            "type",
            "veth",
            "peer",
            "name",
            &p.b,
            "netns",
            &p.ns_b,
            "address",
            "02:00:00:00:00:02",
            "index",
            "11",
        ]);
        ip(&["-n", &p.ns_a, "link", "set", &p.a, "up"]);
        ip(&["-n", &p.ns_b, "link", "set", &p.b, "up"]);
        p
    }

    fn counter(&self, ns: &str, ifname: &str, name: &str) -> u64 {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "cat", &format!("/sys/class/net/{ifname}/statistics/{name}")])
            .output()
            .expect("read counter");
        String::from_utf8_lossy(&out.stdout).trim().parse().expect("counter value")
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        for ns in [&self.ns_a, &self.ns_b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn spec(ifname: &str, ns: &str, backend: Backend, ring_frames: usize) -> PortSpec {
    PortSpec { netns: Some(ns.into()), backend: Some(backend), ring_frames, ..PortSpec::new(ifname) }
}

/// Write a test frame of `len` bytes: our MACs, a private ethertype, magic, sequence, tx time.
fn build(buf: &mut [u8], len: usize, seq: u64) -> usize {
    buf[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    buf[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    buf[12..14].copy_from_slice(&ETHERTYPE);
    buf[14..18].copy_from_slice(&MAGIC);
    buf[18..26].copy_from_slice(&seq.to_be_bytes());
    buf[26..34].copy_from_slice(&clock::now_ns().to_be_bytes());
    for b in &mut buf[34..len] {
        *b = 0x5a;
    }
    len
}

fn parse(f: &[u8]) -> Option<(u64, u64)> {
    if f.len() < 34 || f[12..14] != ETHERTYPE || f[14..18] != MAGIC {
        return None;
    }
    Some((u64::from_be_bytes(f[18..26].try_into().ok()?), u64::from_be_bytes(f[26..34].try_into().ok()?)))
}

#[derive(Debug, Default)]
struct RxReport {
    ours: u64,
    foreign: u64,
    out_of_order: u64,
    bad_len: u64,
    ts_problems: u64,
    max_latency_ns: u64,
}

/// Receive until `expect` of our frames arrived or `deadline` passes.
fn receive(rxq: &mut dyn RxQueue, expect: u64, len: usize, got: &AtomicU64, deadline: Instant) -> RxReport {
    let mut r = RxReport::default();
    let mut next_seq = 0u64;
    let mut last_ts = 0u64;
    while r.ours < expect && Instant::now() < deadline {
        rxq.recv(512, Duration::from_millis(20), &mut |f, meta| {
            let Some((seq, tx_ts)) = parse(f) else {
                r.foreign += 1;
                return;
            };
            r.ours += 1;
            if f.len() != len {
                r.bad_len += 1;
            }
            if seq != next_seq {
                r.out_of_order += 1;
            }
            next_seq = seq + 1;
            let now = clock::now_ns();
            // Engine clock: after the TX stamp (allow conversion error), not in the future,
            // and in arrival order within a millisecond.
            if meta.ts_ns + 1_000_000 < tx_ts || meta.ts_ns > now + 1_000_000 || meta.ts_ns + 1_000_000 < last_ts {
                r.ts_problems += 1;
            }
            r.max_latency_ns = r.max_latency_ns.max(meta.ts_ns.saturating_sub(tx_ts));
            last_ts = meta.ts_ns;
        })
        .expect("recv");
        got.store(r.ours, Ordering::Relaxed);
    }
    r
}

/// Send `n` frames of `len` bytes, keeping at most `window` ahead of the receiver.
fn transmit(txq: &mut dyn TxQueue, n: u64, len: usize, got: &AtomicU64, window: u64) {
    let mut sent = 0u64;
    let deadline = Instant::now() + Duration::from_secs(30);
    while sent < n {
        assert!(Instant::now() < deadline, "TX stuck at {sent}/{n}: {:?}", txq.stats());
        let ahead = sent - got.load(Ordering::Relaxed);
        if ahead >= window {
            std::thread::yield_now();
            continue;
        }
        let want = (n - sent).min(window - ahead).min(256) as usize;
        let mut seq = sent;
        let k = txq
            .send(want, &mut |buf| {
                let l = build(buf, len, seq);
                seq += 1;
                l
            })
            .expect("send");
        assert_eq!(seq - sent, k as u64, "fill must be called exactly once per accepted frame");
        sent += k as u64;
        if k == 0 {
            std::thread::yield_now();
        }
    }
    txq.flush().expect("flush");
    let t = Instant::now();
    while !txq.idle() {
        assert!(t.elapsed() < Duration::from_secs(5), "TX never drained: {:?}", txq.stats());
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn send_receive(backend: Backend, tag: &str, n: u64, len: usize) {
    send_receive_mtu(backend, tag, n, len, 1500);
}

fn send_receive_mtu(backend: Backend, tag: &str, n: u64, len: usize, mtu: usize) {
    let net = VethPair::new(tag);
    if mtu != 1500 {
        for (ns, ifname) in [(&net.ns_a, &net.a), (&net.ns_b, &net.b)] {
            ip(&["-n", ns, "link", "set", ifname, "mtu", &mtu.to_string()]);
        }
    }
    let mut tx = open_port(&spec(&net.a, &net.ns_a, backend, 0)).expect("open tx port");
    let mut rx = open_port(&spec(&net.b, &net.ns_b, backend, 0)).expect("open rx port");
    assert_eq!(tx.caps().backend, backend);
    assert_eq!(tx.caps().max_frame_len, mtu + 14);
    let mut txq = tx.open_tx(0).expect("open tx queue");
    let mut rxq = rx.open_rx(0).expect("open rx queue");
    let (tx0, rx0) = (net.counter(&net.ns_a, &net.a, "tx_packets"), net.counter(&net.ns_b, &net.b, "rx_packets"));

    let got = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let rx_thread = {
        let got = got.clone();
        std::thread::spawn(move || {
            let r = receive(rxq.as_mut(), n, len, &got, Instant::now() + Duration::from_secs(40));
            (r, rxq.stats())
        })
    };
    // Jumbo frames: at most half the default AF_PACKET receive ring (32 MiB) in flight, so a
    // receiver held off its CPU for milliseconds makes the sender wait instead of the ring drop: a
    // clean clone's run lost 66 of 2 000 frames to a 16 384-frame window (the ring holds 384 frames
    // of 65 549 B, 7.7 ms of them at the rate sent).
    let window = if len <= 1518 { 16_384 } else { ((16 << 20) / len as u64).max(1) };
    let t0 = Instant::now();
    transmit(txq.as_mut(), n, len, &got, window);
    let tx_s = t0.elapsed().as_secs_f64();
    let (r, rx_stats) = rx_thread.join().expect("rx thread");
    done.store(true, Ordering::Relaxed);
    let ts = txq.stats();
    eprintln!("{backend} {len} B: {n} frames in {tx_s:.2} s; tx {ts:?}; rx {r:?} {rx_stats:?}");

    assert_eq!(ts.frames, n, "TX counted {ts:?}");
    assert_eq!(ts.bytes, n * len as u64);
    assert_eq!(ts.errors, 0);
    assert_eq!(r.ours, n, "received {r:?}, rx stats {rx_stats:?}");
    assert_eq!(r.foreign, 0, "unexpected frames on a private link");
    assert_eq!(r.out_of_order, 0);
    assert_eq!(r.bad_len, 0);
    assert_eq!(r.ts_problems, 0, "timestamps off: {r:?}");
    assert_eq!(rx_stats.ring_drops, 0);
    assert_eq!(net.counter(&net.ns_a, &net.a, "tx_packets") - tx0, n, "veth tx_packets");
    assert_eq!(net.counter(&net.ns_b, &net.b, "rx_packets") - rx0, n, "veth rx_packets");
}

#[test]
fn af_packet_small_frames_all_arrive() {
    need_root!();
    let _g = serial();
    send_receive(Backend::AfPacket, "s", 100_000, 60);
}

#[test]
fn af_packet_large_frames_all_arrive() {
    need_root!();
    let _g = serial();
    send_receive(Backend::AfPacket, "l", 100_000, 1514);
}

/// Each TX frame is copied whole into the skb's linear part, up to the 65 535 bytes a
/// `virtio_net_hdr` can name; a longer frame (MTU 65 535) goes with the rest linked from the ring.
#[test]
fn af_packet_frames_longer_than_a_vnet_header_names_all_arrive() {
    need_root!();
    let _g = serial();
    send_receive_mtu(Backend::AfPacket, "j", 2_000, 65_535 + 14, 65_535);
}

#[test]
fn socket_small_frames_all_arrive() {
    need_root!();
    let _g = serial();
    send_receive(Backend::Socket, "t", 100_000, 60);
}

#[test]
fn socket_large_frames_all_arrive() {
    need_root!();
    let _g = serial();
    send_receive(Backend::Socket, "u", 30_000, 1514);
}

/// A tiny receive ring that nobody reads overflows, and the drops are reported exactly:
/// received + drops == sent.
fn drops_reported(backend: Backend, tag: &str) {
    let net = VethPair::new(tag);
    let mut tx = open_port(&spec(&net.a, &net.ns_a, backend, 0)).expect("open tx port");
    let mut rx = open_port(&spec(&net.b, &net.ns_b, backend, 64)).expect("open rx port");
    let mut txq = tx.open_tx(0).expect("tx queue");
    let mut rxq = rx.open_rx(0).expect("rx queue");
    let n = 20_000u64;
    let never = AtomicU64::new(0);
    transmit(txq.as_mut(), n, 60, &never, u64::MAX);
    std::thread::sleep(Duration::from_millis(50)); // let blocks retire
    let mut received = 0u64;
    loop {
        let k =
            rxq.recv(4096, Duration::from_millis(30), &mut |f, _| received += parse(f).is_some() as u64).expect("recv");
        if k == 0 {
            break;
        }
    }
    let st = rxq.stats();
    eprintln!("{backend} tiny ring: sent {n}, received {received}, {st:?}");
    assert!(st.ring_drops > 0, "a 64-frame ring cannot hold {n} frames: {st:?}");
    assert_eq!(received + st.ring_drops, n, "received {received} + drops {} != sent {n}", st.ring_drops);
}

#[test]
fn af_packet_ring_drops_are_reported() {
    need_root!();
    let _g = serial();
    drops_reported(Backend::AfPacket, "d");
}

#[test]
fn socket_drops_are_reported() {
    need_root!();
    let _g = serial();
    drops_reported(Backend::Socket, "e");
}

#[test]
fn missing_interface_in_a_namespace_names_both() {
    need_root!();
    let _g = serial();
    let net = VethPair::new("m");
    for backend in [Backend::AfPacket, Backend::Socket] {
        match open_port(&spec("nr-missing0", &net.ns_a, backend, 0)) {
            Err(e @ PortError::NoSuchInterface { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains("nr-missing0") && msg.contains(&net.ns_a), "{msg}");
            }
            Err(e) => panic!("{backend}: wrong error {e}"),
            Ok(_) => panic!("{backend}: opened a missing interface"),
        }
    }
    // Out-of-range queue and a down interface are clear errors too.
    let mut p = open_port(&spec(&net.a, &net.ns_a, Backend::AfPacket, 0)).expect("open");
    assert!(matches!(p.open_tx(1), Err(PortError::NoSuchQueue { .. })));
    ip(&["-n", &net.ns_a, "link", "set", &net.a, "down"]);
    let e = open_port(&spec(&net.a, &net.ns_a, Backend::AfPacket, 0)).err().expect("down interface");
    assert!(e.to_string().contains("down"), "{e}");
}

#[test]
fn fanout_spreads_flows_over_queues() {
    need_root!();
    let _g = serial();
    let net = VethPair::new("f");
    let mut tx = open_port(&spec(&net.a, &net.ns_a, Backend::AfPacket, 0)).expect("tx");
    let mut rs = spec(&net.b, &net.ns_b, Backend::AfPacket, 0);
    rs.queues = 2;
    let mut rx = open_port(&rs).expect("rx");
    assert_eq!(rx.caps().rx_queues, 2);
    let mut q = [rx.open_rx(0).expect("rx0"), rx.open_rx(1).expect("rx1")];
    let mut txq = tx.open_tx(0).expect("txq");
    // 64 IPv4/UDP flows (the fanout hash looks at L3/L4, not at MACs): vary the source port.
    let n = 6400u64;
    let mut seq = 0u64;
    while seq < n {
        txq.send(64, &mut |buf| {
            buf[..60].fill(0);
            buf[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
            buf[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
            buf[12..14].copy_from_slice(&[0x08, 0x00]);
            buf[14] = 0x45;
            buf[16..18].copy_from_slice(&46u16.to_be_bytes());
            buf[22] = 64;
            buf[23] = 17;
            buf[26..30].copy_from_slice(&[198, 18, 0, 1]);
            buf[30..34].copy_from_slice(&[198, 19, 0, 1]);
            buf[34..36].copy_from_slice(&(1024 + (seq % 64) as u16).to_be_bytes());
            buf[36..38].copy_from_slice(&1024u16.to_be_bytes());
            buf[38..40].copy_from_slice(&26u16.to_be_bytes());
            buf[42..46].copy_from_slice(&MAGIC);
            seq += 1;
            60
        })
        .expect("send");
    }
    txq.flush().expect("flush");
    std::thread::sleep(Duration::from_millis(30));
    let mut counts = [0u64; 2];
    for (i, rq) in q.iter_mut().enumerate() {
        while rq
            .recv(4096, Duration::from_millis(20), &mut |f, m| {
                assert_eq!(m.queue as usize, i);
                counts[i] += (f.len() == 60 && f[12..14] == [0x08, 0x00] && f[42..46] == MAGIC) as u64;
            })
            .expect("recv")
            > 0
        {}
    }
    eprintln!("fanout: {counts:?}");
    assert_eq!(counts[0] + counts[1], n);
    assert!(counts[0] > 0 && counts[1] > 0, "both queues get flows: {counts:?}");
}

/// Sanity figure, not a benchmark: 2 s of 60-byte frames as fast as one thread can send them to
/// a veth whose peer drops them (in its stack, or with `NRT_XDP_DROP_OBJ=path/to/xdpdrop.o` in
/// an XDP_DROP program as in the peers' baseline). Run with `--ignored --nocapture`.
#[test]
#[ignore]
fn quick_tx_rate() {
    need_root!();
    let _g = serial();
    let net = VethPair::new("r");
    if let Ok(obj) = std::env::var("NRT_XDP_DROP_OBJ") {
        ip(&["-n", &net.ns_b, "link", "set", "dev", &net.b, "xdpdrv", "obj", &obj, "sec", "xdp"]);
    }
    for backend in [Backend::AfPacket, Backend::Socket] {
        let mut tx = open_port(&spec(&net.a, &net.ns_a, backend, 0)).expect("tx");
        let mut txq = tx.open_tx(0).expect("txq");
        let mut tmpl = [0u8; 60];
        build(&mut tmpl, 60, 0);
        let t0 = Instant::now();
        let mut sent = 0u64;
        while t0.elapsed() < Duration::from_secs(2) {
            sent += txq
                .send(256, &mut |buf| {
                    buf[..60].copy_from_slice(&tmpl);
                    60
                })
                .expect("send") as u64;
        }
        txq.flush().expect("flush");
        let s = t0.elapsed().as_secs_f64();
        let st = txq.stats();
        eprintln!(
            "{backend}: {:.3} Mpps accepted, {:.3} Mpps taken by the kernel, {st:?}",
            sent as f64 / s / 1e6,
            st.frames as f64 / s / 1e6
        );
    }
}

/// 802.1Q-tagged frames (including a full-size MTU + 18 one) arrive byte for byte: the kernel
/// moves the tag into metadata on receive and the backends put it back.
fn vlan_frames_arrive_intact(backend: Backend, tag: &str) {
    let net = VethPair::new(tag);
    let mut tx = open_port(&spec(&net.a, &net.ns_a, backend, 0)).expect("tx");
    let mut rx = open_port(&spec(&net.b, &net.ns_b, backend, 0)).expect("rx");
    let mut txq = tx.open_tx(0).expect("txq");
    let mut rxq = rx.open_rx(0).expect("rxq");
    let frame = |seq: u64, buf: &mut [u8]| -> usize {
        let len = if seq & 1 == 0 { 64 } else { 1518 };
        buf[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        buf[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        buf[12..16].copy_from_slice(&[0x81, 0x00, 0x20, 0x64]); // PCP 1, VID 100
        buf[16..18].copy_from_slice(&ETHERTYPE);
        buf[18..26].copy_from_slice(&seq.to_be_bytes());
        for (i, b) in buf[26..len].iter_mut().enumerate() {
            *b = (i as u64 ^ seq) as u8;
        }
        len
    };
    let n = 1000u64;
    let mut seq = 0;
    while seq < n {
        txq.send(50, &mut |buf| {
            let l = frame(seq, buf);
            seq += 1;
            l
        })
        .expect("send");
    }
    txq.flush().expect("flush");
    assert_eq!(txq.stats().frames, n);
    let mut good = 0u64;
    let mut bad = 0u64;
    let mut expect = vec![0u8; 2048];
    let t = Instant::now();
    while good + bad < n && t.elapsed() < Duration::from_secs(5) {
        rxq.recv(256, Duration::from_millis(20), &mut |f, _| {
            if f.len() < 26 {
                bad += 1;
                return;
            }
            let s = u64::from_be_bytes(f[18..26].try_into().unwrap());
            let l = frame(s, &mut expect);
            if f == &expect[..l] {
                good += 1;
            } else {
                bad += 1;
            }
        })
        .expect("recv");
    }
    assert_eq!((good, bad), (n, 0), "{backend}: tagged frames must arrive byte for byte");
}

#[test]
fn af_packet_vlan_frames_arrive_intact() {
    need_root!();
    let _g = serial();
    vlan_frames_arrive_intact(Backend::AfPacket, "v");
}

#[test]
fn socket_vlan_frames_arrive_intact() {
    need_root!();
    let _g = serial();
    vlan_frames_arrive_intact(Backend::Socket, "w");
}
