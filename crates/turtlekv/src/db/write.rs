//! The write path: what a group-commit leader does, and MemTable freezing.

use std::sync::Arc;
use std::time::Instant;

use crate::checkpoint::MAX_FROZEN_MEMTABLES;
use crate::db::inner::DbInner;
use crate::db::txn::check::{GroupWrites, TxnCheck, Written};
use crate::memtable::{InsertHint, MemTable};
use crate::stats::bump;
use crate::values::{PendingWrite, Value, ValuePointer};
use crate::wal::{self, MAX_PAYLOAD_BYTES};
use crate::{Error, Result, WriteBatch};

/// Batches of more ops than this queue without prepared inserts: a
/// writer's searches pay off when they overlap the leader's turn, and a
/// large batch's would mostly be stale by the time it is applied.
const MAX_PREPARED_OPS: usize = 4;

/// Where each op of a batch links into the active MemTable, searched for by
/// its writer before it queued for the group commit
/// (`MemTable::prepare_insert`), so that the leader's serial turn skips
/// most of the search.
#[derive(Debug)]
pub(crate) struct PreparedInserts {
    /// Held so that no other MemTable can take its address while the
    /// hints live: that address is how a MemTable tells its own hints from
    /// those of a MemTable frozen since, which it ignores.
    _memtable: Arc<dyn MemTable>,
    hints: Vec<InsertHint>,
}

/// What a writer hands the leader with its batch.
#[derive(Debug, Default)]
pub(crate) struct Prepared {
    pub inserts: Option<PreparedInserts>,
    /// A transaction's commit: the leader checks it for conflicts first,
    /// and leaves the batch out of the group if it fails.
    pub check: Option<Arc<TxnCheck>>,
    /// The engine's own write (value garbage collection's moves): not
    /// counted as the user's puts, batches or bytes in `Stats`.
    pub internal: bool,
}

/// A writer's request as the group commit carries it.
pub(crate) type Request = crate::wal::Request<Prepared>;

impl DbInner {
    /// Logs and applies `batch` (keys as stored, checked by the caller)
    /// through the group commit; an empty batch only syncs, if asked to.
    pub fn submit_batch(
        &self,
        batch: WriteBatch,
        sync: bool,
        check: Option<Arc<TxnCheck>>,
    ) -> Result<()> {
        let mut batch = batch;
        self.poison.check()?;
        // Held until the batch is applied (or fails): garbage collection
        // leaves a file with pending records alone.
        let _pending = self.separate_values(&mut batch)?;
        let len_bytes = wal::encoded_len(&batch.ops);
        if len_bytes > MAX_PAYLOAD_BYTES {
            return Err(Error::BatchTooLarge {
                len_bytes,
                max_bytes: MAX_PAYLOAD_BYTES,
            });
        }
        if batch.is_empty() {
            return if sync { self.sync_wal() } else { Ok(()) };
        }
        let prepared = Prepared {
            inserts: self.prepare_inserts(&batch),
            check,
            internal: false,
        };
        self.commit.submit(batch, sync, false, prepared, |group| {
            self.commit_group(group)
        })
    }

    /// Writes the batch's values that belong in value files there and puts
    /// their pointers in their place, in the writer's thread before it
    /// queues: the group commit's leader logs only the pointers. The WAL
    /// syncs the value files before itself, so a synced write's value is
    /// durable when the write is.
    fn separate_values(&self, batch: &mut WriteBatch) -> Result<Vec<PendingWrite>> {
        // Before any of the batch is written: the samples look for the
        // versions it replaces.
        self.sample_superseded_values(batch);
        let threshold = self.value_separation_threshold_bytes;
        let mut pending = Vec::new();
        let mut separated = Vec::new();
        for (i, op) in batch.ops.iter_mut().enumerate() {
            let Some(Value::Inline(value)) = &op.value else {
                continue;
            };
            if !self.limits.separates(op.key.len(), value.len(), threshold) {
                continue;
            }
            let (pointer, written) = self.write_value(&op.key, value)?;
            if value.len() <= crate::record_cache::MAX_SEPARATED_VALUE_BYTES {
                separated.push((i, value.clone()));
            }
            op.value = Some(Value::Pointer(pointer.encode()));
            pending.push(written);
        }
        if !separated.is_empty() {
            batch.separated_values.extend(separated);
            batch.separated_values.sort_unstable_by_key(|&(i, _)| i);
        }
        Ok(pending)
    }

    /// Appends a record of `value` for stored key `key` to the value files;
    /// a failure poisons the handle, as a failed WAL write does.
    pub fn write_value(&self, key: &[u8], value: &[u8]) -> Result<(ValuePointer, PendingWrite)> {
        self.poison.check()?;
        self.values
            .append(key, value)
            .map_err(|e| self.poison.with_io(e))
    }

