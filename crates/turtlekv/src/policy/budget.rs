//! One memory budget for the MemTables and the page cache (docs/design.md, "Memory"):
//! the page cache gets what the MemTables do not hold, so raising the
//! checkpoint distance takes memory from reads and lowering it gives it back.
//! While a checkpoint runs, the cache also leaves room for the checkpoint's
//! working set (segment spans it reads, leaves and segments it builds),
//! which would otherwise come on top of the budget.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

use crate::store::TreeStore;

/// The page cache never shrinks below this fraction of the budget, so reads
/// keep their node pages even while MemTables fill the rest.
const MIN_CACHE_SHARE_DIVISOR: u64 = 8;

/// Resizing the cache costs evictions; skip changes smaller than this
/// fraction of the budget.
const RESIZE_STEP_DIVISOR: u64 = 64;

/// A checkpoint's working set per byte of the MemTable it checkpoints,
/// measured (`docs/benchmarks.md`, "Charging the checkpoint's working
/// set"): the spans of segments it merges and the leaves and segments it
/// builds from them grow with the batch.
const CHECKPOINT_RESERVE_PER_BATCH_BYTE: u64 = 2;

/// What a checkpoint of a MemTable holding `batch_bytes` sets aside, with
/// MemTables frozen at `distance_bytes`: twice the batch, and for a small
/// batch at least the batch plus `update_floor_bytes`, what its update
/// holds whatever the batch (a small batch can still flush and rewrite
/// leaves). Never more than a full MemTable's reserve, which the budget's
/// split assumes (`max_write_only_distance_bytes`) and which is all a cache
/// that holds the tree can spare. Measured, not a bound
/// (`docs/benchmarks.md`, "A floor under the checkpoint reserve").
pub(crate) fn checkpoint_reserve_bytes(
    batch_bytes: u64,
    update_floor_bytes: u64,
    distance_bytes: u64,
) -> u64 {
    let full = distance_bytes.saturating_mul(CHECKPOINT_RESERVE_PER_BATCH_BYTE);
    let small = batch_bytes.saturating_add(update_floor_bytes).min(full);
    batch_bytes
        .saturating_mul(CHECKPOINT_RESERVE_PER_BATCH_BYTE)
        .max(small)
}

#[derive(Debug)]
pub(crate) struct MemoryBudget {
    total_bytes: AtomicU64,
    /// What the page cache was last given. Held while a capacity is
    /// decided and stored (evictions run after it is released): a writer's
    /// capacity computed before a checkpoint set its reserve must not land
    /// after the checkpoint's, or the checkpoint would run with the cache
    /// at its full share.
    cache_bytes: Mutex<u64>,
    /// Set aside for the running checkpoint's working set (0 when none
    /// runs).
    checkpoint_reserve_bytes: AtomicU64,
}

impl MemoryBudget {
    pub fn new(total_bytes: u64) -> Self {
        MemoryBudget {
            total_bytes: AtomicU64::new(total_bytes),
            cache_bytes: Mutex::new(0),
            checkpoint_reserve_bytes: AtomicU64::new(0),
        }
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_bytes.load(Ordering::Relaxed)
    }

    pub fn set_total_bytes(&self, total_bytes: u64) {
        self.total_bytes.store(total_bytes, Ordering::Relaxed);
    }

    /// Sets aside `bytes` for a checkpoint's working set (0: none runs);
    /// the next `rebalance` takes it from the page cache.
    pub fn set_checkpoint_reserve_bytes(&self, bytes: u64) {
        self.checkpoint_reserve_bytes
            .store(bytes, Ordering::Relaxed);
    }

    /// The largest write-only distance that keeps the budget whole: two
    /// MemTables of it, a checkpoint's reserve for one, the record cache
    /// and the page cache's floor must fit (`docs/tuning.md`). A quarter
    /// of the budget, the cap of the plain distance, would overdraw it.
    pub fn max_write_only_distance_bytes(&self, record_cache_bytes: u64) -> u64 {
        let total = self.total_bytes();
        let memtables_and_reserve =
            (total - total / MIN_CACHE_SHARE_DIVISOR).saturating_sub(record_cache_bytes);
        memtables_and_reserve / (2 + CHECKPOINT_RESERVE_PER_BATCH_BYTE)
    }

    /// The page cache's share when the MemTables hold `memtable_bytes`.
    pub fn cache_share(&self, memtable_bytes: u64) -> u64 {
        let total = self.total_bytes();
        let reserve = self.checkpoint_reserve_bytes.load(Ordering::Relaxed);
        total
            .saturating_sub(memtable_bytes + reserve)
            .max(total / MIN_CACHE_SHARE_DIVISOR)
    }

    /// Gives the page cache its share when the MemTables and record cache
    /// hold `in_use_bytes()`, unless it already has about that. `force`
    /// resizes even for a small change (after the budget changed).
    pub fn rebalance(&self, in_use_bytes: impl Fn() -> u64, target: &dyn TreeStore, force: bool) {
        self.resize_then_evict(self.cache_bytes.lock(), in_use_bytes(), target, force);
    }

    /// `rebalance`, skipped if another thread holds the lock: the write
    /// path's call, which must not wait (the next group commit looks
    /// again).
    pub fn try_rebalance(&self, in_use_bytes: impl Fn() -> u64, target: &dyn TreeStore) {
        if let Some(resizing) = self.cache_bytes.try_lock() {
            self.resize_then_evict(resizing, in_use_bytes(), target, false);
        }
    }

