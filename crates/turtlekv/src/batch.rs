//! Atomic groups of writes.

use bytes::{Bytes, BytesMut};

use crate::db::keyspace::{DEFAULT_ID, Tag};
use crate::options::validate_entry;
use crate::values::Value;
use crate::{Keyspace, Result};

/// One update: a put (`value: Some`: the user's bytes, or a pointer to
/// them in a value file), a delete (`value: None`, a tombstone), or a
/// range deletion (`end: Some`, `value: None`) of every
/// stored key from `key` up to `end`, exclusive.
#[derive(Debug, Clone)]
pub(crate) struct BatchOp {
    /// The stored key: the user's key behind its keyspace's tag; a range
    /// deletion's start.
    pub key: Bytes,
    pub value: Option<Value>,
    /// A range deletion's end (exclusive), a stored key behind the same
    /// tag as `key`.
    pub end: Option<Bytes>,
    /// Bytes of tag at the front of `key` (0 for a key as stored, such as
    /// one the WAL gave back).
    pub tag_len: u8,
}

impl BatchOp {
    /// An op on a key as stored (the WAL's, the catalog's).
    pub(crate) fn stored(key: Bytes, value: Option<Value>) -> Self {
        BatchOp {
            key,
            value,
            end: None,
            tag_len: 0,
        }
    }

    /// A range deletion of the stored keys `start..end`, as stored.
    pub(crate) fn stored_range(start: Bytes, end: Bytes) -> Self {
        BatchOp {
            key: start,
            value: None,
            end: Some(end),
            tag_len: 0,
        }
    }

    /// The value of a put not written yet (a transaction's buffered one):
    /// the user's bytes, as only the write separates values.
    pub(crate) fn buffered_value(&self) -> Option<Bytes> {
        self.value.as_ref().map(|v| {
            debug_assert!(!v.is_pointer(), "a buffered op holds the user's bytes");
            v.stored().clone()
        })
    }

    /// Whether this op deletes a range (`key..end`) rather than one key.
    pub(crate) fn is_range(&self) -> bool {
        self.end.is_some()
    }

    /// A range deletion's user end key, without its tag.
    pub(crate) fn user_end(&self) -> Option<&[u8]> {
        self.end.as_ref().map(|e| &e[usize::from(self.tag_len)..])
    }

    /// The user's key, without its tag.
    pub(crate) fn user_key(&self) -> &[u8] {
        &self.key[usize::from(self.tag_len)..]
    }
}

/// Ops compare as stored: a decoded WAL record equals the batch logged.
impl PartialEq for BatchOp {
    fn eq(&self, other: &Self) -> bool {
        (&self.key, &self.value, &self.end) == (&other.key, &other.value, &other.end)
    }
}

impl Eq for BatchOp {}

/// Puts, deletes and range deletions applied all-or-nothing by
/// [`crate::Db::write`], in the order they were added: a put after a
/// range deletion that covers its key survives it, one before does not.
///
/// Entries are checked when the batch is written: one bad entry makes the
/// whole batch fail with a typed error and nothing of it is applied.
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    pub(crate) ops: Vec<BatchOp>,
    /// The named keyspaces `put_in`/`delete_in` wrote to, each once: the
    /// write checks that they belong to its database and are not dropped.
    pub(crate) keyspaces: Vec<Keyspace>,
    user_bytes: u64,
    /// Where keys and values are copied: one allocation shared by many
    /// entries instead of one (plus a reference-count block) per key and
    /// per value. Entries keep their part alive in the MemTable.
    arena: BytesMut,
    /// Size of the newest arena chunk.
    chunk_bytes: usize,
    /// Bytes of all chunks so far.
    #[cfg(test)]
    reserved_bytes: usize,
    /// The user's bytes of ops whose value went to a value file, by op
    /// index, ascending: for the record cache, which then holds the value
    /// where the write leaves a cached record (a hot key's next read
    /// skips the value file). Only values up to
    /// `record_cache::MAX_SEPARATED_VALUE_BYTES`.
    pub(crate) separated_values: Vec<(usize, Bytes)>,
}

impl PartialEq for WriteBatch {
    fn eq(&self, other: &Self) -> bool {
        self.ops == other.ops
    }
}

impl Eq for WriteBatch {}

