//! A transaction's scans: its snapshot merged with its own buffered
//! writes, which win over the snapshot's versions of the same keys.

use std::ops::Bound;

use bytes::Bytes;

use super::check::ReadRange;
use super::transaction::Transaction;
use crate::db::iter::Iter;
use crate::db::keyspace::Tag;
use crate::{Error, Result};

/// Iterator over `(key, value)` pairs as a transaction sees them, from
/// [`Transaction::range`] and its twins. It yields keys in ascending
/// order. When it is dropped, the range from its start up to the last key
/// it returned (all of it, if it ran to the end) counts as read for the
/// commit's conflict check.
#[derive(Debug)]
pub struct TransactionIter<'t> {
    txn: &'t Transaction,
    snapshot: Iter,
    /// The snapshot's next pair, taken to compare with the writes'.
    peeked: Option<(Bytes, Bytes)>,
    snapshot_done: bool,
    /// The transaction's writes within the range (user keys), in order.
    own: Vec<(Bytes, Option<Bytes>)>,
    next_own: usize,
    tag: Tag,
    /// The range asked for, as stored keys.
    stored: ReadRange,
    /// The last key returned (a user key).
    last: Option<Bytes>,
    finished: bool,
    failed: Option<Error>,
}

impl<'t> TransactionIter<'t> {
    pub(super) fn new(
        txn: &'t Transaction,
        snapshot: Iter,
        own: Vec<(Bytes, Option<Bytes>)>,
        tag: Tag,
        stored: ReadRange,
    ) -> Self {
        TransactionIter {
            txn,
            snapshot,
            peeked: None,
            snapshot_done: false,
            own,
            next_own: 0,
            tag,
            stored,
            last: None,
            finished: false,
            failed: None,
        }
    }

    /// An iterator that yields only `error`.
    pub(super) fn failing(txn: &'t Transaction, error: Error) -> Self {
        let empty = (Bound::Included(Bytes::new()), Bound::Excluded(Bytes::new()));
        let snapshot = Iter::failing(txn.inner().clone(), txn.view().clone(), Error::EmptyKey);
        let mut iter = TransactionIter::new(txn, snapshot, Vec::new(), Tag::BARE, empty);
        iter.failed = Some(error);
        iter.finished = true;
        iter.snapshot_done = true;
        iter
    }

    fn step(&mut self) -> Result<Option<(Bytes, Bytes)>> {
        loop {
            if self.peeked.is_none() && !self.snapshot_done {
                match self.snapshot.next().transpose()? {
                    Some(pair) => self.peeked = Some(pair),
                    None => self.snapshot_done = true,
                }
            }
            let own = self.own.get(self.next_own);
            let order = match (own, &self.peeked) {
                (None, None) => return Ok(None),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some((own_key, _)), Some((key, _))) => own_key.cmp(key),
            };
            if order.is_eq() {
                // The transaction's own version wins.
                self.peeked = None;
            }
            let take_own = order.is_le();
            if !take_own {
                return Ok(self.peeked.take());
            }
            let (key, value) = self.own[self.next_own].clone();
            self.next_own += 1;
            if let Some(value) = value {
                return Ok(Some((key, value)));
            }
        }
    }
}

impl Iterator for TransactionIter<'_> {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        if self.finished {
            return None;
        }
        match self.step() {
            Ok(Some((key, value))) => {
                self.last = Some(key.clone());
                Some(Ok((key, value)))
            }
            Ok(None) => {
                self.finished = true;
                None
            }
            Err(e) => {
                self.finished = true;
                Some(Err(e))
            }
        }
    }
}

impl Drop for TransactionIter<'_> {
    /// Records what was read: all of the range once the end was reached,
    /// else up to the last key returned.
    fn drop(&mut self) {
        let upper = if self.finished && self.snapshot_done {
            self.stored.1.clone()
        } else {
            match &self.last {
                Some(last) => Bound::Included(self.tag.stored_key(last)),
                None => return,
            }
        };
        self.txn.record_range((self.stored.0.clone(), upper));
    }
}
