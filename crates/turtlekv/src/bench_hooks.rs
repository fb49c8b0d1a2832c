//! Entry points for the micro-benchmarks in `turtlekv-bench`. **Not a
//! stable API**: behind the `sim` feature, and only here so that benchmarks
//! reach structures that are otherwise private.

use bytes::Bytes;

use crate::memtable::{BTreeMemTable, MemTable, SkipListMemTable};

/// Which MemTable structure a benchmark times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemTableKind {
    /// The database's (`memtable/btree.rs`).
    BTree,
    /// The baseline (`memtable/skiplist.rs`).
    SkipList,
}

/// Keys and a value for [`memtable_fill`], made once outside the timing.
#[derive(Debug)]
pub struct MemTableInput {
    keys: Vec<Bytes>,
    value: Bytes,
    capacity_bytes: u64,
}

impl MemTableInput {
    /// `entries` distinct 8-byte keys in a random order (a fixed xorshift
    /// stream from `seed`), as the YCSB load inserts them, and one value of
    /// `value_bytes`. The MemTable is sized for all of them.
    pub fn random(entries: usize, value_bytes: usize, seed: u64) -> Self {
        let mut state = seed | 1;
        let keys = (0..entries)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                Bytes::copy_from_slice(&state.to_be_bytes())
            })
            .collect();
        MemTableInput {
            keys,
            value: Bytes::from(vec![7u8; value_bytes]),
            capacity_bytes: (entries * (value_bytes + 64)) as u64,
        }
    }
}

/// Inserts every key of `input` into a new MemTable of `kind`, one version
/// each; returns how many entries it holds.
pub fn memtable_fill(input: &MemTableInput, kind: MemTableKind) -> usize {
    filled(input, kind).len()
}

fn filled(input: &MemTableInput, kind: MemTableKind) -> Box<dyn MemTable> {
    let table: Box<dyn MemTable> = match kind {
        MemTableKind::BTree => Box::new(BTreeMemTable::with_capacity(input.capacity_bytes)),
        MemTableKind::SkipList => Box::new(SkipListMemTable::with_capacity(input.capacity_bytes)),
    };
    for (seq, key) in (1..).zip(&input.keys) {
        table.insert(
            key.clone(),
            seq,
            Some(crate::values::Value::Inline(input.value.clone())),
        );
    }
    table
}

/// A MemTable filled with every key of an input, for timing gets.
#[derive(Debug)]
pub struct FilledMemTable {
    table: Box<dyn MemTable>,
    keys: Vec<Bytes>,
}

impl FilledMemTable {
    pub fn new(input: &MemTableInput, kind: MemTableKind) -> Self {
        FilledMemTable {
            table: filled(input, kind),
            keys: input.keys.clone(),
        }
    }
}

/// Gets every key of `filled`, in the order they were inserted, and
/// returns how many were found.
pub fn memtable_get_all(filled: &FilledMemTable) -> usize {
    filled
        .keys
        .iter()
        .filter(|k| filled.table.get(k, u64::MAX).is_some())
        .count()
}
