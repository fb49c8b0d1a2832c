//! Keyspaces: named key spaces that share one WAL, one memory budget and
//! one tree. Each stores its keys behind a tag of its own (`tag.rs`); the
//! catalog maps names to tags, durably (`catalog.rs`); a dropped
//! keyspace's keys are deleted in the background (`cleaner.rs`).

mod catalog;
mod cleaner;
mod core;
mod counts;
mod handle;
mod tag;
#[cfg(test)]
mod tests;

pub(crate) use catalog::Catalog;
pub(crate) use core::KeyspaceCore;
pub(crate) use counts::BatchCounts;
pub use handle::{Keyspace, KeyspaceStats};
pub(crate) use handle::{
    approximate_len, end_pair, get_at, get_latest, multi_get_at, prefix_in, range_in,
};
pub(crate) use tag::{DEFAULT_ID, Tag};
