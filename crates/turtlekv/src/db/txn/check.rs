//! The commit-time check of an optimistic transaction, run by the group
//! commit's leader in its serial turn, so that no write can come between
//! the check and the transaction's own.
//!
//! A key counts as changed when the MemTables hold a version of it newer
//! than the snapshot (one lookup per key: the newest MemTable holding the
//! key has its newest version); a range when any MemTable's view of it
//! differs between the snapshot and now. Keys the MemTables do not hold
//! did not change, as long as every write since the snapshot is still in
//! a MemTable: once a checkpoint has moved some of them into the tree
//! (its covered sequence number passed the snapshot), the check cannot
//! tell and reports a conflict.

use std::collections::HashSet;
use std::ops::Bound;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::batch::BatchOp;
use crate::key::compare_keys;
use crate::memtable::{Direction, InsertHint, MemTable, Versioned};
use crate::store::State;

/// Entries compared per step of a range check.
const RANGE_CHUNK_ENTRIES: usize = 256;

/// A stored-key range a transaction read.
pub(crate) type ReadRange = (Bound<Bytes>, Bound<Bytes>);

/// What a committing transaction read and wrote, and the verdict.
#[derive(Debug)]
pub(crate) struct TxnCheck {
    /// The sequence number of the transaction's snapshot.
    pub snapshot_seq: u64,
    /// Stored keys read (those written are the batch's).
    pub keys: Vec<Bytes>,
    /// Stored-key ranges read.
    pub ranges: Vec<ReadRange>,
    /// Why the leader refused the commit, if it did.
    pub conflict: Mutex<Option<String>>,
}

/// Stored keys and ranges that earlier requests of the same group write
/// or delete: they are in no MemTable yet when a later request is checked.
#[derive(Debug, Default)]
pub(crate) struct GroupWrites {
    keys: HashSet<Bytes>,
    /// Range deletions, as `start..end`.
    ranges: Vec<ReadRange>,
}

impl GroupWrites {
    pub fn add(&mut self, op: &BatchOp) {
        match &op.end {
            Some(end) => self.ranges.push((
                Bound::Included(op.key.clone()),
                Bound::Excluded(end.clone()),
            )),
            None => {
                self.keys.insert(op.key.clone());
            }
        }
    }

    fn touches(&self, check: &TxnCheck, written: &[BatchOp]) -> bool {
        if self.keys.is_empty() && self.ranges.is_empty() {
            return false;
        }
        let deleted = |k: &[u8]| self.ranges.iter().any(|r| in_range(k, r));
        let touched = |k: &Bytes| self.keys.contains(k) || deleted(k);
        check.keys.iter().any(touched)
            || written.iter().any(|op| touched(&op.key))
            || self
                .keys
                .iter()
                .any(|k| check.ranges.iter().any(|r| in_range(k, r)))
            || self
                .ranges
                .iter()
                .any(|d| check.ranges.iter().any(|r| ranges_meet(d, r)))
    }
}

impl TxnCheck {
    /// Checks against `state` (the newest, holding every write up to
    /// `now_seq`) and the group's earlier writes; records and returns
    /// whether the commit may go on.
    pub fn passes(
        &self,
        state: &State,
        now_seq: u64,
        group: &GroupWrites,
        written: Written<'_>,
    ) -> bool {
        let verdict = self.find_conflict(state, now_seq, group, written);
        let passed = verdict.is_none();
        *self.conflict.lock() = verdict;
        passed
    }

