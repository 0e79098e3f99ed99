//! Stream configuration: what to send, how big, to how many flows, how fast, for how long.
//!
//! A [`StreamConfig`] is validated and compiled into a [`CompiledStream`] before any resource
//! is acquired: header templates for every frame size it uses, the flow table, and the rate in
//! frames per second. Compilation never touches the network.
use std::net::IpAddr;

use netrig_wire::builder::{self, L3Spec, TemplateInfo, TemplateSpec};
use netrig_wire::ethernet::EthernetAddress;
use netrig_wire::{vlan, IpPair};

use crate::error::ConfigError;
use crate::flows::FlowTable;

/// Ethernet wire overhead per frame: preamble 7 + SFD 1 + inter-frame gap 12 (methodology §1).
pub const WIRE_OVERHEAD: u64 = 20;
/// Ethernet FCS, counted in the frame size but not written by software.
pub const FCS_LEN: usize = 4;
/// Smallest Ethernet frame (bytes, including FCS).
pub const MIN_FRAME_SIZE: usize = 64;
/// Largest frame netrig builds (bytes, including FCS): jumbo frames and then some.
pub const MAX_FRAME_SIZE: usize = 16384;
/// RFC 2544 §9 standard Ethernet frame sizes (bytes, including FCS).
pub const RFC2544_FRAME_SIZES: &[usize] = &[64, 128, 256, 512, 1024, 1280, 1518];
/// Named frame-size mixes (methodology §1): name → `(frame size incl. FCS, weight)` pairs.
/// `imix` is the mix of capture benchmarks (percent), `simple-imix` the 7:4:1 "simple IMIX".
pub const FRAME_SIZE_MIXES: &[(&str, &[(usize, u32)])] =
    &[("imix", &[(64, 57), (570, 7), (594, 16), (1518, 20)]), ("simple-imix", &[(64, 7), (570, 4), (1518, 1)])];

/// Frame sizes (bytes, including FCS).
#[derive(Debug, Clone, PartialEq)]
pub enum FrameSize {
    Fixed(usize),
    /// Weighted mix, e.g. IMIX `[(64, 57), (570, 7), (594, 16), (1518, 20)]`.
    Weighted(Vec<(usize, u32)>),
    /// Uniform random in `[min, max]`.
    Random {
        min: usize,
        max: usize,
    },
    /// `min, min+step, …, max`, then again.
    Increment {
        min: usize,
        max: usize,
        step: usize,
    },
}

impl FrameSize {
    /// A named mix from [`FRAME_SIZE_MIXES`] (`"imix"`, `"simple-imix"`).
    pub fn mix(name: &str) -> Option<Self> {
        FRAME_SIZE_MIXES.iter().find(|(n, _)| *n == name).map(|(_, w)| FrameSize::Weighted(w.to_vec()))
    }

    /// IMIX as used in capture benchmarks: 57 % 64 B, 7 % 570 B, 16 % 594 B, 20 % 1518 B.
    pub fn imix() -> Self {
        Self::mix("imix").unwrap_or(FrameSize::Fixed(MIN_FRAME_SIZE))
    }

    /// "Simple IMIX": 7:4:1 of 64 / 570 / 1518 B.
    pub fn simple_imix() -> Self {
        Self::mix("simple-imix").unwrap_or(FrameSize::Fixed(MIN_FRAME_SIZE))
    }

    /// Mean frame size in bytes (including FCS).
    pub fn mean(&self) -> f64 {
        match self {
            FrameSize::Fixed(s) => *s as f64,
            FrameSize::Weighted(w) => {
                let tot: f64 = w.iter().map(|&(_, k)| k as f64).sum();
                w.iter().map(|&(s, k)| s as f64 * k as f64).sum::<f64>() / tot
            }
            FrameSize::Random { min, max } => (*min + *max) as f64 / 2.0,
            FrameSize::Increment { min, max, step } => {
                let n = (max - min) / step + 1;
                (0..n).map(|i| (min + i * step) as f64).sum::<f64>() / n as f64
            }
        }
    }

