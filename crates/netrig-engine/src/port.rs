//! Ports: where frames leave and enter the tester.
//!
//! A [`Port`] is one network interface (or an in-process loopback end) opened with one I/O
//! backend. It hands out per-queue halves: a [`TxQueue`] for a TX worker and an [`RxQueue`] for an
//! RX worker; each half is `Send` and is driven by exactly one pinned worker thread, so the hot
//! path needs no locks.
//!
//! The traits are batch-oriented and zero-copy friendly: [`TxQueue::send`] lends the caller the
//! backend's own frame buffers (a TPACKET ring slot, an AF_XDP UMEM chunk, a scratch buffer for
//! sockets) and the caller writes the frame in place; [`RxQueue::recv`] lends each received frame
//! to a callback. Backends: `loopback` (in-process, for engine tests), `af_packet` (TPACKET_V3),
//! `af_xdp` (XSK), `socket` (plain `AF_PACKET/SOCK_RAW` with `sendmmsg`/`recvmmsg`).
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{ConfigError, PortError};
pub use crate::sys::wake::WakeFd;

/// The I/O method behind a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    Loopback,
    AfPacket,
    AfXdp,
    Socket,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Loopback => "loopback",
            Backend::AfPacket => "af_packet",
            Backend::AfXdp => "af_xdp",
            Backend::Socket => "socket",
        }
    }
}

/// Port I/O modes as users name them: `auto` (probe and pick the fastest that works), then every
/// backend that opens an interface by name.
pub const IO_MODES: &[&str] = &["auto", "af_xdp", "af_packet", "socket"];

/// Most queues a port may use.
pub const MAX_QUEUES: usize = 64;
/// Longest AF_XDP busy-poll time, microseconds.
pub const MAX_BUSY_POLL_US: u32 = 1_000_000;

impl Backend {
    /// The backend of an I/O mode from [`IO_MODES`] (`None` for `auto`). Field: `io`.
    pub fn from_io_mode(mode: &str) -> Result<Option<Backend>, ConfigError> {
        match mode {
            "auto" => Ok(None),
            "af_xdp" => Ok(Some(Backend::AfXdp)),
            "af_packet" => Ok(Some(Backend::AfPacket)),
            "socket" => Ok(Some(Backend::Socket)),
            _ => {
                Err(ConfigError::new("io", format!("{mode:?} is not an I/O mode: use one of {}", IO_MODES.join(", "))))
            }
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a receive timestamp comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampSource {
    /// Read by the RX worker in user space when the batch was received.
    User,
    /// Taken by the kernel when the frame entered the stack (`skb->tstamp`, software).
    KernelSoftware,
    /// Taken by netrig's XDP program in the driver's receive path (`bpf_ktime_get_ns`, software),
    /// before the frame is queued to the AF_XDP socket; passed up as XDP metadata.
    KernelXdp,
    /// Taken by the NIC.
    Hardware,
}

impl TimestampSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TimestampSource::User => "user",
            TimestampSource::KernelSoftware => "kernel_software",
            TimestampSource::KernelXdp => "kernel_xdp",
            TimestampSource::Hardware => "hardware",
        }
    }
}

/// What a port can do, probed when it is opened. Reported with every result.
#[derive(Debug, Clone)]
pub struct PortCaps {
    /// Interface name (or loopback end name).
    pub name: String,
    pub backend: Backend,
    pub tx_queues: usize,
    pub rx_queues: usize,
    /// Largest untagged frame the port accepts, without FCS (MTU + 14); a frame with an 802.1Q
    /// tag may be 4 bytes longer.
    pub max_frame_len: usize,
    /// Link speed in bit/s if the interface reports one (veth and loopback do not).
    pub speed_bps: Option<u64>,
    pub rx_timestamp: TimestampSource,
    /// Frames are DMA'd to/from the tester's buffers (AF_XDP zero-copy).
    pub zero_copy: bool,
    /// Free text: what was probed and chosen ("native XDP, copy mode, need_wakeup").
    pub notes: String,
}

/// Metadata of one received frame.
#[derive(Debug, Clone, Copy, Default)]
pub struct RxMeta {
    /// Receive time in nanoseconds of the engine clock ([`crate::clock::now_ns`]).
    pub ts_ns: u64,
    /// The receive queue.
    pub queue: u16,
}

