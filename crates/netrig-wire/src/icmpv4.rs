//! ICMPv4 echo (RFC 792): the echo header's length and message types.

/// Length of an echo message's header: type, code, checksum, identifier, sequence number.
pub const HEADER_LEN: usize = 8;
pub const TYPE_ECHO_REPLY: u8 = 0;
pub const TYPE_ECHO_REQUEST: u8 = 8;
