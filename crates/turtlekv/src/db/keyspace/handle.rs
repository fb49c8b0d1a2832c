//! The public handle of a named keyspace, and the reads and writes it
//! shares with `Db` (whose own keyspace is the default one).

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bytes::Bytes;

use super::core::KeyspaceCore;
use super::tag::Tag;
use crate::db::iter::{Iter, owned_bounds, prefix_bounds};
use crate::db::{Db, DbInner};
use crate::memtable::Direction;
use crate::options::validate_entry;
use crate::stats::bump;
use crate::store::ReadView;
use crate::{Result, WriteBatch, WriteOptions};

/// A named keyspace of a database, from [`Db::keyspace`]: its own key
/// space with the same reads and writes as `Db`, sharing the database's
/// WAL, memory budget and checkpoints. Cheap to clone and share between
/// threads; it keeps the database open as a `Db` handle does.
///
/// After [`Db::drop_keyspace`], every call on any handle of the keyspace
/// returns [`crate::Error::KeyspaceDropped`].
#[derive(Debug, Clone)]
pub struct Keyspace {
    db: Db,
    core: Arc<KeyspaceCore>,
}

/// Operations on one keyspace since the database was opened, from
/// [`Keyspace::stats`] and in [`crate::Stats::keyspaces`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyspaceStats {
    /// The keyspace's name (empty for the default keyspace).
    pub name: Vec<u8>,
    /// Put entries committed (each entry of a batch counts).
    pub puts: u64,
    /// Delete entries committed.
    pub deletes: u64,
    /// Point lookups served.
    pub gets: u64,
    /// Range and prefix scans started.
    pub scans: u64,
}

impl KeyspaceStats {
    pub(crate) fn of(core: &KeyspaceCore) -> Self {
        let c = &core.counts;
        KeyspaceStats {
            name: core.name.to_vec(),
            puts: c.puts.load(),
            deletes: c.deletes.load(),
            gets: c.gets.load(),
            scans: c.scans.load(),
        }
    }
}

impl Keyspace {
    pub(crate) fn new(db: Db, core: Arc<KeyspaceCore>) -> Self {
        Keyspace { db, core }
    }

    /// The keyspace's name.
    pub fn name(&self) -> &[u8] {
        &self.core.name
    }