    /// `Db::checkpoint_now`: freezes the active MemTable and waits until
    /// it, and every one frozen before it, is in a durable checkpoint.
    pub fn checkpoint_now(&self) -> Result<()> {
        self.poison.check()?;
        // Every write acknowledged before this call is at or below this
        // sequence; the forced freeze puts all of them in frozen MemTables.
        let acknowledged_seq = self.versions.visible_seq();
        let freeze = Prepared::default();
        self.commit
            .submit(WriteBatch::new(), false, true, freeze, |group| {
                self.commit_group(group)
            })?;
        if self.versions.trees().is_none() {
            return Ok(());
        }
        self.checkpoints
            .wait_for_checkpoint_through(acknowledged_seq)
    }

    /// Makes every write acknowledged so far durable (`fdatasync`).
    pub fn sync_wal(&self) -> Result<()> {
        self.poison.check()?;
        let mut wal = self.versions.wal();
        wal.sync().map_err(|e| self.poison.with_io(e))?;
        self.report_wal_io(&mut wal);
        Ok(())
    }

    /// Leader work: freeze the MemTable if it is full (or a checkpoint was
    /// asked for), then log the group with one write (and at most one sync),
    /// apply it to the MemTable and make it visible in one step.
    ///
    /// Freezing comes first so that every way this can fail (a stall that
    /// ends in a failed checkpoint, a failed WAL write) fails before the
    /// group is logged or applied: an error means the writes did not happen.
    pub fn commit_group(&self, group: &[Request]) -> Result<()> {
        self.poison.check()?;
        let forced = group.iter().any(|r| r.freeze);
        self.maybe_freeze(forced)?;
        let passed = self.check_transactions(group);
        let accepted = |i: usize| passed.as_ref().is_none_or(|p| p[i]);
        let mut wal = self.versions.wal();
        let batches = group
            .iter()
            .enumerate()
            .filter(|&(i, _)| accepted(i))
            .map(|(_, r)| &r.batch);
        let sync = group.iter().any(|r| r.sync);
        let first_seq = wal
            .append_group(batches, sync)
            .map_err(|e| self.poison.with_io(e))?;
        let next_seq = wal.next_seq();
        bump(&self.stats.wal_group_commits, 1);
        self.report_wal_io(&mut wal);
        drop(wal);
        self.apply_group(group, first_seq, &accepted);
        self.versions.publish_visible(next_seq - 1);
        self.memory
            .try_rebalance(&self.versions, &self.record_cache);
        Ok(())
    }

    /// Searches the active MemTable for where `batch`'s ops will go, in
    /// the writer's thread before it queues (`PreparedInserts`).
    pub fn prepare_inserts(&self, batch: &WriteBatch) -> Option<PreparedInserts> {
        if batch.len() > MAX_PREPARED_OPS {
            return None;
        }
        let memtable = self.versions.state().active.clone();
        let hints = batch
            .ops
            .iter()
            .map(|op| memtable.prepare_insert(&op.key))
            .collect();
        Some(PreparedInserts {
            _memtable: memtable,
            hints,
        })
    }

    /// Checks the group's transactions, in order, against the newest
    /// State and the writes of the requests before them; `None` when the
    /// group holds none. A request that fails is left out of the group.
    fn check_transactions(&self, group: &[Request]) -> Option<Vec<bool>> {
        if group.iter().all(|r| r.prepared.check.is_none()) {
            return None;
        }
        let state = self.versions.state();
        let now_seq = self.versions.visible_seq();
        // Only requests before the last check need their keys noted.
        let last_check = group.iter().rposition(|r| r.prepared.check.is_some());
        let mut earlier = GroupWrites::default();
        let passed = group.iter().enumerate().map(|(i, req)| {
            let passes = req.prepared.check.as_ref().is_none_or(|check| {
                let written = Written {
                    ops: &req.batch.ops,
                    hints: req.prepared.inserts.as_ref().map(|p| &p.hints[..]),
                };
                check.passes(&state, now_seq, &earlier, written)
            });
            if passes && last_check.is_some_and(|last| i < last) {
                req.batch.ops.iter().for_each(|op| earlier.add(op));
            }
            passes
        });
        Some(passed.collect())
    }

