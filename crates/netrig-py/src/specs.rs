//! Specs: frozen wrappers of the engine's configuration types. Constructors convert their
//! arguments (wrong types are `ConfigError`s naming the argument) and call the engine's
//! validators, so a spec that exists is valid as far as it can be without its ports.
use netrig_engine::port::{Backend, PortSpec};
use netrig_engine::run::trial::{TrialConfig, DEFAULT_DRAIN_NS};
use netrig_engine::traffic::flows;
use netrig_engine::traffic::replay::Replay;
use netrig_engine::traffic::stream;
use netrig_engine::{FrameSize, Pacing, Rate, RatePhase, Stop, StreamConfig};
use netrig_wire::ethernet::EthernetAddress;
use pyo3::prelude::*;
use pyo3::types::PyAny;

use crate::args::{instance, opt, req};
use crate::errors::{config, Result};
use crate::results::InterfaceInfo;

/// Frame sizes in bytes incl. FCS: fixed, weighted mix, uniform random, or incrementing.
#[pyclass(frozen, eq, module = "netrig._native")]
#[derive(Debug, Clone, PartialEq)]
pub struct FrameSizeSpec(pub FrameSize);

impl FrameSizeSpec {
    fn checked(f: FrameSize) -> Result<Self> {
        f.validate()?;
        Ok(FrameSizeSpec(f))
    }
}

#[pymethods]
impl FrameSizeSpec {
    #[staticmethod]
    fn fixed(size: &Bound<'_, PyAny>) -> Result<Self> {
        Self::checked(FrameSize::Fixed(req(size, "frame_size")?))
    }

    #[staticmethod]
    fn weighted(mix: &Bound<'_, PyAny>) -> Result<Self> {
        let mix: Vec<(usize, u32)> = req(mix, "frame_size").map_err(|e| e.about("frame_size"))?;
        if mix.is_empty() {
            return Err(config("frame_size", "a weighted mix needs at least one (size, weight) pair"));
        }
        Self::checked(FrameSize::Weighted(mix))
    }

    #[staticmethod]
    fn random(min: &Bound<'_, PyAny>, max: &Bound<'_, PyAny>) -> Result<Self> {
        Self::checked(FrameSize::Random { min: req(min, "frame_size")?, max: req(max, "frame_size")? })
    }

    #[staticmethod]
    fn increment(min: &Bound<'_, PyAny>, max: &Bound<'_, PyAny>, step: &Bound<'_, PyAny>) -> Result<Self> {
        Self::checked(FrameSize::Increment {
            min: req(min, "frame_size")?,
            max: req(max, "frame_size")?,
            step: req(step, "frame_size")?,
        })
    }

    /// `"fixed"`, `"weighted"`, `"random"` or `"increment"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.0.kind()
    }

    #[getter]
    fn mean_size(&self) -> f64 {
        self.0.mean()
    }

    #[getter]
    fn min_size(&self) -> usize {
        self.0.bounds().0
    }

    #[getter]
    fn max_size(&self) -> usize {
        self.0.bounds().1
    }

    fn __repr__(&self) -> String {
        format!("FrameSizeSpec({:?})", self.0)
    }
}

/// An offered rate: frames/s, L1 or L2 bit/s, % of the line rate, or as fast as possible.
#[pyclass(frozen, eq, module = "netrig._native")]
#[derive(Debug, Clone, PartialEq)]
pub struct RateSpec(pub Rate);

impl RateSpec {
    fn checked(value: &Bound<'_, PyAny>, make: fn(f64) -> Rate) -> Result<Self> {
        let r = make(req(value, "rate")?);
        r.validate()?;
        Ok(RateSpec(r))
    }
}

#[pymethods]
impl RateSpec {
    #[staticmethod]
    fn pps(value: &Bound<'_, PyAny>) -> Result<Self> {
        Self::checked(value, Rate::Pps)
    }

    #[staticmethod]
    fn l1_bps(value: &Bound<'_, PyAny>) -> Result<Self> {
        Self::checked(value, Rate::L1Bps)
    }

    #[staticmethod]
    fn l2_bps(value: &Bound<'_, PyAny>) -> Result<Self> {
        Self::checked(value, Rate::L2Bps)
    }

