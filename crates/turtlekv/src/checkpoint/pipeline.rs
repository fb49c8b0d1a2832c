//! The checkpoint thread's loop: one checkpoint per frozen MemTable, oldest
//! first, and once a window the memory policy's decisions (read pressure,
//! MemTable growth, the record cache's share).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::Checkpoints;
use crate::Result;
use crate::error::Poison;
use crate::memtable::MemTable;
use crate::policy::MemoryPolicy;
use crate::policy::budget::checkpoint_reserve_bytes;
use crate::policy::cache_split::Recalls;
use crate::policy::read_pressure::{Monitor, Pressure, Sample};
use crate::record_cache::RecordCache;
use crate::stats::{Counters, bump};
use crate::store::{Coverage, Frozen, Pace, TreeStore, VersionSet};

/// What the checkpoint thread works with: the parts of an open database
/// it reads and changes, each owned by this layer or one below it, and
/// the one call it needs from the write path above.
pub(crate) struct Pipeline<'a> {
    pub versions: &'a VersionSet,
    pub checkpoints: &'a Checkpoints,
    pub memory: &'a MemoryPolicy,
    pub record_cache: &'a RecordCache,
    pub poison: &'a Poison,
    pub stats: &'a Counters,
    /// Freezes the active MemTable if no writer is at work and a frozen
    /// slot is free (the read-pressure rule's freeze); `Ok(false)` when it
    /// did not.
    pub freeze_if_idle: &'a dyn Fn() -> Result<bool>,
    /// Gives back the WAL storage reserved ahead of the appends if no
    /// writer is at work (once writes have stopped).
    pub release_wal_reserve: &'a dyn Fn() -> Result<()>,
    /// Makes every value record written so far durable: a checkpoint's
    /// pages point at them once it commits.
    pub sync_values: &'a dyn Fn() -> Result<()>,
    /// One step of value garbage collection between checkpoints; whether
    /// it did work (`db::value_gc`).
    pub collect_value_garbage: &'a dyn Fn() -> Result<bool>,
}

