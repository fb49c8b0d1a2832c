//! The Redis serialization protocol: requests in, replies out.

pub mod parse;
pub mod write;

pub use parse::{Decoder, Limits};
pub use write::{Protocol, Reply};

#[cfg(test)]
mod parse_tests;
