//! The read-side view of the engine: which MemTables and which tree version
//! hold the data, swapped atomically as a whole.

use std::sync::Arc;

use bytes::Bytes;

use super::TreeVersion;
use crate::memtable::MemTable;
use crate::wal::WalPosition;

/// A MemTable that takes no more writes, waiting for its checkpoint.
#[derive(Debug)]
pub(crate) struct Frozen {
    pub memtable: Arc<dyn MemTable>,
    /// Highest sequence number in it (and in every older MemTable).
    pub last_seq: u64,
    /// Where the records of the MemTables after it start in the WAL.
    pub wal_replay_from: WalPosition,
    /// The checkpoint distance in force when it was frozen: what a full
    /// MemTable held then, which caps its checkpoint's reserve.
    pub distance_bytes: u64,
}

/// Where data lives at one moment. Only the active MemTable changes in
/// place; everything else is replaced by publishing a new `State`.
#[derive(Debug)]
pub(crate) struct State {
    pub active: Arc<dyn MemTable>,
    /// Frozen MemTables, newest first.
    pub frozen: Vec<Arc<Frozen>>,
    /// The newest checkpoint, below every MemTable; `None` before the first.
    pub tree: Option<Arc<dyn TreeVersion>>,
}

impl State {
    /// The newest version of `key` as of sequence number `seq` in the
    /// MemTables: `Some(None)` for a tombstone, `None` when no MemTable
    /// holds the key (the tree then answers).
    pub fn memtable_get(&self, key: &[u8], seq: u64) -> Option<Option<Bytes>> {
        self.memtables().find_map(|m| m.get(key, seq))
    }

    /// MemTables newest first: a key's first hit is its newest version.
    pub fn memtables(&self) -> impl Iterator<Item = &Arc<dyn MemTable>> {
        std::iter::once(&self.active).chain(self.frozen.iter().map(|f| &f.memtable))
    }
}

/// A consistent read point: a State and a sequence number that was visible
/// while that State was current. Every write in the State's tree has a
/// lower number (its MemTable was frozen before the number was visible).
#[derive(Debug, Clone)]
pub(crate) struct ReadView {
    pub state: Arc<State>,
    pub seq: u64,
}
