//! Where the value files' garbage lies, estimated from a sample of the
//! user's writes, for value garbage collection (`db::value_gc`) to judge
//! the files worth judging and leave the rest unread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::Result;
use crate::WriteBatch;
use crate::db::inner::DbInner;
use crate::values::{Value, ValuePointer};

/// One write in this many is sampled for the version it replaces.
const SAMPLE_EVERY_OPS: u64 = 64;

/// Garbage the user's writes made in the value files, estimated from a
/// sample: one op in [`SAMPLE_EVERY_OPS`] looks up the version it
/// replaces, and a separated one counts its record's bytes that many
/// times, against its file. Cheap (a lookup per 64 writes, none while
/// there is no value file) and blind to no kind of write: overwrites in
/// the MemTable or the tree, deletes, and small values replacing large
/// ones. Range deletions are not sampled; they start a full round.
#[derive(Debug, Default)]
pub(crate) struct GarbageEstimate {
    ops: AtomicU64,
    total_bytes: AtomicU64,
    per_file: Mutex<HashMap<u64, FileGarbage>>,
}

/// What is known of one value file's live bytes.
#[derive(Debug, Default, Clone, Copy)]
struct FileGarbage {
    /// Live bytes its last judgement found; `None` if it was not judged.
    judged_live_bytes: Option<u64>,
    /// Garbage sampled in it since (or since the open).
    sampled_bytes: u64,
}

impl GarbageEstimate {
    /// Sampled garbage since the database was opened.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes.load(Ordering::Relaxed)
    }

    /// Estimated live bytes of file `id`, `len_bytes` long: what its last
    /// judgement found (all of it, if none did), less the garbage sampled
    /// in it since.
    pub fn live_bytes(&self, id: u64, len_bytes: u64) -> u64 {
        self.sampled_and_live_bytes(id, len_bytes).1
    }

    /// The garbage sampled in file `id` since it was last judged, and its
    /// estimated live bytes (`live_bytes`).
    pub fn sampled_and_live_bytes(&self, id: u64, len_bytes: u64) -> (u64, u64) {
        let file = self.per_file.lock().get(&id).copied().unwrap_or_default();
        let live = file.judged_live_bytes.unwrap_or(len_bytes).min(len_bytes);
        (file.sampled_bytes, live.saturating_sub(file.sampled_bytes))
    }

    /// A judgement of file `id` found `live_bytes` live: its estimate
    /// starts over from there.
    pub fn judged(&self, id: u64, live_bytes: u64) {
        self.per_file.lock().insert(
            id,
            FileGarbage {
                judged_live_bytes: Some(live_bytes),
                sampled_bytes: 0,
            },
        );
    }

    /// Forgets file `id` (it is gone).
    pub fn forget(&self, id: u64) {
        self.per_file.lock().remove(&id);
    }

    fn add(&self, id: u64, bytes: u64) {
        self.total_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.per_file.lock().entry(id).or_default().sampled_bytes += bytes;
    }
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

impl DbInner {
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
        for (key, value) in sampled.iter().zip(replaced) {
            let Some(Value::Pointer(encoded)) = value else {
                continue;
            };
            if let Ok(p) = ValuePointer::decode(&encoded) {
                let record_bytes = crate::values::record_len(key.len(), p.value_len);
                self.value_garbage
                    .add(p.file_id, record_bytes * SAMPLE_EVERY_OPS);
            }
        }
    }

    /// The newest stored versions of `keys` (stored keys), looked up
    /// without the record cache and without counting as the user's reads:
    /// the collector and the sample read keys no user asked for, and must
    /// neither evict the user's records nor show in `get_disk_reads`.
    pub(super) fn newest_quietly(&self, keys: &[&[u8]]) -> Result<Vec<Option<Value>>> {
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
}