    fn bounds(&self) -> (usize, usize) {
        match self {
            FrameSize::Fixed(s) => (*s, *s),
            FrameSize::Weighted(w) => {
                (w.iter().map(|x| x.0).min().unwrap_or(0), w.iter().map(|x| x.0).max().unwrap_or(0))
            }
            FrameSize::Random { min, max } | FrameSize::Increment { min, max, .. } => (*min, *max),
        }
    }
}

/// Offered rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// Frames per second.
    Pps(f64),
    /// Layer-1 bit/s: `fps * (size + 20) * 8`.
    L1Bps(f64),
    /// Layer-2 bit/s: `fps * size * 8`.
    L2Bps(f64),
    /// Percent of the line rate (needs a link speed).
    PercentLine(f64),
    /// As fast as the tester can (bursts, back-to-back).
    Max,
}

/// When a stream stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// After this many nanoseconds of sending.
    Duration { ns: u64 },
    /// After this many frames.
    Frames { count: u64 },
    /// `bursts` bursts of `frames` frames each, `gap_ns` between burst starts; frames within a
    /// burst are sent at the stream's rate (use `Rate::Max` for back-to-back).
    Bursts { frames: u64, bursts: u64, gap_ns: u64 },
}

/// How flows are enumerated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowOrder {
    /// Round-robin over flows; addresses and ports increment.
    Sequential,
    /// RFC 4814 §4.5: pseudorandom ports and pseudorandom flow order from a seed.
    Pseudorandom { seed: u64 },
}

/// Flow ranges: the stream's flows are every combination of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowSpec {
    pub src_ips: u32,
    pub dst_ips: u32,
    pub src_ports: u32,
    pub dst_ports: u32,
    pub order: FlowOrder,
}

impl Default for FlowSpec {
    fn default() -> Self {
        FlowSpec { src_ips: 1, dst_ips: 1, src_ports: 1, dst_ports: 1, order: FlowOrder::Sequential }
    }
}

impl FlowSpec {
    pub fn count(&self) -> u64 {
        self.src_ips as u64 * self.dst_ips as u64 * self.src_ports as u64 * self.dst_ports as u64
    }
}

/// One stream of test frames.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamConfig {
    pub name: String,
    /// Index into the trial's port list: where frames are sent and where they should arrive.
    pub tx_port: usize,
    pub rx_port: usize,
    pub src_mac: EthernetAddress,
    pub dst_mac: EthernetAddress,
    pub vlan: Option<u16>,
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub ttl: u8,
    pub udp_checksum: bool,
    pub frame_size: FrameSize,
    pub flows: FlowSpec,
    pub rate: Rate,
    pub stop: Stop,
    /// Nominal link speed in bit/s for `Rate::PercentLine` and % reporting (from the interface
    /// or configured; veth has none).
    pub line_rate_bps: Option<u64>,
}

impl StreamConfig {
    /// A 64-byte IPv4/UDP stream with defaults from the benchmarking ranges.
    pub fn new(name: impl Into<String>) -> Self {
        StreamConfig {
            name: name.into(),
            tx_port: 0,
            rx_port: 1,
            src_mac: EthernetAddress([0x02, 0, 0, 0, 0, 1]),
            dst_mac: EthernetAddress([0x02, 0, 0, 0, 0, 2]),
            vlan: None,
            src_ip: "198.18.0.1".parse().unwrap_or(IpAddr::from([198, 18, 0, 1])),
            dst_ip: "198.19.0.1".parse().unwrap_or(IpAddr::from([198, 19, 0, 1])),
            src_port: 1024,
            dst_port: 1024,
            ttl: 64,
            udp_checksum: false,
            frame_size: FrameSize::Fixed(64),
            flows: FlowSpec::default(),
            rate: Rate::Pps(1000.0),
            stop: Stop::Duration { ns: 1_000_000_000 },
            line_rate_bps: None,
        }
    }
}

/// A frame length (without FCS) with its header template.
#[derive(Debug, Clone)]
pub struct SizedTemplate {
    /// Frame size including FCS (as reported).
    pub size: usize,
    pub info: TemplateInfo,
    pub bytes: Vec<u8>,
}

