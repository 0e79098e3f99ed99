//! netrig-engine: ports, paced TX workers, analysing RX workers, and trials.
//!
//! Data flow (see `docs/architecture.md`):
//! ```text
//! StreamConfig ──compile──▶ FramePlan ──▶ TX worker (pinned, paced) ──▶ TxQueue ──▶ wire/DUT
//!                                                                                       │
//! TrialResult ◀── collect ◀── per-flow counters + latency histograms ◀── RX worker ◀── RxQueue
//! ```
//! All `unsafe` lives in [`sys`].
#![deny(unsafe_code)]

pub mod analyze;
pub mod capture;
pub mod clock;
pub mod error;
pub mod fault;
pub mod flows;
pub mod flowstate;
pub mod forward;
pub mod generator;
pub mod guard;
pub mod listen;
pub mod loopback;
pub mod open;
pub mod pacing;
pub mod pin;
pub mod port;
pub mod replay;
pub mod rng;
pub mod schedule;
pub mod stalls;
pub mod stream;
#[allow(unsafe_code)]
pub mod sys;
pub mod timeline;
pub mod trial;
pub mod tx;
pub mod validity;

pub use error::{ConfigError, EngineError, PortError};
pub use pacing::{Pacing, Smoothness};
pub use port::{
    Backend, Port, PortCaps, PortSpec, RxMeta, RxQueue, RxQueueStats, RxWait, TimestampSource, TxQueue, TxQueueStats,
};
pub use schedule::{linear_ramp, RatePhase};
pub use stream::{FlowOrder, FlowSpec, FrameSize, Rate, Stop, StreamConfig};
pub use trial::{run_trial, TrialConfig, TrialControl, TrialResult};
