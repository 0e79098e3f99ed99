//! Stream configuration: what to send, how big, to how many flows, how fast, for how long.
//!
//! A [`StreamConfig`] is validated and compiled into a [`CompiledStream`] before any resource
//! is acquired: header templates for every frame size it uses, the flow table, and the rate in
//! frames per second. Compilation never touches the network.
use std::net::IpAddr;
use std::sync::Arc;

use netrig_wire::ethernet::EthernetAddress;
pub use netrig_wire::frames::Proto;
use netrig_wire::frames::{self, FrameSpec, L3Spec};
use netrig_wire::stack::{self as wire_stack, CompiledStack};
use netrig_wire::vlan;

use crate::error::ConfigError;
use crate::guard;
use crate::traffic::flows::FlowWalk;
pub use crate::traffic::flows::{FlowOrder, FlowSpec};
use crate::traffic::replay::Replay;

mod stack;

/// Names of the stream protocols, as [`parse_protocol`] takes them.
pub const PROTOCOLS: &[&str] = &["udp", "tcp", "icmp", "raw"];
/// Default EtherType of raw L2 streams: IEEE 802 "local experimental" 1.
pub const DEFAULT_RAW_ETHERTYPE: u16 = 0x88B5;
/// Default TCP flags of TCP streams: ACK (a segment of an established connection).
pub const DEFAULT_TCP_FLAGS: u8 = netrig_wire::tcp::flags::ACK;

/// TCP flag names, as [`parse_tcp_flags`] takes them (one letter each, RFC 9293 order).
pub const TCP_FLAG_LETTERS: &[(char, u8)] = &[
    ('F', netrig_wire::tcp::flags::FIN),
    ('S', netrig_wire::tcp::flags::SYN),
    ('R', netrig_wire::tcp::flags::RST),
    ('P', netrig_wire::tcp::flags::PSH),
    ('A', netrig_wire::tcp::flags::ACK),
    ('U', netrig_wire::tcp::flags::URG),
    ('E', netrig_wire::tcp::flags::ECE),
    ('C', netrig_wire::tcp::flags::CWR),
];

/// TCP flags from letters (`"SA"` = SYN+ACK, `""` = none; see [`TCP_FLAG_LETTERS`]). Field:
/// `tcp_flags`.
pub fn parse_tcp_flags(text: &str) -> Result<u8, ConfigError> {
    let mut v = 0u8;
    for c in text.chars() {
        let bit = TCP_FLAG_LETTERS.iter().find(|(l, _)| *l == c.to_ascii_uppercase()).map(|x| x.1).ok_or_else(|| {
            ConfigError::new(
                "tcp_flags",
                format!(
                    "{c:?} in {text:?} is not a TCP flag: use letters of FSRPAUEC (FIN SYN RST PSH ACK URG ECE CWR), e.g. \"SA\""
                ),
            )
        })?;
        v |= bit;
    }
    Ok(v)
}

/// The letters of TCP flags `v` (inverse of [`parse_tcp_flags`]).
pub fn tcp_flags_str(v: u8) -> String {
    TCP_FLAG_LETTERS.iter().filter(|(_, b)| v & b != 0).map(|(l, _)| *l).collect()
}

/// A protocol by name (see [`PROTOCOLS`]) with its parameters: TCP `flags` and `seq`, the raw
/// `ethertype`. Fields: `protocol`, `ethertype`.
pub fn parse_protocol(name: &str, tcp_flags: u8, tcp_seq: u32, ethertype: u16) -> Result<Proto, ConfigError> {
    match name {
        "udp" => Ok(Proto::Udp),
        "tcp" => Ok(Proto::Tcp { flags: tcp_flags, seq: tcp_seq, ack: 0, window: 65535 }),
        "icmp" => Ok(Proto::IcmpEcho),
        "raw" => {
            if !Proto::raw_ethertype_ok(ethertype) {
                return Err(ConfigError::new(
                    "ethertype",
                    format!(
                        "0x{ethertype:04x} cannot carry a raw stream: use an EtherType >= 0x0600 other than IPv4, IPv6, ARP, 0x8100 and 0x88a8 (e.g. 0x88b5); for IP use protocol udp, tcp or icmp"
                    ),
                ));
            }
            Ok(Proto::Raw { ethertype })
        }
        _ => Err(ConfigError::new(
            "protocol",
            format!("{name:?} is not a stream protocol: use one of {}", PROTOCOLS.join(", ")),
        )),
    }
}

/// Preamble 7 + SFD 1: the bytes before every frame on the wire.
pub const PREAMBLE_SFD: u64 = 8;
/// The Ethernet minimum gap between frames, bytes.
pub const MIN_GAP_BYTES: u32 = 12;
/// Ethernet wire overhead per frame: preamble and SFD, and the minimum gap (methodology §1).
pub const WIRE_OVERHEAD: u64 = PREAMBLE_SFD + MIN_GAP_BYTES as u64;
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

/// Largest sum of the weights of a mix (the per-frame size schedule holds whole cycles).
pub const MAX_MIX_WEIGHT: u64 = 65536;

