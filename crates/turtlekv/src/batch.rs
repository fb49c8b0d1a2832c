//! Atomic groups of writes.

use bytes::Bytes;

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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    pub(crate) ops: Vec<BatchOp>,
    user_bytes: u64,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put of `key` → `value`; a later entry for the same key wins.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.user_bytes += (key.len() + value.len()) as u64;
        self.ops.push(BatchOp {
            key: Bytes::copy_from_slice(key),
            value: Some(Bytes::copy_from_slice(value)),
        });
        self
    }

    /// Adds a delete of `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        let key = key.as_ref();
        self.user_bytes += key.len() as u64;
        self.ops.push(BatchOp {
            key: Bytes::copy_from_slice(key),
            value: None,
        });
        self
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