/// Tester-side transmit counters of one queue (not DUT behaviour).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxQueueStats {
    /// Frames the backend handed to the kernel / peer.
    pub frames: u64,
    pub bytes: u64,
    /// Times a send found the ring full or got `EAGAIN`/`ENOBUFS` (back-pressure).
    pub backpressure: u64,
    /// Frames the kernel reported as dropped on transmit (`tp_status` wrong format; AF_XDP copy mode:
    /// a driver that dropped a frame, `EBUSY`), counted sent but never left.
    pub errors: u64,
}

/// Tester-side receive counters of one queue: drops here are the tester's, never the DUT's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxQueueStats {
    /// Frames lost because the tester's ring was full (`tp_drops`, XSK `rx_dropped`,
    /// `rx_ring_full`, fill-ring empty).
    pub ring_drops: u64,
    /// Ring freezes (TPACKET_V3 `tp_freeze_q_cnt`) or similar overrun events.
    pub overruns: u64,
    /// Frames that arrived at the port but never reached this queue because they are not netrig's
    /// (AF_XDP: the steering program passes them to the kernel and counts them). Backends that
    /// see every frame count these in the analyser instead (0 here).
    pub foreign: u64,
}

/// A port's link as the kernel sees it, read before and after every trial: a tester port whose
/// link went down loses frames that are the tester's, not the DUT's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkState {
    /// Up, running and with a carrier now (`IFF_UP`, `IFF_RUNNING` and `IFF_LOWER_UP`).
    pub oper_up: bool,
    /// Carrier changes since the interface was created (`IFLA_CARRIER_CHANGES`).
    pub carrier_changes: u32,
    /// Times the carrier went down (`IFLA_CARRIER_DOWN_COUNT`; `None` where the kernel lacks it).
    pub carrier_down: Option<u32>,
    /// The XDP program attached to the interface, if any (`IFLA_XDP_PROG_ID`).
    pub xdp_prog_id: Option<u32>,
}

/// Reads a port's link state; shared with the thread that watches the links during a trial.
pub trait LinkSource: Send + Sync {
    /// The state now; `None` when it cannot be read.
    fn state(&self) -> Option<LinkState>;

    /// The interface's network namespace (`None`: the caller's) and index, where the source knows.
    fn location(&self) -> Option<(Option<&str>, u32)> {
        None
    }

    /// This interface is a veth whose other end is `other`'s interface: what its kernel drops on
    /// transmit, it drops at `other`'s receive ring. False when it cannot be told.
    fn is_veth_peer_of(&self, _other: &dyn LinkSource) -> bool {
        false
    }
}

/// Transmit half of one queue. Driven by one TX worker.
pub trait TxQueue: Send {
    /// Send up to `count` frames. For every frame the queue calls `fill(buf, held)` with a buffer
    /// of at least `max_frame_len` bytes; `fill` writes one complete frame (without FCS) at the
    /// start of `buf` and returns its length. Returns how many frames were accepted; fewer than
    /// `count` (possibly 0) under back-pressure, and then `fill` was called exactly that many
    /// times. `held` is what the buffer holds: the mark the last fill of that buffer left (0:
    /// unknown), which `fill` sets to what it leaves there (0: anything but a frame it can name).
    /// A queue whose buffers keep their bytes between sends (AF_XDP's UMEM frames, a packet ring's
    /// slots) keeps a mark per buffer, so a frame of the template its buffer already holds needs
    /// only its changing bytes written (`CompiledStack::fill_held`); the others pass 0 each time.
    fn send_held(
        &mut self,
        count: usize,
        fill: &mut dyn FnMut(&mut [u8], &mut u64) -> usize,
    ) -> Result<usize, PortError>;

    /// [`Self::send_held`] for a `fill` that writes any bytes: every buffer it fills is marked
    /// unknown.
    fn send(&mut self, count: usize, fill: &mut dyn FnMut(&mut [u8]) -> usize) -> Result<usize, PortError> {
        self.send_held(count, &mut |buf, held| {
            *held = 0;
            fill(buf)
        })
    }

    /// Kick the kernel for anything still queued and reclaim completed buffers. Called by the
    /// worker at the end of a trial and whenever it idles.
    fn flush(&mut self) -> Result<(), PortError>;