// Limits on what a trial may ask for. Beyond them a value is a typo or an overflow, never a test
// (`1e99s` would overflow the nanosecond clock; `1e300pps` would run unpaced): each is refused
// naming the field and the limit.
/// Longest trial duration, warm-up or gap between bursts: one week, in seconds.
pub const MAX_DURATION_S: f64 = 604_800.0;
/// Longest drain (and late threshold), seconds: frames still in flight after a minute are lost.
pub const MAX_DRAIN_S: f64 = 60.0;
/// Highest rate of one stream, frames/s (above 400 GbE at 64 B, 595 Mfps).
pub const MAX_RATE_PPS: f64 = 1e9;
/// Highest rate of one stream in bit/s (layer 1 or 2), and highest link speed: 10 Tbit/s.
pub const MAX_RATE_BPS: f64 = 1e13;
/// Most frames one stream may be asked to send (a burst size times the burst count): 10^15.
pub const MAX_FRAMES: u64 = 1_000_000_000_000_000;

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

    /// Sizes within [`MIN_FRAME_SIZE`]`..=`[`MAX_FRAME_SIZE`], a mix with a weight > 0 (weights
    /// summing to at most [`MAX_MIX_WEIGHT`]), min ≤ max, step > 0. Field: `frame_size`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |m: String| Err(ConfigError::new("frame_size", m));
        let in_range = |s: usize| (MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&s);
        let range = format!("frame sizes are {MIN_FRAME_SIZE}..{MAX_FRAME_SIZE} bytes including the 4-byte FCS");
        match self {
            FrameSize::Fixed(s) if !in_range(*s) => err(format!("{s} B is out of range: {range}")),
            FrameSize::Weighted(w) => {
                if let Some((s, _)) = w.iter().find(|(s, _)| !in_range(*s)) {
                    return err(format!("{s} B in the mix is out of range: {range}"));
                }
                let total: u64 = w.iter().map(|&(_, k)| k as u64).sum();
                if total == 0 {
                    return err("a weighted mix needs at least one size with a weight > 0".into());
                }
                if total > MAX_MIX_WEIGHT {
                    return err(format!(
                        "the mix's weights sum to {total}: weights are relative, keep their sum at most {MAX_MIX_WEIGHT}"
                    ));
                }
                Ok(())
            }
            FrameSize::Random { min, max } | FrameSize::Increment { min, max, .. } => {
                if let Some(s) = [*min, *max].into_iter().find(|&s| !in_range(s)) {
                    return err(format!("{s} B is out of range: {range}"));
                }
                if min > max {
                    return err(format!("min {min} is above max {max}: give the smaller size first"));
                }
                if let FrameSize::Increment { step: 0, .. } = self {
                    return err("the increment step must be > 0 bytes".into());
                }
                Ok(())
            }
            FrameSize::Fixed(_) => Ok(()),
        }
    }

    /// Every size this frame size uses, in the order the size schedule indexes them.
    pub fn sizes(&self) -> Vec<usize> {
        match self {
            FrameSize::Fixed(s) => vec![*s],
            FrameSize::Weighted(w) => w.iter().filter(|x| x.1 > 0).map(|x| x.0).collect(),
            FrameSize::Random { min, max } => (*min..=*max).collect(),
            FrameSize::Increment { min, max, step } => (*min..=*max).step_by(*step).collect(),
        }
    }

    /// `"fixed"`, `"weighted"`, `"random"` or `"increment"`.
    pub fn kind(&self) -> &'static str {
        match self {
            FrameSize::Fixed(_) => "fixed",
            FrameSize::Weighted(_) => "weighted",
            FrameSize::Random { .. } => "random",
            FrameSize::Increment { .. } => "increment",
        }
    }

    /// Smallest and largest size.
    pub fn bounds(&self) -> (usize, usize) {
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

impl Rate {
    /// Frames/s at a mean frame size of `mean` bytes with FCS (`f64::INFINITY` for
    /// [`Rate::Max`]); a rate in % of the line rate needs the link's speed, `line_bps`.
    pub fn frames_per_s(self, mean: f64, line_bps: Option<u64>) -> Result<f64, ConfigError> {
        Ok(match self {
            Rate::Pps(p) => p,
            Rate::L1Bps(b) => line_rate_fps(b, mean),
            Rate::L2Bps(b) => b / (mean * 8.0),
            Rate::PercentLine(pct) => {
                let l = line_bps.filter(|&l| l > 0).ok_or_else(|| {
                    ConfigError::new(
                        "rate",
                        "a rate in % of the line rate needs a link speed: the port reports none (veth); give it a nominal line rate (line_rate_bps) or the rate in frames or bits per second",
                    )
                })?;
                pct / 100.0 * line_rate_fps(l as f64, mean)
            }
            Rate::Max => f64::INFINITY,
        })
    }

    /// A finite value > 0, at most 100 for a percentage, [`MAX_RATE_PPS`] frames/s or
    /// [`MAX_RATE_BPS`] bit/s. Field: `rate`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let v = match *self {
            Rate::Pps(v) | Rate::L1Bps(v) | Rate::L2Bps(v) | Rate::PercentLine(v) => v,
            Rate::Max => return Ok(()),
        };
        if !v.is_finite() || v <= 0.0 {
            return Err(ConfigError::new("rate", format!("must be a finite number > 0 (got {v})")));
        }
        match self {
            Rate::PercentLine(_) if v > 100.0 => {
                Err(ConfigError::new("rate", format!("{v} % is above the line rate: give at most 100 %")))
            }
            Rate::Pps(_) if v > MAX_RATE_PPS => Err(ConfigError::new(
                "rate",
                format!("{v:e} frames/s is above the limit of {MAX_RATE_PPS:e} frames/s per stream"),
            )),
            Rate::L1Bps(_) | Rate::L2Bps(_) if v > MAX_RATE_BPS => Err(ConfigError::new(
                "rate",
                format!("{v:e} bit/s is above the limit of {MAX_RATE_BPS:e} bit/s (10 Tbit/s) per stream"),
            )),
            _ => Ok(()),
        }
    }

    /// `"pps"`, `"l1_bps"`, `"l2_bps"`, `"percent_line"` or `"max"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Rate::Pps(_) => "pps",
            Rate::L1Bps(_) => "l1_bps",
            Rate::L2Bps(_) => "l2_bps",
            Rate::PercentLine(_) => "percent_line",
            Rate::Max => "max",
        }
    }

    /// The number given (`None` for `Max`).
    pub fn value(&self) -> Option<f64> {
        match *self {
            Rate::Pps(v) | Rate::L1Bps(v) | Rate::L2Bps(v) | Rate::PercentLine(v) => Some(v),
            Rate::Max => None,
        }
    }
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

