//! What the checkpoint pipeline needs from the tree below it.
//!
//! The engine's target is the TurtleTree on the page store; tests of the
//! pipeline's control flow can plug in a simpler one.

use std::fmt::Debug;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use crate::Result;
use crate::memtable::{Direction, MemTable, Versioned};
use crate::page::{PageStoreStats, WalPosition};
use crate::tree::{TreeShape, UpdateEvents};

/// One durable, immutable version of the tree: the result of a checkpoint.
/// Readers holding it keep its pages from being reused.
pub(crate) trait TreeVersion: Send + Sync + Debug {
    /// The value of `key` in this version.
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>>;

    /// An iterator over the live pairs within `(lower, upper)` in
    /// `direction` order, starting from the matching end of the range. It
    /// reads this version's pages: the caller keeps the version alive for
    /// as long as it uses the cursor.
    fn cursor(&self, lower: Bound<Bytes>, upper: Bound<Bytes>, direction: Direction) -> TreeCursor;

    /// Highest sequence number whose write this version contains.
    fn covered_seq(&self) -> u64;

    /// Verifies every page and invariant of this version (`Db::check`).
    fn check(&self) -> Result<TreeCheck>;
}

/// A scan over one tree version, taken in batches.
pub(crate) trait TreeScan: Send {
    /// Appends the next live pairs to `out`, in the cursor's direction: up
    /// to `limit` of them, fewer only when the scan is over. After an
    /// error the scan yields nothing more.
    fn fill(&mut self, limit: usize, out: &mut Vec<Versioned>) -> Result<()>;
}

/// A scan over one tree version.
pub(crate) type TreeCursor = Box<dyn TreeScan>;

/// What a tree check verified.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TreeCheck {
    /// Live keys.
    pub keys: u64,
    /// Pages read and verified.
    pub pages: u64,
}

/// What the checkpoint pipeline records with a checkpoint, so that recovery
/// knows which WAL records the tree already holds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Coverage {
    /// Highest sequence number whose write the checkpoint contains.
    pub covered_seq: u64,
    /// Where the first record above `covered_seq` is (or will be) logged.
    pub wal_replay_from: WalPosition,
}

/// Counters and gauges of a target, for `Db::stats`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TargetStats {
    /// Pages and bytes written by every checkpoint so far (this handle).
    pub written: UpdateEvents,
    /// The page store's I/O and cache counters.
    pub store: PageStoreStats,
    /// Shape of the newest version.
    pub shape: TreeShape,
}

/// Where checkpoints go.
pub(crate) trait CheckpointTarget: Send + Sync + Debug {
    /// The newest durable version.
    fn current(&self) -> Arc<dyn TreeVersion>;

    /// Applies the frozen `memtable` (the newest version of each key, `None`
    /// for a tombstone) on top of the current version, makes the result
    /// durable, and returns it. `coverage` is recorded with it, so that recovery
    /// replays only the WAL records above it.
    fn checkpoint(
        &self,
        memtable: &dyn MemTable,
        coverage: Coverage,
    ) -> Result<Arc<dyn TreeVersion>>;

    /// Counters and gauges; a target without storage reports zeros.
    fn stats(&self) -> TargetStats {
        TargetStats::default()
    }

    /// Reuses the pages of versions no reader holds any more; the pipeline
    /// calls it after publishing a new version.
    fn reclaim(&self) -> Result<()> {
        Ok(())
    }

    /// Changes the page cache's byte budget. A shrink's evictions are left
    /// to `evict_to_cache_capacity`, so that the budget can order capacity
    /// changes under its lock and evict outside it.
    fn set_cache_capacity(&self, _capacity_bytes: u64) {}

    /// Evicts until the page cache is within its budget.
    fn evict_to_cache_capacity(&self) {}

    /// The page cache's pool of mappings, for MemTable arenas: a dropped
    /// MemTable's memory is kept there (charged to the cache, while it has
    /// room) for the next MemTable.
    fn mapping_pool(&self) -> Option<Arc<crate::io::MappingPool>> {
        None
    }

    /// The I/O priority of the threads the target runs checkpoints on (its
    /// merge pool), which the checkpoint thread joins too.
    fn io_priority(&self) -> Option<Arc<crate::io::CheckpointIoPriority>> {
        None
    }

    /// Changes how many bytes of recently evicted blocks the page cache
    /// remembers, to measure what more memory would save it.
    fn set_cache_ghost_window_bytes(&self, _bytes: u64) {}

    /// Memory a checkpoint holds however small its MemTable, estimated
    /// (`TreeConfig::update_memory_estimate_bytes`); a small checkpoint
    /// reserves it on top of its batch, up to a full one's reserve.
    fn checkpoint_memory_floor_bytes(&self) -> u64 {
        0
    }

    /// Largest item (encoded length) the target can store; writes
    /// of larger ones are refused up front.
    fn max_item_bytes(&self) -> usize {
        usize::MAX
    }

    /// Longest key the target can store; writes of longer ones are
    /// refused up front.
    fn max_key_bytes(&self) -> usize {
        crate::MAX_KEY_SIZE
    }
}
