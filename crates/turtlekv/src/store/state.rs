//! The read-side view of the engine: which MemTables and which tree version
//! hold the data, swapped atomically as a whole.

use std::sync::Arc;

use super::TreeVersion;
use crate::memtable::MemTable;
use crate::values::Value;
use crate::values::ValuePin;
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
    /// The newest version of `key` as of sequence number `seq` above the
    /// tree: `Some(None)` for a tombstone or a version a range tombstone
    /// deletes, `None` when the tree answers.
    pub fn memtable_get(&self, key: &[u8], seq: u64) -> Option<Option<Value>> {
        let ranges = self.holds_range_tombstones();
        for (source, memtable) in self.memtables().enumerate() {
            if let Some(found) = memtable.get(key, seq) {
                if ranges && found.is_some() && self.is_range_deleted(key, seq, source) {
                    return Some(None);
                }
                return Some(found);
            }
        }
        if ranges && self.range_deleted_seq(key, seq).is_some() {
            return Some(None);
        }
        None
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
    /// Keeps the value files the view's pointers name.
    pub _values: ValuePin,
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::memtable::BTreeMemTable;

    fn b(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    fn v(s: &'static str) -> crate::values::Value {
        crate::values::Value::Inline(b(s))
    }

    /// An older MemTable (frozen) and a newer one, each with versions and
    /// range tombstones numbered around each other's.
    fn two_memtables() -> State {
        let older = BTreeMemTable::with_capacity(1 << 16);
        older.insert(b("a"), 1, Some(v("a1")));
        older.insert(b("b"), 2, Some(v("b2")));
        older.delete_range(b("a"), b("b"), 3);
        older.insert(b("c"), 4, Some(v("c4")));
        let newer = BTreeMemTable::with_capacity(1 << 16);
        newer.insert(b("d"), 5, Some(v("d5")));
        newer.delete_range(b("b"), b("e"), 6);
        newer.insert(b("c"), 7, Some(v("c7")));
        let frozen = Frozen {
            memtable: Arc::new(older),
            last_seq: 4,
            wal_replay_from: WalPosition::default(),
            distance_bytes: 1 << 16,
        };
        State {
            active: Arc::new(newer),
            frozen: vec![Arc::new(frozen)],
            tree: None,
        }
    }

    #[test]
    fn a_version_is_deleted_only_by_a_newer_visible_range_tombstone() {
        let state = two_memtables();
        let get = |key: &[u8], seq| state.memtable_get(key, seq).flatten();
        assert_eq!(get(b"a", 2), Some(v("a1")));
        assert_eq!(get(b"a", 3), None);
        assert_eq!(get(b"b", 5), Some(v("b2")), "the end is excluded");
        assert_eq!(get(b"b", 6), None, "a newer MemTable's tombstone");
        assert_eq!(get(b"c", 5), Some(v("c4")));
        assert_eq!(get(b"c", 6), None);
        assert_eq!(get(b"c", 7), Some(v("c7")), "written after the deletion");
        assert_eq!(get(b"d", 6), None, "its own MemTable's older version");
        assert!(state.holds_range_tombstones());
        assert_eq!(state.range_deleted_seq(b"c", u64::MAX), Some(6));
        // Sources: 0 the newer MemTable, 1 the older, 2 the tree.
        assert!(!state.is_range_deleted(b"c", 7, 0));
        assert!(state.is_range_deleted(b"c", 7, 1));
        assert!(
            !state.is_range_deleted(b"z", u64::MAX, 2),
            "no tombstone covers it"
        );
        assert!(state.is_range_deleted(b"a", 3, 2));
    }
}
