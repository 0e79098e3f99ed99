//! The traffic pipeline's building blocks, used by every entry point of [`crate::run`] and never
//! using them: what to send ([`stream`], [`flows`], [`replay`]), the TX worker ([`tx`]) with its
//! [`pacing`] and rate [`schedule`], the receive loop ([`rx`]), and the receive side's analysis
//! ([`analyze`]) with its per-flow state ([`flowstate`]), latency [`timeline`] and run [`tags`].
pub mod analyze;
pub mod flows;
pub mod flowstate;
pub mod pacing;
pub(crate) mod pick;
pub mod replay;
pub mod rx;
pub mod schedule;
pub(crate) mod source;
pub mod stream;
pub mod tags;
pub mod timeline;
pub mod tx;