    /// True when every accepted frame has left the tester (ring drained, completions reaped).
    fn idle(&mut self) -> bool {
        true
    }

    fn stats(&self) -> TxQueueStats;
}

/// Receive half of one queue. Driven by one RX worker.
pub trait RxQueue: Send {
    /// Wait at most `timeout` for frames and call `on_frame` for each received frame (at most
    /// `max` frames). Returns the number of frames delivered; 0 on timeout.
    fn recv(
        &mut self,
        max: usize,
        timeout: Duration,
        on_frame: &mut dyn FnMut(&[u8], RxMeta),
    ) -> Result<usize, PortError>;

    /// Tester-side drop counters (cumulative since the queue was opened).
    fn stats(&mut self) -> RxQueueStats;

    /// How the worker waits on an empty queue ([`RxWait`]). Default: nothing to change.
    fn set_wait(&mut self, _wait: RxWait) {}

    /// Frames the tester's receive ring holds (`None`: not known, or no ring of its own).
    fn ring_frames(&self) -> Option<usize> {
        None
    }

    /// A [`WakeFd`] that also ends a wait in `poll(2)` (`None`: only frames and the timeout do).
    /// Default: ignored, the wait lasts until frames or the timeout.
    fn set_wake(&mut self, _wake: Option<Arc<WakeFd>>) {}
}

/// How an RX worker waits on an empty queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RxWait {
    /// Sleep in `poll(2)` until the kernel signals frames.
    #[default]
    Poll,
    /// Poll the ring in user space for a moment first (AF_XDP), then sleep in `poll(2)`: a worker
    /// with a CPU of its own whose frames may come too fast for a nap ([`RxWait::alone`]).
    Spin,
    /// Sleep [`RX_NAP`] and look again, never asking the kernel for a wake-up: a worker that
    /// shares its CPU with a sender, or one alone whose frames come slowly enough for a nap
    /// ([`RxWait::alone`]). Spinning beside a sender would take half the sender's CPU; sleeping in
    /// `poll(2)` makes the CPU that delivers each batch wake the worker — on veth that is the
    /// CPU that transmits into the port: the DUT's, on a test bed (measured: 12 % of a router
    /// DUT's CPU at 200 kfps went into waking the tester's receiver). Receive timestamps are
    /// the kernel's, so a nap delays reading, not the measurement; the rings hold far more than
    /// a nap's worth of frames.
    Nap,
}

/// How long a napping RX worker sleeps between looks at its queue.
pub const RX_NAP: Duration = Duration::from_micros(1000);

/// A napping worker's ring may fill this far (its share) between two looks: a quarter, so that a
/// pause of the worker three naps long still drops nothing.
pub const NAP_RING_SHARE: usize = 4;

/// Watches a napping worker's looks: the frames each look finds over the time since the look
/// before, so a rate too fast for a nap ([`RxWait::alone`]) switches the worker to spinning. A
/// look that finds more because the worker was held up longer does not: its frames came over that
/// longer time.
#[derive(Debug, Default)]
pub struct NapGuard {
    /// Frames per nanosecond above which the worker spins (`None`: it does not nap).
    limit: Option<f64>,
    frames: u64,
    since_ns: u64,
}

impl NapGuard {
    /// For `q` as it waits now (a guard that does nothing unless it naps).
    pub fn new(q: &dyn RxQueue, wait: RxWait) -> NapGuard {
        let share = (wait == RxWait::Nap).then(|| q.ring_frames()).flatten().map(|r| r / NAP_RING_SHARE);
        let limit = share.map(|f| f as f64 / RX_NAP.as_nanos() as f64);
        NapGuard { limit, frames: 0, since_ns: 0 }
    }

    /// A receive returned `n` of at most `max` frames (fewer: the ring was empty after them, the
    /// look is over): the frames since the last look came in the time since it ended, and faster
    /// than the limit switch `q` to spinning.
    #[inline]
    pub fn saw(&mut self, q: &mut dyn RxQueue, n: usize, max: usize) {
        self.saw_at(q, n, max, crate::clock::now_ns);
    }

