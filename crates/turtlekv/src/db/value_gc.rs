//! Value garbage collection (`docs/tuning.md`, "Large values";
//! `docs/durability.md`, "Separated values"), in steps the checkpoint
//! thread takes between checkpoints:
//!
//! 1. *Judge*: once the writes since the last round made garbage of an
//!    eighth of the value files' bytes (as sampled: see
//!    [`GarbageEstimate`]), or after a range deletion, or at the first
//!    step after an open, read each sealed file's records (keys only) and
//!    look each key up: a record is live while its key's newest version
//!    points at it. A file whose live records hold less than
//!    `value_file_min_live_percent` of its bytes is chosen. A load of new
//!    keys makes no garbage, so it reads no value file back.
//! 2. *Move*: copy its live records, a batch at a time, to the file
//!    appends go to, and commit pointers to the copies, each batch as a
//!    transaction that fails if one of its keys was written meanwhile (a
//!    key written since needs no move). The batch is led alone
//!    (`GroupCommit::try_lead_alone`): the checkpoint thread never queues
//!    behind a writer that may wait for it.
//! 3. *Retire*: once a checkpoint covers the last move (no WAL record a
//!    crash would replay points into the file), retire the file; it is
//!    removed when no read view that could still follow an old pointer is
//!    left (`values::ValuePin`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::db::inner::DbInner;
use crate::db::txn::check::TxnCheck;
use crate::db::write::{Prepared, Request};
use crate::stats::bump;
use crate::values::{PendingWrite, RecordInfo, Value, ValuePointer};
use crate::{Result, WriteBatch};

/// Records moved per committed batch.
const MOVE_BATCH_RECORDS: usize = 64;
/// Keys a judgement looks up together (their tree reads are issued
/// together, as `multi_get`'s are).
const JUDGE_LOOKUP_KEYS: usize = 256;
/// A round of judgements starts once the sampled garbage since the last
/// one reaches this fraction of the value files' bytes.
const REJUDGE_GARBAGE_DIVISOR: u64 = 8;
/// One write in this many is sampled for the version it replaces.
const SAMPLE_EVERY_OPS: u64 = 64;
/// Conflicting commits after which a file's move is given up until the
/// next judgement.
const MAX_MOVE_CONFLICTS: u32 = 8;

/// Where value garbage collection stands between steps.
#[derive(Debug, Default)]
pub(crate) struct ValueGc {
    /// Sealed files not judged yet in this round.
    to_judge: VecDeque<u64>,
    /// The file whose live records are being moved, and those not moved.
    moving: Option<(u64, VecDeque<RecordInfo>)>,
    conflicts: u32,
    /// Files whose live records all moved, with the sequence number the
    /// last move was visible at.
    moved: Vec<(u64, u64)>,
    /// The garbage estimate and range deletions when the last round
    /// began; `None` before the first.
    judged_at: Option<(u64, u64)>,
    /// Copies made whose commit found a writer at work.
    ready: Option<ReadyBatch>,
}

/// Garbage the user's writes made in the value files, estimated from a
/// sample: one op in [`SAMPLE_EVERY_OPS`] looks up the version it
/// replaces, and a separated one counts its record's bytes that many
/// times. Cheap (a lookup per 64 writes, none while there is no value
/// file) and blind to no kind of write: overwrites in the MemTable or
/// the tree, deletes, and small values replacing large ones.
#[derive(Debug, Default)]
pub(crate) struct GarbageEstimate {
    ops: AtomicU64,
    bytes: AtomicU64,
}

/// Whether op number `i` (counted across batches) is sampled: one in
/// [`SAMPLE_EVERY_OPS`], spread by a hash so that no regular pattern of
/// writes (batches of 64 whose first op is always an insert) hides
/// from the sample.
fn sampled_op(i: u64) -> bool {
    // splitmix64's finaliser.
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)).is_multiple_of(SAMPLE_EVERY_OPS)
}

/// Records of the moving file copied, and the pointers to commit.
#[derive(Debug)]
struct ReadyBatch {
    batch: WriteBatch,
    /// The copies, pending until the batch commits or is given up.
    _copies: Vec<PendingWrite>,
    /// Where the records were found live.
    snapshot_seq: u64,
    /// Records of the moving file it covers (moved, or no longer live).
    records: usize,
    moved_bytes: u64,
}

impl DbInner {
    /// One step of value garbage collection; `Ok(true)` if it did some
    /// work (the caller may take the next at once).
    pub fn collect_value_garbage(&self) -> Result<bool> {
        let min_live_percent = self.value_file_min_live_percent;
        if min_live_percent == 0 {
            return Ok(false);
        }
        let mut gc = self.value_gc.lock();
        let retired = self.retire_moved_files(&mut gc)?;
        if let Some((id, pending)) = gc.moving.take() {
            return self.move_batch(&mut gc, id, pending);
        }
        if let Some(id) = gc.to_judge.pop_front() {
            let live = self.live_records(id)?;
            let file_bytes = self.values.file_len(id);
            let live_bytes: u64 = live.iter().map(RecordInfo::len_bytes).sum();
            bump(&self.stats.value_files_judged, 1);
            if live_bytes * 100 < file_bytes * u64::from(min_live_percent) {
                gc.moving = Some((id, live.into()));
                gc.conflicts = 0;
            }
            return Ok(true);
        }
        self.start_round(&mut gc);
        if gc.to_judge.is_empty() && !gc.moved.is_empty() {
            // Moved files go once a checkpoint covers their moves: with no
            // writes to fill the MemTable, freeze it for one.
            return Ok(self.freeze_if_idle()? || retired);
        }
        Ok(retired || !gc.to_judge.is_empty())
    }

