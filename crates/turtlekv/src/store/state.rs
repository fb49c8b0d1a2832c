//! The read-side view of the engine: which MemTables and which tree version
//! hold the data, swapped atomically as a whole.

use std::sync::Arc;

use bytes::Bytes;

use super::TreeVersion;
use crate::Result;
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
    /// The value of `key` as of sequence number `seq`, and whether it was
    /// read from the tree (rather than a MemTable, or deleted by a range
    /// tombstone).
    pub fn get(&self, key: &[u8], seq: u64) -> Result<(Option<Bytes>, bool)> {
        let ranges = self.holds_range_tombstones();
        for (source, memtable) in self.memtables().enumerate() {
            if let Some(found) = memtable.get(key, seq) {
                if ranges && found.is_some() && self.is_range_deleted(key, seq, source) {
                    return Ok((None, false));
                }
                return Ok((found, false));
            }
        }
        if ranges && self.range_deleted_seq(key, seq).is_some() {
            return Ok((None, false));
        }
        match &self.tree {
            Some(tree) => Ok((tree.get(key)?, true)),
            None => Ok((None, false)),
        }
    }

    /// Whether any MemTable holds a range tombstone (cheap: one load per
    /// MemTable). A reader that finds none skips every range check; the
    /// active MemTable may get one later, numbered above the reader's view.
    pub fn holds_range_tombstones(&self) -> bool {
        self.memtables().any(|m| !m.range_tombstones().is_empty())
    }

    /// The sequence number of the newest range tombstone at or below
    /// `seq` that covers `key`, in any MemTable.
    pub fn range_deleted_seq(&self, key: &[u8], seq: u64) -> Option<u64> {
        self.memtables()
            .filter_map(|m| m.range_tombstones().covering_seq(key, seq))
            .max()
    }

    /// Whether the version of `key` that source `source` gives a reader at
    /// `seq` is deleted by a range tombstone numbered above it. Sources are
    /// numbered as `memtables` yields them, the tree last; every version in
    /// the tree is older than every range tombstone in a MemTable.
    pub fn is_range_deleted(&self, key: &[u8], seq: u64, source: usize) -> bool {
        let Some(range_seq) = self.range_deleted_seq(key, seq) else {
            return false;
        };
        match self.memtables().nth(source) {
            Some(memtable) => memtable
                .visible_seq(key, seq)
                .is_some_and(|version| version < range_seq),
            None => true,
        }
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