/// A validated stream ready for a TX worker.
#[derive(Debug, Clone)]
pub struct CompiledStream {
    pub index: usize,
    pub config: StreamConfig,
    /// One template per distinct frame size.
    pub templates: Vec<SizedTemplate>,
    /// Sequence of template indices, cycled per frame (encodes the size distribution).
    pub size_schedule: Vec<u16>,
    pub flows: FlowTable,
    /// First global flow id of this stream.
    pub flow_base: u32,
    /// Intended rate in frames/s (`f64::INFINITY` for `Rate::Max`).
    pub rate_pps: f64,
    /// Frames to send in total, if bounded by count or bursts.
    pub frame_limit: Option<u64>,
}

impl CompiledStream {
    pub fn mean_size(&self) -> f64 {
        self.config.frame_size.mean()
    }
}

/// Validate and compile `cfg`. `max_frame_len` is the TX port's largest frame without FCS.
pub fn compile(
    index: usize,
    cfg: &StreamConfig,
    flow_base: u32,
    max_frame_len: usize,
    n_ports: usize,
) -> Result<CompiledStream, ConfigError> {
    let f = |name: &str| format!("streams[{index}].{name}");
    if cfg.tx_port >= n_ports {
        return Err(ConfigError::new(
            f("tx_port"),
            format!("port index {} out of range (the trial has {n_ports} ports)", cfg.tx_port),
        ));
    }
    if cfg.rx_port >= n_ports {
        return Err(ConfigError::new(
            f("rx_port"),
            format!("port index {} out of range (the trial has {n_ports} ports)", cfg.rx_port),
        ));
    }
    let l3 = match (cfg.src_ip, cfg.dst_ip) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => L3Spec::V4 { src, dst, ttl: cfg.ttl, dscp: 0 },
        (IpAddr::V6(src), IpAddr::V6(dst)) => L3Spec::V6 { src, dst, hop_limit: cfg.ttl, tc: 0 },
        _ => return Err(ConfigError::new(f("dst_ip"), "source and destination must be of the same IP family")),
    };
    let vlan = match cfg.vlan {
        None => None,
        Some(vid) if (1..4095).contains(&vid) => Some(vlan::Repr { pcp: 0, dei: false, vid, inner_ethertype: 0 }),
        Some(vid) => return Err(ConfigError::new(f("vlan"), format!("VLAN id must be 1..4094 (got {vid})"))),
    };
    let spec = TemplateSpec {
        src_mac: cfg.src_mac,
        dst_mac: cfg.dst_mac,
        vlan,
        l3,
        src_port: cfg.src_port,
        dst_port: cfg.dst_port,
        udp_checksum: cfg.udp_checksum,
    };
    let min_size = builder::min_frame_len(&spec) + FCS_LEN;
    // The port's maximum is for untagged frames; an 802.1Q tag adds 4 bytes on top of the MTU.
    let max_size = max_frame_len + FCS_LEN + if vlan.is_some() { 4 } else { 0 };
    let (lo, hi) = cfg.frame_size.bounds();
    match &cfg.frame_size {
        FrameSize::Weighted(w) if w.is_empty() || w.iter().all(|x| x.1 == 0) => {
            return Err(ConfigError::new(f("frame_size"), "a weighted mix needs at least one size with a weight > 0"));
        }
        FrameSize::Random { min, max } | FrameSize::Increment { min, max, .. } if min > max => {
            return Err(ConfigError::new(f("frame_size"), format!("min {min} is above max {max}")));
        }
        FrameSize::Increment { step: 0, .. } => {
            return Err(ConfigError::new(f("frame_size"), "increment step must be > 0"));
        }
        _ => {}
    }
    if lo < min_size {
        return Err(ConfigError::new(
            f("frame_size"),
            format!(
                "{lo} B is below the minimum of {min_size} B for this header template (headers + 18 B signature + FCS)"
            ),
        ));
    }
    if hi > max_size {
        return Err(ConfigError::new(
            f("frame_size"),
            format!(
                "{hi} B is above the port's maximum of {max_size} B (MTU + 18); raise the MTU or use smaller frames"
            ),
        ));
    }
    let sizes: Vec<usize> = match &cfg.frame_size {
        FrameSize::Fixed(s) => vec![*s],
        FrameSize::Weighted(w) => w.iter().filter(|x| x.1 > 0).map(|x| x.0).collect(),
        FrameSize::Random { min, max } => (*min..=*max).collect(),
        FrameSize::Increment { min, max, step } => (*min..=*max).step_by(*step).collect(),
    };
    let mut templates = Vec::with_capacity(sizes.len());
    for &size in &sizes {
        let mut bytes = vec![0u8; size - FCS_LEN];
        let info = builder::build_udp_frame(&spec, size - FCS_LEN, &mut bytes)
            .map_err(|e| ConfigError::new(f("frame_size"), format!("{size} B: {e}")))?;
        templates.push(SizedTemplate { size, info, bytes });
    }
    let size_schedule = size_schedule(&cfg.frame_size, &sizes, index as u64);
    let nflows = cfg.flows.count();
    if nflows == 0 {
        return Err(ConfigError::new(f("flows"), "every flow count must be at least 1"));
    }
    if nflows > (1 << 24) {
        return Err(ConfigError::new(f("flows"), format!("{nflows} flows is above the limit of 16777216 per stream")));
    }
    if cfg.flows.src_ports > 65535 || cfg.flows.dst_ports > 65535 {
        return Err(ConfigError::new(f("flows"), "port ranges can hold at most 65535 ports"));
    }
    let flows = FlowTable::new(&cfg.flows, l3.ip_pair(), cfg.src_port, cfg.dst_port)
        .map_err(|m| ConfigError::new(f("flows"), m))?;
    let mean = cfg.frame_size.mean();
    let need_line = |what: &str| {
        cfg.line_rate_bps.filter(|&l| l > 0).ok_or_else(|| {
            ConfigError::new(
                f("rate"),
                format!("{what} needs a link speed: the interface reports none (veth); configure a nominal line rate"),
            )
        })
    };
    let rate_pps = match cfg.rate {
        Rate::Pps(p) => p,
        Rate::L1Bps(b) => b / ((mean + WIRE_OVERHEAD as f64) * 8.0),
        Rate::L2Bps(b) => b / (mean * 8.0),
        Rate::PercentLine(pct) => {
            let l = need_line("a rate in % of line rate")? as f64;
            pct / 100.0 * l / ((mean + WIRE_OVERHEAD as f64) * 8.0)
        }
        Rate::Max => f64::INFINITY,
    };
    if rate_pps.is_nan() || rate_pps <= 0.0 {
        return Err(ConfigError::new(f("rate"), "the rate must be positive"));
    }
    if let Some(l) = cfg.line_rate_bps.filter(|&l| l > 0) {
        let line_pps = l as f64 / ((mean + WIRE_OVERHEAD as f64) * 8.0);
        if rate_pps.is_finite() && rate_pps > line_pps * 1.000_001 {
            return Err(ConfigError::new(
                f("rate"),
                format!("{rate_pps:.0} fps is above the line rate of {line_pps:.0} fps at {mean:.0} B ({} bit/s)", l),
            ));
        }
    }
    let frame_limit = match cfg.stop {
        Stop::Duration { ns: 0 } => return Err(ConfigError::new(f("duration"), "must be > 0")),
        Stop::Duration { .. } => None,
        Stop::Frames { count: 0 } => return Err(ConfigError::new(f("frames"), "must be > 0")),
        Stop::Frames { count } => Some(count),
        Stop::Bursts { frames, bursts, .. } if frames == 0 || bursts == 0 => {
            return Err(ConfigError::new(f("bursts"), "burst size and burst count must be > 0"));
        }
        Stop::Bursts { frames, bursts, .. } => Some(frames * bursts),
    };
    Ok(CompiledStream { index, config: cfg.clone(), templates, size_schedule, flows, flow_base, rate_pps, frame_limit })
}