impl Stop {
    /// Stop after `duration_s` seconds (finite, > 0, at most [`MAX_DURATION_S`]). Field: `duration_s`.
    pub fn duration_s(duration_s: f64) -> Result<Stop, ConfigError> {
        Ok(Stop::Duration { ns: seconds_to_ns("duration_s", duration_s, false, MAX_DURATION_S)? })
    }

    /// `bursts` bursts of `frames` frames, `gap_s` (finite, ≥ 0) between burst starts.
    pub fn bursts(frames: u64, bursts: u64, gap_s: f64) -> Result<Stop, ConfigError> {
        let s = Stop::Bursts { frames, bursts, gap_ns: seconds_to_ns("bursts", gap_s, true, MAX_DURATION_S)? };
        s.validate()?;
        Ok(s)
    }

    /// Something to send, within the limits: duration, frame count, burst size and count all > 0;
    /// at most [`MAX_DURATION_S`] and [`MAX_FRAMES`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        let max_ns = (MAX_DURATION_S * 1e9) as u64;
        match *self {
            Stop::Duration { ns: 0 } => Err(ConfigError::new("duration_s", "must be > 0: give how long to send")),
            Stop::Duration { ns } if ns > max_ns => Err(ConfigError::new(
                "duration_s",
                format!("{} s is above the limit of {MAX_DURATION_S} s (one week)", ns as f64 / 1e9),
            )),
            Stop::Frames { count: 0 } => Err(ConfigError::new("frames", "must be > 0: give how many frames to send")),
            Stop::Frames { count } if count > MAX_FRAMES => Err(ConfigError::new(
                "frames",
                format!("{count} frames is above the limit of {MAX_FRAMES} (10^15) frames per stream"),
            )),
            Stop::Bursts { frames, bursts, .. } if frames == 0 || bursts == 0 => Err(ConfigError::new(
                "bursts",
                format!("burst size and burst count must be > 0 (got {frames} frames x {bursts} bursts)"),
            )),
            Stop::Bursts { frames, bursts, .. } if frames.checked_mul(bursts).is_none_or(|n| n > MAX_FRAMES) => {
                Err(ConfigError::new(
                    "bursts",
                    format!(
                        "{frames} frames x {bursts} bursts is above the limit of {MAX_FRAMES} (10^15) frames per stream"
                    ),
                ))
            }
            Stop::Bursts { gap_ns, .. } if gap_ns > max_ns => Err(ConfigError::new(
                "bursts",
                format!("a gap of {} s is above the limit of {MAX_DURATION_S} s (one week)", gap_ns as f64 / 1e9),
            )),
            _ => Ok(()),
        }
    }

    /// `"duration"`, `"frames"` or `"bursts"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Stop::Duration { .. } => "duration",
            Stop::Frames { .. } => "frames",
            Stop::Bursts { .. } => "bursts",
        }
    }
}

