//! Point-in-time read views.

use std::ops::RangeBounds;
use std::sync::Arc;

use bytes::Bytes;

use crate::Result;
use crate::db::DbInner;
use crate::db::iter::{Iter, owned_bounds, prefix_bounds};
use crate::options::validate_entry;
use crate::stats::bump;
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
        let key = key.as_ref();
        validate_entry(key, None)?;
        self.db.stats.gets.add(1);
        self.db.get_at(&self.view.state, self.view.seq, key)
    }

    /// Iterates over a key range at the snapshot's point in time.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        let (lower, upper) = owned_bounds(&range);
        bump(&self.db.stats.scans, 1);
        Iter::new(self.db.clone(), self.view.clone(), lower, upper)
    }

    /// Iterates over the keys starting with `prefix` at the snapshot's point in time.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        let (lower, upper) = prefix_bounds(prefix.as_ref());
        bump(&self.db.stats.scans, 1);
        Iter::new(self.db.clone(), self.view.clone(), lower, upper)
    }

    /// Sequence number of the newest write the snapshot sees.
    pub fn sequence(&self) -> u64 {
        self.view.seq
    }
}
