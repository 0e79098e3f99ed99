//! The capture application of the capture-method benchmark (`netrig capture`, `netrig
//! capture-bench`; lab report 002): the system under test is a packet-capture program on the
//! receiving side, and this is that program, one capture method at a time.
//!
//! ```text
//!  wire ──▶ kernel receive path ──▶ method's source (RxQueue) ──▶ process(frame) ──▶ Counts
//!           (softirq, RPS CPU)       recvfrom | recvmmsg |          find the netrig signature:
//!                                    threads (recvfrom ─▶ mutex     per trial tag frames/bytes,
//!                                      queue ─▶ processor thread)   warm-up and unsigned apart
//!                                    tpacket_v3 ring | libpcap |           │ published on request /
//!                                    af_xdp (XSK, copy mode)               ▼ every 50 ms
//!                                                                   Capture::stats() (any thread)
//! ```
//!
//! Every method does the same, minimal, real work per frame ([`Counts::frame`]): read the frame,
//! look for netrig's signature and count it (frames and bytes) under the sender's trial tag;
//! frames without one (IPv6 ND, another sender's) are counted apart as `foreign`, warm-up frames
//! as `warmup`. So the tester can ask "how many frames of *this* trial did the capture see?"
//! and nothing another trial sent inflates the answer. The method's own drop counter is read
//! with its own API: `PACKET_STATISTICS` `tp_drops` (recvfrom, recvmmsg, threads, tpacket_v3),
//! `pcap_stats` `ps_drop` (libpcap), `XDP_STATISTICS` `rx_dropped` + `rx_ring_full` (af_xdp);
//! `threads` also counts frames its hand-over queue had no room for (`queue_drops`).
//!
//! One worker thread (two for `threads`), pinned to the capture's CPU, owns the source and the
//! counters; it publishes a copy into a mutex every 50 ms and whenever [`Capture::stats`] asks
//! (a request counter the worker acknowledges after a receive that found the source empty, so
//! an answer given after the traffic stopped holds every frame that arrived).
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use netrig_wire::dissect;

use crate::error::{ConfigError, EngineError};
use crate::open::open_port;
use crate::pin::{PinFailure, PinLog};
use crate::port::{Backend, Port, PortSpec, RxQueue};
use crate::sys::capture::{PcapCapture, SocketCapture};
use crate::sys::cpu;

/// Capture methods as users name them, in the benchmark's order.
pub const CAPTURE_METHODS: &[&str] = &["recvfrom", "recvmmsg", "threads", "tpacket_v3", "libpcap", "af_xdp"];
/// Default `recvmmsg` batch (lab report 002 uses 10).
pub const DEFAULT_CAPTURE_BATCH: usize = 10;
/// Largest `recvmmsg` batch.
pub const MAX_CAPTURE_BATCH: usize = 1024;
/// Frames a ring method (tpacket_v3, libpcap, af_xdp) takes per call at most.
const RING_BATCH: usize = 256;
/// How long a receive waits before the worker looks at its flags again.
const WAIT: Duration = Duration::from_millis(20);
/// How often the worker publishes its counters unasked.
const PUBLISH_EVERY: Duration = Duration::from_millis(50);
/// Capacity of the `threads` method's hand-over queue, frames.
const QUEUE_FRAMES: usize = 4096;
/// Trial tags kept (the oldest are forgotten beyond this).
const MAX_TAGS: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureMethod {
    Recvfrom,
    Recvmmsg,
    Threads,
    TpacketV3,
    Libpcap,
    AfXdp,
}

impl CaptureMethod {
    pub fn as_str(self) -> &'static str {
        CAPTURE_METHODS[self as usize]
    }

    /// The method called `name`. Field: `method`.
    pub fn from_name(name: &str) -> Result<Self, ConfigError> {
        use CaptureMethod::*;
        Ok(match name {
            "recvfrom" => Recvfrom,
            "recvmmsg" => Recvmmsg,
            "threads" => Threads,
            "tpacket_v3" => TpacketV3,
            "libpcap" => Libpcap,
            "af_xdp" => AfXdp,
            _ => {
                return Err(ConfigError::new(
                    "method",
                    format!("{name:?} is not a capture method: use one of {}", CAPTURE_METHODS.join(", ")),
                ))
            }
        })
    }

    /// Where the method's own drop counter comes from.
    pub fn drops_source(self) -> &'static str {
        match self {
            CaptureMethod::Libpcap => "pcap_stats ps_drop",
            CaptureMethod::AfXdp => "XDP_STATISTICS rx_dropped + rx_ring_full",
            _ => "PACKET_STATISTICS tp_drops",
        }
    }
}

