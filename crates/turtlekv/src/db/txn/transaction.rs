//! Optimistic transactions: reads from a snapshot plus the transaction's
//! own writes, writes buffered until `commit`, which the group commit's
//! leader checks for conflicts in its serial turn (`check.rs`).

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use super::check::{ReadRange, TxnCheck};
use super::iter::TransactionIter;
use crate::db::Db;
use crate::db::iter::{owned_bounds, prefix_bounds};
use crate::db::keyspace::{self, Keyspace, KeyspaceCore};
use crate::store::ReadView;
use crate::{Error, Result, WriteBatch, WriteOptions};

/// A transaction, from [`Db::transaction`]: reads see the database as of
/// its start plus its own writes; writes are buffered and applied
/// atomically by [`Transaction::commit`], which fails with
/// [`Error::Conflict`] (writing nothing) if a key the transaction read or
/// wrote, or a key in a range it read, changed after its start.
///
/// Dropping a transaction without committing discards its writes.
#[derive(Debug)]
pub struct Transaction {
    db: Db,
    view: ReadView,
    /// The buffered writes, as the batch the commit writes (a later op
    /// on a key wins)...
    batch: WriteBatch,
    /// ...and where each stored key's newest op is in it.
    writes: BTreeMap<Bytes, usize>,
    /// What was read, for the commit's check; iterators add to it as they
    /// go, through a shared reference.
    reads: Mutex<ReadSet>,
}

#[derive(Debug, Default)]
pub(super) struct ReadSet {
    keys: Vec<Bytes>,
    ranges: Vec<ReadRange>,
}

impl Transaction {
    pub(crate) fn new(db: Db) -> Self {
        let view = db.inner.versions.read_view();
        Transaction {
            db,
            view,
            batch: WriteBatch::new(),
            writes: BTreeMap::new(),
            reads: Mutex::new(ReadSet::default()),
        }
    }

