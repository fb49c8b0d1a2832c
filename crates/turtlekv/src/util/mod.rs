//! Small building blocks shared by several layers, with no knowledge of
//! the engine: LEB128 integers, CPU cache prefetch hints, striped event
//! counters, the ghost list of recently evicted keys and database
//! identities.

pub(crate) mod ghost;
pub(crate) mod identity;
pub(crate) mod prefetch;
pub(crate) mod striped;
pub(crate) mod varint;