/// What to capture and how.
#[derive(Debug, Clone)]
pub struct CaptureConfig {
    pub method: CaptureMethod,
    pub ifname: String,
    /// Network namespace of the interface (`None`: the caller's).
    pub netns: Option<String>,
    /// CPU the worker(s) are pinned to (`None`: not pinned).
    pub cpu: Option<usize>,
    /// `recvmmsg` messages per call (other methods ignore it).
    pub batch: usize,
}

impl CaptureConfig {
    /// Fields: `ifname`, `batch`, `cpu`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        PortSpec::new(self.ifname.clone()).validate()?;
        if !(1..=MAX_CAPTURE_BATCH).contains(&self.batch) {
            return Err(ConfigError::new("batch", format!("must be 1..{MAX_CAPTURE_BATCH} (got {})", self.batch)));
        }
        if let Some(c) = self.cpu {
            let online = cpu::online_cpus();
            if c >= online {
                return Err(ConfigError::new("cpu", format!("CPU {c} does not exist (this machine has {online})")));
            }
        }
        Ok(())
    }
}

/// Frames and bytes (on the wire: + 4 bytes FCS) of one trial tag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TagCount {
    pub tag: u32,
    pub frames: u64,
    pub bytes: u64,
}

/// The counters of one capture: the processing every method does per frame.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    /// Every frame captured.
    pub frames: u64,
    pub bytes: u64,
    /// Signed measurement frames, per sender's trial tag (the tag's low 23 bits).
    pub tags: Vec<TagCount>,
    /// Signed warm-up frames.
    pub warmup: u64,
    /// Frames without a netrig signature.
    pub foreign: u64,
    last: usize,
}

impl Counts {
    /// Process one captured frame (without FCS).
    #[inline]
    pub fn frame(&mut self, frame: &[u8]) {
        let wire = frame.len() as u64 + 4;
        self.frames += 1;
        self.bytes += wire;
        let Some(sig) = dissect::find_signature(frame) else {
            self.foreign += 1;
            return;
        };
        if sig.warmup {
            self.warmup += 1;
            return;
        }
        let i = match self.tags.get(self.last) {
            Some(t) if t.tag == sig.trial => self.last,
            _ => match self.tags.iter().rposition(|t| t.tag == sig.trial) {
                Some(i) => i,
                None => {
                    if self.tags.len() >= MAX_TAGS {
                        self.tags.drain(..MAX_TAGS / 2);
                    }
                    self.tags.push(TagCount { tag: sig.trial, ..TagCount::default() });
                    self.tags.len() - 1
                }
            },
        };
        self.last = i;
        self.tags[i].frames += 1;
        self.tags[i].bytes += wire;
    }

    /// Signed frames of every trial.
    pub fn signed(&self) -> u64 {
        self.tags.iter().map(|t| t.frames).sum()
    }
}

/// A capture's counters at one moment.
#[derive(Debug, Clone, Default)]
pub struct CaptureStats {
    pub counts: Counts,
    /// The method's own drop counter (see [`CaptureMethod::drops_source`]), since the start.
    pub drops: u64,
    /// `threads`: frames received but dropped because the hand-over queue was full.
    pub queue_drops: u64,
    /// The worker confirmed the counters after finding its source empty (a request answered);
    /// `false`: published on schedule while frames kept arriving.
    pub settled: bool,
    /// Seconds since the capture started.
    pub elapsed_s: f64,
    /// Workers that do not run on the capture's CPU: the kernel refused the pin (see
    /// `crate::pin`); empty when pinned, or not asked to.
    pub pin_failures: Vec<PinFailure>,
}

struct Shared {
    stop: AtomicBool,
    request: AtomicU64,
    ack: AtomicU64,
    published: Mutex<CaptureStats>,
    error: Mutex<Option<String>>,
    queue_drops: AtomicU64,
    started: Instant,
    pins: PinLog,
}

