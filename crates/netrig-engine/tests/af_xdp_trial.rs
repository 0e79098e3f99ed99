//! Whole trials over AF_XDP ports on a veth pair between two namespaces (root only): the real TX
//! workers and analysers, the steering XDP program, and ports reused across trials.
use std::process::Command;

use netrig_engine::open::open_port;
use netrig_engine::{
    run_trial, Backend, FrameSize, Port, PortSpec, Rate, Stop, StreamConfig, TrialConfig, TrialControl,
};

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip").args(args).output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Two namespaces joined by a veth pair; deleted (with the veth) on drop.
struct Bed {
    ns: [String; 2],
    ifs: [String; 2],
}

impl Bed {
    fn new(tag: &str) -> Bed {
        let id = std::process::id();
        let b = Bed {
            ns: [format!("nrxt-{tag}-{id}-a"), format!("nrxt-{tag}-{id}-b")],
            ifs: [format!("nxt{tag}{id}a"), format!("nxt{tag}{id}b")],
        };
        let macs = ["02:00:00:00:00:01", "02:00:00:00:00:02"];
        let setup = || -> Result<(), String> {
            ip(&["netns", "add", &b.ns[0]])?;
            ip(&["netns", "add", &b.ns[1]])?;
            // different ifindexes at the two ends (tests/af_packet.rs, VethPair)
            ip(&[
                "link", "add", &b.ifs[0], "netns", &b.ns[0], "index", "10", "type", "veth", "peer", "name", &b.ifs[1],
                "netns", &b.ns[1], "index", "11",
            ])?;
            for ((ns, ifname), mac) in b.ns.iter().zip(&b.ifs).zip(macs) {
                ip(&["-n", ns, "link", "set", ifname, "address", mac, "up"])?;
            }
            Ok(())
        };
        if let Err(e) = setup() {
            drop(b);
            panic!("test bed: {e}");
        }
        b
    }

    fn ports(&self) -> Vec<Box<dyn Port>> {
        (0..2)
            .map(|i| {
                let spec = PortSpec {
                    netns: Some(self.ns[i].clone()),
                    backend: Some(Backend::AfXdp),
                    ..PortSpec::new(&self.ifs[i])
                };
                open_port(&spec).unwrap_or_else(|e| panic!("open {}: {e}", self.ifs[i]))
            })
            .collect()
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

fn trial(ports: &mut [Box<dyn Port>], rate: Rate, stop: Stop, size: usize) -> netrig_engine::TrialResult {
    let mut s = StreamConfig::new("xdp");
    s.rate = rate;
    s.stop = stop;
    s.frame_size = FrameSize::Fixed(size);
    // This test counts frames: a generous stretch tolerance keeps it about counting when the machine
    // is shared (smooth pacing sends every frame, later, when the sender loses CPU time).
    let cfg = TrialConfig {
        streams: vec![s],
        drain_ns: 300_000_000,
        tx_cpus: vec![1],
        rx_cpus: vec![0],
        max_stretch_ratio: 10.0,
        ..Default::default()
    };
    run_trial(ports, &cfg, &TrialControl::new()).expect("trial runs")
}

#[test]
fn af_xdp_trials_count_every_frame_and_reuse_the_ports() {
    if !is_root() {
        eprintln!("skipped: needs root (namespaces, veth, XDP)");
        return;
    }
    let bed = Bed::new("a");
    let mut ports = bed.ports();
    for (n, size) in [(50_000u64, 64usize), (20_000, 1518)] {
        let r = trial(&mut ports, Rate::Pps(100_000.0), Stop::Frames { count: n }, size);
        let st = &r.streams[0];
        assert_eq!((st.tx_frames, st.rx_frames, st.lost, st.duplicated, st.reordered), (n, n, 0, 0, 0), "{size} B");
        assert!(r.valid, "{:?}", r.invalid_reason);
        assert_eq!(r.ports[1].rx_ring_drops, 0);
        assert!(r.ports[1].notes.contains("XDP native (drv)"), "{}", r.ports[1].notes);
    }
}

/// As fast as the engine goes for 2 s, TX worker on CPU 1, analysing RX worker on CPU 0:
/// `cargo test --release -p netrig-engine --test af_xdp_trial -- --ignored --nocapture`.
#[test]
#[ignore]
fn af_xdp_max_rate_trial() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let bed = Bed::new("m");
    let mut ports = bed.ports();
    let r = trial(&mut ports, Rate::Max, Stop::Duration { ns: 2_000_000_000 }, 64);
    let st = &r.streams[0];
    eprintln!(
        "af_xdp max-rate trial, 64 B: tx {} frames at {:.2} Mpps, rx {} ({:.2} Mpps over the send window), lost {}, \
         tester ring drops {}, backpressure {}",
        st.tx_frames,
        st.tx_rate_pps / 1e6,
        st.rx_frames,
        st.rx_frames as f64 / r.tx_window_s.max(1e-9) / 1e6,
        st.lost,
        r.ports[1].rx_ring_drops,
        r.ports[0].tx_backpressure
    );
    let stat = |i: usize, name: &str| {
        let path = format!("/sys/class/net/{}/statistics/{name}", bed.ifs[i]);
        let out = Command::new("ip").args(["netns", "exec", &bed.ns[i], "cat", &path]).output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
    };
    eprintln!(
        "veth counters: sender tx_dropped {}, receiver rx_dropped {}",
        stat(0, "tx_dropped"),
        stat(1, "rx_dropped")
    );
}
