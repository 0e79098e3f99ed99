//! One generator flow, validated and compiled: its header stack for every frame length it uses,
//! the order of the lengths, its rate in frames/s and the shape of its run.
use std::sync::Arc;

use netrig_wire::stack::{self, CompiledStack, HeaderKind, StackSpec};

use crate::error::ConfigError;
use crate::traffic::stream::{self, FrameSize, Rate, FCS_LEN, MAX_FRAMES};

/// How long a flow sends once started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GenDuration {
    /// Until stopped.
    Continuous,
    /// This many frames.
    Frames(u64),
    /// This many seconds of frames at the flow's rate (rate × seconds frames, sent smoothly).
    Seconds(f64),
    /// Bursts of `packets` frames at the flow's rate, `gap_ns` from a burst's last frame to the
    /// next one's first; `count` bursts (0: until stopped).
    Bursts { packets: u64, count: u64, gap_ns: u64 },
}

/// What the latency of a frame is measured from and to (RFC 1242): the measured difference of
/// the receive and transmit stamps less one frame time at the receiving link (cut-through: first
/// bit out to first bit in) or also one at the sending link (store-and-forward: last bit out to
/// first bit in). Links without a speed (veth) count 0 for a frame time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LatencyMode {
    #[default]
    StoreForward,
    CutThrough,
}

/// One flow: a header stack sent from one port, at a rate, for a duration.
#[derive(Debug, Clone, PartialEq)]
pub struct GenFlowConfig {
    pub name: String,
    pub tx_port: usize,
    /// Ports the flow is expected on (its frames are counted wherever they arrive).
    pub rx_ports: Vec<usize>,
    pub stack: StackSpec,
    pub frame_size: FrameSize,
    pub rate: Rate,
    pub duration: GenDuration,
    /// From the start command to the first frame, ns.
    pub delay_ns: u64,
    /// Bytes between frames on the wire at most (12: the Ethernet minimum gap); with a link
    /// speed it bounds the rate.
    pub gap_bytes: u32,
    pub latency: LatencyMode,
    /// Frames counted per frame index modulo this, sent and received (0: not counted): the
    /// period over which the flow's tagged fields repeat (OTG metric tags; the reader maps each
    /// index to the tag values of the frames at it).
    pub tag_period: u32,
}

impl GenFlowConfig {
    /// A 64-byte Ethernet/IPv4/UDP flow from port 0 to port 1 at 1000 frames/s, until stopped.
    pub fn new(name: impl Into<String>) -> GenFlowConfig {
        let h = |kind| stack::HeaderSpec { kind, fields: Vec::new(), bytes: Vec::new() };
        GenFlowConfig {
            name: name.into(),
            tx_port: 0,
            rx_ports: vec![1],
            stack: StackSpec {
                headers: vec![h(HeaderKind::Ethernet), h(HeaderKind::Ipv4), h(HeaderKind::Udp)],
                payload: stack::Payload::zeros(),
                site: stack::Site::End,
                keys: stack::KeySpec::default(),
            },
            frame_size: FrameSize::Fixed(64),
            rate: Rate::Pps(1000.0),
            duration: GenDuration::Continuous,
            delay_ns: 0,
            gap_bytes: stream::MIN_GAP_BYTES,
            latency: LatencyMode::StoreForward,
            tag_period: 0,
        }
    }

    /// Bytes of VLAN tags in the stack (each lets a frame exceed the MTU by 4 bytes).
    pub fn tag_len(&self) -> usize {
        4 * self.stack.headers.iter().filter(|h| h.kind == HeaderKind::Vlan).count()
    }

    /// Largest frame, without FCS.
    pub fn largest_frame_len(&self) -> usize {
        self.frame_size.bounds().1 - FCS_LEN
    }