/// Length of the per-frame size schedule: long enough that weighted mixes are exact per cycle
/// and random sizes look random.
const SCHEDULE_LEN: usize = 4096;

fn size_schedule(fs: &FrameSize, sizes: &[usize], seed: u64) -> Vec<u16> {
    match fs {
        FrameSize::Fixed(_) => vec![0],
        FrameSize::Increment { .. } => (0..sizes.len() as u16).collect(),
        FrameSize::Random { .. } => {
            let mut rng = crate::rng::XorShift::new(0x5EED_0000 ^ seed);
            (0..SCHEDULE_LEN).map(|_| (rng.next_u64() % sizes.len() as u64) as u16).collect()
        }
        FrameSize::Weighted(w) => {
            // Exact proportions per cycle, then shuffled deterministically so sizes interleave.
            let w: Vec<u32> = w.iter().filter(|x| x.1 > 0).map(|x| x.1).collect();
            let tot: u32 = w.iter().sum();
            let reps = (SCHEDULE_LEN as u32 / tot).max(1);
            let mut v: Vec<u16> =
                w.iter().enumerate().flat_map(|(i, &k)| std::iter::repeat_n(i as u16, (k * reps) as usize)).collect();
            let mut rng = crate::rng::XorShift::new(0x1A1A ^ seed);
            for i in (1..v.len()).rev() {
                let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                v.swap(i, j);
            }
            v
        }
    }
}