    /// The value of `key` in the default keyspace: the transaction's own
    /// write of it if any, else its value at the transaction's start.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.get_from(&self.db.inner.keyspaces.default, key.as_ref())
    }

    /// The value of `key` in `keyspace`, as [`Transaction::get`].
    pub fn get_in(&self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.check_owner(keyspace)?;
        self.get_from(keyspace.core(), key.as_ref())
    }

    /// Iterates over a key range of the default keyspace as the
    /// transaction sees it (forward). The range up to where the iteration
    /// stopped counts as read.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> TransactionIter<'_> {
        let (lower, upper) = owned_bounds(&range);
        let default = self.db.inner.keyspaces.default.clone();
        self.iter(&default, lower, upper)
    }

    /// Iterates over a key range of `keyspace` as the transaction sees it.
    pub fn range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        keyspace: &Keyspace,
        range: R,
    ) -> TransactionIter<'_> {
        let (lower, upper) = owned_bounds(&range);
        match self.check_owner(keyspace) {
            Ok(()) => self.iter(keyspace.core(), lower, upper),
            Err(e) => TransactionIter::failing(self, e),
        }
    }

    /// Iterates over the keys of the default keyspace starting with `prefix`.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> TransactionIter<'_> {
        let (lower, upper) = prefix_bounds(prefix.as_ref());
        let default = self.db.inner.keyspaces.default.clone();
        self.iter(&default, lower, upper)
    }

    /// Iterates over the keys of `keyspace` starting with `prefix`.
    pub fn prefix_in(&self, keyspace: &Keyspace, prefix: impl AsRef<[u8]>) -> TransactionIter<'_> {
        let (lower, upper) = prefix_bounds(prefix.as_ref());
        match self.check_owner(keyspace) {
            Ok(()) => self.iter(keyspace.core(), lower, upper),
            Err(e) => TransactionIter::failing(self, e),
        }
    }

    /// Buffers a put of `key` → `value` in the default keyspace.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        let default = self.db.inner.keyspaces.default.clone();
        self.buffer(&default, key.as_ref(), Some(value.as_ref()));
    }

    /// Buffers a delete of `key` in the default keyspace.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        let default = self.db.inner.keyspaces.default.clone();
        self.buffer(&default, key.as_ref(), None);
    }

    /// Buffers a put of `key` → `value` in `keyspace`.
    pub fn put_in(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.batch.note_keyspace(keyspace);
        self.buffer(keyspace.core(), key.as_ref(), Some(value.as_ref()));
    }

    /// Buffers a delete of `key` in `keyspace`.
    pub fn delete_in(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>) {
        self.batch.note_keyspace(keyspace);
        self.buffer(keyspace.core(), key.as_ref(), None);
    }

    /// Sequence number of the newest write the transaction's reads see.
    pub fn sequence(&self) -> u64 {
        self.view.seq
    }

    /// Applies the buffered writes atomically, unless a key the
    /// transaction read or wrote (or a key in a range it read) changed
    /// since its start: then nothing is written and the error is
    /// [`Error::Conflict`], after which a retry (a new transaction) may
    /// succeed. A commit also reports a conflict when a checkpoint
    /// finished after the transaction started and the transaction read or
    /// wrote anything: the check compares the MemTables, which then no
    /// longer hold every write since the start. A transaction that wrote
    /// nothing commits without a check: its reads were of one point in
    /// time. Invalid entries fail as [`Db::write`] fails them.
    pub fn commit(self, options: &WriteOptions) -> Result<()> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let reads = self.reads.into_inner();
        let check = Arc::new(TxnCheck {
            snapshot_seq: self.view.seq,
            keys: reads.keys,
            ranges: reads.ranges,
            conflict: Mutex::new(None),
        });
        self.db
            .write_checked(self.batch, options, Some(check.clone()))?;
        match check.conflict.lock().take() {
            Some(reason) => Err(Error::Conflict(reason)),
            None => Ok(()),
        }
    }

    fn get_from(&self, core: &KeyspaceCore, key: &[u8]) -> Result<Option<Bytes>> {
        core.check_live()?;
        let stored = core.tag.stored_key(key);
        if let Some(&op) = self.writes.get(&stored) {
            crate::options::validate_entry(key, None)?;
            return Ok(self.batch.ops[op].buffered_value());
        }
        let value = keyspace::get_at(&self.db.inner, &self.view, core, key)?;
        self.reads.lock().keys.push(stored);
        Ok(value)
    }

    fn iter(
        &self,
        core: &Arc<KeyspaceCore>,
        lower: Bound<Bytes>,
        upper: Bound<Bytes>,
    ) -> TransactionIter<'_> {
        let (stored_lower, stored_upper) = core.tag.bounds(lower.clone(), upper.clone());
        let own: Vec<(Bytes, Option<Bytes>)> = self
            .writes
            .range((stored_lower.clone(), stored_upper.clone()))
            .map(|(k, &op)| {
                (
                    k.slice(core.tag.len()..),
                    self.batch.ops[op].buffered_value(),
                )
            })
            .collect();
        let snapshot = keyspace::range_in(&self.db.inner, self.view.clone(), core, (lower, upper));
        TransactionIter::new(self, snapshot, own, core.tag, (stored_lower, stored_upper))
    }

    pub(super) fn inner(&self) -> &Arc<crate::db::DbInner> {
        &self.db.inner
    }

    pub(super) fn view(&self) -> &ReadView {
        &self.view
    }

    /// Notes that an iterator read `range` (stored keys).
    pub(super) fn record_range(&self, range: ReadRange) {
        self.reads.lock().ranges.push(range);
    }

    fn buffer(&mut self, core: &KeyspaceCore, key: &[u8], value: Option<&[u8]>) {
        let stored = self.batch.push_behind(core.tag, key, value);
        self.writes.insert(stored, self.batch.ops.len() - 1);
    }

    fn check_owner(&self, keyspace: &Keyspace) -> Result<()> {
        if !keyspace.belongs_to(&self.db.inner) {
            return Err(Error::ForeignKeyspace(keyspace.name().to_vec()));
        }
        Ok(())
    }
}