    /// Everything that can be checked without a port: the frame sizes (and that each holds the
    /// headers and the signature), the header stack, the rate, the duration. Fields are the flow's
    /// own (`size`, `packet[1].ipv4.src`, `rate`, `duration`).
    /// Returns the compiled stack, for [`compile_flow_with`].
    pub fn validate(&self) -> Result<Arc<CompiledStack>, ConfigError> {
        self.frame_size.validate()?;
        self.rate.validate()?;
        if self.tag_period > MAX_TAG_PERIOD {
            return Err(ConfigError::new(
                "metric_tags",
                format!(
                    "the tagged fields repeat every {} frames: at most {MAX_TAG_PERIOD} are counted apart; tag fewer \
                     fields or give them shorter patterns",
                    self.tag_period
                ),
            ));
        }
        let stack = self.compile_stack()?;
        let pps = match self.rate {
            Rate::Max => f64::INFINITY,
            _ => 1.0,
        };
        shape(self.duration, pps)?;
        Ok(stack)
    }

    fn compile_stack(&self) -> Result<Arc<CompiledStack>, ConfigError> {
        let lens: Vec<usize> = self.frame_size.sizes().iter().map(|s| s - FCS_LEN).collect();
        let stack = stack::compile(&self.stack, &lens).map_err(|e| ConfigError::new(e.field, e.message))?;
        Ok(Arc::new(stack))
    }
}

/// Most frame indices a flow's tagged counts keep apart (an 8-byte counter each, per worker).
pub const MAX_TAG_PERIOD: u32 = 65_536;

/// A flow's bursts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bursts {
    pub packets: u64,
    /// 0: until stopped.
    pub count: u64,
    pub gap_ns: u64,
}

/// A flow ready for a TX worker.
#[derive(Debug, Clone)]
pub struct CompiledFlow {
    pub index: usize,
    pub config: GenFlowConfig,
    pub stack: Arc<CompiledStack>,
    /// Size index per frame, cycled.
    pub size_schedule: Vec<u16>,
    /// Frame sizes (with FCS) by size index.
    pub sizes: Vec<usize>,
    /// Frames/s (infinite: as fast as possible).
    pub rate_pps: f64,
    /// Frames per start (`None`: until stopped).
    pub limit: Option<u64>,
    pub bursts: Option<Bursts>,
}

/// The flow's frames/s: the rate, bounded by the link at `gap_bytes` between frames.
fn rate_pps(cfg: &GenFlowConfig, line_bps: Option<u64>) -> Result<f64, ConfigError> {
    cfg.rate.validate()?;
    let mean = cfg.frame_size.mean();
    let pps = cfg.rate.frames_per_s(mean, line_bps)?;
    stream::check_rate(pps, mean, line_bps, cfg.gap_bytes)?;
    Ok(pps)
}

/// Frames per start and bursts of a duration at `pps`.
fn shape(d: GenDuration, pps: f64) -> Result<(Option<u64>, Option<Bursts>), ConfigError> {
    let err = |m: &str| Err(ConfigError::new("duration", m.to_string()));
    Ok(match d {
        GenDuration::Continuous => (None, None),
        GenDuration::Frames(0) => return err("a fixed number of frames must be at least 1"),
        GenDuration::Frames(n) if n > MAX_FRAMES => return err("at most 10^15 frames"),
        GenDuration::Frames(n) => (Some(n), None),
        GenDuration::Seconds(s) if !(s > 0.0 && s <= stream::MAX_DURATION_S) => {
            return err("seconds must be above 0 and at most one week (604800)")
        }
        GenDuration::Seconds(_) if !pps.is_finite() => return err("a duration in seconds needs a finite rate"),
        GenDuration::Seconds(s) => (Some(((s * pps).round() as u64).max(1)), None),
        GenDuration::Bursts { packets: 0, .. } => return err("a burst needs at least 1 frame"),
        GenDuration::Bursts { packets, count, gap_ns } => {
            let limit = (count > 0).then(|| packets.saturating_mul(count));
            if limit.is_some_and(|n| n > MAX_FRAMES) {
                return err("at most 10^15 frames");
            }
            (limit, Some(Bursts { packets, count, gap_ns }))
        }
    })
}