    #[staticmethod]
    fn percent_line(value: &Bound<'_, PyAny>) -> Result<Self> {
        Self::checked(value, Rate::PercentLine)
    }

    #[staticmethod]
    fn max() -> Self {
        RateSpec(Rate::Max)
    }

    /// `"pps"`, `"l1_bps"`, `"l2_bps"`, `"percent_line"` or `"max"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.0.kind()
    }

    #[getter]
    fn value(&self) -> Option<f64> {
        self.0.value()
    }

    fn __repr__(&self) -> String {
        match self.0.value() {
            Some(v) => format!("RateSpec.{}({v})", self.0.kind()),
            None => "RateSpec.max()".into(),
        }
    }
}

/// A stream's flows: every combination of the address and port ranges.
#[pyclass(frozen, module = "netrig._native")]
#[derive(Debug, Clone)]
pub struct FlowSpec(pub flows::FlowSpec);

#[pymethods]
impl FlowSpec {
    #[new]
    #[pyo3(
        signature = (src_ips=None, dst_ips=None, src_ports=None, dst_ports=None, order=None, seed=None,
                     src_macs=None, dst_macs=None, vlans=None),
        text_signature = "(src_ips=1, dst_ips=1, src_ports=1, dst_ports=1, order='sequential', seed=1, src_macs=1, \
                          dst_macs=1, vlans=1)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        src_ips: Option<&Bound<'_, PyAny>>,
        dst_ips: Option<&Bound<'_, PyAny>>,
        src_ports: Option<&Bound<'_, PyAny>>,
        dst_ports: Option<&Bound<'_, PyAny>>,
        order: Option<&Bound<'_, PyAny>>,
        seed: Option<&Bound<'_, PyAny>>,
        src_macs: Option<&Bound<'_, PyAny>>,
        dst_macs: Option<&Bound<'_, PyAny>>,
        vlans: Option<&Bound<'_, PyAny>>,
    ) -> Result<Self> {
        let order: String = opt(order, "flows.order", "sequential".into())?;
        let f = flows::FlowSpec {
            src_ips: opt(src_ips, "flows.src_ips", 1)?,
            dst_ips: opt(dst_ips, "flows.dst_ips", 1)?,
            src_ports: opt(src_ports, "flows.src_ports", 1)?,
            dst_ports: opt(dst_ports, "flows.dst_ports", 1)?,
            src_macs: opt(src_macs, "flows.src_macs", 1)?,
            dst_macs: opt(dst_macs, "flows.dst_macs", 1)?,
            vlans: opt(vlans, "flows.vlans", 1)?,
            order: flows::FlowOrder::parse(&order, opt(seed, "flows.seed", 1)?)?,
        };
        f.validate()?;
        Ok(FlowSpec(f))
    }

    #[getter]
    fn src_ips(&self) -> u32 {
        self.0.src_ips
    }

    #[getter]
    fn dst_ips(&self) -> u32 {
        self.0.dst_ips
    }

    #[getter]
    fn src_ports(&self) -> u32 {
        self.0.src_ports
    }

    #[getter]
    fn dst_ports(&self) -> u32 {
        self.0.dst_ports
    }

    #[getter]
    fn src_macs(&self) -> u32 {
        self.0.src_macs
    }

    #[getter]
    fn dst_macs(&self) -> u32 {
        self.0.dst_macs
    }

    #[getter]
    fn vlans(&self) -> u32 {
        self.0.vlans
    }

    #[getter]
    fn order(&self) -> &'static str {
        self.0.order.as_str()
    }

    #[getter]
    fn seed(&self) -> u64 {
        self.0.order.seed()
    }

    #[getter]
    fn count(&self) -> u64 {
        self.0.count()
    }

    fn __repr__(&self) -> String {
        let f = &self.0;
        format!(
            "FlowSpec(src_ips={}, dst_ips={}, src_ports={}, dst_ports={}, order={:?}, seed={}, src_macs={}, \
             dst_macs={}, vlans={})",
            f.src_ips,
            f.dst_ips,
            f.src_ports,
            f.dst_ports,
            f.order.as_str(),
            f.order.seed(),
            f.src_macs,
            f.dst_macs,
            f.vlans
        )
    }
}