    fn find_conflict(
        &self,
        state: &State,
        now_seq: u64,
        group: &GroupWrites,
        written: Written<'_>,
    ) -> Option<String> {
        let covered = state.tree.as_ref().map_or(0, |t| t.covered_seq());
        if covered > self.snapshot_seq {
            return Some(format!(
                "a checkpoint moved writes up to sequence number {covered} into the tree since \
                 the snapshot at {}, so changes to the keys read cannot be ruled out",
                self.snapshot_seq
            ));
        }
        if group.touches(self, written.ops) {
            return Some("a key read or written was written in the same commit group".into());
        }
        let snapshot_seq = self.snapshot_seq;
        let after_snapshot = |seq: Option<u64>| seq.is_some_and(|seq| seq > snapshot_seq);
        let read = self
            .keys
            .iter()
            .find(|k| after_snapshot(newest_seq(state, k)));
        let written_since = || {
            let mut ops = written.ops.iter().enumerate();
            ops.find(|(i, op)| after_snapshot(written.newest_seq(state, *i, &op.key)))
                .map(|(_, op)| &op.key)
        };
        if let Some(key) = read.or_else(written_since) {
            return Some(format!("key {key:?} was written since the snapshot"));
        }
        if let Some(why) = self.range_deleted_since(state, now_seq, written.ops) {
            return Some(why);
        }
        let changed_range = self.ranges.iter().find(|range| {
            state
                .memtables()
                .any(|m| range_changed(&**m, range, snapshot_seq, now_seq))
        });
        changed_range.map(|_| "a key in a range read changed since the snapshot".into())
    }
}

impl TxnCheck {
    /// Why the commit conflicts with a range deletion numbered after the
    /// snapshot (at or below `now_seq`), if it does: one covers a key read
    /// or written, or meets a range read.
    fn range_deleted_since(
        &self,
        state: &State,
        now_seq: u64,
        written: &[BatchOp],
    ) -> Option<String> {
        if !state.holds_range_tombstones() {
            return None;
        }
        let since = (self.snapshot_seq, now_seq);
        let meets = |lower: Bound<&[u8]>, upper: Bound<&[u8]>| {
            state
                .memtables()
                .any(|m| m.range_tombstones().any_between(since, lower, upper))
        };
        let point = |k: &Bytes| meets(Bound::Included(k), Bound::Included(k));
        let keys = self.keys.iter().chain(written.iter().map(|op| &op.key));
        if let Some(key) = keys.into_iter().find(|k| point(k)) {
            return Some(format!(
                "key {key:?} was deleted by a range deletion since the snapshot"
            ));
        }
        self.ranges
            .iter()
            .any(|r| meets(as_ref(&r.0), as_ref(&r.1)))
            .then(|| "a range read meets a range deletion since the snapshot".into())
    }
}

/// A transaction's batch, with the insert hints its writer prepared.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Written<'a> {
    pub ops: &'a [BatchOp],
    /// One per op, when prepared (`PreparedInserts`).
    pub hints: Option<&'a [InsertHint]>,
}

impl Written<'_> {
    /// `newest_seq` of op `i`'s key: from its hint when the active
    /// MemTable can still answer from it (the search it saves is most of
    /// a small transaction's check), else by lookups.
    fn newest_seq(&self, state: &State, i: usize, key: &[u8]) -> Option<u64> {
        let hint = self.hints.and_then(|hints| hints.get(i));
        match hint.and_then(|h| state.active.newest_seq_hinted(key, h)) {
            Some(Some(seq)) => Some(seq),
            Some(None) => state.frozen.iter().find_map(|f| f.memtable.newest_seq(key)),
            None => newest_seq(state, key),
        }
    }
}

/// Sequence number of the newest version of `key` in the MemTables: the
/// newest MemTable that holds the key holds it.
fn newest_seq(state: &State, key: &[u8]) -> Option<u64> {
    state.memtables().find_map(|m| m.newest_seq(key))
}

