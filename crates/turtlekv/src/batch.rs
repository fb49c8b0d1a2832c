//! Atomic groups of writes.

use bytes::{Bytes, BytesMut};

use crate::Result;
use crate::options::validate_entry;

/// One update: a put (`value: Some`) or a delete (`value: None`, a tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchOp {
    pub key: Bytes,
    pub value: Option<Bytes>,
}

/// Puts and deletes applied all-or-nothing by [`crate::Db::write`].
///
/// Entries are checked when the batch is written: one bad entry makes the
/// whole batch fail with a typed error and nothing of it is applied.
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    pub(crate) ops: Vec<BatchOp>,
    user_bytes: u64,
    /// Where keys and values are copied: one allocation shared by many
    /// entries instead of one (plus a reference-count block) per key and
    /// per value. Entries keep their part alive in the MemTable.
    arena: BytesMut,
}

impl PartialEq for WriteBatch {
    fn eq(&self, other: &Self) -> bool {
        self.ops == other.ops
    }
}

impl Eq for WriteBatch {}

/// Arena space reserved at a time once a batch holds more than one entry.
const ARENA_CHUNK_BYTES: usize = 16 * 1024;

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put of `key` → `value`; a later entry for the same key wins.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.user_bytes += (key.len() + value.len()) as u64;
        self.reserve(key.len() + value.len());
        let key = self.copy(key);
        let value = self.copy(value);
        self.ops.push(BatchOp {
            key,
            value: Some(value),
        });
        self
    }

    /// Adds a delete of `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        let key = key.as_ref();
        self.user_bytes += key.len() as u64;
        self.reserve(key.len());
        let key = self.copy(key);
        self.ops.push(BatchOp { key, value: None });
        self
    }

    /// Makes room for `len` bytes: exactly that for a first entry (a single
    /// put), a chunk at a time for larger batches.
    fn reserve(&mut self, len: usize) {
        if self.arena.capacity() - self.arena.len() < len {
            let chunk = if self.ops.is_empty() {
                len
            } else {
                len.max(ARENA_CHUNK_BYTES)
            };
            // The old chunk stays alive through the entries that use it.
            self.arena = BytesMut::with_capacity(chunk);
        }
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
        self.user_bytes = 0;
        self.arena = BytesMut::new();
    }

    /// Key plus value bytes of all entries.
    pub fn user_bytes(&self) -> u64 {
        self.user_bytes
    }

    /// Checks every entry against the key and value limits.
    pub(crate) fn validate(&self) -> Result<()> {
        self.ops
            .iter()
            .try_for_each(|op| validate_entry(&op.key, op.value.as_deref()))
    }

    pub(crate) fn puts_and_deletes(&self) -> (u64, u64) {
        let puts = self.ops.iter().filter(|op| op.value.is_some()).count() as u64;
        (puts, self.ops.len() as u64 - puts)
    }
}