    /// [`NapGuard::saw`], the time a look ended read from `now` (the engine clock's).
    #[inline]
    fn saw_at(&mut self, q: &mut dyn RxQueue, n: usize, max: usize, now: impl FnOnce() -> u64) {
        let Some(limit) = self.limit else { return };
        self.frames += n as u64;
        if n >= max {
            return;
        }
        let now = now();
        let span = now.saturating_sub(self.since_ns);
        if self.since_ns == 0 {
            (self.frames, self.since_ns) = (0, now);
        } else if span >= RX_NAP.as_nanos() as u64 {
            // Over a nap's time at least: the few frames that came while the last look was read
            // make a look of their own, and over its microsecond any rate.
            if self.frames as f64 > limit * span as f64 {
                q.set_wait(RxWait::Spin);
                self.limit = None;
            }
            (self.frames, self.since_ns) = (0, now);
        }
    }
}

/// How a receiver waits on its empty queue: the one policy of every RX worker.
/// - On a sender's CPU it naps ([`RxWait::Nap`]): spinning there takes half the sender's CPU.
/// - Alone on its CPU, while frames flow: with receive stamps of the kernel's it naps if a nap's
///   frames fit its share of the ring ([`RxWait::alone`], a [`NapGuard`] switching it to spinning
///   when they come faster), else it spins; with stamps read in user space it spins, since a nap
///   would add up to [`RX_NAP`] to every frame's latency.
/// - A worker that lives longer than its traffic (the generator's, `idle_poll`) sleeps in
///   `poll(2)` while nothing comes, and costs nothing idle; its wait is chosen again when frames
///   come. A trial's waits for its frames from the start and keeps its wait for the run.
#[derive(Debug)]
pub struct Waiting {
    shares_cpu: bool,
    user_stamps: bool,
    bound_fps: f64,
    idle_poll: bool,
    busy: bool,
    guard: NapGuard,
}

impl Waiting {
    /// Set `q`'s wait: `shares_cpu` with a sender, `user_stamps` (the port's receive stamps are
    /// taken in user space), frames arriving at most at `bound_fps` (0: not known, the guard
    /// finds out), `idle_poll` as above.
    pub fn new(q: &mut dyn RxQueue, shares_cpu: bool, user_stamps: bool, bound_fps: f64, idle_poll: bool) -> Waiting {
        let mut w = Waiting { shares_cpu, user_stamps, bound_fps, idle_poll, busy: false, guard: NapGuard::default() };
        w.set(q, !idle_poll);
        w
    }

    fn set(&mut self, q: &mut dyn RxQueue, busy: bool) {
        self.busy = busy;
        let wait = match (self.shares_cpu, busy) {
            (true, _) => RxWait::Nap,
            (false, false) => RxWait::Poll,
            (false, true) if self.user_stamps => RxWait::Spin,
            (false, true) => RxWait::alone(q, self.bound_fps),
        };
        q.set_wait(wait);
        self.guard = NapGuard::new(q, wait);
    }

    /// A receive gave `n` of at most `max` frames.
    #[inline]
    pub fn saw(&mut self, q: &mut dyn RxQueue, n: usize, max: usize) {
        if self.idle_poll && !self.shares_cpu && self.busy != (n > 0) {
            self.set(q, n > 0);
        } else {
            self.guard.saw(q, n, max);
        }
    }
}

impl RxWait {
    /// How a worker with a CPU of its own waits on `q`, frames arriving at most at `bound_fps`
    /// (infinite: not known). It naps when a nap's frames fill at most [`NAP_RING_SHARE`] of its
    /// ring: spinning on the ring costs the CPU that fills it (on veth the sender's: measured
    /// 2026-12-07, a top-rate veth trial sent 0.95-1.05 Mframes/s with a spinning receiver and
    /// 1.2-1.35 M with a napping one, docs/performance.md). Faster, or a ring of unknown size:
    /// it spins. A napping worker that finds more than its share at one look spins from then on
    /// ([`NapGuard`]).
    pub fn alone(q: &dyn RxQueue, bound_fps: f64) -> RxWait {
        match q.ring_frames() {
            Some(ring) if bound_fps * RX_NAP.as_secs_f64() <= (ring / NAP_RING_SHARE) as f64 => RxWait::Nap,
            _ => RxWait::Spin,
        }
    }

