//! Running checkpoints: the background thread's loop and `checkpoint_now`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::checkpoint::{CheckpointTarget, Coverage, frozen_items};
use crate::db::inner::DbInner;
use crate::state::{Frozen, State};
use crate::stats::bump;
use crate::{Error, Result};

impl DbInner {
    /// The checkpoint thread: one checkpoint per frozen MemTable, oldest
    /// first, until shutdown. A failure poisons the database (the tree's
    /// state on disk is unknown) and stops the thread.
    pub fn run_checkpoints(&self, target: &dyn CheckpointTarget) {
        loop {
            {
                let mut control = self.control.lock();
                while !control.shutdown && self.state.load().frozen.is_empty() {
                    self.control.wait_for_work(&mut control);
                }
                if control.shutdown {
                    return;
                }
            }
            if let Err(e) = self.checkpoint_oldest(target) {
                let e = self.poison_with_error(e);
                self.control.lock().failure = Some(e.to_string());
                self.control.report_progress();
                return;
            }
        }
    }

    fn checkpoint_oldest(&self, target: &dyn CheckpointTarget) -> Result<()> {
        let started = Instant::now();
        let Some(oldest) = self.state.load().frozen.last().cloned() else {
            return Ok(());
        };
        let mut items = frozen_items(oldest.memtable.clone());
        let coverage = Coverage {
            covered_seq: oldest.last_seq,
            wal_replay_from: oldest.wal_replay_from,
        };
        let version = target.checkpoint(&mut items, coverage)?;
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
        // The frozen MemTable goes now, with the version the old State held.
        drop((oldest, items));
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