impl Pipeline<'_> {
    /// The checkpoint thread: one checkpoint per frozen MemTable, oldest
    /// first, until shutdown. A failure poisons the database (the tree's
    /// state on disk is unknown) and stops the thread.
    pub fn run(&self, trees: &dyn TreeStore) {
        let mut retired: Vec<Arc<dyn MemTable>> = Vec::new();
        let mut monitor = Monitor::new(self.activity(trees));
        let mut quiet = Quiet::new(self.versions.visible_seq());
        // The last step between checkpoints reclaimed space: take the next
        // one without waiting.
        let mut reclaiming = false;
        loop {
            {
                let control = &self.checkpoints.control;
                let mut state = control.lock();
                if state.shutdown {
                    return;
                }
                if self.versions.state().frozen.is_empty() && !reclaiming {
                    control.wait_for_work(&mut state, RETIRED_CHECK_INTERVAL);
                }
            }
            release_unused(&mut retired);
            if let Some(delta) = monitor.window(self.activity(trees)) {
                self.decide_memory(delta);
            }
            let result = if self.versions.state().frozen.is_empty() {
                self.reclaim_between_checkpoints(trees, &mut quiet)
                    .and_then(|reclaimed| Ok((self.collect_value_garbage)()? || reclaimed))
            } else {
                self.checkpoint_oldest(trees, &mut retired).map(|()| false)
            };
            match result {
                Ok(reclaimed) => reclaiming = reclaimed,
                Err(e) => {
                    let e = self.poison.with_error(e);
                    self.checkpoints.control.fail(e.to_string());
                    return;
                }
            }
        }
    }

    /// Reclaims the tree's garbage while no MemTable waits for its
    /// checkpoint: one small update per call, committed and published as
    /// the newest version, so that what it rewrites is freed at once (a
    /// large reclamation inside a checkpoint would hold old and new pages
    /// together until its end). Returns whether it reclaimed. Once writes
    /// and reads have stopped for a second it reclaims down to the lower
    /// idle threshold (`store::space::Pace`). With nothing to reclaim then, it
    /// punches what the last commits freed, as no commit may come to do
    /// it, and gives back the WAL's reserve.
    fn reclaim_between_checkpoints(
        &self,
        trees: &dyn TreeStore,
        quiet: &mut Quiet,
    ) -> Result<bool> {
        let idle = quiet.idle(self.versions.visible_seq());
        let reads = self.stats.gets.load() + self.stats.scans.load(Ordering::Relaxed);
        // The deeper reclamation waits for reads to stop too: its rewriting
        // would take the device from them.
        let pace = match quiet.unread(reads) && idle {
            true => Pace::Idle,
            false => Pace::Writing,
        };
        if let Some(version) = trees.reclaim_space(self.checkpoints.workers(), 0, pace)? {
            self.versions.install_tree(version);
            quiet.space_released = false;
            trees.reclaim()?;
            return Ok(true);
        }
        if idle && !quiet.space_released {
            quiet.space_released = true;
            trees.release_freed_space()?;
            (self.release_wal_reserve)()?;
        }
        Ok(false)
    }

    /// Reclaims what the batch of `batch_bytes` about to be checkpointed
    /// is expected to make garbage, so that reclamation keeps pace with
    /// the updates even when checkpoints run back to back: up to
    /// `RECLAIM_STEPS_PER_CHECKPOINT` steps of about the batch's bytes,
    /// each committed, published and punched on its own. One large
    /// reclamation inside the checkpoint would hold all the pages it
    /// rewrites twice until its commit.
    fn reclaim_before_checkpoint(&self, trees: &dyn TreeStore, batch_bytes: u64) -> Result<()> {
        for _ in 0..RECLAIM_STEPS_PER_CHECKPOINT {
            let Some(version) =
                trees.reclaim_space(self.checkpoints.workers(), batch_bytes, Pace::Writing)?
            else {
                break;
            };
            self.versions.install_tree(version);
            trees.reclaim()?;
        }
        Ok(())
    }

    /// Makes the WAL durable through `frozen`'s records when it holds
    /// range tombstones: the tree store may commit part of their deletions
    /// before the checkpoint, at the old coverage (`TreeStore::checkpoint`),
    /// and recovery must then replay the deletion, not lose it with an
    /// unsynced tail. One `fdatasync` per such checkpoint.
    fn sync_before_range_deletions(&self, frozen: &Frozen) -> Result<()> {
        if frozen.memtable.range_tombstones().is_empty() {
            return Ok(());
        }
        let mut wal = self.versions.wal();
        wal.sync().map_err(|e| self.poison.with_io(e))
    }

    /// One window's decisions of the memory policy.
    fn decide_memory(&self, delta: Sample) {
        if let Some(grow) = delta.memtables_may_grow() {
            self.memory.set_grow_memtables(grow);
        }
        self.checkpoint_on_read_pressure(delta);
        let recalls = Recalls {
            record: delta.record_ghost_recalls,
            block: delta.block_ghost_recalls,
        };
        self.memory
            .split_caches(recalls, self.versions, self.record_cache, self.stats);
    }

    fn checkpoint_oldest(
        &self,
        trees: &dyn TreeStore,
        retired: &mut Vec<Arc<dyn MemTable>>,
    ) -> Result<()> {
        let started = Instant::now();
        let frozen = self.versions.state().frozen.clone();
        let Some(oldest) = frozen.last().cloned() else {
            return Ok(());
        };
        self.checkpoints.run_idle_while_nobody_waits();
        let coverage = Coverage {
            covered_seq: oldest.last_seq,
            wal_replay_from: oldest.wal_replay_from,
        };
        let reserve = self.reserve_checkpoint_memory(&oldest, trees);
        self.sync_before_range_deletions(&oldest)?;
        self.reclaim_before_checkpoint(trees, oldest.memtable.size_bytes())?;
        (self.sync_values)()?;
        let version = trees.checkpoint(&*oldest.memtable, coverage, self.checkpoints.workers())?;
        self.versions.install_checkpoint(&oldest, version);
        let covered_seq = oldest.last_seq;
        // Freeing a big MemTable takes a while: keep it until this thread
        // holds the last reference and free it here, so that no reader or
        // writer that happens to drop the old State pays for it.
        retired.push(oldest.memtable.clone());
        drop(oldest);
        trees.reclaim().map_err(|e| self.poison.with_error(e))?;
        let removed = self
            .versions
            .trim_wal(covered_seq)
            .map_err(|e| self.poison.with_io(e))?;
        bump(&self.stats.wal_segments_trimmed, removed as u64);
        // The working set is gone with the checkpoint: the cache gets the
        // reserve back, and the room the finished MemTable left, before
        // anyone waiting for this checkpoint hears of it.
        drop(reserve);
        self.count_checkpoint(started);
        self.checkpoints.control.report_completed(covered_seq);
        release_unused(retired);
        // After the writers are told, so no one waits for this.
        let trim_started = Instant::now();
        crate::mem::release_free_heap_memory();
        bump(
            &self.stats.heap_trim_nanos,
            trim_started.elapsed().as_nanos() as u64,
        );
        Ok(())
    }

    fn count_checkpoint(&self, started: Instant) {
        use std::sync::atomic::Ordering;
        bump(&self.stats.checkpoints, 1);
        let nanos = started.elapsed().as_nanos() as u64;
        bump(&self.stats.checkpoint_nanos, nanos);
        self.stats
            .last_checkpoint_nanos
            .store(nanos, Ordering::Relaxed);
        self.stats
            .max_checkpoint_nanos
            .fetch_max(nanos, Ordering::Relaxed);
    }

    /// Sets memory aside for the checkpoint of `frozen` into `trees`
    /// (`budget::checkpoint_reserve_bytes`), taken from the page cache until
    /// the guard drops (on every path out of the checkpoint, failures
    /// included).
    fn reserve_checkpoint_memory(
        &self,
        frozen: &Frozen,
        trees: &dyn TreeStore,
    ) -> CheckpointReserve<'_> {
        let reserve_bytes = checkpoint_reserve_bytes(
            frozen.memtable.size_bytes(),
            trees.checkpoint_memory_floor_bytes(),
            frozen.distance_bytes,
        );
        self.memory
            .budget
            .set_checkpoint_reserve_bytes(reserve_bytes);
        self.memory
            .rebalance(self.versions, self.record_cache, false);
        CheckpointReserve { pipeline: self }
    }

    /// Counters the read-pressure rule and the cache split look at.
    fn activity(&self, trees: &dyn TreeStore) -> Sample {
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let pages = trees.stats().pages;
        Sample {
            gets: self.stats.gets.load(),
            scans: load(&self.stats.scans),
            writes: load(&self.stats.puts) + load(&self.stats.deletes),
            cache_misses: pages.cache_misses,
            page_read_ios: pages.read_ios,
            checkpoints: load(&self.stats.checkpoints),
            record_ghost_recalls: self.record_cache.ghost_recalls(),
            block_ghost_recalls: pages.cache_ghost_recalls,
        }
    }

    /// Freezes the active MemTable early if reads dominate and miss the
    /// page cache (see `read_pressure`).
    fn checkpoint_on_read_pressure(&self, delta: Sample) {
        if !self.memory.checkpoint_on_read_pressure() {
            return;
        }
        let pressure = Pressure {
            delta,
            active_memtable_bytes: self.versions.state().active.size_bytes(),
            budget_bytes: self.memory.budget.total_bytes(),
        };
        if !pressure.wants_checkpoint() {
            return;
        }
        // Only while the write path is idle and a frozen slot is free: a
        // leader waiting for a slot waits for this thread (the next window
        // tries again). A failure here is a failed WAL rotation, already
        // recorded as poison.
        if let Ok(true) = (self.freeze_if_idle)() {
            bump(&self.stats.read_pressure_checkpoints, 1);
        }
    }
}

