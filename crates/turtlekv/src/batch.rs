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
    /// Size of the newest arena chunk.
    chunk_bytes: usize,
    /// Bytes of all chunks so far.
    #[cfg(test)]
    reserved_bytes: usize,
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
        self.user_bytes = 0;
        self.arena = BytesMut::new();
        self.chunk_bytes = 0;
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
                assert_eq!(reserved, used, "a single put is exact");
            }
            // Doubling chunks: the unused tail of each is less than the
            // chunk before it, capped at one full chunk.
            assert!(
                reserved <= 2 * used + ARENA_CHUNK_BYTES.min(2 * used),
                "{entries} entries: {reserved} bytes reserved for {used}"
            );
            let keys: Vec<_> = batch.ops.iter().map(|op| op.key.clone()).collect();
            for (i, key) in keys.iter().enumerate() {
                assert_eq!(key.as_ref(), (i as u64).to_be_bytes());
            }
        }
    }
}
