//! MemTables: concurrent, ordered, multi-version buffers of recent writes.
//!
//! Each entry is keyed by (user key, sequence number); a reader at sequence
//! number `s` sees, per key, the newest version with a number `<= s`.

mod arena;
mod bloom;
mod node;
mod skiplist;
#[cfg(test)]
mod tests;

use std::fmt::Debug;
use std::ops::Bound;

use bytes::Bytes;

pub(crate) use skiplist::{InsertHint, SkipListMemTable};

/// The newest visible version of one key: `None` is a tombstone.
pub(crate) type Versioned = (Bytes, Option<Bytes>);

/// Scan direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Forward,
    Reverse,
}

/// What a MemTable must offer; kept small so that other structures (an
/// adaptive radix tree) can be measured against the skiplist.
pub(crate) trait MemTable: Send + Sync + Debug {
    /// Adds a version. Sequence numbers of one key are unique.
    fn insert(&self, key: Bytes, seq: u64, value: Option<Bytes>);

    /// Searches now, without the writer's lock, for where the next version
    /// of `key` will go; `insert_prepared` then only checks what was linked
    /// in since. Writers call it before they queue for the group commit,
    /// so the search runs in parallel instead of in the leader's turn.
    fn prepare_insert(&self, key: &[u8]) -> InsertHint;

    /// `insert`, starting from `hint` when this MemTable made it, for a
    /// version newer than every version of `key` already held.
    fn insert_prepared(&self, key: Bytes, seq: u64, value: Option<Bytes>, hint: &InsertHint);

    /// The newest version of `key` visible at `seq`: `None` when there is
    /// none, `Some(None)` for a tombstone.
    fn get(&self, key: &[u8], seq: u64) -> Option<Option<Bytes>>;

    /// Appends to `out` up to `limit` keys within `(lower, upper)`, each with
    /// its newest version visible at `seq` (tombstones included), in
    /// `direction` order starting from the matching end of the range.
    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        seq: u64,
        direction: Direction,
        limit: usize,
        out: &mut Vec<Versioned>,
    );

    /// Deep check of the structure's invariants, for `Db::check` and tests.
    fn check_structure(&self) -> Result<(), String>;

    /// Ends writes for good (the MemTable is frozen): later reads may
    /// share its memory instead of copying. An insert after it panics.
    fn seal(&self);

    /// Bytes charged for all versions, overwrites and tombstones included.
    fn size_bytes(&self) -> u64;

    /// Number of versions held.
    fn len(&self) -> usize;
}