/// Whether `memtable`'s newest versions in `range` differ between the two
/// sequence numbers.
fn range_changed(memtable: &dyn MemTable, range: &ReadRange, old_seq: u64, new_seq: u64) -> bool {
    let mut lower = range.0.clone();
    let (mut old, mut new): (Vec<Versioned>, Vec<Versioned>) = (Vec::new(), Vec::new());
    loop {
        old.clear();
        new.clear();
        let bounds = (as_ref(&lower), as_ref(&range.1));
        let fwd = Direction::Forward;
        memtable.scan(
            bounds.0,
            bounds.1,
            old_seq,
            fwd,
            RANGE_CHUNK_ENTRIES,
            &mut old,
        );
        memtable.scan(
            bounds.0,
            bounds.1,
            new_seq,
            fwd,
            RANGE_CHUNK_ENTRIES,
            &mut new,
        );
        if old != new {
            return true;
        }
        match new.last() {
            Some((last, _)) if new.len() == RANGE_CHUNK_ENTRIES => {
                lower = Bound::Excluded(last.clone());
            }
            _ => return false,
        }
    }
}

fn as_ref(bound: &Bound<Bytes>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether `key` lies in `range`.
pub(crate) fn in_range(key: &[u8], range: &ReadRange) -> bool {
    let above = match &range.0 {
        Bound::Included(l) => compare_keys(key, l).is_ge(),
        Bound::Excluded(l) => compare_keys(key, l).is_gt(),
        Bound::Unbounded => true,
    };
    let below = match &range.1 {
        Bound::Included(u) => compare_keys(key, u).is_le(),
        Bound::Excluded(u) => compare_keys(key, u).is_lt(),
        Bound::Unbounded => true,
    };
    above && below
}

/// Whether two key ranges share a key (conservatively: bounds that touch
/// without an excluded end count as meeting).
fn ranges_meet(a: &ReadRange, b: &ReadRange) -> bool {
    let starts_below_end = |start: &Bound<Bytes>, end: &Bound<Bytes>| match (start, end) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
        (Bound::Included(s), Bound::Included(e)) => s <= e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e)) => s < e,
    };
    starts_below_end(&a.0, &b.1) && starts_below_end(&b.0, &a.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    fn check(keys: &[&'static str], ranges: Vec<ReadRange>) -> TxnCheck {
        TxnCheck {
            snapshot_seq: 0,
            keys: keys.iter().map(|k| b(k)).collect(),
            ranges,
            conflict: Mutex::new(None),
        }
    }

    #[test]
    fn an_earlier_range_deletion_of_the_group_touches_what_it_covers() {
        let mut group = GroupWrites::default();
        group.add(&BatchOp::stored_range(b("b"), b("d")));
        assert!(group.touches(&check(&["c"], vec![]), &[]));
        assert!(!group.touches(&check(&["d", "a"], vec![]), &[]));
        let written = [BatchOp::stored(
            b("b"),
            Some(crate::values::Value::Inline(b("v"))),
        )];
        assert!(group.touches(&check(&[], vec![]), &written));
        let above = (Bound::Included(b("d")), Bound::Unbounded);
        assert!(!group.touches(&check(&[], vec![above]), &[]));
        let meets = (Bound::Excluded(b("a")), Bound::Included(b("b")));
        assert!(group.touches(&check(&[], vec![meets]), &[]));
    }

    #[test]
    fn ranges_meet_when_they_share_a_key() {
        let r = |lo: Bound<Bytes>, hi: Bound<Bytes>| (lo, hi);
        let (inc, exc) = (Bound::Included, Bound::Excluded);
        assert!(ranges_meet(
            &r(inc(b("a")), exc(b("c"))),
            &r(inc(b("b")), exc(b("z")))
        ));
        assert!(!ranges_meet(
            &r(inc(b("a")), exc(b("c"))),
            &r(inc(b("c")), exc(b("z")))
        ));
        assert!(ranges_meet(
            &r(inc(b("a")), inc(b("c"))),
            &r(inc(b("c")), exc(b("z")))
        ));
        assert!(ranges_meet(
            &r(Bound::Unbounded, exc(b("b"))),
            &r(exc(b("a")), Bound::Unbounded)
        ));
        assert!(!ranges_meet(
            &r(inc(b("x")), Bound::Unbounded),
            &r(Bound::Unbounded, exc(b("x")))
        ));
    }
}
