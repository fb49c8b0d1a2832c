//! YCSB benchmark driver for TurtleKV and the stores people would pick
//! instead (RocksDB, fjall, redb, LMDB), each behind a cargo feature.
//! See `docs/benchmarks.md` for how to run it and read its output.

pub mod cgroup;
pub mod cli;
pub mod engines;
pub mod fill;
pub mod generator;
pub mod isolate;
pub mod keys;
pub mod markdown;
pub mod measure;
pub mod meta;
pub mod plot;
pub mod report;
pub mod rng;
pub mod runner;
mod worker;
pub mod workload;
pub mod ycsb;