    /// The database this keyspace belongs to.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The current value of `key` (see [`Db::get`]).
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        get_latest(&self.db.inner, &self.core, key.as_ref())
    }

    /// Sets `key` to `value` (not synced: see [`WriteOptions`]).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// Sets `key` to `value` with the given durability.
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: &WriteOptions,
    ) -> Result<()> {
        // A dropped keyspace is refused before a large value is written.
        self.core.check_live()?;
        let mut batch = WriteBatch::new();
        batch.note_keyspace(self);
        let entry = (key.as_ref(), value.as_ref());
        self.db.put_behind(batch, self.tag(), entry, options)
    }

    /// Removes `key` (not synced: see [`WriteOptions`]).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// Removes `key` with the given durability.
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, options: &WriteOptions) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_in(self, key);
        self.db.write(batch, options)
    }

    /// Deletes every key `k` of this keyspace with `start <= k < end`
    /// (see [`Db::delete_range`]); keys of other keyspaces are never
    /// touched. Not synced: see [`WriteOptions`].
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.delete_range_opt(start, end, &WriteOptions::default())
    }

    /// [`Keyspace::delete_range`] with the given durability.
    pub fn delete_range_opt(
        &self,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
        options: &WriteOptions,
    ) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range_in(self, start, end);
        self.db.write(batch, options)
    }

    /// Iterates over a key range of this keyspace at the moment of the
    /// call (see [`Db::range`]).
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        let view = self.db.inner.versions.read_view();
        range_in(&self.db.inner, view, &self.core, range)
    }

    /// Iterates over every key of this keyspace that starts with `prefix`.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        let view = self.db.inner.versions.read_view();
        prefix_in(&self.db.inner, view, &self.core, prefix.as_ref())
    }

    /// Iterates over every key of this keyspace at the moment of the call.
    pub fn iter(&self) -> Iter {
        self.range::<&[u8], _>(..)
    }

    /// Whether `key` has a value in this keyspace.
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.get(key)?.is_some())
    }

    /// The values of `keys` in this keyspace, in their order, all read at
    /// one point in time (see [`Db::multi_get`]).
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<Option<Bytes>>> {
        let view = self.db.inner.versions.read_view();
        multi_get_at(&self.db.inner, &view, &self.core, keys)
    }

    /// About how many keys this keyspace holds, cheaply (see
    /// [`Db::approximate_len`]).
    pub fn approximate_len(&self) -> Result<u64> {
        approximate_len(&self.db.inner.versions.read_view(), &self.core)
    }

    /// The pair of this keyspace with the smallest key, if any.
    pub fn first_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        let view = self.db.inner.versions.read_view();
        end_pair(&self.db.inner, view, &self.core, Direction::Forward)
    }

    /// The pair of this keyspace with the largest key, if any.
    pub fn last_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        let view = self.db.inner.versions.read_view();
        end_pair(&self.db.inner, view, &self.core, Direction::Reverse)
    }

    /// This keyspace's operation counts.
    pub fn stats(&self) -> KeyspaceStats {
        KeyspaceStats::of(&self.core)
    }

    pub(crate) fn core(&self) -> &Arc<KeyspaceCore> {
        &self.core
    }

    pub(crate) fn tag(&self) -> Tag {
        self.core.tag
    }

    /// Both handles name the same keyspace of the same open database.
    pub(crate) fn same_as(&self, other: &Keyspace) -> bool {
        Arc::ptr_eq(&self.core, &other.core)
    }

    /// Whether this keyspace belongs to the database of `inner`.
    pub(crate) fn belongs_to(&self, inner: &Arc<DbInner>) -> bool {
        Arc::ptr_eq(&self.db.inner, inner)
    }
}

/// The newest value of `key` in the keyspace `core`.
pub(crate) fn get_latest(
    inner: &DbInner,
    core: &KeyspaceCore,
    key: &[u8],
) -> Result<Option<Bytes>> {
    start_get(inner, core, key)?;
    core.tag
        .with_stored_key(key, |stored| inner.get_latest(stored))
}

/// The value of `key` in the keyspace `core` as `view` sees it.
pub(crate) fn get_at(
    inner: &DbInner,
    view: &ReadView,
    core: &KeyspaceCore,
    key: &[u8],
) -> Result<Option<Bytes>> {
    start_get(inner, core, key)?;
    core.tag
        .with_stored_key(key, |stored| inner.get_at(&view.state, view.seq, stored))
}

/// The values of `keys` in the keyspace `core` as `view` sees them, in
/// order, the tree's disk reads issued together.
pub(crate) fn multi_get_at<K: AsRef<[u8]>>(
    inner: &DbInner,
    view: &ReadView,
    core: &KeyspaceCore,
    keys: impl IntoIterator<Item = K>,
) -> Result<Vec<Option<Bytes>>> {
    core.check_live()?;
    let mut stored = Vec::new();
    for key in keys {
        let key = key.as_ref();
        validate_entry(key, None)?;
        stored.push(core.tag.stored_key(key));
    }
    let count = stored.len() as u64;
    inner.stats.gets.add(count);
    core.counts.gets.add(count);
    let stored: Vec<&[u8]> = stored.iter().map(|k| &k[..]).collect();
    inner.multi_get_at(&view.state, view.seq, &stored)
}