/// When the streams of a trial stop.
#[pyclass(frozen, module = "netrig._native")]
#[derive(Debug, Clone)]
pub struct StopSpec(pub Stop);

#[pymethods]
impl StopSpec {
    #[staticmethod]
    fn duration(duration_s: &Bound<'_, PyAny>) -> Result<Self> {
        Ok(StopSpec(Stop::duration_s(req(duration_s, "duration_s")?)?))
    }

    #[staticmethod]
    fn frames(count: &Bound<'_, PyAny>) -> Result<Self> {
        let s = Stop::Frames { count: req(count, "frames")? };
        s.validate()?;
        Ok(StopSpec(s))
    }

    #[staticmethod]
    fn bursts(frames: &Bound<'_, PyAny>, count: &Bound<'_, PyAny>, gap_s: &Bound<'_, PyAny>) -> Result<Self> {
        Ok(StopSpec(Stop::bursts(req(frames, "bursts")?, req(count, "bursts")?, req(gap_s, "bursts")?)?))
    }

    /// `"duration"`, `"frames"` or `"bursts"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.0.kind()
    }

    fn __repr__(&self) -> String {
        format!("StopSpec({:?})", self.0)
    }
}

fn mac(v: Option<&Bound<'_, PyAny>>, field: &str, default: EthernetAddress) -> Result<EthernetAddress> {
    let Some(v) = v else { return Ok(default) };
    let s: String = req(v, field)?;
    s.parse().map_err(|_| config(field, format!("{s:?} is not a MAC address (e.g. 02:00:00:00:00:01)")))
}

fn ip(v: Option<&Bound<'_, PyAny>>, field: &str, default: std::net::IpAddr) -> Result<std::net::IpAddr> {
    let Some(v) = v else { return Ok(default) };
    let s: String = req(v, field)?;
    s.parse().map_err(|_| config(field, format!("{s:?} is not an IPv4 or IPv6 address (e.g. 198.19.0.1)")))
}

/// One rate phase of a duration trial: every stream at `rate_scale` × its rate for `duration_s`.
#[pyclass(frozen, module = "netrig._native")]
#[derive(Debug, Clone)]
pub struct PhaseSpec(pub RatePhase);

#[pymethods]
impl PhaseSpec {
    #[new]
    #[pyo3(signature = (duration_s, rate_scale=None), text_signature = "(duration_s, rate_scale=1.0)")]
    fn new(duration_s: &Bound<'_, PyAny>, rate_scale: Option<&Bound<'_, PyAny>>) -> Result<Self> {
        let p = RatePhase {
            duration_ns: stream::seconds_to_ns(
                "duration_s",
                req(duration_s, "duration_s")?,
                false,
                stream::MAX_DURATION_S,
            )?,
            rate_scale: opt(rate_scale, "rate_scale", 1.0)?,
        };
        p.validate()?;
        Ok(PhaseSpec(p))
    }

    #[getter]
    fn duration_s(&self) -> f64 {
        self.0.duration_ns as f64 / 1e9
    }

    #[getter]
    fn rate_scale(&self) -> f64 {
        self.0.rate_scale
    }

    fn __repr__(&self) -> String {
        format!("PhaseSpec(duration_s={}, rate_scale={})", self.0.duration_ns as f64 / 1e9, self.0.rate_scale)
    }
}

/// One stream of signed test frames, validated against everything but the port.
#[pyclass(frozen, module = "netrig._native")]
#[derive(Debug, Clone)]
pub struct StreamSpec(pub StreamConfig);