    /// Samples `batch`'s ops for the separated values they replace
    /// (`GarbageEstimate`); runs before the batch is written.
    pub(super) fn sample_superseded_values(&self, batch: &WriteBatch) {
        if self.value_file_min_live_percent == 0 || !self.values.has_held_files() {
            return;
        }
        let n = batch.ops.len() as u64;
        let first = self.value_garbage.ops.fetch_add(n, Ordering::Relaxed);
        let sampled: Vec<&[u8]> = (first..first + n)
            .filter(|&i| sampled_op(i))
            .map(|i| &batch.ops[(i - first) as usize])
            .filter(|op| op.end.is_none())
            .map(|op| &op.key[..])
            .collect();
        if sampled.is_empty() {
            return;
        }
        // A hint only: a failed lookup leaves the estimate as it is, and
        // the write goes on (its own reads report any damage).
        let Ok(replaced) = self.newest_quietly(&sampled) else {
            return;
        };
        let bytes: u64 = sampled
            .iter()
            .zip(replaced)
            .filter_map(|(key, value)| match value? {
                Value::Pointer(encoded) => {
                    let p = ValuePointer::decode(&encoded).ok()?;
                    Some(crate::values::record_len(key.len(), p.value_len))
                }
                Value::Inline(_) => None,
            })
            .sum();
        self.value_garbage
            .bytes
            .fetch_add(bytes * SAMPLE_EVERY_OPS, Ordering::Relaxed);
    }

    /// Begins a round of judgements if the writes since the last made
    /// enough garbage, or deleted a range.
    fn start_round(&self, gc: &mut ValueGc) {
        let stats = self.values.stats();
        let garbage = self.value_garbage.bytes.load(Ordering::Relaxed);
        let range_deletes = self.stats.range_deletes.load(Ordering::Relaxed);
        let due = match gc.judged_at {
            None => stats.files > 0,
            Some((garbage_at, range_deletes_at)) => {
                garbage - garbage_at >= stats.bytes / REJUDGE_GARBAGE_DIVISOR
                    || range_deletes > range_deletes_at
            }
        };
        if !due {
            return;
        }
        gc.judged_at = Some((garbage, range_deletes));
        let moved: Vec<u64> = gc.moved.iter().map(|&(id, _)| id).collect();
        gc.to_judge = self
            .values
            .sealed_files()
            .into_iter()
            .map(|(id, _)| id)
            .filter(|id| !moved.contains(id))
            .collect();
    }

    /// The records of file `id` that are their key's newest version.
    fn live_records(&self, id: u64) -> Result<Vec<RecordInfo>> {
        let records = self.values.records(id)?;
        let mut live = Vec::new();
        for chunk in records.chunks(JUDGE_LOOKUP_KEYS) {
            let points = self.point_at(chunk)?;
            live.extend(
                chunk
                    .iter()
                    .zip(points)
                    .filter(|(_, p)| *p)
                    .map(|(r, _)| r.clone()),
            );
        }
        Ok(live)
    }

    /// For each record, whether the newest version of its key points at
    /// it. The lookups skip the record cache and are not counted as the
    /// user's reads: the collector reads keys no user asked for, and must
    /// neither evict the user's records nor show up in `get_disk_reads`.
    fn point_at(&self, records: &[RecordInfo]) -> Result<Vec<bool>> {
        let keys: Vec<&[u8]> = records.iter().map(|r| &r.key[..]).collect();
        let newest = self.newest_quietly(&keys)?;
        let points = |(record, value): (&RecordInfo, Option<Value>)| match value {
            Some(Value::Pointer(encoded)) => {
                ValuePointer::decode(&encoded).is_ok_and(|p| p == record.pointer)
            }
            _ => false,
        };
        Ok(records.iter().zip(newest).map(points).collect())
    }

    /// The newest stored versions of `keys` (stored keys), looked up
    /// without the record cache and without counting as the user's reads.
    fn newest_quietly(&self, keys: &[&[u8]]) -> Result<Vec<Option<Value>>> {
        self.versions.with_latest(|state, seq| {
            let mut newest = Vec::with_capacity(keys.len());
            let mut to_tree = Vec::new();
            for (i, key) in keys.iter().enumerate() {
                let found = state.memtable_get(key, seq);
                if found.is_none() {
                    to_tree.push(i);
                }
                newest.push(found.flatten());
            }
            if let Some(tree) = state.tree.as_ref().filter(|_| !to_tree.is_empty()) {
                let pending: Vec<&[u8]> = to_tree.iter().map(|&i| keys[i]).collect();
                for (i, value) in to_tree.into_iter().zip(tree.get_many(&pending)?) {
                    newest[i] = value;
                }
            }
            Ok(newest)
        })
    }

