//! Value garbage collection (`docs/tuning.md`, "Large values";
//! `docs/durability.md`, "Separated values"), in steps the checkpoint
//! thread takes between checkpoints:
//!
//! 1. *Judge*: read a sealed file's records (keys only) and look their
//!    keys up (all of them, or an even sample of 4096 in a larger file):
//!    a record is live while its key's newest version points at it. A
//!    file whose live records hold less than
//!    `value_file_min_live_percent` of its bytes is chosen. Which files
//!    are judged follows the sampled garbage (`db::value_garbage`): a
//!    file whose estimated live share came near the bar since it was
//!    last judged; every sealed file after an open, after a range
//!    deletion, and once the sampled garbage since the last such round
//!    reaches half the value files' bytes. A load of new keys makes no
//!    garbage, so it reads no value file back.
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
use std::sync::atomic::Ordering;

use crate::db::inner::DbInner;
use crate::db::txn::check::TxnCheck;
use crate::db::write::{Prepared, Request};
use crate::stats::bump;
use crate::values::{PendingWrite, RecordInfo, Value, ValuePointer};
use crate::{Result, WriteBatch};

/// Records moved per committed batch.
const MOVE_BATCH_RECORDS: usize = 64;
/// Records a judgement looks up at most: a larger file's live share is
/// estimated from this many (to within about 1.5 points at a 95%
/// confidence).
const JUDGE_SAMPLE_RECORDS: usize = 4096;
/// Keys a judgement looks up together (their tree reads are issued
/// together, as `multi_get`'s are).
const JUDGE_LOOKUP_KEYS: usize = 256;
/// A round that judges every sealed file starts once the sampled garbage
/// since the last such round reaches the value files' bytes divided by
/// this (half: as much garbage as live bytes, if none was collected): a
/// net under the per-file estimates, whose samples are few for small
/// files.
const FULL_ROUND_GARBAGE_DIVISOR: u64 = 2;
/// A file is judged once its estimated live share falls below
/// `value_file_min_live_percent` plus this many points: the estimate
/// comes from a sample, and judging a file a little early costs one
/// read of it, judging it late costs disk.
const JUDGE_MARGIN_PERCENT: u64 = 10;
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
    /// The garbage estimate and range deletions when the last full
    /// round began; `None` before the first.
    full_round_at: Option<(u64, u64)>,
    /// Copies made whose commit found a writer at work.
    ready: Option<ReadyBatch>,
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
            let records = self.values.records(id)?;
            let live_bytes = self.estimate_live_bytes(id, &records)?;
            let file_bytes = self.values.file_len(id);
            self.value_garbage.judged(id, live_bytes);
            bump(&self.stats.value_files_judged, 1);
            if live_bytes * 100 < file_bytes * u64::from(min_live_percent) {
                // Every record: the moves look each one up again anyway.
                gc.moving = Some((id, records.into()));
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

    /// Begins a round of judgements: of every sealed file after an open,
    /// a range deletion, or once the sampled garbage since the last full
    /// round reaches half the value files' bytes; otherwise of the files whose
    /// estimated live share is near `value_file_min_live_percent`.
    fn start_round(&self, gc: &mut ValueGc) {
        let stats = self.values.stats();
        let garbage = self.value_garbage.total_bytes();
        let range_deletes = self.stats.range_deletes.load(Ordering::Relaxed);
        let full = match gc.full_round_at {
            None => stats.files > 0,
            Some((garbage_at, range_deletes_at)) => {
                garbage - garbage_at >= stats.bytes / FULL_ROUND_GARBAGE_DIVISOR
                    || range_deletes > range_deletes_at
            }
        };
        if full {
            gc.full_round_at = Some((garbage, range_deletes));
        }
        let moved: Vec<u64> = gc.moved.iter().map(|&(id, _)| id).collect();
        let bar_percent =
            (u64::from(self.value_file_min_live_percent) + JUDGE_MARGIN_PERCENT).min(100);
        gc.to_judge = self
            .values
            .sealed_files()
            .into_iter()
            .filter(|(id, _)| !moved.contains(id))
            .filter(|&(id, len)| {
                // Only garbage sampled since its last judgement makes a
                // file worth judging again.
                let (garbage, estimated_live) = self.value_garbage.sampled_and_live_bytes(id, len);
                full || (garbage > 0 && estimated_live * 100 < len * bar_percent)
            })
            .map(|(id, _)| id)
            .collect();
    }

    /// The bytes of `records` (those of file `id`) that are their key's
    /// newest version: counted exactly in a file of up to
    /// [`JUDGE_SAMPLE_RECORDS`] records, estimated from that many evenly
    /// spaced ones in a larger file. The moves look every record of a
    /// chosen file up again, so a judgement needs only the share.
    fn estimate_live_bytes(&self, id: u64, records: &[RecordInfo]) -> Result<u64> {
        let stride = records.len().div_ceil(JUDGE_SAMPLE_RECORDS).max(1);
        let sample: Vec<RecordInfo> = records
            .iter()
            .skip(id as usize % stride)
            .step_by(stride)
            .cloned()
            .collect();
        let (mut sampled_bytes, mut live_bytes) = (0u64, 0u64);
        for chunk in sample.chunks(JUDGE_LOOKUP_KEYS) {
            for (record, live) in chunk.iter().zip(self.point_at(chunk)?) {
                sampled_bytes += record.len_bytes();
                live_bytes += if live { record.len_bytes() } else { 0 };
            }
        }
        let total_bytes: u64 = records.iter().map(RecordInfo::len_bytes).sum();
        Ok(match sampled_bytes {
            0 => 0,
            _ => {
                (u128::from(live_bytes) * u128::from(total_bytes) / u128::from(sampled_bytes))
                    as u64
            }
        })
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
        for id in &retire {
            self.value_garbage.forget(*id);
        }
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
