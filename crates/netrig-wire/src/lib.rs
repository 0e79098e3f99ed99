//! netrig-wire: packet views and representations (being written).
#![forbid(unsafe_code)]
