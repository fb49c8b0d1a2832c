//! Point-in-time read views.

use std::ops::RangeBounds;
use std::sync::Arc;

use bytes::Bytes;

use crate::Result;
use crate::db::DbInner;
use crate::db::iter::Iter;
use crate::db::keyspace::{self, Keyspace};
use crate::memtable::Direction;
use crate::store::ReadView;

/// A frozen view of the database at the moment [`crate::Db::snapshot`] was
/// called. Later writes are invisible to it; it costs a reference count.
/// It keeps the database open until it is dropped: another `Db::open` of
/// the directory gets [`crate::Error::Locked`].
#[derive(Debug, Clone)]
pub struct Snapshot {
    view: ReadView,
    /// After the view, so that it is dropped after it: the last handle
    /// closes the database only once nothing pins its pages.
    db: Arc<DbInner>,
}

impl Snapshot {
    pub(crate) fn new(db: Arc<DbInner>, view: ReadView) -> Self {
        Snapshot { db, view }
    }

    /// The value of `key` at the snapshot's point in time.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let default = &self.db.keyspaces.default;
        keyspace::get_at(&self.db, &self.view, default, key.as_ref())
    }

    /// Iterates over a key range at the snapshot's point in time.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        let default = &self.db.keyspaces.default;
        keyspace::range_in(&self.db, self.view.clone(), default, range)
    }

    /// Iterates over the keys starting with `prefix` at the snapshot's point in time.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        let default = &self.db.keyspaces.default;
        keyspace::prefix_in(&self.db, self.view.clone(), default, prefix.as_ref())
    }

    /// Iterates over every key at the snapshot's point in time.
    pub fn iter(&self) -> Iter {
        self.range::<&[u8], _>(..)
    }

    /// Whether `key` has a value at the snapshot's point in time.
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.get(key)?.is_some())
    }

    /// The values of `keys` at the snapshot's point in time, in their
    /// order, their disk reads issued together (see [`crate::Db::multi_get`]).
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<Option<Bytes>>> {
        let default = &self.db.keyspaces.default;
        keyspace::multi_get_at(&self.db, &self.view, default, keys)
    }

    /// About how many keys the snapshot sees, cheaply (see
    /// [`crate::Db::approximate_len`]).
    pub fn approximate_len(&self) -> Result<u64> {
        keyspace::approximate_len(&self.view, &self.db.keyspaces.default)
    }

    /// The pair with the smallest key at the snapshot's point in time.
    pub fn first_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        let default = &self.db.keyspaces.default;
        keyspace::end_pair(&self.db, self.view.clone(), default, Direction::Forward)
    }

    /// The pair with the largest key at the snapshot's point in time.
    pub fn last_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        let default = &self.db.keyspaces.default;
        keyspace::end_pair(&self.db, self.view.clone(), default, Direction::Reverse)
    }

    /// The value of `key` in `keyspace` at the snapshot's point in time.
    /// A keyspace dropped since is [`crate::Error::KeyspaceDropped`].
    pub fn get_in(&self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.check_owner(keyspace)?;
        keyspace::get_at(&self.db, &self.view, keyspace.core(), key.as_ref())
    }

    /// Iterates over a key range of `keyspace` at the snapshot's point in
    /// time.
    pub fn range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        keyspace: &Keyspace,
        range: R,
    ) -> Iter {
        match self.check_owner(keyspace) {
            Ok(()) => keyspace::range_in(&self.db, self.view.clone(), keyspace.core(), range),
            Err(e) => Iter::failing(self.db.clone(), self.view.clone(), e),
        }
    }

    /// Iterates over the keys of `keyspace` starting with `prefix` at the
    /// snapshot's point in time.
    pub fn prefix_in(&self, keyspace: &Keyspace, prefix: impl AsRef<[u8]>) -> Iter {
        match self.check_owner(keyspace) {
            Ok(()) => keyspace::prefix_in(
                &self.db,
                self.view.clone(),
                keyspace.core(),
                prefix.as_ref(),
            ),
            Err(e) => Iter::failing(self.db.clone(), self.view.clone(), e),
        }
    }

    fn check_owner(&self, keyspace: &Keyspace) -> Result<()> {
        if !keyspace.belongs_to(&self.db) {
            return Err(crate::Error::ForeignKeyspace(keyspace.name().to_vec()));
        }
        Ok(())
    }

    /// Sequence number of the newest write the snapshot sees.
    pub fn sequence(&self) -> u64 {
        self.view.seq
    }
}