/// Held by the checkpoint thread: if it unwinds (a bug in the tree or
/// MemTable code), the database is poisoned and every waiter is woken with
/// the failure, as after a failed checkpoint, instead of waiting for a
/// thread that is gone.
pub(crate) struct PanicIsFailure<'a> {
    pub poison: &'a Poison,
    pub checkpoints: &'a Checkpoints,
}

impl Drop for PanicIsFailure<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let cause = "the checkpoint thread panicked";
        self.poison.set(cause);
        self.checkpoints.control.fail(cause.to_string());
    }
}

/// Reclamation steps a checkpoint may take first, each of about its batch's
/// bytes: under overwrites, draining a buffer rewrites several bytes of
/// leaves per byte of garbage it frees, so reclamation needs a few times
/// the batch's bytes of rewriting to keep pace.
const RECLAIM_STEPS_PER_CHECKPOINT: usize = 4;

/// Writes must have stopped this long before the checkpoint thread punches
/// every freed slot (checkpoints punch what they free while writes come).
const IDLE_RELEASE_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether writes have stopped: the visible sequence number has not moved
/// for `IDLE_RELEASE_AFTER`; and whether reads have.
struct Quiet {
    seq: u64,
    since: Instant,
    /// The space freed by the last commits was punched since they came.
    space_released: bool,
    /// Gets and scans counted so far, and since when they have not moved.
    reads: u64,
    reads_since: Instant,
}