    /// Wait for frames as this policy says: `Nap` sleeps (at most `timeout`) and returns; the
    /// others call `poll` with `timeout`.
    pub fn wait(
        self,
        timeout: Duration,
        poll: impl FnOnce(Duration) -> Result<(), PortError>,
    ) -> Result<(), PortError> {
        match self {
            RxWait::Nap => {
                std::thread::sleep(RX_NAP.min(timeout));
                Ok(())
            }
            RxWait::Poll | RxWait::Spin => poll(timeout),
        }
    }
}

/// One opened port.
pub trait Port: Send {
    fn caps(&self) -> &PortCaps;

    /// Open the transmit half of `queue` (0-based, `< caps().tx_queues`).
    fn open_tx(&mut self, queue: usize) -> Result<Box<dyn TxQueue>, PortError>;

    /// Open the receive half of `queue` (0-based, `< caps().rx_queues`).
    fn open_rx(&mut self, queue: usize) -> Result<Box<dyn RxQueue>, PortError>;

    /// Set up now what receiving needs (AF_XDP: load and attach the XDP program), so that a
    /// backend that cannot receive on this interface says so before any queue is opened. Auto
    /// selection calls it for ports that will receive, to fall back to the next backend.
    fn prepare_rx(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    /// Where to read the port's link state from; `None` when the port has no link to watch.
    fn link(&self) -> Option<Arc<dyn LinkSource>> {
        None
    }
}

/// How to open a port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortSpec {
    /// Interface name (`veth0`, `eth2`).
    pub ifname: String,
    /// Network namespace the interface lives in, as a name under `/run/netns` or a path; `None`
    /// is the namespace of the calling process.
    pub netns: Option<String>,
    /// Which backend; `None` means auto: probe and pick the fastest that works.
    pub backend: Option<Backend>,
    /// Number of queues to use (each gets its own TX and RX worker).
    pub queues: usize,
    /// Backend tuning: ring/UMEM frames (0 = backend default).
    pub ring_frames: usize,
    /// The port will receive: with auto selection a backend must also set up its receive path
    /// ([`Port::prepare_rx`]) to be chosen. `false` for transmit-only ports.
    pub receive: bool,
    /// AF_XDP: `SO_BUSY_POLL` microseconds (with `SO_PREFER_BUSY_POLL`); 0 = off. Other backends
    /// ignore it.
    pub busy_poll_us: u32,
    /// The port will transmit (test frames or learning frames): the transmit guard checks it
    /// ([`crate::guard`]). `false` only for probes that send nothing.
    pub transmit: bool,
    /// Override the transmit guard: the user said the interface may be live
    /// (`--i-know-this-is-live`).
    pub live_ok: bool,
    /// The largest frame (without FCS) the port will carry, when known (0 = not known). A backend
    /// that cannot carry it refuses to open, so auto selection passes it over and says why.
    pub max_frame_len: usize,
    /// The port will receive netrig frames the XDP steering program does not match (TCP, ICMP,
    /// raw L2, or two VLAN tags): AF_XDP refuses to open for receiving, so auto selection passes
    /// it over and says why.
    pub rx_beyond_udp: bool,
    /// The port receives every frame, netrig's or not (a forwarder): AF_XDP attaches a program
    /// that steers every frame of a queue to its socket instead of only netrig frames.
    pub rx_all: bool,
    /// With `rx_all`: the kernel still gets the port's ARP, ND, ICMP and LLDP frames (its emulated
    /// devices' address resolution and pings, lldpd's PDUs), unless they carry netrig's signature
    /// at their end (the generator's ARP and ICMP flows). AF_XDP's program passes those to the stack (counted
    /// as passed); the other backends read beside the stack anyway.
    pub control_to_kernel: bool,
    /// Receive stamps taken by the kernel where the backend can (AF_XDP: its XDP program, also
    /// with `rx_all`); `false` for a port whose frames are not timed (a forwarder's, the capture
    /// under test), which then saves the program's clock read per frame.
    pub rx_stamps: bool,
}

impl PortSpec {
    pub fn new(ifname: impl Into<String>) -> Self {
        PortSpec {
            ifname: ifname.into(),
            netns: None,
            backend: None,
            queues: 1,
            ring_frames: 0,
            receive: true,
            busy_poll_us: 0,
            transmit: true,
            live_ok: false,
            max_frame_len: 0,
            rx_beyond_udp: false,
            rx_all: false,
            control_to_kernel: false,
            rx_stamps: true,
        }
    }

