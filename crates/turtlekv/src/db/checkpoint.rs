//! Running checkpoints: the background thread's loop and `checkpoint_now`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::checkpoint::{CheckpointTarget, Coverage};
use crate::db::inner::DbInner;
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
        loop {
            {
                let mut control = self.control.lock();
                while !control.shutdown && self.state.load().frozen.is_empty() {
                    release_unused(&mut retired);
                    self.control
                        .wait_for_work(&mut control, RETIRED_CHECK_INTERVAL);
                }
                if control.shutdown {
                    return;
                }
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
        let Some(oldest) = self.state.load().frozen.last().cloned() else {
            return Ok(());
        };

        let coverage = Coverage {
            covered_seq: oldest.last_seq,
            wal_replay_from: oldest.wal_replay_from,
        };
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
        let removed = self
            .wal
            .lock()
            .trim(covered_seq)
            .map_err(|e| self.poison_with(e))?;
        bump(&self.stats.wal_segments_trimmed, removed as u64);
        self.rebalance_memory(false);
        bump(&self.stats.checkpoints, 1);
        let nanos = started.elapsed().as_nanos() as u64;
        bump(&self.stats.checkpoint_nanos, nanos);
        self.stats
            .last_checkpoint_nanos
            .store(nanos, Ordering::Relaxed);
        self.stats
            .max_checkpoint_nanos
            .fetch_max(nanos, Ordering::Relaxed);
        self.control.report_progress();
        release_unused(retired);
        Ok(())
    }

    /// Waits until the given frozen MemTables are all in durable checkpoints.
    pub fn wait_for_checkpoints(&self, waiting_for: &[Arc<Frozen>]) -> Result<()> {
        let mut control = self.control.lock();
        loop {
            let state = self.state.load();
            let pending = state
                .frozen
                .iter()
                .any(|f| waiting_for.iter().any(|w| Arc::ptr_eq(f, w)));
            if !pending {
                return Ok(());
            }
            if let Some(failure) = &control.failure {
                return Err(Error::Poisoned {
                    cause: failure.clone(),
                });
            }
            self.control.wait_for_progress(&mut control);
        }
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

/// How often the idle checkpoint thread looks for retired MemTables that no
/// reader holds any more.
const RETIRED_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// Frees the retired MemTables that only this thread still references.
fn release_unused(retired: &mut Vec<Arc<dyn MemTable>>) {
    retired.retain(|m| Arc::strong_count(m) > 1);
}