/// Largest arena chunk (an entry larger than this gets a chunk of its own).
const ARENA_CHUNK_BYTES: usize = 16 * 1024;

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put of `key` → `value` in the default keyspace (the `Db`'s
    /// own); a later entry for the same key wins.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.push(Tag::of(DEFAULT_ID), key.as_ref(), Some(value.as_ref()))
    }

    /// Adds a delete of `key` in the default keyspace.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.push(Tag::of(DEFAULT_ID), key.as_ref(), None)
    }

    /// Adds a deletion of every key `k` with `start <= k < end` (bytewise
    /// order) in the default keyspace, applied in its place among the
    /// batch's other entries. Both keys must be valid keys, and `start`
    /// below `end`: an empty or inverted range makes the write fail with
    /// [`crate::Error::InvalidRange`].
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> &mut Self {
        self.push_range(Tag::of(DEFAULT_ID), start.as_ref(), end.as_ref())
    }

    /// Adds a deletion of the keys `start..end` of `keyspace` (see
    /// [`WriteBatch::delete_range`]); no other keyspace's keys are touched.
    pub fn delete_range_in(
        &mut self,
        keyspace: &Keyspace,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> &mut Self {
        self.note_keyspace(keyspace);
        self.push_range(keyspace.tag(), start.as_ref(), end.as_ref())
    }

    /// Adds a put of `key` → `value` in `keyspace`. One batch is atomic
    /// across keyspaces; writing it to another database than the
    /// keyspace's is refused.
    pub fn put_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> &mut Self {
        self.note_keyspace(keyspace);
        self.push(keyspace.tag(), key.as_ref(), Some(value.as_ref()))
    }

    /// Adds a delete of `key` in `keyspace`.
    pub fn delete_in(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> &mut Self {
        self.note_keyspace(keyspace);
        self.push(keyspace.tag(), key.as_ref(), None)
    }

    /// Adds an op on a key as stored, tag and all (the catalog's, tests').
    pub(crate) fn push_stored(&mut self, key: &[u8], value: Option<&[u8]>) -> &mut Self {
        self.push(Tag::BARE, key, value)
    }

    /// Adds an op on `key` behind `tag` (a transaction's buffered write,
    /// whose default keyspace's tag is the database's own) and returns
    /// the stored key.
    pub(crate) fn push_behind(&mut self, tag: Tag, key: &[u8], value: Option<&[u8]>) -> Bytes {
        self.push(tag, key, value);
        self.ops.last().expect("just pushed").key.clone()
    }

    /// Adds a put of `key` behind `tag` whose value is `value` as stored (a
    /// value pointer), for a user value of `user_value_len` bytes.
    pub(crate) fn push_value(
        &mut self,
        tag: Tag,
        key: &[u8],
        value: Value,
        user_value: &[u8],
    ) -> &mut Self {
        let user_value_len = user_value.len();
        if user_value_len <= crate::record_cache::MAX_SEPARATED_VALUE_BYTES {
            let bytes = Bytes::copy_from_slice(user_value);
            self.separated_values.push((self.ops.len(), bytes));
        }
        self.user_bytes += (key.len() + user_value_len) as u64;
        self.reserve(tag.len() + key.len());
        self.arena.extend_from_slice(tag.as_bytes());
        let key = self.copy(key);
        self.ops.push(BatchOp {
            key,
            value: Some(value),
            end: None,
            tag_len: tag.len() as u8,
        });
        self
    }

    /// Notes a named keyspace the batch writes to (see `put_in`).
    pub(crate) fn note_keyspace(&mut self, keyspace: &Keyspace) {
        if !self.keyspaces.iter().any(|k| k.same_as(keyspace)) {
            self.keyspaces.push(keyspace.clone());
        }
    }

    fn push(&mut self, tag: Tag, key: &[u8], value: Option<&[u8]>) -> &mut Self {
        let value_len = value.map_or(0, <[u8]>::len);
        self.user_bytes += (key.len() + value_len) as u64;
        self.reserve(tag.len() + key.len() + value_len);
        self.arena.extend_from_slice(tag.as_bytes());
        let key = self.copy(key);
        let value = value.map(|v| Value::Inline(self.copy(v)));
        self.ops.push(BatchOp {
            key,
            value,
            end: None,
            tag_len: tag.len() as u8,
        });
        self
    }

    /// Adds a range deletion of `start..end` behind `tag`: both keys get
    /// the tag, so the range stays within the keyspace.
    fn push_range(&mut self, tag: Tag, start: &[u8], end: &[u8]) -> &mut Self {
        self.user_bytes += (start.len() + end.len()) as u64;
        self.reserve(2 * tag.len() + start.len() + end.len());
        self.arena.extend_from_slice(tag.as_bytes());
        let key = self.copy(start);
        self.arena.extend_from_slice(tag.as_bytes());
        let end = self.copy(end);
        self.ops.push(BatchOp {
            key,
            value: None,
            end: Some(end),
            tag_len: tag.len() as u8,
        });
        self
    }

    /// Makes room for `len` bytes. The first chunk is exactly the first
    /// entry (a single put wastes nothing); later ones double up to
    /// `ARENA_CHUNK_BYTES`, so a batch of any size leaves at most about
    /// half of its chunks unused (the MemTable keeps them as long as any
    /// entry in them).
    fn reserve(&mut self, len: usize) {
        if self.arena.capacity() - self.arena.len() >= len {
            return;
        }
        self.chunk_bytes = (self.chunk_bytes * 2).clamp(len, ARENA_CHUNK_BYTES.max(len));
        #[cfg(test)]
        {
            self.reserved_bytes += self.chunk_bytes;
        }
        // The old chunk stays alive through the entries that use it.
        self.arena = BytesMut::with_capacity(self.chunk_bytes);
    }

    fn copy(&mut self, bytes: &[u8]) -> Bytes {
        self.arena.extend_from_slice(bytes);
        self.arena.split().freeze()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// `true` when the batch holds no entry.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.keyspaces.clear();
        self.separated_values.clear();
        self.user_bytes = 0;
        self.arena = BytesMut::new();
        self.chunk_bytes = 0;
    }

    /// Key plus value bytes of all entries.
    pub fn user_bytes(&self) -> u64 {
        self.user_bytes
    }

    /// Checks every entry against the key and value limits, and every
    /// range deletion for a non-empty range.
    pub(crate) fn validate(&self) -> Result<()> {
        self.ops.iter().try_for_each(|op| {
            validate_entry(op.user_key(), op.value.as_ref().map(|v| &v.stored()[..]))?;
            match op.user_end() {
                Some(end) => validate_range(op.user_key(), end),
                None => Ok(()),
            }
        })
    }

    /// Puts and deletes (range deletions count as deletes).
    pub(crate) fn puts_and_deletes(&self) -> (u64, u64) {
        let puts = self.ops.iter().filter(|op| op.value.is_some()).count() as u64;
        (puts, self.ops.len() as u64 - puts)
    }

    /// Range deletions.
    pub(crate) fn range_deletes(&self) -> u64 {
        self.ops.iter().filter(|op| op.is_range()).count() as u64
    }
}

/// Refuses a range deletion whose end is a bad key or not above `start`.
fn validate_range(start: &[u8], end: &[u8]) -> Result<()> {
    validate_entry(end, None)?;
    if start >= end {
        return Err(crate::Error::InvalidRange {
            start: start.to_vec(),
            end: end.to_vec(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod arena_tests {
    use super::*;

    #[test]
    fn arena_chunks_waste_at_most_about_half() {
        for entries in [1usize, 2, 3, 10, 100, 1000, 10_000] {
            let mut batch = WriteBatch::new();
            for i in 0..entries {
                batch.put((i as u64).to_be_bytes(), [7u8; 120]);
            }
            let used = batch.user_bytes() as usize;
            let reserved = batch.reserved_bytes;
            if entries == 1 {
                assert_eq!(reserved, used + 1, "a single put is exact (its tag too)");
            }
            // Doubling chunks: the unused tail of each is less than the
            // chunk before it, capped at one full chunk.
            assert!(
                reserved <= 2 * used + ARENA_CHUNK_BYTES.min(2 * used),
                "{entries} entries: {reserved} bytes reserved for {used}"
            );
            for (i, op) in batch.ops.iter().enumerate() {
                assert_eq!(op.user_key(), (i as u64).to_be_bytes());
                assert_eq!(op.key[0], 0, "the default keyspace's tag");
            }
        }
    }
}
