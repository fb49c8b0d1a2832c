//! Tests of the durable page store (pages and superblock) as a whole, and
//! of the tree on it, on the fault-injecting file system (and the real one
//! where disk usage is measured).

mod accounting;
mod basic;
mod corruption;
mod crash;
mod harness;
mod space;