impl Quiet {
    fn new(seq: u64) -> Self {
        Quiet {
            seq,
            since: Instant::now(),
            space_released: false,
            reads: 0,
            reads_since: Instant::now(),
        }
    }

    fn idle(&mut self, seq: u64) -> bool {
        if seq != self.seq {
            let (reads, reads_since) = (self.reads, self.reads_since);
            *self = Quiet {
                reads,
                reads_since,
                ..Quiet::new(seq)
            };
        }
        self.since.elapsed() >= IDLE_RELEASE_AFTER
    }

    /// Whether the read count `reads` has not moved for `IDLE_RELEASE_AFTER`.
    fn unread(&mut self, reads: u64) -> bool {
        if reads != self.reads {
            (self.reads, self.reads_since) = (reads, Instant::now());
        }
        self.reads_since.elapsed() >= IDLE_RELEASE_AFTER
    }
}

/// How often the idle checkpoint thread looks for retired MemTables that no
/// reader holds any more.
const RETIRED_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// Frees the retired MemTables that only this thread still references.
fn release_unused(retired: &mut Vec<Arc<dyn MemTable>>) {
    retired.retain(|m| Arc::strong_count(m) > 1);
}

/// The memory set aside while a checkpoint runs; gives it back to the
/// page cache when dropped.
struct CheckpointReserve<'a> {
    pipeline: &'a Pipeline<'a>,
}

impl Drop for CheckpointReserve<'_> {
    fn drop(&mut self) {
        let p = self.pipeline;
        p.memory.budget.set_checkpoint_reserve_bytes(0);
        p.memory.rebalance(p.versions, p.record_cache, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes and reads each hold off their own kind of quiet; a write
    /// does not reset how long reads have been quiet.
    #[test]
    fn quiet_counts_writes_and_reads_apart() {
        let mut quiet = Quiet::new(5);
        assert!(!quiet.idle(5));
        assert!(!quiet.unread(7));
        std::thread::sleep(IDLE_RELEASE_AFTER + std::time::Duration::from_millis(50));
        assert!(quiet.idle(5));
        assert!(quiet.unread(7));
        // A read: reads are no longer quiet, writes still are.
        assert!(!quiet.unread(8));
        assert!(quiet.idle(5));
        std::thread::sleep(IDLE_RELEASE_AFTER + std::time::Duration::from_millis(50));
        // A write: writes are no longer quiet, reads still are.
        assert!(!quiet.idle(6));
        assert!(quiet.unread(8));
    }
}