#[pymethods]
impl StreamSpec {
    #[new]
    #[pyo3(
        signature = (*, frame_size, rate, name=None, tx_port=None, rx_port=None, src_mac=None, dst_mac=None,
                     src_ip=None, dst_ip=None, src_port=None, dst_port=None, vlan=None, ttl=None,
                     udp_checksum=None, flows=None, line_rate_bps=None, protocol=None, tcp_flags=None,
                     tcp_seq=None, ethertype=None, outer_vlan=None, pcap=None, pcap_stamp=None),
        text_signature = "(*, frame_size, rate, name='', tx_port=0, rx_port=1, src_mac='02:00:00:00:00:01', \
                          dst_mac='02:00:00:00:00:02', src_ip='198.18.0.1', dst_ip='198.19.0.1', src_port=1024, \
                          dst_port=1024, vlan=None, ttl=64, udp_checksum=False, flows=None, line_rate_bps=None, \
                          protocol='udp', tcp_flags='A', tcp_seq=0, ethertype=0x88b5, outer_vlan=None, pcap=None, \
                          pcap_stamp=False)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        frame_size: &Bound<'_, PyAny>,
        rate: &Bound<'_, PyAny>,
        name: Option<&Bound<'_, PyAny>>,
        tx_port: Option<&Bound<'_, PyAny>>,
        rx_port: Option<&Bound<'_, PyAny>>,
        src_mac: Option<&Bound<'_, PyAny>>,
        dst_mac: Option<&Bound<'_, PyAny>>,
        src_ip: Option<&Bound<'_, PyAny>>,
        dst_ip: Option<&Bound<'_, PyAny>>,
        src_port: Option<&Bound<'_, PyAny>>,
        dst_port: Option<&Bound<'_, PyAny>>,
        vlan: Option<&Bound<'_, PyAny>>,
        ttl: Option<&Bound<'_, PyAny>>,
        udp_checksum: Option<&Bound<'_, PyAny>>,
        flows: Option<&Bound<'_, PyAny>>,
        line_rate_bps: Option<&Bound<'_, PyAny>>,
        protocol: Option<&Bound<'_, PyAny>>,
        tcp_flags: Option<&Bound<'_, PyAny>>,
        tcp_seq: Option<&Bound<'_, PyAny>>,
        ethertype: Option<&Bound<'_, PyAny>>,
        outer_vlan: Option<&Bound<'_, PyAny>>,
        pcap: Option<&Bound<'_, PyAny>>,
        pcap_stamp: Option<&Bound<'_, PyAny>>,
    ) -> Result<Self> {
        let d = StreamConfig::new("");
        let pcap: Option<String> = opt(pcap, "pcap", None)?;
        let pcap_stamp: bool = opt(pcap_stamp, "pcap_stamp", false)?;
        let replay = match pcap {
            Some(path) => Some(std::sync::Arc::new(Replay::load(&path, pcap_stamp)?)),
            None if pcap_stamp => {
                return Err(config("pcap_stamp", "stamps a capture's frames: give the capture (pcap) too"))
            }
            None => None,
        };
        let flags: String = opt(tcp_flags, "tcp_flags", stream::tcp_flags_str(stream::DEFAULT_TCP_FLAGS))?;
        let protocol = stream::parse_protocol(
            &opt::<String>(protocol, "protocol", "udp".into())?,
            stream::parse_tcp_flags(&flags)?,
            opt(tcp_seq, "tcp_seq", 0)?,
            opt(ethertype, "ethertype", stream::DEFAULT_RAW_ETHERTYPE)?,
        )?;
        let s = StreamConfig {
            outer_vlan: opt(outer_vlan, "outer_vlan", None)?,
            protocol,
            name: opt(name, "name", String::new())?,
            tx_port: opt(tx_port, "tx_port", d.tx_port)?,
            rx_port: opt(rx_port, "rx_port", d.rx_port)?,
            src_mac: mac(src_mac, "src_mac", d.src_mac)?,
            dst_mac: mac(dst_mac, "dst_mac", d.dst_mac)?,
            vlan: opt(vlan, "vlan", None)?,
            src_ip: ip(src_ip, "src_ip", d.src_ip)?,
            dst_ip: ip(dst_ip, "dst_ip", d.dst_ip)?,
            src_port: opt(src_port, "src_port", d.src_port)?,
            dst_port: opt(dst_port, "dst_port", d.dst_port)?,
            ttl: opt(ttl, "ttl", d.ttl)?,
            udp_checksum: opt(udp_checksum, "udp_checksum", d.udp_checksum)?,
            frame_size: instance::<FrameSizeSpec>(frame_size, "frame_size")?.0,
            flows: match flows {
                Some(f) if !f.is_none() => instance::<FlowSpec>(f, "flows")?.0,
                _ => d.flows,
            },
            rate: instance::<RateSpec>(rate, "rate")?.0,
            stop: d.stop,
            line_rate_bps: opt::<Option<f64>>(line_rate_bps, "line_rate_bps", None)?
                .map(stream::line_rate_bps)
                .transpose()?,
            replay,
        };
        s.validate()?;
        Ok(StreamSpec(s))
    }

    #[getter]
    fn name(&self) -> &str {
        &self.0.name
    }

    #[getter]
    fn tx_port(&self) -> usize {
        self.0.tx_port
    }

    #[getter]
    fn rx_port(&self) -> usize {
        self.0.rx_port
    }

    #[getter]
    fn frame_size(&self) -> FrameSizeSpec {
        FrameSizeSpec(self.0.frame_size.clone())
    }

    #[getter]
    fn rate(&self) -> RateSpec {
        RateSpec(self.0.rate)
    }

    #[getter]
    fn flows(&self) -> FlowSpec {
        FlowSpec(self.0.flows)
    }

    #[getter]
    fn line_rate_bps(&self) -> Option<f64> {
        self.0.line_rate_bps.map(|b| b as f64)
    }

    /// `udp`, `tcp`, `icmp` or `raw`.
    #[getter]
    fn protocol(&self) -> &'static str {
        self.0.protocol.name()
    }

    /// TCP flags as letters (`None` unless TCP).
    #[getter]
    fn tcp_flags(&self) -> Option<String> {
        match self.0.protocol {
            stream::Proto::Tcp { flags, .. } => Some(stream::tcp_flags_str(flags)),
            _ => None,
        }
    }

    /// The EtherType of a raw stream (`None` unless raw).
    #[getter]
    fn ethertype(&self) -> Option<u16> {
        match self.0.protocol {
            stream::Proto::Raw { ethertype } => Some(ethertype),
            _ => None,
        }
    }

    #[getter]
    fn vlan(&self) -> Option<u16> {
        self.0.vlan
    }

    #[getter]
    fn outer_vlan(&self) -> Option<u16> {
        self.0.outer_vlan
    }

    /// The capture a replay stream sends (`None`: frames built from the template).
    #[getter]
    fn pcap(&self) -> Option<String> {
        self.0.replay.as_ref().map(|r| r.path.clone())
    }

    /// A replay stamps the signature into the frames with room for it.
    #[getter]
    fn pcap_stamp(&self) -> bool {
        self.0.replay.as_ref().is_some_and(|r| r.stamp)
    }

    /// Frames of the capture (one pass), `None` unless a replay.
    #[getter]
    fn pcap_frames(&self) -> Option<u64> {
        self.0.replay.as_ref().map(|r| r.frames_per_pass())
    }

    /// Mean frame size in bytes incl. FCS (a replay: the capture's, short frames counted as 64).
    #[getter]
    fn mean_frame_size(&self) -> f64 {
        self.0.mean_size()
    }

    /// Frames/s this stream asks for (`None` for `max`).
    #[getter]
    fn intended_rate_pps(&self) -> Result<Option<f64>> {
        let r = self.0.intended_rate_pps()?;
        Ok(r.is_finite().then_some(r))
    }

    fn __repr__(&self) -> String {
        format!("StreamSpec({:?})", self.0)
    }
}

