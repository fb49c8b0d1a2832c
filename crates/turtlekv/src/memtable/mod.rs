//! MemTables: concurrent, ordered, multi-version buffers of recent writes.
//!
//! Each entry is keyed by (user key, sequence number); a reader at sequence
//! number `s` sees, per key, the newest version with a number `<= s`.
//!
//! Two structures share the entry layout (`node.rs`) and the arena: the
//! B+-tree (`btree.rs`), which the database uses, and the skiplist
//! (`skiplist.rs`), kept as the baseline the micro-benchmark compares it
//! with (`benches/memtable.rs`).

mod arena;
mod bloom;
mod btree;
mod btree_check;
mod btree_node;
mod collect;
mod node;
mod range_tombstones;
mod search;
#[cfg(any(test, feature = "sim"))]
mod skiplist;
#[cfg(test)]
mod tests;

use std::fmt::Debug;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use crate::mem::MappingPool;
use crate::values::Value;

pub(crate) use btree::BTreeMemTable;
pub(crate) use collect::collect_latest;
pub(crate) use range_tombstones::{RangeTombstones, merge_ranges};
#[cfg(any(test, feature = "sim"))]
pub(crate) use skiplist::SkipListMemTable;

/// The newest visible version of one key: `None` is a tombstone.
pub(crate) type Versioned = (Bytes, Option<Value>);

/// Where a version of a key will go, as a search found it before the
/// writer's turn (`MemTable::prepare_insert`). Only the MemTable that made
/// it reads it; any other ignores it.
#[derive(Debug)]
pub(crate) struct InsertHint {
    owner: *const (),
    at: HintAt,
}

/// A skiplist hint: the last node below the key at each level (null: the
/// head).
#[cfg(any(test, feature = "sim"))]
type HintPreds = [*mut node::Node; node::MAX_HEIGHT];

#[derive(Debug)]
enum HintAt {
    /// From the skiplist. Nodes are never unlinked, so each stays below the
    /// key and linked at its level; only nodes linked in since may lie
    /// between it and the new version.
    #[cfg(any(test, feature = "sim"))]
    Preds(HintPreds),
    /// From the B+-tree: the leaf whose range held the key, and its version
    /// then. An unchanged leaf still holds it.
    Leaf {
        leaf: *const btree_node::Header,
        version: u64,
        /// The first entry not below the key then (null: none), which is
        /// the key's newest version if it holds the key: still so while
        /// the leaf is unchanged (a transaction's check). Its key is
        /// compared only by that check: reading it here, for every write,
        /// cost a cache miss per put (6% of a load's CPU).
        next: *const node::Node,
    },
}

// SAFETY: plain addresses, dereferenced only by the MemTable that made
// them (`made_by`), which synchronises its own nodes.
unsafe impl Send for InsertHint {}
// SAFETY: as above; a hint is never written after it is made.
unsafe impl Sync for InsertHint {}

impl InsertHint {
    fn new(owner: *const (), at: HintAt) -> Self {
        InsertHint { owner, at }
    }

    /// What the hint says, if `owner` made it.
    fn made_by(&self, owner: *const ()) -> Option<&HintAt> {
        std::ptr::eq(self.owner, owner).then_some(&self.at)
    }

    #[cfg(test)]
    pub(crate) fn owner_for_tests(&self) -> *const () {
        self.owner
    }
}

/// A new, empty MemTable for about `capacity_bytes` of entries, with arena
/// chunks from `pool` when given. The B+-tree: on a random-order load it
/// takes a quarter less CPU per insert than the skiplist
/// (`docs/benchmarks.md`, "The B+-tree MemTable").
pub(crate) fn new_memtable(
    capacity_bytes: u64,
    pool: Option<Arc<MappingPool>>,
) -> Arc<dyn MemTable> {
    Arc::new(BTreeMemTable::with_capacity_in(capacity_bytes, pool))
}

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
    fn insert(&self, key: Bytes, seq: u64, value: Option<Value>);

    /// Searches now, without the writer's lock, for where the next version
    /// of `key` will go; `insert_prepared` then only checks what was linked
    /// in since. Writers call it before they queue for the group commit,
    /// so the search runs in parallel instead of in the leader's turn.
    fn prepare_insert(&self, key: &[u8]) -> InsertHint;

    /// `insert`, starting from `hint` when this MemTable made it, for a
    /// version newer than every version of `key` already held.
    fn insert_prepared(&self, key: Bytes, seq: u64, value: Option<Value>, hint: &InsertHint);

    /// The newest version of `key` visible at `seq`: `None` when there is
    /// none, `Some(None)` for a tombstone.
    fn get(&self, key: &[u8], seq: u64) -> Option<Option<Value>>;

    /// Sequence number of the newest version of `key` at or below `seq`
    /// (the version `get` finds), if any: a read compares it with the
    /// range tombstones that cover the key.
    fn visible_seq(&self, key: &[u8], seq: u64) -> Option<u64>;

    /// The deleted key ranges this MemTable holds
    /// (`range_tombstones.rs`).
    fn range_tombstones(&self) -> &RangeTombstones;

    /// Adds the deletion of every key in `start..end` at `seq`. Like an
    /// insert, only the writer calls it, before `seq` is visible.
    fn delete_range(&self, start: Bytes, end: Bytes, seq: u64) {
        self.range_tombstones().insert(start, end, seq);
    }

    /// Sequence number of the newest version of `key` held, if any (a
    /// transaction's commit check).
    fn newest_seq(&self, key: &[u8]) -> Option<u64>;

    /// `newest_seq`, from what `prepare_insert` found for `key` when this
    /// MemTable made `hint` and nothing changed where the key lies since;
    /// `None` when the hint cannot tell. Only the writer (the group
    /// commit's leader) may call it.
    fn newest_seq_hinted(&self, _key: &[u8], _hint: &InsertHint) -> Option<Option<u64>> {
        None
    }

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

    /// Bytes charged for all versions, overwrites, tombstones and range
    /// tombstones included.
    fn size_bytes(&self) -> u64;

    /// Number of versions held (range tombstones not counted).
    fn len(&self) -> usize;

    /// Whether the MemTable holds no version and no range tombstone.
    fn holds_nothing(&self) -> bool {
        self.len() == 0 && self.range_tombstones().is_empty()
    }
}
