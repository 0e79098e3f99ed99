//! IPv6 (RFC 8200): the fixed header's length (headers are written by [`crate::stack`]; extension
//! headers are walked by [`crate::dissect`]).

/// Length of the IPv6 fixed header.
pub const HEADER_LEN: usize = 40;