/// Validate and compile flow `index` for a TX port carrying frames up to `max_frame_len` bytes
/// (without FCS, untagged) at `line_bps`. Errors are the flow's fields prefixed `flows[index].`.
pub fn compile_flow(
    index: usize,
    cfg: &GenFlowConfig,
    max_frame_len: usize,
    line_bps: Option<u64>,
) -> Result<CompiledFlow, ConfigError> {
    compile_flow_with(index, cfg, max_frame_len, line_bps, None)
}

/// [`compile_flow`] with the stack [`GenFlowConfig::validate`] compiled already (`None`: compile it).
pub fn compile_flow_with(
    index: usize,
    cfg: &GenFlowConfig,
    max_frame_len: usize,
    line_bps: Option<u64>,
    stack: Option<Arc<CompiledStack>>,
) -> Result<CompiledFlow, ConfigError> {
    let prefix = format!("flows[{index}]");
    let within = |e: ConfigError| e.within(&prefix);
    cfg.frame_size.validate().map_err(within)?;
    stream::fits_port(&cfg.frame_size, (max_frame_len, cfg.tag_len()), "the TX port", stream::RAISE_THE_MTU)
        .map_err(within)?;
    let sizes = cfg.frame_size.sizes();
    let stack = match stack {
        Some(s) => s,
        None => cfg.compile_stack().map_err(within)?,
    };
    let size_schedule = stream::size_schedule(&cfg.frame_size, &sizes, index as u64);
    let rate_pps = rate_pps(cfg, line_bps).map_err(within)?;
    let (limit, bursts) = shape(cfg.duration, rate_pps).map_err(within)?;
    if cfg.delay_ns > (stream::MAX_DURATION_S * 1e9) as u64 {
        return Err(within(ConfigError::new("delay", "at most one week")));
    }
    Ok(CompiledFlow { index, config: cfg.clone(), stack, size_schedule, sizes, rate_pps, limit, bursts })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_durations_and_errors() {
        let mut c = GenFlowConfig::new("f");
        c.rate = Rate::L1Bps(672e6);
        c.duration = GenDuration::Seconds(0.5);
        let f = compile_flow(0, &c, 1514, None).unwrap();
        assert!((f.rate_pps - 1e6).abs() < 1e-6, "672 bit per 64-byte frame on the wire");
        assert_eq!(f.limit, Some(500_000));
        c.rate = Rate::PercentLine(100.0);
        assert!(compile_flow(0, &c, 1514, None).unwrap_err().message.contains("link speed"));
        let f = compile_flow(0, &c, 1514, Some(10_000_000_000)).unwrap();
        assert!((f.rate_pps - 14_880_952.38).abs() < 1.0);
        c.gap_bytes = 100;
        let e = compile_flow(3, &c, 1514, Some(10_000_000_000)).unwrap_err();
        assert_eq!(e.field, "flows[3].rate");
        c.gap_bytes = 12;
        c.duration = GenDuration::Bursts { packets: 10, count: 3, gap_ns: 1000 };
        let f = compile_flow(0, &c, 1514, Some(10_000_000_000)).unwrap();
        assert_eq!((f.limit, f.bursts.map(|b| b.packets)), (Some(30), Some(10)));
        c.frame_size = FrameSize::Fixed(1600);
        assert_eq!(compile_flow(1, &c, 1514, None).unwrap_err().field, "flows[1].frame_size");
        c.frame_size = FrameSize::Fixed(64);
        c.stack.headers.push(stack::HeaderSpec { kind: HeaderKind::Tcp, fields: vec![], bytes: vec![] });
        let e = compile_flow(2, &c, 1514, None).unwrap_err();
        assert!(
            e.field == "flows[2].size"
                && e.message.contains("cannot hold these headers (62 B): use frames of at least 66 B"),
            "{e}"
        );
    }
}
