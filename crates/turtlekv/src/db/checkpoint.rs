//! Running checkpoints: the background thread's loop and `checkpoint_now`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::checkpoint::{CheckpointTarget, Coverage};
use crate::db::cache_split::Recalls;
use crate::db::inner::DbInner;
use crate::db::read_pressure::{Monitor, Pressure, Sample};
use crate::memtable::MemTable;
use crate::state::{Frozen, State};
use crate::stats::bump;
use crate::{Error, Result};

impl DbInner {
    /// The checkpoint thread: one checkpoint per frozen MemTable, oldest
    /// first, until shutdown. A failure poisons the database (the tree's
    /// state on disk is unknown) and stops the thread.
    pub fn run_checkpoints(&self, target: &dyn CheckpointTarget) {
        let mut retired: Vec<Arc<dyn MemTable>> = Vec::new();
        let mut monitor = Monitor::new(self.activity(target));
        loop {
            {
                let mut control = self.control.lock();
                if control.shutdown {
                    return;
                }
                if self.state.load().frozen.is_empty() {
                    self.control
                        .wait_for_work(&mut control, RETIRED_CHECK_INTERVAL);
                }
            }
            release_unused(&mut retired);
            if let Some(delta) = monitor.window(self.activity(target)) {
                if let Some(grow) = delta.memtables_may_grow() {
                    self.grow_memtables.store(grow, Ordering::Relaxed);
                }
                self.checkpoint_on_read_pressure(delta);
                self.split_caches(Recalls {
                    record: delta.record_ghost_recalls,
                    block: delta.block_ghost_recalls,
                });
            }
            if self.state.load().frozen.is_empty() {
                continue;
            }
            if let Err(e) = self.checkpoint_oldest(target, &mut retired) {
                let e = self.poison_with_error(e);
                self.control.lock().failure = Some(e.to_string());
                self.control.report_progress();
                return;
            }
        }
    }

    fn checkpoint_oldest(
        &self,
        target: &dyn CheckpointTarget,
        retired: &mut Vec<Arc<dyn MemTable>>,
    ) -> Result<()> {
        let started = Instant::now();
        let frozen = self.state.load().frozen.clone();
        let Some(oldest) = frozen.last().cloned() else {
            return Ok(());
        };
        // Idle I/O while nobody waits; a writer that has to wait for this
        // checkpoint raises it the moment it starts waiting, and so does a
        // close (which joins this thread).
        if let Some(io) = &self.checkpoint_io {
            io.set_idle_when(|| {
                self.checkpoint_waiters.load(Ordering::Acquire) == 0
                    && !self.control.lock().shutdown
            });
        }

        let coverage = Coverage {
            covered_seq: oldest.last_seq,
            wal_replay_from: oldest.wal_replay_from,
        };
        let reserve = self.reserve_checkpoint_memory(&oldest, target);
        let version = target.checkpoint(&*oldest.memtable, coverage)?;
        debug_assert_eq!(version.covered_seq(), oldest.last_seq);
        self.transition(|current| State {
            active: current.active.clone(),
            frozen: current
                .frozen
                .iter()
                .filter(|f| !Arc::ptr_eq(f, &oldest))
                .cloned()
                .collect(),
            tree: Some(version),
        });
        let covered_seq = oldest.last_seq;
        // Freeing a big MemTable takes a while: keep it until this thread
        // holds the last reference and free it here, so that no reader or
        // writer that happens to drop the old State pays for it.
        retired.push(oldest.memtable.clone());
        drop(oldest);
        target.reclaim().map_err(|e| self.poison_with_error(e))?;
        let covered = self.wal.lock().detach_covered(covered_seq);
        let removed = covered.remove().map_err(|e| self.poison_with(e))?;
        bump(&self.stats.wal_segments_trimmed, removed as u64);
        // The working set is gone with the checkpoint: the cache gets the
        // reserve back, and the room the finished MemTable left, before
        // anyone waiting for this checkpoint hears of it.
        drop(reserve);
        bump(&self.stats.checkpoints, 1);
        let nanos = started.elapsed().as_nanos() as u64;
        bump(&self.stats.checkpoint_nanos, nanos);
        self.stats
            .last_checkpoint_nanos
            .store(nanos, Ordering::Relaxed);
        self.stats
            .max_checkpoint_nanos
            .fetch_max(nanos, Ordering::Relaxed);
        self.control.report_completed(covered_seq);
        release_unused(retired);
        // After the writers are told, so no one waits for this.
        let trim_started = Instant::now();
        crate::io::release_free_heap_memory();
        bump(
            &self.stats.heap_trim_nanos,
            trim_started.elapsed().as_nanos() as u64,
        );
        Ok(())
    }

