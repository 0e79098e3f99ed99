//! netrig-engine: ports, paced TX workers, analysing RX workers, and trials.
//!
//! The entry points are in [`run`] (a trial, the OTG generator, listen, forward, capture), each a
//! composition of the traffic pipeline's building blocks in [`traffic`] (streams and flows, the
//! TX worker and its pacing, the receive analysis and per-flow state) over the ports ([`port`],
//! [`open`], [`sys`]). `traffic` never uses `run` (tests/test_layering.py).
//!
//! Data flow (see `docs/architecture.md`):
//! ```text
//! StreamConfig ──compile──▶ FramePlan ──▶ TX worker (pinned, paced) ──▶ TxQueue ──▶ wire/DUT
//!                                                                                       │
//! TrialResult ◀── collect ◀── per-flow counters + latency histograms ◀── RX worker ◀── RxQueue
//! ```
//! All `unsafe` lives in [`sys`].
#![deny(unsafe_code)]

pub mod run;
pub mod traffic;

pub mod clock;
pub mod error;
pub mod fault;
pub mod guard;
pub mod loopback;
pub mod open;
pub mod pin;
pub mod port;
pub mod rng;
pub mod stalls;
#[allow(unsafe_code)]
pub mod sys;

pub use error::{ConfigError, EngineError, PortError};
pub use port::{
    Backend, Port, PortCaps, PortSpec, RxMeta, RxQueue, RxQueueStats, RxWait, TimestampSource, TxQueue, TxQueueStats,
};
pub use run::trial::{run_trial, TrialConfig, TrialControl, TrialResult};
pub use traffic::pacing::{Pacing, Smoothness};
pub use traffic::schedule::{linear_ramp, RatePhase};
pub use traffic::stream::{FlowOrder, FlowSpec, FrameSize, Rate, Stop, StreamConfig};
