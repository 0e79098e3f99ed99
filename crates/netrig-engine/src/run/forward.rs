//! The forwarder (`netrig forward`): the host as the device under test, like DPDK testpmd/l2fwd.
//!
//! Every port is opened with one backend (af_xdp, af_packet, socket) and `queues` queues; one
//! worker per (port, queue), pinned to a CPU, receives a batch on that queue, rewrites it as the
//! mode says and sends it out of the egress port's queue with the same index:
//!
//! ```text
//!  port p, queue q ──RxQueue::recv──▶ batch (copied out of the ring) ──rewrite──▶ TxQueue::send ──▶ port egress(p), queue q
//! ```
//!
//! Modes: `io` (unchanged, ports paired 0↔1, 2↔3, an odd last port to itself), `mac` (source MAC
//! := the egress port's MAC, destination := the egress port's peer MAC), `macswap` (swap the
//! MACs and send back out of the ingress port), `rxonly` (count and drop), `l2fwd` (like `mac`,
//! ports strictly in pairs as DPDK's l2fwd). The peer MAC of a port defaults to
//! `02:00:00:00:00:<port index>` (testpmd's and l2fwd's default).
//!
//! Counters per port and queue (rx/tx frames and bytes, frames dropped because the egress queue
//! stayed full, the backend's ring drops) are atomics each written by one worker once per batch,
//! readable at any time ([`Forwarder::stats`]). [`Forwarder::stop`] stops the workers, flushes
//! what they queued and closes the ports, which detaches the XDP programs (BPF links).
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{ConfigError, EngineError, PortError};
use crate::fault::{FaultConfig, FaultLog, FaultyTx};
use crate::open::open_port;
use crate::pin::{PinFailure, PinLog};
use crate::port::{Port, PortCaps, PortSpec, RxQueue, TxQueue};
use crate::sys::xdp_redirect::{self, Action, MacRewrite, XdpPort, XdpRedirect};
use crate::sys::{cpu, ifinfo, netns};

/// Forwarding modes as users name them.
pub const FORWARD_MODES: &[&str] = &["io", "mac", "macswap", "rxonly", "l2fwd"];
/// Most ports one forwarder drives.
pub const MAX_FORWARD_PORTS: usize = 16;
/// Largest receive/transmit batch.
pub const MAX_BATCH: usize = 512;
/// Default batch (testpmd's burst is 32; 64 suits the engine's backends).
pub const DEFAULT_BATCH: usize = 64;
/// Times a send that made no progress is retried before the rest of the batch is dropped.
const TX_RETRIES: u32 = 32;
/// How long an idle worker waits for frames before it looks at the stop flag again.
const RX_WAIT: Duration = Duration::from_millis(20);
/// The receive wait while the egress still holds frames (a fault injector's delays): how late a
/// delayed frame may leave once no frame arrives to carry it out.
const PENDING_WAIT: Duration = Duration::from_millis(1);
/// How often a worker refreshes the backend's drop counters.
const STATS_EVERY: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ForwardMode {
    Io,
    Mac,
    MacSwap,
    RxOnly,
    L2fwd,
}

impl ForwardMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ForwardMode::Io => "io",
            ForwardMode::Mac => "mac",
            ForwardMode::MacSwap => "macswap",
            ForwardMode::RxOnly => "rxonly",
            ForwardMode::L2fwd => "l2fwd",
        }
    }

    /// Field: `mode`.
    pub fn from_name(s: &str) -> Result<ForwardMode, ConfigError> {
        Ok(match s {
            "io" => ForwardMode::Io,
            "mac" => ForwardMode::Mac,
            "macswap" => ForwardMode::MacSwap,
            "rxonly" => ForwardMode::RxOnly,
            "l2fwd" => ForwardMode::L2fwd,
            _ => {
                return Err(ConfigError::new(
                    "mode",
                    format!("{s:?} is not a forwarding mode: use one of {}", FORWARD_MODES.join(", ")),
                ))
            }
        })
    }

    /// The mode rewrites MAC addresses towards a peer (`mac`, `l2fwd`).
    pub fn uses_peer_macs(self) -> bool {
        matches!(self, ForwardMode::Mac | ForwardMode::L2fwd)
    }
}

/// The port frames received on port `p` (of `n`) leave by; `None` for `rxonly`.
pub fn egress(mode: ForwardMode, n: usize, p: usize) -> Option<usize> {
    match mode {
        ForwardMode::RxOnly => None,
        ForwardMode::MacSwap => Some(p),
        ForwardMode::Io | ForwardMode::Mac | ForwardMode::L2fwd => Some(if p ^ 1 < n { p ^ 1 } else { p }),
    }
}