/// A tester port: an interface (in a network namespace, optionally) and how to drive it.
#[pyclass(frozen, eq, hash, module = "netrig._native")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Port(pub PortSpec);

#[pymethods]
impl Port {
    #[new]
    #[pyo3(
        signature = (ifname, netns=None, io=None, queues=None, ring_frames=None, busy_poll_us=None, *,
                     i_know_this_is_live=None, control_to_kernel=None),
        text_signature = "(ifname, netns=None, io='auto', queues=1, ring_frames=0, busy_poll_us=0, *, \
                          i_know_this_is_live=False, control_to_kernel=False)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        ifname: &Bound<'_, PyAny>,
        netns: Option<&Bound<'_, PyAny>>,
        io: Option<&Bound<'_, PyAny>>,
        queues: Option<&Bound<'_, PyAny>>,
        ring_frames: Option<&Bound<'_, PyAny>>,
        busy_poll_us: Option<&Bound<'_, PyAny>>,
        i_know_this_is_live: Option<&Bound<'_, PyAny>>,
        control_to_kernel: Option<&Bound<'_, PyAny>>,
    ) -> Result<Self> {
        let d = PortSpec::new("");
        let io: String = opt(io, "io", "auto".into())?;
        let p = PortSpec {
            ifname: req(ifname, "ifname")?,
            netns: opt(netns, "netns", None)?,
            backend: Backend::from_io_mode(&io)?,
            queues: opt(queues, "queues", d.queues)?,
            ring_frames: opt(ring_frames, "ring_frames", d.ring_frames)?,
            receive: d.receive,
            busy_poll_us: opt(busy_poll_us, "busy_poll_us", d.busy_poll_us)?,
            transmit: d.transmit,
            live_ok: opt(i_know_this_is_live, "i_know_this_is_live", d.live_ok)?,
            max_frame_len: d.max_frame_len,
            rx_beyond_udp: d.rx_beyond_udp,
            rx_all: d.rx_all,
            control_to_kernel: opt(control_to_kernel, "control_to_kernel", d.control_to_kernel)?,
            rx_stamps: d.rx_stamps,
        };
        p.validate()?;
        Ok(Port(p))
    }

    #[getter]
    fn ifname(&self) -> &str {
        &self.0.ifname
    }

    #[getter]
    fn netns(&self) -> Option<&str> {
        self.0.netns.as_deref()
    }

    #[getter]
    fn io(&self) -> &'static str {
        self.0.io_mode()
    }

    #[getter]
    fn queues(&self) -> usize {
        self.0.queues
    }

    #[getter]
    fn ring_frames(&self) -> usize {
        self.0.ring_frames
    }

    /// AF_XDP busy polling: SO_BUSY_POLL microseconds with SO_PREFER_BUSY_POLL (0 = off).
    #[getter]
    fn busy_poll_us(&self) -> u32 {
        self.0.busy_poll_us
    }

    /// The transmit guard is overridden for this port (the user said it may be a live network).
    #[getter]
    fn i_know_this_is_live(&self) -> bool {
        self.0.live_ok
    }

    /// The kernel gets the port's ARP, ND, ICMP and LLDP frames (its devices and lldpd answer them).
    #[getter]
    fn control_to_kernel(&self) -> bool {
        self.0.control_to_kernel
    }

    /// Interface facts: ifindex, MTU, MAC, speed, driver, queues.
    fn info(&self, py: Python<'_>) -> Result<InterfaceInfo> {
        crate::interface_facts(py, &self.0.ifname, self.0.netns.as_deref())
    }

    fn __repr__(&self) -> String {
        let p = &self.0;
        format!(
            "Port(ifname={:?}, netns={:?}, io={:?}, queues={}, ring_frames={}, busy_poll_us={}{})",
            p.ifname,
            p.netns,
            p.io_mode(),
            p.queues,
            p.ring_frames,
            p.busy_poll_us,
            if p.live_ok { ", i_know_this_is_live=True" } else { "" }
        )
    }
}

