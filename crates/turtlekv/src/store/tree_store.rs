//! Where checkpoints go: a store of durable tree versions.
//!
//! The engine's store is the TurtleTree on the page store
//! ([`super::PagedTreeStore`]); tests of the checkpoint pipeline's control
//! flow plug in an in-memory one.

use std::fmt::Debug;
use std::sync::Arc;

use super::TreeVersion;
use super::space::{Pace, SpaceEstimate};
use super::superblock::{Identity, SlotDamage};
use crate::Result;
use crate::memtable::MemTable;
use crate::page::PageStoreStats;
use crate::tree::{TreeShape, UpdateEvents};
use crate::wal::WalPosition;

/// What the checkpoint pipeline records with a checkpoint, so that recovery
/// knows which WAL records the tree already holds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Coverage {
    /// Highest sequence number whose write the checkpoint contains.
    pub covered_seq: u64,
    /// Where the first record above `covered_seq` is (or will be) logged.
    pub wal_replay_from: WalPosition,
}

/// Counters and gauges of a store, for `Db::stats`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct StoreStats {
    /// Pages and bytes written by every checkpoint so far (this handle).
    pub written: UpdateEvents,
    /// The page store's I/O and cache counters.
    pub pages: PageStoreStats,
    /// Shape of the newest version.
    pub shape: TreeShape,
    /// Its garbage and live bytes, as the space policy estimates them.
    pub space: SpaceEstimate,
    /// Tree keys that checkpoints deleted for range tombstones.
    pub range_keys_deleted: u64,
    /// Updates committed on their own to delete those keys in chunks.
    pub range_steps: u64,
}

/// Where checkpoints go: the newest durable tree version, and how the next
/// one is made from a frozen MemTable.
pub(crate) trait TreeStore: Send + Sync + Debug {
    /// The newest durable version.
    fn current(&self) -> Arc<dyn TreeVersion>;

    /// Applies the frozen `memtable` (the newest version of each key, `None`
    /// for a tombstone) on top of the current version, with every key of
    /// the current version within one of its range tombstones deleted
    /// unless the MemTable holds a version of it, makes the result
    /// durable, and returns it. With range tombstones, the caller makes
    /// the MemTable's WAL records durable first: a store may commit part
    /// of the deletions before the checkpoint, at the old coverage. `coverage` is recorded with it, so that
    /// recovery replays only the WAL records above it. The data-parallel
    /// parts run on `workers`.
    fn checkpoint(
        &self,
        memtable: &dyn MemTable,
        coverage: Coverage,
        workers: &rayon::ThreadPool,
    ) -> Result<Arc<dyn TreeVersion>>;

    /// The database's identity and the WAL floor of the newest commit
    /// (`docs/format.md`, "Superblock"); `None` when the store keeps
    /// neither.
    fn identity(&self) -> Option<(Identity, u64)> {
        None
    }

    /// Records durably that segment `segment_id` of the log exists (the
    /// open that started it calls this once its header is durable), and
    /// with it the identity assigned at this open, if any.
    fn record_wal_floor(&self, _segment_id: u64) -> Result<()> {
        Ok(())
    }

    /// Checks what the store keeps durable beside the tree (both
    /// superblock slots), for `Db::check`.
    fn check_durable_metadata(&self) -> Result<()> {
        Ok(())
    }

    /// A superblock slot that failed to validate when the store opened.
    fn open_damage(&self) -> Option<SlotDamage> {
        None
    }

    /// Counters and gauges; a store without pages reports zeros.
    fn stats(&self) -> StoreStats {
        StoreStats::default()
    }

    /// Reclaims garbage as an update of its own: when the newest version
    /// holds more than its threshold at `pace`, drains some of the worst
    /// buffers (about `work_bytes` of rewriting, at least a few leaves'
    /// worth) and commits the result with the same coverage. `None` when
    /// there was nothing to do.
    fn reclaim_space(
        &self,
        _workers: &rayon::ThreadPool,
        _work_bytes: u64,
        _pace: Pace,
    ) -> Result<Option<Arc<dyn TreeVersion>>> {
        Ok(None)
    }

    /// Asks the reclamation steps between checkpoints to flush whatever
    /// the nodes above the leaves buffer for the stored keys from `lower`
    /// up to `upper` into the leaves, whatever the space policy says (a
    /// dropped keyspace's tombstones, so that its pages are freed).
    fn request_drain(&self, _lower: bytes::Bytes, _upper: std::ops::Bound<bytes::Bytes>) {}

    /// Drain requests not yet served.
    fn drains_pending(&self) -> usize {
        0
    }

    /// `reclaim`, and returns freed leaf slots' space to the file system
    /// now rather than at the next commit (the database is idle).
    fn release_freed_space(&self) -> Result<()> {
        self.reclaim()
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
    fn mapping_pool(&self) -> Option<Arc<crate::mem::MappingPool>> {
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

    /// Largest item (encoded length) the store can hold; writes
    /// of larger ones are refused up front.
    fn max_item_bytes(&self) -> usize {
        usize::MAX
    }

    /// Longest stored key (keyspace tag included) the store can hold; writes of longer ones are
    /// refused up front.
    fn max_key_bytes(&self) -> usize {
        crate::key::MAX_STORED_KEY_BYTES
    }
}