    /// Moves the next batch of `pending` (records of file `id`), or, with
    /// none left, counts the file as moved. `Ok(false)` when a writer was
    /// at work: the copied batch waits for a later step.
    fn move_batch(
        &self,
        gc: &mut ValueGc,
        id: u64,
        mut pending: VecDeque<RecordInfo>,
    ) -> Result<bool> {
        if pending.is_empty() {
            gc.moved.push((id, self.versions.visible_seq()));
            bump(&self.stats.value_files_moved, 1);
            return Ok(true);
        }
        let ready = match gc.ready.take() {
            Some(ready) => ready,
            None => match self.copy_batch(&pending)? {
                Some(ready) => ready,
                None => {
                    // A damaged record: its reads report it; the file
                    // stays, so that they go on reporting the damage.
                    bump(&self.stats.value_moves_abandoned, 1);
                    return Ok(true);
                }
            },
        };
        let committed = match ready.batch.is_empty() {
            true => Some(true),
            false => self.commit_move(ready.batch.clone(), ready.snapshot_seq)?,
        };
        match committed {
            Some(true) => {
                pending.drain(..ready.records);
                bump(&self.stats.value_bytes_moved, ready.moved_bytes);
            }
            // A key was written since: copy again from what is live then.
            Some(false) => gc.conflicts += 1,
            None => gc.ready = Some(ready),
        }
        if gc.conflicts < MAX_MOVE_CONFLICTS {
            gc.moving = Some((id, pending));
        } else {
            gc.ready = None;
            bump(&self.stats.value_moves_abandoned, 1);
        }
        Ok(committed.is_some())
    }

    /// Copies the next records of `pending` that are still live to the
    /// file appends go to, as a batch of pointers to the copies; `None`
    /// if a record is damaged.
    fn copy_batch(&self, pending: &VecDeque<RecordInfo>) -> Result<Option<ReadyBatch>> {
        let records = pending.len().min(MOVE_BATCH_RECORDS);
        // Before the lookups: a write after them is one the check sees.
        let snapshot_seq = self.versions.visible_seq();
        let mut batch = WriteBatch::new();
        let mut copies = Vec::new();
        let mut moved_bytes = 0;
        let head: Vec<RecordInfo> = pending.iter().take(records).cloned().collect();
        // A record whose key was written since it was judged needs no move.
        let live = self.point_at(&head)?;
        for (record, _) in head.iter().zip(live).filter(|(_, live)| *live) {
            let copy = match self.values.relocate(record) {
                Ok((copy, written)) => {
                    copies.push(written);
                    copy
                }
                Err(crate::Error::Corruption { .. }) => return Ok(None),
                Err(e) => return Err(self.poison.with_error(e)),
            };
            moved_bytes += record.len_bytes();
            batch.ops.push(crate::batch::BatchOp::stored(
                record.key.clone(),
                Some(Value::Pointer(copy.encode())),
            ));
        }
        Ok(Some(ReadyBatch {
            batch,
            _copies: copies,
            snapshot_seq,
            records,
            moved_bytes,
        }))
    }

    /// Commits moved pointers as a transaction read at `snapshot_seq`,
    /// led alone; `None` if a writer was at work, `Some(false)` if a key
    /// was written after `snapshot_seq` (or a checkpoint passed it).
    fn commit_move(&self, batch: WriteBatch, snapshot_seq: u64) -> Result<Option<bool>> {
        let check = Arc::new(TxnCheck {
            snapshot_seq,
            keys: Vec::new(),
            ranges: Vec::new(),
            conflict: Default::default(),
        });
        let prepared = Prepared {
            inserts: None,
            check: Some(check.clone()),
            internal: true,
        };
        let request = Request::unqueued(batch, prepared);
        let Some(result) = self.commit.try_lead_alone(|| self.commit_group(&[request])) else {
            return Ok(None);
        };
        result?;
        Ok(Some(check.conflict.lock().is_none()))
    }

    /// Retires the moved files a checkpoint now covers, and removes those
    /// no read view pins any more. Returns whether it did either.
    fn retire_moved_files(&self, gc: &mut ValueGc) -> Result<bool> {
        let covered = self.versions.covered_seq();
        let (ready, waiting): (Vec<_>, Vec<_>) =
            gc.moved.iter().partition(|&&(_, seq)| seq <= covered);
        gc.moved = waiting;
        let retire: Vec<u64> = ready.into_iter().map(|(id, _)| id).collect();
        let retired = !retire.is_empty();
        if retired {
            self.values.retire(retire);
        }
        let removed = self
            .values
            .remove_unpinned()
            .map_err(|e| self.poison.with_io(e))?;
        bump(&self.stats.value_files_removed, removed);
        Ok(retired || removed > 0)
    }
}