/// Line rate in frames/s for link speed `bps` at `size` bytes (methodology §1).
pub fn line_rate_fps(bps: u64, size: f64) -> f64 {
    bps as f64 / ((size + WIRE_OVERHEAD as f64) * 8.0)
}

/// Patch flow `flow` (its addresses and ports) into a frame built from `t`.
#[inline]
pub fn apply_flow(buf: &mut [u8], t: &TemplateInfo, tuple: &(IpPair, u16, u16)) {
    // Both calls only fail on a buffer shorter than the template, which the TX path rules out.
    let _ = builder::set_l3_addrs(buf, t, &tuple.0);
    let _ = builder::set_ports(buf, t, tuple.1, tuple.2);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_rate_matches_methodology() {
        assert_eq!(line_rate_fps(1_000_000_000, 64.0).round(), 1_488_095.0);
        assert_eq!(line_rate_fps(1_000_000_000, 1518.0).round(), 81_274.0);
        assert_eq!(line_rate_fps(10_000_000_000, 64.0).round(), 14_880_952.0);
    }

    #[test]
    fn imix_mean_and_schedule_proportions() {
        let mut c = StreamConfig::new("s");
        c.frame_size = FrameSize::imix();
        let s = compile(0, &c, 0, 1514, 2).unwrap();
        let n = s.size_schedule.len() as f64;
        let share_64 = s.size_schedule.iter().filter(|&&i| s.templates[i as usize].size == 64).count() as f64 / n;
        assert!((share_64 - 0.57).abs() < 0.01, "{share_64}");
        assert!((s.mean_size() - (0.57 * 64.0 + 0.07 * 570.0 + 0.16 * 594.0 + 0.2 * 1518.0)).abs() < 1e-9);
    }

    #[test]
    fn errors_name_the_field() {
        let mut c = StreamConfig::new("s");
        c.frame_size = FrameSize::Fixed(63);
        let e = compile(2, &c, 0, 1514, 2).unwrap_err();
        assert_eq!(e.field, "streams[2].frame_size");
        assert!(e.message.contains("minimum of 64"), "{e}");
        c.frame_size = FrameSize::Fixed(9000);
        assert!(compile(0, &c, 0, 1514, 2).unwrap_err().message.contains("maximum of 1518"));
        c.frame_size = FrameSize::Fixed(64);
        c.rate = Rate::PercentLine(50.0);
        assert!(compile(0, &c, 0, 1514, 2).unwrap_err().message.contains("link speed"));
        c.line_rate_bps = Some(1_000_000_000);
        let s = compile(0, &c, 0, 1514, 2).unwrap();
        assert!((s.rate_pps - 744_047.6).abs() < 1.0);
        c.rate = Rate::Pps(2e6);
        assert!(compile(0, &c, 0, 1514, 2).unwrap_err().message.contains("above the line rate"));
    }
}