impl Shared {
    fn publish(&self, counts: &Counts, drops: u64, settled_req: Option<u64>) {
        let mut p = self.published.lock().unwrap_or_else(|e| e.into_inner());
        p.counts.clone_from(counts);
        p.drops = drops;
        p.queue_drops = self.queue_drops.load(Ordering::Relaxed);
        p.settled = settled_req.is_some();
        p.elapsed_s = self.started.elapsed().as_secs_f64();
        drop(p);
        if let Some(r) = settled_req {
            self.ack.store(r, Ordering::Release);
        }
    }

    fn fail(&self, e: impl std::fmt::Display) {
        let mut g = self.error.lock().unwrap_or_else(|e| e.into_inner());
        g.get_or_insert_with(|| e.to_string());
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A running capture.
pub struct Capture {
    method: CaptureMethod,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// The opened engine port (tpacket_v3, af_xdp), kept open until the workers end.
    port: Option<Mutex<Box<dyn Port>>>,
    notes: String,
}

/// Pin the calling worker to the capture's CPU, if it has one (a failure is recorded, see
/// `crate::pin`: the capture goes on).
fn pin(cpu_: Option<usize>, shared: &Shared) {
    if let Some(c) = cpu_ {
        shared.pins.pin_self(c);
    }
}

/// The single-thread receive loop of every method but `threads`.
fn run_worker(mut rx: Box<dyn RxQueue>, max: usize, shared: Arc<Shared>, cpu_: Option<usize>) {
    pin(cpu_, &shared);
    let mut counts = Counts::default();
    let mut last = Instant::now();
    let mut drops = rx.stats().ring_drops;
    while !shared.stop.load(Ordering::Relaxed) {
        let got = match rx.recv(max, WAIT, &mut |frame, _| counts.frame(frame)) {
            Ok(n) => n,
            Err(e) => {
                shared.fail(e);
                break;
            }
        };
        let req = shared.request.load(Ordering::Acquire);
        let asked = req != shared.ack.load(Ordering::Relaxed);
        if (asked && got == 0) || last.elapsed() >= PUBLISH_EVERY {
            drops = rx.stats().ring_drops;
            shared.publish(&counts, drops, (asked && got == 0).then_some(req));
            last = Instant::now();
        }
    }
    // The final counters, settled: every request so far is answered.
    let drops = rx.stats().ring_drops.max(drops);
    shared.publish(&counts, drops, Some(shared.request.load(Ordering::Acquire)));
}

/// The `threads` method's hand-over queue: filled frames and free buffers, one mutex.
struct Handover {
    queue: VecDeque<(Box<[u8]>, usize)>,
    free: Vec<Box<[u8]>>,
    /// The receiver found its socket empty after its last frame.
    rx_idle: bool,
    rx_drops: u64,
}

fn run_threads(mut rx: SocketCapture, shared: Arc<Shared>, cpu_: Option<usize>) -> Result<JoinHandle<()>, String> {
    let hand = Arc::new((
        Mutex::new(Handover {
            queue: VecDeque::with_capacity(QUEUE_FRAMES),
            free: (0..QUEUE_FRAMES).map(|_| vec![0u8; 2048].into_boxed_slice()).collect(),
            rx_idle: false,
            rx_drops: 0,
        }),
        Condvar::new(),
    ));
    let (h2, s2) = (hand.clone(), shared.clone());
    let processor = std::thread::Builder::new()
        .name("netrig-cap-proc".into())
        .spawn(move || {
            pin(cpu_, &s2);
            let (lock, cv) = &*h2;
            let mut counts = Counts::default();
            let mut last = Instant::now();
            let mut done: Option<Box<[u8]>> = None;
            loop {
                let (item, idle, drops) = {
                    let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(b) = done.take() {
                        g.free.push(b);
                    }
                    if g.queue.is_empty() && !s2.stop.load(Ordering::Relaxed) {
                        g = cv.wait_timeout(g, WAIT).unwrap_or_else(|e| e.into_inner()).0;
                    }
                    (g.queue.pop_front(), g.rx_idle && g.queue.is_empty(), g.rx_drops)
                };
                let got = item.is_some();
                if let Some((buf, len)) = item {
                    counts.frame(&buf[..len]);
                    done = Some(buf);
                } else if s2.stop.load(Ordering::Relaxed) {
                    break;
                }
                let req = s2.request.load(Ordering::Acquire);
                let asked = req != s2.ack.load(Ordering::Relaxed);
                let settled = asked && !got && idle;
                if settled || last.elapsed() >= PUBLISH_EVERY {
                    s2.publish(&counts, drops, settled.then_some(req));
                    last = Instant::now();
                }
            }
            let drops = lock.lock().unwrap_or_else(|e| e.into_inner()).rx_drops;
            s2.publish(&counts, drops, Some(s2.request.load(Ordering::Acquire)));
        })
        .map_err(|e| e.to_string())?;
    std::thread::Builder::new()
        .name("netrig-cap-rx".into())
        .spawn(move || {
            pin(cpu_, &shared);
            let (lock, cv) = &*hand;
            let mut cur: Box<[u8]> = vec![0u8; 2048].into_boxed_slice();
            let mut last = Instant::now();
            while !shared.stop.load(Ordering::Relaxed) {
                let mut len = None;
                // One frame per recvfrom, handed over under the lock.
                let r = rx.recv(1, WAIT, &mut |frame, _| {
                    cur[..frame.len()].copy_from_slice(frame);
                    len = Some(frame.len());
                });
                if let Err(e) = r {
                    shared.fail(e);
                    break;
                }
                let stats_due = last.elapsed() >= PUBLISH_EVERY;
                let drops = if stats_due || len.is_none() { Some(rx.stats().ring_drops) } else { None };
                let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(d) = drops {
                    g.rx_drops = d;
                    last = Instant::now();
                }
                g.rx_idle = len.is_none();
                if let Some(n) = len {
                    match g.free.pop() {
                        Some(next) => {
                            let was_empty = g.queue.is_empty();
                            g.queue.push_back((std::mem::replace(&mut cur, next), n));
                            drop(g);
                            if was_empty {
                                cv.notify_one();
                            }
                        }
                        None => {
                            drop(g);
                            shared.queue_drops.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
            let d = rx.stats().ring_drops;
            lock.lock().unwrap_or_else(|e| e.into_inner()).rx_drops = d;
            cv.notify_one();
            let _ = processor.join();
        })
        .map_err(|e| e.to_string())
}

impl Capture {
    /// Open the method's source on the interface and start capturing.
    pub fn start(cfg: &CaptureConfig) -> Result<Capture, EngineError> {
        cfg.validate()?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            request: AtomicU64::new(0),
            ack: AtomicU64::new(0),
            published: Mutex::new(CaptureStats::default()),
            error: Mutex::new(None),
            queue_drops: AtomicU64::new(0),
            started: Instant::now(),
            pins: PinLog::new(),
        });
        let ns = cfg.netns.as_deref();
        let mut port = None;
        let (rx, max, notes): (Box<dyn RxQueue>, usize, String) = match cfg.method {
            CaptureMethod::Recvfrom => {
                let rx = SocketCapture::open(&cfg.ifname, ns, None, WAIT)?;
                (Box::new(rx), 64, "AF_PACKET SOCK_RAW bound to the interface, one recvfrom per frame".into())
            }
            CaptureMethod::Recvmmsg => {
                let rx = SocketCapture::open(&cfg.ifname, ns, Some(cfg.batch), WAIT)?;
                let notes =
                    format!("AF_PACKET SOCK_RAW bound to the interface, recvmmsg of up to {} frames", cfg.batch);
                (Box::new(rx), cfg.batch, notes)
            }
            CaptureMethod::Threads => {
                let rx = SocketCapture::open(&cfg.ifname, ns, None, WAIT)?;
                let h = run_threads(rx, shared.clone(), cfg.cpu)
                    .map_err(|m| EngineError::Worker { name: "capture".into(), message: m })?;
                return Ok(Capture {
                    method: cfg.method,
                    shared,
                    workers: vec![h],
                    port: None,
                    notes: format!(
                        "receiver thread (recvfrom) and processor thread sharing a mutex-protected queue of \
                         {QUEUE_FRAMES} frames, both on the capture CPU"
                    ),
                });
            }
            CaptureMethod::Libpcap => {
                let p = PcapCapture::open(&cfg.ifname, ns, WAIT)?;
                let notes =
                    format!("{}: pcap_create/pcap_activate (promiscuous, default buffer), pcap_dispatch", p.version);
                (Box::new(p), RING_BATCH, notes)
            }
            CaptureMethod::TpacketV3 | CaptureMethod::AfXdp => {
                let backend = if cfg.method == CaptureMethod::AfXdp { Backend::AfXdp } else { Backend::AfPacket };
                let spec = PortSpec {
                    netns: cfg.netns.clone(),
                    backend: Some(backend),
                    transmit: false,
                    receive: true,
                    rx_all: true,
                    rx_stamps: false,
                    ..PortSpec::new(cfg.ifname.clone())
                };
                let mut p = open_port(&spec)?;
                p.prepare_rx()?;
                let rx = p.open_rx(0)?;
                let notes = p.caps().notes.clone();
                port = Some(Mutex::new(p));
                (rx, RING_BATCH, notes)
            }
        };
        let s = shared.clone();
        let cpu_ = cfg.cpu;
        let h = std::thread::Builder::new()
            .name("netrig-capture".into())
            .spawn(move || run_worker(rx, max, s, cpu_))
            .map_err(|e| EngineError::Worker { name: "capture".into(), message: e.to_string() })?;
        Ok(Capture { method: cfg.method, shared, workers: vec![h], port, notes })
    }

    pub fn method(&self) -> CaptureMethod {
        self.method
    }

    /// What was opened (library version, XDP mode, socket options).
    pub fn notes(&self) -> &str {
        &self.notes
    }

    /// A worker stopped with an error.
    pub fn error(&self) -> Option<String> {
        self.shared.error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn running(&self) -> bool {
        !self.shared.stop.load(Ordering::Relaxed)
    }

    /// The counters, settled if the worker can confirm them within `wait` (it does as soon as
    /// its source is empty); otherwise the latest published ones (`settled` false).
    pub fn stats(&self, wait: Duration) -> CaptureStats {
        let req = self.shared.request.fetch_add(1, Ordering::AcqRel) + 1;
        let deadline = Instant::now() + wait;
        while self.running() && self.shared.ack.load(Ordering::Acquire) < req && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut s = self.shared.published.lock().unwrap_or_else(|e| e.into_inner()).clone();
        s.settled = self.shared.ack.load(Ordering::Acquire) >= req;
        s.pin_failures = self.shared.pins.failures();
        s
    }

    /// Stop the workers, close the source (XDP program detached) and return the final counters;
    /// the error a worker ended with, if any, is the error.
    pub fn stop(mut self) -> Result<CaptureStats, EngineError> {
        self.shared.stop.store(true, Ordering::Relaxed);
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
        drop(self.port.take());
        if let Some(m) = self.error() {
            return Err(EngineError::Worker { name: "capture".into(), message: m });
        }
        let mut s = self.shared.published.lock().unwrap_or_else(|e| e.into_inner()).clone();
        s.settled = true;
        s.pin_failures = self.shared.pins.failures();
        Ok(s)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_parse_and_name_the_field() {
        for m in CAPTURE_METHODS {
            assert_eq!(CaptureMethod::from_name(m).unwrap().as_str(), *m);
        }
        let e = CaptureMethod::from_name("pf_ring").unwrap_err();
        assert_eq!(e.field, "method");
        assert!(e.message.contains("recvfrom, recvmmsg"), "{e}");
    }

    #[test]
    fn batch_is_checked() {
        let cfg =
            CaptureConfig { method: CaptureMethod::Recvmmsg, ifname: "veth0".into(), netns: None, cpu: None, batch: 0 };
        assert_eq!(cfg.validate().unwrap_err().field, "batch");
        assert_eq!(
            CaptureConfig { batch: MAX_CAPTURE_BATCH + 1, ..cfg.clone() }.validate().unwrap_err().field,
            "batch"
        );
        assert_eq!(CaptureConfig { cpu: Some(100_000), batch: 10, ..cfg }.validate().unwrap_err().field, "cpu");
    }

    fn signed(tag: u32, warmup: bool) -> Vec<u8> {
        crate::traffic::analyze::tests::signed(tag, warmup, 0, 1, 2)
    }

    #[test]
    fn counts_per_tag_warmup_and_foreign_apart() {
        let mut c = Counts::default();
        let (a, b, w) = (signed(5, false), signed(6, false), signed(5, true));
        for f in [&a, &a, &b, &w, &a] {
            c.frame(f);
        }
        c.frame(&[0u8; 60]);
        assert_eq!(c.frames, 6);
        assert_eq!(c.foreign, 1);
        assert_eq!(c.warmup, 1);
        assert_eq!(c.tags.iter().find(|t| t.tag == 5).unwrap().frames, 3);
        assert_eq!(c.tags.iter().find(|t| t.tag == 6).unwrap().frames, 1);
        assert_eq!(c.signed(), 4);
        assert_eq!(c.bytes, 6 * 64);
    }
}