    /// Sets memory aside for the checkpoint of `frozen` into `target`
    /// (`budget::checkpoint_reserve_bytes`), taken from the page cache until
    /// the guard drops (on every path out of the checkpoint, failures
    /// included).
    fn reserve_checkpoint_memory(
        &self,
        frozen: &Frozen,
        target: &dyn CheckpointTarget,
    ) -> CheckpointReserve<'_> {
        let reserve_bytes = crate::db::budget::checkpoint_reserve_bytes(
            frozen.memtable.size_bytes(),
            target.checkpoint_memory_floor_bytes(),
            frozen.distance_bytes,
        );
        self.budget.set_checkpoint_reserve_bytes(reserve_bytes);
        self.rebalance_memory(false);
        CheckpointReserve { db: self }
    }

    /// Counters the read-pressure rule and the cache split look at.
    fn activity(&self, target: &dyn CheckpointTarget) -> Sample {
        let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        let store = target.stats().store;
        Sample {
            gets: self.stats.gets.load(),
            scans: load(&self.stats.scans),
            writes: load(&self.stats.puts) + load(&self.stats.deletes),
            cache_misses: store.cache_misses,
            page_read_ios: store.read_ios,
            checkpoints: load(&self.stats.checkpoints),
            record_ghost_recalls: self.record_cache.ghost_recalls(),
            block_ghost_recalls: store.cache_ghost_recalls,
        }
    }

    /// Freezes the active MemTable early if reads dominate and miss the
    /// page cache (see `read_pressure`).
    fn checkpoint_on_read_pressure(&self, delta: Sample) {
        if !self.checkpoint_on_read_pressure {
            return;
        }
        let pressure = Pressure {
            delta,
            active_memtable_bytes: self.state.load().active.size_bytes(),
            budget_bytes: self.budget.total_bytes(),
        };
        if !pressure.wants_checkpoint() {
            return;
        }
        // Only while the write path is idle and a frozen slot is free: a
        // leader waiting for a slot waits for this thread (the next window
        // tries again). A failure here is a failed WAL rotation, already
        // recorded as poison.
        if let Ok(true) = self.freeze_if_idle() {
            bump(&self.stats.read_pressure_checkpoints, 1);
        }
    }

    /// Waits until a checkpoint covering `seq` has ended (`completed_seq`),
    /// or the checkpoint thread failed.
    pub fn wait_for_checkpoint_through(&self, seq: u64) -> Result<()> {
        let _waiting = self.wait_on_checkpoints();
        let mut control = self.control.lock();
        while control.completed_seq < seq {
            if let Some(failure) = &control.failure {
                return Err(Error::Poisoned {
                    cause: failure.clone(),
                });
            }
            self.control.wait_for_progress(&mut control);
        }
        Ok(())
    }

    /// Marks the caller as waiting for a checkpoint until the guard drops,
    /// and raises the checkpoint's threads to the normal I/O class
    /// (`io::CheckpointIoPriority`): no checkpoint runs idle while anyone
    /// waits for one.
    pub fn wait_on_checkpoints(&self) -> CheckpointWaiter<'_> {
        self.checkpoint_waiters.fetch_add(1, Ordering::AcqRel);
        if let Some(io) = &self.checkpoint_io {
            io.set_idle(false);
        }
        CheckpointWaiter(self)
    }

    /// Sequence number covered by the newest durable checkpoint.
    pub fn covered_seq(&self) -> u64 {
        self.state
            .load()
            .tree
            .as_ref()
            .map_or(0, |t| t.covered_seq())
    }
}

/// Held by the checkpoint thread: if it unwinds (a bug in the tree or
/// MemTable code), the database is poisoned and every waiter is woken with
/// the failure, as after a failed checkpoint, instead of waiting for a
/// thread that is gone.
pub(crate) struct PanicIsFailure<'a>(pub &'a DbInner);

impl Drop for PanicIsFailure<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let cause = "the checkpoint thread panicked".to_string();
        self.0.poison.get_or_init(|| cause.clone());
        self.0.control.lock().failure = Some(cause);
        self.0.control.report_progress();
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
    db: &'a DbInner,
}

impl Drop for CheckpointReserve<'_> {
    fn drop(&mut self) {
        self.db.budget.set_checkpoint_reserve_bytes(0);
        self.db.rebalance_memory(false);
    }
}

/// A thread waiting for a checkpoint (`DbInner::wait_on_checkpoints`).
pub(crate) struct CheckpointWaiter<'a>(&'a DbInner);

impl Drop for CheckpointWaiter<'_> {
    fn drop(&mut self) {
        self.0.checkpoint_waiters.fetch_sub(1, Ordering::AcqRel);
    }
}
