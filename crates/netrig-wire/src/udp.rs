//! UDP (RFC 768): the header's length (written by [`crate::stack`], read by [`crate::dissect`]).

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;
