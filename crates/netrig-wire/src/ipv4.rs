//! IPv4 (RFC 791): the fixed header's length (headers are written by [`crate::stack`], read by
//! [`crate::dissect`]).

/// Length of the IPv4 header without options.
pub const HEADER_LEN: usize = 20;