/// The default peer MAC of port `p`: `02:00:00:00:00:<p>`, as testpmd and l2fwd use.
pub fn default_peer_mac(p: usize) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, p as u8]
}

/// What a worker does to every frame before sending it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rewrite {
    /// Leave the frame as it is.
    None,
    /// Destination and source MAC set to these.
    SetMacs { dst: [u8; 6], src: [u8; 6] },
    /// Destination and source MAC swapped.
    Swap,
}

impl Rewrite {
    /// Apply to one frame in place (frames shorter than the two MACs are left alone).
    #[inline]
    pub fn apply(self, f: &mut [u8]) {
        if f.len() < 12 {
            return;
        }
        match self {
            Rewrite::None => {}
            Rewrite::SetMacs { dst, src } => {
                f[..6].copy_from_slice(&dst);
                f[6..12].copy_from_slice(&src);
            }
            Rewrite::Swap => {
                let (d, s) = f[..12].split_at_mut(6);
                d.swap_with_slice(s);
            }
        }
    }
}

/// The forwarder's configuration.
#[derive(Debug, Clone)]
pub struct ForwardConfig {
    /// The ports; all with the same backend choice and number of queues.
    pub ports: Vec<PortSpec>,
    pub mode: ForwardMode,
    /// Per port: the destination MAC of frames leaving it (`mac`, `l2fwd`); empty = defaults,
    /// else one entry per port (`None` = default).
    pub peer_macs: Vec<Option<[u8; 6]>>,
    /// CPUs for the workers: worker `i` (port-major, then queue) on `cpus[i % len]`; empty = `i`
    /// modulo the online CPUs.
    pub cpus: Vec<usize>,
    /// Frames per receive batch, 1..=512.
    pub batch: usize,
    /// Forward in the kernel (`--backend xdp`): an XDP program per port redirects frames through
    /// a DEVMAP ([`crate::sys::xdp_redirect`]); no workers, queues, CPUs or batches.
    pub xdp_redirect: bool,
    /// A seeded fault injector on every egress queue ([`crate::fault`], worker `i` seeded `seed +
    /// i`): a DUT that drops, duplicates and reorders as it says, for testing the tester (this
    /// kernel has no netem). What it did: [`Forwarder::fault_log`].
    pub faults: Option<FaultConfig>,
}

impl ForwardConfig {
    pub fn new(ports: Vec<PortSpec>, mode: ForwardMode) -> ForwardConfig {
        ForwardConfig {
            ports,
            mode,
            peer_macs: Vec::new(),
            cpus: Vec::new(),
            batch: DEFAULT_BATCH,
            xdp_redirect: false,
            faults: None,
        }
    }

    /// Everything checkable without opening a port. Fields: `ports`, `queues`, `peer_mac`,
    /// `cpus`, `batch`, and the port fields of [`PortSpec::validate`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        let n = self.ports.len();
        if !(1..=MAX_FORWARD_PORTS).contains(&n) {
            return Err(ConfigError::new("ports", format!("give 1..{MAX_FORWARD_PORTS} ports (got {n})")));
        }
        let mut seen = HashSet::new();
        for p in &self.ports {
            p.validate()?;
            if !seen.insert((p.ifname.as_str(), p.netns.as_deref())) {
                return Err(ConfigError::new("ports", format!("{} is given twice: name each port once", p.ifname)));
            }
        }
        let q = self.ports[0].queues;
        if let Some(p) = self.ports.iter().find(|p| p.queues != q) {
            return Err(ConfigError::new(
                "queues",
                format!(
                    "every port needs the same number of queues ({} has {}, {} has {q})",
                    p.ifname, p.queues, self.ports[0].ifname
                ),
            ));
        }
        if self.mode == ForwardMode::L2fwd && !n.is_multiple_of(2) {
            return Err(ConfigError::new(
                "ports",
                format!("l2fwd forwards between port pairs: give an even number of ports (got {n}), or use mode mac"),
            ));
        }
        if !self.peer_macs.is_empty() {
            if !self.mode.uses_peer_macs() {
                return Err(ConfigError::new(
                    "peer_mac",
                    format!(
                        "mode {} rewrites no MAC towards a peer: peer MACs are for modes mac and l2fwd",
                        self.mode.as_str()
                    ),
                ));
            }
            if self.peer_macs.len() != n {
                return Err(ConfigError::new(
                    "peer_mac",
                    format!("give one peer MAC per port ({} for {n} ports)", self.peer_macs.len()),
                ));
            }
        }
        let online = cpu::online_cpus();
        if let Some(c) = self.cpus.iter().find(|&&c| c >= online) {
            return Err(ConfigError::new(
                "cpus",
                format!("CPU {c} does not exist (this machine has CPUs 0..{})", online - 1),
            ));
        }
        if !(1..=MAX_BATCH).contains(&self.batch) {
            return Err(ConfigError::new("batch", format!("must be 1..{MAX_BATCH} frames (got {})", self.batch)));
        }
        if let Some(f) = &self.faults {
            f.validate()?;
        }
        if self.xdp_redirect {
            self.validate_xdp()?;
        }
        Ok(())
    }

    /// What the in-kernel backend cannot honour is refused, not ignored.
    fn validate_xdp(&self) -> Result<(), ConfigError> {
        const WHY: &str = "the xdp backend forwards in the kernel's receive path, on every queue, on the CPU \
                           that receives";
        if self.ports[0].queues != 1 {
            return Err(ConfigError::new("queues", format!("{WHY}: leave the queue count out")));
        }
        if !self.cpus.is_empty() {
            return Err(ConfigError::new("cpus", format!("{WHY}: there are no workers to pin")));
        }
        if self.batch != DEFAULT_BATCH {
            return Err(ConfigError::new("batch", format!("{WHY}: there is no receive batch to size")));
        }
        if self.faults.is_some() {
            return Err(ConfigError::new(
                "faults",
                format!("{WHY}: no worker to inject them (use af_xdp or af_packet)"),
            ));
        }
        if let Some(p) = self.ports.iter().find(|p| p.backend.is_some()) {
            return Err(ConfigError::new(
                "io",
                format!("{}: with the xdp backend the ports have no I/O backend of their own (use auto)", p.ifname),
            ));
        }
        if let Some(p) = self.ports.iter().find(|p| p.netns != self.ports[0].netns) {
            return Err(ConfigError::new(
                "netns",
                format!("{}: a DEVMAP redirects only within one network namespace: put every port in one", p.ifname),
            ));
        }
        Ok(())
    }

    /// The destination MAC of frames leaving port `p`.
    pub fn peer_mac(&self, p: usize) -> [u8; 6] {
        self.peer_macs.get(p).copied().flatten().unwrap_or_else(|| default_peer_mac(p))
    }
}

