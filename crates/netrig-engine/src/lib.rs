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

pub mod clock;
pub mod error;
pub mod open;
pub mod port;
#[allow(unsafe_code)]
pub mod sys;

pub use error::{ConfigError, EngineError, PortError};
pub use port::{Backend, Port, PortCaps, PortSpec, RxMeta, RxQueue, RxQueueStats, TimestampSource, TxQueue, TxQueueStats};
