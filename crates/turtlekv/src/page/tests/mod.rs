//! Tests of the page store as a whole, on the fault-injecting file system
//! (and the real one where disk usage is measured).

mod accounting;
mod basic;
mod cache;
mod corruption;
mod crash;
mod gate;
mod harness;
mod mapping_pool;
mod prefetch;
mod space;