/// Ports, streams and how the trial runs; stream port indices are checked against `ports`.
#[pyclass(frozen, module = "netrig._native")]
#[derive(Debug, Clone)]
pub struct TrialSpec {
    pub ports: Vec<PortSpec>,
    pub config: TrialConfig,
}

#[pymethods]
impl TrialSpec {
    #[new]
    #[pyo3(
        signature = (ports, streams, stop, *, drain_s=None, warmup_s=None, learning=None, late_s=None, tx_cpus=None,
                     rx_cpus=None, receive=None, max_flow_results=None, pacing=None, max_stretch_pct=None,
                     phases=None, interval_s=None, gap_slots=None),
        text_signature = "(ports, streams, stop, *, drain_s=..., warmup_s=0.0, learning=True, late_s=None, \
                          tx_cpus=(), rx_cpus=(), receive=True, max_flow_results=1024, pacing='smooth', \
                          max_stretch_pct=2.0, phases=(), interval_s=None, gap_slots=1)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        ports: &Bound<'_, PyAny>,
        streams: &Bound<'_, PyAny>,
        stop: &Bound<'_, PyAny>,
        drain_s: Option<&Bound<'_, PyAny>>,
        warmup_s: Option<&Bound<'_, PyAny>>,
        learning: Option<&Bound<'_, PyAny>>,
        late_s: Option<&Bound<'_, PyAny>>,
        tx_cpus: Option<&Bound<'_, PyAny>>,
        rx_cpus: Option<&Bound<'_, PyAny>>,
        receive: Option<&Bound<'_, PyAny>>,
        max_flow_results: Option<&Bound<'_, PyAny>>,
        pacing: Option<&Bound<'_, PyAny>>,
        max_stretch_pct: Option<&Bound<'_, PyAny>>,
        phases: Option<&Bound<'_, PyAny>>,
        interval_s: Option<&Bound<'_, PyAny>>,
        gap_slots: Option<&Bound<'_, PyAny>>,
    ) -> Result<Self> {
        let ports: Vec<PortSpec> = items(ports, "ports")?
            .iter()
            .enumerate()
            .map(|(i, p)| instance::<Port>(p, &format!("ports[{i}]")).map(|p| p.0))
            .collect::<Result<_>>()?;
        let stop = instance::<StopSpec>(stop, "stop")?.0;
        let streams: Vec<StreamConfig> = items(streams, "streams")?
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut s = instance::<StreamSpec>(s, &format!("streams[{i}]"))?.0;
                s.stop = stop;
                Ok(s)
            })
            .collect::<Result<_>>()?;
        let d = TrialConfig::default();
        let seconds = |v: Option<&Bound<'_, PyAny>>, field: &str, max_s: f64| -> Result<Option<u64>> {
            match opt::<Option<f64>>(v, field, None)? {
                None => Ok(None),
                // A late threshold of 0 would make every frame late.
                Some(s) => Ok(Some(stream::seconds_to_ns(field, s, field != "late_s", max_s)?)),
            }
        };
        let config = TrialConfig {
            streams,
            drain_ns: seconds(drain_s, "drain_s", stream::MAX_DRAIN_S)?.unwrap_or(DEFAULT_DRAIN_NS),
            warmup_ns: seconds(warmup_s, "warmup_s", stream::MAX_DURATION_S)?.unwrap_or(d.warmup_ns),
            learning: opt(learning, "learning", d.learning)?,
            late_ns: seconds(late_s, "late_s", stream::MAX_DRAIN_S)?,
            tx_cpus: opt(tx_cpus, "tx_cpus", d.tx_cpus)?,
            rx_cpus: opt(rx_cpus, "rx_cpus", d.rx_cpus)?,
            max_flow_results: opt(max_flow_results, "max_flow_results", d.max_flow_results)?,
            receive: opt(receive, "receive", d.receive)?,
            pacing: match pacing {
                None => d.pacing,
                Some(v) => Pacing::parse(&req::<String>(v, "pacing")?)?,
            },
            max_stretch_ratio: opt(max_stretch_pct, "max_stretch_pct", d.max_stretch_ratio * 100.0)? / 100.0,
            phases: match phases {
                None => Vec::new(),
                Some(v) => items(v, "phases")?
                    .iter()
                    .enumerate()
                    .map(|(i, p)| instance::<PhaseSpec>(p, &format!("phases[{i}]")).map(|p| p.0))
                    .collect::<Result<_>>()?,
            },
            interval_ns: match opt::<Option<f64>>(interval_s, "interval_s", None)? {
                None => 0,
                Some(v) => stream::seconds_to_ns("interval_s", v, false, stream::MAX_DURATION_S)?,
            },
            gap_slots: opt(gap_slots, "gap_slots", d.gap_slots)?,
        };
        config.validate(ports.len())?;
        Ok(TrialSpec { ports, config })
    }

    fn __repr__(&self) -> String {
        format!("TrialSpec(ports={:?}, config={:?})", self.ports, self.config)
    }
}

/// The items of a list or tuple argument.
pub(crate) fn items<'py>(v: &Bound<'py, PyAny>, field: &str) -> Result<Vec<Bound<'py, PyAny>>> {
    if v.is_instance_of::<pyo3::types::PyString>() {
        return Err(config(field, "must be a list or tuple"));
    }
    let it = v.try_iter().map_err(|_| config(field, "must be a list or tuple"))?;
    it.collect::<PyResult<Vec<_>>>().map_err(|e| config(field, e.to_string()))
}
