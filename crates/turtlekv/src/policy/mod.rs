//! The memory policy: how one budget is shared by the MemTables, the
//! record cache, the page cache and the running checkpoint's working set,
//! how large MemTables grow before they are frozen, and when the record
//! cache takes memory from the page cache. Its decisions are made by the
//! write path (each group commit rebalances) and by the checkpoint thread
//! (once a window, and around each checkpoint).

pub(crate) mod budget;
pub(crate) mod cache_split;
pub(crate) mod read_pressure;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::record_cache::RecordCache;
use crate::store::VersionSet;
use budget::MemoryBudget;

const KIB: u64 = 1024;

/// Smallest MemTable capacity accepted.
pub(crate) const MIN_CHECKPOINT_DISTANCE_BYTES: u64 = 4 * KIB;

/// Smallest memory budget accepted.
pub(crate) const MIN_CACHE_CAPACITY_BYTES: u64 = 64 * KIB;

/// The record cache's share of a memory budget: what was asked for, capped
/// at half the budget so the page cache always keeps the other half.
pub(crate) fn record_cache_share(asked_bytes: u64, budget_bytes: u64) -> u64 {
    asked_bytes.min(budget_bytes / 2)
}

/// What the memory policy starts from (the memory knobs of the options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemoryConfig {
    pub budget_bytes: u64,
    pub checkpoint_distance_bytes: u64,
    pub write_only_checkpoint_distance_bytes: u64,
    pub checkpoint_on_read_pressure: bool,
    pub record_cache_bytes: u64,
    pub record_cache_auto_split: bool,
}

/// The knobs in force, changeable while the database runs, and the
/// budget's split.
#[derive(Debug)]
pub(crate) struct MemoryPolicy {
    /// Shared by the MemTables and the page cache.
    pub budget: MemoryBudget,
    checkpoint_distance_bytes: AtomicU64,
    write_only_checkpoint_distance_bytes: AtomicU64,
    /// Whether the write-only distance is in force (set by the checkpoint
    /// thread; see `read_pressure::Sample::memtables_may_grow`).
    grow_memtables: AtomicBool,
    checkpoint_on_read_pressure: bool,
    /// The record cache size asked for; it gets at most half the budget.
    record_cache_asked_bytes: AtomicU64,
    record_cache_auto_split: AtomicBool,
    /// The automatic split's votes so far (checkpoint thread), and the
    /// lock every change of the record cache's share takes.
    split_streak: Mutex<cache_split::Streak>,
}

impl MemoryPolicy {
    pub fn new(config: &MemoryConfig) -> Self {
        MemoryPolicy {
            budget: MemoryBudget::new(config.budget_bytes),
            checkpoint_distance_bytes: AtomicU64::new(config.checkpoint_distance_bytes),
            write_only_checkpoint_distance_bytes: AtomicU64::new(
                config.write_only_checkpoint_distance_bytes,
            ),
            grow_memtables: AtomicBool::new(false),
            checkpoint_on_read_pressure: config.checkpoint_on_read_pressure,
            record_cache_asked_bytes: AtomicU64::new(config.record_cache_bytes),
            record_cache_auto_split: AtomicBool::new(config.record_cache_auto_split),
            split_streak: Mutex::default(),
        }
    }

    /// The record cache's capacity at open: its share of the budget.
    pub fn initial_record_cache_bytes(config: &MemoryConfig) -> u64 {
        record_cache_share(config.record_cache_bytes, config.budget_bytes)
    }

    /// The MemTable capacity in force: the configured checkpoint distance
    /// (or the write-only one, under its own tighter cap, while writes come
    /// alone and the page cache does not hold the tree), capped at a
    /// quarter of the memory budget so that the active and the frozen
    /// MemTable cannot take more than half of it.
    pub fn effective_checkpoint_distance(&self, record_cache: &RecordCache) -> u64 {
        let mut configured = self.checkpoint_distance_bytes.load(Ordering::Relaxed);
        if self.grow_memtables.load(Ordering::Relaxed) {
            let write_only = self
                .write_only_checkpoint_distance_bytes
                .load(Ordering::Relaxed)
                .min(
                    self.budget
                        .max_write_only_distance_bytes(record_cache.capacity_bytes()),
                );
            configured = configured.max(write_only);
        }
        configured
            .min(self.budget.total_bytes() / 4)
            .max(MIN_CHECKPOINT_DISTANCE_BYTES)
    }

    pub fn set_checkpoint_distance(&self, bytes: u64) {
        self.checkpoint_distance_bytes
            .store(bytes, Ordering::Relaxed);
    }

    pub fn set_write_only_checkpoint_distance(&self, bytes: u64) {
        self.write_only_checkpoint_distance_bytes
            .store(bytes, Ordering::Relaxed);
    }

    /// Whether MemTables may grow to the write-only distance (the
    /// checkpoint thread's judgement of the last window).
    pub fn set_grow_memtables(&self, grow: bool) {
        self.grow_memtables.store(grow, Ordering::Relaxed);
    }

    pub fn checkpoint_on_read_pressure(&self) -> bool {
        self.checkpoint_on_read_pressure
    }

    /// Gives the page cache what the MemTables and the record cache leave
    /// of the memory budget.
    pub fn rebalance(&self, versions: &VersionSet, record_cache: &RecordCache, force: bool) {
        if let Some(trees) = versions.trees() {
            let in_use = || versions.memtable_bytes() + record_cache.capacity_bytes();
            self.budget.rebalance(in_use, &**trees, force);
        }
    }

    /// `rebalance(.., false)` for the write path, which must not wait:
    /// skipped while another thread decides a capacity.
    pub fn try_rebalance(&self, versions: &VersionSet, record_cache: &RecordCache) {
        if let Some(trees) = versions.trees() {
            let in_use = || versions.memtable_bytes() + record_cache.capacity_bytes();
            self.budget.try_rebalance(in_use, &**trees);
        }
    }

    /// Changes the whole budget and gives each cache its share of it.
    pub fn set_budget_bytes(&self, bytes: u64, versions: &VersionSet, record_cache: &RecordCache) {
        let _split = self.split_streak.lock();
        self.budget.set_total_bytes(bytes);
        self.set_ghost_windows(versions, record_cache);
        self.apply_record_cache_share(versions, record_cache);
    }

    /// Asks for a record cache of `bytes` (capped at half the budget).
    /// Under the split's lock: a step of the automatic split decided
    /// before this call does not land after it.
    pub fn set_record_cache_bytes(
        &self,
        bytes: u64,
        versions: &VersionSet,
        record_cache: &RecordCache,
    ) {
        let _split = self.split_streak.lock();
        self.record_cache_asked_bytes
            .store(bytes, Ordering::Relaxed);
        self.apply_record_cache_share(versions, record_cache);
    }

    pub fn set_record_cache_auto_split(&self, on: bool) {
        let _split = self.split_streak.lock();
        self.record_cache_auto_split.store(on, Ordering::Relaxed);
    }
}