/// Nanoseconds of `seconds` (finite, > 0 or with `allow_zero` ≥ 0, at most `max_s`, e.g.
/// [`MAX_DURATION_S`] or [`MAX_DRAIN_S`]); errors name `field` and the limit.
pub fn seconds_to_ns(field: &str, seconds: f64, allow_zero: bool, max_s: f64) -> Result<u64, ConfigError> {
    let bound = if allow_zero { ">= 0" } else { "> 0" };
    if !seconds.is_finite() || seconds < 0.0 || (seconds == 0.0 && !allow_zero) {
        return Err(ConfigError::new(field, format!("must be a finite number of seconds {bound} (got {seconds})")));
    }
    if seconds > max_s {
        return Err(ConfigError::new(field, format!("{seconds:e} s is above the limit of {max_s} s")));
    }
    Ok((seconds * 1e9).round() as u64)
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
    /// 802.1Q VLAN id (the inner tag when `outer_vlan` is set).
    pub vlan: Option<u16>,
    /// 802.1ad service VLAN id in front of `vlan` (QinQ).
    pub outer_vlan: Option<u16>,
    /// What follows the IP header (or the Ethernet header, for raw frames); UDP by default.
    pub protocol: Proto,
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
    /// Replay a capture instead of building frames (`crate::traffic::replay`): its frames, in order,
    /// looped; the addressing, protocol and frame size fields above are not used.
    pub replay: Option<Arc<Replay>>,
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
            outer_vlan: None,
            protocol: Proto::Udp,
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
            replay: None,
        }
    }

    /// The largest frame this stream sends, without FCS, VLAN tags included.
    pub fn largest_frame_len(&self) -> usize {
        match &self.replay {
            Some(r) => r.max_len,
            None => self.frame_size.bounds().1 - FCS_LEN + self.tag_len(),
        }
    }

    /// Its receiver must see frames beyond netrig's UDP ones (AF_XDP's steering passes only
    /// those): another protocol, QinQ, or a replay (whatever the capture holds).
    pub fn rx_beyond_udp(&self) -> bool {
        self.protocol != Proto::Udp || self.outer_vlan.is_some() || self.replay.is_some()
    }

    /// Mean frame size in bytes incl. FCS: the frame size's, or the capture's for a replay.
    pub fn mean_size(&self) -> f64 {
        match &self.replay {
            Some(r) => r.mean_size(),
            None => self.frame_size.mean(),
        }
    }

    /// An address range that starts in a benchmarking range (198.18.0.0/15, 2001:2::/48) ends in
    /// it: `dst_ips = 70000` from 198.19.0.2 sent to 198.20.0.0 … (a test bed's addresses are
    /// there; traffic stays inside the ranges, RFC 2544 §C.2.2, RFC 5180).
    fn ranges_stay_in_the_benchmarking_ranges(&self, spec: &FrameSpec) -> Result<(), ConfigError> {
        let (src, dst): (IpAddr, IpAddr) = match spec.l3 {
            L3Spec::V4 { src, dst, .. } => (src.into(), dst.into()),
            L3Spec::V6 { src, dst, .. } => (src.into(), dst.into()),
        };
        for (name, base, n) in [("src_ips", src, self.flows.src_ips), ("dst_ips", dst, self.flows.dst_ips)] {
            let last = match base {
                IpAddr::V4(a) => IpAddr::from(std::net::Ipv4Addr::from(u32::from(a).saturating_add(n - 1))),
                IpAddr::V6(a) => {
                    IpAddr::from(std::net::Ipv6Addr::from(u128::from(a).saturating_add(u128::from(n) - 1)))
                }
            };
            if guard::is_benchmarking(&base) && !guard::is_benchmarking(&last) {
                // the ranges' last addresses: 198.19.255.255, 2001:2:0:ffff:ffff:ffff:ffff:ffff
                let room = match base {
                    IpAddr::V4(a) => 0xC613_FFFF - u128::from(u32::from(a)) + 1,
                    IpAddr::V6(a) => ((0x2001_0002_0000_u128 << 80) | ((1 << 80) - 1)) - u128::from(a) + 1,
                };
                return Err(ConfigError::new(
                    format!("flows.{name}"),
                    format!(
                        "{n} addresses from {base} run past the benchmarking ranges (198.18.0.0/15, 2001:2::/48) to \
                         {last}: use at most {room}{}",
                        if base.is_ipv4() { ", or IPv6 (its range has room for more)" } else { "" }
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Everything that can be checked without a port: the frame sizes (and that they hold this
    /// stream's headers and signature), the rate (within the line rate when one is given), the
    /// flows, the stop, the IP family and the VLAN id. Fields are the stream's own (`frame_size`,
    /// `dst_ip`, `flows.src_ports`); a trial prefixes them with `streams[i].`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.frame_size.validate()?;
        self.rate.validate()?;
        self.flows.validate()?;
        self.stop.validate()?;
        if self.line_rate_bps == Some(0) {
            return Err(ConfigError::new(
                "line_rate_bps",
                "must be > 0 bit/s: leave it unset when the link has no speed",
            ));
        }
        if let Some(l) = self.line_rate_bps.filter(|&l| l as f64 > MAX_RATE_BPS) {
            return Err(ConfigError::new(
                "line_rate_bps",
                format!("{l} bit/s is above the limit of {MAX_RATE_BPS:e} bit/s (10 Tbit/s)"),
            ));
        }
        let spec = self.frame_spec()?;
        if self.replay.is_some() {
            if self.flows.count() > 1 {
                return Err(ConfigError::new(
                    "flows",
                    "a replay's flows are the capture's (one per 5-tuple when stamped): leave flows at 1",
                ));
            }
            if self.vlan.is_some() || self.outer_vlan.is_some() {
                return Err(ConfigError::new(
                    if self.vlan.is_some() { "vlan" } else { "outer_vlan" },
                    "a replay sends the captured frames with their own tags: leave vlan and outer_vlan unset",
                ));
            }
        }
        if let Proto::Raw { .. } = self.protocol {
            for (name, n) in [
                ("src_ips", self.flows.src_ips),
                ("dst_ips", self.flows.dst_ips),
                ("src_ports", self.flows.src_ports),
                ("dst_ports", self.flows.dst_ports),
            ] {
                if n > 1 {
                    return Err(ConfigError::new(
                        format!("flows.{name}"),
                        "a raw L2 stream has no IP addresses or ports: vary src_macs, dst_macs or vlans instead",
                    ));
                }
            }
        }
        if self.flows.vlans > 1 {
            let Some(vid) = self.vlan else {
                return Err(ConfigError::new(
                    "flows.vlans",
                    "varying VLAN ids needs a VLAN tag: set vlan (the first id of the range)",
                ));
            };
            if vid as u64 + self.flows.vlans as u64 - 1 > 4094 {
                return Err(ConfigError::new(
                    "flows.vlans",
                    format!("{} VLAN ids from {vid} run past 4094: use fewer or a lower vlan", self.flows.vlans),
                ));
            }
        }
        for (name, mac, n) in
            [("src_macs", self.src_mac, self.flows.src_macs), ("dst_macs", self.dst_mac, self.flows.dst_macs)]
        {
            let base = mac.0.iter().fold(0u64, |a, &b| a << 8 | u64::from(b));
            if base + n as u64 - 1 > 0xFFFF_FFFF_FFFF {
                return Err(ConfigError::new(
                    format!("flows.{name}"),
                    format!(
                        "{n} MAC addresses from {mac} run past ff:ff:ff:ff:ff:ff: use fewer or a lower base address"
                    ),
                ));
            }
        }
        let min_size = frames::min_frame_len(&spec) + FCS_LEN;
        let (lo, _) = self.frame_size.bounds();
        if lo < min_size {
            return Err(ConfigError::new(
                "frame_size",
                format!(
                    "{lo} B is below the minimum of {min_size} B for this header template (headers + 18 B signature + FCS): use larger frames"
                ),
            ));
        }
        if let L3Spec::V4 { src, dst, .. } = spec.l3 {
            for (name, base, n) in [("src_ips", src, self.flows.src_ips), ("dst_ips", dst, self.flows.dst_ips)] {
                if u32::from(base) as u64 + n as u64 - 1 > u32::MAX as u64 {
                    return Err(ConfigError::new(
                        format!("flows.{name}"),
                        format!(
                            "{n} addresses from {base} run past 255.255.255.255: use fewer or a lower base address"
                        ),
                    ));
                }
            }
        }
        self.ranges_stay_in_the_benchmarking_ranges(&spec)?;
        check_rate(self.intended_rate_pps()?, self.mean_size(), self.line_rate_bps, MIN_GAP_BYTES)
    }

    /// Bytes of VLAN tags in front of the payload: 0, 4 (802.1Q) or 8 (QinQ).
    pub fn tag_len(&self) -> usize {
        4 * (usize::from(self.vlan.is_some()) + usize::from(self.outer_vlan.is_some()))
    }

    /// The frames/s this stream asks for (`f64::INFINITY` for [`Rate::Max`]); a rate in % needs
    /// a line rate.
    pub fn intended_rate_pps(&self) -> Result<f64, ConfigError> {
        self.rate.frames_per_s(self.mean_size(), self.line_rate_bps)
    }

    /// What this stream's frames look like: IP families must match, VLAN id 1..4094.
    fn frame_spec(&self) -> Result<FrameSpec, ConfigError> {
        let l3 = match (self.src_ip, self.dst_ip) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => L3Spec::V4 { src, dst, ttl: self.ttl, dscp: 0 },
            (IpAddr::V6(src), IpAddr::V6(dst)) => L3Spec::V6 { src, dst, hop_limit: self.ttl, tc: 0 },
            (s, d) => {
                return Err(ConfigError::new(
                    "dst_ip",
                    format!("{d} and the source {s} are of different IP families: use two IPv4 or two IPv6 addresses"),
                ))
            }
        };
        let tag = |field: &str, v: Option<u16>| match v {
            None => Ok(None),
            Some(vid) if (1..4095).contains(&vid) => {
                Ok(Some(vlan::Repr { pcp: 0, dei: false, vid, inner_ethertype: 0 }))
            }
            Some(vid) => Err(ConfigError::new(
                field,
                format!("VLAN id must be 1..4094 (got {vid}); leave it unset for untagged frames"),
            )),
        };
        let vlan = tag("vlan", self.vlan)?;
        let outer_vlan = tag("outer_vlan", self.outer_vlan)?;
        if outer_vlan.is_some() && vlan.is_none() {
            return Err(ConfigError::new(
                "outer_vlan",
                "an 802.1ad outer tag (QinQ) needs the inner 802.1Q tag: set vlan as well",
            ));
        }
        if let Proto::Raw { ethertype } = self.protocol {
            parse_protocol("raw", 0, 0, ethertype)?;
        }
        Ok(FrameSpec {
            src_mac: self.src_mac,
            dst_mac: self.dst_mac,
            outer_vlan,
            vlan,
            l3,
            proto: self.protocol,
            src_port: self.src_port,
            dst_port: self.dst_port,
            udp_checksum: self.udp_checksum,
        })
    }
}

/// A validated stream ready for a TX worker.
#[derive(Debug, Clone)]
pub struct CompiledStream {
    pub index: usize,
    pub config: StreamConfig,
    /// Its frames: a header stack whose flow key walks the flows (`None` for a replay, which sends
    /// the capture's frames). Size index `i` is `sizes[i]`.
    pub stack: Option<Arc<CompiledStack>>,
    /// Frame sizes including FCS (as reported), by size index.
    pub sizes: Vec<usize>,
    /// Sequence of size indices, cycled per frame (encodes the size distribution).
    pub size_schedule: Vec<u16>,
    /// Flows, and the order frames visit them in.
    pub nflows: u64,
    pub walk: FlowWalk,
    /// First global flow id of this stream.
    pub flow_base: u32,
    /// Intended rate in frames/s (`f64::INFINITY` for `Rate::Max`).
    pub rate_pps: f64,
    /// Frames to send in total, if bounded by count or bursts.
    pub frame_limit: Option<u64>,
}

impl CompiledStream {
    pub fn mean_size(&self) -> f64 {
        self.config.mean_size()
    }
}

/// Validate and compile `cfg`: [`StreamConfig::validate`] first, then what needs the ports:
/// the port indices and `max_frame_len`, the TX port's largest frame without FCS.
pub fn compile(
    index: usize,
    cfg: &StreamConfig,
    flow_base: u32,
    max_frame_len: usize,
    n_ports: usize,
) -> Result<CompiledStream, ConfigError> {
    let prefix = format!("streams[{index}]");
    cfg.validate().map_err(|e| e.within(&prefix))?;
    let f = |name: &str| format!("{prefix}.{name}");
    for (name, p) in [("tx_port", cfg.tx_port), ("rx_port", cfg.rx_port)] {
        if p >= n_ports {
            return Err(ConfigError::new(
                f(name),
                format!("port index {p} out of range (the trial has {n_ports} ports): use 0..{}", n_ports.max(1) - 1),
            ));
        }
    }
    let rate_pps = cfg.intended_rate_pps().map_err(|e| e.within(&prefix))?;
    let frame_limit = frame_limit(cfg.stop);
    if let Some(r) = &cfg.replay {
        r.check_port(max_frame_len, "the TX port", "the MTU + 14").map_err(|e| e.within(&prefix))?;
        let nflows = u64::from(r.flows).max(1);
        let walk = FlowWalk::new(&FlowSpec::default());
        let (stack, sizes, size_schedule) = (None, Vec::new(), Vec::new());
        let config = cfg.clone();
        return Ok(CompiledStream {
            index,
            config,
            stack,
            sizes,
            size_schedule,
            nflows,
            walk,
            flow_base,
            rate_pps,
            frame_limit,
        });
    }
    fits_port(&cfg.frame_size, (max_frame_len, cfg.tag_len()), "the TX port", RAISE_THE_MTU)
        .map_err(|e| e.within(&prefix))?;
    let sizes = cfg.frame_size.sizes();
    let (spec, walk) = cfg.stack_spec().map_err(|e| e.within(&prefix))?;
    let lens: Vec<usize> = sizes.iter().map(|s| s - FCS_LEN).collect();
    let stack = wire_stack::compile(&spec, &lens).map_err(|e| ConfigError::new(f("frame_size"), e.to_string()))?;
    let size_schedule = size_schedule(&cfg.frame_size, &sizes, index as u64);
    Ok(CompiledStream {
        index,
        config: cfg.clone(),
        stack: Some(Arc::new(stack)),
        sizes,
        size_schedule,
        nflows: cfg.flows.count(),
        walk,
        flow_base,
        rate_pps,
        frame_limit,
    })
}

/// What a port whose largest frame is the MTU + 18 asks of larger frames.
pub(crate) const RAISE_THE_MTU: &str = "the MTU + 18: raise the MTU (test beds: the mtu option) or use smaller frames";

/// `sizes` against `port`'s largest frame, `max_frame_len` bytes without FCS and untagged: each of
/// `tag_len` bytes of VLAN tags comes on top of the MTU; `why` the port's limit and the remedy.
/// Field: `frame_size`.
pub(crate) fn fits_port(
    sizes: &FrameSize,
    (max_frame_len, tag_len): (usize, usize),
    port: &str,
    why: &str,
) -> Result<(), ConfigError> {
    let max_size = max_frame_len + FCS_LEN + tag_len;
    let (_, hi) = sizes.bounds();
    if hi > max_size {
        return Err(ConfigError::new(
            "frame_size",
            format!("{hi} B is above the largest frame {port} carries ({max_size} B, {why})"),
        ));
    }
    Ok(())
}

/// Frames to send in total, if bounded by count or bursts.
fn frame_limit(stop: Stop) -> Option<u64> {
    match stop {
        Stop::Duration { .. } => None,
        Stop::Frames { count } => Some(count),
        Stop::Bursts { frames, bursts, .. } => Some(frames.saturating_mul(bursts)),
    }
}

/// Length of the per-frame size schedule: long enough that weighted mixes are exact per cycle
/// and random sizes look random.
const SCHEDULE_LEN: usize = 4096;

/// The per-frame order of size indices into `sizes` (see [`FrameSize::sizes`]): exact proportions
/// per cycle for mixes, seeded for random sizes.
pub(crate) fn size_schedule(fs: &FrameSize, sizes: &[usize], seed: u64) -> Vec<u16> {
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

/// Frames/s of `bps` layer-1 bit/s (a link speed, or an L1 rate) at `size` bytes per frame: every
/// frame takes [`WIRE_OVERHEAD`] more on the wire (methodology §1): [`frames_on_wire`] at the
/// minimum gap.
pub fn line_rate_fps(bps: f64, size: f64) -> f64 {
    frames_on_wire(bps, size, MIN_GAP_BYTES)
}

/// Frames/s of `size` bytes (with FCS) that `bps` carry with `gap_bytes` between frames: the one
/// place of the formula.
pub fn frames_on_wire(bps: f64, size: f64, gap_bytes: u32) -> f64 {
    bps / ((size + (PREAMBLE_SFD + u64::from(gap_bytes)) as f64) * 8.0)
}

/// `pps` frames/s of `mean`-byte frames within the limits: [`MAX_RATE_PPS`], and with a link
/// speed what it carries at `gap_bytes` between frames. Field: `rate`.
pub(crate) fn check_rate(pps: f64, mean: f64, line_bps: Option<u64>, gap_bytes: u32) -> Result<(), ConfigError> {
    if pps.is_finite() && pps > MAX_RATE_PPS {
        return Err(ConfigError::new(
            "rate",
            format!("{pps:e} frames/s is above the limit of {MAX_RATE_PPS:e} frames/s per stream"),
        ));
    }
    if let Some(l) = line_bps {
        let cap = frames_on_wire(l as f64, mean, gap_bytes);
        if pps.is_finite() && pps > cap * 1.000_001 {
            let gap =
                if gap_bytes == MIN_GAP_BYTES { String::new() } else { format!(", {gap_bytes} B between frames") };
            return Err(ConfigError::new(
                "rate",
                format!("{pps:.0} fps is above the line rate of {cap:.0} fps at {mean:.0} B ({l} bit/s{gap}): lower the rate"),
            ));
        }
    }
    Ok(())
}

/// A link speed in whole bit/s from `bps` (finite, > 0). Field: `line_rate_bps`.
pub fn line_rate_bps(bps: f64) -> Result<u64, ConfigError> {
    if !(1.0..=1e15).contains(&bps) {
        return Err(ConfigError::new(
            "line_rate_bps",
            format!("must be a link speed in bit/s, 1..1e15 (got {bps}); leave it unset when the link has none"),
        ));
    }
    Ok(bps.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_rate_matches_methodology() {
        assert_eq!(line_rate_fps(1e9, 64.0).round(), 1_488_095.0);
        assert_eq!(line_rate_fps(1e9, 1518.0).round(), 81_274.0);
        assert_eq!(line_rate_fps(1e10, 64.0).round(), 14_880_952.0);
    }

    #[test]
    fn imix_mean_and_schedule_proportions() {
        let mut c = StreamConfig::new("s");
        c.frame_size = FrameSize::imix();
        let s = compile(0, &c, 0, 1514, 2).unwrap();
        let n = s.size_schedule.len() as f64;
        let share_64 = s.size_schedule.iter().filter(|&&i| s.sizes[i as usize] == 64).count() as f64 / n;
        assert!((share_64 - 0.57).abs() < 0.01, "{share_64}");
        assert!((s.mean_size() - (0.57 * 64.0 + 0.07 * 570.0 + 0.16 * 594.0 + 0.2 * 1518.0)).abs() < 1e-9);
    }

    #[test]
    fn errors_name_the_field() {
        let mut c = StreamConfig::new("s");
        c.frame_size = FrameSize::Fixed(63);
        let e = compile(2, &c, 0, 1514, 2).unwrap_err();
        assert_eq!(e.field, "streams[2].frame_size");
        assert!(e.message.contains("64..16384"), "{e}");
        c.frame_size = FrameSize::Fixed(9000);
        assert!(compile(0, &c, 0, 1514, 2).unwrap_err().message.contains("largest frame the TX port carries (1518 B"));
        c.frame_size = FrameSize::Fixed(64);
        c.rate = Rate::PercentLine(50.0);
        assert!(compile(0, &c, 0, 1514, 2).unwrap_err().message.contains("link speed"));
        c.line_rate_bps = Some(1_000_000_000);
        let s = compile(0, &c, 0, 1514, 2).unwrap();
        assert!((s.rate_pps - 744_047.6).abs() < 1.0);
        c.rate = Rate::Pps(2e6);
        assert!(compile(0, &c, 0, 1514, 2).unwrap_err().message.contains("above the line rate"));
    }

    fn field_of(c: &StreamConfig) -> String {
        c.validate().unwrap_err().field
    }

    #[test]
    fn validate_names_the_field_and_the_remedy() {
        let ok = StreamConfig::new("s");
        ok.validate().unwrap();
        type Change = Box<dyn Fn(&mut StreamConfig)>;
        let cases: Vec<(Change, &str)> = vec![
            (Box::new(|c| c.frame_size = FrameSize::Fixed(20_000)), "frame_size"),
            (Box::new(|c| c.frame_size = FrameSize::Weighted(vec![(64, 0)])), "frame_size"),
            (Box::new(|c| c.frame_size = FrameSize::Weighted(vec![(64, u32::MAX)])), "frame_size"),
            (Box::new(|c| c.frame_size = FrameSize::Random { min: 200, max: 100 }), "frame_size"),
            (Box::new(|c| c.frame_size = FrameSize::Increment { min: 64, max: 128, step: 0 }), "frame_size"),
            (Box::new(|c| c.rate = Rate::Pps(f64::NAN)), "rate"),
            (Box::new(|c| c.rate = Rate::L1Bps(-1.0)), "rate"),
            (Box::new(|c| c.rate = Rate::PercentLine(101.0)), "rate"),
            (Box::new(|c| c.rate = Rate::PercentLine(50.0)), "rate"),
            (Box::new(|c| c.flows.src_ports = 0), "flows.src_ports"),
            (Box::new(|c| c.flows.dst_ports = 70_000), "flows.dst_ports"),
            (Box::new(|c| c.flows.src_ips = 1 << 13), ""),
            (Box::new(|c| c.stop = Stop::Duration { ns: 0 }), "duration_s"),
            (Box::new(|c| c.stop = Stop::Frames { count: 0 }), "frames"),
            (Box::new(|c| c.stop = Stop::Bursts { frames: 0, bursts: 1, gap_ns: 0 }), "bursts"),
            (Box::new(|c| c.dst_ip = "2001:db8::1".parse().unwrap()), "dst_ip"),
            (Box::new(|c| c.vlan = Some(4095)), "vlan"),
            (Box::new(|c| c.line_rate_bps = Some(0)), "line_rate_bps"),
            (
                Box::new(|c| {
                    c.src_ip = "255.255.255.250".parse().unwrap();
                    c.flows.src_ips = 10;
                }),
                "flows.src_ips",
            ),
            (
                Box::new(|c| {
                    c.line_rate_bps = Some(1_000_000_000);
                    c.rate = Rate::Pps(2e6);
                }),
                "rate",
            ),
        ];
        for (k, (change, field)) in cases.into_iter().enumerate() {
            let mut c = ok.clone();
            change(&mut c);
            c.flows.dst_ips = if field.is_empty() { 1 << 12 } else { c.flows.dst_ips };
            let e = c.validate().unwrap_err();
            assert_eq!(e.field, if field.is_empty() { "flows" } else { field }, "case {k}: {e}");
        }
        // VLAN-tagged IPv6 needs a larger minimum frame.
        let mut c = ok.clone();
        c.src_ip = "2001:db8::1".parse().unwrap();
        c.dst_ip = "2001:db8::2".parse().unwrap();
        c.vlan = Some(10);
        assert_eq!(field_of(&c), "frame_size");
        assert!(c.validate().unwrap_err().message.contains("minimum of 88"), "{}", c.validate().unwrap_err());
    }

    #[test]
    fn address_ranges_stay_in_the_benchmarking_ranges() {
        let mut c = StreamConfig { dst_ip: "198.19.0.2".parse().unwrap(), ..StreamConfig::new("s") };
        c.flows.dst_ips = 65_534;
        assert!(c.validate().is_ok(), "198.19.0.2 … 198.19.255.255");
        c.flows.dst_ips = 70_000;
        let e = c.validate().unwrap_err();
        assert_eq!(e.field, "flows.dst_ips");
        assert!(e.message.contains("to 198.20.17.113: use at most 65534, or IPv6"), "{e}");
        c.dst_ip = "10.0.0.1".parse().unwrap(); // a lab's own addresses: not ours to bound
        assert!(c.validate().is_ok());
        c.src_ip = "2001:2:0:ffff:ffff:ffff:ffff:fff0".parse().unwrap();
        c.dst_ip = "2001:2::2".parse().unwrap();
        c.frame_size = FrameSize::Fixed(128);
        c.flows.dst_ips = 1 << 16;
        c.flows.src_ips = 17;
        let e = c.validate().unwrap_err();
        assert_eq!(e.field, "flows.src_ips");
        assert!(e.message.contains("to 2001:2:1::: use at most 16") && !e.message.contains("or IPv6"), "{e}");
    }

    #[test]
    fn seconds_and_stops() {
        assert_eq!(seconds_to_ns("drain_s", 0.0, true, MAX_DRAIN_S).unwrap(), 0);
        assert_eq!(seconds_to_ns("drain_s", 1.5, false, MAX_DRAIN_S).unwrap(), 1_500_000_000);
        for bad in [f64::NAN, f64::INFINITY, -1.0, 0.0, 61.0, 1e99] {
            assert_eq!(seconds_to_ns("drain_s", bad, false, MAX_DRAIN_S).unwrap_err().field, "drain_s");
        }
        assert!(seconds_to_ns("drain_s", 61.0, true, MAX_DRAIN_S).unwrap_err().message.contains("limit of 60 s"));
        assert_eq!(Stop::duration_s(0.0).unwrap_err().field, "duration_s");
        let e = Stop::duration_s(1e99).unwrap_err();
        assert!(e.field == "duration_s" && e.message.contains("limit of 604800 s"), "{e}");
        assert_eq!(Stop::Frames { count: MAX_FRAMES + 1 }.validate().unwrap_err().field, "frames");
        assert_eq!(Stop::bursts(u64::MAX, 2, 0.1).unwrap_err().field, "bursts");
        assert_eq!(Stop::bursts(10, 2, 1e7).unwrap_err().field, "bursts");
        for r in [Rate::Pps(1e300), Rate::L1Bps(1e14), Rate::L2Bps(2e13)] {
            assert!(r.validate().unwrap_err().message.contains("limit"), "{r:?}");
        }
        Rate::Pps(MAX_RATE_PPS).validate().unwrap();
        assert_eq!(Stop::bursts(10, 2, -1.0).unwrap_err().field, "bursts");
        assert_eq!(Stop::bursts(10, 0, 0.1).unwrap_err().field, "bursts");
        assert_eq!(Stop::bursts(10, 2, 0.5).unwrap(), Stop::Bursts { frames: 10, bursts: 2, gap_ns: 500_000_000 });
    }
}
