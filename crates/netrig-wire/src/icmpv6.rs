//! ICMPv6 echo (RFC 4443): message types (the echo header is ICMPv4's shape:
//! [`crate::icmpv4::HEADER_LEN`]).

pub const TYPE_ECHO_REQUEST: u8 = 128;
pub const TYPE_ECHO_REPLY: u8 = 129;
