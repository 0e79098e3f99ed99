//! Engine errors: one enum per concern, each variant with the context a user needs.
use thiserror::Error;

/// Opening or driving a port failed.
#[derive(Debug, Error)]
pub enum PortError {
    #[error("{ifname}: no such interface{}", netns_hint(.netns))]
    NoSuchInterface { ifname: String, netns: Option<String> },
    #[error("{ifname}: {what} needs root (CAP_NET_RAW/CAP_NET_ADMIN); run netrig as root")]
    PermissionDenied { ifname: String, what: String },
    #[error("{ifname}: backend {backend} is not supported here: {reason}")]
    Unsupported { ifname: String, backend: String, reason: String },
    #[error("{ifname} queue {queue}: {op} failed: {source}")]
    Io {
        ifname: String,
        queue: usize,
        op: String,
        #[source]
        source: std::io::Error,
    },
    #[error("network namespace {netns}: {source}")]
    Netns {
        netns: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{ifname}: queue {queue} out of range (the port has {queues} queues)")]
    NoSuchQueue { ifname: String, queue: usize, queues: usize },
    #[error("{ifname}: {message}")]
    Busy { ifname: String, message: String },
    #[error("{ifname}: {message}")]
    Other { ifname: String, message: String },
    /// The transmit guard refused the interface ([`crate::guard`]).
    #[error(
        "{ifname}{}: refusing to send test traffic: {rule}. Use a test bed (netrig testbed up) or an interface \
         cabled only to the DUT; if this really is a test network, override with {}",
        netns_in(.netns), LIVE_OVERRIDE
    )]
    Live { ifname: String, netns: Option<String>, rule: String },
}

/// How to override the transmit guard, as every refusal says it.
pub const LIVE_OVERRIDE: &str = "--i-know-this-is-live (config: ports.i_know_this_is_live = true; \
                                 API: Port(..., i_know_this_is_live=True))";

fn netns_in(netns: &Option<String>) -> String {
    netns.as_ref().map(|ns| format!(" (network namespace {ns})")).unwrap_or_default()
}

fn netns_hint(netns: &Option<String>) -> String {
    match netns {
        Some(ns) => format!(" in network namespace {ns}"),
        None => " (see `netrig ports` or `ip link`)".to_string(),
    }
}

/// A stream or trial configuration is invalid. Raised before any resource is acquired.
#[derive(Debug, Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// Dotted path of the offending field, e.g. `streams[0].frame_size`.
    pub field: String,
    /// What is wrong and what to do about it.
    pub message: String,
}

impl ConfigError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError { field: field.into(), message: message.into() }
    }

    /// The same error inside `prefix`: `frame_size` within `streams[2]` is `streams[2].frame_size`.
    pub fn within(self, prefix: &str) -> Self {
        ConfigError { field: format!("{prefix}.{}", self.field), message: self.message }
    }
}

/// Anything that can go wrong in the engine.
#[derive(Debug, Error)]
pub enum EngineError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Port(#[from] PortError),
    #[error("worker thread {name}: {message}")]
    Worker { name: String, message: String },
    #[error("trial interrupted")]
    Interrupted,
    /// Something this kernel or these privileges do not allow (a BPF program, a perf event).
    #[error("{what}: {reason}")]
    Capability { what: String, reason: String },
}