    fn apply_group(&self, group: &[Request], first_seq: u64, accepted: &dyn Fn(usize) -> bool) {
        let state = self.versions.state();
        let mut batch_first_seq = first_seq;
        for (index, req) in group.iter().enumerate() {
            if !accepted(index) {
                continue;
            }
            // The active MemTable ignores hints of one frozen since.
            let hints = req.prepared.inserts.as_ref().map(|p| &p.hints);
            // Numbering must match the WAL record exactly: entry i of the
            // batch gets `batch_first_seq + i`.
            let mut separated = req.batch.separated_values.iter().peekable();
            for (i, (seq, op)) in (batch_first_seq..).zip(&req.batch.ops).enumerate() {
                if let Some(end) = &op.end {
                    // Before the write is visible, as for a key below.
                    state.active.delete_range(op.key.clone(), end.clone(), seq);
                    self.record_cache.record_range_delete(&op.key, end, seq);
                    continue;
                }
                let (key, value) = (op.key.clone(), op.value.clone());
                match hints {
                    Some(hints) => state.active.insert_prepared(key, seq, value, &hints[i]),
                    None => state.active.insert(key, seq, value),
                }
                // Before the write is visible: see `record_cache`. A
                // separated value is cached as the user's bytes, the same
                // value its pointer names.
                let user_value = separated.next_if(|&&(at, _)| at == i);
                let cached = user_value.map(|(_, bytes)| Value::Inline(bytes.clone()));
                self.record_cache
                    .record_write(&op.key, cached.as_ref().or(op.value.as_ref()), seq);
            }
            batch_first_seq += req.batch.len() as u64;
            if req.prepared.internal {
                continue;
            }
            let (puts, deletes) = req.batch.puts_and_deletes();
            bump(&self.stats.puts, puts);
            bump(&self.stats.deletes, deletes);
            bump(&self.stats.range_deletes, req.batch.range_deletes());
            bump(&self.stats.batches, 1);
            bump(&self.stats.user_bytes_written, req.batch.user_bytes());
        }
    }

    /// Freezes the active MemTable once it holds `checkpoint_distance_bytes`
    /// (or on request, if it holds anything). Runs in the leader, so no
    /// write is between the WAL and the MemTable while it happens.
    fn maybe_freeze(&self, forced: bool) -> Result<()> {
        if self.versions.trees().is_none() {
            return Ok(());
        }
        let active = &self.versions.state().active;
        let size_bytes = active.size_bytes();
        let distance = self.effective_checkpoint_distance();
        if active.holds_nothing() || (size_bytes < distance && !forced) {
            return Ok(());
        }
        self.wait_for_frozen_slot()?;
        self.freeze_active(distance)
    }

    /// For the checkpoint thread's read-pressure rule: freezes the active
    /// MemTable, if it holds anything, only when no leader runs, no writer
    /// waits and a frozen slot is free; `Ok(false)` when it did not. It
    /// cannot queue as `checkpoint_now` does: a leader stalled for a frozen
    /// slot waits for this very thread, which would wait behind it.
    pub fn freeze_if_idle(&self) -> Result<bool> {
        let frozen = self.commit.try_lead_alone(|| {
            // Writers may queue behind this freeze's WAL rotation: not in
            // the idle I/O class (`Options::checkpoint_io_idle`).
            let _waiting = self.checkpoints.wait_on_checkpoints();
            self.poison.check()?;
            let state = self.versions.state();
            let slot_taken = state.frozen.len() >= MAX_FROZEN_MEMTABLES;
            if self.versions.trees().is_none() || state.active.holds_nothing() || slot_taken {
                return Ok(false);
            }
            self.freeze_active(self.effective_checkpoint_distance())?;
            Ok(true)
        });
        frozen.unwrap_or(Ok(false))
    }

    /// For the checkpoint thread once writes have stopped: gives back the
    /// WAL storage reserved ahead of the appends, only when no leader runs
    /// and no writer waits (one that does is about to use it).
    pub fn release_wal_reserve_if_idle(&self) -> Result<()> {
        let released = self.commit.try_lead_alone(|| {
            self.poison.check()?;
            let mut wal = self.versions.wal();
            wal.release_reserve().map_err(|e| self.poison.with_io(e))
        });
        released.unwrap_or(Ok(()))
    }

    /// Moves the active MemTable to the frozen list and starts a new one of
    /// `distance` bytes. Only a leader calls it, with a frozen slot free.
    fn freeze_active(&self, distance: u64) -> Result<()> {
        self.versions
            .freeze_active(distance)
            .map_err(|e| self.poison.with_io(e))?;
        bump(&self.stats.memtables_frozen, 1);
        self.checkpoints.control.wake_worker();
        Ok(())
    }

    /// Back-pressure: waits while `MAX_FROZEN_MEMTABLES` wait for their
    /// checkpoints. Every writer queues behind the leader meanwhile.
    fn wait_for_frozen_slot(&self) -> Result<()> {
        let slot_free = || self.versions.state().frozen.len() < MAX_FROZEN_MEMTABLES;
        if slot_free() {
            return Ok(());
        }
        let started = Instant::now();
        self.checkpoints.wait_until(|_| slot_free())?;
        bump(&self.stats.write_stalls, 1);
        bump(
            &self.stats.write_stall_nanos,
            started.elapsed().as_nanos() as u64,
        );
        Ok(())
    }
}
