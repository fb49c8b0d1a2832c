//! The read-side view of the engine: which MemTables (and, later, which
//! tree root) hold the data, swapped atomically as a whole.

use std::sync::Arc;

use bytes::Bytes;

use crate::memtable::MemTable;

/// Where data lives at one moment. Only the active MemTable changes in
/// place; everything else is replaced by publishing a new `State`.
#[derive(Debug)]
pub(crate) struct State {
    pub active: Arc<dyn MemTable>,
    /// MemTables that take no more writes, newest first.
    pub frozen: Vec<Arc<dyn MemTable>>,
}

impl State {
    /// The value of `key` as of sequence number `seq`.
    pub fn get(&self, key: &[u8], seq: u64) -> Option<Bytes> {
        self.memtables().find_map(|m| m.get(key, seq)).flatten()
    }

    /// MemTables newest first: a key's first hit is its newest version.
    pub fn memtables(&self) -> impl Iterator<Item = &Arc<dyn MemTable>> {
        std::iter::once(&self.active).chain(&self.frozen)
    }
}

/// A consistent read point: a State and a sequence number that was visible
/// while that State was current.
#[derive(Debug, Clone)]
pub(crate) struct ReadView {
    pub state: Arc<State>,
    pub seq: u64,
}

impl ReadView {
    /// The value of `key` at this read point.
    pub fn get(&self, key: &[u8]) -> Option<Bytes> {
        self.state.get(key, self.seq)
    }
}