/// Counters of one port and queue; each field has one writer (the worker of that queue for rx,
/// the worker that sends out of it for tx).
#[derive(Debug, Default)]
struct Counters {
    rx_frames: AtomicU64,
    rx_bytes: AtomicU64,
    tx_frames: AtomicU64,
    tx_bytes: AtomicU64,
    tx_drops: AtomicU64,
    rx_ring_drops: AtomicU64,
    tx_errors: AtomicU64,
}

/// A snapshot of one port and queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForwardQueueStats {
    pub port: usize,
    pub ifname: String,
    pub queue: usize,
    /// The CPU the worker receiving on this queue is pinned to (`None`: pinning failed).
    pub cpu: Option<usize>,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Frames received here or forwarded to here and dropped by the forwarder: the egress queue
    /// stayed full, or the frame was larger than the egress port carries.
    pub tx_drops: u64,
    /// Frames the backend lost before the worker saw them (ring full).
    pub rx_ring_drops: u64,
    /// Frames the kernel rejected on transmit.
    pub tx_errors: u64,
}

/// One worker's job.
struct Job {
    rx: Box<dyn RxQueue>,
    tx: Option<Box<dyn TxQueue>>,
    rewrite: Rewrite,
    /// Largest frame the egress port carries.
    tx_max: usize,
    rx_ctr: usize,
    tx_ctr: usize,
    cpu: usize,
    name: String,
}

/// One port of a forwarder, as opened.
#[derive(Debug, Clone)]
pub struct ForwardPort {
    pub ifname: String,
    /// `af_xdp`, `af_packet`, `socket`, or `xdp` (in the kernel).
    pub backend: String,
    pub queues: usize,
    pub mac: [u8; 6],
    pub zero_copy: bool,
    pub max_frame_len: usize,
    /// What was probed and chosen.
    pub notes: String,
}

/// A running forwarder.
pub struct Forwarder {
    stop: Arc<AtomicBool>,
    workers: Vec<(String, JoinHandle<Result<(), PortError>>)>,
    counters: Arc<Vec<Counters>>,
    /// (port, ifname, queue, cpu) per counter slot.
    labels: Vec<(usize, String, usize)>,
    pinned: Arc<Vec<AtomicU64>>,
    /// Workers the kernel would not pin (see `crate::pin`).
    pins: Arc<PinLog>,
    ports: Vec<Box<dyn Port>>,
    caps: Vec<PortCaps>,
    macs: Vec<[u8; 6]>,
    failed: Arc<AtomicBool>,
    started: Instant,
    info: Vec<ForwardPort>,
    /// The in-kernel forwarder (`xdp_redirect`), with each port's egress.
    kernel: Option<(XdpRedirect, Vec<Option<usize>>)>,
    /// What the fault injector did (with `faults`), shared by every worker.
    fault_log: Option<Arc<Mutex<FaultLog>>>,
}

