//! Key-value separation: large values live once in append-only value
//! files (`docs/format.md`, "Value files"), and the WAL, the MemTables and
//! the tree carry a small pointer to them instead.
//!
//! Below the database layer a value is a [`Value`]: the user's bytes, or a
//! pointer. Only the database layer resolves pointers (`ValueStore::read`),
//! so every read path that hands bytes to a user goes through it.

mod backup;
mod collect;
mod epoch;
mod file;
mod pointer;
mod read;
mod store;
#[cfg(test)]
mod tests;

use bytes::Bytes;

pub(crate) use collect::RecordInfo;
pub(crate) use epoch::ValuePin;
pub(crate) use file::record_len;
pub(crate) use pointer::ValuePointer;
pub(crate) use store::{PendingWrite, ValueStore};

/// Directory of the value files, under the database directory.
pub(crate) const VALUES_DIR: &str = "values";

/// A stored value: what a put holds in the WAL, the MemTables and the
/// tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    /// The user's bytes.
    Inline(Bytes),
    /// An encoded [`ValuePointer`] to the record that holds them.
    Pointer(Bytes),
}

/// The user's bytes, stored in place.
impl From<Bytes> for Value {
    fn from(bytes: Bytes) -> Self {
        Value::Inline(bytes)
    }
}

impl Value {
    /// The bytes as stored: the value, or the encoded pointer.
    #[inline]
    pub(crate) fn stored(&self) -> &Bytes {
        match self {
            Value::Inline(b) | Value::Pointer(b) => b,
        }
    }

    /// Length of `stored`: what the value takes in pages and buffers.
    #[inline]
    pub(crate) fn stored_len(&self) -> usize {
        self.stored().len()
    }

    #[inline]
    pub(crate) fn is_pointer(&self) -> bool {
        matches!(self, Value::Pointer(_))
    }

    /// A value of this kind: a pointer when `pointer`.
    #[inline]
    pub(crate) fn of_kind(pointer: bool, bytes: Bytes) -> Value {
        if pointer {
            Value::Pointer(bytes)
        } else {
            Value::Inline(bytes)
        }
    }
}