    /// Resizes under `resizing`, then releases it and evicts if the
    /// capacity changed.
    fn resize_then_evict(
        &self,
        mut resizing: MutexGuard<'_, u64>,
        in_use_bytes: u64,
        target: &dyn TreeStore,
        force: bool,
    ) {
        let resized = self.resize(&mut resizing, in_use_bytes, target, force);
        drop(resizing);
        if resized {
            target.evict_to_cache_capacity();
        }
    }

    /// Holds off every other resize until the guard drops, for a change
    /// made of several steps (`resize_locked` with it).
    pub fn lock_resizes(&self) -> MutexGuard<'_, u64> {
        self.cache_bytes.lock()
    }

    /// `rebalance` under a guard from `lock_resizes`; a shrink evicts
    /// before it returns, so the caller's next step finds the room.
    pub fn resize_locked(
        &self,
        resizing: &mut MutexGuard<'_, u64>,
        in_use_bytes: u64,
        target: &dyn TreeStore,
        force: bool,
    ) {
        if self.resize(resizing, in_use_bytes, target, force) {
            target.evict_to_cache_capacity();
        }
    }

    /// Called under the lock with what is in use read under it too, so a
    /// capacity is never stored from an older view of the MemTables or the
    /// reserve after one from a newer view. Only the capacity is stored
    /// here; evictions run outside the lock (several threads may evict at
    /// once), so a writer never waits for a checkpoint's shrink. Returns
    /// whether the capacity changed.
    fn resize(
        &self,
        cache_bytes: &mut u64,
        in_use_bytes: u64,
        target: &dyn TreeStore,
        force: bool,
    ) -> bool {
        let share = self.cache_share(in_use_bytes);
        let step = self.total_bytes() / RESIZE_STEP_DIVISOR;
        if !force && share.abs_diff(*cache_bytes) <= step {
            return false;
        }
        *cache_bytes = share;
        target.set_cache_capacity(share);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_gets_what_memtables_leave_down_to_a_floor() {
        let budget = MemoryBudget::new(800);
        assert_eq!(budget.cache_share(0), 800);
        assert_eq!(budget.cache_share(300), 500);
        assert_eq!(budget.cache_share(790), 100);
        assert_eq!(budget.cache_share(5000), 100);
        budget.set_total_bytes(1600);
        assert_eq!(budget.cache_share(300), 1300);
    }

    #[test]
    fn the_reserve_is_twice_the_batch_and_for_small_ones_the_floor_on_top() {
        // A full MemTable: twice the batch, whatever the floor.
        assert_eq!(checkpoint_reserve_bytes(100, 0, 100), 200);
        assert_eq!(checkpoint_reserve_bytes(100, 150, 100), 200);
        // A small one: the batch plus the floor...
        assert_eq!(checkpoint_reserve_bytes(10, 150, 100), 160);
        assert_eq!(checkpoint_reserve_bytes(0, 150, 100), 150);
        // ...up to a full one's reserve, and never below twice the batch.
        assert_eq!(checkpoint_reserve_bytes(80, 150, 100), 200);
        assert_eq!(checkpoint_reserve_bytes(10, 500, 100), 200);
        assert_eq!(checkpoint_reserve_bytes(150, 0, 100), 300);
        assert_eq!(checkpoint_reserve_bytes(150, 500, 100), 300);
        assert_eq!(
            checkpoint_reserve_bytes(u64::MAX, u64::MAX, u64::MAX),
            u64::MAX
        );
    }

    #[test]
    fn the_write_only_distance_leaves_the_cache_its_floor() {
        let budget = MemoryBudget::new(1600);
        // 1600 - 200 (floor) - 200 (record cache) = 1200 for two MemTables
        // and a reserve of twice one.
        assert_eq!(budget.max_write_only_distance_bytes(200), 300);
        let distance = budget.max_write_only_distance_bytes(200);
        let reserve = checkpoint_reserve_bytes(distance, 0, distance);
        assert_eq!(2 * distance + reserve + 200 + 1600 / 8, 1600);
        budget.set_checkpoint_reserve_bytes(reserve);
        assert_eq!(budget.cache_share(2 * distance + 200), 200);
        assert_eq!(budget.max_write_only_distance_bytes(5000), 0);
    }

    #[test]
    fn a_running_checkpoint_takes_its_reserve_from_the_cache() {
        let budget = MemoryBudget::new(800);
        budget.set_checkpoint_reserve_bytes(200);
        assert_eq!(budget.cache_share(300), 300);
        assert_eq!(budget.cache_share(650), 100, "down to the floor");
        budget.set_checkpoint_reserve_bytes(0);
        assert_eq!(budget.cache_share(300), 500);
    }

    /// A writer's resize that read no reserve must not land after the
    /// checkpoint's own resize has returned.
    #[test]
    fn a_checkpoint_reserve_is_not_undone_by_a_concurrent_writer() {
        use crate::store::memory::MemoryTreeStore;
        use std::sync::atomic::AtomicBool;
        let budget = MemoryBudget::new(6_400);
        let target = MemoryTreeStore::default();
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    budget.try_rebalance(|| 0, &target);
                }
            });
            for _ in 0..20_000 {
                budget.set_checkpoint_reserve_bytes(2_000);
                budget.rebalance(|| 0, &target, false);
                let during = target.cache_capacity_bytes.load(Ordering::SeqCst);
                budget.set_checkpoint_reserve_bytes(0);
                budget.rebalance(|| 0, &target, false);
                if during != 4_400 {
                    done.store(true, Ordering::Relaxed);
                    panic!("capacity {during} while the reserve was set");
                }
            }
            done.store(true, Ordering::Relaxed);
        });
    }
}