const NOT_PINNED: u64 = u64::MAX;

impl Forwarder {
    /// Open every port, every queue half, and start the workers. Nothing is forwarded when this
    /// fails (every opened port is closed again).
    pub fn start(cfg: &ForwardConfig) -> Result<Forwarder, EngineError> {
        cfg.validate()?;
        if cfg.xdp_redirect {
            return Self::start_kernel(cfg);
        }
        let n = cfg.ports.len();
        let queues = cfg.ports[0].queues;
        let transmit = cfg.mode != ForwardMode::RxOnly;
        let mut ports = Vec::with_capacity(n);
        let mut macs = Vec::with_capacity(n);
        for spec in &cfg.ports {
            let spec = PortSpec { receive: true, transmit, rx_all: true, rx_stamps: false, ..spec.clone() };
            let mut p = open_port(&spec)?;
            if spec.backend.is_none() {
                p.prepare_rx()?;
            }
            let info = netns::in_netns(spec.netns.as_deref(), || ifinfo::ifinfo(&spec.ifname, spec.netns.as_deref()))?;
            macs.push(info.mac);
            ports.push(p);
        }
        let mut jobs = Vec::with_capacity(n * queues);
        let fault_log = Arc::new(Mutex::new(FaultLog::default()));
        let online = cpu::online_cpus();
        let mut labels = Vec::with_capacity(n * queues);
        // Open every RX half first (attaches the XDP programs), then the TX halves.
        let mut rxs: Vec<Vec<Option<Box<dyn RxQueue>>>> = Vec::with_capacity(n);
        for p in ports.iter_mut() {
            let mut v = Vec::with_capacity(queues);
            for q in 0..queues {
                v.push(Some(p.open_rx(q)?));
            }
            rxs.push(v);
        }
        for (p, rx_halves) in rxs.iter_mut().enumerate() {
            for (q, rx) in rx_halves.iter_mut().enumerate() {
                labels.push((p, cfg.ports[p].ifname.clone(), q));
                let i = p * queues + q;
                let e = egress(cfg.mode, n, p);
                let tx =
                    e.map(|e| open_egress(ports[e].as_mut(), q, cfg.faults.as_ref(), i, &fault_log)).transpose()?;
                let rewrite = match (cfg.mode, e) {
                    (ForwardMode::MacSwap, _) => Rewrite::Swap,
                    (m, Some(e)) if m.uses_peer_macs() => Rewrite::SetMacs { dst: cfg.peer_mac(e), src: macs[e] },
                    _ => Rewrite::None,
                };
                let e = e.unwrap_or(p);
                jobs.push(Job {
                    rx: rx.take().expect("each RX half is opened once"),
                    tx,
                    rewrite,
                    tx_max: ports[e].caps().max_frame_len,
                    rx_ctr: i,
                    tx_ctr: e * queues + q,
                    cpu: if cfg.cpus.is_empty() { i % online } else { cfg.cpus[i % cfg.cpus.len()] },
                    name: format!("nr-fwd-p{p}q{q}"),
                });
            }
        }
        let caps: Vec<PortCaps> = ports.iter().map(|p| p.caps().clone()).collect();
        let info = caps
            .iter()
            .zip(&macs)
            .map(|(c, m)| ForwardPort {
                ifname: c.name.clone(),
                backend: c.backend.as_str().to_string(),
                queues: c.rx_queues,
                mac: *m,
                zero_copy: c.zero_copy,
                max_frame_len: c.max_frame_len,
                notes: c.notes.clone(),
            })
            .collect();
        let counters: Arc<Vec<Counters>> = Arc::new((0..n * queues).map(|_| Counters::default()).collect());
        let pinned: Arc<Vec<AtomicU64>> = Arc::new((0..n * queues).map(|_| AtomicU64::new(NOT_PINNED)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let failed = Arc::new(AtomicBool::new(false));
        let pins = Arc::new(PinLog::new());
        let mut fwd = Forwarder {
            stop: stop.clone(),
            workers: Vec::new(),
            counters: counters.clone(),
            labels,
            pinned: pinned.clone(),
            pins: pins.clone(),
            ports,
            caps,
            macs,
            failed: failed.clone(),
            started: Instant::now(),
            info,
            kernel: None,
            fault_log: cfg.faults.is_some().then_some(fault_log),
        };
        let batch = cfg.batch;
        for job in jobs {
            let (stop, counters, pinned, failed) = (stop.clone(), counters.clone(), pinned.clone(), failed.clone());
            let pins = pins.clone();
            let name = job.name.clone();
            let h = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || {
                    let slot = job.rx_ctr;
                    if pins.pin_self(job.cpu) {
                        pinned[slot].store(job.cpu as u64, Ordering::Relaxed);
                    }
                    let r = run_worker(job, batch, &stop, &counters);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    r
                })
                .map_err(|e| EngineError::Worker { name: name.clone(), message: format!("cannot start: {e}") })?;
            fwd.workers.push((name, h));
        }
        Ok(fwd)
    }

    /// The in-kernel forwarder: check the transmit guard, load and attach one program per port.
    fn start_kernel(cfg: &ForwardConfig) -> Result<Forwarder, EngineError> {
        let n = cfg.ports.len();
        let transmit = cfg.mode != ForwardMode::RxOnly;
        let netns_name = cfg.ports[0].netns.clone();
        let mut infos = Vec::with_capacity(n);
        for spec in &cfg.ports {
            let spec = PortSpec { receive: true, transmit, rx_all: true, rx_stamps: false, ..spec.clone() };
            crate::guard::check(&spec)?;
            infos.push(netns::in_netns(spec.netns.as_deref(), || ifinfo::ifinfo(&spec.ifname, spec.netns.as_deref()))?);
        }
        let egresses: Vec<Option<usize>> = (0..n).map(|p| egress(cfg.mode, n, p)).collect();
        let xports: Vec<XdpPort> = (0..n)
            .map(|p| {
                let e = egresses[p];
                let rewrite = match (cfg.mode, e) {
                    (ForwardMode::MacSwap, _) => MacRewrite::Swap,
                    (m, Some(e)) if m.uses_peer_macs() => MacRewrite::Set { dst: cfg.peer_mac(e), src: infos[e].mac },
                    _ => MacRewrite::None,
                };
                let action = match (cfg.mode, e) {
                    (ForwardMode::RxOnly, _) | (_, None) => Action::Drop,
                    // veth flushes XDP_TX frames to its peer only when the peer runs an XDP program;
                    // a redirect to the port itself is flushed either way (docs/forwarder.md).
                    (ForwardMode::MacSwap, _) if infos[p].driver == "veth" => Action::Redirect(p as u32),
                    (ForwardMode::MacSwap, _) => Action::Tx,
                    (_, Some(e)) => Action::Redirect(e as u32),
                };
                XdpPort { ifname: infos[p].name.clone(), ifindex: infos[p].ifindex, rewrite, action }
            })
            .collect();
        let kernel = netns::in_netns(netns_name.as_deref(), || XdpRedirect::attach(&xports, None))?;
        let info = infos
            .iter()
            .zip(&kernel.notes)
            .map(|(i, (_, note))| {
                let mut notes = format!("{note}; serves every receive queue ({} here)", i.rx_queues);
                if i.driver == "veth" && transmit {
                    notes += "; veth: frames redirected here reach the veth peer only if the peer has an XDP \
                              program or GRO on, else the kernel drops them silently";
                    if cfg.mode == ForwardMode::MacSwap {
                        notes += "; macswap redirects to the ingress port (veth flushes XDP_TX only to a peer \
                                  with an XDP program)";
                    }
                }
                ForwardPort {
                    ifname: i.name.clone(),
                    backend: "xdp".into(),
                    queues: 1,
                    mac: i.mac,
                    zero_copy: false,
                    max_frame_len: i.mtu + 14,
                    notes,
                }
            })
            .collect::<Vec<_>>();
        Ok(Forwarder {
            stop: Arc::new(AtomicBool::new(false)),
            workers: Vec::new(),
            counters: Arc::new(Vec::new()),
            labels: (0..n).map(|p| (p, infos[p].name.clone(), 0)).collect(),
            pinned: Arc::new(Vec::new()),
            pins: Arc::new(PinLog::new()),
            ports: Vec::new(),
            caps: Vec::new(),
            macs: infos.iter().map(|i| i.mac).collect(),
            failed: Arc::new(AtomicBool::new(false)),
            started: Instant::now(),
            info,
            kernel: Some((kernel, egresses)),
            fault_log: None,
        })
    }

    /// The in-kernel forwarder's counters, one entry per port (queue 0 stands for all queues):
    /// what port p received, what was forwarded out of p (by the programs of the ports whose
    /// egress p is) and what the programs could not redirect to p.
    fn kernel_stats(&self, k: &XdpRedirect, egresses: &[Option<usize>]) -> Vec<ForwardQueueStats> {
        let c: Vec<[u64; xdp_redirect::STAT_FIELDS]> = (0..egresses.len()).map(|p| k.counters(p)).collect();
        self.labels
            .iter()
            .map(|(p, ifname, _)| {
                let into = |f: usize| (0..egresses.len()).filter(|&q| egresses[q] == Some(*p)).map(|q| c[q][f]).sum();
                ForwardQueueStats {
                    port: *p,
                    ifname: ifname.clone(),
                    queue: 0,
                    cpu: None,
                    rx_frames: c[*p][xdp_redirect::RX_FRAMES],
                    rx_bytes: c[*p][xdp_redirect::RX_BYTES],
                    tx_frames: into(xdp_redirect::FWD_FRAMES),
                    tx_bytes: into(xdp_redirect::FWD_BYTES),
                    tx_drops: into(xdp_redirect::FWD_FAILED),
                    rx_ring_drops: 0,
                    tx_errors: 0,
                }
            })
            .collect()
    }

    /// Every port as opened (backend, MAC, notes).
    /// What the fault injector did (`None`: no `faults`); readable after [`Self::stop`].
    pub fn fault_log(&self) -> Option<Arc<Mutex<FaultLog>>> {
        self.fault_log.clone()
    }

    pub fn ports(&self) -> &[ForwardPort] {
        &self.info
    }

    /// Counters now, per port and queue (port-major).
    pub fn stats(&self) -> Vec<ForwardQueueStats> {
        if let Some((k, e)) = &self.kernel {
            return self.kernel_stats(k, e);
        }
        self.labels
            .iter()
            .enumerate()
            .map(|(i, (port, ifname, queue))| {
                let c = &self.counters[i];
                let pin = self.pinned[i].load(Ordering::Relaxed);
                ForwardQueueStats {
                    port: *port,
                    ifname: ifname.clone(),
                    queue: *queue,
                    cpu: (pin != NOT_PINNED).then_some(pin as usize),
                    rx_frames: c.rx_frames.load(Ordering::Relaxed),
                    rx_bytes: c.rx_bytes.load(Ordering::Relaxed),
                    tx_frames: c.tx_frames.load(Ordering::Relaxed),
                    tx_bytes: c.tx_bytes.load(Ordering::Relaxed),
                    tx_drops: c.tx_drops.load(Ordering::Relaxed),
                    rx_ring_drops: c.rx_ring_drops.load(Ordering::Relaxed),
                    tx_errors: c.tx_errors.load(Ordering::Relaxed),
                }
            })
            .collect()
    }

    /// What every port is (backend, XDP mode, zero-copy), as opened.
    pub fn caps(&self) -> &[PortCaps] {
        &self.caps
    }

    /// Every port's MAC address.
    pub fn macs(&self) -> &[[u8; 6]] {
        &self.macs
    }

    /// Workers that do not run on their CPU: the kernel refused the pin (see `crate::pin`; their
    /// queues' `cpu` is `None`); empty when every worker was pinned.
    pub fn pin_failures(&self) -> Vec<PinFailure> {
        self.pins.failures()
    }

    /// A worker ended with an error (the forwarder no longer forwards on that queue).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Seconds since the workers started.
    pub fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Stop the workers, close the ports (detaching XDP programs) and return the final counters;
    /// the first worker error, if any, is the error.
    pub fn stop(mut self) -> Result<Vec<ForwardQueueStats>, EngineError> {
        if let Some(last) = self.stop_kernel() {
            return Ok(last);
        }
        let first_error = self.shutdown();
        let stats = self.stats();
        match first_error {
            Some(e) => Err(e),
            None => Ok(stats),
        }
    }

    fn shutdown(&mut self) -> Option<EngineError> {
        self.stop.store(true, Ordering::Relaxed);
        let mut first = None;
        for (name, h) in self.workers.drain(..) {
            let r = match h.join() {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(EngineError::Port(e)),
                Err(_) => Some(EngineError::Worker { name, message: "the forwarding worker panicked".into() }),
            };
            if first.is_none() {
                first = r;
            }
        }
        self.ports.clear();
        first
    }

    /// Detach the in-kernel programs and free their maps, returning the last counters.
    fn stop_kernel(&mut self) -> Option<Vec<ForwardQueueStats>> {
        let (k, e) = self.kernel.take()?;
        let last = self.kernel_stats(&k, &e);
        drop(k);
        Some(last)
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Egress queue `q` of `port` for worker `i`: behind the fault injector (seeded `seed + i`, logging
/// into `log`) when there are `faults`.
fn open_egress(
    port: &mut dyn Port,
    q: usize,
    faults: Option<&FaultConfig>,
    i: usize,
    log: &Arc<Mutex<FaultLog>>,
) -> Result<Box<dyn TxQueue>, PortError> {
    let tx = port.open_tx(q)?;
    Ok(match faults {
        Some(f) => {
            Box::new(FaultyTx::new(tx, FaultConfig { seed: f.seed.wrapping_add(i as u64), ..f.clone() }, log.clone()))
        }
        None => tx,
    })
}

fn run_worker(mut job: Job, batch: usize, stop: &AtomicBool, counters: &[Counters]) -> Result<(), PortError> {
    let slot_len = job.tx_max.max(64);
    let mut buf = vec![0u8; batch * slot_len];
    let mut lens = vec![0usize; batch];
    let rx_c = &counters[job.rx_ctr];
    let tx_c = &counters[job.tx_ctr];
    let mut next_stats = Instant::now() + STATS_EVERY;
    let mut wait = RX_WAIT;
    let result = loop {
        if stop.load(Ordering::Relaxed) {
            break Ok(());
        }
        let mut n = 0usize;
        let mut bytes = 0u64;
        let mut oversize = 0u64;
        let got = match job.rx.recv(batch, wait, &mut |data, _meta| {
            bytes += data.len() as u64;
            if data.len() > slot_len {
                oversize += 1;
                return;
            }
            buf[n * slot_len..n * slot_len + data.len()].copy_from_slice(data);
            lens[n] = data.len();
            n += 1;
        }) {
            Ok(g) => g,
            Err(e) => break Err(e),
        };
        if got > 0 {
            rx_c.rx_frames.fetch_add(got as u64, Ordering::Relaxed);
            rx_c.rx_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        if let Some(tx) = job.tx.as_mut() {
            if oversize > 0 {
                tx_c.tx_drops.fetch_add(oversize, Ordering::Relaxed);
            }
            if n > 0 {
                for i in 0..n {
                    job.rewrite.apply(&mut buf[i * slot_len..i * slot_len + lens[i]]);
                }
                let mut sent = 0usize;
                let mut sent_bytes = 0u64;
                let mut tries = 0;
                while sent < n {
                    let mut k = sent;
                    let r = tx.send(n - sent, &mut |out: &mut [u8]| {
                        let len = lens[k].min(out.len());
                        out[..len].copy_from_slice(&buf[k * slot_len..k * slot_len + len]);
                        sent_bytes += len as u64;
                        k += 1;
                        len
                    });
                    match r {
                        Ok(0) => {
                            tries += 1;
                            if tries > TX_RETRIES {
                                break;
                            }
                            std::hint::spin_loop();
                        }
                        Ok(m) => sent += m,
                        Err(e) => return Err(e),
                    }
                }
                tx_c.tx_frames.fetch_add(sent as u64, Ordering::Relaxed);
                tx_c.tx_bytes.fetch_add(sent_bytes, Ordering::Relaxed);
                if sent < n {
                    tx_c.tx_drops.fetch_add((n - sent) as u64, Ordering::Relaxed);
                }
            } else if got == 0 {
                tx.flush()?;
                // Frames still queued (a fault injector's delayed ones): look again soon.
                wait = if tx.idle() { RX_WAIT } else { PENDING_WAIT };
            }
        }
        let now = Instant::now();
        if now >= next_stats {
            next_stats = now + STATS_EVERY;
            refresh_stats(&mut job, rx_c, tx_c);
        }
    };
    // Let what was queued leave before the ports close.
    if let Some(tx) = job.tx.as_mut() {
        let until = Instant::now() + Duration::from_millis(200);
        while !tx.idle() && Instant::now() < until {
            std::thread::sleep(PENDING_WAIT);
            if tx.flush().is_err() {
                break;
            }
        }
    }
    refresh_stats(&mut job, rx_c, tx_c);
    result
}

fn refresh_stats(job: &mut Job, rx_c: &Counters, tx_c: &Counters) {
    rx_c.rx_ring_drops.store(job.rx.stats().ring_drops, Ordering::Relaxed);
    if let Some(tx) = job.tx.as_ref() {
        tx_c.tx_errors.store(tx.stats().errors, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame() -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&[0xaa; 6]);
        f[6..12].copy_from_slice(&[0xbb; 6]);
        for (i, b) in f[12..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    }

    #[test]
    fn rewrites_touch_only_the_macs() {
        let orig = frame();
        let mut f = orig.clone();
        Rewrite::None.apply(&mut f);
        assert_eq!(f, orig);
        Rewrite::Swap.apply(&mut f);
        assert_eq!(&f[..6], &[0xbb; 6]);
        assert_eq!(&f[6..12], &[0xaa; 6]);
        assert_eq!(&f[12..], &orig[12..]);
        Rewrite::Swap.apply(&mut f);
        assert_eq!(f, orig, "swapping twice restores the frame");
        let (dst, src) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0x4e, 7]);
        Rewrite::SetMacs { dst, src }.apply(&mut f);
        assert_eq!(&f[..6], &dst);
        assert_eq!(&f[6..12], &src);
        assert_eq!(&f[12..], &orig[12..]);
        // Runts are left alone, not panicked on.
        let mut short = vec![1u8; 11];
        Rewrite::Swap.apply(&mut short);
        Rewrite::SetMacs { dst, src }.apply(&mut short);
        assert_eq!(short, vec![1u8; 11]);
    }

    #[test]
    fn modes_pair_ports_like_testpmd() {
        use ForwardMode::*;
        assert_eq!(egress(Io, 2, 0), Some(1));
        assert_eq!(egress(Io, 2, 1), Some(0));
        assert_eq!(egress(Io, 3, 2), Some(2), "an odd last port forwards to itself");
        assert_eq!(egress(Io, 1, 0), Some(0));
        assert_eq!(egress(Mac, 4, 2), Some(3));
        assert_eq!(egress(L2fwd, 4, 3), Some(2));
        assert_eq!(egress(MacSwap, 2, 1), Some(1));
        assert_eq!(egress(RxOnly, 2, 0), None);
        for m in FORWARD_MODES {
            assert_eq!(ForwardMode::from_name(m).unwrap().as_str(), *m);
        }
        assert_eq!(default_peer_mac(3), [2, 0, 0, 0, 0, 3]);
    }

    #[test]
    fn config_errors_name_the_field() {
        let ports = |n: usize| (0..n).map(|i| PortSpec::new(format!("eth{i}"))).collect::<Vec<_>>();
        let field = |c: ForwardConfig| c.validate().unwrap_err().field;
        ForwardConfig::new(ports(2), ForwardMode::Io).validate().unwrap();
        assert_eq!(ForwardMode::from_name("fwd").unwrap_err().field, "mode");
        assert_eq!(field(ForwardConfig::new(ports(0), ForwardMode::Io)), "ports");
        assert_eq!(field(ForwardConfig::new(ports(17), ForwardMode::Io)), "ports");
        assert_eq!(field(ForwardConfig::new(ports(3), ForwardMode::L2fwd)), "ports");
        let mut dup = ports(2);
        dup[1].ifname = "eth0".into();
        assert_eq!(field(ForwardConfig::new(dup, ForwardMode::Io)), "ports");
        let mut q = ports(2);
        q[1].queues = 2;
        assert_eq!(field(ForwardConfig::new(q, ForwardMode::Io)), "queues");
        let c = ForwardConfig { peer_macs: vec![None, None], ..ForwardConfig::new(ports(2), ForwardMode::Io) };
        assert_eq!(field(c), "peer_mac");
        let c = ForwardConfig { peer_macs: vec![None], ..ForwardConfig::new(ports(2), ForwardMode::Mac) };
        assert_eq!(field(c), "peer_mac");
        let c = ForwardConfig { peer_macs: vec![Some([2; 6]), None], ..ForwardConfig::new(ports(2), ForwardMode::Mac) };
        c.validate().unwrap();
        assert_eq!(c.peer_mac(0), [2; 6]);
        assert_eq!(c.peer_mac(1), default_peer_mac(1));
        assert_eq!(field(ForwardConfig { cpus: vec![4096], ..ForwardConfig::new(ports(2), ForwardMode::Io) }), "cpus");
        assert_eq!(field(ForwardConfig { batch: 0, ..ForwardConfig::new(ports(2), ForwardMode::Io) }), "batch");
        assert_eq!(field(ForwardConfig { batch: 513, ..ForwardConfig::new(ports(2), ForwardMode::Io) }), "batch");
        assert_eq!(field(ForwardConfig::new(vec![PortSpec::new("")], ForwardMode::Io)), "ifname");
        let faulty =
            |f: FaultConfig| ForwardConfig { faults: Some(f), ..ForwardConfig::new(ports(2), ForwardMode::Io) };
        faulty(FaultConfig { drop: 0.1, duplicate: 0.1, reorder: 0.1, ..Default::default() }).validate().unwrap();
        assert_eq!(field(faulty(FaultConfig { drop: -0.1, ..Default::default() })), "faults");
        assert_eq!(field(faulty(FaultConfig { drop: 0.7, reorder: 0.7, ..Default::default() })), "faults");
        let delays = |p, ns| FaultConfig { delays: vec![crate::fault::Delay { p, ns }], ..Default::default() };
        faulty(delays(0.5, 10_000_000_000)).validate().unwrap();
        for (p, ns) in [(1.5, 1_000_000), (0.5, 0), (0.5, 10_000_000_001)] {
            assert_eq!(field(faulty(delays(p, ns))), "faults", "{p} {ns}");
        }
        assert_eq!(field(faulty(FaultConfig { drop: 0.6, ..delays(0.5, 1) })), "faults");
        assert_eq!(field(faulty(FaultConfig { reorder: 0.1, reorder_distance: 0, ..Default::default() })), "faults");
        assert_eq!(field(ForwardConfig { xdp_redirect: true, ..faulty(FaultConfig::default()) }), "faults");
    }
}