/// The first (`Forward`) or last pair of the keyspace `core` as `view`
/// sees it.
pub(crate) fn end_pair(
    inner: &Arc<DbInner>,
    view: ReadView,
    core: &KeyspaceCore,
    end: Direction,
) -> Result<Option<(Bytes, Bytes)>> {
    let mut all = range_in::<&[u8], _>(inner, view, core, ..);
    let pair = match end {
        Direction::Forward => all.next(),
        Direction::Reverse => all.next_back(),
    };
    pair.transpose()
}

/// Refuses a get of a dropped keyspace or of a bad key, and counts it.
fn start_get(inner: &DbInner, core: &KeyspaceCore, key: &[u8]) -> Result<()> {
    core.check_live()?;
    validate_entry(key, None)?;
    inner.stats.gets.add(1);
    core.counts.gets.add(1);
    Ok(())
}

/// A scan of `range` in the keyspace `core` as `view` sees it.
pub(crate) fn range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
    inner: &Arc<DbInner>,
    view: ReadView,
    core: &KeyspaceCore,
    range: R,
) -> Iter {
    let (lower, upper) = owned_bounds(&range);
    scan_in(inner, view, core, lower, upper)
}

/// A scan of the keys starting with `prefix` in the keyspace `core`.
pub(crate) fn prefix_in(
    inner: &Arc<DbInner>,
    view: ReadView,
    core: &KeyspaceCore,
    prefix: &[u8],
) -> Iter {
    let (lower, upper) = prefix_bounds(prefix);
    scan_in(inner, view, core, lower, upper)
}

/// A counted scan of the user-key range `(lower, upper)` of `core`.
fn scan_in(
    inner: &Arc<DbInner>,
    view: ReadView,
    core: &KeyspaceCore,
    lower: std::ops::Bound<Bytes>,
    upper: std::ops::Bound<Bytes>,
) -> Iter {
    bump(&inner.stats.scans, 1);
    core.counts.scans.add(1);
    Iter::in_keyspace(inner.clone(), view, core, lower, upper)
}

/// About how many keys the keyspace `core` holds as `view` sees it: the
/// tree's estimate for its key range (`Tree::approximate_items`) plus the
/// newest versions the MemTables hold in it, tombstones included.
pub(crate) fn approximate_len(view: &ReadView, core: &KeyspaceCore) -> Result<u64> {
    core.check_live()?;
    let (lower, upper) = core.tag.bounds(Bound::Unbounded, Bound::Unbounded);
    let lo = match &lower {
        Bound::Included(k) | Bound::Excluded(k) => &k[..],
        Bound::Unbounded => &[],
    };
    let hi = match &upper {
        Bound::Included(k) | Bound::Excluded(k) => Some(&k[..]),
        Bound::Unbounded => None,
    };
    let in_tree = match &view.state.tree {
        Some(tree) => tree.approximate_items((lo, hi))?,
        None => 0,
    };
    let in_memtables: u64 = view
        .state
        .memtables()
        .map(|m| memtable_keys(&**m, (&lower, &upper), view.seq))
        .sum();
    Ok(in_tree + in_memtables)
}

/// Keys a MemTable holds in `(lower, upper)` at `seq`.
fn memtable_keys(
    memtable: &dyn crate::memtable::MemTable,
    (lower, upper): (&Bound<Bytes>, &Bound<Bytes>),
    seq: u64,
) -> u64 {
    const BATCH: usize = 4096;
    fn as_ref(b: &Bound<Bytes>) -> Bound<&[u8]> {
        b.as_ref().map(|k| &k[..])
    }
    let mut resume = lower.clone();
    let mut batch = Vec::with_capacity(BATCH);
    let mut count = 0;
    loop {
        batch.clear();
        memtable.scan(
            as_ref(&resume),
            as_ref(upper),
            seq,
            Direction::Forward,
            BATCH,
            &mut batch,
        );
        count += batch.len() as u64;
        match batch.last() {
            Some((last, _)) if batch.len() == BATCH => resume = Bound::Excluded(last.clone()),
            _ => return count,
        }
    }
}