    /// The I/O mode as users name it: `auto` or the backend.
    pub fn io_mode(&self) -> &'static str {
        self.backend.map_or("auto", Backend::as_str)
    }

    /// Everything that can be checked without opening the port: the interface name (1..15
    /// bytes, no `/`, whitespace or NUL), 1..64 queues, busy polling at most 1 s and only where
    /// AF_XDP may be used. Fields: `ifname`, `queues`, `busy_poll_us`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let n = &self.ifname;
        if n.is_empty() || n.len() > 15 || n.chars().any(|c| c == '/' || c == '\0' || c.is_whitespace()) {
            return Err(ConfigError::new(
                "ifname",
                format!("{n:?} is not an interface name: 1-15 characters without '/' or spaces (see `netrig ports`)"),
            ));
        }
        if !(1..=MAX_QUEUES).contains(&self.queues) {
            return Err(ConfigError::new("queues", format!("must be 1..{MAX_QUEUES} (got {})", self.queues)));
        }
        if self.busy_poll_us > MAX_BUSY_POLL_US {
            return Err(ConfigError::new(
                "busy_poll_us",
                format!("must be 0..{MAX_BUSY_POLL_US} microseconds (got {})", self.busy_poll_us),
            ));
        }
        if self.busy_poll_us > 0 && !matches!(self.backend, None | Some(Backend::AfXdp)) {
            return Err(ConfigError::new(
                "busy_poll_us",
                format!(
                    "busy polling is an af_xdp option (io is {:?}): use the af_xdp backend or turn busy polling off",
                    self.io_mode()
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::rx::RX_BATCH;

    /// A queue that only says how big its ring is and how it was told to wait.
    struct Ring(Option<usize>, RxWait);

    impl RxQueue for Ring {
        fn recv(&mut self, _: usize, _: Duration, _: &mut dyn FnMut(&[u8], RxMeta)) -> Result<usize, PortError> {
            Ok(0)
        }
        fn stats(&mut self) -> RxQueueStats {
            RxQueueStats::default()
        }
        fn set_wait(&mut self, wait: RxWait) {
            self.1 = wait;
        }
        fn ring_frames(&self) -> Option<usize> {
            self.0
        }
    }

    /// A worker alone on its CPU naps when a nap's frames fill at most a quarter of its ring
    /// (8192 frames: 2048 in 1 ms, 2.048 Mframes/s), else, or with a ring of unknown size, spins.
    #[test]
    fn a_worker_alone_naps_only_when_a_nap_fits_a_quarter_of_its_ring() {
        let q = Ring(Some(8192), RxWait::Poll);
        assert_eq!(RxWait::alone(&q, 0.0), RxWait::Nap);
        assert_eq!(RxWait::alone(&q, 2.048e6), RxWait::Nap);
        assert_eq!(RxWait::alone(&q, 2.1e6), RxWait::Spin);
        assert_eq!(RxWait::alone(&q, 14.88e6), RxWait::Spin, "10 Gb/s at 64 B");
        assert_eq!(RxWait::alone(&q, f64::INFINITY), RxWait::Spin);
        assert_eq!(RxWait::alone(&Ring(None, RxWait::Poll), 1000.0), RxWait::Spin);
    }

    /// The guard reads the rate over looks a nap's time apart at least (their frames over the
    /// time since): 1.5 M frames/s in 1-ms looks, a look 10 µs after another that finds 30
    /// frames (3 M/s over its span), and one look 3 ms late that holds 3 ms of frames (more than
    /// the 2048-frame share, at the same rate), keep the nap; 2.5 M frames/s switches to spinning.
    #[test]
    fn a_napping_worker_spins_once_its_frames_come_faster_than_a_nap_holds() {
        let mut q = Ring(Some(8192), RxWait::Nap);
        let mut g = NapGuard::new(&q, RxWait::Nap);
        let look = |q: &mut Ring, g: &mut NapGuard, frames: usize, at_ms: u64| {
            for _ in 0..frames / RX_BATCH {
                g.saw_at(q, RX_BATCH, RX_BATCH, || unreachable!("a full batch does not end a look"));
            }
            g.saw_at(q, frames % RX_BATCH, RX_BATCH, || at_ms * 1_000_000);
        };
        look(&mut q, &mut g, 0, 1);
        for t in 2..10 {
            look(&mut q, &mut g, 1500, t);
        }
        g.saw_at(&mut q, 30, RX_BATCH, || 9_010_000);
        look(&mut q, &mut g, 1470, 10);
        assert_eq!(q.1, RxWait::Nap);
        look(&mut q, &mut g, 4500, 13);
        assert_eq!(q.1, RxWait::Nap);
        look(&mut q, &mut g, 2500, 14);
        assert_eq!(q.1, RxWait::Spin);
        // A guard of a worker that does not nap does nothing.
        let mut q = Ring(Some(8192), RxWait::Spin);
        let mut g = NapGuard::new(&q, RxWait::Spin);
        g.saw_at(&mut q, 100_000, RX_BATCH, || 1);
        assert_eq!(q.1, RxWait::Spin);
    }

    /// On a sender's CPU a nap, always. Alone, a trial's worker (waiting from the start) naps
    /// with the kernel's stamps at a rate a nap holds, else spins; a generator's sleeps in
    /// `poll(2)` until frames come, then waits as a trial's would, and polls again when they stop.
    #[test]
    fn a_receiver_waits_by_its_cpu_its_stamps_and_whether_frames_come() {
        let mut q = Ring(Some(8192), RxWait::Poll);
        let mut shared = Waiting::new(&mut q, true, true, f64::INFINITY, true);
        assert_eq!(q.1, RxWait::Nap);
        for n in [10, 0] {
            shared.saw(&mut q, n, RX_BATCH);
            assert_eq!(q.1, RxWait::Nap);
        }
        for (user_stamps, bound, want) in
            [(false, 0.0, RxWait::Nap), (true, 0.0, RxWait::Spin), (false, 14.88e6, RxWait::Spin)]
        {
            Waiting::new(&mut q, false, user_stamps, bound, false);
            assert_eq!(q.1, want, "a trial's, user stamps {user_stamps}, {bound} frames/s");
        }
        for (user_stamps, busy) in [(false, RxWait::Nap), (true, RxWait::Spin)] {
            let mut w = Waiting::new(&mut q, false, user_stamps, 0.0, true);
            assert_eq!(q.1, RxWait::Poll, "a generator's, idle");
            w.saw(&mut q, 10, RX_BATCH);
            assert_eq!(q.1, busy, "a generator's, frames coming, user stamps {user_stamps}");
            w.saw(&mut q, 0, RX_BATCH);
            assert_eq!(q.1, RxWait::Poll, "a generator's, frames stopped");
        }
    }

    #[test]
    fn io_modes_parse_and_name_the_field() {
        for m in IO_MODES {
            let b = Backend::from_io_mode(m).unwrap();
            assert_eq!(b.map_or("auto", Backend::as_str), *m);
        }
        let e = Backend::from_io_mode("dpdk").unwrap_err();
        assert_eq!(e.field, "io");
        assert!(e.message.contains("auto, af_xdp, af_packet, socket"), "{e}");
    }

    #[test]
    fn port_spec_validation() {
        PortSpec::new("eth0").validate().unwrap();
        let field = |s: PortSpec| s.validate().unwrap_err().field;
        assert_eq!(field(PortSpec::new("")), "ifname");
        assert_eq!(field(PortSpec::new("x".repeat(16))), "ifname");
        assert_eq!(field(PortSpec::new("a/b")), "ifname");
        assert_eq!(field(PortSpec { queues: 0, ..PortSpec::new("eth0") }), "queues");
        assert_eq!(field(PortSpec { queues: 65, ..PortSpec::new("eth0") }), "queues");
        assert_eq!(field(PortSpec { busy_poll_us: 1_000_001, ..PortSpec::new("eth0") }), "busy_poll_us");
        let s = PortSpec { busy_poll_us: 50, backend: Some(Backend::AfPacket), ..PortSpec::new("eth0") };
        assert!(s.validate().unwrap_err().message.contains("af_xdp option"));
        PortSpec { busy_poll_us: 50, backend: Some(Backend::AfXdp), ..PortSpec::new("eth0") }.validate().unwrap();
    }
}
