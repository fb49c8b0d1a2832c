//! The write path: what a group-commit leader logs, how groups are applied,
//! and MemTable freezing.

use std::sync::Arc;
use std::time::Instant;

use crate::checkpoint::MAX_FROZEN_MEMTABLES;
use crate::db::inner::DbInner;
use crate::memtable::SkipListMemTable;
use crate::state::{Frozen, State};
use crate::stats::bump;
use crate::wal::Request;
use crate::{Error, Result, WriteBatch};

/// What logging a group numbered: its writes are `first_seq..next_seq`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Logged {
    first_seq: u64,
    next_seq: u64,
}

impl DbInner {
    /// Commits `batch` through the group commit: logged in a group, applied
    /// to the MemTable, visible when this returns.
    pub fn submit(&self, batch: WriteBatch, sync: bool, freeze: bool) -> Result<()> {
        self.commit.submit(
            batch,
            sync,
            freeze,
            |group| self.log_group(group),
            |group, logged| self.apply_group(group, logged),
        )
    }

    /// Leader work: freeze the MemTable if it is full (or a checkpoint was
    /// asked for), then log the group with one write (and at most one sync)
    /// and number its writes.
    ///
    /// Freezing comes first so that every way this can fail (a stall that
    /// ends in a failed checkpoint, a failed WAL write) fails before the
    /// group is logged or applied: an error means the writes did not happen.
    fn log_group(&self, group: &[Request]) -> Result<Logged> {
        self.check_poison()?;
        let forced = group.iter().any(|r| r.freeze);
        self.maybe_freeze(forced)?;
        let mut wal = self.wal.lock();
        let batches = group.iter().map(|r| &r.batch);
        let sync = group.iter().any(|r| r.sync);
        let first_seq = wal
            .append_group(batches, sync)
            .map_err(|e| self.poison_with(e))?;
        let next_seq = wal.next_seq();
        bump(&self.stats.wal_group_commits, 1);
        self.report_wal_io(&mut wal);
        drop(wal);
        self.rebalance_memory(false);
        Ok(Logged {
            first_seq,
            next_seq,
        })
    }

    /// Applies a logged group to the MemTable, then makes it visible once
    /// every group logged before it is. Runs after the leader has handed
    /// on the leadership, so it overlaps the logging of the next group and
    /// the applying of others.
    fn apply_group(&self, group: &[Request], logged: Logged) {
        // The MemTable the group was logged for: a freeze waits until every
        // logged group is visible before it replaces the active MemTable.
        let state = self.state.load();
        let mut batch_first_seq = logged.first_seq;
        for req in group {
            // Numbering must match the WAL record exactly: entry i of the
            // batch gets `batch_first_seq + i`.
            for (seq, op) in (batch_first_seq..).zip(&req.batch.ops) {
                state.active.insert(op.key.clone(), seq, op.value.clone());
                // Before the write is visible: see `record_cache`.
                self.record_cache
                    .record_write(&op.key, op.value.as_ref(), seq);
            }
            batch_first_seq += req.batch.len() as u64;
            let (puts, deletes) = req.batch.puts_and_deletes();
            bump(&self.stats.puts, puts);
            bump(&self.stats.deletes, deletes);
            bump(&self.stats.batches, 1);
            bump(&self.stats.user_bytes_written, req.batch.user_bytes());
        }
        debug_assert_eq!(batch_first_seq, logged.next_seq);
        if logged.next_seq > logged.first_seq {
            self.visibility
                .publish(logged.first_seq, logged.next_seq - 1);
        }
    }

    /// Freezes the active MemTable once it holds `checkpoint_distance_bytes`
    /// (or on request, if it holds anything). Runs in the leader, so no
    /// group is logged while it happens, and it waits for the groups logged
    /// before to be applied.
    fn maybe_freeze(&self, forced: bool) -> Result<()> {
        if self.target.is_none() {
            return Ok(());
        }
        let active = &self.state.load().active;
        let (entries, size_bytes) = (active.len(), active.size_bytes());
        let distance = self.effective_checkpoint_distance();
        if entries == 0 || (size_bytes < distance && !forced) {
            return Ok(());
        }
        self.wait_for_frozen_slot()?;
        // The new MemTable's records start in a new segment, so the WAL can
        // be trimmed exactly when this MemTable's checkpoint is durable.
        let (wal_replay_from, last_seq) = {
            let mut wal = self.wal.lock();
            wal.rotate().map_err(|e| self.poison_with(e))?;
            (wal.segment_start(), wal.next_seq() - 1)
        };
        // Groups logged before this one may still be applying to the
        // active MemTable; only the leader logs, so none is logged after.
        self.visibility.wait_for(last_seq);
        self.state.load().active.seal();
        self.transition(|current| {
            let frozen = Arc::new(Frozen {
                memtable: current.active.clone(),
                last_seq,
                wal_replay_from,
            });
            State {
                active: Arc::new(SkipListMemTable::with_capacity(distance)),
                frozen: std::iter::once(frozen)
                    .chain(current.frozen.iter().cloned())
                    .collect(),
                tree: current.tree.clone(),
            }
        });
        bump(&self.stats.memtables_frozen, 1);
        self.control.wake_worker();
        Ok(())
    }

    /// Back-pressure: waits while `MAX_FROZEN_MEMTABLES` wait for their
    /// checkpoints. Every writer queues behind the leader meanwhile.
    fn wait_for_frozen_slot(&self) -> Result<()> {
        if self.state.load().frozen.len() < MAX_FROZEN_MEMTABLES {
            return Ok(());
        }
        let started = Instant::now();
        let mut control = self.control.lock();
        while self.state.load().frozen.len() >= MAX_FROZEN_MEMTABLES {
            if let Some(failure) = &control.failure {
                return Err(Error::Poisoned {
                    cause: failure.clone(),
                });
            }
            self.control.wait_for_progress(&mut control);
        }
        bump(&self.stats.write_stalls, 1);
        bump(
            &self.stats.write_stall_nanos,
            started.elapsed().as_nanos() as u64,
        );
        Ok(())
    }
}
