//! Atomic read-modify-writes of one key, built on transactions.

use bytes::Bytes;

use crate::db::Db;
use crate::{Error, Result, WriteOptions};

/// What [`Db::compare_and_swap`] found instead of the expected value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompareAndSwapError {
    /// The key's current value (`None`: absent).
    pub current: Option<Bytes>,
    /// The value that was to be written (`None`: a delete).
    pub proposed: Option<Bytes>,
}

impl std::fmt::Display for CompareAndSwapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "compare and swap failed: the current value is not the expected one"
        )
    }
}

impl std::error::Error for CompareAndSwapError {}

impl Db {
    /// Sets `key` to `new` (`None`: deletes it) if its current value is
    /// `expected` (`None`: absent), atomically. The outer `Result` carries
    /// I/O and input errors; the inner one, when the value did not match,
    /// the current value. Retries by itself when a concurrent write makes
    /// its transaction conflict.
    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<Result<(), CompareAndSwapError>> {
        let key = key.as_ref();
        loop {
            let mut txn = self.transaction();
            let current = txn.get(key)?;
            if current.as_deref() != expected {
                return Ok(Err(CompareAndSwapError {
                    current,
                    proposed: new.map(Bytes::copy_from_slice),
                }));
            }
            match new {
                Some(value) => txn.put(key, value),
                None => txn.delete(key),
            }
            match txn.commit(&WriteOptions::default()) {
                Ok(()) => return Ok(Ok(())),
                Err(Error::Conflict(_)) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Replaces the value of `key` with `f(current)` (`None` in and out:
    /// absent, or deletes), atomically, and returns the new value. `f` runs
    /// again, with the newer value, whenever a concurrent write makes the
    /// transaction conflict, so it should have no other effects.
    pub fn update_and_fetch<F>(&self, key: impl AsRef<[u8]>, mut f: F) -> Result<Option<Bytes>>
    where
        F: FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    {
        let key = key.as_ref();
        loop {
            let mut txn = self.transaction();
            let current = txn.get(key)?;
            let new = f(current.as_deref()).map(Bytes::from);
            match &new {
                Some(value) => txn.put(key, value),
                None => txn.delete(key),
            }
            match txn.commit(&WriteOptions::default()) {
                Ok(()) => return Ok(new),
                Err(Error::Conflict(_)) => continue,
                Err(e) => return Err(e),
            }
        }
    }
}
